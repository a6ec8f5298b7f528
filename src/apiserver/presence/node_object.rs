//! Pure: this node's `Node` object, built from facts the agent gathers.
//!
//! What kubelet registers and reports: capacity, allocatable (capacity
//! minus `kubeReserved`, `systemReserved` and the hard eviction thresholds,
//! never below zero), addresses (`InternalIP`s, then `Hostname`), `nodeInfo`,
//! the well-known labels plus `--node-labels`, `--register-with-taints`,
//! `daemonEndpoints`, and the conditions Ready, MemoryPressure, DiskPressure
//! and PIDPressure with kubelet's reasons and messages. A condition's
//! `lastTransitionTime` is kept from the previous status while its status
//! does not change; `lastHeartbeatTime` is always now.
//!
//! Also kubelet's rule for `--node-labels` (which `kubernetes.io` and
//! `k8s.io` labels a node may set on itself), the decision to post a
//! status (when it changed, or when `nodeStatusReportFrequency` passed),
//! [`NodeView`], the part of the Node object a node reads back, and
//! [`WatchedNode`], what admission takes from it.
//!
//! No I/O, no clock: facts and the time come in as arguments.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerImage, DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints,
    NodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::ClusterResourceScope;
use serde::{Deserialize, Serialize};

use crate::apiserver::listwatch::watch::slim_core_v1_object;

/// Well-known labels (`k8s.io/api/core/v1` names).
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub const LABEL_OS: &str = "kubernetes.io/os";
pub const LABEL_ARCH: &str = "kubernetes.io/arch";
pub const LABEL_OS_BETA: &str = "beta.kubernetes.io/os";
pub const LABEL_ARCH_BETA: &str = "beta.kubernetes.io/arch";
/// The annotation by which a node tells the attach/detach controller to
/// attach and detach its volumes (kubelet sets it to `"true"` by default).
pub const ANNOTATION_CONTROLLER_MANAGED_ATTACH_DETACH: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";

/// Amounts of the resources a node reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub cpu_millis: u64,
    pub memory_bytes: u64,
    pub ephemeral_storage_bytes: u64,
    pub pods: u64,
}

/// One huge page size the host has, and how many bytes of it are
/// preallocated (`nr_hugepages` times the size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HugePages {
    pub page_size_bytes: u64,
    pub total_bytes: u64,
}

/// The Ready condition's input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Not ready, with kubelet-style reasons (`container runtime is down`,
    /// `PLEG is not healthy: ...`, `container runtime network not ready:
    /// ...`), joined with ", " in the message.
    NotReady(Vec<String>),
}

/// What a node reads back of its own Node object (watched with
/// `fieldSelector=metadata.name=<node>`): metadata (UID for owner
/// references, labels for admission, resourceVersion), spec (taints,
/// unschedulable) and the conditions (their transition times survive a
/// restart). The rest of the status (images, volumes, node info) is what
/// the node itself reports; not decoding it keeps the full `NodeStatus`
/// deserializer out of the binary.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct NodeView {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<NodeSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<NodeViewStatus>,
}

/// The conditions of a [`NodeView`].
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct NodeViewStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<NodeCondition>>,
    /// The boot ID the node last reported (a change is kubelet's
    /// `Rebooted` event).
    #[serde(default, rename = "nodeInfo", skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeViewInfo>,
}

/// The part of `nodeInfo` a [`NodeView`] keeps.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct NodeViewInfo {
    #[serde(default, rename = "bootID")]
    pub boot_id: String,
}

impl NodeView {
    /// The previous status for [`status`]: the conditions only.
    pub fn previous_status(&self) -> NodeStatus {
        NodeStatus {
            conditions: self.status.as_ref().and_then(|s| s.conditions.clone()),
            ..Default::default()
        }
    }
}

slim_core_v1_object!(NodeView, "Node", "nodes", "NodeList", ClusterResourceScope);

/// What the node takes from its own Node object, watched: the labels and
/// taints admission decides on (an admin's `kubectl label node` or
/// `kubectl taint node` included), `spec.unschedulable` and the object's
/// resourceVersion.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WatchedNode {
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub resource_version: Option<String>,
    /// The conditions' (type, status) as the API server has them: what the
    /// node last posted, unless the node lifecycle controller marked the
    /// node `Unknown` since (its Lease went stale).
    pub conditions: Vec<(String, String)>,
}

impl WatchedNode {
    /// The facts of `view` (as the watch last delivered it).
    pub fn of(view: &NodeView) -> WatchedNode {
        let spec = view.spec.as_ref();
        WatchedNode {
            labels: view.metadata.labels.clone().unwrap_or_default(),
            taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            resource_version: view.metadata.resource_version.clone(),
            conditions: view
                .status
                .iter()
                .flat_map(|s| s.conditions.iter().flatten())
                .map(|c| (c.type_.clone(), c.status.clone()))
                .collect(),
        }
    }

    /// Whether this Node is older than resourceVersion `version` (one our
    /// own post produced): a delivery the watch replays, not news.
    pub fn older_than(&self, version: Option<u64>) -> bool {
        let mine = self
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok());
        matches!((mine, version), (Some(m), Some(v)) if m < v)
    }

    /// Whether the API server's conditions disagree with `ours` (the status
    /// the node would post): one of our condition types has another status
    /// there, or is missing. That is the node lifecycle controller's
    /// `Unknown` after the Lease went stale (a link outage longer than its
    /// grace period), which only a new post of ours turns back, as
    /// kubelet's status update compares with the Node it reads, not with
    /// what it last sent. Conditions other writers own are not ours to
    /// compare.
    pub fn conditions_disagree(&self, ours: &NodeStatus) -> bool {
        ours.conditions.iter().flatten().any(|c| {
            !self
                .conditions
                .iter()
                .any(|(t, s)| *t == c.type_ && *s == c.status)
        })
    }

    /// Whether admission sees a different node in `self` than in
    /// `before` (labels or taints; a new resourceVersion alone, such as a
    /// status heartbeat, is no change).
    pub fn admission_differs(&self, before: Option<&WatchedNode>) -> bool {
        before.is_none_or(|b| b.labels != self.labels || b.taints != self.taints)
    }

    /// Whether the node the agent keeps (for admission, and for `picolet
    /// get node`, which shows whether it is cordoned) differs in `self`
    /// from `before`: [`WatchedNode::admission_differs`], or a `kubectl
    /// cordon` / `uncordon` (`spec.unschedulable`).
    pub fn differs(&self, before: Option<&WatchedNode>) -> bool {
        self.admission_differs(before)
            || before.is_some_and(|b| b.unschedulable != self.unschedulable)
    }

    /// A one-line summary for the log: `labels a=b,c=d; taints k=v:NoExecute`.
    pub fn summary(&self) -> String {
        let labels: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let taints: Vec<String> = self
            .taints
            .iter()
            .map(|t| match t.value.as_deref().filter(|v| !v.is_empty()) {
                Some(v) => format!("{}={v}:{}", t.key, t.effect),
                None => format!("{}:{}", t.key, t.effect),
            })
            .collect();
        format!(
            "labels {}; taints {}{}",
            labels.join(","),
            if taints.is_empty() {
                "none".to_string()
            } else {
                taints.join(",")
            },
            if self.unschedulable {
                "; unschedulable"
            } else {
                ""
            }
        )
    }
}

/// Everything the Node object is built from.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeFacts {
    pub name: String,
    pub hostname: String,
    /// `--node-ip`, or the address of the default route's interface.
    pub internal_ips: Vec<String>,
    pub capacity: Resources,
    /// `systemReserved` plus `kubeReserved` plus the hard eviction
    /// thresholds (memory.available, nodefs.available), already summed and
    /// resolved against capacity by the caller.
    pub reserved: Resources,
    /// The huge page sizes of `/sys/kernel/mm/hugepages`, each a
    /// `hugepages-<size>` capacity (0 where none is preallocated), taken
    /// from allocatable memory as kubelet does.
    pub hugepages: Vec<HugePages>,
    /// `status.images`, made by [`super::node_images::node_images`].
    pub images: Vec<ContainerImage>,
    /// Go's names: `linux`, `arm64`.
    pub operating_system: String,
    pub architecture: String,
    pub kernel_version: String,
    /// `PRETTY_NAME` of os-release.
    pub os_image: String,
    /// `containerd://1.7.24`.
    pub container_runtime_version: String,
    /// `v1.36.0` style.
    pub kubelet_version: String,
    pub machine_id: String,
    pub system_uuid: String,
    pub boot_id: String,
    /// `--node-labels` (already validated with [`validate_node_labels`]).
    pub labels: BTreeMap<String, String>,
    /// `--register-with-taints`.
    pub taints: Vec<Taint>,
    /// kubelet's port (`daemonEndpoints.kubeletEndpoint.Port`).
    pub kubelet_port: i32,
    pub ready: Readiness,
    pub memory_pressure: bool,
    pub disk_pressure: bool,
    pub pid_pressure: bool,
}

/// The Node object to create at registration.
pub fn node(facts: &NodeFacts, now: Timestamp) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(facts.name.clone()),
            labels: Some(labels(facts)),
            annotations: Some(annotations()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: Some(facts.taints.clone()).filter(|t| !t.is_empty()),
            ..Default::default()
        }),
        status: Some(status(facts, None, now)),
    }
}

/// The labels the node sets on itself: `--node-labels` plus the well-known
/// ones (which win).
pub fn labels(facts: &NodeFacts) -> BTreeMap<String, String> {
    let mut l = facts.labels.clone();
    l.insert(LABEL_HOSTNAME.into(), facts.hostname.to_lowercase());
    l.insert(LABEL_OS.into(), facts.operating_system.clone());
    l.insert(LABEL_ARCH.into(), facts.architecture.clone());
    l.insert(LABEL_OS_BETA.into(), facts.operating_system.clone());
    l.insert(LABEL_ARCH_BETA.into(), facts.architecture.clone());
    l
}

/// The annotations the node sets on itself (kubelet's
/// `enableControllerAttachDetach`, on by default).
pub fn annotations() -> BTreeMap<String, String> {
    [(
        ANNOTATION_CONTROLLER_MANAGED_ATTACH_DETACH.to_string(),
        "true".to_string(),
    )]
    .into()
}

/// The node's status at `now`; `previous` (the last status posted) keeps
/// each unchanged condition's `lastTransitionTime`.
pub fn status(facts: &NodeFacts, previous: Option<&NodeStatus>, now: Timestamp) -> NodeStatus {
    let cap = facts.capacity;
    let sub = |a: u64, b: u64| a.saturating_sub(b);
    let alloc = Resources {
        cpu_millis: sub(cap.cpu_millis, facts.reserved.cpu_millis),
        memory_bytes: sub(cap.memory_bytes, facts.reserved.memory_bytes),
        ephemeral_storage_bytes: sub(
            cap.ephemeral_storage_bytes,
            facts.reserved.ephemeral_storage_bytes,
        ),
        pods: cap.pods,
    };
    let mut addresses: Vec<NodeAddress> = facts
        .internal_ips
        .iter()
        .map(|ip| NodeAddress {
            type_: "InternalIP".into(),
            address: ip.clone(),
        })
        .collect();
    addresses.push(NodeAddress {
        type_: "Hostname".into(),
        address: facts.hostname.to_lowercase(),
    });
    let prev = previous
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[]);
    let mut capacity = resource_list(cap);
    let mut allocatable = resource_list(alloc);
    let mut alloc_memory = alloc.memory_bytes;
    for h in &facts.hugepages {
        let key = format!("hugepages-{}", binary(h.page_size_bytes));
        capacity.insert(key.clone(), Quantity(binary(h.total_bytes)));
        allocatable.insert(key, Quantity(binary(h.total_bytes)));
        alloc_memory = alloc_memory.saturating_sub(h.total_bytes);
    }
    allocatable.insert("memory".into(), Quantity(binary(alloc_memory)));
    NodeStatus {
        capacity: Some(capacity),
        allocatable: Some(allocatable),
        images: Some(facts.images.clone()).filter(|i| !i.is_empty()),
        declared_features: Some(DECLARED_FEATURES.iter().map(|f| f.to_string()).collect()),
        addresses: Some(addresses),
        conditions: Some(conditions(facts, prev, now)),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: facts.kubelet_port,
            }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: facts.architecture.clone(),
            boot_id: facts.boot_id.clone(),
            container_runtime_version: facts.container_runtime_version.clone(),
            kernel_version: facts.kernel_version.clone(),
            kube_proxy_version: String::new(),
            kubelet_version: facts.kubelet_version.clone(),
            machine_id: facts.machine_id.clone(),
            operating_system: facts.operating_system.clone(),
            os_image: facts.os_image.clone(),
            system_uuid: facts.system_uuid.clone(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `status.declaredFeatures` (KEP-5328, `NodeDeclaredFeatures`, on by
/// default in v1.36): the features this node declares so that the API
/// server and scheduler know what it does. kubelet declares each feature
/// of its registry whose gate is on; with v1.36's defaults that is
/// `ExtendWebSocketsToKubelet`, `InPlacePodLevelResourcesVerticalScaling`,
/// `InPlacePodVerticalScalingInitContainers` and
/// `RestartAllContainersOnContainerExits`. picolet declares only what it
/// does: the node API relays a WebSocket exec, attach or port-forward from
/// the API server to the runtime as it relays SPDY. It resizes no pod in
/// place and has no container restart rules, so declaring those would send
/// it pods it would run wrong. Sorted, as kubelet sends them.
pub const DECLARED_FEATURES: &[&str] = &["ExtendWebSocketsToKubelet"];

fn resource_list(r: Resources) -> BTreeMap<String, Quantity> {
    let mut m = BTreeMap::new();
    m.insert("cpu".into(), Quantity(cpu(r.cpu_millis)));
    m.insert("memory".into(), Quantity(binary(r.memory_bytes)));
    if r.ephemeral_storage_bytes > 0 {
        m.insert(
            "ephemeral-storage".into(),
            Quantity(binary(r.ephemeral_storage_bytes)),
        );
    }
    m.insert("pods".into(), Quantity(r.pods.to_string()));
    m
}

/// Millicores as a quantity: `4`, `3500m`.
pub fn cpu(millis: u64) -> String {
    if millis.is_multiple_of(1000) {
        (millis / 1000).to_string()
    } else {
        format!("{millis}m")
    }
}

/// Bytes as a binary-SI quantity with the largest exact suffix: `4Gi`,
/// `3884376Ki`, `1000`.
pub fn binary(bytes: u64) -> String {
    crate::quantity::format_binary(bytes)
}

/// One condition as kubelet words it.
fn condition(type_: &str, status: bool, reason: &str, message: String) -> NodeCondition {
    NodeCondition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_heartbeat_time: None,
        last_transition_time: None,
    }
}

/// Ready, MemoryPressure, DiskPressure, PIDPressure, in kubelet's order.
pub fn conditions(
    facts: &NodeFacts,
    previous: &[NodeCondition],
    now: Timestamp,
) -> Vec<NodeCondition> {
    let mut out = vec![
        match &facts.ready {
            Readiness::Ready => condition(
                "Ready",
                true,
                "KubeletReady",
                "kubelet is posting ready status".into(),
            ),
            Readiness::NotReady(why) => {
                condition("Ready", false, "KubeletNotReady", why.join(", "))
            }
        },
        if facts.memory_pressure {
            condition(
                "MemoryPressure",
                true,
                "KubeletHasInsufficientMemory",
                "kubelet has insufficient memory available".into(),
            )
        } else {
            condition(
                "MemoryPressure",
                false,
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available".into(),
            )
        },
        if facts.disk_pressure {
            condition(
                "DiskPressure",
                true,
                "KubeletHasDiskPressure",
                "kubelet has disk pressure".into(),
            )
        } else {
            condition(
                "DiskPressure",
                false,
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure".into(),
            )
        },
        if facts.pid_pressure {
            condition(
                "PIDPressure",
                true,
                "KubeletHasInsufficientPID",
                "kubelet has insufficient PID available".into(),
            )
        } else {
            condition(
                "PIDPressure",
                false,
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available".into(),
            )
        },
    ];
    for c in &mut out {
        c.last_heartbeat_time = Some(Time(now));
        let kept = previous
            .iter()
            .find(|p| p.type_ == c.type_ && p.status == c.status)
            .and_then(|p| p.last_transition_time.clone());
        c.last_transition_time = Some(kept.unwrap_or(Time(now)));
    }
    out
}

/// Whether to post `new`: it differs from the last posted status (ignoring
/// heartbeat times), or `nodeStatusReportFrequency` passed since then.
pub fn should_post(
    new: &NodeStatus,
    last_posted: Option<&NodeStatus>,
    since_last_post: Duration,
    report_frequency: Duration,
) -> bool {
    let Some(last) = last_posted else {
        return true;
    };
    if since_last_post >= report_frequency {
        return true;
    }
    !equal_but_heartbeats(new, last)
}

/// `a == b` but for the conditions' `lastHeartbeatTime`, without a copy of
/// either (the status loop asks every 10 s, and a Node status with its
/// images list is a few hundred allocations to clone). Every field is
/// named, so a field a newer API adds does not compile until it is
/// compared here.
fn equal_but_heartbeats(a: &NodeStatus, b: &NodeStatus) -> bool {
    let NodeStatus {
        addresses,
        allocatable,
        capacity,
        conditions,
        config,
        daemon_endpoints,
        declared_features,
        features,
        images,
        node_info,
        phase,
        runtime_handlers,
        volumes_attached,
        volumes_in_use,
    } = a;
    let conditions_equal = |x: &[NodeCondition], y: &[NodeCondition]| {
        x.len() == y.len()
            && x.iter().zip(y).all(|(p, q)| {
                let NodeCondition {
                    last_heartbeat_time: _,
                    last_transition_time,
                    message,
                    reason,
                    status,
                    type_,
                } = p;
                *last_transition_time == q.last_transition_time
                    && *message == q.message
                    && *reason == q.reason
                    && *status == q.status
                    && *type_ == q.type_
            })
    };
    conditions_equal(
        conditions.as_deref().unwrap_or_default(),
        b.conditions.as_deref().unwrap_or_default(),
    ) && conditions.is_some() == b.conditions.is_some()
        && *addresses == b.addresses
        && *allocatable == b.allocatable
        && *capacity == b.capacity
        && *config == b.config
        && *daemon_endpoints == b.daemon_endpoints
        && *declared_features == b.declared_features
        && *features == b.features
        && *images == b.images
        && *node_info == b.node_info
        && *phase == b.phase
        && *runtime_handlers == b.runtime_handlers
        && *volumes_attached == b.volumes_attached
        && *volumes_in_use == b.volumes_in_use
}

/// Why a `--node-labels` entry is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--node-labels: {label:?} is not allowed: {why}")]
pub struct NodeLabelError {
    pub label: String,
    pub why: &'static str,
}

/// kubelet's rule for labels a node sets on itself: labels in the
/// `kubernetes.io` and `k8s.io` namespaces are refused, except the
/// well-known ones and the `kubelet.kubernetes.io/` and
/// `node.kubernetes.io/` prefixes; `node-restriction.kubernetes.io/` is
/// always refused (the NodeRestriction admission plugin reserves it).
pub fn validate_node_labels(labels: &BTreeMap<String, String>) -> Result<(), NodeLabelError> {
    const ALLOWED: &[&str] = &[
        LABEL_HOSTNAME,
        LABEL_OS,
        LABEL_ARCH,
        LABEL_OS_BETA,
        LABEL_ARCH_BETA,
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
    ];
    for key in labels.keys() {
        let Some((prefix, _)) = key.split_once('/') else {
            continue;
        };
        let err = |why| {
            Err(NodeLabelError {
                label: key.clone(),
                why,
            })
        };
        if prefix == "node-restriction.kubernetes.io" {
            return err("the node-restriction.kubernetes.io/ prefix is reserved for the cluster");
        }
        let kube_ns = |ns: &str| prefix == ns || prefix.ends_with(&format!(".{ns}"));
        if !(kube_ns("kubernetes.io") || kube_ns("k8s.io")) {
            continue;
        }
        if ALLOWED.contains(&key.as_str())
            || kube_ns("kubelet.kubernetes.io")
            || kube_ns("node.kubernetes.io")
        {
            continue;
        }
        return err("kubernetes.io and k8s.io labels are limited to the well-known node labels, kubelet.kubernetes.io/ and node.kubernetes.io/");
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
