//! cgroup v1 (legacy and hybrid hosts): one hierarchy per controller at
//! `<mount_root>/<controller>`, so a pod cgroup is a directory in each.
//!
//! Owns: which controllers picolet manages, creating a path in each of them
//! (copying `cpuset.cpus`/`cpuset.mems` down, since a fresh cpuset is empty
//! and unusable), writing the v1 knob files, and listing every hierarchy
//! for removal (runc creates container cgroups in all of them).

use super::{cpu, memory, mkdir, pids, read_opt, write, CgroupError, Settings};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Controllers picolet creates pod/QoS cgroups in. Others (hugetlb, blkio,
/// freezer, devices, name=systemd) are created by runc on demand.
pub(super) const MANAGED: &[&str] = &["cpu", "cpuacct", "cpuset", "memory", "pids"];

/// The managed controllers that are mounted, with their hierarchy roots.
/// Missing ones are skipped with a debug log.
pub(super) fn mounted(mount_root: &Path) -> Vec<(&'static str, PathBuf)> {
    MANAGED
        .iter()
        .filter_map(|&c| {
            let h = mount_root.join(c);
            if h.is_dir() {
                Some((c, h))
            } else {
                log::debug!(
                    "cgroup v1 controller {c} not mounted at {}, skipped",
                    h.display()
                );
                None
            }
        })
        .collect()
}

fn hierarchy(mount_root: &Path, controller: &str) -> Option<PathBuf> {
    let h = mount_root.join(controller);
    h.is_dir().then_some(h)
}

/// Every hierarchy directory under the mount root (including `unified` on
/// hybrid hosts), de-duplicated across co-mount symlinks like
/// `cpu -> cpu,cpuacct`.
pub(super) fn all_hierarchies(mount_root: &Path) -> Result<Vec<PathBuf>, CgroupError> {
    let entries = fs::read_dir(mount_root).map_err(|source| CgroupError::Read {
        path: mount_root.to_path_buf(),
        source,
    })?;
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    paths.sort();
    for p in paths {
        let key = fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
        if seen.insert(key) {
            out.push(p);
        }
    }
    Ok(out)
}

/// Creates `rel` (and its ancestors) in every managed, mounted controller.
pub(super) fn create(mount_root: &Path, rel: &str) -> Result<(), CgroupError> {
    for (name, h) in mounted(mount_root) {
        let mut dir = h;
        for comp in rel.split('/').filter(|c| !c.is_empty()) {
            let parent = dir.clone();
            dir.push(comp);
            mkdir(&dir)?;
            if name == "cpuset" {
                inherit_cpuset(&parent, &dir)?;
            }
        }
    }
    Ok(())
}

/// Copies `cpuset.cpus` and `cpuset.mems` from `parent` when `dir`'s are
/// empty (the kernel leaves them empty unless `cgroup.clone_children`).
fn inherit_cpuset(parent: &Path, dir: &Path) -> Result<(), CgroupError> {
    for file in ["cpuset.cpus", "cpuset.mems"] {
        let own = read_opt(&dir.join(file))?.unwrap_or_default();
        if !own.trim().is_empty() {
            continue;
        }
        let inherited = read_opt(&parent.join(file))?.unwrap_or_default();
        let inherited = inherited.trim();
        if inherited.is_empty() {
            log::debug!(
                "{} is empty, not copying into {}",
                parent.join(file).display(),
                dir.display()
            );
            continue;
        }
        write(&dir.join(file), inherited)?;
    }
    Ok(())
}

/// Writes `s` into the v1 files of cgroup `rel`.
pub(super) fn apply(mount_root: &Path, rel: &str, s: &Settings) -> Result<(), CgroupError> {
    if let Some(h) = hierarchy(mount_root, "cpu") {
        let dir = h.join(rel);
        if let Some(shares) = s.cpu_shares {
            write(&dir.join(cpu::V1_SHARES), &shares.to_string())?;
        }
        if let Some(quota) = s.cpu_quota {
            let period = (dir.join(cpu::V1_CFS_PERIOD), s.cpu_period.to_string());
            let quota = (dir.join(cpu::V1_CFS_QUOTA), quota.to_string());
            // Like runc: the period may be rejected against the current
            // quota, so on failure write the quota first and retry.
            if write(&period.0, &period.1).is_err() {
                write(&quota.0, &quota.1)?;
                write(&period.0, &period.1)?;
            } else {
                write(&quota.0, &quota.1)?;
            }
        }
    }
    if let (Some(h), Some(limit)) = (hierarchy(mount_root, "memory"), s.memory_limit) {
        write(
            &h.join(rel).join(memory::V1_LIMIT),
            &memory::v1_limit_value(limit),
        )?;
    }
    if let (Some(h), Some(max)) = (hierarchy(mount_root, "pids"), s.pids_max) {
        write(&h.join(rel).join(pids::MAX), &pids::max_value(max))?;
    }
    Ok(())
}
