//! What pods need on the host, and what the agent knows about the host.
//!
//! - the kubelet's directories (`rootDir`, `podLogsDir`), a pod's own
//!   directory and log directory, created before its sandbox;
//! - per container: emptyDir volumes (a tmpfs for `medium: Memory`,
//!   [`super::tmpfs`]), hostPath volumes of the creating
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

use super::housekeeping::remove_dir_logged;
use super::AgentConfig;
use crate::pod::{accessors, facts, spec};

/// Facts about the host, read once at start.
#[derive(Clone, Debug)]
pub(in crate::agent) struct HostFacts {
    /// The node's IPs as kubelet takes them from the Node's InternalIPs
    /// ([`host_ips`]): pods' `status.hostIPs`, a hostNetwork pod's IPs.
    pub host_ips: Vec<String>,
    /// Total memory in bytes (OOM score, swap shares).
    pub node_memory: u64,
    /// The node's allocatable as the Node reports it (capacity minus
    /// reservations and hard eviction thresholds): the downward API's
    /// default for unset limits.
    pub allocatable: spec::NodeAllocatable,
    /// `/etc/resolv.conf`, for dnsPolicy Default.
    pub resolv_conf: Option<String>,
    /// The sysctls pods may set: the safe ones this kernel namespaces and
    /// `allowedUnsafeSysctls`.
    pub sysctls: crate::pod::sysctls::Allowlist,
}

impl HostFacts {
    /// The node's IPs ([`host_ips`]), memory (1 GiB if unreadable) and
    /// allocatable, from [`crate::node::info`] and `cfg`.
    pub fn detect(cfg: &AgentConfig) -> HostFacts {
        let m = crate::node::info::read(&cfg.root_dir);
        let capacity = crate::agent::node_view::Amounts {
            cpu_millis: m.cpus * 1000,
            memory_bytes: m.memory_bytes,
            ephemeral_storage_bytes: m.root_fs_bytes,
            pods: cfg.max_pods as u64,
        };
        let alloc = crate::agent::node_view::node_allocatable(capacity, &cfg.eviction);
        HostFacts {
            host_ips: host_ips(&cfg.node_ips, crate::node::info::primary_ipv4),
            node_memory: Some(m.memory_bytes).filter(|b| *b > 0).unwrap_or(1 << 30),
            allocatable: node_allocatable(capacity, alloc),
            resolv_conf: fs::read_to_string("/etc/resolv.conf").ok(),
            // The configuration's entries were checked when it was read.
            sysctls: crate::pod::sysctls::Allowlist::new(
                crate::pod::sysctls::kernel_version(&m.kernel_version),
                &cfg.allowed_unsafe_sysctls,
            )
            .unwrap_or_default(),
        }
    }
}

/// The pods' host IPs as kubelet's `GetNodeHostIPs` reads the Node's
/// InternalIPs: the first `nodeIP` and, dual-stack, the first of the other
/// family; without `nodeIP` the default route's address (`detected`, the
/// Node's InternalIP then), else 127.0.0.1.
pub(super) fn host_ips(
    node_ips: &[std::net::IpAddr],
    detected: fn() -> Option<String>,
) -> Vec<String> {
    let Some(first) = node_ips.first() else {
        return vec![detected().unwrap_or_else(|| "127.0.0.1".to_string())];
    };
    let other = node_ips.iter().find(|ip| ip.is_ipv4() != first.is_ipv4());
    std::iter::once(first)
        .chain(other)
        .map(|ip| ip.to_string())
        .collect()
}

/// Allocatable for the downward API: a resource whose capacity is unknown
/// (zero) is one the Node does not report.
pub(super) fn node_allocatable(
    capacity: crate::agent::node_view::Amounts,
    alloc: crate::agent::node_view::Amounts,
) -> spec::NodeAllocatable {
    let known = |cap: u64, v: u64| (cap > 0).then_some(v);
    spec::NodeAllocatable {
        cpu_millis: known(capacity.cpu_millis, alloc.cpu_millis),
        memory_bytes: known(capacity.memory_bytes, alloc.memory_bytes),
        ephemeral_storage_bytes: known(
            capacity.ephemeral_storage_bytes,
            alloc.ephemeral_storage_bytes,
        ),
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
pub(in crate::agent) fn prepare_dirs(cfg: &AgentConfig) {
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
    let dir = facts::pod_dir(&cfg.root_dir, uid)
        .join("volumes")
        .join(super::config_volumes::EMPTY_DIR_PLUGIN);
    if dir.exists() {
        super::tmpfs::unmount_under(&dir);
        remove_dir_logged(&dir);
    }
}

/// The node's hosts file, the base of a hostNetwork pod's.
const NODE_HOSTS_FILE: &str = "/etc/hosts";

/// What [`prepare_container_files`] made for one container.
pub(super) struct ContainerFiles {
    /// emptyDir volume name → host directory.
    pub empty_dirs: HashMap<String, PathBuf>,
    pub termination_log: PathBuf,
    /// The managed hosts file (every pod has one).
    pub etc_hosts: Option<PathBuf>,
}

/// Volumes and files on the host for one container start;
/// `allocatable_memory` sizes memory-medium emptyDirs.
pub(super) fn prepare_container_files(
    cfg: &AgentConfig,
    pod: &Pod,
    c: &Container,
    attempt: u32,
    pod_ips: &[String],
    allocatable_memory: Option<u64>,
) -> Result<ContainerFiles, String> {
    let pod_dir = facts::pod_dir(&cfg.root_dir, accessors::uid(pod));
    let mut empty_dirs = HashMap::new();
    let in_memory: HashMap<String, Option<u64>> =
        spec::memory_empty_dirs(pod).into_iter().collect();
    for name in spec::empty_dir_volumes(pod) {
        let dir = pod_dir
            .join("volumes")
            .join(super::config_volumes::EMPTY_DIR_PLUGIN)
            .join(&name);
        fs::create_dir_all(&dir)
            .map_err(|e| format!("emptyDir {name}: creating {}: {e}", dir.display()))?;
        let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o777));
        if let Some(size_limit) = in_memory.get(&name) {
            mount_memory_empty_dir(pod, &name, &dir, *size_limit, allocatable_memory);
        }
        // kubelet's volume ownership for a read-write volume: group
        // fsGroup, setgid so what the containers create inherits it.
        if let Some(gid) = accessors::fs_group(pod) {
            super::atomic_writer::set_fs_group(&dir, gid, false)
                .map_err(|e| format!("emptyDir {name}: {e}"))?;
        }
        empty_dirs.insert(name, dir);
    }
    for (volume, sub_path) in spec::empty_dir_sub_paths(pod, c) {
        if let Some(root) = empty_dirs.get(&volume) {
            make_sub_path_dir(root, &sub_path)
                .map_err(|e| format!("emptyDir {volume}: subPath {sub_path:?}: {e}"))?;
        }
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
    // kubelet manages /etc/hosts for every pod: a hostNetwork pod gets
    // the node's own file under its header, with the pod's hostAliases.
    let hosts = if accessors::host_network(pod) {
        let node_hosts = fs::read_to_string(NODE_HOSTS_FILE)
            .map_err(|e| format!("reading {NODE_HOSTS_FILE}: {e}"))?;
        spec::host_network_hosts_file(pod, &node_hosts)
    } else {
        spec::hosts_file(pod, pod_ips, &cfg.cluster_domain)
    };
    let path = pod_dir.join("etc-hosts");
    fs::write(&path, hosts).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let etc_hosts = Some(path);
    let log_file =
        facts::log_dir(&cfg.pod_logs_dir, pod).join(spec::container_log_path(&c.name, attempt));
    if let Some(log_dir) = log_file.parent() {
        mkdir(log_dir, 0o755)?;
    }
    // A leftover log file of the same attempt (from a failed create) goes.
    let _ = fs::remove_file(&log_file);
    Ok(ContainerFiles {
        empty_dirs,
        termination_log,
        etc_hosts,
    })
}

/// Creates the missing directories of `sub_path` under the volume's `root`,
/// each with the root's mode (permissions, setgid, sticky) whatever the
/// umask, as kubelet does before a container mounts a subPath; their group
/// follows the root's setgid (fsGroup). An existing component that is a
/// symlink is refused: a container could have pointed it anywhere on the
/// host.
fn make_sub_path_dir(root: &Path, sub_path: &str) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let mode = fs::metadata(root)
        .map_err(|e| format!("reading {}: {e}", root.display()))?
        .mode()
        & 0o7777;
    let mut path = root.to_path_buf();
    for part in Path::new(sub_path).components() {
        path.push(part);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!("{} is a symlink", path.display()))
            }
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        }
        mkdir(&path, mode)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(mode))
            .map_err(|e| format!("chmod {}: {e}", path.display()))?;
    }
    Ok(())
}

/// A `medium: Memory` emptyDir: a tmpfs sized as kubelet sizes it, with
/// `noswap` where supported; already mounted, it is left as it is. Where
/// tmpfs cannot be mounted (no CAP_SYS_ADMIN) it stays a directory.
fn mount_memory_empty_dir(
    pod: &Pod,
    name: &str,
    dir: &Path,
    size_limit: Option<u64>,
    allocatable_memory: Option<u64>,
) {
    if super::tmpfs::is_mount_point(dir) {
        return;
    }
    let size = spec::memory_volume_size(pod, size_limit, allocatable_memory);
    let options = super::tmpfs::options("", size, super::tmpfs::noswap_supported());
    if let Err(e) = super::tmpfs::mount(dir, &options) {
        log::warn!(
            "emptyDir {name} (medium Memory): mounting tmpfs on {}: {e}; a plain directory",
            dir.display()
        );
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::node_view::Amounts;

    fn default_route() -> Option<String> {
        Some("10.1.2.3".into())
    }

    fn no_route() -> Option<String> {
        None
    }

    #[test]
    fn host_ips_are_the_configured_node_ips_before_the_default_route() {
        let ips: Vec<std::net::IpAddr> = ["192.168.7.9", "192.168.7.10", "fd00::9"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(host_ips(&ips, default_route), ["192.168.7.9", "fd00::9"]);
        assert_eq!(host_ips(&ips[2..], default_route), ["fd00::9"]);
        assert_eq!(host_ips(&[], default_route), ["10.1.2.3"]);
        assert_eq!(host_ips(&[], no_route), ["127.0.0.1"]);
    }

    #[test]
    fn downward_allocatable_is_the_nodes_and_leaves_out_what_has_no_capacity() {
        let capacity = Amounts {
            cpu_millis: 4000,
            memory_bytes: 4 << 30,
            ephemeral_storage_bytes: 0,
            pods: 110,
        };
        let alloc = Amounts {
            cpu_millis: 3500,
            memory_bytes: 3 << 30,
            ephemeral_storage_bytes: 0,
            pods: 110,
        };
        let got = node_allocatable(capacity, alloc);
        assert_eq!(got.cpu_millis, Some(3500));
        assert_eq!(got.memory_bytes, Some(3 << 30));
        assert_eq!(got.ephemeral_storage_bytes, None);
    }
}
