//! The node's copy of the API server's objects under stress (issue #8,
//! tests 4 and 6): a resume that meets a compacted etcd after an API server
//! restart (`410 Gone`, exactly one relist, deletions applied, nothing else
//! touched), and picolet SIGKILLed again and again while its crash-safe
//! cache is being written (it always loads, and the node converges). Also
//! the watch of the node's own Node object: labels and taints set with
//! kubectl reach admission, and a pod the node refuses is Failed in the API
//! with kubelet's reason.
//!
//! Real parts only: a private etcd and kube-apiserver (Node,RBAC,
//! NodeRestriction), real containerd or CRI-O, picolet joined with a
//! `system:node:<name>` credential through the fault proxy of
//! tests/harness/faultproxy.rs, which plays the uplink. Relists are counted
//! from the API server's audit log, never guessed from timing.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test api_cache --
//! --test-threads=2`.

mod harness;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime};

use harness::faultproxy::FaultProxy;
use harness::kube::{ControlPlane, Credentials};
use harness::{poll_until, wait_until, Containerd, Picolet};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);

/// picolet joined to `cp` through `proxy` (its uplink), labelled like the
/// other API tests' nodes.
fn join_through(cp: &ControlPlane, c: &Containerd, proxy: &FaultProxy) -> Picolet {
    Picolet::start_with_args(c, "", |p| {
        let kubeconfig =
            cp.node_kubeconfig_with(p.hostname(), Credentials::Files, &proxy.https_url());
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

/// A pod bound to `node` that runs (busybox is present on the node; the
/// offline image fallback runs it), probed for readiness every second so
/// that probe counts show time passing.
fn running_pod_yaml(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  nodeName: {node}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 3\n  containers:\n  - name: main\n    image: busybox\n    command: [\"sleep\", \"100000\"]\n    readinessProbe:\n      exec: {{command: [\"true\"]}}\n      periodSeconds: 1\n"
    )
}

/// The ID of the pod's `main` container as the API reports it (the
/// runtime's prefix dropped).
fn container_id(cp: &ControlPlane, pod: &str) -> Option<String> {
    let pod = get(cp, &["pod", pod, "-n", "default"])?;
    let id = pod["status"]["containerStatuses"][0]["containerID"].as_str()?;
    Some(id.split_once("://").map_or(id, |(_, id)| id).to_string())
}

/// The container's state as runc has it (`running`, `stopped`), under
/// either runtime's runc root; None when it is gone.
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

fn wait_running(cp: &ControlPlane, name: &str) -> String {
    wait_until(&format!("pod {name} Running in the API"), LONG, || {
        let pod = get(cp, &["pod", name, "-n", "default"])?;
        (pod["status"]["phase"] == "Running").then_some(())?;
        container_id(cp, name)
    })
}

/// The relists of the node's pods in the audit log: LIST requests, and
/// streaming lists (a WATCH with `sendInitialEvents=true`).
fn pod_relists(cp: &ControlPlane, node: &str) -> usize {
    cp.requests_by(&format!("system:node:{node}"))
        .iter()
        .filter(|r| r.uri.starts_with("/api/v1/pods?"))
        .filter(|r| {
            r.verb == "list" || (r.verb == "watch" && r.uri.contains("sendInitialEvents=true"))
        })
        .count()
}

/// Watches of the node's pods that resume from a resourceVersion (not a
/// streaming list), answered 200.
fn pod_watch_resumes(cp: &ControlPlane, node: &str) -> usize {
    cp.requests_by(&format!("system:node:{node}"))
        .iter()
        .filter(|r| r.uri.starts_with("/api/v1/pods?") && r.verb == "watch")
        .filter(|r| !r.uri.contains("sendInitialEvents=true") && r.code == Some(200))
        .count()
}

fn readiness_probes(p: &Picolet) -> f64 {
    p.metric("prober_probe_total{probe_type=\"Readiness\",result=\"successful\"}")
        .unwrap_or(0.0)
}

/// `n` more successful readiness probes: proof that time passed with the
/// node working, without a fixed sleep.
fn wait_probes(p: &Picolet, n: f64) {
    let start = readiness_probes(p);
    wait_until(&format!("{n} more readiness probes"), LONG, || {
        (readiness_probes(p) >= start + n).then_some(())
    });
}

fn count(log: &str, needle: &str) -> usize {
    log.matches(needle).count()
}

/// `n` ConfigMaps in `default`, each holding `data`: one object write per
/// ConfigMap and per distinct `data`, to move etcd's revision along.
fn configmaps_yaml(n: usize, data: &str) -> String {
    let mut y = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in 0..n {
        y.push_str(&format!(
            "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: churn-{i}\n    namespace: default\n  data:\n    v: \"{data}\"\n"
        ));
    }
    y
}

#[test]
fn a_resume_after_etcd_was_compacted_and_the_api_server_restarted_relists_once_and_applies_deletions(
) {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let proxy = FaultProxy::start(cp.apiserver_addr());
    let p = join_through(&cp, &c, &proxy);
    let node = p.hostname().to_string();

    for name in ["keep-a", "keep-b", "doomed"] {
        cp.apply(&running_pod_yaml(name, &node));
    }
    let ids: BTreeMap<&str, String> = ["keep-a", "keep-b", "doomed"]
        .into_iter()
        .map(|n| (n, wait_running(&cp, n)))
        .collect();
    // The watch is established and the set is in sync before the outage.
    wait_until("picolet's pods are in sync", LONG, || {
        p.log()
            .contains("pods of this node are in sync")
            .then_some(())
    });
    let relists_before = pod_relists(&cp, &node);
    assert!(relists_before >= 1, "the first sync was a relist");

    // The uplink goes: live connections reset, new ones refused.
    proxy.drop_new();
    proxy.reset_all();

    // Meanwhile, in the cluster: the pod is deleted for good (no grace, so
    // it is gone from etcd and picolet never sees a DELETE event), many
    // writes move the revision far, etcd is compacted, and the API server
    // restarts (its watch cache then starts past every version picolet
    // knows).
    cp.kubectl_ok(&[
        "delete",
        "pod",
        "doomed",
        "-n",
        "default",
        "--force",
        "--grace-period=0",
    ]);
    let rev_before = cp.etcd_revision();
    cp.apply(&configmaps_yaml(60, "one"));
    cp.apply(&configmaps_yaml(60, "two"));
    assert!(
        cp.etcd_revision() >= rev_before + 120,
        "the churn was written"
    );
    let compacted = cp.compact_etcd();
    cp.stop_apiserver();
    cp.start_apiserver();
    assert!(cp.etcd_revision() >= compacted);

    // The uplink comes back.
    let log_before = p.log().len();
    let synced_before = count(&p.log(), "pods of this node are in sync");
    let resumes_before = pod_watch_resumes(&cp, &node);
    proxy.pass();

    // 410 Gone, said in the log.
    wait_until("picolet logs the 410 of its resumed watch", LONG, || {
        let log = p.log();
        let new = &log[log_before.min(log.len())..];
        new.lines()
            .any(|l| l.contains("/api/v1/pods") && l.contains("410"))
            .then_some(())
    });
    // The relist says the pod is gone: its container is stopped and removed.
    wait_until("the deleted pod's container is removed", LONG, || {
        (runc_state(&c, &ids["doomed"]).is_none()).then_some(())
    });
    wait_until("picolet no longer lists the deleted pod", LONG, || {
        let pods = p.pods();
        let items = pods["items"].as_array()?;
        (!items.iter().any(|i| i["metadata"]["name"] == "doomed")).then_some(())
    });
    wait_until("the relist made the set authoritative again", LONG, || {
        (count(&p.log(), "pods of this node are in sync") > synced_before).then_some(())
    });
    // After the relist picolet watches again, from the relist's version,
    // and works on: no relist storm.
    wait_until("picolet watches its pods again", LONG, || {
        (pod_watch_resumes(&cp, &node) > resumes_before).then_some(())
    });
    wait_probes(&p, 6.0);
    let requests = cp.requests_by(&format!("system:node:{node}"));
    let pod_requests: Vec<String> = requests
        .iter()
        .filter(|r| r.uri.starts_with("/api/v1/pods?"))
        .map(|r| format!("{} {} -> {:?}", r.verb, r.uri, r.code))
        .collect();
    eprintln!(
        "the node's pod list/watch requests:\n{}",
        pod_requests.join("\n")
    );
    assert_eq!(
        pod_relists(&cp, &node),
        relists_before + 1,
        "exactly one relist after the 410: {:#?}",
        cp.requests_by(&format!("system:node:{node}"))
            .iter()
            .filter(|r| r.uri.starts_with("/api/v1/pods?"))
            .collect::<Vec<_>>()
    );

    // The surviving pods kept their containers: same IDs, running, never
    // restarted.
    for name in ["keep-a", "keep-b"] {
        assert_eq!(
            runc_state(&c, &ids[name]).as_deref(),
            Some("running"),
            "{name}"
        );
        let pod = wait_until(&format!("{name} reported Running"), LONG, || {
            let pod = get(&cp, &["pod", name, "-n", "default"])?;
            (pod["status"]["phase"] == "Running").then_some(pod)
        });
        assert_eq!(container_id(&cp, name).as_ref(), Some(&ids[name]), "{name}");
        assert_eq!(
            pod["status"]["containerStatuses"][0]["restartCount"], 0,
            "{name}"
        );
    }
    assert!(get(&cp, &["pod", "doomed", "-n", "default"]).is_none());
}

/// A small deterministic PRNG (xorshift64*), so a failing kill pattern can
/// be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the cache directory holds: entry and sync files with their size
/// and modification time (a rewrite changes the time).
fn cache_fingerprint(dir: &Path) -> BTreeMap<String, (u64, SystemTime)> {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let meta = e.metadata().ok()?;
            Some((name, (meta.len(), meta.modified().ok()?)))
        })
        .collect()
}

fn changed_files(
    a: &BTreeMap<String, (u64, SystemTime)>,
    b: &BTreeMap<String, (u64, SystemTime)>,
) -> usize {
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    names.into_iter().filter(|n| a.get(*n) != b.get(*n)).count()
}

/// A pod bound to `node` that the node refuses at admission (its node
/// selector matches no label): cheap to create by the dozen, yet cached
/// like any other pod of the node.
fn churn_pods_yaml(node: &str, names: &[usize], generation: usize) -> String {
    let mut y = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in names {
        y.push_str(&format!(
            "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: churn-{i}\n    namespace: default\n    annotations:\n      example.com/generation: \"{generation}\"\n  spec:\n    nodeName: {node}\n    automountServiceAccountToken: false\n    nodeSelector:\n      example.com/never: \"true\"\n    containers:\n    - name: main\n      image: busybox\n      imagePullPolicy: IfNotPresent\n      command: [\"sleep\", \"100000\"]\n"
        ));
    }
    y
}

/// The log of picolet's current run (after the harness's last start line).
fn current_run(log: &str) -> &str {
    log.rsplit_once("=== harness: starting picolet ===")
        .map_or(log, |(_, run)| run)
}

/// The number in picolet's `pod cache <dir>: <n> pods ...` line.
fn cached_pods(line: &str) -> usize {
    line.split(": ")
        .filter_map(|part| {
            part.strip_suffix(" pods")
                .or_else(|| part.split_once(" pods ").map(|(n, _)| n))
        })
        .find_map(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// The API pods of `node` as (name, uid), from the API server.
fn api_pods(cp: &ControlPlane, node: &str) -> Option<BTreeSet<(String, String)>> {
    let list = get(
        cp,
        &[
            "pods",
            "-n",
            "default",
            "--field-selector",
            &format!("spec.nodeName={node}"),
        ],
    )?;
    Some(
        list["items"]
            .as_array()?
            .iter()
            .map(|i| {
                (
                    i["metadata"]["name"].as_str().unwrap_or("").to_string(),
                    i["metadata"]["uid"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect(),
    )
}

/// The pods bound to `node` whose phase in the API is neither Succeeded
/// nor Failed, as (name, uid).
fn api_pods_not_terminal(cp: &ControlPlane, node: &str) -> Option<BTreeSet<(String, String)>> {
    let list = get(
        cp,
        &[
            "pods",
            "-n",
            "default",
            "--field-selector",
            &format!("spec.nodeName={node},status.phase!=Failed,status.phase!=Succeeded"),
        ],
    )?;
    Some(
        list["items"]
            .as_array()?
            .iter()
            .map(|i| {
                (
                    i["metadata"]["name"].as_str().unwrap_or("").to_string(),
                    i["metadata"]["uid"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect(),
    )
}

/// The API pods picolet knows (running or refused), as (name, uid).
fn local_api_pods(p: &Picolet) -> BTreeSet<(String, String)> {
    p.pods()["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["metadata"]["annotations"]["kubernetes.io/config.source"] == "api")
        .map(|i| {
            (
                i["metadata"]["name"].as_str().unwrap_or("").to_string(),
                i["metadata"]["uid"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn picolet_killed_again_and_again_while_its_cache_is_written_always_loads_it_and_converges() {
    const ROUNDS: usize = 16;
    const CHURN_PODS: usize = 16;
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let proxy = FaultProxy::start(cp.apiserver_addr());
    let mut p = join_through(&cp, &c, &proxy);
    let node = p.hostname().to_string();
    let cache_dir = p.root_dir().join("apiserver/pods");

    cp.apply(&running_pod_yaml("steady", &node));
    let steady = wait_running(&cp, "steady");

    // The cluster keeps writing pods of this node: every round of the
    // churn updates each churn pod (a MODIFIED event, a cache write), and
    // every third round force-deletes a few of them (DELETED events, cache
    // removals) for the next round to create anew.
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    let churn = {
        let stop = stop.clone();
        let rounds = rounds.clone();
        let node = node.clone();
        let kubeconfig = cp.admin_kubeconfig();
        let dir = cp.dir().join("manifests");
        thread::spawn(move || {
            let all: Vec<usize> = (0..CHURN_PODS).collect();
            let mut generation = 0;
            while !stop.load(Ordering::SeqCst) {
                generation += 1;
                let file = dir.join(format!("churn-{generation}.yaml"));
                fs::write(&file, churn_pods_yaml(&node, &all, generation)).unwrap();
                let kubectl = harness::kube::assets::binary("kubectl");
                let _ = std::process::Command::new(&kubectl)
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(["apply", "-f"])
                    .arg(&file)
                    .output();
                if generation % 3 == 0 {
                    let names: Vec<String> = (0..CHURN_PODS)
                        .filter(|i| (i + generation) % 4 == 0)
                        .map(|i| format!("churn-{i}"))
                        .collect();
                    let _ = std::process::Command::new(&kubectl)
                        .arg("--kubeconfig")
                        .arg(&kubeconfig)
                        .args(["delete", "pod", "-n", "default", "--force"])
                        .args(["--grace-period=0", "--ignore-not-found", "--wait=false"])
                        .args(&names)
                        .output();
                }
                rounds.fetch_add(1, Ordering::SeqCst);
            }
        })
    };

    let mut rng = Rng(0x5eed_cafe_f00d_0006);
    let mut loaded_counts = Vec::new();
    for round in 0..ROUNDS {
        let reachable = round % 2 == 0;
        // Kill at a varied moment of the cache being written: after 0..6
        // changed cache files (with the API server reachable), or after
        // 0..3 readiness probes (unreachable: the cache is only read).
        let wait_for = rng.below(if reachable { 6 } else { 3 });
        let before = cache_fingerprint(&cache_dir);
        match wait_for {
            0 => {}
            n if reachable => {
                let seen = poll_until(LONG, || {
                    (changed_files(&before, &cache_fingerprint(&cache_dir)) >= n as usize)
                        .then_some(())
                });
                assert!(
                    seen.is_some(),
                    "round {round}: the cache was not written ({n} files)"
                );
            }
            n => wait_probes(&p, n as f64),
        }
        p.kill();
        if reachable {
            proxy.drop_new();
            proxy.reset_all();
        } else {
            proxy.pass();
        }
        // picolet comes back up (the harness waits for its admin socket)
        // with the other reachability.
        p.restart();
        let loaded = wait_until(&format!("round {round}: the pod cache loads"), LONG, || {
            let log = p.log();
            let run = current_run(&log);
            let line = run.lines().find(|l| l.contains("pod cache "))?;
            Some(line.to_string())
        });
        let log = p.log();
        let run = current_run(&log);
        for bad in ["discarding", "corrupt", "does not decode", "panicked"] {
            assert!(
                !run.contains(bad),
                "round {round}: a kill -9 left a damaged cache entry ({bad}):\n{run}"
            );
        }
        eprintln!(
            "round {round}: API server {}, killed after {wait_for} {}; restarted: {}",
            if reachable {
                "reachable"
            } else {
                "unreachable"
            },
            if reachable {
                "changed cache files"
            } else {
                "readiness probes"
            },
            loaded.trim()
        );
        loaded_counts.push(loaded);
    }
    eprintln!(
        "temp files of interrupted writes found at restart: {}",
        count(&p.log(), "left by an interrupted write")
    );
    stop.store(true, Ordering::SeqCst);
    churn.join().expect("the churn thread");
    assert!(
        rounds.load(Ordering::SeqCst) >= 2,
        "the churn ran while picolet was being killed"
    );
    assert!(
        loaded_counts.iter().any(|l| cached_pods(l) > 1),
        "the cache held churn pods at some restart: {loaded_counts:#?}"
    );

    // The link is back for good: the node converges to the API's set, and
    // its cache holds exactly that set.
    proxy.pass();
    // Pods already Failed in the API when a restarted picolet first saw
    // them (the refused churn pods) are not taken up again, as kubelet
    // does; every other API pod is picolet's, and nothing else is.
    let want = wait_until("picolet's API pods match the API server's", LONG, || {
        let want = api_pods(&cp, &node)?;
        let live = api_pods_not_terminal(&cp, &node)?;
        let local = local_api_pods(&p);
        (live.is_subset(&local) && local.is_subset(&want)).then_some(want)
    });
    assert!(want.iter().any(|(n, _)| n == "steady"));
    wait_until("the cache holds exactly the API's pods", LONG, || {
        let entries = fs::read_dir(&cache_dir)
            .ok()?
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".entry"))
            .count();
        (entries == want.len()).then_some(())
    });
    // The running pod survived every kill: adopted each time, never
    // restarted.
    assert_eq!(runc_state(&c, &steady).as_deref(), Some("running"));
    assert_eq!(
        container_id(&cp, "steady").as_deref(),
        Some(steady.as_str())
    );
}

/// A pod bound to `node` with extra spec lines (indented two spaces).
fn pod_with(name: &str, node: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  nodeName: {node}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 3\n{extra}  containers:\n  - name: main\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"100000\"]\n"
    )
}

/// Waits for the pod to be Failed in the API with `reason`; returns it.
fn wait_failed(cp: &ControlPlane, name: &str, reason: &str) -> Value {
    let pod = wait_until(&format!("pod {name} Failed in the API"), LONG, || {
        let pod = get(cp, &["pod", name, "-n", "default"])?;
        (pod["status"]["phase"] == "Failed").then_some(pod)
    });
    assert_eq!(pod["status"]["reason"], reason, "{pod}");
    assert!(
        pod["status"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Pod was rejected: ")),
        "{pod}"
    );
    pod
}

#[test]
fn labels_and_taints_set_with_kubectl_reach_admission_and_refused_pods_are_failed_in_the_api() {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let p = Picolet::start_with_args(&c, "", |p| {
        let kubeconfig = cp.node_kubeconfig(p.hostname());
        vec!["--kubeconfig".to_string(), kubeconfig.display().to_string()]
    });
    let node = p.hostname().to_string();
    let watched = |what: &str| {
        let line = format!("node {node}: the API server says labels ");
        wait_until(&format!("picolet's node watch sees {what}"), LONG, || {
            let log = p.log();
            log.lines()
                .filter(|l| l.contains(&line))
                .any(|l| l.contains(what))
                .then_some(())
        })
    };
    watched(&format!("kubernetes.io/hostname={node}"));

    // Pods the node cannot run, bound to it directly: Failed in the API,
    // with kubelet's reasons, and never started.
    let ssd = "  nodeSelector:\n    disk: ssd\n";
    cp.apply(&pod_with("needs-ssd", &node, ssd));
    let refused = wait_failed(&cp, "needs-ssd", "NodeAffinity");
    assert!(
        refused["status"]["message"]
            .as_str()
            .unwrap()
            .contains("Predicate NodeAffinity failed"),
        "{refused}"
    );
    cp.apply(&pod_with("too-big", &node, "").replace(
        "    command:",
        "    resources:\n      requests:\n        cpu: \"1000\"\n    command:",
    ));
    wait_failed(&cp, "too-big", "OutOfcpu");

    // An admin labels the node: the watch sees it, and a new pod selecting
    // the label is admitted and runs. The pod refused before stays Failed
    // (a refusal is final, as kubelet's).
    cp.kubectl_ok(&["label", "node", &node, "disk=ssd"]);
    watched("disk=ssd");
    cp.apply(&pod_with("on-ssd", &node, ssd));
    wait_running(&cp, "on-ssd");
    let again = get(&cp, &["pod", "needs-ssd", "-n", "default"]).expect("needs-ssd");
    assert_eq!(again["status"]["phase"], "Failed");

    // An admin taints the node NoExecute: a new pod without a toleration
    // is refused with TaintToleration; one that tolerates it runs. (kubelet
    // does not evict for taints; the running pod stays.)
    cp.kubectl_ok(&[
        "taint",
        "node",
        &node,
        "example.com/quarantine=yes:NoExecute",
    ]);
    watched("example.com/quarantine=yes:NoExecute");
    cp.apply(&pod_with("untolerated", &node, ""));
    wait_failed(&cp, "untolerated", "TaintToleration");
    cp.apply(&pod_with(
        "tolerating",
        &node,
        "  tolerations:\n  - key: example.com/quarantine\n    operator: Exists\n    effect: NoExecute\n",
    ));
    wait_running(&cp, "tolerating");
    let on_ssd = get(&cp, &["pod", "on-ssd", "-n", "default"]).expect("on-ssd");
    assert_eq!(on_ssd["status"]["phase"], "Running");

    // A refused pod deleted with kubectl never ran: picolet finishes its
    // deletion at once (it does not hang in Terminating).
    cp.kubectl_ok(&[
        "delete",
        "pod",
        "needs-ssd",
        "-n",
        "default",
        "--wait=false",
    ]);
    wait_until("the refused pod's deletion completes", LONG, || {
        get(&cp, &["pod", "needs-ssd", "-n", "default"])
            .is_none()
            .then_some(())
    });

    // The node watch is a watch (a list or streaming list, then watches),
    // not polling: only a handful of requests for the Node collection.
    let node_lists = cp
        .requests_by(&format!("system:node:{node}"))
        .iter()
        .filter(|r| r.uri.starts_with("/api/v1/nodes?") && r.verb == "list")
        .count();
    assert!(
        node_lists <= 1,
        "the Node is watched, not listed again: {node_lists} LISTs"
    );
}
