//! What a container status carries besides its state, as kubelet v1.36
//! fills it (`convertToAPIContainerStatuses`): `volumeMounts` from the
//! spec, and, once the runtime holds the container, `resources` and
//! `allocatedResources` (InPlacePodVerticalScaling, GA and always on).
//!
//! picolet resizes no container in place, so the allocated resources are
//! the spec's. A running container's `resources` take the runtime's CPU
//! limit, CPU request and memory limit where it reports them (kubelet's
//! `convertContainerStatusResources`), which is how a CPU request that the
//! shares cannot hold exactly shows; everything else is the spec's.
//!
//! Divergence: picolet asks no runtime for recursive read-only mounts, so a
//! read-only mount reports `recursiveReadOnly: Disabled` whatever the
//! runtime supports; kubelet reports `Enabled` for an `IfPossible` or
//! `Enabled` mount on a runtime handler that supports them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ResourceRequirements, VolumeMountStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::pod::RuntimeResources;
use crate::quantity;

/// kubelet's `MinShares`: at or below it, a CPU request is the spec's.
const MIN_SHARES_MILLIS: i64 = 2;
/// kubelet's `MinMilliCPULimit`: at or below it, a CPU limit is the spec's.
const MIN_CPU_LIMIT_MILLIS: i64 = 10;

/// The container's `volumeMounts` status: each mount's name, path and
/// read-only flag, and for a read-only one its recursive read-only mode
/// (`Disabled`: picolet makes no mount recursively read-only).
pub fn volume_mounts(spec: &Container) -> Option<Vec<VolumeMountStatus>> {
    let mounts = spec.volume_mounts.as_deref().unwrap_or(&[]);
    if mounts.is_empty() {
        return None;
    }
    let statuses = mounts
        .iter()
        .map(|m| {
            let read_only = m.read_only.unwrap_or(false);
            VolumeMountStatus {
                name: m.name.clone(),
                mount_path: m.mount_path.clone(),
                read_only: m.read_only.filter(|r| *r),
                recursive_read_only: read_only.then(|| "Disabled".to_string()),
                volume_status: None,
            }
        })
        .collect();
    Some(statuses)
}

/// The container's `allocatedResources`: the requests it was given.
pub fn allocated_resources(spec: &Container) -> Option<BTreeMap<String, Quantity>> {
    spec.resources.as_ref().and_then(|r| r.requests.clone())
}

/// The container's `resources`: the spec's, with a running container's
/// CPU limit, CPU request and memory limit as the runtime reports them
/// (each only where the spec has limits, or requests, at all).
pub fn resources(
    spec: &Container,
    running: bool,
    runtime: Option<&RuntimeResources>,
) -> ResourceRequirements {
    let mut r = spec.resources.clone().unwrap_or_default();
    let Some(rt) = runtime.filter(|_| running) else {
        return r;
    };
    if let Some(limits) = r.limits.as_mut() {
        if let Some(cpu) = rt.cpu_limit_millis {
            if cpu > MIN_CPU_LIMIT_MILLIS || millis(limits.get("cpu")) > MIN_CPU_LIMIT_MILLIS {
                limits.insert("cpu".into(), cpu_quantity(cpu));
            }
        }
        if let Some(bytes) = rt.memory_limit_bytes {
            limits.insert(
                "memory".into(),
                Quantity(quantity::format_binary(bytes as u64)),
            );
        }
    }
    if let Some(requests) = r.requests.as_mut() {
        if let Some(cpu) = rt.cpu_request_millis {
            if cpu > MIN_SHARES_MILLIS || millis(requests.get("cpu")) > MIN_SHARES_MILLIS {
                requests.insert("cpu".into(), cpu_quantity(cpu));
            }
        }
    }
    r
}

/// A quantity's millis (0 when absent or unreadable).
fn millis(q: Option<&Quantity>) -> i64 {
    q.and_then(|q| quantity::Quantity::parse(&q.0).ok())
        .and_then(|q| q.milli_value().ok())
        .map_or(0, |m| i64::try_from(m).unwrap_or(i64::MAX))
}

/// Millicores as apimachinery prints a decimal-SI amount: `500m`, `2`.
fn cpu_quantity(millis: i64) -> Quantity {
    Quantity(if millis % 1000 == 0 {
        (millis / 1000).to_string()
    } else {
        format!("{millis}m")
    })
}
