//! The sources room: one task per configured pod source, the merge of
//! their sets into the pods the node runs, and orphan adoption.
//!
//! Every source goes through [`Source`]; the agent keeps the last set and
//! the readiness of each configured source ([`Sources`]) and lets the pure
//! [`merge`] decide which pods are desired and admitted (with the node's
//! view and host support from `node_facts.rs`); refused pods are kept, with
//! kubelet's reason, for their Failed status. Readiness is per
//! source: a pod found in the runtime that nobody wants (an orphan) is
//! terminated only once the source it came from (the sandbox's
//! `kubernetes.io/config.source`) is ready, or once every source is, when
//! its origin is unknown. GC asks the same question ([`PodWorkers::may_remove`]).
//!
//! It must not know how a source reads its origin.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::lifecycle::Lifecycle;
use super::{now_unix_nanos, PodEntry, PodWorkers};
use crate::cri::RuntimeService;
use crate::pleg;
use crate::pod::accessors::{self, full_name};
use crate::pod::admission;
use crate::pod::facts::{self, DEFAULT_GRACE_PERIOD_SECONDS};
use crate::pod::ObservedPod;
use crate::rt;
use crate::source::merge::{self, Merged, SourceState};
use crate::source::{FileSource, PodSource, Source, SourceUpdate};

/// The pods the node should run, by UID, with the source that wants each.
type Desired = HashMap<String, (PodSource, Rc<Pod>)>;

/// The configured sources: their last sets and readiness.
#[derive(Debug)]
pub(super) struct Sources {
    states: BTreeMap<PodSource, SourceState>,
    /// UIDs whose rejection was logged (logged once, until admitted).
    rejected_logged: BTreeSet<String>,
    /// Pods being deleted in the API that the agent already terminated and
    /// forgot, until their source drops them (so they are not taken up
    /// again at every update in between).
    pub(super) finished: BTreeSet<String>,
    /// Pods a source wants that admission refused, by UID, with why.
    pub refused: BTreeMap<String, (Rc<Pod>, admission::Rejection)>,
}

impl Sources {
    pub fn new(configured: Vec<PodSource>) -> Self {
        Sources {
            states: configured
                .into_iter()
                .map(|s| (s, SourceState::default()))
                .collect(),
            rejected_logged: BTreeSet::new(),
            finished: BTreeSet::new(),
            refused: BTreeMap::new(),
        }
    }

    /// Adds a source to wait for (not ready until its first set).
    pub fn configure(&mut self, source: PodSource) {
        self.states.entry(source).or_default();
    }

    /// Logs each rejection once (until the pod is admitted); returns the
    /// pods admission refused, by UID, with why.
    fn refusals(
        &mut self,
        desired: &Desired,
        rejected: &[merge::Rejected],
    ) -> BTreeMap<String, (Rc<Pod>, admission::Rejection)> {
        self.rejected_logged.retain(|u| !desired.contains_key(u));
        let mut refused = BTreeMap::new();
        for r in rejected {
            if let merge::Rejection::Refused(why) = &r.reason {
                let pod = self
                    .states
                    .get(&r.source)
                    .and_then(|st| st.pods.iter().find(|p| accessors::uid(p) == r.uid));
                if let Some(pod) = pod {
                    refused.insert(r.uid.clone(), (pod.clone(), why.clone()));
                }
            }
            if self.rejected_logged.insert(r.uid.clone()) {
                match &r.reason {
                    merge::Rejection::Refused(why) => log::warn!(
                        "pod admission denied: pod {} (uid {}) reason {}: {}",
                        r.name,
                        r.uid,
                        why.reason,
                        why.message
                    ),
                    other => log::error!("pod {} not admitted: {other}", r.name),
                }
            }
        }
        refused
    }
}

impl<R: RuntimeService> PodWorkers<R> {
    /// Spawns a task for every source the configuration turns on.
    pub(in crate::agent) fn spawn_configured_sources(self: &Rc<Self>) -> Vec<smol::Task<()>> {
        let mut tasks = Vec::new();
        match self.cfg.static_pod_path.clone() {
            Some(dir) => tasks.push(self.spawn_source(FileSource::new(
                dir,
                self.cfg.node_name.clone(),
                self.cfg.file_check_frequency,
            ))),
            None => log::info!("no staticPodPath: static pods are disabled"),
        }
        tasks
    }

    /// Drives one source: every set it returns is applied.
    pub fn spawn_source<S: Source + 'static>(self: &Rc<Self>, mut source: S) -> smol::Task<()> {
        let me = self.clone();
        self.sources.borrow_mut().configure(source.kind());
        rt::spawn(async move {
            loop {
                let update = source.next().await;
                me.apply_update(update);
            }
        })
    }

    /// May the runtime's leftovers of pod `uid` be removed? Only once the
    /// source it came from is ready (see the module docs).
    pub(super) fn may_remove(&self, uid: &str) -> bool {
        let origin = self.relist.borrow().sources.get(uid).copied();
        self.may_remove_from(origin)
    }

    fn may_remove_from(&self, origin: Option<PodSource>) -> bool {
        merge::may_remove(&self.sources.borrow().states, origin)
    }

    /// Every configured source is ready.
    pub(super) fn all_sources_ready(&self) -> bool {
        self.may_remove_from(None)
    }

    /// Applies a full set of pods from one source.
    pub fn apply_update(self: &Rc<Self>, update: SourceUpdate) {
        let changed = self.apply_update_inner(update);
        // The Services' watches follow the pods before any worker runs.
        let services = self.services.borrow().clone();
        if let Some(services) = services {
            let pods: Vec<Rc<Pod>> = self
                .pods
                .borrow()
                .values()
                .filter(|e| e.lifecycle.is_wanted())
                .map(|e| e.pod.clone())
                .collect();
            services.track(&mut pods.iter().map(|p| &**p));
        }
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

    /// Applies the set; returns the pods whose probes start (over): new
    /// pods, and changed ones whose probes changed.
    fn apply_update_inner(self: &Rc<Self>, update: SourceUpdate) -> Vec<String> {
        let (desired, finished) = self.merge_update(update);
        let mut pods = self.pods.borrow_mut();
        // Deletions: a pod its source no longer wants.
        for (uid, e) in pods.iter_mut() {
            if e.source.is_some() && e.lifecycle.is_wanted() && !desired.contains_key(uid) {
                log::info!(
                    "pod {} removed from source {}; terminating",
                    full_name(&e.pod),
                    e.source.map(PodSource::as_str).unwrap_or("")
                );
                e.lifecycle.delete();
                let _ = e.wake.try_send(());
            }
        }
        // Additions and updates.
        let mut sorted: Vec<(String, (PodSource, Rc<Pod>))> = desired.into_iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let mut changed = Vec::new();
        for (uid, (source, pod)) in sorted {
            if pod.metadata.deletion_timestamp.is_some() {
                self.deletion_asked(&mut pods, uid, source, pod, &finished);
            } else if self.wanted(&mut pods, &uid, source, pod) {
                changed.push(uid);
            }
        }
        changed
    }

    /// Records the source's set and merges every source's into the pods
    /// the node should run, by UID; also returns the pods already
    /// terminated while being deleted in the API. Refusals are logged, and
    /// reported to the API server, here.
    fn merge_update(&self, update: SourceUpdate) -> (Desired, BTreeSet<String>) {
        let mut guard = self.sources.borrow_mut();
        let sources = &mut *guard;
        let state = sources.states.entry(update.source).or_default();
        if update.authoritative && !state.ready {
            log::info!("source {} is ready", update.source);
        }
        state.ready |= update.authoritative;
        // One copy of each pod: a pod the agent already runs unchanged
        // keeps the agent's `Rc`.
        state.pods = {
            let running = self.pods.borrow();
            update
                .pods
                .into_iter()
                .map(|pod| match running.get(accessors::uid(&pod)) {
                    Some(e) if Rc::ptr_eq(&e.pod, &pod) || *e.pod == *pod => e.pod.clone(),
                    _ => pod,
                })
                .collect()
        };
        let admitted: BTreeSet<String> = self
            .pods
            .borrow()
            .iter()
            .filter(|(_, e)| e.lifecycle.is_wanted())
            .map(|(u, _)| u.clone())
            .collect();
        let node = self.node_view();
        let host = self.host_support();
        let refused_before: BTreeMap<String, admission::Rejection> = sources
            .refused
            .iter()
            .map(|(u, (_, why))| (u.clone(), why.clone()))
            .collect();
        let Merged {
            desired, rejected, ..
        } = merge::merge(&sources.states, &node, &host, &admitted, &refused_before);
        let desired: Desired = desired
            .into_iter()
            .map(|(u, (s, p))| (u, (s, p.clone())))
            .collect();
        let refused = sources.refusals(&desired, &rejected);
        sources.finished.retain(|u| desired.contains_key(u));
        let finished = sources.finished.clone();
        // API pods refused for the first time (in this run) are Failed in
        // the API too, with kubelet's reason and message.
        let newly_refused: Vec<(Rc<Pod>, admission::Rejection)> = rejected
            .iter()
            .filter(|r| r.source == PodSource::Api && !sources.refused.contains_key(&r.uid))
            .filter_map(|r| refused.get(&r.uid).cloned())
            .collect();
        // A refused API pod whose deletion was asked has nothing to stop:
        // it is finished at once (the status sink sends the final DELETE,
        // so it does not hang in Terminating).
        let refused_deleted: Vec<(Rc<Pod>, admission::Rejection)> = rejected
            .iter()
            .filter(|r| r.source == PodSource::Api)
            .filter_map(|r| refused.get(&r.uid))
            .filter(|(p, _)| p.metadata.deletion_timestamp.is_some())
            .filter(|(p, _)| {
                sources
                    .refused
                    .get(accessors::uid(p))
                    .is_none_or(|(before, _)| before.metadata.deletion_timestamp.is_none())
            })
            .cloned()
            .collect();
        sources.refused = refused;
        drop(guard);
        self.report_refused(&newly_refused);
        self.report_refused_deleted(&refused_deleted);
        (desired, finished)
    }

    /// Deletion asked in the API (`deletionTimestamp`): terminate within
    /// the pod's `deletionGracePeriodSeconds` and never start it again;
    /// the status sink sends the final DELETE once the containers are
    /// gone. A pod already terminated and forgotten (`finished`) is not
    /// taken up again.
    fn deletion_asked(
        self: &Rc<Self>,
        pods: &mut BTreeMap<String, PodEntry>,
        uid: String,
        source: PodSource,
        pod: Rc<Pod>,
        finished: &BTreeSet<String>,
    ) {
        match pods.get_mut(&uid) {
            Some(e) if e.lifecycle.is_deleted() && e.pod == pod => {}
            Some(e) => {
                log::info!("pod {} is being deleted; terminating it", full_name(&pod));
                e.source = Some(source);
                e.pod = pod;
                e.lifecycle.delete();
                let _ = e.wake.try_send(());
            }
            None if finished.contains(&uid) => {}
            None => {
                let entry = self.new_entry(uid.clone(), pod, Some(source), Lifecycle::DELETED);
                pods.insert(uid, entry);
            }
        }
    }

    /// A source wants the pod: take it up, update it, or take it up again
    /// when it was being deleted. Returns whether its probes start (over).
    fn wanted(
        self: &Rc<Self>,
        pods: &mut BTreeMap<String, PodEntry>,
        uid: &str,
        source: PodSource,
        pod: Rc<Pod>,
    ) -> bool {
        let Some(e) = pods.get_mut(uid) else {
            log::info!(
                "pod {} added from source {source} (uid {uid})",
                full_name(&pod)
            );
            let entry = self.new_entry(uid.to_string(), pod, Some(source), Lifecycle::Running);
            pods.insert(uid.to_string(), entry);
            return true;
        };
        e.source = Some(source);
        let revived = e.lifecycle.revive();
        if e.pod == pod && !revived {
            return false;
        }
        // Probe results outlive an update that leaves the probes as they
        // were (a label, an annotation, a readiness gate's condition): the
        // container stays Ready, as under kubelet.
        let probes_differ = revived || facts::probes_differ(&e.pod, &pod);
        e.pod = pod;
        e.warned = false;
        let _ = e.wake.try_send(());
        if probes_differ {
            e.probe_tasks.clear();
            e.clear_probe_results();
        }
        probes_differ
    }

    pub(super) fn new_entry(
        self: &Rc<Self>,
        uid: String,
        pod: Rc<Pod>,
        source: Option<PodSource>,
        lifecycle: Lifecycle,
    ) -> PodEntry {
        let (tx, rx) = smol::channel::bounded(1);
        let me = self.clone();
        let worker_uid = uid.clone();
        let task = rt::spawn(async move { me.pod_worker(worker_uid, rx).await });
        PodEntry {
            pod,
            source,
            lifecycle,
            wake: tx,
            observed: ObservedPod::default(),
            observed_at: None,
            never_synced: true,
            first_seen_unix: now_unix_nanos() / 1_000_000_000,
            seen_unix_nanos: now_unix_nanos(),
            start_measured: false,
            sandbox_ips: HashMap::new(),
            dead_sandboxes: Vec::new(),
            spec_hashes: None,
            containers: Default::default(),
            warned: false,
            volume_digests: HashMap::new(),
            volume_error: None,
            transitions: Default::default(),
            probe_tasks: Vec::new(),
            _task: Some(task),
        }
    }

    /// Pods found in the runtime that no source wants (left over from before
    /// a restart, or whose manifest went away while picolet was down) get a
    /// terminating worker once the source they came from is ready.
    pub(super) fn adopt_orphans(self: &Rc<Self>, snap: &pleg::Snapshot) {
        let orphans: Vec<String> = {
            let pods = self.pods.borrow();
            snap.pod_uids()
                .filter(|u| !pods.contains_key(*u))
                .map(str::to_string)
                .collect()
        };
        let mut new_entries = Vec::new();
        for uid in orphans {
            if !self.may_remove(&uid) {
                continue; // its source has not spoken yet: it may still want it
            }
            let rl = self.relist.borrow();
            if !rl.is_active(&uid) {
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
                        rl.grace
                            .get(&uid)
                            .copied()
                            .unwrap_or(DEFAULT_GRACE_PERIOD_SECONDS),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            };
            new_entries.push((uid, pod));
        }
        for (uid, pod) in new_entries {
            let entry = self.new_entry(uid.clone(), Rc::new(pod), None, Lifecycle::DELETED);
            self.pods.borrow_mut().insert(uid, entry);
        }
    }
}
