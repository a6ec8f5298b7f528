//! Starting a pod's pieces: its sandbox (pod cgroup, directories, the
//! sandbox config, RunPodSandbox) and each container (image, host files,
//! config volumes, the container config, CreateContainer, StartContainer,
//! the postStart hook), ephemeral containers included (in the PID
//! namespace of their target, when they name one).
//!
//! Split from [`super::sync`], which decides when to call these. Both
//! starts take a turn from the agent's bounds on starts in flight
//! ([`super::sync::SANDBOX_STARTS_IN_FLIGHT`],
//! [`super::sync::CONTAINER_STARTS_IN_FLIGHT`]) just before their CRI
//! calls, so a pod waiting for its turn holds no config; why is measured
//! in `sync`'s docs.
//!
//! This file must not decide anything about the pod (`pod::spec` builds
//! the configs, `pod::facts` answers the questions); it performs and
//! records (events, waiting reasons, kill messages).

use std::collections::HashMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::{host_files, now_unix_nanos, PodWorkers};
use crate::cgroups::PodCgroups;
use crate::cri::{api, RuntimeService};
use crate::pod::accessors::{self, full_name};
use crate::pod::{facts, spec, ObservedPod};
use crate::qos;
use crate::status::Waiting;

/// A container whose config cannot be made: kubelet's
/// `CreateContainerConfigError`.
fn config_error(message: String) -> Waiting {
    Waiting {
        reason: "CreateContainerConfigError".into(),
        message,
    }
}

/// Where a container starts: its pod's sandbox (ID and attempt) and, for
/// an ephemeral container with a target, the container whose PID
/// namespace it joins.
pub(super) struct Placement<'a> {
    pub sandbox_id: &'a str,
    pub sandbox_attempt: u32,
    pub pid_target: Option<&'a str>,
}

/// The pod cgroup the runtime puts the sandbox in; "" (the runtime
/// decides) when pod-level cgroups are disabled.
pub(super) fn cgroup_parent(pod: &Pod, cgroups: Option<&PodCgroups>) -> String {
    match cgroups {
        Some(cg) => cg.pod_cgroup_parent(accessors::uid(pod), facts::qos(pod)),
        None => String::new(),
    }
}

impl<R: RuntimeService> PodWorkers<R> {
    /// The pod's sandbox config; its warnings are logged once per pod.
    pub(super) fn sandbox_config(&self, pod: &Pod, attempt: u32) -> api::PodSandboxConfig {
        let parent = cgroup_parent(pod, self.cgroups.as_ref());
        let (config, warnings) = spec::sandbox_config(
            pod,
            &spec::SandboxParams {
                attempt,
                cgroup_parent: &parent,
                pod_logs_dir: &self.cfg.pod_logs_dir,
                cluster_dns: &self.cfg.cluster_dns,
                cluster_domain: &self.cfg.cluster_domain,
                host_resolv_conf: self.host.resolv_conf.as_deref(),
                user_ns: self.user_ns(pod),
                seen_unix_nanos: self
                    .pods
                    .borrow()
                    .get(accessors::uid(pod))
                    .map_or_else(now_unix_nanos, |e| e.seen_unix_nanos),
            },
        );
        if let Some(e) = self.pods.borrow_mut().get_mut(accessors::uid(pod)) {
            if !std::mem::replace(&mut e.warned, true) {
                for w in &warnings {
                    log::warn!("pod {}: {w}", full_name(pod));
                }
            }
        }
        config
    }

    pub(super) async fn create_sandbox(&self, pod: &Pod, attempt: u32) -> Result<String, String> {
        let uid = accessors::uid(pod);
        if let Some(cg) = &self.cgroups {
            cg.ensure_pod(
                uid,
                facts::qos(pod),
                &qos::pod_resources(accessors::spec(pod)),
                self.cfg.pod_pids_limit,
            )
            .map_err(|e| format!("pod cgroup: {e}"))?;
        }
        host_files::prepare_pod_dirs(&self.cfg, pod)?;
        // A pod waiting for its turn holds a small future and no config:
        // the config is made after the permit and the CRI call is boxed.
        // (With 80 pods created at once, each held both while waiting: a
        // start peak that the allocator then keeps, issue #8.)
        let _permit = self.sandbox_starts.acquire().await;
        let config = self.sandbox_config(pod, attempt);
        log::info!(
            "creating sandbox for pod {} (attempt {attempt})",
            full_name(pod)
        );
        let id = Box::pin(self.runtime.run_pod_sandbox(api::RunPodSandboxRequest {
            config: Some(config),
            runtime_handler: String::new(),
        }))
        .await
        .map_err(|e| e.to_string())?
        .pod_sandbox_id;
        Ok(id)
    }

    pub(super) async fn start_container(
        &self,
        pod: &Pod,
        observed: &ObservedPod,
        c: &Container,
        attempt: u32,
        at: Placement<'_>,
    ) -> Result<(), Waiting> {
        let Placement {
            sandbox_id,
            sandbox_attempt,
            pid_target,
        } = at;
        let config_dirs = self.write_config_volumes(pod)?;
        let sandbox_config = self.sandbox_config(pod, sandbox_attempt);
        // Each step that awaits the runtime is boxed, so that a pod waiting
        // for its turn (below) holds a small future, not the CRI calls'.
        let (image, image_user) = Box::pin(self.ensure_image(pod, c, &sandbox_config)).await?;
        // Container starts in flight are bounded like sandbox starts, and
        // for memory as much as for the runtime: 110 pods starting together
        // held 110 CreateContainer calls with their requests and buffers at
        // once, a peak the allocator then keeps (issue #8). The bound is
        // taken after the image (a slow pull holds no turn) and released
        // when the container runs (a postStart hook holds none either).
        let permit = self.container_starts.acquire().await;
        spec::verify_run_as_non_root(pod, c, &image_user).map_err(config_error)?;
        let sandbox = observed.sandboxes.iter().find(|s| s.id == sandbox_id);
        let pod_ips = facts::pod_ips(pod, sandbox, &self.host.host_ips);
        let pod_ip = pod_ips.first().cloned().unwrap_or_default();
        let mut config = self.container_config(pod, c, attempt, &image, &pod_ips, &config_dirs)?;
        if let Some(target) = pid_target {
            spec::share_target_pid(&mut config, target);
        }
        let id = Box::pin(self.runtime.create_container(api::CreateContainerRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            config: Some(config),
            sandbox_config: Some(sandbox_config),
        }))
        .await
        .map_err(|e| Waiting {
            reason: "CreateContainerError".into(),
            message: e.message(),
        })?
        .container_id;
        let created = format!("Created container: {}", c.name);
        self.event(pod, Some(&c.name), false, "Created", &created);
        Box::pin(self.runtime.start_container(api::StartContainerRequest {
            container_id: id.clone(),
        }))
        .await
        .map_err(|e| Waiting {
            reason: "RunContainerError".into(),
            message: e.message(),
        })?;
        drop(permit);
        let started = format!("Started container {}", c.name);
        self.event(pod, Some(&c.name), false, "Started", &started);
        log::info!(
            "started container {} of pod {} (attempt {attempt})",
            c.name,
            full_name(pod)
        );
        self.post_start_or_kill(pod, c, &id, &pod_ip).await
    }

    /// Runs the container's postStart hook; when it fails, the container
    /// is killed (its kill message says why) and its start fails with
    /// `PostStartHookError`.
    async fn post_start_or_kill(
        &self,
        pod: &Pod,
        c: &Container,
        id: &str,
        pod_ip: &str,
    ) -> Result<(), Waiting> {
        if let Err(msg) = Box::pin(self.run_post_start(pod, c, id, pod_ip)).await {
            log::warn!(
                "postStart hook of container {} in pod {} failed: {msg}; killing it",
                c.name,
                full_name(pod)
            );
            if let Some(e) = self.pods.borrow_mut().get_mut(accessors::uid(pod)) {
                e.container(&c.name)
                    .note_killed(id.to_string(), format!("PostStartHook failed: {msg}"));
            }
            let _ = self.stop_container(id, facts::grace_period(pod)).await;
            return Err(Waiting {
                reason: "PostStartHookError".into(),
                message: msg,
            });
        }
        Ok(())
    }

    /// The container's CRI config, made once its turn is taken: its host
    /// files (hosts, termination log, emptyDirs) written, the parameters
    /// gathered for `pod::spec`, and an event for each `envFrom` variable
    /// skipped for its name.
    fn container_config(
        &self,
        pod: &Pod,
        c: &Container,
        attempt: u32,
        image: &str,
        pod_ips: &[String],
        config_dirs: &HashMap<String, PathBuf>,
    ) -> Result<api::ContainerConfig, Waiting> {
        let pod_ip = pod_ips.first().cloned().unwrap_or_default();
        let files = host_files::prepare_container_files(
            &self.cfg,
            pod,
            c,
            attempt,
            pod_ips,
            self.host.allocatable.memory_bytes,
        )
        .map_err(config_error)?;
        let volume_dir = |name: &str| {
            files
                .empty_dirs
                .get(name)
                .or_else(|| config_dirs.get(name))
                .cloned()
        };
        let objects = self.objects_for(pod);
        let services = self.services.borrow().clone();
        let wait_for_services = self
            .pods
            .borrow()
            .get(accessors::uid(pod))
            .is_some_and(|e| e.source == Some(crate::source::PodSource::Api));
        let parent = cgroup_parent(pod, self.cgroups.as_ref());
        let seccomp_root = self.cfg.root_dir.join("seccomp");
        let hugepage_sizes = self.node.borrow().hugepage_sizes.clone();
        let params = spec::ContainerParams {
            attempt,
            image,
            pod_ip: &pod_ip,
            pod_ips,
            host_ips: &self.host.host_ips,
            volume_dir: &volume_dir,
            oom_score_adj: qos::container_oom_score_adj(
                accessors::spec(pod),
                c,
                self.host.node_memory,
            ),
            hugepage_sizes: &hugepage_sizes,
            swap: self.swap(),
            user_ns: self.user_ns(pod),
            pod_cgroup_parent: &parent,
            node_allocatable: self.host.allocatable,
            termination_log_host_path: Some(&files.termination_log),
            etc_hosts: files.etc_hosts.as_deref(),
            seccomp_profile_root: Some(&seccomp_root),
            objects: objects.as_deref(),
            services: services.as_deref().map(|s| spec::ServiceSource {
                services: s,
                wait_for_sync: wait_for_services,
            }),
        };
        let config = spec::container_config(pod, c, &params).map_err(|e| match e.kind {
            // Not synced yet, nothing cached: wait for the watch.
            spec::SpecErrorKind::NotYetKnown => Waiting {
                reason: "ContainerCreating".into(),
                message: e.to_string(),
            },
            _ => config_error(e.to_string()),
        })?;
        if let Some(objects) = objects.as_deref() {
            for text in spec::env_from_skipped(pod, c, objects) {
                self.event(
                    pod,
                    Some(&c.name),
                    true,
                    "InvalidEnvironmentVariableNames",
                    &text,
                );
            }
        }
        Ok(config)
    }

    /// Starts ephemeral container `name` once (attempt 0): in the PID
    /// namespace of its `targetContainerName`, whose newest instance must
    /// exist (kubelet's `getTargetID`; otherwise a
    /// `CreateContainerConfigError`, tried again at the next sync).
    pub(super) async fn start_ephemeral_container(
        &self,
        pod: &Pod,
        observed: &ObservedPod,
        name: &str,
        sandbox_id: &str,
        sandbox_attempt: u32,
    ) -> Result<(), Waiting> {
        let Some(ec) = accessors::ephemeral_container(pod, name) else {
            return Ok(());
        };
        let target = match ec.target_container_name.as_deref() {
            None | Some("") => None,
            Some(t) => match observed.latest(t) {
                Some(c) => Some(c.id.clone()),
                None => {
                    return Err(Waiting {
                        reason: "CreateContainerConfigError".into(),
                        message: format!("unable to find target container {t}"),
                    });
                }
            },
        };
        let c = accessors::ephemeral_as_container(ec);
        let at = Placement {
            sandbox_id,
            sandbox_attempt,
            pid_target: target.as_deref(),
        };
        let start = self.start_container(pod, observed, &c, 0, at);
        Box::pin(start).await
    }
}
