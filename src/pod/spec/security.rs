//! Security contexts (kubelet's `determineEffectiveSecurityContext` and
//! `securitycontext` helpers): users and groups, the supplemental groups
//! policy, capabilities, SELinux, seccomp, AppArmor, and the default masked
//! and read-only `/proc` and `/sys` paths.

use std::path::Path;

use k8s_openapi::api::core::v1::{
    AppArmorProfile as ApiAppArmorProfile, Container, Pod, SELinuxOptions, SeccompProfile,
};

use super::container::ContainerParams;
use super::sandbox::namespace_options;
use super::SpecError;
use crate::cri::api;
use crate::pod::accessors::spec;

/// kubelet's `defaultMaskedPaths` (`pkg/securitycontext`), sent unless the
/// container asks for `procMount: Unmasked`.
pub const DEFAULT_MASKED_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];
/// kubelet's `defaultReadonlyPaths`.
pub const DEFAULT_READONLY_PATHS: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// The deprecated per-container AppArmor annotation's prefix.
pub const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// An AppArmor profile a container asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppArmorProfile {
    RuntimeDefault,
    Unconfined,
    Localhost(String),
    /// A type or annotation value the API does not define.
    Invalid(String),
}

fn from_field(p: &ApiAppArmorProfile) -> AppArmorProfile {
    match p.type_.as_str() {
        "RuntimeDefault" => AppArmorProfile::RuntimeDefault,
        "Unconfined" => AppArmorProfile::Unconfined,
        "Localhost" => match p.localhost_profile.as_deref() {
            Some(name) if !name.is_empty() => AppArmorProfile::Localhost(name.to_string()),
            _ => AppArmorProfile::Invalid("missing localhost apparmor profile name".into()),
        },
        other => AppArmorProfile::Invalid(format!("unknown apparmor profile type: {other:?}")),
    }
}

fn from_annotation(v: &str) -> AppArmorProfile {
    match v {
        "runtime/default" => AppArmorProfile::RuntimeDefault,
        "unconfined" => AppArmorProfile::Unconfined,
        _ => match v.strip_prefix("localhost/") {
            Some(name) => AppArmorProfile::Localhost(name.to_string()),
            None => AppArmorProfile::Invalid(format!("invalid AppArmor profile name: {v:?}")),
        },
    }
}

/// The container's AppArmor profile (kubelet's `apparmor.GetProfile`): its
/// `securityContext.appArmorProfile`, else the deprecated annotation, else
/// the pod's; `None` leaves the runtime's default.
pub fn apparmor_profile(pod: &Pod, c: &Container) -> Option<AppArmorProfile> {
    if let Some(p) = c
        .security_context
        .as_ref()
        .and_then(|sc| sc.app_armor_profile.as_ref())
    {
        return Some(from_field(p));
    }
    let key = format!("{APPARMOR_ANNOTATION_PREFIX}{}", c.name);
    if let Some(v) = pod.metadata.annotations.as_ref().and_then(|a| a.get(&key)) {
        return Some(from_annotation(v));
    }
    spec(pod)
        .security_context
        .as_ref()
        .and_then(|sc| sc.app_armor_profile.as_ref())
        .map(from_field)
}

/// The CRI AppArmor fields (kubelet's `getAppArmorProfile`): the profile
/// and its deprecated string form.
fn apparmor_security_profile(
    pod: &Pod,
    c: &Container,
) -> Result<(Option<api::SecurityProfile>, String), SpecError> {
    use api::security_profile::ProfileType;
    let profile = |t: ProfileType, r: &str| api::SecurityProfile {
        profile_type: t as i32,
        localhost_ref: r.to_string(),
    };
    Ok(match apparmor_profile(pod, c) {
        None => (None, String::new()),
        Some(AppArmorProfile::RuntimeDefault) => (
            Some(profile(ProfileType::RuntimeDefault, "")),
            "runtime/default".into(),
        ),
        Some(AppArmorProfile::Unconfined) => (
            Some(profile(ProfileType::Unconfined, "")),
            "unconfined".into(),
        ),
        Some(AppArmorProfile::Localhost(name)) => (
            Some(profile(ProfileType::Localhost, &name)),
            format!("localhost/{name}"),
        ),
        Some(AppArmorProfile::Invalid(why)) => {
            return Err(SpecError::new(
                &c.name,
                "securityContext.appArmorProfile",
                why,
            ))
        }
    })
}

pub(super) fn selinux_option(o: &SELinuxOptions) -> api::SeLinuxOption {
    api::SeLinuxOption {
        user: o.user.clone().unwrap_or_default(),
        role: o.role.clone().unwrap_or_default(),
        r#type: o.type_.clone().unwrap_or_default(),
        level: o.level.clone().unwrap_or_default(),
    }
}

/// fsGroup first, then supplementalGroups, as kubelet appends them.
pub(super) fn pod_supplemental_groups(pod: &Pod) -> Vec<i64> {
    let Some(sc) = spec(pod).security_context.as_ref() else {
        return Vec::new();
    };
    sc.fs_group
        .iter()
        .copied()
        .chain(sc.supplemental_groups.iter().flatten().copied())
        .collect()
}

pub(super) fn supplemental_groups_policy(pod: &Pod) -> i32 {
    match spec(pod)
        .security_context
        .as_ref()
        .and_then(|sc| sc.supplemental_groups_policy.as_deref())
    {
        Some("Strict") => api::SupplementalGroupsPolicy::Strict as i32,
        _ => api::SupplementalGroupsPolicy::Merge as i32,
    }
}

fn seccomp_profile(
    c: &Container,
    sp: &SeccompProfile,
    root: Option<&Path>,
) -> Result<api::SecurityProfile, SpecError> {
    use api::security_profile::ProfileType;
    let (profile_type, localhost_ref) = match sp.type_.as_str() {
        "RuntimeDefault" => (ProfileType::RuntimeDefault, String::new()),
        "Localhost" => {
            let Some(prof) = sp.localhost_profile.as_deref().filter(|s| !s.is_empty()) else {
                return Err(SpecError::new(
                    &c.name,
                    "securityContext.seccompProfile",
                    "localhostProfile must be set if seccompProfile type is Localhost",
                ));
            };
            let Some(root) = root else {
                return Err(SpecError::new(
                    &c.name,
                    "securityContext.seccompProfile",
                    "Localhost profiles need a seccomp profile root",
                ));
            };
            (
                ProfileType::Localhost,
                root.join(prof).to_string_lossy().into_owned(),
            )
        }
        _ => (ProfileType::Unconfined, String::new()),
    };
    Ok(api::SecurityProfile {
        profile_type: profile_type as i32,
        localhost_ref,
    })
}

/// The user an image runs as by default, from the runtime's ImageStatus
/// (`image.uid`, `image.username`): numeric or named.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageUser {
    pub uid: Option<i64>,
    pub username: String,
}

impl ImageUser {
    /// kubelet's `getImageUser`: the numeric user, else the name, and an
    /// image that says neither (or no answer) runs as root.
    pub fn of(uid: Option<i64>, username: &str) -> ImageUser {
        match (uid, username) {
            (Some(uid), _) => ImageUser {
                uid: Some(uid),
                username: String::new(),
            },
            (None, "") => ImageUser {
                uid: Some(0),
                username: String::new(),
            },
            (None, name) => ImageUser {
                uid: None,
                username: name.to_string(),
            },
        }
    }
}

/// kubelet's `format.Pod`: `name_namespace(uid)`.
fn pod_ref(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        crate::pod::accessors::name(pod),
        crate::pod::accessors::namespace(pod),
        crate::pod::accessors::uid(pod)
    )
}

/// kubelet's `verifyRunAsNonRoot`: with `runAsNonRoot: true` (container
/// over pod), a container must not run as root. A `runAsUser` decides
/// alone; without one, the image's user must be numeric and not 0. The
/// refusal is kubelet's message, shown as `CreateContainerConfigError`.
pub fn verify_run_as_non_root(pod: &Pod, c: &Container, image: &ImageUser) -> Result<(), String> {
    let psc = spec(pod).security_context.as_ref();
    let csc = c.security_context.as_ref();
    let non_root = csc
        .and_then(|s| s.run_as_non_root)
        .or(psc.and_then(|s| s.run_as_non_root))
        .unwrap_or(false);
    if !non_root {
        return Ok(());
    }
    let at = || format!("(pod: {:?}, container: {})", pod_ref(pod), c.name);
    let run_as_user = csc
        .and_then(|s| s.run_as_user)
        .or(psc.and_then(|s| s.run_as_user));
    match (run_as_user, image.uid) {
        (Some(0), _) => Err(format!(
            "container's runAsUser breaks non-root policy {}",
            at()
        )),
        (Some(_), _) => Ok(()),
        (None, None) if !image.username.is_empty() => Err(format!(
            "container has runAsNonRoot and image has non-numeric user ({}), cannot verify user is non-root {}",
            image.username,
            at()
        )),
        (None, Some(0)) => Err(format!(
            "container has runAsNonRoot and image will run as root {}",
            at()
        )),
        (None, Some(uid)) if !(0..=i64::from(i32::MAX)).contains(&uid) => Err(format!(
            "container has runAsNonRoot and image has an invalid user id ({uid}). (Must be 1-({})): must be between 0 and {}, inclusive {}",
            i32::MAX,
            i32::MAX,
            at()
        )),
        (None, _) => Ok(()),
    }
}

pub(super) fn container_security_context(
    pod: &Pod,
    c: &Container,
    p: &ContainerParams,
) -> Result<api::LinuxContainerSecurityContext, SpecError> {
    let psc = spec(pod).security_context.as_ref();
    let csc = c.security_context.as_ref();
    let run_as_user = csc
        .and_then(|s| s.run_as_user)
        .or(psc.and_then(|s| s.run_as_user));
    let run_as_group = csc
        .and_then(|s| s.run_as_group)
        .or(psc.and_then(|s| s.run_as_group));
    let run_as_non_root = csc
        .and_then(|s| s.run_as_non_root)
        .or(psc.and_then(|s| s.run_as_non_root))
        .unwrap_or(false);
    // Checked again here, so no config ever runs as root against the
    // policy; the agent refuses first with kubelet's message
    // ([`verify_run_as_non_root`]).
    if run_as_non_root && run_as_user == Some(0) {
        return Err(SpecError::new(
            &c.name,
            "securityContext.runAsUser",
            "runAsUser 0 breaks the runAsNonRoot policy",
        ));
    }
    let selinux = csc
        .and_then(|s| s.se_linux_options.as_ref())
        .or(psc.and_then(|s| s.se_linux_options.as_ref()))
        .map(selinux_option);
    let privileged = csc.and_then(|s| s.privileged).unwrap_or(false);
    let capabilities = csc
        .and_then(|s| s.capabilities.as_ref())
        .map(|caps| api::Capability {
            add_capabilities: caps.add.clone().unwrap_or_default(),
            drop_capabilities: caps.drop.clone().unwrap_or_default(),
            add_ambient_capabilities: Vec::new(),
        });
    let seccomp = match csc
        .and_then(|s| s.seccomp_profile.as_ref())
        .or(psc.and_then(|s| s.seccomp_profile.as_ref()))
    {
        Some(sp) => seccomp_profile(c, sp, p.seccomp_profile_root)?,
        None => api::SecurityProfile {
            profile_type: api::security_profile::ProfileType::Unconfined as i32,
            localhost_ref: String::new(),
        },
    };
    let (apparmor, apparmor_profile) = apparmor_security_profile(pod, c)?;
    let unmasked = csc.and_then(|s| s.proc_mount.as_deref()) == Some("Unmasked");
    let (masked_paths, readonly_paths) = if privileged || unmasked {
        (Vec::new(), Vec::new())
    } else {
        (
            DEFAULT_MASKED_PATHS.iter().map(|s| s.to_string()).collect(),
            DEFAULT_READONLY_PATHS
                .iter()
                .map(|s| s.to_string())
                .collect(),
        )
    };
    // kubelet sends the deprecated string form too, for older runtimes.
    #[allow(deprecated)]
    Ok(api::LinuxContainerSecurityContext {
        capabilities,
        privileged,
        namespace_options: Some(namespace_options(pod, p.user_ns)),
        selinux_options: selinux,
        run_as_user: run_as_user.map(|value| api::Int64Value { value }),
        run_as_username: String::new(),
        readonly_rootfs: csc
            .and_then(|s| s.read_only_root_filesystem)
            .unwrap_or(false),
        supplemental_groups: pod_supplemental_groups(pod),
        no_new_privs: csc
            .and_then(|s| s.allow_privilege_escalation)
            .map(|a| !a)
            .unwrap_or(false),
        run_as_group: run_as_group.map(|value| api::Int64Value { value }),
        masked_paths,
        readonly_paths,
        seccomp: Some(seccomp),
        apparmor,
        apparmor_profile,
        supplemental_groups_policy: supplemental_groups_policy(pod),
        ..Default::default()
    })
}
