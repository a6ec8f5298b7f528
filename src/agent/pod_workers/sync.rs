//! Pod sync: one worker per pod. A worker observes its pod in the runtime
//! and syncs it as its [`Lifecycle`] says: a running pod as [`plan`] asks
//! (create the sandbox, start containers (image, host files, CRI config),
//! kill containers, back off), an evicted pod is kept stopped, a deleted
//! pod is terminated, removed from the runtime and forgotten. It sleeps
//! until woken (a source change, a PLEG event, a probe), until its
//! back-off expires, or until `syncFrequency`.
//!
//! The start path: at most [`SANDBOX_STARTS_IN_FLIGHT`] RunPodSandbox
//! calls are in flight, and as many container starts, so the runtime does
//! not build every sandbox in lockstep before the first container starts;
//! a pod that had nothing in the runtime learns its new sandbox from one
//! PodSandboxStatus instead of a full re-observation. A new pod's first
//! sync starts from nothing, without reading the runtime, when the PLEG's
//! last relist lacks the pod and began after the agent last forgot a pod
//! ([`crate::pleg::nothing_yet`] says why that is safe). docs/performance.md
//! ("The pod start path") has the measurements.
//!
//! The idle path: a sync on the worker's timer alone plans
//! from the pod's last observation instead of reading the runtime when
//! [`crate::pleg::observation_holds`] says the PLEG's later relist vouches
//! for it (the invariant is written there). The plan still runs, with the
//! current time, so an expiring crash-loop back-off still restarts its
//! container; a sync that acts forgets when its observation was made
//! until its closing read, so its next timed sync reads the runtime
//! unless a relist followed that read.
//!
//! What a pod is and what to do with it is decided elsewhere (`pod::plan`,
//! `pod::spec`, `pod::facts`, the lifecycle's transitions in
//! `lifecycle.rs`); this file must not contain such rules, only their
//! execution and the bookkeeping of what happened (waiting reasons, kill
//! messages, the crash-loop back-off).

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use smol::channel::Receiver;

use super::lifecycle::{Evicted, Lifecycle};
use super::{host_files, now_unix_nanos, start, PodWorkers, RETRY_AFTER_ERROR};
use crate::backoff::Backoff;
use crate::cri::RuntimeService;
use crate::pleg::{Kind, State};
use crate::pod::accessors::{self, full_name};
use crate::pod::plan::{self, Action, KillReason};
use crate::pod::{facts, spec, ObservedPod};
use crate::qos;
use crate::rt;
use crate::status::{self, Waiting};

/// RunPodSandbox calls in flight at most. Without a bound, pods written
/// together ask for all their sandboxes at once: the runtime builds them
/// in lockstep (each network setup waits on the CNI plugins' locks, every
/// runc competes for the same cores) and no container starts before
/// nearly all sandboxes exist. With it, the first pods' containers start
/// while later sandboxes are still being made.
pub(super) const SANDBOX_STARTS_IN_FLIGHT: usize = 8;

/// Container starts (CreateContainer then StartContainer) in flight at
/// most: as many as sandbox starts, so a pod with its sandbox goes
/// straight on while the bound keeps 110 starting pods from holding 110
/// sets of CRI calls at once (see `start_container`).
pub(super) const CONTAINER_STARTS_IN_FLIGHT: usize = 8;

/// What a running pod's sync carries from one action to the next.
struct Run {
    /// The ready sandbox containers start in (ID, attempt), if any.
    sandbox: Option<(String, u32)>,
    observed: ObservedPod,
    /// When to sync again.
    next: Duration,
}

/// After one action of a running pod's sync: go on with the next action,
/// skip the rest, or end the sync and retry after the given time.
enum Step {
    Next,
    SkipRest,
    Retry(Duration),
}

impl<R: RuntimeService> PodWorkers<R> {
    pub(super) async fn pod_worker(self: Rc<Self>, uid: String, wake: Receiver<()>) {
        let mut woken = true;
        loop {
            // Boxed: the sync's state machine only lives while a sync runs,
            // not for the life of every pod. Every pod syncs at once when
            // many are created together, so its size is paid per pod: the
            // sync boxes its larger steps (a container's start, its kill).
            let next = match Box::pin(self.sync_pod_after(&uid, woken)).await {
                Some(d) => d,
                None => return,
            };
            self.report_status(&uid);
            self.trigger_readiness(&uid);
            woken = rt::timeout(next, wake.recv()).await.is_some();
            while wake.try_recv().is_ok() {
                woken = true;
            }
        }
    }

    /// One sync of one pod, reading the runtime. Returns when to sync
    /// again, or `None` when the pod is gone for good.
    #[cfg(test)]
    pub(super) async fn sync_pod(self: &Rc<Self>, uid: &str) -> Option<Duration> {
        self.sync_pod_after(uid, true).await
    }

    /// Evicts the pod when its `activeDeadlineSeconds` has passed (the
    /// event `DeadlineExceeded` once); else returns how long until it
    /// does, when it has one.
    fn past_active_deadline(&self, uid: &str, pod: &Pod) -> Option<Duration> {
        let mut pods = self.pods.borrow_mut();
        let e = pods.get_mut(uid)?;
        if e.lifecycle.evicted().is_some() {
            return None;
        }
        let now = now_unix_nanos() / 1_000_000_000;
        let left = facts::active_deadline_left(pod, e.first_seen_unix, now)?;
        if left > 0 {
            return Some(Duration::from_secs(left as u64));
        }
        // A pod that finished before its deadline keeps its phase.
        let phase = self.pod_status(e).phase;
        if matches!(phase.as_deref(), Some(status::SUCCEEDED | status::FAILED)) {
            return None;
        }
        log::info!(
            "pod {} is past its activeDeadlineSeconds; stopping it",
            full_name(pod)
        );
        e.lifecycle.evict(Evicted {
            message: facts::DEADLINE_EXCEEDED_MESSAGE.to_string(),
            grace: facts::grace_period(pod),
            condition: None,
            at_unix: now,
        });
        drop(pods);
        self.event(
            pod,
            None,
            false,
            facts::DEADLINE_EXCEEDED,
            facts::DEADLINE_EXCEEDED_MESSAGE,
        );
        None
    }

    /// The pod's last observation, when a resync on the timer (not
    /// `woken`) may plan from it instead of reading the runtime: the pod
    /// cache of [`crate::pleg::observation_holds`].
    fn cached_observation(&self, uid: &str, woken: bool) -> Option<ObservedPod> {
        let pods = self.pods.borrow();
        let e = pods.get(uid)?;
        let relist = self.relist.borrow();
        let observed: Vec<crate::pleg::Seen> = e
            .observed
            .sandboxes
            .iter()
            .map(|s| {
                let state = if s.ready {
                    State::Running
                } else {
                    State::Exited
                };
                (Kind::Sandbox, s.id.as_str(), state)
            })
            .chain(
                e.observed
                    .containers
                    .iter()
                    .map(|c| (Kind::Container, c.id.as_str(), c.state)),
            )
            .collect();
        let relisted = relist.seen(uid);
        let holds = crate::pleg::observation_holds(&crate::pleg::Resync {
            woken,
            deleted: e.lifecycle.is_deleted(),
            observed_at: e.observed_at,
            relisted_at: relist.began,
            observed: &observed,
            relisted: &relisted,
        });
        holds.then(|| e.observed.clone())
    }

    /// An empty observation for a pod's first sync, when the last relist
    /// vouches that the runtime holds nothing of it
    /// ([`crate::pleg::nothing_yet`]). Only the first sync asks.
    fn nothing_yet(&self, uid: &str) -> Option<ObservedPod> {
        let mut pods = self.pods.borrow_mut();
        let e = pods.get_mut(uid)?;
        if !std::mem::take(&mut e.never_synced) || e.lifecycle.is_deleted() {
            return None;
        }
        let relist = self.relist.borrow();
        crate::pleg::nothing_yet(relist.began, self.last_forgotten.get(), &relist.seen(uid))
            .then(ObservedPod::default)
    }

    /// The pod as this sync sees it: its last observation when that still
    /// holds, nothing for a new pod the last relist vouches for, else a
    /// read of the runtime. `None` (logged): the read failed.
    async fn observation(&self, uid: &str, pod: &Pod, woken: bool) -> Option<ObservedPod> {
        if let Some(o) = self
            .cached_observation(uid, woken)
            .or_else(|| self.nothing_yet(uid))
        {
            return Some(o);
        }
        match Box::pin(self.observe(uid)).await {
            Ok(o) => {
                self.record_observed(uid, &o);
                Some(o)
            }
            Err(e) => {
                log::warn!("observing pod {}: {e}", full_name(pod));
                None
            }
        }
    }

    /// One sync of one pod; `woken` says the worker was woken (by a
    /// source, a probe, the PLEG) rather than by its timer. Observes the
    /// pod, then syncs it as its [`Lifecycle`] says. Returns when to sync
    /// again, or `None` when the pod is gone for good.
    pub(super) async fn sync_pod_after(
        self: &Rc<Self>,
        uid: &str,
        woken: bool,
    ) -> Option<Duration> {
        let (pod, deleted) = {
            let pods = self.pods.borrow();
            let e = pods.get(uid)?;
            (e.pod.clone(), e.lifecycle.is_deleted())
        };
        let Some(observed) = self.observation(uid, &pod, woken).await else {
            return Some(RETRY_AFTER_ERROR);
        };
        if deleted {
            return Box::pin(self.sync_deleted(uid, &pod, observed)).await;
        }
        // Past its activeDeadlineSeconds (set, or shortened since): stop
        // it for good, as an eviction without a pressure.
        let deadline_left = self.past_active_deadline(uid, &pod);
        let lifecycle = self.pods.borrow().get(uid).map(|e| e.lifecycle.clone());
        match lifecycle {
            // Stopped by the node, now or while it was observed.
            Some(Lifecycle::Evicted(_) | Lifecycle::Deleted { evicted: Some(_) }) => {
                Box::pin(self.sync_evicted(uid, &pod, &observed)).await
            }
            // Deleted while it was observed: the deletion woke the worker,
            // whose next sync terminates it.
            Some(Lifecycle::Running | Lifecycle::Deleted { evicted: None }) | None => {
                Box::pin(self.sync_running(uid, &pod, observed, deadline_left)).await
            }
        }
    }

    /// An evicted pod: keep it stopped (its status says why).
    async fn sync_evicted(&self, uid: &str, pod: &Pod, observed: &ObservedPod) -> Option<Duration> {
        if observed.is_active() {
            if let Err(e) = Box::pin(self.terminate_pod(pod, observed, false)).await {
                log::warn!("stopping evicted pod {}: {e}", full_name(pod));
                return Some(RETRY_AFTER_ERROR);
            }
            if let Ok(o) = Box::pin(self.observe(uid)).await {
                self.record_observed(uid, &o);
            }
        }
        host_files::remove_empty_dirs(&self.cfg, pod);
        Some(self.cfg.sync_frequency)
    }

    /// A running pod: refresh its config volumes, plan, perform the plan's
    /// actions in order, and read the runtime again when it acted.
    async fn sync_running(
        &self,
        uid: &str,
        pod: &Pod,
        observed: ObservedPod,
        deadline_left: Option<Duration>,
    ) -> Option<Duration> {
        // A changed ConfigMap or Secret reaches running containers' volumes.
        if observed.is_active() {
            self.refresh_config_volumes(pod);
        }
        let actions = self.plan_actions(uid, pod, &observed);
        let mut next = self.cfg.sync_frequency;
        if let Some(left) = deadline_left {
            next = next.min(left);
        }
        if actions.is_empty() {
            return Some(next);
        }
        log::debug!("pod {}: {:?}", full_name(pod), actions);
        // What follows changes the runtime: the observation no longer
        // stands for it until the closing read below.
        if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
            e.observed_at = None;
        }
        let mut run = Run {
            sandbox: observed
                .latest_sandbox()
                .filter(|s| s.ready)
                .map(|s| (s.id.clone(), s.attempt)),
            observed,
            next,
        };
        for action in actions {
            match Box::pin(self.perform(uid, pod, action, &mut run)).await {
                Step::Next => {}
                Step::SkipRest => break,
                Step::Retry(after) => return Some(after),
            }
        }
        if let Ok(o) = Box::pin(self.observe(uid)).await {
            self.record_observed(uid, &o);
        }
        Some(run.next)
    }

    /// What [`plan::plan`] asks of the pod now.
    fn plan_actions(&self, uid: &str, pod: &Pod, observed: &ObservedPod) -> Vec<Action> {
        let hashes = self.spec_hashes(uid, pod);
        // The hash of picolet's first form (a second dump of the spec, and
        // an md5) is only asked for a container created under another hash
        // than the current one: a periodic resync of an unchanged pod
        // computes none.
        let legacy_hashes: HashMap<String, String> = accessors::all_containers(pod)
            .filter(|(c, _)| {
                observed.containers.iter().any(|o| {
                    o.name == c.name && !o.hash.is_empty() && Some(&o.hash) != hashes.get(&c.name)
                })
            })
            .map(|(c, _)| (c.name.clone(), spec::legacy_container_hash(c)))
            .collect();
        let health = self
            .pods
            .borrow()
            .get(uid)
            .map(|e| e.health())
            .unwrap_or_default();
        let backoff = self.backoff.borrow();
        let ctx = plan::Context {
            backoff: &backoff,
            health: &health,
            now: Instant::now(),
            now_unix_nanos: now_unix_nanos(),
            hashes: &hashes,
            legacy_hashes: &legacy_hashes,
        };
        plan::plan(pod, observed, &ctx)
    }

    /// The containers' spec hashes of `pod`, computed once per pod object
    /// (each is a JSON dump of the container and a hash of it).
    fn spec_hashes(&self, uid: &str, pod: &Pod) -> super::SpecHashes {
        let mut pods = self.pods.borrow_mut();
        let entry = pods.get_mut(uid);
        // The same object: the cached `Rc` is alive, so its address is
        // this pod's alone.
        if let Some((of, hashes)) = entry.as_ref().and_then(|e| e.spec_hashes.as_ref()) {
            if std::ptr::eq(Rc::as_ptr(of), pod) {
                return hashes.clone();
            }
        }
        let hashes: super::SpecHashes = Rc::new(
            accessors::all_containers(pod)
                .map(|(c, _)| (c.name.clone(), spec::container_hash(c)))
                .collect(),
        );
        if let Some(e) = entry.filter(|e| std::ptr::eq(Rc::as_ptr(&e.pod), pod)) {
            e.spec_hashes = Some((e.pod.clone(), hashes.clone()));
        }
        hashes
    }

    /// Performs one action of a running pod's plan.
    async fn perform(&self, uid: &str, pod: &Pod, action: Action, run: &mut Run) -> Step {
        match action {
            Action::KillPod => {
                if let Err(e) = Box::pin(self.terminate_pod(pod, &run.observed, false)).await {
                    log::warn!("stopping pod {}: {e}", full_name(pod));
                    return Step::Retry(RETRY_AFTER_ERROR);
                }
                run.sandbox = None;
                Step::Next
            }
            Action::CreateSandbox { attempt } => {
                Box::pin(self.perform_create_sandbox(uid, pod, attempt, run)).await
            }
            Action::StartContainer {
                name,
                init,
                attempt,
                restart,
            } => {
                let start =
                    self.perform_start_container(uid, pod, &name, init, attempt, restart, run);
                Box::pin(start).await
            }
            Action::StartEphemeralContainer { name } => {
                let Some((sid, sattempt)) = run.sandbox.clone() else {
                    return Step::SkipRest;
                };
                let start =
                    self.start_ephemeral_container(pod, &run.observed, &name, &sid, sattempt);
                match Box::pin(start).await {
                    Ok(()) => self.set_waiting(uid, &name, None),
                    Err(w) => {
                        // Not started: tried again at the next sync (no
                        // back-off, as kubelet: there is no exit to back
                        // off from).
                        self.start_failed(pod, &name, w);
                        run.next = run.next.min(RETRY_AFTER_ERROR * 5);
                    }
                }
                Step::Next
            }
            Action::KillContainer { id, name, reason } => {
                Box::pin(self.perform_kill_container(uid, pod, name, id, reason)).await;
                Step::Next
            }
            Action::RemoveContainer { id, name } => {
                log::debug!(
                    "removing exited init container {name} ({id}) of pod {}",
                    full_name(pod)
                );
                Box::pin(super::housekeeping::remove_container(&self.runtime, id)).await;
                Step::Next
            }
            Action::BackOff { name, remaining } => {
                self.back_off(uid, pod, &name);
                run.next = run.next.min(remaining + Duration::from_millis(50));
                Step::Next
            }
        }
    }

    /// Creates the pod's sandbox and observes the pod again.
    async fn perform_create_sandbox(
        &self,
        uid: &str,
        pod: &Pod,
        attempt: u32,
        run: &mut Run,
    ) -> Step {
        let id = match Box::pin(self.create_sandbox(pod, attempt)).await {
            Ok(id) => id,
            Err(e) => {
                log::error!("creating sandbox for pod {}: {e}", full_name(pod));
                self.set_waiting_all(uid, pod, "ContainerCreating", &e);
                return Step::Retry(RETRY_AFTER_ERROR * 5);
            }
        };
        // A pod that had nothing in the runtime has only this sandbox now:
        // ask for it alone.
        let had_nothing = run.observed.sandboxes.is_empty() && run.observed.containers.is_empty();
        let again = if had_nothing {
            Box::pin(self.observe_new_sandbox(uid, &id))
                .await
                .map(|s| ObservedPod {
                    sandboxes: vec![s],
                    ..Default::default()
                })
        } else {
            Box::pin(self.observe(uid)).await
        };
        run.sandbox = Some((id, attempt));
        match again {
            Ok(o) => {
                run.observed = o;
                Step::Next
            }
            Err(_) => Step::Retry(RETRY_AFTER_ERROR),
        }
    }

    /// Starts (or restarts, counting the crash-loop back-off) one init or
    /// app container in the pod's sandbox. A regular init container that
    /// cannot start holds the rest of the plan; a sidecar does not.
    #[allow(clippy::too_many_arguments)]
    async fn perform_start_container(
        &self,
        uid: &str,
        pod: &Pod,
        name: &str,
        init: bool,
        attempt: u32,
        restart: bool,
        run: &mut Run,
    ) -> Step {
        let Some((sid, sattempt)) = run.sandbox.clone() else {
            return Step::SkipRest;
        };
        let Some(container) = accessors::container(pod, name).cloned() else {
            return Step::Next;
        };
        if restart {
            let key = Backoff::key(uid, name);
            self.backoff.borrow_mut().next(&key, Instant::now());
            if let Some(prev) = run.observed.latest(name) {
                // A container that never started did not run: on
                // containerd a failed StartContainer leaves it exited with
                // started_at 0 (CRI-O fails the CreateContainer instead;
                // runtimes.md #4).
                let ran = if prev.started_at > 0 {
                    (prev.finished_at - prev.started_at).max(0) as u64
                } else {
                    0
                };
                self.backoff
                    .borrow_mut()
                    .observe_run(&key, Duration::from_nanos(ran));
            }
        }
        let at = start::Placement {
            sandbox_id: &sid,
            sandbox_attempt: sattempt,
            pid_target: None,
        };
        let start = self.start_container(pod, &run.observed, &container, attempt, at);
        match Box::pin(start).await {
            Ok(()) => self.set_waiting(uid, name, None),
            Err(w) => {
                let dead = crate::cri::sandbox_namespaces_gone(&w.message);
                self.start_failed(pod, name, w);
                if dead {
                    Box::pin(self.sandbox_dead(uid, pod, &sid)).await;
                    run.next = run.next.min(RETRY_AFTER_ERROR);
                    return Step::SkipRest;
                }
                run.next = run.next.min(RETRY_AFTER_ERROR * 5);
                if init && !qos::is_sidecar(&container) {
                    return Step::SkipRest;
                }
            }
        }
        Step::Next
    }

    /// Kills one container the plan says must go, with the grace period
    /// and message its cause left on its entry.
    async fn perform_kill_container(
        &self,
        uid: &str,
        pod: &Pod,
        name: String,
        id: String,
        reason: KillReason,
    ) {
        let why = match reason {
            KillReason::SpecChanged => "its spec changed",
            KillReason::Unhealthy => "it failed its liveness probe",
            KillReason::StartupProbeFailed => "it failed its startup probe",
            KillReason::UnknownState => "it is in an unknown state",
        };
        log::info!("killing container {name} of pod {}: {why}", full_name(pod));
        let grace = {
            let mut pods = self.pods.borrow_mut();
            let g = pods.get_mut(uid).and_then(|e| {
                let c = e.container(&name);
                c.unhealthy = None;
                if let Some(m) = c.kill_message.take() {
                    c.note_killed(id.clone(), m);
                }
                c.kill_grace.take()
            });
            g.unwrap_or_else(|| facts::grace_period(pod))
        };
        if let Err(e) = Box::pin(self.kill_container(pod, &name, &id, grace)).await {
            log::warn!("stopping container {name}: {e}");
        }
    }

    /// A container waits out its crash-loop back-off: its waiting reason
    /// and kubelet's `BackOff` event.
    fn back_off(&self, uid: &str, pod: &Pod, name: &str) {
        let delay = self
            .backoff
            .borrow()
            .delay(&Backoff::key(uid, name))
            .unwrap_or_default();
        let msg = format!(
            "back-off {} restarting failed container={} pod={}_{}({})",
            crate::config::duration::format(delay),
            name,
            accessors::name(pod),
            accessors::namespace(pod),
            uid
        );
        let w = Waiting {
            reason: "CrashLoopBackOff".into(),
            message: msg,
        };
        let text = format!(
            "Back-off restarting failed container {name} in pod {}_{}({uid})",
            accessors::name(pod),
            accessors::namespace(pod),
        );
        self.event(pod, Some(name), true, "BackOff", &text);
        self.set_waiting(uid, name, Some(w));
    }

    pub(super) fn record_observed(&self, uid: &str, observed: &ObservedPod) {
        if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
            e.observed = observed.clone();
            e.observed_at = Some(Instant::now());
            // A running container is no longer waiting.
            for (name, c) in e.containers.iter_mut() {
                if observed
                    .latest(name)
                    .is_some_and(|o| o.state == State::Running)
                {
                    c.waiting = None;
                }
            }
            // kubelet's pod start duration: from first seeing the pod to
            // its first running app container, for pods this run started
            // (not ones found running).
            if !e.start_measured {
                let spec = crate::pod::accessors::spec(&e.pod);
                let started = observed.containers.iter().find(|c| {
                    c.state == State::Running && spec.containers.iter().any(|s| s.name == c.name)
                });
                if let Some(c) = started {
                    e.start_measured = true;
                    if c.created_at >= e.seen_unix_nanos {
                        let took = now_unix_nanos().saturating_sub(e.seen_unix_nanos);
                        self.kubelet_metrics
                            .borrow_mut()
                            .pod_start
                            .observe(took as f64 / 1e9);
                    }
                }
            }
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

    /// A container could not start: log it when the reason is new (not at
    /// every retry), write kubelet's `Failed` event, keep the reason.
    fn start_failed(&self, pod: &Pod, name: &str, w: Waiting) {
        let uid = accessors::uid(pod);
        let known = self
            .pods
            .borrow()
            .get(uid)
            .and_then(|e| e.containers.get(name).and_then(|c| c.waiting.clone()));
        if known.as_ref().map(|k| &k.reason) != Some(&w.reason) {
            log::warn!(
                "container {} of pod {}: {}: {}",
                name,
                full_name(pod),
                w.reason,
                w.message
            );
        }
        self.container_failed_event(pod, name, &w);
        self.set_waiting(uid, name, Some(w));
    }

    fn set_waiting(&self, uid: &str, name: &str, w: Option<Waiting>) {
        if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
            e.container(name).waiting = w;
        }
    }

    fn set_waiting_all(&self, uid: &str, pod: &Pod, reason: &str, err: &dyn std::fmt::Display) {
        for (c, _) in accessors::all_containers(pod) {
            let w = Waiting {
                reason: reason.into(),
                message: err.to_string(),
            };
            self.set_waiting(uid, &c.name, Some(w));
        }
    }
}
