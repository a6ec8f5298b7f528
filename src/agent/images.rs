//! Images: making a container's image present per `imagePullPolicy`
//! (kubelet's image manager), with a per-container pull back-off and
//! optionally one pull at a time (`serializeImagePulls`). Image GC will
//! live here too.
//!
//! Failures come back as the container's [`Waiting`] reason
//! (`ErrImagePull`, `ImagePullBackOff`, `ErrImageNeverPull`,
//! `ErrImageInspect`). It must not know pods beyond the container spec.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::Agent;
use crate::backoff::Backoff;
use crate::cri::{api, RuntimeService};
use crate::pod::accessors::{full_name, uid};
use crate::status::Waiting;

/// The image manager's state.
#[derive(Default)]
pub(super) struct Images {
    backoff: RefCell<Backoff>,
    /// When each container's last pull failed (the back-off counts from it).
    failed_at: RefCell<HashMap<String, Instant>>,
    pull_lock: smol::lock::Mutex<()>,
}

impl Images {
    fn remaining(&self, key: &str, now: Instant) -> Option<Duration> {
        let at = *self.failed_at.borrow().get(key)?;
        self.backoff.borrow().remaining(key, at, now)
    }

    /// Forgets a pod's pull back-offs (the pod is gone).
    pub fn forget_pod(&self, pod_uid: &str) {
        self.backoff.borrow_mut().forget_pod(pod_uid);
        let prefix = format!("{pod_uid}/");
        self.failed_at
            .borrow_mut()
            .retain(|k, _| !k.starts_with(&prefix));
    }
}

impl<R: RuntimeService> Agent<R> {
    /// Makes the image available per `imagePullPolicy`; returns the image ID.
    pub(super) async fn ensure_image(
        &self,
        pod: &Pod,
        c: &Container,
        sandbox: &api::PodSandboxConfig,
    ) -> Result<String, Waiting> {
        let user = c.image.clone().unwrap_or_default();
        let image = crate::pod::defaults::normalize_image(&user);
        let policy = c.image_pull_policy.as_deref().unwrap_or("IfNotPresent");
        let spec = api::ImageSpec {
            image: image.clone(),
            user_specified_image: user.clone(),
            ..Default::default()
        };
        let present = match self
            .runtime
            .image_status(api::ImageStatusRequest {
                image: Some(spec.clone()),
                verbose: false,
            })
            .await
        {
            Ok(r) => r.image.map(|i| i.id),
            Err(e) => {
                return Err(Waiting {
                    reason: "ErrImageInspect".into(),
                    message: e.to_string(),
                })
            }
        };
        match (policy, present) {
            ("Never", Some(id)) | ("IfNotPresent", Some(id)) => return Ok(id),
            ("Never", None) => {
                return Err(Waiting {
                    reason: "ErrImageNeverPull".into(),
                    message: format!(
                        "Container image \"{user}\" is not present with pull policy of Never"
                    ),
                })
            }
            _ => {}
        }
        let key = Backoff::key(uid(pod), &c.name);
        let now = Instant::now();
        if let Some(wait) = self.images.remaining(&key, now) {
            return Err(Waiting {
                reason: "ImagePullBackOff".into(),
                message: format!(
                    "Back-off pulling image \"{user}\" ({}s left)",
                    wait.as_secs()
                ),
            });
        }
        let _guard = if self.cfg.serialize_image_pulls {
            Some(self.images.pull_lock.lock().await)
        } else {
            None
        };
        log::info!("pulling image {image} for pod {}", full_name(pod));
        let req = api::PullImageRequest {
            image: Some(spec.clone()),
            auth: None,
            sandbox_config: Some(sandbox.clone()),
        };
        match self.runtime.pull_image(req).await {
            Ok(r) => {
                self.images.backoff.borrow_mut().reset(&key);
                self.images.failed_at.borrow_mut().remove(&key);
                match self
                    .runtime
                    .image_status(api::ImageStatusRequest {
                        image: Some(spec),
                        verbose: false,
                    })
                    .await
                {
                    Ok(api::ImageStatusResponse { image: Some(i), .. }) => Ok(i.id),
                    _ => Ok(r.image_ref),
                }
            }
            Err(e) => {
                self.images.backoff.borrow_mut().next(&key, now);
                self.images.failed_at.borrow_mut().insert(key, now);
                Err(Waiting {
                    reason: "ErrImagePull".into(),
                    message: format!("pulling image \"{user}\": {}", e.message()),
                })
            }
        }
    }
}
