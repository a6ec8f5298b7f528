//! Static pods on a real container runtime (containerd or CRI-O, as
//! `PICOLET_TEST_RUNTIME` says): the spine of picolet, end to end.
//!
//! Every test starts a private runtime (tests/harness) and the picolet
//! binary, writes manifests into the static pod directory, and checks what
//! picolet reports on its admin socket against what the runtime and the
//! kernel really hold (CRI listings, log files, cgroup files). Waits are
//! generous polls; no test asserts on timing.

mod harness;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use harness::{poll_until, wait_until, Containerd, Picolet};
use picolet::cri::{api, Runtime};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);

fn container_status<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    pod["status"]["containerStatuses"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)
}

/// Waits until every container of the pod runs and is ready; returns it.
fn wait_running(p: &Picolet, name: &str) -> Value {
    wait_until(&format!("pod {name} Running and ready"), LONG, || {
        let pod = p.find_pod(name)?;
        let ready = pod["status"]["containerStatuses"]
            .as_array()
            .map(|cs| {
                !cs.is_empty()
                    && cs
                        .iter()
                        .all(|c| c["ready"] == true && c["state"]["running"].is_object())
            })
            .unwrap_or(false);
        (pod["status"]["phase"] == "Running" && ready).then_some(pod)
    })
}

fn container_id(pod: &Value, name: &str) -> String {
    container_status(pod, name)
        .and_then(|c| c["containerID"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn restart_count(pod: &Value, name: &str) -> i64 {
    container_status(pod, name)
        .and_then(|c| c["restartCount"].as_i64())
        .unwrap_or(-1)
}

fn cri(c: &Containerd) -> Runtime {
    let socket = picolet::cri::socket_path(&c.endpoint()).expect("unix endpoint");
    Runtime::new(socket, Duration::from_secs(30))
}

fn sandboxes(c: &Containerd) -> Vec<api::PodSandbox> {
    let rt = cri(c);
    picolet::rt::block_on(rt.list_pod_sandbox(api::ListPodSandboxRequest::default()))
        .expect("ListPodSandbox")
        .items
}

fn containers(c: &Containerd) -> Vec<api::Container> {
    let rt = cri(c);
    picolet::rt::block_on(rt.list_containers(api::ListContainersRequest::default()))
        .expect("ListContainers")
        .containers
}

/// What picolet logs at `-v=4` after each rescan of the static pod path
/// (src/source/watch.rs), changed or not.
const RESCANNED: &str = "rescanned static pod path";

fn sleeper(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"100000\"]\n"
    )
}

fn pod_log_file(p: &Picolet, pod: &Value, container: &str, attempt: u32) -> PathBuf {
    let md = &pod["metadata"];
    p.logs_dir()
        .join(format!(
            "{}_{}_{}",
            md["namespace"].as_str().unwrap(),
            md["name"].as_str().unwrap(),
            md["uid"].as_str().unwrap()
        ))
        .join(container)
        .join(format!("{attempt}.log"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn a_static_pod_runs_with_kubelets_cri_labels_and_shows_in_get_pods() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    p.write_manifest("web", &sleeper("web"));
    let pod = wait_running(&p, "web");
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(pod["metadata"]["namespace"], "default");
    assert_eq!(pod["status"]["qosClass"], "BestEffort");
    assert!(
        pod["status"]["podIP"]
            .as_str()
            .is_some_and(|ip| !ip.is_empty()),
        "{pod}"
    );
    assert_eq!(restart_count(&pod, "main"), 0);

    let sb: Vec<_> = sandboxes(&c)
        .into_iter()
        .filter(|s| s.labels.get("io.kubernetes.pod.uid") == Some(&uid))
        .collect();
    assert_eq!(sb.len(), 1);
    let md = sb[0].metadata.clone().unwrap();
    assert_eq!(md.name, format!("web-{}", p.hostname()));
    assert_eq!(md.namespace, "default");
    assert_eq!(sb[0].labels.get("io.kubernetes.pod.name"), Some(&md.name));
    assert_eq!(
        sb[0]
            .labels
            .get("io.kubernetes.pod.namespace")
            .map(String::as_str),
        Some("default")
    );
    let ctrs: Vec<_> = containers(&c)
        .into_iter()
        .filter(|x| x.labels.get("io.kubernetes.pod.uid") == Some(&uid))
        .collect();
    assert_eq!(ctrs.len(), 1);
    assert_eq!(
        ctrs[0]
            .labels
            .get("io.kubernetes.container.name")
            .map(String::as_str),
        Some("main")
    );

    // The table, from the CLI, through the admin socket.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_picolet"))
        .args(["get", "pods", "--admin-socket"])
        .arg(p.admin_socket())
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("web-{}", p.hostname())))
        .expect("a row for the pod");
    assert!(row.contains("1/1") && row.contains("Running"), "{row}");

    // healthz
    assert_eq!(p.get("/healthz"), (200, "ok".to_string()));
    let mode = std::fs::metadata(p.admin_socket())
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
        .unwrap();
    assert_eq!(mode, 0o600);
}

#[test]
fn a_container_gets_env_downward_api_volumes_and_logs_where_kubelet_puts_them() {
    let c = Containerd::start();
    let p = Picolet::start_with(
        &c,
        "clusterDNS: [10.96.0.10]\nclusterDomain: cluster.local\n",
    );
    let host_dir = p.dir().join("host-data");
    std::fs::create_dir_all(&host_dir).unwrap();
    std::fs::write(host_dir.join("greeting"), "hello-from-host").unwrap();
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: env
  namespace: edge
  labels: {{tier: sensor}}
spec:
  restartPolicy: Never
  initContainers:
  - name: init
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo from-init > /scratch/init.txt"]
    volumeMounts: [{{name: scratch, mountPath: /scratch}}]
  containers:
  - name: main
    image: docker.io/library/busybox:latest
    imagePullPolicy: Never
    workingDir: /scratch
    command: ["sh", "-c"]
    args:
    - >-
      echo "pod=$(POD_NAME) ns=$(POD_NS) node=$(NODE) tier=$(TIER) greeting=$(GREETING)";
      echo "init=$(cat init.txt) host=$(cat /host/greeting) pwd=$(pwd)";
      echo "hostname=$(hostname)";
      grep -E '^(nameserver|search|options)' /etc/resolv.conf;
      echo "uid=$(id -u)"
    env:
    - name: POD_NAME
      valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
    - name: POD_NS
      valueFrom: {{fieldRef: {{fieldPath: metadata.namespace}}}}
    - name: NODE
      valueFrom: {{fieldRef: {{fieldPath: spec.nodeName}}}}
    - name: TIER
      valueFrom: {{fieldRef: {{fieldPath: "metadata.labels['tier']"}}}}
    - {{name: GREETING, value: "hi-$(POD_NS)"}}
    securityContext: {{runAsUser: 65534}}
    volumeMounts:
    - {{name: scratch, mountPath: /scratch}}
    - {{name: host, mountPath: /host, readOnly: true}}
  volumes:
  - name: scratch
    emptyDir: {{}}
  - name: host
    hostPath: {{path: {host}, type: Directory}}
"#,
        host = host_dir.display()
    );
    p.write_manifest("env", &manifest);
    let pod = wait_until("pod env Succeeded", LONG, || {
        let pod = p.find_pod("env")?;
        (pod["status"]["phase"] == "Succeeded").then_some(pod)
    });
    let log = read(&pod_log_file(&p, &pod, "main", 0));
    let node = p.hostname();
    assert!(
        log.contains(&format!(
            "pod=env-{node} ns=edge node={node} tier=sensor greeting=hi-edge"
        )),
        "{log}"
    );
    assert!(
        log.contains("init=from-init host=hello-from-host pwd=/scratch"),
        "{log}"
    );
    assert!(log.contains(&format!("hostname=env-{node}")), "{log}");
    assert!(log.contains("nameserver 10.96.0.10"), "{log}");
    assert!(
        log.contains("search edge.svc.cluster.local svc.cluster.local cluster.local"),
        "{log}"
    );
    assert!(log.contains("options ndots:5"), "{log}");
    assert!(log.contains("uid=65534"), "{log}");
    // CRI log format: "<time> stdout F <line>"
    assert!(
        log.lines()
            .all(|l| l.contains(" stdout ") || l.contains(" stderr ")),
        "{log}"
    );
    let main = container_status(&pod, "main").unwrap();
    assert_eq!(main["state"]["terminated"]["exitCode"], 0);
    assert_eq!(main["state"]["terminated"]["reason"], "Completed");
}

#[test]
fn editing_a_manifest_replaces_the_pod_and_a_broken_one_disturbs_nothing() {
    let c = Containerd::start();
    // -v=4: every rescan of the static pod path is logged (RESCANNED).
    let p = Picolet::start_with(&c, "logging:\n  verbosity: 4\n");
    p.write_manifest("keep", &sleeper("keep"));
    p.write_manifest("edit", &sleeper("edit"));
    let keep = wait_running(&p, "keep");
    let before = wait_running(&p, "edit");
    let keep_id = container_id(&keep, "main");

    p.write_manifest("edit", &sleeper("edit").replace("100000", "200000"));
    let after = wait_until("the edited pod runs with a new UID", LONG, || {
        let pod = p.find_pod("edit")?;
        (pod["metadata"]["uid"] != before["metadata"]["uid"]
            && pod["status"]["phase"] == "Running"
            && container_status(&pod, "main")?["state"]["running"].is_object())
        .then_some(pod)
    });
    assert_ne!(container_id(&after, "main"), container_id(&before, "main"));
    let old_uid = before["metadata"]["uid"].as_str().unwrap().to_string();
    wait_until("the old pod's sandbox is gone", LONG, || {
        (!sandboxes(&c)
            .iter()
            .any(|s| s.labels.get("io.kubernetes.pod.uid") == Some(&old_uid)))
        .then_some(())
    });

    // A broken manifest: logged with its file name and position, once.
    p.write_manifest(
        "broken",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [oops\n",
    );
    wait_until("the parse error is logged", LONG, || {
        p.log().contains("broken.yaml").then_some(())
    });
    // Several rescans read the broken file again (fileCheckFrequency: 2s).
    let log = wait_until("three more rescans of the static pod path", LONG, || {
        let log = p.log();
        let since = &log[log.find("broken.yaml")?..];
        // The first one is the rescan that logged the error.
        (since.matches(RESCANNED).count() > 3).then_some(log)
    });
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("broken.yaml")).collect();
    assert_eq!(errors.len(), 1, "logged once: {errors:#?}");
    assert!(
        errors[0].contains("line"),
        "names the position: {}",
        errors[0]
    );
    // A multi-document file is rejected by name.
    p.write_manifest("two", &format!("{}---\n{}", sleeper("a"), sleeper("b")));
    wait_until("the multi-document file is rejected", LONG, || {
        p.log().contains("two.yaml").then_some(())
    });
    // Nothing else was disturbed.
    let keep_now = wait_running(&p, "keep");
    assert_eq!(container_id(&keep_now, "main"), keep_id);
    assert_eq!(restart_count(&keep_now, "main"), 0);
}

#[test]
fn removing_a_manifest_stops_the_pod_gracefully_and_cleans_up() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let out = p.dir().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: graceful}}
spec:
  terminationGracePeriodSeconds: 20
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'echo got-TERM > /out/signal; exit 0' TERM; while true; do sleep 1; done"]
    resources:
      requests: {{cpu: 100m, memory: 32Mi}}
      limits: {{memory: 64Mi}}
    volumeMounts: [{{name: out, mountPath: /out}}]
  volumes:
  - name: out
    hostPath: {{path: {out}}}
"#,
        out = out.display()
    );
    p.write_manifest("graceful", &manifest);
    let pod = wait_running(&p, "graceful");
    assert_eq!(pod["status"]["qosClass"], "Burstable");
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();

    // The pod cgroup exists with the pod-level memory limit.
    let cg = cgroup_dir(&p, "burstable", &uid);
    if let Some(cg) = &cg {
        assert!(cg.exists(), "{} exists", cg.display());
        if let Some(limit) = read_memory_limit(cg) {
            assert_eq!(limit, 64 * 1024 * 1024);
        }
    }
    let log_dir = pod_log_file(&p, &pod, "main", 0)
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(log_dir.exists());

    p.remove_manifest("graceful");
    wait_until("the pod is gone from /pods", LONG, || {
        p.find_pod("graceful").is_none().then_some(())
    });
    assert_eq!(
        read(&out.join("signal")).trim(),
        "got-TERM",
        "the container saw SIGTERM and exited by itself"
    );
    assert!(!sandboxes(&c)
        .iter()
        .any(|s| s.labels.get("io.kubernetes.pod.uid") == Some(&uid)));
    assert!(!containers(&c)
        .iter()
        .any(|s| s.labels.get("io.kubernetes.pod.uid") == Some(&uid)));
    if let Some(cg) = &cg {
        wait_until("the pod cgroup is removed", LONG, || {
            (!cg.exists()).then_some(())
        });
    }
    assert!(!log_dir.exists(), "pod log dir removed");
}

/// The memory controller's directory for a pod, on v1 or v2.
fn cgroup_dir(p: &Picolet, qos: &str, uid: &str) -> Option<PathBuf> {
    let rel = format!(
        "{}/kubepods/{qos}/pod{uid}",
        p.cgroup_root().trim_start_matches('/')
    );
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let base = if v2 {
        PathBuf::from("/sys/fs/cgroup")
    } else {
        PathBuf::from("/sys/fs/cgroup/memory")
    };
    base.exists().then(|| base.join(rel))
}

fn read_memory_limit(dir: &Path) -> Option<u64> {
    ["memory.limit_in_bytes", "memory.max"]
        .iter()
        .find_map(|f| read(&dir.join(f)).trim().parse().ok())
}

#[test]
fn a_crashing_container_restarts_with_back_off_and_garbage_is_collected() {
    let c = Containerd::start();
    let mut p = Picolet::start(&c);
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata: {name: crash}\nspec:\n  containers:\n  - name: main\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", \"echo crashing; exit 3\"]\n";
    p.write_manifest("crash", manifest);
    let pod = wait_until(
        "restartCount reaches 2 and CrashLoopBackOff shows",
        Duration::from_secs(180),
        || {
            let pod = p.find_pod("crash")?;
            let cs = container_status(&pod, "main")?;
            (cs["restartCount"].as_i64()? >= 2
                && cs["state"]["waiting"]["reason"] == "CrashLoopBackOff")
                .then_some(pod)
        },
    );
    let cs = container_status(&pod, "main").unwrap();
    assert_eq!(cs["lastState"]["terminated"]["exitCode"], 3, "{cs}");
    assert_eq!(cs["lastState"]["terminated"]["reason"], "Error");
    assert!(
        cs["state"]["waiting"]["message"]
            .as_str()
            .unwrap()
            .contains("back-off"),
        "{cs}"
    );

    // After a restart of picolet, GC keeps one dead container per name.
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    p.restart();
    wait_until(
        "GC leaves at most one dead container plus the current one",
        LONG,
        || {
            let n = containers(&c)
                .iter()
                .filter(|x| x.labels.get("io.kubernetes.pod.uid") == Some(&uid))
                .count();
            (n <= 2).then_some(())
        },
    );
}

#[test]
fn a_restarted_picolet_adopts_running_containers_and_removes_orphans() {
    let c = Containerd::start();
    let mut p = Picolet::start(&c);
    p.write_manifest("stay", &sleeper("stay"));
    p.write_manifest("go", &sleeper("go"));
    let stay = wait_running(&p, "stay");
    let go = wait_running(&p, "go");
    let go_uid = go["metadata"]["uid"].as_str().unwrap().to_string();

    // Crash picolet, remove one manifest while it is down, start it again.
    p.kill();
    p.remove_manifest("go");
    p.restart();
    let again = wait_running(&p, "stay");
    assert_eq!(
        container_id(&again, "main"),
        container_id(&stay, "main"),
        "adopted, not restarted"
    );
    assert_eq!(restart_count(&again, "main"), 0);
    wait_until("the orphaned pod is terminated and removed", LONG, || {
        (!sandboxes(&c)
            .iter()
            .any(|s| s.labels.get("io.kubernetes.pod.uid") == Some(&go_uid)))
        .then_some(())
    });
}

#[test]
fn a_runtime_restart_does_not_restart_containers_and_picolet_reconnects() {
    let mut c = Containerd::start();
    let p = Picolet::start(&c);
    p.write_manifest("steady", &sleeper("steady"));
    let before = wait_running(&p, "steady");
    c.restart();
    // picolet reconnects: a pod added after the restart starts.
    p.write_manifest("later", &sleeper("later"));
    wait_running(&p, "later");
    let after = wait_running(&p, "steady");
    assert_eq!(container_id(&after, "main"), container_id(&before, "main"));
    assert_eq!(restart_count(&after, "main"), 0);
    assert!(
        p.log().contains("reconnect") || p.log().contains("is back"),
        "the reconnect is logged"
    );
}

#[test]
fn image_pull_policy_is_honoured_and_pull_errors_are_reported() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let never = "apiVersion: v1\nkind: Pod\nmetadata: {name: never}\nspec:\n  containers:\n  - name: main\n    image: 127.0.0.1:1/picolet/nothing:1\n    imagePullPolicy: Never\n";
    let missing = "apiVersion: v1\nkind: Pod\nmetadata: {name: missing}\nspec:\n  containers:\n  - name: main\n    image: 127.0.0.1:1/picolet/nothing:1\n    imagePullPolicy: IfNotPresent\n";
    p.write_manifest("never", never);
    p.write_manifest("missing", missing);
    wait_until("ErrImageNeverPull", LONG, || {
        let pod = p.find_pod("never")?;
        (container_status(&pod, "main")?["state"]["waiting"]["reason"] == "ErrImageNeverPull")
            .then_some(())
    });
    let mut seen: HashMap<String, bool> = HashMap::new();
    wait_until(
        "ErrImagePull then ImagePullBackOff",
        Duration::from_secs(180),
        || {
            let pod = p.find_pod("missing")?;
            let reason = container_status(&pod, "main")?["state"]["waiting"]["reason"]
                .as_str()?
                .to_string();
            seen.insert(reason, true);
            (seen.contains_key("ErrImagePull") && seen.contains_key("ImagePullBackOff"))
                .then_some(())
        },
    );
    let pod = p.find_pod("missing").unwrap();
    assert_eq!(pod["status"]["phase"], "Pending");
}

#[test]
fn a_bad_config_value_is_an_error_naming_the_field_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: lots\nfancyNewField: 1\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_picolet"))
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("maxPods") && err.contains(&cfg.display().to_string()),
        "{err}"
    );
}

#[test]
fn container_logs_are_rotated_at_the_configured_size_and_count() {
    let c = Containerd::start();
    let p = Picolet::start_with(&c, "containerLogMaxSize: 4Ki\ncontainerLogMaxFiles: 3\n");
    let manifest = r#"apiVersion: v1
kind: Pod
metadata: {name: chatty}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "i=0; while true; do i=$((i+1)); echo line $i padding-padding-padding-padding-padding-padding; sleep 0.01; done"]
"#;
    p.write_manifest("chatty", manifest);
    let pod = wait_running(&p, "chatty");
    let current = pod_log_file(&p, &pod, "main", 0);
    let dir = current.parent().unwrap().to_path_buf();
    let files = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let rotated = |f: &[String]| -> BTreeSet<String> {
        f.iter()
            .filter(|f| f.starts_with("0.log."))
            .cloned()
            .collect()
    };
    wait_until("two rotations happened", LONG, || {
        (rotated(&files()).len() >= 2).then_some(())
    });
    // More rotation rounds: each one renames 0.log to a new 0.log.<time>.
    let mut seen = rotated(&files());
    let more = seen.len() + 2;
    wait_until("two more rotation rounds", LONG, || {
        seen.extend(rotated(&files()));
        (seen.len() >= more).then_some(())
    });
    // A round renames, has the runtime reopen 0.log, then prunes: look once
    // the round is over.
    let settled = |f: &[String]| f.contains(&"0.log".to_string()) && f.len() <= 3;
    let f = poll_until(LONG, || Some(files()).filter(|f| settled(f))).unwrap_or_else(|| {
        panic!(
            "the runtime reopened the current log and at most containerLogMaxFiles files are kept: {:?}",
            files()
        )
    });
    // The current file keeps growing after rotation: the runtime writes to it.
    let size = std::fs::metadata(&current).unwrap().len();
    wait_until("the current log grows after rotation", LONG, || {
        (std::fs::metadata(&current).map(|m| m.len()).unwrap_or(0) != size || files() != f)
            .then_some(())
    });
}

#[test]
fn pods_beyond_max_pods_are_not_admitted() {
    let c = Containerd::start();
    let p = Picolet::start_with(&c, "maxPods: 1\n");
    p.write_manifest("first", &sleeper("first"));
    wait_running(&p, "first");
    p.write_manifest("second", &sleeper("second"));
    wait_until("the refusal is logged", LONG, || {
        p.log().contains("OutOfpods").then_some(())
    });
    // As kubelet reports a refused pod: Failed, with its reason.
    let second = p.find_pod("second").expect("the refused pod is listed");
    assert_eq!(second["status"]["phase"], "Failed", "{second}");
    assert_eq!(second["status"]["reason"], "OutOfpods", "{second}");
    assert!(!containers(&c)
        .iter()
        .any(|x| x.labels.get("io.kubernetes.pod.uid")
            == second["metadata"]["uid"]
                .as_str()
                .map(str::to_string)
                .as_ref()));
}

#[test]
fn picolet_tells_systemd_it_is_ready_and_then_that_it_is_stopping() {
    let c = Containerd::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("notify");
    let socket = std::os::unix::net::UnixDatagram::bind(&path).expect("bind the notify socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(1)))
        .expect("read timeout");
    let mut p = Picolet::start_with_env(&c, vec![("NOTIFY_SOCKET".into(), path.into())]);
    // Every datagram received until `until` matches, as text.
    let mut seen = Vec::new();
    let mut receive_until = |what: &str, until: &dyn Fn(&str) -> bool| {
        wait_until(what, LONG, || {
            let mut buf = [0u8; 512];
            let n = socket.recv(&mut buf).ok()?;
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            seen.push(msg.clone());
            until(&msg).then_some(())
        })
    };
    receive_until("READY=1 on NOTIFY_SOCKET", &|m| {
        m.lines().any(|l| l == "READY=1") && m.lines().any(|l| l.starts_with("STATUS="))
    });
    // Ready means the admin socket answers.
    assert_eq!(p.get("/pods").0, 200);
    p.stop();
    receive_until("STOPPING=1 on NOTIFY_SOCKET", &|m| {
        m.lines().any(|l| l == "STOPPING=1")
    });
    assert!(
        seen.iter()
            .any(|m| m.contains("STATUS=waiting for the runtime at unix://")),
        "a waiting status before READY=1: {seen:?}"
    );
}
