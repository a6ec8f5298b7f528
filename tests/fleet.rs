//! A fleet on one control plane (issue #24): `picolet-hollow` runs 20
//! simulated nodes in one process, each a full agent over its own
//! in-memory runtime with its own node certificate, against the real
//! control plane (etcd, kube-apiserver, controller-manager, scheduler).
//! The test checks correctness, not timing: every node registers and is
//! Ready, 200 pods of a Deployment all reach Running on those nodes and
//! become Ready (their readiness probes answer success on a hollow node), and
//! after the Deployment is deleted every pod is gone from the API server
//! and from every node (no stray pod left in any agent). A third test cuts
//! one node's link until the node lifecycle controller marks the node
//! `Unknown` and its pod not Ready, and checks both are Ready again once
//! the link returns.
//!
//! It prints what it measured on the way (join and start times, the
//! process's RSS and CPU per node) for the record; nothing is asserted on
//! them.
//!
//! Needs the `hollow` feature (Cargo.toml's `required-features`): run
//! `cargo test --features hollow --test fleet -- --nocapture`.

mod harness;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use harness::hollow::Hollow;
use harness::kube::ControlPlane;
use harness::{picolet_bin, wait_until};

/// Nodes, and pods per node; `PICOLET_FLEET_NODES` sets another count
/// for a measurement run (docs/fleet.md).
const NODES: usize = 20;
const PODS_PER_NODE: usize = 10;
const PREFIX: &str = "hollow-";
const NAMESPACE: &str = "fleet";
fn nodes() -> usize {
    std::env::var("PICOLET_FLEET_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(NODES)
}

/// Generous bounds for each wait on two shared cores.
const LONG: Duration = Duration::from_secs(300);

/// Starts the fleet's `nodes` hollow nodes under `dir`, each with the node
/// certificate the control plane issued for it.
fn start_fleet(cp: &ControlPlane, dir: &Path, nodes: usize) -> Hollow {
    let node_ip = format!("--node-ip={}", harness::kube::host_ip());
    Hollow::start(cp, dir, PREFIX, nodes, |_| None, &[node_ip])
}

/// The pods of the namespace: (name, node, phase and `Ready` if it is).
fn pods(cp: &ControlPlane) -> Option<Vec<(String, String, String)>> {
    let list = cp.get_json(&["pods", "-n", NAMESPACE])?;
    Some(
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
                let ready = p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                let phase = s(&p["status"]["phase"]);
                (
                    s(&p["metadata"]["name"]),
                    s(&p["spec"]["nodeName"]),
                    if ready {
                        format!("{phase} Ready")
                    } else {
                        phase
                    },
                )
            })
            .collect(),
    )
}

/// How many pods node `name`'s agent still knows (its admin socket).
fn agent_pods(hollow: &Hollow, name: &str) -> Option<usize> {
    let out = Command::new(picolet_bin())
        .args(["get", "pods", "-A", "-o", "json", "--admin-socket"])
        .arg(hollow.admin_socket(name))
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    Some(v["items"].as_array()?.len())
}

#[test]
fn twenty_hollow_nodes_run_two_hundred_pods_and_delete_them_all_without_a_stray() {
    let cp = ControlPlane::builder()
        .with_controller_manager()
        .with_scheduler()
        .start();
    let dir = tempfile::tempdir().unwrap();
    let (nodes, pods_wanted) = (nodes(), nodes() * PODS_PER_NODE);
    let started = Instant::now();
    let hollow = start_fleet(&cp, dir.path(), nodes);
    wait_until("every hollow node to be Ready", LONG, || {
        (harness::hollow::ready_nodes(&cp, PREFIX).len() == nodes).then_some(())
    });
    let joined = started.elapsed();
    let (rss_idle, cpu_joined) = hollow.usage();

    cp.ensure_namespace(NAMESPACE);
    let started = Instant::now();
    cp.apply(&harness::hollow::deployment(NAMESPACE, pods_wanted, "1"));
    let mut last = Vec::new();
    let all_running = harness::poll_until(LONG, || {
        last = pods(&cp)?;
        (last.len() == pods_wanted
            && last
                .iter()
                .all(|(_, node, phase)| node.starts_with(PREFIX) && phase == "Running Ready"))
        .then_some(())
    });
    let summary = |v: &[(String, String, String)]| {
        let running = v.iter().filter(|p| p.2.starts_with("Running")).count();
        let ready = v.iter().filter(|p| p.2.ends_with("Ready")).count();
        format!("{} pods, {running} Running, {ready} Ready", v.len())
    };
    assert!(
        all_running.is_some(),
        "not every pod became Running and Ready: {}; log tail:\n{}",
        summary(&last),
        harness::tail(&hollow.log_path(), 40)
    );
    let ran = started.elapsed();
    let (rss_pods, cpu_pods) = hollow.usage();
    let nodes_used = {
        let mut n: Vec<&str> = last.iter().map(|p| p.1.as_str()).collect();
        n.sort();
        n.dedup();
        n.len()
    };

    let started = Instant::now();
    let out = harness::hollow::delete_deployment(&cp, NAMESPACE);
    assert!(
        out.status.success(),
        "kubectl delete deployment fleet: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until("every pod to be gone from the API server", LONG, || {
        pods(&cp)?.is_empty().then_some(())
    });
    for i in 0..nodes {
        let name = format!("{PREFIX}{i}");
        wait_until(&format!("node {name}'s agent to hold no pod"), LONG, || {
            (agent_pods(&hollow, &name)? == 0).then_some(())
        });
    }
    let deleted = started.elapsed();
    let (rss_end, cpu_end) = hollow.usage();
    let kib = |k: u64| k as f64 / nodes as f64;
    eprintln!(
        "fleet: {nodes} nodes Ready in {joined:.1?}; {pods_wanted} pods Running in {ran:.1?} on \
         {nodes_used} nodes; all deleted in {deleted:.1?}\n\
         fleet: RSS per node: {:.0} KiB idle, {:.0} KiB with {} pods each, {:.0} KiB after; \
         CPU per node: {:.2} s to join, {:.2} s to run the pods, {:.2} s to delete them",
        kib(rss_idle),
        kib(rss_pods),
        PODS_PER_NODE,
        kib(rss_end),
        cpu_joined / nodes as f64,
        (cpu_pods - cpu_joined) / nodes as f64,
        (cpu_end - cpu_pods) / nodes as f64,
    );
    // For a measurement run only (`PICOLET_FLEET_IDLE_RENEWALS=6`: about
    // a minute): the idle fleet's CPU between Lease renewals of node 0.
    let renewals: u32 = std::env::var("PICOLET_FLEET_IDLE_RENEWALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if renewals > 0 {
        let node = format!("{PREFIX}0");
        let mut t = wait_until("node 0's Lease", LONG, || renew_time(&cp, &node));
        t = next_renewal(&cp, &node, &t);
        let (_, cpu_before) = hollow.usage();
        let started = Instant::now();
        for _ in 0..renewals {
            t = next_renewal(&cp, &node, &t);
        }
        let (rss, cpu_after) = hollow.usage();
        let minutes = started.elapsed().as_secs_f64() / 60.0;
        eprintln!(
            "fleet: idle, {:.0} KiB RSS and {:.3} s CPU per minute per node ({:.1} s window)",
            kib(rss),
            (cpu_after - cpu_before) / minutes / nodes as f64,
            minutes * 60.0
        );
    }
    drop(hollow);
}

/// `kube-node-lease/<node>`'s renewTime as the API server has it.
fn renew_time(cp: &ControlPlane, node: &str) -> Option<String> {
    let lease = cp.get_json(&["lease", node, "-n", "kube-node-lease"])?;
    lease["spec"]["renewTime"].as_str().map(str::to_string)
}

/// Waits for the Lease of `node` to be renewed after `since`; returns the
/// new renewTime.
fn next_renewal(cp: &ControlPlane, node: &str, since: &str) -> String {
    wait_until(&format!("node {node}'s Lease to be renewed"), LONG, || {
        renew_time(cp, node).filter(|t| t != since)
    })
}

/// What one idle node costs on the wire: every byte of its one connection
/// (TLS records, both directions) through the fault proxy, over six Lease
/// renewals (one minute at the default 40 s lease). Printed for the record
/// (docs/fleet.md): the bound is the 2 KiB per minute.
#[test]
fn an_idle_hollow_node_costs_few_bytes_a_minute_on_the_wire() {
    let cp = ControlPlane::shared();
    let proxy = harness::faultproxy::FaultProxy::start(cp.apiserver_addr());
    let dir = tempfile::tempdir().unwrap();
    let name = "hollow-idle-0";
    let hollow = Hollow::start(
        cp,
        dir.path(),
        "hollow-idle-",
        1,
        |_| Some(proxy.https_url()),
        &[],
    );
    // Past the start: registration, first status, first lists and watches.
    let mut t = wait_until("the node's first Lease", LONG, || renew_time(cp, name));
    for _ in 0..2 {
        t = next_renewal(cp, name, &t);
    }
    proxy.reset_stats();
    proxy.note_records();
    let (_, cpu_before) = hollow.usage();
    let started = Instant::now();
    for _ in 0..6 {
        t = next_renewal(cp, name, &t);
    }
    let s = proxy.stats();
    let (rss, cpu_after) = hollow.usage();
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    eprintln!(
        "idle node on the wire over 6 Lease renewals ({:.1} s): {} B up, {} B down, \
         {} B in all ({:.0} B per renewal; {} connection(s) opened); \
         process: {rss} KiB RSS, {:.2} s CPU per minute",
        minutes * 60.0,
        s.bytes_up,
        s.bytes_down,
        s.bytes_up + s.bytes_down,
        (s.bytes_up + s.bytes_down) as f64 / 6.0,
        s.accepted,
        (cpu_after - cpu_before) / minutes,
    );
    // Where the bytes went: every TLS record, by time and direction (a
    // renewal is a record up and its answer down; a watch event, a PING
    // and its answer are records of their own).
    let records = proxy.records();
    let mut line = String::new();
    for (i, r) in records.iter().enumerate() {
        let at = r.at.saturating_duration_since(started).as_secs_f64();
        line += &format!(
            "  {at:6.2}s {} {:4}",
            if r.up { "up" } else { "dn" },
            r.bytes
        );
        if i % 6 == 5 || i + 1 == records.len() {
            eprintln!("{line}");
            line.clear();
        }
    }
}

/// The `Ready` condition's status of the object `kubectl get <args>`
/// names (a node, a pod), in the API.
fn ready_of(cp: &ControlPlane, args: &[&str]) -> Option<String> {
    let o = cp.get_json(args)?;
    o["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?["status"]
        .as_str()
        .map(str::to_string)
}

/// The Ready condition's status of node `name` in the API.
fn ready_status(cp: &ControlPlane, name: &str) -> Option<String> {
    ready_of(cp, &["node", name])
}

/// The `Ready` condition of pod `name` in `default`.
fn pod_ready(cp: &ControlPlane, name: &str) -> Option<String> {
    ready_of(cp, &["pod", name, "-n", "default"])
}

/// A link outage longer than the node lifecycle controller's grace period:
/// the controller marks the node `Unknown` and its pod not Ready; once the
/// link is back, the node posts its status at once because the watched
/// Node disagrees with it, as kubelet's status update compares with the
/// Node it reads, and the pod's status because the watched pod disagrees
/// with what the node last posted, as kubelet's status manager reconciles.
/// With `nodeStatusReportFrequency` at an hour and a pod that does not
/// change, nothing else would post either.
#[test]
fn a_node_marked_unknown_while_its_link_was_down_is_ready_again_once_the_link_returns() {
    let cp = ControlPlane::builder()
        .with_controller_manager()
        .controller_manager_arg("--node-monitor-grace-period=16s")
        .controller_manager_arg("--node-monitor-period=2s")
        .start();
    let proxy = harness::faultproxy::FaultProxy::start(cp.apiserver_addr());
    let dir = tempfile::tempdir().unwrap();
    let name = "hollow-cut-0";
    let hollow = Hollow::start(
        &cp,
        dir.path(),
        "hollow-cut-",
        1,
        |_| Some(proxy.https_url()),
        &["--node-status-report-frequency=1h".to_string()],
    );
    wait_until("the node to be Ready", LONG, || {
        (ready_status(&cp, name)? == "True").then_some(())
    });
    let pod = "steady";
    cp.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {pod}\n  namespace: default\n\
         spec:\n  nodeName: {name}\n  automountServiceAccountToken: false\n\
         \x20 containers:\n  - name: app\n    image: docker.io/library/busybox:hollow\n"
    ));
    wait_until("the pod to be Ready", LONG, || {
        (pod_ready(&cp, pod)? == "True").then_some(())
    });
    proxy.blackhole();
    wait_until(
        "the node lifecycle controller to mark the node Unknown",
        LONG,
        || (ready_status(&cp, name)? == "Unknown").then_some(()),
    );
    wait_until("the controller to mark the pod not Ready", LONG, || {
        (pod_ready(&cp, pod)? == "False").then_some(())
    });
    let user = format!("system:node:{name}");
    let before = cp.requests_by(&user).len();
    proxy.pass();
    let back = Instant::now();
    let ready = harness::poll_until(LONG, || (ready_status(&cp, name)? == "True").then_some(()));
    assert!(
        ready.is_some(),
        "the node stayed {:?} after its link returned; log tail:\n{}",
        ready_status(&cp, name),
        harness::tail(&hollow.log_path(), 30)
    );
    let pod_back = harness::poll_until(LONG, || (pod_ready(&cp, pod)? == "True").then_some(()));
    assert!(
        pod_back.is_some(),
        "the pod stayed Ready={:?} after the node's link returned; log tail:\n{}",
        pod_ready(&cp, pod),
        harness::tail(&hollow.log_path(), 30)
    );
    // For the record: what the node sent once its link was back.
    let after: Vec<String> = cp.requests_by(&user)[before..]
        .iter()
        .map(|r| format!("{} {} {:?}", r.verb, r.uri, r.code))
        .collect();
    eprintln!(
        "Ready again {:.1?} after the link returned; {} requests since:\n  {}",
        back.elapsed(),
        after.len(),
        after.join("\n  ")
    );
}
