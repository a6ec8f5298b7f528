//! The node API on real parts (issue #11): a private etcd + kube-apiserver
//! (Node,RBAC; its kubelet client certificate is `kube-apiserver-kubelet-
//! client` in `system:masters`), real containerd, picolet joined with its
//! node credential, serving HTTPS on a free localhost port with its
//! self-signed certificate on the host's address (the API server does not
//! proxy to loopback addresses), client certificates checked against the
//! cluster CA, tokens by TokenReview and every decision by
//! SubjectAccessReview. Nothing mocked: requests come from `curl` and from
//! the API server's own node proxy (`kubectl get --raw`).
//!
//! The API server first runs with a placeholder
//! `--kubelet-certificate-authority`; once picolet has made its
//! certificate, the API server is restarted trusting it, so the proxy
//! verifies the node's certificate for its InternalIP.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test node_api --
//! --test-threads=2`.

mod harness;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use harness::kube::{free_port, host_ip, ControlPlane};
use harness::{wait_until, Containerd, Picolet};

const LONG: Duration = Duration::from_secs(120);

/// `curl` of `url` with extra `args`: the HTTP status and the body.
fn curl(url: &str, args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "30", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .expect("running curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        code.trim().parse().unwrap_or(0),
        format!("{body}{}", String::from_utf8_lossy(&out.stderr)),
    )
}

/// A throwaway self-signed certificate, the API server's placeholder
/// `--kubelet-certificate-authority` until picolet has made its own.
fn placeholder_ca(dir: &Path) -> std::path::PathBuf {
    let cert = dir.join("kubelet-ca.crt");
    let status = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:P-256", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=placeholder", "-keyout"])
        .arg(dir.join("placeholder.key"))
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("running openssl");
    assert!(status.status.success(), "{status:?}");
    cert
}

/// The Node and its events as kubelet writes them (issue #27): the node
/// events with kubelet's reasons, messages, source and involvedObject,
/// `status.images` from the runtime (largest first), the attach/detach
/// annotation, a `hugepages-<size>` resource per page size of the host,
/// `systemUUID`, `containerRuntimeVersion` from CRI `Version`, and the
/// node's CSINode.
fn node_object_and_events_as_kubelet_writes_them(cp: &ControlPlane, c: &Containerd, node: &str) {
    let n = wait_until("the Node's status.images", LONG, || {
        let n = cp.get_json(&["node", node])?;
        n["status"]["images"].as_array().filter(|i| !i.is_empty())?;
        Some(n)
    });
    assert_eq!(
        n["metadata"]["annotations"]["volumes.kubernetes.io/controller-managed-attach-detach"],
        "true",
        "{n}"
    );
    let images = n["status"]["images"].as_array().unwrap();
    let sizes: Vec<i64> = images
        .iter()
        .map(|i| i["sizeBytes"].as_i64().unwrap())
        .collect();
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
    assert!(
        images.iter().any(|i| i["names"]
            .as_array()
            .is_some_and(|n| n.iter().any(|n| n.as_str().unwrap().contains("busybox")))),
        "{images:?}"
    );
    let status = &n["status"];
    for dir in fs::read_dir("/sys/kernel/mm/hugepages")
        .into_iter()
        .flatten()
    {
        let name = dir.unwrap().file_name().into_string().unwrap();
        let kb: u64 = name
            .trim_start_matches("hugepages-")
            .trim_end_matches("kB")
            .parse()
            .unwrap();
        let key = if kb >= 1 << 20 {
            format!("hugepages-{}Gi", kb >> 20)
        } else {
            format!("hugepages-{}Mi", kb >> 10)
        };
        assert!(status["capacity"][&key].is_string(), "{key}: {status}");
        assert!(status["allocatable"][&key].is_string(), "{key}: {status}");
    }
    let info = &status["nodeInfo"];
    assert!(!info["systemUUID"].as_str().unwrap().is_empty(), "{info}");
    let version = info["containerRuntimeVersion"].as_str().unwrap();
    let prefix = format!("{}://", c.kind().runtime_name());
    assert!(
        version.starts_with(&prefix) && version.len() > prefix.len(),
        "{version}"
    );

    // The node's CSINode, owned by its Node, as kubelet creates it.
    let uid = n["metadata"]["uid"].as_str().unwrap().to_string();
    let csinode = wait_until("the node's CSINode", LONG, || {
        cp.get_json(&["csinode", node])
    });
    assert_eq!(
        csinode["metadata"]["ownerReferences"][0]["uid"], uid,
        "{csinode}"
    );
    assert_eq!(
        csinode["metadata"]["ownerReferences"][0]["kind"], "Node",
        "{csinode}"
    );
    assert!(
        csinode["metadata"]["annotations"]["storage.alpha.kubernetes.io/migrated-plugins"]
            .as_str()
            .is_some_and(|p| p.contains("kubernetes.io/gce-pd")),
        "{csinode}"
    );

    let wanted = [
        "Starting",
        "NodeHasSufficientMemory",
        "NodeHasNoDiskPressure",
        "NodeHasSufficientPID",
        "NodeAllocatableEnforced",
        "NodeReady",
    ];
    let selector = format!("involvedObject.kind=Node,involvedObject.name={node}");
    let mut last = serde_json::Value::Null;
    let events = harness::poll_until(LONG, || {
        let list = cp.get_json(&["events", "-n", "default", "--field-selector", &selector])?;
        let items = list["items"].as_array()?.clone();
        last = list;
        wanted
            .iter()
            .all(|w| items.iter().any(|e| e["reason"] == *w))
            .then_some(items)
    })
    .unwrap_or_else(|| panic!("node events missing; the last list:\n{last:#}"));
    for e in &events {
        let reason = e["reason"].as_str().unwrap();
        assert_eq!(e["type"], "Normal", "{e}");
        assert_eq!(e["involvedObject"]["uid"], node, "{e}");
        assert_eq!(e["source"]["component"], "kubelet", "{e}");
        assert_eq!(e["source"]["host"], node, "{e}");
        let message = e["message"].as_str().unwrap();
        match reason {
            "Starting" => assert_eq!(message, "Starting kubelet."),
            "NodeAllocatableEnforced" => {
                assert_eq!(message, "Updated Node Allocatable limit across pods")
            }
            r => assert_eq!(message, format!("Node {node} status is now: {r}")),
        }
    }
}

#[test]
fn the_node_api_serves_the_api_server_and_refuses_anonymous_and_unauthorized_users() {
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
    let healthz_port = free_port();
    let config = cp.node_api_config(ip, port, healthz_port, "");
    let p = Picolet::start_with_args(&c, &config, |p| {
        let mut args = cp.join_args(p.hostname(), ip);
        args.push("--v=4".to_string());
        args
    });
    let node = p.hostname().to_string();

    // The Node carries the port; the certificate was made under rootDir.
    wait_until("the Node with the node API's port", LONG, || {
        let n = cp.get_json(&["node", &node])?;
        (n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == port).then_some(())
    });
    let serving = p.root_dir().join("pki/kubelet.crt");
    assert!(serving.is_file(), "{}", p.log());
    node_object_and_events_as_kubelet_writes_them(&cp, &c, &node);
    let base = format!("https://{ip}:{port}");
    let cacert = serving.display().to_string();

    // Plain healthz, no TLS, no authentication.
    let (code, body) = curl(&format!("http://127.0.0.1:{healthz_port}/healthz"), &[]);
    assert_eq!((code, body.as_str()), (200, "ok"));

    // Anonymous: 401, over a certificate verified for the node's address.
    let (code, body) = curl(&format!("{base}/pods"), &["--cacert", &cacert]);
    assert_eq!(code, 401, "{body}\n{}", p.log());
    assert_eq!(body, "Unauthorized\n");

    // A client certificate of the cluster CA without RBAC on nodes: 403.
    let nobody = cp.pki().client("nobody", "nobody", &["outsiders"]);
    let cert_args = |pair: &harness::kube::pki::CertPair| {
        vec![
            "--cacert".to_string(),
            cacert.clone(),
            "--cert".to_string(),
            pair.cert.display().to_string(),
            "--key".to_string(),
            pair.key.display().to_string(),
        ]
    };
    let args = cert_args(&nobody);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, body) = curl(&format!("{base}/pods"), &args);
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body,
        "Forbidden (user=nobody, verb=get, resource=nodes, subresource(s)=[pods proxy])\n"
    );
    let (code, body) = curl(&format!("{base}/stats/summary"), &args);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("subresource(s)=[stats]"), "{body}");

    // The cluster admin's certificate (system:masters): allowed.
    let admin = cp.pki().admin();
    let args = cert_args(&admin);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, body) = curl(&format!("{base}/pods"), &args);
    assert_eq!(code, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["kind"], "PodList");
    let (code, _) = curl(&format!("{base}/no-such-path"), &args);
    assert_eq!(code, 404);

    // kubelet's /configz (nodes/configz or nodes/proxy) and its own metric
    // families.
    let (code, body) = curl(&format!("{base}/configz"), &args);
    assert_eq!(code, 200, "{body}");
    let configz: serde_json::Value = serde_json::from_str(&body).unwrap();
    let kc = &configz["kubeletconfig"];
    assert_eq!(kc["port"], port, "{body}");
    assert_eq!(kc["authorization"]["mode"], "Webhook", "{body}");
    assert_eq!(kc["nodeStatusMaxImages"], 50, "{body}");
    assert_eq!(kc["healthzPort"], healthz_port, "{body}");
    let nobody_args = cert_args(&nobody);
    let nobody_args: Vec<&str> = nobody_args.iter().map(String::as_str).collect();
    let (code, body) = curl(&format!("{base}/configz"), &nobody_args);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("subresource(s)=[configz proxy]"), "{body}");
    let (code, body) = curl(&format!("{base}/metrics"), &args);
    assert_eq!(code, 200, "{body}");
    for family in [
        "kubelet_running_pods",
        "kubelet_running_containers",
        "kubelet_pod_start_duration_seconds",
        "kubelet_pleg_relist_duration_seconds",
        "kubelet_runtime_operations_total",
        "kubelet_node_name",
    ] {
        assert!(
            body.contains(&format!("# TYPE {family} ")),
            "{family} missing:\n{body}"
        );
    }
    assert!(
        body.contains(&format!("kubelet_node_name{{node=\"{node}\"}} 1\n")),
        "{body}"
    );
    assert!(
        body.contains("kubelet_runtime_operations_total{operation_type=\"list_containers\"}"),
        "{body}"
    );

    // Service-account tokens, by TokenReview: one without RBAC is named in
    // the 403; one granted nodes/metrics and nodes/configz reads /metrics and
    // /configz (fine-grained authorization), not /pods.
    cp.apply(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: scraper, namespace: default}\n\
         ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n\
         metadata: {name: node-metrics-reader}\n\
         rules:\n- apiGroups: [\"\"]\n  resources: [nodes/metrics, nodes/configz]\n  verbs: [get]\n\
         ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n\
         metadata: {name: scraper-node-metrics}\n\
         roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: node-metrics-reader}\n\
         subjects:\n- {kind: ServiceAccount, name: scraper, namespace: default}\n",
    );
    let token = |sa: &str| cp.kubectl_ok(&["create", "token", sa, "-n", "default"]);
    let bearer = |t: &str| format!("Authorization: Bearer {}", t.trim());
    let h = bearer(&token("default"));
    let (code, body) = curl(&format!("{base}/pods"), &["--cacert", &cacert, "-H", &h]);
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body,
        "Forbidden (user=system:serviceaccount:default:default, verb=get, resource=nodes, subresource(s)=[pods proxy])\n"
    );
    let h = bearer(&token("scraper"));
    let (code, body) = curl(&format!("{base}/metrics"), &["--cacert", &cacert, "-H", &h]);
    assert_eq!(code, 200, "{body}");
    let (code, body) = curl(&format!("{base}/configz"), &["--cacert", &cacert, "-H", &h]);
    assert_eq!(code, 200, "{body}");
    let (code, body) = curl(&format!("{base}/pods"), &["--cacert", &cacert, "-H", &h]);
    assert_eq!(code, 403, "{body}");
    let (code, _) = curl(
        &format!("{base}/pods"),
        &[
            "--cacert",
            &cacert,
            "-H",
            "Authorization: Bearer not-a-token",
        ],
    );
    assert_eq!(code, 401);

    // The API server trusts the node's own certificate from now on.
    fs::copy(&serving, &kubelet_ca).unwrap();
    cp.stop_apiserver();
    cp.start_apiserver();
    let raw =
        |path: &str| cp.kubectl(&["get", "--raw", &format!("/api/v1/nodes/{node}/proxy{path}")]);
    let mut last = String::new();
    let out = harness::poll_until(LONG, || {
        let out = raw("/healthz");
        last = String::from_utf8_lossy(&out.stderr).into_owned();
        out.status.success().then_some(out)
    })
    .unwrap_or_else(|| {
        panic!(
            "the node proxy did not reach picolet: {last}\n{}",
            harness::tail(&p.log_path(), 40)
        )
    });
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok");
    let out = raw("/pods");
    assert!(out.status.success(), "{out:?}");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["kind"], "PodList");

    // A user without nodes/proxy is refused by the API server itself.
    let out = cp.kubectl(&[
        "--as=someone",
        "get",
        "--raw",
        &format!("/api/v1/nodes/{node}/proxy/pods"),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Forbidden") || err.contains("forbidden"),
        "{err}"
    );
}
