//! The node's presence in the cluster: its Node object and its Lease.
//!
//! - Registration: create the Node (labels, `--register-with-taints`, a
//!   first status), or, when it exists, merge our labels into it. Retried
//!   with back-off until it works; the pods run meanwhile.
//! - Status: computed every `nodeStatusUpdateFrequency`, posted when it
//!   changed or every `nodeStatusReportFrequency` ([`node_object::should_post`]).
//!   Ready follows the container runtime: a failed CRI `Version` call makes
//!   the node NotReady with kubelet's "container runtime is down".
//!   `status.images` comes from the runtime's `ListImages`, asked at most
//!   every [`IMAGE_LIST_PERIOD`] (kubelet's image cache period); a patch
//!   carries it only when it changed since the last status posted.
//!   Posted at once, every condition whole, when the Node as its watch
//!   delivers it has a condition otherwise (the node lifecycle
//!   controller's `Unknown`); a delivery older than the Node our last
//!   post produced is history the resumed watch replays, not news.
//! - Events: `Starting` at start, the pressure conditions' events
//!   (`NodeHasSufficientMemory`, ...) at start and when one flips,
//!   `NodeAllocatableEnforced` once the agent limited `kubepods`, and
//!   `NodeReady`/`NodeNotReady` when Ready flips.
//! - CSINode: created once the Node exists (owned by it, no drivers, the
//!   migrated-plugins annotation), or its annotation reconciled; retried
//!   with the status until it works.
//! - Lease: `kube-node-lease/<node>` renewed every quarter of
//!   `nodeLeaseDurationSeconds` plus up to 4 % (kubelet's jitter), retried
//!   sooner after a failure. A renewal is a merge patch of
//!   `spec.renewTime` alone while the Lease is held as we hold it, its answer
//!   asked in protobuf ([`lease_proto`](super::lease_proto)): the idle
//!   node's largest cost on the wire (docs/fleet.md). That loop is
//!   `heartbeat/lease_renewal.rs`.
//!
//! Every request is one the Node authorizer and NodeRestriction allow a
//! `system:node:<name>` credential. This module must not know the agent's
//! internals; it reads the machine ([`crate::node::info`]), and the
//! runtime's health, version and images through the agent's
//! [`RuntimeHealth`] view: no CRI client of its own.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::{ContainerImage, Node, NodeCondition, NodeStatus, Taint};
use k8s_openapi::jiff::Timestamp;

use super::csi_node;
use super::node_events;
use super::node_images::{node_images, RuntimeImage};
use super::node_object::{self, HugePages, NodeFacts, NodeView, Readiness, Resources};
use super::node_watch::LatestNode;
use crate::agent::RuntimeHealth;
use crate::apiserver::client::protobuf;
use crate::apiserver::client::request::{
    collection_path, object_path, ApiError, METADATA_ONLY, REQUEST_DEADLINE,
};
use crate::apiserver::client::transport::{Body, Client};
use crate::apiserver::pods::event_sync::EventSync;
use crate::apiserver::pods::events::{reason, EventType};
use crate::config::{EvictionThreshold, KubeletConfig};
use crate::node::eviction::Condition;
use crate::rt;

mod lease_renewal;

const JSON: &str = "application/json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
const BODY_LIMIT: usize = 1 << 20;
/// Registration retries: 100 ms doubling to 7 s, as kubelet's.
const REGISTER_RETRY_MAX: Duration = Duration::from_secs(7);
/// How often the runtime's images are listed for `status.images`
/// (kubelet's image cache is refreshed every 30 s).
pub const IMAGE_LIST_PERIOD: Duration = Duration::from_secs(30);
/// How long the machine's facts are reused: cAdvisor's
/// `update_machine_info_interval`, whose result kubelet's status reports.
pub const MACHINE_INFO_REFRESH: Duration = Duration::from_secs(5 * 60);

/// The kubelet version the node reports: the Kubernetes semantics picolet
/// follows, with picolet's own version as build metadata.
pub fn kubelet_version() -> String {
    format!("v1.36.0+picolet-{}", env!("CARGO_PKG_VERSION"))
}

/// What the heartbeat needs from the configuration.
#[derive(Clone, Debug)]
pub struct HeartbeatConfig {
    pub node_name: String,
    pub register_node: bool,
    pub node_ips: Vec<IpAddr>,
    pub node_labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub max_pods: u32,
    pub port: u16,
    pub update_frequency: Duration,
    pub report_frequency: Duration,
    pub lease_duration_seconds: i32,
    pub root_dir: std::path::PathBuf,
    /// `nodeStatusMaxImages` (-1: every image).
    pub max_images: i32,
    reserved: crate::config::ReservedResources,
    system_reserved: crate::config::ReservedResources,
    hard_memory: Option<EvictionThreshold>,
    hard_nodefs: Option<EvictionThreshold>,
    /// The eviction task's pressure conditions (`None`: always False).
    pressure: Option<crate::node::eviction::PressureCell>,
    /// Set by the agent once node allocatable is on the `kubepods` cgroup.
    allocatable_enforced: Option<Rc<std::cell::Cell<bool>>>,
}

impl HeartbeatConfig {
    pub fn new(cfg: &KubeletConfig, node_name: &str) -> Self {
        HeartbeatConfig {
            node_name: node_name.to_string(),
            register_node: cfg.register_node,
            node_ips: cfg.node_ip.clone(),
            node_labels: cfg.node_labels.clone(),
            taints: cfg.register_with_taints.clone(),
            max_pods: cfg.max_pods,
            port: cfg.port,
            update_frequency: cfg.node_status_update_frequency,
            report_frequency: cfg.node_status_report_frequency,
            lease_duration_seconds: cfg.node_lease_duration_seconds.min(i32::MAX as u32) as i32,
            root_dir: cfg.root_dir.clone(),
            max_images: cfg.node_status_max_images,
            reserved: cfg.kube_reserved,
            system_reserved: cfg.system_reserved,
            hard_memory: cfg.eviction_hard.get("memory.available").cloned(),
            hard_nodefs: cfg.eviction_hard.get("nodefs.available").cloned(),
            pressure: None,
            allocatable_enforced: None,
        }
    }

    /// Records `NodeAllocatableEnforced` once `enforced` is true (the
    /// agent's, set when it wrote node allocatable into `kubepods`).
    pub fn with_allocatable_enforced(mut self, enforced: Rc<std::cell::Cell<bool>>) -> Self {
        self.allocatable_enforced = Some(enforced);
        self
    }

    /// Reports the MemoryPressure, DiskPressure and PIDPressure conditions
    /// of `pressure` (the eviction task's).
    pub fn with_pressure(mut self, pressure: crate::node::eviction::PressureCell) -> Self {
        self.pressure = Some(pressure);
        self
    }
}

/// kubelet's allocatable: capacity minus `kubeReserved`, `systemReserved`
/// and the hard eviction thresholds of memory and the node filesystem.
fn reserved(c: &HeartbeatConfig, capacity: Resources) -> Resources {
    let threshold = |t: Option<&EvictionThreshold>, of: u64| match t {
        Some(EvictionThreshold::Quantity(q)) => *q,
        Some(EvictionThreshold::Percentage(p)) => (of as f64 * p / 100.0) as u64,
        None => 0,
    };
    let sum = |f: fn(&crate::config::ReservedResources) -> Option<u64>| {
        f(&c.reserved)
            .unwrap_or(0)
            .saturating_add(f(&c.system_reserved).unwrap_or(0))
    };
    Resources {
        cpu_millis: sum(|r| r.cpu_millis),
        memory_bytes: sum(|r| r.memory_bytes)
            .saturating_add(threshold(c.hard_memory.as_ref(), capacity.memory_bytes)),
        ephemeral_storage_bytes: sum(|r| r.ephemeral_storage_bytes).saturating_add(threshold(
            c.hard_nodefs.as_ref(),
            capacity.ephemeral_storage_bytes,
        )),
        pods: 0,
    }
}

/// The Node and the Lease of this node, kept current, asking the agent
/// (`H`, its [`RuntimeHealth`] view) for the runtime's readiness and
/// images.
pub struct Heartbeat<H: RuntimeHealth> {
    client: Client,
    cfg: HeartbeatConfig,
    runtime: Rc<H>,
    /// Filled in once the Node exists: status sync and Lease need it.
    node_uid: Rc<RefCell<Option<String>>>,
    /// Where the Node's events go (Starting, Rebooted, NodeReady, ...).
    events: Option<Rc<EventSync>>,
    /// This run created the Node (its first readiness is an event).
    created: std::cell::Cell<bool>,
    /// `status.images` as last listed, and when.
    images: RefCell<(Option<Instant>, Vec<ContainerImage>)>,
    /// The machine's facts as last read, and when ([`MACHINE_INFO_REFRESH`]).
    machine: RefCell<Option<(Instant, crate::node::info::MachineInfo)>>,
    /// The runtime's version as last answered (kept while it is down, as
    /// kubelet keeps the Node's).
    runtime_version: RefCell<String>,
    /// The Lease's managedFields were cleared by a renewal of this run, and
    /// no whole write has given it some since ([`lease::renewal_patch`]).
    lease_fields_trimmed: std::cell::Cell<bool>,
    /// The Node as the node's watch last delivered it, when it is watched.
    api_node: Option<LatestNode>,
}

impl<H: RuntimeHealth> Heartbeat<H> {
    pub fn new(
        client: Client,
        cfg: HeartbeatConfig,
        runtime: Rc<H>,
        node_uid: Rc<RefCell<Option<String>>>,
    ) -> Self {
        Heartbeat {
            client,
            cfg,
            runtime,
            node_uid,
            events: None,
            created: std::cell::Cell::new(false),
            images: RefCell::new((None, Vec::new())),
            machine: RefCell::new(None),
            runtime_version: RefCell::new(String::new()),
            lease_fields_trimmed: std::cell::Cell::new(false),
            api_node: None,
        }
    }

    /// Compares each status with the Node as `latest` has it too: a
    /// condition the API server has otherwise (the node lifecycle
    /// controller's `Unknown` after the Lease went stale) is posted again
    /// at once, not at the next `nodeStatusReportFrequency`.
    pub fn with_api_node(mut self, latest: LatestNode) -> Self {
        self.api_node = Some(latest);
        self
    }

    /// Records the Node's events with `events`.
    pub fn with_events(mut self, events: Rc<EventSync>) -> Self {
        self.events = Some(events);
        self
    }

    /// kubelet's `NodeReady`/`NodeNotReady`: `Node <n> status is now: <r>`.
    fn readiness_event(&self, status: &NodeStatus) {
        let reason = if ready_word(status) == "Ready" {
            reason::NODE_READY
        } else {
            reason::NODE_NOT_READY
        };
        let message = node_events::status_event_message(&self.cfg.node_name, reason);
        self.node_event(EventType::Normal, reason, &message);
    }

    /// `status.images`: listed again when [`IMAGE_LIST_PERIOD`] passed;
    /// the last list while the runtime does not answer.
    async fn images(&self) -> Vec<ContainerImage> {
        let due = self
            .images
            .borrow()
            .0
            .is_none_or(|t| t.elapsed() >= IMAGE_LIST_PERIOD);
        if due {
            match self.runtime.runtime_images().await {
                Ok(images) => {
                    let listed: Vec<RuntimeImage> = images
                        .into_iter()
                        .map(|i| RuntimeImage {
                            id: i.id,
                            repo_tags: i.repo_tags,
                            repo_digests: i.repo_digests,
                            size_bytes: i.size,
                        })
                        .collect();
                    *self.images.borrow_mut() = (
                        Some(Instant::now()),
                        node_images(&listed, self.cfg.max_images),
                    );
                }
                Err(e) => log::debug!("node status: listing images: {e}"),
            }
        }
        self.images.borrow().1.clone()
    }

    fn node_event(&self, type_: EventType, reason: &str, message: &str) {
        if let Some(e) = &self.events {
            e.node_event(type_, reason, message);
        }
    }

    /// The machine's facts, read again once they are
    /// [`MACHINE_INFO_REFRESH`] old, as cAdvisor refreshes kubelet's
    /// machine info: a dozen files and a statfs every 10 s (per node, in
    /// a hollow fleet) for facts that change at a hotplug at most.
    fn machine(&self) -> crate::node::info::MachineInfo {
        let mut cached = self.machine.borrow_mut();
        match &*cached {
            Some((at, m)) if at.elapsed() < MACHINE_INFO_REFRESH => m.clone(),
            _ => {
                let m = crate::node::info::read(&self.cfg.root_dir);
                *cached = Some((Instant::now(), m.clone()));
                m
            }
        }
    }

    /// The facts of the node now: the machine, the runtime, the config.
    async fn facts(&self) -> NodeFacts {
        let m = self.machine();
        let version = self.runtime.runtime_version().await;
        let ready = match version {
            Ok(v) => {
                *self.runtime_version.borrow_mut() =
                    format!("{}://{}", v.runtime_name, v.runtime_version);
                Readiness::Ready
            }
            Err(e) => Readiness::NotReady(vec![format!("container runtime is down: {e}")]),
        };
        let runtime_version = self.runtime_version.borrow().clone();
        let images = if matches!(ready, Readiness::Ready) {
            self.images().await
        } else {
            self.images.borrow().1.clone()
        };
        let capacity = Resources {
            cpu_millis: m.cpus * 1000,
            memory_bytes: m.memory_bytes,
            ephemeral_storage_bytes: m.root_fs_bytes,
            pods: u64::from(self.cfg.max_pods),
        };
        let internal_ips = if self.cfg.node_ips.is_empty() {
            crate::node::info::primary_ipv4().into_iter().collect()
        } else {
            self.cfg.node_ips.iter().map(|ip| ip.to_string()).collect()
        };
        let pressure = self
            .cfg
            .pressure
            .as_ref()
            .map(|p| p.get())
            .unwrap_or_default();
        NodeFacts {
            name: self.cfg.node_name.clone(),
            hostname: self.cfg.node_name.clone(),
            internal_ips,
            capacity,
            reserved: reserved(&self.cfg, capacity),
            hugepages: m
                .hugepages
                .iter()
                .map(|&(size, pages)| HugePages {
                    page_size_bytes: size,
                    total_bytes: size.saturating_mul(pages),
                })
                .collect(),
            images,
            operating_system: "linux".into(),
            architecture: crate::node::info::go_arch().into(),
            kernel_version: m.kernel_version,
            os_image: m.os_image,
            container_runtime_version: runtime_version,
            kubelet_version: kubelet_version(),
            machine_id: m.machine_id,
            system_uuid: m.system_uuid,
            boot_id: m.boot_id,
            labels: self.cfg.node_labels.clone(),
            taints: self.cfg.taints.clone(),
            kubelet_port: i32::from(self.cfg.port),
            ready,
            memory_pressure: pressure.get(Condition::MemoryPressure),
            disk_pressure: pressure.get(Condition::DiskPressure),
            pid_pressure: pressure.get(Condition::PIDPressure),
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<(Vec<u8>, &'static str)>,
    ) -> Result<(StatusCode, Vec<u8>), String> {
        self.send_accepting(method, path, body, JSON).await
    }

    /// [`Self::send`] with the answer asked for as `accept`.
    async fn send_accepting(
        &self,
        method: Method,
        path: &str,
        body: Option<(Vec<u8>, &'static str)>,
        accept: &'static str,
    ) -> Result<(StatusCode, Vec<u8>), String> {
        let body = body.map(|(bytes, content_type)| Body {
            content_type,
            bytes,
        });
        self.client
            .request_accepting(method, path, body, accept, BODY_LIMIT, REQUEST_DEADLINE)
            .await
            .map(|r| (r.status, r.body))
            .map_err(|e| e.to_string())
    }

    /// Registers the Node (retrying until it works) and returns it.
    async fn register(&self) -> NodeView {
        let path = object_path::<Node>(None, &self.cfg.node_name);
        let mut delay = Duration::from_millis(100);
        let mut logged: Option<String> = None;
        loop {
            match self.try_register(&path).await {
                Ok(node) => {
                    log::info!("node {} registered with the API server", self.cfg.node_name);
                    return node;
                }
                Err(e) => {
                    // Not while the link is down: the transport reports
                    // that outage once.
                    if !self.client.link().is_down() && logged.as_deref() != Some(e.as_str()) {
                        log::warn!("registering node {}: {e}; will retry", self.cfg.node_name);
                        logged = Some(e);
                    }
                    rt::sleep(delay).await;
                    delay = (delay * 2).min(REGISTER_RETRY_MAX);
                }
            }
        }
    }

    async fn try_register(&self, path: &str) -> Result<NodeView, String> {
        let (code, body) = self.send(Method::GET, path, None).await?;
        // A NodeView, not a Node: the full Node deserializer stays out of
        // the binary (see `node_object::NodeView`).
        let decode = |body: &[u8]| decode_json::<NodeView>(body, "the Node");
        match code {
            StatusCode::OK => {
                // It exists: make its labels and annotations ours
                // (kubelet reconciles them).
                let labels = node_object::labels(&self.facts().await);
                let annotations = node_object::annotations();
                let existing = decode(&body)?;
                let current = existing.metadata.labels.clone().unwrap_or_default();
                let current_annotations = existing.metadata.annotations.clone().unwrap_or_default();
                if labels.iter().all(|(k, v)| current.get(k) == Some(v))
                    && annotations
                        .iter()
                        .all(|(k, v)| current_annotations.get(k) == Some(v))
                {
                    return Ok(existing);
                }
                let patch = serde_json::json!({
                    "metadata": { "labels": labels, "annotations": annotations }
                });
                let (code, body) = self
                    .send(
                        Method::PATCH,
                        path,
                        Some((patch.to_string().into_bytes(), MERGE_PATCH)),
                    )
                    .await?;
                match code {
                    c if c.is_success() => decode(&body),
                    c => Err(ApiError::from_reply(c.as_u16(), &body).to_string()),
                }
            }
            StatusCode::NOT_FOUND if self.cfg.register_node => {
                let facts = self.facts().await;
                let node = node_object::node(&facts, wall_clock());
                let bytes = serde_json::to_vec(&node).map_err(|e| e.to_string())?;
                let (code, body) = self
                    .send(
                        Method::POST,
                        &collection_path::<Node>(None),
                        Some((bytes, JSON)),
                    )
                    .await?;
                match code {
                    c if c.is_success() => {
                        self.created.set(true);
                        decode(&body)
                    }
                    StatusCode::CONFLICT => Err("created meanwhile; reading it".into()),
                    c => Err(ApiError::from_reply(c.as_u16(), &body).to_string()),
                }
            }
            StatusCode::NOT_FOUND => {
                Err("the Node does not exist and registerNode is false".into())
            }
            c => Err(ApiError::from_reply(c.as_u16(), &body).to_string()),
        }
    }

    /// Registers the node, then keeps its status and Lease current.
    pub async fn run(self: Rc<Self>) {
        self.node_event(EventType::Normal, reason::STARTING, "Starting kubelet.");
        // The loop's sub-futures are boxed: this task lives as long as the
        // node, and an HTTP exchange held inline made it 6.6 KiB, a thirtieth
        // of a hollow node's whole budget (heaptrack, docs/fleet.md); boxed,
        // they take memory only while they run.
        let node = Box::pin(self.register()).await;
        self.note_reboot(&node);
        *self.node_uid.borrow_mut() = node.metadata.uid.clone();
        let me = self.clone();
        let _lease = rt::spawn(async move { me.lease_loop().await });
        let mut last_posted: Option<NodeStatus> = Some(node.previous_status());
        if self.created.get() {
            // A new Node's first readiness, as kubelet records it.
            self.readiness_event(&node.previous_status());
        }
        let mut posted_at = Instant::now();
        let path = format!("{}/status", object_path::<Node>(None, &self.cfg.node_name));
        let mut logged: Option<String> = None;
        // The conditions the events were last computed from: none at start,
        // so the pressure conditions' events are recorded once per start,
        // as kubelet's.
        let mut event_conditions = Vec::new();
        let mut allocatable_recorded = false;
        let mut csinode_done = false;
        let mut csinode_logged: Option<String> = None;
        // The watch's deliveries when the last status was posted: the API's
        // conditions are compared once the watch brought something newer.
        let mut delivered_at_post = 0u64;
        // The Node's resourceVersion after the last post (its answer's):
        // a delivery older than that is history the watch replays after
        // an outage (the controller's `Unknown` our post already
        // answered), not the API server disagreeing now.
        let mut version_at_post: Option<u64> = None;
        // A post failed, or the link was down, since the last post that
        // succeeded: the API server's conditions may be another's (the node
        // lifecycle controller's `Unknown`) before the watch says so, so the
        // next post writes every condition whole.
        let mut uncertain = false;
        loop {
            uncertain |= self.client.link().is_down();
            if !csinode_done {
                csinode_done = Box::pin(self.csinode_step(&mut csinode_logged)).await;
            }
            let facts = Box::pin(self.facts()).await;
            let status = node_object::status(&facts, last_posted.as_ref(), wall_clock());
            let conditions = status.conditions.clone().unwrap_or_default();
            for reason in node_events::condition_events(&event_conditions, &conditions) {
                let message = node_events::status_event_message(&self.cfg.node_name, reason);
                self.node_event(EventType::Normal, reason, &message);
            }
            event_conditions = conditions;
            let enforced = self
                .cfg
                .allocatable_enforced
                .as_ref()
                .is_some_and(|c| c.get());
            if enforced && !allocatable_recorded {
                allocatable_recorded = true;
                self.node_event(
                    EventType::Normal,
                    reason::NODE_ALLOCATABLE_ENFORCED,
                    "Updated Node Allocatable limit across pods",
                );
            }
            let (delivered, api) = self
                .api_node
                .as_ref()
                .map(LatestNode::get)
                .unwrap_or_default();
            let api_disagrees = delivered > delivered_at_post
                && api.as_ref().is_some_and(|n| {
                    n.conditions_disagree(&status) && !n.older_than(version_at_post)
                });
            if api_disagrees {
                log::info!(
                    "node {}: the API server's conditions differ from the node's \
                     (the node lifecycle controller's, after a stale Lease); posting the status",
                    self.cfg.node_name
                );
            }
            if api_disagrees
                || node_object::should_post(
                    &status,
                    last_posted.as_ref(),
                    posted_at.elapsed(),
                    self.cfg.report_frequency,
                )
            {
                let body = status_patch(&status, last_posted.as_ref(), api_disagrees || uncertain);
                // The answer is not read: its metadata alone is asked for.
                match Box::pin(self.send_accepting(
                    Method::PATCH,
                    &path,
                    Some((body, STRATEGIC_MERGE_PATCH)),
                    METADATA_ONLY,
                ))
                .await
                {
                    Ok((c, answer)) if c.is_success() => {
                        // The answer is the Node's metadata (METADATA_ONLY).
                        version_at_post = protobuf::metadata(&answer)
                            .ok()
                            .and_then(|m| m.resource_version?.parse().ok());
                        if logged.take().is_some() {
                            log::info!("node status posted again");
                        }
                        let api_ready = api.as_ref().map(|n| {
                            n.conditions
                                .iter()
                                .any(|(t, s)| t == "Ready" && s == "True")
                        });
                        let api_changed =
                            api_disagrees && api_ready != Some(ready_word(&status) == "Ready");
                        if api_changed || changed_readiness(last_posted.as_ref(), &status) {
                            log::info!("node {} is {}", self.cfg.node_name, ready_word(&status));
                            self.readiness_event(&status);
                        }
                        last_posted = Some(status);
                        posted_at = Instant::now();
                        delivered_at_post = delivered;
                        uncertain = false;
                    }
                    Ok((c, body)) => {
                        uncertain = true;
                        let e = ApiError::from_reply(c.as_u16(), &body).to_string();
                        if logged.as_deref() != Some(e.as_str()) {
                            log::warn!("posting node status: {e}; will retry");
                            logged = Some(e);
                        }
                    }
                    Err(e) => {
                        uncertain = true;
                        if !self.client.link().is_down() && logged.as_deref() != Some(e.as_str()) {
                            log::warn!("posting node status: {e}; will retry");
                            logged = Some(e);
                        }
                    }
                }
            }
            // The next pass: at the tick, or when the watch delivers the
            // Node (the controller's `Unknown` after an outage is answered
            // at once; a delivery that agrees posts nothing).
            let tick = rt::sleep_on_grid(self.cfg.update_frequency);
            match &self.api_node {
                Some(node) => smol::future::or(tick, node.delivered()).await,
                None => tick.await,
            }
        }
    }

    /// kubelet's `Rebooted` event when the Node's boot ID (as registered
    /// before) is not the machine's now.
    fn note_reboot(&self, node: &NodeView) {
        let before = node
            .status
            .as_ref()
            .and_then(|s| s.node_info.as_ref())
            .map(|i| i.boot_id.clone())
            .filter(|b| !b.is_empty());
        let boot_id = crate::node::info::read(&self.cfg.root_dir).boot_id;
        if let Some(before) = before.filter(|b| *b != boot_id && !boot_id.is_empty()) {
            log::info!("node was rebooted (boot id {before} -> {boot_id})");
            self.node_event(
                EventType::Warning,
                reason::REBOOTED,
                &format!(
                    "Node {} has been rebooted, boot id: {boot_id}",
                    self.cfg.node_name
                ),
            );
        }
    }

    /// One try at the CSINode: true once it is as kubelet's; a new failure
    /// is logged (into `logged`) unless the link is down.
    async fn csinode_step(&self, logged: &mut Option<String>) -> bool {
        let uid = self.node_uid.borrow().clone();
        match self
            .ensure_csinode(uid.as_deref().unwrap_or_default())
            .await
        {
            Ok(()) => true,
            Err(e) if !self.client.link().is_down() && logged.as_deref() != Some(e.as_str()) => {
                log::warn!("the node's CSINode: {e}; will retry");
                *logged = Some(e);
                false
            }
            Err(_) => false,
        }
    }

    /// Creates this node's CSINode, or brings its annotation to
    /// kubelet's.
    async fn ensure_csinode(&self, node_uid: &str) -> Result<(), String> {
        let name = &self.cfg.node_name;
        let path = csi_node::path(name);
        let (code, body) = self.send(Method::GET, &path, None).await?;
        let reply = |code: StatusCode, body: &[u8]| match code {
            c if c.is_success() || c == StatusCode::CONFLICT => Ok(()),
            c => Err(ApiError::from_reply(c.as_u16(), body).to_string()),
        };
        match code {
            StatusCode::NOT_FOUND => {
                let bytes = serde_json::to_vec(&csi_node::csinode(name, node_uid))
                    .map_err(|e| e.to_string())?;
                let (code, body) = self
                    .send(Method::POST, csi_node::COLLECTION, Some((bytes, JSON)))
                    .await?;
                reply(code, &body)
            }
            StatusCode::OK => {
                let existing: serde_json::Value = decode_json(&body, "the CSINode")?;
                let Some(patch) = csi_node::annotation_patch(&existing) else {
                    return Ok(());
                };
                let (code, body) = self
                    .send(
                        Method::PATCH,
                        &path,
                        Some((patch.to_string().into_bytes(), MERGE_PATCH)),
                    )
                    .await?;
                reply(code, &body)
            }
            c => Err(ApiError::from_reply(c.as_u16(), &body).to_string()),
        }
    }
}

/// Decodes a reply with `serde_json::from_str`, the one JSON path every
/// API object takes in this crate (one deserializer per type in the binary).
fn decode_json<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("decoding {what}: {e}"))?;
    serde_json::from_str(text).map_err(|e| format!("decoding {what}: {e}"))
}

/// `PATCH nodes/<name>/status`: a strategic merge patch of what changed
/// since `last_posted`, shaped as kubelet's (a two-way merge patch between
/// the Node it read and the one it computed):
/// - a field of the status only when it changed (`images`, the largest,
///   is written only when the runtime's images changed);
/// - every condition, whole when it changed beyond its heartbeat, else its
///   `type` and `lastHeartbeatTime` alone, with
///   `$setElementOrder/conditions` naming them all in order;
/// - every condition whole when `whole_conditions` (the API server's
///   conditions may not be what was posted: the node lifecycle
///   controller's `Unknown` after a stale Lease, seen by the watch or
///   possible after a failed post or a link outage) or nothing was
///   posted yet.
///
/// So the five-minute report is the heartbeats, not the whole status.
fn status_patch(
    status: &NodeStatus,
    last_posted: Option<&NodeStatus>,
    whole_conditions: bool,
) -> Vec<u8> {
    use serde_json::{json, Map, Value};
    let object = |s: &NodeStatus| match crate::pod::to_json_value(s) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let before = last_posted.map(object).unwrap_or_default();
    let mut ours = object(status);
    // The conditions as serialized with the rest, one per `status`'s.
    let serialized = match ours.remove("conditions") {
        Some(Value::Array(list)) => list,
        _ => Vec::new(),
    };
    let mut patch = Map::new();
    for (key, value) in ours {
        if before.get(&key) != Some(&value) {
            patch.insert(key, value);
        }
    }
    if let Some(conditions) = status.conditions.as_deref() {
        let posted = last_posted
            .and_then(|l| l.conditions.as_deref())
            .filter(|_| !whole_conditions)
            .unwrap_or_default();
        let order: Vec<Value> = conditions
            .iter()
            .map(|c| json!({ "type": c.type_ }))
            .collect();
        let list: Vec<Value> = conditions
            .iter()
            .zip(serialized)
            .map(|(c, whole)| {
                let heartbeat_only = posted.iter().any(|p| {
                    p.type_ == c.type_
                        && NodeCondition {
                            last_heartbeat_time: c.last_heartbeat_time.clone(),
                            ..p.clone()
                        } == *c
                });
                if heartbeat_only {
                    json!({ "lastHeartbeatTime": whole["lastHeartbeatTime"], "type": c.type_ })
                } else {
                    whole
                }
            })
            .collect();
        patch.insert("$setElementOrder/conditions".into(), Value::Array(order));
        patch.insert("conditions".into(), Value::Array(list));
    }
    serde_json::to_vec(&json!({ "status": patch })).unwrap_or_default()
}

fn ready_word(s: &NodeStatus) -> &'static str {
    let ready = s
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if ready {
        "Ready"
    } else {
        "NotReady"
    }
}

fn changed_readiness(before: Option<&NodeStatus>, after: &NodeStatus) -> bool {
    before.is_none_or(|b| ready_word(b) != ready_word(after))
}

/// The wall clock as API time (the epoch if the clock is before it).
fn wall_clock() -> Timestamp {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp::new(d.as_secs() as i64, d.subsec_nanos() as i32).unwrap_or(Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_patch_carries_images_only_when_they_changed() {
        let image = |n: &str| ContainerImage {
            names: Some(vec![n.to_string()]),
            size_bytes: Some(1),
        };
        let status = |images: Vec<ContainerImage>| NodeStatus {
            images: Some(images),
            ..Default::default()
        };
        let patch = |s: &NodeStatus, last: Option<&NodeStatus>| -> serde_json::Value {
            serde_json::from_slice(&status_patch(s, last, false)).unwrap()
        };
        let a = status(vec![image("a")]);
        let b = status(vec![image("a"), image("b")]);
        assert_eq!(patch(&a, None)["status"]["images"][0]["names"][0], "a");
        assert!(patch(&a, Some(&NodeStatus::default()))["status"]["images"].is_array());
        assert!(patch(&a, Some(&a))["status"].get("images").is_none());
        assert_eq!(patch(&b, Some(&a))["status"]["images"][1]["names"][0], "b");
    }

    #[test]
    fn a_status_patch_after_a_post_carries_the_heartbeats_and_what_changed_alone() {
        let at = |secs: i64| {
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::from_second(secs).unwrap(),
            )
        };
        let condition = |type_: &str, status: &str, heartbeat: i64| NodeCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(format!("Reason{status}")),
            message: Some("m".into()),
            last_heartbeat_time: Some(at(heartbeat)),
            last_transition_time: Some(at(1)),
        };
        let node = |ready: &str, heartbeat: i64, pods: &str| NodeStatus {
            conditions: Some(vec![
                condition("MemoryPressure", "False", heartbeat),
                condition("Ready", ready, heartbeat),
            ]),
            capacity: Some(
                [(
                    "pods".to_string(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(pods.into()),
                )]
                .into(),
            ),
            ..Default::default()
        };
        let patch = |s: &NodeStatus, last: Option<&NodeStatus>, whole: bool| -> serde_json::Value {
            serde_json::from_slice(&status_patch(s, last, whole)).unwrap()
        };
        let posted = node("True", 100, "110");

        // The five-minute report: the heartbeats, in kubelet's shape.
        let report = patch(&node("True", 400, "110"), Some(&posted), false);
        assert_eq!(
            report,
            serde_json::json!({"status": {
                "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}],
                "conditions": [
                    {"type": "MemoryPressure", "lastHeartbeatTime": "1970-01-01T00:06:40Z"},
                    {"type": "Ready", "lastHeartbeatTime": "1970-01-01T00:06:40Z"},
                ],
            }})
        );

        // A condition that flipped goes whole, a changed field goes too.
        let flipped = patch(&node("False", 400, "100"), Some(&posted), false);
        let conditions = flipped["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions[0].as_object().unwrap().len(), 2);
        assert_eq!(conditions[1]["status"], "False");
        assert_eq!(conditions[1]["reason"], "ReasonFalse");
        assert_eq!(flipped["status"]["capacity"]["pods"], "100");

        // Nothing posted yet, or the API server's conditions are not what
        // was posted: every condition whole, every field.
        for p in [
            patch(&node("True", 400, "110"), None, false),
            patch(&node("True", 400, "110"), Some(&posted), true),
        ] {
            let conditions = p["status"]["conditions"].as_array().unwrap();
            assert!(conditions.iter().all(|c| c["reason"].is_string()));
        }
        assert_eq!(
            patch(&node("True", 400, "110"), None, false)["status"]["capacity"]["pods"],
            "110"
        );
    }

    #[test]
    fn allocatable_holds_back_the_reservations_and_hard_eviction_thresholds() {
        let mut k = KubeletConfig::default();
        k.system_reserved.memory_bytes = Some(100 << 20);
        k.kube_reserved.cpu_millis = Some(250);
        k.eviction_hard.insert(
            "memory.available".into(),
            EvictionThreshold::Quantity(50 << 20),
        );
        k.eviction_hard.insert(
            "nodefs.available".into(),
            EvictionThreshold::Percentage(10.0),
        );
        let c = HeartbeatConfig::new(&k, "pi-1");
        let cap = Resources {
            cpu_millis: 4000,
            memory_bytes: 1 << 30,
            ephemeral_storage_bytes: 1000,
            pods: 110,
        };
        let r = reserved(&c, cap);
        assert_eq!(r.cpu_millis, 250);
        assert_eq!(r.memory_bytes, 150 << 20);
        assert_eq!(r.ephemeral_storage_bytes, 100);
    }
}
