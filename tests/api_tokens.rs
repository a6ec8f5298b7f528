//! Service-account tokens for API pods (issue #9), on real parts: a private
//! etcd + kube-apiserver (Node,RBAC authorization, NodeRestriction: a node
//! may ask tokens only for its own pods' service accounts, bound to the
//! pod), kube-controller-manager where its `kube-root-ca.crt` publisher is
//! wanted, real containerd (or CRI-O with `PICOLET_TEST_RUNTIME=crio`),
//! picolet joined with its `system:node:<name>` credential and `-v=10`.
//!
//! The tokens are read where the container reads them: the projected
//! volume's directory on the host (the same tmpfs the container mounts),
//! and the container's own output says it sees `token`, `ca.crt` and
//! `namespace`. A token's refresh (at 80 % of its lifetime, at least
//! 600 s on a real API server) cannot be waited for here: the rule is
//! unit-tested in `apiserver::tokens`.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test api_tokens --
//! --test-threads=2`.

mod harness;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use harness::kube::ControlPlane;
use harness::workload::{
    files_containing, join, kill_container, mode, output, unmount_under, wait_line,
};
use harness::{wait_until, Containerd, Picolet};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(180);
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn api_pod(cp: &ControlPlane, name: &str) -> Option<Value> {
    cp.get_json(&["pod", name, "-n", "default"])
}

/// A pod of the default service account with the admission plugin's
/// `kube-api-access-*` volume; its container says what it sees there.
fn default_pod_yaml(name: &str, node: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "while true; do echo \"ns=$(cat {SA_DIR}/namespace) ca=$(head -1 {SA_DIR}/ca.crt) token=$(test -s {SA_DIR}/token && echo yes)\"; sleep 1; done"]
"#
    )
}

/// A pod without the default volume, with a projected token for audience
/// `vault` valid 600 s, running as user 1000 (so the token is that
/// user's, mode 0600, as kubelet makes it).
fn audience_pod_yaml(name: &str, node: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  securityContext: {{runAsUser: 1000}}
  volumes:
  - name: vault-token
    projected:
      sources:
      - serviceAccountToken: {{path: vault, audience: vault, expirationSeconds: 600}}
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    volumeMounts:
    - {{name: vault-token, mountPath: /vault}}
    command: ["sh", "-c", "while true; do echo \"vault=$(head -c 3 /vault/vault)\"; sleep 1; done"]
"#
    )
}

/// The pod's UID and the name of its projected volume holding a token.
fn uid_and_token_volume(cp: &ControlPlane, name: &str) -> (String, String) {
    let pod = api_pod(cp, name).unwrap();
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let volume = pod["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| {
            v["projected"]["sources"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s["serviceAccountToken"].is_object()))
        })
        .unwrap_or_else(|| panic!("no token volume in {pod}"))["name"]
        .as_str()
        .unwrap()
        .to_string();
    (uid, volume)
}

fn projected_dir(p: &Picolet, uid: &str, volume: &str) -> PathBuf {
    p.root_dir()
        .join("pods")
        .join(uid)
        .join("volumes/kubernetes.io~projected")
        .join(volume)
}

/// base64url without padding (a JWT's parts).
fn base64url(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => panic!("not base64url: {c}"),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// The claims of a JWT.
fn claims(jwt: &str) -> Value {
    let parts: Vec<&str> = jwt.trim().split('.').collect();
    assert_eq!(parts.len(), 3, "a JWT has three parts");
    serde_json::from_slice(&base64url(parts[1])).expect("JWT claims are JSON")
}

fn read_token(dir: &Path, file: &str) -> String {
    wait_until(&format!("{file} in {}", dir.display()), LONG, || {
        fs::read_to_string(dir.join(file))
            .ok()
            .filter(|t| !t.is_empty())
    })
}

#[test]
fn pods_get_tokens_bound_to_them_with_the_audience_and_expiry_asked_for_and_the_root_ca() {
    let cp = ControlPlane::builder().with_controller_manager().start();
    // The controller manager creates the default ServiceAccount and
    // publishes kube-root-ca.crt in every namespace.
    wait_until(
        "the default ServiceAccount and kube-root-ca.crt",
        LONG,
        || {
            (cp.get_json(&["serviceaccount", "default", "-n", "default"])
                .is_some()
                && cp
                    .get_json(&["configmap", "kube-root-ca.crt", "-n", "default"])
                    .is_some())
            .then_some(())
        },
    );
    let c = Containerd::start();
    let mut p = join(&cp, &c);
    let node = p.hostname().to_string();

    // The ServiceAccount admission plugin's kube-api-access volume: token,
    // kube-root-ca.crt and the namespace, with no workaround.
    cp.apply(&default_pod_yaml("app", &node));
    wait_line(
        &p,
        "app",
        Some(0),
        "ns=default ca=-----BEGIN CERTIFICATE----- token=yes",
    );
    let (uid, volume) = uid_and_token_volume(&cp, "app");
    assert!(volume.starts_with("kube-api-access-"), "{volume}");
    let dir = projected_dir(&p, &uid, &volume);
    let token = read_token(&dir, "token");
    let c1 = claims(&token);
    assert_eq!(c1["kubernetes.io"]["pod"]["name"], "app", "{c1}");
    assert_eq!(c1["kubernetes.io"]["pod"]["uid"], uid.as_str(), "{c1}");
    assert_eq!(c1["kubernetes.io"]["namespace"], "default", "{c1}");
    assert_eq!(
        c1["kubernetes.io"]["serviceaccount"]["name"], "default",
        "{c1}"
    );
    // No audience asked for: the API server's own (its issuer here).
    assert_eq!(
        c1["aud"],
        serde_json::json!(["https://kubernetes.default.svc"]),
        "{c1}"
    );
    let ca = fs::read_to_string(dir.join("ca.crt")).unwrap();
    assert_eq!(ca, fs::read_to_string(cp.ca_cert()).unwrap());
    assert_eq!(
        fs::read_to_string(dir.join("namespace")).unwrap(),
        "default"
    );
    assert!(
        fs::read_link(dir.join("token"))
            .unwrap()
            .starts_with("..data"),
        "the token is written by the atomic writer"
    );

    // A projected token for another audience, valid 600 s.
    cp.apply(&audience_pod_yaml("vault", &node));
    // User 1000 reads its token: a JWT's header starts "eyJ".
    wait_line(&p, "vault", Some(0), "vault=eyJ");
    let (vuid, vvolume) = uid_and_token_volume(&cp, "vault");
    let vdir = projected_dir(&p, &vuid, &vvolume);
    let vtoken = read_token(&vdir, "vault");
    let meta = fs::metadata(vdir.join("vault")).unwrap();
    assert_eq!(
        (meta.uid(), meta.mode() & 0o7777),
        (1000, 0o600),
        "the token belongs to the pod's one user"
    );
    let c2 = claims(&vtoken);
    assert_eq!(c2["aud"], serde_json::json!(["vault"]), "{c2}");
    assert_eq!(c2["kubernetes.io"]["pod"]["name"], "vault", "{c2}");
    assert_eq!(c2["kubernetes.io"]["pod"]["uid"], vuid.as_str(), "{c2}");
    let life = c2["exp"].as_i64().unwrap() - c2["iat"].as_i64().unwrap();
    assert_eq!(life, 600, "{c2}");

    // The tokens are cached root-only, and nowhere else: not in picolet's
    // log at -v=10, not in any other file under its root dir.
    let cache = p.root_dir().join("apiserver/tokens");
    assert_eq!(mode(&cache), 0o700);
    for uid in [&uid, &vuid] {
        assert_eq!(mode(&cache.join(uid)), 0o600);
    }
    let volumes = |uid: &str| p.root_dir().join("pods").join(uid).join("volumes");
    for t in [&token, &vtoken] {
        let t = t.trim();
        assert!(!p.log().contains(t), "a token is in picolet's log");
        let signature = t.rsplit('.').next().unwrap();
        assert!(
            !p.log().contains(signature),
            "a token's signature is in picolet's log"
        );
        let leaks = files_containing(
            &p.root_dir(),
            t.as_bytes(),
            &[cache.clone(), volumes(&uid), volumes(&vuid)],
        );
        assert!(leaks.is_empty(), "a token is in {leaks:?}");
    }

    // A deleted pod's token is forgotten, its cached copy too; the other
    // pod keeps its own.
    cp.kubectl_ok(&["delete", "pod", "vault", "-n", "default", "--wait=false"]);
    wait_until("the deleted pod's cached token to go", LONG, || {
        (!cache.join(&vuid).exists()).then_some(())
    });
    assert!(cache.join(&uid).exists());
    let before = output(&p, "app", None).len();
    wait_until("app to keep printing", LONG, || {
        (output(&p, "app", None).len() > before + 1).then_some(())
    });
    let app = api_pod(&cp, "app").unwrap();
    assert_eq!(
        app["status"]["containerStatuses"][0]["restartCount"], 0,
        "{app}"
    );
    p.stop();
}

#[test]
fn after_a_reboot_with_the_api_server_down_the_cached_token_is_projected_again() {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let mut p = join(&cp, &c);
    let node = p.hostname().to_string();
    cp.apply(&default_pod_yaml("app", &node));
    // No controller manager: the test publishes the ConfigMaps the
    // admission plugin's volume projects (kube-root-ca.crt; this API
    // server's fork adds openshift-service-ca.crt) with the cluster CA.
    publish_projected_config_maps(&cp, "app");
    let want = "ns=default ca=-----BEGIN CERTIFICATE----- token=yes";
    wait_line(&p, "app", Some(0), want);
    let (uid, volume) = uid_and_token_volume(&cp, "app");
    let dir = projected_dir(&p, &uid, &volume);
    let token = read_token(&dir, "token");
    let id = wait_until("the container's ID", LONG, || {
        let pod = api_pod(&cp, "app")?;
        let id = pod["status"]["containerStatuses"][0]["containerID"].as_str()?;
        Some(id.split_once("://").map_or(id, |(_, id)| id).to_string())
    });

    // The link goes down and picolet stops; the volumes are lost (a
    // reboot empties tmpfs), and the container dies.
    cp.stop_apiserver();
    p.stop();
    let vols = p.root_dir().join("pods").join(&uid).join("volumes");
    unmount_under(&vols);
    fs::remove_dir_all(&vols).unwrap();
    kill_container(&c, &id);

    // Offline, the cached token (still valid) is projected again and the
    // pod runs.
    p.restart();
    wait_line(&p, "app", Some(1), want);
    assert_eq!(fs::read_to_string(dir.join("token")).unwrap(), token);
    assert!(!cp.apiserver_running());
    assert!(!p.log().contains(token.trim()));
    cp.start_apiserver();
    p.stop();
}

/// Creates each ConfigMap that pod `name`'s projected volumes reference,
/// every item's key holding the cluster CA.
fn publish_projected_config_maps(cp: &ControlPlane, name: &str) {
    let pod = api_pod(cp, name).unwrap();
    let ca = cp.ca_cert();
    for v in pod["spec"]["volumes"].as_array().unwrap() {
        for src in v["projected"]["sources"].as_array().into_iter().flatten() {
            let Some(cm) = src["configMap"]["name"].as_str() else {
                continue;
            };
            let mut args = vec![
                "create".to_string(),
                "configmap".to_string(),
                cm.to_string(),
                "-n".to_string(),
                "default".to_string(),
            ];
            for item in src["configMap"]["items"].as_array().into_iter().flatten() {
                let key = item["key"].as_str().unwrap();
                args.push(format!("--from-file={key}={}", ca.display()));
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = cp.kubectl(&args);
            assert!(
                out.status.success()
                    || String::from_utf8_lossy(&out.stderr).contains("AlreadyExists"),
                "{out:?}"
            );
        }
    }
}
