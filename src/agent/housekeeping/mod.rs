//! Housekeeping: the loops that keep the node healthy around the pods
//! without running them: node-pressure eviction (`eviction.rs`, with
//! `eviction_usage.rs` and `memory_notify.rs`), image GC (`image_gc.rs`),
//! the GC of dead containers, log directories and cgroups (`gc.rs`) and
//! container log rotation (`logs.rs`).

pub(in crate::agent) mod eviction;
#[cfg(test)]
mod eviction_tests;
mod eviction_usage;
pub(in crate::agent) mod gc;
pub(in crate::agent) mod image_gc;
mod logs;
mod memory_notify;
