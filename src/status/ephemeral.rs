//! `status.ephemeralContainerStatuses`: one status per ephemeral container
//! (`kubectl debug`), as kubelet's `convertToAPIContainerStatuses` writes
//! them: waiting (`ContainerCreating`, or `PodInitializing` in a pod with
//! init containers, or why its start failed), running, or terminated with
//! its exit code, like an app container's.
//!
//! What differs, as in kubelet: an ephemeral container is never restarted,
//! so an exited one always reads terminated, whatever the pod's
//! `restartPolicy`; no probe manager looks at it, so it is never `ready`
//! and has no `started`. It counts for no phase or condition: the caller
//! adds these statuses beside the others and computes nothing from them.
//!
//! Kept apart from `status.rs` so that the rules for app containers and
//! these stay one function call apart.

use k8s_openapi::api::core::v1::ContainerStatus;

use super::{container_status, StatusInput};
use crate::pleg::State;
use crate::pod::accessors::{ephemeral_as_container, ephemeral_containers, init_containers};

/// The pod's ephemeral container statuses, in spec order; `None` when it
/// has no ephemeral containers.
pub(super) fn ephemeral_container_statuses(input: &StatusInput) -> Option<Vec<ContainerStatus>> {
    let specs = ephemeral_containers(input.pod);
    if specs.is_empty() {
        return None;
    }
    let default_reason = if init_containers(input.pod).is_empty() {
        "ContainerCreating"
    } else {
        "PodInitializing"
    };
    let no_waiting = std::collections::HashMap::new();
    let statuses = specs
        .iter()
        .map(|ec| {
            let c = ephemeral_as_container(ec);
            // Exited for good: a waiting reason left from before does not
            // turn it into a restart.
            let exited = input
                .observed
                .latest(&c.name)
                .is_some_and(|o| o.state == State::Exited);
            let input = StatusInput {
                waiting: if exited { &no_waiting } else { input.waiting },
                ..*input
            };
            let mut status = container_status(&input, &c, false, default_reason);
            status.ready = false;
            status.started = None;
            status
        })
        .collect();
    Some(statuses)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use k8s_openapi::api::core::v1::Pod;

    use super::*;
    use crate::pod::{ObservedContainer, ObservedPod, ObservedSandbox};
    use crate::status::Waiting;

    fn pod(init: bool) -> Pod {
        let inits = if init {
            "  initContainers: [{name: i1, image: busybox}]\n"
        } else {
            ""
        };
        serde_yaml_ng::from_str(&format!("metadata: {{name: p, uid: u1}}\nspec:\n  restartPolicy: Always\n{inits}  containers: [{{name: a, image: busybox}}]\n  ephemeralContainers: [{{name: debugger, image: busybox, targetContainerName: a}}]\n")).unwrap()
    }

    fn debugger(state: State, exit_code: i32) -> ObservedContainer {
        ObservedContainer {
            id: "d0".into(),
            sandbox_id: "s0".into(),
            name: "debugger".into(),
            state,
            exit_code,
            started_at: 101_000_000_000,
            finished_at: if state == State::Exited {
                102_000_000_000
            } else {
                0
            },
            ..Default::default()
        }
    }

    fn statuses(
        pod: &Pod,
        containers: Vec<ObservedContainer>,
        waiting: &HashMap<String, Waiting>,
    ) -> Option<Vec<ContainerStatus>> {
        let observed = ObservedPod {
            sandboxes: vec![ObservedSandbox {
                id: "s0".into(),
                ready: true,
                ..Default::default()
            }],
            containers,
        };
        let none = HashMap::new();
        let input = StatusInput {
            pod,
            observed: &observed,
            waiting,
            readiness: &none,
            started: &none,
            runtime_name: "containerd",
            host_ips: &[],
            qos_class: "BestEffort",
            start_time_unix: None,
            terminating: false,
            pod_cgroup: None,
            now_unix: 0,
        };
        ephemeral_container_statuses(&input)
    }

    fn only(s: Option<Vec<ContainerStatus>>) -> ContainerStatus {
        let mut s = s.expect("ephemeral statuses");
        assert_eq!(s.len(), 1);
        s.remove(0)
    }

    #[test]
    fn a_pod_without_ephemeral_containers_reports_none() {
        let p: Pod = serde_yaml_ng::from_str("spec:\n  containers: [{name: a}]\n").unwrap();
        assert_eq!(statuses(&p, vec![], &HashMap::new()), None);
    }

    #[test]
    fn a_new_ephemeral_container_waits_with_kubelets_default_reason() {
        for (init, reason) in [(false, "ContainerCreating"), (true, "PodInitializing")] {
            let s = only(statuses(&pod(init), vec![], &HashMap::new()));
            assert_eq!(s.name, "debugger");
            assert_eq!(s.image, "busybox");
            let w = s.state.and_then(|st| st.waiting).expect("waiting");
            assert_eq!(w.reason.as_deref(), Some(reason));
            assert!(!s.ready);
            assert_eq!(s.started, None);
        }
    }

    #[test]
    fn a_failed_start_is_reported_as_its_waiting_reason() {
        let mut waiting = HashMap::new();
        waiting.insert(
            "debugger".to_string(),
            Waiting {
                reason: "ErrImagePull".into(),
                message: "not found".into(),
            },
        );
        let s = only(statuses(&pod(false), vec![], &waiting));
        let w = s.state.and_then(|st| st.waiting).expect("waiting");
        assert_eq!(w.reason.as_deref(), Some("ErrImagePull"));
    }

    #[test]
    fn a_running_ephemeral_container_is_running_but_never_ready() {
        let s = only(statuses(
            &pod(false),
            vec![debugger(State::Running, 0)],
            &HashMap::new(),
        ));
        assert!(s.state.and_then(|st| st.running).is_some());
        assert_eq!(s.container_id.as_deref(), Some("containerd://d0"));
        assert!(!s.ready);
        assert_eq!(s.started, None);
    }

    #[test]
    fn an_exited_ephemeral_container_is_terminated_with_its_exit_code_even_under_restart_policy_always(
    ) {
        let mut waiting = HashMap::new();
        waiting.insert(
            "debugger".to_string(),
            Waiting {
                reason: "CrashLoopBackOff".into(),
                message: "stale".into(),
            },
        );
        for code in [0, 3] {
            let s = only(statuses(
                &pod(false),
                vec![debugger(State::Exited, code)],
                &waiting,
            ));
            let t = s.state.and_then(|st| st.terminated).expect("terminated");
            assert_eq!(t.exit_code, code);
            assert_eq!(s.restart_count, 0);
            assert!(!s.ready);
        }
    }
}
