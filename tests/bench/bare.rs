//! The floor of the start-latency table: a bare CRI client, written for the
//! bench only (it is not a product). It starts N pods the way a kubelet
//! must at the least, RunPodSandbox → CreateContainer → StartContainer per
//! pod, with at most [`IN_FLIGHT`] calls in flight, and nothing else: no
//! observation, no status, no image check. The sandbox and container
//! configs carry what the bench's manifests ask for (busybox, `sleep`,
//! requests of 10m CPU and 4Mi, a pod cgroup under the burstable QoS
//! cgroup, a log directory and log path, kubelet's labels), so the runtime
//! does the same work for it as for picolet and kubelet.

use std::cell::Cell;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use picolet::cri::{api, Runtime};

/// Calls in flight at once (each of 8 lanes runs one pod's calls in turn).
pub const IN_FLIGHT: usize = 8;

/// kubelet's labels on sandboxes and containers (the observer matches them).
fn labels(name: &str, uid: &str, container: Option<&str>) -> HashMap<String, String> {
    let mut l = HashMap::from([
        ("io.kubernetes.pod.name".to_string(), name.to_string()),
        (
            "io.kubernetes.pod.namespace".to_string(),
            "default".to_string(),
        ),
        ("io.kubernetes.pod.uid".to_string(), uid.to_string()),
    ]);
    if let Some(c) = container {
        l.insert("io.kubernetes.container.name".into(), c.into());
    }
    l
}

fn sandbox_config(i: usize, logs: &Path, cgroup_root: &str) -> api::PodSandboxConfig {
    let name = format!("bench-{i}");
    let uid = format!("bare-{}-{i}", std::process::id());
    let log_directory = logs.join(format!("default_{name}_{uid}"));
    std::fs::create_dir_all(log_directory.join("main")).expect("bare client log dir");
    api::PodSandboxConfig {
        metadata: Some(api::PodSandboxMetadata {
            name: name.clone(),
            uid: uid.clone(),
            namespace: "default".into(),
            attempt: 0,
        }),
        hostname: name.clone(),
        log_directory: log_directory.display().to_string(),
        labels: labels(&name, &uid, None),
        linux: Some(api::LinuxPodSandboxConfig {
            cgroup_parent: format!("{cgroup_root}/burstable/pod{uid}"),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn container_config(sandbox: &api::PodSandboxConfig) -> api::ContainerConfig {
    let md = sandbox.metadata.clone().unwrap_or_default();
    api::ContainerConfig {
        metadata: Some(api::ContainerMetadata {
            name: "main".into(),
            attempt: 0,
        }),
        image: Some(api::ImageSpec {
            image: "docker.io/library/busybox:latest".into(),
            user_specified_image: "busybox".into(),
            ..Default::default()
        }),
        command: vec!["sleep".into(), "1000000".into()],
        labels: labels(&md.name, &md.uid, Some("main")),
        log_path: "main/0.log".into(),
        linux: Some(api::LinuxContainerConfig {
            resources: Some(api::LinuxContainerResources {
                cpu_period: 100_000,
                cpu_shares: 10, // 10m
                oom_score_adj: 999,
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn start_pod(rt: &Runtime, i: usize, logs: &Path, cgroup_root: &str) {
    let config = sandbox_config(i, logs, cgroup_root);
    let sandbox = rt
        .run_pod_sandbox(api::RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: String::new(),
        })
        .await
        .expect("RunPodSandbox")
        .pod_sandbox_id;
    let id = rt
        .create_container(api::CreateContainerRequest {
            pod_sandbox_id: sandbox,
            config: Some(container_config(&config)),
            sandbox_config: Some(config),
        })
        .await
        .expect("CreateContainer")
        .container_id;
    rt.start_container(api::StartContainerRequest { container_id: id })
        .await
        .expect("StartContainer");
}

/// Starts pods `bench-0..n` on the runtime at `socket`, [`IN_FLIGHT`] at a
/// time; returns when every StartContainer answered.
pub fn start_pods(socket: &Path, n: usize, logs: &Path, cgroup_root: &str) {
    let rt = Runtime::new(socket.to_path_buf(), Duration::from_secs(120));
    let next = Rc::new(Cell::new(0usize));
    picolet::rt::block_on(async {
        let lanes: Vec<_> = (0..IN_FLIGHT)
            .map(|_| {
                let (rt, next) = (rt.clone(), next.clone());
                let (logs, cgroup_root) = (logs.to_path_buf(), cgroup_root.to_string());
                picolet::rt::spawn(async move {
                    loop {
                        let i = next.get();
                        if i >= n {
                            return;
                        }
                        next.set(i + 1);
                        start_pod(&rt, i, &logs, &cgroup_root).await;
                    }
                })
            })
            .collect();
        for lane in lanes {
            lane.await;
        }
    });
}
