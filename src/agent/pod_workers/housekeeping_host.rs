//! The pod workers' answers to housekeeping: [`HousekeepingHost`] for
//! [`PodWorkers`]. Each answer reads or changes the pod registry (the
//! pods, their lifecycle, the last relist, the sources' readiness) on
//! housekeeping's behalf, so `housekeeping/` never touches the registry
//! itself; the wiring hands the pod workers to housekeeping's loops as
//! their host.

use std::collections::HashSet;
use std::path::PathBuf;
use std::rc::Rc;

use k8s_openapi::api::core::v1::Pod;

use super::housekeeping::{Candidate, HousekeepingHost, NodeCapacity};
use super::lifecycle::Evicted;
use super::PodWorkers;
use crate::cgroups::PodCgroups;
use crate::cri::RuntimeService;
use crate::node::eviction::{Conditions, Signal};
use crate::pleg::State;
use crate::pod::{accessors, facts, spec};

impl<R: RuntimeService> HousekeepingHost for PodWorkers<R> {
    type Runtime = R;

    fn runtime(&self) -> &R {
        &self.runtime
    }

    fn cgroups(&self) -> Option<&PodCgroups> {
        self.cgroups.as_ref()
    }

    fn node_capacity(&self) -> NodeCapacity {
        NodeCapacity {
            cpu_millis: self.node.borrow().cpu_millis,
            memory_bytes: self.host.node_memory,
            allocatable_memory_bytes: self.host.allocatable.memory_bytes,
        }
    }

    fn eviction_candidates(&self) -> Vec<Candidate> {
        self.pods
            .borrow()
            .iter()
            // Every pod that runs or is starting (its sandbox not observed
            // yet): a pod whose first containers are filling memory may not
            // have been observed by the time a notified pass ranks.
            .filter(|(_, e)| {
                e.lifecycle.should_run()
                    && (e.observed.is_active() || e.observed.sandboxes.is_empty())
            })
            .map(|(uid, e)| Candidate {
                uid: uid.clone(),
                pod: e.pod.clone(),
                cgroup: super::start::cgroup_parent(&e.pod, self.cgroups.as_ref()),
            })
            .collect()
    }

    fn evicted_pod_stopping(&self, after_unix: i64) -> bool {
        self.pods.borrow().values().any(|e| {
            e.lifecycle
                .evicted()
                .is_some_and(|ev| e.observed.is_active() && ev.at_unix > after_unix)
        })
    }

    fn evict(&self, uid: &str, eviction: Evicted, signal: Signal) {
        {
            let mut pods = self.pods.borrow_mut();
            let Some(e) = pods.get_mut(uid) else {
                return;
            };
            self.event(&e.pod, None, true, "Evicted", &eviction.message);
            self.kubelet_metrics.borrow_mut().evicted(signal.as_str());
            e.lifecycle.evict(eviction);
        }
        self.wake(uid);
    }

    fn readmit_static_pods(&self, now: Conditions) {
        let back: Vec<String> = {
            let mut pods = self.pods.borrow_mut();
            pods.iter_mut()
                .filter(|(_, e)| facts::is_critical(&e.pod))
                .filter_map(|(uid, e)| {
                    let condition = e.lifecycle.readmit(|c| now.get(c))?;
                    log::info!(
                        "eviction: {} is over; starting static pod {} again",
                        condition.as_str(),
                        accessors::full_name(&e.pod)
                    );
                    Some(uid.clone())
                })
                .collect()
        };
        for uid in back {
            self.wake(&uid);
        }
    }

    fn requesting_pods(&self) -> Vec<Rc<Pod>> {
        self.pods
            .borrow()
            .values()
            .filter(|e| e.lifecycle.requests_count(e.observed.is_active()))
            .map(|e| e.pod.clone())
            .collect()
    }

    fn running_container_logs(&self) -> Vec<(String, PathBuf)> {
        let pods = self.pods.borrow();
        pods.values()
            .flat_map(|e| {
                let dir = facts::log_dir(&self.cfg.pod_logs_dir, &e.pod);
                e.observed
                    .containers
                    .iter()
                    .filter(|c| c.state == State::Running)
                    .map(move |c| {
                        (
                            c.id.clone(),
                            dir.join(spec::container_log_path(&c.name, c.attempt)),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn wanted_pods(&self) -> HashSet<String> {
        self.pods
            .borrow()
            .iter()
            .filter(|(_, e)| e.lifecycle.is_wanted())
            .map(|(u, _)| u.clone())
            .collect()
    }

    fn knows_pod(&self, uid: &str) -> bool {
        self.pods.borrow().contains_key(uid)
    }

    fn may_remove(&self, uid: &str) -> bool {
        PodWorkers::may_remove(self, uid)
    }

    fn all_sources_ready(&self) -> bool {
        PodWorkers::all_sources_ready(self)
    }

    fn with_relist<T>(
        &self,
        f: impl FnOnce(&[crate::gc::Sandbox], &[crate::gc::Container]) -> T,
    ) -> T {
        let rl = self.relist.borrow();
        f(&rl.sandboxes, &rl.containers)
    }
}
