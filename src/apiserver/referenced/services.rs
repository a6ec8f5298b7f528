//! The Services the node's pods take their environment from: one watch and
//! one crash-safe cache per namespace that a pod on this node needs.
//!
//! kubelet watches every Service of the cluster (all with a cluster IP) to
//! build the `<NAME>_SERVICE_HOST`… variables, yet a container only ever
//! sees the master Service (`kubernetes` in `default`) and, with
//! `enableServiceLinks`, the Services of its own namespace
//! (`pod::spec::service_env`). So this watches exactly those namespaces:
//! `default` always, and the namespace of each pod the node runs (API and
//! static) with links enabled, one [`Informer`] of
//! `/api/v1/namespaces/<ns>/services?fieldSelector=spec.clusterIP!=None`
//! each (kubelet's selector: headless Services give no variables). The
//! agent tells [`ServiceWatches`] its pods ([`Services::track`]); a
//! namespace no pod needs any more stops being watched and its cache goes.
//! The Node authorizer lets `system:node:<name>` list and watch Services
//! in any namespace (the `system:node` role), so nothing else is needed.
//!
//! Caches: `<root>/apiserver/services/<ns>/`, as the pods' cache. After a
//! reboot with the link down, a namespace whose cache has a sync point is
//! known at once, so pods start with the same environment.
//!
//! Services are read into a slim [`ServiceData`] (name, namespace, cluster
//! IP, ports) rather than k8s-openapi's Service, whose decoder the binary
//! would otherwise carry.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::rc::{Rc, Weak};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::NamespaceResourceScope;
use serde::{Deserialize, Serialize};

use crate::apiserver::listwatch::watch::slim_core_v1_object;

use crate::apiserver::client::request::{collection_path, Selectors};
use crate::apiserver::client::transport::Client;
use crate::apiserver::listwatch::disk_cache::Cache;
use crate::apiserver::listwatch::informer::Informer;
use crate::pod::config_objects::Lookup;
use crate::pod::spec::{namespaces_needed, ServiceInfo, ServicePortInfo, Services};
use crate::rt;

/// kubelet's field selector: Services that may give variables.
pub const FIELD_SELECTOR: &str = "spec.clusterIP!=None";

/// The directory holding the namespaces' caches (under `--root-dir`).
pub fn kind_dir(root_dir: &Path) -> PathBuf {
    root_dir.join("apiserver").join("services")
}

/// The cache directory of one namespace.
pub fn cache_dir(root_dir: &Path, namespace: &str) -> PathBuf {
    kind_dir(root_dir).join(namespace)
}

/// A Service as the node reads and caches it.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ServiceData {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ServiceSpecData,
}

/// The part of a Service's spec the variables need.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ServiceSpecData {
    #[serde(default, rename = "clusterIP", skip_serializing_if = "Option::is_none")]
    pub cluster_ip: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ServicePortData>,
}

/// One port of a Service.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ServicePortData {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub port: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

slim_core_v1_object!(
    ServiceData,
    "Service",
    "services",
    "ServiceList",
    NamespaceResourceScope
);

/// The form `pod::spec::service_env` reads.
pub fn to_info(d: &ServiceData) -> ServiceInfo {
    ServiceInfo {
        namespace: d.metadata.namespace.clone().unwrap_or_default(),
        name: d.metadata.name.clone().unwrap_or_default(),
        cluster_ip: d.spec.cluster_ip.clone().unwrap_or_default(),
        ports: d
            .spec
            .ports
            .iter()
            .map(|p| ServicePortInfo {
                name: p.name.clone().unwrap_or_default(),
                port: p.port,
                protocol: p.protocol.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

/// The Services of one namespace, in name order.
fn infos<'a>(store: impl Iterator<Item = &'a ServiceData>) -> Rc<[ServiceInfo]> {
    let mut v: Vec<ServiceInfo> = store.map(to_info).collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v.into()
}

struct Slot {
    services: Rc<[ServiceInfo]>,
    synced: bool,
    _task: smol::Task<()>,
}

/// Called with a namespace whose Services were read for the first time.
pub type OnSynced = Rc<dyn Fn(&str)>;

/// The per-namespace watches and their last Services.
pub struct ServiceWatches {
    client: Client,
    root_dir: PathBuf,
    slots: RefCell<BTreeMap<String, Slot>>,
    on_synced: RefCell<Option<OnSynced>>,
    /// Caches of namespaces no pod needs were removed once.
    swept: Cell<bool>,
    me: Weak<ServiceWatches>,
}

impl ServiceWatches {
    pub fn new(client: Client, root_dir: &Path) -> Rc<Self> {
        Rc::new_cyclic(|me| ServiceWatches {
            client,
            root_dir: root_dir.to_path_buf(),
            slots: RefCell::new(BTreeMap::new()),
            on_synced: RefCell::new(None),
            swept: Cell::new(false),
            me: me.clone(),
        })
    }

    /// Calls `f` when a namespace's Services were read for the first time
    /// (pods waiting for them can start).
    pub fn set_on_synced(&self, f: OnSynced) {
        *self.on_synced.borrow_mut() = Some(f);
    }

    /// Which namespaces are watched now.
    pub fn watched(&self) -> BTreeSet<String> {
        self.slots.borrow().keys().cloned().collect()
    }

    /// Watches exactly `wanted`: starts the new watches (their caches
    /// loaded at once), stops the others and removes their caches.
    pub fn track_namespaces(&self, wanted: BTreeSet<String>) {
        let stale: Vec<String> = self
            .slots
            .borrow()
            .keys()
            .filter(|ns| !wanted.contains(*ns))
            .cloned()
            .collect();
        for ns in stale {
            self.slots.borrow_mut().remove(&ns);
            log::info!(
                "no pod needs the Services of namespace {ns} any more; stopped watching them"
            );
            remove_cache(&cache_dir(&self.root_dir, &ns));
        }
        if !self.swept.replace(true) {
            self.sweep(&wanted);
        }
        for ns in wanted {
            if self.slots.borrow().contains_key(&ns) {
                continue;
            }
            let slot = self.start(&ns);
            self.slots.borrow_mut().insert(ns, slot);
        }
    }

    /// Removes the caches of namespaces nothing needs (left by pods that
    /// went while picolet was down).
    fn sweep(&self, wanted: &BTreeSet<String>) {
        let Ok(entries) = fs::read_dir(kind_dir(&self.root_dir)) else {
            return;
        };
        for e in entries.flatten() {
            if !wanted.contains(&*e.file_name().to_string_lossy()) {
                remove_cache(&e.path());
            }
        }
    }

    /// Opens the namespace's cache and starts its watch.
    fn start(&self, ns: &str) -> Slot {
        let cache = match Cache::open(cache_dir(&self.root_dir, ns), 0o755) {
            Ok(c) => Some(c),
            Err(e) => {
                log::error!(
                    "cache of the Services of namespace {ns}: {e}; watching them without one"
                );
                None
            }
        };
        let synced = cache
            .as_ref()
            .is_some_and(|(_, l)| l.resource_version.is_some());
        let informer: Informer<ServiceData> = Informer::new(
            self.client.clone(),
            collection_path::<ServiceData>(Some(ns)),
            Selectors::fields(FIELD_SELECTOR),
            cache,
        );
        let services = infos(informer.store().values().map(|b| &**b));
        log::info!(
            "watching the Services of namespace {ns}{}",
            if synced {
                format!(" ({} from the cache)", services.len())
            } else {
                String::new()
            }
        );
        let task = rt::spawn(run(informer, ns.to_string(), self.me.clone()));
        Slot {
            services,
            synced,
            _task: task,
        }
    }

    /// Records what a watch now holds; tells the consumer of a first sync.
    fn update(&self, ns: &str, services: Rc<[ServiceInfo]>, synced: bool) {
        let first_sync = {
            let mut slots = self.slots.borrow_mut();
            let Some(slot) = slots.get_mut(ns) else {
                return;
            };
            let first = synced && !slot.synced;
            slot.synced |= synced;
            slot.services = services;
            first
        };
        if first_sync {
            let f = self.on_synced.borrow().clone();
            if let Some(f) = f {
                f(ns);
            }
        }
    }
}

impl Services for ServiceWatches {
    fn services(&self, namespace: &str) -> Lookup<[ServiceInfo]> {
        match self.slots.borrow().get(namespace) {
            Some(s) if s.synced => Lookup::Found(s.services.clone()),
            _ => Lookup::NotYetKnown,
        }
    }

    fn track(&self, pods: &mut dyn Iterator<Item = &Pod>) {
        self.track_namespaces(namespaces_needed(pods));
    }
}

/// One namespace's watch loop: every batch of events updates its slot.
async fn run(mut informer: Informer<ServiceData>, ns: String, watches: Weak<ServiceWatches>) {
    loop {
        informer.next().await;
        let Some(watches) = watches.upgrade() else {
            return;
        };
        let services = infos(informer.store().values().map(|b| &**b));
        watches.update(&ns, services, informer.reflector().is_synced());
    }
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

    #[test]
    fn a_service_reads_into_the_slim_form_and_its_variables_input() {
        let d: ServiceData = serde_json::from_str(
            r#"{"kind":"Service","metadata":{"name":"web","namespace":"edge","resourceVersion":"9"},
               "spec":{"type":"ClusterIP","clusterIP":"10.96.0.20","clusterIPs":["10.96.0.20"],"selector":{"app":"web"},
                       "ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080},{"port":53,"protocol":"UDP"}]}}"#,
        )
        .unwrap();
        let i = to_info(&d);
        assert_eq!(
            (i.namespace.as_str(), i.name.as_str(), i.cluster_ip.as_str()),
            ("edge", "web", "10.96.0.20")
        );
        assert_eq!(i.ports.len(), 2);
        assert_eq!((i.ports[0].name.as_str(), i.ports[0].port), ("http", 80));
        assert_eq!(
            (i.ports[1].name.as_str(), i.ports[1].protocol.as_str()),
            ("", "UDP")
        );
        // The cached form reads back the same.
        let again: ServiceData = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        assert_eq!(to_info(&again), i);
    }

    #[test]
    fn a_plain_service_list_is_read() {
        let body = r#"{"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"41"},"items":[{"metadata":{"name":"kubernetes","namespace":"default","resourceVersion":"40"},"spec":{"clusterIP":"10.96.0.1","ports":[{"name":"https","port":443}]}}]}"#;
        let page = crate::apiserver::listwatch::watch::decode_list::<ServiceData>(body.as_bytes())
            .unwrap();
        assert_eq!(page.items.len(), 1);
        assert_eq!(to_info(&page.items[0]).cluster_ip, "10.96.0.1");
    }

    #[test]
    fn tracking_watches_default_and_the_pods_namespaces_and_forgets_the_rest_with_its_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        // Left by a pod that went while picolet was down.
        let stale = cache_dir(root, "gone");
        Cache::open(&stale, 0o755).unwrap();
        // Read before a reboot: known at once, offline.
        let (mut c, _) = Cache::open(cache_dir(root, "edge"), 0o755).unwrap();
        let web: ServiceData = serde_json::from_str(
            r#"{"metadata":{"name":"web","namespace":"edge","resourceVersion":"5"},"spec":{"clusterIP":"10.96.0.20","ports":[{"port":80}]}}"#,
        )
        .unwrap();
        c.put_object(&web).unwrap();
        c.set_resource_version("6").unwrap();
        drop(c);

        let w = ServiceWatches::new(Client::unreachable(), root);
        let pod = |yaml: &str| -> Pod { serde_yaml_ng::from_str(yaml).unwrap() };
        let a =
            pod("metadata: {name: a, namespace: edge}\nspec: {containers: [{name: c, image: i}]}");
        let b = pod("metadata: {name: b, namespace: quiet}\nspec: {enableServiceLinks: false, containers: [{name: c, image: i}]}");
        w.track(&mut [&a, &b].into_iter());
        let want: BTreeSet<String> = ["default".into(), "edge".into()].into();
        assert_eq!(w.watched(), want);
        assert!(!stale.exists(), "a cache no pod needs is removed");
        match w.services("edge") {
            Lookup::Found(l) => assert_eq!(l[0].name, "web"),
            other => panic!("edge from the cache: {other:?}"),
        }
        assert!(matches!(w.services("default"), Lookup::NotYetKnown));
        assert!(matches!(w.services("quiet"), Lookup::NotYetKnown));

        w.track(&mut std::iter::empty());
        assert_eq!(w.watched(), ["default".to_string()].into());
        assert!(!cache_dir(root, "edge").exists());
    }
}
