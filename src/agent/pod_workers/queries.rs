//! The registry's answers to the read-only views (`super::super::views`):
//! which pod and container a log or streaming request means, the active
//! pods a stats scrape reads, whether a container still runs, the Node's
//! cordon and the recent events. Each answer is a copy (or a plain
//! value), so no view holds a borrow of the registry or sees a
//! [`PodEntry`]; kubelet's server asks its `HostInterface` the same way.

use std::path::PathBuf;
use std::rc::Rc;

use http::StatusCode;
use k8s_openapi::api::core::v1::Pod;

use super::{PodEntry, PodWorkers};
use crate::cri::RuntimeService;
use crate::pleg::State;
use crate::pod::{accessors, facts, ObservedPod};

/// A refusal: the status and kubelet's text.
pub(in crate::agent) type Refusal = (StatusCode, String);

/// Where a container's log is read: the pod's UID, the container's log
/// directory, what the runtime showed of the pod and why the container
/// waits, if the agent knows.
pub(in crate::agent) struct LogSource {
    pub uid: String,
    pub dir: PathBuf,
    pub observed: ObservedPod,
    pub waiting: Option<String>,
}

/// An active pod as `/stats/summary` reads it.
pub(in crate::agent) struct ActivePod {
    pub uid: String,
    pub pod: Rc<Pod>,
    /// Its pod cgroup (empty: none).
    pub cgroup: String,
    /// Its latest sandbox's creation (Unix s), else when it was first seen.
    pub start_unix: i64,
    /// Its running containers: name, ID, start (Unix ns).
    pub running: Vec<(String, String, i64)>,
}

/// The pod (not a deleted one, when both are there) named `name` in
/// `namespace`, with UID `uid` if given.
fn find<'a>(
    pods: impl Iterator<Item = (&'a String, &'a PodEntry)>,
    namespace: &str,
    name: &str,
    uid: Option<&str>,
) -> Option<(&'a String, &'a PodEntry)> {
    pods.filter(|(_, e)| {
        accessors::namespace(&e.pod) == namespace
            && accessors::name(&e.pod) == name
            && uid.is_none_or(|u| accessors::uid(&e.pod) == u)
    })
    .min_by_key(|(_, e)| e.lifecycle.is_deleted())
}

impl<R: RuntimeService> PodWorkers<R> {
    /// Where container `container` of pod `namespace`/`name` logs, or
    /// kubelet's 404.
    pub(in crate::agent) fn log_source(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
    ) -> Result<LogSource, Refusal> {
        let pods = self.pods.borrow();
        let Some((uid, e)) = find(pods.iter(), namespace, name, None) else {
            return Err((
                StatusCode::NOT_FOUND,
                format!("pod {name:?} does not exist"),
            ));
        };
        if !accessors::has_container(&e.pod, container) {
            return Err((
                StatusCode::NOT_FOUND,
                format!("container {container:?} not found in pod {name:?}"),
            ));
        }
        let waiting = e
            .containers
            .get(container)
            .and_then(|c| c.waiting.as_ref())
            .map(|w| w.reason.clone());
        Ok(LogSource {
            uid: uid.clone(),
            dir: facts::log_dir(&self.cfg.pod_logs_dir, &e.pod).join(container),
            observed: e.observed.clone(),
            waiting,
        })
    }

    /// Whether pod `uid`'s container `id` ran at the last observation.
    pub(in crate::agent) fn container_running(&self, uid: &str, id: &str) -> bool {
        let pods = self.pods.borrow();
        pods.get(uid).is_some_and(|e| {
            e.observed
                .containers
                .iter()
                .any(|c| c.id == id && c.state == State::Running)
        })
    }

    /// The container ID (or, with `port_forward`, the sandbox ID) a
    /// streaming session targets, or the refusal.
    pub(in crate::agent) fn session_target(
        &self,
        namespace: &str,
        pod: &str,
        uid: Option<&str>,
        container: &str,
        port_forward: bool,
    ) -> Result<String, Refusal> {
        let pods = self.pods.borrow();
        let Some((_, e)) = find(pods.iter(), namespace, pod, uid) else {
            return Err((StatusCode::NOT_FOUND, "pod does not exist".into()));
        };
        if port_forward {
            return match e.observed.latest_sandbox().filter(|sb| sb.ready) {
                Some(sb) => Ok(sb.id.clone()),
                None => Err((
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("pod {pod:?} has no running sandbox"),
                )),
            };
        }
        if !accessors::has_container(&e.pod, container) {
            return Err((
                StatusCode::NOT_FOUND,
                format!("container {container:?} not found in pod {pod:?}"),
            ));
        }
        match e.observed.latest(container) {
            Some(c) if c.state == State::Running => Ok(c.id.clone()),
            _ => Err((
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("container not found ({container:?})"),
            )),
        }
    }

    /// The pods whose sandbox is active, with what a stats scrape reads
    /// of them, by UID.
    pub(in crate::agent) fn active_pods(&self) -> Vec<ActivePod> {
        let pods = self.pods.borrow();
        pods.iter()
            .filter(|(_, e)| e.observed.is_active())
            .map(|(uid, e)| ActivePod {
                uid: uid.clone(),
                pod: e.pod.clone(),
                cgroup: super::start::cgroup_parent(&e.pod, self.cgroups.as_ref()),
                start_unix: e
                    .observed
                    .latest_sandbox()
                    .map(|s| s.created_at / 1_000_000_000)
                    .filter(|s| *s > 0)
                    .unwrap_or(e.first_seen_unix),
                running: e
                    .observed
                    .containers
                    .iter()
                    .filter(|c| c.state == State::Running)
                    .map(|c| (c.name.clone(), c.id.clone(), c.started_at))
                    .collect(),
            })
            .collect()
    }

    /// Whether the Node is cordoned (`None` until it was read).
    pub(in crate::agent) fn api_unschedulable(&self) -> Option<bool> {
        self.node.borrow().api_unschedulable
    }

    /// The recent events as `picolet describe` reads them.
    pub(in crate::agent) fn event_list(&self) -> serde_json::Value {
        self.recent_events.borrow().event_list()
    }
}

#[cfg(test)]
mod tests {
    use http::StatusCode;

    use super::super::tests::{apply, file_set, static_pod, sync, Node, WEB};
    use crate::pod::accessors;

    #[test]
    fn a_running_container_is_a_session_target_and_a_missing_one_is_refused_with_kubelets_404() {
        let node = Node::new();
        let agent = node.agent();
        let web = static_pod(WEB);
        apply(&agent, file_set(vec![web.clone()]));
        sync(&agent, &web);
        let (ns, name) = (accessors::namespace(&web), accessors::name(&web));

        let id = agent
            .session_target(ns, name, None, "app", false)
            .expect("app runs");
        assert!(agent.container_running(accessors::uid(&web), &id));
        let sandbox = agent
            .session_target(ns, name, None, "", true)
            .expect("a ready sandbox");
        assert_ne!(sandbox, id);
        let missing = agent.session_target(ns, name, None, "nope", false);
        assert_eq!(missing.unwrap_err().0, StatusCode::NOT_FOUND);
        let unknown = agent.session_target(ns, "other", None, "app", false);
        assert_eq!(
            unknown.unwrap_err(),
            (StatusCode::NOT_FOUND, "pod does not exist".to_string())
        );
    }

    #[test]
    fn the_active_pods_are_the_synced_ones_with_their_running_containers() {
        let node = Node::new();
        let agent = node.agent();
        let web = static_pod(WEB);
        apply(&agent, file_set(vec![web.clone()]));
        assert!(agent.active_pods().is_empty(), "nothing runs yet");

        sync(&agent, &web);
        let active = agent.active_pods();
        assert_eq!(active.len(), 1);
        assert_eq!(active[0].uid, accessors::uid(&web));
        let mut names: Vec<&str> = active[0].running.iter().map(|c| c.0.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["app", "side"]);
    }

    #[test]
    fn a_log_source_is_the_containers_log_directory_and_an_unknown_container_is_a_404() {
        let node = Node::new();
        let agent = node.agent();
        let web = static_pod(WEB);
        apply(&agent, file_set(vec![web.clone()]));
        sync(&agent, &web);
        let (ns, name) = (accessors::namespace(&web), accessors::name(&web));

        let src = agent.log_source(ns, name, "app").expect("app logs");
        assert_eq!(src.uid, accessors::uid(&web));
        assert!(src.dir.ends_with("app"), "{}", src.dir.display());
        assert_eq!(src.waiting, None);
        let Err((status, _)) = agent.log_source(ns, name, "nope") else {
            panic!("a container the pod lacks has no log source");
        };
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}
