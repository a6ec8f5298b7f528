//! The Lease half of the heartbeat: `kube-node-lease/<node>` renewed every
//! quarter of `nodeLeaseDurationSeconds` plus up to 4 % (kubelet's
//! jitter), retried sooner after a failure, and at once (within a random
//! second) when the link comes back. A renewal is a merge patch of
//! `spec.renewTime` alone while the Lease is held as we hold it, its answer
//! in protobuf ([`lease_proto`]); otherwise the Lease is read, created or
//! replaced whole, as kubelet's lease controller does.
//!
//! Must not know: the Node object or the pods; it shares the heartbeat's
//! client and the node's UID.

use std::rc::Rc;
use std::time::Duration;

use http::{Method, StatusCode};
use k8s_openapi::api::coordination::v1::Lease;

use super::{decode_json, wall_clock, Heartbeat, BODY_LIMIT, JSON, MERGE_PATCH};
use crate::agent::RuntimeHealth;
use crate::apiserver::client::protobuf;
use crate::apiserver::client::request::{collection_path, object_path, ApiError, REQUEST_DEADLINE};
use crate::apiserver::client::transport::Body;
use crate::apiserver::presence::{lease, lease_proto};
use crate::rt;

impl<H: RuntimeHealth> Heartbeat<H> {
    pub(super) async fn lease_loop(self: Rc<Self>) {
        let name = &self.cfg.node_name;
        let duration = self.cfg.lease_duration_seconds;
        let path = object_path::<Lease>(Some(lease::NAMESPACE), name);
        let mut current: Option<Lease> = None;
        let mut failures = 0u32;
        let mut logged: Option<String> = None;
        loop {
            // Boxed, as in `run`: the exchange only takes memory while it runs.
            match Box::pin(self.renew(&path, current.take(), duration)).await {
                Ok(l) => {
                    current = Some(l);
                    failures = 0;
                    if logged.take().is_some() {
                        log::info!("node lease renewed again");
                    }
                    rt::sleep_on_grid(lease::renew_wait(duration, fastrand::f64())).await;
                }
                Err(e) => {
                    failures += 1;
                    let link = self.client.link();
                    let down = link.is_down();
                    if !down && logged.as_deref() != Some(e.as_str()) {
                        log::warn!("renewing the node lease: {e}; will retry");
                        logged = Some(e);
                    }
                    let retry = lease::retry_delay(failures, duration);
                    if down {
                        // Failed with the link: retry once it answers again
                        // (within a random second, as the watches do), not
                        // at the end of a back-off of up to 7 s.
                        smol::future::or(rt::sleep(retry), async {
                            link.recovered().await;
                            rt::sleep(Duration::from_millis(fastrand::u64(0..1000))).await;
                        })
                        .await;
                    } else {
                        rt::sleep(retry).await;
                    }
                }
            }
        }
    }

    /// One renewal: patch the renew time of the Lease we know (or update
    /// it whole when it is not held as we hold it), both with its
    /// resourceVersion as precondition; or read it, or create it. A failed
    /// renewal reads the Lease again.
    async fn renew(
        &self,
        path: &str,
        known: Option<Lease>,
        duration: i32,
    ) -> Result<Lease, String> {
        let uid = self.node_uid.borrow().clone();
        let name = &self.cfg.node_name;
        let decode = |b: &[u8]| decode_json::<Lease>(b, "the Lease");
        let known = match known {
            Some(l) => l,
            None => {
                let (code, body) = self.send(Method::GET, path, None).await?;
                match code {
                    StatusCode::OK => decode(&body)?,
                    StatusCode::NOT_FOUND => {
                        let l = lease::lease(name, uid.as_deref(), duration, wall_clock());
                        let bytes = serde_json::to_vec(&l).map_err(|e| e.to_string())?;
                        let coll = collection_path::<Lease>(Some(lease::NAMESPACE));
                        let (code, body) =
                            self.send(Method::POST, &coll, Some((bytes, JSON))).await?;
                        self.lease_fields_trimmed.set(false);
                        return match code {
                            c if c.is_success() => decode(&body),
                            c => Err(ApiError::from_reply(c.as_u16(), &body).to_string()),
                        };
                    }
                    c => return Err(ApiError::from_reply(c.as_u16(), &body).to_string()),
                }
            }
        };
        if lease::held_as(&known, name, uid.as_deref(), duration) {
            // Held as we hold it: move the renew time alone, the answer
            // in protobuf; the first such renewal also clears managedFields.
            let trim = !self.lease_fields_trimmed.get();
            let body = Body {
                content_type: MERGE_PATCH,
                bytes: lease::renewal_patch(wall_clock(), trim),
            };
            let r = self
                .client
                .request_accepting(
                    Method::PATCH,
                    path,
                    Some(body),
                    protobuf::PROTOBUF,
                    BODY_LIMIT,
                    REQUEST_DEADLINE,
                )
                .await
                .map_err(|e| e.to_string())?;
            return match r.status {
                c if c.is_success() => {
                    self.lease_fields_trimmed.set(true);
                    lease_proto::decode(&r.body).map_err(|e| e.to_string())
                }
                c => Err(ApiError::from_reply(c.as_u16(), &r.body).to_string()),
            };
        }
        let l = lease::renewed(&known, name, uid.as_deref(), duration, wall_clock());
        let bytes = serde_json::to_vec(&l).map_err(|e| e.to_string())?;
        let (code, body) = self.send(Method::PUT, path, Some((bytes, JSON))).await?;
        self.lease_fields_trimmed.set(false);
        match code {
            c if c.is_success() => decode(&body),
            c => Err(ApiError::from_reply(c.as_u16(), &body).to_string()),
        }
    }
}
