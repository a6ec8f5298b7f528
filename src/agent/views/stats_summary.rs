//! `GET /stats/summary` and `GET /metrics/resource`: reads the node's and
//! each pod's and container's numbers from the kernel (cgroups, `/proc`,
//! statfs; never the runtime's stats calls) at the moment of the request
//! and fills [`crate::node::summary`]'s structs. The pods are the pod
//! workers' answer (`PodWorkers::active_pods`, copies); where the node's
//! stats are read comes from housekeeping through the wiring.
//!
//! `usageNanoCores` is a rate: the last CPU reading of each cgroup is kept
//! here, and a scrape reports the rate since the previous scrape (none on
//! the first). Readings of cgroups that went away are dropped at each
//! scrape. A container's cgroup is its ID under the pod's (the cgroupfs
//! driver; CRI-O's `crio-<ID>`) or the runtime's `<prefix>-<ID>.scope`
//! (systemd).
//!
//! Swap is read wherever the kernel accounts it (v2; v1 with `memsw`).
//! Pressure (PSI) is read from each cgroup on v2 and from
//! `/proc/pressure` for the node; where the files are missing (v1 pod
//! cgroups, a kernel without PSI) the field is left out. Neither counts as
//! a scrape error.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::Views;
use crate::agent::now_unix_nanos;
use crate::agent::pod_workers::ActivePod;
use crate::agent::AgentConfig;
use crate::cgroups::CgroupVersion;
use crate::cri::RuntimeService;
use crate::node::stats::{self, node::NodePaths, Buf};
use crate::node::summary::{
    self, cpu_stats, ContainerStats, CpuSample, FsStats, IoStats, MemoryStats, PodReference,
    PodStats, ProcessStats, PsiStats, RlimitStats, RuntimeStats, Summary, SwapStats, VolumeStats,
};
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
    paths: &'a NodePaths,
    now: i128,
    time: String,
    failed: bool,
}

/// What one cgroup holds for the Summary.
#[derive(Default)]
struct CgroupUsage {
    cpu: Option<summary::CpuStats>,
    memory: Option<MemoryStats>,
    swap: Option<SwapStats>,
    io: Option<IoStats>,
}

impl Reader<'_> {
    /// The directory of `cgroup` in `controller`'s hierarchy (v1) or the
    /// unified one (v2).
    fn cg(&self, controller: &str, cgroup: &str) -> PathBuf {
        let p = self.paths;
        stats::cgroup_dir(&p.cgroup_mount, p.version, controller, cgroup)
    }

    fn cpu(&mut self, dir: &Path) -> Option<summary::CpuStats> {
        let usage = stats::cpu::read_usage_ns(dir, self.paths.version, self.buf).ok()?;
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
        let m = stats::memory::read(dir, self.paths.version, self.buf).ok()?;
        Some(MemoryStats {
            time: self.time.clone(),
            usage_bytes: Some(m.usage),
            working_set_bytes: Some(m.working_set),
            rss_bytes: Some(m.rss),
            ..Default::default()
        })
    }

    /// A cgroup's swap; `None` where the kernel does not account it.
    fn swap(&mut self, dir: &Path) -> Option<SwapStats> {
        let s = stats::swap::read(dir, self.paths.version, self.buf).ok()?;
        Some(SwapStats::of(&self.time, &s))
    }

    /// A pressure file: of a v2 cgroup directory, or of `/proc/pressure`;
    /// `None` where there is none (v1 cgroups, a kernel without PSI).
    fn psi(&mut self, dir: &Path, resource: &str) -> Option<PsiStats> {
        let psi = stats::psi::read(dir, resource, self.buf).ok()?;
        Some(PsiStats::of(&psi))
    }

    /// CPU, memory, swap and pressure of one cgroup: its `cpuacct` and
    /// `memory` directories on v1 (either may be unknown), the same
    /// directory twice on v2.
    fn cgroup(&mut self, cpu_dir: Option<&Path>, memory_dir: Option<&Path>) -> CgroupUsage {
        let mut u = CgroupUsage {
            cpu: cpu_dir.and_then(|d| self.cpu(d)),
            memory: memory_dir.and_then(|d| self.memory(d)),
            swap: memory_dir.and_then(|d| self.swap(d)),
            io: None,
        };
        if self.paths.version == CgroupVersion::V2 {
            if let (Some(c), Some(d)) = (u.cpu.as_mut(), cpu_dir) {
                c.psi = self.psi(d, "cpu");
            }
            if let Some(d) = memory_dir {
                if let Some(m) = u.memory.as_mut() {
                    m.psi = self.psi(d, "memory");
                }
                u.io = self.io(d);
            }
        }
        u
    }

    /// kubelet's IOStats: there only with the pressure file `dir` has.
    fn io(&mut self, dir: &Path) -> Option<IoStats> {
        let psi = self.psi(dir, "io")?;
        Some(IoStats {
            time: self.time.clone(),
            psi: Some(psi),
        })
    }

    /// Notes a value that should have been there.
    fn need<T>(&mut self, v: Option<T>) -> Option<T> {
        self.failed |= v.is_none();
        v
    }
}

/// The node's part of the Summary: `node_stats` is the pass eviction
/// makes, the rest is read here.
fn node_summary(
    r: &mut Reader,
    node_name: &str,
    node_stats: &stats::node::NodeStats,
) -> summary::NodeStats {
    let (proc, time) = (r.paths.proc.clone(), r.time.clone());
    let proc_stat = r.buf.read(&proc.join("stat")).map(str::to_string).ok();
    let boot = proc_stat
        .as_deref()
        .and_then(|t| stats::keyed(t, "btime"))
        .unwrap_or(0);
    let mut node = summary::NodeStats {
        node_name: node_name.to_string(),
        start_time: summary::time(boot as i64),
        ..Default::default()
    };
    let root_cpu = r.cg("cpuacct", "/");
    let node_cpu = r.cpu(&root_cpu).or_else(|| {
        let busy = stats::cpu::parse_proc_stat_busy_ns(proc_stat.as_deref()?)?;
        Some(r.cpu_of(proc.join("stat"), busy))
    });
    node.cpu = r.need(node_cpu);
    let pressure = proc.join("pressure");
    if let Some(c) = node.cpu.as_mut() {
        c.psi = r.psi(&pressure, "cpu");
    }
    let meminfo = stats::meminfo::read(&proc, r.buf).ok();
    let node_memory = node_memory(r, node_stats, meminfo.as_ref());
    node.memory = r.need(node_memory);
    if let Some(m) = node.memory.as_mut() {
        m.psi = r.psi(&pressure, "memory");
    }
    node.io = r.io(&pressure);
    node.swap = meminfo.map(|m| SwapStats::of(&time, &stats::swap::of_node(&m)));
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
    let pods_cgroup = r.paths.pods_cgroup.clone();
    let (cpu_dir, memory_dir) = (r.cg("cpuacct", &pods_cgroup), r.cg("memory", &pods_cgroup));
    let pods = r.cgroup(Some(&cpu_dir), Some(&memory_dir));
    node.system_containers.push(ContainerStats {
        name: "pods".into(),
        start_time: node.start_time.clone(),
        cpu: pods.cpu,
        memory: pods.memory,
        logs: None,
        io: pods.io,
        swap: pods.swap,
    });
    node
}

/// The node's memory: working set and capacity from the eviction pass,
/// usage and RSS from the root memcg (v1) or `/proc/meminfo` (v2), page
/// faults from `/proc/vmstat`.
fn node_memory(
    r: &mut Reader,
    node_stats: &stats::node::NodeStats,
    meminfo: Option<&stats::meminfo::MemInfo>,
) -> Option<MemoryStats> {
    let vmstat = r
        .buf
        .read(&r.paths.proc.join("vmstat"))
        .map(str::to_string)
        .ok();
    let root_memory = match r.paths.version {
        CgroupVersion::V1 => {
            let root = r.cg("memory", "/");
            r.memory(&root)
        }
        CgroupVersion::V2 => None,
    };
    let ws = node_stats.memory_working_set?;
    let vm = |key| vmstat.as_deref().and_then(|t| stats::keyed(t, key));
    Some(MemoryStats {
        time: r.time.clone(),
        available_bytes: node_stats.memory_capacity.map(|c| c.saturating_sub(ws)),
        usage_bytes: root_memory
            .as_ref()
            .and_then(|m| m.usage_bytes)
            .or(meminfo.map(|m| m.total.saturating_sub(m.free))),
        working_set_bytes: Some(ws),
        rss_bytes: root_memory.as_ref().and_then(|m| m.rss_bytes),
        page_faults: vm("pgfault"),
        major_page_faults: vm("pgmajfault"),
        psi: None,
    })
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

impl<R: RuntimeService> Views<R> {
    /// `GET /stats/summary`: the JSON text (straight from the structs, no
    /// intermediate `Value`). The node's stats are read under `paths`.
    pub(in crate::agent) fn summary_json(&self, paths: &NodePaths) -> String {
        serde_json::to_string(&self.summary(paths)).unwrap_or_default()
    }

    /// `GET /metrics/resource`.
    pub(in crate::agent) fn resource_metrics(&self, paths: &NodePaths) -> String {
        let s = self.summary(paths);
        let now_ms = now_unix_nanos() / 1_000_000;
        summary::resource_metrics(&s, self.summary.failed.get(), now_ms)
    }

    /// Reads everything a Summary holds, now.
    fn summary(&self, paths: &NodePaths) -> Summary {
        let now = i128::from(now_unix_nanos());
        let mut buf = self.summary.buf.borrow_mut();
        let prev = self.summary.cpu.borrow();
        let node_stats = stats::node::read(paths, stats::node::Wanted::ALL, &mut buf, |e| {
            log::debug!("stats summary: {e}");
        });
        let mut r = Reader {
            buf: &mut buf,
            prev: &prev,
            seen: HashMap::new(),
            paths,
            now,
            time: summary::time((now / 1_000_000_000) as i64),
            failed: false,
        };
        let cfg = self.workers.cfg();
        let node = node_summary(&mut r, &cfg.node_name, &node_stats);
        let mut out = Summary {
            node,
            pods: Vec::new(),
        };
        for p in self.workers.active_pods() {
            out.pods.push(pod_summary(&mut r, cfg, &p, &node_stats));
        }
        let (seen, failed) = (r.seen, r.failed);
        drop(prev);
        *self.summary.cpu.borrow_mut() = seen;
        self.summary.failed.set(failed);
        out
    }
}

/// One active pod: its cgroup's numbers, each running container's, its
/// logs and emptyDir volumes.
fn pod_summary(
    r: &mut Reader,
    cfg: &AgentConfig,
    a: &ActivePod,
    node_stats: &stats::node::NodeStats,
) -> PodStats {
    let (pod, uid, cgroup) = (&a.pod, a.uid.as_str(), &a.cgroup);
    let mut p = PodStats {
        pod_ref: PodReference {
            name: accessors::name(pod).to_string(),
            namespace: accessors::namespace(pod).to_string(),
            uid: uid.to_string(),
        },
        start_time: summary::time(a.start_unix),
        ..Default::default()
    };
    let (cpu_dir, memory_dir) = (r.cg("cpuacct", cgroup), r.cg("memory", cgroup));
    if !cgroup.is_empty() {
        let u = r.cgroup(Some(&cpu_dir), Some(&memory_dir));
        (p.cpu, p.memory, p.swap, p.io) = (u.cpu, u.memory, u.swap, u.io);
        let pids_dir = r.cg("pids", cgroup);
        p.process_stats = stats::pids::read_current(&pids_dir, r.buf)
            .ok()
            .map(|n| ProcessStats { process_count: n });
    }
    let logfs = node_stats.logfs.or(node_stats.nodefs);
    let log_dir = facts::log_dir(&cfg.pod_logs_dir, pod);
    let mut logs_total = 0;
    for (name, id, started_at) in &a.running {
        let logs = files_size(&log_dir.join(name));
        logs_total += logs;
        let mut stats = ContainerStats {
            name: name.clone(),
            start_time: summary::time(started_at / 1_000_000_000),
            logs: Some(FsStats::part_of(&r.time, logfs.as_ref(), logs)),
            ..Default::default()
        };
        if !cgroup.is_empty() {
            let cpu = container_cgroup(&cpu_dir, id);
            let memory = container_cgroup(&memory_dir, id);
            let u = r.cgroup(cpu.as_deref(), memory.as_deref());
            (stats.cpu, stats.memory, stats.swap, stats.io) = (u.cpu, u.memory, u.swap, u.io);
        }
        p.containers.push(stats);
    }
    let pod_dir = facts::pod_dir(&cfg.root_dir, uid);
    let volumes_total = pod_volumes(&mut p, &r.time, &pod_dir, node_stats.nodefs.as_ref());
    p.ephemeral_storage = Some(FsStats::part_of(
        &r.time,
        logfs.as_ref(),
        logs_total + volumes_total,
    ));
    p
}

/// Fills `p.volumes` with the pod's emptyDir volumes (under `pod_dir`),
/// sorted by name; returns their bytes in total.
fn pod_volumes(
    p: &mut PodStats,
    time: &str,
    pod_dir: &Path,
    nodefs: Option<&stats::fs::FsStats>,
) -> u64 {
    let empty_dirs = pod_dir.join("volumes/kubernetes.io~empty-dir");
    let mut total = 0;
    for v in std::fs::read_dir(&empty_dirs)
        .into_iter()
        .flatten()
        .flatten()
    {
        let (used, inodes) = disk_usage(&v.path());
        total += used;
        let mut fs = FsStats::part_of(time, nodefs, used);
        fs.inodes_used = Some(inodes);
        p.volumes.push(VolumeStats {
            fs,
            name: v.file_name().to_string_lossy().into_owned(),
        });
    }
    p.volumes.sort_by(|a, b| a.name.cmp(&b.name));
    total
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

    fn paths(root: &Path, version: CgroupVersion) -> NodePaths {
        NodePaths {
            cgroup_mount: root.join("cg"),
            version,
            pods_cgroup: "/kubepods".into(),
            proc: root.join("proc"),
            root_dir: root.to_path_buf(),
            log_dir: root.to_path_buf(),
            image_dir: None,
        }
    }

    const PRESSURE: &str = "some avg10=1.00 avg60=0.50 avg300=0.25 total=100\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n";

    #[test]
    fn a_v2_cgroup_has_swap_and_pressure_in_cpu_memory_and_io() {
        let t = crate::cgroups::testutil::TempTree::new("summary-v2");
        for (file, text) in [
            ("cpu.stat", "usage_usec 5\n"),
            ("memory.current", "4096\n"),
            ("memory.stat", "anon 1024\n"),
            ("memory.swap.current", "512\n"),
            ("memory.swap.max", "2048\n"),
            ("cpu.pressure", PRESSURE),
            ("memory.pressure", PRESSURE),
            ("io.pressure", PRESSURE),
        ] {
            t.put(&format!("cg/kubepods/pod1/{file}"), text);
        }
        t.put("cg/kubepods/pod2/memory.current", "4096\n");
        t.put("cg/kubepods/pod2/memory.stat", "anon 1024\n");
        let paths = paths(t.path(), CgroupVersion::V2);
        let (mut buf, prev) = (Buf::new(), HashMap::new());
        let mut r = Reader {
            buf: &mut buf,
            prev: &prev,
            seen: HashMap::new(),
            paths: &paths,
            now: 1,
            time: "t".into(),
            failed: false,
        };
        let dir = r.cg("memory", "/kubepods/pod1");
        let u = r.cgroup(Some(&dir), Some(&dir));
        let psi = u.cpu.unwrap().psi.unwrap();
        assert_eq!(
            (psi.some.avg10, psi.some.total, psi.full.total),
            (1.0, 100, 7)
        );
        assert!(u.memory.unwrap().psi.is_some());
        assert!(u.io.unwrap().psi.is_some());
        let swap = u.swap.unwrap();
        assert_eq!(
            (swap.swap_usage_bytes, swap.swap_available_bytes),
            (Some(512), Some(1536))
        );
        // Without PSI or swap files: those fields are left out, nothing failed.
        let dir = r.cg("memory", "/kubepods/pod2");
        let u = r.cgroup(Some(&dir), Some(&dir));
        assert!(u.memory.unwrap().psi.is_none());
        assert!(u.io.is_none() && u.swap.is_none() && u.cpu.is_none());
        assert!(!r.failed);
    }

    #[test]
    fn a_v1_cgroup_has_swap_from_memsw_and_no_pressure() {
        let t = crate::cgroups::testutil::TempTree::new("summary-v1");
        for (file, text) in [
            ("memory.usage_in_bytes", "4096\n"),
            ("memory.stat", "total_rss 1024\n"),
            ("memory.memsw.usage_in_bytes", "6144\n"),
            ("memory.limit_in_bytes", "9223372036854771712\n"),
            ("memory.memsw.limit_in_bytes", "9223372036854771712\n"),
            // Not read on v1.
            ("memory.pressure", PRESSURE),
            ("io.pressure", PRESSURE),
        ] {
            t.put(&format!("cg/memory/kubepods/pod1/{file}"), text);
        }
        t.put("cg/cpuacct/kubepods/pod1/cpuacct.usage", "5\n");
        t.put("cg/cpuacct/kubepods/pod1/cpu.pressure", PRESSURE);
        let paths = paths(t.path(), CgroupVersion::V1);
        let (mut buf, prev) = (Buf::new(), HashMap::new());
        let mut r = Reader {
            buf: &mut buf,
            prev: &prev,
            seen: HashMap::new(),
            paths: &paths,
            now: 1,
            time: "t".into(),
            failed: false,
        };
        let (cpu, memory) = (
            r.cg("cpuacct", "/kubepods/pod1"),
            r.cg("memory", "/kubepods/pod1"),
        );
        let u = r.cgroup(Some(&cpu), Some(&memory));
        assert!(u.cpu.unwrap().psi.is_none());
        assert!(u.memory.unwrap().psi.is_none());
        assert!(u.io.is_none());
        let swap = u.swap.unwrap();
        assert_eq!(
            (swap.swap_usage_bytes, swap.swap_available_bytes),
            (Some(2048), None)
        );
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
