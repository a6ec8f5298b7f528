//! Observation: what the runtime holds, turned into the agent's inputs.
//!
//! The pure half, unit-tested: CRI sandboxes and containers become an
//! [`ObservedPod`] ([`observed_sandbox`], [`observed_container`]), and a
//! relist becomes the PLEG snapshot plus the GC input ([`relist_of`]). The
//! I/O half: [`PodWorkers::observe`] (one pod, by its UID label) and the PLEG
//! task, which relists on the schedule of [`pleg::Cadence`] (every second
//! without runtime events, cheaply: see [`crate::cri::raw`]; on each event
//! and every 10 s with them), diffs ([`pleg::diff`]) and wakes only the
//! affected pods' workers.
//!
//! A runtime that is down is never read as "no containers": the PLEG keeps
//! its last snapshot and workers retry. This file must not decide anything
//! about what to do with what it observed.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use super::PodWorkers;
use crate::cri::{api, CriError, RuntimeService};
use crate::gc;
use crate::pleg::{self, Kind, Record, State};
use crate::pod::labels::{
    CONFIG_SOURCE_ANNOTATION, CONTAINER_HASH_ANNOTATION, POD_TERMINATION_GRACE_PERIOD_ANNOTATION,
    POD_UID_LABEL,
};
use crate::pod::{ObservedContainer, ObservedPod, ObservedSandbox, RuntimeResources};
use crate::rt;
use crate::source::PodSource;

/// The last relist, as GC and orphan adoption need it.
#[derive(Debug, Default)]
pub(super) struct Relist {
    pub sandboxes: Vec<gc::Sandbox>,
    pub containers: Vec<gc::Container>,
    /// Grace period (s) per pod UID, from container annotations, for orphans.
    pub grace: HashMap<String, i64>,
    /// (namespace, name) per pod UID, from sandbox metadata.
    pub names: HashMap<String, (String, String)>,
    /// The source each pod came from, per pod UID, from the sandbox's
    /// `kubernetes.io/config.source` annotation (absent: unknown).
    pub sources: HashMap<String, PodSource>,
    /// The image each container was created from, per container ID
    /// (`/runningpods/`).
    pub images: HashMap<String, String>,
    /// When this relist began (its first list call): what a pod's cached
    /// observation is compared against ([`pleg::observation_holds`]).
    pub began: Option<Instant>,
}

impl Relist {
    /// A sandbox is ready or a container runs (or is in an unknown state).
    /// One pod's sandboxes and containers, as [`pleg::observation_holds`]
    /// compares them.
    pub fn seen(&self, uid: &str) -> Vec<pleg::Seen<'_>> {
        let sandboxes = self.sandboxes.iter().filter(|s| s.pod_uid == uid).map(|s| {
            let state = if s.ready {
                State::Running
            } else {
                State::Exited
            };
            (Kind::Sandbox, s.id.as_str(), state)
        });
        let containers = self
            .containers
            .iter()
            .filter(|c| c.pod_uid == uid)
            .map(|c| (Kind::Container, c.id.as_str(), c.state));
        sandboxes.chain(containers).collect()
    }

    pub fn is_active(&self, uid: &str) -> bool {
        self.sandboxes.iter().any(|s| s.pod_uid == uid && s.ready)
            || self
                .containers
                .iter()
                .any(|c| c.pod_uid == uid && matches!(c.state, State::Running | State::Unknown))
    }
}

/// A CRI container state as PLEG and the planner see it.
pub(super) fn cri_state(state: i32) -> State {
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

/// The PLEG snapshot and the GC input of one relist. Sandboxes and
/// containers without the pod UID label are not picolet's.
pub(super) fn relist_of(
    sandboxes: &[api::PodSandbox],
    containers: &[api::Container],
) -> (pleg::Snapshot, Relist) {
    let mut records = Vec::with_capacity(sandboxes.len() + containers.len());
    let mut rl = Relist::default();
    for s in sandboxes {
        let Some(uid) = s.labels.get(POD_UID_LABEL) else {
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
        if let Some(src) = s
            .annotations
            .get(CONFIG_SOURCE_ANNOTATION)
            .and_then(|v| PodSource::from_annotation(v))
        {
            rl.sources.insert(uid.clone(), src);
        }
        rl.sandboxes.push(gc::Sandbox {
            id: s.id.clone(),
            pod_uid: uid.clone(),
            attempt: md.attempt,
            created_at: s.created_at,
            ready,
        });
    }
    for c in containers {
        let Some(uid) = c.labels.get(POD_UID_LABEL) else {
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
            .get(POD_TERMINATION_GRACE_PERIOD_ANNOTATION)
            .and_then(|g| g.parse().ok())
        {
            rl.grace.insert(uid.clone(), g);
        }
        // The name the pod asked for when the runtime keeps it (CRI
        // `user_specified_image`), else what it reports (often the ID).
        let image = c
            .image
            .as_ref()
            .map(|i| match i.user_specified_image.as_str() {
                "" => i.image.as_str(),
                user => user,
            })
            .unwrap_or("");
        let image = if image.is_empty() {
            &c.image_ref
        } else {
            image
        };
        rl.images.insert(c.id.clone(), image.to_string());
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
    (pleg::Snapshot::from_records(records), rl)
}

/// A listed sandbox with its IPs (from PodSandboxStatus, cached per sandbox).
pub(super) fn observed_sandbox(
    s: &api::PodSandbox,
    (ip, additional_ips): (String, Vec<String>),
) -> ObservedSandbox {
    ObservedSandbox {
        id: s.id.clone(),
        attempt: s.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
        ready: sandbox_ready(s.state),
        created_at: s.created_at,
        ip,
        additional_ips,
    }
}

/// The IPs of a PodSandboxStatus answer: primary, then the others.
pub(super) fn sandbox_ips(st: api::PodSandboxStatusResponse) -> (String, Vec<String>) {
    let net = st.status.and_then(|s| s.network).unwrap_or_default();
    (
        net.ip,
        net.additional_ips.into_iter().map(|i| i.ip).collect(),
    )
}

/// A listed container, completed by its ContainerStatus when there is one
/// (the state there is fresher than the list's).
pub(super) fn observed_container(
    c: &api::Container,
    status: Option<api::ContainerStatus>,
) -> ObservedContainer {
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
            .get(CONTAINER_HASH_ANNOTATION)
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
    if let Some(st) = status {
        oc.state = cri_state(st.state);
        oc.exit_code = st.exit_code;
        oc.started_at = st.started_at;
        oc.finished_at = st.finished_at;
        oc.reason = st.reason;
        oc.message = st.message;
        if !st.image_ref.is_empty() {
            oc.image_ref = st.image_ref;
        }
        // The image as the runtime resolved it (kubelet's status `image`).
        if let Some(i) = st.image.filter(|i| !i.image.is_empty()) {
            oc.image = i.image;
        }
        oc.resources = st.resources.and_then(|r| r.linux).and_then(|l| {
            RuntimeResources::from_runtime(
                l.cpu_period,
                l.cpu_quota,
                l.cpu_shares,
                l.memory_limit_in_bytes,
            )
        });
    }
    oc
}

/// An exited container's status with kubelet's message: the runtime's,
/// then its termination message file's or its log's end
/// ([`super::termination_message`]).
fn with_termination_message(mut st: api::ContainerStatus) -> api::ContainerStatus {
    if st.state == api::ContainerState::ContainerExited as i32 {
        st.message = super::termination_message::message(&st);
    }
    st
}

fn label_filter(uid: &str) -> HashMap<String, String> {
    HashMap::from([(POD_UID_LABEL.to_string(), uid.to_string())])
}

impl<R: RuntimeService> PodWorkers<R> {
    /// Observes one pod in the runtime.
    pub(super) async fn observe(&self, uid: &str) -> Result<ObservedPod, CriError> {
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
        for s in &sandboxes {
            let cached = self
                .pods
                .borrow()
                .get(uid)
                .and_then(|e| e.sandbox_ips.get(&s.id).cloned());
            let ips = match cached {
                Some(v) => v,
                None if sandbox_ready(s.state) => {
                    let st = self
                        .runtime
                        .pod_sandbox_status(api::PodSandboxStatusRequest {
                            pod_sandbox_id: s.id.clone(),
                            verbose: false,
                        })
                        .await?;
                    let v = sandbox_ips(st);
                    if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
                        e.sandbox_ips.insert(s.id.clone(), v.clone());
                    }
                    v
                }
                None => Default::default(),
            };
            obs.sandboxes.push(observed_sandbox(s, ips));
        }
        for c in &containers {
            let status = match self
                .runtime
                .container_status(api::ContainerStatusRequest {
                    container_id: c.id.clone(),
                    verbose: false,
                })
                .await
            {
                Ok(r) => r.status.map(with_termination_message),
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            };
            obs.containers.push(observed_container(c, status));
        }
        self.forget_dead_sandboxes(uid, &mut obs);
        obs.normalize();
        Ok(obs)
    }

    /// Takes the pod's dead sandboxes (`PodEntry::dead_sandboxes`) as not
    /// ready in `obs`, and forgets those the runtime no longer lists ready.
    fn forget_dead_sandboxes(&self, uid: &str, obs: &mut ObservedPod) {
        let mut pods = self.pods.borrow_mut();
        let Some(e) = pods.get_mut(uid) else { return };
        if e.dead_sandboxes.is_empty() {
            return;
        }
        e.dead_sandboxes
            .retain(|id| obs.sandboxes.iter().any(|s| &s.id == id && s.ready));
        for s in &mut obs.sandboxes {
            if e.dead_sandboxes.contains(&s.id) {
                s.ready = false;
            }
        }
    }

    /// A container could not join sandbox `id`: its namespaces are gone
    /// (its pause process died and the runtime missed it, as after a power
    /// cut). The runtime may list it ready forever, and every container
    /// started in it fails; kubelet would retry them in it until the
    /// runtime noticed. picolet stops it, and takes it as not ready from
    /// now on even if the stop fails, so the next sync creates a new
    /// sandbox.
    pub(super) async fn sandbox_dead(
        &self,
        uid: &str,
        pod: &k8s_openapi::api::core::v1::Pod,
        id: &str,
    ) {
        log::warn!(
            "sandbox {id} of pod {}: its namespaces are gone though the runtime lists it ready; \
             replacing it",
            crate::pod::accessors::full_name(pod)
        );
        if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
            if !e.dead_sandboxes.iter().any(|d| d == id) {
                e.dead_sandboxes.push(id.to_string());
            }
        }
        let req = api::StopPodSandboxRequest {
            pod_sandbox_id: id.to_string(),
        };
        match self.runtime.stop_pod_sandbox(req).await {
            Err(e) if !e.is_not_found() => log::warn!("stopping dead sandbox {id}: {e}"),
            _ => {}
        }
    }

    /// The sandbox this worker just created, as [`PodWorkers::observe`] would
    /// find it, from one PodSandboxStatus instead of two lists and a
    /// status (the start path of issue #13); its IPs are cached as
    /// `observe` caches them.
    pub(super) async fn observe_new_sandbox(
        &self,
        uid: &str,
        id: &str,
    ) -> Result<ObservedSandbox, CriError> {
        let st = self
            .runtime
            .pod_sandbox_status(api::PodSandboxStatusRequest {
                pod_sandbox_id: id.to_string(),
                verbose: false,
            })
            .await?;
        let status = st.status.clone().unwrap_or_default();
        let ready = sandbox_ready(status.state);
        let (ip, additional_ips) = if ready {
            let v = sandbox_ips(st);
            if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
                e.sandbox_ips.insert(id.to_string(), v.clone());
            }
            v
        } else {
            Default::default()
        };
        Ok(ObservedSandbox {
            id: id.to_string(),
            attempt: status.metadata.map(|m| m.attempt).unwrap_or(0),
            ready,
            created_at: status.created_at,
            ip,
            additional_ips,
        })
    }

    /// Lists every sandbox and container (or only the sandboxes, when the
    /// containers were just listed); records the GC input.
    /// `began` is when the first list call of this relist was made (the
    /// containers' when they were listed before).
    pub(super) async fn relist(
        &self,
        containers: Option<Vec<api::Container>>,
        began: Instant,
    ) -> Result<pleg::Snapshot, CriError> {
        let sandboxes = self
            .runtime
            .list_pod_sandbox(api::ListPodSandboxRequest::default())
            .await?
            .items;
        let containers = match containers {
            Some(c) => c,
            None => {
                self.runtime
                    .list_containers(api::ListContainersRequest::default())
                    .await?
                    .containers
            }
        };
        let (snap, mut rl) = relist_of(&sandboxes, &containers);
        self.kubelet_metrics
            .borrow_mut()
            .pleg_relist
            .observe(began.elapsed().as_secs_f64());
        rl.began = Some(began);
        *self.relist.borrow_mut() = rl;
        Ok(snap)
    }

    /// One PLEG pass: relist, wake the pods that changed (all of them after
    /// the runtime came back), adopt orphans. Returns the new snapshot, or
    /// `None` when the runtime could not be listed. (The PLEG task runs
    /// [`PodWorkers::pleg_tick`]; unit tests run full passes.)
    #[cfg(test)]
    pub(super) async fn pleg_pass(
        self: &Rc<Self>,
        last: &pleg::Snapshot,
        connects: &mut u64,
        down: &mut bool,
    ) -> Option<pleg::Snapshot> {
        let listed = self.relist(None, Instant::now()).await;
        self.after_relist(listed, last, connects, down)
    }

    fn after_relist(
        self: &Rc<Self>,
        listed: Result<pleg::Snapshot, CriError>,
        last: &pleg::Snapshot,
        connects: &mut u64,
        down: &mut bool,
    ) -> Option<pleg::Snapshot> {
        match listed {
            Ok(snap) => {
                let reconnected = self.runtime.connects() != *connects;
                *connects = self.runtime.connects();
                if *down || reconnected {
                    log::info!("container runtime is back; resyncing every pod");
                    *down = false;
                    self.wake_all();
                }
                let events = pleg::diff(last, &snap);
                for uid in pleg::changed_pods(&events) {
                    self.wake(&uid);
                }
                self.adopt_orphans(&snap);
                Some(snap)
            }
            Err(e) => {
                if !*down {
                    log::error!("PLEG relist failed: {e}; keeping the last known state");
                    *down = true;
                }
                None
            }
        }
    }

    /// One timed or event-triggered PLEG pass, cheap when nothing changed:
    /// the containers are listed undecoded, and only when their fingerprint
    /// changed (or the sandbox backstop is due, or the runtime came back)
    /// are they decoded, the sandboxes listed and the snapshots diffed
    /// ([`pleg::Cadence`]). Nothing is allocated per container otherwise.
    pub(super) async fn pleg_tick(self: &Rc<Self>, st: &mut PlegState) {
        let began = Instant::now();
        let raw = self.runtime.list_containers_raw().await;
        if self.runtime.connects() != st.connects {
            st.cadence.borrow_mut().reconnected();
        }
        let now = Instant::now();
        let listed = match raw {
            Ok(raw) => {
                let fp = raw.fingerprint().map(|f| (f.containers, f.hash));
                if !st.down && !st.cadence.borrow().needs_full_relist(fp, now) {
                    self.adopt_orphans(&st.last);
                    return;
                }
                match raw.decode() {
                    Ok(r) => {
                        let listed = self.relist(Some(r.containers), began).await;
                        if listed.is_ok() {
                            st.cadence.borrow_mut().relisted(fp, now);
                        }
                        listed
                    }
                    Err(e) => Err(CriError::Status {
                        op: "ListContainersResponse",
                        status: tonic::Status::internal(e.to_string()),
                    }),
                }
            }
            Err(e) => Err(e),
        };
        if listed.is_err() {
            st.cadence.borrow_mut().forget();
        }
        if let Some(snap) = self.after_relist(listed, &st.last, &mut st.connects, &mut st.down) {
            st.last = snap;
        }
    }

    pub(in crate::agent) async fn pleg_loop(self: Rc<Self>) {
        let cadence = Rc::new(RefCell::new(pleg::Cadence::default()));
        // An event (or the stream's end) asks for a relist now; one
        // pending request is enough, however many events came.
        let (kick, kicked) = smol::channel::bounded::<()>(1);
        let me = self.clone();
        let events_cadence = cadence.clone();
        let _events = rt::spawn(async move { me.events_loop(events_cadence, kick).await });
        let mut st = PlegState::new(self.runtime.connects(), cadence);
        loop {
            self.pleg_tick(&mut st).await;
            let period = st.cadence.borrow().period();
            smol::future::or(
                async {
                    let _ = kicked.recv().await;
                },
                rt::sleep_on_grid(period),
            )
            .await;
        }
    }

    /// The stream counts as open: say so when that is news, and relist
    /// at once to catch up on what happened before. Returns true.
    fn stream_opened(
        &self,
        cadence: &RefCell<pleg::Cadence>,
        kick: &smol::channel::Sender<()>,
    ) -> bool {
        if cadence.borrow().events != pleg::Events::Streaming {
            log::info!(
                "container runtime events: evented PLEG, relisting every {:?} as a backstop",
                pleg::EVENTED_RELIST_PERIOD
            );
        }
        cadence.borrow_mut().stream_opened();
        let _ = kick.try_send(());
        true
    }

    /// The event stream (`GetContainerEvents`): while it is open, every
    /// event asks the PLEG for a relist and the timed relist slows to a
    /// backstop; when it fails, the 1 s relist resumes at once and the
    /// stream is retried with a back-off. A runtime without it is asked
    /// again only after a reconnect.
    async fn events_loop(
        self: Rc<Self>,
        cadence: Rc<RefCell<pleg::Cadence>>,
        kick: smol::channel::Sender<()>,
    ) {
        let mut said_ended = false;
        loop {
            let wait = cadence.borrow().stream_retry_in(Instant::now());
            match wait {
                Some(d) if !d.is_zero() => rt::sleep(d).await,
                Some(_) => {}
                // Streaming cannot be (this task owns the stream), so the
                // runtime lacks events: look again after the backstop, in
                // case a reconnect reset that.
                None => {
                    rt::sleep(pleg::SANDBOX_BACKSTOP).await;
                    continue;
                }
            }
            // A runtime without events says so at once (Unimplemented), and
            // one with events turned off ends the stream at once; one with
            // them may answer only with its first event. So the stream
            // counts as open when its first event came, or when nothing
            // ended it within STREAM_SETTLE.
            let mut first = Box::pin(async {
                let mut stream = self.runtime.get_container_events().await?;
                let event = stream.next().await?;
                Ok::<_, CriError>((stream, event))
            });
            let mut opened = false;
            let outcome = match rt::timeout(STREAM_SETTLE, &mut first).await {
                Some(r) => r,
                None => {
                    opened = self.stream_opened(&cadence, &kick);
                    first.await
                }
            };
            let mut stream = match outcome {
                Ok((stream, Some(_))) => stream,
                Ok((_, None)) => {
                    if !said_ended {
                        log::info!(
                            "container runtime ends its event stream at once (events turned off? \
                             CRI-O: enable_pod_events); relisting every {:?}",
                            pleg::RELIST_PERIOD
                        );
                        said_ended = true;
                    }
                    cadence.borrow_mut().stream_failed(Instant::now(), false);
                    let _ = kick.try_send(());
                    continue;
                }
                Err(e) if e.code() == tonic::Code::Unimplemented => {
                    log::info!(
                        "container runtime has no GetContainerEvents; relisting every {:?}",
                        pleg::RELIST_PERIOD
                    );
                    cadence.borrow_mut().stream_unsupported();
                    let _ = kick.try_send(());
                    continue;
                }
                Err(e) => {
                    log::debug!("container events: {e}; relisting every second meanwhile");
                    cadence.borrow_mut().stream_failed(Instant::now(), false);
                    let _ = kick.try_send(());
                    continue;
                }
            };
            if !opened {
                self.stream_opened(&cadence, &kick);
            }
            let _ = kick.try_send(());
            let why = loop {
                match stream.next().await {
                    Ok(Some(_)) => {
                        let _ = kick.try_send(());
                    }
                    Ok(None) => break "the runtime ended it".to_string(),
                    Err(e) => break e.to_string(),
                }
            };
            log::warn!(
                "container event stream closed ({why}); relisting every second until it is back"
            );
            cadence.borrow_mut().stream_failed(Instant::now(), true);
            let _ = kick.try_send(());
        }
    }
}

/// How long a runtime has to refuse `GetContainerEvents` before the stream
/// counts as open (an Unimplemented answer takes a round trip).
const STREAM_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// What the PLEG task keeps between passes.
pub(super) struct PlegState {
    last: pleg::Snapshot,
    down: bool,
    connects: u64,
    cadence: Rc<RefCell<pleg::Cadence>>,
}

impl PlegState {
    pub(super) fn new(connects: u64, cadence: Rc<RefCell<pleg::Cadence>>) -> Self {
        PlegState {
            last: pleg::Snapshot::default(),
            down: false,
            connects,
            cadence,
        }
    }
}

#[cfg(test)]
mod tests;
