//! Admission by what the host and the runtime support: a pod that asks for
//! something this node cannot give is refused, with kubelet's reason, rather
//! than run without it. Beside [`super::admission`] (the predicates), the
//! three refusals kubelet makes on a node's features:
//! - `supplementalGroupsPolicy: Strict` where the runtime does not report
//!   the feature (`SupplementalGroupsPolicyNotSupported`);
//! - an AppArmor profile (field or annotation) other than `Unconfined` on a
//!   host without AppArmor (`AppArmor`, "Cannot enforce AppArmor: AppArmor
//!   is not enabled on the host");
//! - `hostUsers: false` where the runtime reports no user-namespace support
//!   for its default handler (`UserNamespacesNotSupported`): running such a
//!   pod in the host's user namespace would silently drop the isolation it
//!   asked for.
//!
//! Pure: the caller reads the host and asks the runtime.

use k8s_openapi::api::core::v1::Pod;

use super::accessors::{all_containers, spec};
use super::admission::Rejection;
use super::spec::{apparmor_profile, AppArmorProfile};

/// What the host and the runtime support.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostSupport {
    /// AppArmor is enabled on the host (`/sys/module/apparmor/parameters/enabled`).
    pub apparmor: bool,
    /// The runtime reports `features.supplemental_groups_policy`.
    pub supplemental_groups_policy: bool,
    /// The runtime's default handler reports `user_namespaces`.
    pub user_namespaces: bool,
}

/// kubelet's reason for a Strict policy the node cannot honour.
pub const SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED: &str = "SupplementalGroupsPolicyNotSupported";
/// kubelet's AppArmor admit handler's reason.
pub const APPARMOR: &str = "AppArmor";
/// The reason for `hostUsers: false` without runtime support.
pub const USER_NAMESPACES_NOT_SUPPORTED: &str = "UserNamespacesNotSupported";

/// The pod asks for AppArmor confinement (kubelet's `apparmor.isRequired`):
/// any profile other than `Unconfined`, on the pod or on a container.
pub fn requires_apparmor(pod: &Pod) -> bool {
    let confined = |p: Option<AppArmorProfile>| p.is_some_and(|p| p != AppArmorProfile::Unconfined);
    let pod_level = spec(pod)
        .security_context
        .as_ref()
        .and_then(|sc| sc.app_armor_profile.as_ref())
        .is_some_and(|p| p.type_ != "Unconfined");
    pod_level || all_containers(pod).any(|(c, _)| confined(apparmor_profile(pod, c)))
}

/// Refuses `pod` when it needs what `host` does not support.
pub fn admit(pod: &Pod, host: &HostSupport) -> Result<(), Rejection> {
    let s = spec(pod);
    let strict = s
        .security_context
        .as_ref()
        .and_then(|sc| sc.supplemental_groups_policy.as_deref())
        == Some("Strict");
    if strict && !host.supplemental_groups_policy {
        return Err(Rejection {
            reason: SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED.into(),
            message: "SupplementalGroupsPolicy=Strict is not supported in this node".into(),
        });
    }
    if !host.apparmor && requires_apparmor(pod) {
        return Err(Rejection {
            reason: APPARMOR.into(),
            message: "Cannot enforce AppArmor: AppArmor is not enabled on the host".into(),
        });
    }
    if s.host_users == Some(false) && !host.user_namespaces {
        return Err(Rejection {
            reason: USER_NAMESPACES_NOT_SUPPORTED.into(),
            message: "RuntimeClass handler \"\" does not support user namespaces".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml_ng::from_str(yaml).expect("test pod parses")
    }

    fn reason(p: &Pod, host: &HostSupport) -> String {
        admit(p, host).map_or_else(|r| r.reason, |()| "admitted".into())
    }

    const NOTHING: HostSupport = HostSupport {
        apparmor: false,
        supplemental_groups_policy: false,
        user_namespaces: false,
    };
    const EVERYTHING: HostSupport = HostSupport {
        apparmor: true,
        supplemental_groups_policy: true,
        user_namespaces: true,
    };

    #[test]
    fn each_unsupported_request_is_refused_with_kubelets_reason_and_supported_ones_pass() {
        let cases = [
            ("spec: {securityContext: {supplementalGroupsPolicy: Strict}, containers: [{name: c}]}", "SupplementalGroupsPolicyNotSupported"),
            ("spec: {securityContext: {supplementalGroupsPolicy: Merge}, containers: [{name: c}]}", "admitted"),
            ("spec: {containers: [{name: c, securityContext: {appArmorProfile: {type: RuntimeDefault}}}]}", "AppArmor"),
            ("spec: {securityContext: {appArmorProfile: {type: Localhost, localhostProfile: p}}, containers: [{name: c}]}", "AppArmor"),
            ("metadata: {annotations: {container.apparmor.security.beta.kubernetes.io/c: runtime/default}}\nspec: {containers: [{name: c}]}", "AppArmor"),
            ("metadata: {annotations: {container.apparmor.security.beta.kubernetes.io/c: unconfined}}\nspec: {containers: [{name: c}]}", "admitted"),
            ("spec: {containers: [{name: c, securityContext: {appArmorProfile: {type: Unconfined}}}]}", "admitted"),
            ("spec: {hostUsers: false, containers: [{name: c}]}", "UserNamespacesNotSupported"),
            ("spec: {hostUsers: true, containers: [{name: c}]}", "admitted"),
        ];
        for (yaml, want) in cases {
            let p = pod(yaml);
            assert_eq!(reason(&p, &NOTHING), want, "{yaml}");
            assert_eq!(reason(&p, &EVERYTHING), "admitted", "{yaml}");
        }
    }

    #[test]
    fn the_apparmor_refusal_carries_kubelets_message() {
        let p = pod("spec: {containers: [{name: c, securityContext: {appArmorProfile: {type: RuntimeDefault}}}]}");
        let r = admit(&p, &NOTHING).unwrap_err();
        assert_eq!(
            r.message,
            "Cannot enforce AppArmor: AppArmor is not enabled on the host"
        );
    }
}
