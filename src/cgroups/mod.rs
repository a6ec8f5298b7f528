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
//! * `mod.rs` — version detection, [`PodCgroups`] (what to create where),
//!   errors, and the small file helpers every other file uses;
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
mod v1;
mod v2;

pub use cpu::{CpuConfig, CpuStat};

use crate::qos::allocatable::{KubepodsLimits, QosShares};
use crate::qos::{
    milli_cpu_to_quota, milli_cpu_to_shares, PodResources, QosClass, MIN_SHARES, QUOTA_PERIOD_US,
};
use std::collections::{BTreeMap, BTreeSet};
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

/// Manages the kubelet-style QoS and pod cgroups under one cgroup root.
#[derive(Debug, Clone)]
pub struct PodCgroups {
    mount_root: PathBuf,
    version: CgroupVersion,
    /// KubeletConfiguration `cgroupRoot`, normalised: no leading/trailing
    /// `/`, empty for the hierarchy root.
    cgroup_root: String,
    per_qos: bool,
    cpu_cfs_quota: bool,
    cpu_cfs_period_us: u64,
}

const KUBEPODS: &str = "kubepods";

impl PodCgroups {
    /// Detects the cgroup version under `mount_root`. `cgroup_root` is the
    /// KubeletConfiguration `cgroupRoot` (`"/"`, `""` or e.g. `"/picolet"`);
    /// `per_qos` is `cgroupsPerQOS` (without it no QoS/pod cgroups are made
    /// and pods are parented directly under `cgroup_root`).
    pub fn new(mount_root: &Path, cgroup_root: &str, per_qos: bool) -> io::Result<Self> {
        let version = detect(mount_root)?;
        let cgroup_root = normalize(cgroup_root).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid cgroupRoot {cgroup_root:?}"),
            )
        })?;
        Ok(PodCgroups {
            mount_root: mount_root.to_path_buf(),
            version,
            cgroup_root,
            per_qos,
            cpu_cfs_quota: true,
            cpu_cfs_period_us: QUOTA_PERIOD_US,
        })
    }

    /// KubeletConfiguration `cpuCFSQuota` / `cpuCFSQuotaPeriod`: when
    /// `enforce` is false CPU limits are not turned into CFS quotas.
    pub fn with_cpu_cfs_quota(mut self, enforce: bool, period_us: u64) -> Self {
        self.cpu_cfs_quota = enforce;
        self.cpu_cfs_period_us = period_us.clamp(1000, 1_000_000);
        self
    }

    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// Creates `<cgroupRoot>/kubepods`, `kubepods/burstable` and
    /// `kubepods/besteffort` (BestEffort gets the minimum CPU share). Without
    /// `per_qos` only `<cgroupRoot>` is created. Idempotent.
    pub fn ensure_qos_hierarchy(&self) -> Result<(), CgroupError> {
        if !self.per_qos {
            if !self.cgroup_root.is_empty() {
                self.create(&self.cgroup_root)?;
            }
            return Ok(());
        }
        for qos in [
            QosClass::Guaranteed,
            QosClass::Burstable,
            QosClass::BestEffort,
        ] {
            self.create(&self.qos_rel(qos))?;
        }
        let besteffort = Settings {
            cpu_shares: Some(MIN_SHARES),
            ..Default::default()
        };
        self.apply(&self.qos_rel(QosClass::BestEffort), &besteffort)
    }

    /// The CRI `LinuxPodSandboxConfig.cgroup_parent` for the cgroupfs
    /// driver, e.g. `/kubepods/burstable/pod<uid>`, `/kubepods/pod<uid>`
    /// for Guaranteed, prefixed by `cgroupRoot`; without `per_qos` it is
    /// `cgroupRoot` itself.
    pub fn pod_cgroup_parent(&self, uid: &str, qos: QosClass) -> String {
        if !self.per_qos {
            return format!("/{}", self.cgroup_root);
        }
        format!("/{}", self.pod_rel(uid, qos))
    }

    /// Creates the pod cgroup (and any missing ancestors) and writes its
    /// limits the way `cm.ResourceConfigForPod` computes them: CPU shares
    /// from the request (BestEffort: 2), a CFS quota when a CPU limit
    /// exists, a memory limit when one exists, and `pids_limit`
    /// (KubeletConfiguration `podPidsLimit`; `None` or `<= 0` = unlimited).
    /// Absent limits are written as "unlimited", so calling this again
    /// after a resize converges. Without `per_qos` this does nothing.
    pub fn ensure_pod(
        &self,
        uid: &str,
        qos: QosClass,
        res: &PodResources,
        pids_limit: Option<i64>,
    ) -> Result<(), CgroupError> {
        check_uid(uid)?;
        if !self.per_qos {
            log::debug!("cgroupsPerQOS disabled: no pod cgroup for {uid}");
            return Ok(());
        }
        let rel = self.pod_rel(uid, qos);
        self.create(&rel)?;
        self.apply(&rel, &self.pod_settings(qos, res, pids_limit))
    }

    fn pod_settings(&self, qos: QosClass, res: &PodResources, pids_limit: Option<i64>) -> Settings {
        let (shares, cpu_limit, memory_limit) = match qos {
            QosClass::BestEffort => (MIN_SHARES, None, None),
            _ => (
                milli_cpu_to_shares(res.cpu_request_millis),
                res.cpu_limit_millis,
                res.memory_limit_bytes,
            ),
        };
        let quota = match cpu_limit {
            Some(m) if self.cpu_cfs_quota => match milli_cpu_to_quota(m, self.cpu_cfs_period_us) {
                0 => -1,
                q => q,
            },
            _ => -1,
        };
        Settings {
            cpu_shares: Some(shares),
            cpu_quota: Some(quota),
            cpu_period: self.cpu_cfs_period_us,
            memory_limit: Some(memory_limit.map_or(-1, |b| b.min(i64::MAX as u64) as i64)),
            pids_max: Some(pids_limit.filter(|n| *n > 0).unwrap_or(-1)),
        }
    }

    /// Removes the pod cgroup from every hierarchy, container cgroups left
    /// behind inside it first (depth-first). A cgroup that still holds
    /// processes yields [`CgroupError::Busy`]; the caller retries later.
    /// Missing directories are fine. Keeps going after an error and returns
    /// the first one. Without `per_qos` this does nothing.
    pub fn remove_pod(&self, uid: &str, qos: QosClass) -> Result<(), CgroupError> {
        check_uid(uid)?;
        if !self.per_qos {
            return Ok(());
        }
        self.remove_everywhere(&self.pod_rel(uid, qos))
    }

    /// Removes everything picolet created: `<cgroupRoot>/kubepods` and, when
    /// `cgroupRoot` is not the hierarchy root, `<cgroupRoot>` itself.
    /// For tests and uninstall; fails with `Busy` while pods still run.
    pub fn remove_all(&self) -> Result<(), CgroupError> {
        let rel = if self.cgroup_root.is_empty() {
            KUBEPODS.to_string()
        } else {
            self.cgroup_root.clone()
        };
        self.remove_everywhere(&rel)
    }

    /// Pod cgroups found on disk as `(qos, uid)`, sorted and de-duplicated
    /// across controllers, so pods that vanished while picolet was down can
    /// be cleaned up. Empty without `per_qos`.
    pub fn list_pods(&self) -> Result<Vec<(QosClass, String)>, CgroupError> {
        let mut found = BTreeSet::new();
        if !self.per_qos {
            return Ok(Vec::new());
        }
        for base in self.scan_roots() {
            for qos in [
                QosClass::Guaranteed,
                QosClass::Burstable,
                QosClass::BestEffort,
            ] {
                let dir = base.join(self.qos_rel(qos));
                let entries = match fs::read_dir(&dir) {
                    Ok(e) => e,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(source) => return Err(CgroupError::Read { path: dir, source }),
                };
                for entry in entries {
                    let entry = entry.map_err(|source| CgroupError::Read {
                        path: dir.clone(),
                        source,
                    })?;
                    let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                    let name = entry.file_name();
                    let Some(uid) = name.to_str().and_then(|n| n.strip_prefix("pod")) else {
                        continue;
                    };
                    if is_dir && check_uid(uid).is_ok() {
                        found.insert((qos, uid.to_string()));
                    }
                }
            }
        }
        Ok(found.into_iter().collect())
    }

    /// Sets the QoS cgroups' CPU shares (`cpu.weight` on v2), computed by
    /// [`crate::qos::allocatable::qos_shares`] from the Burstable pods'
    /// requests, as the kubelet's QoS manager does periodically.
    pub fn update_qos_shares(&self, shares: QosShares) -> Result<(), CgroupError> {
        if !self.per_qos {
            return Ok(());
        }
        let burstable = Settings {
            cpu_shares: Some(shares.burstable),
            ..Default::default()
        };
        self.apply(&self.qos_rel(QosClass::Burstable), &burstable)?;
        let besteffort = Settings {
            cpu_shares: Some(shares.besteffort),
            ..Default::default()
        };
        self.apply(&self.qos_rel(QosClass::BestEffort), &besteffort)
    }

    /// Writes node allocatable into the `kubepods` cgroup (CPU shares or
    /// weight, memory limit, `pids.max`), from
    /// [`crate::qos::allocatable::kubepods_limits`]. A zero memory or pids
    /// value is left unset, as libcontainer does. Without `per_qos` there is
    /// no `kubepods` cgroup and nothing is written.
    pub fn enforce_node_allocatable(&self, limits: KubepodsLimits) -> Result<(), CgroupError> {
        if !self.per_qos {
            return Ok(());
        }
        let to_i64 = |v: u64| i64::try_from(v).ok().filter(|v| *v > 0);
        let settings = Settings {
            cpu_shares: Some(limits.cpu_shares),
            memory_limit: to_i64(limits.memory_bytes),
            pids_max: limits.pids.and_then(to_i64),
            ..Default::default()
        };
        self.apply(&self.qos_rel(QosClass::Guaranteed), &settings)
    }

    // ---- stats; `cgroup` is an absolute cgroup path such as the one
    // returned by `pod_cgroup_parent` (or `/kubepods`). ----

    /// Memory usage in bytes (`memory.usage_in_bytes` / `memory.current`).
    pub fn read_memory_usage(&self, cgroup: &str) -> Result<u64, CgroupError> {
        let path = match self.version {
            CgroupVersion::V1 => self.v1_file(cgroup, "memory", memory::V1_USAGE)?,
            CgroupVersion::V2 => self.v2_file(cgroup, memory::V2_CURRENT)?,
        };
        parse_file(&path, parse_u64)
    }

    /// Memory limit in bytes, `None` when unlimited.
    pub fn read_memory_limit(&self, cgroup: &str) -> Result<Option<u64>, CgroupError> {
        match self.version {
            CgroupVersion::V1 => parse_file(
                &self.v1_file(cgroup, "memory", memory::V1_LIMIT)?,
                memory::parse_v1_limit,
            ),
            CgroupVersion::V2 => parse_file(&self.v2_file(cgroup, memory::V2_MAX)?, parse_max),
        }
    }

    /// The CPU shares, quota and period (v2: shares from `cpu.weight`, as
    /// kubelet's `getCgroupCPUConfig` converts it, quota and period from
    /// `cpu.max`).
    pub fn read_cpu_config(&self, cgroup: &str) -> Result<CpuConfig, CgroupError> {
        match self.version {
            CgroupVersion::V1 => Ok(CpuConfig {
                shares: parse_file(&self.v1_file(cgroup, "cpu", cpu::V1_SHARES)?, parse_u64)?,
                quota_us: parse_file(
                    &self.v1_file(cgroup, "cpu", cpu::V1_CFS_QUOTA)?,
                    cpu::parse_v1_quota,
                )?,
                period_us: parse_file(
                    &self.v1_file(cgroup, "cpu", cpu::V1_CFS_PERIOD)?,
                    parse_u64,
                )?,
            }),
            CgroupVersion::V2 => {
                let (quota_us, period_us) =
                    parse_file(&self.v2_file(cgroup, cpu::V2_MAX)?, cpu::parse_v2_max)?;
                let weight = parse_file(&self.v2_file(cgroup, cpu::V2_WEIGHT)?, parse_u64)?;
                Ok(CpuConfig {
                    shares: cpu::weight_to_shares(weight),
                    quota_us,
                    period_us,
                })
            }
        }
    }

    /// The memory limit as kubelet reads it back (`readCgroupMemoryConfig`):
    /// v1's `memory.limit_in_bytes` as it stands, however large (an
    /// unlimited v1 cgroup reports about 8 EiB), v2's `memory.max` with
    /// `max` as `None`.
    pub fn read_memory_limit_raw(&self, cgroup: &str) -> Result<Option<u64>, CgroupError> {
        match self.version {
            CgroupVersion::V1 => {
                parse_file(&self.v1_file(cgroup, "memory", memory::V1_LIMIT)?, |s| {
                    parse_u64(s).map(Some)
                })
            }
            CgroupVersion::V2 => parse_file(&self.v2_file(cgroup, memory::V2_MAX)?, parse_max),
        }
    }

    /// Whether pods have cgroups of their own (`cgroupsPerQOS`).
    pub fn per_qos(&self) -> bool {
        self.per_qos
    }

    /// The `memory.stat` key/value pairs.
    pub fn read_memory_stat(&self, cgroup: &str) -> Result<BTreeMap<String, u64>, CgroupError> {
        let path = match self.version {
            CgroupVersion::V1 => self.v1_file(cgroup, "memory", memory::STAT)?,
            CgroupVersion::V2 => self.v2_file(cgroup, memory::STAT)?,
        };
        Ok(memory::parse_stat(&read(&path)?))
    }

    /// The kubelet's eviction signal: usage minus inactive file cache.
    pub fn read_memory_working_set(&self, cgroup: &str) -> Result<u64, CgroupError> {
        let usage = self.read_memory_usage(cgroup)?;
        let stat = self.read_memory_stat(cgroup)?;
        Ok(memory::working_set(usage, &stat, self.version))
    }

    /// Number of tasks in the cgroup and its descendants (`pids.current`).
    pub fn read_pids_current(&self, cgroup: &str) -> Result<u64, CgroupError> {
        let path = match self.version {
            CgroupVersion::V1 => self.v1_file(cgroup, "pids", pids::CURRENT)?,
            CgroupVersion::V2 => self.v2_file(cgroup, pids::CURRENT)?,
        };
        parse_file(&path, pids::parse_current)
    }

    /// CPU usage and throttling (v1: `cpuacct.usage` + `cpu.stat`).
    pub fn read_cpu_stat(&self, cgroup: &str) -> Result<CpuStat, CgroupError> {
        match self.version {
            CgroupVersion::V2 => Ok(cpu::parse_stat(&read(&self.v2_file(cgroup, cpu::STAT)?)?)),
            CgroupVersion::V1 => {
                let mut stat = cpu::parse_stat(&read(&self.v1_file(cgroup, "cpu", cpu::STAT)?)?);
                let usage = self.v1_file(cgroup, "cpuacct", cpu::V1_CPUACCT_USAGE)?;
                stat.usage_usec = Some(parse_file(&usage, parse_u64)? / 1000);
                Ok(stat)
            }
        }
    }

    /// PIDs of every process in the cgroup and its descendants (from the
    /// `pids` hierarchy on v1, falling back to `memory`/`cpu`), e.g. to
    /// kill leftovers before [`remove_pod`](Self::remove_pod).
    pub fn read_procs(&self, cgroup: &str) -> Result<Vec<i32>, CgroupError> {
        let rel = check_cgroup_path(cgroup)?;
        let dir = match self.version {
            CgroupVersion::V2 => self.mount_root.join(&rel),
            CgroupVersion::V1 => match ["pids", "memory", "cpu"]
                .iter()
                .map(|c| self.mount_root.join(c))
                .find(|p| p.is_dir())
            {
                Some(h) => h.join(&rel),
                None => return Ok(Vec::new()),
            },
        };
        let mut out = Vec::new();
        collect_procs(&dir, &mut out)?;
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    // ---- internals ----

    fn qos_rel(&self, qos: QosClass) -> String {
        let kubepods = join_rel(&self.cgroup_root, KUBEPODS);
        match qos {
            QosClass::Guaranteed => kubepods,
            QosClass::Burstable => format!("{kubepods}/burstable"),
            QosClass::BestEffort => format!("{kubepods}/besteffort"),
        }
    }

    fn pod_rel(&self, uid: &str, qos: QosClass) -> String {
        format!("{}/pod{uid}", self.qos_rel(qos))
    }

    fn create(&self, rel: &str) -> Result<(), CgroupError> {
        match self.version {
            CgroupVersion::V1 => v1::create(&self.mount_root, rel),
            CgroupVersion::V2 => v2::create(&self.mount_root, rel),
        }
    }

    fn apply(&self, rel: &str, s: &Settings) -> Result<(), CgroupError> {
        match self.version {
            CgroupVersion::V1 => v1::apply(&self.mount_root, rel, s),
            CgroupVersion::V2 => v2::apply(&self.mount_root, rel, s),
        }
    }

    /// Hierarchy roots to search for pod cgroups.
    fn scan_roots(&self) -> Vec<PathBuf> {
        match self.version {
            CgroupVersion::V1 => v1::mounted(&self.mount_root)
                .into_iter()
                .map(|(_, p)| p)
                .collect(),
            CgroupVersion::V2 => vec![self.mount_root.clone()],
        }
    }

    fn remove_everywhere(&self, rel: &str) -> Result<(), CgroupError> {
        let hierarchies = match self.version {
            CgroupVersion::V1 => v1::all_hierarchies(&self.mount_root)?,
            CgroupVersion::V2 => vec![self.mount_root.clone()],
        };
        let mut first_err = None;
        for h in hierarchies {
            if let Err(e) = remove_tree(&h.join(rel)) {
                log::debug!("cgroup removal: {e}");
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    fn v1_file(&self, cgroup: &str, controller: &str, file: &str) -> Result<PathBuf, CgroupError> {
        Ok(self
            .mount_root
            .join(controller)
            .join(check_cgroup_path(cgroup)?)
            .join(file))
    }

    fn v2_file(&self, cgroup: &str, file: &str) -> Result<PathBuf, CgroupError> {
        Ok(self.mount_root.join(check_cgroup_path(cgroup)?).join(file))
    }
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
mod tests {
    use super::testutil::TempTree;
    use super::*;

    const UID: &str = "0f3c2a9e-1111-2222-3333-444455556666";
    const V1_ALL: &[&str] = &[
        "cpu", "cpuacct", "cpuset", "memory", "pids", "freezer", "devices",
    ];

    fn burstable() -> PodResources {
        PodResources {
            cpu_request_millis: 250,
            cpu_limit_millis: Some(500),
            memory_limit_bytes: Some(64 << 20),
            memory_request_bytes: 32 << 20,
        }
    }

    #[test]
    fn a_root_with_cgroup_controllers_is_detected_as_v2() {
        let t = TempTree::v2("detect2", "cpu memory");
        assert_eq!(detect(t.path()).unwrap(), CgroupVersion::V2);
    }

    #[test]
    fn per_controller_directories_and_a_unified_subdir_are_detected_as_v1() {
        let t = TempTree::v1("detect1", &["cpu", "memory"]);
        t.put("unified/cgroup.controllers", "");
        assert_eq!(detect(t.path()).unwrap(), CgroupVersion::V1);
    }

    #[test]
    fn a_missing_mount_root_is_an_error() {
        assert!(detect(Path::new("/nonexistent/picolet/cgroup")).is_err());
    }

    #[test]
    fn cgroup_parent_follows_the_kubelet_cgroupfs_naming() {
        let t = TempTree::v1("parent", &["cpu"]);
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        assert_eq!(
            cg.pod_cgroup_parent("u1", QosClass::Burstable),
            "/kubepods/burstable/podu1"
        );
        assert_eq!(
            cg.pod_cgroup_parent("u1", QosClass::BestEffort),
            "/kubepods/besteffort/podu1"
        );
        assert_eq!(
            cg.pod_cgroup_parent("u1", QosClass::Guaranteed),
            "/kubepods/podu1"
        );
        let cg = PodCgroups::new(t.path(), "/picolet-test-1/", true).unwrap();
        assert_eq!(
            cg.pod_cgroup_parent("u1", QosClass::Burstable),
            "/picolet-test-1/kubepods/burstable/podu1"
        );
        let cg = PodCgroups::new(t.path(), "/picolet-test-1", false).unwrap();
        assert_eq!(
            cg.pod_cgroup_parent("u1", QosClass::Burstable),
            "/picolet-test-1"
        );
        let cg = PodCgroups::new(t.path(), "", false).unwrap();
        assert_eq!(cg.pod_cgroup_parent("u1", QosClass::Guaranteed), "/");
    }

    #[test]
    fn a_cgroup_root_with_dot_dot_is_rejected() {
        let t = TempTree::v1("dotdot", &["cpu"]);
        assert!(PodCgroups::new(t.path(), "/a/../b", true).is_err());
    }

    #[test]
    fn a_uid_with_a_slash_is_rejected_before_touching_the_filesystem() {
        let t = TempTree::v1("baduid", &["cpu"]);
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        assert!(matches!(
            cg.ensure_pod("../x", QosClass::Burstable, &burstable(), None),
            Err(CgroupError::InvalidName(_))
        ));
        assert!(matches!(
            cg.remove_pod("", QosClass::Burstable),
            Err(CgroupError::InvalidName(_))
        ));
    }

    #[test]
    fn v1_qos_hierarchy_is_created_in_each_controller_with_cpusets_copied() {
        let t = TempTree::v1("v1qos", V1_ALL);
        let cg = PodCgroups::new(t.path(), "/picolet-test-1", true).unwrap();
        cg.ensure_qos_hierarchy().unwrap();
        for c in ["cpu", "cpuacct", "cpuset", "memory", "pids"] {
            for d in ["kubepods", "kubepods/burstable", "kubepods/besteffort"] {
                assert!(t.exists(&format!("{c}/picolet-test-1/{d}")), "{c}/{d}");
            }
        }
        assert!(
            !t.exists("freezer/picolet-test-1"),
            "freezer is left to runc"
        );
        assert_eq!(t.get("cpuset/picolet-test-1/cpuset.cpus"), "0-3");
        assert_eq!(
            t.get("cpuset/picolet-test-1/kubepods/besteffort/cpuset.cpus"),
            "0-3"
        );
        assert_eq!(
            t.get("cpuset/picolet-test-1/kubepods/burstable/cpuset.mems"),
            "0"
        );
        assert_eq!(
            t.get("cpu/picolet-test-1/kubepods/besteffort/cpu.shares"),
            "2"
        );
        // idempotent
        cg.ensure_qos_hierarchy().unwrap();
    }

    #[test]
    fn v1_missing_controllers_are_skipped_without_error() {
        let t = TempTree::v1("v1missing", &["memory"]);
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        cg.ensure_qos_hierarchy().unwrap();
        cg.ensure_pod(UID, QosClass::Burstable, &burstable(), Some(100))
            .unwrap();
        assert_eq!(
            t.get(&format!(
                "memory/kubepods/burstable/pod{UID}/memory.limit_in_bytes"
            )),
            "67108864"
        );
        assert!(!t.exists("cpu"));
    }

    #[test]
    fn v1_burstable_pod_gets_shares_quota_memory_and_pids_limits() {
        let t = TempTree::v1("v1pod", V1_ALL);
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        cg.ensure_qos_hierarchy().unwrap();
        cg.ensure_pod(UID, QosClass::Burstable, &burstable(), Some(1024))
            .unwrap();
        let pod = format!("kubepods/burstable/pod{UID}");
        assert_eq!(t.get(&format!("cpu/{pod}/cpu.shares")), "256");
        assert_eq!(t.get(&format!("cpu/{pod}/cpu.cfs_period_us")), "100000");
        assert_eq!(t.get(&format!("cpu/{pod}/cpu.cfs_quota_us")), "50000");
        assert_eq!(
            t.get(&format!("memory/{pod}/memory.limit_in_bytes")),
            "67108864"
        );
        assert_eq!(t.get(&format!("pids/{pod}/pids.max")), "1024");
        assert_eq!(t.get(&format!("cpuset/{pod}/cpuset.cpus")), "0-3");
        assert!(t.exists(&format!("cpuacct/{pod}")));
    }

    #[test]
    fn v1_pod_without_limits_is_written_as_unlimited() {
        let t = TempTree::v1("v1nolimit", V1_ALL);
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        let res = PodResources {
            cpu_request_millis: 100,
            ..Default::default()
        };
        cg.ensure_pod(UID, QosClass::Burstable, &res, None).unwrap();
        let pod = format!("kubepods/burstable/pod{UID}");
        assert_eq!(t.get(&format!("cpu/{pod}/cpu.shares")), "102");
        assert_eq!(t.get(&format!("cpu/{pod}/cpu.cfs_quota_us")), "-1");
        assert_eq!(t.get(&format!("memory/{pod}/memory.limit_in_bytes")), "-1");
        assert_eq!(t.get(&format!("pids/{pod}/pids.max")), "max");
    }

    #[test]
    fn best_effort_pods_get_minimum_shares_and_no_limits() {
        let t = TempTree::v1("v1be", V1_ALL);
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        cg.ensure_pod(UID, QosClass::BestEffort, &burstable(), None)
            .unwrap();
        let pod = format!("kubepods/besteffort/pod{UID}");
        assert_eq!(t.get(&format!("cpu/{pod}/cpu.shares")), "2");
        assert_eq!(t.get(&format!("memory/{pod}/memory.limit_in_bytes")), "-1");
    }

    #[test]
    fn disabling_cfs_quota_leaves_cpu_limits_unenforced() {
        let t = TempTree::v1("v1nocfs", V1_ALL);
        let cg = PodCgroups::new(t.path(), "/", true)
            .unwrap()
            .with_cpu_cfs_quota(false, 50_000);
        cg.ensure_pod(UID, QosClass::Guaranteed, &burstable(), None)
            .unwrap();
        assert_eq!(
            t.get(&format!("cpu/kubepods/pod{UID}/cpu.cfs_quota_us")),
            "-1"
        );
        assert_eq!(
            t.get(&format!("cpu/kubepods/pod{UID}/cpu.cfs_period_us")),
            "50000"
        );
    }

    #[test]
    fn v2_hierarchy_enables_available_controllers_at_every_level() {
        let t = TempTree::v2("v2qos", "cpuset cpu io memory hugetlb pids rdma misc");
        let cg = PodCgroups::new(t.path(), "/picolet-test-1", true).unwrap();
        cg.ensure_qos_hierarchy().unwrap();
        let want = "+cpuset +cpu +io +memory +hugetlb +pids";
        assert_eq!(t.get("cgroup.subtree_control"), want);
        assert_eq!(t.get("picolet-test-1/cgroup.subtree_control"), want);
        assert_eq!(
            t.get("picolet-test-1/kubepods/cgroup.subtree_control"),
            want
        );
        assert_eq!(
            t.get("picolet-test-1/kubepods/burstable/cgroup.subtree_control"),
            want
        );
        assert_eq!(t.get("picolet-test-1/kubepods/besteffort/cpu.weight"), "1");
    }

    #[test]
    fn v2_only_enables_what_the_parent_offers() {
        let t = TempTree::v2("v2partial", "memory pids");
        t.put("cgroup.subtree_control", "memory\n");
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        cg.ensure_qos_hierarchy().unwrap();
        assert_eq!(t.get("cgroup.subtree_control"), "+pids");
        assert_eq!(t.get("kubepods/cgroup.subtree_control"), "+memory +pids");
        assert!(
            !t.exists("kubepods/besteffort/cpu.weight"),
            "cpu is not available"
        );
    }

    #[test]
    fn v2_pod_gets_weight_cpu_max_memory_max_and_pids_max() {
        let t = TempTree::v2("v2pod", "cpuset cpu io memory pids");
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        cg.ensure_qos_hierarchy().unwrap();
        cg.ensure_pod(UID, QosClass::Burstable, &burstable(), Some(64))
            .unwrap();
        let pod = format!("kubepods/burstable/pod{UID}");
        assert_eq!(t.get(&format!("{pod}/cpu.weight")), "10");
        assert_eq!(t.get(&format!("{pod}/cpu.max")), "50000 100000");
        assert_eq!(t.get(&format!("{pod}/memory.max")), "67108864");
        assert_eq!(t.get(&format!("{pod}/pids.max")), "64");
        let res = PodResources {
            cpu_request_millis: 100,
            ..Default::default()
        };
        cg.ensure_pod(UID, QosClass::Burstable, &res, None).unwrap();
        assert_eq!(t.get(&format!("{pod}/cpu.max")), "max 100000");
        assert_eq!(t.get(&format!("{pod}/memory.max")), "max");
        assert_eq!(t.get(&format!("{pod}/pids.max")), "max");
    }

    #[test]
    fn removing_a_pod_removes_leftover_container_cgroups_in_every_hierarchy() {
        let t = TempTree::v1("v1rm", V1_ALL);
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        cg.ensure_pod(UID, QosClass::Guaranteed, &burstable(), None)
            .unwrap();
        let pod = format!("kubepods/pod{UID}");
        // what runc would leave behind: container dirs, also in freezer
        t.put(&format!("memory/{pod}/ctr1/memory.limit_in_bytes"), "1");
        t.put(&format!("freezer/{pod}/ctr1/freezer.state"), "THAWED");
        cg.remove_pod(UID, QosClass::Guaranteed).unwrap();
        for c in V1_ALL {
            assert!(!t.exists(&format!("{c}/{pod}")), "{c}");
        }
        assert!(t.exists("memory/kubepods"));
        // removing again is fine
        cg.remove_pod(UID, QosClass::Guaranteed).unwrap();
    }

    #[test]
    fn removing_a_v2_pod_and_everything_leaves_no_directories() {
        let t = TempTree::v2("v2rm", "cpu memory pids");
        let cg = PodCgroups::new(t.path(), "/picolet-test-2", true).unwrap();
        cg.ensure_qos_hierarchy().unwrap();
        cg.ensure_pod(UID, QosClass::BestEffort, &PodResources::default(), None)
            .unwrap();
        cg.remove_pod(UID, QosClass::BestEffort).unwrap();
        assert!(!t.exists(&format!("picolet-test-2/kubepods/besteffort/pod{UID}")));
        cg.remove_all().unwrap();
        assert!(!t.exists("picolet-test-2"));
        assert!(t.exists("cgroup.controllers"));
    }

    #[test]
    fn listing_finds_pod_directories_under_each_qos_level_once() {
        let t = TempTree::v1("v1list", V1_ALL);
        let cg = PodCgroups::new(t.path(), "/r", true).unwrap();
        cg.ensure_qos_hierarchy().unwrap();
        cg.ensure_pod("aaa", QosClass::Guaranteed, &burstable(), None)
            .unwrap();
        cg.ensure_pod("bbb", QosClass::Burstable, &burstable(), None)
            .unwrap();
        cg.ensure_pod("ccc", QosClass::BestEffort, &burstable(), None)
            .unwrap();
        t.put("memory/r/kubepods/burstable/notapod/x", "");
        t.put("memory/r/kubepods/burstable/podfile", "");
        let pods = cg.list_pods().unwrap();
        assert_eq!(
            pods,
            vec![
                (QosClass::Guaranteed, "aaa".to_string()),
                (QosClass::Burstable, "bbb".to_string()),
                (QosClass::BestEffort, "ccc".to_string()),
            ]
        );
    }

    #[test]
    fn without_per_qos_nothing_is_created_for_pods() {
        let t = TempTree::v1("noqos", V1_ALL);
        let cg = PodCgroups::new(t.path(), "/picolet", false).unwrap();
        cg.ensure_qos_hierarchy().unwrap();
        cg.ensure_pod(UID, QosClass::Burstable, &burstable(), None)
            .unwrap();
        assert!(t.exists("memory/picolet"));
        assert!(!t.exists("memory/picolet/kubepods"));
        assert!(cg.list_pods().unwrap().is_empty());
        cg.remove_pod(UID, QosClass::Burstable).unwrap();
    }

    #[test]
    fn qos_shares_are_written_as_shares_on_v1_and_weight_on_v2() {
        let shares = |burstable| QosShares {
            burstable,
            besteffort: MIN_SHARES,
        };
        let t = TempTree::v1("v1shares", V1_ALL);
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        cg.ensure_qos_hierarchy().unwrap();
        cg.update_qos_shares(shares(1536)).unwrap();
        assert_eq!(t.get("cpu/kubepods/burstable/cpu.shares"), "1536");
        cg.update_qos_shares(shares(2)).unwrap();
        assert_eq!(t.get("cpu/kubepods/burstable/cpu.shares"), "2");
        assert_eq!(t.get("cpu/kubepods/besteffort/cpu.shares"), "2");
        let t = TempTree::v2("v2shares", "cpu");
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        cg.ensure_qos_hierarchy().unwrap();
        cg.update_qos_shares(shares(1024)).unwrap();
        assert_eq!(t.get("kubepods/burstable/cpu.weight"), "39");
    }

    #[test]
    fn node_allocatable_lands_on_the_kubepods_cgroup() {
        let limits = KubepodsLimits {
            cpu_shares: 3328,
            memory_bytes: 874 << 20,
            pids: Some(31768),
        };
        let t = TempTree::v1("v1alloc", V1_ALL);
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        cg.ensure_qos_hierarchy().unwrap();
        cg.enforce_node_allocatable(limits).unwrap();
        assert_eq!(t.get("cpu/kubepods/cpu.shares"), "3328");
        assert_eq!(
            t.get("memory/kubepods/memory.limit_in_bytes"),
            (874u64 << 20).to_string()
        );
        assert_eq!(t.get("pids/kubepods/pids.max"), "31768");
        let t = TempTree::v2("v2alloc", "cpu memory pids");
        let cg = PodCgroups::new(t.path(), "/picolet", true).unwrap();
        cg.ensure_qos_hierarchy().unwrap();
        cg.enforce_node_allocatable(KubepodsLimits {
            pids: None,
            ..limits
        })
        .unwrap();
        assert_eq!(t.get("picolet/kubepods/cpu.weight"), "127");
        assert_eq!(
            t.get("picolet/kubepods/memory.max"),
            (874u64 << 20).to_string()
        );
        assert!(!t.exists("picolet/kubepods/pids.max"));
    }

    #[test]
    fn v1_stats_are_read_from_the_pod_cgroup() {
        let t = TempTree::v1("v1stats", V1_ALL);
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        let parent = cg.pod_cgroup_parent(UID, QosClass::Burstable);
        let pod = format!("kubepods/burstable/pod{UID}");
        t.put(&format!("memory/{pod}/memory.usage_in_bytes"), "1000000\n");
        t.put(
            &format!("memory/{pod}/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        t.put(
            &format!("memory/{pod}/memory.stat"),
            "cache 10\ninactive_file 5\ntotal_inactive_file 400000\n",
        );
        t.put(&format!("pids/{pod}/pids.current"), "7\n");
        t.put(&format!("pids/{pod}/cgroup.procs"), "10\n11\n");
        t.put(&format!("pids/{pod}/ctr/cgroup.procs"), "12\n");
        t.put(
            &format!("cpu/{pod}/cpu.stat"),
            "nr_periods 10\nnr_throttled 2\nthrottled_time 5000000\n",
        );
        t.put(&format!("cpuacct/{pod}/cpuacct.usage"), "3000000\n");
        assert_eq!(cg.read_memory_usage(&parent).unwrap(), 1_000_000);
        assert_eq!(cg.read_memory_limit(&parent).unwrap(), None);
        assert_eq!(cg.read_memory_working_set(&parent).unwrap(), 600_000);
        assert_eq!(cg.read_pids_current(&parent).unwrap(), 7);
        assert_eq!(cg.read_procs(&parent).unwrap(), vec![10, 11, 12]);
        let cpu = cg.read_cpu_stat(&parent).unwrap();
        assert_eq!(
            (
                cpu.usage_usec,
                cpu.nr_periods,
                cpu.nr_throttled,
                cpu.throttled_usec
            ),
            (Some(3000), 10, 2, 5000)
        );
    }

    #[test]
    fn v2_stats_are_read_from_the_pod_cgroup() {
        let t = TempTree::v2("v2stats", "cpu memory pids");
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        let parent = cg.pod_cgroup_parent(UID, QosClass::Guaranteed);
        let pod = format!("kubepods/pod{UID}");
        t.put(&format!("{pod}/memory.current"), "2048\n");
        t.put(&format!("{pod}/memory.max"), "4096\n");
        t.put(
            &format!("{pod}/memory.stat"),
            "anon 1024\ninactive_file 1000\n",
        );
        t.put(&format!("{pod}/pids.current"), "3\n");
        t.put(
            &format!("{pod}/cpu.stat"),
            "usage_usec 77\nuser_usec 70\nsystem_usec 7\n",
        );
        assert_eq!(cg.read_memory_usage(&parent).unwrap(), 2048);
        assert_eq!(cg.read_memory_limit(&parent).unwrap(), Some(4096));
        assert_eq!(cg.read_memory_working_set(&parent).unwrap(), 1048);
        assert_eq!(cg.read_pids_current(&parent).unwrap(), 3);
        assert_eq!(cg.read_cpu_stat(&parent).unwrap().usage_usec, Some(77));
    }

    #[test]
    fn unreadable_stats_name_the_file_in_the_error() {
        let t = TempTree::v2("v2err", "memory");
        let cg = PodCgroups::new(t.path(), "/", true).unwrap();
        t.put("kubepods/memory.current", "lots\n");
        let e = cg.read_memory_usage("/kubepods").unwrap_err();
        assert!(matches!(e, CgroupError::Parse { .. }));
        assert!(e.to_string().contains("kubepods/memory.current"), "{e}");
        let e = cg.read_pids_current("/kubepods").unwrap_err();
        assert!(e.to_string().contains("kubepods/pids.current"), "{e}");
        assert!(matches!(
            cg.read_memory_usage("/../etc"),
            Err(CgroupError::InvalidName(_))
        ));
    }

    #[test]
    fn max_and_integer_values_parse() {
        assert_eq!(parse_max("max\n"), Some(None));
        assert_eq!(parse_max("42\n"), Some(Some(42)));
        assert_eq!(parse_max("-1"), None);
        assert_eq!(parse_u64(" 5 \n"), Some(5));
        assert_eq!(parse_u64("x"), None);
    }

    /// The one test that touches the real kernel: skips itself unless root
    /// with a writable /sys/fs/cgroup.
    #[test]
    fn a_real_pod_cgroup_gets_its_memory_limit_and_is_removed_again() {
        let root = Path::new("/sys/fs/cgroup");
        if !rustix::process::geteuid().is_root() {
            println!("skipped: not root");
            return;
        }
        let Ok(version) = detect(root) else {
            println!("skipped: no cgroup filesystem at {}", root.display());
            return;
        };
        let probe = match version {
            CgroupVersion::V1 => root.join("memory"),
            CgroupVersion::V2 => root.to_path_buf(),
        };
        if !is_cgroupfs(&probe) || rustix::fs::access(&probe, rustix::fs::Access::WRITE_OK).is_err()
        {
            println!(
                "skipped: {} is not a writable cgroup filesystem",
                probe.display()
            );
            return;
        }
        let cgroup_root = format!("/picolet-unit-{}", std::process::id());
        let cg = PodCgroups::new(root, &cgroup_root, true).unwrap();
        // Kills the helper process and removes everything even if an
        // assertion fails half-way.
        struct Cleanup<'a>(&'a PodCgroups, Option<std::process::Child>);
        impl Drop for Cleanup<'_> {
            fn drop(&mut self) {
                if let Some(mut child) = self.1.take() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                let _ = self.0.remove_all();
            }
        }
        let mut cleanup = Cleanup(&cg, None);

        cg.ensure_qos_hierarchy().unwrap();
        cg.ensure_pod(UID, QosClass::Burstable, &burstable(), Some(64))
            .unwrap();
        let parent = cg.pod_cgroup_parent(UID, QosClass::Burstable);
        assert_eq!(cg.read_memory_limit(&parent).unwrap(), Some(64 << 20));
        assert_eq!(cg.read_memory_usage(&parent).unwrap(), 0);
        assert!(cg.read_procs(&parent).unwrap().is_empty());
        if root.join("pids").is_dir() || version == CgroupVersion::V2 {
            assert_eq!(cg.read_pids_current(&parent).unwrap(), 0);
        }
        assert_eq!(
            cg.list_pods().unwrap(),
            vec![(QosClass::Burstable, UID.to_string())]
        );
        let rel = format!("{}/kubepods/burstable/pod{UID}", &cgroup_root[1..]);
        if version == CgroupVersion::V1 {
            assert_eq!(
                read(&root.join("cpu").join(&rel).join("cpu.cfs_quota_us"))
                    .unwrap()
                    .trim(),
                "50000"
            );
            assert_eq!(
                read(&root.join("cpu").join(&rel).join("cpu.shares"))
                    .unwrap()
                    .trim(),
                "256"
            );
            let parent_cpus = read(&root.join("cpuset/cpuset.cpus")).unwrap();
            assert_eq!(
                read(&root.join("cpuset").join(&rel).join("cpuset.cpus")).unwrap(),
                parent_cpus
            );
        }

        // A process in a container cgroup below the pod (as runc would
        // leave it) makes removal report Busy until it is gone.
        let child = std::process::Command::new("sleep").arg("30").spawn();
        if let Ok(child) = child {
            let pid = child.id();
            cleanup.1 = Some(child);
            let hierarchies: Vec<PathBuf> = match version {
                CgroupVersion::V1 => ["memory", "pids"]
                    .iter()
                    .map(|c| root.join(c))
                    .filter(|h| h.is_dir())
                    .collect(),
                CgroupVersion::V2 => vec![root.to_path_buf()],
            };
            for h in &hierarchies {
                let ctr = h.join(&rel).join("ctr");
                mkdir(&ctr).unwrap();
                write(&ctr.join("cgroup.procs"), &pid.to_string()).unwrap();
            }
            assert_eq!(cg.read_procs(&parent).unwrap(), vec![pid as i32]);
            assert!(matches!(
                cg.remove_pod(UID, QosClass::Burstable),
                Err(CgroupError::Busy { .. })
            ));
            let mut child = cleanup.1.take().unwrap();
            child.kill().unwrap();
            child.wait().unwrap();
        } else {
            println!("note: no `sleep` binary, Busy path not exercised");
        }

        cg.remove_pod(UID, QosClass::Burstable).unwrap();
        assert!(cg.list_pods().unwrap().is_empty());
        cg.remove_all().unwrap();
        assert!(!probe.join(&cgroup_root[1..]).exists());
    }
}
