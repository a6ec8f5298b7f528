//! The GC task: removes dead containers and sandboxes ([`gc::collect`]
//! decides which), the log directories of pods that are gone, and stale pod
//! cgroups. Its first pass runs soon after start, to clean up what a
//! previous run left.
//!
//! Nothing of a pod is removed before the source it came from is ready
//! ([`super::HousekeepingHost::may_remove`]): such pods count as live here. Log directories and
//! cgroups carry no source, so they wait until every source is ready. This
//! file must not decide what to remove; it only asks and executes.

use std::collections::HashSet;
use std::fs;
use std::time::Duration;

use super::{Housekeeping, HousekeepingHost};
use crate::cri::{api, RuntimeService};
use crate::gc;
use crate::rt;

const GC_PERIOD: Duration = Duration::from_secs(60);
const GC_FIRST: Duration = Duration::from_secs(10);

impl Housekeeping {
    /// The GC task: a first pass [`GC_FIRST`] after start, then one every
    /// [`GC_PERIOD`].
    pub(in crate::agent) async fn gc_loop(&self, host: &impl HousekeepingHost) {
        rt::sleep(GC_FIRST).await;
        loop {
            self.collect_garbage(host).await;
            rt::sleep_on_grid(GC_PERIOD).await;
        }
    }

    /// One GC pass over the last relist.
    pub(in crate::agent) async fn collect_garbage(&self, host: &impl HousekeepingHost) {
        let runtime = host.runtime();
        let mut live = host.wanted_pods();
        // A pod whose source has not spoken yet may still be wanted.
        let runtime_pods: Vec<String> = host.with_relist(|sandboxes, containers| {
            sandboxes
                .iter()
                .map(|s| s.pod_uid.clone())
                .chain(containers.iter().map(|c| c.pod_uid.clone()))
                .collect()
        });
        for uid in runtime_pods {
            if !live.contains(&uid) && !host.may_remove(&uid) {
                live.insert(uid);
            }
        }
        let removals =
            host.with_relist(|sandboxes, containers| gc::collect(sandboxes, containers, &live));
        for r in removals {
            match r {
                gc::Removal::Container { id, .. } => remove_container(runtime, id).await,
                gc::Removal::Sandbox { id, pod_uid } => {
                    log::debug!("GC: removing sandbox {id} of pod {pod_uid}");
                    let req = api::RemovePodSandboxRequest { pod_sandbox_id: id };
                    if let Err(e) = runtime.remove_pod_sandbox(req).await {
                        if !e.is_not_found() {
                            log::warn!("GC: {e}");
                        }
                    }
                }
            }
        }
        if !host.all_sources_ready() {
            return;
        }
        // Log directories and cgroups of pods that exist nowhere.
        let known: HashSet<String> = host.with_relist(|sandboxes, _| {
            sandboxes
                .iter()
                .map(|s| s.pod_uid.clone())
                .chain(live.iter().cloned())
                .collect()
        });
        let unknown = |uid: &str| !known.contains(uid) && !host.knows_pod(uid);
        if let Ok(dir) = fs::read_dir(&self.cfg.pod_logs_dir) {
            for entry in dir.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(uid) = name.rsplit('_').next() {
                    if name.matches('_').count() >= 2 && unknown(uid) {
                        remove_dir_logged(&entry.path());
                    }
                }
            }
        }
        if let Some(cg) = host.cgroups() {
            if let Ok(list) = cg.list_pods() {
                for (qos, uid) in list {
                    if unknown(&uid) {
                        let _ = cg.remove_pod(&uid, qos);
                    }
                }
            }
        }
    }
}

/// Removes a dead container and the log file the runtime leaves behind
/// (GC, and the pod worker's pruning of init containers).
/// Removes `dir` and what it holds; a failure is logged, a missing
/// directory is not one.
pub(in crate::agent) fn remove_dir_logged(dir: &std::path::Path) {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => log::debug!("removed {}", dir.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log::warn!("removing {}: {e}", dir.display()),
    }
}

pub(in crate::agent) async fn remove_container(runtime: &impl RuntimeService, id: String) {
    log::debug!("GC: removing dead container {id}");
    let log_path = match runtime
        .container_status(api::ContainerStatusRequest {
            container_id: id.clone(),
            verbose: false,
        })
        .await
    {
        Ok(r) => r.status.map(|s| s.log_path).filter(|p| !p.is_empty()),
        Err(_) => None,
    };
    let req = api::RemoveContainerRequest { container_id: id };
    match runtime.remove_container(req).await {
        Err(e) if !e.is_not_found() => log::warn!("GC: {e}"),
        _ => {
            if let Some(p) = log_path {
                let _ = fs::remove_file(&p);
            }
        }
    }
}
