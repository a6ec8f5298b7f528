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

#[test]
fn a_fresh_node_joins_with_a_bootstrap_token_alone_and_becomes_ready_with_an_issued_certificate() {
    let cp = ControlPlane::builder()
        .with_controller_manager()
        .apiserver_arg("--enable-bootstrap-token-auth=true")
        .start();
    cp.apply(&kubeadm_bootstrap_objects());
    let c = Containerd::start();
    let p = Picolet::start_with_args(&c, "", |p| {
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
        vec![
            "--bootstrap-kubeconfig".to_string(),
            bootstrap.display().to_string(),
            "--kubeconfig".to_string(),
            p.dir().join("kubelet.conf").display().to_string(),
        ]
    });
    let node = p.hostname().to_string();
    let ready = wait_until("the bootstrapped Node to be Ready", LONG, || {
        let n = get(&cp, &["node", &node])?;
        let ready = n["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        ready.then_some(n)
    });
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
