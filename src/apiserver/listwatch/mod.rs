//! List/watch, one design for every resource: the pure state machine
//! ([`reflector`], its back-off in [`reflector_backoff`], what it holds of
//! an object in [`reflector_objects`], its inputs and answers in
//! [`reflector_protocol`]), the decoders of LIST and WATCH replies
//! ([`watch`]; a watch in protobuf, for a type with a protobuf reader,
//! [`watch_proto`]), the crash-safe on-disk copy of each resource ([`disk_cache`]),
//! and the I/O loop running them over the client ([`informer`]).
//!
//! Must not know: what a resource means to the node (pods, ConfigMaps,
//! the Node); consumers get [`reflector::Event`]s.

pub mod disk_cache;
pub mod informer;
pub mod reflector;
pub mod reflector_backoff;
pub mod reflector_objects;
pub mod reflector_protocol;
pub mod watch;
pub mod watch_proto;
