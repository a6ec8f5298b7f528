//! The node's Events on their way to the API server.
//!
//! [`EventSync`] is the agent's [`EventSink`] (pod events: pulls,
//! containers, probes, evictions) and the heartbeat's recorder of the
//! Node's events. Recording is synchronous and cheap: it goes into the pure
//! [`Recorder`] (deduplication, rate limit, bounded offline buffer), and one
//! task ([`EventSync::run`]) POSTs new Events and PATCHes the count of
//! repeated ones through the shared [`Client`], with the node's credential
//! (the Node authorizer lets `system:node:<name>` create and patch events).
//! While the API server is unreachable the writes wait in the buffer, the
//! oldest dropped first past its size, and are flushed on reconnect.
//!
//! Events carry reasons and messages about pods and images, never a
//! Secret's value. This module must not know the agent's internals.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;
use smol::channel::{Receiver, Sender};

use super::events::{EventType, Involved, Outcome, Recorder, Write};
use crate::agent::EventSink;
use crate::apiserver::client::request::{
    collection_path, object_path, ApiError, METADATA_ONLY, REQUEST_DEADLINE,
};
use crate::apiserver::client::transport::{Body, Client, ERROR_BODY_LIMIT};
use crate::rt;

/// Writes waiting at most while offline (client-go's broadcaster queues
/// 1000; a board keeps fewer).
pub const BUFFER: usize = 256;
/// Events remembered for deduplication (client-go's correlator: 4096).
pub const REMEMBERED: usize = 512;
/// After a failed request, the pause before trying again.
const RETRY: Duration = Duration::from_secs(5);

const JSON: &str = "application/json";
const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";

/// The event recorder of one node and its sending task.
pub struct EventSync {
    client: Client,
    node_name: String,
    recorder: RefCell<Recorder>,
    wake_tx: Sender<()>,
    wake_rx: Receiver<()>,
    last_error: RefCell<Option<String>>,
}

impl EventSync {
    /// A recorder for `node_name` with kubelet's `eventRecordQPS` and
    /// `eventBurst`.
    pub fn new(client: Client, node_name: &str, qps: u32, burst: u32) -> Rc<EventSync> {
        let (wake_tx, wake_rx) = smol::channel::bounded(1);
        Rc::new(EventSync {
            client,
            node_name: node_name.into(),
            recorder: RefCell::new(Recorder::new(
                node_name,
                f64::from(qps),
                burst,
                BUFFER,
                REMEMBERED,
            )),
            wake_tx,
            wake_rx,
            last_error: RefCell::new(None),
        })
    }

    /// Events waiting to be sent.
    pub fn pending(&self) -> usize {
        self.recorder.borrow().len()
    }

    /// Records an event about `involved` now.
    pub fn record(&self, involved: Involved, type_: EventType, reason: &str, message: &str) {
        log::debug!(
            "event {} {reason} on {} {}: {message}",
            type_.as_str(),
            involved.kind,
            involved.name
        );
        self.recorder
            .borrow_mut()
            .record(involved, type_, reason, message, wall_clock());
        let _ = self.wake_tx.try_send(());
    }

    /// Records an event about the node itself.
    pub fn node_event(&self, type_: EventType, reason: &str, message: &str) {
        self.record(Involved::node(&self.node_name), type_, reason, message);
    }

    /// Sends what is recorded, forever.
    pub async fn run(self: Rc<Self>) {
        loop {
            let pause = self.flush().await;
            match pause {
                Some(d) => rt::sleep(d).await,
                None => {
                    let _ = self.wake_rx.recv().await;
                }
            }
        }
    }

    /// Sends until the buffer is empty (`None`), the rate limit says wait
    /// or a request failed (`Some(pause)`).
    async fn flush(&self) -> Option<Duration> {
        loop {
            let next = self.recorder.borrow_mut().next(wall_clock());
            let ticket = match next {
                Ok(Some(t)) => t,
                Ok(None) => return None,
                Err(wait) => return Some(wait.max(Duration::from_millis(10))),
            };
            let outcome = self.send(&ticket.write).await;
            self.recorder.borrow_mut().done(ticket, outcome);
            if outcome == Outcome::Retry {
                return Some(RETRY);
            }
        }
    }

    async fn send(&self, write: &Write) -> Outcome {
        let (method, path, content_type) = match write {
            Write::Create { namespace, .. } => (
                Method::POST,
                collection_path::<Event>(Some(namespace)),
                JSON,
            ),
            Write::Patch {
                namespace, name, ..
            } => (
                Method::PATCH,
                object_path::<Event>(Some(namespace), name),
                STRATEGIC_MERGE_PATCH,
            ),
        };
        let body = Body {
            content_type,
            bytes: write.body(),
        };
        // The answer is read for its status alone.
        let reply = self
            .client
            .request_accepting(
                method,
                &path,
                Some(body),
                METADATA_ONLY,
                ERROR_BODY_LIMIT,
                REQUEST_DEADLINE,
            )
            .await;
        let outcome = match reply {
            Ok(r) if r.status.is_success() => Outcome::Accepted,
            // Created already (a retry of a POST that did land).
            Ok(r) if r.status == StatusCode::CONFLICT => Outcome::Accepted,
            Ok(r) if r.status == StatusCode::NOT_FOUND && matches!(write, Write::Patch { .. }) => {
                Outcome::Gone
            }
            Ok(r) if r.status.is_server_error() || r.status == StatusCode::TOO_MANY_REQUESTS => {
                self.failed(ApiError::from_reply(r.status.as_u16(), &r.body));
                return Outcome::Retry;
            }
            Ok(r) => {
                // The namespace is being deleted, or the object is invalid:
                // kubelet's recorder drops it too.
                log::warn!(
                    "event {}: {}; dropped",
                    path,
                    ApiError::from_reply(r.status.as_u16(), &r.body)
                );
                Outcome::Refused
            }
            Err(e) => {
                self.failed(e);
                return Outcome::Retry;
            }
        };
        if self.last_error.borrow_mut().take().is_some() {
            log::info!("posting events works again");
        }
        outcome
    }

    /// Logs a failure when it is new, and not while the link is down (the
    /// transport reports that outage once).
    fn failed(&self, e: impl std::fmt::Display) {
        if self.client.link().is_down() {
            return;
        }
        let text = e.to_string();
        let mut last = self.last_error.borrow_mut();
        if last.as_deref() != Some(text.as_str()) {
            log::warn!("posting events: {text}; kept for later");
            *last = Some(text);
        }
    }
}

impl EventSink for EventSync {
    fn pod_event(
        &self,
        pod: &Pod,
        container: Option<&str>,
        warning: bool,
        reason: &str,
        message: &str,
    ) {
        let involved = Involved::pod(
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or_default(),
            crate::pod::uid(pod),
            container.map(|c| crate::pod::facts::container_field_path(pod, c)),
        );
        let type_ = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        self.record(involved, type_, reason, message);
    }
}

/// The wall clock as API time.
fn wall_clock() -> Timestamp {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp::new(d.as_secs() as i64, d.subsec_nanos() as i32).unwrap_or(Timestamp::UNIX_EPOCH)
}
