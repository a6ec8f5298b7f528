//! The eviction task's step that measures before it ranks: the agent
//! reads each pod's cgroup right before ranking, and a pod whose cgroup
//! does not exist yet counts as using nothing (it is never evicted for
//! being unmeasured). Cgroups are plain directories in a temp tree. And a
//! pod past its `activeDeadlineSeconds`, which is stopped and failed like
//! an evicted pod. Also the eviction of a pod (stopped and failed;
//! static pods last, back once the pressure is over) and image GC. The
//! housekeeping part runs against the pod workers' `HousekeepingHost`
//! answers, as the wiring runs it.

use std::time::Duration;

use super::super::PodWorkers;
use super::{api_pod, api_pod_from, api_set, apply, file_set, static_pod, sync, Node, IMAGE, WEB};
use crate::agent::housekeeping::{Housekeeping, HousekeepingHost as _};
use crate::cri::in_memory::MemoryRuntime;
use crate::cri::RuntimeService;
use crate::rt::block_on;
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
    let hk = Housekeeping::new(&agent.cfg);
    agent.sources.borrow_mut().configure(PodSource::Api);
    let hog = api_pod("hog-uid");
    let guaranteed = api_pod_from("guaranteed-uid", GUARANTEED);
    // The Guaranteed pod first: a stable ranking keeps it first on ties.
    apply(&agent, api_set(vec![guaranteed.clone(), hog.clone()]));

    // Only the hog's cgroup exists (v2: memory.current, memory.stat); the
    // Guaranteed pod's has not been created yet.
    let cgroup = crate::agent::pod_workers::start::cgroup_parent(&hog, agent.cgroups.as_ref());
    let dir = node.cgroup_mount().join(cgroup.trim_start_matches('/'));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("memory.current"), format!("{}\n", 600u64 << 20)).unwrap();
    std::fs::write(dir.join("memory.stat"), "anon 600\ninactive_file 0\n").unwrap();
    let guaranteed_cgroup =
        crate::agent::pod_workers::start::cgroup_parent(&guaranteed, agent.cgroups.as_ref());
    assert!(!node
        .cgroup_mount()
        .join(guaranteed_cgroup.trim_start_matches('/'))
        .exists());

    let usages = hk.pod_usages(
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

    hk.evict_one(&*agent, &memory_threshold(), low_memory());
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

fn memory_threshold() -> crate::node::eviction::Threshold {
    crate::node::eviction::Threshold {
        signal: crate::node::eviction::Signal::MemoryAvailable,
        value: crate::config::EvictionThreshold::Quantity(100 << 20),
        grace_period: Duration::ZERO,
        min_reclaim: None,
        hard: true,
    }
}

fn low_memory() -> crate::node::eviction::Observation {
    crate::node::eviction::Observation {
        available: 10 << 20,
        capacity: 1 << 30,
    }
}

fn phase_reason(agent: &PodWorkers<MemoryRuntime>, uid: &str) -> (String, String, String) {
    let pods = agent.pods.borrow();
    let st = agent.pod_status(&pods[uid]);
    (
        st.phase.unwrap_or_default(),
        st.reason.unwrap_or_default(),
        st.message.unwrap_or_default(),
    )
}

#[test]
fn an_evicted_pod_is_stopped_and_failed_and_static_pods_go_last_and_come_back() {
    let node = Node::new();
    let agent = node.agent();
    let hk = Housekeeping::new(&agent.cfg);
    agent.sources.borrow_mut().configure(PodSource::Api);
    let web = static_pod(WEB);
    let api = api_pod("api-uid-1");
    apply(&agent, file_set(vec![web.clone()]));
    apply(&agent, api_set(vec![api.clone()]));
    sync(&agent, &web);
    sync(&agent, &api);
    assert_eq!(node.running().len(), 4);

    // The API pod goes first: the static pod is critical.
    hk.evict_one(&*agent, &memory_threshold(), low_memory());
    sync(&agent, &api);
    assert_eq!(node.running().len(), 2, "only the static pod runs");
    let (phase, reason, message) = phase_reason(&agent, "api-uid-1");
    assert_eq!((phase.as_str(), reason.as_str()), ("Failed", "Evicted"));
    assert!(message.contains("low on resource: memory"), "{message}");
    assert!(message.contains("memory.available"), "{message}");
    sync(&agent, &api);
    assert_eq!(node.running().len(), 2, "an evicted pod is not restarted");

    // Then the static pod, the only one left.
    hk.evict_one(&*agent, &memory_threshold(), low_memory());
    sync(&agent, &web);
    assert!(node.running().is_empty());
    let web_uid = crate::pod::uid(&web).to_string();
    assert_eq!(phase_reason(&agent, &web_uid).1, "Evicted");

    // Pressure still on: nothing comes back.
    let mut pressure = crate::node::eviction::Conditions::default();
    pressure.set(crate::node::eviction::Condition::MemoryPressure);
    agent.readmit_static_pods(pressure);
    sync(&agent, &web);
    assert!(node.running().is_empty());

    // Pressure over: the static pod runs again, the API pod stays evicted.
    agent.readmit_static_pods(crate::node::eviction::Conditions::default());
    sync(&agent, &web);
    sync(&agent, &api);
    assert_eq!(node.running().len(), 2);
    assert_ne!(phase_reason(&agent, &web_uid).1, "Evicted");
    assert_eq!(phase_reason(&agent, "api-uid-1").1, "Evicted");
}

#[test]
fn with_no_pod_left_eviction_does_nothing() {
    let node = Node::new();
    let agent = node.agent();
    let hk = Housekeeping::new(&agent.cfg);
    hk.evict_one(&*agent, &memory_threshold(), low_memory());
    assert!(agent.pods.borrow().is_empty());
}

#[test]
fn image_gc_removes_unused_images_and_keeps_the_one_in_use() {
    let node = Node::new();
    node.runtime.add_image("docker.io/library/old:1");
    node.runtime.add_image("docker.io/library/older:1");
    let agent = node.agent();
    let hk = Housekeeping::new(&agent.cfg);
    let web = static_pod(WEB);
    apply(&agent, file_set(vec![web.clone()]));
    sync(&agent, &web);
    assert_eq!(node.running().len(), 2);

    let freed = block_on(Box::pin(hk.image_gc_pass(&agent.runtime, Some(u64::MAX))));
    assert_eq!(freed, 2 << 20, "two unused images of 1 MiB");
    let left = block_on(Box::pin(
        agent
            .runtime
            .list_images(crate::cri::api::ListImagesRequest::default()),
    ))
    .unwrap()
    .images;
    let tags: Vec<_> = left.iter().flat_map(|i| i.repo_tags.clone()).collect();
    assert_eq!(tags, [IMAGE]);
}
