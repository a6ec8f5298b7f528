//! Reading a pod: the accessors every module uses instead of walking
//! `pod.spec.as_ref()...` itself, with the API defaults applied on read
//! (`restartPolicy: Always`, an absent spec reads as an empty one).
//!
//! Plain field access only: no rule that needs a second input (those are in
//! [`super::facts`]), no I/O, no logging.

use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod, PodSpec};

/// The pod's spec; an empty one when the pod has none.
pub fn spec(pod: &Pod) -> &PodSpec {
    static EMPTY: OnceLock<PodSpec> = OnceLock::new();
    pod.spec
        .as_ref()
        .unwrap_or_else(|| EMPTY.get_or_init(PodSpec::default))
}

/// `metadata.name` ("" when unset).
pub fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

/// `metadata.namespace` ("" when unset; defaulted pods always have one).
pub fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("")
}

/// The pod's UID ("" when unset).
pub fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

/// `<namespace>/<name>` for logs (namespace `default` when unset).
pub fn full_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        name(pod)
    )
}

/// `spec.restartPolicy`, `Always` when unset.
pub fn restart_policy(pod: &Pod) -> &str {
    spec(pod).restart_policy.as_deref().unwrap_or("Always")
}

/// `spec.initContainers`, in order.
pub fn init_containers(pod: &Pod) -> &[Container] {
    spec(pod).init_containers.as_deref().unwrap_or(&[])
}

/// `spec.containers`.
pub fn app_containers(pod: &Pod) -> &[Container] {
    &spec(pod).containers
}

/// Every container, init containers first, each with `true` when it is an
/// init container.
pub fn all_containers(pod: &Pod) -> impl Iterator<Item = (&Container, bool)> {
    init_containers(pod)
        .iter()
        .map(|c| (c, true))
        .chain(app_containers(pod).iter().map(|c| (c, false)))
}

/// The container (init or app) named `name`.
pub fn container<'p>(pod: &'p Pod, name: &str) -> Option<&'p Container> {
    all_containers(pod).map(|(c, _)| c).find(|c| c.name == name)
}

/// `spec.ephemeralContainers` (`kubectl debug`), in the order they were
/// added. They are not in [`all_containers`]: they count for no phase,
/// condition or probe, and are started once, never restarted.
pub fn ephemeral_containers(pod: &Pod) -> &[EphemeralContainer] {
    spec(pod).ephemeral_containers.as_deref().unwrap_or(&[])
}

/// The ephemeral container named `name`.
pub fn ephemeral_container<'p>(pod: &'p Pod, name: &str) -> Option<&'p EphemeralContainer> {
    ephemeral_containers(pod).iter().find(|c| c.name == name)
}

/// An ephemeral container as the `Container` it runs as (kubelet runs its
/// common part the same way; only `targetContainerName` is left out).
/// Every field is named, so a field the API adds breaks the build here.
pub fn ephemeral_as_container(ec: &EphemeralContainer) -> Container {
    let EphemeralContainer {
        args,
        command,
        env,
        env_from,
        image,
        image_pull_policy,
        lifecycle,
        liveness_probe,
        name,
        ports,
        readiness_probe,
        resize_policy,
        resources,
        restart_policy,
        restart_policy_rules,
        security_context,
        startup_probe,
        stdin,
        stdin_once,
        target_container_name: _,
        termination_message_path,
        termination_message_policy,
        tty,
        volume_devices,
        volume_mounts,
        working_dir,
    } = ec.clone();
    Container {
        args,
        command,
        env,
        env_from,
        image,
        image_pull_policy,
        lifecycle,
        liveness_probe,
        name,
        ports,
        readiness_probe,
        resize_policy,
        resources,
        restart_policy,
        restart_policy_rules,
        security_context,
        startup_probe,
        stdin,
        stdin_once,
        termination_message_path,
        termination_message_policy,
        tty,
        volume_devices,
        volume_mounts,
        working_dir,
    }
}

/// Whether the pod has a container `name` of any kind, ephemeral ones
/// included: what logs, exec and attach accept, as kubelet does.
pub fn has_container(pod: &Pod, name: &str) -> bool {
    container(pod, name).is_some() || ephemeral_container(pod, name).is_some()
}

/// `securityContext.fsGroup`: the group that owns the pod's volumes
/// (validation keeps it in 0..2^31).
pub fn fs_group(pod: &Pod) -> Option<u32> {
    let sc = spec(pod).security_context.as_ref()?;
    sc.fs_group.and_then(|g| u32::try_from(g).ok())
}

/// kubelet's `FsUserFrom`: the user every init and app container runs as,
/// by its own `securityContext.runAsUser` or else the pod's, when they all
/// have one and it is the same; `None` otherwise. Projected
/// service-account tokens are owned by this user (mode 0600).
pub fn fs_user(pod: &Pod) -> Option<u32> {
    let pod_user = spec(pod)
        .security_context
        .as_ref()
        .and_then(|sc| sc.run_as_user);
    let mut common = None;
    for (c, _) in all_containers(pod) {
        let user = c
            .security_context
            .as_ref()
            .and_then(|sc| sc.run_as_user)
            .or(pod_user)?;
        if common.is_some_and(|u| u != user) {
            return None;
        }
        common = Some(user);
    }
    common.and_then(|u| u32::try_from(u).ok())
}

/// `spec.hostNetwork`.
pub fn host_network(pod: &Pod) -> bool {
    spec(pod).host_network.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml_ng::from_str(yaml).expect("test pod parses")
    }

    #[test]
    fn fs_user_is_the_one_run_as_user_of_every_container_or_none() {
        let same = pod("spec:\n  securityContext: {runAsUser: 1000}\n  initContainers: [{name: i}]\n  containers: [{name: a}, {name: b, securityContext: {runAsUser: 1000}}]\n");
        assert_eq!(fs_user(&same), Some(1000));
        let mixed = pod("spec:\n  securityContext: {runAsUser: 1000}\n  containers: [{name: a}, {name: b, securityContext: {runAsUser: 2000}}]\n");
        assert_eq!(fs_user(&mixed), None);
        let unset = pod(
            "spec:\n  containers: [{name: a, securityContext: {runAsUser: 1000}}, {name: b}]\n",
        );
        assert_eq!(fs_user(&unset), None);
        assert_eq!(fs_user(&pod("spec:\n  containers: []\n")), None);
    }

    #[test]
    fn a_pod_without_a_spec_reads_as_empty_with_restart_policy_always() {
        let p = Pod::default();
        assert_eq!(restart_policy(&p), "Always");
        assert!(all_containers(&p).next().is_none());
        assert!(!host_network(&p));
        assert_eq!(full_name(&p), "default/");
    }

    #[test]
    fn all_containers_lists_init_containers_first_and_marks_them() {
        let p = pod(r#"
metadata: {name: web, namespace: edge, uid: u1}
spec:
  restartPolicy: OnFailure
  hostNetwork: true
  initContainers: [{name: a}, {name: b}]
  containers: [{name: c}]
"#);
        let names: Vec<_> = all_containers(&p)
            .map(|(c, i)| (c.name.as_str(), i))
            .collect();
        assert_eq!(names, [("a", true), ("b", true), ("c", false)]);
        assert_eq!(container(&p, "b").map(|c| c.name.as_str()), Some("b"));
        assert!(container(&p, "z").is_none());
        assert_eq!(restart_policy(&p), "OnFailure");
        assert!(host_network(&p));
        assert_eq!((full_name(&p).as_str(), uid(&p)), ("edge/web", "u1"));
    }

    #[test]
    fn ephemeral_containers_are_found_by_name_but_are_not_among_all_containers() {
        let p = pod(r#"
spec:
  containers: [{name: app}]
  ephemeralContainers:
  - {name: debugger, image: busybox, targetContainerName: app, command: [sh], tty: true}
"#);
        assert_eq!(all_containers(&p).count(), 1);
        assert!(container(&p, "debugger").is_none());
        assert!(has_container(&p, "debugger") && has_container(&p, "app"));
        assert!(!has_container(&p, "nope"));
        let c = ephemeral_as_container(ephemeral_container(&p, "debugger").expect("named"));
        assert_eq!(c.name, "debugger");
        assert_eq!(c.image.as_deref(), Some("busybox"));
        assert_eq!(c.command, Some(vec!["sh".to_string()]));
        assert_eq!(c.tty, Some(true));
    }
}
