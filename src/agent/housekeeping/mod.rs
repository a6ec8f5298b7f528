//! Housekeeping: the loops that keep the node healthy around the pods
//! without running them: node-pressure eviction (`eviction.rs`, with
//! `eviction_usage.rs` and `memory_notify.rs`), image GC (`image_gc.rs`),
//! the GC of dead containers, log directories and cgroups (`container_gc.rs`) and
//! container log rotation (`logs.rs`).
//!
//! [`Housekeeping`] owns their state (the eviction manager and what its
//! passes saw, image use, the QoS shares last written) and the slice of
//! the configuration they read. What they need of the pods, the runtime
//! and the sources they ask through [`HousekeepingHost`], which the pod
//! workers implement (`pod_workers/housekeeping_host.rs`): they never
//! reach into the pod workers' state, and the pod workers never into
//! theirs (they call only the free helpers `remove_container` and
//! `remove_dir_logged`). Housekeeping knows neither the views nor the
//! wiring; the wiring runs its loops with the pod workers as the host.

use std::collections::HashSet;
use std::path::PathBuf;
use std::rc::Rc;

use k8s_openapi::api::core::v1::Pod;

use crate::agent::lifecycle::Evicted;
use crate::agent::{AgentConfig, EvictionConfig};
use crate::cgroups::PodCgroups;
use crate::cri::RuntimeService;
use crate::node::eviction::{Conditions, PressureCell, Signal};

mod container_gc;
mod eviction;
mod eviction_usage;
mod image_gc;
mod logs;
mod memory_notify;

pub(in crate::agent) use container_gc::{remove_container, remove_dir_logged};

/// What housekeeping asks of the rest of the agent: the pods as it needs
/// to see them, the few changes it makes to them (an eviction, a
/// readmission), the runtime, the pod cgroups and the sources' readiness.
pub(in crate::agent) trait HousekeepingHost {
    type Runtime: RuntimeService;

    /// The runtime to list, remove and reopen logs through.
    fn runtime(&self) -> &Self::Runtime;

    /// The pod cgroup hierarchy (`None`: pod cgroups are off).
    fn cgroups(&self) -> Option<&PodCgroups>;

    /// The node's size as node allocatable and `memory.available` need it.
    fn node_capacity(&self) -> NodeCapacity;

    /// The pods eviction may choose from: running or starting, not
    /// already evicted or being deleted.
    fn eviction_candidates(&self) -> Vec<Candidate>;

    /// A pod evicted after `after_unix` (seconds) has not stopped yet.
    fn evicted_pod_stopping(&self, after_unix: i64) -> bool;

    /// Evicts pod `uid` for `signal`: its event, its metric, its lifecycle,
    /// and a wake-up for its worker. Nothing when the pod is gone.
    fn evict(&self, uid: &str, eviction: Evicted, signal: Signal);

    /// Brings back evicted static (and critical) pods whose pressure
    /// ended under the conditions `now`.
    fn readmit_static_pods(&self, now: Conditions);

    /// The pods whose requests count towards the QoS cgroups' CPU shares.
    fn requesting_pods(&self) -> Vec<Rc<Pod>>;

    /// Each running container's ID and current log file.
    fn running_container_logs(&self) -> Vec<(String, PathBuf)>;

    /// The UIDs of the pods some source wants.
    fn wanted_pods(&self) -> HashSet<String>;

    /// The agent knows pod `uid` (wanted or not, until it is forgotten).
    fn knows_pod(&self, uid: &str) -> bool;

    /// Pod `uid`'s source is ready: what is left of it may be removed.
    fn may_remove(&self, uid: &str) -> bool;

    /// Every configured source is ready.
    fn all_sources_ready(&self) -> bool;

    /// `f` of the last relist's sandboxes and containers.
    fn with_relist<T>(
        &self,
        f: impl FnOnce(&[crate::gc::Sandbox], &[crate::gc::Container]) -> T,
    ) -> T;
}

/// The node's size, as housekeeping reads it from the host facts.
#[derive(Clone, Copy, Debug)]
pub(in crate::agent) struct NodeCapacity {
    /// CPUs in millicores (`None`: unknown).
    pub cpu_millis: Option<u64>,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// Allocatable memory as the Node reports it (`memory.available`'s
    /// allocatable-based observation; `None`: unknown).
    pub allocatable_memory_bytes: Option<u64>,
}

/// A pod eviction may choose.
pub(in crate::agent) struct Candidate {
    pub uid: String,
    pub pod: Rc<Pod>,
    /// Its cgroup (`""`: no pod cgroups).
    pub cgroup: String,
}

/// The configuration housekeeping reads.
struct Settings {
    eviction: EvictionConfig,
    root_dir: PathBuf,
    pod_logs_dir: PathBuf,
    cgroups_per_qos: bool,
    container_log_max_size: u64,
    container_log_max_files: u32,
}

/// The housekeeping loops' state, owned here alone.
pub(in crate::agent) struct Housekeeping {
    cfg: Settings,
    eviction: eviction::EvictionState,
    image_gc: std::cell::RefCell<image_gc::ImageGcState>,
}

impl Housekeeping {
    pub(in crate::agent) fn new(cfg: &AgentConfig) -> Housekeeping {
        Housekeeping {
            eviction: eviction::EvictionState::new(cfg),
            image_gc: Default::default(),
            cfg: Settings {
                eviction: cfg.eviction.clone(),
                root_dir: cfg.root_dir.clone(),
                pod_logs_dir: cfg.pod_logs_dir.clone(),
                cgroups_per_qos: cfg.cgroups_per_qos,
                container_log_max_size: cfg.container_log_max_size,
                container_log_max_files: cfg.container_log_max_files,
            },
        }
    }

    /// Where the node's stats are read (`/stats/summary` reads there too).
    pub(in crate::agent) fn stats_paths(&self) -> crate::node::stats::node::NodePaths {
        self.eviction.paths.borrow().clone()
    }

    /// The node's pressure conditions, kept current by the eviction task.
    pub(in crate::agent) fn pressure(&self) -> PressureCell {
        self.eviction.pressure.clone()
    }

    /// True once node allocatable is on the `kubepods` cgroup.
    pub(in crate::agent) fn allocatable_enforced(&self) -> Rc<std::cell::Cell<bool>> {
        self.eviction.allocatable_enforced.clone()
    }
}
