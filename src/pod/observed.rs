//! What the runtime holds for one pod, as the agent observed it: sandboxes
//! and containers with their state, newest first.
//!
//! The agent builds an [`ObservedPod`] from CRI answers (see
//! `agent::pod_workers::observe`); [`super::plan`], [`crate::status`] and
//! the probes read it. Plain data plus ordering helpers: it knows nothing
//! of CRI messages, of the runtime client or of time.

use crate::pleg::State;

/// A sandbox as the runtime reported it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObservedSandbox {
    pub id: String,
    pub attempt: u32,
    pub ready: bool,
    /// Unix nanoseconds.
    pub created_at: i64,
    pub ip: String,
    pub additional_ips: Vec<String>,
}

/// A container as the runtime reported it (ListContainers + ContainerStatus).
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedContainer {
    pub id: String,
    pub sandbox_id: String,
    pub name: String,
    pub attempt: u32,
    pub state: State,
    pub exit_code: i32,
    /// Unix nanoseconds; 0 when unknown.
    pub created_at: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub reason: String,
    pub message: String,
    /// `io.kubernetes.container.hash` as the container was created with.
    pub hash: String,
    /// The image as the runtime resolved it (CRI `ContainerStatus.image`,
    /// else the listed container's): `docker.io/library/busybox:latest`
    /// for a pod that asked for `busybox`.
    pub image: String,
    pub image_ref: String,
    /// The CPU and memory the runtime says the container has (CRI
    /// `ContainerStatus.resources`), in kubelet's units; `None` when it
    /// said nothing.
    pub resources: Option<RuntimeResources>,
}

/// A container's resources as the runtime reports them, converted as
/// kubelet's `toKubeContainerResources` does: each `None` when the runtime
/// gave no usable value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuntimeResources {
    /// From the CFS quota over its period.
    pub cpu_limit_millis: Option<i64>,
    /// From the CPU shares.
    pub cpu_request_millis: Option<i64>,
    pub memory_limit_bytes: Option<i64>,
}

/// kubelet's `MinShares`: the CPU shares of a container without a request.
const MIN_SHARES: i64 = 2;

impl RuntimeResources {
    /// The runtime's numbers (CRI `LinuxContainerResources`) in kubelet's
    /// units (its `toKubeContainerResources`): the CPU limit from quota and
    /// period, the CPU request from shares (rounded up, as kubelet's
    /// `SharesToMilliCPU`), the memory limit; `None` when none of the three
    /// is there.
    pub fn from_runtime(
        cpu_period: i64,
        cpu_quota: i64,
        cpu_shares: i64,
        memory_limit_bytes: i64,
    ) -> Option<RuntimeResources> {
        let positive = |v: i64| (v > 0).then_some(v);
        let cpu_limit_millis = (cpu_period > 0 && cpu_quota != -1)
            .then(|| cpu_quota.saturating_mul(1000) / cpu_period)
            .and_then(positive);
        let cpu_request_millis = (cpu_shares >= MIN_SHARES)
            .then(|| (cpu_shares.saturating_mul(1000) + 1023) / 1024)
            .and_then(positive);
        let r = RuntimeResources {
            cpu_limit_millis,
            cpu_request_millis,
            memory_limit_bytes: positive(memory_limit_bytes),
        };
        (r != RuntimeResources::default()).then_some(r)
    }
}

impl Default for ObservedContainer {
    fn default() -> Self {
        ObservedContainer {
            id: String::new(),
            sandbox_id: String::new(),
            name: String::new(),
            attempt: 0,
            state: State::Unknown,
            exit_code: 0,
            created_at: 0,
            started_at: 0,
            finished_at: 0,
            reason: String::new(),
            message: String::new(),
            hash: String::new(),
            image: String::new(),
            image_ref: String::new(),
            resources: None,
        }
    }
}

/// Everything the runtime holds for one pod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObservedPod {
    /// Newest first (highest attempt, then latest creation).
    pub sandboxes: Vec<ObservedSandbox>,
    /// Newest first per name.
    pub containers: Vec<ObservedContainer>,
}

impl ObservedPod {
    /// Sorts sandboxes and containers newest first.
    pub fn normalize(&mut self) {
        self.sandboxes
            .sort_by_key(|c| std::cmp::Reverse((c.attempt, c.created_at)));
        self.containers
            .sort_by_key(|c| std::cmp::Reverse((c.attempt, c.created_at)));
    }

    /// The newest sandbox.
    pub fn latest_sandbox(&self) -> Option<&ObservedSandbox> {
        self.sandboxes.first()
    }

    /// The newest container with this name.
    pub fn latest(&self, name: &str) -> Option<&ObservedContainer> {
        self.containers.iter().find(|c| c.name == name)
    }

    /// Every container still running (or in an unknown state, which must be
    /// stopped to be sure).
    pub fn running(&self) -> impl Iterator<Item = &ObservedContainer> {
        self.containers
            .iter()
            .filter(|c| matches!(c.state, State::Running | State::Unknown))
    }

    /// True when a sandbox is ready or a container is running.
    pub fn is_active(&self) -> bool {
        self.sandboxes.iter().any(|s| s.ready) || self.running().next().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_resources_are_read_in_kubelets_units() {
        assert_eq!(
            RuntimeResources::from_runtime(100_000, 50_000, 102, 128 << 20),
            Some(RuntimeResources {
                cpu_limit_millis: Some(500),
                cpu_request_millis: Some(100),
                memory_limit_bytes: Some(128 << 20),
            })
        );
        // No quota (-1), the least shares, no memory limit.
        assert_eq!(
            RuntimeResources::from_runtime(100_000, -1, 2, 0),
            Some(RuntimeResources {
                cpu_request_millis: Some(2),
                ..Default::default()
            })
        );
        assert_eq!(RuntimeResources::from_runtime(0, 0, 0, 0), None);
    }
}
