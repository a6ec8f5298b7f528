//! `serverTLSBootstrap` on real parts (issue #11): a private etcd +
//! kube-apiserver (Node,RBAC) whose `--kubelet-certificate-authority` is
//! the cluster CA, as in a real cluster, and kube-controller-manager
//! signing with that CA; a real container runtime (`PICOLET_TEST_RUNTIME`);
//! picolet joined with its node credential and `serverTLSBootstrap: true`.
//!
//! kube-controller-manager does not approve `kubernetes.io/kubelet-serving`
//! requests, so the test plays the operator: it finds the node's pending
//! CSR, checks its signer, subject and names, and approves it with
//! `kubectl certificate approve`. Until then the node serves its
//! self-signed certificate (the cluster CA does not verify it); after, the
//! node's port verifies against the cluster CA for the node's address, and
//! `kubectl logs` goes through the API server to the node.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test node_serving --
//! --nocapture`.

mod harness;

use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use harness::kube::{free_port, host_ip, ControlPlane};
use harness::{wait_until, Containerd, Picolet};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(180);

/// `curl` of `url` with extra `args`: the HTTP status (0 when the TLS
/// handshake or the verification failed) and the body and errors.
fn curl(url: &str, args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "30", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .expect("running curl (Debian: apt-get install curl)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        code.trim().parse().unwrap_or(0),
        format!("{body}{}", String::from_utf8_lossy(&out.stderr)),
    )
}

/// `openssl` with `args` and `stdin`: its stdout and stderr.
fn openssl(args: &[&str], stdin: &[u8]) -> String {
    use std::io::Write as _;
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running openssl (Debian: apt-get install openssl)");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The node's kubelet-serving CSRs, oldest first.
fn serving_csrs(cp: &ControlPlane, node: &str) -> Vec<Value> {
    let Some(list) = cp.get_json(&["csr"]) else {
        return Vec::new();
    };
    let user = format!("system:node:{node}");
    let mut csrs: Vec<Value> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| {
            c["spec"]["signerName"] == "kubernetes.io/kubelet-serving"
                && c["spec"]["username"] == user.as_str()
        })
        .cloned()
        .collect();
    csrs.sort_by_key(|c| {
        c["metadata"]["creationTimestamp"]
            .as_str()
            .map(String::from)
    });
    csrs
}

fn pod(node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: greeter\n  namespace: default\n\
         spec:\n  nodeName: {node}\n  automountServiceAccountToken: false\n  \
         terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    \
         image: busybox\n    imagePullPolicy: IfNotPresent\n    \
         command: [\"sh\", \"-c\", \"echo hello from the node; exec sleep 100000\"]\n"
    )
}

#[test]
fn server_tls_bootstrap_serves_a_certificate_of_the_cluster_ca_once_its_csr_is_approved() {
    let dir = tempfile::tempdir().unwrap();
    // The cluster CA exists only once the control plane runs: the API
    // server starts with a file that is then replaced by it.
    let kubelet_ca = dir.path().join("kubelet-ca.crt");
    let placeholder = openssl(
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=placeholder",
            "-keyout",
            &dir.path().join("p.key").display().to_string(),
            "-out",
            &kubelet_ca.display().to_string(),
        ],
        b"",
    );
    assert!(kubelet_ca.is_file(), "{placeholder}");
    let cp = ControlPlane::builder()
        .with_controller_manager()
        .apiserver_arg(&format!(
            "--kubelet-certificate-authority={}",
            kubelet_ca.display()
        ))
        .start();
    std::fs::copy(cp.ca_cert(), &kubelet_ca).unwrap();
    cp.stop_apiserver();
    cp.start_apiserver();

    let c = Containerd::start();
    let ip = host_ip();
    let port = free_port();
    let config = cp.node_api_config(ip, port, 0, "serverTLSBootstrap: true\n");
    let p = Picolet::start_with_args(&c, &config, |p| {
        let mut args = cp.join_args(p.hostname(), ip);
        args.push("--v=4".to_string());
        args
    });
    let node = p.hostname().to_string();
    let base = format!("https://{ip}:{port}");
    let ca = cp.ca_cert().display().to_string();

    // The pending CSR: kubelet's signer, usages, subject and names.
    let csr = wait_until("the node's kubelet-serving CSR", LONG, || {
        serving_csrs(&cp, &node).into_iter().next()
    });
    let name = csr["metadata"]["name"].as_str().unwrap().to_string();
    assert_eq!(
        csr["spec"]["usages"],
        serde_json::json!(["digital signature", "server auth"]),
        "{csr}"
    );
    let request = base64::engine::general_purpose::STANDARD
        .decode(csr["spec"]["request"].as_str().unwrap())
        .unwrap();
    let text = openssl(&["req", "-noout", "-text", "-verify"], &request);
    assert!(
        text.contains(&format!("O = system:nodes, CN = system:node:{node}")),
        "{text}"
    );
    assert!(
        text.contains(&format!("DNS:{node}, IP Address:{ip}")),
        "{text}"
    );
    assert!(csr["status"]["certificate"].is_null(), "{csr}");

    // Pending: the self-signed certificate is served, and the log says so.
    let (code, body) = curl(&format!("{base}/healthz"), &["--cacert", &ca]);
    assert_eq!(
        code, 0,
        "the cluster CA verified a certificate it never issued: {body}"
    );
    let self_signed = p.root_dir().join("pki/kubelet.crt").display().to_string();
    let (code, body) = curl(&format!("{base}/healthz"), &["--cacert", &self_signed]);
    assert_eq!(code, 401, "{body}");
    let log = p.log();
    assert!(
        log.contains(&format!("CertificateSigningRequest {name} created")),
        "{log}"
    );
    assert!(log.contains("self-signed"), "{log}");

    // The operator approves; the signer issues; the live listener swaps.
    cp.kubectl_ok(&["certificate", "approve", &name]);
    wait_until("the node to serve the issued certificate", LONG, || {
        let (code, _) = curl(&format!("{base}/healthz"), &["--cacert", &ca]);
        (code == 401).then_some(())
    });
    let chain = openssl(
        &[
            "s_client",
            "-connect",
            &format!("{ip}:{port}"),
            "-CAfile",
            &ca,
            "-verify_return_error",
        ],
        b"",
    );
    assert!(chain.contains("Verify return code: 0 (ok)"), "{chain}");
    assert!(
        chain.contains(&format!("CN = system:node:{node}"))
            || chain.contains(&format!("CN=system:node:{node}")),
        "{chain}"
    );

    // kubelet's layout: the current symlink names a dated 0600 file.
    let current = p.root_dir().join("pki/kubelet-server-current.pem");
    let target = std::fs::read_link(&current).expect("kubelet-server-current.pem is a symlink");
    let target = target.to_string_lossy().into_owned();
    assert!(
        target.starts_with("kubelet-server-") && target.ends_with(".pem"),
        "{target}"
    );
    let mode = std::fs::metadata(&current).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(p.log().contains(&format!("issued by {name}")));

    // The API server verifies the node with the cluster CA: logs through it.
    cp.apply(&pod(&node));
    let out = wait_until("kubectl logs through the API server", LONG, || {
        let out = cp.kubectl(&["logs", "-n", "default", "greeter"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success() && text.contains("hello")).then_some(text)
    });
    assert_eq!(out, "hello from the node\n");
    let raw = cp.kubectl(&[
        "get",
        "--raw",
        &format!("/api/v1/nodes/{node}/proxy/healthz"),
    ]);
    assert!(raw.status.success(), "{raw:?}");

    // After a restart the issued certificate is reused, with no new CSR.
    let mut p = p;
    p.restart();
    wait_until(
        "the restarted node to serve the issued certificate",
        LONG,
        || {
            let (code, _) = curl(&format!("{base}/healthz"), &["--cacert", &ca]);
            (code == 401).then_some(())
        },
    );
    // The restarted task's first decision is logged: it serves the file.
    let said = format!("serverTLSBootstrap: serving {}", current.display());
    wait_until(
        "the restarted node to say it serves the issued file",
        LONG,
        || p.log().contains(&said).then_some(()),
    );
    assert_eq!(serving_csrs(&cp, &node).len(), 1);
}
