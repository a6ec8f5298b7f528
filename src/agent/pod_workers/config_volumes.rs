//! configMap, secret, downwardAPI and projected volumes on the host: where
//! they live, tmpfs for the ones that may hold Secrets, and their files
//! written with the atomic writer, at a container's start and again at
//! every sync of a running pod, so a changed object reaches the running
//! containers without a restart (kubelet's volume manager remount).
//!
//! The files are `pod::spec::volume_payload`'s; the objects and the
//! service-account tokens come from the [`ConfigObjects`] the API-server
//! side gave the agent (static pods have none and may not reference any);
//! a refreshed token reaches a running pod as a changed object does. A
//! write is skipped when the payload's digest is the one last written and
//! the volume is still there. A failed
//! refresh keeps the files the containers have (kubelet's behaviour when
//! an object is deleted under a running pod).

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};

use super::{atomic_writer, tmpfs, PodWorkers};
use crate::cri::RuntimeService;
use crate::pod::config_objects::{self, ConfigObjects, Lookup};
use crate::pod::spec::{self, ConfigVolume, PayloadError};
use crate::pod::{accessors, facts};
use crate::status::Waiting;

/// The lookup of a pod without an API server behind it.
struct NoObjects;

impl ConfigObjects for NoObjects {
    fn config_map(&self, _: &str, _: &str) -> Lookup<ConfigMap> {
        Lookup::NotFound
    }
    fn secret(&self, _: &str, _: &str) -> Lookup<Secret> {
        Lookup::NotFound
    }
}

/// The host directory of volume `name` of kind `kind`.
pub(super) fn volume_dir(root_dir: &Path, uid: &str, kind: ConfigVolume, name: &str) -> PathBuf {
    facts::pod_dir(root_dir, uid)
        .join("volumes")
        .join(kind.plugin_dir())
        .join(name)
}

/// Creates the volume's directory; a Secret, projected or downwardAPI one
/// gets a tmpfs of `size` bytes (kubelet's memory-backed emptyDir), so
/// Secrets never reach the disk (nor swap, with `noswap`).
/// Returns whether tmpfs could not be mounted.
fn prepare_dir(dir: &Path, kind: ConfigVolume, size: Option<u64>) -> Result<bool, String> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|e| format!("creating {}: {e}", dir.display()))?;
    if !kind.in_memory() || tmpfs::is_mount_point(dir) {
        return Ok(false);
    }
    let options = tmpfs::options("mode=0755", size, tmpfs::noswap_supported());
    match tmpfs::mount(dir, &options) {
        Ok(()) => Ok(false),
        Err(e) => {
            // Without tmpfs (no CAP_SYS_ADMIN): a plain directory inside the
            // pod's 0750 root-only directory.
            log::debug!("mounting tmpfs on {}: {e}", dir.display());
            let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o755));
            Ok(true)
        }
    }
}

/// Unmounts the tmpfs volumes under a pod's directory (secret, projected,
/// downwardAPI and memory-medium emptyDir) before it is removed.
pub(super) fn unmount_volumes(pod_dir: &Path) {
    let volumes = pod_dir.join("volumes");
    for kind in [
        ConfigVolume::Secret,
        ConfigVolume::Projected,
        ConfigVolume::DownwardApi,
    ] {
        tmpfs::unmount_under(&volumes.join(kind.plugin_dir()));
    }
    tmpfs::unmount_under(&volumes.join(EMPTY_DIR_PLUGIN));
}

/// kubelet's emptyDir plugin directory under `<pod dir>/volumes/`.
pub(super) const EMPTY_DIR_PLUGIN: &str = "kubernetes.io~empty-dir";

/// The message of a volume that cannot be set up, in kubelet's words.
fn mount_failed(name: &str, e: &PayloadError) -> String {
    format!("MountVolume.SetUp failed for volume {name:?} : {e}")
}

impl<R: RuntimeService> PodWorkers<R> {
    /// Where `pod` looks up its ConfigMaps and Secrets: the API server's
    /// watches for an API pod, nothing for a static pod.
    pub(super) fn objects_for(&self, pod: &Pod) -> Option<std::rc::Rc<dyn ConfigObjects>> {
        let api = self
            .pods
            .borrow()
            .get(accessors::uid(pod))
            .is_some_and(|e| e.source == Some(crate::source::PodSource::Api));
        if api {
            self.config_objects.borrow().clone()
        } else {
            None
        }
    }

    /// Writes every configMap, secret, downwardAPI and projected volume of
    /// `pod` (unchanged ones are skipped) and returns volume name → host
    /// directory. A volume that cannot be set up is the container's
    /// waiting reason: `ContainerCreating` with kubelet's `MountVolume.SetUp
    /// failed` message.
    pub(super) fn write_config_volumes(
        &self,
        pod: &Pod,
    ) -> Result<HashMap<String, PathBuf>, Waiting> {
        let mut dirs = HashMap::new();
        let volumes = spec::config_volumes(pod);
        if volumes.is_empty() {
            return Ok(dirs);
        }
        let objects = self.objects_for(pod);
        let waiting = |message: String| Waiting {
            reason: "ContainerCreating".into(),
            message,
        };
        if objects.is_none()
            && (!config_objects::references(pod).is_empty()
                || config_objects::needs_service_account_token(pod))
        {
            return Err(Waiting {
                reason: "CreateContainerConfigError".into(),
                message: "configMap, secret and service account token volumes are not supported for static pods".into(),
            });
        }
        let objects: &dyn ConfigObjects = match &objects {
            Some(o) => o.as_ref(),
            None => &NoObjects,
        };
        let uid = accessors::uid(pod);
        let gid = accessors::fs_group(pod);
        let downward = spec::Downward {
            node_allocatable: self.host.allocatable,
        };
        let size = spec::memory_volume_size(pod, None, self.host.allocatable.memory_bytes);
        for (v, kind) in volumes {
            let dir = volume_dir(&self.cfg.root_dir, uid, kind, &v.name);
            let payload = spec::volume_payload(pod, v, objects, &downward)
                .map_err(|e| waiting(mount_failed(&v.name, &e)))?;
            let digest = payload.digest();
            let known = self
                .pods
                .borrow()
                .get(uid)
                .and_then(|e| e.volume_digests.get(&v.name).copied());
            if known != Some(digest) || fs::symlink_metadata(dir.join("..data")).is_err() {
                let no_tmpfs = prepare_dir(&dir, kind, size).map_err(waiting)?;
                if no_tmpfs && !self.tmpfs_warned.replace(true) {
                    log::warn!(
                        "cannot mount tmpfs for secret volumes here; they are plain directories under {}",
                        self.cfg.root_dir.display()
                    );
                }
                let wrote =
                    atomic_writer::write(&dir, &payload, SystemTime::now(), gid).map_err(|e| {
                        waiting(format!(
                            "MountVolume.SetUp failed for volume {:?} : {e}",
                            v.name
                        ))
                    })?;
                if wrote && known.is_some() {
                    log::info!(
                        "volume {} of pod {} updated",
                        v.name,
                        accessors::full_name(pod)
                    );
                }
                if let Some(e) = self.pods.borrow_mut().get_mut(uid) {
                    e.volume_digests.insert(v.name.clone(), digest);
                }
            }
            dirs.insert(v.name.clone(), dir);
        }
        Ok(dirs)
    }

    /// Brings a running pod's volumes up to date with its objects; a
    /// failure is logged when it starts or changes, and the files stay.
    pub(super) fn refresh_config_volumes(&self, pod: &Pod) {
        if spec::config_volumes(pod).is_empty() {
            return;
        }
        let uid = accessors::uid(pod);
        let err = self.write_config_volumes(pod).err().map(|w| w.message);
        let changed = self
            .pods
            .borrow_mut()
            .get_mut(uid)
            .map(|e| std::mem::replace(&mut e.volume_error, err.clone()) != err)
            .unwrap_or(false);
        if let (true, Some(e)) = (changed, err) {
            log::warn!("pod {}: {e}", accessors::full_name(pod));
        }
    }
}
