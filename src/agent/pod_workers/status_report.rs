//! Status assembly: each pod's v1 `PodStatus` ([`status::pod_status`]
//! computes it) from the pod workers' records, what the [`StatusSink`]
//! is told, plus the pod list and the metrics families the pod workers
//! record, for the read-only views. Nothing here changes a pod; the views
//! and the API-server status sync read pods through these answers, never
//! the registry itself.

use std::collections::HashMap;
use std::rc::Rc;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};

use super::{now_unix_nanos, PodEntry, PodWorkers, StatusSink};
use crate::cri::RuntimeService;
use crate::pod::{facts, RuntimeResources};
use crate::status::{self, Waiting};

/// kubelet's status of a pod evicted for node pressure: phase Failed,
/// reason `Evicted`, the message, and the `DisruptionTarget` condition
/// (reason `TerminationByKubelet`).
fn evicted_status(st: &mut PodStatus, message: &str, at_unix: i64, generation: Option<i64>) {
    st.phase = Some("Failed".into());
    st.reason = Some("Evicted".into());
    st.message = Some(message.to_string());
    let conditions = st.conditions.get_or_insert_with(Vec::new);
    if !conditions.iter().any(|c| c.type_ == "DisruptionTarget") {
        conditions.push(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some("TerminationByKubelet".into()),
            message: Some(message.to_string()),
            last_transition_time: Some(status::time_from_unix(at_unix)),
            observed_generation: generation.filter(|g| *g != 0),
            ..Default::default()
        });
    }
}

impl<R: RuntimeService> PodWorkers<R> {
    /// Sends every pod's status to `sink` from now on (the API-server
    /// status sync). Set once, before `Agent::run`.
    pub fn set_status_sink(&self, sink: Rc<dyn StatusSink>) {
        *self.status_sink.borrow_mut() = Some(sink);
    }

    /// Tells the sink the pod's status after a sync.
    pub(super) fn report_status(&self, uid: &str) {
        let Some(sink) = self.status_sink.borrow().clone() else {
            return;
        };
        let (pod, status) = {
            let pods = self.pods.borrow();
            let Some(e) = pods.get(uid) else { return };
            (e.pod.clone(), self.pod_status(e))
        };
        sink.status(&pod, &status);
    }

    /// Tells the sink that admission refused these pods: phase Failed, with
    /// kubelet's reason and message (`Pod was rejected: ...`).
    pub(super) fn report_refused(&self, refused: &[(Rc<Pod>, crate::pod::admission::Rejection)]) {
        let Some(sink) = self.status_sink.borrow().clone() else {
            return;
        };
        for (pod, why) in refused {
            let qos = facts::qos(pod);
            sink.status(
                pod,
                &status::refused_status(&why.reason, &why.message, qos.as_str()),
            );
        }
    }

    /// Tells the sink that these refused pods, whose deletion was asked,
    /// are finished (they never ran).
    pub(super) fn report_refused_deleted(
        &self,
        refused: &[(Rc<Pod>, crate::pod::admission::Rejection)],
    ) {
        for (pod, why) in refused {
            let qos = facts::qos(pod);
            let status = status::refused_status(&why.reason, &why.message, qos.as_str());
            self.report_terminated(pod, &status);
        }
    }

    /// Tells the sink that the pod is terminated and forgotten; `status` was
    /// computed before its entry went.
    pub(super) fn report_terminated(&self, pod: &Pod, status: &PodStatus) {
        if let Some(sink) = self.status_sink.borrow().clone() {
            sink.terminated(pod, status);
        }
    }

    /// What the pod's cgroup holds, converted as kubelet converts it
    /// (`GetPodCgroupConfig`, then `CPURequestsFromConfig`,
    /// `CPULimitsFromConfig`, `MemoryLimitsFromConfig`); `None` without pod
    /// cgroups, and each value `None` when its files cannot be read (the
    /// pod cgroup is made with the sandbox and goes with the pod).
    fn pod_cgroup_resources(&self, pod: &Pod) -> Option<RuntimeResources> {
        let cg = self.cgroups.as_ref().filter(|cg| cg.per_qos())?;
        let path = super::start::cgroup_parent(pod, Some(cg));
        let cpu = cg.read_cpu_config(&path).ok();
        let memory = cg.read_memory_limit_raw(&path).ok().flatten();
        let as_i64 = |v: u64| i64::try_from(v).unwrap_or(-1);
        RuntimeResources::from_runtime(
            cpu.map_or(0, |c| as_i64(c.period_us)),
            cpu.and_then(|c| c.quota_us).map_or(-1, as_i64),
            cpu.map_or(0, |c| as_i64(c.shares)),
            memory.map_or(0, as_i64),
        )
    }

    /// The status of one pod right now.
    pub(super) fn pod_status(&self, e: &PodEntry) -> PodStatus {
        let mut waiting: HashMap<String, Waiting> = HashMap::new();
        let mut readiness: HashMap<String, bool> = HashMap::new();
        let mut started: HashMap<String, bool> = HashMap::new();
        for (name, c) in e.containers.iter() {
            if let Some(w) = &c.waiting {
                waiting.insert(name.clone(), w.clone());
            }
            if let Some(r) = c.ready {
                readiness.insert(name.clone(), r);
            }
            if let Some(s) = c.started {
                started.insert(name.clone(), s);
            }
        }
        let runtime_name = self.runtime_name.borrow();
        let now_unix = now_unix_nanos() / 1_000_000_000;
        let mut st = status::pod_status(&status::StatusInput {
            pod: &e.pod,
            observed: &e.observed,
            waiting: &waiting,
            readiness: &readiness,
            started: &started,
            host_ips: &self.host.host_ips,
            qos_class: facts::qos(&e.pod).as_str(),
            start_time_unix: Some(e.first_seen_unix),
            terminating: e.lifecycle.is_deleted(),
            now_unix,
            runtime_name: &runtime_name,
            pod_cgroup: self.pod_cgroup_resources(&e.pod),
        });
        match e.lifecycle.evicted() {
            Some(ev) if ev.condition.is_none() => {
                // kubelet's active deadline handler: Failed, its reason.
                st.phase = Some(status::FAILED.into());
                st.reason = Some(facts::DEADLINE_EXCEEDED.into());
                st.message = Some(ev.message.clone());
            }
            Some(ev) => evicted_status(&mut st, &ev.message, ev.at_unix, e.pod.metadata.generation),
            None => {}
        }
        if let Some(conditions) = st.conditions.as_mut() {
            let mut t = e.transitions.get();
            t.stamp(conditions, now_unix);
            e.transitions.set(t);
        }
        // Say why picolet killed a container (probe failure, hook failure).
        for cs in st.container_statuses.iter_mut().flatten() {
            let Some(entry) = e.containers.get(&cs.name) else {
                continue;
            };
            for state in [cs.state.as_mut(), cs.last_state.as_mut()]
                .into_iter()
                .flatten()
            {
                if let Some(t) = state.terminated.as_mut() {
                    let id = t
                        .container_id
                        .as_deref()
                        .and_then(|i| i.split_once("://").map(|(_, i)| i))
                        .unwrap_or("");
                    if let Some((_, m)) = entry.killed.iter().find(|(k, _)| k == id) {
                        t.message = Some(m.clone());
                    }
                }
            }
        }
        st
    }

    /// Every pod with its status, as a v1 PodList; pods refused at
    /// admission are listed with phase Failed and kubelet's reason.
    pub(in crate::agent) fn pod_list(&self) -> serde_json::Value {
        let pods = self.pods.borrow();
        let refused: Vec<serde_json::Value> = self
            .sources
            .borrow()
            .refused
            .values()
            .filter(|(p, _)| !pods.contains_key(crate::pod::uid(p)))
            .map(|(p, why)| {
                let mut p = (**p).clone();
                let qos = facts::qos(&p);
                p.status = Some(status::refused_status(
                    &why.reason,
                    &why.message,
                    qos.as_str(),
                ));
                crate::pod::to_json_value(&p).unwrap_or(serde_json::Value::Null)
            })
            .collect();
        let items: Vec<serde_json::Value> = pods
            .values()
            .map(|e| {
                let mut p = (*e.pod).clone();
                p.status = Some(self.pod_status(e));
                if p.metadata.creation_timestamp.is_none() {
                    p.metadata.creation_timestamp = Some(status::time_from_unix(e.first_seen_unix));
                }
                if e.lifecycle.is_deleted() && p.metadata.deletion_timestamp.is_none() {
                    p.metadata.deletion_timestamp =
                        Some(status::time_from_unix(now_unix_nanos() / 1_000_000_000));
                }
                crate::pod::to_json_value(&p).unwrap_or(serde_json::Value::Null)
            })
            .chain(refused)
            .collect();
        serde_json::json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items})
    }

    /// `/metrics/probes`: the prober's counters.
    pub(in crate::agent) fn probe_metrics_text(&self) -> String {
        let mut out = String::new();
        self.render_probe_metrics(&mut out);
        out
    }

    /// Appends the prober's counters (the start of `/metrics`).
    pub(in crate::agent) fn render_probe_metrics(&self, out: &mut String) {
        self.probe_metrics.borrow().render(out);
    }

    /// kubelet's families: what was recorded, and the last relist's
    /// sandboxes and containers counted now.
    pub(in crate::agent) fn render_kubelet_metrics(&self, out: &mut String) {
        use crate::node::kubelet_metrics::{render, Scrape};
        use crate::pleg::State;
        let relist = self.relist.borrow();
        let mut containers = [0u64; 4];
        for c in &relist.containers {
            let i = match c.state {
                State::Created => 0,
                State::Running => 1,
                State::Exited => 2,
                State::Unknown => 3,
            };
            containers[i] += 1;
        }
        let scrape = Scrape {
            node_name: &self.cfg.node_name,
            running_pods: relist.sandboxes.iter().filter(|s| s.ready).count() as u64,
            containers,
            runtime_operations: self
                .runtime
                .cri()
                .map(|r| r.operations())
                .unwrap_or_default(),
        };
        render(out, &self.kubelet_metrics.borrow(), &scrape);
    }
}
