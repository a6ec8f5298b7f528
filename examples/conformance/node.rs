//! The node under test in `make conformance`: picolet, or upstream kubelet
//! as the reference (`CONFORMANCE_NODE=kubelet`), joined to the harness's
//! control plane the same way: a `system:node:<name>` client certificate,
//! `--node-ip` the host's address, the node API on that address with
//! clients checked against the cluster CA and requests authorized by the
//! API server (Webhook).
//!
//! picolet is the harness's [`Picolet`]. kubelet runs with the flags that
//! ../shared/kube/README.md found to work on this machine (cgroup v1,
//! swap, no iptables chains, no local-storage isolation), from a temp dir
//! of its own (root dir, serving certificate, pod logs, static pods). Only
//! one of them ever runs on a runtime: each removes the other's containers.

use std::fs::{self, OpenOptions};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::harness::kube::{assets, ControlPlane};
use crate::harness::runtime::{unmount_under, ContainerRuntime};
use crate::harness::{signal, tail, wait_child, Picolet};

/// Which kubelet is the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Picolet,
    Kubelet,
}

impl NodeKind {
    pub fn parse(s: &str) -> Option<NodeKind> {
        match s {
            "picolet" => Some(NodeKind::Picolet),
            "kubelet" => Some(NodeKind::Kubelet),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Picolet => "picolet",
            NodeKind::Kubelet => "kubelet",
        }
    }
}

/// A running node; dropping it stops the process (the runtime, dropped
/// after it, removes the containers).
pub enum Node {
    Picolet(Picolet),
    Kubelet(Kubelet),
}

impl Node {
    /// Starts `kind` as node `name` against `runtime`, serving its node API
    /// on `ip:port`.
    pub fn start(
        kind: NodeKind,
        name: &str,
        cp: &ControlPlane,
        runtime: &ContainerRuntime,
        ip: IpAddr,
        port: u16,
    ) -> Node {
        match kind {
            NodeKind::Picolet => {
                let config = cp.node_api_config(ip, port, 0, "");
                Node::Picolet(Picolet::start_named(runtime, Some(name), &config, |p| {
                    cp.join_args(p.hostname(), ip)
                }))
            }
            NodeKind::Kubelet => Node::Kubelet(Kubelet::start(name, cp, runtime, ip, port)),
        }
    }

    /// The node's own log file.
    pub fn log_path(&self) -> PathBuf {
        match self {
            Node::Picolet(p) => p.log_path(),
            Node::Kubelet(k) => k.log_path(),
        }
    }
}

/// Upstream kubelet as a node.
pub struct Kubelet {
    dir: TempDir,
    child: Option<Child>,
}

impl Kubelet {
    fn start(
        name: &str,
        cp: &ControlPlane,
        runtime: &ContainerRuntime,
        ip: IpAddr,
        port: u16,
    ) -> Kubelet {
        let bin = assets::binary("kubelet");
        let dir = tempfile::Builder::new()
            .prefix("picolet-conformance-kubelet.")
            .tempdir()
            .expect("temp dir for kubelet");
        let d = dir.path();
        for sub in ["root", "logs", "manifests", "certs"] {
            fs::create_dir_all(d.join(sub)).expect("kubelet dirs");
        }
        // kubelet's pod cgroups (cgroupsPerQOS under the default root "/"):
        // removed with the runtime's.
        runtime.adopt_cgroup_root("/kubepods");
        runtime.adopt_picolet_dir(d);
        let config = format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\n\
             kind: KubeletConfiguration\n\
             containerRuntimeEndpoint: {endpoint}\n\
             staticPodPath: {manifests}\n\
             podLogsDir: {logs}\n\
             address: {ip}\n\
             port: {port}\n\
             readOnlyPort: 0\n\
             healthzPort: 0\n\
             failSwapOn: false\n\
             failCgroupV1: false\n\
             cgroupDriver: cgroupfs\n\
             makeIPTablesUtilChains: false\n\
             protectKernelDefaults: false\n\
             localStorageCapacityIsolation: false\n\
             evictionHard: {{memory.available: 100Mi, nodefs.available: 1Gi, imagefs.available: 1Gi}}\n\
             imageGCHighThresholdPercent: 100\n\
             authentication:\n  anonymous:\n    enabled: false\n  x509:\n    clientCAFile: {ca}\n  webhook:\n    enabled: true\n\
             authorization:\n  mode: Webhook\n",
            endpoint = runtime.endpoint(),
            manifests = d.join("manifests").display(),
            logs = d.join("logs").display(),
            ca = cp.ca_cert().display(),
        );
        let config_path = d.join("kubelet.yaml");
        fs::write(&config_path, config).expect("writing the kubelet config");
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("kubelet.log"))
            .expect("kubelet log file");
        let child = Command::new(&bin)
            .arg(format!("--config={}", config_path.display()))
            .arg(format!(
                "--kubeconfig={}",
                cp.node_kubeconfig(name).display()
            ))
            .arg(format!("--node-ip={ip}"))
            .arg(format!("--hostname-override={name}"))
            .arg(format!("--root-dir={}", d.join("root").display()))
            .arg(format!("--cert-dir={}", d.join("certs").display()))
            .arg("--v=2")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {}: {e}", bin.display()));
        Kubelet {
            dir,
            child: Some(child),
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("kubelet.log")
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(child.id(), "TERM");
            if wait_child(&mut child, Duration::from_secs(20)).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            eprintln!("--- kubelet log tail ---\n{}", tail(&self.log_path(), 30));
        }
        // Volumes (secrets, configmaps, emptyDir tmpfs) are mounted under
        // the root dir.
        unmount_under(self.root());
    }
}
