//! Container logs through the API server (issue #11), on real parts: a
//! private etcd + kube-apiserver (Node,RBAC; its kubelet client
//! certificate in `system:masters`), a real container runtime
//! (`PICOLET_TEST_RUNTIME`), picolet joined with its node credential and
//! serving the node API on the host's address, with a small
//! `containerLogMaxSize` so a chatty container's log rotates.
//!
//! `kubectl logs -f` started before a rotation keeps its line numbers
//! consecutive across it; `--tail`, `--timestamps`, `--limit-bytes`,
//! `--since-time` and `--previous` answer as kubelet does. Nothing sleeps:
//! a rotation is seen as a `0.log.<stamp>` file appearing, a restart as
//! the pod's restartCount.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test api_logs --
//! --nocapture`.

mod harness;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::kube::{free_port, host_ip, ControlPlane};
use harness::{wait_until, Containerd, Picolet};

const LONG: Duration = Duration::from_secs(180);

/// A container printing `line N` every ~50 ms; once `/signal/stop` exists
/// it removes it, says `stopping N` and exits (to be restarted).
fn chatty(node: &str, signal: &Path) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: chatty, namespace: default}}
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  volumes:
  - name: signal
    hostPath: {{path: {signal}}}
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    volumeMounts: [{{name: signal, mountPath: /signal}}]
    command: ["sh", "-c", "i=0; while [ ! -e /signal/stop ]; do i=$((i+1)); echo line $i; sleep 0.05; done; rm -f /signal/stop; echo stopping $i"]
"#,
        signal = signal.display()
    )
}

/// The number of a `line N` text, if it is one.
fn number(line: &str) -> Option<u64> {
    line.trim().strip_prefix("line ")?.parse().ok()
}

/// Asserts the `line N` lines of `text` count up by one.
fn assert_consecutive(text: &str) -> Vec<u64> {
    let ns: Vec<u64> = text.lines().filter_map(number).collect();
    for w in ns.windows(2) {
        assert_eq!(w[1], w[0] + 1, "a gap between line {} and {}", w[0], w[1]);
    }
    ns
}

/// The chatty container's log directory under podLogsDir.
fn container_log_dir(logs: &Path) -> Option<PathBuf> {
    std::fs::read_dir(logs)
        .ok()?
        .flatten()
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("default_chatty_")
        })
        .map(|e| e.path().join("main"))
}

fn rotated_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("0.log."))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// The highest `line N` of a CRI-format log file.
fn last_number_in(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .lines()
        .filter_map(|l| l.splitn(4, ' ').nth(3).and_then(number))
        .max()
}

#[test]
fn kubectl_logs_follows_across_a_rotation_and_answers_kubelets_options() {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let ip = host_ip();
    let port = free_port();
    let config = cp.node_api_config(
        ip,
        port,
        0,
        "containerLogMaxSize: 10Ki\ncontainerLogMaxFiles: 3\n",
    );
    let p = Picolet::start_with_args(&c, &config, |p| cp.join_args(p.hostname(), ip));
    let node = p.hostname().to_string();
    let signal = tempfile::tempdir().unwrap();
    cp.apply(&chatty(&node, signal.path()));
    let logs = |args: &[&str]| {
        let mut all = vec!["logs", "-n", "default", "chatty"];
        all.extend_from_slice(args);
        let out = cp.kubectl(&all);
        assert!(
            out.status.success(),
            "kubectl {all:?}: {out:?}\n{}",
            p.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    wait_until("the first lines through the API server", LONG, || {
        let out = cp.kubectl(&["logs", "-n", "default", "chatty"]);
        (out.status.success() && String::from_utf8_lossy(&out.stdout).contains("line 3"))
            .then_some(())
    });

    // -f from before the first rotation to past it.
    let dir = wait_until("the container's log dir", LONG, || {
        container_log_dir(&p.logs_dir())
    });
    let before = rotated_files(&dir);
    let mut follow = Command::new(harness::kube::assets::binary("kubectl"))
        .arg("--kubeconfig")
        .arg(cp.admin_kubeconfig())
        .args(["logs", "-f", "-n", "default", "chatty"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("running kubectl");
    let seen = Arc::new(Mutex::new(String::new()));
    let reader = {
        let seen = seen.clone();
        let out = follow.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let mut s = seen.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        })
    };
    let first = wait_until("a rotation (0.log.<stamp>)", LONG, || {
        rotated_files(&dir)
            .into_iter()
            .find(|f| !before.contains(f))
    });
    let rotation_point = last_number_in(&first).expect("lines in the rotated file");
    wait_until("-f to pass the rotation point", LONG, || {
        let s = seen.lock().unwrap();
        s.lines()
            .filter_map(number)
            .any(|n| n > rotation_point + 20)
            .then_some(())
    });
    let _ = follow.kill();
    let _ = follow.wait();
    let _ = reader.join();
    let followed = seen.lock().unwrap().clone();
    let ns = assert_consecutive(&followed);
    assert!(ns.contains(&rotation_point) && ns.contains(&(rotation_point + 1)));

    // A plain read covers the retained files, in order, with no gap.
    assert_consecutive(&logs(&[]));

    // --tail=5: the last five lines.
    let tail = logs(&["--tail=5"]);
    assert_eq!(tail.lines().count(), 5, "{tail}");
    assert_eq!(assert_consecutive(&tail).len(), 5);

    // --timestamps: RFC3339Nano, a space, the line.
    let stamped = logs(&["--tail=20", "--timestamps"]);
    let times: Vec<(String, u64)> = stamped
        .lines()
        .map(|l| {
            let (t, rest) = l.split_once(' ').unwrap();
            assert!(
                t.ends_with('Z') && t.contains('T') && t.contains('.'),
                "{l}"
            );
            (t.to_string(), number(rest).unwrap())
        })
        .collect();
    assert_eq!(times.len(), 20);

    // --since-time (the API server keeps seconds): from that second on.
    let (t, n) = times[10].clone();
    let second = format!("{}Z", &t[..19]);
    let since = logs(&[&format!("--since-time={second}"), "--timestamps"]);
    let first_line = since.lines().next().unwrap();
    assert!(
        first_line[..19] >= second[..19],
        "{first_line} before {second}"
    );
    assert!(
        since.lines().any(|l| l.ends_with(&format!(" line {n}"))),
        "{since}"
    );
    let none = logs(&["--since-time=2099-01-01T00:00:00Z"]);
    assert_eq!(none, "");

    // --limit-bytes: exactly that many bytes.
    let limited = logs(&["--limit-bytes=12"]);
    assert_eq!(limited.len(), 12, "{limited:?}");
    assert!(limited.starts_with("line "), "{limited:?}");

    // --previous, once the container exited and was restarted.
    let out = cp.kubectl(&["logs", "-n", "default", "chatty", "--previous"]);
    assert!(!out.status.success(), "no previous instance yet: {out:?}");
    std::fs::write(signal.path().join("stop"), "").unwrap();
    wait_until("the container to be restarted", LONG, || {
        let pod = cp.get_json(&["pod", "-n", "default", "chatty"])?;
        let count = pod["status"]["containerStatuses"][0]["restartCount"].as_u64()?;
        (count >= 1).then_some(())
    });
    let previous = logs(&["--previous"]);
    let last = previous.lines().last().unwrap_or_default();
    assert!(last.starts_with("stopping "), "{previous}");
    assert_consecutive(&previous);
}
