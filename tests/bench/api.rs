//! `make bench`, API mode (issue #8): picolet as a node of a real cluster,
//! measured on real parts, printed as its own table.
//!
//! A private etcd and kube-apiserver (tests/harness/kube.rs, Node,RBAC and
//! NodeRestriction, audit log of what nodes ask), a private containerd, and
//! the picolet under test joined with a `system:node:<name>` client
//! certificate through the fault proxy (tests/harness/faultproxy.rs). It
//! measures, in order, on one node:
//! - picolet's spawn to its Node Ready, as a `kubectl get -w` sees it;
//! - 10 pods created in the API (one `kubectl create`, `spec.nodeName` set)
//!   to all 10 `Running` in the API, seen by the same kind of watch;
//! - VmRSS and VmHWM with 110 API pods bound to the node (`maxPods: 110`),
//!   all running, each one in picolet's cache on disk; the same memory
//!   figures (anonymous, file, VmRSS, VmHWM) also at 0 pods (Node Ready),
//!   30 pods, and after the outage below, as a memory table;
//! - an outage of the uplink (the proxy blackholes every connection for
//!   `PICOLET_BENCH_OUTAGE_SECS`, default 60 s), then the requests (from
//!   the audit log) and bytes (from the proxy) picolet needed until every
//!   watch it held is open again and its Lease is renewed; a resume shows
//!   no LIST and no streaming list (`sendInitialEvents`);
//! - the stripped aarch64 musl binary (built by `make cross`).
//!
//! Upstream kubelet's numbers from issue #8 are printed beside them. Like
//! the static bench it asserts nothing: it reports.
//!
//! The bench's only entry point is [`run`]; tests/bench.rs calls it.

use std::collections::{HashMap, HashSet};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::faultproxy::{FaultProxy, ProxyStats};
use crate::harness::kube::{assets, AuditedRequest, ControlPlane, Credentials};
use crate::harness::{Containerd, Picolet};

/// The namespace the bench's pods live in.
const NS: &str = "bench";
/// kubelet's default `maxPods`, and the pod count of the memory row.
const MAX_PODS: usize = 110;
/// Upper bound for anything the bench waits for.
const LONG: Duration = Duration::from_secs(600);
/// The board budgets (issue #8).
const RSS_BUDGET_MIB: f64 = 8.0;
const SIZE_BUDGET: u64 = 4 * 1024 * 1024;
const AARCH64: &str = "aarch64-unknown-linux-musl";

/// The process's memory at one point: VmRSS split into heap and stacks
/// (anonymous) and the binary's pages (file), and the high-water mark.
#[derive(Clone)]
struct Memory {
    at: String,
    anon_kib: u64,
    file_kib: u64,
    rss_kib: u64,
    hwm_kib: u64,
}

fn memory(pid: u32, at: impl Into<String>) -> Memory {
    Memory {
        at: at.into(),
        anon_kib: proc_status_field(pid, "RssAnon:"),
        file_kib: binary_kib(pid),
        rss_kib: proc_status_field(pid, "VmRSS:"),
        hwm_kib: proc_status_field(pid, "VmHWM:"),
    }
}

/// What one run measured.
struct Measured {
    /// Memory at 0 pods (Node Ready), 30, 110 and after the outage.
    memory: Vec<Memory>,
    node_ready: Duration,
    ten_running: Duration,
    /// The same, from the first of them seen in the API.
    ten_running_seen: Duration,
    /// From creating pods 30..110 to all 110 Running.
    fill: Duration,
    running: usize,
    cached_entries: usize,
    /// Memory with all 110 pods Running (also in `memory`): the summary
    /// row against the budget.
    full: Memory,
    threads: u64,
    outage: Outage,
}

/// The resync after an outage of the uplink.
struct Outage {
    secs: u64,
    /// From the proxy passing again to every watch resumed and the Lease
    /// renewed.
    resync: Duration,
    /// Requests picolet made in that window, from the audit log.
    requests: Vec<AuditedRequest>,
    /// Bytes and connections through the proxy in that window.
    stats: ProxyStats,
    /// Connections picolet opened during the outage (to a blackhole).
    accepted_during: u64,
    /// Requests the API server saw during the outage (sent before it).
    during: usize,
    /// picolet's log lines from the outage's start to the resync.
    log: Vec<String>,
    /// When the link went dark and came back (UTC, as picolet's log).
    dark_at: String,
    back_at: String,
}

/// The wall clock as `HH:MM:SS.mmm` UTC, to line up with picolet's log.
fn utc_now() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let s = t.as_secs() % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3600,
        s / 60 % 60,
        s % 60,
        t.subsec_millis()
    )
}

/// `kubectl get <what> --watch -o json`: every object it prints, with the
/// moment it was read, on a channel. Killed when dropped.
struct KubectlWatch {
    child: Child,
    rx: Receiver<(Instant, Value)>,
}

impl KubectlWatch {
    fn start(cp: &ControlPlane, args: &[&str]) -> KubectlWatch {
        let mut child = Command::new(assets::binary("kubectl"))
            .arg("--kubeconfig")
            .arg(cp.admin_kubeconfig())
            .arg("get")
            .args(args)
            .args(["--watch", "-o", "json"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning kubectl get --watch");
        let out = child.stdout.take().expect("kubectl stdout");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let objects = serde_json::Deserializer::from_reader(BufReader::new(out));
            for v in objects.into_iter::<Value>() {
                let Ok(v) = v else { break };
                let at = Instant::now();
                // The first reply of a watch may come as a List.
                let items = match v["items"].as_array() {
                    Some(items) => items.clone(),
                    None => vec![v],
                };
                for item in items {
                    if tx.send((at, item)).is_err() {
                        return;
                    }
                }
            }
        });
        KubectlWatch { child, rx }
    }

    /// Feeds every object to `done` until it says true; returns the moment
    /// the object that made it true was read. Panics after [`LONG`].
    fn until(&self, what: &str, mut done: impl FnMut(&Value) -> bool) -> Instant {
        let deadline = Instant::now() + LONG;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((at, obj)) => {
                    if done(&obj) {
                        return at;
                    }
                }
                Err(e) => panic!("api bench: waiting for {what}: {e:?}"),
            }
        }
    }
}

impl Drop for KubectlWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary's resident pages: `RssFile`, or `RssShmem` when the binary
/// runs from a tmpfs (as `PICOLET_BIN` may point it).
fn binary_kib(pid: u32) -> u64 {
    proc_status_field(pid, "RssFile:") + proc_status_field(pid, "RssShmem:")
}

fn proc_status_field(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn ready_condition(node: &Value) -> bool {
    node["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// A v1 List of pods `bench-<from>` .. `bench-<to - 1>` bound to `node`.
/// busybox is on the node; `IfNotPresent` keeps the registry out of it.
fn pod_list(node: &str, from: usize, to: usize) -> String {
    let items: Vec<Value> = (from..to)
        .map(|i| {
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": format!("bench-{i}"), "namespace": NS},
                "spec": {
                    "nodeName": node,
                    "automountServiceAccountToken": false,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "main",
                        "image": "busybox",
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["sleep", "1000000"],
                        "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}},
                    }],
                },
            })
        })
        .collect();
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// Creates pods `from..to` with one `kubectl create`, then waits on `watch`
/// until all `to` pods of the namespace are Running in the API. Returns the
/// time to the last Running seen from just before the create (kubectl's
/// own start included), and from the first new pod seen in the watch.
fn create_and_wait_running(
    cp: &ControlPlane,
    watch: &KubectlWatch,
    phases: &mut HashMap<String, String>,
    node: &str,
    from: usize,
    to: usize,
) -> (Duration, Duration) {
    let file = cp.dir().join(format!("bench-pods-{from}-{to}.json"));
    std::fs::write(&file, pod_list(node, from, to)).expect("writing the bench pods");
    let t0 = Instant::now();
    cp.kubectl_ok(&["create", "-f", file.to_str().expect("utf-8 path")]);
    let mut first_seen: Option<Instant> = None;
    let at = watch.until(&format!("{to} pods Running in the API"), |pod| {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        if first_seen.is_none() && !phases.contains_key(name) {
            first_seen = Some(Instant::now());
        }
        let phase = pod["status"]["phase"].as_str().unwrap_or_default();
        phases.insert(name.to_string(), phase.to_string());
        phases.values().filter(|p| *p == "Running").count() >= to
    });
    (
        at.saturating_duration_since(t0),
        at.saturating_duration_since(first_seen.unwrap_or(t0)),
    )
}

/// The request's path without its query (`/api/v1/pods`).
fn path_of(uri: &str) -> &str {
    uri.split_once('?').map_or(uri, |(p, _)| p)
}

fn outage(cp: &ControlPlane, proxy: &FaultProxy, p: &Picolet, secs: u64) -> Outage {
    let user = format!("system:node:{}", p.hostname());
    let user = user.as_str();
    let seen = cp.requests_by(user);
    // Every path picolet keeps a watch on: each must be resumed.
    let watched: HashSet<String> = seen
        .iter()
        .filter(|r| r.verb == "watch")
        .map(|r| path_of(&r.uri).to_string())
        .collect();
    let log_start = p.log().len();
    proxy.reset_stats();
    proxy.blackhole();
    let dark_at = utc_now();
    // The outage itself: this sleep is the fault, not a proof of anything.
    thread::sleep(Duration::from_secs(secs));
    let accepted_during = proxy.stats().accepted;
    // Nothing reaches the server in a blackhole: what it logged since came
    // before it. The resync is what it sees from now on.
    let before = cp.requests_by(user).len();
    let during = before - seen.len();
    proxy.reset_stats();
    let t0 = Instant::now();
    proxy.pass();
    let back_at = utc_now();
    let requests = crate::harness::wait_until(
        "every watch resumed and the Lease renewed after the outage",
        LONG,
        || {
            let new: Vec<AuditedRequest> = cp.requests_by(user).split_off(before);
            // An outage shorter than the PING timeout: the connection
            // lives on and the watches with it; only the Lease tells.
            let survived = accepted_during == 0;
            let resumed = survived
                || watched.iter().all(|path| {
                    new.iter().any(|r| {
                        r.verb == "watch"
                            && path_of(&r.uri) == path
                            && r.code.is_some_and(|c| c < 300)
                    })
                });
            let renewed = new
                .iter()
                .any(|r| r.uri.contains("/leases/") && r.verb == "update" && r.code == Some(200));
            (resumed && renewed).then_some(new)
        },
    );
    let resync = t0.elapsed();
    let log = p
        .log()
        .get(log_start..)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    Outage {
        secs,
        resync,
        requests,
        stats: proxy.stats(),
        accepted_during,
        during,
        log,
        dark_at,
        back_at,
    }
}

fn measure(outage_secs: u64) -> Measured {
    let cp = ControlPlane::start();
    cp.ensure_namespace(NS);
    let c = Containerd::start();
    let proxy = FaultProxy::start(cp.apiserver_addr());
    let nodes = KubectlWatch::start(&cp, &["nodes"]);
    let pods = KubectlWatch::start(&cp, &["pods", "-n", NS]);

    let t0 = Instant::now();
    let p = Picolet::start_with_args(
        &c,
        &format!("syncFrequency: 1m0s\nmaxPods: {MAX_PODS}\n"),
        |p| {
            let kubeconfig =
                cp.node_kubeconfig_with(p.hostname(), Credentials::Files, &proxy.https_url());
            vec!["--kubeconfig".into(), kubeconfig.display().to_string()]
        },
    );
    let node = p.hostname().to_string();
    let pid = p.pid().expect("picolet runs");
    let ready = nodes.until("the node Ready in the API", |n| {
        n["metadata"]["name"] == node.as_str() && ready_condition(n)
    });
    let node_ready = ready.saturating_duration_since(t0);
    drop(nodes);
    let mut mem = vec![memory(pid, "0 pods, Node Ready")];

    let mut phases = HashMap::new();
    let (ten_running, ten_running_seen) =
        create_and_wait_running(&cp, &pods, &mut phases, &node, 0, 10);
    create_and_wait_running(&cp, &pods, &mut phases, &node, 10, 30);
    mem.push(memory(pid, "30 pods Running"));
    let (fill, _) = create_and_wait_running(&cp, &pods, &mut phases, &node, 30, MAX_PODS);
    drop(pods);
    let running = phases.values().filter(|p| *p == "Running").count();
    let cached_entries = std::fs::read_dir(p.root_dir().join("apiserver/pods"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".entry"))
                .count()
        })
        .unwrap_or(0);
    let full = memory(pid, format!("{MAX_PODS} pods Running"));
    let threads = proc_status_field(pid, "Threads:");
    mem.push(full.clone());

    let outage = outage(&cp, &proxy, &p, outage_secs);
    mem.push(memory(
        pid,
        format!("{MAX_PODS} pods, resynced after the outage"),
    ));
    // Pods first (graceful, picolet still connected), then the rest.
    cp.kubectl(&["delete", "namespace", NS, "--wait=false"]);
    drop(p);
    drop(proxy);
    drop(c);
    drop(cp);
    Measured {
        memory: mem,
        node_ready,
        ten_running,
        ten_running_seen,
        fill,
        running,
        cached_entries,
        full,
        threads,
        outage,
    }
}

/// The stripped aarch64 musl binary `make cross` leaves in the target dir.
fn aarch64_binary() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join(AARCH64)
        .join("release/picolet")
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Runs the API-mode bench and prints its table.
pub fn run() {
    let outage_secs = std::env::var("PICOLET_BENCH_OUTAGE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let m = measure(outage_secs);
    let o = &m.outage;

    let count = |f: &dyn Fn(&AuditedRequest) -> bool| o.requests.iter().filter(|r| f(r)).count();
    let lists = count(&|r| r.verb == "list");
    let streaming_lists = count(&|r| r.verb == "watch" && r.uri.contains("sendInitialEvents=true"));
    let resumes = count(&|r| {
        r.verb == "watch"
            && r.uri.contains("resourceVersion=")
            && !r.uri.contains("sendInitialEvents")
    });
    let mut verbs: Vec<(String, usize)> = Vec::new();
    for r in &o.requests {
        match verbs.iter_mut().find(|(v, _)| *v == r.verb) {
            Some((_, n)) => *n += 1,
            None => verbs.push((r.verb.clone(), 1)),
        }
    }
    let verbs = verbs
        .iter()
        .map(|(v, n)| format!("{n} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    let bin = aarch64_binary();
    let size = std::fs::metadata(&bin).map(|m| m.len()).ok();

    println!();
    println!(
        "picolet API-mode bench ({}; real etcd + kube-apiserver + containerd; uplink through the fault proxy)",
        std::env::consts::ARCH
    );
    println!();
    println!("| measure | picolet | budget | upstream kubelet v1.36 |");
    println!("|---|---:|---:|---:|");
    println!(
        "| picolet spawned to Node Ready (API watch) | {:.2} s | - | 0.8-1.1 s |",
        m.node_ready.as_secs_f64()
    );
    println!(
        "| 10 pods to all Running (API watch): from `kubectl create` (from the first pod seen) | {:.2} s ({:.2} s) | - | 1.07-1.24 s |",
        m.ten_running.as_secs_f64(),
        m.ten_running_seen.as_secs_f64()
    );
    println!(
        "| VmRSS / VmHWM, {MAX_PODS} API pods running and cached ({} running, {} cache entries; 80 more started in {:.1} s), {} threads; VmRSS is {:.1} MiB anonymous + {:.1} MiB of the binary | {:.1} / {:.1} MiB | {:.0} MiB | 88-95 MB |",
        m.running,
        m.cached_entries,
        m.fill.as_secs_f64(),
        m.threads,
        mib(m.full.anon_kib),
        mib(m.full.file_kib),
        mib(m.full.rss_kib),
        mib(m.full.hwm_kib),
        RSS_BUDGET_MIB
    );
    println!(
        "| resync after a {} s blackhole: requests ({verbs}) | {} ({lists} LIST, {streaming_lists} streaming list, {resumes} watch resumed from its resourceVersion) | LIST = 0 | - |",
        o.secs,
        o.requests.len()
    );
    println!(
        "| resync after a {} s blackhole: bytes up / down, new connections, time from the link back to resynced | {} / {} B, {} conn (+{} opened into the blackhole), {:.2} s | - | - |",
        o.secs,
        o.stats.bytes_up,
        o.stats.bytes_down,
        o.stats.accepted,
        o.accepted_during,
        o.resync.as_secs_f64()
    );
    match size {
        Some(b) => println!(
            "| stripped {AARCH64} binary | {:.2} MiB ({b} B) | {} MiB | - |",
            b as f64 / 1048576.0,
            SIZE_BUDGET / 1024 / 1024
        ),
        None => println!(
            "| stripped {AARCH64} binary | not built: run `make cross` first ({}) | {} MiB | - |",
            bin.display(),
            SIZE_BUDGET / 1024 / 1024
        ),
    }
    println!();
    println!("| memory, API mode | anonymous | file (the binary) | VmRSS | VmHWM |");
    println!("|---|---:|---:|---:|---:|");
    for r in &m.memory {
        println!(
            "| {} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} MiB |",
            r.at,
            mib(r.anon_kib),
            mib(r.file_kib),
            mib(r.rss_kib),
            mib(r.hwm_kib)
        );
    }
    println!();
    println!(
        "Requests in the resync window (audit log, system:node:<name>; {} more were in flight when the link went dark):",
        o.during
    );
    for r in &o.requests {
        println!(
            "  {} {} -> {}",
            r.verb,
            r.uri,
            r.code.map_or("open".into(), |c| c.to_string())
        );
    }
    println!(
        "picolet's log from the outage to the resync (last 20 lines; the link went dark at {} and came back at {}):",
        o.dark_at, o.back_at
    );
    for l in o.log.iter().rev().take(20).rev() {
        println!("  {l}");
    }
}
