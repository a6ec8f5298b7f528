//! `make conformance` (issue #27): Kubernetes' own node conformance tests
//! (`e2e.test`, focus `[NodeConformance]`) against a cluster whose only
//! node is picolet, or upstream kubelet as the reference.
//!
//! On the integration tests' harness (tests/harness), like `make
//! demo-cluster`: etcd, kube-apiserver, kube-controller-manager and
//! kube-scheduler, a private container runtime (containerd, or CRI-O with
//! `PICOLET_TEST_RUNTIME=crio`) with the suite's images built locally
//! (tests/images/build-images.sh: agnhost, busybox, nonroot and nonewprivs under the
//! names `e2e.test --list-images` gives; no registry is reachable), and the
//! node (node.rs). Then `ginkgo --procs=N ... e2e.test --
//! --provider=skeleton`, a JUnit report, and one `PASS|FAIL|SKIP name` line
//! per selected test (junit.rs) with the counts. Everything is torn down at
//! the end, also on Ctrl-C.
//!
//! Environment (the Makefile sets it from `CONFORMANCE_*`):
//! - `CONFORMANCE_NODE`: `picolet` (default) or `kubelet`.
//! - `CONFORMANCE_FOCUS`, `CONFORMANCE_SKIP`: ginkgo regexes (defaults:
//!   [`DEFAULT_FOCUS`], [`DEFAULT_SKIP`]).
//! - `CONFORMANCE_FOCUS_FILE`: a file of focus regexes, one a line (`#`
//!   comments), joined with `|`: how `make conformance-ci` names its
//!   subset (ci-focus.txt). `CONFORMANCE_FOCUS` wins when both are set.
//! - `CONFORMANCE_PROCS`: ginkgo's parallel processes (default 2).
//! - `CONFORMANCE_OUT`: where the report, ginkgo's output and the node's
//!   log are kept (default `target/conformance/<node>`).
//!
//! A failure listed in known-failures.txt (known.rs) is printed with its
//! cause and does not fail the run; any other does. A listed test that
//! passed is printed as such, for the list to be trimmed.
//!
//! The binaries (e2e.test, ginkgo, agnhost, kubelet) are found like the
//! control plane's: `$KUBE_ASSETS`, or `../shared/kube`.
//!
//! Without kube-proxy and cluster DNS, tests that need Services or DNS fail
//! whichever node runs: compare with `CONFORMANCE_NODE=kubelet` to tell a
//! harness limit from a picolet bug.
//!
//! Ctrl-C: as in examples/demo_cluster, a supervisor re-runs itself as a
//! worker in its own process group and forwards one SIGINT to it; the worker
//! stops ginkgo and drops the node, the runtime and the control plane.

#[path = "../../tests/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

mod junit;
mod known;
mod node;

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use harness::kube::{assets, free_port, host_ip, ControlPlane};
use harness::runtime::ContainerRuntime;
use harness::{poll_until, signal, wait_child};
use junit::Outcome;
use node::{Node, NodeKind};

/// The node's name in the cluster.
const NODE_NAME: &str = "conformance-node";

/// Kubernetes' node conformance tests.
pub const DEFAULT_FOCUS: &str = r"\[NodeConformance\]";
/// Left out: tests that must run alone or are slow, disruptive or flaky,
/// feature-gated ones (`[Feature:...]`) and Windows ones.
pub const DEFAULT_SKIP: &str =
    r"\[Serial\]|\[Slow\]|\[Disruptive\]|\[Flaky\]|\[Feature:[^\]]+\]|\[sig-windows\]|\[Windows\]";

/// The suite's images built here (tests/images/build-images.sh).
const E2E_IMAGES: [&str; 5] = [
    "agnhost",
    "e2e-busybox",
    "nonroot",
    "nonewprivs",
    "e2e-pause",
];

const WORKER_ENV: &str = "PICOLET_CONFORMANCE_WORKER";
static STOP: AtomicBool = AtomicBool::new(false);

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

fn say(what: &str) {
    println!("\n== conformance: {what}");
}

struct Options {
    node: NodeKind,
    focus: String,
    skip: String,
    procs: u32,
    out: PathBuf,
}

impl Options {
    fn from_env() -> Options {
        let node = env_or("CONFORMANCE_NODE", "picolet");
        let node = NodeKind::parse(&node).unwrap_or_else(|| {
            eprintln!("CONFORMANCE_NODE={node}: expected picolet or kubelet");
            std::process::exit(2)
        });
        let procs = env_or("CONFORMANCE_PROCS", "2");
        let procs = procs.parse().ok().filter(|n| *n > 0).unwrap_or_else(|| {
            eprintln!("CONFORMANCE_PROCS={procs}: expected a positive number");
            std::process::exit(2)
        });
        let out = std::env::var_os("CONFORMANCE_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("target/conformance")
                    .join(node.name())
            });
        let focus_file = std::env::var_os("CONFORMANCE_FOCUS_FILE").map(|f| {
            let text = fs::read_to_string(&f).unwrap_or_else(|e| {
                eprintln!("CONFORMANCE_FOCUS_FILE={}: {e}", Path::new(&f).display());
                std::process::exit(2)
            });
            focus_from_lines(&text)
        });
        Options {
            node,
            focus: env_or(
                "CONFORMANCE_FOCUS",
                focus_file.as_deref().unwrap_or(DEFAULT_FOCUS),
            ),
            skip: env_or("CONFORMANCE_SKIP", DEFAULT_SKIP),
            procs,
            out,
        }
    }
}

/// The non-comment, non-empty lines of a focus file, joined with `|`.
fn focus_from_lines(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("|")
}

/// Runs ginkgo with e2e.test against the cluster; its output goes to the
/// terminal and to `out/ginkgo.log`. Returns false if interrupted.
fn run_suite(opts: &Options, cp: &ControlPlane) -> bool {
    let ginkgo = assets::binary("ginkgo");
    let e2e = assets::binary("e2e.test");
    let kubectl = assets::binary("kubectl");
    let path = format!(
        "{}:{}",
        kubectl.parent().expect("kubectl's folder").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let log = fs::File::create(opts.out.join("ginkgo.log")).expect("ginkgo log");
    let mut cmd = Command::new(&ginkgo);
    cmd.arg(format!("--procs={}", opts.procs))
        .arg(format!("--focus={}", opts.focus))
        .arg(format!("--skip={}", opts.skip))
        .arg("--no-color")
        .arg("--timeout=3h")
        .arg(format!("--output-dir={}", opts.out.display()))
        .arg("--junit-report=junit.xml")
        .arg(&e2e)
        .arg("--")
        .arg(format!("--kubeconfig={}", cp.admin_kubeconfig().display()))
        .arg("--provider=skeleton")
        .arg(format!("--kubectl-path={}", kubectl.display()))
        .arg(format!("--report-dir={}", opts.out.display()))
        .env("KUBECONFIG", cp.admin_kubeconfig())
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log fd"))
        .stderr(log)
        .process_group(0);
    println!("$ {cmd:?}");
    println!(
        "(ginkgo's output: {})",
        opts.out.join("ginkgo.log").display()
    );
    let mut child = cmd.spawn().expect("spawning ginkgo");
    loop {
        if wait_child(&mut child, Duration::from_secs(1)).is_some() {
            return true;
        }
        if STOP.load(Ordering::SeqCst) {
            // ginkgo and its e2e.test processes: its whole group.
            signal(child.id(), "INT");
            let _ = rustix::process::kill_process_group(
                rustix::process::Pid::from_raw(child.id() as i32).expect("ginkgo pid"),
                rustix::process::Signal::INT,
            );
            if wait_child(&mut child, Duration::from_secs(30)).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
            return false;
        }
    }
}

/// Prints one line per selected test and the counts; returns the number of
/// failures not in known-failures.txt (or 1 if there is no report).
fn report(opts: &Options) -> usize {
    let path = opts.out.join("junit.xml");
    let Ok(xml) = fs::read_to_string(&path) else {
        println!("no report at {}: see ginkgo.log", path.display());
        return 1;
    };
    let known = known::parse(include_str!("known-failures.txt"))
        .unwrap_or_else(|e| panic!("examples/conformance/known-failures.txt: {e}"));
    let cases = junit::cases(&xml);
    say(&format!("results with {} as the node", opts.node.name()));
    let mut unexplained = Vec::new();
    let mut fixed = Vec::new();
    for c in &cases {
        let k = known::explain(&known, opts.node, &c.name);
        match (c.outcome, k) {
            (Outcome::Pass, None) => println!("PASS {}", c.name),
            (Outcome::Pass, Some(_)) => {
                println!("PASS {}  -- listed as a known failure", c.name);
                fixed.push(&c.name);
            }
            (Outcome::Fail, Some(k)) => println!(
                "FAIL {}  -- known ({}): {}",
                c.name,
                if k.harness { "harness" } else { "picolet" },
                k.cause
            ),
            (Outcome::Fail, None) => {
                println!("FAIL {}  -- {}", c.name, c.message);
                unexplained.push(&c.name);
            }
            (Outcome::Skip, _) => println!("SKIP {}  -- {}", c.name, c.message),
        }
    }
    let (pass, fail, skip) = (
        junit::count(&cases, Outcome::Pass),
        junit::count(&cases, Outcome::Fail),
        junit::count(&cases, Outcome::Skip),
    );
    println!(
        "\nconformance ({}): {pass} passed, {fail} failed, {skip} skipped, of {}",
        opts.node.name(),
        cases.len()
    );
    println!("JUnit report: {}", path.display());
    for name in &fixed {
        println!("passes now, remove it from examples/conformance/known-failures.txt: {name}");
    }
    if fail > 0 {
        println!(
            "{} of the {fail} failures are not in examples/conformance/known-failures.txt",
            unexplained.len()
        );
    }
    unexplained.len()
}

fn main() {
    if std::env::var_os(WORKER_ENV).is_none() {
        harness::supervisor::supervise(WORKER_ENV, "conformance");
    }
    harness::supervisor::on_signals(|| STOP.store(true, Ordering::SeqCst));
    let opts = Options::from_env();
    fs::create_dir_all(&opts.out).expect("creating the output folder");
    let _ = fs::remove_file(opts.out.join("junit.xml"));
    let began = Instant::now();

    say("unpacking e2e.test, ginkgo and agnhost; building the suite's images");
    for b in ["e2e.test", "ginkgo", "kubectl"] {
        assets::binary(b);
    }
    // build-images.sh reads the agnhost binary from $AGNHOST.
    std::env::set_var("AGNHOST", assets::binary("agnhost"));

    say("starting etcd, kube-apiserver, kube-controller-manager and kube-scheduler");
    let cp = ControlPlane::builder()
        .with_controller_manager()
        .with_scheduler()
        .start();
    say("starting a private container runtime with the suite's images");
    let runtime = ContainerRuntime::start();
    for image in E2E_IMAGES {
        runtime.import_test_image(image);
    }
    let ip = host_ip();
    let port = free_port();
    say(&format!(
        "joining {} as node {NODE_NAME} (node API on {ip}:{port})",
        opts.node.name()
    ));
    let node = Node::start(opts.node, NODE_NAME, &cp, &runtime, ip, port);
    let ready = poll_until(Duration::from_secs(180), || {
        if STOP.load(Ordering::SeqCst) {
            return Some(false);
        }
        let n = cp.get_json(&["node", NODE_NAME])?;
        n["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
            .then_some(true)
    });
    let mut failures = 1;
    match ready {
        Some(true) => {
            // The suite's namespaces need their `default` ServiceAccount;
            // the controller manager creates it, for `default` first.
            poll_until(Duration::from_secs(120), || {
                cp.kubectl(&["get", "serviceaccount", "default"])
                    .status
                    .success()
                    .then_some(())
            });
            say(&format!(
                "running e2e.test: focus {} skip {} procs {}",
                opts.focus, opts.skip, opts.procs
            ));
            if run_suite(&opts, &cp) {
                failures = report(&opts);
            } else {
                say("interrupted");
            }
        }
        Some(false) => say("interrupted"),
        None => say(&format!(
            "the node did not become Ready in 180 s; its log: {}",
            node.log_path().display()
        )),
    }
    let _ = fs::copy(
        node.log_path(),
        opts.out.join(format!("{}.log", opts.node.name())),
    );
    say("tearing down");
    drop(node);
    drop(runtime);
    drop(cp);
    println!(
        "conformance: done in {}s; node log kept at {}",
        began.elapsed().as_secs(),
        opts.out.join(format!("{}.log", opts.node.name())).display()
    );
    std::process::exit(if failures == 0 { 0 } else { 1 });
}
