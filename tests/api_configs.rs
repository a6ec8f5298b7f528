//! ConfigMaps and Secrets for API pods (issue #9), and the Service
//! environment variables (issue #27), on real parts: a private
//! etcd + kube-apiserver (Node,RBAC authorization, NodeRestriction: the
//! node may only read, by name, the objects its pods reference), real
//! containerd (or CRI-O with `PICOLET_TEST_RUNTIME=crio`), picolet joined
//! with its `system:node:<name>` credential. Nothing mocked.
//!
//! What the containers see is read from their own output (each prints its
//! files and environment every second into its CRI log); time passing is
//! shown by new lines, never by a fixed sleep.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test api_configs --
//! --test-threads=2`.

mod harness;

use std::fs;
use std::path::Path;
use std::time::Duration;

use harness::kube::ControlPlane;
use harness::workload::{
    files_containing, is_mounted, join, kill_container, mode, output, unmount_under, wait_line,
};
use harness::{wait_until, Containerd};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);

fn get(cp: &ControlPlane, args: &[&str]) -> Option<Value> {
    cp.get_json(args)
}

fn api_pod(cp: &ControlPlane, name: &str) -> Option<Value> {
    get(cp, &["pod", name, "-n", "default"])
}

/// A unique secret value: a string that occurs nowhere else.
fn secret_value() -> String {
    format!(
        "pw-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

fn objects_yaml(greeting: &str, password: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\n  namespace: default\ndata:\n  greeting: {greeting}\n  mode: one\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: app-secret\n  namespace: default\nstringData:\n  password: {password}\n"
    )
}

/// A pod whose container prints, every second, a ConfigMap file, a Secret
/// file and env from both.
fn app_pod_yaml(name: &str, node: &str) -> String {
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
  volumes:
  - name: cfg
    configMap: {{name: app-config}}
  - name: sec
    secret: {{secretName: app-secret, defaultMode: 0400}}
  - name: proj
    projected:
      sources:
      - configMap: {{name: app-config, items: [{{key: greeting, path: g}}]}}
      - downwardAPI: {{items: [{{path: name, fieldRef: {{fieldPath: metadata.name}}}}]}}
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    envFrom:
    - configMapRef: {{name: app-config}}
      prefix: CM_
    env:
    - name: PW
      valueFrom: {{secretKeyRef: {{name: app-secret, key: password}}}}
    volumeMounts:
    - {{name: cfg, mountPath: /cfg}}
    - {{name: sec, mountPath: /sec}}
    - {{name: proj, mountPath: /proj}}
    - {{name: cfg, mountPath: /sub/greeting, subPath: greeting}}
    command: ["sh", "-c", "while true; do echo \"file=$(cat /cfg/greeting) env=$CM_greeting secret=$(cat /sec/password) envsecret=$PW proj=$(cat /proj/g)/$(cat /proj/name) sub=$(cat /sub/greeting) k8s=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT\"; sleep 1; done"]
"#
    )
}

/// The master Service's `<clusterIP>:<port>`, as its variables give it.
fn master_service(cp: &ControlPlane) -> String {
    let svc = get(cp, &["service", "kubernetes", "-n", "default"]).expect("the kubernetes Service");
    format!(
        "{}:{}",
        svc["spec"]["clusterIP"].as_str().unwrap(),
        svc["spec"]["ports"][0]["port"]
    )
}

fn container_status(pod: &Value) -> Value {
    pod["status"]["containerStatuses"][0].clone()
}

fn pod_uid(cp: &ControlPlane, name: &str) -> String {
    api_pod(cp, name).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_pod_sees_its_configmap_and_secret_and_a_changed_configmap_reaches_it_without_a_restart() {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let p = join(&cp, &c);
    let node = p.hostname().to_string();
    let password = secret_value();

    cp.apply(&objects_yaml("hello", &password));
    cp.apply(&app_pod_yaml("app", &node));
    let want = format!(
        "file=hello env=hello secret={password} envsecret={password} proj=hello/app sub=hello k8s={}",
        master_service(&cp)
    );
    wait_line(&p, "app", Some(0), &want);

    // kubelet's layout: timestamped dir, ..data, per-key links; secret
    // files with their defaultMode, on tmpfs.
    let uid = pod_uid(&cp, "app");
    let vols = p.root_dir().join("pods").join(&uid).join("volumes");
    let cfg = vols.join("kubernetes.io~configmap/cfg");
    assert_eq!(
        fs::read_link(cfg.join("greeting")).unwrap(),
        Path::new("..data/greeting")
    );
    let data = fs::read_link(cfg.join("..data")).unwrap();
    assert!(
        data.to_string_lossy().starts_with("..20"),
        "..data points at a timestamped dir: {data:?}"
    );
    let sec = vols.join("kubernetes.io~secret/sec");
    assert_eq!(mode(&sec.join("..data/password")), 0o400);
    assert!(is_mounted(&sec), "the secret volume is a tmpfs");

    // The ConfigMap changes: the file follows, the env does not, a subPath
    // mount keeps the file it was created with (kubelet's), and the
    // container is not restarted.
    cp.kubectl_ok(&[
        "patch",
        "configmap",
        "app-config",
        "-n",
        "default",
        "--type=merge",
        "-p",
        r#"{"data":{"greeting":"bonjour"}}"#,
    ]);
    let want = format!(
        "file=bonjour env=hello secret={password} envsecret={password} proj=bonjour/app sub=hello k8s={}",
        master_service(&cp)
    );
    wait_line(&p, "app", Some(0), &want);
    let pod = api_pod(&cp, "app").unwrap();
    assert_eq!(container_status(&pod)["restartCount"], 0, "{pod}");
    assert_eq!(pod["status"]["phase"], "Running");

    // A pod whose non-optional ConfigMap is missing waits with kubelet's
    // reason; the other pod is untouched; the ConfigMap appears, it starts.
    cp.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: late\n  namespace: default\nspec:\n  nodeName: {node}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    envFrom: [{{configMapRef: {{name: late-config}}}}]\n    command: [\"sh\", \"-c\", \"while true; do echo late=$LATE; sleep 1; done\"]\n"
    ));
    let waiting = wait_until("late waiting with CreateContainerConfigError", LONG, || {
        let pod = api_pod(&cp, "late")?;
        let w = container_status(&pod)["state"]["waiting"].clone();
        (w["reason"] == "CreateContainerConfigError").then_some(w)
    });
    assert_eq!(waiting["message"], r#"configmap "late-config" not found"#);
    let before = output(&p, "app", None).len();
    wait_until("app to keep printing", LONG, || {
        (output(&p, "app", None).len() > before + 1).then_some(())
    });
    assert_eq!(
        container_status(&api_pod(&cp, "app").unwrap())["restartCount"],
        0
    );
    cp.apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: late-config\n  namespace: default\ndata:\n  LATE: arrived\n");
    wait_line(&p, "late", Some(0), "late=arrived");

    // The Secret's value is nowhere but in its 0700/0600 cache and its
    // tmpfs volume: not in picolet's log at -v=10, not elsewhere under
    // the root dir.
    let secrets_cache = p.root_dir().join("apiserver/secrets");
    assert_eq!(mode(&secrets_cache), 0o700);
    for e in fs::read_dir(&secrets_cache).unwrap().flatten() {
        assert_eq!(mode(&e.path()), 0o700);
        for f in fs::read_dir(e.path()).unwrap().flatten() {
            assert_eq!(mode(&f.path()), 0o600, "{}", f.path().display());
        }
    }
    assert!(
        !p.log().contains(&password),
        "the secret's value is in picolet's log"
    );
    let leaks = files_containing(
        &p.root_dir(),
        password.as_bytes(),
        &[secrets_cache, vols.join("kubernetes.io~secret")],
    );
    assert!(leaks.is_empty(), "the secret's value is in {leaks:?}");
}

#[test]
fn after_a_reboot_with_the_api_server_down_volumes_and_env_come_back_from_the_cache() {
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let mut p = join(&cp, &c);
    let node = p.hostname().to_string();
    let password = secret_value();

    cp.apply(&objects_yaml("hello", &password));
    cp.apply(&app_pod_yaml("app", &node));
    let want = format!(
        "file=hello env=hello secret={password} envsecret={password} proj=hello/app sub=hello k8s={}",
        master_service(&cp)
    );
    wait_line(&p, "app", Some(0), &want);
    let uid = pod_uid(&cp, "app");
    let id = wait_until("the container's ID", LONG, || {
        let s = container_status(&api_pod(&cp, "app")?);
        let id = s["containerID"].as_str()?;
        Some(id.split_once("://").map_or(id, |(_, id)| id).to_string())
    });

    // The link goes down and picolet stops; the volumes are lost (a
    // reboot empties tmpfs), and the container dies.
    cp.stop_apiserver();
    p.stop();
    let vols = p.root_dir().join("pods").join(&uid).join("volumes");
    let sec = vols.join("kubernetes.io~secret/sec");
    unmount_under(&vols);
    fs::remove_dir_all(&vols).unwrap();
    kill_container(&c, &id);

    // picolet comes back offline: the pod runs again from the cache, its
    // volumes rewritten and its env resolved from the cached objects.
    p.restart();
    wait_line(&p, "app", Some(1), &want);
    assert_eq!(
        fs::read_link(vols.join("kubernetes.io~configmap/cfg/greeting")).unwrap(),
        Path::new("..data/greeting")
    );
    assert!(is_mounted(&sec), "the secret volume is a tmpfs again");
    assert!(!cp.apiserver_running());
    assert!(!p.log().contains(&password));
    cp.start_apiserver();
}

/// The lines of `namespace/pod`'s container `main` (every attempt), the
/// CRI prefix dropped.
fn lines_of(p: &harness::Picolet, namespace: &str, pod: &str) -> Vec<String> {
    let prefix = format!("{namespace}_{pod}_");
    let mut out = Vec::new();
    for e in fs::read_dir(p.logs_dir()).into_iter().flatten().flatten() {
        if !e.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        for f in fs::read_dir(e.path().join("main"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let text = fs::read_to_string(f.path()).unwrap_or_default();
            out.extend(
                text.lines()
                    .map(|l| l.splitn(4, ' ').nth(3).unwrap_or("").to_string()),
            );
        }
    }
    out
}

/// A pod that prints its Service variables (sorted), then `end`.
fn env_pod_yaml(name: &str, namespace: &str, node: &str, links: bool) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  nodeName: {node}
  enableServiceLinks: {links}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    env: [{{name: API, value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"}}]
    command: ["sh", "-c", "env | grep -E '^(KUBERNETES|WEB_FRONT|FAR_|API=)' | sort; echo end; sleep 100000"]
"#
    )
}

/// The variables `namespace/pod` printed, once it printed them all.
fn printed_env(
    p: &harness::Picolet,
    namespace: &str,
    pod: &str,
) -> std::collections::BTreeMap<String, String> {
    let lines = wait_until(&format!("{pod} to print its env"), LONG, || {
        let l = lines_of(p, namespace, pod);
        l.iter().any(|x| x == "end").then_some(l)
    });
    lines
        .iter()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Objects and bytes of a LIST of Services with kubelet's selector.
fn service_list_size(cp: &ControlPlane, collection: &str) -> (usize, usize) {
    let out = cp.kubectl_ok(&[
        "get",
        "--raw",
        &format!("{collection}?fieldSelector=spec.clusterIP%21%3DNone"),
    ]);
    let v: Value = serde_json::from_str(&out).expect("a ServiceList");
    (v["items"].as_array().map_or(0, Vec::len), out.len())
}

#[test]
fn containers_get_the_service_variables_of_their_namespace_and_the_master_service_only() {
    const FAR: usize = 30;
    let cp = ControlPlane::start();
    let c = Containerd::start();
    let p = join(&cp, &c);
    let node = p.hostname().to_string();
    cp.ensure_namespace("svc-env");
    cp.ensure_namespace("elsewhere");
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Service\nmetadata: {name: web-front, namespace: svc-env}\nspec:\n  selector: {app: web}\n  ports: [{name: http, port: 80, targetPort: 8080}, {name: dns, port: 53, protocol: UDP}]\n---\napiVersion: v1\nkind: Service\nmetadata: {name: web-front-headless, namespace: svc-env}\nspec: {clusterIP: None, selector: {app: web}, ports: [{port: 80}]}\n",
    );
    // Services elsewhere: a cluster-wide watch would carry them all.
    for i in 0..FAR {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: far-{i}, namespace: elsewhere}}\nspec: {{selector: {{app: far}}, ports: [{{port: 80}}]}}\n"
        ));
    }
    cp.apply(&yaml);
    cp.apply(&env_pod_yaml("linked", "svc-env", &node, true));
    cp.apply(&env_pod_yaml("unlinked", "svc-env", &node, false));

    let master = get(&cp, &["service", "kubernetes", "-n", "default"]).unwrap();
    let master_ip = master["spec"]["clusterIP"].as_str().unwrap().to_string();
    let web = get(&cp, &["service", "web-front", "-n", "svc-env"]).unwrap();
    let web_ip = web["spec"]["clusterIP"].as_str().unwrap().to_string();

    let linked = printed_env(&p, "svc-env", "linked");
    let want_master = [
        ("KUBERNETES_SERVICE_HOST", master_ip.clone()),
        ("KUBERNETES_SERVICE_PORT", "443".into()),
        ("KUBERNETES_SERVICE_PORT_HTTPS", "443".into()),
        ("KUBERNETES_PORT", format!("tcp://{master_ip}:443")),
        ("KUBERNETES_PORT_443_TCP", format!("tcp://{master_ip}:443")),
        ("KUBERNETES_PORT_443_TCP_PROTO", "tcp".into()),
        ("KUBERNETES_PORT_443_TCP_PORT", "443".into()),
        ("KUBERNETES_PORT_443_TCP_ADDR", master_ip.clone()),
        ("API", format!("https://{master_ip}:443")),
    ];
    for (k, v) in &want_master {
        assert_eq!(linked.get(*k), Some(v), "{k} in {linked:?}");
    }
    assert_eq!(linked["WEB_FRONT_SERVICE_HOST"], web_ip);
    assert_eq!(linked["WEB_FRONT_SERVICE_PORT"], "80");
    assert_eq!(linked["WEB_FRONT_SERVICE_PORT_DNS"], "53");
    assert_eq!(
        linked["WEB_FRONT_PORT_53_UDP"],
        format!("udp://{web_ip}:53")
    );
    assert!(
        !linked.contains_key("WEB_FRONT_HEADLESS_SERVICE_HOST"),
        "{linked:?}"
    );
    assert!(!linked.keys().any(|k| k.starts_with("FAR_")), "{linked:?}");

    // enableServiceLinks: false keeps the master Service's variables only.
    let unlinked = printed_env(&p, "svc-env", "unlinked");
    let mut want: std::collections::BTreeMap<String, String> = want_master
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    assert_eq!(
        unlinked,
        std::mem::take(&mut want).into_iter().collect(),
        "{unlinked:?}"
    );

    // The node watched Services per namespace, as the Node authorizer
    // allows it, and never cluster-wide.
    let user = format!("system:node:{node}");
    let reqs: Vec<_> = cp
        .requests_by(&user)
        .into_iter()
        .filter(|r| r.uri.contains("/services"))
        .collect();
    let scoped = |ns: &str| {
        reqs.iter().any(|r| {
            r.uri
                .starts_with(&format!("/api/v1/namespaces/{ns}/services?"))
                && r.code == Some(200)
        })
    };
    assert!(scoped("default") && scoped("svc-env"), "{reqs:?}");
    assert!(
        reqs.iter().all(|r| r.uri.contains("/namespaces/")),
        "{reqs:?}"
    );

    // The cost: what the node's scope lists against a cluster-wide watch.
    let (all_n, all_bytes) = service_list_size(&cp, "/api/v1/services");
    let (d_n, d_bytes) = service_list_size(&cp, "/api/v1/namespaces/default/services");
    let (s_n, s_bytes) = service_list_size(&cp, "/api/v1/namespaces/svc-env/services");
    eprintln!(
        "services with {FAR} elsewhere: cluster-wide {all_n} objects {all_bytes} bytes; \
         the node's namespaces {} objects {} bytes",
        d_n + s_n,
        d_bytes + s_bytes
    );
    assert_eq!(all_n, d_n + s_n + FAR);
}
