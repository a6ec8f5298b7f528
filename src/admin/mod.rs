//! The admin socket: a tiny HTTP/1.1 API on a unix socket, its client, and
//! the `kubectl get pods`-style table the CLI prints.
//!
//! picolet reports to no API server yet, so operators ask the agent
//! directly: `picolet get pods` connects to the socket (default
//! `/run/picolet/picolet.sock`, `--admin-socket`) and reads `GET /pods`.
//!
//! - [`server`]: binds the socket `0600` and serves it with connection
//!   limits and timeouts; [`Handlers`] are the admin routes (`/healthz`,
//!   `/pods`, `/metrics`) that the agent registers.
//! - [`router`]: method + path → handler, 404 and 405; the node API is meant
//!   to reuse it.
//! - [`client`]: the CLI side, on `crate::net`'s HTTP/1.1 client.
//! - [`exec_client`]: `picolet exec`'s SPDY session on `/exec/...`, framed
//!   by [`spdy`] (pure).
//! - [`table`]: `kubectl get pods` columns and ages (pure).
//! - [`describe`]: `kubectl describe pod`'s text (pure).
//! - [`term`]: colours and widths on a terminal; [`yaml`]: `-o yaml`.
//!
//! This module must NOT know the agent's internals: it sees pods only as
//! the v1 `PodList` a [`Handlers`] callback returns, and metrics as text.

pub mod client;
pub mod describe;
pub mod exec_client;
pub mod router;
pub mod server;
pub mod spdy;
pub mod table;
pub mod term;
pub mod yaml;

use std::fmt;
use std::io;
use std::path::PathBuf;

pub use client::{get, log_container, select_pods, stream};
pub use router::{Reply, Router, StreamFn, UpgradeFn};
pub use server::{
    bind, finish, serve, serve_listener, serve_router, waiting_router, Handlers, MetricsFn, PodsFn,
    CONNECTION_TIMEOUT, HEADER_TIMEOUT, MAX_CONNECTIONS,
};
pub use table::{human_duration, node_table, pod_row, pods_table, PodColumns};
pub use term::Style;

/// The admin socket's and its client's errors. `Debug` prints the message,
/// like `Display`: a derived one costs half a KiB of binary and says less.
#[derive(thiserror::Error)]
pub enum AdminError {
    #[error("cannot connect to {}: {source}{}", path.display(), connect_hint(source))]
    Connect { path: PathBuf, source: io::Error },
    /// The agent refused the request, or the command of an exec session
    /// could not run: its message alone, as kubectl prints it.
    #[error("{0}")]
    Refused(String),
    #[error("admin socket {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// The request failed (printed in full, not chained as a source).
    #[error("admin socket {}: {error}", path.display())]
    Request {
        path: PathBuf,
        error: crate::net::http1::Http1Error,
    },
    #[error("admin socket {}: malformed HTTP response: {what}", path.display())]
    Protocol { path: PathBuf, what: String },
    #[error("{} exists and is not a socket; refusing to replace it", path.display())]
    NotASocket { path: PathBuf },
    #[error("{} is in use: another picolet is serving it", path.display())]
    InUse { path: PathBuf },
    #[error("creating admin socket {}: {source}", path.display())]
    Bind { path: PathBuf, source: io::Error },
    #[error("accepting on admin socket {}: {source}", path.display())]
    Accept { path: PathBuf, source: io::Error },
}

/// What to do about a failed connect to the admin socket.
fn connect_hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::PermissionDenied => {
            "; the admin socket is root-only (mode 0600): run this as root (sudo)"
        }
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
            "; is picolet running? (--admin-socket or PICOLET_ADMIN_SOCKET name another socket)"
        }
        _ => "",
    }
}

impl fmt::Debug for AdminError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(kind: io::ErrorKind) -> String {
        AdminError::Connect {
            path: PathBuf::from("/run/picolet/picolet.sock"),
            source: io::Error::from(kind),
        }
        .to_string()
    }

    #[test]
    fn a_refused_connect_says_why_and_what_to_do() {
        let denied = connect(io::ErrorKind::PermissionDenied);
        assert!(
            denied.starts_with("cannot connect to /run/picolet/picolet.sock: permission denied"),
            "{denied}"
        );
        assert!(
            denied.ends_with("root-only (mode 0600): run this as root (sudo)"),
            "{denied}"
        );
        let missing = connect(io::ErrorKind::NotFound);
        assert!(missing.contains("is picolet running?"), "{missing}");
        assert!(missing.contains("PICOLET_ADMIN_SOCKET"), "{missing}");
    }
}
