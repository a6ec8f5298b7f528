//! Pure: which pod statuses still have to reach the API server, and the
//! request bodies that carry them.
//!
//! Like kubelet's status manager, every status the agent computes gets a
//! local version (increasing); the queue keeps only the latest per pod, so
//! an offline node holds one status per pod however long the link is down,
//! and flushes them when it comes back. A status older than (or equal to)
//! one already sent is never sent, and a status equal to the one the API
//! server has is not sent again. The queue is bounded: past its capacity
//! the oldest pending entry is dropped (its pod will be reported again at
//! its next change).
//!
//! What was sent is kept as a digest ([`StatusDigest`]), not as the
//! status: "equal to what the API server has" needs no more, and 110 API
//! pods' last-sent statuses were ~0.2 MiB of a board's heap (issue #8).
//! A status owed again without a change ([`StatusQueue::resend`], a
//! mirror pod recreated) is handed in by the caller, who still has it.
//!
//! Someone else may write a status the node owns: the node lifecycle
//! controller marks every pod of a node it lost not Ready. Like kubelet's
//! status manager (`needsReconcile`), the queue then owes the node's
//! status again: the watched pod, newer than the node's last accepted
//! patch, whose phase or kubelet-owned conditions ([`OwnedFields`]) differ
//! from that patch's, makes [`StatusQueue::disagrees`] forget what was
//! sent, so the next status the agent hands over is sent even though it
//! did not change.
//!
//! The PATCH body is a strategic merge patch of `status` with the pod's UID
//! as a precondition (`metadata.uid`), as kubelet sends it, so a status
//! never lands on a new pod that reuses the name: kube-apiserver v1.36
//! answers such a patch `422 Invalid` ("metadata.uid: field is
//! immutable"); the caller then [`StatusQueue::forget`]s that UID. The final DELETE of a
//! terminated pod is `gracePeriodSeconds: 0` with a UID precondition.

use std::collections::BTreeMap;

use crate::apiserver::listwatch::reflector::ObjectKey;
use k8s_openapi::api::core::v1::PodStatus;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The content type of [`status_patch`].
pub const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";

/// The body of `PATCH .../pods/<name>/status`: the whole status as a
/// strategic merge patch (conditions merge by type, in this order), with
/// the UID precondition.
///
/// A merge patch only adds and replaces keys; what the new status no longer
/// has must be deleted with `null`, as kubelet's two-way patch between the
/// old and the new status does. With no old status kept (see the module
/// docs), the keys that can disappear are named:
/// - a condition without a reason or message: merged by type, a True
///   `Ready` would otherwise keep the `ContainersNotReady` reason and
///   message the API server holds from when it was False;
/// - the pod-level `resources`: its CPU and memory limits and requests
///   come from the spec while the pod starts and from the pod cgroup once
///   it runs, and a limit the cgroup does not have must not stay behind;
///   no `resources` at all deletes the field.
///
/// Written by hand around `serde_json::to_vec` (the serializer the rest of
/// picolet uses) rather than through `serde_json::Value`, which would add a
/// second copy of the PodStatus serializer to the binary.
pub fn status_patch(uid: &str, status: &PodStatus) -> Vec<u8> {
    let json = |v: &str| serde_json::to_vec(v).expect("a string always serializes");
    let mut out = b"{\"metadata\":{\"uid\":".to_vec();
    out.extend(json(uid));
    out.extend_from_slice(b"},\"status\":{");
    let rest = PodStatus {
        conditions: None,
        resources: None,
        ..status.clone()
    };
    let body = serde_json::to_vec(&rest).expect("a PodStatus always serializes");
    let mut first = true;
    let mut field = |out: &mut Vec<u8>| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
    };
    if let Some(conds) = status.conditions.as_deref().filter(|c| !c.is_empty()) {
        field(&mut out);
        out.extend_from_slice(b"\"$setElementOrder/conditions\":[");
        for (i, c) in conds.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"type\":");
            out.extend(json(&c.type_));
            out.push(b'}');
        }
        out.extend_from_slice(b"],\"conditions\":[");
        for (i, c) in conds.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            // `type` and `status` are always there: never `{}`.
            let c_body = serde_json::to_vec(c).expect("a PodCondition always serializes");
            out.push(b'{');
            if c.reason.is_none() {
                out.extend_from_slice(b"\"reason\":null,");
            }
            if c.message.is_none() {
                out.extend_from_slice(b"\"message\":null,");
            }
            out.extend_from_slice(&c_body[1..]);
        }
        out.push(b']');
    }
    field(&mut out);
    out.extend_from_slice(b"\"resources\":");
    match &status.resources {
        None => out.extend_from_slice(b"null"),
        Some(r) => {
            out.extend_from_slice(b"{\"limits\":");
            resource_list_patch(&mut out, r.limits.as_ref());
            out.extend_from_slice(b",\"requests\":");
            resource_list_patch(&mut out, r.requests.as_ref());
            out.push(b'}');
        }
    }
    if body.as_slice() != b"{}" {
        out.push(b',');
        out.extend_from_slice(&body[1..]);
    } else {
        out.push(b'}');
    }
    out.push(b'}');
    out
}

/// The pod-level resource names whose values can come and go between two
/// statuses of one pod (spec totals, then the pod cgroup's).
const POD_RESOURCE_NAMES: [&str; 2] = ["cpu", "memory"];

/// A resource list as a merge patch: its entries, and `null` for each of
/// [`POD_RESOURCE_NAMES`] it lacks.
fn resource_list_patch(out: &mut Vec<u8>, list: Option<&BTreeMap<String, Quantity>>) {
    let json = |v: &str| serde_json::to_vec(v).expect("a string always serializes");
    out.push(b'{');
    let mut first = true;
    let mut key = |out: &mut Vec<u8>, k: &str| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        out.extend(json(k));
        out.push(b':');
    };
    for name in POD_RESOURCE_NAMES {
        if list.is_none_or(|l| !l.contains_key(name)) {
            key(out, name);
            out.extend_from_slice(b"null");
        }
    }
    for (name, q) in list.into_iter().flatten() {
        key(out, name);
        out.extend(json(&q.0));
    }
    out.push(b'}');
}

/// The body of the final `DELETE .../pods/<name>` once the pod's
/// containers are gone: no further grace, only this incarnation.
pub fn final_delete_options(uid: &str) -> Vec<u8> {
    let uid = serde_json::to_string(uid).expect("a string always serializes");
    format!(
        "{{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"gracePeriodSeconds\":0,\
         \"preconditions\":{{\"uid\":{uid}}}}}"
    )
    .into_bytes()
}

/// One status to send.
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    pub uid: String,
    pub key: ObjectKey,
    pub status: PodStatus,
    pub version: u64,
}

pub use super::status_digest::StatusDigest;

/// The pod conditions a kubelet writes (kubelet's `PodConditionsByKubelet`
/// and `PodReadyToStartContainers`); others belong to controllers.
pub const KUBELET_CONDITIONS: [&str; 5] = [
    "PodScheduled",
    "Initialized",
    "PodReadyToStartContainers",
    "ContainersReady",
    "Ready",
];

/// What of a pod status the node writes and another writer may change:
/// the phase and the kubelet-owned conditions' statuses (times, reasons and
/// messages aside).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnedFields {
    phase: Option<String>,
    conditions: Vec<(String, String)>,
}

impl OwnedFields {
    pub fn of(status: &PodStatus) -> Self {
        OwnedFields {
            phase: status.phase.clone(),
            conditions: status
                .conditions
                .iter()
                .flatten()
                .filter(|c| KUBELET_CONDITIONS.contains(&c.type_.as_str()))
                .map(|c| (c.type_.clone(), c.status.clone()))
                .collect(),
        }
    }

    /// Whether `api`, the API server's status, still says what these
    /// (the node's last patch) said: the same phase, and each of these
    /// conditions with the same status. Conditions the node did not send
    /// are not compared.
    pub fn held_by(&self, api: &OwnedFields) -> bool {
        (self.phase.is_none() || self.phase == api.phase)
            && self
                .conditions
                .iter()
                .all(|c| api.conditions.iter().any(|a| a == c))
    }
}

#[derive(Clone, Debug, Default)]
struct PodEntry {
    key: Option<ObjectKey>,
    pending: Option<(PodStatus, u64)>,
    /// The last version the API server accepted, and the digest of that
    /// status (`None` once it is owed again: [`StatusQueue::resend`]).
    sent: Option<(Option<StatusDigest>, u64)>,
    /// What that status said of the fields another writer may change, and
    /// the resourceVersion the API server gave the pod for it (when read
    /// from its answer).
    sent_fields: Option<(OwnedFields, Option<u64>)>,
}

/// The latest status per pod, not yet sent.
#[derive(Clone, Debug)]
pub struct StatusQueue {
    pods: BTreeMap<String, PodEntry>,
    capacity: usize,
}

impl StatusQueue {
    /// A queue for at most `capacity` pods (e.g. `maxPods` plus the static
    /// pods' mirrors).
    pub fn new(capacity: usize) -> Self {
        StatusQueue {
            pods: BTreeMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// Records `status` (computed at local `version`) for pod `uid`; it
    /// replaces any pending one. Ignored when not newer than what is
    /// pending or sent, or equal to what the API server has.
    pub fn set(&mut self, uid: &str, key: ObjectKey, status: PodStatus, version: u64) {
        if !self.pods.contains_key(uid) && self.pods.len() >= self.capacity {
            self.evict_oldest();
        }
        let e = self.pods.entry(uid.to_string()).or_default();
        let newest = e
            .pending
            .as_ref()
            .map(|p| p.1)
            .max(e.sent.as_ref().map(|s| s.1));
        if newest.is_some_and(|v| version <= v) {
            return;
        }
        e.key = Some(key);
        if e.sent
            .is_some_and(|(d, _)| d == Some(StatusDigest::of(&status)))
        {
            e.pending = None;
            return;
        }
        e.pending = Some((status, version));
    }

    fn evict_oldest(&mut self) {
        let oldest = self
            .pods
            .iter()
            .min_by_key(|(_, e)| e.pending.as_ref().map(|p| p.1).unwrap_or(0))
            .map(|(uid, _)| uid.clone());
        if let Some(uid) = oldest {
            log::warn!("pod status queue full: dropping the status of pod {uid}");
            self.pods.remove(&uid);
        }
    }

    /// The next status to send (the pod with the oldest pending version).
    pub fn next(&self) -> Option<Pending> {
        self.pods
            .iter()
            .filter_map(|(uid, e)| {
                let (status, version) = e.pending.as_ref()?;
                Some(Pending {
                    uid: uid.clone(),
                    key: e.key.clone()?,
                    status: status.clone(),
                    version: *version,
                })
            })
            .min_by_key(|p| p.version)
    }

    /// Every status waiting, oldest version first.
    pub fn pending(&self) -> Vec<Pending> {
        let mut all: Vec<Pending> = self
            .pods
            .iter()
            .filter_map(|(uid, e)| {
                let (status, version) = e.pending.as_ref()?;
                Some(Pending {
                    uid: uid.clone(),
                    key: e.key.clone()?,
                    status: status.clone(),
                    version: *version,
                })
            })
            .collect();
        all.sort_by_key(|p| p.version);
        all
    }

    /// The API object of pod `uid` changed (a mirror pod was recreated):
    /// its latest status is owed again. `last` is that status, the last
    /// one [`StatusQueue::set`] was given (the caller keeps it; the queue
    /// keeps only a digest of what was sent). Nothing changes when a newer
    /// status is pending anyway or the pod is not known.
    pub fn resend(&mut self, uid: &str, last: &PodStatus) {
        if let Some(e) = self.pods.get_mut(uid) {
            if e.pending.is_none() {
                if let Some((digest, version)) = e.sent.as_mut() {
                    *digest = None;
                    e.pending = Some((last.clone(), *version));
                }
            }
        }
    }

    /// How many statuses wait.
    pub fn len(&self) -> usize {
        self.pods.values().filter(|e| e.pending.is_some()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The API server accepted `version` of pod `uid`: it leaves the queue
    /// unless a newer one arrived meanwhile.
    pub fn sent(&mut self, uid: &str, version: u64) {
        let Some(e) = self.pods.get_mut(uid) else {
            return;
        };
        if let Some((status, v)) = &e.pending {
            if *v == version {
                e.sent = Some((Some(StatusDigest::of(status)), *v));
                e.sent_fields = Some((OwnedFields::of(status), None));
                e.pending = None;
            }
        }
    }

    /// The API server's answer to the last accepted status of pod `uid`
    /// gave the pod `resource_version`: a watched copy not newer than it
    /// predates that patch.
    pub fn answered(&mut self, uid: &str, resource_version: u64) {
        if let Some((_, rv)) = self.pods.get_mut(uid).and_then(|e| e.sent_fields.as_mut()) {
            *rv = Some(resource_version);
        }
    }

    /// The watch shows pod `uid` in the API server at `resource_version`
    /// with `api`'s phase and conditions. When that copy is newer than the
    /// node's last accepted patch (or that patch's version is unknown) and
    /// no longer says what the patch said, the status is owed again: the
    /// next [`StatusQueue::set`] is sent whatever its digest. True then,
    /// so the caller has the status handed over again (or
    /// [`StatusQueue::resend`]s it). Nothing happens while a status is
    /// pending: it is about to be sent anyway.
    pub fn disagrees(
        &mut self,
        uid: &str,
        resource_version: Option<u64>,
        api: &OwnedFields,
    ) -> bool {
        let Some(e) = self.pods.get_mut(uid) else {
            return false;
        };
        let Some((fields, sent_rv)) = &e.sent_fields else {
            return false;
        };
        let older =
            matches!((resource_version, sent_rv), (Some(seen), Some(sent)) if seen <= *sent);
        if e.pending.is_some() || older || fields.held_by(api) {
            return false;
        }
        if let Some((digest, _)) = e.sent.as_mut() {
            *digest = None;
        }
        e.sent_fields = None;
        true
    }

    /// The pod is gone (deleted: 404, or another pod has its name: the
    /// UID precondition's 422): forget it.
    pub fn forget(&mut self, uid: &str) {
        self.pods.remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use serde_json::json;

    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            namespace: Some("default".into()),
            name: name.into(),
        }
    }

    fn status(phase: &str) -> PodStatus {
        PodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        }
    }

    fn phase(p: &Pending) -> String {
        p.status.phase.clone().unwrap()
    }

    #[test]
    fn only_the_latest_status_per_pod_is_kept() {
        let mut q = StatusQueue::new(10);
        q.set("u1", key("a"), status("Pending"), 1);
        q.set("u1", key("a"), status("Running"), 2);
        q.set("u2", key("b"), status("Pending"), 3);
        assert_eq!(q.len(), 2);
        let p = q.next().unwrap();
        assert_eq!(
            (p.uid.as_str(), phase(&p).as_str(), p.version),
            ("u1", "Running", 2)
        );
    }

    #[test]
    fn a_status_older_than_one_sent_is_never_sent() {
        let mut q = StatusQueue::new(10);
        q.set("u1", key("a"), status("Running"), 5);
        q.sent("u1", 5);
        assert!(q.next().is_none());
        q.set("u1", key("a"), status("Pending"), 4);
        assert!(q.next().is_none(), "version 4 is older than the sent 5");
        q.set("u1", key("a"), status("Running"), 6);
        assert!(q.next().is_none(), "equal to what the API server has");
        q.set("u1", key("a"), status("Succeeded"), 7);
        assert_eq!(phase(&q.next().unwrap()), "Succeeded");
    }

    fn ready(ready: &str) -> PodStatus {
        let cond = |t: &str, s: &str| PodCondition {
            type_: t.into(),
            status: s.into(),
            ..Default::default()
        };
        PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![
                cond("Initialized", "True"),
                cond("Ready", ready),
                cond("ContainersReady", ready),
                cond("example.com/gate", "False"),
            ]),
            ..Default::default()
        }
    }

    #[test]
    fn a_pod_another_writer_marked_not_ready_gets_the_nodes_unchanged_status_again() {
        let mut q = StatusQueue::new(10);
        q.set("u1", key("a"), ready("True"), 1);
        q.sent("u1", 1);
        q.answered("u1", 100);
        // The node lifecycle controller's write: Ready False, newer.
        let mut marked = ready("True");
        marked.conditions.as_mut().unwrap()[1].status = "False".into();
        assert!(q.disagrees("u1", Some(120), &OwnedFields::of(&marked)));
        // Owed once, not again for the next event.
        assert!(!q.disagrees("u1", Some(121), &OwnedFields::of(&marked)));
        // The agent's next, unchanged status is sent.
        q.set("u1", key("a"), ready("True"), 2);
        assert_eq!(q.next().unwrap().version, 2);
    }

    #[test]
    fn a_watched_copy_older_than_the_nodes_patch_or_agreeing_with_it_owes_nothing() {
        let mut q = StatusQueue::new(10);
        q.set("u1", key("a"), ready("True"), 1);
        q.sent("u1", 1);
        q.answered("u1", 100);
        // The watch still delivering the pod from before the node's patch.
        assert!(!q.disagrees("u1", Some(90), &OwnedFields::of(&ready("False"))));
        assert!(!q.disagrees("u1", Some(100), &OwnedFields::of(&ready("False"))));
        // Newer, and the same as the node's (times and a controller's gate
        // aside): nothing owed.
        let mut other = ready("True");
        other.conditions.as_mut().unwrap()[3].status = "True".into();
        assert!(!q.disagrees("u1", Some(130), &OwnedFields::of(&other)));
        q.set("u1", key("a"), ready("True"), 2);
        assert!(q.next().is_none(), "equal to what the API server has");
        // Unknown pods, and pods with a status pending, owe nothing more.
        assert!(!q.disagrees("u9", Some(1), &OwnedFields::of(&ready("False"))));
        q.set("u1", key("a"), ready("False"), 3);
        assert!(!q.disagrees("u1", Some(140), &OwnedFields::of(&ready("True"))));
    }

    #[test]
    fn a_static_pods_status_owed_again_is_resent_from_the_callers_copy() {
        let mut q = StatusQueue::new(10);
        q.set("s1", key("m"), ready("True"), 1);
        q.sent("s1", 1);
        assert!(q.disagrees("s1", None, &OwnedFields::of(&ready("False"))));
        q.resend("s1", &ready("True"));
        assert_eq!(q.next().unwrap().uid, "s1");
    }

    #[test]
    fn a_newer_status_set_while_sending_stays_queued() {
        let mut q = StatusQueue::new(10);
        q.set("u1", key("a"), status("Pending"), 1);
        let p = q.next().unwrap();
        q.set("u1", key("a"), status("Running"), 2);
        q.sent("u1", p.version);
        let next = q.next().unwrap();
        assert_eq!((phase(&next).as_str(), next.version), ("Running", 2));
    }

    #[test]
    fn a_status_owed_again_is_sent_once_more_and_then_not_again() {
        let mut q = StatusQueue::new(10);
        q.resend("unknown", &status("Running"));
        assert!(q.is_empty(), "nothing was ever set for it");
        q.set("u1", key("a"), status("Running"), 1);
        q.sent("u1", 1);
        assert!(q.is_empty());
        q.resend("u1", &status("Running"));
        let p = q.next().unwrap();
        assert_eq!((phase(&p).as_str(), p.version), ("Running", 1));
        q.sent("u1", p.version);
        assert!(q.is_empty());
        q.set("u1", key("a"), status("Running"), 2);
        assert!(q.is_empty(), "equal to what was sent again");
        q.set("u1", key("a"), status("Succeeded"), 3);
        q.resend("u1", &status("Running"));
        assert_eq!(
            phase(&q.next().unwrap()),
            "Succeeded",
            "a newer pending status is not replaced by the older one"
        );
    }

    #[test]
    fn the_status_digest_tells_statuses_apart_and_equal_ones_alike() {
        assert_eq!(
            StatusDigest::of(&status("Running")),
            StatusDigest::of(&status("Running"))
        );
        assert_ne!(
            StatusDigest::of(&status("Running")),
            StatusDigest::of(&status("Pending"))
        );
        let mut ip = status("Running");
        ip.pod_ip = Some("10.0.0.1".into());
        assert_ne!(StatusDigest::of(&ip), StatusDigest::of(&status("Running")));
    }

    #[test]
    fn a_failed_send_keeps_the_status_for_the_next_flush() {
        let mut q = StatusQueue::new(10);
        q.set("u1", key("a"), status("Running"), 1);
        let _ = q.next().unwrap();
        // No sent(): the request failed.
        assert_eq!(q.next().unwrap().version, 1);
    }

    #[test]
    fn the_queue_is_bounded() {
        let mut q = StatusQueue::new(2);
        q.set("u1", key("a"), status("Running"), 1);
        q.set("u2", key("b"), status("Running"), 2);
        q.set("u3", key("c"), status("Running"), 3);
        assert_eq!(q.len(), 2);
        let uids: Vec<_> = std::iter::from_fn(|| {
            let p = q.next()?;
            q.sent(&p.uid, p.version);
            Some(p.uid)
        })
        .collect();
        assert_eq!(uids, ["u2", "u3"]);
        q.forget("u2");
        q.forget("u3");
        assert!(q.is_empty());
    }

    #[test]
    fn a_condition_without_reason_or_message_clears_those_the_api_server_holds() {
        let mut s = status("Running");
        s.conditions = Some(vec![
            PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            },
            PodCondition {
                type_: "ContainersReady".into(),
                status: "False".into(),
                reason: Some("ContainersNotReady".into()),
                message: Some("containers with unready status: [a]".into()),
                ..Default::default()
            },
        ]);
        let v: serde_json::Value = serde_json::from_slice(&status_patch("u1", &s)).unwrap();
        let conds = &v["status"]["conditions"];
        assert_eq!(
            conds[0],
            json!({"type": "Ready", "status": "True", "reason": null, "message": null})
        );
        assert_eq!(conds[1]["reason"], "ContainersNotReady");
        assert_eq!(conds[1]["message"], "containers with unready status: [a]");
        assert_eq!(v["status"]["phase"], "Running");
    }

    #[test]
    fn a_pod_resource_the_new_status_lacks_is_deleted_by_the_patch() {
        let q = |v: &str| Quantity(v.into());
        let mut s = status("Running");
        s.resources = Some(ResourceRequirements {
            limits: Some([("memory".to_string(), q("128Mi"))].into()),
            requests: Some(
                [
                    ("cpu".to_string(), q("79m")),
                    ("ephemeral-storage".to_string(), q("1Gi")),
                ]
                .into(),
            ),
            ..Default::default()
        });
        let v: serde_json::Value = serde_json::from_slice(&status_patch("u1", &s)).unwrap();
        assert_eq!(
            v["status"]["resources"],
            json!({
                "limits": {"cpu": null, "memory": "128Mi"},
                "requests": {"cpu": "79m", "memory": null, "ephemeral-storage": "1Gi"},
            })
        );
        assert_eq!(v["status"]["phase"], "Running");
    }

    #[test]
    fn the_patch_carries_the_uid_precondition_and_the_condition_order() {
        let mut s = status("Running");
        s.conditions = Some(vec![
            PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            },
            PodCondition {
                type_: "PodScheduled".into(),
                status: "True".into(),
                ..Default::default()
            },
        ]);
        let v: serde_json::Value = serde_json::from_slice(&status_patch("u1", &s)).unwrap();
        assert_eq!(v["metadata"]["uid"], "u1");
        assert_eq!(v["status"]["phase"], "Running");
        assert_eq!(
            v["status"]["$setElementOrder/conditions"],
            json!([{"type": "Ready"}, {"type": "PodScheduled"}])
        );
        let v: serde_json::Value =
            serde_json::from_slice(&status_patch("u\"2", &status("Pending"))).unwrap();
        assert_eq!(
            v,
            json!({"metadata": {"uid": "u\"2"}, "status": {"resources": null, "phase": "Pending"}})
        );
        let s = PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "False".into(),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let v: serde_json::Value = serde_json::from_slice(&status_patch("u", &s)).unwrap();
        assert_eq!(
            v["status"]["$setElementOrder/conditions"],
            json!([{"type": "Ready"}])
        );
        assert_eq!(v["status"]["conditions"][0]["status"], "False");
        // The order, the conditions, and no `resources` (deleted).
        assert_eq!(v["status"].as_object().unwrap().len(), 3, "{v}");
        assert_eq!(v["status"]["resources"], serde_json::Value::Null);
        let d: serde_json::Value = serde_json::from_slice(&final_delete_options("u1")).unwrap();
        assert_eq!(d["gracePeriodSeconds"], 0);
        assert_eq!(d["preconditions"]["uid"], "u1");
    }
}
