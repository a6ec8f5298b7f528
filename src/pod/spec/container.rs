//! The `CreateContainer` config (kubelet's `generateContainerConfig` +
//! `generateLinuxContainerConfig`): labels, annotations and the container
//! hash, command and args, resources (with the pod-level fallbacks,
//! hugepage limits and swap), mounts, environment and security context.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, ContainerPort, Pod};

use super::env::{container_env, expand, quantity_of, NodeAllocatable};
use super::sandbox::{linux_resources, UserNsMapping};
use super::security::container_security_context;
use super::volumes::container_mounts;
use super::{parse_resource, units, SpecError};
use crate::cri::api;
use crate::pod::accessors::{name as pod_name, namespace as pod_namespace, spec, uid as pod_uid};
use crate::pod::facts;
use crate::pod::labels::*;
use crate::qos;

/// The node's swap setup, as kubelet's `configureContainerSwapResources`
/// reads it (the caller detects it; `memorySwap.swapBehavior` decides
/// `limited`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Swap {
    /// No swap controller in the memory cgroup: nothing is sent.
    #[default]
    Unavailable,
    /// cgroup v1 with `memory.memsw.*`: the swap limit is the memory limit
    /// (kubelet's NoSwap there, whatever the behaviour).
    CgroupV1,
    /// cgroup v2 with `memory.swap.max`: NoSwap writes 0 there;
    /// LimitedSwap (`limited`) gives a Burstable container its share of the
    /// node's swap, in proportion to its memory request.
    CgroupV2 {
        limited: bool,
        node_memory_bytes: u64,
        node_swap_bytes: u64,
    },
}

/// The cgroup v2 file kubelet sets through `unified` for swap.
pub const CGROUP2_SWAP_MAX: &str = "memory.swap.max";

fn no_volume_dir(_: &str) -> Option<PathBuf> {
    None
}

/// Environment-specific inputs to [`container_config`].
#[derive(Clone, Copy)]
pub struct ContainerParams<'a> {
    /// Restart count; becomes the CRI attempt and the log file `<name>/<attempt>.log`.
    pub attempt: u32,
    /// The image to run: the resolved image ID/ref from ImageStatus/PullImage.
    pub image: &'a str,
    /// Primary pod IP (ignored when `pod_ips` is non-empty: its first entry wins).
    pub pod_ip: &'a str,
    /// All pod IPs.
    pub pod_ips: &'a [String],
    /// The node's IPs (downward API `status.hostIP`: the first;
    /// `status.hostIPs`: all, comma-separated).
    pub host_ips: &'a [String],
    /// emptyDir volume name -> the host directory the caller created for it.
    pub volume_dir: &'a dyn Fn(&str) -> Option<PathBuf>,
    /// oom_score_adj for this container ([`qos::container_oom_score_adj`]).
    pub oom_score_adj: i64,
    /// The node's hugepage sizes in kubelet's spelling (`2MB`, `1GB`),
    /// from `/sys/kernel/mm/hugepages`; each gets a limit, 0 unless requested.
    pub hugepage_sizes: &'a [String],
    /// The node's swap setup.
    pub swap: Swap,
    /// The pod's user-namespace mapping (the sandbox's).
    pub user_ns: Option<UserNsMapping>,
    /// The pod cgroup (informational; the runtime takes it from the sandbox).
    pub pod_cgroup_parent: &'a str,
    /// The node's allocatable, the default of unset limits in resourceFieldRef.
    pub node_allocatable: NodeAllocatable,
    /// Host file (`<root-dir>/pods/<uid>/containers/<name>/<random>`) to mount
    /// at the container's terminationMessagePath.
    pub termination_log_host_path: Option<&'a Path>,
    /// The pod's managed hosts file, mounted at /etc/hosts unless the
    /// container mounts something there itself.
    pub etc_hosts: Option<&'a Path>,
    /// kubelet's seccomp profile root (`<root-dir>/seccomp`), for Localhost profiles.
    pub seccomp_profile_root: Option<&'a Path>,
    /// Where ConfigMaps and Secrets are looked up (`None`: a static pod,
    /// which may not reference them).
    pub objects: Option<&'a dyn crate::pod::config_objects::ConfigObjects>,
    /// Where Services are looked up for the environment (`None`: no API
    /// server, so no Service variables).
    pub services: Option<super::service_env::ServiceSource<'a>>,
}

impl Default for ContainerParams<'_> {
    fn default() -> Self {
        ContainerParams {
            attempt: 0,
            image: "",
            pod_ip: "",
            pod_ips: &[],
            host_ips: &[],
            volume_dir: &no_volume_dir,
            oom_score_adj: 0,
            hugepage_sizes: &[],
            swap: Swap::Unavailable,
            user_ns: None,
            pod_cgroup_parent: "",
            node_allocatable: NodeAllocatable::default(),
            termination_log_host_path: None,
            etc_hosts: None,
            seccomp_profile_root: None,
            objects: None,
            services: None,
        }
    }
}

impl std::fmt::Debug for ContainerParams<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerParams")
            .field("attempt", &self.attempt)
            .field("image", &self.image)
            .field("pod_ip", &self.pod_ip)
            .field("pod_ips", &self.pod_ips)
            .field("host_ips", &self.host_ips)
            .field("oom_score_adj", &self.oom_score_adj)
            .field("hugepage_sizes", &self.hugepage_sizes)
            .field("swap", &self.swap)
            .field("pod_cgroup_parent", &self.pod_cgroup_parent)
            .field("termination_log_host_path", &self.termination_log_host_path)
            .field("etc_hosts", &self.etc_hosts)
            .finish_non_exhaustive()
    }
}

/// The labels kubelet puts on a container.
pub fn container_labels(pod: &Pod, c: &Container) -> HashMap<String, String> {
    HashMap::from([
        (POD_NAME_LABEL.to_string(), pod_name(pod).to_string()),
        (
            POD_NAMESPACE_LABEL.to_string(),
            pod_namespace(pod).to_string(),
        ),
        (POD_UID_LABEL.to_string(), pod_uid(pod).to_string()),
        (CONTAINER_NAME_LABEL.to_string(), c.name.clone()),
    ])
}

/// 32-bit FNV-1a, the hash kubelet uses for containers.
fn fnv32a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// A stable hash of the container spec, in kubelet's form: FNV-32a of a
/// deterministic dump (its JSON serialization: struct fields in a fixed
/// order, maps sorted), written as lowercase hex without padding (Go's
/// `strconv.FormatUint(h, 16)`, at most 8 digits). Recorded as
/// `io.kubernetes.container.hash`; any spec change changes it.
pub fn container_hash(c: &Container) -> String {
    let json = serde_json::to_vec(c).unwrap_or_default();
    format!("{:x}", fnv32a(&json))
}

/// The hash picolet wrote before it used kubelet's form (32 hex digits of
/// md5 over the same dump): a running container created with it is the
/// same spec when this matches, so an upgrade restarts nothing.
pub fn legacy_container_hash(c: &Container) -> String {
    let json = serde_json::to_vec(c).unwrap_or_default();
    format!("{:x}", md5::compute(json))
}

/// JSON of the ports as Go's `json.Marshal([]v1.ContainerPort)` writes it.
fn ports_json(ports: &[ContainerPort]) -> String {
    let items: Vec<String> = ports
        .iter()
        .map(|p| {
            let mut fields = Vec::new();
            if let Some(n) = p.name.as_deref().filter(|n| !n.is_empty()) {
                fields.push(format!("\"name\":{}", serde_json::Value::from(n)));
            }
            if let Some(hp) = p.host_port.filter(|hp| *hp != 0) {
                fields.push(format!("\"hostPort\":{hp}"));
            }
            fields.push(format!("\"containerPort\":{}", p.container_port));
            if let Some(pr) = p.protocol.as_deref().filter(|s| !s.is_empty()) {
                fields.push(format!("\"protocol\":{}", serde_json::Value::from(pr)));
            }
            if let Some(ip) = p.host_ip.as_deref().filter(|s| !s.is_empty()) {
                fields.push(format!("\"hostIP\":{}", serde_json::Value::from(ip)));
            }
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    format!("[{}]", items.join(","))
}

fn container_annotations(pod: &Pod, c: &Container, attempt: u32) -> HashMap<String, String> {
    let s = spec(pod);
    let mut a = HashMap::new();
    a.insert(CONTAINER_HASH_ANNOTATION.into(), container_hash(c));
    a.insert(
        CONTAINER_RESTART_COUNT_ANNOTATION.into(),
        attempt.to_string(),
    );
    a.insert(
        CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION.into(),
        c.termination_message_path.clone().unwrap_or_default(),
    );
    a.insert(
        CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION.into(),
        c.termination_message_policy.clone().unwrap_or_default(),
    );
    if let Some(g) = pod.metadata.deletion_grace_period_seconds {
        a.insert(POD_DELETION_GRACE_PERIOD_ANNOTATION.into(), g.to_string());
    }
    if let Some(g) = s.termination_grace_period_seconds {
        a.insert(
            POD_TERMINATION_GRACE_PERIOD_ANNOTATION.into(),
            g.to_string(),
        );
    }
    if let Some(pre_stop) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) {
        if let Ok(json) = serde_json::to_string(pre_stop) {
            a.insert(CONTAINER_PRE_STOP_HANDLER_ANNOTATION.into(), json);
        }
    }
    if let Some(ports) = c.ports.as_deref().filter(|p| !p.is_empty()) {
        a.insert(CONTAINER_PORTS_ANNOTATION.into(), ports_json(ports));
    }
    a
}

/// The `CreateContainer` config for container `c` of `pod` (kubelet's
/// `generateContainerConfig` + `generateLinuxContainerConfig`). Works for
/// init containers too.
pub fn container_config(
    pod: &Pod,
    c: &Container,
    p: &ContainerParams,
) -> Result<api::ContainerConfig, SpecError> {
    if c.volume_devices.as_deref().is_some_and(|d| !d.is_empty()) {
        return Err(SpecError::new(
            &c.name,
            "volumeDevices",
            "block volumes are not supported",
        ));
    }
    let envs = container_env(pod, c, p)?;
    let env_map: HashMap<&str, &str> = envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let lookup = |name: &str| env_map.get(name).map(|v| v.to_string());
    let command = c
        .command
        .iter()
        .flatten()
        .map(|s| expand(s, &lookup))
        .collect();
    let args = c
        .args
        .iter()
        .flatten()
        .map(|s| expand(s, &lookup))
        .collect();
    let mounts = container_mounts(pod, c, p, &env_map)?;
    let linux = api::LinuxContainerConfig {
        resources: Some(container_resources(pod, c, p)?),
        security_context: Some(container_security_context(pod, c, p)?),
    };
    Ok(api::ContainerConfig {
        metadata: Some(api::ContainerMetadata {
            name: c.name.clone(),
            attempt: p.attempt,
        }),
        image: Some(api::ImageSpec {
            image: p.image.into(),
            annotations: HashMap::new(),
            user_specified_image: c.image.clone().unwrap_or_default(),
            runtime_handler: String::new(),
        }),
        command,
        args,
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs: envs
            .into_iter()
            .map(|(key, value)| api::KeyValue { key, value })
            .collect(),
        mounts,
        devices: Vec::new(),
        labels: container_labels(pod, c),
        annotations: container_annotations(pod, c, p.attempt),
        log_path: super::container_log_path(&c.name, p.attempt),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        linux: Some(linux),
    })
}

/// `hugepages-<size>` limits of the container as (kubelet page-size
/// spelling, bytes).
fn requested_hugepages(c: &Container) -> Vec<(String, u64)> {
    c.resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|(name, q)| {
            let size = parse_resource(name.strip_prefix("hugepages-")?)?;
            let size = hugepage_unit_size(units(size))?;
            Some((size, units(parse_resource(&q.0)?)))
        })
        .collect()
}

/// A page size in bytes in kubelet's spelling (`HugePageUnitSizeFromByteSize`:
/// `2097152` is `2MB`); `None` when it does not divide into its largest unit.
pub fn hugepage_unit_size(mut size: u64) -> Option<String> {
    const UNITS: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];
    let mut i = 0;
    while size != 0 && size.is_multiple_of(1024) && i < UNITS.len() - 1 {
        size /= 1024;
        i += 1;
    }
    (size <= 1024 || i == UNITS.len() - 1).then(|| format!("{size}{}", UNITS[i]))
}

/// kubelet's `GetHugepageLimitsFromResources`: every page size of the node,
/// limited to 0 unless the container's limits name it.
fn hugepage_limits(c: &Container, sizes: &[String]) -> Vec<api::HugepageLimit> {
    let requested = requested_hugepages(c);
    sizes
        .iter()
        .map(|size| api::HugepageLimit {
            page_size: size.clone(),
            limit: requested
                .iter()
                .find(|(s, _)| s == size)
                .map(|(_, v)| *v)
                .unwrap_or(0),
        })
        .collect()
}

/// kubelet's `configureContainerSwapResources`: NoSwap unless LimitedSwap
/// on cgroup v2 for a Burstable container of a pod that is not critical,
/// with a memory request below its limit.
fn configure_swap(r: &mut api::LinuxContainerResources, pod: &Pod, c: &Container, swap: Swap) {
    let (limited, node_memory, node_swap) = match swap {
        Swap::Unavailable => return,
        Swap::CgroupV1 => {
            r.memory_swap_limit_in_bytes = r.memory_limit_in_bytes;
            return;
        }
        Swap::CgroupV2 {
            limited,
            node_memory_bytes,
            node_swap_bytes,
        } => (limited, node_memory_bytes, node_swap_bytes),
    };
    let request = qos::container_memory_request_bytes(c);
    let limit = quantity_of(c, "limits", "memory")
        .and_then(|q| parse_resource(&q.0))
        .map(units)
        .unwrap_or(0);
    let may_swap = limited
        && !facts::is_critical(pod)
        && facts::qos(pod) == qos::QosClass::Burstable
        && (request != 0 || limit != 0)
        && request != limit
        && node_memory > 0;
    let bytes = if may_swap {
        // calcSwapForBurstablePods, in float64 as kubelet computes it.
        (request as f64 / node_memory as f64 * node_swap as f64) as i64
    } else {
        0
    };
    r.unified.insert(CGROUP2_SWAP_MAX.into(), bytes.to_string());
}

fn container_resources(
    pod: &Pod,
    c: &Container,
    p: &ContainerParams,
) -> Result<api::LinuxContainerResources, SpecError> {
    for (kind, res) in [
        ("requests", "cpu"),
        ("limits", "cpu"),
        ("limits", "memory"),
        ("requests", "memory"),
    ] {
        if let Some(v) = quantity_of(c, kind, res) {
            parse_resource(&v.0).ok_or_else(|| {
                SpecError::new(
                    &c.name,
                    format!("resources.{kind}.{res}"),
                    format!("invalid quantity {:?}", v.0),
                )
            })?;
        }
    }
    let mut r = linux_resources(qos::container_resources(spec(pod), c));
    r.oom_score_adj = p.oom_score_adj;
    r.hugepage_limits = hugepage_limits(c, p.hugepage_sizes);
    configure_swap(&mut r, pod, c, p.swap);
    Ok(r)
}
