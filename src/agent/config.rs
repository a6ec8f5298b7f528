//! [`AgentConfig`]: what the agent needs of the KubeletConfiguration,
//! resolved once (the runtime endpoint turned into a socket path, the node
//! name decided, optional values made explicit), and how it is built from
//! [`KubeletConfig`].
//!
//! Adding a kubelet field the agent needs is one line here. This file must
//! not know how the configuration is loaded (file, board profile, flags):
//! that is `config`'s job.

use std::path::{Path, PathBuf};
use std::time::Duration;

use std::collections::BTreeMap;

use crate::config::{KubeletConfig, SwapBehavior};
use crate::source::PodSource;

/// Everything the agent needs to know, resolved from the configuration.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub node_name: String,
    pub root_dir: PathBuf,
    pub static_pod_path: Option<PathBuf>,
    pub runtime_socket: PathBuf,
    pub runtime_request_timeout: Duration,
    pub cgroup_mount: PathBuf,
    pub cgroup_root: String,
    pub cgroups_per_qos: bool,
    pub pod_logs_dir: PathBuf,
    pub file_check_frequency: Duration,
    pub sync_frequency: Duration,
    pub max_pods: usize,
    pub container_log_max_size: u64,
    pub container_log_max_files: u32,
    pub serialize_image_pulls: bool,
    pub cluster_dns: Vec<String>,
    pub cluster_domain: String,
    pub pod_pids_limit: Option<i64>,
    pub admin_socket: PathBuf,
    pub node_labels: BTreeMap<String, String>,
    /// `allowedUnsafeSysctls`, for admission beside the safe sysctls.
    pub allowed_unsafe_sysctls: Vec<String>,
    /// `nodeIP` (`--node-ip`): the node's InternalIPs, the pods' hostIP
    /// (empty: the default route's address).
    pub node_ips: Vec<std::net::IpAddr>,
    pub memory_swap_behavior: SwapBehavior,
    /// `--offline-image-fallback`: run a present image when its pull fails
    /// for a network reason.
    pub offline_image_fallback: bool,
    /// Node-pressure eviction and image GC.
    pub eviction: EvictionConfig,
}

/// What the eviction task and image GC need of the configuration.
#[derive(Clone, Debug, Default)]
pub struct EvictionConfig {
    /// `evictionHard` and `evictionSoft` with their grace periods and
    /// `evictionMinimumReclaim`.
    pub thresholds: Vec<crate::node::eviction::Threshold>,
    pub pressure_transition_period: Duration,
    pub max_pod_grace_period: i64,
    /// The runtime's image store, when it is on its own filesystem
    /// (imagefs); `None`: imagefs is nodefs.
    pub image_dir: Option<PathBuf>,
    pub image_gc_high_threshold_percent: u8,
    pub image_gc_low_threshold_percent: u8,
    pub image_minimum_gc_age: Duration,
    /// `systemReserved` and `kubeReserved`, enforced on the `kubepods`
    /// cgroup when `enforceNodeAllocatable` has `pods`.
    pub system_reserved: crate::qos::allocatable::Reserved,
    pub kube_reserved: crate::qos::allocatable::Reserved,
    /// `systemReserved` plus `kubeReserved` ephemeral-storage: taken from
    /// allocatable, as the Node reports it.
    pub reserved_ephemeral_storage_bytes: u64,
    /// `enforceNodeAllocatable`.
    pub enforce_node_allocatable: crate::config::EnforceNodeAllocatable,
    /// `systemReservedCgroup` and `kubeReservedCgroup` (named in the log
    /// only: picolet does not limit them).
    pub reserved_cgroups: [String; 2],
}

/// A configuration the agent cannot run with.
#[derive(Debug, thiserror::Error)]
pub enum AgentConfigError {
    #[error("containerRuntimeEndpoint {0:?} is not a unix socket")]
    RuntimeEndpoint(String),
    #[error(transparent)]
    Eviction(#[from] crate::node::eviction::ThresholdError),
}

impl AgentConfig {
    /// The agent's view of `cfg`; pod cgroups go under `/sys/fs/cgroup`.
    pub fn new(cfg: &KubeletConfig) -> Result<AgentConfig, AgentConfigError> {
        let runtime_socket =
            crate::cri::socket_path(&cfg.container_runtime_endpoint).ok_or_else(|| {
                AgentConfigError::RuntimeEndpoint(cfg.container_runtime_endpoint.clone())
            })?;
        Ok(AgentConfig {
            node_name: cfg.node_name(),
            root_dir: cfg.root_dir.clone(),
            static_pod_path: cfg.static_pod_path.clone(),
            runtime_socket,
            runtime_request_timeout: cfg.runtime_request_timeout,
            cgroup_mount: Path::new("/sys/fs/cgroup").to_path_buf(),
            cgroup_root: cfg.cgroup_root.clone(),
            cgroups_per_qos: cfg.cgroups_per_qos,
            pod_logs_dir: cfg.pod_logs_dir.clone(),
            file_check_frequency: cfg.file_check_frequency,
            sync_frequency: cfg.sync_frequency,
            max_pods: cfg.max_pods as usize,
            container_log_max_size: cfg.container_log_max_size,
            container_log_max_files: cfg.container_log_max_files,
            serialize_image_pulls: cfg.serialize_image_pulls,
            cluster_dns: cfg.cluster_dns.iter().map(|ip| ip.to_string()).collect(),
            cluster_domain: cfg.cluster_domain.clone(),
            pod_pids_limit: (cfg.pod_pids_limit > 0).then_some(cfg.pod_pids_limit),
            admin_socket: cfg.admin_socket.clone(),
            node_labels: cfg.node_labels.clone(),
            allowed_unsafe_sysctls: cfg.allowed_unsafe_sysctls.clone(),
            node_ips: cfg.node_ip.clone(),
            memory_swap_behavior: cfg.memory_swap_behavior,
            offline_image_fallback: cfg.offline_image_fallback,
            eviction: EvictionConfig {
                thresholds: crate::node::eviction::threshold::from_config(
                    &cfg.eviction_hard,
                    &cfg.eviction_soft,
                    &cfg.eviction_soft_grace_period,
                    &cfg.eviction_minimum_reclaim,
                )?,
                pressure_transition_period: cfg.eviction_pressure_transition_period,
                max_pod_grace_period: cfg.eviction_max_pod_grace_period,
                image_dir: None,
                image_gc_high_threshold_percent: cfg.image_gc_high_threshold_percent,
                image_gc_low_threshold_percent: cfg.image_gc_low_threshold_percent,
                image_minimum_gc_age: cfg.image_minimum_gc_age,
                system_reserved: reserved(&cfg.system_reserved),
                kube_reserved: reserved(&cfg.kube_reserved),
                reserved_ephemeral_storage_bytes: [&cfg.system_reserved, &cfg.kube_reserved]
                    .iter()
                    .map(|r| r.ephemeral_storage_bytes.unwrap_or(0))
                    .fold(0u64, u64::saturating_add),
                enforce_node_allocatable: cfg.enforce_node_allocatable,
                reserved_cgroups: [
                    cfg.system_reserved_cgroup.clone(),
                    cfg.kube_reserved_cgroup.clone(),
                ],
            },
        })
    }

    /// The pod sources this configuration turns on; the agent waits for
    /// each of them to be ready before removing anything of theirs.
    pub fn sources(&self) -> Vec<PodSource> {
        let mut v = Vec::new();
        if self.static_pod_path.is_some() {
            v.push(PodSource::File);
        }
        v
    }
}

/// The parts of a reservation that bound the `kubepods` cgroup.
fn reserved(r: &crate::config::ReservedResources) -> crate::qos::allocatable::Reserved {
    crate::qos::allocatable::Reserved {
        cpu_millis: r.cpu_millis.unwrap_or(0),
        memory_bytes: r.memory_bytes.unwrap_or(0),
        pids: r.pids.unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_config_comes_from_the_kubelet_config_with_its_socket_resolved() {
        let mut k = KubeletConfig {
            container_runtime_endpoint: "unix:///run/containerd/containerd.sock".into(),
            pod_pids_limit: -1,
            ..Default::default()
        };
        let a = AgentConfig::new(&k).expect("valid");
        assert_eq!(
            a.runtime_socket,
            Path::new("/run/containerd/containerd.sock")
        );
        assert_eq!(a.pod_pids_limit, None);
        assert_eq!(a.max_pods, k.max_pods as usize);
        k.container_runtime_endpoint = "tcp://1.2.3.4:5".into();
        assert!(AgentConfig::new(&k)
            .unwrap_err()
            .to_string()
            .contains("tcp://1.2.3.4:5"));
    }

    #[test]
    fn a_static_pod_path_turns_the_file_source_on() {
        let mut k = KubeletConfig {
            static_pod_path: None,
            ..Default::default()
        };
        assert!(AgentConfig::new(&k).unwrap().sources().is_empty());
        k.static_pod_path = Some("/etc/kubernetes/manifests".into());
        assert_eq!(AgentConfig::new(&k).unwrap().sources(), [PodSource::File]);
    }
}
