//! Unit tests of `pod::spec`: the sandbox (and DNS, hosts) in `sandbox.rs`,
//! containers in `container.rs` (labels, annotations, hash) and by subject
//! in `container_env.rs`, `container_mounts.rs`, `container_resources.rs`
//! and `container_security.rs`, env from ConfigMaps and Secrets in
//! `config_env.rs`, resourceFieldRef against the
//! node's allocatable in `downward.rs`, tmpfs sizes in `memory_volumes.rs`,
//! the Service variables in `service_env.rs`;
//! shared pods and parameters here.

pub(super) use std::path::{Path, PathBuf};

pub(super) use k8s_openapi::api::core::v1::{Container, Pod};

pub(super) use super::*;
pub(super) use crate::cri::api;
pub(super) use crate::pod::labels::*;

mod config_env;
mod container;
mod container_env;
mod container_mounts;
mod container_resources;
mod container_security;
mod downward;
mod memory_volumes;
mod sandbox;
mod service_env;

pub(super) fn pod(yaml: &str) -> Pod {
    serde_yaml_ng::from_str(yaml).expect("test pod parses")
}

pub(super) const BASIC: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: edge
  uid: 1234-abcd
  labels: {app: web}
  annotations: {kubernetes.io/config.source: file}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: app
    image: nginx:1.27
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
"#;

pub(super) fn sandbox_params<'a>(dns: &'a [String], resolv: Option<&'a str>) -> SandboxParams<'a> {
    SandboxParams {
        attempt: 2,
        cgroup_parent: "/kubepods/burstable/pod1234-abcd",
        pod_logs_dir: Path::new("/var/log/pods"),
        cluster_dns: dns,
        cluster_domain: "cluster.local",
        host_resolv_conf: resolv,
        user_ns: None,
        seen_unix_nanos: 1_700_000_000_012_345_678,
    }
}

pub(super) const HOST_RESOLV: &str = "# generated\nnameserver 192.168.1.1\nnameserver 8.8.8.8\nsearch lan. example.com\noptions edns0 ndots:2\n";

pub(super) fn first(pod: &Pod) -> &Container {
    &pod.spec.as_ref().unwrap().containers[0]
}

/// The node's IPs in [`params`]: dual-stack.
pub(super) static HOST_IPS: std::sync::LazyLock<Vec<String>> =
    std::sync::LazyLock::new(|| vec!["192.168.1.10".into(), "fd00::10".into()]);

pub(super) fn params() -> ContainerParams<'static> {
    ContainerParams {
        image: "sha256:deadbeef",
        pod_ip: "10.0.0.5",
        pod_ips: &[],
        host_ips: &HOST_IPS,
        ..Default::default()
    }
}

pub(super) fn env_of(cfg: &api::ContainerConfig, key: &str) -> Option<String> {
    cfg.envs
        .iter()
        .find(|kv| kv.key == key)
        .map(|kv| kv.value.clone())
}
