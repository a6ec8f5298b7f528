//! The pod workers: the agent's part that runs pods. It owns the pod
//! registry (every [`PodEntry`], one worker task each), the sources and
//! their merge, the restart back-off, the last relist (PLEG), image pulls,
//! the start semaphores, probes, the pods' files and volumes, and the
//! statuses and events it reports. Its fields are private to this folder:
//! housekeeping reaches the pods through `HousekeepingHost` (implemented
//! here, `housekeeping_host.rs`), the read-only views and the wiring
//! through the methods below, which say what they need, the way kubelet's
//! `pod_workers.go` answers `IsPodTerminationRequested`-style questions.
//! What it must not know: housekeeping's state (eviction, image GC, log
//! rotation), the admin socket and the node API, how a source reads its
//! origin, CRI transport details.
//!
//! Its rooms, one job each:
//!
//! - `sources.rs`: one task per pod source ([`crate::source::Source`]),
//!   [`crate::source::merge::merge`] of their sets, per-source readiness,
//!   orphan adoption;
//! - `observe.rs`: CRI answers → [`crate::pod::ObservedPod`], PLEG records
//!   and GC input (pure), plus the PLEG task;
//! - `sync.rs`: one worker per pod: observe, then one sync per lifecycle
//!   state ([`super::lifecycle`]): [`crate::pod::plan::plan`] and perform
//!   the actions (kills, termination), calling `start.rs` for the starts
//!   (a sandbox: cgroup, directories, RunPodSandbox; a container: image,
//!   files, config, Create/StartContainer, postStart); `terminate.rs` a
//!   deleted pod's termination;
//! - `images.rs`: making an image present per `imagePullPolicy`, with its
//!   back-off;
//! - `host_files.rs`: what a pod needs on the host (directories, volumes,
//!   hosts file, termination logs) and host facts (IP, memory, resolv.conf);
//! - `config_volumes.rs`: configMap, secret, downwardAPI and projected
//!   volumes (tmpfs for secrets, `tmpfs.rs`), written by `atomic_writer.rs`
//!   (kubelet's `..data` swap) at a container's start and refreshed at
//!   every sync;
//! - `node_facts.rs`: the node's labels, allocatable and what the host and the
//!   runtime support (for admission and container configs);
//! - `probes.rs`: probe tasks and lifecycle hooks;
//! - `status_report.rs`: pod status assembly for the pod list and for a
//!   [`StatusSink`] (the API-server status sync), and the metrics the pod
//!   workers record;
//! - `recent_events.rs`: the last few events per pod (`picolet describe`);
//! - `running.rs`: `GET /runningpods/` from the last relist;
//! - `housekeeping_host.rs`: `HousekeepingHost`: the registry's answers to
//!   housekeeping.
//!
//! Tasks share state through `RefCell`s; a borrow is never held across an
//! `.await`.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use smol::channel::Sender;

pub(in crate::agent) use super::now_unix_nanos;
use super::{housekeeping, lifecycle, AgentConfig, EventSink, ProbeMetrics, StatusSink};
use crate::backoff::Backoff;
use crate::cgroups::PodCgroups;
use crate::cri::{api, RuntimeService};
use crate::node::eviction::PressureCell;
use crate::pod::config_objects::{ConfigObjects, ObjectRef};
use crate::pod::plan::{Health, KillReason};
use crate::pod::ObservedPod;
use crate::rt;
use crate::status::Waiting;

mod atomic_writer;
mod config_volumes;
pub(super) mod host_files;
mod housekeeping_host;
mod images;
mod node_facts;
mod observe;
pub(super) mod probes;
mod queries;
mod recent_events;
mod running;
mod sources;
mod start;
mod status_report;
mod sync;
mod terminate;
mod termination_message;
#[cfg(test)]
mod tests;
mod tmpfs;

pub(super) use queries::ActivePod;

const RETRY_AFTER_ERROR: Duration = Duration::from_secs(2);

/// What the agent keeps per container name of a pod, besides what the
/// runtime says.
#[derive(Clone, Debug, Default)]
struct ContainerEntry {
    /// Why it is not running, when the agent knows better than the runtime.
    waiting: Option<Waiting>,
    /// Readiness probe result (`None`: no readiness probe).
    ready: Option<bool>,
    /// Startup probe result (`None`: no startup probe).
    started: Option<bool>,
    /// A probe asked for a kill (read by the planner).
    unhealthy: Option<KillReason>,
    /// A probe-level terminationGracePeriodSeconds for that pending kill.
    kill_grace: Option<i64>,
    /// Why the pending kill happens (until it happens).
    kill_message: Option<String>,
    /// Why picolet killed past instances: (container ID, message), newest
    /// last, shown in their terminated state.
    killed: Vec<(String, String)>,
    /// Asks the readiness probe task to probe at once (see
    /// `probe::Worker::trigger`); `None`: no readiness probe task.
    readiness_trigger: Option<Sender<()>>,
}

/// How many killed instances per container keep their message (the status
/// shows the current and the last one).
const KILLED_KEPT: usize = 2;

impl ContainerEntry {
    fn note_killed(&mut self, id: String, message: String) {
        self.killed.push((id, message));
        if self.killed.len() > KILLED_KEPT {
            self.killed.remove(0);
        }
    }
}

/// The agent's state of a pod's containers, by name: a short vector, not
/// a `BTreeMap`, whose first insert allocates a node for eleven entries
/// even for a pod's one container.
#[derive(Default)]
struct Containers(Vec<(String, ContainerEntry)>);

impl Containers {
    fn get(&self, name: &str) -> Option<&ContainerEntry> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }

    fn entry_or_default(&mut self, name: &str) -> &mut ContainerEntry {
        let at = match self.0.iter().position(|(n, _)| n == name) {
            Some(at) => at,
            None => {
                self.0.push((name.to_string(), ContainerEntry::default()));
                self.0.len() - 1
            }
        };
        &mut self.0[at].1
    }

    fn iter(&self) -> impl Iterator<Item = (&String, &ContainerEntry)> {
        self.0.iter().map(|(n, c)| (n, c))
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = (&String, &mut ContainerEntry)> {
        self.0.iter_mut().map(|(n, c)| (&*n, c))
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut ContainerEntry> {
        self.0.iter_mut().map(|(_, c)| c)
    }
}

#[cfg(test)]
impl std::ops::Index<&str> for Containers {
    type Output = ContainerEntry;
    fn index(&self, name: &str) -> &ContainerEntry {
        self.get(name).expect("no such container entry")
    }
}

/// One pod the agent manages.
struct PodEntry {
    pod: Rc<Pod>,
    /// Which source wants it; `None` for an orphan.
    source: Option<crate::source::PodSource>,
    /// Running, evicted, or deleted (terminate, then forget).
    lifecycle: lifecycle::Lifecycle,
    wake: Sender<()>,
    observed: ObservedPod,
    /// When `observed` was read from the runtime; `None` when the last
    /// sync acted on the runtime after that (see `pleg::observation_holds`).
    observed_at: Option<std::time::Instant>,
    /// Never synced: its first sync may start from nothing
    /// (`pleg::nothing_yet`).
    never_synced: bool,
    first_seen_unix: i64,
    /// When this run first saw the pod (Unix ns), and whether its start
    /// was measured (`kubelet_pod_start_duration_seconds`).
    seen_unix_nanos: i64,
    start_measured: bool,
    /// Sandbox IPs by sandbox ID (a sandbox's IP never changes).
    sandbox_ips: HashMap<String, (String, Vec<String>)>,
    /// Sandboxes a container could not join because their namespaces are
    /// gone (`cri::sandbox_namespaces_gone`): taken as not ready whatever
    /// the runtime lists, so the plan replaces them. Dropped once the
    /// runtime no longer lists them ready.
    dead_sandboxes: Vec<String>,
    containers: Containers,
    /// Each container's spec hash (`spec::container_hash`, by name) for the
    /// pod object it was computed from: every sync plans with the hashes,
    /// and a pod object never changes (an update is a new `Rc`). Holding
    /// the `Rc` keeps its address from being reused by another pod.
    spec_hashes: Option<(Rc<Pod>, SpecHashes)>,
    /// The spec's warnings were logged (once per pod).
    warned: bool,
    /// Digest of the files last written per configMap/secret/downwardAPI/
    /// projected volume (see `config_volumes.rs`).
    volume_digests: HashMap<String, u64>,
    /// The last failure to refresh those volumes (logged when it changes).
    volume_error: Option<String>,
    /// Each condition's status and `lastTransitionTime` as last reported
    /// (`status::Transitions`; a `Cell`: any status read stamps them).
    transitions: std::cell::Cell<crate::status::Transitions>,
    probe_tasks: Vec<smol::Task<()>>,
    _task: Option<smol::Task<()>>,
}

/// Each container's spec hash, by container name.
type SpecHashes = Rc<HashMap<String, String>>;

impl PodEntry {
    fn container(&mut self, name: &str) -> &mut ContainerEntry {
        self.containers.entry_or_default(name)
    }

    /// The planner's view of probe kills.
    fn health(&self) -> Health {
        Health {
            unhealthy: self
                .containers
                .iter()
                .filter_map(|(n, c)| c.unhealthy.clone().map(|r| (n.clone(), r)))
                .collect(),
            started: self
                .containers
                .iter()
                .filter_map(|(n, c)| c.started.map(|s| (n.clone(), s)))
                .collect(),
        }
    }

    /// Forgets probe results (the pod changed; new probe tasks seed them).
    fn clear_probe_results(&mut self) {
        for c in self.containers.values_mut() {
            c.ready = None;
            c.started = None;
        }
    }
}

/// The pod workers' state: the registry and everything that runs its pods.
pub(super) struct PodWorkers<R: RuntimeService> {
    cfg: Rc<AgentConfig>,
    runtime: R,
    cgroups: Option<PodCgroups>,
    host: host_files::HostFacts,
    /// The node's labels' inputs and what the host and runtime support.
    node: RefCell<node_facts::NodeFacts>,
    /// The node's pressure conditions, kept by housekeeping's eviction
    /// task, read at admission.
    pressure: PressureCell,
    pods: RefCell<BTreeMap<String, PodEntry>>,
    sources: RefCell<sources::Sources>,
    backoff: RefCell<Backoff>,
    images: images::Images,
    runtime_name: RefCell<String>,
    /// The last relist, for GC and orphan adoption.
    relist: RefCell<observe::Relist>,
    /// When a pod was last forgotten (its worker ended): see
    /// `pleg::nothing_yet`.
    last_forgotten: std::cell::Cell<Option<std::time::Instant>>,
    probe_metrics: RefCell<ProbeMetrics>,
    /// kubelet's own `/metrics` families recorded as things happen (pod
    /// starts, relists, evictions).
    kubelet_metrics: RefCell<crate::node::kubelet_metrics::KubeletMetrics>,
    /// Where pod statuses go (`None`: standalone, nobody listens).
    status_sink: RefCell<Option<Rc<dyn StatusSink>>>,
    /// Where events go (`None`: standalone, nobody listens).
    event_sink: RefCell<Option<Rc<dyn EventSink>>>,
    /// RunPodSandbox calls in flight at most (see `sync.rs`, taken in
    /// `start.rs`).
    sandbox_starts: smol::lock::Semaphore,
    /// CreateContainer + StartContainer in flight at most (see `sync.rs`,
    /// taken in `start.rs`).
    container_starts: smol::lock::Semaphore,
    /// Where API pods' ConfigMaps and Secrets are looked up (`None`:
    /// standalone).
    config_objects: RefCell<Option<Rc<dyn ConfigObjects>>>,
    /// Where Services are looked up for the environment, told the pods
    /// the node runs (`None`: standalone, no Service variables).
    services: RefCell<Option<Rc<dyn crate::pod::spec::Services>>>,
    /// The "no tmpfs for secret volumes" warning was logged.
    tmpfs_warned: std::cell::Cell<bool>,
    /// The last few events per pod, for `picolet describe` offline.
    recent_events: RefCell<recent_events::RecentEvents>,
}

impl<R: RuntimeService> PodWorkers<R> {
    /// The pod workers over `runtime` (the CRI client in the binary, the
    /// in-memory runtime in tests and hollow nodes); `pressure` is
    /// housekeeping's, read at admission. Nothing runs until
    /// [`PodWorkers::connect_runtime`] and the sources' tasks.
    pub(super) fn new(
        cfg: Rc<AgentConfig>,
        runtime: R,
        cgroups: Option<PodCgroups>,
        host: host_files::HostFacts,
        pressure: PressureCell,
    ) -> Rc<Self> {
        Rc::new(PodWorkers {
            sources: RefCell::new(sources::Sources::new(cfg.sources())),
            host,
            node: RefCell::new(node_facts::NodeFacts::default()),
            pressure,
            runtime,
            cgroups,
            pods: RefCell::new(BTreeMap::new()),
            backoff: RefCell::new(Backoff::default()),
            images: images::Images::default(),
            runtime_name: RefCell::new("containerd".into()),
            relist: RefCell::new(observe::Relist::default()),
            last_forgotten: std::cell::Cell::new(None),
            probe_metrics: RefCell::new(ProbeMetrics::default()),
            kubelet_metrics: RefCell::new(Default::default()),
            status_sink: RefCell::new(None),
            event_sink: RefCell::new(None),
            sandbox_starts: smol::lock::Semaphore::new(sync::SANDBOX_STARTS_IN_FLIGHT),
            container_starts: smol::lock::Semaphore::new(sync::CONTAINER_STARTS_IN_FLIGHT),
            config_objects: RefCell::new(None),
            services: RefCell::new(None),
            tmpfs_warned: std::cell::Cell::new(false),
            recent_events: RefCell::default(),
            cfg,
        })
    }

    /// Takes the machine's facts as the node's (the binary and hollow
    /// nodes; unit tests keep the defaults).
    pub(super) fn detect_node_facts(&self) {
        self.node.replace(node_facts::NodeFacts::detect());
    }

    /// The runtime the pod workers call.
    pub(super) fn runtime(&self) -> &R {
        &self.runtime
    }

    /// The configuration the agent was made with.
    pub(super) fn cfg(&self) -> &AgentConfig {
        &self.cfg
    }

    /// Creates the pod cgroups' QoS hierarchy, if there are pod cgroups.
    pub(super) fn ensure_qos_hierarchy(&self) {
        if let Some(cg) = &self.cgroups {
            if let Err(e) = cg.ensure_qos_hierarchy() {
                log::error!("creating the QoS cgroup hierarchy: {e}");
            }
        }
    }

    pub(super) async fn connect_runtime(&self) {
        let mut logged = false;
        loop {
            match self
                .runtime
                .version(api::VersionRequest {
                    version: "v1".into(),
                })
                .await
            {
                Ok(v) => {
                    log::info!(
                        "container runtime {} {} (CRI {}) at {}",
                        v.runtime_name,
                        v.runtime_version,
                        v.runtime_api_version,
                        self.cfg.runtime_socket.display()
                    );
                    *self.runtime_name.borrow_mut() = v.runtime_name;
                    return;
                }
                Err(e) => {
                    if !logged {
                        log::error!("container runtime not ready: {e}; retrying");
                        logged = true;
                    }
                    rt::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }

    /// Sends kubelet's events to the API server from now on.
    pub fn set_event_sink(&self, sink: Rc<dyn EventSink>) {
        *self.event_sink.borrow_mut() = Some(sink);
    }

    /// Looks API pods' ConfigMaps and Secrets up in `objects` from now on.
    pub fn set_config_objects(&self, objects: Rc<dyn ConfigObjects>) {
        *self.config_objects.borrow_mut() = Some(objects);
    }

    /// Looks Services up in `services` for every pod's environment from
    /// now on, and tells it the pods the node runs.
    pub fn set_services(&self, services: Rc<dyn crate::pod::spec::Services>) {
        *self.services.borrow_mut() = Some(services);
    }

    /// The Services of `namespace` were read for the first time: the pods
    /// that may wait for them (all of them for `default`, the master
    /// Service's) sync.
    pub fn services_synced(&self, namespace: &str) {
        for e in self.pods.borrow().values() {
            let all = namespace == crate::pod::spec::MASTER_NAMESPACE;
            if e.lifecycle.is_wanted()
                && (all || crate::pod::accessors::namespace(&e.pod) == namespace)
            {
                let _ = e.wake.try_send(());
            }
        }
    }

    /// A watched ConfigMap or Secret changed (or became known): the pods
    /// referencing it sync, which starts waiting containers and rewrites
    /// their volumes.
    pub fn config_object_changed(&self, r: &ObjectRef) {
        for e in self.pods.borrow().values() {
            if e.lifecycle.is_wanted() && crate::pod::config_objects::references(&e.pod).contains(r)
            {
                let _ = e.wake.try_send(());
            }
        }
    }

    /// Something only pod `uid` looks up changed (a service-account token
    /// was issued or refreshed): it syncs, which rewrites its volumes.
    pub fn pod_objects_changed(&self, uid: &str) {
        self.wake(uid);
    }

    /// Records an event about `pod` (or its container): kept in memory
    /// for `picolet describe`, and sent to the sink if anyone listens.
    fn event(
        &self,
        pod: &Pod,
        container: Option<&str>,
        warning: bool,
        reason: &str,
        message: &str,
    ) {
        let field_path = container.map(|c| crate::pod::facts::container_field_path(pod, c));
        let about = recent_events::About {
            namespace: pod.metadata.namespace.as_deref().unwrap_or("default"),
            name: pod.metadata.name.as_deref().unwrap_or(""),
            uid: crate::pod::uid(pod),
            field_path: field_path.as_deref(),
        };
        let now = now_unix_nanos() / 1_000_000_000;
        self.recent_events
            .borrow_mut()
            .record(about, warning, reason, message, now);
        let sink = self.event_sink.borrow().clone();
        if let Some(sink) = sink {
            sink.pod_event(pod, container, warning, reason, message);
        }
    }

    /// kubelet's `Failed` event for a container that could not start.
    fn container_failed_event(&self, pod: &Pod, name: &str, w: &Waiting) {
        if w.message.starts_with("MountVolume.SetUp failed") {
            // kubelet reports a volume that cannot be set up on the pod.
            self.event(pod, None, true, "FailedMount", &w.message);
            return;
        }
        let text = if w.reason.starts_with("ErrImage") || w.reason == "ImagePullBackOff" {
            format!("Error: {}", w.reason)
        } else {
            format!("Error: {}", w.message)
        };
        self.event(pod, Some(name), true, "Failed", &text);
    }

    fn wake(&self, uid: &str) {
        if let Some(e) = self.pods.borrow().get(uid) {
            let _ = e.wake.try_send(());
        }
    }

    fn wake_all(&self) {
        for e in self.pods.borrow().values() {
            let _ = e.wake.try_send(());
        }
    }
}
