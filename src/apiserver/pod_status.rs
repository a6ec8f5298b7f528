//! The pod status queue: what the API server must be told about each pod,
//! kept small and in order while the link is down.
//!
//! kubelet's status manager, pure. The agent sets a pod's latest status
//! whenever it computes one; the sender asks for the [`Pending`] patches,
//! sends them, and reports back with [`StatusQueue::sent`]. The rules:
//! - only the latest status per pod is kept (memory is bounded by the number
//!   of pods, however long the outage);
//! - a status is never sent older than one already sent: versions only go
//!   up, and a reply for an old version never marks a newer one as sent;
//! - a pod whose terminal phase (Succeeded, Failed) was sent never goes
//!   back to a running phase in the API;
//! - each patch carries the pod's UID, so a pod deleted and recreated under
//!   the same name is never given the old pod's status (the API server
//!   answers 409, and the entry waits for its new UID or its removal).
//!
//! Static pods report through their mirror pod: the caller sets the API UID
//! ([`StatusQueue::set_api_uid`]) once the mirror exists.
//!
//! This module must not know the transport or the agent.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodStatus;

const TERMINAL: [&str; 2] = ["Succeeded", "Failed"];

#[derive(Debug, Clone)]
struct Entry {
    namespace: String,
    name: String,
    /// The UID of the API object the status goes to (`None`: not known yet,
    /// for a static pod whose mirror does not exist).
    api_uid: Option<String>,
    latest: PodStatus,
    version: u64,
    sent_version: u64,
    sent_terminal: bool,
}

/// One status patch to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// The pod's own UID (the queue's key).
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub version: u64,
    /// The body of a strategic merge patch of the `status` subresource.
    pub patch: serde_json::Value,
}

/// The latest status of every pod, and what the API server has of it.
#[derive(Debug, Default)]
pub struct StatusQueue {
    entries: BTreeMap<String, Entry>,
}

fn is_terminal(s: &PodStatus) -> bool {
    s.phase.as_deref().is_some_and(|p| TERMINAL.contains(&p))
}

impl StatusQueue {
    pub fn new() -> StatusQueue {
        StatusQueue::default()
    }

    /// Records `status` as the pod's latest. Returns whether it differs from
    /// the previous one (and so will be sent). `api_uid` is the UID to
    /// patch, when known.
    pub fn set(
        &mut self,
        uid: &str,
        namespace: &str,
        name: &str,
        api_uid: Option<&str>,
        status: PodStatus,
    ) -> bool {
        let e = self
            .entries
            .entry(uid.to_string())
            .or_insert_with(|| Entry {
                namespace: namespace.to_string(),
                name: name.to_string(),
                api_uid: None,
                latest: PodStatus::default(),
                version: 0,
                sent_version: 0,
                sent_terminal: false,
            });
        if let Some(api_uid) = api_uid {
            e.api_uid = Some(api_uid.to_string());
        }
        if e.sent_terminal && !is_terminal(&status) {
            return false;
        }
        if e.version > 0 && e.latest == status {
            return false;
        }
        e.latest = status;
        e.version += 1;
        true
    }

    /// The API object's UID changed or became known (a mirror pod was
    /// created): the latest status is sent again to it.
    pub fn set_api_uid(&mut self, uid: &str, api_uid: &str) {
        if let Some(e) = self.entries.get_mut(uid) {
            if e.api_uid.as_deref() != Some(api_uid) {
                e.api_uid = Some(api_uid.to_string());
                e.sent_version = 0;
            }
        }
    }

    /// Every pod whose latest status the API server does not have yet.
    pub fn pending(&self) -> Vec<Pending> {
        self.entries
            .iter()
            .filter(|(_, e)| e.version > e.sent_version)
            .filter_map(|(uid, e)| {
                let api_uid = e.api_uid.as_ref()?;
                Some(Pending {
                    uid: uid.clone(),
                    namespace: e.namespace.clone(),
                    name: e.name.clone(),
                    version: e.version,
                    patch: serde_json::json!({
                        "metadata": { "uid": api_uid },
                        "status": e.latest,
                    }),
                })
            })
            .collect()
    }

    /// The API server accepted `version` of the pod's status.
    pub fn sent(&mut self, uid: &str, version: u64) {
        if let Some(e) = self.entries.get_mut(uid) {
            if version > e.sent_version && version <= e.version {
                e.sent_version = version;
                if version == e.version && is_terminal(&e.latest) {
                    e.sent_terminal = true;
                }
            }
        }
    }

    /// The pod is gone from the node and from the API: forget it.
    pub fn forget(&mut self, uid: &str) {
        self.entries.remove(uid);
    }

    /// How many pods have a status waiting to be sent
    /// (`picolet_status_queue_length`).
    pub fn len_pending(&self) -> usize {
        self.entries
            .values()
            .filter(|e| e.version > e.sent_version)
            .count()
    }

    /// The pods the queue knows.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(phase: &str, ip: &str) -> PodStatus {
        PodStatus {
            phase: Some(phase.into()),
            pod_ip: Some(ip.into()),
            ..PodStatus::default()
        }
    }

    #[test]
    fn only_the_latest_status_of_each_pod_is_kept_while_offline() {
        let mut q = StatusQueue::new();
        for i in 0..100 {
            q.set(
                "u1",
                "ns",
                "web",
                Some("u1"),
                status("Running", &format!("10.0.0.{i}")),
            );
        }
        let p = q.pending();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].version, 100);
        assert_eq!(p[0].patch["status"]["podIP"], "10.0.0.99");
        assert_eq!(p[0].patch["metadata"]["uid"], "u1");
    }

    #[test]
    fn an_unchanged_status_is_not_sent_again() {
        let mut q = StatusQueue::new();
        assert!(q.set("u1", "ns", "web", Some("u1"), status("Running", "10.0.0.1")));
        q.sent("u1", 1);
        assert!(!q.set("u1", "ns", "web", None, status("Running", "10.0.0.1")));
        assert!(q.pending().is_empty());
    }

    #[test]
    fn a_reply_for_an_old_version_never_marks_a_newer_one_sent() {
        let mut q = StatusQueue::new();
        q.set("u1", "ns", "web", Some("u1"), status("Pending", ""));
        let in_flight = q.pending()[0].version;
        q.set("u1", "ns", "web", None, status("Running", "10.0.0.1"));
        q.sent("u1", in_flight);
        let p = q.pending();
        assert_eq!(p.len(), 1, "the newer status is still owed");
        assert_eq!(p[0].patch["status"]["phase"], "Running");
        q.sent("u1", p[0].version);
        q.sent("u1", in_flight);
        assert!(q.pending().is_empty(), "a late reply does not reopen it");
    }

    #[test]
    fn a_terminal_phase_once_sent_is_never_followed_by_a_running_one() {
        let mut q = StatusQueue::new();
        q.set("u1", "ns", "job", Some("u1"), status("Succeeded", ""));
        q.sent("u1", 1);
        assert!(!q.set("u1", "ns", "job", None, status("Running", "")));
        assert!(q.pending().is_empty());
    }

    #[test]
    fn a_static_pod_waits_for_its_mirror_and_then_reports_to_it() {
        let mut q = StatusQueue::new();
        q.set(
            "static-uid",
            "kube-system",
            "web-pi-1",
            None,
            status("Running", "10.0.0.1"),
        );
        assert!(q.pending().is_empty());
        assert_eq!(q.len_pending(), 1);
        q.set_api_uid("static-uid", "mirror-uid");
        let p = q.pending();
        assert_eq!(p[0].patch["metadata"]["uid"], "mirror-uid");
        q.sent("static-uid", p[0].version);
        q.set_api_uid("static-uid", "mirror-uid-2");
        assert_eq!(
            q.pending().len(),
            1,
            "a recreated mirror gets the status again"
        );
    }

    #[test]
    fn a_forgotten_pod_is_gone() {
        let mut q = StatusQueue::new();
        q.set("u1", "ns", "web", Some("u1"), status("Running", ""));
        q.forget("u1");
        assert!(q.is_empty());
        assert_eq!(q.len_pending(), 0);
    }
}
