//! Unit tests of what a container status carries besides its state: the
//! image the runtime resolved and `volumeMounts`, for app containers, init
//! containers and sidecars.

use super::*;
use crate::pod::ObservedSandbox;

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
