//! The node's own Node object, as kubelet registers and reports it.
//!
//! Everything here is pure: [`NodeFacts`] (gathered by the caller from the
//! kernel, the runtime and the configuration) and the previous conditions
//! go in, API objects come out. The caller does the requests.
//!
//! - [`registration`]: the Node to create at start (labels, taints, status).
//! - [`node_status`]: the status to report, with conditions whose
//!   `lastTransitionTime` moves only when their status changes.
//! - [`needs_report`]: kubelet's rule for posting: when anything but the
//!   heartbeat changed, or when `nodeStatusReportFrequency` has passed.
//! - [`check_node_labels`]: the `--node-labels` a kubelet may set on its own
//!   Node under the NodeRestriction admission plugin.
//!
//! This module must not know how the facts were read, or the transport.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

/// `kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch`.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub const LABEL_OS: &str = "kubernetes.io/os";
pub const LABEL_ARCH: &str = "kubernetes.io/arch";

/// The node condition types kubelet reports.
pub const READY: &str = "Ready";
pub const MEMORY_PRESSURE: &str = "MemoryPressure";
pub const DISK_PRESSURE: &str = "DiskPressure";
pub const PID_PRESSURE: &str = "PIDPressure";

/// Resources of the node, in base units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    pub cpu_millis: u64,
    pub memory_bytes: u64,
    pub ephemeral_storage_bytes: u64,
    pub pods: u64,
}

/// Resources held back from pods: `systemReserved` + `kubeReserved` + the
/// hard eviction thresholds for memory and ephemeral storage (kubelet's
/// allocatable formula).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reserved {
    pub cpu_millis: u64,
    pub memory_bytes: u64,
    pub ephemeral_storage_bytes: u64,
}

/// What the node reports about its health, decided elsewhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Health {
    /// `None`: ready. `Some(message)`: why not (runtime down, network).
    pub not_ready: Option<String>,
    pub memory_pressure: bool,
    pub disk_pressure: bool,
    pub pid_pressure: bool,
}

/// Everything the Node object is built from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeFacts {
    pub name: String,
    pub hostname: String,
    /// `InternalIP` addresses (`--node-ip` or the default route's).
    pub internal_ips: Vec<String>,
    pub capacity: Resources,
    pub reserved: Reserved,
    /// GOARCH spelling: `amd64`, `arm64`, `arm`, `riscv64`.
    pub architecture: String,
    pub kernel_version: String,
    pub os_image: String,
    pub machine_id: String,
    pub system_uuid: String,
    pub boot_id: String,
    /// `containerd://1.6.20`: runtime name and version from CRI `Version`.
    pub container_runtime_version: String,
    pub kubelet_version: String,
    /// `--node-labels`, already checked with [`check_node_labels`].
    pub labels: BTreeMap<String, String>,
    /// `--register-with-taints`.
    pub taints: Vec<Taint>,
    /// The node API's port (`port`, 10250).
    pub kubelet_port: i32,
}

/// GOARCH spelling of a Rust target architecture.
pub fn go_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "riscv64" | "riscv64gc" => "riscv64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

fn quantity_map(r: Resources) -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".to_string(), Quantity(cpu_text(r.cpu_millis))),
        ("memory".to_string(), Quantity(ki_text(r.memory_bytes))),
        (
            "ephemeral-storage".to_string(),
            Quantity(ki_text(r.ephemeral_storage_bytes)),
        ),
        ("pods".to_string(), Quantity(r.pods.to_string())),
    ])
}

/// CPU as kubelet prints it: whole cores, or millicores.
fn cpu_text(millis: u64) -> String {
    if millis.is_multiple_of(1000) {
        (millis / 1000).to_string()
    } else {
        format!("{millis}m")
    }
}

/// Bytes as kubelet prints memory: `Ki` when it divides, bytes otherwise.
fn ki_text(bytes: u64) -> String {
    if bytes.is_multiple_of(1024) {
        format!("{}Ki", bytes / 1024)
    } else {
        bytes.to_string()
    }
}

/// Capacity minus what is reserved, never below zero.
pub fn allocatable(capacity: Resources, reserved: Reserved) -> Resources {
    Resources {
        cpu_millis: capacity.cpu_millis.saturating_sub(reserved.cpu_millis),
        memory_bytes: capacity.memory_bytes.saturating_sub(reserved.memory_bytes),
        ephemeral_storage_bytes: capacity
            .ephemeral_storage_bytes
            .saturating_sub(reserved.ephemeral_storage_bytes),
        pods: capacity.pods,
    }
}

/// The labels kubelet puts on its own Node, then `--node-labels`.
pub fn node_labels(f: &NodeFacts) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (LABEL_HOSTNAME.to_string(), f.hostname.clone()),
        (LABEL_OS.to_string(), "linux".to_string()),
        (LABEL_ARCH.to_string(), f.architecture.clone()),
    ]);
    labels.extend(f.labels.clone());
    labels
}

/// Label keys in the `kubernetes.io`/`k8s.io` namespaces that a kubelet may
/// set on its own Node (NodeRestriction); everything else in those
/// namespaces is refused by the API server.
const ALLOWED_KUBERNETES_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];
const ALLOWED_KUBERNETES_PREFIXES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// Checks `--node-labels` as kubelet does at start: a label in the
/// `kubernetes.io` or `k8s.io` namespaces that the node may not set on
/// itself is an error naming it (the API server would refuse the Node).
pub fn check_node_labels(labels: &BTreeMap<String, String>) -> Result<(), String> {
    let mut refused = Vec::new();
    for key in labels.keys() {
        let Some((prefix, _)) = key.split_once('/') else {
            continue;
        };
        let in_kubernetes_namespace = ["kubernetes.io", "k8s.io"]
            .iter()
            .any(|ns| prefix == *ns || prefix.ends_with(&format!(".{ns}")));
        if !in_kubernetes_namespace || ALLOWED_KUBERNETES_LABELS.contains(&key.as_str()) {
            continue;
        }
        let allowed_prefix = ALLOWED_KUBERNETES_PREFIXES
            .iter()
            .any(|p| prefix == *p || prefix.ends_with(&format!(".{p}")));
        if !allowed_prefix {
            refused.push(key.as_str());
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "--node-labels: unknown labels in the kubernetes.io or k8s.io namespaces, \
             which a node may not set on itself: {}",
            refused.join(", ")
        ))
    }
}

/// One condition: type, status, reason and message.
fn condition_row(kind: &str, h: &Health) -> (&'static str, &'static str, String) {
    match kind {
        READY => match &h.not_ready {
            None => (
                "True",
                "KubeletReady",
                "kubelet is posting ready status".into(),
            ),
            Some(why) => ("False", "KubeletNotReady", why.clone()),
        },
        MEMORY_PRESSURE if h.memory_pressure => (
            "True",
            "KubeletHasInsufficientMemory",
            "kubelet has insufficient memory available".into(),
        ),
        MEMORY_PRESSURE => (
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available".into(),
        ),
        DISK_PRESSURE if h.disk_pressure => (
            "True",
            "KubeletHasDiskPressure",
            "kubelet has disk pressure".into(),
        ),
        DISK_PRESSURE => (
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure".into(),
        ),
        _ if h.pid_pressure => (
            "True",
            "KubeletHasInsufficientPID",
            "kubelet has insufficient PID available".into(),
        ),
        _ => (
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available".into(),
        ),
    }
}

/// The four conditions at `now`, keeping each previous `lastTransitionTime`
/// whose status did not change. Kubelet's order: MemoryPressure,
/// DiskPressure, PIDPressure, Ready.
pub fn conditions(previous: &[NodeCondition], health: &Health, now: &Time) -> Vec<NodeCondition> {
    [MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE, READY]
        .iter()
        .map(|kind| {
            let (status, reason, message) = condition_row(kind, health);
            let transition = previous
                .iter()
                .find(|c| c.type_ == *kind && c.status == status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| now.clone());
            NodeCondition {
                type_: kind.to_string(),
                status: status.to_string(),
                reason: Some(reason.to_string()),
                message: Some(message),
                last_heartbeat_time: Some(now.clone()),
                last_transition_time: Some(transition),
            }
        })
        .collect()
}

/// The Node's status: capacity, allocatable, addresses, node info, daemon
/// endpoints and the conditions (see [`conditions`]).
pub fn node_status(
    f: &NodeFacts,
    previous: &[NodeCondition],
    health: &Health,
    now: &Time,
) -> NodeStatus {
    let mut addresses: Vec<NodeAddress> = f
        .internal_ips
        .iter()
        .map(|ip| NodeAddress {
            type_: "InternalIP".into(),
            address: ip.clone(),
        })
        .collect();
    addresses.push(NodeAddress {
        type_: "Hostname".into(),
        address: f.hostname.clone(),
    });
    NodeStatus {
        capacity: Some(quantity_map(f.capacity)),
        allocatable: Some(quantity_map(allocatable(f.capacity, f.reserved))),
        addresses: Some(addresses),
        conditions: Some(conditions(previous, health, now)),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: f.kubelet_port,
            }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: f.architecture.clone(),
            boot_id: f.boot_id.clone(),
            container_runtime_version: f.container_runtime_version.clone(),
            kernel_version: f.kernel_version.clone(),
            kube_proxy_version: String::new(),
            kubelet_version: f.kubelet_version.clone(),
            machine_id: f.machine_id.clone(),
            operating_system: "linux".into(),
            os_image: f.os_image.clone(),
            swap: None,
            system_uuid: f.system_uuid.clone(),
        }),
        ..NodeStatus::default()
    }
}

/// The Node to create at registration: labels, `--register-with-taints`,
/// and a first status.
pub fn registration(f: &NodeFacts, health: &Health, now: &Time) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(f.name.clone()),
            labels: Some(node_labels(f)),
            annotations: Some(BTreeMap::from([(
                "volumes.kubernetes.io/controller-managed-attach-detach".to_string(),
                "true".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: (!f.taints.is_empty()).then(|| f.taints.clone()),
            ..NodeSpec::default()
        }),
        status: Some(node_status(f, &[], health, now)),
    }
}

/// Kubelet's posting rule: post when anything but the heartbeat times
/// changed, or when `report_every` has passed since the last post.
pub fn needs_report(
    last_sent: Option<&NodeStatus>,
    new: &NodeStatus,
    since_last_post: Duration,
    report_every: Duration,
) -> bool {
    let Some(last) = last_sent else {
        return true;
    };
    since_last_post >= report_every || without_heartbeats(last) != without_heartbeats(new)
}

fn without_heartbeats(s: &NodeStatus) -> NodeStatus {
    let mut s = s.clone();
    for c in s.conditions.iter_mut().flatten() {
        c.last_heartbeat_time = None;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    fn facts() -> NodeFacts {
        NodeFacts {
            name: "pi-1".into(),
            hostname: "pi-1".into(),
            internal_ips: vec!["192.168.1.20".into()],
            capacity: Resources {
                cpu_millis: 4000,
                memory_bytes: 1024 << 20,
                ephemeral_storage_bytes: 8 << 30,
                pods: 110,
            },
            reserved: Reserved {
                cpu_millis: 250,
                memory_bytes: 100 << 20,
                ephemeral_storage_bytes: 0,
            },
            architecture: go_arch("aarch64").into(),
            kubelet_version: "v1.36.0".into(),
            kubelet_port: 10250,
            labels: BTreeMap::from([("site".to_string(), "plant-3".to_string())]),
            ..NodeFacts::default()
        }
    }

    fn ready() -> Health {
        Health::default()
    }

    #[test]
    fn allocatable_is_capacity_minus_reserved_and_never_negative() {
        let f = facts();
        let a = allocatable(f.capacity, f.reserved);
        assert_eq!(a.cpu_millis, 3750);
        assert_eq!(a.memory_bytes, 924 << 20);
        let huge = Reserved {
            memory_bytes: u64::MAX,
            ..Reserved::default()
        };
        assert_eq!(allocatable(f.capacity, huge).memory_bytes, 0);
    }

    #[test]
    fn quantities_are_spelled_as_kubelet_spells_them() {
        let s = node_status(&facts(), &[], &ready(), &time(100));
        let cap = s.capacity.unwrap();
        assert_eq!(cap["cpu"].0, "4");
        assert_eq!(cap["memory"].0, "1048576Ki");
        assert_eq!(cap["pods"].0, "110");
        assert_eq!(s.allocatable.unwrap()["cpu"].0, "3750m");
    }

    #[test]
    fn registration_carries_the_well_known_labels_and_node_labels() {
        let n = registration(&facts(), &ready(), &time(1));
        let labels = n.metadata.labels.unwrap();
        assert_eq!(labels[LABEL_ARCH], "arm64");
        assert_eq!(labels[LABEL_OS], "linux");
        assert_eq!(labels[LABEL_HOSTNAME], "pi-1");
        assert_eq!(labels["site"], "plant-3");
        let status = n.status.unwrap();
        let addresses = status.addresses.unwrap();
        assert_eq!(addresses[0].type_, "InternalIP");
        assert_eq!(addresses[1].type_, "Hostname");
        assert_eq!(
            status
                .daemon_endpoints
                .unwrap()
                .kubelet_endpoint
                .unwrap()
                .port,
            10250
        );
    }

    #[test]
    fn a_ready_node_reports_kubelets_reasons_in_kubelets_order() {
        let c = conditions(&[], &ready(), &time(5));
        let rows: Vec<(&str, &str, &str)> = c
            .iter()
            .map(|c| {
                (
                    c.type_.as_str(),
                    c.status.as_str(),
                    c.reason.as_deref().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                ("PIDPressure", "False", "KubeletHasSufficientPID"),
                ("Ready", "True", "KubeletReady"),
            ]
        );
    }

    #[test]
    fn a_transition_time_moves_only_when_the_status_changes() {
        let first = conditions(&[], &ready(), &time(5));
        let same = conditions(&first, &ready(), &time(50));
        assert!(same
            .iter()
            .all(|c| c.last_transition_time == Some(time(5))
                && c.last_heartbeat_time == Some(time(50))));
        let pressure = Health {
            memory_pressure: true,
            not_ready: Some("container runtime is down".into()),
            ..Health::default()
        };
        let changed = conditions(&same, &pressure, &time(60));
        let by = |t: &str| changed.iter().find(|c| c.type_ == t).unwrap().clone();
        assert_eq!(by(MEMORY_PRESSURE).last_transition_time, Some(time(60)));
        assert_eq!(
            by(MEMORY_PRESSURE).reason.as_deref(),
            Some("KubeletHasInsufficientMemory")
        );
        assert_eq!(by(READY).status, "False");
        assert_eq!(
            by(READY).message.as_deref(),
            Some("container runtime is down")
        );
        assert_eq!(by(DISK_PRESSURE).last_transition_time, Some(time(5)));
    }

    #[test]
    fn a_heartbeat_alone_is_not_reported_until_the_report_frequency() {
        let f = facts();
        let a = node_status(&f, &[], &ready(), &time(5));
        let b = node_status(&f, a.conditions.as_deref().unwrap(), &ready(), &time(15));
        let five_min = Duration::from_secs(300);
        assert!(needs_report(None, &a, Duration::ZERO, five_min));
        assert!(!needs_report(
            Some(&a),
            &b,
            Duration::from_secs(10),
            five_min
        ));
        assert!(needs_report(Some(&a), &b, five_min, five_min));
        let pressure = Health {
            disk_pressure: true,
            ..Health::default()
        };
        let c = node_status(&f, a.conditions.as_deref().unwrap(), &pressure, &time(15));
        assert!(needs_report(
            Some(&a),
            &c,
            Duration::from_secs(10),
            five_min
        ));
    }

    #[test]
    fn node_labels_in_kubernetes_namespaces_are_checked_as_node_restriction_does() {
        let ok = |k: &str| check_node_labels(&BTreeMap::from([(k.to_string(), "x".to_string())]));
        assert!(ok("site").is_ok());
        assert!(ok("example.com/rack").is_ok());
        assert!(ok("node.kubernetes.io/instance-type").is_ok());
        assert!(ok("topology.kubernetes.io/zone").is_ok());
        assert!(ok("kubelet.kubernetes.io/anything").is_ok());
        assert!(ok("node-role.kubernetes.io/worker").is_err());
        let err = ok("foo.k8s.io/bar").unwrap_err();
        assert!(err.contains("foo.k8s.io/bar"), "{err}");
    }

    #[test]
    fn rust_architectures_are_spelled_as_goarch() {
        assert_eq!(go_arch("x86_64"), "amd64");
        assert_eq!(go_arch("aarch64"), "arm64");
        assert_eq!(go_arch("arm"), "arm");
        assert_eq!(go_arch("riscv64"), "riscv64");
    }
}
