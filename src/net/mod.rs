//! The network layer: dialing with deadlines, URLs, an HTTP/1.1 client with
//! bounded reads, and TLS set-up.
//!
//! Shared by the probes and lifecycle hooks (`crate::probe`), the admin
//! client (`crate::admin`), and later by the API-server client and the node
//! API. Each of those brings its own policy (which headers, which redirects
//! to follow, which status codes count, how TLS is verified); this module
//! only moves bytes correctly and within bounds.
//!
//! It must NOT know pods, probes, containers or the agent: no
//! `k8s_openapi` types and no kubelet policy live here. Messages read like
//! Go's `net` and `net/http` (`dial tcp ADDR: ERR`), because callers embed
//! them in kubelet-style messages.
//!
//! - [`url`]: `scheme://host:port/path`, `Location` resolution, percent
//!   encoding of request targets (pure).
//! - [`dial`]: TCP connections to IP literals and `localhost`, with a
//!   deadline. Names are not resolved: `getaddrinfo` blocks, and the agent
//!   has one thread (a resolver would come here, off that thread).
//! - [`http1`]: one HTTP/1.1 exchange on any byte stream (TCP, TLS, a unix
//!   socket) through hyper: request writing, response parsing, chunked
//!   decoding, and a cap on how much of the body is read.
//! - [`upgrade`]: an upgraded connection (SPDY, WebSocket) relayed byte
//!   for byte to an upstream URL (exec, attach, portForward).
//! - [`probe_tls`]: the client configurations. Today only kubelet's
//!   `InsecureSkipVerify` for probes and hooks (cargo feature
//!   `https-probes`); a verifying set-up for the API server belongs here
//!   too, beside it, sharing the crypto provider.
//!
//! Everything runs on the caller's executor (`crate::rt`); nothing here
//! spawns a thread.

pub mod dial;
pub mod http1;
pub mod probe_tls;
pub mod upgrade;
pub mod url;

use smol::io::{AsyncRead, AsyncWrite};

/// A byte stream HTTP can be spoken on: TCP, TLS over TCP, a unix socket.
pub trait Stream: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Stream for T {}

/// A stream of any kind, boxed so that one HTTP client instance serves all
/// of them (one copy of hyper's client code in the binary).
pub type BoxStream = Box<dyn Stream>;
