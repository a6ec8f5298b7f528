//! `make demo-cluster` as a test (issue #25): the demo's own steps
//! (examples/demo_cluster/demo.rs, included here as a module), as
//! `DEMO_WAIT=0` runs them, on the harness's one control plane and one
//! container runtime (`PICOLET_TEST_RUNTIME`).
//!
//! The demo itself waits for `kubectl logs` and `kubectl exec` through the
//! API server to the node `picolet-demo`; this test checks what they
//! printed, then runs every command the demo printed for the user, as a
//! user would paste it, while the demo still runs. Then `kubectl cordon`
//! and `uncordon` of the node show in `picolet get node` (picolet's watch
//! of its Node), on the same cluster.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test demo_cluster --
//! --nocapture`.

mod harness;

#[path = "../examples/demo_cluster/demo.rs"]
mod demo;

use std::process::Command;
use std::sync::atomic::AtomicBool;

use demo::{Demo, Started, NODE_NAME};

/// Never set: nothing interrupts the test.
static NEVER: AtomicBool = AtomicBool::new(false);

#[test]
fn the_demo_cluster_ends_with_kubectl_logs_and_exec_working_against_its_node_and_a_cordon_shows_locally(
) {
    let mut started = Started::default();
    let shown = (Demo { stop: &NEVER })
        .run(&mut started)
        .expect("nothing interrupts the test");

    assert!(shown.logs.contains("hello from hello-"), "{shown:?}");
    assert!(shown.exec.contains("in hello-"), "{shown:?}");
    assert!(shown.exec.contains("Linux"), "{shown:?}");

    let cp = started.cp.as_ref().expect("the control plane");
    let node = cp
        .get_json(&["node", NODE_NAME])
        .expect("the node is named as a person would");
    assert!(
        node["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|a| a["type"] == "InternalIP"
                && a["address"] == harness::kube::host_ip().to_string()),
        "{node}"
    );

    for line in &shown.commands {
        let out = Command::new("sh")
            .args(["-c", line])
            .output()
            .expect("running sh");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && !stdout.trim().is_empty(),
            "the printed command `{line}` failed: {out:?}"
        );
    }

    // `picolet get node` says whether the Node is cordoned.
    let picolet = started.picolet.as_ref().expect("picolet");
    let get_node = || {
        let out = Command::new(harness::picolet_bin())
            .args(["get", "node", "--admin-socket"])
            .arg(picolet.admin_socket())
            .output()
            .expect("picolet get node");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for (verb, line) in [
        ("cordon", "Unschedulable: true (cordoned"),
        ("uncordon", "Unschedulable: false"),
    ] {
        cp.kubectl_ok(&[verb, NODE_NAME]);
        let mut last = String::new();
        harness::poll_until(std::time::Duration::from_secs(120), || {
            last = get_node();
            last.contains(line).then_some(())
        })
        .unwrap_or_else(|| panic!("after kubectl {verb}, picolet get node said:\n{last}"));
        assert!(last.contains("API server: https://"), "{last}");
    }
    drop(started);
}
