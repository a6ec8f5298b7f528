//! What a container status carries besides its state, as kubelet v1.36
//! fills it (`convertToAPIContainerStatuses`): `volumeMounts` from the
//! spec, for a container created or not (kubelet's default status has
//! them, and later statuses keep them: they are immutable).
//!
//! Divergence: picolet asks no runtime for recursive read-only mounts, so a
//! read-only mount reports `recursiveReadOnly: Disabled` whatever the
//! runtime supports; kubelet reports `Enabled` for an `IfPossible` or
//! `Enabled` mount on a runtime handler that supports them.

use k8s_openapi::api::core::v1::{Container, VolumeMountStatus};

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
