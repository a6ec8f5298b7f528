//! The transport's errors ([`TransportError`]) and [`Causes`], which
//! names an error's whole chain in a log line. Re-exported by
//! [`super::transport`].

use std::fmt;
use std::io;
use std::time::Duration;

/// Errors of the transport (not the API server's error answers, which are
/// responses with a status).
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("resolving {server}: {source}")]
    Resolve { server: String, source: io::Error },
    #[error("connecting to {server}: {source}")]
    Connect { server: String, source: io::Error },
    #[error("TLS handshake with {server}: {source}")]
    Tls { server: String, source: io::Error },
    #[error("HTTP handshake with {server}: {}", Causes(.source))]
    Handshake {
        server: String,
        source: hyper::Error,
    },
    /// A dial failed a moment ago and the next is not due yet. Its text
    /// is [`TransportError::Unreachable`]'s and stays the same for the
    /// whole outage, so a loop that logs a new error once logs it once.
    #[error("API server {server} unreachable")]
    BackingOff { server: String, wait: Duration },
    /// A dial failed again in an outage the transport has logged with its
    /// cause (see `link::OfflineLog`).
    #[error("API server {server} unreachable")]
    Unreachable { server: String },
    #[error("{what}: {}", Causes(.source))]
    Http { what: String, source: hyper::Error },
    #[error("{what}: reading the body: {}", Causes(.source))]
    Body { what: String, source: hyper::Error },
    #[error("{what}: no complete answer within {after:?}")]
    Timeout { what: String, after: Duration },
    #[error("{what}: body larger than {limit} bytes")]
    TooLarge { what: String, limit: usize },
    #[error("{what}: invalid request: {message}")]
    Invalid { what: String, message: String },
    #[error("{0}")]
    Credentials(String),
}

/// An error with its causes, e.g. `http2 error: keep-alive timed out`:
/// hyper's own message names only the kind of error, and a log line must
/// name the problem.
pub struct Causes<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for Causes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}
