//! Mirror pods: the API server's view of the node's static pods.
//!
//! A static pod runs from a file; the cluster sees it through a mirror pod
//! that the node creates: a copy of the static pod with the annotation
//! `kubernetes.io/config.mirror` set to the static pod's config hash, bound
//! to the node and owned by its Node object (NodeRestriction accepts exactly
//! that). Deleting a mirror pod does not stop the static pod; the node
//! recreates the mirror. Editing the manifest changes the hash, so the old
//! mirror is deleted and a new one created.
//!
//! [`plan`] is pure: the static pods and the mirror pods seen in the API go
//! in, the creations and deletions to make come out.
//!
//! This module must not know the transport, the agent or the file source.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The annotation that marks a mirror pod; its value is the static pod's
/// `kubernetes.io/config.hash`.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The static pod's content hash (for file pods, its UID).
pub const HASH_ANNOTATION: &str = "kubernetes.io/config.hash";

/// One request to make.
#[derive(Debug, Clone, PartialEq)]
pub enum MirrorAction {
    /// POST this pod in its namespace.
    Create(Box<Pod>),
    /// DELETE the mirror pod `namespace/name` with a UID precondition.
    Delete {
        namespace: String,
        name: String,
        uid: String,
    },
}

/// Whether a pod from the API is a mirror pod.
pub fn is_mirror(pod: &Pod) -> bool {
    annotation(pod, MIRROR_ANNOTATION).is_some()
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn key(pod: &Pod) -> (String, String) {
    (
        pod.metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// The mirror pod of `static_pod`, owned by the Node `node_name`/`node_uid`.
pub fn mirror_of(static_pod: &Pod, node_name: &str, node_uid: &str) -> Pod {
    let hash = annotation(static_pod, HASH_ANNOTATION)
        .or(static_pod.metadata.uid.as_deref())
        .unwrap_or_default()
        .to_string();
    let mut annotations = static_pod.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(MIRROR_ANNOTATION.to_string(), hash);
    let mut spec = static_pod.spec.clone().unwrap_or_default();
    spec.node_name = Some(node_name.to_string());
    Pod {
        metadata: ObjectMeta {
            name: static_pod.metadata.name.clone(),
            namespace: static_pod.metadata.namespace.clone(),
            labels: static_pod.metadata.labels.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node_name.to_string(),
                uid: node_uid.to_string(),
                controller: Some(true),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// What to create and delete so that every static pod has exactly one
/// current mirror pod, and no mirror pod outlives its static pod.
///
/// A mirror pod is replaced when its hash differs from the static pod's, or
/// when it is being deleted (someone ran `kubectl delete`): as kubelet does,
/// it is deleted for good (grace period 0, UID precondition) and created
/// anew once the API server has let it go. Pods in `api` that are not
/// mirror pods are never touched.
pub fn plan(statics: &[&Pod], api: &[&Pod], node_name: &str, node_uid: &str) -> Vec<MirrorAction> {
    let mirrors: BTreeMap<(String, String), &Pod> = api
        .iter()
        .filter(|p| is_mirror(p))
        .map(|p| (key(p), *p))
        .collect();
    let mut actions = Vec::new();
    let mut wanted = std::collections::BTreeSet::new();
    for s in statics {
        let k = key(s);
        let want = mirror_of(s, node_name, node_uid);
        match mirrors.get(&k) {
            None => actions.push(MirrorAction::Create(Box::new(want))),
            Some(m)
                if m.metadata.deletion_timestamp.is_none()
                    && annotation(m, MIRROR_ANNOTATION) == annotation(&want, MIRROR_ANNOTATION) => {
            }
            // Stale, or being deleted: delete it for good now; the next
            // round, with the API's word that it is gone, creates it anew.
            Some(m) => actions.push(delete(m)),
        }
        wanted.insert(k);
    }
    for (k, m) in &mirrors {
        if !wanted.contains(k) {
            actions.push(delete(m));
        }
    }
    actions
}

fn delete(m: &Pod) -> MirrorAction {
    let (namespace, name) = key(m);
    MirrorAction::Delete {
        namespace,
        name,
        uid: m.metadata.uid.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn static_pod(name: &str, hash: &str) -> Pod {
        serde_yaml_ng::from_str(&format!(
            "metadata:\n  name: {name}\n  namespace: kube-system\n  uid: {hash}\n  annotations: {{kubernetes.io/config.hash: {hash}, kubernetes.io/config.source: file}}\nspec:\n  containers: [{{name: c, image: i}}]\n"
        ))
        .unwrap()
    }

    fn mirror(name: &str, hash: &str, uid: &str, deleting: bool) -> Pod {
        let mut m = mirror_of(&static_pod(name, hash), "pi-1", "node-uid");
        m.metadata.uid = Some(uid.into());
        if deleting {
            m.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
        }
        m
    }

    fn summary(actions: &[MirrorAction]) -> Vec<String> {
        actions
            .iter()
            .map(|a| match a {
                MirrorAction::Create(p) => {
                    format!("create {}", p.metadata.name.as_deref().unwrap())
                }
                MirrorAction::Delete { name, uid, .. } => format!("delete {name} {uid}"),
            })
            .collect()
    }

    #[test]
    fn a_mirror_pod_carries_the_hash_the_node_and_its_owner() {
        let m = mirror_of(&static_pod("web-pi-1", "h1"), "pi-1", "node-uid");
        let a = m.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[MIRROR_ANNOTATION], "h1");
        assert_eq!(a["kubernetes.io/config.source"], "file");
        assert_eq!(
            m.metadata.uid, None,
            "the API server assigns the mirror's UID"
        );
        assert_eq!(m.spec.as_ref().unwrap().node_name.as_deref(), Some("pi-1"));
        let owner = &m.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Node", "pi-1", "node-uid")
        );
        assert_eq!(owner.controller, Some(true));
    }

    #[test]
    fn plan_table() {
        let s1 = static_pod("a-pi-1", "h1");
        let s2 = static_pod("b-pi-1", "h2");
        let fresh = mirror("a-pi-1", "h1", "m1", false);
        let stale = mirror("a-pi-1", "old", "m1", false);
        let going = mirror("a-pi-1", "h1", "m1", true);
        let orphan = mirror("gone-pi-1", "h9", "m9", false);
        let not_mirror: Pod = serde_yaml_ng::from_str(
            "metadata: {name: app, namespace: kube-system, uid: u}\nspec: {containers: [{name: c, image: i}]}\n",
        )
        .unwrap();
        type Case<'a> = (&'a str, Vec<&'a Pod>, Vec<&'a Pod>, Vec<&'a str>);
        let cases: Vec<Case> = vec![
            (
                "no mirror yet: create",
                vec![&s1],
                vec![],
                vec!["create a-pi-1"],
            ),
            ("current mirror: nothing", vec![&s1], vec![&fresh], vec![]),
            (
                "edited manifest: delete, then create next round",
                vec![&s1],
                vec![&stale],
                vec!["delete a-pi-1 m1"],
            ),
            (
                "mirror being deleted: delete it for good",
                vec![&s1],
                vec![&going],
                vec!["delete a-pi-1 m1"],
            ),
            (
                "static pod gone: delete its mirror",
                vec![],
                vec![&fresh],
                vec!["delete a-pi-1 m1"],
            ),
            (
                "orphan mirror and a new one",
                vec![&s2],
                vec![&orphan],
                vec!["create b-pi-1", "delete gone-pi-1 m9"],
            ),
            (
                "ordinary pods are never touched",
                vec![],
                vec![&not_mirror],
                vec![],
            ),
        ];
        for (what, statics, api, want) in cases {
            assert_eq!(
                summary(&plan(&statics, &api, "pi-1", "node-uid")),
                want,
                "{what}"
            );
        }
    }
}
