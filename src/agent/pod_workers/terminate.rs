//! Pod termination: a deleted pod stopped (its containers in kubelet's
//! termination waves, each with what is left of its grace period), its
//! sandboxes stopped and, once nothing wants it, removed with its cgroup
//! and directories; then the pod is forgotten. Also the one-off stop of
//! a container. What to stop and in which order is decided in
//! `pod::plan` (`termination_waves`); this file carries it out.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::{host_files, PodWorkers, RETRY_AFTER_ERROR};
use crate::cri::{api, CriError, RuntimeService};
use crate::pod::accessors::{self, full_name};
use crate::pod::{facts, plan, ObservedPod};

impl<R: RuntimeService> PodWorkers<R> {
    /// A deleted pod: terminate it and forget it (unless a source wants it
    /// again meanwhile).
    pub(super) async fn sync_deleted(
        &self,
        uid: &str,
        pod: &Pod,
        observed: ObservedPod,
    ) -> Option<Duration> {
        let mut observed = observed;
        if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
            e.observed_at = None; // terminating changes the runtime
        }
        if self.status_sink.borrow().is_some() {
            // Stop first and look again, so that the last status says how
            // each container ended; then remove.
            if let Err(e) = Box::pin(self.terminate_pod(pod, &observed, false)).await {
                log::warn!("terminating pod {}: {e}; will retry", full_name(pod));
                return Some(RETRY_AFTER_ERROR);
            }
            if let Ok(o) = Box::pin(self.observe(uid)).await {
                self.record_observed(uid, &o);
                if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
                    e.observed_at = None; // the removal below changes it again
                }
                observed = o;
            }
        }
        if let Err(e) = Box::pin(self.terminate_pod(pod, &observed, true)).await {
            log::warn!("terminating pod {}: {e}; will retry", full_name(pod));
            return Some(RETRY_AFTER_ERROR);
        }
        let last = {
            let mut pods = self.pods.borrow_mut();
            if !pods.get(uid).is_some_and(|e| e.lifecycle.is_deleted()) {
                return Some(Duration::ZERO); // wanted again: sync it
            }
            log::info!("pod {} terminated", full_name(pod));
            let last = pods.get(uid).map(|e| self.pod_status(e));
            pods.remove(uid);
            self.last_forgotten.set(Some(Instant::now()));
            last
        };
        if pod.metadata.deletion_timestamp.is_some() {
            self.sources.borrow_mut().finished.insert(uid.to_string());
        }
        if let Some(status) = last {
            self.report_terminated(pod, &status);
        }
        self.release_user_ns(uid);
        self.backoff.borrow_mut().forget_pod(uid);
        self.images.forget_pod(uid);
        self.recent_events.borrow_mut().forget(uid);
        None
    }

    pub(super) async fn stop_container(&self, id: &str, grace: i64) -> Result<(), CriError> {
        match self
            .runtime
            .stop_container(api::StopContainerRequest {
                container_id: id.to_string(),
                timeout: grace,
            })
            .await
        {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }

    /// Stops every container and every sandbox of a pod; with `remove`,
    /// also removes them and the pod's cgroup, volumes and logs. Containers
    /// stop in [`plan::termination_waves`] order: app containers together
    /// with the grace period, then each sidecar, last declared first, with
    /// what is left of it (at least kubelet's 2 s).
    pub(super) async fn terminate_pod(
        &self,
        pod: &Pod,
        observed: &ObservedPod,
        remove: bool,
    ) -> Result<(), String> {
        // An evicted pod gets the eviction's grace period when shorter.
        let grace = self.pods.borrow().get(accessors::uid(pod)).map_or_else(
            || facts::grace_period(pod),
            |e| e.lifecycle.grace_period(facts::grace_period(pod)),
        );
        let began = Instant::now();
        for wave in plan::termination_waves(pod, observed.running()) {
            let left = grace
                .saturating_sub(began.elapsed().as_secs() as i64)
                .max(MIN_GRACE_SECONDS.min(grace));
            let stops: Vec<_> = wave
                .into_iter()
                .map(|c| {
                    log::info!(
                        "stopping container {} of pod {} (grace {left}s)",
                        c.name,
                        full_name(pod)
                    );
                    self.kill_container(pod, &c.name, &c.id, left)
                })
                .collect();
            let mut first_err = None;
            for r in join_all(stops).await {
                if let Err(e) = r {
                    first_err.get_or_insert(e.to_string());
                }
            }
            if let Some(e) = first_err {
                return Err(e);
            }
        }
        for s in &observed.sandboxes {
            if s.ready || remove {
                let req = api::StopPodSandboxRequest {
                    pod_sandbox_id: s.id.clone(),
                };
                match self.runtime.stop_pod_sandbox(req).await {
                    Err(e) if !e.is_not_found() => return Err(e.to_string()),
                    _ => {}
                }
            }
        }
        if !remove {
            return Ok(());
        }
        for s in &observed.sandboxes {
            let req = api::RemovePodSandboxRequest {
                pod_sandbox_id: s.id.clone(),
            };
            match self.runtime.remove_pod_sandbox(req).await {
                Err(e) if !e.is_not_found() => return Err(e.to_string()),
                _ => {}
            }
        }
        if let Some(cg) = &self.cgroups {
            if let Err(e) = cg.remove_pod(accessors::uid(pod), facts::qos(pod)) {
                log::warn!("removing cgroup of pod {}: {e}", full_name(pod));
            }
        }
        host_files::remove_pod_dirs(&self.cfg, pod);
        Ok(())
    }
}

/// kubelet's `minimumGracePeriodInSeconds`: what a sidecar gets when the
/// containers before it used up the grace period.
const MIN_GRACE_SECONDS: i64 = 2;

/// Awaits every future concurrently on this thread.
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    // Poll all of them together: each stop waits on its own timer/RPC.
    let mut pending: Vec<_> = futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut results: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (slot, result) in pending.iter_mut().zip(results.iter_mut()) {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        *result = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => done = false,
                }
            }
        }
        if done {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    results
        .into_iter()
        .map(|r| r.expect("every future completed"))
        .collect()
}
