//! A sandbox the runtime lists ready while its namespaces are gone (its
//! pause process died and the runtime missed it, as after a power cut):
//! the agent replaces it instead of retrying containers in it forever.

use super::{apply, file_set, static_pod, sync, Node};
use crate::cri::api::ContainerState;

const WEB: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - {name: app, image: "busybox:1.36"}
"#;

#[test]
fn a_sandbox_whose_namespaces_are_gone_is_replaced_though_the_runtime_lists_it_ready() {
    let node = Node::new();
    let pod = static_pod(WEB);
    let agent = node.agent();
    apply(&agent, file_set(vec![pod.clone()]));
    sync(&agent, &pod);
    let first = node.runtime.sandbox_ids();
    assert_eq!(first.len(), 1);

    // The pause dies unnoticed, then the app exits: its restart cannot
    // join the sandbox.
    node.runtime.lose_sandbox_process(&first[0]);
    node.runtime.exit(&node.running()[0].id, 1);
    sync(&agent, &pod);
    assert!(
        node.running().is_empty(),
        "nothing starts in a dead sandbox"
    );

    // The next sync stops the dead sandbox and starts the pod in a new one.
    sync(&agent, &pod);
    let sandboxes = node.runtime.sandbox_ids();
    assert_eq!(sandboxes.len(), 2, "{sandboxes:?}");
    let fresh = sandboxes
        .iter()
        .find(|id| **id != first[0])
        .expect("a new sandbox");
    let running = node.running();
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!(&running[0].sandbox_id, fresh);
    assert!(node
        .runtime
        .containers()
        .iter()
        .filter(|c| c.sandbox_id == first[0])
        .all(|c| c.state == ContainerState::ContainerExited));
}
