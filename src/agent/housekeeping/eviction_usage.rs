//! What eviction ranks pods by, read from the kernel right before the
//! pure ranking ([`crate::node::eviction::rank`]) is called: each pod's
//! memory working set, process count or local ephemeral usage, from its
//! cgroup and its directories. A pod whose cgroup does not exist yet (just
//! admitted, its sandbox not created) uses nothing: it is never evicted
//! because it was not measured.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::PodSpec;

use super::{Candidate, Housekeeping};
use crate::node::eviction::{self, Condition, PodUsage};
use crate::node::stats::{self, Buf, StatsError};
use crate::pod::{accessors, facts};
use crate::qos;

impl Housekeeping {
    /// The `candidates` eviction may choose from, with the usage
    /// `signal`'s ranking needs.
    pub(in crate::agent) fn pod_usages(
        &self,
        candidates: &[Candidate],
        signal: eviction::Signal,
    ) -> Vec<PodUsage> {
        let condition = signal.condition();
        let parts = eviction::disk_parts(signal, self.eviction.separate_imagefs.get());
        let paths = self.eviction.paths.borrow();
        let mut buf = self.eviction.buf.borrow_mut();
        candidates
            .iter()
            .map(|Candidate { uid, pod, cgroup }| {
                let spec = accessors::spec(pod);
                let cg = |controller| {
                    (!cgroup.is_empty()).then(|| {
                        stats::cgroup_dir(&paths.cgroup_mount, paths.version, controller, cgroup)
                    })
                };
                let mut u = PodUsage {
                    uid: uid.clone(),
                    priority: spec.priority.unwrap_or(0),
                    critical: facts::is_critical(pod),
                    memory_request: qos::pod_resources(spec).memory_request_bytes,
                    memory_working_set: 0,
                    ephemeral_request: ephemeral_request(spec),
                    ephemeral_usage: 0,
                    processes: 0,
                };
                match condition {
                    Condition::MemoryPressure => {
                        u.memory_working_set = cg("memory").map_or(0, |d| {
                            measured(
                                uid,
                                stats::memory::read(&d, paths.version, &mut buf)
                                    .map(|m| m.working_set),
                            )
                        });
                    }
                    Condition::PIDPressure => {
                        u.processes = cg("pids").map_or(0, |d| {
                            measured(uid, stats::pids::read_current(&d, &mut buf))
                        });
                    }
                    Condition::DiskPressure => {
                        let dirs = if parts.volumes_and_logs {
                            vec![
                                facts::pod_dir(&self.cfg.root_dir, uid),
                                facts::log_dir(&self.cfg.pod_logs_dir, pod),
                            ]
                        } else {
                            Vec::new()
                        };
                        let layers = cg("memory")
                            .filter(|_| parts.writable_layer)
                            .map(|d| writable_layers(&d, &paths.proc, &mut buf))
                            .unwrap_or_default();
                        u.ephemeral_usage = dirs.iter().chain(&layers).map(|d| disk_usage(d)).sum();
                    }
                }
                u
            })
            .collect()
    }
}

/// A usage read from a pod's cgroup: a cgroup (or file) that does not
/// exist yet reads as nothing used; a read that fails otherwise is logged
/// and counts as nothing too, so a pod is never evicted for being
/// unmeasured.
fn measured(uid: &str, read: Result<u64, StatsError>) -> u64 {
    match read {
        Ok(v) => v,
        Err(e) if e.is_not_found() => 0,
        Err(e) => {
            log::warn!("eviction: pod {uid}'s usage counts as 0: {e}");
            0
        }
    }
}

/// The pod's `ephemeral-storage` requests, summed over its app containers
/// (init containers run before and leave nothing behind).
fn ephemeral_request(spec: &PodSpec) -> u64 {
    spec.containers
        .iter()
        .filter_map(|c| {
            c.resources
                .as_ref()?
                .requests
                .as_ref()?
                .get("ephemeral-storage")
        })
        .filter_map(|q| crate::quantity::Quantity::parse(&q.0).ok()?.value().ok())
        .sum()
}

/// The writable layers of a pod's containers: for each child cgroup of the
/// pod's (a container, or the sandbox), the overlay upper dir of its first
/// process's root. Containers without a process (exited) have none to
/// find; the sandbox's is nearly empty.
fn writable_layers(pod_cgroup: &Path, proc: &Path, buf: &mut Buf) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(pod_cgroup) else {
        return Vec::new();
    };
    let mut layers = Vec::new();
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(Some(pid)) = stats::layer::first_pid(&entry.path(), buf) else {
            continue;
        };
        if let Ok(Some(upper)) = stats::layer::upper_dir_of(proc, pid, buf) {
            if !layers.contains(&upper) {
                layers.push(upper);
            }
        }
    }
    layers
}

/// Bytes allocated under `dir` (blocks, as `du`), not following symlinks
/// or crossing into other filesystems' mounts. Only walked under disk
/// pressure.
fn disk_usage(dir: &Path) -> u64 {
    let Ok(top) = std::fs::symlink_metadata(dir) else {
        return 0;
    };
    let dev = top.dev();
    let mut total = top.blocks() * 512;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(m) = entry.metadata() else { continue };
            if m.dev() != dev {
                continue;
            }
            total += m.blocks() * 512;
            if m.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_that_cannot_be_read_counts_as_nothing_used() {
        let missing = Path::new("/nonexistent/kubepods/podx/memory.current");
        let not_found = StatsError::Read {
            path: missing.into(),
            source: std::io::ErrorKind::NotFound.into(),
        };
        let garbled = StatsError::Parse {
            path: missing.into(),
        };
        assert_eq!(measured("x", Ok(42)), 42);
        assert_eq!(measured("x", Err(not_found)), 0);
        assert_eq!(measured("x", Err(garbled)), 0);
    }

    #[test]
    fn disk_usage_counts_the_files_under_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f"), vec![1u8; 64 * 1024]).unwrap();
        let used = disk_usage(dir.path());
        assert!(used >= 64 * 1024, "{used}");
        assert_eq!(disk_usage(&dir.path().join("missing")), 0);
    }

    #[test]
    fn the_ephemeral_request_sums_the_app_containers() {
        let spec: PodSpec = serde_json::from_value(serde_json::json!({
            "containers": [
                {"name": "a", "resources": {"requests": {"ephemeral-storage": "1Mi"}}},
                {"name": "b", "resources": {"requests": {"ephemeral-storage": "2Mi", "memory": "1Gi"}}},
                {"name": "c"}
            ]
        }))
        .unwrap();
        assert_eq!(ephemeral_request(&spec), 3 << 20);
    }
}
