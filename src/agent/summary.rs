//! `GET /stats/summary` and `GET /metrics/resource`: reads the node's and
//! each pod's and container's numbers from the kernel (cgroups, `/proc`,
//! statfs; never the runtime's stats calls) at the moment of the request
//! and fills [`crate::node::summary`]'s structs.
//!
//! `usageNanoCores` is a rate: the last CPU reading of each cgroup is kept
//! here, and a scrape reports the rate since the previous scrape (none on
//! the first). Readings of cgroups that went away are dropped at each
//! scrape. A container's cgroup is its ID under the pod's (the cgroupfs
//! driver; CRI-O's `crio-<ID>`) or the runtime's `<prefix>-<ID>.scope`
//! (systemd).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{now_unix_nanos, Agent};
use crate::cgroups::CgroupVersion;
use crate::cri::RuntimeService;
use crate::node::stats::{self, node::NodePaths, Buf};
use crate::node::summary::{
    self, cpu_stats, ContainerStats, CpuSample, FsStats, MemoryStats, PodReference, PodStats,
    ProcessStats, RlimitStats, RuntimeStats, Summary, VolumeStats,
};
use crate::pleg::State;
use crate::pod::{accessors, facts};

/// What scrapes keep between them.
#[derive(Default)]
pub(super) struct SummaryState {
    /// The last CPU reading per cgroup directory.
    cpu: RefCell<HashMap<PathBuf, CpuSample>>,
    buf: RefCell<Buf>,
    /// The last scrape failed to read something (`resource_scrape_error`).
    failed: Cell<bool>,
}

/// Reads as a scrape goes: CPU rates against the previous scrape, and
/// whether anything failed.
struct Reader<'a> {
    buf: &'a mut Buf,
    prev: &'a HashMap<PathBuf, CpuSample>,
    seen: HashMap<PathBuf, CpuSample>,
    now: i128,
    time: String,
    version: CgroupVersion,
    failed: bool,
}

impl Reader<'_> {
    fn cpu(&mut self, dir: &Path) -> Option<summary::CpuStats> {
        let usage = stats::cpu::read_usage_ns(dir, self.version, self.buf).ok()?;
        Some(self.cpu_of(dir.to_path_buf(), usage))
    }

    fn cpu_of(&mut self, key: PathBuf, usage_ns: u64) -> summary::CpuStats {
        let now = CpuSample {
            usage_ns,
            at_unix_nanos: self.now,
        };
        let stats = cpu_stats(&self.time, self.prev.get(&key).copied(), now);
        self.seen.insert(key, now);
        stats
    }

    fn memory(&mut self, dir: &Path) -> Option<MemoryStats> {
        let m = stats::memory::read(dir, self.version, self.buf).ok()?;
        Some(MemoryStats {
            time: self.time.clone(),
            usage_bytes: Some(m.usage),
            working_set_bytes: Some(m.working_set),
            rss_bytes: Some(m.rss),
            ..Default::default()
        })
    }

    /// Notes a value that should have been there.
    fn need<T>(&mut self, v: Option<T>) -> Option<T> {
        self.failed |= v.is_none();
        v
    }
}

/// Bytes of the files directly in `dir` (a container's log directory).
fn files_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// The most entries one volume's walk visits: a volume with millions of
/// files must not stall the node's one thread on every scrape.
const WALK_LIMIT: usize = 100_000;

/// What a directory tree uses on disk, as `du` counts it (allocated
/// blocks; symlinks not followed, other filesystems not entered): bytes
/// and inodes.
fn disk_usage(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let Ok(top) = std::fs::symlink_metadata(dir) else {
        return (0, 0);
    };
    let (dev, mut bytes, mut inodes) = (top.dev(), top.blocks() * 512, 1);
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            seen += 1;
            if seen > WALK_LIMIT {
                return (bytes, inodes);
            }
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            bytes += m.blocks() * 512;
            inodes += 1;
            if m.is_dir() && m.dev() == dev {
                stack.push(e.path());
            }
        }
    }
    (bytes, inodes)
}

/// The cgroup directory of container `id` under the pod's `pod_dir`.
fn container_cgroup(pod_dir: &Path, id: &str) -> Option<PathBuf> {
    [
        id.to_string(),
        format!("cri-containerd-{id}.scope"),
        format!("crio-{id}.scope"),
        format!("crio-{id}"),
    ]
    .into_iter()
    .map(|n| pod_dir.join(n))
    .find(|d| d.is_dir())
}

impl<R: RuntimeService> Agent<R> {
    /// `GET /stats/summary`: the JSON text (straight from the structs, no
    /// intermediate `Value`).
    pub(super) fn summary_json(&self) -> String {
        serde_json::to_string(&self.summary()).unwrap_or_default()
    }

    /// `GET /metrics/resource`.
    pub(super) fn resource_metrics(&self) -> String {
        let s = self.summary();
        let now_ms = now_unix_nanos() / 1_000_000;
        summary::resource_metrics(&s, self.summary.failed.get(), now_ms)
    }

    /// Reads everything a Summary holds, now.
    fn summary(&self) -> Summary {
        let paths: NodePaths = self.stats_paths();
        let now = i128::from(now_unix_nanos());
        let time = summary::time((now / 1_000_000_000) as i64);
        let mut buf = self.summary.buf.borrow_mut();
        let prev = self.summary.cpu.borrow();
        let node_stats = stats::node::read(&paths, &mut buf, |e| {
            log::debug!("stats summary: {e}");
        });
        let mut r = Reader {
            buf: &mut buf,
            prev: &prev,
            seen: HashMap::new(),
            now,
            time: time.clone(),
            version: paths.version,
            failed: false,
        };
        let cg = |controller: &str, cgroup: &str| {
            stats::cgroup_dir(&paths.cgroup_mount, paths.version, controller, cgroup)
        };
        let proc_stat = r
            .buf
            .read(&paths.proc.join("stat"))
            .map(str::to_string)
            .ok();
        let boot = proc_stat
            .as_deref()
            .and_then(|t| stats::keyed(t, "btime"))
            .unwrap_or(0);

        // The node.
        let mut node = summary::NodeStats {
            node_name: self.cfg.node_name.clone(),
            start_time: summary::time(boot as i64),
            ..Default::default()
        };
        let node_cpu = r.cpu(&cg("cpuacct", "/")).or_else(|| {
            let busy = stats::cpu::parse_proc_stat_busy_ns(proc_stat.as_deref()?)?;
            Some(r.cpu_of(paths.proc.join("stat"), busy))
        });
        node.cpu = r.need(node_cpu);
        let vmstat = r
            .buf
            .read(&paths.proc.join("vmstat"))
            .map(str::to_string)
            .ok();
        let meminfo = stats::meminfo::read(&paths.proc, r.buf).ok();
        let root_memory = match paths.version {
            CgroupVersion::V1 => r.memory(&cg("memory", "/")),
            CgroupVersion::V2 => None,
        };
        let node_memory = node_stats.memory_working_set.map(|ws| MemoryStats {
            time: time.clone(),
            available_bytes: node_stats.memory_capacity.map(|c| c.saturating_sub(ws)),
            usage_bytes: root_memory
                .as_ref()
                .and_then(|m| m.usage_bytes)
                .or(meminfo.map(|m| m.total.saturating_sub(m.free))),
            working_set_bytes: Some(ws),
            rss_bytes: root_memory.as_ref().and_then(|m| m.rss_bytes),
            page_faults: vmstat.as_deref().and_then(|t| stats::keyed(t, "pgfault")),
            major_page_faults: vmstat
                .as_deref()
                .and_then(|t| stats::keyed(t, "pgmajfault")),
        });
        node.memory = r.need(node_memory);
        node.fs = r.need(
            node_stats
                .nodefs
                .as_ref()
                .map(|f| FsStats::of_filesystem(&time, f)),
        );
        let imagefs = node_stats.imagefs.or(node_stats.nodefs);
        node.runtime = Some(RuntimeStats {
            image_fs: imagefs.as_ref().map(|f| FsStats::of_filesystem(&time, f)),
        });
        node.rlimit = r.need(node_stats.pids).map(|p| RlimitStats {
            time: time.clone(),
            maxpid: p.max,
            curproc: p.running,
        });
        let pods_cpu = r.cpu(&cg("cpuacct", &paths.pods_cgroup));
        let pods_memory = r.memory(&cg("memory", &paths.pods_cgroup));
        node.system_containers.push(ContainerStats {
            name: "pods".into(),
            start_time: node.start_time.clone(),
            cpu: pods_cpu,
            memory: pods_memory,
            logs: None,
        });

        // The pods.
        let logfs = node_stats.logfs.or(node_stats.nodefs);
        let pods = self.pods.borrow();
        let mut out = Summary {
            node,
            pods: Vec::new(),
        };
        for (uid, e) in pods.iter() {
            if !e.observed.is_active() {
                continue;
            }
            let pod = &e.pod;
            let cgroup = super::start::cgroup_parent(pod, self.cgroups.as_ref());
            let start = e
                .observed
                .latest_sandbox()
                .map(|s| s.created_at / 1_000_000_000)
                .filter(|s| *s > 0)
                .unwrap_or(e.first_seen_unix);
            let mut p = PodStats {
                pod_ref: PodReference {
                    name: accessors::name(pod).to_string(),
                    namespace: accessors::namespace(pod).to_string(),
                    uid: uid.clone(),
                },
                start_time: summary::time(start),
                ..Default::default()
            };
            let log_dir = facts::log_dir(&self.cfg.pod_logs_dir, pod);
            let mut logs_total = 0;
            let (cpu_dir, memory_dir) = (cg("cpuacct", &cgroup), cg("memory", &cgroup));
            if !cgroup.is_empty() {
                p.cpu = r.cpu(&cpu_dir);
                p.memory = r.memory(&memory_dir);
                p.process_stats = stats::pids::read_current(&cg("pids", &cgroup), r.buf)
                    .ok()
                    .map(|n| ProcessStats { process_count: n });
            }
            for c in e
                .observed
                .containers
                .iter()
                .filter(|c| c.state == State::Running)
            {
                let logs = files_size(&log_dir.join(&c.name));
                logs_total += logs;
                let mut stats = ContainerStats {
                    name: c.name.clone(),
                    start_time: summary::time(c.started_at / 1_000_000_000),
                    logs: Some(FsStats::part_of(&time, logfs.as_ref(), logs)),
                    ..Default::default()
                };
                if !cgroup.is_empty() {
                    if let Some(d) = container_cgroup(&cpu_dir, &c.id) {
                        stats.cpu = r.cpu(&d);
                    }
                    if let Some(d) = container_cgroup(&memory_dir, &c.id) {
                        stats.memory = r.memory(&d);
                    }
                }
                p.containers.push(stats);
            }
            let empty_dirs =
                facts::pod_dir(&self.cfg.root_dir, uid).join("volumes/kubernetes.io~empty-dir");
            let mut volumes_total = 0;
            for v in std::fs::read_dir(&empty_dirs)
                .into_iter()
                .flatten()
                .flatten()
            {
                let (used, inodes) = disk_usage(&v.path());
                volumes_total += used;
                let mut fs = FsStats::part_of(&time, node_stats.nodefs.as_ref(), used);
                fs.inodes_used = Some(inodes);
                p.volumes.push(VolumeStats {
                    fs,
                    name: v.file_name().to_string_lossy().into_owned(),
                });
            }
            p.volumes.sort_by(|a, b| a.name.cmp(&b.name));
            p.ephemeral_storage = Some(FsStats::part_of(
                &time,
                logfs.as_ref(),
                logs_total + volumes_total,
            ));
            out.pods.push(p);
        }
        let (seen, failed) = (r.seen, r.failed);
        drop(prev);
        *self.summary.cpu.borrow_mut() = seen;
        self.summary.failed.set(failed);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volumes_disk_usage_counts_nested_files_blocks_and_inodes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f"), vec![1u8; 64 * 1024]).unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("a/root")).unwrap();
        let (bytes, inodes) = disk_usage(dir.path());
        assert!(bytes >= 64 * 1024, "{bytes}");
        assert_eq!(inodes, 5, "the dir, a, b, f and the link itself");
        assert_eq!(disk_usage(&dir.path().join("none")), (0, 0));
    }

    #[test]
    fn a_container_cgroup_is_found_by_either_drivers_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("abc")).unwrap();
        std::fs::create_dir_all(dir.path().join("cri-containerd-def.scope")).unwrap();
        assert_eq!(
            container_cgroup(dir.path(), "abc"),
            Some(dir.path().join("abc"))
        );
        assert_eq!(
            container_cgroup(dir.path(), "def"),
            Some(dir.path().join("cri-containerd-def.scope"))
        );
        assert_eq!(container_cgroup(dir.path(), "ghi"), None);
    }
}
