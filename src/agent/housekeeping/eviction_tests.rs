//! The eviction task's step that measures before it ranks: the agent
//! reads each pod's cgroup right before ranking, and a pod whose cgroup
//! does not exist yet counts as using nothing (it is never evicted for
//! being unmeasured). Cgroups are plain directories in a temp tree. And a
//! pod past its `activeDeadlineSeconds`, which is stopped and failed like
//! an evicted pod.

use crate::agent::housekeeping::HousekeepingHost as _;
use crate::agent::tests::{
    api_pod, api_pod_from, api_set, apply, low_memory, memory_threshold, sync, Node,
};
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
    let cgroup = crate::agent::start::cgroup_parent(&hog, agent.cgroups.as_ref());
    let dir = node.cgroup_mount().join(cgroup.trim_start_matches('/'));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("memory.current"), format!("{}\n", 600u64 << 20)).unwrap();
    std::fs::write(dir.join("memory.stat"), "anon 600\ninactive_file 0\n").unwrap();
    let guaranteed_cgroup = crate::agent::start::cgroup_parent(&guaranteed, agent.cgroups.as_ref());
    assert!(!node
        .cgroup_mount()
        .join(guaranteed_cgroup.trim_start_matches('/'))
        .exists());

    let usages = agent.housekeeping.pod_usages(
        &agent.eviction_candidates(),
        crate::node::eviction::Signal::MemoryAvailable,
    );
    let of = |uid: &str| {
        usages
            .iter()
            .find(|u| u.uid == uid)
            .unwrap()
            .memory_working_set
    };
    assert_eq!((of("hog-uid"), of("guaranteed-uid")), (600 << 20, 0));

    agent
        .housekeeping
        .evict_one(&*agent, &memory_threshold(), low_memory());
    let pods = agent.pods.borrow();
    assert!(
        pods["hog-uid"].lifecycle.evicted().is_some(),
        "the hog goes"
    );
    assert!(
        pods["guaranteed-uid"].lifecycle.evicted().is_none(),
        "the Guaranteed pod stays"
    );
}

#[test]
fn a_pod_whose_active_deadline_was_shortened_past_its_age_is_stopped_and_fails_with_deadline_exceeded(
) {
    let node = Node::new();
    let agent = node.agent();
    agent.sources.borrow_mut().configure(PodSource::Api);
    let pod = api_pod("deadline-uid");
    apply(&agent, api_set(vec![pod.clone()]));
    sync(&agent, &pod);
    assert_eq!(node.running().len(), 2);
    // It has been on the node for 100 s.
    agent
        .pods
        .borrow_mut()
        .get_mut("deadline-uid")
        .unwrap()
        .first_seen_unix -= 100;

    // A deadline still ahead: it runs, and the next sync is due by then.
    let mut later = pod.clone();
    later.spec.as_mut().unwrap().active_deadline_seconds = Some(110);
    apply(&agent, api_set(vec![later.clone()]));
    let next = sync(&agent, &later).expect("kept");
    assert!(next.as_secs() <= 10, "woken at the deadline: {next:?}");
    assert_eq!(node.running().len(), 2);

    // Shortened below its age: stopped, Failed, kubelet's reason.
    let mut short = pod;
    short.spec.as_mut().unwrap().active_deadline_seconds = Some(30);
    apply(&agent, api_set(vec![short.clone()]));
    sync(&agent, &short);
    assert!(node.running().is_empty(), "its containers are stopped");
    let status = {
        let pods = agent.pods.borrow();
        agent.pod_status(&pods["deadline-uid"])
    };
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was active on the node longer than the specified deadline")
    );
    assert!(
        !status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "DisruptionTarget"),
        "not a disruption"
    );
    sync(&agent, &short);
    assert!(node.running().is_empty(), "never restarted");
}
