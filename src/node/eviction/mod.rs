//! Node-pressure eviction as kubelet's eviction manager decides it, pure:
//! which signals the kernel's numbers give ([`signal`]), which thresholds
//! are met and for how long ([`threshold`]), which pod goes first
//! ([`rank`]), and the manager's state across passes ([`manager`]): pressure
//! conditions with their transition period, soft grace periods, minimum
//! reclaim, and at most one pod per pass.
//!
//! Must not know the runtime, the executor, the agent or the clock: the
//! agent reads [`crate::node::stats`], hands the numbers and `now` to
//! [`manager::Manager::step`], reclaims and kills, and measures again.

pub mod manager;
pub mod rank;
pub mod signal;
pub mod threshold;

pub use manager::{Decision, Manager};
pub use rank::{disk_parts, rank, DiskParts, PodUsage};
pub use signal::{
    observe, reads_for, Condition, Conditions, Observation, Observations, PressureCell, Signal,
};
pub use threshold::{Threshold, ThresholdError};
