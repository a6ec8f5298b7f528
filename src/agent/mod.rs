//! The agent: the I/O shell around the pure decisions. It is the only
//! module that changes pods in the runtime; it runs every loop on the
//! single-threaded executor. Its rooms, one job each:
//!
//! - `config.rs`: [`AgentConfig`] from the KubeletConfiguration;
//! - `sources.rs`: one task per pod source ([`crate::source::Source`]),
//!   [`crate::source::merge::merge`] of their sets, per-source readiness,
//!   orphan adoption;
//! - `observe.rs`: CRI answers → [`crate::pod::ObservedPod`], PLEG records
//!   and GC input (pure), plus the PLEG task;
//! - `lifecycle.rs`: a pod's lifecycle (running, evicted, deleted), its
//!   transitions and the questions other loops ask of it (pure);
//! - `sync.rs`: one worker per pod: observe, then one sync per lifecycle
//!   state: [`crate::pod::plan::plan`] and perform the actions (kills,
//!   termination), calling `start.rs` for
//!   the starts (a sandbox: cgroup, directories, RunPodSandbox; a
//!   container: image, files, config, Create/StartContainer, postStart);
//! - `images.rs`: making an image present per `imagePullPolicy`, with its
//!   back-off;
//! - `host_files.rs`: what a pod needs on the host (directories, volumes,
//!   hosts file, termination logs) and host facts (IP, memory, resolv.conf);
//! - `config_volumes.rs`: configMap, secret, downwardAPI and projected
//!   volumes (tmpfs for secrets), written by `atomic_writer.rs` (kubelet's
//!   `..data` swap) at a container's start and refreshed at every sync;
//! - `container_logs.rs`: serving a container's log (`/containerLogs/...`);
//! - `housekeeping/`: node-pressure eviction (kernel stats, the pure
//!   manager, reclaim, one pod per pass) and the pressure conditions,
//!   image GC (thresholds, LRU), the GC task ([`crate::gc::collect`], log
//!   dirs, cgroups) and container log rotation: a part of its own, which
//!   sees the pods only through `HousekeepingHost`;
//! - `housekeeping_host.rs`: `HousekeepingHost` for the agent (the pod
//!   registry's answers to housekeeping);
//! - `sd_notify.rs`: systemd's readiness notifications (`Type=notify`);
//! - `summary.rs`: `/stats/summary` and `/metrics/resource` (kernel
//!   stats per node, pod and container; CPU rates between scrapes);
//! - `status.rs`: pod status assembly for the admin socket and for a
//!   [`StatusSink`] (the API-server status sync);
//! - `node.rs`: the node's labels, allocatable and what the host and the
//!   runtime support (for admission and container configs);
//! - `probes.rs`: probe tasks and lifecycle hooks.
//!
//! The agent calls the runtime through [`RuntimeService`]: the binary uses
//! the CRI client, unit tests (and later hollow nodes) the in-memory
//! runtime. Tasks share state through `RefCell`s; a borrow is never held
//! across an `.await`. What the agent must not know: how a pod source reads
//! its origin, how the configuration is loaded, CRI transport details, and
//! the rules that are pure functions elsewhere (planning, status, GC,
//! merge, a pod's derived facts in [`crate::pod::facts`]).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use smol::channel::Sender;

use crate::backoff::Backoff;
use crate::cgroups::PodCgroups;
use crate::cri::{api, Runtime, RuntimeService};
use crate::pod::config_objects::{ConfigObjects, ObjectRef};
use crate::pod::plan::{Health, KillReason};
use crate::pod::ObservedPod;
use crate::rt;
use crate::status::Waiting;

mod atomic_writer;
mod config;
#[cfg(test)]
mod config_tests;
mod config_volumes;
mod container_logs;
mod host_files;
mod housekeeping;
mod housekeeping_host;
mod images;
mod lifecycle;
mod node;
mod node_view;
mod observe;
mod probes;
mod recent_events;
mod running;
#[cfg(test)]
mod sandbox_tests;
mod sd_notify;
mod sources;
mod start;
mod status;
mod streaming;
mod summary;
mod sync;
mod terminate;
mod termination_message;
#[cfg(test)]
mod tests;
mod tmpfs;

pub use config::{AgentConfig, AgentConfigError, EvictionConfig};
pub use probes::ProbeMetrics;

/// Appends metric families (with their HELP and TYPE lines) to `/metrics`.
pub type MoreMetrics = Rc<dyn Fn(&mut String)>;

/// The API server's state as `GET /node` shows it (`apiServer`).
pub type ApiServerView = Rc<dyn Fn() -> serde_json::Value>;

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

/// Where the agent reports what became of its pods: the narrow interface
/// through which the API-server side (status sync, mirror pods, the final
/// DELETE of a pod whose deletion was asked) learns about pods, without
/// reaching into the agent. Calls are cheap and synchronous; the sink
/// queues and does its I/O in its own tasks.
pub trait StatusSink {
    /// The pod's status after a sync. Called after every sync: the sink
    /// drops what did not change.
    fn status(&self, pod: &Pod, status: &PodStatus);
    /// The pod is terminated (every container stopped) and the agent forgot
    /// it; `status` is its last one.
    fn terminated(&self, pod: &Pod, status: &PodStatus);
}

/// Where the agent reports kubelet's events about its pods (Pulling,
/// Created, Started, Killing, BackOff, Unhealthy, Evicted, ...): the
/// API-server side records them as Events. Calls are cheap and
/// synchronous; the sink deduplicates, rate-limits and buffers.
pub trait EventSink {
    /// An event about `pod`, or its container `container`.
    fn pod_event(
        &self,
        pod: &Pod,
        container: Option<&str>,
        warning: bool,
        reason: &str,
        message: &str,
    );
}

/// State shared by every task.
pub struct Agent<R: RuntimeService = Runtime> {
    cfg: AgentConfig,
    runtime: R,
    cgroups: Option<PodCgroups>,
    host: host_files::HostFacts,
    /// The node's labels' inputs and what the host and runtime support.
    node: RefCell<node::NodeFacts>,
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
    /// More of `/metrics` from elsewhere (the API server link's), appended
    /// to what the agent renders.
    more_metrics: RefCell<Option<MoreMetrics>>,
    /// The API server's state for `GET /node` (`None`: standalone).
    api_server_view: RefCell<Option<ApiServerView>>,
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
    /// Eviction, image GC, the GC task, log rotation: their state.
    housekeeping: housekeeping::Housekeeping,
    /// Where API pods' ConfigMaps and Secrets are looked up (`None`:
    /// standalone).
    config_objects: RefCell<Option<Rc<dyn ConfigObjects>>>,
    /// Where Services are looked up for the environment, told the pods
    /// the node runs (`None`: standalone, no Service variables).
    services: RefCell<Option<Rc<dyn crate::pod::spec::Services>>>,
    /// The "no tmpfs for secret volumes" warning was logged.
    tmpfs_warned: std::cell::Cell<bool>,
    /// CPU readings between `/stats/summary` scrapes.
    summary: summary::SummaryState,
    /// The last few events per pod, for `picolet describe` offline.
    recent_events: RefCell<recent_events::RecentEvents>,
}

fn now_unix_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl Agent<Runtime> {
    /// Creates the agent with the CRI client of `cfg.runtime_socket`;
    /// nothing runs until [`Agent::run`].
    pub fn new(cfg: AgentConfig) -> Rc<Agent> {
        let runtime = Runtime::new(cfg.runtime_socket.clone(), cfg.runtime_request_timeout);
        let cgroups =
            match PodCgroups::new(&cfg.cgroup_mount, &cfg.cgroup_root, cfg.cgroups_per_qos) {
                Ok(c) => Some(c),
                Err(e) => {
                    log::warn!(
                        "cgroups under {}: {e}; pod-level cgroups are disabled",
                        cfg.cgroup_mount.display()
                    );
                    None
                }
            };
        let host = host_files::HostFacts::detect(&cfg);
        let agent = Agent::with_runtime(cfg, runtime, cgroups, host);
        agent.node.replace(node::NodeFacts::detect());
        agent
    }
}

#[cfg(feature = "hollow")]
impl Agent<crate::cri::memory::MemoryRuntime> {
    /// A hollow node's agent (`picolet hollow`): the in-memory `runtime`,
    /// no pod cgroups, the machine's facts as the node's.
    pub fn hollow(cfg: AgentConfig, runtime: crate::cri::memory::MemoryRuntime) -> Rc<Self> {
        let host = host_files::HostFacts::detect(&cfg);
        let agent = Agent::with_runtime(cfg, runtime, None, host);
        agent.node.replace(node::NodeFacts::detect());
        agent
    }
}

impl<R: RuntimeService> Agent<R> {
    /// The runtime the agent calls (the CRI client in the binary).
    pub fn runtime(&self) -> &R {
        &self.runtime
    }

    /// Creates the agent over any runtime (the in-memory one in tests).
    fn with_runtime(
        cfg: AgentConfig,
        runtime: R,
        cgroups: Option<PodCgroups>,
        host: host_files::HostFacts,
    ) -> Rc<Self> {
        Rc::new(Agent {
            sources: RefCell::new(sources::Sources::new(cfg.sources())),
            host,
            node: RefCell::new(node::NodeFacts::default()),
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
            more_metrics: RefCell::new(None),
            api_server_view: RefCell::new(None),
            status_sink: RefCell::new(None),
            event_sink: RefCell::new(None),
            sandbox_starts: smol::lock::Semaphore::new(sync::SANDBOX_STARTS_IN_FLIGHT),
            container_starts: smol::lock::Semaphore::new(sync::CONTAINER_STARTS_IN_FLIGHT),
            housekeeping: housekeeping::Housekeeping::new(&cfg),
            config_objects: RefCell::new(None),
            services: RefCell::new(None),
            tmpfs_warned: std::cell::Cell::new(false),
            summary: summary::SummaryState::default(),
            recent_events: RefCell::default(),
            cfg,
        })
    }

    /// Runs every loop until `shutdown` resolves. The admin socket opens
    /// first and answers "waiting for the runtime at ..." until the
    /// runtime does; `shutdown` ends every state, that wait included.
    pub async fn run(self: &Rc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        let socket = self.cfg.admin_socket.clone();
        let listener = match crate::admin::bind(&socket) {
            Ok(l) => Some(Rc::new(l)),
            Err(e) => {
                log::error!("{e}");
                None
            }
        };
        let waiting_for = format!(
            "waiting for the runtime at unix://{}",
            self.cfg.runtime_socket.display()
        );
        sd_notify::notify(sd_notify::Notice::Waiting(&waiting_for));
        let waiting = listener.clone().map(|l| {
            let router = crate::admin::waiting_router(waiting_for.clone());
            let path = socket.clone();
            rt::spawn(async move {
                if let Err(e) = crate::admin::serve_router(&l, &path, router).await {
                    log::error!("{e}");
                }
            })
        });
        let work = async {
            host_files::prepare_dirs(&self.cfg);
            if let Some(cg) = &self.cgroups {
                if let Err(e) = cg.ensure_qos_hierarchy() {
                    log::error!("creating the QoS cgroup hierarchy: {e}");
                }
            }
            self.connect_runtime().await;
            self.read_runtime_features().await;
            drop(waiting);

            let mut tasks = self.spawn_configured_sources();
            let me = self.clone();
            tasks.push(rt::spawn(async move { me.pleg_loop().await }));
            let me = self.clone();
            tasks.push(rt::spawn(
                async move { me.housekeeping.gc_loop(&*me).await },
            ));
            let me = self.clone();
            tasks.push(rt::spawn(async move {
                me.housekeeping.eviction_loop(&*me).await
            }));
            let me = self.clone();
            tasks.push(rt::spawn(async move {
                me.housekeeping.log_rotation_loop(&*me).await
            }));
            if let Some(l) = listener {
                let router = self.admin_handlers().router();
                tasks.push(rt::spawn(async move {
                    if let Err(e) = crate::admin::serve_router(&l, &socket, router).await {
                        log::error!("{e}");
                    }
                }));
            }
            // Up: the admin socket serves the pods, the runtime answered and
            // the static pod source is running its first sync.
            sd_notify::notify(sd_notify::Notice::Ready("running"));
            // The tasks live as long as this future: until `shutdown`.
            std::future::pending::<()>().await
        };
        smol::future::or(work, shutdown).await;
        sd_notify::notify(sd_notify::Notice::Stopping);
        log::info!("shutting down; pods keep running and are adopted on the next start");
        let _ = std::fs::remove_file(&self.cfg.admin_socket);
    }

    /// The admin routes' handlers: served on the admin socket, and
    /// (`Handlers::router`) on the node API.
    pub fn admin_handlers(self: &Rc<Self>) -> crate::admin::Handlers {
        let (me, me2, me3) = (self.clone(), self.clone(), self.clone());
        let (me4, me5, me6) = (self.clone(), self.clone(), self.clone());
        let (me7, me8, me9) = (self.clone(), self.clone(), self.clone());
        crate::admin::Handlers {
            pods: Rc::new(move || me.pod_list()),
            metrics: Some(Rc::new(move || me2.metrics())),
            node: Some(Rc::new(move || me3.node_json())),
            logs: Some(Rc::new(move |req| me4.container_logs(req))),
            summary: Some(Rc::new(move || me5.summary_json())),
            resource_metrics: Some(Rc::new(move || me6.resource_metrics())),
            running_pods: Some(Rc::new(move || me7.running_pods_json())),
            events: Some(Rc::new(move || me8.recent_events.borrow().event_list())),
            probe_metrics: Some(Rc::new(move || me9.probe_metrics_text())),
            streaming: Some(self.streaming_handler()),
        }
    }

    async fn connect_runtime(&self) {
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

    /// The node's pressure conditions, kept current by the eviction task.
    pub fn pressure(&self) -> crate::node::eviction::PressureCell {
        self.housekeeping.pressure()
    }

    /// True once node allocatable is on the `kubepods` cgroup.
    pub fn allocatable_enforced(&self) -> Rc<std::cell::Cell<bool>> {
        self.housekeeping.allocatable_enforced()
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
