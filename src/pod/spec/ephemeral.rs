//! What an ephemeral container (`kubectl debug`) asks of the runtime
//! beyond an ordinary container's config: with `targetContainerName`, it
//! joins the PID namespace of that container (CRI `NamespaceMode::TARGET`
//! with `target_id`), so a debugger sees the target's processes.
//!
//! As in kubelet, only a container that would get its own PID namespace is
//! changed: with `shareProcessNamespace` (the pod's namespace) or
//! `hostPID` (the node's) it already sees the target.
//!
//! Pure: a config in, the same config changed. Which container ID the
//! target is, the agent finds in what the runtime reports.

use crate::cri::api;

/// Makes `config` join the PID namespace of container `target_id`, when
/// it would otherwise have its own.
pub fn share_target_pid(config: &mut api::ContainerConfig, target_id: &str) {
    let Some(ns) = config
        .linux
        .as_mut()
        .and_then(|l| l.security_context.as_mut())
        .and_then(|sc| sc.namespace_options.as_mut())
    else {
        return;
    };
    if ns.pid == api::NamespaceMode::Container as i32 {
        ns.pid = api::NamespaceMode::Target as i32;
        ns.target_id = target_id.to_string();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pid: api::NamespaceMode) -> api::ContainerConfig {
        api::ContainerConfig {
            linux: Some(api::LinuxContainerConfig {
                security_context: Some(api::LinuxContainerSecurityContext {
                    namespace_options: Some(api::NamespaceOption {
                        pid: pid as i32,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pid_of(c: &api::ContainerConfig) -> (i32, &str) {
        let ns = c.linux.as_ref().unwrap().security_context.as_ref().unwrap();
        let ns = ns.namespace_options.as_ref().unwrap();
        (ns.pid, ns.target_id.as_str())
    }

    #[test]
    fn a_container_with_its_own_pid_namespace_joins_the_targets() {
        let mut c = config(api::NamespaceMode::Container);
        share_target_pid(&mut c, "abc");
        assert_eq!(pid_of(&c), (api::NamespaceMode::Target as i32, "abc"));
    }

    #[test]
    fn a_shared_or_host_pid_namespace_is_kept() {
        for mode in [api::NamespaceMode::Pod, api::NamespaceMode::Node] {
            let mut c = config(mode);
            share_target_pid(&mut c, "abc");
            assert_eq!(pid_of(&c), (mode as i32, ""));
        }
    }
}
