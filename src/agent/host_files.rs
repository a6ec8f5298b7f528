//! What pods need on the host, and what the agent knows about the host.
//!
//! - the kubelet's directories (`rootDir`, `podLogsDir`), a pod's own
//!   directory and log directory, created before its sandbox;
//! - per container: emptyDir volumes, hostPath volumes of the creating
//!   kinds, the termination-log file, the managed `/etc/hosts` and the
//!   container's log directory, prepared before CreateContainer;
//! - [`HostFacts`]: the host IP, its memory and its resolv.conf, read once.
//!
//! The file contents are `pod::spec`'s (hosts file) and the paths
//! `pod::facts`' (pod dir, log dir); this file only touches the
//! filesystem. It must not know the runtime.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::AgentConfig;
use crate::pod::{accessors, facts, spec};

/// Facts about the host, read once at start.
#[derive(Clone, Debug)]
pub(super) struct HostFacts {
    /// The host's primary IP (a hostNetwork pod's IP).
    pub host_ip: String,
    /// Total memory in bytes (OOM score and resource env defaults).
    pub node_memory: u64,
    /// `/etc/resolv.conf`, for dnsPolicy Default.
    pub resolv_conf: Option<String>,
}

impl HostFacts {
    /// The host's primary IPv4 address (127.0.0.1 without a default
    /// route) and memory (1 GiB if unreadable), from [`crate::node::info`].
    pub fn detect() -> HostFacts {
        HostFacts {
            host_ip: crate::node::info::primary_ipv4().unwrap_or_else(|| "127.0.0.1".to_string()),
            node_memory: fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|m| crate::node::info::parse_mem_total(&m))
                .unwrap_or(1 << 30),
            resolv_conf: fs::read_to_string("/etc/resolv.conf").ok(),
        }
    }
}

fn mkdir(dir: &Path, mode: u32) -> Result<(), String> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .map_err(|e| format!("creating {}: {e}", dir.display()))
}

/// `rootDir` and `podLogsDir`, at start.
pub(super) fn prepare_dirs(cfg: &AgentConfig) {
    for (dir, mode) in [(&cfg.root_dir, 0o750), (&cfg.pod_logs_dir, 0o755)] {
        if let Err(e) = mkdir(dir, mode) {
            log::error!("{e}");
        }
    }
}

/// The pod's log directory and its own directory, before its sandbox.
pub(super) fn prepare_pod_dirs(cfg: &AgentConfig, pod: &Pod) -> Result<(), String> {
    mkdir(&facts::log_dir(&cfg.pod_logs_dir, pod), 0o755)?;
    mkdir(&facts::pod_dir(&cfg.root_dir, accessors::uid(pod)), 0o750)
}

/// Removes the pod's directory and log directory (the pod is gone).
pub(super) fn remove_pod_dirs(cfg: &AgentConfig, pod: &Pod) {
    let uid = accessors::uid(pod);
    if uid.is_empty() {
        return;
    }
    let pod_dir = facts::pod_dir(&cfg.root_dir, uid);
    super::config_volumes::unmount_volumes(&pod_dir);
    remove_dir_logged(&pod_dir);
    if !accessors::name(pod).is_empty() {
        remove_dir_logged(&facts::log_dir(&cfg.pod_logs_dir, pod));
    }
}

/// Tears down the emptyDir volumes of a pod that stopped for good (an
/// evicted pod), as kubelet's volume manager does for terminated pods: the
/// space goes back to nodefs. A pod that runs again gets new ones.
pub(super) fn remove_empty_dirs(cfg: &AgentConfig, pod: &Pod) {
    let uid = accessors::uid(pod);
    if uid.is_empty() {
        return;
    }
    let dir = facts::pod_dir(&cfg.root_dir, uid).join("volumes/kubernetes.io~empty-dir");
    if dir.exists() {
        remove_dir_logged(&dir);
    }
}

/// What [`prepare_container_files`] made for one container.
pub(super) struct ContainerFiles {
    /// emptyDir volume name → host directory.
    pub empty_dirs: HashMap<String, PathBuf>,
    pub termination_log: PathBuf,
    /// The managed hosts file; `None` for hostNetwork pods.
    pub etc_hosts: Option<PathBuf>,
}

/// Volumes and files on the host for one container start.
pub(super) fn prepare_container_files(
    cfg: &AgentConfig,
    pod: &Pod,
    c: &Container,
    attempt: u32,
    pod_ips: &[String],
) -> Result<ContainerFiles, String> {
    let pod_dir = facts::pod_dir(&cfg.root_dir, accessors::uid(pod));
    let mut empty_dirs = HashMap::new();
    for name in spec::empty_dir_volumes(pod) {
        let dir = pod_dir.join("volumes/kubernetes.io~empty-dir").join(&name);
        fs::create_dir_all(&dir)
            .map_err(|e| format!("emptyDir {name}: creating {}: {e}", dir.display()))?;
        let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o777));
        // kubelet's volume ownership for a read-write volume: group
        // fsGroup, setgid so what the containers create inherits it.
        if let Some(gid) = accessors::fs_group(pod) {
            super::atomic_writer::set_fs_group(&dir, gid, false)
                .map_err(|e| format!("emptyDir {name}: {e}"))?;
        }
        empty_dirs.insert(name, dir);
    }
    for (path, kind) in spec::host_path_volumes(pod) {
        prepare_host_path(Path::new(&path), kind.as_deref())?;
    }
    let container_dir = pod_dir.join("containers").join(&c.name);
    fs::create_dir_all(&container_dir)
        .map_err(|e| format!("creating {}: {e}", container_dir.display()))?;
    let termination_log = container_dir.join(format!("termination-log-{attempt}"));
    // 0666 whatever the umask, as kubelet makes it: a container running as
    // any user writes its termination message there.
    let _ = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o666)
        .open(&termination_log)
        .and_then(|_| fs::set_permissions(&termination_log, fs::Permissions::from_mode(0o666)));
    let etc_hosts = if accessors::host_network(pod) {
        None
    } else {
        let path = pod_dir.join("etc-hosts");
        let hosts = spec::hosts_file(pod, pod_ips, &cfg.cluster_domain);
        fs::write(&path, hosts).map_err(|e| format!("writing {}: {e}", path.display()))?;
        Some(path)
    };
    let log_dir = facts::log_dir(&cfg.pod_logs_dir, pod).join(&c.name);
    mkdir(&log_dir, 0o755)?;
    // A leftover log file of the same attempt (from a failed create) goes.
    let _ = fs::remove_file(log_dir.join(format!("{attempt}.log")));
    Ok(ContainerFiles {
        empty_dirs,
        termination_log,
        etc_hosts,
    })
}

/// `DirectoryOrCreate`/`FileOrCreate` create; `Directory`/`File`/`Socket`
/// etc. must exist; "" checks nothing (kubelet semantics).
fn prepare_host_path(path: &Path, kind: Option<&str>) -> Result<(), String> {
    let fail = |what: &str| format!("hostPath {}: {what}", path.display());
    match kind.unwrap_or("") {
        "DirectoryOrCreate" => fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(path)
            .map_err(|e| fail(&format!("creating directory: {e}"))),
        "FileOrCreate" => {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).map_err(|e| fail(&format!("creating parent: {e}")))?;
            }
            fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o644)
                .open(path)
                .map(|_| ())
                .map_err(|e| fail(&format!("creating file: {e}")))
        }
        "Directory" if !path.is_dir() => Err(fail("is not a directory")),
        "File" if !path.is_file() => Err(fail("is not a file")),
        "Socket" | "CharDevice" | "BlockDevice" if !path.exists() => Err(fail("does not exist")),
        _ => Ok(()),
    }
}

pub(super) fn remove_dir_logged(dir: &Path) {
    match fs::remove_dir_all(dir) {
        Ok(()) => log::debug!("removed {}", dir.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log::warn!("removing {}: {e}", dir.display()),
    }
}
