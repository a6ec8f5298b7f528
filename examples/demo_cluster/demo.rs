//! The steps of `make demo-cluster`, apart from its process handling
//! (main.rs), so that tests/demo_cluster.rs runs exactly this code.
//!
//! A control plane (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler), a private container runtime, and the release picolet
//! joined as the node `picolet-demo` with its node API on: HTTPS on the
//! host's address (the API server refuses to proxy to loopback), clients
//! authenticated by the cluster CA (`authentication.x509.clientCAFile`)
//! and authorized by the API server (`authorization.mode: Webhook`), and
//! `--node-ip` so the Node's InternalIP is that address. The API server has
//! no `--kubelet-certificate-authority` (kubeadm's default), so it takes
//! picolet's self-signed serving certificate. Then `kubectl create
//! deployment`, a static pod's mirror pod, and `kubectl logs` and `kubectl
//! exec` through the API server to the node, their output printed.
//!
//! Both crates that include this file (the example and the test) have the
//! harness at `crate::harness`.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::harness::kube::{free_port, host_ip, ControlPlane};
use crate::harness::runtime::ContainerRuntime;
use crate::harness::{self, poll_until, Picolet};

/// The node's name: one a person would pick. Each demo has a control plane
/// of its own, so it never meets another node of that name.
pub const NODE_NAME: &str = "picolet-demo";

const LONG: Duration = Duration::from_secs(180);

/// The demo was interrupted (Ctrl-C): unwind and clean up.
#[derive(Debug)]
pub struct Interrupted;

/// What the demo showed at the end (the example prints it as it goes; the
/// test reads it).
#[derive(Debug, Default)]
#[cfg_attr(not(test), allow(dead_code))]
pub struct Shown {
    /// What `kubectl logs deployment/hello` printed.
    pub logs: String,
    /// What `kubectl exec deployment/hello -- …` printed.
    pub exec: String,
    /// The commands printed for the user, one shell line each, every one
    /// working while the demo runs.
    pub commands: Vec<String>,
}

/// What the demo has started so far, stopped in reverse order when dropped.
#[derive(Default)]
pub struct Started {
    pub cp: Option<ControlPlane>,
    pub runtime: Option<ContainerRuntime>,
    pub picolet: Option<Picolet>,
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

pub fn say(what: &str) {
    println!("\n== {what}");
}

fn show(cp: &ControlPlane, args: &[&str]) {
    println!("$ kubectl {}", args.join(" "));
    let out = cp.kubectl(args);
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
}

/// The demo's steps; `stop` is set on Ctrl-C.
pub struct Demo<'a> {
    pub stop: &'a AtomicBool,
}

impl Demo<'_> {
    fn check(&self) -> Result<(), Interrupted> {
        if self.stop.load(Ordering::SeqCst) {
            Err(Interrupted)
        } else {
            Ok(())
        }
    }

    /// Polls `f` until it returns `Some`, like the harness's `wait_until`,
    /// but gives up at once when the demo is interrupted. `last` says what
    /// went wrong in the last try, for the panic on timeout.
    fn wait<T>(
        &self,
        what: &str,
        mut f: impl FnMut(&mut String) -> Option<T>,
    ) -> Result<T, Interrupted> {
        let mut last = String::new();
        let got = poll_until(LONG, || {
            if self.stop.load(Ordering::SeqCst) {
                return Some(None);
            }
            f(&mut last).map(Some)
        });
        match got {
            Some(Some(v)) => Ok(v),
            Some(None) => Err(Interrupted),
            None => panic!("timed out after {LONG:?} waiting for {what}; last: {last}"),
        }
    }

    /// `kubectl args` until it succeeds with some output: that output.
    fn kubectl_until(&self, cp: &ControlPlane, args: &[&str]) -> Result<String, Interrupted> {
        let what = format!("kubectl {}", args.join(" "));
        let out = self.wait(&what, |last| {
            let out = cp.kubectl(args);
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            *last = String::from_utf8_lossy(&out.stderr).into_owned();
            (out.status.success() && !stdout.trim().is_empty()).then_some(stdout)
        })?;
        let quoted: Vec<String> = args
            .iter()
            .map(|a| {
                if a.contains(' ') {
                    format!("'{a}'")
                } else {
                    a.to_string()
                }
            })
            .collect();
        println!("$ kubectl {}", quoted.join(" "));
        print!("{out}");
        Ok(out)
    }

    /// Runs the demo up to the point where a person would try it; what it
    /// started is in `started`.
    pub fn run(&self, started: &mut Started) -> Result<Shown, Interrupted> {
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
        self.check()?;

        say("starting a private container runtime");
        let runtime: &ContainerRuntime = started.runtime.insert(ContainerRuntime::start());
        println!("runtime dir: {}", runtime.dir().display());
        self.check()?;

        // The node API, as a cluster's kubelet serves it: on the host's
        // address, clients checked against the cluster CA, each request
        // authorized by the API server (SubjectAccessReview).
        let ip = host_ip();
        let port = free_port();
        let config = cp.node_api_config(ip, port, 0, "");
        say(&format!(
            "joining picolet as node {NODE_NAME} (a system:node:{NODE_NAME} certificate; node API on {ip}:{port})"
        ));
        let picolet: &Picolet = started.picolet.insert(Picolet::start_named(
            runtime,
            Some(NODE_NAME),
            &config,
            |p| {
                let mut args = cp.join_args(p.hostname(), ip);
                args.extend(["--node-labels".into(), "example.com/board=demo".into()]);
                args
            },
        ));
        let node = picolet.hostname().to_string();
        println!("picolet config: {}", picolet.config_path().display());
        println!("picolet log: {}", picolet.log_path().display());
        self.wait("the node is Ready, with its node API's port", |last| {
            let n = cp.get_json(&["node", &node])?;
            *last = n["status"].to_string();
            let ready = n["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            let serving = n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == port;
            (ready && serving).then_some(())
        })?;
        show(cp, &["get", "nodes", "-o", "wide"]);

        say("kubectl create deployment hello --image=busybox --replicas=2");
        // The pods mount their service account's token (kube-api-access-*),
        // which the ServiceAccount admission plugin needs to exist.
        self.wait("the default service account exists", |_| {
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
        self.wait(
            "the deployment's pods and the mirror pod are Running",
            |last| {
                let out = cp.kubectl(&[
                    "get",
                    "pods",
                    "-o",
                    "jsonpath={range .items[*]}{.status.phase}{\"\\n\"}{end}",
                ]);
                *last = String::from_utf8_lossy(&out.stdout).to_string();
                (last.lines().filter(|l| *l == "Running").count() >= 3).then_some(())
            },
        )?;
        self.wait("the deployment is available", |last| {
            let out = cp.kubectl(&[
                "get",
                "deployment",
                "hello",
                "-o",
                "jsonpath={.status.availableReplicas}",
            ]);
            *last = String::from_utf8_lossy(&out.stdout).to_string();
            (last == "2").then_some(())
        })?;
        show(cp, &["get", "deployment", "hello"]);
        show(cp, &["get", "pods", "-o", "wide"]);

        say("kubectl logs and kubectl exec: the API server reaches the node API");
        let logs = self.kubectl_until(cp, &["logs", "deployment/hello", "--tail=3"])?;
        let exec = self.kubectl_until(
            cp,
            &[
                "exec",
                "deployment/hello",
                "--",
                "sh",
                "-c",
                "echo in $(hostname): $(uname -sm)",
            ],
        )?;

        say("picolet get pods (over the admin socket, works without the API server too)");
        let picolet_bin = harness::picolet_bin();
        let out = Command::new(&picolet_bin)
            .args(["get", "pods", "--admin-socket"])
            .arg(picolet.admin_socket())
            .output()
            .expect("picolet get pods");
        print!("{}", String::from_utf8_lossy(&out.stdout));

        let kubectl = format!(
            "KUBECONFIG={} {}",
            cp.admin_kubeconfig().display(),
            harness::kube::assets::binary("kubectl").display()
        );
        let picolet_cmd = format!("{} get", picolet_bin.display());
        let socket = picolet.admin_socket().display().to_string();
        let commands = vec![
            format!("{kubectl} get nodes,pods -o wide"),
            format!("{kubectl} logs deployment/hello"),
            format!("{kubectl} exec deployment/hello -- hostname"),
            format!("{kubectl} exec edge-agent-{node} -- ps"),
            format!("{picolet_cmd} pods --admin-socket {socket}"),
            format!("{picolet_cmd} node --admin-socket {socket}"),
        ];
        say("try it (each line works while the demo runs; as root for the admin socket)");
        for c in &commands {
            println!("{c}");
        }
        Ok(Shown {
            logs,
            exec,
            commands,
        })
    }
}
