//! The agent's sync logic against the in-memory runtime
//! ([`crate::cri::in_memory::MemoryRuntime`]): adoption after a restart,
//! restart back-off, init-container order, and a source that is not ready.
//!
//! The tests drive the agent's steps themselves (a sync of one pod, a PLEG
//! pass, a GC pass) on the thread's executor, with the pod workers stopped,
//! so every step is deterministic and nothing waits on a clock.
//!
//! Topics in `tests/`: ConfigMaps and Secrets (`config`), housekeeping
//! over the pod workers' answers (`housekeeping`), and a sandbox whose
//! namespaces are gone (`sandbox`).

use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::host_files::HostFacts;
use super::{AgentConfig, PodWorkers};
use crate::agent::housekeeping::Housekeeping;
use crate::cri::api::ContainerState;
use crate::cri::in_memory::{MemoryContainer, MemoryRuntime};
use crate::cri::RuntimeService;
use crate::pleg;
use crate::pod::labels::CONFIG_SOURCE_ANNOTATION;
use crate::rt::block_on;
use crate::source::file::parse_manifest;
use crate::source::{PodSource, SourceUpdate};

mod config;
mod housekeeping;
mod sandbox;

pub(super) const IMAGE: &str = "docker.io/library/busybox:1.36";

pub(super) struct Node {
    _dir: tempfile::TempDir,
    pub(super) runtime: MemoryRuntime,
}

/// The agent mounts a tmpfs for Secret and projected volumes where it may
/// (tests run as root in CI): they go with the node, or its temp dir could
/// not be removed and the mounts would outlive the test run.
impl Drop for Node {
    fn drop(&mut self) {
        let root = self._dir.path();
        let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return;
        };
        let mut mounts: Vec<&str> = info
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| Path::new(m).starts_with(root))
            .collect();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in mounts {
            let _ = rustix::mount::unmount(m, rustix::mount::UnmountFlags::DETACH);
        }
    }
}

impl Node {
    pub(super) fn new() -> Node {
        let runtime = MemoryRuntime::new();
        runtime.add_image(IMAGE);
        Node {
            _dir: tempfile::tempdir().expect("temp dir"),
            runtime,
        }
    }

    /// A (re)started agent on this node's runtime, with a file source.
    pub(super) fn agent(&self) -> Rc<PodWorkers<MemoryRuntime>> {
        self.agent_with(None)
    }

    /// As [`Node::agent`], with pod cgroups in a cgroup v2 tree of plain
    /// directories under the node's temp dir ([`Node::cgroup_mount`]).
    pub(super) fn agent_with_pod_cgroups(&self) -> Rc<PodWorkers<MemoryRuntime>> {
        let mount = self.cgroup_mount();
        std::fs::create_dir_all(&mount).expect("cgroup mount");
        std::fs::write(mount.join("cgroup.controllers"), "cpu memory pids\n").expect("v2");
        let cgroups = crate::cgroups::PodCgroups::new(&mount, "/", true).expect("pod cgroups");
        self.agent_with(Some(cgroups))
    }

    pub(super) fn cgroup_mount(&self) -> std::path::PathBuf {
        self._dir.path().join("cgroup")
    }

    fn agent_with(
        &self,
        cgroups: Option<crate::cgroups::PodCgroups>,
    ) -> Rc<PodWorkers<MemoryRuntime>> {
        let root = self._dir.path();
        let cfg = AgentConfig {
            node_name: "node1".into(),
            root_dir: root.join("lib"),
            static_pod_path: Some(root.join("manifests")),
            runtime_socket: root.join("memory.sock"),
            runtime_request_timeout: Duration::from_secs(2),
            cgroup_mount: root.join("cgroup"),
            cgroup_root: "/".into(),
            cgroups_per_qos: true,
            pod_logs_dir: root.join("logs"),
            file_check_frequency: Duration::from_secs(20),
            sync_frequency: Duration::from_secs(60),
            max_pods: 110,
            container_log_max_size: 10 << 20,
            container_log_max_files: 5,
            serialize_image_pulls: false,
            allowed_unsafe_sysctls: Vec::new(),
            cluster_dns: Vec::new(),
            cluster_domain: "cluster.local".into(),
            pod_pids_limit: None,
            admin_socket: root.join("admin.sock"),
            node_labels: Default::default(),
            node_ips: Vec::new(),
            memory_swap_behavior: Default::default(),
            offline_image_fallback: true,
            eviction: Default::default(),
        };
        let host = HostFacts {
            host_ips: vec!["192.0.2.10".into()],
            node_memory: 1 << 30,
            allocatable: Default::default(),
            resolv_conf: None,
            sysctls: Default::default(),
        };
        PodWorkers::new(
            Rc::new(cfg),
            self.runtime.clone(),
            cgroups,
            host,
            Default::default(),
        )
    }

    pub(super) fn running(&self) -> Vec<MemoryContainer> {
        self.runtime
            .containers()
            .into_iter()
            .filter(|c| c.state == ContainerState::ContainerRunning)
            .collect()
    }

    fn named(&self, name: &str) -> Vec<MemoryContainer> {
        self.runtime
            .containers()
            .into_iter()
            .filter(|c| c.name() == name)
            .collect()
    }
}

/// kubelet's `/metrics` families as the pod workers render them.
fn kubelet_metrics(agent: &PodWorkers<MemoryRuntime>) -> String {
    let mut out = String::new();
    agent.render_kubelet_metrics(&mut out);
    out
}

pub(super) fn static_pod(yaml: &str) -> Pod {
    parse_manifest(
        yaml,
        Path::new("/etc/kubernetes/manifests/web.yaml"),
        "node1",
    )
    .expect("manifest parses")
}

pub(super) const WEB: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - {name: app, image: "busybox:1.36"}
  - {name: side, image: "busybox:1.36"}
"#;

const INIT: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: init}
spec:
  initContainers:
  - {name: first, image: "busybox:1.36"}
  - {name: second, image: "busybox:1.36"}
  containers:
  - {name: app, image: "busybox:1.36"}
"#;

pub(super) fn file_set(pods: Vec<Pod>) -> SourceUpdate {
    SourceUpdate {
        source: PodSource::File,
        pods: pods.into_iter().map(Rc::new).collect(),
        authoritative: true,
    }
}

/// Applies a set, then stops the pod workers: the test runs the syncs.
pub(super) fn apply(agent: &Rc<PodWorkers<MemoryRuntime>>, update: SourceUpdate) {
    agent.apply_update(update);
    stop_workers(agent);
}

fn stop_workers(agent: &PodWorkers<MemoryRuntime>) {
    for e in agent.pods.borrow_mut().values_mut() {
        e._task = None;
    }
}

pub(super) fn sync(agent: &Rc<PodWorkers<MemoryRuntime>>, pod: &Pod) -> Option<Duration> {
    // Boxed, as the worker does: a sync's future is large.
    block_on(Box::pin(agent.sync_pod(crate::pod::uid(pod))))
}

/// One PLEG pass (relist, orphan adoption) with the workers stopped.
fn pleg_pass(agent: &Rc<PodWorkers<MemoryRuntime>>) {
    let (mut connects, mut down) = (agent.runtime.connects(), false);
    let last = pleg::Snapshot::default();
    let pass = agent.pleg_pass(&last, &mut connects, &mut down);
    block_on(Box::pin(pass));
    stop_workers(agent);
}

fn ids(containers: &[MemoryContainer]) -> Vec<String> {
    containers.iter().map(|c| c.id.clone()).collect()
}

#[test]
fn a_quiet_relist_lists_only_containers_and_a_changed_container_lists_sandboxes_too() {
    let node = Node::new();
    let pod = static_pod(WEB);
    let agent = node.agent();
    apply(&agent, file_set(vec![pod.clone()]));
    sync(&agent, &pod);
    let cadence = std::rc::Rc::new(std::cell::RefCell::new(pleg::Cadence::default()));
    let mut st = super::observe::PlegState::new(agent.runtime.connects(), cadence);
    block_on(Box::pin(agent.pleg_tick(&mut st)));
    node.runtime.clear_calls();
    block_on(Box::pin(agent.pleg_tick(&mut st)));
    assert_eq!(node.runtime.calls(), vec!["ListContainers"]);

    let id = node.running()[0].id.clone();
    node.runtime.exit(&id, 1);
    node.runtime.clear_calls();
    block_on(Box::pin(agent.pleg_tick(&mut st)));
    assert_eq!(
        node.runtime.calls(),
        vec!["ListContainers", "ListPodSandbox"]
    );
}

/// A sync on the worker's timer, not woken by anything.
fn timed_sync(agent: &Rc<PodWorkers<MemoryRuntime>>, pod: &Pod) -> Option<Duration> {
    block_on(Box::pin(agent.sync_pod_after(crate::pod::uid(pod), false)))
}

#[test]
fn a_timed_resync_after_a_quiet_relist_reads_nothing_from_the_runtime() {
    let node = Node::new();
    let pod = static_pod(WEB);
    let agent = node.agent();
    apply(&agent, file_set(vec![pod.clone()]));
    sync(&agent, &pod);
    pleg_pass(&agent);
    node.runtime.clear_calls();
    timed_sync(&agent, &pod);
    assert_eq!(node.runtime.calls(), Vec::<&str>::new());

    sync(&agent, &pod);
    assert!(
        node.runtime.calls().contains(&"ListPodSandbox"),
        "a woken sync reads the runtime"
    );
    node.runtime.clear_calls();
    timed_sync(&agent, &pod);
    assert!(
        node.runtime.calls().contains(&"ListPodSandbox"),
        "no relist since that read: the runtime is read again"
    );
}

#[test]
fn a_timed_resync_after_a_relist_that_saw_a_container_exit_restarts_it() {
    let node = Node::new();
    let pod = static_pod(WEB);
    let agent = node.agent();
    apply(&agent, file_set(vec![pod.clone()]));
    sync(&agent, &pod);
    let app = node.named("app").remove(0);
    node.runtime.exit(&app.id, 1);
    pleg_pass(&agent);
    timed_sync(&agent, &pod);
    let apps = node.named("app");
    assert_eq!(
        apps.len(),
        2,
        "the exit was seen and the container restarted"
    );
    assert_eq!(apps[1].state, ContainerState::ContainerRunning);
}

#[test]
fn a_restarted_agent_adopts_running_containers_without_restarting_them() {
    let node = Node::new();
    let pod = static_pod(WEB);
    let first = node.agent();
    apply(&first, file_set(vec![pod.clone()]));
    sync(&first, &pod);
    let before = node.running();
    assert_eq!(before.len(), 2, "{}", first.pod_list());
    let started = "kubelet_pod_start_duration_seconds_count 1\n";
    assert!(
        kubelet_metrics(&first).contains(started),
        "{}",
        kubelet_metrics(&first)
    );
    drop(first);

    node.runtime.clear_calls();
    let second = node.agent();
    apply(&second, file_set(vec![pod.clone()]));
    pleg_pass(&second);
    sync(&second, &pod);
    assert_eq!(
        ids(&node.running()),
        ids(&before),
        "same containers, still running"
    );
    let calls = node.runtime.calls();
    for changing in [
        "RunPodSandbox",
        "StopPodSandbox",
        "CreateContainer",
        "StopContainer",
        "RemoveContainer",
    ] {
        assert!(!calls.contains(&changing), "{changing} in {calls:?}");
    }
    assert_eq!(node.runtime.sandbox_ids().len(), 1);
    let m = kubelet_metrics(&second);
    assert!(
        m.contains("kubelet_pod_start_duration_seconds_count 0\n"),
        "an adopted pod's start is not measured: {m}"
    );
    assert!(m.contains("kubelet_running_pods 1\n"), "{m}");
    assert!(
        m.contains("kubelet_running_containers{container_state=\"running\"} 2\n"),
        "{m}"
    );
}

#[test]
fn containers_created_with_the_earlier_hash_form_are_adopted_after_an_upgrade() {
    let node = Node::new();
    let pod = static_pod(WEB);
    let first = node.agent();
    apply(&first, file_set(vec![pod.clone()]));
    sync(&first, &pod);
    drop(first);
    let before = node.running();
    assert_eq!(before.len(), 2);
    // What picolet wrote before it used kubelet's hash form (md5).
    for c in &before {
        let spec = crate::pod::accessors::container(&pod, c.name()).expect("in the spec");
        node.runtime.annotate(
            &c.id,
            crate::pod::labels::CONTAINER_HASH_ANNOTATION,
            &crate::pod::spec::legacy_container_hash(spec),
        );
    }

    node.runtime.clear_calls();
    let upgraded = node.agent();
    apply(&upgraded, file_set(vec![pod.clone()]));
    pleg_pass(&upgraded);
    sync(&upgraded, &pod);
    assert_eq!(ids(&node.running()), ids(&before), "same containers");
    let calls = node.runtime.calls();
    assert!(!calls.contains(&"StopContainer"), "{calls:?}");
    assert!(!calls.contains(&"CreateContainer"), "{calls:?}");
}

#[test]
fn an_update_that_changes_one_container_s_image_replaces_that_container_alone() {
    let node = Node::new();
    let agent = node.agent();
    let pod = api_pod("u1");
    apply(&agent, api_set(vec![pod.clone()]));
    sync(&agent, &pod);
    // A resync plans from the hashes the first sync computed.
    sync(&agent, &pod);
    let running = |name: &str| -> Vec<String> {
        node.named(name)
            .into_iter()
            .filter(|c| c.state == ContainerState::ContainerRunning)
            .map(|c| c.id)
            .collect()
    };
    let (app, side) = (running("app"), running("side"));
    assert_eq!((app.len(), side.len()), (1, 1));

    let mut updated = pod.clone();
    updated.spec.as_mut().unwrap().containers[0].image = Some("busybox:1.37".into());
    apply(&agent, api_set(vec![updated.clone()]));
    sync(&agent, &updated);
    sync(&agent, &updated);
    let now_app = running("app");
    assert_eq!(now_app.len(), 1, "{:?}", node.named("app"));
    assert_ne!(now_app, app, "app runs the new image in a new container");
    assert_eq!(running("side"), side, "side's spec did not change");
}

#[test]
fn a_crashing_container_restarts_once_then_waits_in_crash_loop_back_off() {
    let node = Node::new();
    let pod = static_pod(WEB);
    let agent = node.agent();
    apply(&agent, file_set(vec![pod.clone()]));
    sync(&agent, &pod);
    let app = node.named("app").remove(0);
    node.runtime.exit(&app.id, 1);

    sync(&agent, &pod);
    let apps = node.named("app");
    assert_eq!(apps.len(), 2, "restarted at once the first time");
    assert_eq!(apps[1].attempt(), 1);
    assert_eq!(apps[1].state, ContainerState::ContainerRunning);

    node.runtime.exit(&apps[1].id, 1);
    let next = sync(&agent, &pod).expect("the pod lives on");
    assert_eq!(
        node.named("app").len(),
        2,
        "no third start inside the back-off"
    );
    assert!(
        next < Duration::from_secs(60),
        "woken when the back-off ends"
    );
    let list = agent.pod_list();
    let statuses = list["items"][0]["status"]["containerStatuses"]
        .as_array()
        .expect("statuses");
    let app = statuses.iter().find(|s| s["name"] == "app").expect("app");
    assert_eq!(app["state"]["waiting"]["reason"], "CrashLoopBackOff");
    assert_eq!(app["restartCount"], 1);
    assert_eq!(
        node.named("side").len(),
        1,
        "the other container is untouched"
    );
}

#[test]
fn init_containers_run_one_at_a_time_in_order_before_the_app_container() {
    let node = Node::new();
    let pod = static_pod(INIT);
    let agent = node.agent();
    apply(&agent, file_set(vec![pod.clone()]));
    let names = |n: &Node| -> Vec<String> {
        n.runtime
            .containers()
            .iter()
            .map(|c| c.name().to_string())
            .collect()
    };

    sync(&agent, &pod);
    assert_eq!(names(&node), ["first"]);
    sync(&agent, &pod);
    assert_eq!(names(&node), ["first"], "the second waits for the first");
    node.runtime.exit(&node.named("first")[0].id, 0);
    sync(&agent, &pod);
    assert_eq!(names(&node), ["first", "second"]);
    node.runtime.exit(&node.named("second")[0].id, 0);
    sync(&agent, &pod);
    assert_eq!(names(&node), ["first", "second", "app"]);
    assert_eq!(ids(&node.running()), ids(&node.named("app")));
}

#[test]
fn a_source_that_is_not_ready_keeps_its_pods_containers() {
    let node = Node::new();
    let pod = static_pod(WEB);
    let first = node.agent();
    apply(&first, file_set(vec![pod.clone()]));
    sync(&first, &pod);
    let before = ids(&node.running());
    assert_eq!(before.len(), 2);
    drop(first);

    // Restart: the manifest directory cannot be read yet.
    let second = node.agent();
    pleg_pass(&second);
    block_on(Box::pin(
        Housekeeping::new(&second.cfg).collect_garbage(&*second),
    ));
    assert!(
        second.pods.borrow().is_empty(),
        "no orphan before the source spoke"
    );
    apply(
        &second,
        SourceUpdate {
            source: PodSource::File,
            pods: Vec::new(),
            authoritative: false,
        },
    );
    pleg_pass(&second);
    block_on(Box::pin(
        Housekeeping::new(&second.cfg).collect_garbage(&*second),
    ));
    assert!(
        second.pods.borrow().is_empty(),
        "an error is not an empty set"
    );
    assert_eq!(ids(&node.running()), before);

    // The first successful read says the pod is gone: now it is removed.
    apply(&second, file_set(Vec::new()));
    pleg_pass(&second);
    assert!(second.pods.borrow()[crate::pod::uid(&pod)]
        .lifecycle
        .is_deleted());
    assert_eq!(sync(&second, &pod), None, "terminated and forgotten");
    assert!(node.runtime.containers().is_empty());
    assert!(node.runtime.sandbox_ids().is_empty());
}

#[test]
fn the_pods_of_a_source_that_is_not_ready_survive_another_source_being_ready() {
    let node = Node::new();
    let mut api_pod = static_pod(WEB);
    api_pod.metadata.uid = Some("api-uid-1".into());
    api_pod
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(CONFIG_SOURCE_ANNOTATION.into(), "api".into());
    let first = node.agent();
    first.sources.borrow_mut().configure(PodSource::Api);
    apply(
        &first,
        SourceUpdate {
            source: PodSource::Api,
            pods: vec![Rc::new(api_pod.clone())],
            authoritative: true,
        },
    );
    sync(&first, &api_pod);
    let before = ids(&node.running());
    assert_eq!(before.len(), 2);
    drop(first);

    // Restart with the API server unreachable: the file source is ready.
    let second = node.agent();
    second.sources.borrow_mut().configure(PodSource::Api);
    apply(&second, file_set(Vec::new()));
    pleg_pass(&second);
    block_on(Box::pin(
        Housekeeping::new(&second.cfg).collect_garbage(&*second),
    ));
    assert!(
        second.pods.borrow().is_empty(),
        "the API pod is no orphan yet"
    );
    assert_eq!(ids(&node.running()), before);
}

/// A status sink that records what it is told.
#[derive(Default)]
struct Recorder {
    statuses: std::cell::RefCell<Vec<(String, Option<String>)>>,
    terminated: std::cell::RefCell<Vec<(String, Vec<String>)>>,
}

impl super::StatusSink for Recorder {
    fn status(&self, pod: &Pod, status: &k8s_openapi::api::core::v1::PodStatus) {
        self.statuses
            .borrow_mut()
            .push((crate::pod::uid(pod).to_string(), status.phase.clone()));
    }
    fn terminated(&self, pod: &Pod, status: &k8s_openapi::api::core::v1::PodStatus) {
        let states = status
            .container_statuses
            .iter()
            .flatten()
            .map(|c| {
                let s = c.state.as_ref();
                if s.and_then(|s| s.terminated.as_ref()).is_some() {
                    "terminated".to_string()
                } else {
                    "not terminated".to_string()
                }
            })
            .collect();
        self.terminated
            .borrow_mut()
            .push((crate::pod::uid(pod).to_string(), states));
    }
}

pub(super) fn api_pod(uid: &str) -> Pod {
    api_pod_from(uid, WEB)
}

/// An API pod (source `api`) from a manifest, with `uid`.
pub(super) fn api_pod_from(uid: &str, yaml: &str) -> Pod {
    let mut pod = static_pod(yaml);
    pod.metadata.uid = Some(uid.into());
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(CONFIG_SOURCE_ANNOTATION.into(), "api".into());
    pod
}

pub(super) fn api_set(pods: Vec<Pod>) -> SourceUpdate {
    SourceUpdate {
        source: PodSource::Api,
        pods: pods.into_iter().map(Rc::new).collect(),
        authoritative: true,
    }
}

#[test]
fn a_pod_deleted_in_the_api_is_terminated_once_and_reported_to_the_sink() {
    let node = Node::new();
    let agent = node.agent();
    agent.sources.borrow_mut().configure(PodSource::Api);
    let sink = Rc::new(Recorder::default());
    agent.set_status_sink(sink.clone());
    let pod = api_pod("api-uid-9");
    apply(&agent, api_set(vec![pod.clone()]));
    sync(&agent, &pod);
    agent.report_status("api-uid-9");
    assert_eq!(node.running().len(), 2);
    assert_eq!(sink.statuses.borrow().last().unwrap().0, "api-uid-9");

    // `kubectl delete`: the API sets deletionTimestamp and a grace period.
    let mut deleting = pod.clone();
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
    deleting.metadata.deletion_grace_period_seconds = Some(5);
    apply(&agent, api_set(vec![deleting.clone()]));
    assert!(agent.pods.borrow()["api-uid-9"].lifecycle.is_deleted());
    assert_eq!(sync(&agent, &deleting), None, "terminated and forgotten");
    assert!(node.running().is_empty());
    let stops: Vec<_> = node
        .runtime
        .calls()
        .into_iter()
        .filter(|c| *c == "StopContainer")
        .collect();
    assert_eq!(stops.len(), 2);
    assert_eq!(
        *sink.terminated.borrow(),
        [("api-uid-9".to_string(), vec!["terminated".to_string(); 2])],
        "the last status shows every container terminated"
    );

    // The API still lists it until the final DELETE lands: not taken up again.
    apply(&agent, api_set(vec![deleting.clone()]));
    assert!(agent.pods.borrow().is_empty());
    apply(&agent, api_set(Vec::new()));
    assert!(agent.sources.borrow().finished.is_empty());
}

#[test]
fn an_api_pod_the_node_refuses_is_reported_failed_once_stays_refused_and_finishes_when_deleted() {
    let node = Node::new();
    let agent = node.agent();
    agent.sources.borrow_mut().configure(PodSource::Api);
    let sink = Rc::new(Recorder::default());
    agent.set_status_sink(sink.clone());
    let mut pod = api_pod("api-uid-ssd");
    pod.spec.as_mut().unwrap().node_selector = Some([("disk".into(), "ssd".into())].into());
    apply(&agent, api_set(vec![pod.clone()]));
    assert!(agent.pods.borrow().is_empty(), "never run");
    assert_eq!(
        *sink.statuses.borrow(),
        [("api-uid-ssd".to_string(), Some("Failed".to_string()))]
    );
    // The same set again: nothing new to say.
    apply(&agent, api_set(vec![pod.clone()]));
    assert_eq!(sink.statuses.borrow().len(), 1);

    // The node is labelled in the API: new pods may use the label, the
    // refused one stays Failed.
    agent.set_node_object([("disk".into(), "ssd".into())].into(), Vec::new());
    apply(&agent, api_set(vec![pod.clone()]));
    assert!(agent.pods.borrow().is_empty(), "a refusal is final");
    assert_eq!(sink.statuses.borrow().len(), 1);

    // `kubectl delete`: it never ran, so it is finished at once, once.
    let mut deleting = pod.clone();
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
    apply(&agent, api_set(vec![deleting.clone()]));
    apply(&agent, api_set(vec![deleting]));
    assert_eq!(
        *sink.terminated.borrow(),
        [("api-uid-ssd".to_string(), Vec::<String>::new())]
    );
    assert!(node.running().is_empty());
}

/// An event sink that records (container, reason, message).
#[derive(Default)]
struct Events(std::cell::RefCell<Vec<(Option<String>, String, String)>>);

impl super::EventSink for Events {
    fn pod_event(&self, _: &Pod, c: Option<&str>, _: bool, reason: &str, message: &str) {
        self.0
            .borrow_mut()
            .push((c.map(str::to_string), reason.into(), message.into()));
    }
}

#[test]
fn starting_a_pod_records_kubelets_created_and_started_events() {
    let node = Node::new();
    let agent = node.agent();
    agent.sources.borrow_mut().configure(PodSource::Api);
    let events = Rc::new(Events::default());
    agent.set_event_sink(events.clone());
    let pod = api_pod("api-uid-ev");
    apply(&agent, api_set(vec![pod.clone()]));
    sync(&agent, &pod);
    let seen = events.0.borrow();
    let reasons: Vec<&str> = seen.iter().map(|(_, r, _)| r.as_str()).collect();
    for want in ["Created", "Started"] {
        assert!(reasons.contains(&want), "{want} in {seen:?}");
    }
    let (c, _, message) = seen.iter().find(|(_, r, _)| r == "Started").unwrap();
    assert_eq!(
        message,
        &format!("Started container {}", c.as_deref().unwrap())
    );
}

#[test]
fn the_termination_log_file_is_writable_by_any_user_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let node = Node::new();
    let agent = node.agent();
    let pod = static_pod(WEB);
    apply(&agent, file_set(vec![pod.clone()]));
    sync(&agent, &pod);
    let path = crate::pod::facts::pod_dir(&agent.cfg.root_dir, crate::pod::uid(&pod))
        .join("containers/app/termination-log-0");
    let mode = std::fs::metadata(&path)
        .expect("termination log")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o666, "{}", path.display());
}

#[test]
fn a_pulled_image_s_filesystem_is_synced_before_the_container_starts() {
    let node = Node::new();
    let fs = tempfile::tempdir().expect("image fs dir");
    node.runtime
        .set_image_fs(fs.path().to_str().expect("utf-8 path"));
    let pod = static_pod(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: pulled}
spec:
  containers:
  - {name: app, image: "registry.example/app:1"}
"#,
    );
    let agent = node.agent();
    apply(&agent, file_set(vec![pod.clone()]));
    let before = crate::node::syncfs::done();
    sync(&agent, &pod);
    let calls = node.runtime.calls();
    let pull = calls
        .iter()
        .position(|c| *c == "PullImage")
        .expect("a pull");
    let start = calls
        .iter()
        .position(|c| *c == "StartContainer")
        .expect("a start");
    assert!(
        calls[pull..start].contains(&"ImageFsInfo"),
        "the image filesystem is asked for between the pull and the start: {calls:?}"
    );
    assert_eq!(crate::node::syncfs::done(), before + 1);
    assert_eq!(node.running().len(), 1);
}

#[test]
fn a_present_image_is_not_pulled_and_nothing_is_synced() {
    let node = Node::new();
    let fs = tempfile::tempdir().expect("image fs dir");
    node.runtime
        .set_image_fs(fs.path().to_str().expect("utf-8 path"));
    let pod = static_pod(WEB);
    let agent = node.agent();
    apply(&agent, file_set(vec![pod.clone()]));
    let before = crate::node::syncfs::done();
    sync(&agent, &pod);
    assert!(!node.runtime.calls().contains(&"PullImage"));
    assert_eq!(crate::node::syncfs::done(), before);
}
