//! The API-server client: from a kubeconfig to a crash-safe local copy of
//! the objects this node cares about.
//!
//! picolet runs on boards with bad uplinks, so the client is built around
//! one rule: the API server being unreachable is normal, and is never read
//! as "no objects". The pieces, bottom up:
//!
//! - [`kubeconfig`]: the kubeconfig file (current-context -> cluster and
//!   user), with file and inline `-data` credentials; refuses
//!   `insecure-skip-tls-verify` unless the caller explicitly allows it.
//! - [`tls`]: the rustls client configuration (the kubeconfig's CA, client
//!   certificate, ALPN `h2` then `http/1.1`).
//! - [`transport`]: the hyper client on our smol executor: one HTTP/2
//!   connection with keep-alive PINGs carries every request and watch, an
//!   HTTP/1.1 pool when ALPN does not give `h2`, a deadline on every request,
//!   bounded bodies; [`transport_error`]: its errors.
//! - [`link`]: what every loop on one connection shares: the last answer
//!   (which ends the back-offs of the loops that failed on the link), the
//!   dial back-off's bounds, the link's `/metrics`.
//! - [`request`]: pure: URL paths and query strings of list/watch requests,
//!   and the meaning of an error reply (`metav1.Status`, an HTML page from a
//!   proxy).
//! - [`watch`]: pure: newline-delimited JSON watch events from a byte stream.
//! - [`reflector`]: pure: the sans-I/O list/watch state machine shared by
//!   every resource (LIST pages or the streaming list, WATCH with bookmarks,
//!   resume, 410 Gone relist with deletions, jittered back-off ended early
//!   when the link answers again).
//! - [`cache`]: the on-disk copy of each resource's objects and sync point,
//!   written atomically and only on change, checksummed per entry.
//! - [`informer`]: the I/O loop of one resource: runs the reflector over
//!   the transport, writes changes to the cache, hands out events.
//! - [`pods`]: the pod source (pods bound to this node, from the cache at
//!   once, authoritative once synced); [`status_sync`]: the agent's status
//!   sink (status patches, mirror pods, the final DELETE);
//!   [`heartbeat`]: Node registration, status and Lease; [`node_watch`]:
//!   the watch of the node's own Node object (labels and taints for
//!   admission); [`join`]: starts them from `--kubeconfig`.
//! - [`configs`]: the ConfigMaps and Secrets the node's pods reference,
//!   each watched by name with its own cache (Secrets' 0700/0600), looked
//!   up by the agent through [`crate::pod::config_objects::ConfigObjects`].
//! - [`services`]: the Services of `default` and of the namespaces of the
//!   node's pods, one watch and cache per namespace, for the Service
//!   environment variables (`crate::pod::spec::Services`).
//! - [`events`]: pure: the event recorder (kubelet's deduplication with
//!   counts, token-bucket rate limit, bounded offline buffer);
//!   [`event_sync`]: its sending task, the agent's event sink.
//! - [`csr`] and [`der`]: pure: the TLS bootstrap's node key (ECDSA
//!   P-256 via ring), its PKCS#10 request for `system:node:<name>`, the
//!   issued certificate's validity and the jittered rotation deadline,
//!   written and read by a tiny DER codec; [`bootstrap`]: pure: the
//!   CertificateSigningRequest object, its status, the node kubeconfig;
//!   [`bootstrap_join`]: posting the CSR, waiting, writing the files, and
//!   renewing the certificate (`rotateCertificates`) when [`rotation`]
//!   (pure: kubelet's jittered deadline, back-off) says so.
//! - [`tokens`]: pure: the service-account token manager (when to send a
//!   TokenRequest, kubelet's 80 % / 24 h refresh rule, back-off, the
//!   request body and the two fields read from the reply);
//!   [`token_sync`]: its task (the TokenRequests, the 0600 token cache)
//!   and the agent's lookup of tokens, ConfigMaps and Secrets.
//! - [`node`], [`lease`], [`status_manager`], [`mirror`]: pure builders of
//!   what the node writes: its Node object and conditions, its heartbeat
//!   Lease, pod status patches and the queue keeping the latest status per
//!   pod, and the mirror pods of its static pods. [`lease_proto`]: the
//!   renewal's protobuf answer, read.
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
//! to do with [`reflector::Event`]s. The pure modules ([`request`],
//! [`watch`], [`reflector`], [`node`], [`node_csi`], [`node_events`], [`node_images`],
//! [`lease`], [`lease_proto`], [`status_manager`],
//! [`mirror`], [`events`], [`csr`], [`der`],
//! [`bootstrap`], [`tokens`], [`rotation`])
//! never import smol, hyper, rustls or `std::fs`;
//! time and randomness come in as arguments.

pub mod bootstrap;
pub mod bootstrap_join;
pub mod cache;
pub mod configs;
pub mod csr;
pub mod der;
pub mod event_sync;
pub mod events;
pub mod heartbeat;
pub mod informer;
pub mod join;
pub mod kubeconfig;
pub mod lease;
pub mod lease_proto;
pub mod link;
pub mod mirror;
pub mod node;
pub mod node_csi;
pub mod node_events;
pub mod node_images;
pub mod node_watch;
pub mod pods;
pub mod reflector;
mod reflector_backoff;
pub mod request;
pub mod rotation;
pub mod services;
pub mod status_manager;
pub mod status_sync;
pub mod tls;
pub mod token_sync;
pub mod tokens;
pub mod transport;
pub mod transport_error;
pub mod watch;

pub use informer::Informer;
pub use kubeconfig::{Kubeconfig, KubeconfigError};
pub use reflector::{Event, Input, Next, ObjectKey, Reflector, Request, Step};
