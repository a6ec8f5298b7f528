//! Pure: what the list/watch [`Reflector`] holds and compares of an
//! object: the [`Object`] bound, its key in the store ([`ObjectKey`]), its
//! identity and version ([`Version`]), the order of resourceVersions, the
//! `managedFields` it drops and the stub that tells a deletion when the
//! store keeps versions only (the reasons are in [`super::reflector`]'s
//! docs).
//!
//! Must not know: requests, the state machine, the I/O.
//!
//! [`Reflector`]: super::reflector::Reflector

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, Resource};

/// What the reflector can hold: any k8s-openapi resource with `ObjectMeta`.
pub trait Object: Resource + Metadata<Ty = ObjectMeta> + Clone {}
impl<T: Resource + Metadata<Ty = ObjectMeta> + Clone> Object for T {}

/// An object's identity in a store: namespace (if any) and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    /// The key of `obj`; `None` when it has no name (not a valid object).
    pub fn of<K: Object>(obj: &K) -> Option<Self> {
        let m = obj.metadata();
        let name = m.name.as_deref().filter(|n| !n.is_empty())?;
        Some(ObjectKey {
            namespace: m.namespace.clone().filter(|n| !n.is_empty()),
            name: name.to_string(),
        })
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// Whether an object at `incoming` resourceVersion should replace one at
/// `stored`: numerically newer when both are decimal, else different.
pub(super) fn is_newer(incoming: &str, stored: &str) -> bool {
    match (incoming.parse::<u64>(), stored.parse::<u64>()) {
        (Ok(a), Ok(b)) => a > b,
        _ => incoming != stored,
    }
}

/// `o` without its `managedFields` (see the module docs).
pub fn without_managed_fields<K: Object>(mut o: K) -> K {
    o.metadata_mut().managed_fields = None;
    o
}

pub(super) fn uid<K: Object>(o: &K) -> Option<&str> {
    o.metadata().uid.as_deref()
}

pub(super) fn rv<K: Object>(o: &K) -> Option<&str> {
    o.metadata().resource_version.as_deref()
}

/// What the reflector itself compares of a stored object: its identity
/// and version (the staleness check, the diff of a relist).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

impl Version {
    pub(super) fn of<K: Object>(o: &K) -> Self {
        Version {
            uid: uid(o).map(str::to_string),
            resource_version: rv(o).map(str::to_string),
        }
    }
}

/// The versions of `objects`. (A loop of inserts, not `collect`: a B-tree
/// built by `collect` per iterator type and resource, and `extend`s, cost
/// ~25 KB of x86_64 code.)
pub(super) fn versions_of<K: Object>(
    objects: &BTreeMap<ObjectKey, Box<K>>,
) -> BTreeMap<ObjectKey, Version> {
    let mut versions = BTreeMap::new();
    for (k, o) in objects {
        versions.insert(k.clone(), Version::of(&**o));
    }
    versions
}

/// The last known state of an object the store keeps only the version of:
/// its name, namespace, uid and resourceVersion (what a `Deleted` event's
/// consumers read).
pub(super) fn stub<K: Object + Default>(key: &ObjectKey, v: &Version) -> K {
    let mut o = K::default();
    let m = o.metadata_mut();
    m.name = Some(key.name.clone());
    m.namespace = key.namespace.clone();
    m.uid = v.uid.clone();
    m.resource_version = v.resource_version.clone();
    o
}
