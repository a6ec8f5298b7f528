//! Which pod to evict first, as kubelet ranks them for each kind of
//! pressure:
//! - memory: pods whose working set exceeds their memory request first,
//!   then by priority (lowest first), then by how far usage is above the
//!   request (most first);
//! - disk: the same with local ephemeral usage (emptyDir, logs, writable
//!   layer, split by filesystem as [`disk_parts`] says) against the
//!   ephemeral-storage request;
//! - PIDs: by priority, then by process count (most first).
//!
//! Usage is what each pod's cgroup says when the ranking is asked for: the
//! agent reads it right before calling [`rank`]. A pod whose cgroup does
//! not exist yet uses nothing and ranks by its request and priority like
//! any other: a pod is never evicted because it was not yet measured (on a
//! node already under pressure at start-up, kubelet's "unmeasured first"
//! evicted a Guaranteed pod within its request before a BestEffort hog).
//!
//! picolet evicts static and critical pods too (kubelet refuses), but only
//! after every other pod: a board may have nothing else to give back, and
//! an evicted static pod comes back when the pressure ends.

use std::cmp::Reverse;

use super::signal::{Condition, Signal};

/// One pod as ranking sees it, with the usage its cgroup reported at
/// ranking time (0 for a cgroup that does not exist yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodUsage {
    pub uid: String,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
    /// Static, or at a system-critical priority.
    pub critical: bool,
    pub memory_request: u64,
    pub memory_working_set: u64,
    pub ephemeral_request: u64,
    pub ephemeral_usage: u64,
    pub processes: u64,
}

/// Usage above the request: negative when below it.
fn above(usage: u64, request: u64) -> i128 {
    i128::from(usage) - i128::from(request)
}

/// Sorts `pods` so that the first is the one to evict for `signal`. The
/// sort is stable: pods that rank equal keep their order.
pub fn rank(signal: Signal, pods: &mut [PodUsage]) {
    match signal.condition() {
        // Unlike kubelet's `exceedMemoryRequests` (pods without stats
        // first), every pod ranks by what it uses: the agent measures
        // right before ranking, so a pod just started whose memory is the
        // pressure is measured too, and one with no cgroup yet uses nothing.
        Condition::MemoryPressure => pods.sort_by_key(|p| {
            let over = above(p.memory_working_set, p.memory_request);
            (p.critical, over <= 0, p.priority, Reverse(over))
        }),
        Condition::DiskPressure => pods.sort_by_key(|p| {
            let over = above(p.ephemeral_usage, p.ephemeral_request);
            (p.critical, over <= 0, p.priority, Reverse(over))
        }),
        Condition::PIDPressure => {
            pods.sort_by_key(|p| (p.critical, p.priority, Reverse(p.processes)))
        }
    }
}

/// Which parts of a pod's local ephemeral storage count for a disk signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskParts {
    /// emptyDir volumes (the pod's directory) and container logs: nodefs.
    pub volumes_and_logs: bool,
    /// The containers' writable layers: where the runtime keeps them.
    pub writable_layer: bool,
}

/// kubelet's choice: with a dedicated imagefs, nodefs signals rank by
/// volumes and logs only and imagefs (and containerfs) signals by the
/// writable layers only; on one filesystem, every signal counts all three.
pub fn disk_parts(signal: Signal, separate_imagefs: bool) -> DiskParts {
    let image_side = matches!(
        signal,
        Signal::ImageFsAvailable
            | Signal::ImageFsInodesFree
            | Signal::ContainerFsAvailable
            | Signal::ContainerFsInodesFree
    );
    DiskParts {
        volumes_and_logs: !separate_imagefs || !image_side,
        writable_layer: !separate_imagefs || image_side,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: u64 = 1 << 20;

    fn pod(uid: &str, priority: i32, request: u64, usage: u64) -> PodUsage {
        PodUsage {
            uid: uid.into(),
            priority,
            critical: false,
            memory_request: request,
            memory_working_set: usage,
            ephemeral_request: request,
            ephemeral_usage: usage,
            processes: usage / MI,
        }
    }

    fn order(signal: Signal, mut pods: Vec<PodUsage>) -> Vec<String> {
        rank(signal, &mut pods);
        pods.into_iter().map(|p| p.uid).collect()
    }

    #[test]
    fn memory_ranks_usage_above_requests_then_priority_then_excess() {
        let table: [(&str, Vec<PodUsage>, &[&str]); 5] = [
            (
                "a BestEffort pod using memory goes before a Guaranteed pod within its request",
                vec![
                    pod("guaranteed", 0, 100 * MI, 90 * MI),
                    pod("besteffort", 0, 0, 10 * MI),
                ],
                &["besteffort", "guaranteed"],
            ),
            (
                "a pod whose cgroup does not exist yet ranks as using nothing, after pods above their requests",
                vec![
                    pod("starting", 0, 0, 0),
                    pod("guaranteed", 0, 100 * MI, 90 * MI),
                    pod("hog", 0, 0, 600 * MI),
                ],
                &["hog", "starting", "guaranteed"],
            ),
            (
                "among pods above their requests, the lower priority goes first",
                vec![
                    pod("high", 1000, 0, 500 * MI),
                    pod("low", 0, 0, 10 * MI),
                ],
                &["low", "high"],
            ),
            (
                "at one priority, the pod furthest above its request goes first",
                vec![
                    pod("a", 0, 50 * MI, 60 * MI),
                    pod("b", 0, 0, 40 * MI),
                    pod("c", 0, 10 * MI, 100 * MI),
                ],
                &["c", "b", "a"],
            ),
            (
                "pods within their requests rank by priority, then by usage minus request",
                vec![
                    pod("x", 10, 100 * MI, 10 * MI),
                    pod("y", 0, 100 * MI, 10 * MI),
                    pod("z", 0, 100 * MI, 90 * MI),
                ],
                &["z", "y", "x"],
            ),
        ];
        for (what, pods, want) in table {
            assert_eq!(order(Signal::MemoryAvailable, pods), want, "{what}");
        }
    }

    #[test]
    fn a_besteffort_hog_goes_before_a_guaranteed_pod_within_its_request_even_when_the_guaranteed_pod_just_started(
    ) {
        // Start-up under pressure: the Guaranteed pod's cgroup reads a little
        // (or nothing yet), the hog's a lot; the hog goes.
        for guaranteed_usage in [0, MI, 99 * MI] {
            let pods = vec![
                pod("guaranteed", 0, 100 * MI, guaranteed_usage),
                pod("hog", 0, 0, 400 * MI),
            ];
            assert_eq!(
                order(Signal::MemoryAvailable, pods)[0],
                "hog",
                "guaranteed at {guaranteed_usage}"
            );
        }
    }

    #[test]
    fn critical_and_static_pods_are_evicted_last() {
        let mut critical = pod("static", -10, 0, 900 * MI);
        critical.critical = true;
        let pods = vec![critical, pod("guaranteed", 100, 100 * MI, MI)];
        for signal in [
            Signal::MemoryAvailable,
            Signal::NodeFsAvailable,
            Signal::PidAvailable,
        ] {
            assert_eq!(
                order(signal, pods.clone()),
                ["guaranteed", "static"],
                "{signal:?}"
            );
        }
    }

    #[test]
    fn disk_ranks_by_local_ephemeral_usage_against_its_request() {
        let pods = vec![
            pod("small", 0, 0, MI),
            pod("requested", 0, 500 * MI, 400 * MI),
            pod("writer", 0, 0, 300 * MI),
        ];
        assert_eq!(
            order(Signal::NodeFsAvailable, pods),
            ["writer", "small", "requested"]
        );
    }

    #[test]
    fn a_dedicated_imagefs_splits_the_writable_layer_from_volumes_and_logs() {
        let all = DiskParts {
            volumes_and_logs: true,
            writable_layer: true,
        };
        let nodefs_side = DiskParts {
            writable_layer: false,
            ..all
        };
        let image_side = DiskParts {
            volumes_and_logs: false,
            ..all
        };
        let table = [
            (Signal::NodeFsAvailable, false, all),
            (Signal::ImageFsAvailable, false, all),
            (Signal::NodeFsInodesFree, false, all),
            (Signal::NodeFsAvailable, true, nodefs_side),
            (Signal::NodeFsInodesFree, true, nodefs_side),
            (Signal::ImageFsAvailable, true, image_side),
            (Signal::ImageFsInodesFree, true, image_side),
            (Signal::ContainerFsAvailable, true, image_side),
        ];
        for (signal, separate, want) in table {
            assert_eq!(disk_parts(signal, separate), want, "{signal:?} {separate}");
        }
    }

    #[test]
    fn pid_pressure_ranks_by_priority_then_process_count() {
        let pods = vec![
            pod("many-high", 100, 0, 900 * MI),
            pod("few", 0, 0, 2 * MI),
            pod("many", 0, 0, 50 * MI),
        ];
        assert_eq!(
            order(Signal::PidAvailable, pods),
            ["many", "few", "many-high"]
        );
    }
}
