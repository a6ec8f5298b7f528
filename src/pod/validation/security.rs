//! Security contexts, pod and container (`ValidateSecurityContext`,
//! `validatePodSpecSecurityContext`): user and group ids, seccomp and
//! AppArmor profiles, procMount, privilege escalation. See [`super`] for
//! the contract.

use k8s_openapi::api::core::v1::{
    AppArmorProfile, PodSecurityContext, SeccompProfile, SecurityContext,
};

use super::{validate_local_descending_path, BadValue, Errors, Path};

/// `IsValidUserID` / `IsValidGroupID`: 0 to 2^32-1.
pub(super) fn validate_id(id: Option<i64>, path: &Path, v: &mut Errors) {
    if let Some(id) = id.filter(|id| !(0..=i64::from(u32::MAX)).contains(id)) {
        v.invalid_int(
            path,
            id,
            format!("must be between 0 and {}, inclusive", u32::MAX),
        );
    }
}

pub(super) fn validate_pod_security_context(sc: &PodSecurityContext, path: &Path, v: &mut Errors) {
    validate_id(sc.run_as_user, &path.child("runAsUser"), v);
    validate_id(sc.run_as_group, &path.child("runAsGroup"), v);
    validate_id(sc.fs_group, &path.child("fsGroup"), v);
    for (i, g) in sc.supplemental_groups.iter().flatten().enumerate() {
        validate_id(Some(*g), &path.child("supplementalGroups").index(i), v);
    }
    if let Some(policy) = sc.fs_group_change_policy.as_deref() {
        if !matches!(policy, "OnRootMismatch" | "Always") {
            v.not_supported(
                &path.child("fsGroupChangePolicy"),
                policy,
                &["Always", "OnRootMismatch"],
            );
        }
    }
    if let Some(policy) = sc.supplemental_groups_policy.as_deref() {
        if !matches!(policy, "Merge" | "Strict") {
            v.not_supported(
                &path.child("supplementalGroupsPolicy"),
                policy,
                &["Merge", "Strict"],
            );
        }
    }
    validate_seccomp_profile(
        sc.seccomp_profile.as_ref(),
        &path.child("seccompProfile"),
        v,
    );
    validate_app_armor_profile(
        sc.app_armor_profile.as_ref(),
        &path.child("appArmorProfile"),
        v,
    );
    for (i, s) in sc.sysctls.iter().flatten().enumerate() {
        if s.name.is_empty() {
            v.required(&path.child("sysctls").index(i).child("name"), "");
        }
    }
}

/// `validateSeccompProfileField`.
pub(super) fn validate_seccomp_profile(sp: Option<&SeccompProfile>, path: &Path, v: &mut Errors) {
    let Some(sp) = sp else {
        return;
    };
    match sp.type_.as_str() {
        "" => v.required(
            &path.child("type"),
            "type is required when seccompProfile is set",
        ),
        "Localhost" => match sp.localhost_profile.as_deref() {
            None => v.required(
                &path.child("localhostProfile"),
                "must be set when seccomp type is Localhost",
            ),
            Some(p) => validate_local_descending_path(p, &path.child("localhostProfile"), v),
        },
        "RuntimeDefault" | "Unconfined" => {
            if sp.localhost_profile.is_some() {
                v.invalid(
                    &path.child("localhostProfile"),
                    BadValue::Struct,
                    "can only be set when seccomp type is Localhost",
                );
            }
        }
        other => v.not_supported(
            &path.child("type"),
            other,
            &["Localhost", "RuntimeDefault", "Unconfined"],
        ),
    }
}

// ---------------------------------------------------------------------------
// Security context
// ---------------------------------------------------------------------------

pub(super) fn validate_security_context(
    sc: &SecurityContext,
    host_users: bool,
    p: &Path,
    v: &mut Errors,
) {
    validate_id(sc.run_as_user, &p.child("runAsUser"), v);
    validate_id(sc.run_as_group, &p.child("runAsGroup"), v);
    if let Some(pm) = sc.proc_mount.as_deref() {
        match pm {
            "Default" => {}
            "Unmasked" => {
                if host_users {
                    v.invalid_str(
                        &p.child("procMount"),
                        pm,
                        "`hostUsers` must be false to use `Unmasked`",
                    );
                }
            }
            other => v.not_supported(&p.child("procMount"), other, &["Default", "Unmasked"]),
        }
    }
    validate_seccomp_profile(sc.seccomp_profile.as_ref(), &p.child("seccompProfile"), v);
    if sc.allow_privilege_escalation == Some(false) {
        if sc.privileged == Some(true) {
            v.invalid(
                p,
                BadValue::Struct,
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            );
        }
        let adds = sc
            .capabilities
            .as_ref()
            .and_then(|c| c.add.as_deref())
            .unwrap_or(&[]);
        if adds.iter().any(|c| c == "CAP_SYS_ADMIN") {
            v.invalid(
                p,
                BadValue::Struct,
                "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
            );
        }
    }
    validate_app_armor_profile(
        sc.app_armor_profile.as_ref(),
        &p.child("appArmorProfile"),
        v,
    );
}

/// `ValidateAppArmorProfileField`.
pub(super) fn validate_app_armor_profile(
    profile: Option<&AppArmorProfile>,
    p: &Path,
    v: &mut Errors,
) {
    let Some(profile) = profile else {
        return;
    };
    let local = profile.localhost_profile.as_deref();
    match profile.type_.as_str() {
        "Localhost" => match local {
            None => v.required(
                &p.child("localhostProfile"),
                "must be set when AppArmor type is Localhost",
            ),
            Some(l) if l.trim().is_empty() => v.invalid_str(
                &p.child("localhostProfile"),
                l,
                "must be a non-empty string",
            ),
            Some(_) => {}
        },
        "RuntimeDefault" | "Unconfined" => {
            if local.is_some() {
                v.invalid(
                    &p.child("localhostProfile"),
                    BadValue::Struct,
                    "can only be set when AppArmor type is Localhost",
                );
            }
        }
        "" => v.required(&p.child("type"), ""),
        other => v.not_supported(
            &p.child("type"),
            other,
            &["Localhost", "RuntimeDefault", "Unconfined"],
        ),
    }
}
