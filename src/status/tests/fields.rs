//! Unit tests of what a container status carries besides its state: the
//! image the runtime resolved, `volumeMounts`, `resources` and
//! `allocatedResources`, for app containers, init containers and sidecars.

use super::super::*;
use crate::pod::{ObservedSandbox, RuntimeResources};

fn pod(yaml: &str) -> Pod {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn observed(containers: Vec<ObservedContainer>) -> ObservedPod {
    let mut o = ObservedPod {
        sandboxes: vec![ObservedSandbox {
            id: "s0".into(),
            ready: true,
            created_at: 1,
            ip: "10.88.0.5".into(),
            ..Default::default()
        }],
        containers,
    };
    o.normalize();
    o
}

fn container(name: &str, state: State) -> ObservedContainer {
    ObservedContainer {
        id: format!("{name}-0"),
        sandbox_id: "s0".into(),
        name: name.into(),
        state,
        created_at: 100,
        started_at: 101,
        finished_at: if state == State::Exited { 102 } else { 0 },
        image: "docker.io/library/busybox:latest".into(),
        image_ref: "sha256:abc".into(),
        ..Default::default()
    }
}

fn status(pod: &Pod, observed: &ObservedPod) -> PodStatus {
    let none = HashMap::new();
    pod_status(&StatusInput {
        pod,
        observed,
        waiting: &HashMap::new(),
        readiness: &none,
        started: &none,
        runtime_name: "containerd",
        host_ips: &["192.168.1.10".to_string()],
        qos_class: "Burstable",
        start_time_unix: Some(1_700_000_000),
        terminating: false,
        pod_cgroup: None,
        now_unix: 1_700_000_100,
    })
}

fn json_of(s: &PodStatus, list: &str, name: &str) -> serde_json::Value {
    let v = serde_json::to_value(s).unwrap();
    v[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
        .clone()
}

const MOUNTS: &str = "metadata: {name: p, uid: u1}
spec:
  initContainers:
  - {name: init, image: busybox, volumeMounts: [{name: data, mountPath: /data}]}
  - {name: side, image: busybox, restartPolicy: Always, volumeMounts: [{name: cfg, mountPath: /cfg, readOnly: true}]}
  containers:
  - name: a
    image: busybox
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: cfg, mountPath: /etc/cfg, readOnly: true, recursiveReadOnly: IfPossible}
    - {name: host, mountPath: /host, readOnly: false}
  - {name: b, image: busybox}
";

#[test]
fn a_container_the_runtime_holds_reports_the_image_the_runtime_resolved() {
    let p = pod(MOUNTS);
    let s = status(&p, &observed(vec![container("init", State::Running)]));
    let init = json_of(&s, "initContainerStatuses", "init");
    assert_eq!(init["image"], "docker.io/library/busybox:latest");
    assert_eq!(init["imageID"], "sha256:abc");
    // Not created yet: the spec's image, as kubelet's default status.
    assert_eq!(json_of(&s, "containerStatuses", "a")["image"], "busybox");
}

#[test]
fn a_runtime_that_reports_no_image_leaves_the_specs() {
    let p = pod(MOUNTS);
    let mut c = container("init", State::Running);
    c.image.clear();
    let s = status(&p, &observed(vec![c]));
    assert_eq!(
        json_of(&s, "initContainerStatuses", "init")["image"],
        "busybox"
    );
}

#[test]
fn every_container_reports_its_volume_mounts_created_or_not() {
    let p = pod(MOUNTS);
    let s = status(&p, &observed(vec![container("init", State::Exited)]));
    assert_eq!(
        json_of(&s, "containerStatuses", "a")["volumeMounts"],
        serde_json::json!([
            {"name": "data", "mountPath": "/data"},
            {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": true, "recursiveReadOnly": "Disabled"},
            {"name": "host", "mountPath": "/host"},
        ])
    );
    assert_eq!(
        json_of(&s, "initContainerStatuses", "init")["volumeMounts"],
        serde_json::json!([{"name": "data", "mountPath": "/data"}])
    );
    assert_eq!(
        json_of(&s, "initContainerStatuses", "side")["volumeMounts"],
        serde_json::json!([{"name": "cfg", "mountPath": "/cfg", "readOnly": true, "recursiveReadOnly": "Disabled"}])
    );
    assert!(json_of(&s, "containerStatuses", "b")
        .get("volumeMounts")
        .is_none());
}

const RESOURCES: &str = "metadata: {name: p, uid: u1}
spec:
  initContainers:
  - name: side
    image: busybox
    restartPolicy: Always
    resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {memory: 64Mi}}
  containers:
  - name: a
    image: busybox
    resources: {requests: {cpu: 333m, memory: 100Mi}, limits: {cpu: 500m, memory: 100M}}
  - {name: b, image: busybox}
";

#[test]
fn a_container_not_created_yet_reports_no_resources() {
    let p = pod(RESOURCES);
    let s = status(&p, &observed(vec![]));
    let a = json_of(&s, "containerStatuses", "a");
    assert!(a.get("resources").is_none() && a.get("allocatedResources").is_none());
}

#[test]
fn a_running_container_reports_the_resources_the_runtime_gave_it() {
    let p = pod(RESOURCES);
    let mut a = container("a", State::Running);
    a.resources = Some(RuntimeResources {
        cpu_limit_millis: Some(500),
        // 333m is 340 shares, read back as 333m.
        cpu_request_millis: Some(333),
        memory_limit_bytes: Some(100_000_000),
    });
    let mut side = container("side", State::Running);
    side.resources = Some(RuntimeResources {
        cpu_limit_millis: None,
        cpu_request_millis: Some(100),
        memory_limit_bytes: Some(64 << 20),
    });
    let mut b = container("b", State::Running);
    b.resources = Some(RuntimeResources {
        cpu_request_millis: Some(2),
        ..Default::default()
    });
    let s = status(&p, &observed(vec![a, side, b]));
    let a = json_of(&s, "containerStatuses", "a");
    assert_eq!(
        a["resources"],
        serde_json::json!({
            "requests": {"cpu": "333m", "memory": "100Mi"},
            "limits": {"cpu": "500m", "memory": "100000000"},
        })
    );
    assert_eq!(
        a["allocatedResources"],
        serde_json::json!({"cpu": "333m", "memory": "100Mi"})
    );
    let side = json_of(&s, "initContainerStatuses", "side");
    assert_eq!(
        side["resources"],
        serde_json::json!({
            "requests": {"cpu": "100m", "memory": "64Mi"},
            "limits": {"memory": "64Mi"},
        })
    );
    assert_eq!(
        side["allocatedResources"],
        serde_json::json!({"cpu": "100m", "memory": "64Mi"})
    );
    // BestEffort: an empty `resources`, no `allocatedResources`; the least
    // shares are no request.
    let b = json_of(&s, "containerStatuses", "b");
    assert_eq!(b["resources"], serde_json::json!({}));
    assert!(b.get("allocatedResources").is_none());
}

#[test]
fn a_cpu_request_the_shares_round_shows_as_the_runtime_reads_it() {
    let p = pod("metadata: {name: p, uid: u1}
spec:
  containers:
  - {name: a, image: busybox, resources: {requests: {cpu: 1m}, limits: {cpu: 5m}}}
");
    let mut a = container("a", State::Running);
    // 1m is the least shares (2), read back as 2m: at the minimum, the
    // spec's stays; the quota for 5m reads back as 5m.
    a.resources = Some(RuntimeResources {
        cpu_limit_millis: Some(5),
        cpu_request_millis: Some(2),
        memory_limit_bytes: None,
    });
    let s = status(&p, &observed(vec![a.clone()]));
    assert_eq!(
        json_of(&s, "containerStatuses", "a")["resources"],
        serde_json::json!({"requests": {"cpu": "1m"}, "limits": {"cpu": "5m"}})
    );
    let p = pod("metadata: {name: p, uid: u1}
spec:
  containers:
  - {name: a, image: busybox, resources: {requests: {cpu: 1500m}, limits: {cpu: 2}}}
");
    a.resources = Some(RuntimeResources {
        cpu_limit_millis: Some(2000),
        cpu_request_millis: Some(1500),
        memory_limit_bytes: None,
    });
    let s = status(&p, &observed(vec![a]));
    assert_eq!(
        json_of(&s, "containerStatuses", "a")["resources"],
        serde_json::json!({"requests": {"cpu": "1500m"}, "limits": {"cpu": "2"}})
    );
}

#[test]
fn an_exited_container_reports_its_allocated_resources_not_the_runtimes() {
    let p = pod(RESOURCES);
    let mut a = container("a", State::Exited);
    a.resources = Some(RuntimeResources {
        cpu_limit_millis: Some(700),
        cpu_request_millis: Some(700),
        memory_limit_bytes: Some(1 << 30),
    });
    let s = status(&p, &observed(vec![a]));
    assert_eq!(
        json_of(&s, "containerStatuses", "a")["resources"],
        serde_json::json!({
            "requests": {"cpu": "333m", "memory": "100Mi"},
            "limits": {"cpu": "500m", "memory": "100M"},
        })
    );
}
