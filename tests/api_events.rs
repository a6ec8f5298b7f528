//! kubelet's Events from picolet, read back with `kubectl get events` from
//! a real kube-apiserver (Node,RBAC authorization, NodeRestriction): the
//! node posts them with its `system:node:<name>` credential. Real
//! containerd (or CRI-O with `PICOLET_TEST_RUNTIME=crio`); nothing mocked.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test api_events --
//! --test-threads=2`.

mod harness;

use std::time::Duration;

use harness::kube::ControlPlane;
use harness::{wait_until, Containerd, Picolet};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(90);

fn join(cp: &ControlPlane, c: &Containerd) -> Picolet {
    Picolet::start_with_args(c, "", |p| {
        let kubeconfig = cp.node_kubeconfig(p.hostname());
        vec!["--kubeconfig".to_string(), kubeconfig.display().to_string()]
    })
}

/// The Events in `namespace` about the object named `name`.
fn events_of(cp: &ControlPlane, namespace: &str, name: &str) -> Vec<Value> {
    let out = cp.kubectl(&["get", "events", "-n", namespace, "-o", "json"]);
    if !out.status.success() {
        return Vec::new();
    }
    let list: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|e| e["involvedObject"]["name"] == name)
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

fn find<'a>(events: &'a [Value], reason: &str, field_path: &str) -> Option<&'a Value> {
    events
        .iter()
        .find(|e| e["reason"] == reason && e["involvedObject"]["fieldPath"] == field_path)
}

#[test]
fn kubectl_get_events_shows_a_pods_start_and_a_crash_loops_growing_back_off() {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let p = join(&cp, &c);
    let node = p.hostname().to_string();

    cp.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: ev\n  namespace: default\nspec:\n  nodeName: {node}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: web\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"100000\"]\n  - name: crash\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"false\"]\n"
    ));

    let web = "spec.containers{web}";
    let events = wait_until("Pulled, Created and Started of the pod", LONG, || {
        let ev = events_of(&cp, "default", "ev");
        ["Pulled", "Created", "Started"]
            .iter()
            .all(|r| find(&ev, r, web).is_some())
            .then_some(ev)
    });
    let started = find(&events, "Started", web).unwrap();
    assert_eq!(started["type"], "Normal");
    assert_eq!(started["message"], "Started container web");
    assert_eq!(started["source"]["component"], "kubelet");
    assert_eq!(started["source"]["host"], node.as_str());
    assert_eq!(started["reportingComponent"], "kubelet");
    assert_eq!(started["reportingInstance"], node.as_str());
    assert_eq!(started["involvedObject"]["kind"], "Pod");
    assert!(started["involvedObject"]["uid"].is_string(), "{started}");
    assert_eq!(
        find(&events, "Created", web).unwrap()["message"],
        "Created container: web"
    );
    assert_eq!(
        find(&events, "Pulled", web).unwrap()["message"],
        "Container image \"busybox\" already present on machine"
    );

    // The crash loop: one BackOff Event whose count grows.
    let crash = "spec.containers{crash}";
    let back_off = wait_until("a BackOff with a count of at least 2", LONG, || {
        let ev = events_of(&cp, "default", "ev");
        find(&ev, "BackOff", crash)
            .filter(|e| e["count"].as_i64().unwrap_or(0) >= 2)
            .cloned()
    });
    assert_eq!(back_off["type"], "Warning");
    let message = back_off["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Back-off restarting failed container crash in pod ev_default("),
        "{message}"
    );
    let same: Vec<_> = events_of(&cp, "default", "ev")
        .into_iter()
        .filter(|e| e["reason"] == "BackOff" && e["involvedObject"]["fieldPath"] == crash)
        .collect();
    assert_eq!(same.len(), 1, "one deduplicated Event: {same:?}");

    // The Node's own events, in the default namespace.
    wait_until("the node's Starting and NodeReady events", LONG, || {
        let ev = events_of(&cp, "default", &node);
        let has = |r: &str| ev.iter().any(|e| e["reason"] == r);
        (has("Starting") && has("NodeReady")).then_some(())
    });
}
