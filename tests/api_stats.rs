//! The node's stats through the API server's node proxy (issue #11), on
//! real parts: a private etcd + kube-apiserver, a real container runtime
//! (`PICOLET_TEST_RUNTIME`), picolet joined and serving the node API on
//! the host's address. `kubectl get --raw
//! /api/v1/nodes/<node>/proxy/stats/summary` must parse as kubelet's
//! stats/v1alpha1 Summary (its JSON field names) and
//! `/metrics/resource` must carry kubelet's metric names.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test api_stats --
//! --nocapture`.

mod harness;

use std::time::Duration;

use harness::kube::{free_port, host_ip, ControlPlane};
use harness::{wait_until, Containerd, Picolet};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(180);

/// Asserts `v[key]` is a filesystem's stats as kubelet's FsStats names them.
fn assert_fs(v: &Value, what: &str) {
    assert!(v["time"].is_string(), "{what}: {v}");
    assert!(v["usedBytes"].is_u64(), "{what}: {v}");
    assert!(v["capacityBytes"].is_u64(), "{what}: {v}");
    assert!(v["availableBytes"].is_u64(), "{what}: {v}");
}

#[test]
fn stats_summary_and_metrics_resource_parse_through_the_node_proxy() {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let ip = host_ip();
    let port = free_port();
    let config = cp.node_api_config(ip, port, 0, "");
    let p = Picolet::start_with_args(&c, &config, |p| cp.join_args(p.hostname(), ip));
    let node = p.hostname().to_string();
    cp.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: busy, namespace: default}}\n\
         spec:\n  nodeName: {node}\n  automountServiceAccountToken: false\n  \
         terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    \
         image: busybox\n    imagePullPolicy: IfNotPresent\n    \
         volumeMounts: [{{name: scratch, mountPath: /scratch}}]\n    \
         command: [\"sh\", \"-c\", \"head -c 1048576 /dev/zero > /scratch/blob; echo started; exec sleep 100000\"]\n  \
         volumes:\n  - name: scratch\n    emptyDir: {{}}\n"
    ));
    let raw = |path: &str| {
        let out = cp.kubectl(&["get", "--raw", &format!("/api/v1/nodes/{node}/proxy{path}")]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let summary: Value = wait_until("the Summary with the running pod", LONG, || {
        let v: Value = serde_json::from_str(&raw("/stats/summary")?).ok()?;
        let has = v["pods"].as_array()?.iter().any(|p| {
            p["podRef"]["name"] == "busy"
                && p["containers"].as_array().is_some_and(|c| !c.is_empty())
        });
        let written = v["pods"].as_array()?.iter().any(|p| {
            p["volume"][0]["usedBytes"]
                .as_u64()
                .is_some_and(|b| b >= 1 << 20)
        });
        // Its "started" line reached the log file (the runtime writes it
        // a moment after the container wrote it).
        let logged = v["pods"].as_array()?.iter().any(|p| {
            p["podRef"]["name"] == "busy"
                && p["containers"][0]["logs"]["usedBytes"]
                    .as_u64()
                    .is_some_and(|b| b > 0)
        });
        (has && written && logged).then_some(v)
    });

    // The node: kubelet's names.
    let n = &summary["node"];
    assert_eq!(n["nodeName"], node.as_str());
    assert!(n["startTime"].is_string(), "{n}");
    assert!(n["cpu"]["usageCoreNanoSeconds"].is_u64(), "{n}");
    assert!(n["memory"]["workingSetBytes"].is_u64(), "{n}");
    assert!(n["memory"]["availableBytes"].is_u64(), "{n}");
    // Swap, from /proc/meminfo, whether the node has any or not.
    assert!(n["swap"]["swapUsageBytes"].is_u64(), "{n}");
    assert_fs(&n["fs"], "node.fs");
    assert_fs(&n["runtime"]["imageFs"], "node.runtime.imageFs");
    assert!(n["rlimit"]["maxpid"].is_u64(), "{n}");
    assert!(n["rlimit"]["curproc"].is_u64(), "{n}");
    assert!(
        n["systemContainers"]
            .as_array()
            .is_some_and(|s| s.iter().any(|c| c["name"] == "pods")),
        "{n}"
    );

    // The pod and its container.
    let pod = summary["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["podRef"]["name"] == "busy")
        .unwrap();
    assert_eq!(pod["podRef"]["namespace"], "default");
    assert!(pod["podRef"]["uid"].is_string(), "{pod}");
    assert!(pod["cpu"]["usageCoreNanoSeconds"].is_u64(), "{pod}");
    assert!(pod["memory"]["workingSetBytes"].is_u64(), "{pod}");
    assert_fs(&pod["ephemeral-storage"], "pod ephemeral-storage");
    let scratch = &pod["volume"][0];
    assert_eq!(scratch["name"], "scratch", "{pod}");
    assert_fs(scratch, "the emptyDir volume");
    assert!(
        scratch["usedBytes"].as_u64().unwrap() >= 1 << 20,
        "{scratch}"
    );
    assert!(
        pod["ephemeral-storage"]["usedBytes"].as_u64().unwrap() >= 1 << 20,
        "{pod}"
    );
    let main = &pod["containers"][0];
    assert_eq!(main["name"], "main");
    assert!(main["startTime"].is_string(), "{main}");
    assert!(main["cpu"]["usageCoreNanoSeconds"].is_u64(), "{main}");
    assert!(main["memory"]["workingSetBytes"].is_u64(), "{main}");
    assert_fs(&main["logs"], "container logs");
    assert!(main["logs"]["usedBytes"].as_u64().unwrap() > 0, "{main}");

    // /metrics/resource: kubelet's metric names.
    let metrics = raw("/metrics/resource").expect("/metrics/resource through the proxy");
    for name in [
        "node_cpu_usage_seconds_total",
        "node_memory_working_set_bytes",
        "node_swap_usage_bytes",
        "resource_scrape_error",
        "scrape_error",
    ] {
        assert!(
            metrics.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{name} missing:\n{metrics}"
        );
    }
    for name in [
        "container_cpu_usage_seconds_total",
        "container_memory_working_set_bytes",
        "pod_cpu_usage_seconds_total",
        "pod_memory_working_set_bytes",
    ] {
        let series = metrics
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{")) && l.contains("pod=\"busy\""));
        assert!(series.is_some(), "{name} of busy missing:\n{metrics}");
    }
}
