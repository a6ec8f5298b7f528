//! The eviction task's step that measures before it ranks: the agent
//! reads each pod's cgroup right before ranking, and a pod whose cgroup
//! does not exist yet counts as using nothing (it is never evicted for
//! being unmeasured). Cgroups are plain directories in a temp tree.

use super::tests::{api_pod, api_pod_from, api_set, apply, low_memory, memory_threshold, Node};
use crate::source::PodSource;

const GUARANTEED: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: db}
spec:
  containers:
  - name: app
    image: "busybox:1.36"
    resources:
      requests: {memory: 100Mi, cpu: 100m}
      limits: {memory: 100Mi, cpu: 100m}
"#;

#[test]
fn a_guaranteed_pod_not_measured_yet_stays_and_the_besteffort_hog_its_cgroup_reports_is_evicted() {
    let node = Node::new();
    let agent = node.agent_with_pod_cgroups();
    agent.sources.borrow_mut().configure(PodSource::Api);
    let hog = api_pod("hog-uid");
    let guaranteed = api_pod_from("guaranteed-uid", GUARANTEED);
    // The Guaranteed pod first: a stable ranking keeps it first on ties.
    apply(&agent, api_set(vec![guaranteed.clone(), hog.clone()]));

    // Only the hog's cgroup exists (v2: memory.current, memory.stat); the
    // Guaranteed pod's has not been created yet.
    let cgroup = super::start::cgroup_parent(&hog, agent.cgroups.as_ref());
    let dir = node.cgroup_mount().join(cgroup.trim_start_matches('/'));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("memory.current"), format!("{}\n", 600u64 << 20)).unwrap();
    std::fs::write(dir.join("memory.stat"), "anon 600\ninactive_file 0\n").unwrap();
    let guaranteed_cgroup = super::start::cgroup_parent(&guaranteed, agent.cgroups.as_ref());
    assert!(!node
        .cgroup_mount()
        .join(guaranteed_cgroup.trim_start_matches('/'))
        .exists());

    let usages = agent.pod_usages(crate::node::eviction::Signal::MemoryAvailable);
    let of = |uid: &str| {
        usages
            .iter()
            .find(|u| u.uid == uid)
            .unwrap()
            .memory_working_set
    };
    assert_eq!((of("hog-uid"), of("guaranteed-uid")), (600 << 20, 0));

    agent.evict_one(&memory_threshold(), low_memory());
    let pods = agent.pods.borrow();
    assert!(pods["hog-uid"].evicted.is_some(), "the hog goes");
    assert!(
        pods["guaranteed-uid"].evicted.is_none(),
        "the Guaranteed pod stays"
    );
}
