//! picolet on a bad uplink to a real API server (issue #8, tests 3 and 5;
//! issue #23): a chaos soak through the TCP [`FaultProxy`] (180 s here,
//! `PICOLET_CHAOS_SECONDS`; `make soak` runs 600) while pods are added,
//! changed and deleted, a ConfigMap changes, the API server stops for a
//! while, picolet is SIGKILLed and a container killed, ending with the
//! time the node took to converge after the link returned; a watch stream
//! cut or corrupted inside TLS by the [`TlsFaultProxy`]; and every fallback
//! path forced (a cut TLS handshake; 403, 429, 500 and 503 answers to
//! LISTs, watches and streaming lists; a 410 on a resumed watch; the API
//! server restarted with streaming lists off) for pods, ConfigMaps,
//! Secrets and the Node. Afterwards the node must match the API exactly:
//! nothing lost, nothing healthy restarted, no relist storm.
//!
//! Real parts only: a private etcd and kube-apiserver (Node,RBAC,
//! NodeRestriction), real containerd or CRI-O, the picolet binary. The API
//! is changed with the admin kubeconfig directly, never through a proxy.
//! The chaos schedule is pseudo-random from a fixed seed, so a failure
//! replays the same faults in the same order; every check waits for a
//! state to be reached (generous deadlines), none asserts on timing.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test api_chaos --
//! --test-threads=2` (and with `PICOLET_TEST_RUNTIME=crio`).

mod harness;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use harness::faultproxy::tls::{Answer, Kind, TlsFaultProxy, WatchFault};
use harness::faultproxy::FaultProxy;
use harness::kube::{ControlPlane, Credentials};
use harness::workload::{kill_container, wait_line};
use harness::{wait_until, Containerd, Picolet};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);
/// After the chaos: the informer may be backed off to 30 s (plus jitter),
/// the transport's dialer too; then status and final DELETEs follow.
const CONVERGE: Duration = Duration::from_secs(240);
/// The node's convergence goal once the link is clean (issue #23).
const CONVERGE_GOAL: Duration = Duration::from_secs(5);

/// The soak's last line: the convergence time against the goal.
fn convergence_verdict(converged: Duration) -> String {
    let verdict = if converged <= CONVERGE_GOAL {
        "within"
    } else {
        "OVER"
    };
    format!(
        "chaos convergence: {:.1} s after the link returned, {verdict} the {} s goal",
        converged.as_secs_f64(),
        CONVERGE_GOAL.as_secs()
    )
}
/// How many dials to the API server failed in the outage going on, as
/// the admin socket's `GET /node` (`picolet get node`) says
/// (`apiServer.failedAttempts`; 0 while it answers).
fn failed_dials(p: &Picolet) -> Option<u64> {
    let (_, body) = p.get("/node");
    let v: Value = serde_json::from_str(&body).ok()?;
    v["apiServer"]["failedAttempts"].as_u64()
}

/// The chaos schedule's seed. Change it to explore; keep it to reproduce.
const SEED: u64 = 0x8_c4a0_5eed;
/// A blackhole outlasts picolet's HTTP/2 PING timeout (15 s without a read + 15 s
/// unanswered), so the dead connection is noticed and replaced: it lasts
/// at least this long, and until picolet logs the PING timeout.
const BLACKHOLE_MIN: Duration = Duration::from_secs(32);

// ---------------------------------------------------------------------------
// Helpers (the runtime-neutral checks of tests/apiserver.rs)
// ---------------------------------------------------------------------------

/// picolet joined with node `hostname`'s credential, talking to `server`.
fn join_via(cp: &ControlPlane, c: &Containerd, server: impl Fn(&str) -> String) -> Picolet {
    Picolet::start_with_args(c, "", |p| {
        let kubeconfig =
            cp.node_kubeconfig_with(p.hostname(), Credentials::Files, &server(p.hostname()));
        vec!["--kubeconfig".to_string(), kubeconfig.display().to_string()]
    })
}

/// `kubectl get <what> -o json` as the admin, or None when it does not exist.
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

fn running_and_ready(pod: &Value) -> bool {
    pod["status"]["phase"] == "Running"
        && condition(pod, "Ready").as_deref() == Some("True")
        && pod["metadata"]["deletionTimestamp"].is_null()
}

/// An API pod running `sleep` from busybox (`:latest`, so pull policy
/// Always: it runs by the offline image fallback), with a readiness probe.
fn pod_yaml(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  labels:\n    app: chaos\nspec:\n  nodeName: {node}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n    image: busybox\n    command: [\"sleep\", \"100000\"]\n    readinessProbe:\n      exec: {{command: [\"true\"]}}\n      periodSeconds: 2\n"
    )
}

/// The node's pods in the API, by name.
fn api_pods(cp: &ControlPlane, node: &str) -> BTreeMap<String, Value> {
    let list = get(
        cp,
        &[
            "pods",
            "-n",
            "default",
            "--field-selector",
            &format!("spec.nodeName={node}"),
        ],
    )
    .unwrap_or_else(|| panic!("listing the pods of {node}"));
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                p.clone(),
            )
        })
        .collect()
}

/// The `main` container's ID as the API reports it (runtime prefix
/// dropped), and its restartCount.
fn main_container(pod: &Value) -> Option<(String, u64)> {
    let s = &pod["status"]["containerStatuses"][0];
    let id = s["containerID"].as_str()?;
    let id = id.split_once("://").map_or(id, |(_, id)| id).to_string();
    Some((id, s["restartCount"].as_u64().unwrap_or(0)))
}

/// The container's state as runc has it (`running`, `stopped`), under
/// either runtime's runc root; None when runc does not know it.
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

/// One entry of picolet's pod cache (`<root>/apiserver/pods`), as the
/// cache's envelope stores it: header line, namespace, name,
/// resourceVersion, then the object's JSON.
#[derive(Debug, PartialEq, Eq)]
struct CachedPod {
    uid: String,
    resource_version: String,
    labels: Value,
    annotations: Value,
}

fn cached_pods(root: &Path) -> BTreeMap<String, CachedPod> {
    let dir = root.join("apiserver/pods");
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        if !e.file_name().to_string_lossy().ends_with(".entry") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue; // replaced while we looked: the next poll sees it
        };
        let mut parts = text.splitn(5, '\n');
        let (Some(_), Some(_ns), Some(name), Some(rv), Some(json)) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            continue;
        };
        let Ok(obj) = serde_json::from_str::<Value>(json) else {
            continue;
        };
        out.insert(
            name.to_string(),
            CachedPod {
                uid: obj["metadata"]["uid"].as_str().unwrap_or_default().into(),
                resource_version: rv.to_string(),
                labels: obj["metadata"]["labels"].clone(),
                annotations: obj["metadata"]["annotations"].clone(),
            },
        );
    }
    out
}

fn as_cached(pod: &Value) -> CachedPod {
    CachedPod {
        uid: pod["metadata"]["uid"].as_str().unwrap_or_default().into(),
        resource_version: pod["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .into(),
        labels: pod["metadata"]["labels"].clone(),
        annotations: without_last_applied(&pod["metadata"]["annotations"]),
    }
}

/// The pod cache deliberately drops `kubectl apply`'s copy of the object
/// (`apiserver::pods::slim`): compare the rest. No annotation left and no
/// annotations at all are the same.
fn without_last_applied(annotations: &Value) -> Value {
    let mut a = annotations.clone();
    if let Some(map) = a.as_object_mut() {
        map.remove("kubectl.kubernetes.io/last-applied-configuration");
        if map.is_empty() {
            return Value::Null;
        }
    }
    a
}

/// A deterministic pseudo-random sequence (xorshift64*), so the chaos
/// replays exactly from [`SEED`].
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// In `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo, hi))
    }
}

// ---------------------------------------------------------------------------
// Test 3: the chaos soak
// ---------------------------------------------------------------------------

/// A change made in the API during the chaos.
#[derive(Clone, Debug)]
enum ApiOp {
    Add(String),
    Label(String, u64),
    Annotate(String, u64),
    Delete(String),
    /// ConfigMap `soak-config`'s `v` set to this.
    Config(u64),
}

fn apply_op(cp: &ControlPlane, node: &str, op: &ApiOp) {
    match op {
        ApiOp::Add(name) => {
            cp.apply(&pod_yaml(name, node));
        }
        ApiOp::Label(name, n) => {
            cp.kubectl_ok(&[
                "label",
                "pod",
                name,
                "-n",
                "default",
                "--overwrite",
                &format!("chaos-step={n}"),
            ]);
        }
        ApiOp::Annotate(name, n) => {
            cp.kubectl_ok(&[
                "annotate",
                "pod",
                name,
                "-n",
                "default",
                "--overwrite",
                &format!("example.com/chaos-step={n}"),
            ]);
        }
        ApiOp::Delete(name) => {
            cp.kubectl_ok(&["delete", "pod", name, "-n", "default", "--wait=false"]);
        }
        ApiOp::Config(v) => {
            cp.apply(&soak_config_yaml(*v));
        }
    }
}

/// A fault of the link, with how long it lasts.
#[derive(Clone, Copy, Debug)]
enum Fault {
    Reset,
    Blackhole(Duration),
    Delay(Duration, Duration),
    Throttle(u64, Duration),
    Refuse(Duration),
}

/// The chaos schedule from `rng`: faults filling `total`, with a reset
/// every few seconds and, a third of the way in, a blackhole longer than
/// the PING timeout.
fn schedule(rng: &mut Rng, total: Duration) -> Vec<(Fault, Duration)> {
    let mut plan = Vec::new();
    let mut t = Duration::ZERO;
    let (mut blackholed, mut throttled) = (false, false);
    while t < total {
        let pause = rng.millis(1_500, 4_000);
        let fault = match rng.range(0, 9) {
            _ if !blackholed && t >= total / 3 => {
                blackholed = true;
                Fault::Blackhole(BLACKHOLE_MIN + rng.millis(0, 6_000))
            }
            // Whatever the seed, some throttling too.
            7 | 8 => {
                throttled = true;
                Fault::Throttle(rng.range(2_048, 16_384), rng.millis(2_000, 5_000))
            }
            _ if !throttled && t >= total * 3 / 4 => {
                throttled = true;
                Fault::Throttle(rng.range(2_048, 16_384), rng.millis(2_000, 5_000))
            }
            0..=4 => Fault::Reset,
            5 | 6 => Fault::Delay(rng.millis(100, 900), rng.millis(2_000, 5_000)),
            _ => Fault::Refuse(rng.millis(1_000, 4_000)),
        };
        let lasts = match fault {
            Fault::Reset => Duration::ZERO,
            Fault::Blackhole(d) | Fault::Delay(_, d) | Fault::Throttle(_, d) | Fault::Refuse(d) => {
                d
            }
        };
        plan.push((fault, pause));
        t += lasts + pause;
    }
    plan
}

/// The soak's length: `PICOLET_CHAOS_SECONDS` (CI runs 180, `make
/// test-full` 600).
fn chaos_length() -> Duration {
    let secs = std::env::var("PICOLET_CHAOS_SECONDS")
        .ok()
        .map(|s| {
            s.parse()
                .expect("PICOLET_CHAOS_SECONDS is a number of seconds")
        })
        .unwrap_or(180);
    Duration::from_secs(secs)
}

/// The schedule's seed: `PICOLET_CHAOS_SEED` (hex `0x…` or decimal) to
/// replay a run, else [`SEED`].
fn chaos_seed() -> u64 {
    match std::env::var("PICOLET_CHAOS_SEED") {
        Ok(s) => s
            .strip_prefix("0x")
            .map_or_else(
                || s.parse(),
                |h| u64::from_str_radix(&h.replace('_', ""), 16),
            )
            .expect("PICOLET_CHAOS_SEED is a number"),
        Err(_) => SEED,
    }
}

/// A pod that prints ConfigMap `soak-config`'s `v` every second.
fn reader_pod_yaml(node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: config-reader\n  namespace: default\nspec:\n  nodeName: {node}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 1\n  volumes:\n  - name: cfg\n    configMap: {{name: soak-config}}\n  containers:\n  - name: main\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    volumeMounts:\n    - {{name: cfg, mountPath: /cfg}}\n    command: [\"sh\", \"-c\", \"while true; do echo cm=$(cat /cfg/v); sleep 1; done\"]\n"
    )
}

fn soak_config_yaml(v: u64) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: soak-config\n  namespace: default\ndata:\n  v: \"{v}\"\n")
}

/// picolet's resident memory (KiB), threads and open fds, from /proc.
fn footprint(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    format!(
        "VmRSS {}, VmHWM {}, threads {}, fds {fds}",
        field("VmRSS:"),
        field("VmHWM:"),
        field("Threads:")
    )
}

/// Every container runc runs under either runtime's root.
fn runc_running(c: &Containerd) -> BTreeSet<String> {
    [c.runc_root().join("k8s.io"), c.runc_root()]
        .iter()
        .flat_map(|root| {
            let out = std::process::Command::new("runc")
                .arg("--root")
                .arg(root)
                .args(["list", "-f", "json"])
                .output()
                .ok();
            let list: Value = out
                .and_then(|o| serde_json::from_slice(&o.stdout).ok())
                .unwrap_or(Value::Null);
            list.as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["status"] == "running")
                .filter_map(|c| c["id"].as_str().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_chaos_soak_loses_no_update_restarts_no_healthy_container_and_converges_when_the_link_returns()
{
    let seed = chaos_seed();
    let length = chaos_length();
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let proxy = FaultProxy::start(cp.apiserver_addr());
    let url = proxy.https_url();
    let mut p = join_via(&cp, &c, |_| url.clone());
    let node = p.hostname().to_string();
    wait_until("the node is Ready in the API", LONG, || {
        let n = get(&cp, &["node", &node])?;
        (condition(&n, "Ready").as_deref() == Some("True")).then_some(())
    });

    // Pods that must survive the chaos untouched (the ConfigMap's reader
    // among them), pods to be deleted, and one whose container is killed.
    let keep: Vec<String> = (0..3).map(|i| format!("keep-{i}")).collect();
    let doomed: Vec<String> = (0..2).map(|i| format!("doomed-{i}")).collect();
    cp.apply(&soak_config_yaml(0));
    cp.apply(&reader_pod_yaml(&node));
    for name in keep
        .iter()
        .chain(&doomed)
        .chain(["crashy".to_string()].iter())
    {
        cp.apply(&pod_yaml(name, &node));
    }
    let untouched: Vec<String> = keep
        .iter()
        .cloned()
        .chain(["config-reader".to_string()])
        .collect();
    let before = wait_until("the first pods are Running and Ready", LONG, || {
        let pods = api_pods(&cp, &node);
        untouched
            .iter()
            .chain(&doomed)
            .chain(["crashy".to_string()].iter())
            .map(|n| {
                let pod = pods.get(n).filter(|p| running_and_ready(p))?;
                Some((n.clone(), main_container(pod)?))
            })
            .collect::<Option<BTreeMap<_, _>>>()
    });
    for (name, (id, _)) in &before {
        assert_eq!(runc_state(&c, id).as_deref(), Some("running"), "{name}");
    }

    // The schedule of link faults, and the API's changes paced by it:
    // pods added (some deleted again), label and annotation changes (no
    // restart), ConfigMap updates, the doomed pods deleted.
    let mut rng = Rng(seed);
    let plan = schedule(&mut rng, length);
    let mut ops: Vec<ApiOp> = Vec::new();
    let mut added: Vec<String> = Vec::new();
    let mut removed: Vec<String> = doomed.clone();
    let mut config = 0;
    for step in 0..(plan.len() * 3 / 2).max(16) as u64 {
        let k = keep[(rng.next() % keep.len() as u64) as usize].clone();
        let r = rng.range(0, 99);
        ops.push(if r < 20 {
            added.push(format!("added-{step}"));
            ApiOp::Add(format!("added-{step}"))
        } else if r < 30 && !added.is_empty() {
            let gone = added.remove((rng.next() % added.len() as u64) as usize);
            removed.push(gone.clone());
            ApiOp::Delete(gone)
        } else if r < 45 {
            config += 1;
            ApiOp::Config(config)
        } else if r.is_multiple_of(2) {
            ApiOp::Label(k, step)
        } else {
            ApiOp::Annotate(k, step)
        });
    }
    ops.insert(ops.len() / 3, ApiOp::Delete(doomed[0].clone()));
    ops.insert(ops.len() * 2 / 3, ApiOp::Delete(doomed[1].clone()));
    // The last act: the link is down (every connection cut, new ones
    // refused) while a label, an annotation and the ConfigMap change, so
    // the final state is a change the node learns only when it returns.
    let last_ops = [
        ApiOp::Label(keep[0].clone(), 999),
        ApiOp::Annotate(keep[1].clone(), 999),
        ApiOp::Config(999),
    ];
    let outage = if length <= Duration::from_secs(180) {
        Duration::from_secs(20)
    } else {
        Duration::from_secs(50)
    };
    let (kill_container_at, outage_at, crash_at) =
        (plan.len() / 4, plan.len() / 2, plan.len() * 2 / 3);
    eprintln!(
        "chaos seed {seed:#x} (PICOLET_CHAOS_SEED to replay), {length:?}: {} faults, {} API changes; \
         a container killed at fault {kill_container_at}, the API server stopped for {outage:?} at fault {outage_at}, \
         picolet SIGKILLed at fault {crash_at}",
        plan.len(),
        ops.len() + last_ops.len()
    );

    let per_fault = ops.len().div_ceil(plan.len()).max(1);
    let mut ops_left = ops.iter();
    let began = Instant::now();
    let (mut blackhole, mut log_from) = (false, 0);
    for (i, (fault, pause)) in plan.iter().enumerate() {
        eprintln!("chaos t+{:.1?}: {fault:?}", began.elapsed());
        if i == kill_container_at {
            eprintln!("chaos t+{:.1?}: crashy's container killed", began.elapsed());
            kill_container(&c, &before["crashy"].0);
        }
        if i == outage_at {
            eprintln!(
                "chaos t+{:.1?}: the API server stopped for {outage:?}",
                began.elapsed()
            );
            cp.stop_apiserver();
            thread::sleep(outage);
            cp.start_apiserver();
        }
        if i == crash_at {
            eprintln!(
                "chaos t+{:.1?}: picolet SIGKILLed and started again",
                began.elapsed()
            );
            p.kill();
            p.restart();
        }
        let lasts = match *fault {
            Fault::Reset => {
                proxy.reset_all();
                Duration::ZERO
            }
            Fault::Blackhole(d) => {
                // On a live connection, so that its PINGs go unanswered:
                // a change made now reaches picolet's cache first.
                let mark = format!("up-{i}");
                cp.kubectl_ok(&[
                    "label",
                    "pod",
                    &keep[2],
                    "-n",
                    "default",
                    "--overwrite",
                    &format!("link={mark}"),
                ]);
                wait_until("picolet to see a change before the blackhole", LONG, || {
                    (cached_pods(&p.root_dir()).get(&keep[2])?.labels["link"] == mark.as_str())
                        .then_some(())
                });
                log_from = p.log().len();
                proxy.blackhole();
                blackhole = true;
                d
            }
            Fault::Delay(by, d) => {
                proxy.delay(by);
                d
            }
            Fault::Throttle(rate, d) => {
                proxy.throttle(rate);
                d
            }
            Fault::Refuse(d) => {
                proxy.drop_new();
                d
            }
        };
        // The API changes while the fault lasts (the schedule's pacing).
        let end = Instant::now() + lasts;
        for op in ops_left.by_ref().take(per_fault) {
            apply_op(&cp, &node, op);
        }
        if i % 4 == 3 && !matches!(fault, Fault::Blackhole(_)) {
            // A reset in the middle of a fault, too (not of the blackhole:
            // that one is for the PINGs to notice).
            proxy.reset_all();
        }
        thread::sleep(end.saturating_duration_since(Instant::now()));
        if std::mem::take(&mut blackhole) {
            // The blackhole lasts until picolet's PINGs have noticed it.
            wait_until("picolet's PINGs to notice the blackhole", LONG, || {
                p.log()
                    .get(log_from..)?
                    .contains("keep-alive timed out")
                    .then_some(())
            });
        }
        proxy.pass();
        if i + 1 < plan.len() {
            thread::sleep(*pause);
        }
    }
    for op in ops_left {
        apply_op(&cp, &node, op);
    }
    eprintln!(
        "chaos t+{:.1?}: the link down for the last changes",
        began.elapsed()
    );
    proxy.drop_new();
    proxy.reset_all();
    for op in &last_ops {
        apply_op(&cp, &node, op);
    }
    // picolet's dials back off a few steps: three failed since the link
    // went down, as `picolet get node` counts them.
    wait_until("three failed dials to the API server", LONG, || {
        (failed_dials(&p)? >= 3).then_some(())
    });
    let log_at_return = p.log().len();
    proxy.pass();
    let link_back = Instant::now();
    eprintln!(
        "chaos over after {:.1?}; the link is clean",
        began.elapsed()
    );

    // The node converges on the API: every API pod Running and Ready with
    // a running container; the deleted pods gone from the API (none stuck
    // Terminating); picolet's cache exactly the API's pods, labels and
    // annotations (no update lost); the ConfigMap's last value in the
    // reader's volume.
    let want: BTreeSet<String> = untouched
        .iter()
        .chain(&added)
        .cloned()
        .chain(["crashy".to_string()])
        .collect();
    let mut last = String::new();
    let pods = harness::poll_until(CONVERGE, || {
        let pods = api_pods(&cp, &node);
        let names: BTreeSet<String> = pods.keys().cloned().collect();
        if names != want {
            last = format!("API pods {names:?}, want {want:?}");
            return None;
        }
        if let Some((name, pod)) = pods.iter().find(|(_, pod)| !running_and_ready(pod)) {
            last = format!("{name} not Running and Ready: {}", pod["status"]);
            return None;
        }
        let api: BTreeMap<String, CachedPod> = pods
            .iter()
            .map(|(n, p)| (n.clone(), as_cached(p)))
            .collect();
        let cached = cached_pods(&p.root_dir());
        if api != cached {
            last = format!(
                "picolet's pod cache differs from the API:\nAPI {api:#?}\ncache {cached:#?}"
            );
            return None;
        }
        // The volume's file, as the container reads it (its log would add
        // up to a second of its print loop).
        let uid = pods["config-reader"]["metadata"]["uid"]
            .as_str()
            .unwrap_or_default();
        let file = p
            .root_dir()
            .join(format!("pods/{uid}/volumes/kubernetes.io~configmap/cfg/v"));
        let v = std::fs::read_to_string(&file).unwrap_or_default();
        if v != "999" {
            last = format!("{} holds {v:?}, want 999", file.display());
            return None;
        }
        Some(pods)
    })
    .unwrap_or_else(|| panic!("the node did not converge after the chaos: {last}"));
    let converged = link_back.elapsed();
    // What picolet did from the link's return to convergence.
    for line in p
        .log()
        .get(log_at_return..)
        .unwrap_or_default()
        .lines()
        .take(80)
    {
        eprintln!("  | {line}");
    }
    eprintln!(
        "chaos seed {seed:#x}: converged {converged:.1?} after the link returned; picolet (test build): {}",
        p.pid().map(footprint).unwrap_or_default()
    );
    // The time is reported (the soak's last line), not asserted: it is a
    // loaded machine's number. A back-off the link's return did not end
    // shows there and in the log above; a node that never converges fails
    // the wait.

    // No healthy container restarted: the same IDs, the same restartCount,
    // still running under runc. The killed one ran again.
    for name in &untouched {
        let (id, restarts) = main_container(&pods[name]).expect("a kept pod reports its container");
        assert_eq!(
            (id.as_str(), restarts),
            (before[name].0.as_str(), before[name].1),
            "{name} was restarted by the chaos"
        );
        assert_eq!(runc_state(&c, &id).as_deref(), Some("running"), "{name}");
    }
    let (crashy, restarts) = main_container(&pods["crashy"]).expect("crashy reports its container");
    assert!(
        restarts >= 1 && crashy != before["crashy"].0,
        "crashy was not restarted after its container was killed: {}",
        pods["crashy"]["status"]
    );
    for name in &added {
        let (id, _) = main_container(&pods[name]).expect("an added pod reports its container");
        assert_eq!(runc_state(&c, &id).as_deref(), Some("running"), "{name}");
    }
    // No stray container: besides the pods' containers, at most one
    // sandbox per pod runs; the deleted pods' containers are gone.
    for name in &doomed {
        let id = &before[name].0;
        wait_until(
            &format!("{name}'s container to be gone from the runtime"),
            LONG,
            || runc_state(&c, id).is_none().then_some(()),
        );
    }
    let mains: BTreeSet<String> = pods
        .values()
        .filter_map(|p| Some(main_container(p)?.0))
        .collect();
    let others: Vec<String> = runc_running(&c)
        .into_iter()
        .filter(|id| !mains.contains(id))
        .collect();
    assert!(
        others.len() <= pods.len(),
        "{} containers run besides the {} pods' own (at most one sandbox each): {others:?}",
        others.len(),
        pods.len()
    );
    let local = p.pods();
    let local_names: BTreeSet<String> = local["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    for name in &removed {
        assert!(
            !local_names.contains(name),
            "picolet still has {name}: {local_names:?}"
        );
    }
    let api = api_pods(&cp, &node);
    assert_eq!(api["keep-0"]["metadata"]["labels"]["chaos-step"], "999");
    assert_eq!(
        api["keep-1"]["metadata"]["annotations"]["example.com/chaos-step"],
        "999"
    );
    // The status in the API is current: what the runtime runs now.
    for (name, pod) in &api {
        let (id, _) = main_container(pod).expect("every pod reports its container");
        assert_eq!(runc_state(&c, &id).as_deref(), Some("running"), "{name}");
        assert!(
            pod["status"]["podIP"].is_string(),
            "{name}: {}",
            pod["status"]
        );
    }
    eprintln!("{}", convergence_verdict(converged));
}

// ---------------------------------------------------------------------------
// Test 5: a truncated or malformed watch stream
// ---------------------------------------------------------------------------

/// What the API does right after a fault is armed, so that the faulted
/// chunk is (or comes just before) that change.
#[derive(Clone, Copy, Debug)]
enum Trigger {
    Add(&'static str),
    Delete(&'static str),
    Label(&'static str, &'static str),
}

#[test]
fn a_truncated_or_malformed_watch_stream_is_logged_retried_and_loses_nothing() {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let mut proxy = None;
    let p = Picolet::start_with_args(&c, "", |p| {
        let px = TlsFaultProxy::start(
            cp.apiserver_addr(),
            &cp.pki().apiserver(),
            &cp.ca_cert(),
            &cp.pki().node(p.hostname()),
        );
        let kubeconfig = cp.node_kubeconfig_with(p.hostname(), Credentials::Files, &px.https_url());
        proxy = Some(px);
        vec!["--kubeconfig".to_string(), kubeconfig.display().to_string()]
    });
    let proxy = proxy.expect("the TLS fault proxy");
    let node = p.hostname().to_string();
    wait_until("the node is Ready in the API", LONG, || {
        let n = get(&cp, &["node", &node])?;
        (condition(&n, "Ready").as_deref() == Some("True")).then_some(())
    });
    cp.apply(&pod_yaml("steady", &node));
    let steady = wait_until("the first pod is Running and Ready", LONG, || {
        let pods = api_pods(&cp, &node);
        main_container(pods.get("steady").filter(|p| running_and_ready(p))?)
    });
    assert_eq!(runc_state(&c, &steady.0).as_deref(), Some("running"));
    // Everything went through the proxy, which speaks only HTTP/1.1.
    let pod_watches = || {
        proxy
            .requests()
            .into_iter()
            .filter(|r| r.is_watch() && r.target.starts_with("/api/v1/pods?"))
            .collect::<Vec<_>>()
    };
    assert!(!pod_watches().is_empty(), "{:?}", proxy.requests());

    // A relist is a LIST of the pods, or a streaming list (a watch with
    // sendInitialEvents=true), in the API server's audit log.
    let user = format!("system:node:{node}");
    let relists = || {
        cp.requests_by(&user)
            .iter()
            .filter(|r| {
                r.uri.starts_with("/api/v1/pods?")
                    && (r.verb == "list" || r.uri.contains("sendInitialEvents=true"))
            })
            .count()
    };
    let lists_before = relists();
    assert!(lists_before >= 1, "the first sync is not in the audit log");
    let watches_before = pod_watches().len();

    let steps: &[(&[WatchFault], Trigger, &str)] = &[
        (
            &[WatchFault::TruncateMidLine],
            Trigger::Add("after-truncation"),
            "ended in the middle of an event",
        ),
        (
            &[WatchFault::GarbageLine],
            Trigger::Delete("after-truncation"),
            "malformed watch event",
        ),
        (
            &[WatchFault::CutMidLine],
            Trigger::Add("after-cut"),
            "reading the body",
        ),
        (
            &[WatchFault::WrongShape],
            Trigger::Label("steady", "wrong-shape"),
            "malformed watch event",
        ),
        (
            &[WatchFault::HtmlPage, WatchFault::BadGateway],
            Trigger::Add("after-html"),
            "502",
        ),
    ];
    let mut fired = 0;
    let mut started: BTreeMap<&str, String> = BTreeMap::new();
    for (faults, trigger, says) in steps {
        eprintln!("watch faults {faults:?}, then {trigger:?}");
        let log_from = p.log().len();
        for f in *faults {
            proxy.arm("/api/v1/pods?", *f);
        }
        match *trigger {
            Trigger::Add(name) => {
                cp.apply(&pod_yaml(name, &node));
            }
            Trigger::Delete(name) => {
                cp.kubectl_ok(&["delete", "pod", name, "-n", "default", "--wait=false"]);
            }
            Trigger::Label(name, value) => {
                cp.kubectl_ok(&[
                    "label",
                    "pod",
                    name,
                    "-n",
                    "default",
                    "--overwrite",
                    &format!("chaos={value}"),
                ]);
            }
        }
        fired += faults.len() as u64;
        proxy.wait_fired(fired, LONG);
        // Nothing lost: the change is applied all the same.
        match *trigger {
            Trigger::Add(name) => {
                let (id, _) = wait_until(&format!("{name} Running and Ready"), LONG, || {
                    main_container(
                        api_pods(&cp, &node)
                            .get(name)
                            .filter(|p| running_and_ready(p))?,
                    )
                });
                started.insert(name, id);
            }
            Trigger::Delete(name) => {
                wait_until(&format!("{name} gone from the API"), LONG, || {
                    (!api_pods(&cp, &node).contains_key(name)).then_some(())
                });
                let id = &started[name];
                wait_until(
                    &format!("{name}'s container gone from the runtime"),
                    LONG,
                    || runc_state(&c, id).is_none().then_some(()),
                );
            }
            Trigger::Label(name, value) => {
                wait_until(
                    &format!("{name}'s new label in picolet's cache"),
                    LONG,
                    || {
                        (cached_pods(&p.root_dir()).get(name)?.labels["chaos"] == value)
                            .then_some(())
                    },
                );
            }
        }
        // A log line naming the problem.
        wait_until(&format!("picolet to log {says:?}"), LONG, || {
            let log = p.log();
            log.get(log_from..)
                .unwrap_or_default()
                .lines()
                .any(|l| l.contains(says) && l.contains("retrying"))
                .then_some(())
        });
    }

    // Nothing running was stopped, and the faults cost no relist: every
    // reconnect resumed the watch from a resourceVersion.
    let pods = api_pods(&cp, &node);
    let names: BTreeSet<&str> = pods.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from(["after-cut", "after-html", "steady"]),
        "the pods in the API"
    );
    assert_eq!(
        main_container(&pods["steady"]),
        Some(steady.clone()),
        "steady was restarted"
    );
    assert_eq!(runc_state(&c, &steady.0).as_deref(), Some("running"));
    let watches = pod_watches();
    assert!(
        watches.len() >= watches_before + steps.len(),
        "picolet did not watch again after each fault: {watches:#?}"
    );
    for w in &watches[watches_before..] {
        assert!(
            w.target.contains("resourceVersion=") && !w.target.contains("sendInitialEvents"),
            "a reconnect that did not resume the watch: {}",
            w.target
        );
    }
    assert_eq!(
        relists(),
        lists_before,
        "picolet relisted after a watch fault: {:#?}",
        cp.requests_by(&user)
    );
    let cached: BTreeSet<String> = cached_pods(&p.root_dir()).into_keys().collect();
    assert_eq!(
        cached,
        names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>(),
        "picolet's pod cache"
    );
}

// ---------------------------------------------------------------------------
// Every fallback path, forced
// ---------------------------------------------------------------------------

/// A pod that reads ConfigMap `fallback` and Secret `fallback` (key `v`
/// of each) through volumes and prints both every second.
fn config_pod_yaml(name: &str, node: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  volumes:
  - name: cfg
    configMap: {{name: fallback}}
  - name: sec
    secret: {{secretName: fallback}}
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    volumeMounts:
    - {{name: cfg, mountPath: /cfg}}
    - {{name: sec, mountPath: /sec}}
    command: ["sh", "-c", "while true; do echo \"cm=$(cat /cfg/v) sec=$(cat /sec/v)\"; sleep 1; done"]
"#
    )
}

fn config_objects_yaml(cm: &str, secret: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fallback\n  namespace: default\ndata:\n  v: {cm}\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: fallback\n  namespace: default\nstringData:\n  v: {secret}\n"
    )
}

#[test]
fn every_fallback_path_forced_against_the_real_api_server_ends_with_the_node_in_sync() {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    // picolet -> TCP fault proxy (handshake cuts) -> TLS fault proxy
    // (answers of its own) -> kube-apiserver.
    let mut proxies = None;
    let p = Picolet::start_with_args(&c, "", |p| {
        let tls = TlsFaultProxy::start(
            cp.apiserver_addr(),
            &cp.pki().apiserver(),
            &cp.ca_cert(),
            &cp.pki().node(p.hostname()),
        );
        let tcp = FaultProxy::start(tls.addr());
        let kubeconfig =
            cp.node_kubeconfig_with(p.hostname(), Credentials::Files, &tcp.https_url());
        proxies = Some((tcp, tls));
        vec!["--kubeconfig".to_string(), kubeconfig.display().to_string()]
    });
    let (tcp, proxy) = proxies.expect("the fault proxies");
    let node = p.hostname().to_string();
    wait_until("the node is Ready in the API", LONG, || {
        let n = get(&cp, &["node", &node])?;
        (condition(&n, "Ready").as_deref() == Some("True")).then_some(())
    });
    cp.apply(&config_objects_yaml("one", "s-one"));
    cp.apply(&pod_yaml("steady", &node));
    let steady = wait_until("steady is Running and Ready", LONG, || {
        main_container(
            api_pods(&cp, &node)
                .get("steady")
                .filter(|p| running_and_ready(p))?,
        )
    });
    let running = |name: &str| {
        wait_until(
            &format!("{name} Running and Ready in the API"),
            LONG,
            || {
                main_container(
                    api_pods(&cp, &node)
                        .get(name)
                        .filter(|p| running_and_ready(p))?,
                )
            },
        )
    };
    let logged = |from: usize, says: &str| {
        wait_until(&format!("picolet to log {says:?}"), LONG, || {
            p.log()
                .get(from..)
                .unwrap_or_default()
                .contains(says)
                .then_some(())
        });
    };
    let mut fired = 0;
    let mut step = |name: &str, n: u64| {
        fired += n;
        eprintln!("fallbacks: {name}");
        fired
    };

    // 1. A cut TLS handshake: the next connection ends 100 bytes into the
    // server's answer. picolet backs off as from a failed connect and
    // dials again.
    let from = p.log().len();
    step("a TLS handshake cut after 100 bytes", 0);
    tcp.truncate_after(100);
    tcp.reset_all();
    logged(from, "TLS handshake");
    cp.apply(&pod_yaml("after-handshake", &node));
    running("after-handshake");

    // 2. Pods: a watch cut mid-event resumes and is told its
    // resourceVersion expired (410); the relist is refused (403),
    // throttled (429, Retry-After: 1), fails (500, 503), then lands.
    let n = step(
        "pods: 410 on the resumed watch, then 403, 429, 500, 503 on the relist",
        6,
    );
    proxy.arm("/api/v1/pods?", WatchFault::TruncateMidLine);
    proxy.arm_answer("/api/v1/pods?", Kind::Watch, Answer::Expired);
    for a in [
        Answer::Status(403),
        Answer::TooManyRequests {
            retry_after_seconds: 1,
        },
        Answer::Status(500),
        Answer::Status(503),
    ] {
        proxy.arm_answer("/api/v1/pods?", Kind::Relist, a);
    }
    cp.apply(&pod_yaml("after-410", &node));
    proxy.wait_fired(n, LONG);
    running("after-410");

    // 3. ConfigMap and Secret: a new pod's first requests for them are
    // refused (403, as the Node authorizer answers before it has seen the
    // binding), throttled (429) and failed (500); the pod starts with both.
    let n = step("configmap: 403 twice; secret: 429, 500", 4);
    let cms = "/api/v1/namespaces/default/configmaps?";
    let secrets = "/api/v1/namespaces/default/secrets?";
    proxy.arm_answer(cms, Kind::Relist, Answer::Status(403));
    proxy.arm_answer(cms, Kind::Relist, Answer::Status(403));
    proxy.arm_answer(
        secrets,
        Kind::Relist,
        Answer::TooManyRequests {
            retry_after_seconds: 1,
        },
    );
    proxy.arm_answer(secrets, Kind::Relist, Answer::Status(500));
    cp.apply(&config_pod_yaml("with-config", &node));
    proxy.wait_fired(n, LONG);
    wait_line(&p, "with-config", None, "cm=one sec=s-one");
    let with_config = running("with-config");

    // 4. A ConfigMap change whose watch event is cut, and whose resumed
    // watch fails (503): the new value reaches the volume all the same.
    let n = step(
        "configmap: a watch cut mid-event, 503 on the resumed watch",
        2,
    );
    proxy.arm(cms, WatchFault::CutMidLine);
    proxy.arm_answer(cms, Kind::Watch, Answer::Status(503));
    cp.apply(&config_objects_yaml("two", "s-one"));
    proxy.wait_fired(n, LONG);
    wait_line(&p, "with-config", None, "cm=two sec=s-one");

    // 5. The Node: its watch is cut at a label change, the resumed watch
    // expired (410), the relist fails (503); the label reaches picolet.
    let n = step("node: a watch cut, 410, 503 on the relist", 3);
    let nodes = "/api/v1/nodes?";
    proxy.arm(nodes, WatchFault::TruncateMidLine);
    proxy.arm_answer(nodes, Kind::Watch, Answer::Expired);
    proxy.arm_answer(nodes, Kind::Relist, Answer::Status(503));
    let from = p.log().len();
    cp.kubectl_ok(&["label", "node", &node, "fallback=node"]);
    proxy.wait_fired(n, LONG);
    logged(from, "fallback=node");

    // 6. The API server restarted with streaming lists off
    // (WatchList=false): the relists after a 410 (pods, the ConfigMap, the
    // Secret) fall back to plain LISTs, and every change still lands.
    // Once it is back, every connection of picolet's is cut (the TCP
    // proxy), so every watch resumes and meets a 410 (the TLS proxy's).
    step("the API server restarted with WatchList=false", 0);
    cp.restart_apiserver_with(&["--feature-gates=WatchList=false"]);
    let n = step(
        "every connection cut, 410 on the resumed watches of pods, the configmap, the secret",
        3,
    );
    let seen_before = proxy.requests().len();
    proxy.arm_answer("/api/v1/pods?", Kind::Watch, Answer::Expired);
    proxy.arm_answer(cms, Kind::Watch, Answer::Expired);
    proxy.arm_answer(secrets, Kind::Watch, Answer::Expired);
    tcp.reset_all();
    proxy.wait_fired(n, LONG);
    cp.apply(&pod_yaml("after-restart", &node));
    cp.apply(&config_objects_yaml("three", "s-three"));
    running("after-restart");
    wait_line(&p, "with-config", None, "cm=three sec=s-three");
    let plain_lists: Vec<String> = proxy.requests()[seen_before..]
        .iter()
        .filter(|r| r.method == "GET" && !r.is_watch() && r.target.contains('?'))
        .filter(|r| {
            r.target.starts_with("/api/v1/pods?")
                || r.target.starts_with(cms)
                || r.target.starts_with(secrets)
        })
        .map(|r| r.target.clone())
        .collect();
    for prefix in ["/api/v1/pods?", cms, secrets] {
        assert!(
            plain_lists.iter().any(|t| t.starts_with(prefix)),
            "no plain LIST of {prefix} after streaming lists were turned off: {plain_lists:#?}"
        );
    }

    // In sync: exactly these pods, nothing healthy restarted, the cache
    // matches the API.
    let pods = api_pods(&cp, &node);
    let names: BTreeSet<&str> = pods.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "after-410",
            "after-handshake",
            "after-restart",
            "steady",
            "with-config"
        ]),
        "the pods in the API"
    );
    assert_eq!(
        main_container(&pods["steady"]),
        Some(steady.clone()),
        "steady was restarted"
    );
    assert_eq!(
        main_container(&pods["with-config"]),
        Some(with_config),
        "with-config was restarted"
    );
    assert_eq!(runc_state(&c, &steady.0).as_deref(), Some("running"));
    wait_until("picolet's pod cache matches the API", LONG, || {
        let cached: BTreeSet<String> = cached_pods(&p.root_dir()).into_keys().collect();
        (cached == names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>()).then_some(())
    });
    eprintln!("fallbacks: {fired} faults fired, the node is in sync");
}
