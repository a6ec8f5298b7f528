//! `/runningpods/`: kubelet's list of the pods the container runtime
//! actually runs, as opposed to `/pods` (the pods the node should run).
//!
//! kubelet answers it from the runtime (`GetPods(false)`): every pod with
//! a ready sandbox or a running container, and of its containers only the
//! running ones, as a v1 `PodList` whose items carry just the name,
//! namespace and UID, and per container its name and image
//! (`spec.containers`). picolet adds each container's ID in
//! `status.containerStatuses` (`<runtime>://<id>`, as in `/pods`), which
//! is what an operator compares against `crictl ps`.
//!
//! The builder ([`running_pods`]) is pure, over the PLEG's last relist; the
//! agent serves it without calling the runtime, so the answer is at most
//! one relist period old and costs the runtime nothing.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::observe::Relist;
use super::PodWorkers;
use crate::cri::RuntimeService;
use crate::pleg::State;

/// The v1 `PodList` of what `relist` saw running; `runtime` is the CRI
/// runtime's name (`containerd`, `cri-o`), the scheme of container IDs.
/// An image the runtime reports only by ID ([`is_image_id`], runtimes that
/// do not keep `user_specified_image`) is named by `spec_image(pod UID,
/// container)`, the image the pod's spec asks for, when the node knows
/// the pod. Pods are sorted by namespace and name, containers by name.
pub(super) fn running_pods(
    relist: &Relist,
    runtime: &str,
    spec_image: &dyn Fn(&str, &str) -> Option<String>,
) -> Value {
    // (namespace, name, uid) -> running containers (name, image, id).
    type Key<'a> = (&'a str, &'a str, &'a str);
    let mut pods: BTreeMap<Key, Vec<(&str, String, &str)>> = BTreeMap::new();
    let key = |uid: &'_ str| -> Option<(&str, &str)> {
        relist
            .names
            .get(uid)
            .map(|(ns, name)| (ns.as_str(), name.as_str()))
    };
    for s in relist.sandboxes.iter().filter(|s| s.ready) {
        if let Some((ns, name)) = key(&s.pod_uid) {
            pods.entry((ns, name, &s.pod_uid)).or_default();
        }
    }
    for c in &relist.containers {
        if c.state != State::Running {
            continue;
        }
        // A running container whose sandbox was never listed (it went
        // between the two list calls) still belongs to a pod: name it by
        // its UID rather than hide it.
        let (ns, name) = key(&c.pod_uid).unwrap_or(("", &c.pod_uid));
        let image = relist.images.get(&c.id).cloned().unwrap_or_default();
        let image = match is_image_id(&image) {
            true => spec_image(&c.pod_uid, &c.name).unwrap_or(image),
            false => image,
        };
        pods.entry((ns, name, &c.pod_uid))
            .or_default()
            .push((&c.name, image, &c.id));
    }
    let items: Vec<Value> = pods
        .into_iter()
        .map(|((ns, name, uid), mut containers)| {
            containers.sort();
            let spec: Vec<Value> = containers
                .iter()
                .map(|(name, image, _)| json!({"name": name, "image": image}))
                .collect();
            let statuses: Vec<Value> = containers
                .iter()
                .map(|(name, image, id)| {
                    json!({
                        "name": name,
                        "image": image,
                        "containerID": format!("{runtime}://{id}"),
                        "state": {"running": {}},
                        "ready": false,
                        "restartCount": 0,
                    })
                })
                .collect();
            json!({
                "metadata": {"name": name, "namespace": ns, "uid": uid},
                "spec": {"containers": spec},
                "status": {"containerStatuses": statuses},
            })
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items})
}

/// An image ID rather than a name: `sha256:<hex>` (containerd) or the bare
/// 64 hex digits (CRI-O).
fn is_image_id(image: &str) -> bool {
    let hex = image.strip_prefix("sha256:").unwrap_or(image);
    hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

impl<R: RuntimeService> PodWorkers<R> {
    /// `GET /runningpods/`.
    pub fn running_pods_json(&self) -> Value {
        let pods = self.pods.borrow();
        let spec_image = |uid: &str, name: &str| {
            let spec = crate::pod::accessors::spec(&pods.get(uid)?.pod);
            let inits = spec.init_containers.iter().flatten();
            spec.containers
                .iter()
                .chain(inits)
                .find(|c| c.name == name)?
                .image
                .clone()
        };
        running_pods(
            &self.relist.borrow(),
            &self.runtime_name.borrow(),
            &spec_image,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gc;

    fn relist() -> Relist {
        let mut rl = Relist::default();
        for (uid, ns, name, ready) in [
            ("u1", "kube-system", "etcd", true),
            ("u2", "default", "gone", false),
            ("u3", "default", "web", true),
        ] {
            rl.names.insert(uid.into(), (ns.into(), name.into()));
            rl.sandboxes.push(gc::Sandbox {
                id: format!("sb-{uid}"),
                pod_uid: uid.into(),
                attempt: 0,
                created_at: 1,
                ready,
            });
        }
        for (id, uid, name, state, image) in [
            ("c1", "u3", "sidecar", State::Running, "busybox:1.36"),
            ("c2", "u3", "app", State::Running, "nginx:1.27"),
            ("c3", "u3", "old", State::Exited, "nginx:1.26"),
            ("c4", "u2", "app", State::Exited, "nginx:1.27"),
            ("c5", "u1", "etcd", State::Created, "etcd:3.5"),
        ] {
            rl.images.insert(id.into(), image.into());
            rl.containers.push(gc::Container {
                id: id.into(),
                pod_uid: uid.into(),
                sandbox_id: format!("sb-{uid}"),
                name: name.into(),
                attempt: 0,
                created_at: 1,
                state,
            });
        }
        rl
    }

    #[test]
    fn running_pods_lists_ready_sandboxes_with_only_their_running_containers() {
        let list = running_pods(&relist(), "containerd", &|_, _| None);
        assert_eq!(list["kind"], "PodList");
        let items = list["items"].as_array().unwrap();
        let names: Vec<&str> = items
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["web", "etcd"], "sorted by namespace, then name");
        let web = &items[0];
        assert_eq!(web["metadata"]["namespace"], "default");
        assert_eq!(web["metadata"]["uid"], "u3");
        assert_eq!(
            web["spec"]["containers"],
            json!([
                {"name": "app", "image": "nginx:1.27"},
                {"name": "sidecar", "image": "busybox:1.36"},
            ])
        );
        let ids: Vec<&str> = web["status"]["containerStatuses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["containerID"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["containerd://c2", "containerd://c1"]);
        assert_eq!(
            items[1]["spec"]["containers"],
            json!([]),
            "a ready sandbox whose container is only created"
        );
    }

    #[test]
    fn a_running_container_without_a_listed_sandbox_is_still_reported() {
        let mut rl = Relist::default();
        rl.images.insert("c9".into(), "pause:3.10".into());
        rl.containers.push(gc::Container {
            id: "c9".into(),
            pod_uid: "u9".into(),
            sandbox_id: "sb".into(),
            name: "app".into(),
            attempt: 0,
            created_at: 1,
            state: State::Running,
        });
        let list = running_pods(&rl, "cri-o", &|_, _| None);
        assert_eq!(list["items"][0]["metadata"]["uid"], "u9");
        assert_eq!(
            list["items"][0]["status"]["containerStatuses"][0]["containerID"],
            "cri-o://c9"
        );
    }

    #[test]
    fn an_image_reported_by_id_is_named_by_the_pods_spec() {
        let mut rl = relist();
        let id = format!("sha256:{}", "0a".repeat(32));
        rl.images.insert("c2".into(), id.clone());
        rl.images.insert("c1".into(), "0a".repeat(32));
        let list = running_pods(&rl, "containerd", &|uid, name| {
            ((uid, name) == ("u3", "app")).then(|| "nginx:1.27".to_string())
        });
        assert_eq!(
            list["items"][0]["spec"]["containers"][0]["image"],
            "nginx:1.27"
        );
        let list = running_pods(&rl, "containerd", &|_, _| None);
        assert_eq!(
            list["items"][0]["spec"]["containers"][0]["image"],
            id.as_str(),
            "unknown pods keep the runtime's ID"
        );
        let list = running_pods(&rl, "cri-o", &|_, name| Some(format!("{name}:1")));
        assert_eq!(
            list["items"][0]["spec"]["containers"][1]["image"], "sidecar:1",
            "CRI-O's bare hex ID too"
        );
    }

    #[test]
    fn nothing_running_is_an_empty_pod_list() {
        let list = running_pods(&Relist::default(), "containerd", &|_, _| None);
        assert_eq!(list["items"], json!([]));
    }
}
