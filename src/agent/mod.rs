//! The agent: the only module that does pod I/O. It wires the pod sources,
//! PLEG, the pod workers, garbage collection and the admin socket together
//! on the single-threaded executor.
//!
//! Shape of the loop (kubelet's syncLoop, cut down):
//! - a **source task** turns each [`SourceUpdate`] (a full set of pods) into
//!   added, updated and deleted pods, and wakes their workers;
//! - a **PLEG task** relists sandboxes and containers every second, diffs
//!   the result ([`pleg::diff`]) and wakes only the affected pods' workers;
//! - one **worker task per pod** observes that pod in the runtime, asks
//!   [`plan`] what to do, and performs the actions through CRI; it sleeps
//!   until woken, until its back-off expires, or until `syncFrequency`;
//! - a **GC task** removes dead containers and sandboxes ([`gc::collect`]),
//!   the log directories of pods that are gone, and stale pod cgroups.
//!
//! Tasks share state through `Rc<RefCell<_>>`; a borrow is never held
//! across an `.await`.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use smol::channel::{Receiver, Sender};

use crate::backoff::Backoff;
use crate::cgroups::PodCgroups;
use crate::cri::{api, CriError, Runtime};
use crate::gc;
use crate::pleg::{self, Kind, Record, State};
use crate::pod::plan::{self, Action, Health, KillReason};
use crate::pod::spec;
use crate::pod::{ObservedContainer, ObservedPod, ObservedSandbox};
use crate::qos::{self, QosClass};
use crate::rt;
use crate::source::{FileSource, PodSource, SourceUpdate};
use crate::status::{self, Waiting};

mod probes;
pub use probes::ProbeMetrics;

/// CRI label keys kubelet puts on sandboxes and containers.
pub const LABEL_POD_UID: &str = "io.kubernetes.pod.uid";
pub const LABEL_POD_NAME: &str = "io.kubernetes.pod.name";
pub const LABEL_POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const LABEL_CONTAINER_NAME: &str = "io.kubernetes.container.name";
pub const ANNOTATION_HASH: &str = "io.kubernetes.container.hash";
pub const ANNOTATION_GRACE: &str = "io.kubernetes.pod.terminationGracePeriod";

const PLEG_PERIOD: Duration = Duration::from_secs(1);
const GC_PERIOD: Duration = Duration::from_secs(60);
const GC_FIRST: Duration = Duration::from_secs(10);
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(2);

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
}

/// One pod the agent manages.
struct PodEntry {
    pod: Rc<Pod>,
    source: Option<PodSource>,
    /// Removed from its source (or an orphan): terminate, then forget.
    deleted: bool,
    wake: Sender<()>,
    observed: ObservedPod,
    waiting: HashMap<String, Waiting>,
    first_seen_unix: i64,
    health: Health,
    /// Sandbox IPs by sandbox ID (a sandbox's IP never changes).
    ips: HashMap<String, (String, Vec<String>)>,
    /// Readiness probe results by container (absent: no readiness probe).
    readiness: HashMap<String, bool>,
    /// Startup probe results by container (absent: no startup probe).
    started: HashMap<String, bool>,
    /// A probe-level terminationGracePeriodSeconds for a pending kill.
    kill_grace: HashMap<String, i64>,
    /// Why a container is being killed, by name (until the kill happens),
    /// then by container ID (shown in its terminated state).
    kill_messages: HashMap<String, String>,
    probe_tasks: Vec<smol::Task<()>>,
    _task: Option<smol::Task<()>>,
}

/// State shared by every task.
pub struct Agent {
    cfg: AgentConfig,
    runtime: Runtime,
    cgroups: Option<PodCgroups>,
    pods: RefCell<BTreeMap<String, PodEntry>>,
    backoff: RefCell<Backoff>,
    image_backoff: RefCell<Backoff>,
    /// When each container's last pull failed (the back-off counts from it).
    image_pull_failed_at: RefCell<HashMap<String, Instant>>,
    pull_lock: smol::lock::Mutex<()>,
    host_ip: String,
    runtime_name: RefCell<String>,
    sources_ready: Cell<bool>,
    node_memory: u64,
    host_resolv_conf: Option<String>,
    /// The last relist, for GC.
    relist: RefCell<Relist>,
    probe_metrics: RefCell<ProbeMetrics>,
}

#[derive(Default)]
struct Relist {
    sandboxes: Vec<gc::Sandbox>,
    containers: Vec<gc::Container>,
    /// Grace period (s) per pod UID, from container annotations, for orphans.
    grace: HashMap<String, i64>,
    names: HashMap<String, (String, String)>,
}

fn now_unix_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn label_filter(uid: &str) -> HashMap<String, String> {
    HashMap::from([(LABEL_POD_UID.to_string(), uid.to_string())])
}

fn cri_state(state: i32) -> State {
    match api::ContainerState::try_from(state) {
        Ok(api::ContainerState::ContainerCreated) => State::Created,
        Ok(api::ContainerState::ContainerRunning) => State::Running,
        Ok(api::ContainerState::ContainerExited) => State::Exited,
        _ => State::Unknown,
    }
}

fn sandbox_ready(state: i32) -> bool {
    state == api::PodSandboxState::SandboxReady as i32
}

fn grace_period(pod: &Pod) -> i64 {
    pod.metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(30)
        .max(0)
}

fn is_host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

fn all_containers(pod: &Pod) -> impl Iterator<Item = (&Container, bool)> {
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[])
        .iter()
        .map(|c| (c, true))
        .chain(
            spec.map(|s| s.containers.as_slice())
                .unwrap_or(&[])
                .iter()
                .map(|c| (c, false)),
        )
}

/// The host's primary IPv4 address: the source address the kernel would
/// pick for a route off the machine. No packet is sent.
fn detect_host_ip() -> String {
    let probe = || -> std::io::Result<String> {
        let s = std::net::UdpSocket::bind("0.0.0.0:0")?;
        s.connect("192.0.2.1:9")?;
        Ok(s.local_addr()?.ip().to_string())
    };
    probe().unwrap_or_else(|_| "127.0.0.1".to_string())
}

fn node_memory_bytes() -> u64 {
    fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(1 << 30)
}

impl Agent {
    /// Creates the agent; nothing runs until [`Agent::run`].
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
        Rc::new(Agent {
            host_resolv_conf: fs::read_to_string("/etc/resolv.conf").ok(),
            host_ip: detect_host_ip(),
            node_memory: node_memory_bytes(),
            runtime,
            cgroups,
            pods: RefCell::new(BTreeMap::new()),
            backoff: RefCell::new(Backoff::default()),
            image_backoff: RefCell::new(Backoff::default()),
            image_pull_failed_at: RefCell::new(HashMap::new()),
            pull_lock: smol::lock::Mutex::new(()),
            runtime_name: RefCell::new("containerd".into()),
            sources_ready: Cell::new(false),
            relist: RefCell::new(Relist::default()),
            probe_metrics: RefCell::new(ProbeMetrics::default()),
            cfg,
        })
    }

    /// The CRI client.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Runs every loop until `shutdown` resolves.
    pub async fn run(self: &Rc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        self.prepare_dirs();
        if let Some(cg) = &self.cgroups {
            if let Err(e) = cg.ensure_qos_hierarchy() {
                log::error!("creating the QoS cgroup hierarchy: {e}");
            }
        }
        self.connect_runtime().await;

        let mut tasks = Vec::new();
        let me = self.clone();
        tasks.push(rt::spawn(async move { me.source_loop().await }));
        let me = self.clone();
        tasks.push(rt::spawn(async move { me.pleg_loop().await }));
        let me = self.clone();
        tasks.push(rt::spawn(async move { me.gc_loop().await }));
        let me = self.clone();
        tasks.push(rt::spawn(async move { me.log_rotation_loop().await }));
        let me = self.clone();
        let socket = self.cfg.admin_socket.clone();
        tasks.push(rt::spawn(async move {
            let me2 = me.clone();
            let handlers = crate::admin::Handlers {
                pods: Rc::new(move || me.pod_list()),
                metrics: Some(Rc::new(move || me2.metrics())),
            };
            if let Err(e) = crate::admin::serve(&socket, handlers).await {
                log::error!("admin socket {}: {e}", socket.display());
            }
        }));
        shutdown.await;
        log::info!("shutting down; pods keep running and are adopted on the next start");
        let _ = fs::remove_file(&self.cfg.admin_socket);
        drop(tasks);
    }

    fn prepare_dirs(&self) {
        for (dir, mode) in [(&self.cfg.root_dir, 0o750), (&self.cfg.pod_logs_dir, 0o755)] {
            if let Err(e) = fs::DirBuilder::new().recursive(true).mode(mode).create(dir) {
                log::error!("creating {}: {e}", dir.display());
            }
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

    // ---- sources -------------------------------------------------------

    async fn source_loop(self: Rc<Self>) {
        let Some(dir) = self.cfg.static_pod_path.clone() else {
            log::info!("no staticPodPath: static pods are disabled");
            self.sources_ready.set(true);
            std::future::pending::<()>().await;
            return;
        };
        let mut source = FileSource::new(
            dir,
            self.cfg.node_name.clone(),
            self.cfg.file_check_frequency,
        );
        loop {
            let update = source.next().await;
            self.apply_update(update);
            self.sources_ready.set(true);
        }
    }

    /// Applies a full set of pods from one source.
    pub fn apply_update(self: &Rc<Self>, update: SourceUpdate) {
        let changed = self.apply_update_inner(update);
        for uid in changed {
            let pod = match self.pods.borrow().get(&uid) {
                Some(e) => e.pod.clone(),
                None => continue,
            };
            let tasks = self.start_probes(&uid, &pod);
            if let Some(e) = self.pods.borrow_mut().get_mut(&uid) {
                e.probe_tasks = tasks;
            }
        }
    }

    /// Applies the set; returns the pods that are new or changed.
    fn apply_update_inner(self: &Rc<Self>, update: SourceUpdate) -> Vec<String> {
        let mut changed = Vec::new();
        let wanted: HashMap<String, Pod> = update
            .pods
            .into_iter()
            .map(|p| (crate::pod::uid(&p).to_string(), p))
            .collect();
        let mut pods = self.pods.borrow_mut();
        // Deletions.
        for (uid, e) in pods.iter_mut() {
            if e.source == Some(update.source) && !e.deleted && !wanted.contains_key(uid) {
                log::info!(
                    "pod {} removed from source {}; terminating",
                    crate::pod::full_name(&e.pod),
                    update.source
                );
                e.deleted = true;
                let _ = e.wake.try_send(());
            }
        }
        // Additions and updates.
        let active = pods.values().filter(|e| !e.deleted).count();
        let mut admitted = active;
        let mut sorted: Vec<(String, Pod)> = wanted.into_iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        for (uid, pod) in sorted {
            if let Some(e) = pods.get_mut(&uid) {
                if *e.pod != pod {
                    e.pod = Rc::new(pod);
                    e.probe_tasks.clear();
                    e.readiness.clear();
                    e.started.clear();
                    let _ = e.wake.try_send(());
                    changed.push(uid);
                }
                continue;
            }
            if admitted >= self.cfg.max_pods {
                log::error!(
                    "pod {} not admitted: node has {} pods, maxPods is {}",
                    crate::pod::full_name(&pod),
                    admitted,
                    self.cfg.max_pods
                );
                continue;
            }
            admitted += 1;
            log::info!(
                "pod {} added from source {} (uid {uid})",
                crate::pod::full_name(&pod),
                update.source
            );
            pods.insert(
                uid.clone(),
                self.new_entry(uid.clone(), pod, Some(update.source), false),
            );
            changed.push(uid);
        }
        changed
    }

    fn new_entry(
        self: &Rc<Self>,
        uid: String,
        pod: Pod,
        source: Option<PodSource>,
        deleted: bool,
    ) -> PodEntry {
        let (tx, rx) = smol::channel::bounded(1);
        let me = self.clone();
        let worker_uid = uid.clone();
        let task = rt::spawn(async move { me.pod_worker(worker_uid, rx).await });
        PodEntry {
            pod: Rc::new(pod),
            source,
            deleted,
            wake: tx,
            observed: ObservedPod::default(),
            waiting: HashMap::new(),
            first_seen_unix: now_unix_nanos() / 1_000_000_000,
            health: Health::default(),
            ips: HashMap::new(),
            readiness: HashMap::new(),
            started: HashMap::new(),
            kill_grace: HashMap::new(),
            kill_messages: HashMap::new(),
            probe_tasks: Vec::new(),
            _task: Some(task),
        }
    }

    // ---- PLEG ----------------------------------------------------------

    async fn relist(&self) -> Result<pleg::Snapshot, CriError> {
        let sandboxes = self
            .runtime
            .list_pod_sandbox(api::ListPodSandboxRequest::default())
            .await?
            .items;
        let containers = self
            .runtime
            .list_containers(api::ListContainersRequest::default())
            .await?
            .containers;
        let mut records = Vec::with_capacity(sandboxes.len() + containers.len());
        let mut rl = Relist::default();
        for s in &sandboxes {
            let Some(uid) = s.labels.get(LABEL_POD_UID) else {
                continue;
            };
            let ready = sandbox_ready(s.state);
            records.push(Record {
                id: s.id.clone(),
                pod_uid: uid.clone(),
                kind: Kind::Sandbox,
                state: if ready { State::Running } else { State::Exited },
            });
            let md = s.metadata.clone().unwrap_or_default();
            rl.names
                .insert(uid.clone(), (md.namespace.clone(), md.name.clone()));
            rl.sandboxes.push(gc::Sandbox {
                id: s.id.clone(),
                pod_uid: uid.clone(),
                attempt: md.attempt,
                created_at: s.created_at,
                ready,
            });
        }
        for c in &containers {
            let Some(uid) = c.labels.get(LABEL_POD_UID) else {
                continue;
            };
            let state = cri_state(c.state);
            records.push(Record {
                id: c.id.clone(),
                pod_uid: uid.clone(),
                kind: Kind::Container,
                state,
            });
            if let Some(g) = c
                .annotations
                .get(ANNOTATION_GRACE)
                .and_then(|g| g.parse().ok())
            {
                rl.grace.insert(uid.clone(), g);
            }
            let md = c.metadata.clone().unwrap_or_default();
            rl.containers.push(gc::Container {
                id: c.id.clone(),
                pod_uid: uid.clone(),
                sandbox_id: c.pod_sandbox_id.clone(),
                name: md.name,
                attempt: md.attempt,
                created_at: c.created_at,
                state,
            });
        }
        *self.relist.borrow_mut() = rl;
        Ok(pleg::Snapshot::from_records(records))
    }

    async fn pleg_loop(self: Rc<Self>) {
        let mut last = pleg::Snapshot::default();
        let mut down = false;
        let mut connects = self.runtime.channel().connects();
        loop {
            match self.relist().await {
                Ok(snap) => {
                    let reconnected = self.runtime.channel().connects() != connects;
                    connects = self.runtime.channel().connects();
                    if down || reconnected {
                        log::info!("container runtime is back; resyncing every pod");
                        down = false;
                        self.wake_all();
                    }
                    let events = pleg::diff(&last, &snap);
                    for uid in pleg::changed_pods(&events) {
                        self.wake(&uid);
                    }
                    self.adopt_orphans(&snap);
                    last = snap;
                }
                Err(e) => {
                    if !down {
                        log::error!("PLEG relist failed: {e}; keeping the last known state");
                        down = true;
                    }
                }
            }
            rt::sleep(PLEG_PERIOD).await;
        }
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

    /// Pods found in the runtime that no source wants (left over from before
    /// a restart, or whose manifest went away while picolet was down) get a
    /// terminating worker once every source has spoken.
    fn adopt_orphans(self: &Rc<Self>, snap: &pleg::Snapshot) {
        if !self.sources_ready.get() {
            return;
        }
        let orphans: Vec<String> = {
            let pods = self.pods.borrow();
            snap.pod_uids()
                .filter(|u| !pods.contains_key(*u))
                .map(str::to_string)
                .collect()
        };
        if orphans.is_empty() {
            return;
        }
        let rl = self.relist.borrow();
        let mut new_entries = Vec::new();
        for uid in orphans {
            let active = rl.sandboxes.iter().any(|s| s.pod_uid == uid && s.ready)
                || rl.containers.iter().any(|c| {
                    c.pod_uid == uid && matches!(c.state, State::Running | State::Unknown)
                });
            if !active {
                continue; // nothing to stop; GC removes what is left
            }
            let (ns, name) = rl.names.get(&uid).cloned().unwrap_or_default();
            log::info!("pod {ns}/{name} (uid {uid}) is not wanted by any source; terminating it");
            let pod = Pod {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(ns),
                    uid: Some(uid.clone()),
                    ..Default::default()
                },
                spec: Some(PodSpec {
                    termination_grace_period_seconds: Some(
                        rl.grace.get(&uid).copied().unwrap_or(30),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            };
            new_entries.push((uid, pod));
        }
        drop(rl);
        for (uid, pod) in new_entries {
            let entry = self.new_entry(uid.clone(), pod, None, true);
            self.pods.borrow_mut().insert(uid, entry);
        }
    }

    // ---- pod workers ---------------------------------------------------

    async fn pod_worker(self: Rc<Self>, uid: String, wake: Receiver<()>) {
        loop {
            // Boxed: the sync's state machine is large (~60 KB) and only
            // lives while a sync runs, not for the life of every pod.
            let next = match Box::pin(self.sync_pod(&uid)).await {
                Some(d) => d,
                None => return,
            };
            let _ = rt::timeout(next, wake.recv()).await;
            while wake.try_recv().is_ok() {}
        }
    }

    /// Observes a pod in the runtime.
    async fn observe(&self, uid: &str) -> Result<ObservedPod, CriError> {
        let sandboxes = self
            .runtime
            .list_pod_sandbox(api::ListPodSandboxRequest {
                filter: Some(api::PodSandboxFilter {
                    label_selector: label_filter(uid),
                    ..Default::default()
                }),
            })
            .await?
            .items;
        let containers = self
            .runtime
            .list_containers(api::ListContainersRequest {
                filter: Some(api::ContainerFilter {
                    label_selector: label_filter(uid),
                    ..Default::default()
                }),
            })
            .await?
            .containers;
        let mut obs = ObservedPod::default();
        for s in sandboxes {
            let ready = sandbox_ready(s.state);
            let cached = self
                .pods
                .borrow()
                .get(uid)
                .and_then(|e| e.ips.get(&s.id).cloned());
            let (ip, additional_ips) = match cached {
                Some(v) => v,
                None if ready => {
                    let st = self
                        .runtime
                        .pod_sandbox_status(api::PodSandboxStatusRequest {
                            pod_sandbox_id: s.id.clone(),
                            verbose: false,
                        })
                        .await?;
                    let net = st.status.and_then(|s| s.network).unwrap_or_default();
                    let v = (
                        net.ip,
                        net.additional_ips
                            .into_iter()
                            .map(|i| i.ip)
                            .collect::<Vec<_>>(),
                    );
                    if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
                        e.ips.insert(s.id.clone(), v.clone());
                    }
                    v
                }
                None => Default::default(),
            };
            obs.sandboxes.push(ObservedSandbox {
                attempt: s.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
                ready,
                created_at: s.created_at,
                ip,
                additional_ips,
                id: s.id,
            });
        }
        for c in containers {
            let md = c.metadata.clone().unwrap_or_default();
            let mut oc = ObservedContainer {
                id: c.id.clone(),
                sandbox_id: c.pod_sandbox_id.clone(),
                name: md.name,
                attempt: md.attempt,
                state: cri_state(c.state),
                created_at: c.created_at,
                hash: c
                    .annotations
                    .get(ANNOTATION_HASH)
                    .cloned()
                    .unwrap_or_default(),
                image: c
                    .image
                    .as_ref()
                    .map(|i| i.image.clone())
                    .unwrap_or_default(),
                image_ref: c.image_ref.clone(),
                ..Default::default()
            };
            match self
                .runtime
                .container_status(api::ContainerStatusRequest {
                    container_id: c.id.clone(),
                    verbose: false,
                })
                .await
            {
                Ok(r) => {
                    if let Some(st) = r.status {
                        oc.state = cri_state(st.state);
                        oc.exit_code = st.exit_code;
                        oc.started_at = st.started_at;
                        oc.finished_at = st.finished_at;
                        oc.reason = st.reason;
                        oc.message = st.message;
                        if !st.image_ref.is_empty() {
                            oc.image_ref = st.image_ref;
                        }
                    }
                }
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            }
            obs.containers.push(oc);
        }
        obs.normalize();
        Ok(obs)
    }

    /// One sync of one pod. Returns when to sync again, or `None` when the
    /// pod is gone for good.
    async fn sync_pod(self: &Rc<Self>, uid: &str) -> Option<Duration> {
        let (pod, deleted) = {
            let pods = self.pods.borrow();
            let e = pods.get(uid)?;
            (e.pod.clone(), e.deleted)
        };
        let observed = match Box::pin(self.observe(uid)).await {
            Ok(o) => o,
            Err(e) => {
                log::warn!("observing pod {}: {e}", crate::pod::full_name(&pod));
                return Some(RETRY_AFTER_ERROR);
            }
        };
        self.record_observed(uid, &observed);

        if deleted {
            return match Box::pin(self.terminate_pod(&pod, &observed, true)).await {
                Ok(()) => {
                    log::info!("pod {} terminated", crate::pod::full_name(&pod));
                    self.pods.borrow_mut().remove(uid);
                    self.backoff.borrow_mut().forget_pod(uid);
                    self.image_backoff.borrow_mut().forget_pod(uid);
                    self.image_pull_failed_at
                        .borrow_mut()
                        .retain(|k, _| !k.starts_with(&format!("{uid}/")));
                    None
                }
                Err(e) => {
                    log::warn!(
                        "terminating pod {}: {e}; will retry",
                        crate::pod::full_name(&pod)
                    );
                    Some(RETRY_AFTER_ERROR)
                }
            };
        }

        let hashes: HashMap<String, String> = all_containers(&pod)
            .map(|(c, _)| (c.name.clone(), spec::container_hash(c)))
            .collect();
        let health = self
            .pods
            .borrow()
            .get(uid)
            .map(|e| e.health.clone())
            .unwrap_or_default();
        let actions = {
            let backoff = self.backoff.borrow();
            let ctx = plan::Context {
                backoff: &backoff,
                health: &health,
                now: Instant::now(),
                now_unix_nanos: now_unix_nanos(),
                hashes: &hashes,
            };
            plan::plan(&pod, &observed, &ctx)
        };
        let mut next = self.cfg.sync_frequency;
        if actions.is_empty() {
            return Some(next);
        }
        log::debug!("pod {}: {:?}", crate::pod::full_name(&pod), actions);
        let mut sandbox: Option<(String, u32)> = observed
            .latest_sandbox()
            .filter(|s| s.ready)
            .map(|s| (s.id.clone(), s.attempt));
        let mut observed = observed;
        for action in actions {
            match action {
                Action::KillPod => {
                    if let Err(e) = Box::pin(self.terminate_pod(&pod, &observed, false)).await {
                        log::warn!("stopping pod {}: {e}", crate::pod::full_name(&pod));
                        return Some(RETRY_AFTER_ERROR);
                    }
                    sandbox = None;
                }
                Action::CreateSandbox { attempt } => {
                    match Box::pin(self.create_sandbox(&pod, attempt)).await {
                        Ok(id) => {
                            sandbox = Some((id, attempt));
                            match Box::pin(self.observe(uid)).await {
                                Ok(o) => observed = o,
                                Err(_) => return Some(RETRY_AFTER_ERROR),
                            }
                        }
                        Err(e) => {
                            log::error!(
                                "creating sandbox for pod {}: {e}",
                                crate::pod::full_name(&pod)
                            );
                            self.set_waiting_all(uid, &pod, "ContainerCreating", &e);
                            return Some(RETRY_AFTER_ERROR * 5);
                        }
                    }
                }
                Action::StartContainer {
                    name,
                    init,
                    attempt,
                    restart,
                } => {
                    let Some((sid, sattempt)) = sandbox.clone() else {
                        break;
                    };
                    let container = all_containers(&pod)
                        .find(|(c, _)| c.name == name)
                        .map(|(c, _)| c.clone());
                    let Some(container) = container else { continue };
                    if restart {
                        self.backoff
                            .borrow_mut()
                            .next(&Backoff::key(uid, &name), Instant::now());
                        if let Some(prev) = observed.latest(&name) {
                            let ran = (prev.finished_at - prev.started_at).max(0) as u64;
                            self.backoff
                                .borrow_mut()
                                .observe_run(&Backoff::key(uid, &name), Duration::from_nanos(ran));
                        }
                    }
                    match Box::pin(
                        self.start_container(&pod, &observed, &container, attempt, &sid, sattempt),
                    )
                    .await
                    {
                        Ok(()) => self.clear_waiting(uid, &name),
                        Err(w) => {
                            // Log a failure when it starts or changes, not at every retry.
                            let known = self
                                .pods
                                .borrow()
                                .get(uid)
                                .and_then(|e| e.waiting.get(&name).cloned());
                            if known.as_ref().map(|k| &k.reason) != Some(&w.reason) {
                                log::warn!(
                                    "container {} of pod {}: {}: {}",
                                    name,
                                    crate::pod::full_name(&pod),
                                    w.reason,
                                    w.message
                                );
                            }
                            self.set_waiting(uid, &name, w);
                            next = next.min(RETRY_AFTER_ERROR * 5);
                            if init {
                                break;
                            }
                        }
                    }
                }
                Action::KillContainer { id, name, reason } => {
                    let why = match reason {
                        KillReason::SpecChanged => "its spec changed",
                        KillReason::Unhealthy => "it failed its liveness probe",
                        KillReason::StartupProbeFailed => "it failed its startup probe",
                        KillReason::UnknownState => "it is in an unknown state",
                    };
                    log::info!(
                        "killing container {name} of pod {}: {why}",
                        crate::pod::full_name(&pod)
                    );
                    let grace = {
                        let mut pods = self.pods.borrow_mut();
                        let e = pods.get_mut(uid);
                        let g = e.as_ref().and_then(|e| e.kill_grace.get(&name).copied());
                        if let Some(e) = e {
                            e.health.unhealthy.remove(&name);
                            e.kill_grace.remove(&name);
                            if let Some(m) = e.kill_messages.remove(&name) {
                                e.kill_messages.insert(id.clone(), m);
                            }
                        }
                        g.unwrap_or_else(|| grace_period(&pod))
                    };
                    if let Err(e) = self.kill_container(&pod, &name, &id, grace).await {
                        log::warn!("stopping container {name}: {e}");
                    }
                }
                Action::BackOff { name, remaining } => {
                    let delay = self
                        .backoff
                        .borrow()
                        .delay(&Backoff::key(uid, &name))
                        .unwrap_or_default();
                    let msg = format!(
                        "back-off {} restarting failed container={} pod={}_{}({})",
                        crate::status::format_duration(delay),
                        name,
                        pod.metadata.name.as_deref().unwrap_or(""),
                        pod.metadata.namespace.as_deref().unwrap_or(""),
                        uid
                    );
                    self.set_waiting(
                        uid,
                        &name,
                        Waiting {
                            reason: "CrashLoopBackOff".into(),
                            message: msg,
                        },
                    );
                    next = next.min(remaining + Duration::from_millis(50));
                }
            }
        }
        if let Ok(o) = Box::pin(self.observe(uid)).await {
            self.record_observed(uid, &o);
        }
        Some(next)
    }

    fn record_observed(&self, uid: &str, observed: &ObservedPod) {
        if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
            e.observed = observed.clone();
            // A running container is no longer waiting.
            e.waiting.retain(|name, _| {
                observed
                    .latest(name)
                    .map(|c| c.state != State::Running)
                    .unwrap_or(true)
            });
            // An adopted pod started when its first sandbox did.
            if let Some(first) = observed
                .sandboxes
                .iter()
                .map(|s| s.created_at)
                .filter(|t| *t > 0)
                .min()
            {
                e.first_seen_unix = e.first_seen_unix.min(first / 1_000_000_000);
            }
        }
    }

    fn set_waiting(&self, uid: &str, name: &str, w: Waiting) {
        if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
            e.waiting.insert(name.to_string(), w);
        }
    }

    fn set_waiting_all(&self, uid: &str, pod: &Pod, reason: &str, err: &dyn std::fmt::Display) {
        for (c, _) in all_containers(pod) {
            self.set_waiting(
                uid,
                &c.name,
                Waiting {
                    reason: reason.into(),
                    message: err.to_string(),
                },
            );
        }
    }

    fn clear_waiting(&self, uid: &str, name: &str) {
        if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
            e.waiting.remove(name);
        }
    }

    fn qos(pod: &Pod) -> QosClass {
        pod.spec
            .as_ref()
            .map(qos::pod_qos)
            .unwrap_or(QosClass::BestEffort)
    }

    /// The pod's IPs as its containers see them, primary first: the host's
    /// for a hostNetwork pod, else the given sandbox's.
    fn pod_ips(&self, pod: &Pod, sandbox: Option<&ObservedSandbox>) -> Vec<String> {
        if is_host_network(pod) {
            return vec![self.host_ip.clone()];
        }
        sandbox
            .map(|s| {
                std::iter::once(s.ip.clone())
                    .chain(s.additional_ips.iter().cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn pod_dir(&self, uid: &str) -> PathBuf {
        self.cfg.root_dir.join("pods").join(uid)
    }

    fn log_dir(&self, pod: &Pod) -> PathBuf {
        spec::log_directory(
            &self.cfg.pod_logs_dir,
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or(""),
            crate::pod::uid(pod),
        )
    }

    fn cgroup_parent(&self, pod: &Pod) -> String {
        match &self.cgroups {
            Some(cg) => cg.pod_cgroup_parent(crate::pod::uid(pod), Self::qos(pod)),
            None => String::new(),
        }
    }

    fn sandbox_config(&self, pod: &Pod, attempt: u32) -> api::PodSandboxConfig {
        let parent = self.cgroup_parent(pod);
        spec::sandbox_config(
            pod,
            &spec::SandboxParams {
                attempt,
                cgroup_parent: &parent,
                pod_logs_dir: &self.cfg.pod_logs_dir,
                cluster_dns: &self.cfg.cluster_dns,
                cluster_domain: &self.cfg.cluster_domain,
                host_resolv_conf: self.host_resolv_conf.as_deref(),
            },
        )
        .0
    }

    async fn create_sandbox(&self, pod: &Pod, attempt: u32) -> Result<String, String> {
        let uid = crate::pod::uid(pod);
        if let Some(cg) = &self.cgroups {
            let spec = pod.spec.clone().unwrap_or_default();
            cg.ensure_pod(
                uid,
                Self::qos(pod),
                &qos::pod_resources(&spec),
                self.cfg.pod_pids_limit,
            )
            .map_err(|e| format!("pod cgroup: {e}"))?;
        }
        let log_dir = self.log_dir(pod);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&log_dir)
            .map_err(|e| format!("creating {}: {e}", log_dir.display()))?;
        let pod_dir = self.pod_dir(uid);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o750)
            .create(&pod_dir)
            .map_err(|e| format!("creating {}: {e}", pod_dir.display()))?;
        let config = self.sandbox_config(pod, attempt);
        log::info!(
            "creating sandbox for pod {} (attempt {attempt})",
            crate::pod::full_name(pod)
        );
        let id = self
            .runtime
            .run_pod_sandbox(api::RunPodSandboxRequest {
                config: Some(config),
                runtime_handler: String::new(),
            })
            .await
            .map_err(|e| e.to_string())?
            .pod_sandbox_id;
        Ok(id)
    }

    /// Makes the image available per `imagePullPolicy`; returns the image ID.
    async fn ensure_image(
        &self,
        pod: &Pod,
        c: &Container,
        sandbox: &api::PodSandboxConfig,
    ) -> Result<String, Waiting> {
        let uid = crate::pod::uid(pod);
        let user = c.image.clone().unwrap_or_default();
        let image = crate::pod::defaults::normalize_image(&user);
        let policy = c.image_pull_policy.as_deref().unwrap_or("IfNotPresent");
        let spec = api::ImageSpec {
            image: image.clone(),
            user_specified_image: user.clone(),
            ..Default::default()
        };
        let present = match self
            .runtime
            .image_status(api::ImageStatusRequest {
                image: Some(spec.clone()),
                verbose: false,
            })
            .await
        {
            Ok(r) => r.image.map(|i| i.id),
            Err(e) => {
                return Err(Waiting {
                    reason: "ErrImageInspect".into(),
                    message: e.to_string(),
                })
            }
        };
        match (policy, present) {
            ("Never", Some(id)) | ("IfNotPresent", Some(id)) => return Ok(id),
            ("Never", None) => {
                return Err(Waiting {
                    reason: "ErrImageNeverPull".into(),
                    message: format!(
                        "Container image \"{user}\" is not present with pull policy of Never"
                    ),
                })
            }
            _ => {}
        }
        let key = Backoff::key(uid, &c.name);
        let now = Instant::now();
        if let Some(wait) = self.image_backoff_remaining(&key, now) {
            return Err(Waiting {
                reason: "ImagePullBackOff".into(),
                message: format!(
                    "Back-off pulling image \"{user}\" ({}s left)",
                    wait.as_secs()
                ),
            });
        }
        let _guard = if self.cfg.serialize_image_pulls {
            Some(self.pull_lock.lock().await)
        } else {
            None
        };
        log::info!(
            "pulling image {image} for pod {}",
            crate::pod::full_name(pod)
        );
        let req = api::PullImageRequest {
            image: Some(spec.clone()),
            auth: None,
            sandbox_config: Some(sandbox.clone()),
        };
        match self.runtime.pull_image(req).await {
            Ok(r) => {
                self.image_backoff.borrow_mut().reset(&key);
                self.image_pull_failed_at.borrow_mut().remove(&key);
                match self
                    .runtime
                    .image_status(api::ImageStatusRequest {
                        image: Some(spec),
                        verbose: false,
                    })
                    .await
                {
                    Ok(api::ImageStatusResponse { image: Some(i), .. }) => Ok(i.id),
                    _ => Ok(r.image_ref),
                }
            }
            Err(e) => {
                let mut b = self.image_backoff.borrow_mut();
                b.next(&key, now);
                self.image_pull_failed_at.borrow_mut().insert(key, now);
                Err(Waiting {
                    reason: "ErrImagePull".into(),
                    message: format!("pulling image \"{user}\": {}", e.message()),
                })
            }
        }
    }

    fn image_backoff_remaining(&self, key: &str, now: Instant) -> Option<Duration> {
        let at = *self.image_pull_failed_at.borrow().get(key)?;
        self.image_backoff.borrow().remaining(key, at, now)
    }

    async fn start_container(
        &self,
        pod: &Pod,
        observed: &ObservedPod,
        c: &Container,
        attempt: u32,
        sandbox_id: &str,
        sandbox_attempt: u32,
    ) -> Result<(), Waiting> {
        let uid = crate::pod::uid(pod);
        let sandbox_config = self.sandbox_config(pod, sandbox_attempt);
        let image = self.ensure_image(pod, c, &sandbox_config).await?;
        let config_err = |m: String| Waiting {
            reason: "CreateContainerConfigError".into(),
            message: m,
        };

        // Volumes and files on the host.
        let pod_dir = self.pod_dir(uid);
        let mut empty_dirs = HashMap::new();
        for name in spec::empty_dir_volumes(pod) {
            let dir = pod_dir.join("volumes/kubernetes.io~empty-dir").join(&name);
            fs::create_dir_all(&dir).map_err(|e| {
                config_err(format!("emptyDir {name}: creating {}: {e}", dir.display()))
            })?;
            let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o777));
            empty_dirs.insert(name, dir);
        }
        for (path, kind) in spec::host_path_volumes(pod) {
            prepare_host_path(Path::new(&path), kind.as_deref()).map_err(config_err)?;
        }
        let container_dir = pod_dir.join("containers").join(&c.name);
        fs::create_dir_all(&container_dir)
            .map_err(|e| config_err(format!("creating {}: {e}", container_dir.display())))?;
        let termination_log = container_dir.join(format!("termination-log-{attempt}"));
        let _ = fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o666)
            .open(&termination_log);
        let host_network = is_host_network(pod);
        let pod_ips = self.pod_ips(pod, observed.sandboxes.iter().find(|s| s.id == sandbox_id));
        let pod_ip = pod_ips.first().cloned().unwrap_or_default();
        let etc_hosts = pod_dir.join("etc-hosts");
        if !host_network {
            let hosts = spec::hosts_file(pod, &pod_ips, &self.cfg.cluster_domain);
            fs::write(&etc_hosts, hosts)
                .map_err(|e| config_err(format!("writing {}: {e}", etc_hosts.display())))?;
        }
        let log_dir = self.log_dir(pod).join(&c.name);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&log_dir)
            .map_err(|e| config_err(format!("creating {}: {e}", log_dir.display())))?;
        let qos = Self::qos(pod);
        let mem_request = qos::container_memory_request_bytes(c);
        let volume_dir = |name: &str| empty_dirs.get(name).cloned();
        let parent = self.cgroup_parent(pod);
        let seccomp_root = self.cfg.root_dir.join("seccomp");
        let params = spec::ContainerParams {
            attempt,
            image: &image,
            pod_ip: &pod_ip,
            pod_ips: &pod_ips,
            host_ip: &self.host_ip,
            volume_dir: &volume_dir,
            oom_score_adj: qos::oom_score_adj(qos, mem_request, self.node_memory),
            pod_cgroup_parent: &parent,
            node_allocatable_cpu_millis: None,
            termination_log_host_path: Some(&termination_log),
            etc_hosts: (!host_network).then_some(etc_hosts.as_path()),
            node_allocatable_memory_bytes: Some(self.node_memory),
            seccomp_profile_root: Some(&seccomp_root),
        };
        let config =
            spec::container_config(pod, c, &params).map_err(|e| config_err(e.to_string()))?;
        // Remove a leftover log file of the same attempt (from a failed create).
        let _ = fs::remove_file(log_dir.join(format!("{attempt}.log")));
        let id = self
            .runtime
            .create_container(api::CreateContainerRequest {
                pod_sandbox_id: sandbox_id.to_string(),
                config: Some(config),
                sandbox_config: Some(sandbox_config),
            })
            .await
            .map_err(|e| Waiting {
                reason: "CreateContainerError".into(),
                message: e.message(),
            })?
            .container_id;
        self.runtime
            .start_container(api::StartContainerRequest {
                container_id: id.clone(),
            })
            .await
            .map_err(|e| Waiting {
                reason: "RunContainerError".into(),
                message: e.message(),
            })?;
        log::info!(
            "started container {} of pod {} (attempt {attempt})",
            c.name,
            crate::pod::full_name(pod)
        );
        if let Err(msg) = self.run_post_start(pod, c, &id, &pod_ip).await {
            log::warn!(
                "postStart hook of container {} in pod {} failed: {msg}; killing it",
                c.name,
                crate::pod::full_name(pod)
            );
            if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
                e.kill_messages
                    .insert(id.clone(), format!("PostStartHook failed: {msg}"));
            }
            let _ = self.stop_container(&id, grace_period(pod)).await;
            return Err(Waiting {
                reason: "PostStartHookError".into(),
                message: msg,
            });
        }
        Ok(())
    }

    async fn stop_container(&self, id: &str, grace: i64) -> Result<(), CriError> {
        match self
            .runtime
            .stop_container(api::StopContainerRequest {
                container_id: id.to_string(),
                timeout: grace,
            })
            .await
        {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }

    /// Stops every container (in parallel, with the grace period) and every
    /// sandbox of a pod; with `remove`, also removes them and the pod's
    /// cgroup, volumes and logs.
    async fn terminate_pod(
        &self,
        pod: &Pod,
        observed: &ObservedPod,
        remove: bool,
    ) -> Result<(), String> {
        let grace = grace_period(pod);
        let stops: Vec<_> = observed
            .running()
            .map(|c| {
                log::info!(
                    "stopping container {} of pod {} (grace {grace}s)",
                    c.name,
                    crate::pod::full_name(pod)
                );
                self.kill_container(pod, &c.name, &c.id, grace)
            })
            .collect();
        let mut first_err = None;
        for r in join_all(stops).await {
            if let Err(e) = r {
                first_err.get_or_insert(e.to_string());
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        for s in &observed.sandboxes {
            if s.ready || remove {
                match self
                    .runtime
                    .stop_pod_sandbox(api::StopPodSandboxRequest {
                        pod_sandbox_id: s.id.clone(),
                    })
                    .await
                {
                    Err(e) if !e.is_not_found() => return Err(e.to_string()),
                    _ => {}
                }
            }
        }
        if !remove {
            return Ok(());
        }
        for s in &observed.sandboxes {
            match self
                .runtime
                .remove_pod_sandbox(api::RemovePodSandboxRequest {
                    pod_sandbox_id: s.id.clone(),
                })
                .await
            {
                Err(e) if !e.is_not_found() => return Err(e.to_string()),
                _ => {}
            }
        }
        let uid = crate::pod::uid(pod);
        if let Some(cg) = &self.cgroups {
            if let Err(e) = cg.remove_pod(uid, Self::qos(pod)) {
                log::warn!("removing cgroup of pod {}: {e}", crate::pod::full_name(pod));
            }
        }
        if !uid.is_empty() {
            remove_dir_logged(&self.pod_dir(uid));
            if pod.metadata.name.as_deref().is_some_and(|n| !n.is_empty()) {
                remove_dir_logged(&self.log_dir(pod));
            }
        }
        Ok(())
    }

    // ---- garbage collection --------------------------------------------

    async fn gc_loop(self: Rc<Self>) {
        // A first pass soon after start cleans up what a previous run left.
        rt::sleep(GC_FIRST).await;
        loop {
            self.collect_garbage().await;
            rt::sleep(GC_PERIOD).await;
        }
    }

    /// One GC pass.
    pub async fn collect_garbage(&self) {
        if !self.sources_ready.get() {
            return;
        }
        let live: HashSet<String> = self
            .pods
            .borrow()
            .iter()
            .filter(|(_, e)| !e.deleted)
            .map(|(u, _)| u.clone())
            .collect();
        let removals = {
            let rl = self.relist.borrow();
            gc::collect(&rl.sandboxes, &rl.containers, &live)
        };
        for r in removals {
            match r {
                gc::Removal::Container { id, .. } => {
                    log::debug!("GC: removing dead container {id}");
                    // Runtimes leave the log file behind; it goes with the container.
                    let log_path = match self
                        .runtime
                        .container_status(api::ContainerStatusRequest {
                            container_id: id.clone(),
                            verbose: false,
                        })
                        .await
                    {
                        Ok(r) => r.status.map(|s| s.log_path).filter(|p| !p.is_empty()),
                        Err(_) => None,
                    };
                    match self
                        .runtime
                        .remove_container(api::RemoveContainerRequest { container_id: id })
                        .await
                    {
                        Err(e) if !e.is_not_found() => log::warn!("GC: {e}"),
                        _ => {
                            if let Some(p) = log_path {
                                let _ = fs::remove_file(&p);
                            }
                        }
                    }
                }
                gc::Removal::Sandbox { id, pod_uid } => {
                    log::debug!("GC: removing sandbox {id} of pod {pod_uid}");
                    if let Err(e) = self
                        .runtime
                        .remove_pod_sandbox(api::RemovePodSandboxRequest { pod_sandbox_id: id })
                        .await
                    {
                        if !e.is_not_found() {
                            log::warn!("GC: {e}");
                        }
                    }
                }
            }
        }
        // Log directories and cgroups of pods that exist nowhere.
        let known: HashSet<String> = {
            let rl = self.relist.borrow();
            rl.sandboxes
                .iter()
                .map(|s| s.pod_uid.clone())
                .chain(live.iter().cloned())
                .collect()
        };
        if let Ok(dir) = fs::read_dir(&self.cfg.pod_logs_dir) {
            for entry in dir.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(uid) = name.rsplit('_').next() {
                    if name.matches('_').count() >= 2
                        && !known.contains(uid)
                        && self.pods.borrow().get(uid).is_none()
                    {
                        remove_dir_logged(&entry.path());
                    }
                }
            }
        }
        if let Some(cg) = &self.cgroups {
            if let Ok(list) = cg.list_pods() {
                for (qos, uid) in list {
                    if !known.contains(&uid) && self.pods.borrow().get(&uid).is_none() {
                        let _ = cg.remove_pod(&uid, qos);
                    }
                }
            }
        }
    }

    // ---- log rotation --------------------------------------------------

    async fn log_rotation_loop(self: Rc<Self>) {
        loop {
            rt::sleep(Duration::from_secs(10)).await;
            self.rotate_logs().await;
        }
    }

    /// kubelet's container log manager: when a running container's current
    /// log exceeds `containerLogMaxSize`, rename it with a timestamp, ask the
    /// runtime to reopen it, and keep at most `containerLogMaxFiles` files.
    async fn rotate_logs(&self) {
        let running: Vec<(String, PathBuf)> = {
            let pods = self.pods.borrow();
            pods.values()
                .flat_map(|e| {
                    let dir = self.log_dir(&e.pod);
                    e.observed
                        .containers
                        .iter()
                        .filter(|c| c.state == State::Running)
                        .map(move |c| {
                            (
                                c.id.clone(),
                                dir.join(&c.name).join(format!("{}.log", c.attempt)),
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        for (id, path) in running {
            let Ok(meta) = fs::metadata(&path) else {
                continue;
            };
            if meta.len() < self.cfg.container_log_max_size {
                continue;
            }
            let stamp = crate::logger::compact_timestamp(SystemTime::now());
            let rotated = PathBuf::from(format!("{}.{stamp}", path.display()));
            if let Err(e) = fs::rename(&path, &rotated) {
                log::warn!("rotating {}: {e}", path.display());
                continue;
            }
            if let Err(e) = self
                .runtime
                .reopen_container_log(api::ReopenContainerLogRequest { container_id: id })
                .await
            {
                log::warn!("reopening log {}: {e}", path.display());
                let _ = fs::rename(&rotated, &path);
                continue;
            }
            prune_rotated(
                &path,
                self.cfg.container_log_max_files.saturating_sub(1) as usize,
            );
        }
    }

    // ---- status --------------------------------------------------------

    /// The status of one pod right now.
    fn pod_status(&self, e: &PodEntry) -> PodStatus {
        let (readiness, started) = (&e.readiness, &e.started);
        let qos = Self::qos(&e.pod);
        let runtime_name = self.runtime_name.borrow();
        let mut st = status::pod_status(&status::StatusInput {
            pod: &e.pod,
            observed: &e.observed,
            waiting: &e.waiting,
            readiness,
            started,
            host_ip: &self.host_ip,
            qos_class: qos.as_str(),
            start_time_unix: Some(e.first_seen_unix),
            terminating: e.deleted,
            now_unix: now_unix_nanos() / 1_000_000_000,
            runtime_name: &runtime_name,
        });
        // Say why picolet killed a container (probe failure, hook failure).
        for cs in st.container_statuses.iter_mut().flatten() {
            for state in [cs.state.as_mut(), cs.last_state.as_mut()]
                .into_iter()
                .flatten()
            {
                if let Some(t) = state.terminated.as_mut() {
                    let id = t
                        .container_id
                        .as_deref()
                        .and_then(|i| i.split_once("://").map(|(_, i)| i))
                        .unwrap_or("");
                    if let Some(m) = e.kill_messages.get(id) {
                        t.message = Some(m.clone());
                    }
                }
            }
        }
        st
    }

    /// Every pod with its status, as a v1 PodList.
    pub fn pod_list(&self) -> serde_json::Value {
        let pods = self.pods.borrow();
        let items: Vec<serde_json::Value> = pods
            .values()
            .map(|e| {
                let mut p = (*e.pod).clone();
                p.status = Some(self.pod_status(e));
                if p.metadata.creation_timestamp.is_none() {
                    p.metadata.creation_timestamp =
                        Some(crate::status::time_from_unix(e.first_seen_unix));
                }
                if e.deleted && p.metadata.deletion_timestamp.is_none() {
                    p.metadata.deletion_timestamp = Some(crate::status::time_from_unix(
                        now_unix_nanos() / 1_000_000_000,
                    ));
                }
                crate::pod::to_json_value(&p).unwrap_or(serde_json::Value::Null)
            })
            .collect();
        serde_json::json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items})
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

fn remove_dir_logged(dir: &Path) {
    match fs::remove_dir_all(dir) {
        Ok(()) => log::debug!("removed {}", dir.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log::warn!("removing {}: {e}", dir.display()),
    }
}

/// Keeps the newest `keep` rotated files of `current` (`N.log.<stamp>`).
fn prune_rotated(current: &Path, keep: usize) {
    let (Some(dir), Some(base)) = (current.parent(), current.file_name()) else {
        return;
    };
    let prefix = format!("{}.", base.to_string_lossy());
    let mut rotated: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    rotated.sort();
    while rotated.len() > keep {
        let oldest = rotated.remove(0);
        let _ = fs::remove_file(oldest);
    }
}

/// Awaits every future concurrently on this thread.
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    // Poll all of them together: each stop waits on its own timer/RPC.
    let mut pending: Vec<_> = futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut results: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (slot, result) in pending.iter_mut().zip(results.iter_mut()) {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        *result = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => done = false,
                }
            }
        }
        if done {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    results
        .into_iter()
        .map(|r| r.expect("every future completed"))
        .collect()
}
