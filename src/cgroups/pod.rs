//! [`PodCgroups`]: what the kubelet's cgroupfs driver creates where. The QoS
//! hierarchy (`<cgroupRoot>/kubepods/{burstable,besteffort}`) with its
//! shares and node-allocatable limits, one `pod<uid>` cgroup per pod with
//! its CPU, memory and pids limits, listing and removal, and the stats
//! reads of a cgroup (memory, CPU, pids) for eviction and the node API.
//!
//! How a path is created and configured on each hierarchy is `v1.rs` /
//! `v2.rs`'s; the file helpers and errors are `mod.rs`'s.
//!
//! Must not know: pods as API objects (it takes a UID, a QoS class and
//! [`PodResources`]), or who asks.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{
    check_cgroup_path, check_uid, collect_procs, cpu, detect, join_rel, memory, normalize,
    parse_file, parse_max, parse_u64, pids, read, remove_tree, v1, v2, CgroupError, CgroupVersion,
    CpuConfig, CpuStat, Settings,
};
use crate::qos::allocatable::{KubepodsLimits, QosShares};
use crate::qos::{
    milli_cpu_to_quota, milli_cpu_to_shares, PodResources, QosClass, MIN_SHARES, QUOTA_PERIOD_US,
};

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
