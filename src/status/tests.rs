//! Unit tests of `status`: phases, conditions and container statuses case
//! by case, sidecars and refused pods included.

use super::*;
use crate::pod::ObservedSandbox;

fn pod(yaml: &str) -> Pod {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn simple(policy: &str) -> Pod {
    pod(&format!(
            "metadata: {{name: p, uid: u1}}\nspec:\n  restartPolicy: {policy}\n  containers:\n  - {{name: a, image: busybox}}\n  - {{name: b, image: nginx}}\n"
        ))
}

fn with_init() -> Pod {
    pod("metadata: {name: p, uid: u1}\nspec:\n  initContainers:\n  - {name: i1, image: busybox}\n  - {name: i2, image: busybox}\n  containers:\n  - {name: a, image: busybox}\n")
}

fn sandbox(ready: bool) -> ObservedSandbox {
    ObservedSandbox {
        id: "s0".into(),
        attempt: 0,
        ready,
        created_at: 1,
        ip: "10.88.0.5".into(),
        additional_ips: vec!["fd00::5".into()],
    }
}

const SEC: i64 = 1_000_000_000;

fn container(name: &str, attempt: u32, state: State, exit_code: i32) -> ObservedContainer {
    ObservedContainer {
        id: format!("{name}-{attempt}"),
        sandbox_id: "s0".into(),
        name: name.into(),
        attempt,
        state,
        exit_code,
        created_at: (100 + attempt as i64) * SEC,
        started_at: (101 + attempt as i64) * SEC,
        finished_at: if state == State::Exited {
            (102 + attempt as i64) * SEC
        } else {
            0
        },
        image_ref: "sha256:abc".into(),
        ..Default::default()
    }
}

fn observed(ready: bool, containers: Vec<ObservedContainer>) -> ObservedPod {
    let mut o = ObservedPod {
        sandboxes: vec![sandbox(ready)],
        containers,
    };
    o.normalize();
    o
}

struct Facts {
    waiting: HashMap<String, Waiting>,
    readiness: HashMap<String, bool>,
    started: HashMap<String, bool>,
    terminating: bool,
    host_ips: Vec<String>,
}

impl Facts {
    fn new() -> Self {
        Facts {
            waiting: HashMap::new(),
            readiness: HashMap::new(),
            started: HashMap::new(),
            terminating: false,
            host_ips: vec!["192.168.1.10".into()],
        }
    }
    fn wait(mut self, name: &str, reason: &str, message: &str) -> Self {
        self.waiting.insert(
            name.into(),
            Waiting {
                reason: reason.into(),
                message: message.into(),
            },
        );
        self
    }
    fn status(&self, pod: &Pod, observed: &ObservedPod) -> PodStatus {
        pod_status(&StatusInput {
            pod,
            observed,
            waiting: &self.waiting,
            readiness: &self.readiness,
            started: &self.started,
            runtime_name: "containerd",
            host_ips: &self.host_ips,
            qos_class: "BestEffort",
            start_time_unix: Some(1_700_000_000),
            terminating: self.terminating,
            pod_cgroup: None,
            now_unix: 1_700_000_100,
        })
    }
}

fn cond<'a>(s: &'a PodStatus, t: &str) -> &'a PodCondition {
    s.conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == t)
        .unwrap()
}

fn cs<'a>(s: &'a PodStatus, name: &str) -> &'a ContainerStatus {
    s.container_statuses
        .iter()
        .chain(s.init_container_statuses.iter())
        .flatten()
        .find(|c| c.name == name)
        .unwrap()
}

fn waiting_reason(c: &ContainerStatus) -> &str {
    c.state
        .as_ref()
        .unwrap()
        .waiting
        .as_ref()
        .unwrap()
        .reason
        .as_deref()
        .unwrap()
}

#[test]
fn a_running_pod_is_ready_with_ips_and_container_ids() {
    let p = simple("Always");
    let o = observed(
        true,
        vec![
            container("a", 0, State::Running, 0),
            container("b", 0, State::Running, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.phase.as_deref(), Some("Running"));
    let types: Vec<&str> = s
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(
        types,
        [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled"
        ]
    );
    assert!(s
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .all(|c| c.status == "True"));
    assert_eq!(s.pod_ip.as_deref(), Some("10.88.0.5"));
    assert_eq!(s.pod_ips.as_ref().unwrap().len(), 2);
    assert_eq!(s.host_ip.as_deref(), Some("192.168.1.10"));
    assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
    let a = cs(&s, "a");
    assert!(a.ready);
    assert_eq!(a.started, Some(true));
    assert_eq!(a.image, "busybox");
    assert_eq!(a.image_id, "sha256:abc");
    assert_eq!(a.container_id.as_deref(), Some("containerd://a-0"));
    let running = a.state.as_ref().unwrap().running.as_ref().unwrap();
    assert_eq!(running.started_at.as_ref().unwrap().0.as_second(), 101);
    assert!(a.last_state.is_none());
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["startTime"], "2023-11-14T22:13:20Z");
}

#[test]
fn a_failing_readiness_probe_makes_ready_false_with_the_container_named() {
    let p = simple("Always");
    let o = observed(
        true,
        vec![
            container("a", 0, State::Running, 0),
            container("b", 0, State::Running, 0),
        ],
    );
    let mut f = Facts::new();
    f.readiness.insert("b".into(), false);
    let s = f.status(&p, &o);
    assert_eq!(s.phase.as_deref(), Some("Running"));
    let ready = cond(&s, "Ready");
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some("containers with unready status: [b]")
    );
    assert_eq!(cond(&s, "ContainersReady").status, "False");
    assert!(!cs(&s, "b").ready);
    assert!(cs(&s, "a").ready);
}

#[test]
fn readiness_gates_keep_the_pod_unready_until_each_condition_is_true() {
    let gated = |conditions: &str| {
        pod(&format!(
            "metadata: {{name: p, uid: u1}}\nspec:\n  readinessGates: [{{conditionType: example.com/a}}, {{conditionType: example.com/b}}]\n  containers:\n  - {{name: a, image: busybox}}\nstatus: {{conditions: [{conditions}]}}\n"
        ))
    };
    let running = observed(true, vec![container("a", 0, State::Running, 0)]);
    let f = Facts::new();
    let cases = [
        (
            "",
            "False",
            Some("corresponding condition of pod readiness gate \"example.com/a\" does not exist., corresponding condition of pod readiness gate \"example.com/b\" does not exist."),
        ),
        (
            "{type: example.com/a, status: 'True'}, {type: example.com/b, status: 'False'}",
            "False",
            Some("the status of pod readiness gate \"example.com/b\" is not \"True\", but False"),
        ),
        (
            "{type: example.com/a, status: 'True'}, {type: example.com/b, status: 'True'}",
            "True",
            None,
        ),
    ];
    for (conditions, want, message) in cases {
        let s = f.status(&gated(conditions), &running);
        let ready = cond(&s, "Ready");
        assert_eq!(ready.status, want, "{conditions}");
        assert_eq!(ready.message.as_deref(), message, "{conditions}");
        let reason = message.map(|_| "ReadinessGatesNotReady");
        assert_eq!(ready.reason.as_deref(), reason, "{conditions}");
        assert_eq!(cond(&s, "ContainersReady").status, "True");
        assert!(
            !s.conditions
                .as_ref()
                .unwrap()
                .iter()
                .any(|c| c.type_.starts_with("example.com")),
            "the gates' conditions are the controller's, not reported by the node"
        );
    }
    // Unready containers say so first, as kubelet does.
    let mut f = Facts::new();
    f.readiness.insert("a".into(), false);
    let s = f.status(&gated(""), &running);
    assert_eq!(
        cond(&s, "Ready").reason.as_deref(),
        Some("ContainersNotReady")
    );
}

#[test]
fn a_pending_startup_probe_keeps_the_container_unready() {
    let p = simple("Always");
    let o = observed(
        true,
        vec![
            container("a", 0, State::Running, 0),
            container("b", 0, State::Running, 0),
        ],
    );
    let mut f = Facts::new();
    f.started.insert("a".into(), false);
    let s = f.status(&p, &o);
    let a = cs(&s, "a");
    assert_eq!(a.started, Some(false));
    assert!(!a.ready);
}

#[test]
fn a_terminating_pod_is_not_ready() {
    let p = simple("Always");
    let o = observed(
        true,
        vec![
            container("a", 0, State::Running, 0),
            container("b", 0, State::Running, 0),
        ],
    );
    let mut f = Facts::new();
    f.terminating = true;
    let s = f.status(&p, &o);
    assert_eq!(cond(&s, "Ready").status, "False");
    assert_eq!(cond(&s, "ContainersReady").status, "True");
}

#[test]
fn a_crash_loop_shows_waiting_crash_loop_back_off_and_the_last_exit_code() {
    let p = simple("Always");
    let mut dead = container("a", 3, State::Exited, 2);
    dead.message = "boom".into();
    let o = observed(
        true,
        vec![
            dead,
            container("a", 2, State::Exited, 1),
            container("b", 0, State::Running, 0),
        ],
    );
    let msg = "back-off 20s restarting failed container=a pod=p_default(u1)";
    let s = Facts::new()
        .wait("a", "CrashLoopBackOff", msg)
        .status(&p, &o);
    let a = cs(&s, "a");
    assert_eq!(waiting_reason(a), "CrashLoopBackOff");
    assert_eq!(
        a.state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .message
            .as_deref(),
        Some(msg)
    );
    let last = a.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(last.exit_code, 2);
    assert_eq!(last.reason.as_deref(), Some("Error"));
    assert_eq!(last.message.as_deref(), Some("boom"));
    assert_eq!(last.container_id.as_deref(), Some("containerd://a-3"));
    assert_eq!(last.finished_at.as_ref().unwrap().0.as_second(), 105);
    assert_eq!(a.restart_count, 3);
    assert!(!a.ready);
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(
        cond(&s, "Ready").message.as_deref(),
        Some("containers with unready status: [a]")
    );
}

#[test]
fn an_exited_container_about_to_restart_shows_terminated_and_the_previous_attempt() {
    let p = simple("Always");
    let o = observed(
        true,
        vec![
            container("a", 1, State::Exited, 1),
            container("a", 0, State::Exited, 7),
        ],
    );
    let s = Facts::new().status(&p, &o);
    let a = cs(&s, "a");
    assert_eq!(
        a.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        1
    );
    assert_eq!(
        a.last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        7
    );
}

#[test]
fn a_running_container_whose_previous_attempt_was_removed_has_no_last_state() {
    let p = simple("Always");
    let o = observed(
        true,
        vec![
            container("a", 4, State::Running, 0),
            container("b", 0, State::Running, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    let a = cs(&s, "a");
    assert!(a.last_state.is_none());
    assert_eq!(a.restart_count, 4);
}

#[test]
fn restart_count_is_the_latest_attempt_number() {
    let p = simple("Always");
    let o = observed(
        true,
        vec![
            container("a", 2, State::Running, 0),
            container("a", 1, State::Exited, 137),
            container("b", 0, State::Running, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    assert_eq!(cs(&s, "a").restart_count, 2);
    assert_eq!(cs(&s, "b").restart_count, 0);
    assert_eq!(
        cs(&s, "a")
            .last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        137
    );
}

#[test]
fn a_completed_never_pod_succeeded() {
    let p = simple("Never");
    let o = observed(
        false,
        vec![
            container("a", 0, State::Exited, 0),
            container("b", 0, State::Exited, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    let a = cs(&s, "a");
    assert_eq!(
        a.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("Completed")
    );
    assert_eq!(cond(&s, "Ready").reason.as_deref(), Some("PodCompleted"));
    assert_eq!(cond(&s, "PodReadyToStartContainers").status, "False");
    assert!(s.pod_ip.is_none());
}

#[test]
fn a_completed_on_failure_pod_succeeded() {
    let p = simple("OnFailure");
    let o = observed(
        false,
        vec![
            container("a", 0, State::Exited, 0),
            container("b", 1, State::Exited, 0),
        ],
    );
    assert_eq!(
        Facts::new().status(&p, &o).phase.as_deref(),
        Some("Succeeded")
    );
}

#[test]
fn a_failed_never_pod_failed() {
    let p = simple("Never");
    let mut oom = container("b", 0, State::Exited, 137);
    oom.reason = "OOMKilled".into();
    let o = observed(false, vec![container("a", 0, State::Exited, 0), oom]);
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    let b = cs(&s, "b");
    assert_eq!(
        b.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("OOMKilled")
    );
    assert_eq!(
        cond(&s, "ContainersReady").reason.as_deref(),
        Some("PodFailed")
    );
}

#[test]
fn an_all_terminated_always_pod_is_running_while_it_restarts() {
    let p = simple("Always");
    let o = observed(
        true,
        vec![
            container("a", 0, State::Exited, 0),
            container("b", 0, State::Exited, 1),
        ],
    );
    assert_eq!(
        Facts::new().status(&p, &o).phase.as_deref(),
        Some("Running")
    );
}

#[test]
fn a_failed_init_container_under_never_fails_the_pod() {
    let mut p = with_init();
    p.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    let o = observed(false, vec![container("i1", 0, State::Exited, 1)]);
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    let init = cond(&s, "Initialized");
    assert_eq!(init.status, "False");
    assert_eq!(
        init.message.as_deref(),
        Some("containers with incomplete status: [i1 i2]")
    );
}

#[test]
fn a_pending_init_container_keeps_app_containers_pod_initializing() {
    let p = with_init();
    let o = observed(
        true,
        vec![
            container("i1", 0, State::Exited, 0),
            container("i2", 0, State::Running, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    let inits = s.init_container_statuses.as_ref().unwrap();
    assert_eq!(
        inits.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["i1", "i2"]
    );
    assert!(inits[0].ready);
    assert!(inits[1].state.as_ref().unwrap().running.is_some());
    assert_eq!(waiting_reason(cs(&s, "a")), "PodInitializing");
    let init = cond(&s, "Initialized");
    assert_eq!(init.status, "False");
    assert_eq!(init.reason.as_deref(), Some("ContainersNotInitialized"));
    assert_eq!(
        init.message.as_deref(),
        Some("containers with incomplete status: [i2]")
    );
}

#[test]
fn init_containers_not_yet_started_wait_in_pod_initializing() {
    let p = with_init();
    let o = ObservedPod::default();
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    assert_eq!(waiting_reason(cs(&s, "i1")), "PodInitializing");
    assert_eq!(waiting_reason(cs(&s, "a")), "PodInitializing");
    assert!(s.pod_ip.is_none());
}

#[test]
fn an_initialized_pod_creating_app_containers_shows_container_creating() {
    let p = with_init();
    let o = observed(
        true,
        vec![
            container("i1", 0, State::Exited, 0),
            container("i2", 0, State::Exited, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    assert_eq!(waiting_reason(cs(&s, "a")), "ContainerCreating");
    assert_eq!(cond(&s, "Initialized").status, "True");
    assert_eq!(s.phase.as_deref(), Some("Pending"));
}

#[test]
fn an_image_pull_error_shows_err_image_pull() {
    let p = simple("Always");
    let o = observed(true, vec![container("b", 0, State::Running, 0)]);
    let s = Facts::new()
        .wait("a", "ErrImagePull", "failed to pull image \"busybox\"")
        .status(&p, &o);
    let a = cs(&s, "a");
    assert_eq!(waiting_reason(a), "ErrImagePull");
    assert!(a.container_id.is_none());
    assert_eq!(a.image_id, "");
    assert_eq!(s.phase.as_deref(), Some("Pending"));
}

#[test]
fn a_new_pod_without_init_containers_shows_container_creating() {
    let p = simple("Always");
    let s = Facts::new().status(&p, &ObservedPod::default());
    assert_eq!(waiting_reason(cs(&s, "a")), "ContainerCreating");
    assert!(s.init_container_statuses.is_none());
}

#[test]
fn a_dual_stack_node_reports_both_host_ips_and_a_host_network_pod_takes_them_as_pod_ips() {
    let mut p = simple("Always");
    p.spec.as_mut().unwrap().host_network = Some(true);
    let o = observed(true, vec![container("a", 0, State::Running, 0)]);
    let mut f = Facts::new();
    f.host_ips = vec!["192.168.1.10".into(), "fd00::10".into()];
    let s = f.status(&p, &o);
    assert_eq!(s.host_ip.as_deref(), Some("192.168.1.10"));
    let host: Vec<String> = s.host_ips.unwrap().into_iter().map(|h| h.ip).collect();
    assert_eq!(host, f.host_ips);
    let pod: Vec<String> = s.pod_ips.unwrap().into_iter().map(|h| h.ip).collect();
    assert_eq!(pod, f.host_ips);
    // Completed, its sandbox gone: still the node's.
    let s = f.status(&p, &ObservedPod::default());
    assert_eq!(s.pod_ip.as_deref(), Some("192.168.1.10"));
}

#[test]
fn a_host_network_pod_reports_the_host_ip_as_pod_ip() {
    let mut p = simple("Always");
    p.spec.as_mut().unwrap().host_network = Some(true);
    let mut o = observed(true, vec![container("a", 0, State::Running, 0)]);
    o.sandboxes[0].ip.clear();
    o.sandboxes[0].additional_ips.clear();
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.pod_ip.as_deref(), Some("192.168.1.10"));
    // Even when the runtime reports an address for the sandbox.
    o.sandboxes[0].ip = "10.244.0.7".into();
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.pod_ip.as_deref(), Some("192.168.1.10"));
}

fn with_sidecar() -> Pod {
    pod("metadata: {name: p, uid: u1}\nspec:\n  initContainers:\n  - {name: log, image: busybox, restartPolicy: Always, startupProbe: {exec: {command: [\"true\"]}}}\n  containers:\n  - {name: a, image: busybox}\n")
}

#[test]
fn a_sidecar_not_yet_started_keeps_the_pod_pending_and_not_initialized() {
    let p = with_sidecar();
    let obs = observed(true, vec![container("log", 0, State::Running, 0)]);
    let mut f = Facts::new();
    f.started.insert("log".into(), false);
    let st = f.status(&p, &obs);
    assert_eq!(st.phase.as_deref(), Some(PENDING));
    let init = cond(&st, "Initialized");
    assert_eq!(init.status, "False");
    assert_eq!(
        init.message.as_deref(),
        Some("containers with incomplete status: [log]")
    );
    let log = &st.init_container_statuses.as_ref().unwrap()[0];
    assert_eq!((log.started, log.ready), (Some(false), false));
}

#[test]
fn a_started_sidecar_initializes_the_pod_and_counts_for_readiness() {
    let p = with_sidecar();
    let obs = observed(
        true,
        vec![
            container("log", 0, State::Running, 0),
            container("a", 0, State::Running, 0),
        ],
    );
    let mut f = Facts::new();
    f.started.insert("log".into(), true);
    f.readiness.insert("log".into(), false);
    let st = f.status(&p, &obs);
    assert_eq!(st.phase.as_deref(), Some(RUNNING));
    assert_eq!(cond(&st, "Initialized").status, "True");
    let ready = cond(&st, "ContainersReady");
    assert_eq!(ready.status, "False");
    assert_eq!(
        ready.message.as_deref(),
        Some("containers with unready status: [log]")
    );
    let log = &st.init_container_statuses.as_ref().unwrap()[0];
    assert_eq!((log.started, log.ready), (Some(true), false));
    f.readiness.insert("log".into(), true);
    assert_eq!(cond(&f.status(&p, &obs), "Ready").status, "True");
}

#[test]
fn a_restarting_sidecar_shows_its_back_off_and_keeps_the_pod_running() {
    let p = with_sidecar();
    let obs = observed(
        true,
        vec![
            container("log", 1, State::Exited, 2),
            container("a", 0, State::Running, 0),
        ],
    );
    let f = Facts::new().wait("log", "CrashLoopBackOff", "back-off 10s");
    let st = f.status(&p, &obs);
    assert_eq!(st.phase.as_deref(), Some(RUNNING));
    assert_eq!(cond(&st, "Initialized").status, "True");
    let log = &st.init_container_statuses.as_ref().unwrap()[0];
    let w = log.state.as_ref().unwrap().waiting.as_ref().unwrap();
    assert_eq!(w.reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(log.restart_count, 1);
}

#[test]
fn a_refused_pod_is_failed_with_kubelets_reason_and_message() {
    let st = refused_status(
        "AppArmor",
        "Cannot enforce AppArmor: AppArmor is not enabled on the host",
        "BestEffort",
    );
    assert_eq!(st.phase.as_deref(), Some(FAILED));
    assert_eq!(st.reason.as_deref(), Some("AppArmor"));
    assert_eq!(
        st.message.as_deref(),
        Some("Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host")
    );
}

#[test]
fn a_succeeded_pod_without_init_containers_is_initialized_with_reason_pod_completed() {
    let p = simple("Never");
    let o = observed(
        false,
        vec![
            container("a", 0, State::Exited, 0),
            container("b", 0, State::Exited, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    let init = cond(&s, "Initialized");
    assert_eq!(
        (init.status.as_str(), init.reason.as_deref()),
        ("True", Some("PodCompleted"))
    );
    assert_eq!(init.message, None);
}

#[test]
fn true_conditions_have_neither_reason_nor_message() {
    let p = with_init();
    let o = observed(
        true,
        vec![
            container("i1", 0, State::Exited, 0),
            container("i2", 0, State::Exited, 0),
            container("a", 0, State::Running, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    for t in [
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodReadyToStartContainers",
    ] {
        let c = cond(&s, t);
        assert_eq!(c.status, "True", "{t}");
        assert_eq!(
            (c.reason.as_deref(), c.message.as_deref()),
            (None, None),
            "{t}"
        );
    }
}

#[test]
fn the_status_and_every_condition_carry_the_pods_generation() {
    let mut p = simple("Always");
    p.metadata.generation = Some(3);
    let o = observed(true, vec![container("a", 0, State::Running, 0)]);
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.observed_generation, Some(3));
    for c in s.conditions.as_ref().unwrap() {
        assert_eq!(c.observed_generation, Some(3), "{}", c.type_);
    }
    p.metadata.generation = None;
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.observed_generation, None);
    assert!(s
        .conditions
        .unwrap()
        .iter()
        .all(|c| c.observed_generation.is_none()));
}

fn at(s: &PodStatus, t: &str) -> Option<i64> {
    cond(s, t)
        .last_transition_time
        .as_ref()
        .map(|t| t.0.as_second())
}

#[test]
fn a_conditions_transition_time_is_kept_while_its_status_stays_and_moves_when_it_changes() {
    let p = simple("Always");
    let unready = observed(true, vec![container("a", 0, State::Running, 0)]);
    let mut facts = Facts::new();
    facts.readiness.insert("a".into(), false);
    let mut t = Transitions::default();

    let mut s = facts.status(&p, &unready);
    t.stamp(s.conditions.as_mut().unwrap(), 100);
    assert_eq!(at(&s, "Ready"), Some(100));
    assert_eq!(at(&s, "Initialized"), Some(100));

    // Unchanged at 130: the times stay.
    let mut s = facts.status(&p, &unready);
    t.stamp(s.conditions.as_mut().unwrap(), 130);
    assert_eq!(
        (at(&s, "Ready"), at(&s, "Initialized")),
        (Some(100), Some(100))
    );

    // Ready at 160: Ready and ContainersReady move, Initialized stays.
    facts.readiness.insert("a".into(), true);
    facts.readiness.insert("b".into(), true);
    let ready = observed(
        true,
        vec![
            container("a", 0, State::Running, 0),
            container("b", 0, State::Running, 0),
        ],
    );
    let mut s = facts.status(&p, &ready);
    t.stamp(s.conditions.as_mut().unwrap(), 160);
    assert_eq!(cond(&s, "Ready").status, "True");
    assert_eq!(at(&s, "Ready"), Some(160));
    assert_eq!(at(&s, "ContainersReady"), Some(160));
    assert_eq!(at(&s, "Initialized"), Some(100));
    assert_eq!(at(&s, "PodScheduled"), None, "the scheduler's time stands");
}

#[test]
fn a_condition_that_comes_with_its_own_time_keeps_it() {
    let mut conditions = vec![PodCondition {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        last_transition_time: Some(time_from_unix(50)),
        ..Default::default()
    }];
    let mut t = Transitions::default();
    t.stamp(&mut conditions, 200);
    assert_eq!(conditions[0].last_transition_time, Some(time_from_unix(50)));
    conditions[0].last_transition_time = None;
    t.stamp(&mut conditions, 300);
    assert_eq!(conditions[0].last_transition_time, Some(time_from_unix(50)));
}
