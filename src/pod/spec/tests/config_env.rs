//! Env from ConfigMaps and Secrets (`envFrom`, `configMapKeyRef`,
//! `secretKeyRef`) as kubelet's `makeEnvironmentVariables` resolves them,
//! against a table of objects: found, not found, not known yet.

use std::collections::BTreeMap;
use std::rc::Rc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::*;
use crate::pod::config_objects::{ConfigObjects, Lookup};

#[derive(Default)]
struct Objects {
    cms: BTreeMap<String, Rc<ConfigMap>>,
    secrets: BTreeMap<String, Rc<Secret>>,
    unknown: Vec<&'static str>,
}

impl ConfigObjects for Objects {
    fn config_map(&self, ns: &str, name: &str) -> Lookup<ConfigMap> {
        assert_eq!(ns, "n", "looked up in the pod's namespace");
        if self.unknown.contains(&name) {
            return Lookup::NotYetKnown;
        }
        self.cms
            .get(name)
            .cloned()
            .map_or(Lookup::NotFound, Lookup::Found)
    }
    fn secret(&self, ns: &str, name: &str) -> Lookup<Secret> {
        assert_eq!(ns, "n", "looked up in the pod's namespace");
        if self.unknown.contains(&name) {
            return Lookup::NotYetKnown;
        }
        self.secrets
            .get(name)
            .cloned()
            .map_or(Lookup::NotFound, Lookup::Found)
    }
}

fn objects() -> Objects {
    let cm: ConfigMap = serde_json::from_str(
        r#"{"metadata":{"name":"cm"},"data":{"HOST":"db","PORT":"5432","1BAD":"x","with space":"y"}}"#,
    )
    .unwrap();
    let s: Secret =
        serde_json::from_str(r#"{"metadata":{"name":"creds"},"data":{"PASSWORD":"aHVudGVyMg=="}}"#)
            .unwrap();
    let mut o = Objects::default();
    o.cms.insert("cm".into(), Rc::new(cm));
    o.secrets.insert("creds".into(), Rc::new(s));
    o
}

const POD: &str = r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: app
    image: x
    envFrom:
    - configMapRef: {name: cm}
    - secretRef: {name: creds}
      prefix: S_
    env:
    - {name: PORT, value: "override-$(HOST)"}
    - {name: K, valueFrom: {configMapKeyRef: {name: cm, key: HOST}}}
    - {name: PW, valueFrom: {secretKeyRef: {name: creds, key: PASSWORD}}}
"#;

fn env_of(p: &Pod, o: &Objects) -> Result<Vec<(String, String)>, SpecError> {
    let cp = ContainerParams {
        objects: Some(o),
        ..params()
    };
    container_config(p, first(p), &cp)
        .map(|c| c.envs.into_iter().map(|kv| (kv.key, kv.value)).collect())
}

#[test]
fn env_from_and_key_refs_resolve_in_order_with_later_env_winning() {
    let got = env_of(&pod(POD), &objects()).unwrap();
    let want: Vec<(String, String)> = [
        ("HOST", "db"),
        ("PORT", "override-db"),
        ("S_PASSWORD", "hunter2"),
        ("K", "db"),
        ("PW", "hunter2"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(got, want, "invalid names (1BAD, 'with space') are skipped");
}

#[test]
fn skipped_env_from_keys_are_reported_in_kubelets_words() {
    let p = pod(POD);
    let o = objects();
    assert_eq!(
        env_from_skipped(&p, first(&p), &o),
        vec!["Keys [1BAD, with space] from the EnvFrom configMap n/cm were skipped since they are considered invalid environment variable names.".to_string()]
    );
}

#[test]
fn a_missing_object_or_key_is_kubelets_config_error_unless_optional() {
    let mut o = objects();
    o.cms.clear();
    let err = env_of(&pod(POD), &o).unwrap_err();
    assert_eq!(err.kind, SpecErrorKind::Missing);
    assert_eq!(err.to_string(), r#"configmap "cm" not found"#);

    let p = pod(&POD.replace("key: PASSWORD", "key: NOPE"));
    let err = env_of(&p, &objects()).unwrap_err();
    assert_eq!(err.kind, SpecErrorKind::Missing);
    assert_eq!(err.to_string(), "couldn't find key NOPE in Secret n/creds");

    let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: app
    image: x
    envFrom: [{configMapRef: {name: gone, optional: true}}]
    env:
    - {name: A, valueFrom: {secretKeyRef: {name: gone, key: k, optional: true}}}
    - {name: B, valueFrom: {secretKeyRef: {name: creds, key: nope, optional: true}}}
"#);
    assert_eq!(env_of(&p, &objects()).unwrap(), vec![]);
}

#[test]
fn an_object_not_known_yet_is_a_wait_even_when_optional() {
    let mut o = objects();
    o.unknown.push("creds");
    let err = env_of(&pod(POD), &o).unwrap_err();
    assert_eq!(err.kind, SpecErrorKind::NotYetKnown);
    let p = pod(&POD.replace("{name: creds}", "{name: creds, optional: true}"));
    let err = env_of(&p, &o).unwrap_err();
    assert_eq!(
        err.kind,
        SpecErrorKind::NotYetKnown,
        "optional is no licence to guess"
    );
}
