//! The sources room: one task per configured pod source, the merge of
//! their sets into the pods the node runs, and orphan adoption.
//!
//! Every source goes through [`Source`]; the agent keeps the last set and
//! the readiness of each configured source ([`Sources`]) and lets the pure
//! [`merge`] decide which pods are desired and admitted (with the node's
//! view and host support from `node.rs`); refused pods are kept, with
//! kubelet's reason, for their Failed status. Readiness is per
//! source: a pod found in the runtime that nobody wants (an orphan) is
//! terminated only once the source it came from (the sandbox's
//! `kubernetes.io/config.source`) is ready, or once every source is, when
//! its origin is unknown. GC asks the same question ([`Agent::may_remove`]).
//!
//! It must not know how a source reads its origin.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{now_unix_nanos, Agent, PodEntry};
use crate::cri::RuntimeService;
use crate::pleg;
use crate::pod::accessors::{self, full_name};
use crate::pod::admission;
use crate::pod::facts::{self, DEFAULT_GRACE_PERIOD_SECONDS};
use crate::pod::ObservedPod;
use crate::rt;
use crate::source::merge::{self, Merged, SourceState};
use crate::source::{FileSource, PodSource, Source, SourceUpdate};

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
}

impl<R: RuntimeService> Agent<R> {
    /// Spawns a task for every source the configuration turns on.
    pub(super) fn spawn_configured_sources(self: &Rc<Self>) -> Vec<smol::Task<()>> {
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
                .filter(|e| !e.deleted)
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
        let mut guard = self.sources.borrow_mut();
        let sources = &mut *guard;
        let state = sources.states.entry(update.source).or_default();
        if update.authoritative && !state.ready {
            log::info!("source {} is ready", update.source);
        }
        state.ready |= update.authoritative;
        // One copy of each pod: a pod the agent already runs unchanged
        // keeps the agent's `Rc` (issue #8's memory budget).
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
            .filter(|(_, e)| !e.deleted)
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
        let logged = &mut sources.rejected_logged;
        logged.retain(|u| !desired.contains_key(u));
        let mut refused = BTreeMap::new();
        for r in &rejected {
            if let merge::Rejection::Refused(why) = &r.reason {
                let pod = sources
                    .states
                    .get(&r.source)
                    .and_then(|st| st.pods.iter().find(|p| accessors::uid(p) == r.uid));
                if let Some(pod) = pod {
                    refused.insert(r.uid.clone(), (pod.clone(), why.clone()));
                }
            }
            if logged.insert(r.uid.clone()) {
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
        let desired: HashMap<String, (PodSource, Rc<Pod>)> = desired
            .into_iter()
            .map(|(u, (s, p))| (u, (s, p.clone())))
            .collect();
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

        let mut changed = Vec::new();
        let mut pods = self.pods.borrow_mut();
        // Deletions: a pod its source no longer wants.
        for (uid, e) in pods.iter_mut() {
            if e.source.is_some() && !e.deleted && !desired.contains_key(uid) {
                log::info!(
                    "pod {} removed from source {}; terminating",
                    full_name(&e.pod),
                    e.source.map(PodSource::as_str).unwrap_or("")
                );
                e.deleted = true;
                let _ = e.wake.try_send(());
            }
        }
        // Additions and updates.
        let mut sorted: Vec<(String, (PodSource, Rc<Pod>))> = desired.into_iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        for (uid, (source, pod)) in sorted {
            // Deletion asked in the API (`deletionTimestamp`): terminate
            // within the pod's `deletionGracePeriodSeconds` and never start
            // it again; the status sink sends the final DELETE once the
            // containers are gone.
            if pod.metadata.deletion_timestamp.is_some() {
                match pods.get_mut(&uid) {
                    Some(e) if e.deleted && e.pod == pod => {}
                    Some(e) => {
                        log::info!("pod {} is being deleted; terminating it", full_name(&pod));
                        e.source = Some(source);
                        e.pod = pod;
                        e.deleted = true;
                        let _ = e.wake.try_send(());
                    }
                    None if finished.contains(&uid) => {}
                    None => {
                        let entry = self.new_entry(uid.clone(), pod, Some(source), true);
                        pods.insert(uid, entry);
                    }
                }
                continue;
            }
            if let Some(e) = pods.get_mut(&uid) {
                let revived = e.deleted;
                e.source = Some(source);
                e.deleted = false;
                if e.pod != pod || revived {
                    // Probe results outlive an update that leaves the
                    // probes as they were (a label, an annotation, a
                    // readiness gate's condition): the container stays
                    // Ready, as under kubelet.
                    let probes_differ = revived || facts::probes_differ(&e.pod, &pod);
                    e.pod = pod;
                    e.warned = false;
                    let _ = e.wake.try_send(());
                    if probes_differ {
                        e.probe_tasks.clear();
                        e.clear_probe_results();
                        changed.push(uid);
                    }
                }
                continue;
            }
            log::info!(
                "pod {} added from source {source} (uid {uid})",
                full_name(&pod)
            );
            pods.insert(
                uid.clone(),
                self.new_entry(uid.clone(), pod, Some(source), false),
            );
            changed.push(uid);
        }
        changed
    }

    pub(super) fn new_entry(
        self: &Rc<Self>,
        uid: String,
        pod: Rc<Pod>,
        source: Option<PodSource>,
        deleted: bool,
    ) -> PodEntry {
        let (tx, rx) = smol::channel::bounded(1);
        let me = self.clone();
        let worker_uid = uid.clone();
        let task = rt::spawn(async move { me.pod_worker(worker_uid, rx).await });
        PodEntry {
            pod,
            source,
            deleted,
            wake: tx,
            observed: ObservedPod::default(),
            observed_at: None,
            fresh: true,
            first_seen_unix: now_unix_nanos() / 1_000_000_000,
            seen_unix_nanos: now_unix_nanos(),
            start_measured: false,
            sandbox_ips: HashMap::new(),
            containers: Default::default(),
            warned: false,
            evicted: None,
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
            let entry = self.new_entry(uid.clone(), Rc::new(pod), None, true);
            self.pods.borrow_mut().insert(uid, entry);
        }
    }
}
