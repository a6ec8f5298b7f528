//! The Lease half of the heartbeat: `kube-node-lease/<node>` renewed every
//! quarter of `nodeLeaseDurationSeconds` plus up to 4 % (kubelet's
//! jitter), retried sooner after a failure, and at once (within a quarter
//! of a second, ahead of the watches' second) when the link comes back. A
//! renewal is a merge patch of `spec.renewTime` alone while the Lease is
//! held as we hold it, its answer in protobuf ([`lease_proto`]); otherwise
//! the Lease is read, created or replaced whole, as kubelet's lease
//! controller does.
//!
//! After a failure the Lease is read again before the next write, as
//! kubelet does, unless the patch had no answer at all (the link) or the
//! API server's answer says nothing of the Lease (a 5xx, a 429): the patch
//! carries no precondition, so it is sent again as it was. A returning
//! node's first request is then its renewal, not a read of a Lease it
//! already knows: one round trip, at the moment a returning fleet makes
//! the API server slowest.
//!
//! Must not know: the Node object or the pods; it shares the heartbeat's
//! client and the node's UID.

use std::rc::Rc;

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
            match Box::pin(self.renew(&path, &mut current, duration)).await {
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
                            rt::sleep(lease::RECOVERY_JITTER.mul_f64(fastrand::f64())).await;
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
    /// it whole, with its resourceVersion as precondition, when it is not
    /// held as we hold it); or read it, or create it. `slot` is taken; a
    /// failed patch that says nothing of the Lease puts it back (module
    /// docs), any other failure leaves it empty: the next renewal reads.
    async fn renew(
        &self,
        path: &str,
        slot: &mut Option<Lease>,
        duration: i32,
    ) -> Result<Lease, String> {
        let uid = self.node_uid.borrow().clone();
        let name = &self.cfg.node_name;
        let decode = |b: &[u8]| decode_json::<Lease>(b, "the Lease");
        let known = match slot.take() {
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
            // The connection first, then the time: a renewal that waited
            // out a dial (the link returning) must not carry the time it
            // was begun, which would tell whoever reads the Lease that the
            // node was last alive before its link came back.
            if let Err(e) = self.client.connect(REQUEST_DEADLINE).await {
                *slot = Some(known);
                return Err(e.to_string());
            }
            let trim = !self.lease_fields_trimmed.get();
            let body = Body {
                content_type: MERGE_PATCH,
                bytes: lease::renewal_patch(wall_clock(), trim),
            };
            let answer = self
                .client
                .request_accepting(
                    Method::PATCH,
                    path,
                    Some(body),
                    protobuf::PROTOBUF,
                    BODY_LIMIT,
                    REQUEST_DEADLINE,
                )
                .await;
            let r = match answer {
                Ok(r) => r,
                Err(e) => {
                    *slot = Some(known);
                    return Err(e.to_string());
                }
            };
            return match r.status {
                c if c.is_success() => {
                    self.lease_fields_trimmed.set(true);
                    lease_proto::decode(&r.body).map_err(|e| e.to_string())
                }
                c => {
                    if lease::patch_again_after(c.as_u16()) {
                        *slot = Some(known);
                    }
                    Err(ApiError::from_reply(c.as_u16(), &r.body).to_string())
                }
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
