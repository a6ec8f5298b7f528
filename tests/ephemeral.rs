//! Ephemeral containers (`kubectl debug`, issue #27) on real parts: a
//! private etcd + kube-apiserver, a real container runtime
//! (`PICOLET_TEST_RUNTIME`), picolet joined with its node credential and
//! serving the node API on the host's address.
//!
//! `kubectl debug --target` adds an ephemeral container to a running pod
//! through the API's `ephemeralcontainers` subresource; picolet starts it
//! once, in the target's PID namespace (it sees the target's process),
//! reports it in `status.ephemeralContainerStatuses` until it terminated
//! with exit code 0, writes kubelet's events at its field path, and
//! `kubectl logs -c` reads its output; `kubectl exec -c` reaches a second,
//! running one. Nothing sleeps: each step waits for what the API server
//! shows.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test ephemeral`
//! (`PICOLET_TEST_RUNTIME=crio` for CRI-O).

mod harness;

use std::time::Duration;

use harness::kube::{free_port, host_ip, ControlPlane};
use harness::{wait_until, Containerd, Picolet};

const LONG: Duration = Duration::from_secs(180);

fn target_pod(node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: debugged, namespace: default}}\nspec:\n  \
         nodeName: {node}\n  automountServiceAccountToken: false\n  \
         terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox\n    \
         imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"100000\"]\n"
    )
}

/// The debug container's script: a greeting, then whether it sees the
/// target's `sleep 100000` among its processes (the pattern is written so
/// that this script's own command line does not match it).
const SCRIPT: &str = "echo debug-hello; \
    if cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -q 'sleep 10000[0]'; \
    then echo sees-target; else echo no-target; fi";

#[test]
fn kubectl_debug_runs_ephemeral_containers_once_in_the_targets_pid_namespace_and_logs_and_exec_reach_them(
) {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let ip = host_ip();
    let port = free_port();
    let config = cp.node_api_config(ip, port, 0, "");
    let p = Picolet::start_with_args(&c, &config, |p| cp.join_args(p.hostname(), ip));
    let node = p.hostname().to_string();
    cp.apply(&target_pod(&node));
    let pod = || cp.get_json(&["pod", "-n", "default", "debugged"]);
    wait_until("the target pod running", LONG, || {
        let pod = pod()?;
        (pod["status"]["phase"] == "Running").then_some(())
    });

    cp.kubectl_ok(&[
        "debug",
        "-n",
        "default",
        "debugged",
        "--image=busybox",
        "--image-pull-policy=IfNotPresent",
        "--container=debugger",
        "--target=main",
        "--",
        "sh",
        "-c",
        SCRIPT,
    ]);

    // Terminated with exit code 0, once: never restarted.
    let status = wait_until("the ephemeral container terminated", LONG, || {
        let pod = pod()?;
        let s = pod["status"]["ephemeralContainerStatuses"]
            .as_array()?
            .iter()
            .find(|s| s["name"] == "debugger")?
            .clone();
        s["state"]["terminated"].is_object().then_some(s)
    });
    assert_eq!(
        status["state"]["terminated"]["exitCode"],
        0,
        "{status:#}\n{}",
        p.log()
    );
    assert_eq!(status["restartCount"], 0, "{status:#}");
    assert_eq!(status["ready"], false, "{status:#}");
    assert!(
        status["containerID"]
            .as_str()
            .is_some_and(|id| id.contains("://")),
        "{status:#}"
    );
    // The pod is unchanged by it.
    let after = pod().expect("the pod");
    assert_eq!(after["status"]["phase"], "Running", "{after:#}");
    assert_eq!(
        after["status"]["containerStatuses"][0]["restartCount"], 0,
        "{after:#}"
    );

    // Its output through the API server and the node API.
    let logs = cp.kubectl_ok(&["logs", "-n", "default", "debugged", "-c", "debugger"]);
    assert_eq!(logs, "debug-hello\nsees-target\n", "{}", p.log());

    // Two more relists later (time has passed and the pod was looked at
    // again), still the one run: the same container, not restarted.
    let relists = || p.metric("kubelet_pleg_relist_duration_seconds_count");
    let seen = relists().expect("the PLEG's relist count");
    wait_until("two more relists", LONG, || {
        (relists()? >= seen + 2.0).then_some(())
    });
    let later = wait_until("the ephemeral container's status", LONG, || {
        pod()?["status"]["ephemeralContainerStatuses"]
            .as_array()?
            .iter()
            .find(|s| s["name"] == "debugger")
            .cloned()
    });
    assert_eq!(later["restartCount"], 0, "{later:#}");
    assert_eq!(later["containerID"], status["containerID"], "{later:#}");
    assert!(later["state"]["terminated"].is_object(), "{later:#}");

    // kubelet's events about it, at its field path.
    let reasons = wait_until("Pulled, Created and Started events", LONG, || {
        let events = cp.get_json(&[
            "events",
            "-n",
            "default",
            "--field-selector",
            "involvedObject.name=debugged,involvedObject.fieldPath=spec.ephemeralContainers{debugger}",
        ])?;
        let reasons: Vec<String> = events["items"]
            .as_array()?
            .iter()
            .filter_map(|e| e["reason"].as_str().map(str::to_string))
            .collect();
        ["Pulled", "Created", "Started"]
            .iter()
            .all(|r| reasons.iter().any(|x| x == r))
            .then_some(reasons)
    });
    assert!(!reasons.iter().any(|r| r == "BackOff"), "{reasons:?}");

    // A second one that keeps running, with stdin and a terminal as the
    // node conformance test adds it: `kubectl exec -c` reaches it by name
    // through the node API, `kubectl logs -c` reads its terminal's output,
    // and the first stays terminated.
    cp.kubectl_ok(&[
        "debug",
        "-n",
        "default",
        "debugged",
        "--image=busybox",
        "--image-pull-policy=IfNotPresent",
        "--container=shell",
        "--stdin",
        "--tty",
        "--attach=false",
        "--",
        "sh",
        "-c",
        "while true; do echo polo; sleep 1; done",
    ]);
    let out = wait_until(
        "kubectl exec in the running ephemeral container",
        LONG,
        || {
            let out = cp.kubectl(&[
                "exec", "-n", "default", "debugged", "-c", "shell", "--", "echo", "in-shell",
            ]);
            out.status.success().then_some(out)
        },
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "in-shell\n");
    wait_until("the terminal's output in kubectl logs -c", LONG, || {
        let out = cp.kubectl(&["logs", "-n", "default", "debugged", "-c", "shell"]);
        String::from_utf8_lossy(&out.stdout)
            .contains("polo")
            .then_some(())
    });
    let after = pod().expect("the pod");
    let statuses = after["status"]["ephemeralContainerStatuses"]
        .as_array()
        .expect("ephemeralContainerStatuses");
    let by_name = |n: &str| statuses.iter().find(|s| s["name"] == n).cloned();
    let shell = by_name("shell").expect("shell's status");
    assert!(shell["state"]["running"].is_object(), "{after:#}");
    let debugger = by_name("debugger").expect("debugger's status");
    assert_eq!(debugger["state"]["terminated"]["exitCode"], 0, "{after:#}");
    assert_eq!(debugger["containerID"], status["containerID"], "{after:#}");
}
