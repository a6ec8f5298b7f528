//! Unit tests of `status`: phases, conditions and container statuses case
//! by case, sidecars and refused pods included. Here: the shared pods and
//! facts, readiness and IPs; the other subjects in `tests/` (restarts,
//! phases, waiting reasons, sidecars, conditions).

use super::*;
use crate::pod::ObservedSandbox;

mod conditions;
mod fields;
mod phases;
mod restarts;
mod sidecars;
mod waiting;

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
