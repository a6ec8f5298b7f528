//! TLS bootstrap (issue #9), on real parts: a private etcd +
//! kube-apiserver (Node,RBAC, NodeRestriction, `--enable-bootstrap-token-auth`)
//! and kube-controller-manager (bootstrap-token, CSR approving and signing
//! controllers, signing with the cluster CA), real containerd. The
//! bootstrap token Secret and the RBAC bindings are kubeadm's. A fresh
//! picolet with only `--bootstrap-kubeconfig` gets its certificate through
//! a CertificateSigningRequest and registers its Node with it.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test api_bootstrap --
//! --test-threads=2`.

mod harness;

use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use harness::kube::ControlPlane;
use harness::{wait_until, Containerd, Picolet};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);
const TOKEN_ID: &str = "abcdef";
const TOKEN_SECRET: &str = "0123456789abcdef";

/// What `kubeadm init` creates for bootstrap tokens: the token Secret and
/// the three ClusterRoleBindings.
fn kubeadm_bootstrap_objects() -> String {
    format!(
        r#"apiVersion: v1
kind: Secret
metadata:
  name: bootstrap-token-{TOKEN_ID}
  namespace: kube-system
type: bootstrap.kubernetes.io/token
stringData:
  token-id: {TOKEN_ID}
  token-secret: {TOKEN_SECRET}
  usage-bootstrap-authentication: "true"
  usage-bootstrap-signing: "true"
  auth-extra-groups: system:bootstrappers:kubeadm:default-node-token
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:kubelet-bootstrap
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:node-bootstrapper
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: system:bootstrappers:kubeadm:default-node-token
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:node-autoapprove-bootstrap
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:certificates.k8s.io:certificatesigningrequests:nodeclient
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: system:bootstrappers:kubeadm:default-node-token
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:node-autoapprove-certificate-rotation
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:certificates.k8s.io:certificatesigningrequests:selfnodeclient
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: system:nodes
"#
    )
}

fn get(cp: &ControlPlane, args: &[&str]) -> Option<Value> {
    cp.get_json(args)
}

/// A control plane with bootstrap tokens and the controller-manager, the
/// kubeadm objects applied; `cm_args` are extra controller-manager flags.
fn control_plane(cm_args: &[&str]) -> ControlPlane {
    let mut b = ControlPlane::builder()
        .with_controller_manager()
        .apiserver_arg("--enable-bootstrap-token-auth=true");
    for a in cm_args {
        b = b.controller_manager_arg(a);
    }
    let cp = b.start();
    cp.apply(&kubeadm_bootstrap_objects());
    cp
}

/// A fresh picolet with only `--bootstrap-kubeconfig` (and the
/// `--kubeconfig` path it is to write), plus `extra` flags.
fn start_bootstrapping(cp: &ControlPlane, c: &Containerd, extra: &[&str]) -> Picolet {
    let extra: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
    Picolet::start_with_args(c, "", |p| {
        let bootstrap = p.dir().join("bootstrap-kubelet.conf");
        std::fs::write(
            &bootstrap,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\ncontexts:\n- name: b\n  context:\n    cluster: c\n    user: tls-bootstrap-token-user\ncurrent-context: b\nusers:\n- name: tls-bootstrap-token-user\n  user:\n    token: {TOKEN_ID}.{TOKEN_SECRET}\n",
                cp.apiserver_url(),
                cp.ca_cert().display()
            ),
        )
        .unwrap();
        let mut args = vec![
            "--bootstrap-kubeconfig".to_string(),
            bootstrap.display().to_string(),
            "--kubeconfig".to_string(),
            p.dir().join("kubelet.conf").display().to_string(),
        ];
        args.extend(extra);
        args
    })
}

fn is_ready(n: &Value) -> bool {
    n["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn wait_ready(cp: &ControlPlane, node: &str) -> Value {
    wait_until("the bootstrapped Node to be Ready", LONG, || {
        get(cp, &["node", node]).filter(is_ready)
    })
}

#[test]
fn a_fresh_node_joins_with_a_bootstrap_token_alone_and_becomes_ready_with_an_issued_certificate() {
    let cp = control_plane(&[]);
    let c = Containerd::start();
    let p = start_bootstrapping(&cp, &c, &[]);
    let node = p.hostname().to_string();
    let ready = wait_ready(&cp, &node);
    assert_eq!(ready["metadata"]["name"], node.as_str());
    // The CSR was made by the bootstrap token, for this node, and approved.
    let csrs = get(&cp, &["csr"]).expect("csr list");
    let ours = csrs["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["spec"]["username"] == format!("system:bootstrap:{TOKEN_ID}"))
        .unwrap_or_else(|| panic!("no CSR by the bootstrap token: {csrs}"));
    assert_eq!(
        ours["spec"]["signerName"],
        "kubernetes.io/kube-apiserver-client-kubelet"
    );
    assert!(ours["status"]["certificate"].as_str().is_some());
    let pem = p.root_dir().join("pki/kubelet-client-current.pem");
    let mode = std::fs::metadata(&pem).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", pem.display());
    let text = std::fs::read_to_string(&pem).unwrap();
    assert!(text.contains("BEGIN CERTIFICATE") && text.contains("BEGIN PRIVATE KEY"));
    // The node's own identity works: it may read its Node.
    let out = cp.kubectl_as(&p.dir().join("kubelet.conf"), &["get", "node", &node]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The serial number and validity of the client certificate in `pem`, as
/// openssl prints them (`serial=..`, `notBefore=..`, `notAfter=..`).
fn certificate_facts(pem: &std::path::Path) -> Option<(String, String)> {
    let out = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-serial", "-startdate", "-enddate", "-in"])
        .arg(pem)
        .output()
        .expect("openssl is needed by this test (make deps)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let serial = text.lines().find_map(|l| l.strip_prefix("serial="))?;
    Some((serial.to_string(), text))
}

fn lease_renew_time(cp: &ControlPlane, node: &str) -> Option<String> {
    let l = get(cp, &["lease", "-n", "kube-node-lease", node])?;
    l["spec"]["renewTime"].as_str().map(str::to_string)
}

#[test]
fn with_rotate_certificates_the_client_certificate_is_renewed_and_the_node_stays_ready() {
    // kube-controller-manager's signer backdates notBefore by 5 min and,
    // for a lifetime under 8 h, does not move notAfter: a 3 min signing
    // duration gives notBefore = issue - 5 min, notAfter = issue + 3 min,
    // so kubelet's 70-90 % deadline falls 36 s to 132 s after the issue.
    // Measured with v1.36.2: notBefore 06:08:59, notAfter 06:16:59 (8 min),
    // renewed 77 s after the bootstrap certificate was issued.
    let cp = control_plane(&["--cluster-signing-duration=3m"]);
    let c = Containerd::start();
    let p = start_bootstrapping(&cp, &c, &["--rotate-certificates"]);
    let node = p.hostname().to_string();
    wait_ready(&cp, &node);
    let pem = p.root_dir().join("pki/kubelet-client-current.pem");
    let (first, facts) = certificate_facts(&pem).expect("the bootstrap certificate");
    eprintln!("bootstrap certificate (measured):\n{facts}");
    let (second, facts) = wait_until(
        "a renewed client certificate",
        Duration::from_secs(300),
        || certificate_facts(&pem).filter(|(serial, _)| *serial != first),
    );
    eprintln!("renewed certificate:\n{facts}");
    let mode = std::fs::metadata(&pem).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", pem.display());
    // The renewal was the node's own request (selfnodeclient), not the
    // bootstrap token's, and it was issued.
    let csrs = get(&cp, &["csr"]).expect("csr list");
    let renewal = csrs["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["spec"]["username"] == format!("system:node:{node}"))
        .unwrap_or_else(|| panic!("no CSR by the node itself: {csrs}"));
    assert!(renewal["status"]["certificate"].as_str().is_some());
    // After the swap the Lease keeps being renewed and the Node stays
    // Ready: two renewals seen after the new certificate was written.
    let mut seen = lease_renew_time(&cp, &node);
    for i in 0..2 {
        seen = Some(wait_until(
            &format!("Lease renewal {} after the rotation", i + 1),
            LONG,
            || lease_renew_time(&cp, &node).filter(|t| Some(t) != seen.as_ref()),
        ));
    }
    let n = get(&cp, &["node", &node]).expect("the Node");
    assert!(is_ready(&n), "{n}");
    let log = p.log();
    assert!(
        log.contains("certificate rotation: new client certificate issued by"),
        "{log}"
    );
    assert!(!log.contains("BEGIN PRIVATE KEY"), "the key was logged");
    // The node's file credential is the renewed certificate, and it works.
    assert_ne!(first, second);
    let out = cp.kubectl_as(&p.dir().join("kubelet.conf"), &["get", "node", &node]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
