//! `make demo-cluster`: picolet as a node of a real Kubernetes cluster, on
//! this machine, with nothing mocked.
//!
//! Starts etcd, kube-apiserver (Node,RBAC authorization, NodeRestriction),
//! kube-controller-manager and kube-scheduler from the Kubernetes binaries
//! (`$KUBE_ASSETS`, or `../shared/kube` beside the repo), a private
//! containerd (or CRI-O with `PICOLET_TEST_RUNTIME=crio`), and the release
//! picolet joined as a node with a `system:node:<name>` client
//! certificate. Then, with the real `kubectl`: the node becomes Ready, a
//! `kubectl create deployment` is scheduled onto it and runs, and a static
//! pod shows up as a mirror pod. Everything stops and is removed on Ctrl-C
//! (or at once with `DEMO_WAIT=0`).
//!
//! It reuses the integration tests' harness (tests/harness), so the demo
//! and the tests start the cluster the same way.
//!
//! Ctrl-C: the terminal sends SIGINT to its whole foreground process group,
//! which would hit containerd and picolet mid-demo and leave the pods'
//! containers and mounts behind. So the demo runs in two processes: the one
//! `make` starts is a supervisor that re-runs itself as a worker in a
//! process group of its own, and on SIGINT or SIGTERM forwards one SIGINT
//! to the worker alone, then waits for it. The worker notices the signal at
//! its next wait, at any step, and drops what it started in reverse order
//! (picolet, the runtime with its containers, mounts, network and cgroups,
//! then the control plane), so nothing outlives the demo.

#[path = "../tests/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use harness::kube::ControlPlane;
use harness::runtime::ContainerRuntime;
use harness::{poll_until, Picolet};

const LONG: Duration = Duration::from_secs(180);
/// Set in the worker's environment by the supervisor.
const WORKER_ENV: &str = "PICOLET_DEMO_CLUSTER_WORKER";

/// Set once the worker got SIGINT or SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);

/// The demo was interrupted (Ctrl-C): unwind and clean up.
struct Interrupted;

fn say(what: &str) {
    println!("\n== {what}");
}

fn show(cp: &ControlPlane, args: &[&str]) {
    println!("$ kubectl {}", args.join(" "));
    let out = cp.kubectl(args);
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
}

fn check() -> Result<(), Interrupted> {
    if STOP.load(Ordering::SeqCst) {
        Err(Interrupted)
    } else {
        Ok(())
    }
}

/// Polls `f` until it returns `Some`, like the harness's `wait_until`, but
/// gives up at once when the demo is interrupted.
fn wait<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> Result<T, Interrupted> {
    let got = poll_until(LONG, || {
        if STOP.load(Ordering::SeqCst) {
            return Some(None);
        }
        f().map(Some)
    });
    match got {
        Some(Some(v)) => Ok(v),
        Some(None) => Err(Interrupted),
        None => panic!("timed out after {LONG:?} waiting for {what}"),
    }
}

/// Waits for SIGINT or SIGTERM on a thread of its own and runs `on_signal`
/// for each.
fn on_signals(on_signal: impl Fn() + Send + 'static) {
    let mut signals =
        async_signal::Signals::new([async_signal::Signal::Int, async_signal::Signal::Term])
            .expect("signal handlers");
    std::thread::spawn(move || {
        smol::block_on(async {
            use smol::stream::StreamExt;
            while signals.next().await.is_some() {
                on_signal();
            }
        })
    });
}

/// The process `make` started: runs the worker in its own process group,
/// forwards Ctrl-C to it alone, and exits as it does.
fn supervise() -> ! {
    let me = std::env::current_exe().expect("the demo's own path");
    let mut worker = Command::new(me)
        .env(WORKER_ENV, "1")
        .process_group(0)
        .spawn()
        .expect("starting the demo worker");
    let pid = rustix::process::Pid::from_raw(worker.id() as i32).expect("worker pid");
    on_signals(move || {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
    });
    let status = worker.wait().expect("waiting for the demo worker");
    std::process::exit(status.code().unwrap_or(1));
}

fn main() {
    if std::env::var_os(WORKER_ENV).is_none() {
        supervise();
    }
    on_signals(|| STOP.store(true, Ordering::SeqCst));
    let mut started = Started::default();
    if demo(&mut started).is_err() {
        println!("\n== interrupted");
    }
    drop(started);
    println!("done: every process, container and mount the demo started is gone");
}

/// What the demo has started so far, stopped in reverse order when dropped.
#[derive(Default)]
struct Started {
    cp: Option<ControlPlane>,
    runtime: Option<ContainerRuntime>,
    picolet: Option<Picolet>,
}

/// Also when the demo panics (a step timed out): unwinding drops it.
impl Drop for Started {
    fn drop(&mut self) {
        say("cleaning up");
        if let Some(cp) = &self.cp {
            cp.kubectl(&["delete", "deployment", "hello", "--wait=false"]);
        }
        // Reverse order of start: picolet, the runtime (its containers,
        // mounts, network and cgroups), then the control plane.
        drop(self.picolet.take());
        drop(self.runtime.take());
        drop(self.cp.take());
    }
}

fn demo(started: &mut Started) -> Result<(), Interrupted> {
    say("starting etcd, kube-apiserver, kube-controller-manager and kube-scheduler");
    let cp: &ControlPlane = started.cp.insert(
        ControlPlane::builder()
            .with_controller_manager()
            .with_scheduler()
            .start(),
    );
    println!(
        "API server {} (admin kubeconfig {})",
        cp.apiserver_url(),
        cp.admin_kubeconfig().display()
    );
    check()?;

    say("starting a private container runtime");
    let runtime: &ContainerRuntime = started.runtime.insert(ContainerRuntime::start());
    println!("runtime dir: {}", runtime.dir().display());
    check()?;

    say("joining picolet as a node (--kubeconfig with a system:node:<name> certificate)");
    let picolet: &Picolet = started
        .picolet
        .insert(Picolet::start_with_args(runtime, "", |p| {
            vec![
                "--kubeconfig".into(),
                cp.node_kubeconfig(p.hostname()).display().to_string(),
                "--node-labels".into(),
                "example.com/board=demo".into(),
            ]
        }));
    let node = picolet.hostname().to_string();
    println!("picolet log: {}", picolet.log_path().display());
    wait("the node is Ready", || {
        let out = cp.kubectl(&[
            "get",
            "node",
            &node,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        (String::from_utf8_lossy(&out.stdout) == "True").then_some(())
    })?;
    show(cp, &["get", "nodes", "-o", "wide"]);

    say("kubectl create deployment hello --image=busybox --replicas=2");
    // The pods mount their service account's token (kube-api-access-*),
    // which the ServiceAccount admission plugin needs to exist.
    wait("the default service account exists", || {
        cp.kubectl(&["get", "serviceaccount", "default"])
            .status
            .success()
            .then_some(())
    })?;
    print!(
        "{}",
        cp.kubectl_ok(&[
            "create",
            "deployment",
            "hello",
            "--image=busybox",
            "--replicas=2",
            "--",
            "sh",
            "-c",
            "while true; do echo hello from $(hostname); sleep 5; done",
        ])
    );
    say("a static pod (edge-agent) in picolet's staticPodPath: its mirror pod appears in the API");
    picolet.write_manifest(
        "edge-agent",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: edge-agent\n  namespace: default\nspec:\n  containers:\n  - name: agent\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"3600\"]\n",
    );
    wait(
        "the deployment's pods and the mirror pod are Running",
        || {
            let out = cp.kubectl(&[
                "get",
                "pods",
                "-o",
                "jsonpath={range .items[*]}{.status.phase}{\"\\n\"}{end}",
            ]);
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            (text.lines().filter(|l| *l == "Running").count() >= 3).then_some(())
        },
    )?;
    wait("the deployment is available", || {
        let out = cp.kubectl(&[
            "get",
            "deployment",
            "hello",
            "-o",
            "jsonpath={.status.availableReplicas}",
        ]);
        (String::from_utf8_lossy(&out.stdout) == "2").then_some(())
    })?;
    show(cp, &["get", "deployment", "hello"]);
    show(cp, &["get", "pods", "-o", "wide"]);
    say("picolet get pods (over the admin socket, works without the API server too)");
    let out = Command::new(harness::picolet_bin())
        .args(["get", "pods", "--admin-socket"])
        .arg(picolet.admin_socket())
        .output()
        .expect("picolet get pods");
    print!("{}", String::from_utf8_lossy(&out.stdout));

    if std::env::var("DEMO_WAIT").as_deref() != Ok("0") {
        println!(
            "\nTry: KUBECONFIG={} {} get nodes,pods -o wide",
            cp.admin_kubeconfig().display(),
            harness::kube::assets::binary("kubectl").display()
        );
        println!("Ctrl-C stops the demo and removes everything.");
        // No deadline: until Ctrl-C.
        while !STOP.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok(())
}
