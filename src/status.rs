//! Pod status: the v1 `PodStatus` picolet reports for a pod, computed from
//! what the runtime says.
//!
//! [`pod_status`] is kubelet's `generateAPIPodStatus` (with `getPhase`,
//! `convertToAPIContainerStatuses` and the `Generate*Condition` helpers) as a
//! pure function. It reads no clock and keeps no history: the caller passes
//! the wall-clock time and the agent's per-container facts (why a start
//! failed, probe results). Conditions carry no `lastTransitionTime` and a
//! phase is recomputed from the runtime at every call (the agent keeps no
//! condition history). Keeping this pure is what lets the status rules be
//! tested case by case without a runtime. Pod accessors and the pod-IP rule
//! come from [`crate::pod`]; Go durations from [`crate::config::duration`].
//!
//! Sidecars (init containers with `restartPolicy: Always`) are reported as
//! kubelet does: their status is among the init container statuses, with
//! `started` and `ready` from their probes; they count as initialized once
//! started, count for `ContainersReady`, and keep the pod Pending only until
//! an app container was created. A pod refused at admission gets
//! [`refused_status`]: phase Failed with kubelet's reason and message.
//!
//! Deliberate simplifications against kubelet:
//! - readiness gates are not evaluated (picolet has no API server writing
//!   custom conditions);
//! - a pod being deleted reports `Ready=False` (reason `PodTerminating`)
//!   at once, so nothing keeps routing to it while it shuts down.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::pleg::State;
use crate::pod::accessors::{app_containers, init_containers, restart_policy};
use crate::pod::facts;
use crate::pod::{ObservedContainer, ObservedPod};
use crate::qos::is_sidecar;

/// Why a container is not running, as the agent recorded it when a start
/// failed or a restart is backing off (`ErrImagePull`, `ImagePullBackOff`,
/// `CrashLoopBackOff`, `CreateContainerError`, `CreateContainerConfigError`,
/// `RunContainerError`, ...).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Waiting {
    pub reason: String,
    pub message: String,
}

/// Everything [`pod_status`] needs.
pub struct StatusInput<'a> {
    /// The desired pod.
    pub pod: &'a Pod,
    /// What the runtime holds for it, newest first (see [`ObservedPod::normalize`]).
    pub observed: &'a ObservedPod,
    /// Per container name: why it is waiting, when the agent knows better
    /// than the runtime.
    pub waiting: &'a HashMap<String, Waiting>,
    /// Readiness probe results by container name; absent means the container
    /// has no readiness probe and is ready once running and started.
    pub readiness: &'a HashMap<String, bool>,
    /// Startup probe results by container name; absent means started once
    /// running.
    pub started: &'a HashMap<String, bool>,
    /// The runtime's name for container IDs: `containerd` or `cri-o`.
    pub runtime_name: &'a str,
    pub host_ip: &'a str,
    /// `Guaranteed`, `Burstable` or `BestEffort`.
    pub qos_class: &'a str,
    /// When picolet first saw the pod, Unix seconds.
    pub start_time_unix: Option<i64>,
    /// The pod is being deleted.
    pub terminating: bool,
    /// Wall-clock now, Unix seconds. Not read today: conditions are returned
    /// without `lastTransitionTime`, which the caller carries over or stamps.
    pub now_unix: i64,
}

/// Pod phases.
pub const PENDING: &str = "Pending";
pub const RUNNING: &str = "Running";
pub const SUCCEEDED: &str = "Succeeded";
pub const FAILED: &str = "Failed";

/// A Unix-nanosecond runtime timestamp as API time; 0 means unknown.
fn time_from_nanos(nanos: i64) -> Option<Time> {
    if nanos <= 0 {
        return None;
    }
    Timestamp::from_nanosecond(nanos as i128).ok().map(Time)
}

/// Unix seconds as API time (clamped to the epoch outside jiff's range,
/// which no real clock reaches).
pub fn time_from_unix(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn terminated(c: &ObservedContainer, runtime: &str) -> ContainerStateTerminated {
    let reason = if !c.reason.is_empty() {
        c.reason.clone()
    } else if c.exit_code == 0 {
        "Completed".to_string()
    } else {
        "Error".to_string()
    };
    ContainerStateTerminated {
        exit_code: c.exit_code,
        reason: Some(reason),
        message: (!c.message.is_empty()).then(|| c.message.clone()),
        started_at: time_from_nanos(c.started_at),
        finished_at: time_from_nanos(c.finished_at),
        container_id: Some(format!("{runtime}://{}", c.id)),
        signal: None,
    }
}

fn waiting_state(reason: &str, message: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: (!reason.is_empty()).then(|| reason.to_string()),
            message: (!message.is_empty()).then(|| message.to_string()),
        }),
        ..Default::default()
    }
}

fn terminated_state(c: &ObservedContainer, runtime: &str) -> ContainerState {
    ContainerState {
        terminated: Some(terminated(c, runtime)),
        ..Default::default()
    }
}

/// Whether an exited container will be started again.
fn will_restart(policy: &str, init: bool, sidecar: bool, exit_code: i32) -> bool {
    match policy {
        _ if sidecar => true,
        "Never" => false,
        // An init container that succeeded is done under any policy.
        _ if init => exit_code != 0,
        "OnFailure" => exit_code != 0,
        _ => true,
    }
}

/// One container's status.
fn container_status(
    input: &StatusInput,
    spec: &Container,
    init: bool,
    default_reason: &str,
) -> ContainerStatus {
    let name = spec.name.as_str();
    let sidecar = init && is_sidecar(spec);
    let runtime = input.runtime_name;
    let policy = restart_policy(input.pod);
    let mut attempts = input.observed.containers.iter().filter(|c| c.name == name);
    let latest = attempts.next();
    let previous = attempts.next();
    let waiting = input.waiting.get(name);

    let mut status = ContainerStatus {
        name: name.to_string(),
        image: spec.image.clone().unwrap_or_default(),
        ..Default::default()
    };
    let Some(c) = latest else {
        let (reason, message) = match waiting {
            Some(w) => (w.reason.as_str(), w.message.as_str()),
            None => (default_reason, ""),
        };
        status.state = Some(waiting_state(reason, message));
        status.started = Some(false);
        return status;
    };

    status.image_id = c.image_ref.clone();
    status.container_id = Some(format!("{runtime}://{}", c.id));
    status.restart_count = i32::try_from(c.attempt).unwrap_or(i32::MAX);
    let previous_terminated = previous
        .filter(|p| p.state == State::Exited)
        .map(|p| terminated_state(p, runtime));

    match c.state {
        State::Running => {
            status.state = Some(ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: time_from_nanos(c.started_at),
                }),
                ..Default::default()
            });
            status.last_state = previous_terminated;
            if init && !sidecar {
                status.started = Some(true);
                status.ready = false;
            } else {
                let started = input.started.get(name).copied().unwrap_or(true);
                status.started = Some(started);
                status.ready = started && input.readiness.get(name).copied().unwrap_or(true);
            }
        }
        State::Exited => {
            status.started = Some(false);
            status.ready = init && !sidecar && c.exit_code == 0;
            match waiting.filter(|_| will_restart(policy, init, sidecar, c.exit_code)) {
                Some(w) => {
                    status.state = Some(waiting_state(&w.reason, &w.message));
                    status.last_state = Some(terminated_state(c, runtime));
                }
                None => {
                    status.state = Some(terminated_state(c, runtime));
                    status.last_state = previous_terminated;
                }
            }
        }
        State::Created | State::Unknown => {
            // Created but not started, or lost: "waiting to run".
            let (reason, message) = match waiting {
                Some(w) => (w.reason.as_str(), w.message.as_str()),
                None if c.state == State::Created => ("ContainerCreating", ""),
                None => ("", ""),
            };
            status.state = Some(waiting_state(reason, message));
            status.last_state = previous_terminated;
            status.started = Some(false);
        }
    }
    status
}

fn state_of(s: &ContainerStatus) -> (Option<&ContainerStateTerminated>, bool, bool) {
    let state = s.state.as_ref();
    let terminated = state.and_then(|st| st.terminated.as_ref());
    let running = state.is_some_and(|st| st.running.is_some());
    let waiting = state.is_some_and(|st| st.waiting.is_some());
    (terminated, running, waiting)
}

fn last_terminated(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.last_state.as_ref().and_then(|l| l.terminated.as_ref())
}

/// kubelet's `getPhase`: `init` and `app` pair each status with its spec.
fn phase(
    policy: &str,
    init: &[(&Container, ContainerStatus)],
    app: &[ContainerStatus],
) -> &'static str {
    let mut pending_init = 0;
    let mut failed_init = 0;
    for (_, s) in init.iter().filter(|(c, _)| !is_sidecar(c)) {
        match state_of(s) {
            (_, true, _) => pending_init += 1,
            (Some(t), _, _) => failed_init += usize::from(t.exit_code != 0),
            (None, false, true) => match last_terminated(s) {
                Some(t) => failed_init += usize::from(t.exit_code != 0),
                None => pending_init += 1,
            },
            _ => pending_init += 1,
        }
    }
    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    let mut pending_sidecars = 0;
    for (_, s) in init.iter().filter(|(c, _)| is_sidecar(c)) {
        match state_of(s) {
            (_, true, _) => {
                pending_sidecars += usize::from(s.started != Some(true));
                running += 1;
            }
            (Some(_), _, _) => {} // an exited sidecar does not count
            (None, false, true) => {
                if last_terminated(s).is_none() {
                    pending_sidecars += 1;
                    waiting += 1;
                }
            }
            _ => {
                pending_sidecars += 1;
                unknown += 1;
            }
        }
    }
    let mut app_created = false;
    for s in app {
        match state_of(s) {
            (_, true, _) => {
                running += 1;
                app_created = true;
            }
            (Some(t), _, _) => {
                stopped += 1;
                succeeded += usize::from(t.exit_code == 0);
                app_created = true;
            }
            (None, false, true) => {
                if last_terminated(s).is_some() {
                    stopped += 1;
                    app_created = true;
                } else {
                    waiting += 1;
                }
            }
            _ => unknown += 1,
        }
    }
    if failed_init > 0 && policy == "Never" {
        return FAILED;
    }
    if pending_init > 0 || (pending_sidecars > 0 && !app_created) || waiting > 0 {
        return PENDING;
    }
    if running > 0 && unknown == 0 {
        return RUNNING;
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        return match policy {
            "Always" => RUNNING,
            _ if stopped == succeeded => SUCCEEDED,
            "Never" => FAILED,
            _ => RUNNING,
        };
    }
    PENDING
}

fn condition(type_: &str, ok: bool, reason: Option<&str>, message: Option<String>) -> PodCondition {
    PodCondition {
        type_: type_.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        reason: reason.map(str::to_string),
        message,
        ..Default::default()
    }
}

/// Go's `%s` of a `[]string`: `[a b]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

/// kubelet's `GeneratePodInitializedCondition`.
fn initialized_condition(
    init: &[(&Container, ContainerStatus)],
    app: &[ContainerStatus],
    phase: &str,
) -> PodCondition {
    const T: &str = "Initialized";
    if init.is_empty() {
        return condition(T, true, None, None);
    }
    if phase == SUCCEEDED {
        return condition(T, true, Some("PodCompleted"), None);
    }
    let app_started = app.iter().any(|s| {
        let (t, running, _) = state_of(s);
        running || t.is_some()
    });
    if app_started {
        return condition(T, true, None, None);
    }
    let incomplete: Vec<&str> = init
        .iter()
        .filter(|(c, s)| {
            if is_sidecar(c) {
                s.started != Some(true)
            } else {
                !matches!(state_of(s).0, Some(t) if t.exit_code == 0)
            }
        })
        .map(|(_, s)| s.name.as_str())
        .collect();
    if incomplete.is_empty() {
        condition(T, true, None, None)
    } else {
        let message = format!(
            "containers with incomplete status: {}",
            go_list(&incomplete)
        );
        condition(T, false, Some("ContainersNotInitialized"), Some(message))
    }
}

/// kubelet's `GenerateContainersReadyCondition`: sidecars first, then app
/// containers.
fn containers_ready_condition(
    init: &[(&Container, ContainerStatus)],
    app: &[ContainerStatus],
    phase: &str,
) -> PodCondition {
    const T: &str = "ContainersReady";
    match phase {
        SUCCEEDED => return condition(T, false, Some("PodCompleted"), None),
        FAILED => return condition(T, false, Some("PodFailed"), None),
        _ => {}
    }
    let unready: Vec<&str> = init
        .iter()
        .filter(|(c, _)| is_sidecar(c))
        .map(|(_, s)| s)
        .chain(app)
        .filter(|s| !s.ready)
        .map(|s| s.name.as_str())
        .collect();
    if unready.is_empty() {
        condition(T, true, None, None)
    } else {
        let message = format!("containers with unready status: {}", go_list(&unready));
        condition(T, false, Some("ContainersNotReady"), Some(message))
    }
}

/// The status of a pod refused at admission (kubelet's `rejectPod`):
/// phase Failed, the refusal's reason, and "Pod was rejected: " before its
/// message.
pub fn refused_status(reason: &str, message: &str, qos_class: &str) -> PodStatus {
    PodStatus {
        phase: Some(FAILED.to_string()),
        reason: Some(reason.to_string()),
        message: Some(format!("Pod was rejected: {message}")),
        qos_class: (!qos_class.is_empty()).then(|| qos_class.to_string()),
        ..Default::default()
    }
}

/// Computes the pod's status from what the runtime reports.
pub fn pod_status(input: &StatusInput) -> PodStatus {
    let pod = input.pod;
    let policy = restart_policy(pod);
    let inits = init_containers(pod);

    // Init containers default to PodInitializing (kubectl shows `Init:i/n`);
    // app containers too while an init container has not succeeded.
    let init_statuses: Vec<(&Container, ContainerStatus)> = inits
        .iter()
        .map(|c| (c, container_status(input, c, true, "PodInitializing")))
        .collect();
    let init_done = init_statuses.iter().all(|(c, s)| {
        if is_sidecar(c) {
            s.started == Some(true)
        } else {
            matches!(state_of(s).0, Some(t) if t.exit_code == 0)
        }
    });
    let app_default = if init_done {
        "ContainerCreating"
    } else {
        "PodInitializing"
    };
    let app_statuses: Vec<ContainerStatus> = app_containers(pod)
        .iter()
        .map(|c| container_status(input, c, false, app_default))
        .collect();

    let phase = phase(policy, &init_statuses, &app_statuses);

    let sandbox = input.observed.latest_sandbox().filter(|s| s.ready);
    let containers_ready = containers_ready_condition(&init_statuses, &app_statuses, phase);
    let ready = if input.terminating && containers_ready.status == "True" {
        condition(
            "Ready",
            false,
            Some("PodTerminating"),
            Some("the pod is being deleted".to_string()),
        )
    } else {
        PodCondition {
            type_: "Ready".to_string(),
            ..containers_ready.clone()
        }
    };
    let conditions = vec![
        condition("PodReadyToStartContainers", sandbox.is_some(), None, None),
        initialized_condition(&init_statuses, &app_statuses, phase),
        ready,
        containers_ready,
        condition("PodScheduled", true, None, None),
    ];

    // No IPs before the sandbox is ready; then the one rule of pod::facts.
    let pod_ips: Vec<String> = match sandbox {
        Some(s) => facts::pod_ips(pod, Some(s), input.host_ip),
        None => Vec::new(),
    };

    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions),
        host_ip: (!input.host_ip.is_empty()).then(|| input.host_ip.to_string()),
        host_ips: (!input.host_ip.is_empty()).then(|| {
            vec![HostIP {
                ip: input.host_ip.to_string(),
            }]
        }),
        pod_ip: pod_ips.first().cloned(),
        pod_ips: (!pod_ips.is_empty())
            .then(|| pod_ips.into_iter().map(|ip| PodIP { ip }).collect()),
        qos_class: (!input.qos_class.is_empty()).then(|| input.qos_class.to_string()),
        start_time: input.start_time_unix.map(time_from_unix),
        init_container_statuses: (!inits.is_empty())
            .then(|| init_statuses.into_iter().map(|(_, s)| s).collect()),
        container_statuses: Some(app_statuses),
        observed_generation: pod.metadata.generation,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
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
    }

    impl Facts {
        fn new() -> Self {
            Facts {
                waiting: HashMap::new(),
                readiness: HashMap::new(),
                started: HashMap::new(),
                terminating: false,
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
                host_ip: "192.168.1.10",
                qos_class: "BestEffort",
                start_time_unix: Some(1_700_000_000),
                terminating: self.terminating,
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
}
