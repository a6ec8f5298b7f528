//! Probes and lifecycle hooks on a real container runtime (containerd or
//! CRI-O, as `PICOLET_TEST_RUNTIME` says).
//!
//! Each test runs picolet against a private runtime with busybox
//! containers whose health the test controls from the host (files in a
//! hostPath directory) or by timing inside the container, and checks what
//! picolet reports: Ready conditions, restart counts, last states, and the
//! side effects of hooks.

mod harness;

use std::path::Path;
use std::time::Duration;

use harness::{container_status, wait_until, Containerd, Picolet};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);

fn condition(pod: &Value, kind: &str) -> Option<String> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str().map(str::to_string))
}

/// `prober_probe_total` of one probe type and result, from GET /metrics:
/// the count of probes run, which is how a test knows that time passed with
/// probes running (0 before the first).
fn probe_total(p: &Picolet, probe_type: &str, result: &str) -> u64 {
    let series = format!("prober_probe_total{{probe_type=\"{probe_type}\",result=\"{result}\"}}");
    p.metric(&series).unwrap_or(0.0) as u64
}

fn restarts(pod: &Value, name: &str) -> i64 {
    container_status(pod, name)["restartCount"]
        .as_i64()
        .unwrap_or(-1)
}

fn pod_yaml(name: &str, host_dir: &Path, container: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: 5\n  containers:\n{container}  volumes:\n  - name: host\n    hostPath: {{path: {}}}\n",
        host_dir.display()
    )
}

fn host_dir(p: &Picolet, name: &str) -> std::path::PathBuf {
    let d = p.dir().join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_liveness_failure_restarts_the_container_and_says_why() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let dir = host_dir(&p, "live");
    let container = r#"  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "touch /tmp/healthy; sleep 4; rm /tmp/healthy; sleep 100000"]
    livenessProbe:
      exec: {command: ["test", "-f", "/tmp/healthy"]}
      periodSeconds: 1
      failureThreshold: 2
    volumeMounts: [{name: host, mountPath: /host}]
"#;
    p.write_manifest("live", &pod_yaml("live", &dir, container));
    let pod = wait_until(
        "the container is restarted after failing liveness",
        LONG,
        || {
            let pod = p.find_pod("live")?;
            (restarts(&pod, "main") >= 1).then_some(pod)
        },
    );
    let last = &container_status(&pod, "main")["lastState"]["terminated"];
    assert!(
        last["message"]
            .as_str()
            .unwrap_or("")
            .contains("failed liveness probe"),
        "{last}"
    );
    assert!(
        p.log().contains("Unhealthy"),
        "the Unhealthy message is logged"
    );
}

#[test]
fn a_readiness_flip_changes_the_ready_condition_and_does_not_restart() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let dir = host_dir(&p, "ready");
    let container = r#"  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "100000"]
    readinessProbe:
      exec: {command: ["test", "-f", "/host/ready"]}
      periodSeconds: 1
      failureThreshold: 1
    volumeMounts: [{name: host, mountPath: /host}]
"#;
    p.write_manifest("ready", &pod_yaml("ready", &dir, container));
    let wait_ready = |want: &str| {
        wait_until(&format!("Ready={want}"), LONG, || {
            let pod = p.find_pod("ready")?;
            let running = container_status(&pod, "main")["state"]["running"].is_object();
            (running
                && condition(&pod, "Ready").as_deref() == Some(want)
                && condition(&pod, "ContainersReady").as_deref() == Some(want))
            .then_some(pod)
        })
    };
    wait_ready("False");
    std::fs::write(dir.join("ready"), "").unwrap();
    let pod = wait_ready("True");
    assert_eq!(container_status(&pod, "main")["ready"], true);
    std::fs::remove_file(dir.join("ready")).unwrap();
    let pod = wait_ready("False");
    assert_eq!(
        restarts(&pod, "main"),
        0,
        "not-ready containers keep running"
    );
    // The table shows it too.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_picolet"))
        .args(["get", "pods", "--admin-socket"])
        .arg(p.admin_socket())
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("ready-") && l.contains("0/1") && l.contains("Running")),
        "{table}"
    );
}

fn slow_starter(name: &str, dir: &Path, startup: bool) -> String {
    let startup_probe = if startup {
        "    startupProbe:\n      exec: {command: [\"test\", \"-f\", \"/tmp/started\"]}\n      periodSeconds: 1\n      failureThreshold: 60\n"
    } else {
        ""
    };
    let container = format!(
        "  - name: main\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", \"sleep 8; touch /tmp/started; sleep 100000\"]\n{startup_probe}    livenessProbe:\n      exec: {{command: [\"test\", \"-f\", \"/tmp/started\"]}}\n      periodSeconds: 1\n      failureThreshold: 2\n    volumeMounts: [{{name: host, mountPath: /host}}]\n"
    );
    pod_yaml(name, dir, &container)
}

#[test]
fn a_slow_starter_survives_with_a_startup_probe_and_is_killed_without_one() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let dir = host_dir(&p, "slow");
    p.write_manifest("patient", &slow_starter("patient", &dir, true));
    p.write_manifest("hasty", &slow_starter("hasty", &dir, false));
    wait_until(
        "the pod without a startup probe is killed by liveness",
        LONG,
        || (restarts(&p.find_pod("hasty")?, "main") >= 1).then_some(()),
    );
    // hasty has made its point; with it gone, every liveness probe counted
    // below is patient's.
    p.remove_manifest("hasty");
    wait_until("the pod without a startup probe is gone", LONG, || {
        p.find_pod("hasty").is_none().then_some(())
    });
    let patient = wait_until("the pod with a startup probe has started", LONG, || {
        let pod = p.find_pod("patient")?;
        (container_status(&pod, "main")["started"] == true).then_some(pod)
    });
    // Liveness now runs, and passes: four more successful probes, while two
    // failures (its failureThreshold) would have killed the container.
    let passed = probe_total(&p, "Liveness", "successful");
    wait_until("patient's liveness probe passes 4 more times", LONG, || {
        (probe_total(&p, "Liveness", "successful") >= passed + 4).then_some(())
    });
    let patient_now = p.find_pod("patient").unwrap();
    assert_eq!(restarts(&patient_now, "main"), 0);
    assert_eq!(
        container_status(&patient, "main")["containerID"],
        container_status(&patient_now, "main")["containerID"]
    );
}

#[test]
fn hooks_run_post_start_after_start_and_pre_stop_before_termination() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let dir = host_dir(&p, "hooks");
    let container = r#"  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'echo term >> /host/events; exit 0' TERM; while true; do sleep 1; done"]
    lifecycle:
      postStart:
        exec: {command: ["sh", "-c", "echo post-start >> /host/events"]}
      preStop:
        exec: {command: ["sh", "-c", "echo pre-stop >> /host/events; sleep 1"]}
    volumeMounts: [{name: host, mountPath: /host}]
"#;
    p.write_manifest("hooks", &pod_yaml("hooks", &dir, container));
    wait_until("postStart ran", LONG, || {
        std::fs::read_to_string(dir.join("events"))
            .ok()?
            .contains("post-start")
            .then_some(())
    });
    p.remove_manifest("hooks");
    wait_until("the pod is gone", LONG, || {
        p.find_pod("hooks").is_none().then_some(())
    });
    let events = std::fs::read_to_string(dir.join("events")).unwrap();
    let lines: Vec<&str> = events.lines().collect();
    assert_eq!(
        lines,
        ["post-start", "pre-stop", "term"],
        "preStop runs before the TERM signal"
    );
}

#[test]
fn a_failing_post_start_hook_kills_the_container() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let dir = host_dir(&p, "poststart");
    let container = r#"  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "100000"]
    lifecycle:
      postStart:
        exec: {command: ["false"]}
    volumeMounts: [{name: host, mountPath: /host}]
"#;
    p.write_manifest("poststart", &pod_yaml("poststart", &dir, container));
    wait_until("the container is killed and restarted", LONG, || {
        (restarts(&p.find_pod("poststart")?, "main") >= 1).then_some(())
    });
    assert!(p.log().contains("postStart hook"), "logged");
}

#[test]
fn http_tcp_and_exec_probes_work_and_their_timeouts_are_honoured() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let dir = host_dir(&p, "kinds");
    let containers = r#"  - name: web
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 8080 -h /www"]
    ports: [{name: http, containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /healthz, port: http, httpHeaders: [{name: X-Probe, value: picolet}]}
      periodSeconds: 1
    livenessProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
    volumeMounts: [{name: host, mountPath: /host}]
  - name: slowexec
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "100000"]
    readinessProbe:
      exec: {command: ["sleep", "5"]}
      timeoutSeconds: 1
      periodSeconds: 2
    volumeMounts: [{name: host, mountPath: /host}]
  - name: silent
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "while true; do nc -l -p 9090 >/dev/null; done"]
    readinessProbe:
      httpGet: {path: /, port: 9090}
      timeoutSeconds: 1
      periodSeconds: 2
    volumeMounts: [{name: host, mountPath: /host}]
  - name: redirect
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "while true; do printf 'HTTP/1.1 302 Found\\r\\nLocation: http://192.0.2.1/elsewhere\\r\\nContent-Length: 5\\r\\nConnection: close\\r\\n\\r\\nmoved' | nc -l -p 9191 >/dev/null; done"]
    readinessProbe:
      httpGet: {path: /, port: 9191}
      periodSeconds: 1
    volumeMounts: [{name: host, mountPath: /host}]
"#;
    p.write_manifest("kinds", &pod_yaml("kinds", &dir, containers));
    wait_until("httpGet readiness makes web ready", LONG, || {
        let pod = p.find_pod("kinds")?;
        (container_status(&pod, "web")["ready"] == true).then_some(())
    });
    // A redirect to another host is not followed: the probe passes, with
    // kubelet's ProbeWarning event.
    let warning = wait_until("redirect: ready, with a ProbeWarning", LONG, || {
        let pod = p.find_pod("kinds")?;
        (container_status(&pod, "redirect")["ready"] == true).then_some(())?;
        let (_, body) = p.get("/events");
        let list: Value = serde_json::from_str(&body).ok()?;
        list["items"]
            .as_array()?
            .iter()
            .find(|e| {
                e["reason"] == "ProbeWarning"
                    && e["involvedObject"]["fieldPath"] == "spec.containers{redirect}"
            })
            .cloned()
    });
    assert_eq!(warning["type"], "Warning");
    assert_eq!(
        warning["message"],
        "Readiness probe warning: Probe terminated redirects, Response body: moved"
    );
    // The other two stay unready: their probes time out. web's probes now
    // pass, so every failed readiness probe from here on is theirs; six are
    // at least three rounds (periodSeconds: 2), longer than `sleep 5` would
    // take to pass if slowexec's timeout were not honoured.
    let failed = probe_total(&p, "Readiness", "failed");
    wait_until(
        "slowexec and silent fail 6 more readiness probes",
        LONG,
        || (probe_total(&p, "Readiness", "failed") >= failed + 6).then_some(()),
    );
    let pod = p.find_pod("kinds").unwrap();
    assert_eq!(container_status(&pod, "slowexec")["ready"], false);
    assert_eq!(container_status(&pod, "silent")["ready"], false);
    assert_eq!(condition(&pod, "Ready").as_deref(), Some("False"));
    for name in ["web", "slowexec", "silent", "redirect"] {
        assert_eq!(restarts(&pod, name), 0, "{name} was not restarted");
    }
    let (status, metrics) = p.get("/metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("prober_probe_total{probe_type=\"Readiness\",result=\"failed\"}"),
        "{metrics}"
    );
}

#[test]
fn a_grpc_probe_follows_the_health_service_as_it_flips() {
    let c = Containerd::start();
    // Fails, naming what to install, when the image cannot be built here.
    c.import_test_image("grpc-health");
    let p = Picolet::start(&c);
    let dir = host_dir(&p, "grpc");
    let container = r#"  - name: health
    image: docker.io/picolet/grpc-health:test
    imagePullPolicy: Never
    ports: [{name: grpc, containerPort: 50051}]
    readinessProbe:
      grpc: {port: 50051}
      periodSeconds: 1
      failureThreshold: 1
    volumeMounts: [{name: host, mountPath: /tmp}]
"#;
    p.write_manifest("grpc", &pod_yaml("grpc", &dir, container));
    let ready = |want: bool| {
        wait_until(&format!("grpc readiness {want}"), LONG, || {
            let pod = p.find_pod("grpc")?;
            (container_status(&pod, "health")["ready"] == want
                && container_status(&pod, "health")["state"]["running"].is_object())
            .then_some(pod)
        })
    };
    ready(true);
    std::fs::write(dir.join("not-serving"), "").unwrap();
    ready(false);
    std::fs::remove_file(dir.join("not-serving")).unwrap();
    let pod = ready(true);
    assert_eq!(restarts(&pod, "health"), 0);
}
