//! picolet as a node of a real cluster: a private etcd and kube-apiserver
//! (Node,RBAC authorization, NodeRestriction) from tests/harness/kube.rs,
//! real containerd, and picolet joined with a `system:node:<name>`
//! credential. Nothing is mocked.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test apiserver --
//! --test-threads=2`.

mod harness;

use std::time::Duration;

use harness::kube::ControlPlane;
use harness::{wait_until, Containerd, Picolet};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(90);

fn join(cp: &ControlPlane, c: &Containerd, extra_config: &str) -> Picolet {
    Picolet::start_with_args(c, extra_config, |p| {
        let kubeconfig = cp.node_kubeconfig(p.hostname());
        vec![
            "--kubeconfig".to_string(),
            kubeconfig.display().to_string(),
            "--node-labels".to_string(),
            "example.com/site=test".to_string(),
        ]
    })
}

/// `kubectl get <what> -o json`, or None when it does not exist.
fn get(cp: &ControlPlane, args: &[&str]) -> Option<Value> {
    cp.get_json(args)
}

fn condition(obj: &Value, kind: &str) -> Option<String> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str())
        .map(str::to_string)
}

/// An API pod: `busybox` is `:latest`, so the API server defaults its pull
/// policy to Always; no registry is reachable here, so it runs only by the
/// offline image fallback (the image is on the node).
fn api_pod_yaml(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  nodeName: {node}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 3\n  containers:\n  - name: main\n    image: busybox\n    command: [\"sleep\", \"100000\"]\n    readinessProbe:\n      exec: {{command: [\"true\"]}}\n      periodSeconds: 1\n"
    )
}

/// The ID of the pod's `main` container as the API reports it (the
/// runtime's prefix, `containerd://` or `cri-o://`, dropped).
fn container_id(cp: &ControlPlane, pod: &str) -> Option<String> {
    let pod = get(cp, &["pod", pod, "-n", "default"])?;
    let id = pod["status"]["containerStatuses"][0]["containerID"].as_str()?;
    Some(id.split_once("://").map_or(id, |(_, id)| id).to_string())
}

/// The container's state as runc has it (`running`, `stopped`), asked of
/// runc directly under either runtime's runc root; None when it is gone.
fn runc_state(c: &Containerd, id: &str) -> Option<String> {
    [c.runc_root().join("k8s.io"), c.runc_root()]
        .iter()
        .find_map(|root| {
            let out = std::process::Command::new("runc")
                .arg("--root")
                .arg(root)
                .args(["state", id])
                .output()
                .ok()?;
            let v: Value = serde_json::from_slice(&out.stdout).ok()?;
            v["status"].as_str().map(str::to_string)
        })
}

#[test]
fn a_joined_node_becomes_ready_runs_api_pods_reports_them_and_mirrors_static_pods() {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let p = join(&cp, &c, "");
    let node = p.hostname().to_string();

    // The Node: registered, Ready, with the machine's facts and our labels.
    let n = wait_until("the node is Ready in the API", LONG, || {
        let n = get(&cp, &["node", &node])?;
        (condition(&n, "Ready").as_deref() == Some("True")).then_some(n)
    });
    assert_eq!(
        n["metadata"]["labels"]["kubernetes.io/hostname"],
        node.as_str()
    );
    assert_eq!(n["metadata"]["labels"]["kubernetes.io/os"], "linux");
    assert_eq!(n["metadata"]["labels"]["example.com/site"], "test");
    assert!(n["status"]["capacity"]["cpu"].is_string(), "{n}");
    let runtime_version = n["status"]["nodeInfo"]["containerRuntimeVersion"]
        .as_str()
        .unwrap_or_default();
    assert!(
        runtime_version.starts_with(&format!("{}://", c.kind().runtime_name())),
        "{runtime_version}"
    );
    for kind in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
        assert_eq!(condition(&n, kind).as_deref(), Some("False"), "{kind}");
    }
    wait_until("the node's Lease is renewed", LONG, || {
        let l = get(&cp, &["lease", "-n", "kube-node-lease", &node])?;
        (l["spec"]["holderIdentity"] == node.as_str()).then_some(())
    });
    // Renewed by patches whose first cleared its managedFields (README,
    // fleets): the API server keeps none for the patches that follow. Still
    // owned by the Node.
    let lease = wait_until("the Lease's managedFields cleared", LONG, || {
        let l = get(
            &cp,
            &[
                "lease",
                "-n",
                "kube-node-lease",
                &node,
                "--show-managed-fields",
            ],
        )?;
        let fields = l["metadata"]["managedFields"]
            .as_array()
            .map_or(0, Vec::len);
        (fields == 0).then_some(l)
    });
    assert_eq!(lease["metadata"]["ownerReferences"][0]["kind"], "Node");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);

    // A pod bound to the node runs and reports Running and Ready.
    cp.apply(&api_pod_yaml("api-web", &node));
    let pod = wait_until("the API pod is Running and Ready in the API", LONG, || {
        let pod = get(&cp, &["pod", "api-web", "-n", "default"])?;
        (pod["status"]["phase"] == "Running" && condition(&pod, "Ready").as_deref() == Some("True"))
            .then_some(pod)
    });
    assert_eq!(pod["status"]["qosClass"], "BestEffort");
    assert!(pod["status"]["podIP"].is_string(), "{pod}");
    assert!(pod["status"]["hostIP"].is_string(), "{pod}");
    assert!(pod["status"]["startTime"].is_string(), "{pod}");
    assert_eq!(pod["status"]["containerStatuses"][0]["ready"], true);
    // The API server keeps the pod-level resources kubelet v1.36 reports.
    assert!(pod["status"]["resources"].is_object(), "{pod}");

    // A static pod appears as a mirror pod owned by the Node.
    p.write_manifest(
        "mirrored",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: mirrored\n  namespace: default\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"100000\"]\n",
    );
    let mirror_name = format!("mirrored-{node}");
    let mirror = wait_until(
        "the static pod's mirror is Running in the API",
        LONG,
        || {
            let m = get(&cp, &["pod", &mirror_name, "-n", "default"])?;
            (m["status"]["phase"] == "Running").then_some(m)
        },
    );
    assert!(mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string());
    assert_eq!(mirror["metadata"]["ownerReferences"][0]["kind"], "Node");

    // Someone deletes the mirror: it comes back; the static pod keeps running.
    let static_id = container_id(&cp, &mirror_name).expect("the mirror reports its container");
    assert_eq!(runc_state(&c, &static_id).as_deref(), Some("running"));
    let old_uid = mirror["metadata"]["uid"].as_str().unwrap().to_string();
    cp.kubectl_ok(&[
        "delete",
        "pod",
        &mirror_name,
        "-n",
        "default",
        "--wait=false",
    ]);
    wait_until("the mirror pod is recreated", LONG, || {
        let m = get(&cp, &["pod", &mirror_name, "-n", "default"])?;
        (m["metadata"]["uid"] != old_uid.as_str() && m["metadata"]["deletionTimestamp"].is_null())
            .then_some(())
    });
    let again = wait_until("the new mirror reports the same container", LONG, || {
        container_id(&cp, &mirror_name)
    });
    assert_eq!(again, static_id, "the static pod was not restarted");
    assert_eq!(runc_state(&c, &static_id).as_deref(), Some("running"));

    // Deleted in the API: stopped within its grace period, then gone for good.
    let api_id = container_id(&cp, "api-web").expect("the API pod reports its container");
    assert_eq!(runc_state(&c, &api_id).as_deref(), Some("running"));
    cp.kubectl_ok(&["delete", "pod", "api-web", "-n", "default", "--wait=false"]);
    wait_until("the deleted pod is gone from the API", LONG, || {
        get(&cp, &["pod", "api-web", "-n", "default"])
            .is_none()
            .then_some(())
    });
    assert_ne!(
        runc_state(&c, &api_id).as_deref(),
        Some("running"),
        "stopped before the final DELETE"
    );

    // The static pod's manifest goes: its mirror goes too.
    p.remove_manifest("mirrored");
    wait_until("the mirror pod is deleted", LONG, || {
        get(&cp, &["pod", &mirror_name, "-n", "default"])
            .is_none()
            .then_some(())
    });
}

#[test]
fn a_node_rebooted_with_the_api_server_down_runs_its_cached_pods_and_adopts_their_containers() {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let mut p = join(&cp, &c, "");
    let node = p.hostname().to_string();
    cp.apply(&api_pod_yaml("cached", &node));
    wait_until("the pod runs", LONG, || {
        let pod = get(&cp, &["pod", "cached", "-n", "default"])?;
        (pod["status"]["phase"] == "Running").then_some(())
    });
    let before = container_id(&cp, "cached").expect("the pod reports its container");
    assert_eq!(runc_state(&c, &before).as_deref(), Some("running"));

    // The uplink is gone and picolet restarts (a reboot, as far as it knows).
    cp.stop_apiserver();
    p.restart();
    wait_until(
        "picolet reports the cached pod from its cache",
        LONG,
        || {
            let pods = p.pods();
            pods["items"]
                .as_array()?
                .iter()
                .any(|i| i["metadata"]["name"] == "cached" && i["status"]["phase"] == "Running")
                .then_some(())
        },
    );
    // Five more readiness probes later (time has passed, the pod was
    // synced and probed), still the same container.
    let probes = |p: &Picolet| {
        p.metric("prober_probe_total{probe_type=\"Readiness\",result=\"successful\"}")
    };
    let start = probes(&p).unwrap_or(0.0);
    wait_until("five more readiness probes", LONG, || {
        (probes(&p).unwrap_or(0.0) >= start + 5.0).then_some(())
    });
    assert_eq!(runc_state(&c, &before).as_deref(), Some("running"));
    // The link's metrics: no contact since the restart, a dial back-off
    // within its documented 4 s.
    assert_eq!(
        p.metric("picolet_apiserver_seconds_since_last_contact"),
        None
    );
    let backoff = p
        .metric("picolet_apiserver_backoff_seconds")
        .expect("the back-off gauge");
    assert!((0.0..=4.0).contains(&backoff), "{backoff}");
    let local = p.pods();
    let cached = local["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["metadata"]["name"] == "cached"))
        .expect("picolet lists the cached pod");
    let local_id = cached["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .unwrap_or_default();
    assert!(
        local_id.ends_with(&before),
        "adopted, not restarted: {local_id} vs {before}"
    );

    // The link comes back: the pod is still the same, and still reported.
    cp.start_apiserver();
    wait_until("the status reaches the API again", LONG, || {
        let pod = get(&cp, &["pod", "cached", "-n", "default"])?;
        (condition(&pod, "Ready").as_deref() == Some("True")).then_some(())
    });
    assert_eq!(
        container_id(&cp, "cached").as_deref(),
        Some(before.as_str())
    );
    assert_eq!(runc_state(&c, &before).as_deref(), Some("running"));
    // The link answered: a contact since the restart, and the watches
    // resumed. (The Ready condition above may be the one written before the
    // outage, so it does not prove that picolet has dialed yet.)
    let since = wait_until("a contact since the API server came back", LONG, || {
        p.metric("picolet_apiserver_seconds_since_last_contact")
    });
    assert!(since < LONG.as_secs_f64(), "{since}");
    wait_until("a watch reconnected", LONG, || {
        (p.metric("picolet_apiserver_watch_reconnects_total")? >= 1.0).then_some(())
    });
}

/// `status.conditions[type]` of an object.
fn condition_of<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// An RFC 3339 API time (second precision) as Unix seconds.
fn unix(t: &Value) -> i64 {
    let t: k8s_openapi::jiff::Timestamp = t.as_str().unwrap_or_default().parse().expect("a time");
    t.as_second()
}

#[test]
fn readiness_gates_a_readiness_probes_initial_delay_and_a_shortened_active_deadline_work_as_kubelets(
) {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let p = join(&cp, &c, "");
    let node = p.hostname().to_string();
    let pod = |name: &str, spec: &str, container: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  nodeName: {node}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 2\n{spec}  containers:\n  - name: main\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"100000\"]\n{container}"
        )
    };
    cp.apply(&pod(
        "gated",
        "  readinessGates: [{conditionType: example.com/lb}]\n",
        "    readinessProbe:\n      exec: {command: [\"true\"]}\n      initialDelaySeconds: 5\n      periodSeconds: 1\n",
    ));
    cp.apply(&pod("deadline", "  activeDeadlineSeconds: 3600\n", ""));

    // The containers are ready, not before the probe's initial delay; the
    // pod is not, for its gate.
    let gated = wait_until("gated: ContainersReady True", LONG, || {
        let pod = get(&cp, &["pod", "gated", "-n", "default"])?;
        (condition(&pod, "ContainersReady").as_deref() == Some("True")).then_some(pod)
    });
    let started = unix(&gated["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]);
    let ready_at = unix(&condition_of(&gated, "ContainersReady").unwrap()["lastTransitionTime"]);
    assert!(
        ready_at - started >= 5,
        "ready {ready_at} only {} s after the start {started}",
        ready_at - started
    );
    let ready = condition_of(&gated, "Ready").unwrap();
    assert_eq!(ready["status"], "False", "{gated}");
    assert_eq!(ready["reason"], "ReadinessGatesNotReady");
    assert_eq!(
        ready["message"],
        "corresponding condition of pod readiness gate \"example.com/lb\" does not exist."
    );

    // A controller sets the gate: the pod turns Ready, and the node's own
    // status patches leave the controller's condition alone.
    cp.kubectl_ok(&[
        "patch",
        "pod",
        "gated",
        "-n",
        "default",
        "--subresource=status",
        "--type=strategic",
        "-p",
        r#"{"status":{"conditions":[{"type":"example.com/lb","status":"True"}]}}"#,
    ]);
    let gated = wait_until("gated: Ready True", LONG, || {
        let pod = get(&cp, &["pod", "gated", "-n", "default"])?;
        (condition(&pod, "Ready").as_deref() == Some("True")).then_some(pod)
    });
    assert_eq!(condition(&gated, "example.com/lb").as_deref(), Some("True"));
    assert!(condition_of(&gated, "Ready").unwrap()["reason"].is_null());

    // The deadline is shortened below the pod's age: it fails.
    wait_until("deadline: Running", LONG, || {
        let pod = get(&cp, &["pod", "deadline", "-n", "default"])?;
        (pod["status"]["phase"] == "Running").then_some(())
    });
    cp.kubectl_ok(&[
        "patch",
        "pod",
        "deadline",
        "-n",
        "default",
        "-p",
        r#"{"spec":{"activeDeadlineSeconds":1}}"#,
    ]);
    let failed = wait_until("deadline: Failed", LONG, || {
        let pod = get(&cp, &["pod", "deadline", "-n", "default"])?;
        (pod["status"]["phase"] == "Failed").then_some(pod)
    });
    assert_eq!(failed["status"]["reason"], "DeadlineExceeded");
    assert_eq!(
        failed["status"]["message"],
        "Pod was active on the node longer than the specified deadline"
    );
    let state = &failed["status"]["containerStatuses"][0]["state"];
    assert!(
        state["terminated"].is_object(),
        "its container is stopped: {state}"
    );
    assert_eq!(
        condition(&gated, "example.com/lb").as_deref(),
        Some("True"),
        "the gate's condition is still the controller's"
    );
}
