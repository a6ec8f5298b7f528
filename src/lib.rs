//! picolet: a kubelet for constrained edge hardware.
//!
//! The crate is a library plus a thin `main.rs`. Decisions (what to run, what
//! changed, what to kill) live in pure modules that take time as an argument;
//! the `agent` loop does the I/O on one `smol::LocalExecutor`. See
//! `src/ARCHITECTURE.md` for the map and the invariants.

pub mod admin;
pub mod agent;
#[cfg(feature = "apiserver")]
pub mod apiserver;
pub mod backoff;
pub mod cgroups;
pub mod check;
pub mod cli;
pub mod config;
pub mod cri;
pub mod decode;
pub mod gc;
#[cfg(feature = "hollow")]
pub mod hollow;
#[cfg(test)]
mod import_rules;
pub mod logger;
pub mod logs;
pub mod names;
pub mod net;
pub mod node;
#[cfg(feature = "node-api")]
pub mod nodeapi;
#[cfg(feature = "apiserver")]
pub mod pki;
pub mod pleg;
pub mod pod;
pub mod probe;
pub mod qos;
pub mod quantity;
pub mod rt;
pub mod source;
pub mod status;
