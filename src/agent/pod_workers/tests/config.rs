//! ConfigMaps and Secrets in the agent, against the in-memory runtime and a
//! table of objects: a container waits while an object is not known, fails
//! with kubelet's `CreateContainerConfigError` while it is missing, starts
//! when it appears, and a changed ConfigMap (or service-account token)
//! rewrites the running pod's volume without touching its container.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs;
use std::rc::Rc;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};

use super::{api_set, apply, static_pod, sync, Node};
use crate::pod::config_objects::{ConfigObjects, Kind, Lookup, ObjectRef};
use crate::pod::labels::CONFIG_SOURCE_ANNOTATION;
use crate::source::PodSource;

/// Objects by name; a name in neither map is not known yet unless listed
/// as missing.
#[derive(Default)]
struct Objects {
    cms: RefCell<BTreeMap<String, Rc<ConfigMap>>>,
    secrets: RefCell<BTreeMap<String, Rc<Secret>>>,
    missing: RefCell<Vec<String>>,
    token: RefCell<Option<Rc<str>>>,
}

impl Objects {
    fn answer<T>(&self, found: Option<Rc<T>>, name: &str) -> Lookup<T> {
        match found {
            Some(o) => Lookup::Found(o),
            None if self.missing.borrow().iter().any(|m| m == name) => Lookup::NotFound,
            None => Lookup::NotYetKnown,
        }
    }
}

impl ConfigObjects for Objects {
    fn config_map(&self, _: &str, name: &str) -> Lookup<ConfigMap> {
        self.answer(self.cms.borrow().get(name).cloned(), name)
    }
    fn secret(&self, _: &str, name: &str) -> Lookup<Secret> {
        self.answer(self.secrets.borrow().get(name).cloned(), name)
    }
    fn service_account_token(
        &self,
        _: &Pod,
        _: &k8s_openapi::api::core::v1::ServiceAccountTokenProjection,
    ) -> Lookup<str> {
        self.token
            .borrow()
            .clone()
            .map_or(Lookup::NotYetKnown, Lookup::Found)
    }
}

const APP: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: app}
spec:
  volumes:
  - {name: cfg, configMap: {name: cfg}}
  containers:
  - name: main
    image: "busybox:1.36"
    env:
    - {name: PW, valueFrom: {secretKeyRef: {name: creds, key: pw}}}
    volumeMounts:
    - {name: cfg, mountPath: /cfg}
"#;

fn api_pod() -> Pod {
    let mut pod = static_pod(APP);
    pod.metadata.uid = Some("cfg-uid".into());
    pod.metadata.namespace = Some("default".into());
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(CONFIG_SOURCE_ANNOTATION.into(), "api".into());
    pod
}

fn config_map(greeting: &str) -> Rc<ConfigMap> {
    Rc::new(
        serde_json::from_str(&format!(
            r#"{{"metadata":{{"name":"cfg","resourceVersion":"{greeting}"}},"data":{{"greeting":"{greeting}"}}}}"#
        ))
        .unwrap(),
    )
}

fn waiting(
    agent: &super::super::PodWorkers<crate::cri::in_memory::MemoryRuntime>,
) -> (String, String) {
    let pods = agent.pods.borrow();
    let w = pods["cfg-uid"].containers["main"].waiting.clone().unwrap();
    (w.reason, w.message)
}

#[test]
fn a_container_waits_for_unknown_objects_fails_on_missing_ones_and_starts_when_they_appear() {
    let node = Node::new();
    let agent = node.agent();
    agent.sources.borrow_mut().configure(PodSource::Api);
    let objects = Rc::new(Objects::default());
    agent.set_config_objects(objects.clone());
    let pod = api_pod();
    apply(&agent, api_set(vec![pod.clone()]));

    // Nothing known yet: waiting, not an error.
    sync(&agent, &pod);
    assert!(node.running().is_empty());
    assert_eq!(waiting(&agent).0, "ContainerCreating");

    // The volume's ConfigMap is there; the Secret is known to be missing.
    objects
        .cms
        .borrow_mut()
        .insert("cfg".into(), config_map("hello"));
    objects.missing.borrow_mut().push("creds".into());
    sync(&agent, &pod);
    assert!(node.running().is_empty());
    assert_eq!(
        waiting(&agent),
        (
            "CreateContainerConfigError".into(),
            r#"secret "creds" not found"#.into()
        )
    );

    // It appears: the container starts with the value and the volume.
    let s: Secret =
        serde_json::from_str(r#"{"metadata":{"name":"creds"},"data":{"pw":"aHVudGVyMg=="}}"#)
            .unwrap();
    objects
        .secrets
        .borrow_mut()
        .insert("creds".into(), Rc::new(s));
    sync(&agent, &pod);
    let running = node.running();
    assert_eq!(running.len(), 1);
    let env: Vec<_> = running[0]
        .config
        .envs
        .iter()
        .map(|kv| (kv.key.as_str(), kv.value.as_str()))
        .collect();
    assert_eq!(env, [("PW", "hunter2")]);
    let mount = running[0]
        .config
        .mounts
        .iter()
        .find(|m| m.container_path == "/cfg")
        .unwrap();
    assert!(mount.readonly);
    let dir = std::path::PathBuf::from(&mount.host_path);
    assert!(dir.ends_with("pods/cfg-uid/volumes/kubernetes.io~configmap/cfg"));
    assert_eq!(fs::read_to_string(dir.join("greeting")).unwrap(), "hello");

    // The ConfigMap changes: the file follows, the container stays.
    objects
        .cms
        .borrow_mut()
        .insert("cfg".into(), config_map("bonjour"));
    agent.config_object_changed(&ObjectRef {
        kind: Kind::ConfigMap,
        namespace: "default".into(),
        name: "cfg".into(),
    });
    sync(&agent, &pod);
    assert_eq!(fs::read_to_string(dir.join("greeting")).unwrap(), "bonjour");
    let after = node.running();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].id, running[0].id, "not restarted");
}

#[test]
fn a_static_pod_may_not_reference_a_configmap_volume() {
    let node = Node::new();
    let agent = node.agent();
    agent.set_config_objects(Rc::new(Objects::default()));
    let pod = static_pod(APP);
    apply(&agent, super::file_set(vec![pod.clone()]));
    sync(&agent, &pod);
    assert!(node.running().is_empty());
    let uid = crate::pod::uid(&pod).to_string();
    let pods = agent.pods.borrow();
    let w = pods[&uid].containers["main"].waiting.clone().unwrap();
    assert_eq!(w.reason, "CreateContainerConfigError");
}

const TOKEN_APP: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: app}
spec:
  volumes:
  - name: kube-api-access-x
    projected:
      sources:
      - serviceAccountToken: {path: token, expirationSeconds: 3607}
  containers:
  - name: main
    image: "busybox:1.36"
    volumeMounts:
    - {name: kube-api-access-x, mountPath: /var/run/secrets/kubernetes.io/serviceaccount}
"#;

#[test]
fn a_container_waits_for_its_token_and_a_refreshed_token_replaces_the_file_without_a_restart() {
    let node = Node::new();
    let agent = node.agent();
    agent.sources.borrow_mut().configure(PodSource::Api);
    let objects = Rc::new(Objects::default());
    agent.set_config_objects(objects.clone());
    let mut pod = static_pod(TOKEN_APP);
    pod.metadata.uid = Some("cfg-uid".into());
    pod.metadata.namespace = Some("default".into());
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(CONFIG_SOURCE_ANNOTATION.into(), "api".into());
    apply(&agent, api_set(vec![pod.clone()]));

    sync(&agent, &pod);
    assert!(node.running().is_empty());
    assert_eq!(waiting(&agent).0, "ContainerCreating");

    *objects.token.borrow_mut() = Some("first.jwt.sig".into());
    agent.pod_objects_changed("cfg-uid");
    sync(&agent, &pod);
    let running = node.running();
    assert_eq!(running.len(), 1);
    let dir = std::path::PathBuf::from(&running[0].config.mounts[0].host_path);
    assert!(dir.ends_with("volumes/kubernetes.io~projected/kube-api-access-x"));
    assert_eq!(
        fs::read_to_string(dir.join("token")).unwrap(),
        "first.jwt.sig"
    );

    *objects.token.borrow_mut() = Some("second.jwt.sig".into());
    agent.pod_objects_changed("cfg-uid");
    sync(&agent, &pod);
    assert_eq!(
        fs::read_to_string(dir.join("token")).unwrap(),
        "second.jwt.sig"
    );
    assert_eq!(node.running()[0].id, running[0].id, "not restarted");
}

#[test]
fn a_static_pod_may_not_project_a_service_account_token() {
    let node = Node::new();
    let agent = node.agent();
    agent.set_config_objects(Rc::new(Objects::default()));
    let pod = static_pod(TOKEN_APP);
    apply(&agent, super::file_set(vec![pod.clone()]));
    sync(&agent, &pod);
    assert!(node.running().is_empty());
    let uid = crate::pod::uid(&pod).to_string();
    let pods = agent.pods.borrow();
    let w = pods[&uid].containers["main"].waiting.clone().unwrap();
    assert_eq!(w.reason, "CreateContainerConfigError");
}
