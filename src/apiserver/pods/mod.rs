//! The pods bound to this node, both ways: the API pod source
//! ([`source`]: a list/watch of `spec.nodeName`, cached crash-safe), and
//! what the node tells the cluster about its pods: status patches
//! ([`status_manager`] pure, with [`status_digest`] for what was sent;
//! [`status_sync`] the task and the agent's status sink), mirror pods of
//! static pods ([`mirror`]), and Events ([`events`] pure recorder,
//! [`event_sync`] the sending task).
//!
//! Must not know: the agent's internals; pods go in through `Source` and
//! come back through `StatusSink` and `EventSink`.

pub mod event_sync;
pub mod events;
pub mod mirror;
pub mod source;
pub mod status_digest;
pub mod status_manager;
pub mod status_sync;
