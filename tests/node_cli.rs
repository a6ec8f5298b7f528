//! The node CLI and the node-API endpoints it reads, on a real container
//! runtime with static pods and no API server:
//! - `/runningpods/` lists what the runtime really runs;
//! - `picolet describe pod` shows a running pod's and a failing pod's
//!   state and their events, recorded offline; `-o yaml` parses;
//! - `picolet get node` shows capacity, allocatable and every eviction
//!   signal with its threshold; `get pods` takes kubectl's `-A`, `-n` and
//!   `get pod NAME`;
//! - `picolet check` passes the runtime line against the real runtime and
//!   fails, exit 1, naming a socket that is not there; without a runtime,
//!   it fails a config typo (with the field meant), each broken manifest
//!   (file and field) and the missing socket, in text and `-o json`; with
//!   a node kubeconfig it shows the `SelfSubjectReview`'s user, and fails a
//!   dead server;
//! - a picolet whose runtime socket is missing answers "waiting for the
//!   runtime at ..." on its admin socket (`get pods`, `get node`: exit 1)
//!   and ends on SIGTERM;
//! - `/metrics`, `/metrics/probes` and `/metrics/resource` pass
//!   `promtool check metrics` (unpacked by `make promtool` into
//!   target/tools/bin; a `promtool` on PATH serves as well).
//!
//! Waits are polls for the state asserted; nothing asserts on timing.

mod harness;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use harness::{wait_until, Containerd, Picolet};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);

/// `picolet ARGS --admin-socket <p's>`, stdout a pipe (so no colours).
fn cli(p: &Picolet, args: &[&str]) -> Output {
    Command::new(harness::picolet_bin())
        .args(args)
        .arg("--admin-socket")
        .arg(p.admin_socket())
        .output()
        .expect("running picolet")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const WEB: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "exec sleep 100000"]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
"#;

/// An image no registry has: pulls fail, the kubelet way.
const BROKEN: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: broken}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: registry.invalid/picolet/nope:1
"#;

#[test]
fn runningpods_describe_and_get_node_show_the_runtimes_real_state() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    p.write_manifest("web", WEB);
    p.write_manifest("broken", BROKEN);
    let web = format!("web-{}", p.hostname());
    let broken = format!("broken-{}", p.hostname());

    // /runningpods/: the runtime's view, with the container IDs of /pods.
    let id = wait_until("web runs and is ready", LONG, || {
        let pod = p.find_pod("web")?;
        let s = harness::container_status(&pod, "main");
        (s["ready"] == true).then(|| s["containerID"].as_str().unwrap().to_string())
    });
    // It answers from the PLEG's last relist, so it may lag /pods by one
    // relist period: wait for the relist that saw the container start.
    let (body, item) = wait_until("/runningpods/ lists web's container", LONG, || {
        let (status, body) = p.get("/runningpods/");
        assert_eq!(status, 200, "{body}");
        let running: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(running["kind"], "PodList", "{body}");
        // A relist between the sandbox's start and the container's lists
        // the pod with no container yet: wait for one that lists it.
        let item = running["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| {
                i["metadata"]["name"] == web.as_str()
                    && i["spec"]["containers"][0]["name"].is_string()
            })?
            .clone();
        Some((body, item))
    });
    assert_eq!(item["metadata"]["namespace"], "default");
    assert_eq!(item["spec"]["containers"][0]["name"], "main");
    assert!(
        item["spec"]["containers"][0]["image"]
            .as_str()
            .is_some_and(|i| i.contains("busybox")),
        "{item}"
    );
    assert_eq!(item["status"]["containerStatuses"][0]["containerID"], id);
    assert!(
        !body.contains("\"app\""),
        "the broken pod's container never ran: {body}"
    );

    // describe: a running pod, with its events.
    let out = wait_until("describe shows web's Started event", LONG, || {
        let o = cli(&p, &["describe", "pod", &web]);
        let (out, _) = text(&o);
        (o.status.success() && out.contains("Started")).then_some(out)
    });
    for want in [
        &format!("Name:             {web}\n"),
        "Namespace:        default\n",
        "Status:           Running\n",
        "QoS Class:        BestEffort\n",
        "  main:\n",
        &format!("    Container ID:     {id}\n"),
        "    State:            Running\n",
        "    Ready:            True\n",
        "    Restart Count:    0\n",
        "Labels:           app=web\n",
        "Conditions:\n",
        "Events:\n",
        "Created container: main",
        "Started container main",
    ] {
        assert!(out.contains(want), "{want:?} in\n{out}");
    }
    assert!(!out.contains('\x1b'), "no colours into a pipe:\n{out}");

    // describe: a pod whose image cannot be pulled, and its warnings.
    let out = wait_until("describe shows the pull failure", LONG, || {
        let (out, _) = text(&cli(&p, &["describe", "pod", &broken, "-n", "default"]));
        (out.contains("Warning") && out.contains("Failed")).then_some(out)
    });
    assert!(out.contains("    State:            Waiting\n"), "{out}");
    assert!(
        out.contains("      Reason:         ErrImagePull")
            || out.contains("      Reason:         ImagePullBackOff"),
        "{out}"
    );

    // -o yaml and -o json carry the pod and its events.
    let o = cli(&p, &["describe", "pod", &broken, "-o", "yaml"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let doc: Value = serde_yaml_ng::from_str(&out).expect("describe -o yaml is YAML");
    assert_eq!(doc["kind"], "List");
    assert_eq!(doc["items"][0]["metadata"]["name"], broken.as_str());
    assert!(
        doc["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "Failed"),
        "{out}"
    );
    let (out, _) = text(&cli(&p, &["get", "pods", "-o", "yaml"]));
    let list: Value = serde_yaml_ng::from_str(&out).expect("get pods -o yaml is YAML");
    let json: Value =
        serde_json::from_str(&text(&cli(&p, &["get", "pods", "-o", "json"])).0).unwrap();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2), "{out}");
    assert_eq!(json["items"].as_array().map(Vec::len), Some(2));
    // kubectl's scopes: -A adds NAMESPACE; another namespace has none of
    // them; `get pod NAME` is that pod (-o json: the Pod itself).
    let (out, _) = text(&cli(&p, &["get", "pods", "-A"]));
    assert!(out.starts_with("NAMESPACE "), "{out}");
    assert!(out.contains(&format!("default     {web} ")), "{out}");
    let (out, _) = text(&cli(&p, &["get", "pods", "-n", "kube-system"]));
    assert_eq!(out, "No resources found in kube-system namespace.\n");
    let (out, _) = text(&cli(&p, &["get", "pod", &web, "-o", "json"]));
    let pod: Value = serde_json::from_str(&out).expect("get pod NAME -o json");
    assert_eq!(pod["metadata"]["name"], web.as_str(), "{out}");
    let o = cli(&p, &["get", "pod", "absent"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("pods \"absent\" not found"), "{o:?}");

    let o = cli(&p, &["describe", "pod", "absent"]);
    assert!(!o.status.success());
    assert!(
        text(&o).1.contains("pods \"absent\" not found"),
        "{}",
        text(&o).1
    );

    // get node: capacity, allocatable, and every eviction signal.
    let out = wait_until("get node shows the observed signals", LONG, || {
        let (out, _) = text(&cli(&p, &["get", "node"]));
        out.contains("nodefs.inodesFree").then_some(out)
    });
    for want in [
        &format!("Name: {}\n", p.hostname()),
        "RESOURCE",
        "ALLOCATABLE",
        "\ncpu ",
        "\nmemory ",
        "\nephemeral-storage ",
        "\npods ",
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "memory.available",
        "nodefs.available",
        "nodefs.inodesFree",
        "imagefs.available",
        "pid.available",
        "<100Mi",
        "<1024Mi",
    ] {
        assert!(out.contains(want), "{want:?} in\n{out}");
    }
    let (out, _) = text(&cli(&p, &["get", "node", "-o", "yaml"]));
    let node: Value = serde_yaml_ng::from_str(&out).expect("get node -o yaml is YAML");
    assert_eq!(node["capacity"]["pods"], "110", "{out}");
    assert!(node["allocatable"]["memory"].is_string(), "{out}");
}

/// The lines of `picolet check` for `what`.
fn check_line<'a>(out: &'a str, what: &str) -> &'a str {
    out.lines()
        .find(|l| l.get(6..).is_some_and(|rest| rest.starts_with(what)))
        .unwrap_or_else(|| panic!("a {what:?} line in\n{out}"))
}

#[test]
fn check_passes_the_runtime_and_fails_naming_a_missing_socket() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let config = p.config_path();
    let root = p.root_dir();
    let check = |extra: &[&str]| {
        let o = Command::new(harness::picolet_bin())
            .arg("check")
            .arg("--config")
            .arg(&config)
            .arg("--root-dir")
            .arg(&root)
            .args(extra)
            .output()
            .expect("running picolet check");
        let (out, err) = text(&o);
        (o.status.code(), out, err)
    };

    let (code, out, err) = check(&[]);
    let runtime = check_line(&out, "container runtime");
    assert!(runtime.starts_with("ok "), "{runtime}\n{err}");
    assert!(runtime.contains(&c.endpoint()), "{runtime}");
    for what in [
        "kernel",
        "cgroups",
        "nodefs",
        "clock",
        "static pods",
        "swap",
    ] {
        let l = check_line(&out, what);
        assert!(
            ["ok ", "warn", "fail"].iter().any(|v| l.starts_with(v)),
            "{l}"
        );
    }
    assert!(check_line(&out, "static pods").starts_with("ok "), "{out}");
    // The host decides the other verdicts; the status follows them.
    let any_fail = out.lines().any(|l| l.starts_with("fail"));
    assert_eq!(code, Some(if any_fail { 1 } else { 0 }), "{out}");

    let missing = p.dir().join("no-such.sock");
    let endpoint = format!("unix://{}", missing.display());
    let (code, out, _) = check(&["--container-runtime-endpoint", &endpoint]);
    assert_eq!(code, Some(1), "{out}");
    let runtime = check_line(&out, "container runtime");
    assert!(runtime.starts_with("fail"), "{runtime}");
    assert!(runtime.contains(&endpoint), "names the socket: {runtime}");
}

/// Every line of `picolet check` for `what`.
fn check_lines<'a>(out: &'a str, what: &str) -> Vec<&'a str> {
    out.lines()
        .filter(|l| {
            l.get(6..)
                .is_some_and(|rest| rest.strip_prefix(what).is_some_and(|r| r.starts_with(' ')))
        })
        .collect()
}

/// `lines` with each run of spaces as one (the columns' width depends on
/// the longest check's name).
fn words(lines: &[&str]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// `picolet check --config <dir>/config.yaml --root-dir <dir>/root ARGS`:
/// exit code, stdout, stderr.
fn check_in(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(harness::picolet_bin())
        .arg("check")
        .arg("--config")
        .arg(dir.join("config.yaml"))
        .arg("--root-dir")
        .arg(dir.join("root"))
        .args(args)
        .output()
        .expect("running picolet check");
    let (out, err) = text(&o);
    (o.status.code(), out, err)
}

/// A config dir with a config whose `staticPodPath` holds `manifests`
/// (name, text), whose runtime socket is missing, and `extra` lines.
fn check_dir(manifests: &[(&str, &str)], extra: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("picolet-check.")
        .tempdir()
        .expect("temp dir");
    let m = dir.path().join("manifests");
    std::fs::create_dir(&m).expect("manifest dir");
    for (name, text) in manifests {
        std::fs::write(m.join(name), text).expect("writing a manifest");
    }
    let config = format!(
        "apiVersion: kubelet.config.k8s.io/v1beta1\n\
         kind: KubeletConfiguration\n\
         staticPodPath: {}\n\
         containerRuntimeEndpoint: unix://{}/no-such.sock\n\
         {extra}",
        m.display(),
        dir.path().display()
    );
    std::fs::write(dir.path().join("config.yaml"), config).expect("writing the config");
    dir
}

#[test]
fn check_fails_one_line_per_mistake_a_typo_broken_manifests_and_a_missing_socket() {
    let no_image = WEB.replace("    image: busybox\n", "");
    let dir = check_dir(
        &[
            ("a-web.yaml", WEB),
            ("b-no-image.yaml", &no_image),
            ("c-not-yaml.yaml", "kind: Pod\n: [\n"),
        ],
        "staticPodPth: /etc/kubernetes/manifests\n",
    );
    let (code, out, err) = check_in(dir.path(), &[]);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert_eq!(
        words(&check_lines(&out, "config")),
        [format!(
            "fail config {} line 5: unknown field \"staticPodPth\"; did you mean \"staticPodPath\"?",
            dir.path().join("config.yaml").display()
        )],
        "{out}"
    );
    let pods = check_lines(&out, "static pods");
    let m = dir.path().join("manifests");
    assert_eq!(pods.len(), 3, "{out}");
    assert!(
        words(&pods[..1])[0].starts_with(&format!(
            "fail static pods manifest {}/b-no-image.yaml is invalid: spec.containers[0].image: Required value",
            m.display()
        )),
        "{out}"
    );
    assert!(
        words(&pods[1..2])[0].starts_with(&format!(
            "fail static pods cannot decode manifest {}/c-not-yaml.yaml as YAML",
            m.display()
        )),
        "{out}"
    );
    assert_eq!(
        words(&pods[2..])[0],
        format!("ok static pods {}: 1 of 3 manifests valid", m.display())
    );
    let runtime = check_line(&out, "container runtime");
    assert!(runtime.starts_with("fail"), "{runtime}");
    assert!(runtime.contains("no-such.sock"), "{runtime}");

    // The same lines as one document.
    let (code, out, _) = check_in(dir.path(), &["-o", "json"]);
    assert_eq!(code, Some(1));
    let doc: Value = serde_json::from_str(&out).expect("check -o json is JSON");
    assert_eq!(doc["ok"], false);
    let fails: Vec<&str> = doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["verdict"] == "fail")
        .filter_map(|c| c["check"].as_str())
        .collect();
    assert!(
        ["config", "static pods", "static pods", "container runtime"]
            .iter()
            .all(|w| fails.contains(w)),
        "{out}"
    );
}

#[test]
fn check_shows_the_api_servers_user_for_a_good_kubeconfig_and_fails_a_dead_server() {
    let cp = harness::kube::ControlPlane::shared();
    let dir = check_dir(&[], "");
    let good = cp.node_kubeconfig("check-1");
    let (_, out, err) = check_in(dir.path(), &["--kubeconfig", &good.display().to_string()]);
    let api = words(&[check_line(&out, "API server")]).remove(0);
    assert_eq!(
        api,
        format!(
            "ok API server {}: credentials accepted as system:node:check-1 \
             (groups system:nodes, system:authenticated)",
            cp.apiserver_url().trim_end_matches('/')
        ),
        "{out}\n{err}"
    );

    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let dead = cp.node_kubeconfig_with(
        "check-1",
        harness::kube::Credentials::Files,
        &format!("https://127.0.0.1:{port}"),
    );
    let (code, out, _) = check_in(dir.path(), &["--kubeconfig", &dead.display().to_string()]);
    assert_eq!(code, Some(1), "{out}");
    let api = words(&[check_line(&out, "API server")]).remove(0);
    assert!(
        api.starts_with(&format!(
            "fail API server https://127.0.0.1:{port}: unreachable"
        )),
        "{out}"
    );
}

/// `promtool check metrics` on `text`: its complaints, if any.
fn promtool(what: &str, body: &str) -> Result<(), String> {
    let unpacked = harness::assets::cache_root("tools/bin/promtool");
    let bin = if unpacked.is_file() {
        unpacked
    } else {
        "promtool".into()
    };
    let mut child = Command::new(&bin)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "{} ({e}): run `make promtool` (it unpacks promtool from Debian's prometheus package, installing nothing)",
                bin.display()
            )
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    if o.status.success() && out.trim().is_empty() && err.trim().is_empty() {
        Ok(())
    } else {
        Err(format!("{what}: {out}{err}\n--- scraped:\n{body}"))
    }
}

#[test]
fn every_metrics_endpoint_passes_promtool() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    for i in 0..3 {
        p.write_manifest(
            &format!("web{i}"),
            &WEB.replace("name: web,", &format!("name: web{i},")),
        );
    }
    wait_until("three ready pods, probed", LONG, || {
        let ready = (0..3).all(|i| {
            p.find_pod(&format!("web{i}"))
                .is_some_and(|pod| harness::container_status(&pod, "main")["ready"] == true)
        });
        let (_, probes) = p.get("/metrics/probes");
        (ready && probes.contains("result=\"successful\"")).then_some(())
    });
    // The resource metrics need two CPU samples for some series; any
    // answer must parse, so take the first one with the pods in it.
    wait_until("pods in /metrics/resource", LONG, || {
        let (_, t) = p.get("/metrics/resource");
        t.contains("pod_memory_working_set_bytes{").then_some(())
    });
    let mut problems = Vec::new();
    for path in ["/metrics", "/metrics/probes", "/metrics/resource"] {
        let (status, body) = p.get(path);
        assert_eq!(status, 200, "{path}: {body}");
        if let Err(e) = promtool(path, &body) {
            problems.push(e);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn a_picolet_waiting_for_a_missing_runtime_says_so_and_ends_on_sigterm() {
    let dir = tempfile::Builder::new()
        .prefix("picolet-test.")
        .tempdir()
        .expect("temp dir");
    let at = |name: &str| dir.path().join(name);
    for sub in ["manifests", "logs", "root"] {
        std::fs::create_dir(at(sub)).expect("picolet dirs");
    }
    let endpoint = format!("unix://{}", at("no-such.sock").display());
    std::fs::write(
        at("config.yaml"),
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\n\
             kind: KubeletConfiguration\n\
             containerRuntimeEndpoint: {endpoint}\n\
             staticPodPath: {}\n\
             podLogsDir: {}\n\
             cgroupsPerQOS: false\n\
             port: 0\n\
             healthzPort: 0\n",
            at("manifests").display(),
            at("logs").display()
        ),
    )
    .expect("config");
    let log = std::fs::File::create(at("picolet.log")).expect("log file");
    let mut child = Command::new(harness::picolet_bin())
        .arg("run")
        .arg("--config")
        .arg(at("config.yaml"))
        .arg("--root-dir")
        .arg(at("root"))
        .args(["--hostname-override", "waiting-for-the-runtime"])
        .arg("--admin-socket")
        .arg(at("picolet.sock"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log fd"))
        .stderr(log)
        .spawn()
        .expect("spawning picolet");
    let log = || std::fs::read_to_string(at("picolet.log")).unwrap_or_default();

    for what in ["pods", "node"] {
        let (code, err) = wait_until("the admin socket answers", LONG, || {
            let o = Command::new(harness::picolet_bin())
                .args(["get", what, "--admin-socket"])
                .arg(at("picolet.sock"))
                .output()
                .expect("running picolet get");
            let (_, err) = text(&o);
            (!err.contains("cannot connect")).then_some((o.status.code(), err))
        });
        assert_eq!(
            err.trim_end(),
            format!("picolet: waiting for the runtime at {endpoint}"),
            "get {what}\n{}",
            log()
        );
        assert_eq!(code, Some(1), "get {what}: {err}");
    }

    harness::signal(child.id(), "TERM");
    let status = harness::wait_child(&mut child, LONG);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(
        status.is_some_and(|s| s.success()),
        "SIGTERM ends a picolet that waits for the runtime ({status:?})\n{}",
        log()
    );
    assert!(!at("picolet.sock").exists(), "the admin socket is removed");
}
