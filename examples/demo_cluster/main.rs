//! `make demo-cluster`: picolet as a node of a real Kubernetes cluster, on
//! this machine, with nothing mocked.
//!
//! Starts etcd, kube-apiserver (Node,RBAC authorization, NodeRestriction),
//! kube-controller-manager and kube-scheduler from the Kubernetes binaries
//! (`$KUBE_ASSETS`, or `../shared/kube` beside the repo), a private
//! containerd (or CRI-O with `PICOLET_TEST_RUNTIME=crio`), and the release
//! picolet joined as a node with a `system:node:<name>` client
//! certificate, its node API on (the cluster CA for client certificates,
//! Webhook authorization, `--node-ip`). Then, with the real `kubectl`: the
//! node `picolet-demo` becomes Ready, a `kubectl create deployment` is
//! scheduled onto it and runs, a static pod shows up as a mirror pod, and
//! `kubectl logs` and `kubectl exec` reach the pods through the node API.
//! It prints the kubectl and `picolet get` commands to try. Everything
//! stops and is removed on Ctrl-C (or at once with `DEMO_WAIT=0`).
//!
//! The steps are in demo.rs, which tests/demo_cluster.rs runs too; this
//! file is the process handling around them. It reuses the integration
//! tests' harness (tests/harness), so the demo and the tests start the
//! cluster the same way.
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

#[path = "../../tests/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

mod demo;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use demo::{say, Demo, Started};

/// Set in the worker's environment by the supervisor.
const WORKER_ENV: &str = "PICOLET_DEMO_CLUSTER_WORKER";

/// Set once the worker got SIGINT or SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);

fn main() {
    if std::env::var_os(WORKER_ENV).is_none() {
        harness::supervisor::supervise(WORKER_ENV, "demo");
    }
    harness::supervisor::on_signals(|| STOP.store(true, Ordering::SeqCst));
    let mut started = Started::default();
    match (Demo { stop: &STOP }).run(&mut started) {
        Ok(_) if std::env::var("DEMO_WAIT").as_deref() == Ok("0") => {
            say("DEMO_WAIT=0: stopping now");
        }
        Ok(_) => {
            println!("\nCtrl-C stops the demo and removes everything.");
            // No deadline: until Ctrl-C.
            while !STOP.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        Err(_) => say("interrupted"),
    }
    drop(started);
    println!("done: every process, container and mount the demo started is gone");
}
