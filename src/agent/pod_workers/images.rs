//! Images: making a container's image present per `imagePullPolicy`
//! (kubelet's image manager), with a per-container pull back-off and
//! optionally one pull at a time (`serializeImagePulls`). Image GC will
//! live here too.
//!
//! Failures come back as the container's [`Waiting`] reason
//! (`ErrImagePull`, `ImagePullBackOff`, `ErrImageNeverPull`,
//! `ErrImageInspect`). It must not know pods beyond the container spec.
//!
//! Offline, picolet does better than kubelet: with `imagePullPolicy:
//! Always` (the default for `:latest`) a pull that fails for a network
//! reason ([`is_network_failure`]) runs the image already on the node, and
//! says so in the log, instead of stranding the board's workloads after a
//! reboot with the uplink down. An answer from the registry (unauthorized,
//! not found) is never overridden. `--offline-image-fallback=false` turns
//! this off.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::PodWorkers;
use crate::backoff::Backoff;
use crate::cri::{api, RuntimeService};
use crate::pod::accessors::{full_name, uid};
use crate::pod::spec::ImageUser;
use crate::status::Waiting;

/// The image manager's state.
#[derive(Default)]
pub(super) struct Images {
    backoff: RefCell<Backoff>,
    /// When each container's last pull failed (the back-off counts from it).
    failed_at: RefCell<HashMap<String, Instant>>,
    /// Containers running a present image after an offline pull failure
    /// (logged once each, until a pull works).
    offline: RefCell<std::collections::HashSet<String>>,
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
        self.offline
            .borrow_mut()
            .retain(|k| !k.starts_with(&prefix));
    }
}

/// The image one container start asks for, as `ensure_image`'s steps
/// share it.
struct Wanted<'a> {
    pod: &'a Pod,
    c: &'a Container,
    /// As the container spec names it (events and messages say this).
    user: String,
    /// As the runtime is asked for it (the name normalized).
    spec: api::ImageSpec,
    /// The container's pull back-off key.
    key: String,
}

impl<R: RuntimeService> PodWorkers<R> {
    /// Makes the image available per `imagePullPolicy`; returns the image
    /// ID and the user it runs as by default.
    pub(super) async fn ensure_image(
        &self,
        pod: &Pod,
        c: &Container,
        sandbox: &api::PodSandboxConfig,
    ) -> Result<(String, ImageUser), Waiting> {
        let user = c.image.clone().unwrap_or_default();
        let image = crate::pod::defaults::normalize_image(&user);
        let policy = c.image_pull_policy.as_deref().unwrap_or("IfNotPresent");
        let want = Wanted {
            pod,
            c,
            spec: api::ImageSpec {
                image,
                user_specified_image: user.clone(),
                ..Default::default()
            },
            user,
            key: Backoff::key(uid(pod), &c.name),
        };
        let present = self.image_present(&want.spec).await?;
        let user = &want.user;
        match (policy, present.clone()) {
            ("Never", Some(id)) | ("IfNotPresent", Some(id)) => {
                let text = format!("Container image \"{user}\" already present on machine");
                self.event(pod, Some(&c.name), false, "Pulled", &text);
                return Ok(id);
            }
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
        let now = Instant::now();
        self.pull_backoff(&want, now)?;
        self.pull(want, sandbox, present, now).await
    }

    /// The image's ID and default user when the runtime has it.
    async fn image_present(
        &self,
        spec: &api::ImageSpec,
    ) -> Result<Option<(String, ImageUser)>, Waiting> {
        match self
            .runtime
            .image_status(api::ImageStatusRequest {
                image: Some(spec.clone()),
                verbose: false,
            })
            .await
        {
            Ok(r) => Ok(r.image.map(|i| (i.id.clone(), image_user(&i)))),
            Err(e) => Err(Waiting {
                reason: "ErrImageInspect".into(),
                message: e.to_string(),
            }),
        }
    }

    /// `ImagePullBackOff` (with its event) while the container's last
    /// failed pull still holds it back.
    fn pull_backoff(&self, want: &Wanted<'_>, now: Instant) -> Result<(), Waiting> {
        let Some(wait) = self.images.remaining(&want.key, now) else {
            return Ok(());
        };
        let user = &want.user;
        let text = format!("Back-off pulling image \"{user}\"");
        self.event(want.pod, Some(&want.c.name), false, "BackOff", &text);
        Err(Waiting {
            reason: "ImagePullBackOff".into(),
            message: format!(
                "Back-off pulling image \"{user}\" ({}s left)",
                wait.as_secs()
            ),
        })
    }

    /// Pulls the image (one pull at a time with `serializeImagePulls`);
    /// `present` is what the node has, for the offline fallback.
    async fn pull(
        &self,
        want: Wanted<'_>,
        sandbox: &api::PodSandboxConfig,
        present: Option<(String, ImageUser)>,
        now: Instant,
    ) -> Result<(String, ImageUser), Waiting> {
        let _guard = if self.cfg.serialize_image_pulls {
            Some(self.images.pull_lock.lock().await)
        } else {
            None
        };
        let (pod, c) = (want.pod, want.c);
        log::info!(
            "pulling image {} for pod {}",
            want.spec.image,
            full_name(pod)
        );
        self.event(
            pod,
            Some(&c.name),
            false,
            "Pulling",
            &format!("Pulling image \"{}\"", want.user),
        );
        let pull_started = Instant::now();
        let req = api::PullImageRequest {
            image: Some(want.spec.clone()),
            auth: None,
            sandbox_config: Some(sandbox.clone()),
        };
        match self.runtime.pull_image(req).await {
            Ok(r) => {
                let took = pull_started.elapsed().as_secs_f64();
                self.pulled(&want, took);
                self.sync_image_fs().await;
                match self
                    .runtime
                    .image_status(api::ImageStatusRequest {
                        image: Some(want.spec),
                        verbose: false,
                    })
                    .await
                {
                    Ok(api::ImageStatusResponse { image: Some(i), .. }) => {
                        Ok((i.id.clone(), image_user(&i)))
                    }
                    _ => Ok((r.image_ref, ImageUser::of(None, ""))),
                }
            }
            Err(e) => self.pull_failed(want, present, &e.message(), now),
        }
    }

    /// Makes the pulled image's files durable before a container runs from
    /// them (`node::syncfs`: a power cut before the kernel's writeback
    /// leaves the runtime listing an image whose files are empty). The
    /// runtime names its image filesystems; a failure is logged and the
    /// pull stands.
    async fn sync_image_fs(&self) {
        let info = match self.runtime.image_fs_info(api::ImageFsInfoRequest {}).await {
            Ok(info) => info,
            Err(e) => {
                log::warn!("syncing the image filesystem after a pull: ImageFsInfo: {e}");
                return;
            }
        };
        for dir in crate::cri::image_fs_mountpoints(&info) {
            let began = Instant::now();
            match crate::node::syncfs::syncfs(&dir).await {
                Ok(()) => log::debug!(
                    "image filesystem of {} synced after a pull in {:?}",
                    dir.display(),
                    began.elapsed()
                ),
                Err(e) => log::warn!(
                    "syncing the image filesystem of {} after a pull: {e}",
                    dir.display()
                ),
            }
        }
    }

    /// A pull that worked: its event, the container's back-off and offline
    /// note forgotten.
    fn pulled(&self, want: &Wanted<'_>, took: f64) {
        let text = format!(
            "Successfully pulled image \"{}\" in {took:.3}s ({took:.3}s including waiting)",
            want.user
        );
        self.event(want.pod, Some(&want.c.name), false, "Pulled", &text);
        self.images.offline.borrow_mut().remove(&want.key);
        self.images.backoff.borrow_mut().reset(&want.key);
        self.images.failed_at.borrow_mut().remove(&want.key);
    }

    /// A pull that failed: the image already on the node when the registry
    /// could not be reached and the fallback is on; otherwise
    /// `ErrImagePull`, its event, and the container's back-off.
    fn pull_failed(
        &self,
        want: Wanted<'_>,
        present: Option<(String, ImageUser)>,
        message: &str,
        now: Instant,
    ) -> Result<(String, ImageUser), Waiting> {
        let Wanted {
            pod,
            c,
            user,
            spec,
            key,
        } = want;
        if let Some(id) =
            present.filter(|_| self.cfg.offline_image_fallback && is_network_failure(message))
        {
            // Said once per container until a pull works again.
            if self.images.offline.borrow_mut().insert(key) {
                let text = format!(
                    "Failed to pull image \"{user}\" ({message}); running the image already on the node"
                );
                self.event(pod, Some(&c.name), true, "PullFailedUsingLocalImage", &text);
                log::warn!(
                    "pulling image {} for pod {} failed for a network reason ({message}); \
                     running the image already on the node",
                    spec.image,
                    full_name(pod)
                );
            }
            return Ok(id);
        }
        let text = format!("Failed to pull image \"{user}\": {message}");
        self.event(pod, Some(&c.name), true, "Failed", &text);
        self.images.backoff.borrow_mut().next(&key, now);
        self.images.failed_at.borrow_mut().insert(key, now);
        Err(Waiting {
            reason: "ErrImagePull".into(),
            message: format!("pulling image \"{user}\": {message}"),
        })
    }
}

/// The user an image runs as by default, as its ImageStatus says.
fn image_user(i: &api::Image) -> ImageUser {
    ImageUser::of(i.uid.as_ref().map(|u| u.value), &i.username)
}

/// Whether a failed pull's message says the registry could not be reached
/// (DNS, connect, timeout, TLS), as opposed to an answer from it
/// (unauthorized, denied, not found). Both runtimes report pull failures
/// with the gRPC code `Unknown`, so only the message tells; an answer from
/// the registry wins over any network wording in the same message.
pub fn is_network_failure(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    const ANSWERS: &[&str] = &[
        "unauthorized",
        "authentication required",
        "denied",
        "forbidden",
        "not found",
        "manifest unknown",
        "name unknown",
        "no match for platform",
    ];
    const NETWORK: &[&str] = &[
        "dial tcp",
        "no such host",
        "i/o timeout",
        "connection refused",
        "connection reset",
        "network is unreachable",
        "no route to host",
        "temporary failure in name resolution",
        "server misbehaving",
        "tls handshake timeout",
        "context deadline exceeded",
        "timeout exceeded while awaiting headers",
        "unexpected eof",
    ];
    !ANSWERS.iter().any(|a| m.contains(a)) && NETWORK.iter().any(|n| m.contains(n))
}

#[cfg(test)]
mod tests {
    use super::is_network_failure;

    #[test]
    fn an_unreachable_registry_is_a_network_failure_but_its_answers_are_not() {
        let cases = [
            ("failed to resolve reference \"docker.io/library/busybox:latest\": failed to do request: Head \"https://registry-1.docker.io/v2/library/busybox/manifests/latest\": dial tcp: lookup registry-1.docker.io on 127.0.0.53:53: no such host", true),
            ("pinging container registry registry-1.docker.io: Get \"https://registry-1.docker.io/v2/\": dial tcp 54.1.2.3:443: i/o timeout", true),
            ("dial tcp 10.0.0.1:5000: connect: connection refused", true),
            ("Get \"https://r.example/v2/\": net/http: TLS handshake timeout", true),
            ("failed to resolve reference \"r.example/app:1\": pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed", false),
            ("failed to resolve reference \"docker.io/library/nope:1\": docker.io/library/nope:1: not found", false),
            ("unexpected status from HEAD request: 401 Unauthorized", false),
            ("rpc error: code = Unknown desc = something else entirely", false),
        ];
        for (message, network) in cases {
            assert_eq!(is_network_failure(message), network, "{message}");
        }
    }
}
