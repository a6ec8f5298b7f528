//! The files of configMap, secret, downwardAPI and projected volumes
//! (kubelet's `configmap.MakePayload`, `secret.MakePayload`,
//! `downwardapi.CollectData` and `projected.collectData`): which paths, with
//! which bytes and modes. Writing them (kubelet's atomic writer, the
//! `..data` swap) is the agent's.
//!
//! kubelet's rules kept here:
//! - without `items`, every key becomes a file (a ConfigMap's `data` and
//!   `binaryData`); with `items`, only those, at their `path`, a missing key
//!   being an error unless the volume is `optional`;
//! - a file's mode is its item's `mode`, else the volume's `defaultMode`
//!   (the API defaults it to 0644);
//! - a missing object is `configmap "x" not found` unless `optional`, when
//!   the volume is empty; an object not known yet is a wait, never "not
//!   found";
//! - projected sources are merged in order, each with the volume's
//!   `defaultMode`; a `serviceAccountToken` source is one file at its
//!   `path` holding the token the lookup gives (issued through the
//!   TokenRequest API for the pod's service account, bound to the pod);
//!   a token not issued yet is a wait, as an object not known yet.
//!
//! The payload's `Debug` shows paths and modes, never data.

use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::{
    ConfigMap, DownwardAPIVolumeFile, KeyToPath, Pod, Secret, Volume,
};

use super::container::ContainerParams;
use super::env::{field_ref_value, resource_field_value, NodeAllocatable};
use crate::pod::accessors::{self, namespace as pod_namespace, spec};
use crate::pod::config_objects::{ConfigObjects, Kind, Lookup};

/// The API's default `defaultMode` (0644).
pub const DEFAULT_MODE: u32 = 0o644;

/// The kinds of volume whose files picolet writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigVolume {
    ConfigMap,
    Secret,
    DownwardApi,
    Projected,
}

impl ConfigVolume {
    /// kubelet's plugin directory under `<pod dir>/volumes/`.
    pub fn plugin_dir(self) -> &'static str {
        match self {
            ConfigVolume::ConfigMap => "kubernetes.io~configmap",
            ConfigVolume::Secret => "kubernetes.io~secret",
            ConfigVolume::DownwardApi => "kubernetes.io~downward-api",
            ConfigVolume::Projected => "kubernetes.io~projected",
        }
    }

    /// Whether kubelet backs it with memory (tmpfs, its memory-medium
    /// emptyDir wrapper): secrets, projected volumes (which may hold them
    /// and service-account tokens) and downwardAPI volumes.
    pub fn in_memory(self) -> bool {
        matches!(
            self,
            ConfigVolume::Secret | ConfigVolume::Projected | ConfigVolume::DownwardApi
        )
    }

    /// The kind of `v`, if it is one of these.
    pub fn of(v: &Volume) -> Option<ConfigVolume> {
        if v.config_map.is_some() {
            Some(ConfigVolume::ConfigMap)
        } else if v.secret.is_some() {
            Some(ConfigVolume::Secret)
        } else if v.downward_api.is_some() {
            Some(ConfigVolume::DownwardApi)
        } else if v.projected.is_some() {
            Some(ConfigVolume::Projected)
        } else {
            None
        }
    }
}

/// The pod's configMap, secret, downwardAPI and projected volumes.
pub fn config_volumes(pod: &Pod) -> Vec<(&Volume, ConfigVolume)> {
    spec(pod)
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| ConfigVolume::of(v).map(|k| (v, k)))
        .collect()
}

/// One file of a volume.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct File {
    pub data: Vec<u8>,
    /// Permission bits (`0o644`).
    pub mode: u32,
    /// The user that owns the file, when not root (a projected
    /// service-account token of a pod whose containers all run as one
    /// user: [`accessors::fs_user`]).
    pub owner: Option<u32>,
}

impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "File({} bytes, {:o})", self.data.len(), self.mode)
    }
}

/// A volume's files by relative path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Payload(pub BTreeMap<String, File>);

impl Payload {
    /// A digest of every path, mode and byte, to tell whether a rewrite is
    /// needed without reading the volume back.
    pub fn digest(&self) -> u64 {
        let mut h = std::hash::DefaultHasher::new();
        self.0.hash(&mut h);
        h.finish()
    }
}

/// Why a volume's files cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// A non-optional object or key is missing (kubelet's message).
    #[error("{0}")]
    Missing(String),
    /// A referenced object is not known yet: wait.
    #[error("{0}")]
    NotYetKnown(String),
    /// The volume asks for what picolet cannot do.
    #[error("{0}")]
    Invalid(String),
}

/// What a downwardAPI item may read besides the pod: the node's
/// allocatable, the default of unset limits.
#[derive(Clone, Copy, Debug, Default)]
pub struct Downward {
    pub node_allocatable: NodeAllocatable,
}

fn mode_bits(m: Option<i32>, default: u32) -> u32 {
    m.map(|m| (m as u32) & 0o7777).unwrap_or(default)
}

/// The object behind a reference, or `None` when an optional one is
/// missing (the volume or source is then empty).
fn lookup<T>(
    l: Lookup<T>,
    kind: Kind,
    name: &str,
    optional: bool,
) -> Result<Option<std::rc::Rc<T>>, PayloadError> {
    match l {
        Lookup::Found(o) => Ok(Some(o)),
        Lookup::NotFound if optional => Ok(None),
        Lookup::NotFound => Err(PayloadError::Missing(format!(
            "{} {name:?} not found",
            kind.as_str()
        ))),
        Lookup::NotYetKnown => Err(PayloadError::NotYetKnown(format!(
            "{} {name:?} is not known yet",
            kind.as_str()
        ))),
    }
}

/// A ConfigMap's files (kubelet's `configmap.MakePayload`): `data` and
/// `binaryData` alike.
fn config_map_files(
    out: &mut BTreeMap<String, File>,
    cm: Option<&ConfigMap>,
    items: Option<&[KeyToPath]>,
    mode: u32,
    optional: bool,
) -> Result<(), PayloadError> {
    let data = cm.and_then(|c| c.data.as_ref());
    let binary = cm.and_then(|c| c.binary_data.as_ref());
    let entries = data
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, v.as_bytes()))
        .chain(binary.into_iter().flatten().map(|(k, v)| (k, &v.0[..])));
    let lookup = |key: &str| {
        data.and_then(|d| d.get(key))
            .map(|s| s.as_bytes())
            .or_else(|| binary.and_then(|b| b.get(key)).map(|b| &b.0[..]))
    };
    keyed_files(out, entries, lookup, items, mode, optional, |key| {
        format!("configmap references non-existent config key: {key}")
    })
}

/// A Secret's files (kubelet's `secret.MakePayload`).
fn secret_files(
    out: &mut BTreeMap<String, File>,
    s: Option<&Secret>,
    items: Option<&[KeyToPath]>,
    mode: u32,
    optional: bool,
) -> Result<(), PayloadError> {
    let data = s.and_then(|s| s.data.as_ref());
    let entries = data.into_iter().flatten().map(|(k, v)| (k, &v.0[..]));
    let lookup = |key: &str| data.and_then(|d| d.get(key)).map(|v| &v.0[..]);
    keyed_files(out, entries, lookup, items, mode, optional, |key| {
        format!("references non-existent secret key: {key}")
    })
}

/// The files of a keyed object, as kubelet writes ConfigMaps and Secrets:
/// without `items`, every key at `mode`; with them, only the listed keys at
/// their paths (an item's own mode first). A listed key that is missing is
/// skipped when the volume is optional and an error (`missing`'s message)
/// otherwise.
fn keyed_files<'a>(
    out: &mut BTreeMap<String, File>,
    entries: impl Iterator<Item = (&'a String, &'a [u8])>,
    lookup: impl Fn(&str) -> Option<&'a [u8]>,
    items: Option<&[KeyToPath]>,
    mode: u32,
    optional: bool,
    missing: impl Fn(&str) -> String,
) -> Result<(), PayloadError> {
    let Some(items) = items.filter(|i| !i.is_empty()) else {
        for (k, v) in entries {
            out.insert(
                k.clone(),
                File {
                    data: v.to_vec(),
                    mode,
                    owner: None,
                },
            );
        }
        return Ok(());
    };
    for item in items {
        let Some(v) = lookup(&item.key) else {
            if optional {
                continue;
            }
            return Err(PayloadError::Missing(missing(&item.key)));
        };
        out.insert(
            item.path.clone(),
            File {
                data: v.to_vec(),
                mode: mode_bits(item.mode, mode),
                owner: None,
            },
        );
    }
    Ok(())
}

/// downwardAPI items (kubelet's `downwardapi.CollectData`).
fn downward_files(
    out: &mut BTreeMap<String, File>,
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    mode: u32,
    d: &Downward,
) -> Result<(), PayloadError> {
    let params = ContainerParams {
        node_allocatable: d.node_allocatable,
        ..Default::default()
    };
    for item in items {
        let value = if let Some(fr) = &item.field_ref {
            field_ref_value(pod, &params, fr)
        } else if let Some(rf) = &item.resource_field_ref {
            let name = rf.container_name.as_deref().unwrap_or_default();
            match accessors::container(pod, name) {
                Some(c) => resource_field_value(pod, c, &params, rf),
                None => Err(format!(
                    "resourceFieldRef: container {name:?} not found in the pod"
                )),
            }
        } else {
            Ok(String::new())
        };
        let value = value.map_err(|e| PayloadError::Invalid(format!("{}: {e}", item.path)))?;
        let mode = mode_bits(item.mode, mode);
        out.insert(
            item.path.clone(),
            File {
                data: value.into_bytes(),
                mode,
                owner: None,
            },
        );
    }
    Ok(())
}

/// The files of volume `v` of `pod`.
pub fn volume_payload(
    pod: &Pod,
    v: &Volume,
    objects: &dyn ConfigObjects,
    d: &Downward,
) -> Result<Payload, PayloadError> {
    let ns = pod_namespace(pod);
    let mut out = BTreeMap::new();
    if let Some(cm) = &v.config_map {
        let optional = cm.optional == Some(true);
        let mode = mode_bits(cm.default_mode, DEFAULT_MODE);
        let obj = lookup(
            objects.config_map(ns, &cm.name),
            Kind::ConfigMap,
            &cm.name,
            optional,
        )?;
        config_map_files(
            &mut out,
            obj.as_deref(),
            cm.items.as_deref(),
            mode,
            optional,
        )?;
    } else if let Some(s) = &v.secret {
        let name = s.secret_name.as_deref().unwrap_or_default();
        let optional = s.optional == Some(true);
        let mode = mode_bits(s.default_mode, DEFAULT_MODE);
        let obj = lookup(objects.secret(ns, name), Kind::Secret, name, optional)?;
        secret_files(&mut out, obj.as_deref(), s.items.as_deref(), mode, optional)?;
    } else if let Some(da) = &v.downward_api {
        let mode = mode_bits(da.default_mode, DEFAULT_MODE);
        downward_files(
            &mut out,
            pod,
            da.items.as_deref().unwrap_or_default(),
            mode,
            d,
        )?;
    } else if let Some(p) = &v.projected {
        let mode = mode_bits(p.default_mode, DEFAULT_MODE);
        for src in p.sources.iter().flatten() {
            if let Some(cm) = &src.config_map {
                let optional = cm.optional == Some(true);
                let obj = lookup(
                    objects.config_map(ns, &cm.name),
                    Kind::ConfigMap,
                    &cm.name,
                    optional,
                )?;
                config_map_files(
                    &mut out,
                    obj.as_deref(),
                    cm.items.as_deref(),
                    mode,
                    optional,
                )?;
            } else if let Some(s) = &src.secret {
                let optional = s.optional == Some(true);
                let obj = lookup(objects.secret(ns, &s.name), Kind::Secret, &s.name, optional)?;
                secret_files(&mut out, obj.as_deref(), s.items.as_deref(), mode, optional)?;
            } else if let Some(da) = &src.downward_api {
                downward_files(
                    &mut out,
                    pod,
                    da.items.as_deref().unwrap_or_default(),
                    mode,
                    d,
                )?;
            } else if let Some(t) = &src.service_account_token {
                let token = match objects.service_account_token(pod, t) {
                    Lookup::Found(token) => token,
                    Lookup::NotFound | Lookup::NotYetKnown => {
                        return Err(PayloadError::NotYetKnown(format!(
                            "the service account token for {:?} is not issued yet",
                            t.path
                        )))
                    }
                };
                // kubelet's rule: readable by the one user (or, through
                // the fsGroup ownership, the group) the containers run as,
                // else the volume's mode.
                let owner = accessors::fs_user(pod);
                let mode = match owner.is_some() || accessors::fs_group(pod).is_some() {
                    true => 0o600,
                    false => mode,
                };
                out.insert(
                    t.path.clone(),
                    File {
                        data: token.as_bytes().to_vec(),
                        mode,
                        owner,
                    },
                );
            } else {
                return Err(PayloadError::Invalid(
                    "this projected volume source is not supported".into(),
                ));
            }
        }
    } else {
        return Err(PayloadError::Invalid(format!(
            "volume {:?} is not a configMap, secret, downwardAPI or projected volume",
            v.name
        )));
    }
    for path in out.keys() {
        check_path(path)?;
    }
    Ok(Payload(out))
}

/// kubelet's atomic writer's `validatePath`: relative, no `..` element, not
/// starting with `..` (those names are the writer's own).
pub fn check_path(path: &str) -> Result<(), PayloadError> {
    let bad = |why: &str| {
        Err(PayloadError::Invalid(format!(
            "invalid path {path:?}: {why}"
        )))
    };
    if path.is_empty() {
        return bad("empty");
    }
    if path.starts_with('/') {
        return bad("must be relative");
    }
    if path.starts_with("..") {
        return bad("must not start with '..'");
    }
    if path.split('/').any(|c| c == ".." || c.is_empty()) {
        return bad("must not contain '..' or empty elements");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSecurityContext;
    use std::rc::Rc;

    #[derive(Default)]
    struct Store {
        cms: BTreeMap<String, Rc<ConfigMap>>,
        secrets: BTreeMap<String, Rc<Secret>>,
        unknown: Vec<String>,
        token: Option<Rc<str>>,
        asked: std::cell::RefCell<Vec<(String, Option<i64>)>>,
    }

    impl ConfigObjects for Store {
        fn config_map(&self, _ns: &str, name: &str) -> Lookup<ConfigMap> {
            if self.unknown.iter().any(|n| n == name) {
                return Lookup::NotYetKnown;
            }
            self.cms
                .get(name)
                .cloned()
                .map_or(Lookup::NotFound, Lookup::Found)
        }
        fn secret(&self, _ns: &str, name: &str) -> Lookup<Secret> {
            if self.unknown.iter().any(|n| n == name) {
                return Lookup::NotYetKnown;
            }
            self.secrets
                .get(name)
                .cloned()
                .map_or(Lookup::NotFound, Lookup::Found)
        }
        fn service_account_token(
            &self,
            pod: &Pod,
            src: &k8s_openapi::api::core::v1::ServiceAccountTokenProjection,
        ) -> Lookup<str> {
            self.asked.borrow_mut().push((
                pod.metadata.name.clone().unwrap_or_default(),
                src.expiration_seconds,
            ));
            self.token
                .clone()
                .map_or(Lookup::NotYetKnown, Lookup::Found)
        }
    }

    fn store() -> Store {
        let cm: ConfigMap = serde_json::from_str(
            r#"{"metadata":{"name":"cfg"},"data":{"a":"1","b":"2"},"binaryData":{"bin":"AAE="}}"#,
        )
        .unwrap();
        let s: Secret =
            serde_json::from_str(r#"{"metadata":{"name":"sec"},"data":{"pw":"aHVudGVyMg=="}}"#)
                .unwrap();
        let mut st = Store::default();
        st.cms.insert("cfg".into(), Rc::new(cm));
        st.secrets.insert("sec".into(), Rc::new(s));
        st
    }

    fn pod(volumes: &str) -> Pod {
        serde_yaml_ng::from_str(&format!(
            "metadata: {{name: p, namespace: team, uid: u1, labels: {{app: web}}}}\nspec:\n  containers: [{{name: c, image: i, resources: {{limits: {{memory: 64Mi}}}}}}]\n  volumes:\n{volumes}"
        ))
        .unwrap()
    }

    fn payload_of(p: &Pod, st: &Store) -> Result<Payload, PayloadError> {
        let v = &spec(p).volumes.as_ref().unwrap()[0];
        volume_payload(p, v, st, &Downward::default())
    }

    fn files(p: &Payload) -> Vec<(String, String, u32)> {
        p.0.iter()
            .map(|(k, f)| {
                (
                    k.clone(),
                    String::from_utf8_lossy(&f.data).into_owned(),
                    f.mode,
                )
            })
            .collect()
    }

    #[test]
    fn every_key_of_a_configmap_becomes_a_file_with_the_default_mode() {
        let p = pod("  - {name: v, configMap: {name: cfg}}\n");
        let got = payload_of(&p, &store()).unwrap();
        assert_eq!(
            files(&got),
            vec![
                ("a".into(), "1".into(), 0o644),
                ("b".into(), "2".into(), 0o644),
                ("bin".into(), "\u{0}\u{1}".into(), 0o644),
            ]
        );
    }

    #[test]
    fn items_pick_keys_to_paths_with_their_own_modes() {
        let p = pod("  - {name: v, configMap: {name: cfg, defaultMode: 256, items: [{key: a, path: dir/a.txt}, {key: b, path: b, mode: 384}]}}\n");
        let got = payload_of(&p, &store()).unwrap();
        assert_eq!(
            files(&got),
            vec![
                ("b".into(), "2".into(), 0o600),
                ("dir/a.txt".into(), "1".into(), 0o400),
            ]
        );
    }

    #[test]
    fn a_missing_item_key_is_kubelets_error_unless_optional() {
        let p = pod("  - {name: v, configMap: {name: cfg, items: [{key: nope, path: x}]}}\n");
        assert_eq!(
            payload_of(&p, &store()),
            Err(PayloadError::Missing(
                "configmap references non-existent config key: nope".into()
            ))
        );
        let p = pod("  - {name: v, configMap: {name: cfg, optional: true, items: [{key: nope, path: x}, {key: a, path: a}]}}\n");
        assert_eq!(files(&payload_of(&p, &store()).unwrap()).len(), 1);
    }

    #[test]
    fn a_missing_object_is_not_found_unless_optional_and_an_unknown_one_is_a_wait() {
        let p = pod("  - {name: v, secret: {secretName: gone}}\n");
        assert_eq!(
            payload_of(&p, &store()),
            Err(PayloadError::Missing("secret \"gone\" not found".into()))
        );
        let p = pod("  - {name: v, secret: {secretName: gone, optional: true}}\n");
        assert_eq!(payload_of(&p, &store()), Ok(Payload::default()));
        let mut st = store();
        st.unknown.push("sec".into());
        let p = pod("  - {name: v, secret: {secretName: sec, optional: true}}\n");
        assert!(matches!(
            payload_of(&p, &st),
            Err(PayloadError::NotYetKnown(_))
        ));
    }

    #[test]
    fn secret_data_is_decoded_bytes_and_never_printed() {
        let p = pod("  - {name: v, secret: {secretName: sec, defaultMode: 288}}\n");
        let got = payload_of(&p, &store()).unwrap();
        assert_eq!(files(&got), vec![("pw".into(), "hunter2".into(), 0o440)]);
        assert!(!format!("{got:?}").contains("hunter2"));
    }

    #[test]
    fn projected_sources_merge_in_order_and_downward_items_read_the_pod() {
        let p = pod(concat!(
            "  - name: v\n    projected:\n      defaultMode: 292\n      sources:\n",
            "      - configMap: {name: cfg, items: [{key: a, path: a}]}\n",
            "      - secret: {name: sec}\n",
            "      - downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}, {path: mem, resourceFieldRef: {containerName: c, resource: limits.memory, divisor: 1Mi}}]}\n",
        ));
        let got = payload_of(&p, &store()).unwrap();
        assert_eq!(
            files(&got),
            vec![
                ("a".into(), "1".into(), 0o444),
                ("labels".into(), "app=\"web\"".into(), 0o444),
                ("mem".into(), "64".into(), 0o444),
                ("pw".into(), "hunter2".into(), 0o444),
            ]
        );
    }

    #[test]
    fn a_service_account_token_is_a_file_once_issued_and_a_wait_before() {
        // kubelet's default kube-api-access volume.
        let p = pod(concat!(
            "  - name: kube-api-access-x\n    projected:\n      defaultMode: 420\n      sources:\n",
            "      - serviceAccountToken: {path: token, expirationSeconds: 3607}\n",
            "      - configMap: {name: cfg, items: [{key: a, path: ca.crt}]}\n",
            "      - downwardAPI: {items: [{path: namespace, fieldRef: {fieldPath: metadata.namespace}}]}\n",
        ));
        let mut st = store();
        assert!(matches!(
            payload_of(&p, &st),
            Err(PayloadError::NotYetKnown(_))
        ));
        st.token = Some("header.payload.sig".into());
        let got = payload_of(&p, &st).unwrap();
        assert_eq!(
            files(&got),
            vec![
                ("ca.crt".into(), "1".into(), 0o644),
                ("namespace".into(), "team".into(), 0o644),
                ("token".into(), "header.payload.sig".into(), 0o644),
            ]
        );
        assert!(!format!("{got:?}").contains("payload"));
        assert_eq!(
            st.asked.borrow().last(),
            Some(&("p".to_string(), Some(3607))),
            "the lookup is asked with the pod and its projection"
        );
    }

    #[test]
    fn a_token_is_0600_and_owned_by_the_pods_one_user_or_0600_with_an_fs_group() {
        let volume = "  - name: t\n    projected:\n      sources:\n      - serviceAccountToken: {path: token}\n      - downwardAPI: {items: [{path: ns, fieldRef: {fieldPath: metadata.namespace}}]}\n";
        let mut st = store();
        st.token = Some("header.payload.sig".into());
        let token = |p: &Pod| {
            let got = payload_of(p, &st).unwrap();
            let t = &got.0["token"];
            assert_eq!(got.0["ns"].owner, None, "only the token is the user's");
            (t.mode, t.owner)
        };
        let mut p = pod(volume);
        assert_eq!(
            token(&p),
            (0o644, None),
            "no user, no group: the volume's mode"
        );
        p.spec.as_mut().unwrap().security_context = Some(PodSecurityContext {
            run_as_user: Some(1000),
            ..Default::default()
        });
        assert_eq!(token(&p), (0o600, Some(1000)));
        p.spec.as_mut().unwrap().security_context = Some(PodSecurityContext {
            fs_group: Some(2000),
            ..Default::default()
        });
        assert_eq!(
            token(&p),
            (0o600, None),
            "the fsGroup ownership adds group read"
        );
    }

    #[test]
    fn paths_that_escape_or_clash_with_the_writers_names_are_refused() {
        for bad in ["", "/etc/x", "..data", "../x", "a/../b", "a//b"] {
            assert!(check_path(bad).is_err(), "{bad}");
        }
        for ok in ["a", "a/b", "a..b", ".hidden"] {
            assert!(check_path(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn the_digest_follows_data_and_modes() {
        let a = Payload(
            [(
                "k".to_string(),
                File {
                    data: b"1".to_vec(),
                    mode: 0o644,
                    owner: None,
                },
            )]
            .into(),
        );
        let mut b = a.clone();
        assert_eq!(a.digest(), b.digest());
        b.0.get_mut("k").unwrap().mode = 0o600;
        assert_ne!(a.digest(), b.digest());
    }
}
