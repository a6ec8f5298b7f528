//! What the node tells the API server about its pods: status patches, the
//! mirror pods of its static pods, and the final DELETE of a pod whose
//! deletion was asked.
//!
//! [`StatusSync`] is the agent's [`StatusSink`]: the agent hands it each
//! pod's status after a sync, synchronously and cheaply; it keeps only the
//! latest per pod ([`StatusQueue`]) and one task ([`StatusSync::run`]) does
//! the requests. While the link is down nothing is lost and memory does not
//! grow: the queue holds one status per pod, and the task retries until the
//! API server answers, newest state first served as the oldest waiting.
//!
//! - API pods: `PATCH pods/<name>/status` with the pod's UID as a
//!   precondition; a `404`, or the `422` (or `409`) of a failed UID
//!   precondition, means the pod is gone or replaced, and its status is
//!   dropped.
//! - Static pods: their status goes to their mirror pod (created here,
//!   see [`mirror::plan`]), under the mirror's UID.
//! - A pod whose status another writer changed (the node lifecycle
//!   controller marks the pods of a node it lost not Ready): the pod
//!   source hands every watched pod to [`StatusSync::observed`]; when the
//!   API's copy is newer than the node's last patch and its phase or
//!   kubelet-owned conditions differ, the status is owed again, as
//!   kubelet's status manager reconciles (`needsReconcile`). An API pod's
//!   worker is asked to sync at once (the agent then hands its status
//!   over, [`StatusSync::set_on_disagreement`]); a static pod's last
//!   status is sent again from here.
//! - A pod terminated after `kubectl delete` (its `deletionTimestamp` set):
//!   `DELETE` with grace period 0 and a UID precondition, so the pod never
//!   hangs in Terminating.
//!
//! This module must not know the agent's internals: it sees pods only
//! through [`StatusSink`].

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use smol::channel::{Receiver, Sender};

use super::mirror::{self, MirrorAction};
use super::source::MirrorPods;
use super::status_manager::{
    final_delete_options, status_patch, OwnedFields, StatusQueue, STRATEGIC_MERGE_PATCH,
};
use crate::agent::StatusSink;
use crate::apiserver::client::protobuf;
use crate::apiserver::client::request::{object_path, METADATA_ONLY, REQUEST_DEADLINE};
use crate::apiserver::client::transport::{Body, Client, ERROR_BODY_LIMIT};
use crate::apiserver::listwatch::reflector::ObjectKey;
use crate::pod::labels::CONFIG_SOURCE_ANNOTATION;
use crate::rt;

/// How often the task looks again when nothing woke it (retries after a
/// failure, a mirror pod deleted by someone).
const RESYNC: Duration = Duration::from_secs(10);
/// After a failed request, the pause before the next round.
const RETRY: Duration = Duration::from_secs(2);

const JSON: &str = "application/json";

/// The status, mirror-pod and final-delete sync of one node.
pub struct StatusSync {
    client: Client,
    node_name: String,
    /// The Node's UID, once registered (mirror pods are owned by it).
    node_uid: Rc<RefCell<Option<String>>>,
    queue: RefCell<StatusQueue>,
    version: Cell<u64>,
    /// The static pods the agent runs, by UID, with the last status of
    /// each: owed again to a recreated mirror pod (the queue keeps only a
    /// digest of what it sent).
    statics: RefCell<BTreeMap<String, (Pod, PodStatus)>>,
    /// The mirror pods in the API, as the pod source last saw them.
    mirrors: MirrorPods,
    /// Final DELETEs owed: pod UID -> key.
    deletes: RefCell<BTreeMap<String, ObjectKey>>,
    /// The mirror UID each static pod's status was last sent to.
    sent_to: RefCell<BTreeMap<String, String>>,
    wake_tx: Sender<()>,
    wake_rx: Receiver<()>,
    /// The error of the last failed request, logged once per change.
    last_error: RefCell<Option<String>>,
    /// Asks the agent to sync the API pod with this UID (and so hand its
    /// status over again).
    on_disagreement: RefCell<Option<PodResync>>,
}

/// Asks the agent to sync one pod, by UID.
pub type PodResync = Rc<dyn Fn(&str)>;

fn source_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION))
        .map(String::as_str)
}

fn key_of(pod: &Pod) -> ObjectKey {
    ObjectKey {
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone().unwrap_or_default(),
    }
}

impl StatusSync {
    /// A sync for `node_name`; `node_uid` is filled in by the Node's
    /// registration; `mirrors` by the pod source; `capacity` bounds the
    /// queue (`maxPods` plus the static pods).
    pub fn new(
        client: Client,
        node_name: &str,
        node_uid: Rc<RefCell<Option<String>>>,
        mirrors: MirrorPods,
        capacity: usize,
    ) -> Rc<StatusSync> {
        let (wake_tx, wake_rx) = smol::channel::bounded(1);
        Rc::new(StatusSync {
            client,
            node_name: node_name.to_string(),
            node_uid,
            queue: RefCell::new(StatusQueue::new(capacity)),
            version: Cell::new(0),
            statics: RefCell::new(BTreeMap::new()),
            mirrors,
            deletes: RefCell::new(BTreeMap::new()),
            sent_to: RefCell::new(BTreeMap::new()),
            wake_tx,
            wake_rx,
            last_error: RefCell::new(None),
            on_disagreement: RefCell::new(None),
        })
    }

    /// What asks the agent to sync an API pod whose status the API server
    /// no longer has as the node sent it.
    pub fn set_on_disagreement(&self, f: PodResync) {
        *self.on_disagreement.borrow_mut() = Some(f);
    }

    /// The pod source's watch delivered `pod` (an API pod or a mirror pod):
    /// if the API server no longer has the status the node last sent for
    /// it, that status is owed again (module docs).
    pub fn observed(&self, pod: &Pod) {
        let Some(status) = &pod.status else {
            return;
        };
        let api = OwnedFields::of(status);
        let version = pod
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok());
        let api_uid = crate::pod::uid(pod);
        if mirror::is_mirror(pod) {
            // A mirror carries its static pod's status under its own UID.
            let sent = self.sent_to.borrow();
            let Some(static_uid) = sent.iter().find(|(_, m)| *m == api_uid).map(|(s, _)| s) else {
                return;
            };
            let mut queue = self.queue.borrow_mut();
            if queue.disagrees(static_uid, version, &api) {
                if let Some((_, last)) = self.statics.borrow().get(static_uid) {
                    log::info!(
                        "the API server's status of mirror pod {} differs from the node's; sending it again",
                        key_of(pod)
                    );
                    queue.resend(static_uid, last);
                    drop(queue);
                    self.wake();
                }
            }
        } else if self.queue.borrow_mut().disagrees(api_uid, version, &api) {
            log::info!(
                "the API server's status of pod {} differs from the node's; sending it again",
                key_of(pod)
            );
            let resync = self.on_disagreement.borrow().clone();
            if let Some(resync) = resync {
                resync(api_uid);
            }
        }
    }

    /// Statuses waiting to be sent (`picolet_status_queue_length`).
    pub fn queue_len(&self) -> usize {
        self.queue.borrow().len()
    }

    /// Something changed: the task runs a round soon.
    pub fn wake(&self) {
        let _ = self.wake_tx.try_send(());
    }

    /// Sends what is owed, forever: one round at every wake-up, and at
    /// least every [`RESYNC`].
    pub async fn run(self: Rc<Self>) {
        loop {
            let ok = self.round().await;
            let pause = if ok { RESYNC } else { RETRY };
            let _ = rt::timeout(pause, self.wake_rx.recv()).await;
            // A burst of syncs is one round.
            rt::sleep(Duration::from_millis(50)).await;
            while self.wake_rx.try_recv().is_ok() {}
        }
    }

    /// One round; false if a request failed for a reason worth retrying.
    async fn round(&self) -> bool {
        // The last status first, then the final DELETE it precedes.
        let mut ok = self.send_statuses().await;
        ok &= self.final_deletes().await;
        ok &= self.sync_mirrors().await;
        if ok && self.last_error.borrow_mut().take().is_some() {
            log::info!("pod status sync with the API server works again");
        }
        ok
    }

    /// Logs a failure when it is new, and not while the link is down (the
    /// transport reports that outage once).
    fn failed(&self, what: &str, e: impl std::fmt::Display) {
        if self.client.link().is_down() {
            return;
        }
        let text = format!("{what}: {e}");
        let mut last = self.last_error.borrow_mut();
        if last.as_deref() != Some(text.as_str()) {
            log::warn!("{text}; will retry");
            *last = Some(text);
        }
    }

    async fn sync_mirrors(&self) -> bool {
        let Some(node_uid) = self.node_uid.borrow().clone() else {
            return true; // not registered yet: nothing can own a mirror
        };
        let actions = {
            let statics = self.statics.borrow();
            let mirrors = self.mirrors.borrow();
            let statics: Vec<&Pod> = statics.values().map(|(p, _)| p).collect();
            let api: Vec<&Pod> = mirrors.values().collect();
            mirror::plan(&statics, &api, &self.node_name, &node_uid)
        };
        let mut ok = true;
        for action in actions {
            match action {
                MirrorAction::Create(pod) => {
                    let key = key_of(&pod);
                    let path = crate::apiserver::client::request::collection_path::<Pod>(
                        key.namespace.as_deref(),
                    );
                    let body = match serde_json::to_vec(&*pod) {
                        Ok(b) => b,
                        Err(e) => {
                            log::error!("encoding mirror pod {key}: {e}");
                            continue;
                        }
                    };
                    match self.send(Method::POST, &path, body, JSON, JSON).await {
                        Ok((code, reply)) if code.is_success() => {
                            log::info!("created mirror pod {key}");
                            let created = std::str::from_utf8(&reply)
                                .ok()
                                .and_then(|t| serde_json::from_str::<Pod>(t).ok());
                            if let Some(created) = created {
                                self.mirrors.borrow_mut().insert(key, created);
                            }
                        }
                        Ok((StatusCode::CONFLICT, _)) => {} // exists: the watch will say
                        Ok((code, reply)) => {
                            self.failed(
                                &format!("creating mirror pod {key}"),
                                api_error(code, &reply),
                            );
                            ok = false;
                        }
                        Err(e) => {
                            self.failed(&format!("creating mirror pod {key}"), e);
                            return false;
                        }
                    }
                }
                MirrorAction::Delete {
                    namespace,
                    name,
                    uid,
                } => {
                    let key = ObjectKey {
                        namespace: Some(namespace),
                        name,
                    };
                    match self.delete(&key, &uid).await {
                        Ok(()) => {
                            log::info!("deleted mirror pod {key}");
                            self.mirrors.borrow_mut().remove(&key);
                            self.wake(); // recreate it, if its static pod runs
                        }
                        Err(retry) => {
                            if retry {
                                return false;
                            }
                            ok = false;
                        }
                    }
                }
            }
        }
        ok
    }

    async fn final_deletes(&self) -> bool {
        let owed: Vec<(String, ObjectKey)> = self
            .deletes
            .borrow()
            .iter()
            .map(|(u, k)| (u.clone(), k.clone()))
            .collect();
        for (uid, key) in owed {
            match self.delete(&key, &uid).await {
                Ok(()) => {
                    log::info!("pod {key} deleted from the API server");
                    self.deletes.borrow_mut().remove(&uid);
                    self.queue.borrow_mut().forget(&uid);
                }
                Err(true) => return false,
                Err(false) => {
                    self.deletes.borrow_mut().remove(&uid);
                }
            }
        }
        true
    }

    /// DELETE with grace period 0 and a UID precondition. `Ok` also when
    /// the object is already gone or replaced; `Err(true)`: retry later;
    /// `Err(false)`: refused for good (logged).
    async fn delete(&self, key: &ObjectKey, uid: &str) -> Result<(), bool> {
        let path = object_path::<Pod>(key.namespace.as_deref(), &key.name);
        match self
            .send(
                Method::DELETE,
                &path,
                final_delete_options(uid),
                JSON,
                METADATA_ONLY,
            )
            .await
        {
            Ok((code, _)) if code.is_success() => Ok(()),
            Ok((StatusCode::NOT_FOUND | StatusCode::CONFLICT, _)) => Ok(()),
            Ok((code, reply))
                if code.is_server_error() || code == StatusCode::TOO_MANY_REQUESTS =>
            {
                self.failed(&format!("deleting pod {key}"), api_error(code, &reply));
                Err(true)
            }
            Ok((code, reply)) => {
                log::error!("deleting pod {key}: {}", api_error(code, &reply));
                Err(false)
            }
            Err(e) => {
                self.failed(&format!("deleting pod {key}"), e);
                Err(true)
            }
        }
    }

    async fn send_statuses(&self) -> bool {
        let pending = self.queue.borrow().pending();
        for p in pending {
            let is_static = self.statics.borrow().contains_key(&p.uid);
            let api_uid = if is_static {
                let mirror_uid = self
                    .mirrors
                    .borrow()
                    .get(&p.key)
                    .and_then(|m| m.metadata.uid.clone());
                match mirror_uid {
                    Some(u) => u,
                    None => continue, // no mirror yet: sent once it exists
                }
            } else {
                p.uid.clone()
            };
            let path = format!(
                "{}/status",
                object_path::<Pod>(p.key.namespace.as_deref(), &p.key.name)
            );
            let body = status_patch(&api_uid, &p.status);
            match self
                .send(
                    Method::PATCH,
                    &path,
                    body,
                    STRATEGIC_MERGE_PATCH,
                    METADATA_ONLY,
                )
                .await
            {
                Ok((code, answer)) if code.is_success() => {
                    let mut queue = self.queue.borrow_mut();
                    queue.sent(&p.uid, p.version);
                    // The answer is the pod's metadata (METADATA_ONLY).
                    if let Some(rv) = protobuf::metadata(&answer)
                        .ok()
                        .and_then(|m| m.resource_version?.parse().ok())
                    {
                        queue.answered(&p.uid, rv);
                    }
                    drop(queue);
                    if is_static {
                        self.sent_to.borrow_mut().insert(p.uid.clone(), api_uid);
                    }
                }
                // A pod replaced under the same name: the UID precondition
                // answers 422 (or 409).
                Ok((
                    StatusCode::NOT_FOUND | StatusCode::CONFLICT | StatusCode::UNPROCESSABLE_ENTITY,
                    _,
                )) if !is_static => {
                    log::debug!(
                        "pod {} is gone from the API server; dropping its status",
                        p.key
                    );
                    self.queue.borrow_mut().forget(&p.uid);
                }
                Ok((
                    StatusCode::NOT_FOUND | StatusCode::CONFLICT | StatusCode::UNPROCESSABLE_ENTITY,
                    _,
                )) => {} // the mirror was replaced: sent again to the new one
                Ok((code, reply)) => {
                    self.failed(&format!("status of pod {}", p.key), api_error(code, &reply));
                    return false;
                }
                Err(e) => {
                    self.failed(&format!("status of pod {}", p.key), e);
                    return false;
                }
            }
        }
        // A static pod whose mirror was recreated gets its status again.
        let mirrors = self.mirrors.borrow();
        let mut queue = self.queue.borrow_mut();
        for (uid, (pod, last)) in self.statics.borrow().iter() {
            let current = mirrors
                .get(&key_of(pod))
                .and_then(|m| m.metadata.uid.as_deref());
            let sent = self.sent_to.borrow().get(uid).cloned();
            if let (Some(current), Some(sent)) = (current, sent) {
                if current != sent {
                    queue.resend(uid, last);
                }
            }
        }
        true
    }

    /// One request; `accept` is JSON when the answer is read, and
    /// [`METADATA_ONLY`] when it is not (a pod status patch, a delete):
    /// the whole Pod would come back in JSON, 4-6 KB a write.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Vec<u8>,
        content_type: &'static str,
        accept: &'static str,
    ) -> Result<(StatusCode, Vec<u8>), crate::apiserver::client::transport::TransportError> {
        let body = Body {
            content_type,
            bytes: body,
        };
        let r = self
            .client
            .request_accepting(
                method,
                path,
                Some(body),
                accept,
                ERROR_BODY_LIMIT.max(1 << 20),
                REQUEST_DEADLINE,
            )
            .await?;
        Ok((r.status, r.body))
    }
}

fn api_error(code: StatusCode, body: &[u8]) -> crate::apiserver::client::request::ApiError {
    crate::apiserver::client::request::ApiError::from_reply(code.as_u16(), body)
}

impl StatusSink for StatusSync {
    fn status(&self, pod: &Pod, status: &PodStatus) {
        let uid = crate::pod::uid(pod).to_string();
        if source_of(pod) == Some("file") {
            let mut statics = self.statics.borrow_mut();
            match statics.get_mut(&uid) {
                Some((p, last)) if p == pod => *last = status.clone(),
                _ => {
                    statics.insert(uid.clone(), (pod.clone(), status.clone()));
                    self.wake();
                }
            }
        }
        let v = self.version.get() + 1;
        self.version.set(v);
        let mut queue = self.queue.borrow_mut();
        queue.set(&uid, key_of(pod), status.clone(), v);
        if !queue.is_empty() {
            self.wake();
        }
    }

    fn terminated(&self, pod: &Pod, status: &PodStatus) {
        let uid = crate::pod::uid(pod).to_string();
        match source_of(pod) {
            Some("file") => {
                // Its mirror goes with it.
                self.statics.borrow_mut().remove(&uid);
                self.sent_to.borrow_mut().remove(&uid);
                self.queue.borrow_mut().forget(&uid);
            }
            _ if pod.metadata.deletion_timestamp.is_some() => {
                self.status(pod, status);
                self.deletes.borrow_mut().insert(uid, key_of(pod));
            }
            // Gone from the API already (deleted with no grace, or the
            // node was unbound): nobody to tell.
            _ => self.queue.borrow_mut().forget(&uid),
        }
        self.wake();
    }
}
