//! The admin socket: a tiny HTTP/1.1 API on a unix socket, for operators
//! on the board and for the CLI (`picolet get pods`, `logs`, `exec`,
//! `describe`), which works with no API server.
//!
//! - [`server`]: binds the socket `0600` and serves it with connection
//!   limits and timeouts; [`Handlers`] are the admin routes (`/healthz`,
//!   `/pods`, `/metrics`, ...), built from a [`Host`] ([`host`]: the one
//!   narrow trait through which the servers see the node, implemented by
//!   the agent's wiring).
//! - [`router`]: method + path → handler, 404 and 405, shared with the
//!   node API's server (`crate::nodeapi::server`), which serves the same
//!   routes behind authentication.
//!
//! The CLI's side of the socket (its client, tables, `describe` text,
//! `-o yaml`) is `crate::cli`'s.
//!
//! This module must NOT know the agent's internals: it sees pods only as
//! the v1 `PodList` a [`Host`] returns, and metrics as text.

pub mod host;
pub mod router;
pub mod server;

use std::fmt;
use std::io;
use std::path::PathBuf;

pub use host::Host;
pub use router::{Reply, Router, StreamFn, UpgradeFn};
pub use server::{
    bind, finish, serve, serve_listener, serve_router, waiting_router, Handlers, MetricsFn, PodsFn,
    CONNECTION_TIMEOUT, HEADER_TIMEOUT, MAX_CONNECTIONS,
};

/// The admin socket server's errors. `Debug` prints the message, like
/// `Display`: a derived one costs half a KiB of binary and says less.
#[derive(thiserror::Error)]
pub enum AdminError {
    #[error("{} exists and is not a socket; refusing to replace it", path.display())]
    NotASocket { path: PathBuf },
    #[error("{} is in use: another picolet is serving it", path.display())]
    InUse { path: PathBuf },
    #[error("creating admin socket {}: {source}", path.display())]
    Bind { path: PathBuf, source: io::Error },
    #[error("accepting on admin socket {}: {source}", path.display())]
    Accept { path: PathBuf, source: io::Error },
}

impl fmt::Debug for AdminError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
