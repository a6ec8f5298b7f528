//! Volumes and mounts (kubelet_pods.go `makeMounts` + kuberuntime
//! `makeMounts`): which volumes need a host directory, and each container's
//! mounts with subPath, read-only, propagation, the managed /etc/hosts and
//! the termination-message file. configMap, secret, downwardAPI and
//! projected volumes are mounted read-only from the directory the caller
//! wrote (their files: `payload`); a subPath of one is the file as it was
//! when the container was created, as with kubelet.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, Volume, VolumeMount};

use super::container::ContainerParams;
use super::env::expand;
use super::{SpecError, ETC_HOSTS_PATH};
use crate::cri::api;
use crate::pod::accessors::spec;

/// The volume source's type as written in YAML (`hostPath`, `configMap`, ...).
/// A volume with no source is an emptyDir (API defaulting).
fn volume_type(v: &Volume) -> String {
    if v.host_path.is_some() {
        return "hostPath".into();
    }
    if v.empty_dir.is_some() {
        return "emptyDir".into();
    }
    match crate::pod::to_json_value(v) {
        Ok(serde_json::Value::Object(m)) => m
            .keys()
            .find(|k| *k != "name")
            .cloned()
            .unwrap_or_else(|| "emptyDir".into()),
        _ => "unknown".into(),
    }
}

/// Names of the emptyDir volumes (including source-less ones, which API
/// defaulting turns into emptyDir) whose directories the caller must create
/// under `<root-dir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>`.
pub fn empty_dir_volumes(pod: &Pod) -> Vec<String> {
    spec(pod)
        .volumes
        .iter()
        .flatten()
        .filter(|v| volume_type(v) == "emptyDir")
        .map(|v| v.name.clone())
        .collect()
}

/// The emptyDir volumes with `medium: Memory` (tmpfs), each with its
/// `sizeLimit` in bytes (`None`: none, or not a valid quantity).
pub fn memory_empty_dirs(pod: &Pod) -> Vec<(String, Option<u64>)> {
    spec(pod)
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| Some((&v.name, v.empty_dir.as_ref()?)))
        .filter(|(_, e)| e.medium.as_deref() == Some("Memory"))
        .map(|(name, e)| {
            let limit = e
                .size_limit
                .as_ref()
                .and_then(|q| super::parse_resource(&q.0))
                .map(super::units);
            (name.clone(), limit)
        })
        .collect()
}

/// The `size=` of a memory-backed volume (kubelet's
/// `calculateEmptyDirMemorySize`): the node's allocatable memory, lowered
/// to the pod's memory limit (its cgroup's: pod-level, or the sum when
/// every container has one) and then to the volume's `sizeLimit`, each
/// only when above zero and not above what it lowers. `None` (no size
/// option, the kernel's half of RAM) only when nothing is known.
pub fn memory_volume_size(
    pod: &Pod,
    size_limit: Option<u64>,
    node_allocatable_memory: Option<u64>,
) -> Option<u64> {
    let mut size = node_allocatable_memory;
    let lower = |size: Option<u64>, v: Option<u64>| match (size, v.filter(|v| *v > 0)) {
        (Some(s), Some(v)) if v <= s => Some(v),
        (None, Some(v)) => Some(v),
        (s, _) => s,
    };
    size = lower(
        size,
        crate::qos::pod_resources(spec(pod)).memory_limit_bytes,
    );
    lower(size, size_limit)
}

/// `(path, type)` of every hostPath volume; creating `DirectoryOrCreate` /
/// `FileOrCreate` paths and checking the other types is the caller's job.
pub fn host_path_volumes(pod: &Pod) -> Vec<(String, Option<String>)> {
    spec(pod)
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.host_path.as_ref())
        .map(|h| (h.path.clone(), h.type_.clone().filter(|t| !t.is_empty())))
        .collect()
}

/// The literal `subPath`s of `c`'s mounts of emptyDir volumes, as
/// (volume name, subPath): kubelet creates each before the container, with
/// the mode of the volume's root, so that a nonexistent one is not left
/// to the runtime (which makes it 0755). Invalid ones are left out (the
/// container's mounts refuse them); so are `subPathExpr`s.
pub fn empty_dir_sub_paths(pod: &Pod, c: &Container) -> Vec<(String, String)> {
    let empty_dirs = empty_dir_volumes(pod);
    let no_env = HashMap::new();
    c.volume_mounts
        .iter()
        .flatten()
        .filter(|m| m.sub_path.as_deref().is_some_and(|s| !s.is_empty()))
        .filter(|m| empty_dirs.contains(&m.name))
        .filter_map(|m| Some((m.name.clone(), sub_path(m, &no_env).ok()??)))
        .collect()
}

pub(super) fn container_mounts(
    pod: &Pod,
    c: &Container,
    p: &ContainerParams,
    env: &HashMap<&str, &str>,
) -> Result<Vec<api::Mount>, SpecError> {
    let volumes: HashMap<&str, &Volume> = spec(pod)
        .volumes
        .iter()
        .flatten()
        .map(|v| (v.name.as_str(), v))
        .collect();
    let privileged = c
        .security_context
        .as_ref()
        .and_then(|sc| sc.privileged)
        .unwrap_or(false);
    let mut mounts = Vec::new();
    let mut mounts_etc_hosts = false;
    for m in c.volume_mounts.iter().flatten() {
        let field = format!("volumeMount {:?}", m.name);
        let err = |reason: String| SpecError::new(&c.name, field.clone(), reason);
        let vol = volumes
            .get(m.name.as_str())
            .ok_or_else(|| err(format!("volume {:?} not found in the pod", m.name)))?;
        // kubelet mounts these read-only whatever the mount says (their
        // files are the node's to swap, CVE-2017-1002102).
        let forced_read_only = super::payload::ConfigVolume::of(vol).is_some();
        let (base, relabel) = match volume_type(vol).as_str() {
            "hostPath" => (
                PathBuf::from(
                    &vol.host_path
                        .as_ref()
                        .map(|h| h.path.clone())
                        .unwrap_or_default(),
                ),
                false,
            ),
            "emptyDir" => {
                let dir = (p.volume_dir)(&m.name).ok_or_else(|| {
                    err(format!(
                        "no host directory was prepared for emptyDir volume {:?}",
                        m.name
                    ))
                })?;
                (dir, true)
            }
            "configMap" | "secret" | "downwardAPI" | "projected" => {
                let dir = (p.volume_dir)(&m.name).ok_or_else(|| {
                    err(format!(
                        "no host directory was prepared for volume {:?}",
                        m.name
                    ))
                })?;
                (dir, true)
            }
            other => {
                return Err(err(format!(
                    "volume {:?} of type {other} is not supported",
                    m.name
                )));
            }
        };
        let sub_path = sub_path(m, env).map_err(&err)?;
        let host_path = match sub_path {
            Some(sp) => base.join(sp),
            None => base,
        };
        let mut container_path = m.mount_path.clone();
        if !container_path.starts_with('/') {
            container_path.insert(0, '/');
        }
        if container_path == ETC_HOSTS_PATH {
            mounts_etc_hosts = true;
        }
        mounts.push(api::Mount {
            container_path,
            host_path: host_path.to_string_lossy().into_owned(),
            readonly: m.read_only.unwrap_or(false) || forced_read_only,
            selinux_relabel: relabel,
            propagation: mount_propagation(m, privileged).map_err(&err)? as i32,
            ..Default::default()
        });
    }
    if let Some(hosts) = p.etc_hosts {
        if !mounts_etc_hosts {
            mounts.push(api::Mount {
                container_path: ETC_HOSTS_PATH.into(),
                host_path: hosts.to_string_lossy().into_owned(),
                readonly: false,
                selinux_relabel: true,
                ..Default::default()
            });
        }
    }
    if let (Some(host), Some(path)) = (
        p.termination_log_host_path,
        c.termination_message_path
            .as_deref()
            .filter(|s| !s.is_empty()),
    ) {
        mounts.push(api::Mount {
            container_path: path.into(),
            host_path: host.to_string_lossy().into_owned(),
            readonly: false,
            selinux_relabel: true,
            ..Default::default()
        });
    }
    Ok(mounts)
}

/// The validated subPath (or expanded subPathExpr) of a mount.
fn sub_path(m: &VolumeMount, env: &HashMap<&str, &str>) -> Result<Option<String>, String> {
    let sp = match (m.sub_path.as_deref(), m.sub_path_expr.as_deref()) {
        (Some(sp), _) if !sp.is_empty() => sp.to_string(),
        (_, Some(expr)) if !expr.is_empty() => {
            let missing = expr_missing_vars(expr, env);
            if !missing.is_empty() {
                return Err(format!(
                    "subPathExpr {expr:?}: missing value for {}",
                    missing.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
            expand(expr, &|name| env.get(name).map(|v| v.to_string()))
        }
        _ => return Ok(None),
    };
    if Path::new(&sp).is_absolute() {
        return Err(format!("subPath {sp:?} must not be an absolute path"));
    }
    if Path::new(&sp)
        .components()
        .any(|c| c == Component::ParentDir)
        || sp.split('/').any(|c| c == "..")
    {
        return Err(format!("subPath {sp:?} must not contain '..'"));
    }
    Ok(Some(sp))
}

fn expr_missing_vars(expr: &str, env: &HashMap<&str, &str>) -> std::collections::BTreeSet<String> {
    let missing = std::cell::RefCell::new(std::collections::BTreeSet::new());
    expand(expr, &|name| {
        match env.get(name) {
            Some(v) if !v.is_empty() => {}
            _ => {
                missing.borrow_mut().insert(name.to_string());
            }
        }
        Some(String::new())
    });
    missing.into_inner()
}

fn mount_propagation(m: &VolumeMount, privileged: bool) -> Result<api::MountPropagation, String> {
    match m.mount_propagation.as_deref() {
        None | Some("") | Some("None") => Ok(api::MountPropagation::PropagationPrivate),
        Some("HostToContainer") => Ok(api::MountPropagation::PropagationHostToContainer),
        Some("Bidirectional") if privileged => Ok(api::MountPropagation::PropagationBidirectional),
        Some("Bidirectional") => {
            Err("Bidirectional mount propagation is only allowed for privileged containers".into())
        }
        Some(other) => Err(format!("invalid mountPropagation {other:?}")),
    }
}
