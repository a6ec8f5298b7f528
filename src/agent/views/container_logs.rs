//! `GET /containerLogs/{namespace}/{pod}/{container}`: finds the pod and
//! the container instance asked for (the current one, or with `previous`
//! the one before), and hands its log files to [`crate::logs::files`],
//! whose task streams the answer while the pod workers say the container
//! runs. The refusals are kubelet's: 400 for a missing container name or
//! bad options, 404 for an unknown pod or container, 400 when there is no
//! instance (yet, or before). The pod and its container come from the pod
//! workers' answers (`PodWorkers::log_source`, `container_running`), as
//! copies; the instance's choice ([`instance`]) is pure.

use std::rc::{Rc, Weak};

use http::request::Parts;
use http::{header, HeaderValue, Response, StatusCode};

use super::Views;
use crate::admin::router::Reply;
use crate::agent::now_unix_nanos;
use crate::cri::RuntimeService;
use crate::logs::{files, LogOptions};
use crate::pleg::State;
use crate::pod::ObservedPod;
use crate::rt;

/// Which instance's log: its restart count (`N` of `N.log`) and, when it
/// is the current one, its container ID (to follow while it runs).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Instance {
    pub attempt: u32,
    pub running_id: Option<String>,
}

/// The instance of container `name` a log request means, or kubelet's
/// refusal. `waiting` is why the container has no instance yet, if known.
pub(super) fn instance(
    observed: &ObservedPod,
    pod: &str,
    name: &str,
    previous: bool,
    waiting: Option<&str>,
) -> Result<Instance, String> {
    let mut instances = observed.containers.iter().filter(|c| c.name == name);
    let current = instances.next();
    if !previous {
        return match current {
            Some(c) => Ok(Instance {
                attempt: c.attempt,
                running_id: (c.state == State::Running).then(|| c.id.clone()),
            }),
            None => Err(format!(
                "container {name:?} in pod {pod:?} is waiting to start: {}",
                waiting.unwrap_or("ContainerCreating")
            )),
        };
    }
    match (instances.next(), current) {
        (Some(c), _) => Ok(Instance {
            attempt: c.attempt,
            running_id: None,
        }),
        // The previous instance was removed from the runtime; its log
        // file may still be there.
        (None, Some(c)) if c.attempt > 0 => Ok(Instance {
            attempt: c.attempt - 1,
            running_id: None,
        }),
        _ => Err(format!(
            "previous terminated container {name:?} in pod {pod:?} not found"
        )),
    }
}

fn refuse(status: StatusCode, message: String) -> Response<Reply> {
    let mut r = crate::admin::router::typed(message + "\n", "text/plain; charset=utf-8");
    *r.status_mut() = status;
    r.map(Reply::Whole)
}

impl<R: RuntimeService> Views<R> {
    /// The `/containerLogs/...` handler (see the module docs).
    pub(in crate::agent) fn container_logs(self: &Rc<Self>, req: &Parts) -> Response<Reply> {
        let path = req.uri.path();
        let rest = path.strip_prefix("/containerLogs/").unwrap_or("");
        let mut parts = rest.splitn(3, '/');
        let (ns, pod_name, container) = (
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        if ns.is_empty() || pod_name.is_empty() {
            return refuse(
                StatusCode::NOT_FOUND,
                format!("pod {pod_name:?} does not exist"),
            );
        }
        if container.is_empty() {
            return refuse(StatusCode::BAD_REQUEST, "missing container name".into());
        }
        let opts =
            match LogOptions::from_query(req.uri.query().unwrap_or(""), now_unix_nanos().into()) {
                Ok(o) => o,
                Err(e) => return refuse(StatusCode::BAD_REQUEST, e.to_string()),
            };
        let found = self
            .workers
            .log_source(ns, pod_name, container)
            .and_then(|src| {
                instance(
                    &src.observed,
                    pod_name,
                    container,
                    opts.previous,
                    src.waiting.as_deref(),
                )
                .map(|i| (src.uid, src.dir, i))
                .map_err(|m| (StatusCode::BAD_REQUEST, m))
            });
        let (uid, dir, instance) = match found {
            Ok(f) => f,
            Err((status, message)) => return refuse(status, message),
        };
        let files = files::log_files(&dir, instance.attempt);
        if opts.previous && !files.iter().any(|f| f.exists()) {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "previous terminated container {container:?} in pod {pod_name:?} not found"
                ),
            );
        }
        let me: Weak<Self> = Rc::downgrade(self);
        let running = move || {
            let (Some(agent), Some(id)) = (me.upgrade(), instance.running_id.as_deref()) else {
                return false;
            };
            agent.workers.container_running(&uid, id)
        };
        let (tx, rx) = smol::channel::bounded(2);
        rt::spawn(files::stream(files, opts, files::POLL, running, tx)).detach();
        let mut r = Response::new(Reply::stream(rx));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::observed::ObservedContainer;

    fn observed(instances: &[(u32, State)]) -> ObservedPod {
        ObservedPod {
            containers: instances
                .iter()
                .map(|(attempt, state)| ObservedContainer {
                    id: format!("id{attempt}"),
                    name: "app".into(),
                    attempt: *attempt,
                    state: *state,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_current_instance_is_the_newest_and_previous_the_one_before() {
        let o = observed(&[(2, State::Running), (1, State::Exited)]);
        assert_eq!(
            instance(&o, "p", "app", false, None),
            Ok(Instance {
                attempt: 2,
                running_id: Some("id2".into())
            })
        );
        assert_eq!(
            instance(&o, "p", "app", true, None),
            Ok(Instance {
                attempt: 1,
                running_id: None
            })
        );
        let removed = observed(&[(3, State::Exited)]);
        assert_eq!(
            instance(&removed, "p", "app", true, None),
            Ok(Instance {
                attempt: 2,
                running_id: None
            })
        );
    }

    #[test]
    fn a_container_without_an_instance_gets_kubelets_refusals() {
        let none = observed(&[]);
        assert_eq!(
            instance(&none, "p", "app", false, Some("ErrImagePull")),
            Err(r#"container "app" in pod "p" is waiting to start: ErrImagePull"#.into())
        );
        assert_eq!(
            instance(&none, "p", "app", false, None),
            Err(r#"container "app" in pod "p" is waiting to start: ContainerCreating"#.into())
        );
        let first = observed(&[(0, State::Running)]);
        assert_eq!(
            instance(&first, "p", "app", true, None),
            Err(r#"previous terminated container "app" in pod "p" not found"#.into())
        );
    }
}
