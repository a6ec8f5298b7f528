//! The API-server pod source: the pods bound to this node, from a
//! list/watch of `spec.nodeName=<node>` in every namespace, kept in the
//! crash-safe cache, handed to the agent through the [`Source`] seam.
//!
//! The rules that keep a board safe on a bad uplink:
//! - the first set is the cache's, at once: after a reboot with the link
//!   down every cached pod runs, and running containers are adopted;
//! - the set is *authoritative* only once the reflector has synced with
//!   the API server (a relist, or a resumed watch's first bookmark). Until
//!   then the agent removes nothing of this source's pods, so an error, a
//!   timeout or an empty reply is never read as "no pods";
//! - only what the agent runs is compared: status (but the conditions the
//!   pod's readiness gates name), resourceVersion and managedFields are
//!   dropped, so the node's own status patches (which come back as
//!   MODIFIED events) never look like a changed pod;
//! - each API pod is held once in this process: the source keeps its
//!   desired form, shared (`Rc`) with the agent, made from the cache at
//!   start and then from the informer's events, and a digest of the set it
//!   handed over ([`SetDigest`]); the informer's store keeps only each
//!   pod's uid and resourceVersion (what its staleness check and the diff
//!   of a relist compare, [`crate::apiserver::listwatch::reflector::Reflector::keep_versions_only`]),
//!   and the disk cache the slimmed API object. With 110 API pods that
//!   store was a second copy of every pod, ~5.7 KB each (heaptrack on the
//!   debug build). A desired pod is made again only when
//!   its API object's resourceVersion moved, and kept (the same `Rc`) when
//!   that did not change it, so a status patch coming back as a MODIFIED
//!   event copies nothing, and a set sent after one pod changed is not a
//!   new copy of every pod (issue #8: 110 API pods were a copy of each per
//!   update, and two copies at rest). A MODIFIED event whose desired form
//!   did not change yields the same digest and nothing is sent;
//! - mirror pods (the API's copies of static pods) are not run: they are
//!   published in a [`MirrorPods`] view for the mirror-pod sync;
//! - every pod is validated again with the API server's rules
//!   ([`crate::pod::validation`]); one picolet would refuse is logged once
//!   and not run;
//! - a pod whose phase in the API is already `Succeeded` or `Failed` when
//!   this run first sees it (a job that finished before a restart, a pod
//!   refused before a reboot) is not started again, as kubelet treats a
//!   pod terminal in the API as terminated. A pod that turns terminal
//!   while this run has it stays with the agent, which already knows it
//!   finished ([`first_seen_terminal`]).
//!
//! This module must not know the agent's internals; it only implements
//! [`Source`].

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};

use super::mirror;
use super::status_manager::KUBELET_CONDITIONS;
use crate::apiserver::client::request::{collection_path, Selectors};
use crate::apiserver::client::transport::Client;
use crate::apiserver::listwatch::disk_cache::Cache;
use crate::apiserver::listwatch::informer::Informer;
use crate::apiserver::listwatch::reflector::{Event, ObjectKey};
use crate::pod::labels::CONFIG_SOURCE_ANNOTATION;
use crate::source::{PodSource, Source, SourceUpdate};

/// The mirror pods on this node as the API server last said, shared with
/// the mirror-pod and status sync.
pub type MirrorPods = Rc<RefCell<BTreeMap<ObjectKey, Pod>>>;

/// The pods bound to this node, from the API server.
pub struct ApiPodSource {
    informer: Informer<Pod>,
    mirrors: MirrorPods,
    /// The digest of the last set handed to the agent, and whether it was
    /// authoritative (`None` before the first).
    last: Option<(SetDigest, bool)>,
    /// Every pod bound to the node, in the one form this process keeps of
    /// it ([`Held`]); the informer's store keeps only their versions.
    pods: BTreeMap<ObjectKey, Held>,
    /// Pods refused by validation, logged once each (by UID).
    invalid: RefCell<std::collections::BTreeSet<String>>,
    /// Pods this run has seen, by UID, and whether the API said they were
    /// terminal then: those are not run.
    seen: RefCell<BTreeMap<String, bool>>,
    /// Told the pods of every set, to watch what they reference.
    configs: Option<Rc<crate::apiserver::referenced::configs::ConfigWatches>>,
    /// Shown every pod the watch delivers (the status sync compares its
    /// status with the node's last patch).
    observer: Option<PodObserver>,
}

/// Shown each pod the watch delivers ([`ApiPodSource::with_observer`]).
pub type PodObserver = Rc<dyn Fn(&Pod)>;

/// What the source keeps of one API pod, decided when the pod arrives (from
/// the cache at start, then from each event).
#[derive(Debug)]
enum Held {
    /// Run by the agent: its desired form ([`desired`]), shared with the
    /// agent, with the resourceVersion of the API object it was made from.
    Run(Option<String>, Rc<Pod>),
    /// A mirror pod: published in [`MirrorPods`], not run.
    Mirror(Box<Pod>),
    /// Not run: refused by validation, or terminal when first seen.
    Skipped,
}

/// The cache directory of the pods (under `--root-dir`).
pub fn cache_dir(root_dir: &Path) -> std::path::PathBuf {
    root_dir.join("apiserver").join("pods")
}

impl ApiPodSource {
    /// A source for the pods of `node_name`, with its cache under
    /// `root_dir`. A cache that cannot be opened is logged, and the source
    /// runs without one (it relists when it can).
    pub fn new(client: Client, node_name: &str, root_dir: &Path, mirrors: MirrorPods) -> Self {
        let dir = cache_dir(root_dir);
        let cache = match Cache::open(&dir, 0o700) {
            Ok((cache, loaded)) => {
                if loaded.discarded > 0 {
                    log::warn!(
                        "pod cache {}: {} corrupt entries discarded; they are fetched again",
                        dir.display(),
                        loaded.discarded
                    );
                }
                log::info!(
                    "pod cache {}: {} pods{}",
                    dir.display(),
                    loaded.entries.len(),
                    loaded
                        .resource_version
                        .as_deref()
                        .map(|rv| format!(" at resourceVersion {rv}"))
                        .unwrap_or_default()
                );
                Some((cache, loaded))
            }
            Err(e) => {
                log::error!("pod cache: {e}; running without it until the API server answers");
                None
            }
        };
        let mut informer = Informer::new(
            client,
            collection_path::<Pod>(None),
            Selectors::fields(format!("spec.nodeName={node_name}")),
            cache,
        )
        .with_reflector(|r| r.with_slimming(slim));
        let restored = informer.keep_versions_only();
        let mut source = ApiPodSource {
            informer,
            mirrors,
            last: None,
            pods: BTreeMap::new(),
            invalid: RefCell::new(std::collections::BTreeSet::new()),
            seen: RefCell::new(BTreeMap::new()),
            configs: None,
            observer: None,
        };
        for pod in restored {
            source.take(Event::Applied(pod));
        }
        source
    }

    /// Shows `observer` every pod the watch delivers, as the API server
    /// has it (slimmed, [`slim`]).
    pub fn with_observer(mut self, observer: PodObserver) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Watches the ConfigMaps and Secrets of the pods handed out, before
    /// the agent sees them.
    pub fn with_configs(
        mut self,
        configs: Rc<crate::apiserver::referenced::configs::ConfigWatches>,
    ) -> Self {
        self.configs = Some(configs);
        self
    }

    /// Keeps what an event says of a pod: its [`Held`] form, made again
    /// from the API object (reusing the desired form while it did not
    /// change), or nothing once it is deleted.
    fn take(&mut self, event: Event<Pod>) {
        match event {
            Event::Applied(pod) => {
                let Some(key) = ObjectKey::of(&pod) else {
                    return;
                };
                if let Some(observe) = &self.observer {
                    observe(&pod);
                }
                let before = self.pods.remove(&key);
                let held = hold(
                    &key,
                    before,
                    pod,
                    &mut self.invalid.borrow_mut(),
                    &mut self.seen.borrow_mut(),
                );
                self.pods.insert(key, held);
            }
            Event::Deleted(pod) => {
                if let Some(key) = ObjectKey::of(&pod) {
                    self.pods.remove(&key);
                }
            }
            Event::Synced => {}
        }
    }

    /// The pods the agent runs now, and whether the set is authoritative;
    /// publishes the mirror pods.
    fn current(&self) -> (Vec<Rc<Pod>>, bool) {
        let mut mirrors = BTreeMap::new();
        let mut pods = Vec::new();
        for (key, held) in &self.pods {
            match held {
                Held::Run(_, pod) => pods.push(pod.clone()),
                Held::Mirror(pod) => {
                    mirrors.insert(key.clone(), Pod::clone(pod));
                }
                Held::Skipped => {}
            }
        }
        let present: std::collections::BTreeSet<&str> = self
            .informer
            .reflector()
            .versions()
            .values()
            .filter_map(|v| v.uid.as_deref())
            .collect();
        self.seen
            .borrow_mut()
            .retain(|uid, _| present.contains(uid.as_str()));
        *self.mirrors.borrow_mut() = mirrors;
        (pods, self.informer.reflector().is_synced())
    }
}

/// What to keep of `pod`: a mirror pod as it is, a pod picolet refuses
/// or that was terminal when first seen as nothing, any other as its
/// desired form (reused from `before` while unchanged, [`reuse_desired`]).
/// `invalid` and `seen` remember, by UID, the refusals logged and the
/// pods seen terminal at first sight.
fn hold(
    key: &ObjectKey,
    before: Option<Held>,
    pod: Pod,
    invalid: &mut std::collections::BTreeSet<String>,
    seen: &mut BTreeMap<String, bool>,
) -> Held {
    if mirror::is_mirror(&pod) {
        return Held::Mirror(Box::new(pod));
    }
    // Defence in depth: the API server validated it, but a pod
    // picolet would refuse as a static pod is not run either.
    if let Err(errors) = crate::pod::validation::validate_pod(&pod) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if invalid.insert(uid) {
            log::error!(
                "pod {key} from the API server is invalid and is not run: {}",
                crate::pod::validation::summary(&errors)
            );
        }
        return Held::Skipped;
    }
    if first_seen_terminal(seen, &pod) {
        return Held::Skipped;
    }
    let before = match before {
        Some(Held::Run(rv, p)) => Some((rv, p)),
        _ => None,
    };
    let (rv, p) = reuse_desired(before, &pod);
    Held::Run(rv, p)
}

/// The desired form of `pod` with the resourceVersion it was made from:
/// `before` (made earlier for the same key) when the resourceVersion did
/// not move or the desired form is unchanged, else a new one.
fn reuse_desired(
    before: Option<(Option<String>, Rc<Pod>)>,
    pod: &Pod,
) -> (Option<String>, Rc<Pod>) {
    let rv = pod.metadata.resource_version.clone();
    match before {
        Some((was, p)) if was.is_some() && was == rv => (rv, p),
        Some((_, p)) => {
            let now = desired(pod);
            if *p == now {
                (rv, p)
            } else {
                (rv, Rc::new(now))
            }
        }
        None => (rv, Rc::new(desired(pod))),
    }
}

/// Whether `pod` is left out because the API already called it terminal
/// (`Succeeded` or `Failed`) when this run first saw it. `seen` remembers
/// the answer per UID, so a pod that turns terminal later (the node's own
/// status report) stays with the agent, and one first seen terminal is
/// logged once and never started.
pub fn first_seen_terminal(seen: &mut BTreeMap<String, bool>, pod: &Pod) -> bool {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    if let Some(&terminal) = seen.get(&uid) {
        return terminal;
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let terminal = matches!(phase, Some("Succeeded" | "Failed"));
    if terminal {
        log::info!(
            "pod {}/{} is {} in the API already; not starting it",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default(),
            phase.unwrap_or_default()
        );
    }
    seen.insert(uid, terminal);
    terminal
}

/// What the pod source keeps of an API pod, in its store and its cache:
/// the object without `managedFields`, without kubectl's
/// `last-applied-configuration` annotation (a second copy of the object),
/// and of its status only the phase (all [`first_seen_terminal`] reads),
/// the conditions its readiness gates name, and the type and status alone
/// of the kubelet-owned conditions (what the status sync compares with
/// the node's last patch, [`StatusSync::observed`]). With 110 pods the
/// whole status was ~0.2 MiB of heap on a board that has a few (issue #8).
///
/// [`StatusSync::observed`]: super::status_sync::StatusSync::observed
pub fn slim(mut p: Pod) -> Pod {
    p.metadata.managed_fields = None;
    if let Some(a) = p.metadata.annotations.as_mut() {
        a.remove(LAST_APPLIED);
        if a.is_empty() {
            p.metadata.annotations = None;
        }
    }
    let mut conditions = gate_conditions(&p).unwrap_or_default();
    let owned = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .into_iter()
        .flatten()
        .filter(|c| KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .filter(|c| !conditions.iter().any(|g| g.type_ == c.type_))
        .map(|c| PodCondition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            ..PodCondition::default()
        })
        .collect::<Vec<_>>();
    conditions.extend(owned);
    p.status = p.status.map(|s| PodStatus {
        phase: s.phase,
        conditions: (!conditions.is_empty()).then_some(conditions),
        ..PodStatus::default()
    });
    p
}

/// The conditions of the pod's status that its `readinessGates` name (set
/// by controllers through the API; the pod is Ready only when each is
/// True), or `None` when it has none of them.
pub fn gate_conditions(pod: &Pod) -> Option<Vec<PodCondition>> {
    let gates = pod.spec.as_ref()?.readiness_gates.as_deref()?;
    let kept: Vec<PodCondition> = pod
        .status
        .as_ref()?
        .conditions
        .as_deref()?
        .iter()
        .filter(|c| gates.iter().any(|g| g.condition_type == c.type_))
        .cloned()
        .collect();
    (!kept.is_empty()).then_some(kept)
}

/// `kubectl apply`'s copy of what it applied.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What the agent runs of an API pod: the object without its status
/// (except the conditions its readiness gates name, [`gate_conditions`],
/// which the agent's Ready condition reads) and
/// the bookkeeping the API server changes on every write, marked with its
/// source. `metadata.generation` stays: it moves only with the spec (or a
/// deletion), which change the desired pod anyway, and the status reports
/// it back as `observedGeneration`, as kubelet does.
pub fn desired(pod: &Pod) -> Pod {
    let mut p = pod.clone();
    p.status = gate_conditions(pod).map(|conditions| PodStatus {
        conditions: Some(conditions),
        ..PodStatus::default()
    });
    p.metadata.resource_version = None;
    p.metadata.managed_fields = None;
    p.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            CONFIG_SOURCE_ANNOTATION.to_string(),
            PodSource::Api.as_str().to_string(),
        );
    p
}

/// A digest of a set of desired pods: SipHash-1-3 (std's `DefaultHasher`,
/// fixed keys) of their JSON in order. Two sets with the same digest are
/// taken as equal; for different sets that has a chance of 2^-64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetDigest(u64);

impl SetDigest {
    /// The digest of `pods`, each serialized straight into the hasher (one
    /// pod in memory at a time when `pods` makes them lazily).
    pub fn of<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Self {
        use std::hash::Hasher;
        struct Feed(std::hash::DefaultHasher);
        impl std::io::Write for Feed {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.write(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut feed = Feed(std::hash::DefaultHasher::new());
        for pod in pods {
            // Writing into a hasher cannot fail, and a Pod always
            // serializes; a failure would only weaken the digest.
            let _ = serde_json::to_writer(&mut feed, pod);
            feed.0.write_u8(b'\n');
        }
        SetDigest(feed.0.finish())
    }
}

impl Source for ApiPodSource {
    fn kind(&self) -> PodSource {
        PodSource::Api
    }

    async fn next(&mut self) -> SourceUpdate {
        loop {
            if self.last.is_some() {
                let mut synced = false;
                for event in self.informer.next().await {
                    synced |= matches!(event, Event::Synced);
                    self.take(event);
                }
                if synced {
                    log::info!(
                        "pods of this node are in sync with the API server ({} pods)",
                        self.pods.len()
                    );
                }
            }
            let (pods, authoritative) = self.current();
            let now = (SetDigest::of(pods.iter().map(|p| &**p)), authoritative);
            if self.last != Some(now) {
                self.last = Some(now);
                if let Some(c) = &self.configs {
                    c.track(pods.iter().map(|p| &**p));
                }
                return SourceUpdate {
                    source: PodSource::Api,
                    pods,
                    authoritative,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conditions_of_readiness_gates_are_run_and_the_kubelet_owned_ones_only_kept_for_the_status_sync(
    ) {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "uid": "u"},
            "spec": {"containers": [{"name": "c"}], "readinessGates": [{"conditionType": "example.com/lb"}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "example.com/lb", "status": "True"},
                {"type": "example.com/other", "status": "True"}
            ]}
        }))
        .unwrap();
        let types = |p: &Pod| -> Vec<String> {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .map(|c| c.iter().map(|c| c.type_.clone()).collect())
                .unwrap_or_default()
        };
        assert_eq!(types(&desired(&p)), ["example.com/lb"]);
        assert_eq!(types(&slim(p.clone())), ["example.com/lb", "Ready"]);
        assert_eq!(desired(&slim(p.clone())), desired(&p));
        let mut flipped = p.clone();
        flipped
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()[1]
            .status = "False".into();
        assert_ne!(
            desired(&flipped),
            desired(&p),
            "a gate's change is a change"
        );
        let mut ours = p.clone();
        ours.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "True".into();
        assert_eq!(
            desired(&ours),
            desired(&p),
            "the node's own conditions are not"
        );
        let mut no_gates = p;
        no_gates.spec.as_mut().unwrap().readiness_gates = None;
        assert_eq!(desired(&no_gates).status, None);
    }

    #[test]
    fn the_store_keeps_a_pods_phase_and_condition_statuses_but_not_the_rest_or_kubectls_copy() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "uid": "u", "managedFields": [{"manager": "kubectl"}],
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "keep": "me"}},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "conditions": [
                {"type": "Ready", "status": "True", "reason": "r", "message": "m",
                 "lastTransitionTime": "2026-12-07T00:00:00Z"},
                {"type": "example.com/other", "status": "True"}
            ]}
        }))
        .unwrap();
        let only_kubectls: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "b", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}
        }))
        .unwrap();
        assert_eq!(slim(only_kubectls).metadata.annotations, None);
        let s = slim(p);
        assert_eq!(s.metadata.managed_fields, None);
        let annotations = s.metadata.annotations.unwrap();
        assert_eq!(annotations.keys().collect::<Vec<_>>(), ["keep"]);
        let status = s.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.pod_ip, None);
        // The type and status of Ready (the status sync compares them),
        // nothing else of it, and no other writer's condition.
        assert_eq!(
            serde_json::to_value(&status.conditions).unwrap(),
            serde_json::json!([{"type": "Ready", "status": "True"}])
        );
    }

    #[test]
    fn the_desired_pod_ignores_what_the_api_server_changes_on_every_write() {
        let a: Pod = serde_yaml_ng::from_str(
            "metadata: {name: web, namespace: default, uid: u1, resourceVersion: '10', generation: 1}\nspec: {nodeName: pi-1, containers: [{name: c, image: i}]}\nstatus: {phase: Pending}\n",
        )
        .unwrap();
        let mut b = a.clone();
        b.metadata.resource_version = Some("11".into());
        b.status.as_mut().unwrap().phase = Some("Running".into());
        assert_eq!(desired(&a), desired(&b));
        assert_eq!(desired(&a).status, None);
        assert_eq!(
            desired(&a).metadata.generation,
            Some(1),
            "kept for the status's observedGeneration"
        );
        assert_eq!(
            desired(&a).metadata.annotations.unwrap()[CONFIG_SOURCE_ANNOTATION],
            "api"
        );
        let mut c = a.clone();
        c.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert_ne!(desired(&a), desired(&c), "a deletion is a change");
    }

    #[test]
    fn the_set_digest_changes_with_any_pod_and_with_the_order_but_not_without_a_change() {
        let a: Pod = serde_yaml_ng::from_str(
            "metadata: {name: a, namespace: default, uid: u1}\nspec: {containers: [{name: c, image: i}]}\n",
        )
        .unwrap();
        let mut b = a.clone();
        b.metadata.name = Some("b".into());
        let ab = SetDigest::of([&a, &b]);
        assert_eq!(ab, SetDigest::of([&a, &b]));
        assert_ne!(ab, SetDigest::of([&b, &a]));
        assert_ne!(ab, SetDigest::of([&a]));
        assert_ne!(SetDigest::of([]), SetDigest::of([&a]));
        let mut image = b.clone();
        image.spec.as_mut().unwrap().containers[0].image = Some("j".into());
        assert_ne!(ab, SetDigest::of([&a, &image]));
    }

    #[test]
    fn a_desired_pod_is_made_again_only_when_its_desired_form_changed() {
        let a: Pod = serde_yaml_ng::from_str(
            "metadata: {name: web, namespace: default, uid: u1, resourceVersion: '10'}\nspec: {containers: [{name: c, image: i}]}\nstatus: {phase: Pending}\n",
        )
        .unwrap();
        let first = reuse_desired(None, &a);
        assert_eq!(first.0.as_deref(), Some("10"));
        assert_eq!(*first.1, desired(&a));
        let same = reuse_desired(Some(first.clone()), &a);
        assert!(Rc::ptr_eq(&same.1, &first.1), "same resourceVersion");
        let mut patched = a.clone();
        patched.metadata.resource_version = Some("11".into());
        patched.status.as_mut().unwrap().phase = Some("Running".into());
        let after_status = reuse_desired(Some(first.clone()), &patched);
        assert!(
            Rc::ptr_eq(&after_status.1, &first.1),
            "the node's status patch does not change the desired pod"
        );
        assert_eq!(after_status.0.as_deref(), Some("11"));
        let mut edited = patched.clone();
        edited.metadata.resource_version = Some("12".into());
        edited.spec.as_mut().unwrap().containers[0].image = Some("j".into());
        let after_edit = reuse_desired(Some(after_status), &edited);
        assert!(!Rc::ptr_eq(&after_edit.1, &first.1));
        assert_eq!(*after_edit.1, desired(&edited));
    }

    fn pod_in_phase(uid: &str, phase: &str) -> Pod {
        serde_yaml_ng::from_str(&format!(
            "metadata: {{name: job, namespace: default, uid: {uid}}}\nspec: {{containers: [{{name: c, image: i}}]}}\nstatus: {{phase: {phase}}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn a_pod_terminal_in_the_api_when_first_seen_is_not_run_but_one_that_finishes_later_stays() {
        let mut seen = BTreeMap::new();
        assert!(first_seen_terminal(
            &mut seen,
            &pod_in_phase("done", "Succeeded")
        ));
        assert!(first_seen_terminal(
            &mut seen,
            &pod_in_phase("refused", "Failed")
        ));
        assert!(!first_seen_terminal(
            &mut seen,
            &pod_in_phase("job", "Running")
        ));
        assert!(
            !first_seen_terminal(&mut seen, &pod_in_phase("job", "Failed")),
            "it finished while this run had it: the agent keeps it"
        );
        assert!(first_seen_terminal(
            &mut seen,
            &pod_in_phase("done", "Succeeded")
        ));
    }

    /// A pod as the API server keeps it (defaulted), in `phase`.
    fn api_pod(uid: &str, phase: &str) -> Pod {
        serde_yaml_ng::from_str(&format!(
            "metadata: {{name: job, namespace: default, uid: {uid}, resourceVersion: '1'}}\n\
             spec: {{restartPolicy: Never, dnsPolicy: ClusterFirst, terminationGracePeriodSeconds: 30,\n\
               containers: [{{name: c, image: i, imagePullPolicy: IfNotPresent, terminationMessagePolicy: File}}]}}\n\
             status: {{phase: {phase}}}\n"
        ))
        .unwrap()
    }

    fn held(h: &Held) -> &'static str {
        match h {
            Held::Run(..) => "run",
            Held::Mirror(_) => "mirror",
            Held::Skipped => "skipped",
        }
    }

    #[test]
    fn each_api_pod_is_held_once_as_what_the_node_does_with_it() {
        let key = |name: &str| ObjectKey {
            namespace: Some("default".into()),
            name: name.into(),
        };
        let (mut invalid, mut seen) = (std::collections::BTreeSet::new(), BTreeMap::new());
        let running = api_pod("u1", "Running");
        let run = hold(&key("job"), None, running.clone(), &mut invalid, &mut seen);
        assert_eq!(held(&run), "run");
        let Held::Run(_, first) = &run else {
            unreachable!()
        };
        assert_eq!(**first, desired(&running));
        let first = first.clone();

        // The node's own status patch, back as a MODIFIED event: the same
        // desired pod, not a copy.
        let mut patched = running.clone();
        patched.metadata.resource_version = Some("2".into());
        patched.status.as_mut().unwrap().phase = Some("Failed".into());
        let again = hold(&key("job"), Some(run), patched, &mut invalid, &mut seen);
        let Held::Run(rv, same) = &again else {
            panic!("a pod that finished while this run had it stays with the agent");
        };
        assert_eq!(rv.as_deref(), Some("2"));
        assert!(Rc::ptr_eq(same, &first));

        let mut mirror = api_pod("u2", "Running");
        mirror.metadata.annotations = Some(BTreeMap::from([(
            "kubernetes.io/config.mirror".to_string(),
            "hash".to_string(),
        )]));
        let m = hold(&key("static"), None, mirror, &mut invalid, &mut seen);
        assert_eq!(held(&m), "mirror");

        let done = hold(
            &key("done"),
            None,
            api_pod("u3", "Succeeded"),
            &mut invalid,
            &mut seen,
        );
        assert_eq!(held(&done), "skipped");

        let mut no_image = api_pod("u4", "Pending");
        no_image.spec.as_mut().unwrap().containers[0].image = None;
        let refused = hold(&key("bad"), None, no_image, &mut invalid, &mut seen);
        assert_eq!(held(&refused), "skipped");
        assert!(invalid.contains("u4"), "the refusal is logged once");
    }
}
