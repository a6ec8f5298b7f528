//! The ConfigMaps and Secrets the node's pods reference, each watched on
//! its own by name, each kept in its own crash-safe cache.
//!
//! The Node authorizer lets `system:node:<name>` get, list and watch a
//! ConfigMap or Secret only when a pod bound to the node references it,
//! and only by name: so every referenced object gets one [`Informer`] of
//! `/api/v1/namespaces/<ns>/<configmaps|secrets>?fieldSelector=metadata.name=<name>`
//! (kubelet's `Watch` change-detection strategy). The pod source tells
//! [`ConfigWatches::track`] the pods it hands the agent; objects no pod
//! references any more stop being watched and leave the cache.
//!
//! Caches: `<root>/apiserver/configmaps/<ns>_<name>/` and
//! `<root>/apiserver/secrets/<ns>_<name>/` (names and namespaces hold no
//! `_`, so the pair is unique), every directory 0700 and every file 0600:
//! a Secret's bytes live nowhere else on disk but in the volumes written
//! from them. After a reboot with the link down, the objects are there at
//! once; a cache with a sync point that holds no object means the object
//! did not exist then.
//!
//! Both kinds are read into one slim type, [`ConfigData`] (metadata,
//! `data`, `binaryData`, as the API sends them), so the binary carries one
//! informer and one small decoder for both instead of k8s-openapi's
//! ConfigMap and Secret deserializers and serializers (the cache stores
//! that form too); the agent gets k8s-openapi's types, built once per
//! change.
//!
//! A plain LIST (the reflector's fallback when the streaming list fails,
//! see `reflector`) is answered as a `ConfigMapList` or a `SecretList`;
//! `watch::decode_list` takes any list kind, so one [`ConfigData`] reads
//! both.
//!
//! Lookups answer [`Lookup::NotYetKnown`] until the watch synced (or its
//! cache had a sync point): never "not found" for lack of an answer.
//! Nothing here logs an object's data; only kinds, namespaces and names.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::rc::{Rc, Weak};

use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ByteString, NamespaceResourceScope};
use serde::{Deserialize, Serialize};

use crate::apiserver::listwatch::watch::slim_core_v1_object;

use crate::apiserver::client::request::{collection_path, Selectors};
use crate::apiserver::client::transport::Client;
use crate::apiserver::listwatch::disk_cache::Cache;
use crate::apiserver::listwatch::informer::Informer;
use crate::pod::config_objects::{self, ConfigObjects, Kind, Lookup, ObjectRef};
use crate::rt;

/// The directory holding the caches of one kind (under `--root-dir`).
pub fn kind_dir(root_dir: &Path, kind: Kind) -> PathBuf {
    root_dir.join("apiserver").join(match kind {
        Kind::ConfigMap => "configmaps",
        Kind::Secret => "secrets",
    })
}

/// The cache directory of one object.
pub fn cache_dir(root_dir: &Path, r: &ObjectRef) -> PathBuf {
    kind_dir(root_dir, r.kind).join(format!("{}_{}", r.namespace, r.name))
}

/// A ConfigMap or a Secret as the node reads and caches it: a Secret's
/// `data` stays base64 until it is handed to the agent. No `Debug`: it may
/// hold a Secret.
#[derive(Clone, Default, Deserialize, Serialize)]
pub struct ConfigData {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<BTreeMap<String, String>>,
    #[serde(
        default,
        rename = "binaryData",
        skip_serializing_if = "Option::is_none"
    )]
    pub binary_data: Option<BTreeMap<String, String>>,
}

// The informer is given its collection path explicitly (configmaps or
// secrets), and `watch::decode_list` takes the list kind the server sends
// (`ConfigMapList`, `SecretList`, or `List`): the names here are only for
// rare log lines.
slim_core_v1_object!(
    ConfigData,
    "ConfigMap/Secret",
    "configmaps/secrets",
    "List",
    NamespaceResourceScope
);

/// Base64 values decoded; a value that does not decode is left out with a
/// log line naming the object and key (never the value).
fn decoded(
    m: Option<&BTreeMap<String, String>>,
    what: &ObjectRef,
) -> Option<BTreeMap<String, ByteString>> {
    let m = m?;
    let mut out = BTreeMap::new();
    for (k, v) in m {
        match base64::engine::general_purpose::STANDARD.decode(v) {
            Ok(bytes) => {
                out.insert(k.clone(), ByteString(bytes));
            }
            Err(_) => log::warn!("{what}: key {k:?} is not valid base64; left out"),
        }
    }
    Some(out)
}

/// The ConfigMap in `d`.
pub fn to_config_map(d: &ConfigData, r: &ObjectRef) -> ConfigMap {
    ConfigMap {
        metadata: d.metadata.clone(),
        data: d.data.clone(),
        binary_data: decoded(d.binary_data.as_ref(), r),
        ..Default::default()
    }
}

/// The Secret in `d`.
pub fn to_secret(d: &ConfigData, r: &ObjectRef) -> Secret {
    Secret {
        metadata: d.metadata.clone(),
        data: decoded(d.data.as_ref(), r),
        ..Default::default()
    }
}

/// What a lookup answers for a watch holding `object` (or none), having
/// synced (now or in the cache's past) or not.
pub fn answer<T>(object: Option<&Rc<T>>, synced: bool) -> Lookup<T> {
    match (object, synced) {
        (Some(o), _) => Lookup::Found(o.clone()),
        (None, true) => Lookup::NotFound,
        (None, false) => Lookup::NotYetKnown,
    }
}

/// The last state of one watched object.
enum Held {
    ConfigMap(Option<Rc<ConfigMap>>),
    Secret(Option<Rc<Secret>>),
}

struct Slot {
    held: Held,
    synced: bool,
    /// The object's resourceVersion, to tell a change.
    version: Option<String>,
    _task: Option<smol::Task<()>>,
}

/// Called with an object whose content (or existence) changed.
pub type OnChange = Rc<dyn Fn(&ObjectRef)>;

/// The per-object watches and their last states.
pub struct ConfigWatches {
    client: Client,
    root_dir: PathBuf,
    slots: RefCell<BTreeMap<ObjectRef, Slot>>,
    on_change: RefCell<Option<OnChange>>,
    /// Caches of objects no cached pod references were removed once.
    swept: std::cell::Cell<bool>,
    me: Weak<ConfigWatches>,
}

impl ConfigWatches {
    pub fn new(client: Client, root_dir: &Path) -> Rc<Self> {
        Rc::new_cyclic(|me| ConfigWatches {
            client,
            root_dir: root_dir.to_path_buf(),
            slots: RefCell::new(BTreeMap::new()),
            on_change: RefCell::new(None),
            swept: std::cell::Cell::new(false),
            me: me.clone(),
        })
    }

    /// Calls `f` whenever a watched object changes, appears or is known
    /// to be missing.
    pub fn set_on_change(&self, f: OnChange) {
        *self.on_change.borrow_mut() = Some(f);
    }

    /// Which objects are watched now.
    pub fn watched(&self) -> BTreeSet<ObjectRef> {
        self.slots.borrow().keys().cloned().collect()
    }

    /// Watches exactly what `pods` reference: starts the new watches (their
    /// caches loaded at once), stops the others and removes their caches.
    pub fn track<'a>(&self, pods: impl IntoIterator<Item = &'a Pod>) {
        let wanted = config_objects::references_of(pods);
        let stale: Vec<ObjectRef> = self
            .slots
            .borrow()
            .keys()
            .filter(|r| !wanted.contains(r))
            .cloned()
            .collect();
        for r in stale {
            self.slots.borrow_mut().remove(&r);
            log::info!("no pod references {r} any more; stopped watching it");
            remove_cache(&cache_dir(&self.root_dir, &r));
        }
        if !self.swept.replace(true) {
            self.sweep(&wanted);
        }
        for r in wanted {
            if self.slots.borrow().contains_key(&r) {
                continue;
            }
            let slot = self.start(&r);
            self.slots.borrow_mut().insert(r, slot);
        }
    }

    /// Removes the caches of objects nothing references (left by pods that
    /// went while picolet was down).
    fn sweep(&self, wanted: &BTreeSet<ObjectRef>) {
        for kind in [Kind::ConfigMap, Kind::Secret] {
            let Ok(entries) = fs::read_dir(kind_dir(&self.root_dir, kind)) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let known = name.split_once('_').is_some_and(|(ns, n)| {
                    wanted.contains(&ObjectRef {
                        kind,
                        namespace: ns.into(),
                        name: n.into(),
                    })
                });
                if !known {
                    remove_cache(&e.path());
                }
            }
        }
    }

    /// Opens the object's cache and starts its watch.
    fn start(&self, r: &ObjectRef) -> Slot {
        let dir = cache_dir(&self.root_dir, r);
        let cache = match open_private(&dir) {
            Ok((cache, loaded)) => Some((cache, loaded)),
            Err(e) => {
                log::error!("cache of {r}: {e}; watching it without one");
                None
            }
        };
        let synced = cache
            .as_ref()
            .is_some_and(|(_, l)| l.resource_version.is_some());
        let collection = match r.kind {
            Kind::ConfigMap => collection_path::<ConfigMap>(Some(&r.namespace)),
            Kind::Secret => collection_path::<Secret>(Some(&r.namespace)),
        };
        let informer: Informer<ConfigData> = Informer::new(
            self.client.clone(),
            collection,
            Selectors::fields(format!("metadata.name={}", r.name)),
            cache,
        );
        let object = find(&informer, &r.name);
        let version = object
            .as_ref()
            .and_then(|o| o.metadata.resource_version.clone());
        log::info!(
            "watching {r}{}",
            if object.is_some() {
                " (from the cache)"
            } else {
                ""
            }
        );
        let held = held(r, object);
        let task = rt::spawn(run(informer, r.clone(), self.me.clone()));
        Slot {
            held,
            synced,
            version,
            _task: Some(task),
        }
    }

    /// Records what a watch now holds; tells the consumer when that
    /// changed.
    fn update(&self, r: &ObjectRef, held: Held, version: Option<String>, synced: bool) {
        let changed = {
            let mut slots = self.slots.borrow_mut();
            let Some(slot) = slots.get_mut(r) else {
                return;
            };
            let synced = slot.synced || synced;
            let changed = slot.version != version || slot.synced != synced;
            slot.held = held;
            slot.version = version;
            slot.synced = synced;
            changed
        };
        if changed {
            let f = self.on_change.borrow().clone();
            if let Some(f) = f {
                f(r);
            }
        }
    }

    fn lookup(&self, kind: Kind, namespace: &str, name: &str) -> Option<(bool, LookupHeld)> {
        let r = ObjectRef {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        let slots = self.slots.borrow();
        let slot = slots.get(&r)?;
        let held = match &slot.held {
            Held::ConfigMap(o) => LookupHeld::ConfigMap(o.clone()),
            Held::Secret(o) => LookupHeld::Secret(o.clone()),
        };
        Some((slot.synced, held))
    }
}

enum LookupHeld {
    ConfigMap(Option<Rc<ConfigMap>>),
    Secret(Option<Rc<Secret>>),
}

impl ConfigObjects for ConfigWatches {
    fn config_map(&self, namespace: &str, name: &str) -> Lookup<ConfigMap> {
        match self.lookup(Kind::ConfigMap, namespace, name) {
            Some((synced, LookupHeld::ConfigMap(o))) => answer(o.as_ref(), synced),
            _ => Lookup::NotYetKnown,
        }
    }

    fn secret(&self, namespace: &str, name: &str) -> Lookup<Secret> {
        match self.lookup(Kind::Secret, namespace, name) {
            Some((synced, LookupHeld::Secret(o))) => answer(o.as_ref(), synced),
            _ => Lookup::NotYetKnown,
        }
    }
}

/// The object named `name` in the informer's store.
fn find<'a>(informer: &'a Informer<ConfigData>, name: &str) -> Option<&'a ConfigData> {
    informer
        .store()
        .values()
        .find(|o| o.metadata.name.as_deref() == Some(name))
        .map(|o| &**o)
}

/// The agent's form of what a watch holds.
fn held(r: &ObjectRef, object: Option<&ConfigData>) -> Held {
    match r.kind {
        Kind::ConfigMap => Held::ConfigMap(object.map(|o| Rc::new(to_config_map(o, r)))),
        Kind::Secret => Held::Secret(object.map(|o| Rc::new(to_secret(o, r)))),
    }
}

/// One object's watch loop: every batch of events updates its slot.
async fn run(mut informer: Informer<ConfigData>, r: ObjectRef, watches: Weak<ConfigWatches>) {
    loop {
        informer.next().await;
        let Some(watches) = watches.upgrade() else {
            return;
        };
        let object = find(&informer, &r.name);
        let version = object.and_then(|o| o.metadata.resource_version.clone());
        let synced = informer.reflector().is_synced();
        let held = held(&r, object);
        watches.update(&r, held, version, synced);
    }
}

/// Opens a cache directory whose parent is root-only too (Cache::open
/// would create missing parents with the default mode).
fn open_private(
    dir: &Path,
) -> Result<(Cache, crate::apiserver::listwatch::disk_cache::Loaded), String> {
    if let Some(parent) = dir.parent() {
        crate::apiserver::listwatch::disk_cache::private_dir(parent)
            .map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    Cache::open(dir, 0o700).map_err(|e| e.to_string())
}

fn remove_cache(dir: &Path) {
    match fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log::warn!("removing cache {}: {e}", dir.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn r(kind: Kind, ns: &str, name: &str) -> ObjectRef {
        ObjectRef {
            kind,
            namespace: ns.into(),
            name: name.into(),
        }
    }

    #[test]
    fn each_object_has_its_own_cache_directory_by_kind() {
        let root = Path::new("/var/lib/picolet");
        assert_eq!(
            cache_dir(root, &r(Kind::Secret, "team", "db.creds")),
            Path::new("/var/lib/picolet/apiserver/secrets/team_db.creds")
        );
        assert_eq!(
            cache_dir(root, &r(Kind::ConfigMap, "team", "db.creds")),
            Path::new("/var/lib/picolet/apiserver/configmaps/team_db.creds")
        );
        assert_ne!(
            kind_dir(root, Kind::ConfigMap),
            crate::apiserver::pods::source::cache_dir(root)
        );
    }

    #[test]
    fn nothing_known_is_a_wait_and_only_a_sync_makes_absence_not_found() {
        let cm = Rc::new(ConfigMap::default());
        assert!(matches!(
            answer::<ConfigMap>(None, false),
            Lookup::NotYetKnown
        ));
        assert!(matches!(answer::<ConfigMap>(None, true), Lookup::NotFound));
        assert!(matches!(answer(Some(&cm), false), Lookup::Found(_)));
        assert!(matches!(answer(Some(&cm), true), Lookup::Found(_)));
    }

    #[test]
    fn a_plain_list_of_config_maps_or_secrets_is_read_with_its_typed_kind() {
        for (kind, item) in [("ConfigMapList", "ConfigMap"), ("SecretList", "Secret")] {
            let body = format!(
                r#"{{"kind":"{kind}","apiVersion":"v1","metadata":{{"resourceVersion":"41"}},"items":[{{"kind":"{item}","metadata":{{"name":"cfg","namespace":"team","resourceVersion":"40"}},"data":{{"a":"MQ=="}}}}]}}"#
            );
            let page =
                crate::apiserver::listwatch::watch::decode_list::<ConfigData>(body.as_bytes())
                    .unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(page.resource_version, "41");
            assert_eq!(page.items.len(), 1);
            assert_eq!(page.items[0].metadata.name.as_deref(), Some("cfg"));
        }
    }

    #[test]
    fn both_kinds_read_into_one_form_and_become_the_agents_types() {
        let cm: ConfigData = serde_json::from_str(
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cfg","resourceVersion":"7"},"data":{"a":"1"},"binaryData":{"b":"AAE="},"immutable":true}"#,
        )
        .unwrap();
        let r_cm = r(Kind::ConfigMap, "team", "cfg");
        let c = to_config_map(&cm, &r_cm);
        assert_eq!(c.data.unwrap()["a"], "1");
        assert_eq!(c.binary_data.unwrap()["b"].0, vec![0, 1]);
        assert_eq!(c.metadata.resource_version.as_deref(), Some("7"));

        let sec: ConfigData = serde_json::from_str(
            r#"{"kind":"Secret","metadata":{"name":"db"},"type":"Opaque","data":{"pw":"aHVudGVyMg==","bad":"%%%"}}"#,
        )
        .unwrap();
        let s = to_secret(&sec, &r(Kind::Secret, "team", "db"));
        let data = s.data.unwrap();
        assert_eq!(data["pw"].0, b"hunter2");
        assert!(
            !data.contains_key("bad"),
            "a value that is not base64 is left out"
        );

        // The cached form is the API's shape, and reads back the same.
        let json = serde_json::to_string(&cm).unwrap();
        let again: ConfigData = serde_json::from_str(&json).unwrap();
        assert_eq!(again.data, cm.data);
        assert_eq!(again.binary_data, cm.binary_data);
    }

    fn pod(yaml: &str) -> Pod {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn tracking_watches_what_pods_reference_and_forgets_the_rest_with_its_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        // Left by a pod that went while picolet was down.
        let stale = cache_dir(root, &r(Kind::ConfigMap, "team", "old"));
        open_private(&stale).unwrap();
        // A Secret that did not exist when last synced: a sync point, no object.
        let gone = r(Kind::Secret, "team", "gone");
        let (mut c, _) = open_private(&cache_dir(root, &gone)).unwrap();
        c.set_resource_version("42").unwrap();

        let w = ConfigWatches::new(Client::unreachable(), root);
        let p = pod("metadata: {name: a, namespace: team}\nspec:\n  volumes: [{name: v, configMap: {name: cfg}}]\n  containers: [{name: c, image: i, envFrom: [{secretRef: {name: gone}}]}]\n");
        w.track([&p]);
        let want: BTreeSet<ObjectRef> = [r(Kind::ConfigMap, "team", "cfg"), gone.clone()].into();
        assert_eq!(w.watched(), want);
        assert!(!stale.exists(), "an unreferenced cache is removed");
        assert!(matches!(w.config_map("team", "cfg"), Lookup::NotYetKnown));
        assert!(
            matches!(w.secret("team", "gone"), Lookup::NotFound),
            "a cached sync point without the object means it did not exist"
        );
        assert!(
            matches!(w.secret("team", "cfg"), Lookup::NotYetKnown),
            "kinds do not mix"
        );

        w.track([]);
        assert!(w.watched().is_empty());
        assert!(!cache_dir(root, &gone).exists());
    }

    #[test]
    fn a_secrets_cache_is_root_only_down_to_its_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = cache_dir(tmp.path(), &r(Kind::Secret, "team", "db"));
        let (mut cache, _) = open_private(&dir).unwrap();
        let s: ConfigData =
            serde_json::from_str(r#"{"metadata":{"name":"db","namespace":"team","resourceVersion":"5"},"data":{"pw":"aHVudGVyMg=="}}"#)
                .unwrap();
        cache.put_object(&s).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(dir.parent().unwrap()), 0o700);
        assert_eq!(mode(&dir), 0o700);
        for e in fs::read_dir(&dir).unwrap() {
            assert_eq!(mode(&e.unwrap().path()), 0o600);
        }
    }
}
