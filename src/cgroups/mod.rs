//! Pod cgroups for the cgroupfs driver: the kubelet's QoS hierarchy
//! (`<cgroupRoot>/kubepods/{burstable,besteffort}`), one `pod<uid>` cgroup
//! per pod with its CPU/memory/pids limits, clean-up, and stats readers.
//!
//! Why picolet owns this: the CRI runtime (runc via containerd/CRI-O) only
//! creates *container* cgroups under the `cgroup_parent` we hand it in
//! `LinuxPodSandboxConfig`; pod-level limits, QoS-level shares and removal
//! of the pod cgroup are the kubelet's job.
//!
//! Layout of the module (youki-style, one file per concern):
//! * `mod.rs` — version detection, errors, and the small file helpers every
//!   other file uses;
//! * `pod.rs` — [`PodCgroups`]: what to create where, removal, stats reads;
//! * `v1.rs` / `v2.rs` — how a cgroup path is created and configured on the
//!   legacy per-controller hierarchies vs the unified hierarchy;
//! * `cpu.rs`, `memory.rs`, `pids.rs` — per-controller file names, value
//!   formatting, and `&str` parsers for the stats files (used by eviction).
//!
//! Everything takes the cgroup mount root (normally `/sys/fs/cgroup`) as a
//! `&Path`, so unit tests run against temp trees that mimic either layout.
//! A hybrid host (v1 controllers under `/sys/fs/cgroup/<ctrl>`, cgroup2 at
//! `/sys/fs/cgroup/unified`) is treated as **v1**, like runc does.
//!
//! v1 controllers picolet creates pod cgroups in: `cpu`, `cpuacct`, `cpuset`,
//! `memory`, `pids` (each skipped with a debug log when not mounted). New
//! `cpuset` directories get `cpuset.cpus`/`cpuset.mems` copied from their
//! parent, otherwise the runtime cannot place tasks in them. `hugetlb`,
//! `blkio`, `freezer`, `devices` (and `name=systemd`, `unified`) are left to
//! runc, which `mkdir -p`s the container path in every hierarchy; removal
//! therefore walks *every* hierarchy under the mount root.
//!
//! Removal does not write `memory.force_empty` (v1): the upstream kubelet
//! does not either, and on a single-threaded agent a synchronous reclaim of
//! a large page cache could stall the loop. Page cache still charged to a
//! removed memcg is reclaimed by the kernel lazily.

pub mod cpu;
pub mod memory;
pub mod pids;
mod pod;
mod v1;
mod v2;

pub use cpu::{CpuConfig, CpuStat};
pub use pod::PodCgroups;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Which cgroup hierarchy layout the host uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// Legacy: one hierarchy per controller (also hybrid hosts).
    V1,
    /// Unified hierarchy only.
    V2,
}

/// Detects the layout under `mount_root`: v2 iff `<root>/cgroup.controllers`
/// exists. Errors if `mount_root` is not a directory.
pub fn detect(mount_root: &Path) -> io::Result<CgroupVersion> {
    if mount_root.join("cgroup.controllers").is_file() {
        return Ok(CgroupVersion::V2);
    }
    let meta = fs::metadata(mount_root)?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "cgroup mount root {} is not a directory",
                mount_root.display()
            ),
        ));
    }
    Ok(CgroupVersion::V1)
}

/// Errors from cgroup operations; every variant names the path involved.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("writing {value:?} to {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        value: String,
        #[source]
        source: io::Error,
    },
    #[error("reading {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("creating cgroup {}: {source}", .path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("removing cgroup {}: {source}", .path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// `rmdir` returned EBUSY: processes are still inside. Retry later
    /// (after killing them, see [`PodCgroups::read_procs`]).
    #[error("cgroup {} still has processes (EBUSY); retry after they exit", .path.display())]
    Busy { path: PathBuf },
    #[error("unexpected content {content:?} in {}", .path.display())]
    Parse { path: PathBuf, content: String },
    /// A pod UID or cgroup path that would escape the hierarchy.
    #[error("invalid cgroup name {0:?}")]
    InvalidName(String),
}

/// Values to apply to one cgroup. `None` = leave the file alone;
/// `-1` = unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Settings {
    pub cpu_shares: Option<u64>,
    /// CFS quota in µs, -1 = unlimited; written together with `cpu_period`.
    pub cpu_quota: Option<i64>,
    pub cpu_period: u64,
    pub memory_limit: Option<i64>,
    pub pids_max: Option<i64>,
}

// ---- helpers shared by v1.rs / v2.rs ----

/// Normalises a cgroup path to a relative one; `None` if it contains `..`
/// or `.` components.
fn normalize(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return None;
    }
    Some(parts.join("/"))
}

fn check_cgroup_path(cgroup: &str) -> Result<String, CgroupError> {
    normalize(cgroup).ok_or_else(|| CgroupError::InvalidName(cgroup.to_string()))
}

fn join_rel(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}/{b}")
    }
}

/// Pod UIDs are UUIDs (API) or hex hashes (static pods): allow only
/// `[A-Za-z0-9_-]` so a UID can never name another directory.
fn check_uid(uid: &str) -> Result<(), CgroupError> {
    if !uid.is_empty()
        && uid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        Ok(())
    } else {
        Err(CgroupError::InvalidName(uid.to_string()))
    }
}

pub(crate) fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    log::trace!("cgroup: {} <- {value}", path.display());
    fs::write(path, value).map_err(|source| CgroupError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    })
}

pub(crate) fn read(path: &Path) -> Result<String, CgroupError> {
    fs::read_to_string(path).map_err(|source| CgroupError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a file, `None` if it does not exist.
pub(crate) fn read_opt(path: &Path) -> Result<Option<String>, CgroupError> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CgroupError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn parse_file<T>(path: &Path, parse: impl Fn(&str) -> Option<T>) -> Result<T, CgroupError> {
    let content = read(path)?;
    parse(&content).ok_or_else(|| CgroupError::Parse {
        path: path.to_path_buf(),
        content,
    })
}

/// Creates one directory level; returns whether it was newly made.
pub(crate) fn mkdir(path: &Path) -> Result<bool, CgroupError> {
    match fs::create_dir(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(CgroupError::Create {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Parses a single unsigned integer (surrounding whitespace allowed).
pub fn parse_u64(s: &str) -> Option<u64> {
    s.trim().parse().ok()
}

/// Parses `max` (→ `Some(None)`) or an unsigned integer (→ `Some(Some(n))`),
/// the format of `memory.max`, `pids.max`, and friends.
pub fn parse_max(s: &str) -> Option<Option<u64>> {
    match s.trim() {
        "max" => Some(None),
        v => v.parse().ok().map(Some),
    }
}

fn errno_is(e: &io::Error, errno: rustix::io::Errno) -> bool {
    e.raw_os_error() == Some(errno.raw_os_error())
}

/// True if `path` lives on a cgroup (v1 or v2) filesystem.
fn is_cgroupfs(path: &Path) -> bool {
    const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    rustix::fs::statfs(path).is_ok_and(|st| {
        // `f_type`'s width differs between architectures.
        #[allow(clippy::unnecessary_cast)]
        let t = st.f_type as i64;
        t == CGROUP_SUPER_MAGIC || t == CGROUP2_SUPER_MAGIC
    })
}

/// `rmdir`s `dir` after its child cgroups, depth-first. On cgroupfs the
/// control files vanish with the directory; on an ordinary filesystem
/// (unit-test trees) the plain files are deleted first.
fn remove_tree(dir: &Path) -> Result<(), CgroupError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(CgroupError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut first_err = None;
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            if let Err(e) = remove_tree(&entry.path()) {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let rmdir = |dir: &Path| match fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) if errno_is(&e, rustix::io::Errno::BUSY) => Err(CgroupError::Busy {
            path: dir.to_path_buf(),
        }),
        Err(source) => Err(CgroupError::Remove {
            path: dir.to_path_buf(),
            source,
        }),
    };
    match rmdir(dir) {
        Err(CgroupError::Remove { source, .. })
            if errno_is(&source, rustix::io::Errno::NOTEMPTY) && !is_cgroupfs(dir) =>
        {
            for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| !t.is_dir()) {
                    let _ = fs::remove_file(entry.path());
                }
            }
            rmdir(dir)
        }
        other => other,
    }
}

fn collect_procs(dir: &Path, out: &mut Vec<i32>) -> Result<(), CgroupError> {
    let Some(procs) = read_opt(&dir.join("cgroup.procs"))? else {
        return Ok(());
    };
    out.extend(
        procs
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok()),
    );
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(CgroupError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            collect_procs(&entry.path(), out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod testutil {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A unique temp directory removed on drop.
    pub struct TempTree(pub PathBuf);

    impl TempTree {
        pub fn new(tag: &str) -> TempTree {
            static N: AtomicU32 = AtomicU32::new(0);
            let dir = std::env::temp_dir().join(format!(
                "picolet-cgtest-{}-{}-{tag}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempTree(dir)
        }
        pub fn path(&self) -> &Path {
            &self.0
        }
        pub fn put(&self, rel: &str, content: &str) {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        pub fn get(&self, rel: &str) -> String {
            std::fs::read_to_string(self.0.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
        }
        pub fn exists(&self, rel: &str) -> bool {
            self.0.join(rel).exists()
        }
        /// A v1 layout: one directory per controller, cpuset root populated.
        pub fn v1(tag: &str, controllers: &[&str]) -> TempTree {
            let t = TempTree::new(tag);
            for c in controllers {
                t.put(&format!("{c}/cgroup.procs"), "");
            }
            if controllers.contains(&"cpuset") {
                t.put("cpuset/cpuset.cpus", "0-3\n");
                t.put("cpuset/cpuset.mems", "0\n");
            }
            t
        }
        /// A v2 layout: root with `cgroup.controllers`.
        pub fn v2(tag: &str, controllers: &str) -> TempTree {
            let t = TempTree::new(tag);
            t.put("cgroup.controllers", &format!("{controllers}\n"));
            t.put("cgroup.subtree_control", "");
            t.put("cgroup.procs", "");
            t
        }
    }

    impl Drop for TempTree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests;
