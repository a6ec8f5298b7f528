//! The node API: kubelet's HTTPS server on `address:port` (default
//! `0.0.0.0:10250`), through which the API server (`kubectl get --raw
//! /api/v1/nodes/<node>/proxy/...`, and later logs and exec) and scrapers
//! reach the node, and the plain `/healthz` on
//! `healthzBindAddress:healthzPort` (default `127.0.0.1:10248`).
//!
//! - [`authn`] (pure): the user of a client certificate (CN, O groups),
//!   the bearer token, the TokenReview body and answer;
//! - [`authz`] (pure): kubelet's request → `nodes/<subresource>` mapping,
//!   the SubjectAccessReview body and answer, the 403 text;
//! - [`review_cache`] (pure): the review answers' time-bounded cache;
//! - [`cert`] (pure): the self-signed serving certificate;
//! - [`serving`] (pure): `serverTLSBootstrap`'s decisions (which
//!   certificate to serve, the CSR's names, the issued files' names);
//! - [`serving_bootstrap`]: the serving certificate's CSR, its files and
//!   its renewal, swapped into the running listener;
//! - [`serving_tls`]: the rustls server configuration (serving certificate files,
//!   the client CA), reading and writing files;
//! - [`server`]: the listeners, the TLS handshake, the authentication and
//!   authorization of each request (reviews through the API-server client)
//!   and the answer from the shared [`Router`].
//!
//! The routes are the admin socket's ([`crate::admin::Handlers::router`]):
//! one table, mounted on both. A route registered there is served here
//! too, behind authentication and authorization. `/configz` (the
//! configuration in effect) is added here: kubelet serves it on this port
//! only.
//!
//! This module must NOT know the agent: it serves a [`Router`], and asks
//! the API server through [`crate::apiserver::client::transport::Client`] only.
//! Anonymous requests are always refused (401); there is no read-only
//! port.

pub mod authn;
pub mod authz;
pub mod cert;
pub mod review_cache;
pub mod server;
pub mod serving;
pub mod serving_bootstrap;
pub mod serving_tls;

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

pub use server::start;

/// Why the node API cannot start; each names the file, field or address.
#[derive(Debug, thiserror::Error)]
pub enum NodeApiError {
    #[error("{field} {}: {source}", path.display())]
    File {
        field: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{field} {}: {message}", path.display())]
    Pem {
        field: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("{field}: {source}")]
    Rustls {
        field: &'static str,
        source: futures_rustls::rustls::Error,
    },
    #[error("the self-signed serving certificate: {0}")]
    SelfSigned(#[from] crate::pki::csr::CsrError),
    #[error("listening on {addr} ({field}): {source}")]
    Bind {
        field: &'static str,
        addr: SocketAddr,
        source: io::Error,
    },
}
