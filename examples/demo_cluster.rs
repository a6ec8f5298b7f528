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

#[path = "../tests/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

use std::time::Duration;

use harness::kube::ControlPlane;
use harness::runtime::ContainerRuntime;
use harness::{wait_until, Picolet};

const LONG: Duration = Duration::from_secs(180);

fn say(what: &str) {
    println!("\n== {what}");
}

fn show(cp: &ControlPlane, args: &[&str]) {
    let out = cp.kubectl(args);
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
}

fn main() {
    say("starting etcd, kube-apiserver, kube-controller-manager and kube-scheduler");
    let cp = ControlPlane::builder()
        .with_controller_manager()
        .with_scheduler()
        .start();
    println!(
        "API server {} (admin kubeconfig {})",
        cp.apiserver_url(),
        cp.admin_kubeconfig().display()
    );

    say("starting a private container runtime and joining picolet as a node");
    let runtime = ContainerRuntime::start();
    let picolet = Picolet::start_with_args(&runtime, "", |p| {
        vec![
            "--kubeconfig".into(),
            cp.node_kubeconfig(p.hostname()).display().to_string(),
            "--node-labels".into(),
            "example.com/board=demo".into(),
        ]
    });
    let node = picolet.hostname().to_string();
    println!("picolet log: {}", picolet.log_path().display());
    wait_until("the node is Ready", LONG, || {
        let out = cp.kubectl(&[
            "get",
            "node",
            &node,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        (String::from_utf8_lossy(&out.stdout) == "True").then_some(())
    });
    show(&cp, &["get", "nodes", "-o", "wide"]);

    say("kubectl create deployment hello --image=busybox --replicas=2");
    // The demo has no service-account token volumes (they come with the
    // ConfigMap and Secret work): its namespace's default account does
    // not mount one.
    wait_until("the default service account exists", LONG, || {
        cp.kubectl(&["get", "serviceaccount", "default"])
            .status
            .success()
            .then_some(())
    });
    cp.kubectl_ok(&[
        "patch",
        "serviceaccount",
        "default",
        "-p",
        "{\"automountServiceAccountToken\": false}",
    ]);
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
    ]);
    picolet.write_manifest(
        "edge-agent",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: edge-agent\n  namespace: default\nspec:\n  containers:\n  - name: agent\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"3600\"]\n",
    );
    wait_until(
        "the deployment's pods and the mirror pod are Running",
        LONG,
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
    );
    show(&cp, &["get", "pods", "-o", "wide"]);
    say("picolet get pods (over the admin socket, works without the API server too)");
    let out = std::process::Command::new(harness::picolet_bin())
        .args(["get", "pods", "--admin-socket"])
        .arg(picolet.admin_socket())
        .output()
        .expect("picolet get pods");
    print!("{}", String::from_utf8_lossy(&out.stdout));

    println!(
        "\nTry: KUBECONFIG={} {} get nodes,pods -o wide",
        cp.admin_kubeconfig().display(),
        harness::kube::assets::binary("kubectl").display()
    );
    if std::env::var("DEMO_WAIT").as_deref() != Ok("0") {
        println!("Ctrl-C stops the demo and removes everything.");
        let signals =
            async_signal::Signals::new([async_signal::Signal::Int, async_signal::Signal::Term])
                .expect("signal handlers");
        smol::block_on(async {
            use smol::stream::StreamExt;
            let mut signals = signals;
            signals.next().await;
        });
    }
    say("cleaning up");
    cp.kubectl(&["delete", "deployment", "hello", "--wait=false"]);
    drop(picolet);
    drop(runtime);
    drop(cp);
}
