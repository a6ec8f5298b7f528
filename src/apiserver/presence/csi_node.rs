//! Pure: the node's CSINode object as kubelet creates it at start: named
//! after the node, owned by its Node, no CSI drivers, and the
//! `storage.alpha.kubernetes.io/migrated-plugins` annotation listing the
//! in-tree volume plugins whose volumes go to CSI drivers (all of them in
//! kubelet v1.36). The attach/detach controller and the scheduler read it.
//!
//! Built as JSON (`serde_json::json!`): no CSINode type is decoded, so no
//! deserializer of it is linked.

use serde_json::Value;

/// Where CSINode objects live.
pub const COLLECTION: &str = "/apis/storage.k8s.io/v1/csinodes";
/// The annotation naming the migrated in-tree plugins.
pub const MIGRATED_PLUGINS_ANNOTATION: &str = "storage.alpha.kubernetes.io/migrated-plugins";
/// kubelet v1.36's migrated in-tree plugins, sorted, comma-joined.
pub const MIGRATED_PLUGINS: &str = "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,\
kubernetes.io/azure-file,kubernetes.io/cinder,kubernetes.io/gce-pd,\
kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume";

/// `/apis/storage.k8s.io/v1/csinodes/<node>`.
pub fn path(node: &str) -> String {
    format!("{COLLECTION}/{node}")
}

/// The CSINode to create for node `node` whose Node has `node_uid`.
pub fn csinode(node: &str, node_uid: &str) -> Value {
    serde_json::json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {
            "name": node,
            "annotations": { MIGRATED_PLUGINS_ANNOTATION: MIGRATED_PLUGINS },
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "Node",
                "name": node,
                "uid": node_uid,
            }],
        },
        "spec": { "drivers": [] },
    })
}

/// The merge patch that brings an existing CSINode's annotation to
/// kubelet's, or `None` when it already has it.
pub fn annotation_patch(existing: &Value) -> Option<Value> {
    let current = existing["metadata"]["annotations"][MIGRATED_PLUGINS_ANNOTATION].as_str();
    (current != Some(MIGRATED_PLUGINS)).then(|| {
        serde_json::json!({
            "metadata": { "annotations": { MIGRATED_PLUGINS_ANNOTATION: MIGRATED_PLUGINS } }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csinode_is_owned_by_its_node_and_lists_the_migrated_plugins() {
        let c = csinode("pi-1", "u-1");
        assert_eq!(c["metadata"]["name"], "pi-1");
        let owner = &c["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "Node");
        assert_eq!(owner["uid"], "u-1");
        assert_eq!(c["spec"]["drivers"], serde_json::json!([]));
        let plugins = c["metadata"]["annotations"][MIGRATED_PLUGINS_ANNOTATION]
            .as_str()
            .unwrap();
        let list: Vec<&str> = plugins.split(',').collect();
        let mut sorted = list.clone();
        sorted.sort_unstable();
        assert_eq!(list, sorted);
        assert_eq!(list.len(), 7);
        assert!(annotation_patch(&c).is_none());
        let bare = serde_json::json!({"metadata": {"name": "pi-1"}});
        let patch = annotation_patch(&bare).unwrap();
        assert_eq!(
            patch["metadata"]["annotations"][MIGRATED_PLUGINS_ANNOTATION],
            MIGRATED_PLUGINS
        );
        assert_eq!(path("pi-1"), "/apis/storage.k8s.io/v1/csinodes/pi-1");
    }
}
