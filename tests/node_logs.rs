//! Container logs and stats on a real container runtime: `picolet logs`
//! (the CLI, over the admin socket, with no API server) reads what a
//! static pod printed, `--tail` and `-f` behave as kubectl's, and
//! `/stats/summary` answers kubelet's Summary with real numbers.
//!
//! Waits are generous polls; nothing asserts on timing. The container
//! prints its last line only when the test creates a file in a hostPath
//! volume, so "follow sees a new line" needs no clock.

mod harness;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use harness::{wait_until, Containerd, Picolet};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);

/// Runs `picolet logs ARGS` against `p`'s admin socket: status, stdout,
/// stderr.
fn picolet_logs(p: &Picolet, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(harness::picolet_bin())
        .arg("logs")
        .args(args)
        .arg("--admin-socket")
        .arg(p.admin_socket())
        .output()
        .expect("running picolet logs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn talker(signal: &Path) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: talker}}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: signal
    hostPath: {{path: {}}}
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    volumeMounts: [{{name: signal, mountPath: /signal}}]
    command: ["sh", "-c", "echo one; echo two; echo three; while [ ! -e /signal/go ]; do sleep 0.2; done; echo four; exec sleep 100000"]
"#,
        signal.display()
    )
}

#[test]
fn picolet_logs_reads_tails_and_follows_a_static_pods_container() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let signal = p.dir().join("signal");
    std::fs::create_dir_all(&signal).unwrap();
    p.write_manifest("talker", &talker(&signal));
    let pod = format!("talker-{}", p.hostname());

    let all = wait_until("picolet logs prints the first three lines", LONG, || {
        let (ok, out, _) = picolet_logs(&p, &[&pod]);
        (ok && out == "one\ntwo\nthree\n").then_some(out)
    });
    assert_eq!(all, "one\ntwo\nthree\n");

    let (ok, out, err) = picolet_logs(&p, &[&pod, "--tail", "2"]);
    assert!(ok, "{err}");
    assert_eq!(out, "two\nthree\n");

    let (ok, out, err) = picolet_logs(&p, &[&pod, "-c", "main", "--timestamps", "--tail=1"]);
    assert!(ok, "{err}");
    let (stamp, text) = out
        .trim_end()
        .split_once(' ')
        .expect("a timestamp, then the text");
    assert_eq!(text, "three");
    assert!(
        stamp.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
        "{stamp:?} is RFC 3339"
    );

    let (ok, _, err) = picolet_logs(&p, &[&pod, "-c", "nope"]);
    assert!(!ok);
    assert!(
        err.contains(&format!("container \"nope\" not found in pod \"{pod}\"")),
        "{err}"
    );
    let (ok, _, err) = picolet_logs(&p, &["absent"]);
    assert!(!ok);
    assert!(err.contains("\"absent\" not found"), "{err}");
    let (status, body) = p.get(&format!("/containerLogs/default/{pod}/nope"));
    assert_eq!(status, 404, "{body}");

    // Follow: the backlog, then a line written after the request.
    let mut follow = Command::new(harness::picolet_bin())
        .args(["logs", &pod, "-f", "--tail", "1", "--admin-socket"])
        .arg(p.admin_socket())
        .stdout(Stdio::piped())
        .spawn()
        .expect("running picolet logs -f");
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "three");
    std::fs::write(signal.join("go"), "").unwrap();
    assert_eq!(
        lines.next().unwrap().unwrap(),
        "four",
        "picolet logs -f prints a line written after it started"
    );
    let _ = follow.kill();
    let _ = follow.wait();

    let (ok, out, err) = picolet_logs(&p, &[&pod, "--limit-bytes", "6"]);
    assert!(ok, "{err}");
    assert_eq!(out, "one\ntw");
}

#[test]
fn stats_summary_answers_kubelets_summary_with_real_numbers() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let signal = p.dir().join("signal");
    std::fs::create_dir_all(&signal).unwrap();
    p.write_manifest("talker", &talker(&signal));
    let pod = format!("talker-{}", p.hostname());
    let summary = wait_until("the pod's memory in /stats/summary", LONG, || {
        let (status, body) = p.get("/stats/summary");
        assert_eq!(status, 200, "{body}");
        let s: Value = serde_json::from_str(&body).expect("the summary is JSON");
        let mine = s["pods"]
            .as_array()?
            .iter()
            .find(|x| x["podRef"]["name"] == pod.as_str())?
            .clone();
        let has_container = mine["containers"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["name"] == "main"));
        (mine["memory"]["workingSetBytes"].as_u64() > Some(0) && has_container).then_some(s)
    });
    let node = &summary["node"];
    assert_eq!(node["nodeName"], p.hostname());
    assert!(
        node["memory"]["workingSetBytes"].as_u64() > Some(0),
        "{node}"
    );
    assert!(
        node["memory"]["availableBytes"].as_u64() > Some(0),
        "{node}"
    );
    assert!(
        node["cpu"]["usageCoreNanoSeconds"].as_u64() > Some(0),
        "{node}"
    );
    assert!(node["fs"]["capacityBytes"].as_u64() > Some(0), "{node}");
    assert!(node["rlimit"]["maxpid"].as_u64() > Some(0), "{node}");
    let mine = summary["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["podRef"]["name"] == pod.as_str())
        .unwrap();
    assert_eq!(mine["podRef"]["namespace"], "default");
    assert!(mine["podRef"]["uid"]
        .as_str()
        .is_some_and(|u| !u.is_empty()));
    assert!(
        mine["cpu"]["usageCoreNanoSeconds"].as_u64().is_some(),
        "{mine}"
    );

    // A second scrape has a previous CPU sample: usageNanoCores appears.
    wait_until("usageNanoCores from two samples", LONG, || {
        let (_, body) = p.get("/stats/summary");
        let s: Value = serde_json::from_str(&body).ok()?;
        s["node"]["cpu"]["usageNanoCores"].as_u64().map(|_| ())
    });

    let (status, text) = p.get("/metrics/resource");
    assert_eq!(status, 200, "{text}");
    let mut names = vec![
        "node_cpu_usage_seconds_total ",
        "node_memory_working_set_bytes ",
        "node_swap_usage_bytes ",
        "pod_memory_working_set_bytes{",
        "container_memory_working_set_bytes{container=\"main\"",
        "resource_scrape_error 0",
    ];
    if swap_accounted() {
        names.push("container_swap_usage_bytes{container=\"main\"");
        names.push("pod_swap_usage_bytes{");
    }
    for name in names {
        assert!(text.contains(name), "{name} in {text}");
    }

    // Swap and pressure, where this host's kernel has them.
    let (_, body) = p.get("/stats/summary");
    let summary: Value = serde_json::from_str(&body).unwrap();
    assert_swap_and_pressure(&summary, &pod);
}

/// cgroup v2 (the unified hierarchy at the mount root).
fn cgroup_v2() -> bool {
    Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

/// Whether the kernel counts swap per cgroup: v1 with `memsw`, v2 with
/// `memory.swap.current` in its cgroups.
fn swap_accounted() -> bool {
    if !cgroup_v2() {
        return Path::new("/sys/fs/cgroup/memory/memory.memsw.usage_in_bytes").exists();
    }
    std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("memory.swap.current").exists())
}

/// `swap` on the node always (from /proc/meminfo), on the pod and the
/// container where swap is accounted; `psi` in the node's cpu, memory and
/// io where /proc/pressure exists, in the pod's and container's only on
/// cgroup v2 with PSI.
fn assert_swap_and_pressure(summary: &Value, pod: &str) {
    let node = &summary["node"];
    assert!(node["swap"]["swapUsageBytes"].is_u64(), "{node}");
    assert!(node["swap"]["swapAvailableBytes"].is_u64(), "{node}");
    let mine = summary["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["podRef"]["name"] == pod)
        .unwrap();
    let main = mine["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "main")
        .unwrap();
    let accounted = swap_accounted();
    for (what, v) in [("pod", mine), ("container", main)] {
        assert_eq!(
            v["swap"]["swapUsageBytes"].is_u64(),
            accounted,
            "{what} swap (accounted: {accounted}): {v}"
        );
    }
    let node_psi = Path::new("/proc/pressure/cpu").exists();
    for key in ["cpu", "memory", "io"] {
        let psi = &node[key]["psi"];
        assert_eq!(
            psi["some"]["total"].is_u64(),
            node_psi,
            "node {key}: {node}"
        );
        if node_psi {
            assert!(psi["full"]["avg10"].is_number(), "node {key}: {node}");
        }
    }
    let cgroup_psi = cgroup_v2() && Path::new("/sys/fs/cgroup/cpu.pressure").exists();
    for (what, v) in [("pod", mine), ("container", main)] {
        for key in ["cpu", "memory", "io"] {
            assert_eq!(
                v[key]["psi"]["some"]["total"].is_u64(),
                cgroup_psi,
                "{what} {key} (cgroup PSI: {cgroup_psi}): {v}"
            );
        }
    }
}
