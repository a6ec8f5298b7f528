//! The agent: the I/O shell around the pure decisions. It is the only
//! module that changes pods in the runtime; it runs every loop on the
//! single-threaded executor. It is three owned parts, wired here by a thin
//! [`Agent`], the only `impl Agent` in the crate:
//!
//! - `pod_workers/`: `PodWorkers`, the pod registry, the sources, sync
//!   and the lifecycle, the runtime client, images, probes, statuses and
//!   events (see its `mod.rs` for its rooms);
//! - `housekeeping/`: node-pressure eviction and the pressure conditions,
//!   image GC, the GC task and container log rotation; it sees the pods
//!   only through `HousekeepingHost`, which the pod workers implement;
//! - `views/`: the read-only views the admin socket and the node API
//!   serve, asking the pod workers through their answers.
//!
//! Beside them, shared and pure: `config.rs` ([`AgentConfig`] from the
//! KubeletConfiguration), `lifecycle.rs` (a pod's lifecycle: running,
//! evicted, deleted; the pod workers keep it, housekeeping names an
//! eviction with it), `node_view.rs` (capacity and allocatable), and
//! `sd_notify.rs` (systemd's readiness notifications, `Type=notify`).
//!
//! Each part's fields are private to its folder; the others reach it
//! through methods that say what they need. The servers see the node
//! through one narrow trait, [`crate::admin::Host`], implemented here.
//!
//! The agent calls the runtime through [`RuntimeService`]: the binary uses
//! the CRI client, unit tests and hollow nodes the in-memory runtime.
//! Tasks share state through `RefCell`s; a borrow is never held across an
//! `.await`. What the agent must not know: how a pod source reads its
//! origin, how the configuration is loaded, CRI transport details, and
//! the rules that are pure functions elsewhere (planning, status, GC,
//! merge, a pod's derived facts in [`crate::pod::facts`]).

use std::rc::Rc;

use k8s_openapi::api::core::v1::{Pod, PodStatus, Taint};

use crate::cgroups::PodCgroups;
use crate::cri::{api, CriError, Runtime, RuntimeService};
use crate::pod::config_objects::{ConfigObjects, ObjectRef};
use crate::rt;
use crate::source::Source;

mod config;
mod housekeeping;
mod lifecycle;
mod node_view;
mod pod_workers;
mod sd_notify;
mod views;

pub use config::{AgentConfig, AgentConfigError, EvictionConfig};
pub use pod_workers::probes::ProbeMetrics;

use pod_workers::host_files::HostFacts;
use pod_workers::PodWorkers;

/// Appends metric families (with their HELP and TYPE lines) to `/metrics`.
pub type MoreMetrics = Rc<dyn Fn(&mut String)>;

/// The API server's state as `GET /node` shows it (`apiServer`).
pub type ApiServerView = Rc<dyn Fn() -> serde_json::Value>;

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

/// Now, in Unix nanoseconds (0 before 1970): the one wall-clock read
/// shared by the parts.
pub(in crate::agent) fn now_unix_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// The container runtime as the node's status sees it, through the agent
/// (the heartbeat has no CRI client of its own): whether it answers, its
/// name and version, its images for `status.images`.
#[allow(async_fn_in_trait)]
pub trait RuntimeHealth: 'static {
    /// CRI `Version`: an error means the runtime is down.
    async fn runtime_version(&self) -> Result<api::VersionResponse, CriError>;
    /// CRI `ListImages`: every image the runtime holds.
    async fn runtime_images(&self) -> Result<Vec<api::Image>, CriError>;
}

/// The wiring: the three parts, and nothing else.
pub struct Agent<R: RuntimeService = Runtime> {
    workers: Rc<PodWorkers<R>>,
    /// Eviction, image GC, the GC task, log rotation: their state.
    housekeeping: housekeeping::Housekeeping,
    views: Rc<views::Views<R>>,
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
        let host = HostFacts::detect(&cfg);
        let agent = Agent::with_runtime(cfg, runtime, cgroups, host);
        agent.workers.detect_node_facts();
        agent
    }
}

#[cfg(feature = "hollow")]
impl Agent<crate::cri::in_memory::MemoryRuntime> {
    /// A hollow node's agent (`picolet-hollow`): the in-memory `runtime`,
    /// no pod cgroups, the machine's facts as the node's.
    pub fn hollow(cfg: AgentConfig, runtime: crate::cri::in_memory::MemoryRuntime) -> Rc<Self> {
        let host = HostFacts::detect(&cfg);
        let agent = Agent::with_runtime(cfg, runtime, None, host);
        agent.workers.detect_node_facts();
        agent
    }
}

impl<R: RuntimeService> Agent<R> {
    /// Creates the agent over any runtime (the in-memory one in tests).
    fn with_runtime(
        cfg: AgentConfig,
        runtime: R,
        cgroups: Option<PodCgroups>,
        host: HostFacts,
    ) -> Rc<Self> {
        let housekeeping = housekeeping::Housekeeping::new(&cfg);
        let workers = PodWorkers::new(
            Rc::new(cfg),
            runtime,
            cgroups,
            host,
            housekeeping.pressure(),
        );
        Rc::new(Agent {
            views: views::Views::new(workers.clone()),
            workers,
            housekeeping,
        })
    }

    /// Runs every loop until `shutdown` resolves. The admin socket opens
    /// first and answers "waiting for the runtime at ..." until the
    /// runtime does; `shutdown` ends every state, that wait included.
    pub async fn run(self: &Rc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        let cfg = self.workers.cfg();
        let socket = cfg.admin_socket.clone();
        let listener = match crate::admin::bind(&socket) {
            Ok(l) => Some(Rc::new(l)),
            Err(e) => {
                log::error!("{e}");
                None
            }
        };
        let waiting_for = format!(
            "waiting for the runtime at unix://{}",
            cfg.runtime_socket.display()
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
            pod_workers::host_files::prepare_dirs(cfg);
            self.workers.ensure_qos_hierarchy();
            self.workers.connect_runtime().await;
            self.workers.read_runtime_features().await;
            drop(waiting);

            let mut tasks = self.workers.spawn_configured_sources();
            let workers = self.workers.clone();
            tasks.push(rt::spawn(async move { workers.pleg_loop().await }));
            let me = self.clone();
            tasks.push(rt::spawn(async move {
                me.housekeeping.gc_loop(&*me.workers).await
            }));
            let me = self.clone();
            tasks.push(rt::spawn(async move {
                me.housekeeping.eviction_loop(&*me.workers).await
            }));
            let me = self.clone();
            tasks.push(rt::spawn(async move {
                me.housekeeping.log_rotation_loop(&*me.workers).await
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
        let _ = std::fs::remove_file(&cfg.admin_socket);
    }

    /// The admin routes' handlers: served on the admin socket, and
    /// (`Handlers::router`) on the node API.
    pub fn admin_handlers(self: &Rc<Self>) -> crate::admin::Handlers {
        crate::admin::Handlers::from_host(self.clone())
    }

    /// The node's pressure conditions, kept current by the eviction task.
    pub fn pressure(&self) -> crate::node::eviction::PressureCell {
        self.housekeeping.pressure()
    }

    /// True once node allocatable is on the `kubepods` cgroup.
    pub fn allocatable_enforced(&self) -> Rc<std::cell::Cell<bool>> {
        self.housekeeping.allocatable_enforced()
    }

    /// Sends pod statuses to `sink` from now on (the API-server status
    /// sync). Set once, before [`Agent::run`].
    pub fn set_status_sink(&self, sink: Rc<dyn StatusSink>) {
        self.workers.set_status_sink(sink);
    }

    /// Sends kubelet's events to the API server from now on.
    pub fn set_event_sink(&self, sink: Rc<dyn EventSink>) {
        self.workers.set_event_sink(sink);
    }

    /// Looks API pods' ConfigMaps and Secrets up in `objects` from now on.
    pub fn set_config_objects(&self, objects: Rc<dyn ConfigObjects>) {
        self.workers.set_config_objects(objects);
    }

    /// Looks Services up in `services` for every pod's environment from
    /// now on, and tells it the pods the node runs.
    pub fn set_services(&self, services: Rc<dyn crate::pod::spec::Services>) {
        self.workers.set_services(services);
    }

    /// Appends `more` to every `/metrics` answer from now on (the API
    /// server link's metrics). Set once, before [`Agent::run`].
    pub fn set_more_metrics(&self, more: MoreMetrics) {
        self.views.set_more_metrics(more);
    }

    /// Adds the API server's state to every `GET /node` answer from now
    /// on. Set once, before [`Agent::run`].
    pub fn set_api_server_view(&self, view: ApiServerView) {
        self.views.set_api_server_view(view);
    }

    /// The labels and taints of the node's Node object in the API (from
    /// its watch): admission of new pods uses them from now on.
    pub fn set_node_object(
        &self,
        labels: std::collections::BTreeMap<String, String>,
        taints: Vec<Taint>,
    ) {
        self.workers.set_node_object(labels, taints);
    }

    /// Whether the Node in the API is cordoned (`spec.unschedulable`), as
    /// its watch last said: `picolet get node` shows it.
    pub fn set_node_unschedulable(&self, unschedulable: bool) {
        self.workers.set_node_unschedulable(unschedulable);
    }

    /// Runs `source` as one of the pod sources: a task that feeds its sets
    /// to the pod workers.
    pub fn spawn_source<S: Source + 'static>(self: &Rc<Self>, source: S) -> smol::Task<()> {
        self.workers.spawn_source(source)
    }

    /// The Services of `namespace` were read for the first time: the pods
    /// that may wait for them sync.
    pub fn services_synced(&self, namespace: &str) {
        self.workers.services_synced(namespace);
    }

    /// A watched ConfigMap or Secret changed (or became known): the pods
    /// referencing it sync.
    pub fn config_object_changed(&self, r: &ObjectRef) {
        self.workers.config_object_changed(r);
    }

    /// Something only pod `uid` looks up changed (a service-account token
    /// was issued or refreshed): it syncs.
    pub fn pod_objects_changed(&self, uid: &str) {
        self.workers.pod_objects_changed(uid);
    }
}

/// The servers' view of the node: the views answer, housekeeping adds its
/// part (the eviction view, where the node's stats are read).
impl<R: RuntimeService> crate::admin::Host for Agent<R> {
    fn pods(&self) -> serde_json::Value {
        self.views.pod_list()
    }

    fn metrics(&self) -> String {
        self.views.metrics()
    }

    fn node(&self) -> serde_json::Value {
        self.views.node_json(self.housekeeping.eviction_json())
    }

    fn container_logs(&self, req: &http::request::Parts) -> http::Response<crate::admin::Reply> {
        self.views.container_logs(req)
    }

    fn summary(&self) -> String {
        self.views.summary_json(&self.housekeeping.stats_paths())
    }

    fn resource_metrics(&self) -> String {
        self.views
            .resource_metrics(&self.housekeeping.stats_paths())
    }

    fn running_pods(&self) -> serde_json::Value {
        self.views.running_pods_json()
    }

    fn events(&self) -> serde_json::Value {
        self.views.event_list()
    }

    fn probe_metrics(&self) -> String {
        self.views.probe_metrics_text()
    }

    fn streaming(&self) -> crate::admin::UpgradeFn {
        self.views.streaming_handler()
    }
}

/// The heartbeat's view of the runtime: the pod workers' runtime client,
/// asked the same CRI calls.
impl<R: RuntimeService> RuntimeHealth for Agent<R> {
    async fn runtime_version(&self) -> Result<api::VersionResponse, CriError> {
        let req = api::VersionRequest {
            version: "v1".into(),
        };
        self.workers.runtime().version(req).await
    }

    async fn runtime_images(&self) -> Result<Vec<api::Image>, CriError> {
        let req = api::ListImagesRequest::default();
        Ok(self.workers.runtime().list_images(req).await?.images)
    }
}
