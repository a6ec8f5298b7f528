//! What kubelet does, on a real containerd (issue #15): native sidecars,
//! pod-level resources, admission refusals (sysctls, a Windows pod),
//! runAsNonRoot against the image's user, hostnameOverride, a hostNetwork
//! pod's managed /etc/hosts with its hostAliases, the security defaults in
//! the OCI spec, the pruning of dead init containers, node allocatable behind
//! unset limits in the downward API, memory-backed volumes as tmpfs,
//! `--node-ip` as the pods' hostIP, and init containers' event fieldPaths.
//!
//! Each test starts a private containerd and the picolet binary
//! (tests/harness), writes static pod manifests, and checks what picolet
//! reports on its admin socket against what containerd recorded
//! (`ctr containers info`: the OCI spec the runtime was asked for) and what
//! the kernel holds (cgroup files). Expectations come from Kubernetes'
//! documented behaviour. Waits are polls for an event; no test asserts on
//! timing.

mod harness;

use std::path::{Path, PathBuf};
use std::time::Duration;

use harness::runtime::RuntimeKind;
use harness::{wait_until, Containerd, Picolet};
use picolet::cri::{api, Runtime};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(150);

fn status_of<'a>(pod: &'a Value, list: &str, name: &str) -> Option<&'a Value> {
    pod["status"][list]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)
}

/// `state.terminated` of the app container `name`.
fn terminated<'a>(pod: &'a Value, name: &str) -> &'a Value {
    let status = status_of(pod, "containerStatuses", name)
        .unwrap_or_else(|| panic!("no status of container {name}: {pod}"));
    &status["state"]["terminated"]
}

fn id_of(status: &Value) -> String {
    status["containerID"]
        .as_str()
        .and_then(|s| s.split_once("://"))
        .map(|(_, id)| id.to_string())
        .unwrap_or_default()
}

fn cri_containers(c: &Containerd) -> Vec<api::Container> {
    let socket = picolet::cri::socket_path(&c.endpoint()).expect("unix endpoint");
    let rt = Runtime::new(socket, Duration::from_secs(30));
    picolet::rt::block_on(rt.list_containers(api::ListContainersRequest::default()))
        .expect("ListContainers")
        .containers
}

/// The OCI spec the runtime made for a container, asked through the CRI
/// (a verbose `ContainerStatus`: both containerd and CRI-O put the
/// `runtimeSpec` in its `info`).
fn oci_spec(c: &Containerd, id: &str) -> Value {
    let socket = picolet::cri::socket_path(&c.endpoint()).expect("unix endpoint");
    let rt = Runtime::new(socket, Duration::from_secs(30));
    let status = picolet::rt::block_on(rt.container_status(api::ContainerStatusRequest {
        container_id: id.to_string(),
        verbose: true,
    }))
    .expect("ContainerStatus");
    let info: Value = serde_json::from_str(status.info.get("info").expect("verbose info"))
        .expect("the verbose info is JSON");
    info["runtimeSpec"].clone()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A pod the admin socket lists with phase `phase`.
fn wait_phase(p: &Picolet, name: &str, phase: &str) -> Value {
    wait_until(&format!("pod {name} in phase {phase}"), LONG, || {
        p.find_pod(name)
            .filter(|pod| pod["status"]["phase"] == phase)
    })
}

/// The container of the pod named `name` runs; returns the pod.
fn wait_container_running(p: &Picolet, pod: &str, list: &str, name: &str) -> Value {
    wait_until(&format!("{pod}/{name} running"), LONG, || {
        let v = p.find_pod(pod)?;
        status_of(&v, list, name)?["state"]["running"]
            .is_object()
            .then_some(v.clone())
    })
}

#[test]
fn a_sidecar_starts_first_restarts_and_stops_after_the_app_container() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let host = tempfile::tempdir().expect("host dir");
    let out = host.path().display().to_string();
    // The sidecar fails once (its marker is in the emptyDir), then runs; both
    // containers write who stopped when they get SIGTERM.
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: sidecar}}
spec:
  terminationGracePeriodSeconds: 20
  initContainers:
  - name: log-shipper
    image: busybox
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    startupProbe:
      exec: {{command: ["test", "-f", "/data/shipper-up"]}}
      periodSeconds: 1
      failureThreshold: 30
    command: ["sh", "-c", "if [ ! -f /data/failed-once ]; then touch /data/failed-once; exit 3; fi; touch /data/shipper-up; trap 'echo log-shipper >> /out/order; exit 0' TERM; while true; do sleep 1; done"]
    volumeMounts: [{{name: data, mountPath: /data}}, {{name: out, mountPath: /out}}]
  containers:
  - name: app
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'echo app >> /out/order; exit 0' TERM; while true; do sleep 1; done"]
    volumeMounts: [{{name: out, mountPath: /out}}]
  volumes:
  - {{name: data, emptyDir: {{}}}}
  - name: out
    hostPath: {{path: {out}}}
"#
    );
    p.write_manifest("sidecar", &manifest);

    // Native sidecar: the sidecar's first exit restarts it (restartCount 1);
    // the app container is created once the sidecar started (its startup
    // probe passed).
    let pod = wait_until("the sidecar restarted once and the app runs", LONG, || {
        let v = p.find_pod("sidecar")?;
        let s = status_of(&v, "initContainerStatuses", "log-shipper")?;
        let a = status_of(&v, "containerStatuses", "app")?;
        (s["restartCount"] == 1
            && s["state"]["running"].is_object()
            && a["state"]["running"].is_object())
        .then_some(v.clone())
    });
    assert_eq!(pod["status"]["phase"], "Running", "{pod}");
    let init = pod["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Initialized")
        .cloned()
        .unwrap();
    assert_eq!(init["status"], "True", "{pod}");
    let sidecar = status_of(&pod, "initContainerStatuses", "log-shipper").unwrap();
    assert_eq!(sidecar["started"], true);
    assert_eq!(sidecar["ready"], true);
    assert_eq!(sidecar["lastState"]["terminated"]["exitCode"], 3);
    let app = status_of(&pod, "containerStatuses", "app").unwrap();
    assert_eq!(
        app["restartCount"], 0,
        "the app container was never restarted"
    );
    // As kubelet: the image the runtime resolved, the spec's mounts, and
    // (BestEffort) empty resources with nothing allocated.
    for s in [sidecar, app] {
        assert_eq!(s["image"], "docker.io/library/busybox:latest", "{s}");
        assert_eq!(s["resources"], serde_json::json!({}), "{s}");
        assert!(s.get("allocatedResources").is_none(), "{s}");
    }
    assert_eq!(
        sidecar["volumeMounts"],
        serde_json::json!([{"name": "data", "mountPath": "/data"}, {"name": "out", "mountPath": "/out"}])
    );
    assert_eq!(
        app["volumeMounts"],
        serde_json::json!([{"name": "out", "mountPath": "/out"}])
    );
    // Started in order: the app container waited for the sidecar's startup
    // probe, which passes only in its second run.
    let sidecar_start = sidecar["state"]["running"]["startedAt"].as_str().unwrap();
    let app_start = app["state"]["running"]["startedAt"].as_str().unwrap();
    assert!(sidecar_start <= app_start, "{pod}");

    // oom_score_adj: the sidecar matches or falls below the app container
    // (both BestEffort here: 1000).
    let sidecar_spec = oci_spec(&c, &id_of(sidecar));
    let app_spec = oci_spec(&c, &id_of(app));
    assert_eq!(app_spec["process"]["oomScoreAdj"], 1000);
    assert_eq!(sidecar_spec["process"]["oomScoreAdj"], 1000);

    // Termination: the app container stops first, then the sidecar.
    p.remove_manifest("sidecar");
    wait_until("the pod is gone", LONG, || {
        p.find_pod("sidecar").is_none().then_some(())
    });
    assert_eq!(
        read(&host.path().join("order")),
        "app\nlog-shipper\n",
        "stop order"
    );
}

#[test]
fn pod_level_resources_reach_the_containers_the_pod_cgroup_and_the_qos_class() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    p.write_manifest(
        "podres",
        r#"apiVersion: v1
kind: Pod
metadata: {name: podres}
spec:
  terminationGracePeriodSeconds: 2
  resources:
    requests: {memory: 100Mi}
    limits: {cpu: "1", memory: 200Mi}
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "100000"]
"#,
    );
    let pod = wait_container_running(&p, "podres", "containerStatuses", "main");
    // The pod-level cpu request defaults from its limit; memory requests
    // less than its limit: Burstable.
    assert_eq!(pod["status"]["qosClass"], "Burstable", "{pod}");
    let main = status_of(&pod, "containerStatuses", "main").unwrap();
    let spec = oci_spec(&c, &id_of(main));
    let res = &spec["linux"]["resources"];
    assert_eq!(res["cpu"]["shares"], 1024, "{res}");
    assert_eq!(res["cpu"]["quota"], 100_000, "{res}");
    assert_eq!(res["cpu"]["period"], 100_000, "{res}");
    assert_eq!(res["memory"]["limit"], 209_715_200, "{res}");
    // kubelet's formula: the container requests nothing itself, so it gets
    // the pod's unclaimed 100Mi: 1000 - 1000 * 100Mi / MemTotal. The test
    // containerd restricts oom_score_adj to its own (restrict_oom_score_adj).
    let mem_total: i64 = read(Path::new("/proc/meminfo"))
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<i64>().ok())
        .expect("MemTotal")
        * 1024;
    let want = (1000 - 1000 * (100 << 20) / mem_total).clamp(3, 999);
    let floor: i64 = read(Path::new("/proc/self/oom_score_adj"))
        .trim()
        .parse()
        .unwrap_or(0);
    assert_eq!(spec["process"]["oomScoreAdj"], want.max(floor), "{spec}");

    // The container hash is in kubelet's form.
    let hash = cri_containers(&c)
        .into_iter()
        .find(|x| x.id == id_of(main))
        .and_then(|x| x.annotations.get("io.kubernetes.container.hash").cloned())
        .unwrap_or_default();
    assert!(
        (1..=8).contains(&hash.len())
            && hash
                .chars()
                .all(|ch| ch.is_ascii_hexdigit() && !ch.is_ascii_uppercase()),
        "hash {hash:?}"
    );

    // The pod cgroup carries the pod's memory limit.
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let rel = format!(
        "{}/kubepods/burstable/pod{uid}",
        p.cgroup_root().trim_start_matches('/')
    );
    let (dir, file) = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        (PathBuf::from("/sys/fs/cgroup").join(&rel), "memory.max")
    } else {
        (
            PathBuf::from("/sys/fs/cgroup/memory").join(&rel),
            "memory.limit_in_bytes",
        )
    };
    assert_eq!(
        read(&dir.join(file)).trim(),
        "209715200",
        "{}",
        dir.display()
    );
}

/// Checks that picolet refused `name` with `reason`, says so in its log,
/// and created nothing for it.
fn assert_refused(c: &Containerd, p: &Picolet, name: &str, reason: &str, message: &str) {
    let pod = wait_phase(p, name, "Failed");
    assert_eq!(pod["status"]["reason"], reason, "{pod}");
    let got = pod["status"]["message"].as_str().unwrap_or_default();
    assert!(
        got.starts_with("Pod was rejected: ") && got.contains(message),
        "{name}: {got:?} should contain {message:?}"
    );
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    assert!(
        p.log().contains(&format!("reason {reason}")),
        "the log says why {name} was refused"
    );
    assert!(!cri_containers(c)
        .iter()
        .any(|x| x.labels.get("io.kubernetes.pod.uid") == Some(&uid)));
}

fn busybox_pod(name: &str, spec_extra: &str, container_extra: &str, meta_extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}{meta_extra}}}\nspec:\n  terminationGracePeriodSeconds: 2\n{spec_extra}  containers:\n  - name: main\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"100000\"]\n{container_extra}"
    )
}

#[test]
fn pods_the_node_cannot_honour_are_refused_with_kubelets_reasons() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let other_arch = if arch == "s390x" { "amd64" } else { "s390x" };
    p.write_manifest(
        "wrong-arch",
        &busybox_pod(
            "wrong-arch",
            &format!("  nodeSelector: {{kubernetes.io/arch: {other_arch}}}\n"),
            "",
            "",
        ),
    );
    p.write_manifest(
        "wrong-node",
        &busybox_pod(
            "wrong-node",
            "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [elsewhere]}]\n",
            "",
            "",
        ),
    );
    p.write_manifest(
        "strict-groups",
        &busybox_pod(
            "strict-groups",
            "  securityContext: {supplementalGroupsPolicy: Strict}\n",
            "",
            "",
        ),
    );
    p.write_manifest(
        "userns",
        &busybox_pod("userns", "  hostUsers: false\n", "", ""),
    );
    // This node's own labels are matched: it runs.
    p.write_manifest(
        "right-node",
        &busybox_pod(
            "right-node",
            &format!(
                "  nodeSelector: {{kubernetes.io/hostname: {}, kubernetes.io/os: linux, kubernetes.io/arch: {arch}}}\n",
                p.hostname()
            ),
            "",
            "",
        ),
    );
    let apparmor = read(Path::new("/sys/module/apparmor/parameters/enabled")).starts_with('Y')
        && Path::new("/sys/kernel/security/apparmor").exists();
    if !apparmor {
        p.write_manifest(
            "confined",
            &busybox_pod(
                "confined",
                "",
                "    securityContext: {appArmorProfile: {type: RuntimeDefault}}\n",
                "",
            ),
        );
    }

    // A sysctl outside kubelet's safe set, and a safe one on the host's
    // network; a Windows pod.
    p.write_manifest(
        "unsafe-sysctl",
        &busybox_pod(
            "unsafe-sysctl",
            "  securityContext: {sysctls: [{name: kernel.msgmax, value: '10000'}]}\n",
            "",
            "",
        ),
    );
    p.write_manifest(
        "host-net-sysctl",
        &busybox_pod(
            "host-net-sysctl",
            "  hostNetwork: true\n  securityContext: {sysctls: [{name: net.ipv4.ip_local_port_range, value: '1024 65000'}]}\n",
            "",
            "",
        ),
    );
    p.write_manifest(
        "windows",
        &busybox_pod("windows", "  os: {name: windows}\n", "", ""),
    );
    // runAsNonRoot with busybox, whose image names no user: root.
    p.write_manifest(
        "non-root",
        &busybox_pod(
            "non-root",
            "  securityContext: {runAsNonRoot: true}\n",
            "",
            "",
        ),
    );

    // spec.hostnameOverride is the pod's hostname, subdomain or not.
    p.write_manifest(
        "renamed",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: renamed}\nspec:\n  restartPolicy: Never\n  hostname: ignored\n  subdomain: sub\n  hostnameOverride: edge-gw.example\n  containers:\n  - name: main\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", \"hostname > /dev/termination-log\"]\n",
    );

    wait_container_running(&p, "right-node", "containerStatuses", "main");
    let renamed = wait_phase(&p, "renamed", "Succeeded");
    assert_eq!(
        terminated(&renamed, "main")["message"]
            .as_str()
            .map(str::trim),
        Some("edge-gw.example"),
        "{renamed}"
    );
    assert_refused(
        &c,
        &p,
        "unsafe-sysctl",
        "SysctlForbidden",
        "forbidden sysctl: \"kernel.msgmax\" not allowlisted",
    );
    assert_refused(
        &c,
        &p,
        "host-net-sysctl",
        "SysctlForbidden",
        "forbidden sysctl: \"net.ipv4.ip_local_port_range\" not allowed with host Net enabled",
    );
    assert_refused(
        &c,
        &p,
        "windows",
        "PodOSNotSupported",
        "Failed to admit pod as the OS field doesn't match node OS",
    );
    let waiting = wait_until(
        "non-root waits with CreateContainerConfigError",
        LONG,
        || {
            let pod = p.find_pod("non-root")?;
            let w = status_of(&pod, "containerStatuses", "main")?["state"]["waiting"].clone();
            (w["reason"] == "CreateContainerConfigError").then_some(w)
        },
    );
    let message = waiting["message"].as_str().unwrap_or_default();
    assert!(
        message
            .starts_with("container has runAsNonRoot and image will run as root (pod: \"non-root-")
            && message.ends_with(", container: main)"),
        "{message}"
    );
    assert_refused(
        &c,
        &p,
        "wrong-arch",
        "NodeAffinity",
        "Predicate NodeAffinity failed",
    );
    assert_refused(
        &c,
        &p,
        "wrong-node",
        "NodeAffinity",
        "Predicate NodeAffinity failed",
    );
    // containerd 1.6 reports neither feature in its CRI status; CRI-O 1.37
    // reports `supplemental_groups_policy` in its runtime features, so
    // there the pod runs with the policy passed through.
    if c.kind() == RuntimeKind::Crio {
        wait_container_running(&p, "strict-groups", "containerStatuses", "main");
    } else {
        assert_refused(
            &c,
            &p,
            "strict-groups",
            "SupplementalGroupsPolicyNotSupported",
            "SupplementalGroupsPolicy=Strict is not supported in this node",
        );
    }
    assert_refused(
        &c,
        &p,
        "userns",
        "UserNamespacesNotSupported",
        "does not support user namespaces",
    );
    if !apparmor {
        assert_refused(
            &c,
            &p,
            "confined",
            "AppArmor",
            "Cannot enforce AppArmor: AppArmor is not enabled on the host",
        );
    }
}

#[test]
fn the_oci_spec_has_kubelets_masked_paths_swap_limit_and_hugepage_limits() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    p.write_manifest(
        "defaults",
        &busybox_pod(
            "defaults",
            "",
            "    resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 250m, memory: 64Mi}}\n",
            "",
        ),
    );
    p.write_manifest(
        "unmasked",
        &busybox_pod(
            "unmasked",
            "",
            "    securityContext: {procMount: Unmasked}\n",
            "",
        ),
    );
    let pod = wait_container_running(&p, "defaults", "containerStatuses", "main");
    // The resources as the runtime reads them back (CPU shares and quota
    // round-trip), and the requests allocated.
    let main = status_of(&pod, "containerStatuses", "main").unwrap();
    assert_eq!(
        main["resources"],
        serde_json::json!({
            "requests": {"cpu": "100m", "memory": "32Mi"},
            "limits": {"cpu": "250m", "memory": "64Mi"},
        }),
        "{main}"
    );
    assert_eq!(
        main["allocatedResources"],
        serde_json::json!({"cpu": "100m", "memory": "32Mi"}),
        "{main}"
    );
    // The pod's own: its total requests allocated and, Running, what its
    // cgroup holds (cgroup v2's cpu.weight cannot hold 100m: it reads back
    // as 79m, as kubelet reports it there).
    let pod = wait_phase(&p, "defaults", "Running");
    let cpu_request = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        "79m"
    } else {
        "100m"
    };
    assert_eq!(
        pod["status"]["allocatedResources"],
        serde_json::json!({"cpu": "100m", "memory": "32Mi"}),
        "{pod}"
    );
    assert_eq!(
        pod["status"]["resources"],
        serde_json::json!({
            "requests": {"cpu": cpu_request, "memory": "32Mi"},
            "limits": {"cpu": "250m", "memory": "64Mi"},
        }),
        "{pod}"
    );
    // A BestEffort pod allocates nothing; its cgroup holds no CPU request
    // or limit kubelet reports, and its memory limit as the file says it
    // (cgroup v1 writes a huge number for none, which kubelet reports).
    p.write_manifest("plain", &busybox_pod("plain", "", "", ""));
    let best_effort = wait_phase(&p, "plain", "Running");
    assert!(
        best_effort["status"].get("allocatedResources").is_none(),
        "{best_effort}"
    );
    let rel = format!(
        "{}/kubepods/besteffort/pod{}",
        p.cgroup_root().trim_start_matches('/'),
        best_effort["metadata"]["uid"].as_str().unwrap()
    );
    let resources = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        serde_json::json!({})
    } else {
        let file = PathBuf::from("/sys/fs/cgroup/memory").join(&rel);
        let bytes: u64 = read(&file.join("memory.limit_in_bytes"))
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{}", file.display()));
        let memory = picolet::quantity::total::Total::from_bytes(bytes).to_go_string();
        serde_json::json!({"limits": {"memory": memory}})
    };
    assert_eq!(
        best_effort["status"]["resources"], resources,
        "{best_effort}"
    );
    // The sandbox carries kubelet's first-seen annotation:
    // RFC3339NanoFixed (nine fraction digits), here UTC.
    let socket = picolet::cri::socket_path(&c.endpoint()).expect("unix endpoint");
    let rt = Runtime::new(socket, Duration::from_secs(30));
    let sandbox = picolet::rt::block_on(rt.list_pod_sandbox(api::ListPodSandboxRequest::default()))
        .expect("ListPodSandbox")
        .items
        .into_iter()
        .find(|s| {
            s.metadata
                .as_ref()
                .is_some_and(|m| pod["metadata"]["uid"] == m.uid.as_str())
        })
        .expect("the sandbox of pod defaults");
    let seen = sandbox
        .annotations
        .get("kubernetes.io/config.seen")
        .cloned()
        .unwrap_or_default();
    let (date_time, frac) = seen.split_once('.').unwrap_or_default();
    assert!(
        date_time.len() == 19
            && frac.len() == 10
            && frac.ends_with('Z')
            && frac[..9].bytes().all(|b| b.is_ascii_digit())
            && seen.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
        "config.seen {seen:?}"
    );
    let spec = oci_spec(
        &c,
        &id_of(status_of(&pod, "containerStatuses", "main").unwrap()),
    );
    let list = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let masked = list(&spec["linux"]["maskedPaths"]);
    for path in picolet::pod::spec::DEFAULT_MASKED_PATHS {
        assert!(masked.iter().any(|m| m == path), "{path} in {masked:?}");
    }
    assert!(masked.iter().any(|m| m == "/proc/interrupts"));
    let readonly = list(&spec["linux"]["readonlyPaths"]);
    for path in picolet::pod::spec::DEFAULT_READONLY_PATHS {
        assert!(readonly.iter().any(|m| m == path), "{path} in {readonly:?}");
    }

    // Swap: on cgroup v1 with a swap controller the swap limit is the
    // memory limit; on v2, memory.swap.max is 0 (NoSwap).
    let mem = &spec["linux"]["resources"]["memory"];
    assert_eq!(mem["limit"], 64 << 20, "{mem}");
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        let unified = &spec["linux"]["resources"]["unified"];
        if !unified.is_null() {
            assert_eq!(unified["memory.swap.max"], "0", "{unified}");
        }
    } else if Path::new("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").exists() {
        assert_eq!(mem["swap"], 64 << 20, "{mem}");
    }

    // Hugepages: where the hugetlb cgroup controller exists, picolet found
    // every size the node has and sends each a limit of 0 (containerd
    // records them only with its hugetlb controller enabled,
    // `disable_hugetlb_controller = false`; its default drops them). Without
    // the controller it sends none, as kubelet does: runc would refuse them.
    let hugetlb = match std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers") {
        Ok(list) => list.split_whitespace().any(|c| c == "hugetlb"),
        Err(_) => Path::new("/sys/fs/cgroup/hugetlb").is_dir(),
    };
    let sizes: Vec<String> = std::fs::read_dir("/sys/kernel/mm/hugepages")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|_| hugetlb)
        .collect();
    let line = p
        .log()
        .lines()
        .find(|l| l.contains("hugepage sizes"))
        .map(str::to_string)
        .unwrap_or_default();
    for size in &sizes {
        let kb: u64 = size
            .trim_start_matches("hugepages-")
            .trim_end_matches("kB")
            .parse()
            .expect("hugepages-<n>kB");
        let name = picolet::pod::spec::hugepage_unit_size(kb * 1024).expect("a page size");
        assert!(line.contains(&name), "{name} in {line:?}");
    }
    if !hugetlb {
        assert!(line.contains("hugepage sizes []"), "{line}");
    }
    if let Some(limits) = spec["linux"]["resources"]["hugepageLimits"].as_array() {
        assert_eq!(limits.len(), sizes.len(), "{limits:?} for {sizes:?}");
        for l in limits {
            assert_eq!(l["limit"], 0, "{l}");
        }
    }

    // procMount: Unmasked asks for none of it, but the API server allows
    // it only with `hostUsers: false` (a user namespace), which containerd
    // 1.6 cannot give: the pod is refused as invalid, naming the field, and
    // never started. (`pod::spec`'s unit tests cover the unmasked spec.)
    wait_until("the unmasked pod is refused by validation", LONG, || {
        p.log()
            .lines()
            .any(|l| l.contains("unmasked.yaml is invalid") && l.contains("procMount"))
            .then_some(())
    });
    assert!(p.find_pod("unmasked").is_none());
}

#[test]
fn only_the_newest_exited_instance_of_an_init_container_is_kept() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    // The init container fails twice, then succeeds (its count is kept in
    // an emptyDir, which outlives container restarts).
    p.write_manifest(
        "flaky-init",
        r#"apiVersion: v1
kind: Pod
metadata: {name: flaky-init}
spec:
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: flaky
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "n=$(cat /data/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/n; [ $n -ge 3 ]"]
    volumeMounts: [{name: data, mountPath: /data}]
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "100000"]
  volumes:
  - {name: data, emptyDir: {}}
"#,
    );
    let pod = wait_container_running(&p, "flaky-init", "containerStatuses", "main");
    let flaky = status_of(&pod, "initContainerStatuses", "flaky").unwrap();
    assert_eq!(flaky["restartCount"], 2, "{pod}");
    assert_eq!(flaky["state"]["terminated"]["exitCode"], 0, "{pod}");
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    wait_until("one instance of the init container is left", LONG, || {
        let n = cri_containers(&c)
            .iter()
            .filter(|x| {
                x.labels.get("io.kubernetes.pod.uid") == Some(&uid)
                    && x.metadata.as_ref().is_some_and(|m| m.name == "flaky")
            })
            .count();
        (n == 1).then_some(())
    });
}

#[test]
fn a_terminated_containers_message_is_its_termination_log_or_under_fallback_its_logs_end() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    // Not root: /dev/termination-log must be writable by any user (0666).
    p.write_manifest(
        "farewell",
        r#"apiVersion: v1
kind: Pod
metadata: {name: farewell}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  securityContext: {runAsUser: 1000, runAsGroup: 1000}
  containers:
  - name: file
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "printf 'written by uid %s' $(id -u) > /dev/termination-log; exit 3"]
  - name: logs
    image: busybox
    imagePullPolicy: IfNotPresent
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", "echo starting; sleep 1; echo 'panic: boom' >&2; exit 1"]
"#,
    );
    let pod = wait_phase(&p, "farewell", "Failed");
    let file = terminated(&pod, "file");
    assert_eq!(file["exitCode"], 3, "{pod}");
    assert_eq!(file["message"], "written by uid 1000", "{pod}");
    let logs = terminated(&pod, "logs");
    assert_eq!(logs["exitCode"], 1, "{pod}");
    assert_eq!(logs["message"], "starting\npanic: boom\n", "{pod}");
}

#[test]
fn an_unset_cpu_limit_reads_node_allocatable_and_a_memory_empty_dir_is_a_sized_tmpfs() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    // No limits: limits.cpu in the downward API is the node's allocatable
    // (not a CreateContainerConfigError); medium Memory is a tmpfs of
    // sizeLimit bytes.
    p.write_manifest(
        "allocatable",
        r#"apiVersion: v1
kind: Pod
metadata: {name: allocatable}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - name: probe
    image: busybox
    imagePullPolicy: IfNotPresent
    env:
    - {name: CPU_M, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}
    command: ["sh", "-c", "printf '%s %s %s' \"$CPU_M\" \"$(grep ' /mem ' /proc/mounts | cut -d' ' -f3,4)\" \"$(grep ' /dw ' /proc/mounts | cut -d' ' -f3)\" > /dev/termination-log"]
    volumeMounts: [{name: mem, mountPath: /mem}, {name: dw, mountPath: /dw}]
  volumes:
  - {name: mem, emptyDir: {medium: Memory, sizeLimit: 16Mi}}
  - {name: dw, downwardAPI: {items: [{path: cpu, resourceFieldRef: {containerName: probe, resource: limits.cpu, divisor: 1m}}]}}
"#,
    );
    let pod = wait_phase(&p, "allocatable", "Succeeded");
    let probe = terminated(&pod, "probe");
    let message = probe["message"].as_str().unwrap_or_default().to_string();
    let (cpu, mount) = message.split_once(' ').unwrap_or_default();
    let cpu: u64 = cpu.parse().unwrap_or_else(|_| panic!("{pod}"));
    assert!(cpu > 0, "{pod}");
    let mut mount = mount.split(' ');
    assert_eq!(mount.next(), Some("tmpfs"), "{pod}");
    let options = mount.next().unwrap_or_default();
    assert!(options.split(',').any(|o| o == "size=16384k"), "{pod}");
    // The downwardAPI volume is memory-backed too, as kubelet's.
    assert_eq!(mount.next(), Some("tmpfs"), "{pod}");
}

#[test]
fn host_ip_is_the_configured_node_ip_for_the_status_the_downward_api_and_host_network_pods() {
    let c = Containerd::start();
    // A documentation address: not the default route's, so only --node-ip
    // can put it there.
    let p = Picolet::start_with_args(&c, "", |_| vec!["--node-ip=192.0.2.77".into()]);
    p.write_manifest(
        "host-ip",
        r#"apiVersion: v1
kind: Pod
metadata: {name: host-ip}
spec:
  restartPolicy: Never
  hostNetwork: true
  hostAliases:
  - {ip: 10.1.1.1, hostnames: [foo.local, bar.local]}
  terminationGracePeriodSeconds: 2
  containers:
  - name: probe
    image: busybox
    imagePullPolicy: IfNotPresent
    env:
    - {name: HOST_IP, valueFrom: {fieldRef: {fieldPath: status.hostIP}}}
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    command: ["sh", "-c", "printf '%s %s' \"$HOST_IP\" \"$POD_IP\" > /dev/termination-log; head -n 1 /etc/hosts > /dev/stdout; grep foo.local /etc/hosts"]
"#,
    );
    let pod = wait_phase(&p, "host-ip", "Succeeded");
    assert_eq!(pod["status"]["hostIP"], "192.0.2.77", "{pod}");
    assert_eq!(pod["status"]["hostIPs"][0]["ip"], "192.0.2.77", "{pod}");
    assert_eq!(pod["status"]["podIP"], "192.0.2.77", "{pod}");
    let probe = terminated(&pod, "probe");
    assert_eq!(probe["message"], "192.0.2.77 192.0.2.77", "{pod}");
    // kubelet manages a hostNetwork pod's /etc/hosts too: the node's file
    // under its header, and the pod's hostAliases.
    let (code, log) = p.get(&format!(
        "/containerLogs/default/{}/probe",
        pod["metadata"]["name"].as_str().unwrap()
    ));
    assert_eq!(code, 200, "{log}");
    assert!(
        log.starts_with("# Kubernetes-managed hosts file (host network).\n")
            && log.contains("10.1.1.1\tfoo.local\tbar.local\n"),
        "{log:?}"
    );
}

#[test]
fn an_init_containers_events_name_spec_init_containers_in_their_field_path() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    p.write_manifest(
        "init-events",
        r#"apiVersion: v1
kind: Pod
metadata: {name: init-events}
spec:
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: setup
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["true"]
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "100000"]
"#,
    );
    wait_container_running(&p, "init-events", "containerStatuses", "main");
    let started = |path: &str| {
        let (code, body) = p.get("/events");
        let list: Value = serde_json::from_str(&body).ok()?;
        (code == 200).then_some(())?;
        list["items"]
            .as_array()?
            .iter()
            .any(|e| e["reason"] == "Started" && e["involvedObject"]["fieldPath"] == path)
            .then_some(())
    };
    wait_until("the init container's Started event", LONG, || {
        started("spec.initContainers{setup}")
    });
    wait_until("the app container's Started event", LONG, || {
        started("spec.containers{main}")
    });
}
