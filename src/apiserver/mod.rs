//! The API-server client: from a kubeconfig to a crash-safe local copy of
//! the objects this node cares about, and back up to the cluster with what
//! the node reports.
//!
//! picolet runs on boards with bad uplinks, so the client is built around
//! one rule: the API server being unreachable is normal, and is never read
//! as "no objects". Five subsystems, bottom up, each a folder:
//!
//! - [`client`]: the kubeconfig, the rustls configuration, the hyper
//!   transport on our executor (one HTTP/2 connection with keep-alive PINGs
//!   carries every request and watch; HTTP/1.1 when ALPN gives no `h2`),
//!   the shared [`client::link`] (last contact, dial back-off, link
//!   metrics) and the pure wire shape of requests and error replies.
//! - [`listwatch`]: the pure list/watch state machine every resource shares
//!   ([`listwatch::reflector`]), the watch-stream decoder, the crash-safe
//!   on-disk cache and the [`Informer`] that runs them over the client.
//! - [`presence`]: the node in the cluster: its Node object and conditions,
//!   its Lease, the heartbeat task writing both, Node events, the image list,
//!   the CSINode, and the watch of the node's own Node object.
//! - [`pods`]: the pods bound to this node as a pod source, and what the
//!   node tells the cluster about them: status patches, mirror pods of its
//!   static pods, the final DELETE, and Events.
//! - [`referenced`]: what the node's pods reference: ConfigMaps and
//!   Secrets (each watched by name), the Services of their namespaces, and
//!   service-account tokens.
//!
//! Beside them, [`credentials`] gets the node its client certificate
//! (TLS bootstrap through a CertificateSigningRequest) and keeps it renewed,
//! over [`crate::pki`]'s key, request and validity code, which the node API
//! shares; and [`join`] is where `--kubeconfig` becomes the running pieces.
//!
//! # Build
//!
//! The client needs TLS, so it is behind the default cargo feature
//! `apiserver`, which enables rustls (with ring), futures-rustls and
//! rustls-webpki (the crates `https-probes` uses, linked once for both),
//! plus base64 and fastrand, which other dependencies already link.
//! Measured on aarch64-unknown-linux-musl with every part called from
//! `main`: +448 KiB stripped.
//!
//! # What this module must NOT know
//!
//! Nothing here knows about pods being run, the agent, the runtime or the
//! pod sources: the agent (or a source built on this module) decides what
//! to do with [`listwatch::reflector::Event`]s. The pure modules (listed in
//! `src/ARCHITECTURE.md`'s Layers table and checked by its test) never
//! import smol, hyper, rustls or `std::fs`; time and randomness come in as
//! arguments.

pub mod client;
pub mod credentials;
pub mod join;
pub mod listwatch;
pub mod pods;
pub mod presence;
pub mod referenced;

pub use client::kubeconfig::{Kubeconfig, KubeconfigError};
pub use listwatch::informer::Informer;
pub use listwatch::reflector::{Event, Input, Next, ObjectKey, Reflector, Request, Step};
