//! The ConfigMaps and Secrets a pod needs, and the narrow view through
//! which pure code reads them.
//!
//! - [`references`]: which objects a pod references (configMap and secret
//!   volumes, projected sources, `envFrom`, `valueFrom`), in its own
//!   namespace, as the Node authorizer's graph sees them: the API-server
//!   side watches each of them by name and nothing else.
//! - [`Lookup`]: an answer that keeps "the API server said it does not
//!   exist" ([`Lookup::NotFound`]) apart from "nothing is known yet"
//!   ([`Lookup::NotYetKnown`]: not synced, offline, no cached copy). Only
//!   the first may make a non-optional reference an error; the second
//!   means wait.
//! - [`ConfigObjects`]: where the agent looks objects up (the API-server
//!   side's watched store, restored from its cache after a reboot), and
//!   the service-account tokens of projected `serviceAccountToken`
//!   sources (the API-server side's TokenRequests, [`Lookup<str>`]).
//!
//! Pure: no I/O, no clock, no logging. A Secret's data is never formatted
//! here (nothing derives `Debug` over it).

use std::collections::BTreeSet;
use std::fmt;
use std::rc::Rc;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccountTokenProjection};

use super::accessors;

/// The two kinds of object a pod can reference by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    ConfigMap,
    Secret,
}

impl Kind {
    /// kubelet's spelling in its messages (`configmap "x" not found`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configmap",
            Kind::Secret => "secret",
        }
    }
}

/// One referenced object: kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }
}

/// What is known of one object (or token: `Lookup<str>`).
pub enum Lookup<T: ?Sized> {
    Found(Rc<T>),
    /// The API server (or a synced watch) says it does not exist.
    NotFound,
    /// Not known yet: the watch has not synced and nothing is cached.
    NotYetKnown,
}

impl<T: ?Sized> Clone for Lookup<T> {
    fn clone(&self) -> Self {
        match self {
            Lookup::Found(o) => Lookup::Found(o.clone()),
            Lookup::NotFound => Lookup::NotFound,
            Lookup::NotYetKnown => Lookup::NotYetKnown,
        }
    }
}

impl<T: ?Sized> fmt::Debug for Lookup<T> {
    /// Never the object: a Secret's data must not reach a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Lookup::Found(_) => "Found",
            Lookup::NotFound => "NotFound",
            Lookup::NotYetKnown => "NotYetKnown",
        })
    }
}

/// Where ConfigMaps and Secrets are looked up, by namespace and name,
/// and service-account tokens by pod and projection.
pub trait ConfigObjects {
    fn config_map(&self, namespace: &str, name: &str) -> Lookup<ConfigMap>;
    fn secret(&self, namespace: &str, name: &str) -> Lookup<Secret>;

    /// The token for the projected source `src` of `pod`: its service
    /// account's, with `src`'s audience and expiry, bound to `pod`.
    /// [`Lookup::NotYetKnown`] until one was issued (or after the last one
    /// expired): the container waits. Without a token source: never known.
    fn service_account_token(
        &self,
        _pod: &Pod,
        _src: &ServiceAccountTokenProjection,
    ) -> Lookup<str> {
        Lookup::NotYetKnown
    }
}

/// Whether `pod` has a projected `serviceAccountToken` source (a token
/// only the API server can issue).
pub fn needs_service_account_token(pod: &Pod) -> bool {
    accessors::spec(pod)
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.projected.as_ref())
        .flat_map(|p| p.sources.iter().flatten())
        .any(|s| s.service_account_token.is_some())
}

/// Every ConfigMap and Secret `pod` references, in its namespace. Empty
/// names (invalid, refused by validation) are left out.
pub fn references(pod: &Pod) -> BTreeSet<ObjectRef> {
    let ns = accessors::namespace(pod);
    let mut out = BTreeSet::new();
    let mut add = |kind: Kind, name: &str| {
        if !name.is_empty() {
            out.insert(ObjectRef {
                kind,
                namespace: ns.to_string(),
                name: name.to_string(),
            });
        }
    };
    for v in accessors::spec(pod).volumes.iter().flatten() {
        if let Some(cm) = &v.config_map {
            add(Kind::ConfigMap, &cm.name);
        }
        if let Some(s) = &v.secret {
            add(Kind::Secret, s.secret_name.as_deref().unwrap_or_default());
        }
        for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &src.config_map {
                add(Kind::ConfigMap, &cm.name);
            }
            if let Some(s) = &src.secret {
                add(Kind::Secret, &s.name);
            }
        }
    }
    for (c, _) in accessors::all_containers(pod) {
        for from in c.env_from.iter().flatten() {
            if let Some(cm) = &from.config_map_ref {
                add(Kind::ConfigMap, &cm.name);
            }
            if let Some(s) = &from.secret_ref {
                add(Kind::Secret, &s.name);
            }
        }
        for e in c.env.iter().flatten() {
            let Some(vf) = &e.value_from else { continue };
            if let Some(cm) = &vf.config_map_key_ref {
                add(Kind::ConfigMap, &cm.name);
            }
            if let Some(s) = &vf.secret_key_ref {
                add(Kind::Secret, &s.name);
            }
        }
    }
    out
}

/// The union of [`references`] over `pods`.
pub fn references_of<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> BTreeSet<ObjectRef> {
    pods.into_iter().flat_map(references).collect()
}

/// kubelet's `IsEnvVarName`: `[-._a-zA-Z][-._a-zA-Z0-9]*`.
pub fn is_env_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    let ok_first = |c: char| c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_');
    match chars.next() {
        Some(c) if ok_first(c) => chars.all(|c| ok_first(c) || c.is_ascii_digit()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn r(kind: Kind, name: &str) -> ObjectRef {
        ObjectRef {
            kind,
            namespace: "team".into(),
            name: name.into(),
        }
    }

    #[test]
    fn every_kind_of_reference_is_found_in_the_pods_namespace() {
        let p = pod(r#"
metadata: {name: web, namespace: team, uid: u1}
spec:
  volumes:
  - {name: a, configMap: {name: cm-vol}}
  - {name: b, secret: {secretName: sec-vol}}
  - name: c
    projected:
      sources:
      - configMap: {name: cm-proj}
      - secret: {name: sec-proj}
      - downwardAPI: {items: [{path: n, fieldRef: {fieldPath: metadata.name}}]}
  - {name: d, emptyDir: {}}
  initContainers:
  - name: init
    image: i
    envFrom: [{secretRef: {name: sec-init}}]
  containers:
  - name: c
    image: i
    envFrom: [{configMapRef: {name: cm-envfrom}, prefix: P_}]
    env:
    - {name: A, valueFrom: {configMapKeyRef: {name: cm-key, key: k}}}
    - {name: B, valueFrom: {secretKeyRef: {name: sec-key, key: k}}}
    - {name: C, value: plain}
"#);
        let got = references(&p);
        let want: BTreeSet<ObjectRef> = [
            r(Kind::ConfigMap, "cm-vol"),
            r(Kind::ConfigMap, "cm-proj"),
            r(Kind::ConfigMap, "cm-envfrom"),
            r(Kind::ConfigMap, "cm-key"),
            r(Kind::Secret, "sec-vol"),
            r(Kind::Secret, "sec-proj"),
            r(Kind::Secret, "sec-init"),
            r(Kind::Secret, "sec-key"),
        ]
        .into_iter()
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_pod_without_references_needs_nothing_and_names_are_shared_across_pods() {
        let plain = pod(
            "metadata: {name: a, namespace: team}\nspec: {containers: [{name: c, image: i}]}\n",
        );
        assert!(references(&plain).is_empty());
        let one = pod("metadata: {name: b, namespace: team}\nspec: {volumes: [{name: v, configMap: {name: shared}}], containers: [{name: c, image: i}]}\n");
        let two = pod("metadata: {name: c, namespace: team}\nspec: {containers: [{name: c, image: i, envFrom: [{configMapRef: {name: shared}}]}]}\n");
        let all = references_of([&plain, &one, &two]);
        assert_eq!(all.len(), 1);
        assert!(all.contains(&r(Kind::ConfigMap, "shared")));
    }

    #[test]
    fn a_configmap_and_a_secret_of_the_same_name_are_two_objects() {
        let p = pod("metadata: {name: b, namespace: team}\nspec: {volumes: [{name: v, configMap: {name: x}}, {name: w, secret: {secretName: x}}], containers: [{name: c, image: i}]}\n");
        assert_eq!(references(&p).len(), 2);
        assert_eq!(r(Kind::Secret, "x").to_string(), "secret team/x");
    }

    #[test]
    fn only_a_projected_service_account_token_needs_a_token() {
        let plain = pod("metadata: {name: b, namespace: team}\nspec: {volumes: [{name: v, projected: {sources: [{configMap: {name: x}}]}}], containers: [{name: c, image: i}]}\n");
        assert!(!needs_service_account_token(&plain));
        let with = pod("metadata: {name: b, namespace: team}\nspec: {volumes: [{name: v, projected: {sources: [{configMap: {name: x}}, {serviceAccountToken: {path: token}}]}}], containers: [{name: c, image: i}]}\n");
        assert!(needs_service_account_token(&with));
        assert!(
            references(&with).len() == 1,
            "a token is not a ConfigMap or Secret reference"
        );
    }

    #[test]
    fn env_var_names_follow_kubelets_rule() {
        for ok in ["A", "a_b", "_x", "-x", ".x", "A1", "my.var-2"] {
            assert!(is_env_var_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A B", "A=B", "é", "A/B"] {
            assert!(!is_env_var_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_lookup_never_prints_its_object() {
        let s = Secret {
            data: Some(
                [(
                    "k".to_string(),
                    k8s_openapi::ByteString(b"hunter2".to_vec()),
                )]
                .into(),
            ),
            ..Default::default()
        };
        let text = format!("{:?}", Lookup::Found(Rc::new(s)));
        assert_eq!(text, "Found");
        let token: Lookup<str> = Lookup::Found(Rc::from("header.payload.sig"));
        assert_eq!(format!("{token:?}"), "Found");
    }
}
