//! One pass over the node's own numbers, the inputs of kubelet's eviction
//! signals: memory (capacity and the root cgroup's working set), the
//! `kubepods` cgroup's working set, filesystems (nodefs, imagefs) and the
//! process table. Where each comes from is in [`NodePaths`].

use super::fs::FsStats;
use super::pids::NodePids;
use super::{cgroup_dir, Buf, StatsError};
use crate::cgroups::CgroupVersion;
use std::path::PathBuf;

/// Where a node pass reads from.
#[derive(Debug, Clone)]
pub struct NodePaths {
    /// The cgroup mount root, normally `/sys/fs/cgroup`.
    pub cgroup_mount: PathBuf,
    pub version: CgroupVersion,
    /// The absolute cgroup path of the pods' cgroup (`/kubepods`, under
    /// `cgroupRoot`).
    pub pods_cgroup: String,
    /// Normally `/proc`.
    pub proc: PathBuf,
    /// `--root-dir`: nodefs.
    pub root_dir: PathBuf,
    /// `podLogsDir`: nodefs too when on the same filesystem.
    pub log_dir: PathBuf,
    /// The runtime's image store (containerd's root), or `None` when the
    /// images live on nodefs.
    pub image_dir: Option<PathBuf>,
}

/// The node's numbers at one moment. A value that could not be read is
/// `None`; its signal is then not observed (kubelet does the same).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// `MemTotal`.
    pub memory_capacity: Option<u64>,
    /// Working set of the root cgroup (v1 root memcg; v2 from meminfo).
    pub memory_working_set: Option<u64>,
    /// Working set of the pods' cgroup.
    pub pods_working_set: Option<u64>,
    pub nodefs: Option<FsStats>,
    /// The log dir's filesystem, when it is not nodefs's.
    pub logfs: Option<FsStats>,
    /// The image store's filesystem, when it is not nodefs's.
    pub imagefs: Option<FsStats>,
    pub pids: Option<NodePids>,
}

/// Which of the node's numbers a pass reads. The filesystems are always
/// read (image GC watches imagefs even with no eviction threshold); the
/// memory files (meminfo and two cgroups) and the process table (three
/// files) only when a signal observed from them is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wanted {
    pub memory: bool,
    pub pids: bool,
}

impl Wanted {
    /// Everything (`/stats/summary`).
    pub const ALL: Wanted = Wanted {
        memory: true,
        pids: true,
    };
}

/// Reads the node's numbers that are `wanted`. Each failure is handed to
/// `on_error` (the caller logs it once) and leaves its value `None`, as
/// does a number not wanted.
pub fn read(
    paths: &NodePaths,
    wanted: Wanted,
    buf: &mut Buf,
    mut on_error: impl FnMut(StatsError),
) -> NodeStats {
    let mut ok = |r: Result<(), StatsError>| {
        if let Err(e) = r {
            on_error(e)
        }
    };
    let mut out = NodeStats::default();
    if wanted.memory {
        let meminfo = take(super::meminfo::read(&paths.proc, buf), &mut ok);
        out.memory_capacity = meminfo.map(|m| m.total);
        out.memory_working_set = match paths.version {
            CgroupVersion::V1 => {
                let root = cgroup_dir(&paths.cgroup_mount, paths.version, "memory", "/");
                take(super::memory::read(&root, paths.version, buf), &mut ok).map(|m| m.working_set)
            }
            CgroupVersion::V2 => meminfo.map(|m| m.working_set()),
        };
        let pods = cgroup_dir(
            &paths.cgroup_mount,
            paths.version,
            "memory",
            &paths.pods_cgroup,
        );
        out.pods_working_set =
            take(super::memory::read(&pods, paths.version, buf), &mut ok).map(|m| m.working_set);
    }
    out.nodefs = take(super::fs::read(&paths.root_dir), &mut ok);
    let nodefs_id = out.nodefs.map(|n| n.fsid);
    let other = |fs: Option<FsStats>| fs.filter(|f| nodefs_id != Some(f.fsid));
    out.logfs = other(take(super::fs::read(&paths.log_dir), &mut ok));
    if let Some(dir) = &paths.image_dir {
        out.imagefs = other(take(super::fs::read(dir), &mut ok));
    }
    if wanted.pids {
        out.pids = take(super::pids::read_node(&paths.proc, buf), &mut ok);
    }
    out
}

/// The value, or `None` with the error handed to `report`.
fn take<T>(r: Result<T, StatsError>, report: &mut impl FnMut(Result<(), StatsError>)) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            report(Err(e));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::testutil::TempTree;

    /// A cgroup v1 node's paths under `t`, nodefs at `root/`.
    fn v1_paths(t: &TempTree, image_dir: Option<PathBuf>) -> NodePaths {
        NodePaths {
            cgroup_mount: t.path().join("cg"),
            version: CgroupVersion::V1,
            pods_cgroup: "/kubepods".into(),
            proc: t.path().join("proc"),
            root_dir: t.path().join("root"),
            log_dir: t.path().join("root"),
            image_dir,
        }
    }

    #[test]
    fn a_v1_node_pass_reads_the_root_memcg_and_the_pods_cgroup() {
        let t = TempTree::new("stats-node");
        t.put(
            "proc/meminfo",
            "MemTotal: 1000 kB\nMemFree: 100 kB\nInactive(file): 100 kB\n",
        );
        t.put("proc/sys/kernel/pid_max", "32768\n");
        t.put("proc/sys/kernel/threads-max", "9000\n");
        t.put("proc/loadavg", "0 0 0 1/90 5\n");
        t.put("cg/memory/memory.usage_in_bytes", "819200\n");
        t.put("cg/memory/memory.stat", "total_inactive_file 204800\n");
        t.put("cg/memory/kubepods/memory.usage_in_bytes", "4096\n");
        t.put("cg/memory/kubepods/memory.stat", "total_inactive_file 0\n");
        t.put("root/x", "");
        let paths = v1_paths(&t, Some(t.path().join("missing")));
        let mut errors = Vec::new();
        let s = read(&paths, Wanted::ALL, &mut Buf::new(), |e| {
            errors.push(e.to_string())
        });
        assert_eq!(s.memory_capacity, Some(1000 * 1024));
        assert_eq!(s.memory_working_set, Some(819200 - 204800));
        assert_eq!(s.pods_working_set, Some(4096));
        assert!(s.nodefs.is_some());
        assert_eq!(s.logfs, None, "the log dir shares nodefs");
        assert_eq!(s.imagefs, None);
        assert_eq!(
            s.pids,
            Some(NodePids {
                max: 9000,
                running: 90
            })
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("missing"), "{errors:?}");
    }

    #[test]
    fn a_v2_node_takes_its_working_set_from_meminfo() {
        let t = TempTree::new("stats-node-v2");
        t.put(
            "proc/meminfo",
            "MemTotal: 1000 kB\nMemFree: 100 kB\nInactive(file): 100 kB\n",
        );
        t.put("cg/kubepods/memory.current", "8192\n");
        t.put("cg/kubepods/memory.stat", "inactive_file 4096\n");
        let paths = NodePaths {
            cgroup_mount: t.path().join("cg"),
            version: CgroupVersion::V2,
            pods_cgroup: "/kubepods".into(),
            proc: t.path().join("proc"),
            root_dir: t.path().to_path_buf(),
            log_dir: t.path().to_path_buf(),
            image_dir: None,
        };
        let s = read(&paths, Wanted::ALL, &mut Buf::new(), |_| {});
        assert_eq!(s.memory_working_set, Some(800 * 1024));
        assert_eq!(s.pods_working_set, Some(4096));
        assert_eq!(s.pids, None);
    }

    #[test]
    fn a_pass_wanting_no_memory_or_pids_reads_only_the_filesystems() {
        // No meminfo, no cgroups, no process table: a pass that reads them
        // would report their absence.
        let t = TempTree::new("stats-node-fs-only");
        t.put("root/x", "");
        let paths = v1_paths(&t, None);
        let mut errors = Vec::new();
        let wanted = Wanted {
            memory: false,
            pids: false,
        };
        let s = read(&paths, wanted, &mut Buf::new(), |e| {
            errors.push(e.to_string())
        });
        assert!(errors.is_empty(), "{errors:?}");
        assert!(s.nodefs.is_some());
        assert_eq!(
            (s.memory_capacity, s.pods_working_set, s.pids),
            (None, None, None)
        );
    }
}
