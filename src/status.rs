//! Pod status: the v1 `PodStatus` picolet reports for a pod, computed from
//! what the runtime says.
//!
//! [`pod_status`] is kubelet's `generateAPIPodStatus` (with `getPhase`,
//! `convertToAPIContainerStatuses` and the `Generate*Condition` helpers) as a
//! pure function. It reads no clock and keeps no history: the caller passes
//! the wall-clock time and the agent's per-container facts (why a start
//! failed, probe results). A phase is recomputed from the runtime at every
//! call. Keeping this pure is what lets the status rules be tested case by
//! case without a runtime. Pod accessors and the pod-IP rule come from
//! [`crate::pod`]; Go durations from [`crate::config::duration`].
//!
//! Conditions as kubelet v1.36 writes them: a True `Initialized`,
//! `ContainersReady` or `Ready` has no reason and no message (the status
//! patch clears those the API server still holds: see
//! `apiserver::status_manager`), a Succeeded pod's `Initialized` has reason
//! `PodCompleted`, and the status and every condition carry
//! `observedGeneration`, the pod's `metadata.generation`
//! (PodObservedGenerationTracking). `lastTransitionTime` is kubelet's
//! status manager's: [`Transitions::stamp`] keeps a condition's time while
//! its status stays and stamps the present when it changes; the caller
//! keeps the [`Transitions`] of each pod between statuses. It starts empty
//! when picolet starts (the pod source does not keep the API's conditions),
//! so a restart stamps every condition anew. `PodScheduled` is not stamped:
//! the scheduler's time stands, as the API server keeps it.
//!
//! Sidecars (init containers with `restartPolicy: Always`) are reported as
//! kubelet does: their status is among the init container statuses, with
//! `started` and `ready` from their probes; they count as initialized once
//! started, count for `ContainersReady`, and keep the pod Pending only until
//! an app container was created. A pod refused at admission gets
//! [`refused_status`]: phase Failed with kubelet's reason and message.
//!
//! `Ready` also waits for the pod's readiness gates: each condition they
//! name must be True in the pod's status (a controller sets them through
//! the API; the API pod source keeps them in the pod it hands over).
//! picolet does not report those conditions itself: they are the
//! controller's, and its status patch leaves them as they are.
//!
//! A container the runtime holds reports the image as the runtime resolved
//! it (CRI `ContainerStatus.image`: `docker.io/library/busybox:latest` for
//! a spec's `busybox`), as kubelet's `convertContainerStatus` does; one not
//! created yet reports the spec's, as kubelet's default status.
//!
//! Every container status lists the container's `volumeMounts` (see
//! `status::fields`), as kubelet's with RecursiveReadOnlyMounts (GA); one
//! the runtime holds also has `resources` and `allocatedResources`
//! (InPlacePodVerticalScaling, GA).
//!
//! The pod's own `resources` and `allocatedResources` are its totals and,
//! once Running, what its cgroup holds (see `status::pod_resources`).
//!
//! Deliberate simplifications against kubelet:
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
use crate::pod::{ObservedContainer, ObservedPod, RuntimeResources};
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
    /// The node's IPs as `status.hostIPs` reports them (the first is
    /// `status.hostIP`).
    pub host_ips: &'a [String],
    /// `Guaranteed`, `Burstable` or `BestEffort`.
    pub qos_class: &'a str,
    /// When picolet first saw the pod, Unix seconds.
    pub start_time_unix: Option<i64>,
    /// The pod is being deleted.
    pub terminating: bool,
    /// What the pod's cgroup holds, in kubelet's units (CPU request from
    /// the shares, CPU limit from the CFS quota, memory limit); `None` when
    /// it was not read. Read for the pod-level `resources` of a Running pod.
    pub pod_cgroup: Option<RuntimeResources>,
    /// Wall-clock now, Unix seconds. Not read today: conditions are returned
    /// without `lastTransitionTime`, which the caller stamps with its
    /// [`Transitions`].
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

/// The conditions whose `lastTransitionTime` [`Transitions`] keeps.
const STAMPED: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "DisruptionTarget",
];

/// A pod's conditions as last reported: for each of [`STAMPED`], its status
/// (0 False, 1 True, 2 anything else) and since when (Unix seconds). 80
/// bytes inline, no allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transitions([Option<(u8, i64)>; 5]);

impl Transitions {
    /// Sets each condition's `lastTransitionTime` as kubelet's status
    /// manager does: the time remembered while the status is the one last
    /// reported, else `now_unix` (or the condition's own time, when it came
    /// with one, as `DisruptionTarget` does); and remembers them.
    pub fn stamp(&mut self, conditions: &mut [PodCondition], now_unix: i64) {
        for c in conditions {
            let Some(i) = STAMPED.iter().position(|t| *t == c.type_) else {
                continue;
            };
            let code = match c.status.as_str() {
                "False" => 0,
                "True" => 1,
                _ => 2,
            };
            let since = match self.0[i] {
                Some((was, since)) if was == code => since,
                _ => c
                    .last_transition_time
                    .as_ref()
                    .map_or(now_unix, |t| t.0.as_second()),
            };
            c.last_transition_time = Some(time_from_unix(since));
            self.0[i] = Some((code, since));
        }
    }
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
        volume_mounts: fields::volume_mounts(spec),
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

    // kubelet reports the image the runtime resolved once a container
    // exists (`docker.io/library/busybox:latest`), the spec's before.
    if !c.image.is_empty() {
        status.image = c.image.clone();
    }
    status.image_id = c.image_ref.clone();
    status.resources = Some(fields::resources(
        spec,
        c.state == State::Running,
        c.resources.as_ref(),
    ));
    status.allocated_resources = fields::allocated_resources(spec);
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
    if phase == SUCCEEDED {
        return condition(T, true, Some("PodCompleted"), None);
    }
    if init.is_empty() {
        return condition(T, true, None, None);
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

/// kubelet's `GeneratePodReadyCondition`: `ContainersReady`'s status,
/// reason and message while it is not True; then False with reason
/// `ReadinessGatesNotReady` while a readiness gate's condition (in the
/// pod's status, as a controller set it) is missing or not True.
fn ready_condition(pod: &Pod, containers_ready: &PodCondition) -> PodCondition {
    if containers_ready.status != "True" {
        return PodCondition {
            type_: "Ready".to_string(),
            ..containers_ready.clone()
        };
    }
    let gates = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_deref())
        .unwrap_or(&[]);
    let conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[]);
    let unready: Vec<String> = gates
        .iter()
        .filter_map(|g| {
            let t = &g.condition_type;
            match conditions.iter().find(|c| c.type_ == *t) {
                None => Some(format!(
                    "corresponding condition of pod readiness gate {t:?} does not exist."
                )),
                Some(c) if c.status != "True" => Some(format!(
                    "the status of pod readiness gate {t:?} is not \"True\", but {}",
                    c.status
                )),
                Some(_) => None,
            }
        })
        .collect();
    if unready.is_empty() {
        condition("Ready", true, None, None)
    } else {
        condition(
            "Ready",
            false,
            Some("ReadinessGatesNotReady"),
            Some(unready.join(", ")),
        )
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
        ready_condition(pod, &containers_ready)
    };
    let generation = pod.metadata.generation.filter(|g| *g != 0);
    let mut conditions = vec![
        condition("PodReadyToStartContainers", sandbox.is_some(), None, None),
        initialized_condition(&init_statuses, &app_statuses, phase),
        ready,
        containers_ready,
        condition("PodScheduled", true, None, None),
    ];
    for c in &mut conditions {
        c.observed_generation = generation;
    }

    let host_ips: Vec<String> = input
        .host_ips
        .iter()
        .filter(|ip| !ip.is_empty())
        .cloned()
        .collect();
    // No IPs before the sandbox is ready, except a hostNetwork pod's, which
    // are the node's whatever the sandbox (kubelet's generateAPIPodStatus);
    // then the one rule of pod::facts.
    let pod_ips: Vec<String> = match sandbox {
        Some(s) => facts::pod_ips(pod, Some(s), &host_ips),
        None if crate::pod::accessors::host_network(pod) => facts::pod_ips(pod, None, &host_ips),
        None => Vec::new(),
    };

    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions),
        host_ip: host_ips.first().cloned(),
        host_ips: (!host_ips.is_empty())
            .then(|| host_ips.into_iter().map(|ip| HostIP { ip }).collect()),
        pod_ip: pod_ips.first().cloned(),
        pod_ips: (!pod_ips.is_empty())
            .then(|| pod_ips.into_iter().map(|ip| PodIP { ip }).collect()),
        qos_class: (!input.qos_class.is_empty()).then(|| input.qos_class.to_string()),
        start_time: input.start_time_unix.map(time_from_unix),
        init_container_statuses: (!inits.is_empty())
            .then(|| init_statuses.into_iter().map(|(_, s)| s).collect()),
        container_statuses: Some(app_statuses),
        ephemeral_container_statuses: ephemeral::ephemeral_container_statuses(input),
        observed_generation: generation,
        resources: Some(pod_resources::resources(
            crate::pod::accessors::spec(pod),
            phase == RUNNING,
            input.pod_cgroup.as_ref(),
        )),
        allocated_resources: pod_resources::allocated_resources(crate::pod::accessors::spec(pod)),
        ..Default::default()
    }
}

mod ephemeral;

mod fields;

mod pod_resources;

#[cfg(test)]
mod tests;
