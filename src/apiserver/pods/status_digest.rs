//! The digest of a pod status that the status queue keeps for what the API
//! server has, instead of the status itself.
//!
//! The agent hands over a pod's status at every sync (a minute apart per
//! pod at rest), and the queue drops it when its digest is the one last
//! sent. The digest used to be a hash of the status's JSON: serialising
//! the status (its times formatted as RFC 3339 text) was most of the cost
//! of an idle pod's sync (`perf` of 100 hollow nodes, docs/fleet.md). It
//! is now a hash of the fields themselves, times as their nanoseconds.
//!
//! Every field of the structs a kubelet fills is named in a destructuring
//! pattern, so a field a newer API adds does not compile until it is
//! hashed here. The rarer parts (resources, resource claims, volume mount
//! statuses, the container's user) are hashed as their JSON, which they
//! almost never have.
//!
//! Must not know: what the statuses mean, or the queue.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A digest of a status: SipHash-1-3 (std's `DefaultHasher`, fixed keys)
/// of its fields. Two statuses with the same digest are taken as equal;
/// for different ones that has a chance of 2^-64, and the cost of a miss
/// is one status not re-sent until the pod's next change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusDigest(u64);

impl StatusDigest {
    pub fn of(status: &PodStatus) -> Self {
        let mut h = DefaultHasher::new();
        pod_status(&mut h, status);
        StatusDigest(h.finish())
    }
}

fn pod_status(h: &mut DefaultHasher, s: &PodStatus) {
    let PodStatus {
        allocated_resources,
        conditions,
        container_statuses,
        ephemeral_container_statuses,
        extended_resource_claim_status,
        host_ip,
        host_ips,
        init_container_statuses,
        message,
        node_allocatable_resource_claim_statuses,
        nominated_node_name,
        observed_generation,
        phase,
        pod_ip,
        pod_ips,
        qos_class,
        reason,
        resize,
        resource_claim_statuses,
        resources,
        start_time,
    } = s;
    quantities(h, allocated_resources);
    list(h, conditions, condition);
    for statuses in [
        container_statuses,
        ephemeral_container_statuses,
        init_container_statuses,
    ] {
        list(h, statuses, container_status);
    }
    as_json(h, extended_resource_claim_status);
    host_ip.hash(h);
    list(h, host_ips, |h, ip| ip.ip.hash(h));
    message.hash(h);
    as_json(h, node_allocatable_resource_claim_statuses);
    nominated_node_name.hash(h);
    observed_generation.hash(h);
    phase.hash(h);
    pod_ip.hash(h);
    list(h, pod_ips, |h, ip| ip.ip.hash(h));
    qos_class.hash(h);
    reason.hash(h);
    resize.hash(h);
    as_json(h, resource_claim_statuses);
    as_json(h, resources);
    time(h, start_time);
}

fn condition(h: &mut DefaultHasher, c: &PodCondition) {
    let PodCondition {
        last_probe_time,
        last_transition_time,
        message,
        observed_generation,
        reason,
        status,
        type_,
    } = c;
    time(h, last_probe_time);
    time(h, last_transition_time);
    message.hash(h);
    observed_generation.hash(h);
    reason.hash(h);
    status.hash(h);
    type_.hash(h);
}

fn container_status(h: &mut DefaultHasher, c: &ContainerStatus) {
    let ContainerStatus {
        allocated_resources,
        allocated_resources_status,
        container_id,
        image,
        image_id,
        last_state,
        name,
        ready,
        resources,
        restart_count,
        started,
        state,
        stop_signal,
        user,
        volume_mounts,
    } = c;
    quantities(h, allocated_resources);
    as_json(h, allocated_resources_status);
    container_id.hash(h);
    image.hash(h);
    image_id.hash(h);
    container_state(h, last_state);
    name.hash(h);
    ready.hash(h);
    as_json(h, resources);
    restart_count.hash(h);
    started.hash(h);
    container_state(h, state);
    stop_signal.hash(h);
    as_json(h, user);
    as_json(h, volume_mounts);
}

fn container_state(h: &mut DefaultHasher, s: &Option<ContainerState>) {
    let Some(ContainerState {
        running,
        terminated,
        waiting,
    }) = s
    else {
        0u8.hash(h);
        return;
    };
    1u8.hash(h);
    running.is_some().hash(h);
    if let Some(ContainerStateRunning { started_at }) = running {
        time(h, started_at);
    }
    terminated.is_some().hash(h);
    if let Some(ContainerStateTerminated {
        container_id,
        exit_code,
        finished_at,
        message,
        reason,
        signal,
        started_at,
    }) = terminated
    {
        container_id.hash(h);
        exit_code.hash(h);
        time(h, finished_at);
        message.hash(h);
        reason.hash(h);
        signal.hash(h);
        time(h, started_at);
    }
    waiting.is_some().hash(h);
    if let Some(ContainerStateWaiting { message, reason }) = waiting {
        message.hash(h);
        reason.hash(h);
    }
}

/// A list: whether it is there, its length, then each item.
fn list<T>(h: &mut DefaultHasher, v: &Option<Vec<T>>, item: impl Fn(&mut DefaultHasher, &T)) {
    v.is_some().hash(h);
    let items = v.as_deref().unwrap_or_default();
    items.len().hash(h);
    for i in items {
        item(h, i);
    }
}

fn time(h: &mut DefaultHasher, t: &Option<Time>) {
    t.as_ref().map(|t| t.0.as_nanosecond()).hash(h);
}

fn quantities(h: &mut DefaultHasher, q: &Option<BTreeMap<String, Quantity>>) {
    q.is_some().hash(h);
    for (k, v) in q.iter().flatten() {
        k.hash(h);
        v.0.hash(h);
    }
}

/// A part a kubelet rarely fills, hashed as its JSON.
fn as_json<T: serde::Serialize>(h: &mut DefaultHasher, v: &Option<T>) {
    v.is_some().hash(h);
    if let Some(v) = v {
        // Every API type serializes; a failure would only weaken the
        // digest.
        h.write(&serde_json::to_vec(v).unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ContainerStateWaiting;

    fn running_pod() -> PodStatus {
        serde_json::from_value(serde_json::json!({
            "phase": "Running",
            "hostIP": "10.0.0.2", "hostIPs": [{"ip": "10.0.0.2"}],
            "podIP": "10.88.0.5", "podIPs": [{"ip": "10.88.0.5"}],
            "qosClass": "BestEffort",
            "startTime": "2026-12-06T10:00:00Z",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-06T10:00:02Z"},
            ],
            "containerStatuses": [{
                "name": "app", "image": "busybox", "imageID": "sha256:1",
                "containerID": "containerd://c1", "ready": true, "restartCount": 0,
                "started": true,
                "state": {"running": {"startedAt": "2026-12-06T10:00:01Z"}},
            }],
        }))
        .unwrap()
    }

    #[test]
    fn equal_statuses_have_one_digest_and_any_changed_field_another() {
        let a = running_pod();
        assert_eq!(StatusDigest::of(&a), StatusDigest::of(&a.clone()));
        type Change = Box<dyn Fn(&mut PodStatus)>;
        let changes: Vec<(&str, Change)> = vec![
            ("phase", Box::new(|s| s.phase = Some("Failed".into()))),
            ("pod IP", Box::new(|s| s.pod_ips = Some(vec![]))),
            ("host IP", Box::new(|s| s.host_ip = None)),
            (
                "a condition's time",
                Box::new(|s| {
                    s.conditions.as_mut().unwrap()[0].last_transition_time = s.start_time.clone()
                }),
            ),
            (
                "readiness",
                Box::new(|s| s.container_statuses.as_mut().unwrap()[0].ready = false),
            ),
            (
                "restarts",
                Box::new(|s| s.container_statuses.as_mut().unwrap()[0].restart_count = 1),
            ),
            (
                "running to waiting",
                Box::new(|s| {
                    s.container_statuses.as_mut().unwrap()[0].state = Some(ContainerState {
                        waiting: Some(ContainerStateWaiting {
                            reason: Some("CrashLoopBackOff".into()),
                            message: None,
                        }),
                        ..Default::default()
                    })
                }),
            ),
            (
                "the last state",
                Box::new(|s| {
                    s.container_statuses.as_mut().unwrap()[0].last_state =
                        Some(ContainerState::default())
                }),
            ),
            (
                "a rare part (resources)",
                Box::new(|s| s.resources = Some(Default::default())),
            ),
            (
                "a container moved to the init list",
                Box::new(|s| s.init_container_statuses = s.container_statuses.take()),
            ),
        ];
        for (what, change) in changes {
            let mut b = a.clone();
            change(&mut b);
            assert_ne!(StatusDigest::of(&a), StatusDigest::of(&b), "{what}");
        }
    }
}
