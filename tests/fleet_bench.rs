//! `make fleet`, the fleet bench (issue #24): N hollow nodes (`picolet
//! hollow`, one process) against the real control plane (etcd,
//! kube-apiserver with an audit log at Metadata level for node requests,
//! controller-manager, scheduler), for each N of `PICOLET_FLEET_SIZES`
//! (default "10,100"; `make fleet FLEET_SIZES="10 100 300 1000"`), with a
//! fresh control plane per N. Phases, each printed as it ends and then as
//! one table per N:
//!
//! 1. join: from the process's start until every node is Ready;
//! 2. density: a Deployment of 10 pods per node, placed by the scheduler;
//!    each pod's start latency is the time from its first appearance on a
//!    `kubectl get pods --watch` (the ReplicaSet created it) to the first
//!    event that shows it Running, both on the bench's clock; p50/p90/p99;
//! 3. idle (`PICOLET_FLEET_IDLE_SECS`, default 300): the nodes' requests
//!    per node per minute by verb and resource, from the audit log; the
//!    API server's CPU and RSS; the hollow process's RSS and CPU per node;
//!    the wire bytes per node per minute of the quarter of the nodes whose
//!    link goes through the fault proxy (TLS records, both ways);
//! 4. churn: a rolling update of the Deployment (`kubectl rollout
//!    status`), and the new pods' start latency (`PICOLET_FLEET_CHURN=0`
//!    skips it);
//! 5. link loss: that quarter of the nodes blackholed for
//!    `PICOLET_FLEET_LOSS_SECS` (default 60), then let back; per node, the
//!    time from the link's return until the node is Ready with a Lease
//!    renewed after the return (seen on two `kubectl --watch`es, each line
//!    stamped as it is read), and the requests those nodes made in the
//!    30 s after it (a stampede would show here), against their idle rate.
//!
//! With `PICOLET_FLEET_KUBEMARK=K` (`make fleet` sets 20), K upstream
//! kubemark hollow kubelets (`kubemark --morph=kubelet`, v1.36.2 from
//! `../shared/kube`: kubelet's code over a fake runtime, one process per
//! node, node API ports of their own) run phases 1-3 first on a control
//! plane of their own, for a per-node row to compare with.
//!
//! A phase that does not finish within its bound ends the run at that N,
//! saying where it stopped and the API server's state: the size the 2-core
//! machine's control plane does not sustain.
//!
//! It asserts nothing: performance is reported, not tested. It only runs
//! with `PICOLET_FLEET_BENCH=1` (set by `make fleet`), so a plain `cargo
//! test` skips it. Needs the `hollow` feature (Cargo.toml).

mod harness;

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use harness::faultproxy::FaultProxy;
use harness::hollow::{self, Hollow};
use harness::kube::{assets, ControlPlane, Credentials};
use harness::poll_until;

const PREFIX: &str = "hollow-";
const NAMESPACE: &str = "fleet";
const PODS_PER_NODE: usize = 10;
/// Every fourth node's link goes through the fault proxy.
const LOSSY_EVERY: usize = 4;
/// How long after the link returns the return's requests are counted.
const BURST_WINDOW: Duration = Duration::from_secs(30);

fn env_secs(name: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

/// A phase's bound: generous, growing with the fleet.
fn bound(nodes: usize) -> Duration {
    Duration::from_secs(300 + nodes as u64)
}

fn main() {
    if std::env::var("PICOLET_FLEET_BENCH").as_deref() != Ok("1") {
        println!("fleet bench: skipped (run `make fleet`, which sets PICOLET_FLEET_BENCH=1)");
        return;
    }
    let sizes: Vec<usize> = std::env::var("PICOLET_FLEET_SIZES")
        .unwrap_or_else(|_| "10,100".into())
        .split([',', ' '])
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let idle = env_secs("PICOLET_FLEET_IDLE_SECS", 300);
    let loss = env_secs("PICOLET_FLEET_LOSS_SECS", 60);
    let kubemark: usize = std::env::var("PICOLET_FLEET_KUBEMARK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut tables = Vec::new();
    if kubemark > 0 {
        println!("\n== fleet bench: {kubemark} kubemark hollow nodes (upstream kubelet v1.36.2)");
        let (table, _) = run(Contender::Kubemark, kubemark, idle, loss);
        println!("{table}");
        tables.push(table);
    }
    for &n in &sizes {
        println!("\n== fleet bench: {n} hollow nodes");
        let (table, finished) = run(Contender::Picolet, n, idle, loss);
        println!("{table}");
        tables.push(table);
        if !finished {
            println!("fleet bench: stopped at {n} nodes; larger sizes not run");
            break;
        }
    }
    println!("\n== fleet bench: all sizes\n");
    for t in tables {
        println!("{t}");
    }
}

/// One row of a size's table.
struct Row(String, String);

/// Who plays the nodes.
#[derive(Clone, Copy, PartialEq)]
enum Contender {
    /// `picolet-hollow`: N nodes in one process.
    Picolet,
    /// Upstream kubemark (`kubemark --morph=kubelet`): kubelet's code over
    /// a fake runtime, one process per node. Join, density and idle only.
    Kubemark,
}

impl Contender {
    fn prefix(self) -> &'static str {
        match self {
            Contender::Picolet => PREFIX,
            Contender::Kubemark => "kubemark-",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Contender::Picolet => "picolet",
            Contender::Kubemark => "kubemark",
        }
    }
}

/// The processes that play the nodes.
enum Fleet {
    Picolet(Hollow),
    /// The kubemark processes, and what of theirs was in /tmp before them.
    Kubemark(Vec<Child>, Vec<std::path::PathBuf>),
}

/// What kubemark leaves in /tmp whatever `TMPDIR` says: its root dirs
/// (`hollow-kubelet.*`) and its fake runtime's sockets.
fn kubemark_leftovers() -> Vec<std::path::PathBuf> {
    fs::read_dir("/tmp")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("hollow-kubelet.") || n.starts_with("kubelet_remote_")
            })
        })
        .collect()
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Fleet::Kubemark(children, before) = self {
            for c in children.iter_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
            for p in kubemark_leftovers() {
                if !before.contains(&p) {
                    let _ = fs::remove_dir_all(&p).or_else(|_| fs::remove_file(&p));
                }
            }
        }
    }
}

impl Fleet {
    /// (VmRSS in KiB, CPU seconds) of all the fleet's processes.
    fn usage(&self) -> (u64, f64) {
        match self {
            Fleet::Picolet(h) => h.usage(),
            Fleet::Kubemark(children, _) => children
                .iter()
                .map(|c| hollow::usage(c.id()))
                .fold((0, 0.0), |(r, c), (r2, c2)| (r + r2, c + c2)),
        }
    }
}

/// Starts `n` kubemark hollow kubelets, node `i` talking to `server(i)`
/// or to the API server; each with node API ports of its own.
fn start_kubemark(
    cp: &ControlPlane,
    dir: &std::path::Path,
    n: usize,
    server: impl Fn(usize) -> Option<String>,
) -> Vec<Child> {
    let kubemark = assets::binary("kubemark");
    (0..n)
        .map(|i| {
            let name = format!("kubemark-{i}");
            let kubeconfig = match server(i) {
                Some(url) => cp.node_kubeconfig_with(&name, Credentials::Files, &url),
                None => cp.node_kubeconfig(&name),
            };
            let log = fs::File::create(dir.join(format!("{name}.log"))).unwrap();
            let port = harness::kube::free_port();
            let ro_port = harness::kube::free_port();
            Command::new(&kubemark)
                .args(["--morph=kubelet", "--use-host-image-service=false"])
                .arg(format!("--name={name}"))
                .arg(format!("--kubeconfig={}", kubeconfig.display()))
                .arg(format!("--kubelet-port={port}"))
                .arg(format!("--kubelet-read-only-port={ro_port}"))
                .current_dir(dir)
                // kubemark's temp dirs and sockets (its root dir, its fake
                // runtime's socket, a kuberc) go with the bench's dir.
                .env("TMPDIR", dir)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("starting kubemark")
        })
        .collect()
}

/// Runs the phases for `n` nodes; the table, and false when a phase did
/// not finish.
fn run(who: Contender, n: usize, idle: Duration, loss: Duration) -> (String, bool) {
    let mut rows = Vec::new();
    let finished = phases(who, n, idle, loss, &mut rows);
    let mut t = format!("| {n} nodes, {} | |\n|---|---|\n", who.name());
    for Row(k, v) in rows {
        t.push_str(&format!("| {k} | {v} |\n"));
    }
    (t, finished)
}

fn phases(who: Contender, n: usize, idle: Duration, loss: Duration, rows: &mut Vec<Row>) -> bool {
    let prefix = who.prefix();
    let say = |rows: &mut Vec<Row>, k: &str, v: String| {
        println!("fleet bench ({n}): {k}: {v}");
        rows.push(Row(k.to_string(), v));
    };
    let cp = ControlPlane::builder()
        .with_controller_manager()
        .with_scheduler()
        .start();
    let apiserver = apiserver_pid(&cp);
    let proxy = FaultProxy::start(cp.apiserver_addr());
    let mut dir = tempfile::tempdir().unwrap();
    if std::env::var_os("PICOLET_TEST_KEEP").is_some() {
        // The hollow log (why a watch relisted, when a dial failed) with
        // the control plane's.
        dir.disable_cleanup(true);
        eprintln!("PICOLET_TEST_KEEP: kept {}", dir.path().display());
    }
    let node_ip = format!("--node-ip={}", harness::kube::host_ip());
    let lossy: Vec<usize> = (0..n).step_by(LOSSY_EVERY).collect();
    let lossy_names: Vec<String> = lossy.iter().map(|i| format!("{prefix}{i}")).collect();
    let server = |i: usize| i.is_multiple_of(LOSSY_EVERY).then(|| proxy.https_url());

    // 1. join
    let started = Instant::now();
    let fleet = match who {
        Contender::Picolet => Fleet::Picolet(Hollow::start(
            &cp,
            dir.path(),
            PREFIX,
            n,
            server,
            &[node_ip],
        )),
        Contender::Kubemark => {
            let before = kubemark_leftovers();
            Fleet::Kubemark(start_kubemark(&cp, dir.path(), n, server), before)
        }
    };
    let ready_nodes = |cp: &ControlPlane| hollow::ready_nodes(cp, prefix);
    if poll_until(bound(n), || (ready_nodes(&cp).len() == n).then_some(())).is_none() {
        say(
            rows,
            "join",
            format!(
                "not every node Ready within {:?} ({} of {n})",
                bound(n),
                ready_nodes(&cp).len()
            ),
        );
        return false;
    }
    say(rows, "join: all Ready after", secs(started.elapsed()));
    let (rss_joined, _) = fleet.usage();
    say(
        rows,
        &format!("{} RSS per node, idle, no pods", who.name()),
        format!("{:.0} KiB", rss_joined as f64 / n as f64),
    );

    // 2. density
    cp.ensure_namespace(NAMESPACE);
    let watch = PodWatch::start(&cp);
    let pods = n * PODS_PER_NODE;
    let started = Instant::now();
    cp.apply(&hollow::deployment(NAMESPACE, pods, "1"));
    if poll_until(bound(n), || (watch.running(None) >= pods).then_some(())).is_none() {
        say(
            rows,
            "density",
            format!(
                "{} of {pods} pods Running within {:?}",
                watch.running(None),
                bound(n)
            ),
        );
        return false;
    }
    say(
        rows,
        &format!("density: {pods} pods Running after"),
        secs(started.elapsed()),
    );
    say(
        rows,
        "pod start latency p50 / p90 / p99 (create → Running, watched)",
        percentiles(&watch.latencies(None)),
    );
    let (rss_pods, _) = fleet.usage();
    say(
        rows,
        &format!("{} RSS per node with 10 pods each", who.name()),
        format!("{:.0} KiB", rss_pods as f64 / n as f64),
    );

    // 3. idle
    let (_, fleet_cpu0) = fleet.usage();
    let (_, api_cpu0) = hollow::usage(apiserver);
    proxy.reset_stats();
    let t0 = utc_now();
    let began = Instant::now();
    // The window's length is the measurement, not a wait for something.
    thread::sleep(idle);
    let t1 = utc_now();
    let minutes = began.elapsed().as_secs_f64() / 60.0;
    let wire = proxy.stats();
    let (rss_idle, fleet_cpu1) = fleet.usage();
    let (api_rss, api_cpu1) = hollow::usage(apiserver);
    let audit = fs::read_to_string(cp.audit_log_path()).unwrap_or_default();
    let requests = node_requests(&audit, &t0, &t1, |node| node.starts_with(prefix));
    let total: usize = requests.values().sum();
    say(
        rows,
        &format!("idle {:.0} s: requests per node per minute", minutes * 60.0),
        format!(
            "{:.2} ({})",
            total as f64 / n as f64 / minutes,
            requests
                .iter()
                .map(|(k, v)| format!("{k} {:.2}", *v as f64 / n as f64 / minutes))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    let gaps = lease_renewal_gaps(&audit, &t0, &t1, |node| node.starts_with(prefix));
    say(
        rows,
        "idle Lease renewals: seconds between two, p10 / p50 / p90 / mean",
        if gaps.is_empty() {
            "none".to_string()
        } else {
            format!(
                "{:.2} / {:.2} / {:.2} / {:.2} s ({} gaps)",
                pick(&gaps, 0.10),
                pick(&gaps, 0.50),
                pick(&gaps, 0.90),
                gaps.iter().sum::<f64>() / gaps.len() as f64,
                gaps.len()
            )
        },
    );
    say(
        rows,
        "idle wire bytes per node per minute (up / down / both)",
        format!(
            "{:.0} / {:.0} / {:.0} B ({} nodes through the proxy)",
            wire.bytes_up as f64 / lossy.len() as f64 / minutes,
            wire.bytes_down as f64 / lossy.len() as f64 / minutes,
            (wire.bytes_up + wire.bytes_down) as f64 / lossy.len() as f64 / minutes,
            lossy.len()
        ),
    );
    say(
        rows,
        &format!(
            "{} per node, idle with 10 pods: RSS, CPU per minute",
            who.name()
        ),
        format!(
            "{:.0} KiB, {:.4} s",
            rss_idle as f64 / n as f64,
            (fleet_cpu1 - fleet_cpu0) / n as f64 / minutes
        ),
    );
    say(
        rows,
        "kube-apiserver, idle: RSS, CPU per minute",
        format!(
            "{:.0} MiB, {:.2} s",
            api_rss as f64 / 1024.0,
            (api_cpu1 - api_cpu0) / minutes
        ),
    );

    if who == Contender::Kubemark {
        return true;
    }

    // 4. churn (PICOLET_FLEET_CHURN=0 skips it: at a thousand nodes it is
    // the longest phase, and a re-run may only need the others)
    if std::env::var("PICOLET_FLEET_CHURN").as_deref() == Ok("0") {
        say(rows, "churn", "skipped (PICOLET_FLEET_CHURN=0)".to_string());
    } else {
        let started = Instant::now();
        let churn_from = watch.mark();
        cp.apply(&hollow::deployment(NAMESPACE, pods, "2"));
        let timeout = format!("--timeout={}s", bound(n).as_secs());
        let rolled = cp.kubectl_waiting(
            &[
                "rollout",
                "status",
                "deployment/fleet",
                "-n",
                NAMESPACE,
                &timeout,
            ],
            bound(n) + Duration::from_secs(30),
        );
        if !rolled.status.success() {
            say(
                rows,
                "churn",
                format!(
                    "the rolling update did not finish: {}",
                    String::from_utf8_lossy(&rolled.stderr).trim()
                ),
            );
            return false;
        }
        say(
            rows,
            "churn: rolling update of every pod done after",
            secs(started.elapsed()),
        );
        say(
            rows,
            "new pods' start latency p50 / p90 / p99",
            percentiles(&watch.latencies(Some(churn_from))),
        );
    }

    // 5. link loss, timed by two watches on the bench's clock (a poll of
    // a thousand Nodes takes seconds, which would be counted as the
    // nodes' own).
    let node_watch = LineWatch::start(
        &cp,
        &[
            "get",
            "nodes",
            "-o",
            "jsonpath={.metadata.name} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}",
        ],
    );
    let lease_watch = LineWatch::start(
        &cp,
        &[
            "get",
            "leases",
            "-n",
            "kube-node-lease",
            "-o",
            "jsonpath={.metadata.name} {.spec.renewTime}{\"\\n\"}",
        ],
    );
    // Both have listed every node before the outage starts.
    poll_until(bound(n), || {
        (node_watch.names() >= n && lease_watch.names() >= n).then_some(())
    });
    proxy.blackhole();
    thread::sleep(loss); // the outage's length: part of the schedule
    let back_utc = utc_now();
    proxy.reset_stats();
    proxy.pass();
    let back = Instant::now();
    let mut ready_after: HashMap<String, Duration> = HashMap::new();
    let all_back = poll_until(bound(n), || {
        for name in &lossy_names {
            if ready_after.contains_key(name) {
                continue;
            }
            let ready = node_watch.first_since(name, back, |v| v == "True");
            let renewed = lease_watch.first_since(name, back, |v| v >= back_utc.as_str());
            if let (Some(r), Some(l)) = (ready, renewed) {
                ready_after.insert(name.clone(), r.max(l).saturating_duration_since(back));
            }
        }
        (ready_after.len() == lossy_names.len()).then_some(())
    });
    drop((node_watch, lease_watch));
    let mut times: Vec<f64> = ready_after.values().map(Duration::as_secs_f64).collect();
    times.sort_by(f64::total_cmp);
    say(
        rows,
        &format!(
            "link loss {} s, {} nodes: Ready with a renewed Lease after the return, p50 / max",
            loss.as_secs(),
            lossy_names.len()
        ),
        if all_back.is_some() {
            format!(
                "{:.1} / {:.1} s",
                pick(&times, 0.5),
                times.last().copied().unwrap_or(0.0)
            )
        } else {
            format!(
                "{} of {} within {:?}",
                ready_after.len(),
                lossy_names.len(),
                bound(n)
            )
        },
    );
    // The return's requests: wait out the window on the bench's clock.
    let rest = BURST_WINDOW.saturating_sub(back.elapsed());
    thread::sleep(rest);
    let until = utc_now();
    let audit = fs::read_to_string(cp.audit_log_path()).unwrap_or_default();
    let lossy_set: std::collections::HashSet<&str> =
        lossy_names.iter().map(String::as_str).collect();
    let burst = node_requests(&audit, &back_utc, &until, |node| lossy_set.contains(node));
    let burst_total: usize = burst.values().sum();
    let idle_rate = total as f64 / n as f64 / minutes * BURST_WINDOW.as_secs_f64() / 60.0;
    say(
        rows,
        "requests per returning node in the 30 s after (idle rate for 30 s)",
        format!(
            "{:.1} ({:.1}); {} connections dialled; {}",
            burst_total as f64 / lossy_names.len() as f64,
            idle_rate,
            proxy.stats().accepted,
            burst
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    drop(watch);
    hollow::delete_deployment(&cp, NAMESPACE);
    drop(fleet);
    all_back.is_some()
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn pick(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn percentiles(latencies: &[f64]) -> String {
    let mut v = latencies.to_vec();
    v.sort_by(f64::total_cmp);
    format!(
        "{:.2} / {:.2} / {:.2} s ({} pods)",
        pick(&v, 0.5),
        pick(&v, 0.9),
        pick(&v, 0.99),
        v.len()
    )
}

/// `kubectl <args> --watch` as the admin, each line of its output handed
/// to `each` on a thread of its own with the time it was read.
fn kubectl_watch(
    cp: &ControlPlane,
    args: &[&str],
    mut each: impl FnMut(&str, Instant) + Send + 'static,
) -> Child {
    let mut child = Command::new(assets::binary("kubectl"))
        .arg("--kubeconfig")
        .arg(cp.admin_kubeconfig())
        .args(args)
        .arg("--watch")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting kubectl --watch");
    let out = child.stdout.take().unwrap();
    thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            each(&line, Instant::now());
        }
    });
    child
}

/// Per name, its events (when read, the value) in the order read.
type Events = HashMap<String, Vec<(Instant, String)>>;

/// A `kubectl ... --watch` printing `<name> <value>` a line, each line
/// kept with the time it was read: when an object first showed a value.
struct LineWatch {
    child: Child,
    seen: Arc<Mutex<Events>>,
}

impl Drop for LineWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LineWatch {
    /// `kubectl <args> --watch` as the admin.
    fn start(cp: &ControlPlane, args: &[&str]) -> LineWatch {
        let seen = Arc::new(Mutex::new(Events::new()));
        let feed = seen.clone();
        let child = kubectl_watch(cp, args, move |line, now| {
            let (name, value) = line.split_once(' ').unwrap_or((line, ""));
            feed.lock()
                .unwrap()
                .entry(name.to_string())
                .or_default()
                .push((now, value.trim().to_string()));
        });
        LineWatch { child, seen }
    }

    /// How many objects it has seen.
    fn names(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// When `name` first showed a value `wanted` accepts as of `since`:
    /// `since` itself if its last value before then was one, else the
    /// first such event after.
    fn first_since(
        &self,
        name: &str,
        since: Instant,
        wanted: impl Fn(&str) -> bool,
    ) -> Option<Instant> {
        let seen = self.seen.lock().unwrap();
        let events = seen.get(name)?;
        let before = events.iter().rev().find(|(t, _)| *t <= since);
        if before.is_some_and(|(_, v)| wanted(v)) {
            return Some(since);
        }
        events
            .iter()
            .find(|(t, v)| *t > since && wanted(v))
            .map(|(t, _)| *t)
    }
}

/// Now in UTC as the audit log and the API write it (microseconds), so
/// the strings compare in time order.
fn utc_now() -> String {
    let out = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%S.%6NZ"])
        .output()
        .expect("running date");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The hollow nodes' requests between `from` and `to` (audit stage
/// timestamps), counted by "verb resource[/subresource]", for the nodes
/// `node` accepts: a request once, when it completed (a watch when it
/// started).
fn node_requests(
    audit: &str,
    from: &str,
    to: &str,
    node: impl Fn(&str) -> bool,
) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for (_, ev) in node_audit_events(audit, node) {
        let verb = ev["verb"].as_str().unwrap_or("");
        let stage = ev["stage"].as_str().unwrap_or("");
        let counted = if verb == "watch" {
            stage == "ResponseStarted"
        } else {
            stage == "ResponseComplete"
        };
        let at = ev["stageTimestamp"].as_str().unwrap_or("");
        if !counted || at < from || at >= to {
            continue;
        }
        let resource = ev["objectRef"]["resource"].as_str().unwrap_or("?");
        let key = match ev["objectRef"]["subresource"].as_str() {
            Some(sub) => format!("{verb} {resource}/{sub}"),
            None => format!("{verb} {resource}"),
        };
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

/// The audit log's events of the nodes `node` names: each node's name
/// (its `system:node:<name>` user) and the event.
fn node_audit_events<'a>(
    audit: &'a str,
    node: impl Fn(&str) -> bool + 'a,
) -> impl Iterator<Item = (String, serde_json::Value)> + 'a {
    audit.lines().filter_map(move |line| {
        let ev = serde_json::from_str::<serde_json::Value>(line).ok()?;
        let name = ev["user"]["username"]
            .as_str()?
            .strip_prefix("system:node:")?
            .to_string();
        node(&name).then_some((name, ev))
    })
}

/// The seconds between one node's consecutive Lease writes (a renewal's
/// `patch` or `update`, as the audit log timed its answer) in `[from, to)`,
/// every node's together, sorted. The renewal interval as the API server
/// saw it, jitter and all.
fn lease_renewal_gaps(audit: &str, from: &str, to: &str, node: impl Fn(&str) -> bool) -> Vec<f64> {
    let mut times: HashMap<String, Vec<f64>> = HashMap::new();
    for (name, ev) in node_audit_events(audit, node) {
        let verb = ev["verb"].as_str().unwrap_or("");
        let at = ev["stageTimestamp"].as_str().unwrap_or("");
        if ev["objectRef"]["resource"] != "leases"
            || !matches!(verb, "patch" | "update")
            || ev["stage"] != "ResponseComplete"
            || at < from
            || at >= to
        {
            continue;
        }
        let Ok(t) = at.parse::<k8s_openapi::jiff::Timestamp>() else {
            continue;
        };
        times
            .entry(name)
            .or_default()
            .push(t.as_millisecond() as f64 / 1000.0);
    }
    let mut gaps: Vec<f64> = times
        .values_mut()
        .flat_map(|ts| {
            ts.sort_by(f64::total_cmp);
            ts.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>()
        })
        .collect();
    gaps.sort_by(f64::total_cmp);
    gaps
}

/// The pid of this control plane's kube-apiserver (its command line names
/// the control plane's directory).
fn apiserver_pid(cp: &ControlPlane) -> u32 {
    let dir = cp.dir().display().to_string();
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd);
            cmd.contains("kube-apiserver") && cmd.contains(&dir)
        })
        .expect("the control plane's kube-apiserver process")
}

/// What a `kubectl get pods --watch` of the namespace saw, on the bench's
/// clock: per pod, when it first appeared and when first Running.
struct PodWatch {
    child: Child,
    seen: Arc<Mutex<PodTimes>>,
}

#[derive(Default)]
struct PodTimes {
    /// Events read so far (a mark for "pods created after this").
    events: usize,
    pods: HashMap<String, PodTime>,
}

struct PodTime {
    first_event: usize,
    appeared: Instant,
    running: Option<Instant>,
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl PodWatch {
    fn start(cp: &ControlPlane) -> PodWatch {
        let seen = Arc::new(Mutex::new(PodTimes::default()));
        let feed = seen.clone();
        let args = [
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.metadata.name} {.status.phase}{\"\\n\"}",
        ];
        let child = kubectl_watch(cp, &args, move |line, now| {
            let mut parts = line.split_whitespace();
            let (Some(name), phase) = (parts.next(), parts.next()) else {
                return;
            };
            let mut t = feed.lock().unwrap();
            t.events += 1;
            let first_event = t.events;
            let p = t.pods.entry(name.to_string()).or_insert(PodTime {
                first_event,
                appeared: now,
                running: None,
            });
            if phase == Some("Running") && p.running.is_none() {
                p.running = Some(now);
            }
        });
        PodWatch { child, seen }
    }

    /// The events read so far, to ask about the pods that come after.
    fn mark(&self) -> usize {
        self.seen.lock().unwrap().events
    }

    /// Pods seen Running (that appeared after `after`, a [`Self::mark`]).
    fn running(&self, after: Option<usize>) -> usize {
        let t = self.seen.lock().unwrap();
        t.pods
            .values()
            .filter(|p| p.first_event > after.unwrap_or(0) && p.running.is_some())
            .count()
    }

    /// Seconds from appearing to Running, per pod that appeared after
    /// `after` and ran.
    fn latencies(&self, after: Option<usize>) -> Vec<f64> {
        let t = self.seen.lock().unwrap();
        t.pods
            .values()
            .filter(|p| p.first_event > after.unwrap_or(0))
            .filter_map(|p| Some((p.running? - p.appeared).as_secs_f64()))
            .collect()
    }
}
