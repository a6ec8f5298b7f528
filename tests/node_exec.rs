//! exec, attach and port-forward on real parts (issue #11): a private
//! etcd + kube-apiserver, a real containerd or CRI-O (its streaming server
//! on `127.0.0.1:0`), and picolet relaying each upgraded connection
//! (SPDY from the API server, WebSocket from `picolet exec`) to the
//! runtime's streaming URL. Nothing mocked: `kubectl exec` and `kubectl
//! port-forward` go through the API server's node proxy, `picolet exec`
//! through the admin socket with no API server at all.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test node_exec`
//! (`PICOLET_TEST_RUNTIME=crio` for CRI-O).

mod harness;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use harness::kube::{free_port, host_ip, ControlPlane};
use harness::{wait_until, Containerd, Picolet};

const LONG: Duration = Duration::from_secs(120);

/// A throwaway self-signed certificate: the API server's placeholder
/// `--kubelet-certificate-authority` until picolet has made its own.
fn placeholder_ca(dir: &Path) -> std::path::PathBuf {
    let cert = dir.join("kubelet-ca.crt");
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:P-256", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=placeholder", "-keyout"])
        .arg(dir.join("placeholder.key"))
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("running openssl (install the openssl package)");
    assert!(out.status.success(), "{out:?}");
    cert
}

/// Runs `cmd` with `input` on its stdin; its output.
/// The longest one exec session of these tests may take: a session that
/// hangs fails the test instead of holding CI until its own limit.
const SESSION_DEADLINE: Duration = Duration::from_secs(90);

/// Runs `cmd` with `input` on its stdin (then closed), or no stdin;
/// kills it and panics if it has not exited by [`SESSION_DEADLINE`].
fn run_bounded(mut cmd: Command, input: Option<&[u8]>) -> Output {
    let mut child = cmd
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning");
    if let Some(input) = input {
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input).unwrap();
        drop(stdin);
    }
    let read = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = read(
        child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn Read + Send>),
    );
    let status = harness::poll_until(SESSION_DEADLINE, || child.try_wait().ok().flatten());
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{cmd:?} did not exit within {SESSION_DEADLINE:?}");
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn with_stdin(cmd: Command, input: &[u8]) -> Output {
    run_bounded(cmd, Some(input))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `picolet exec ARGS` on `p`'s admin socket.
fn picolet_exec(p: &Picolet, args: &[&str], input: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(harness::picolet_bin());
    cmd.arg("exec")
        .arg("--admin-socket")
        .arg(p.admin_socket())
        .args(args);
    run_bounded(cmd, input)
}

const SLEEPER: &str = "apiVersion: v1
kind: Pod
metadata: {name: sleeper}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: [\"sleep\", \"100000\"]
";

#[test]
fn picolet_exec_runs_commands_in_a_static_pod_with_no_api_server() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    p.write_manifest("sleeper", SLEEPER);
    let pod = format!("sleeper-{}", p.hostname());
    let out = wait_until("picolet exec answers in the running pod", LONG, || {
        let out = picolet_exec(&p, &[&pod, "--", "echo", "hello"], None);
        out.status.success().then_some(out)
    });
    assert_eq!(text(&out.stdout), "hello\n");

    // stderr apart from stdout, and the exit status propagated.
    let out = picolet_exec(
        &p,
        &[
            &pod,
            "-c",
            "main",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 3",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(text(&out.stdout), "out\n");
    assert_eq!(text(&out.stderr), "err\n");

    // stdin: a line read by the command, and the end of stdin passed on:
    // `cat` finishes (SPDY closes the stdin stream alone, on every runtime).
    for (script, input, want) in [
        ("read l; echo got:$l", "piped\n", "got:piped\n"),
        (
            "cat; echo done",
            "line one\nline two\n",
            "line one\nline two\ndone\n",
        ),
    ] {
        let args = [pod.as_str(), "-i", "--", "sh", "-c", script];
        let out = picolet_exec(&p, &args, Some(input.as_bytes()));
        assert!(out.status.success(), "{out:?}\n{}", p.log());
        assert_eq!(text(&out.stdout), want);
    }

    // -t on a real terminal (util-linux `script` gives the CLI a pty): the
    // command has a terminal of its own. Without one, kubectl's warning.
    assert!(
        Command::new("script").arg("--version").output().is_ok(),
        "the -t case needs util-linux's `script`: apt-get install bsdutils"
    );
    // CRI-O can drop a short-lived TTY exec's last output when the command
    // exits (cri-o/cri-o#8483; kubectl through kubelet loses it the same
    // way), so a session that ended cleanly but short is run again, up to
    // three times; a wrong answer fails at once.
    let mut shown = Vec::new();
    for _ in 0..3 {
        let mut cmd = Command::new("script");
        cmd.args(["-q", "-e", "-c"])
            .arg(format!(
                "{} exec --admin-socket {} -t {pod} -- sh -c 'tty; test -t 1 && echo on-a-tty'",
                harness::picolet_bin().display(),
                p.admin_socket().display()
            ))
            .arg("/dev/null");
        let out = run_bounded(cmd, None);
        assert!(out.status.success(), "{out:?}\n{}", p.log());
        let got = text(&out.stdout);
        assert!(got.starts_with("/dev/pts/") || got.is_empty(), "{got:?}");
        let whole = got.contains("on-a-tty");
        shown.push(got);
        if whole {
            break;
        }
    }
    assert!(
        shown.last().is_some_and(|t| t.contains("on-a-tty")),
        "no TTY session in three showed the whole output: {shown:?}"
    );
    let out = picolet_exec(&p, &[&pod, "-t", "--", "echo", "plain"], None);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text(&out.stdout), "plain\n");
    assert!(text(&out.stderr).contains("Unable to use a TTY"), "{out:?}");

    // Refusals: kubelet's texts, the CLI exits non-zero with them.
    let out = picolet_exec(&p, &["absent", "-c", "main", "--", "true"], None);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("pod does not exist"), "{out:?}");
    let out = picolet_exec(&p, &[&pod, "-c", "nope", "--", "true"], None);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("container \"nope\" not found"),
        "{out:?}"
    );
    let out = picolet_exec(&p, &[&pod, "--", "/no/such/binary"], None);
    assert!(!out.status.success(), "{out:?}");
    // kubectl's form: `error: <the runtime's message>`, exit 1 when the
    // command could not run at all (or the command's own code).
    let err = text(&out.stderr);
    if out.status.code() == Some(1) {
        assert!(err.starts_with("error: "), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
    assert!(!err.contains("malformed"), "{err}");
}

fn api_pod(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  \
         nodeName: {node}\n  automountServiceAccountToken: false\n  \
         terminationGracePeriodSeconds: 1\n  containers:\n  - name: web\n    image: busybox\n    \
         imagePullPolicy: IfNotPresent\n    \
         command: [\"sh\", \"-c\", \"mkdir -p /www && echo hello-from-pod > /www/index.html && exec httpd -f -p 80 -h /www\"]\n"
    )
}

/// GET `/` on `127.0.0.1:port` with a raw HTTP/1.0 request: the answer.
fn fetch(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    s.write_all(b"GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

#[test]
fn kubectl_exec_and_port_forward_reach_a_pod_through_the_node_api() {
    let dir = tempfile::tempdir().unwrap();
    let kubelet_ca = placeholder_ca(dir.path());
    let cp = ControlPlane::builder()
        .apiserver_arg(&format!(
            "--kubelet-certificate-authority={}",
            kubelet_ca.display()
        ))
        .start();
    let c = Containerd::start();
    let ip = host_ip();
    let port = free_port();
    let config = cp.node_api_config(ip, port, 0, "");
    let p = Picolet::start_with_args(&c, &config, |p| {
        let mut args = cp.join_args(p.hostname(), ip);
        args.push("--v=4".to_string());
        args
    });
    let node = p.hostname().to_string();
    wait_until("the Node with the node API's port", LONG, || {
        let n = cp.get_json(&["node", &node])?;
        (n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == port).then_some(())
    });
    let serving = p.root_dir().join("pki/kubelet.crt");
    assert!(serving.is_file(), "{}", p.log());

    // picolet itself refuses exec to a user without nodes/proxy.
    let nobody = cp.pki().client("nobody", "nobody", &["outsiders"]);
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "30", "-X", "POST", "--cacert"])
        .arg(&serving)
        .arg("--cert")
        .arg(&nobody.cert)
        .arg("--key")
        .arg(&nobody.key)
        .arg(format!(
            "https://{ip}:{port}/exec/default/x/web?command=true&stdout=1"
        ))
        .output()
        .expect("running curl");
    assert_eq!(
        text(&out.stdout),
        "Forbidden (user=nobody, verb=create, resource=nodes, subresource(s)=[proxy])\n",
        "{out:?}"
    );

    // The API server trusts the node's certificate from now on.
    fs::copy(&serving, &kubelet_ca).unwrap();
    cp.stop_apiserver();
    cp.start_apiserver();
    cp.apply(&api_pod("web", &node));
    wait_until("the pod runs", LONG, || {
        let pod = cp.get_json(&["pod", "web"])?;
        (pod["status"]["phase"] == "Running").then_some(())
    });

    let mut last = String::new();
    let out = harness::poll_until(LONG, || {
        let out = cp.kubectl(&["exec", "web", "--", "cat", "/etc/hostname"]);
        last = text(&out.stderr);
        out.status.success().then_some(out)
    })
    .unwrap_or_else(|| {
        panic!(
            "kubectl exec did not reach the pod: {last}\n{}",
            harness::tail(&p.log_path(), 60)
        )
    });
    assert_eq!(text(&out.stdout).trim(), "web");

    let mut cmd = Command::new(harness::kube::assets::binary("kubectl"));
    cmd.arg("--kubeconfig").arg(cp.admin_kubeconfig()).args([
        "exec",
        "-i",
        "web",
        "--",
        "sh",
        "-c",
        "cat; echo done",
    ]);
    let out = with_stdin(cmd, b"line one\nline two\n");
    assert!(out.status.success(), "{out:?}\n{}", p.log());
    assert_eq!(text(&out.stdout), "line one\nline two\ndone\n");

    let out = cp.kubectl(&["exec", "web", "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7), "{out:?}");

    // A user without RBAC for pods/exec is refused by the API server.
    let out = cp.kubectl(&["--as=someone", "exec", "web", "--", "true"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("forbidden") || err.contains("Forbidden"),
        "{err}"
    );

    // port-forward: a page from the pod's httpd through a local port.
    let local = free_port();
    let mut forward = Command::new(harness::kube::assets::binary("kubectl"))
        .arg("--kubeconfig")
        .arg(cp.admin_kubeconfig())
        .args(["port-forward", "pod/web", &format!("{local}:80")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running kubectl port-forward");
    let mut ready = String::new();
    let mut stdout = forward.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    while !ready.contains('\n') && stdout.read(&mut byte).unwrap_or(0) == 1 {
        ready.push(byte[0] as char);
    }
    assert!(ready.starts_with("Forwarding from"), "{ready:?}");
    let page = wait_until("a page through the forwarded port", LONG, || {
        fetch(local).filter(|p| p.contains("hello-from-pod"))
    });
    assert!(page.starts_with("HTTP/1."), "{page}");
    let _ = forward.kill();
    let _ = forward.wait();

    // The node declares `ExtendWebSocketsToKubelet`, so the API server
    // passed kubectl's WebSocket streams to the node API as they came,
    // not translated to SPDY: the relay above carried them.
    let metrics = text(&cp.kubectl(&["get", "--raw", "/metrics"]).stdout);
    for subresource in ["exec", "portforward"] {
        let proxied = format!(
            "apiserver_websocket_streaming_requests_total{{proxy_type=\"proxied_to_kubelet\",subresource=\"{subresource}\"}}"
        );
        assert!(
            metrics.lines().any(|l| l.starts_with(&proxied)),
            "no {proxied} in the API server's metrics"
        );
    }
}
