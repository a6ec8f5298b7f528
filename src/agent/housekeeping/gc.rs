//! The GC task: removes dead containers and sandboxes ([`gc::collect`]
//! decides which), the log directories of pods that are gone, and stale pod
//! cgroups. Its first pass runs soon after start, to clean up what a
//! previous run left.
//!
//! Nothing of a pod is removed before the source it came from is ready
//! (see `sources.rs`): such pods count as live here. Log directories and
//! cgroups carry no source, so they wait until every source is ready. This
//! file must not decide what to remove; it only asks and executes.

use std::collections::HashSet;
use std::fs;
use std::rc::Rc;
use std::time::Duration;

use crate::agent::host_files::remove_dir_logged;
use crate::agent::Agent;
use crate::cri::{api, RuntimeService};
use crate::gc;
use crate::rt;

const GC_PERIOD: Duration = Duration::from_secs(60);
const GC_FIRST: Duration = Duration::from_secs(10);

impl<R: RuntimeService> Agent<R> {
    pub(in crate::agent) async fn gc_loop(self: Rc<Self>) {
        rt::sleep(GC_FIRST).await;
        loop {
            self.collect_garbage().await;
            rt::sleep(GC_PERIOD).await;
        }
    }

    /// One GC pass over the last relist.
    pub async fn collect_garbage(&self) {
        let mut live: HashSet<String> = self
            .pods
            .borrow()
            .iter()
            .filter(|(_, e)| e.lifecycle.is_wanted())
            .map(|(u, _)| u.clone())
            .collect();
        // A pod whose source has not spoken yet may still be wanted.
        let runtime_pods: Vec<String> = {
            let rl = self.relist.borrow();
            rl.sandboxes
                .iter()
                .map(|s| s.pod_uid.clone())
                .chain(rl.containers.iter().map(|c| c.pod_uid.clone()))
                .collect()
        };
        for uid in runtime_pods {
            if !live.contains(&uid) && !self.may_remove(&uid) {
                live.insert(uid);
            }
        }
        let removals = {
            let rl = self.relist.borrow();
            gc::collect(&rl.sandboxes, &rl.containers, &live)
        };
        for r in removals {
            match r {
                gc::Removal::Container { id, .. } => self.remove_container(id).await,
                gc::Removal::Sandbox { id, pod_uid } => {
                    log::debug!("GC: removing sandbox {id} of pod {pod_uid}");
                    let req = api::RemovePodSandboxRequest { pod_sandbox_id: id };
                    if let Err(e) = self.runtime.remove_pod_sandbox(req).await {
                        if !e.is_not_found() {
                            log::warn!("GC: {e}");
                        }
                    }
                }
            }
        }
        if !self.all_sources_ready() {
            return;
        }
        // Log directories and cgroups of pods that exist nowhere.
        let known: HashSet<String> = {
            let rl = self.relist.borrow();
            rl.sandboxes
                .iter()
                .map(|s| s.pod_uid.clone())
                .chain(live.iter().cloned())
                .collect()
        };
        let unknown = |uid: &str| !known.contains(uid) && self.pods.borrow().get(uid).is_none();
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
        if let Some(cg) = &self.cgroups {
            if let Ok(list) = cg.list_pods() {
                for (qos, uid) in list {
                    if unknown(&uid) {
                        let _ = cg.remove_pod(&uid, qos);
                    }
                }
            }
        }
    }

    /// Removes a dead container and the log file the runtime leaves behind
    /// (GC, and the pod worker's pruning of init containers).
    pub(in crate::agent) async fn remove_container(&self, id: String) {
        log::debug!("GC: removing dead container {id}");
        let log_path = match self
            .runtime
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
        match self.runtime.remove_container(req).await {
            Err(e) if !e.is_not_found() => log::warn!("GC: {e}"),
            _ => {
                if let Some(p) = log_path {
                    let _ = fs::remove_file(&p);
                }
            }
        }
    }
}
