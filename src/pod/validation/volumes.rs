//! Volume rules (`ValidateVolumes`): unique DNS-label names, exactly one
//! source each, and the fields of the sources picolet can mount. See
//! [`super`] for the contract.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, KeyToPath, Volume};

use super::{
    validate_dns1123_label, validate_dns1123_subdomain, validate_local_descending_path,
    validate_no_backsteps, BadValue, Errors, Path,
};
use crate::quantity::Quantity as Qty;

const FILE_MODE: &str = "must be a number between 0 and 0777 (octal), both inclusive";

/// Validates every volume and returns the valid ones by name (mounts may
/// only refer to those, as in the API server).
pub(super) fn validate_volumes<'a>(
    volumes: &'a [Volume],
    path: &Path,
    v: &mut Errors,
) -> HashMap<&'a str, &'a Volume> {
    let mut valid = HashMap::new();
    let mut names = super::Seen::new();
    for (i, vol) in volumes.iter().enumerate() {
        let p = path.index(i);
        let mut errs = Errors::default();
        validate_source(vol, &p, &mut errs);
        if vol.name.is_empty() {
            errs.required(&p.child("name"), "");
        } else {
            validate_dns1123_label(&vol.name, &p.child("name"), &mut errs);
        }
        if names.contains(vol.name.as_str()) {
            errs.duplicate(&p.child("name"), &vol.name);
        }
        if errs.0.is_empty() {
            names.insert(vol.name.as_str());
            valid.insert(vol.name.as_str(), vol);
        } else {
            v.0.extend(errs.0);
        }
    }
    valid
}

/// The sources a volume sets, in the order the API server checks them.
fn sources(vol: &Volume) -> [(&'static str, bool); 30] {
    [
        ("emptyDir", vol.empty_dir.is_some()),
        ("hostPath", vol.host_path.is_some()),
        ("gitRepo", vol.git_repo.is_some()),
        ("gcePersistentDisk", vol.gce_persistent_disk.is_some()),
        (
            "awsElasticBlockStore",
            vol.aws_elastic_block_store.is_some(),
        ),
        ("secret", vol.secret.is_some()),
        ("nfs", vol.nfs.is_some()),
        ("iscsi", vol.iscsi.is_some()),
        ("glusterfs", vol.glusterfs.is_some()),
        ("flocker", vol.flocker.is_some()),
        (
            "persistentVolumeClaim",
            vol.persistent_volume_claim.is_some(),
        ),
        ("rbd", vol.rbd.is_some()),
        ("cinder", vol.cinder.is_some()),
        ("cephFS", vol.cephfs.is_some()),
        ("quobyte", vol.quobyte.is_some()),
        ("downwardAPI", vol.downward_api.is_some()),
        ("fc", vol.fc.is_some()),
        ("flexVolume", vol.flex_volume.is_some()),
        ("configMap", vol.config_map.is_some()),
        ("azureFile", vol.azure_file.is_some()),
        ("vsphereVolume", vol.vsphere_volume.is_some()),
        ("photonPersistentDisk", vol.photon_persistent_disk.is_some()),
        ("portworxVolume", vol.portworx_volume.is_some()),
        ("azureDisk", vol.azure_disk.is_some()),
        ("storageos", vol.storageos.is_some()),
        ("projected", vol.projected.is_some()),
        ("scaleIO", vol.scale_io.is_some()),
        ("csi", vol.csi.is_some()),
        ("ephemeral", vol.ephemeral.is_some()),
        ("image", vol.image.is_some()),
    ]
}

fn validate_source(vol: &Volume, p: &Path, v: &mut Errors) {
    let mut count = 0;
    for (field, set) in sources(vol) {
        if !set {
            continue;
        }
        if count > 0 {
            v.forbidden(&p.child(field), "may not specify more than 1 volume type");
            continue;
        }
        count += 1;
        let sp = p.child(field);
        match field {
            "emptyDir" => {
                let limit = vol.empty_dir.as_ref().and_then(|e| e.size_limit.as_ref());
                if limit.is_some_and(|q| Qty::parse(&q.0).map_or(true, |q| q.is_negative())) {
                    v.forbidden(
                        &sp.child("sizeLimit"),
                        "SizeLimit field must be a valid resource quantity",
                    );
                }
            }
            "hostPath" => {
                let hp = vol.host_path.as_ref().expect("set");
                if hp.path.is_empty() {
                    v.required(&sp.child("path"), "");
                    continue;
                }
                validate_no_backsteps(&hp.path, &sp.child("path"), v);
                const TYPES: &[&str] = &[
                    "",
                    "BlockDevice",
                    "CharDevice",
                    "Directory",
                    "DirectoryOrCreate",
                    "File",
                    "FileOrCreate",
                    "Socket",
                ];
                if let Some(t) = hp.type_.as_deref().filter(|t| !TYPES.contains(t)) {
                    v.not_supported(&sp.child("type"), t, TYPES);
                }
            }
            "secret" => {
                let s = vol.secret.as_ref().expect("set");
                if s.secret_name.as_deref().unwrap_or("").is_empty() {
                    v.required(&sp.child("secretName"), "");
                }
                validate_mode(s.default_mode, &sp.child("defaultMode"), v);
                validate_items(s.items.as_deref().unwrap_or(&[]), &sp.child("items"), v);
            }
            "configMap" => {
                let c = vol.config_map.as_ref().expect("set");
                if c.name.is_empty() {
                    v.required(&sp.child("name"), "");
                } else {
                    validate_dns1123_subdomain(&c.name, &sp.child("name"), v);
                }
                validate_mode(c.default_mode, &sp.child("defaultMode"), v);
                validate_items(c.items.as_deref().unwrap_or(&[]), &sp.child("items"), v);
            }
            "downwardAPI" => {
                let d = vol.downward_api.as_ref().expect("set");
                validate_mode(d.default_mode, &sp.child("defaultMode"), v);
                for (i, item) in d.items.iter().flatten().enumerate() {
                    validate_downward_file(item, &sp.child("items").index(i), v);
                }
            }
            "projected" => {
                let pr = vol.projected.as_ref().expect("set");
                validate_mode(pr.default_mode, &sp.child("defaultMode"), v);
            }
            "persistentVolumeClaim" => {
                let c = vol.persistent_volume_claim.as_ref().expect("set");
                if c.claim_name.is_empty() {
                    v.required(&sp.child("claimName"), "");
                }
            }
            "csi" => {
                let c = vol.csi.as_ref().expect("set");
                if c.driver.is_empty() {
                    v.required(&sp.child("driver"), "");
                }
            }
            _ => {}
        }
    }
    if count == 0 {
        v.required(p, "must specify a volume type");
    }
}

fn validate_mode(mode: Option<i32>, path: &Path, v: &mut Errors) {
    if let Some(m) = mode.filter(|m| !(0..=0o777).contains(m)) {
        v.invalid(path, BadValue::Int(m.into()), FILE_MODE);
    }
}

/// `validateLocalNonReservedPath`: relative, no `..`, not starting with `..`.
fn validate_local_non_reserved_path(p: &str, path: &Path, v: &mut Errors) {
    validate_local_descending_path(p, path, v);
    if p.starts_with("..") {
        v.invalid_str(path, p, "must not start with '..'");
    }
}

fn validate_items(items: &[KeyToPath], path: &Path, v: &mut Errors) {
    for (i, item) in items.iter().enumerate() {
        let p = path.index(i);
        if item.key.is_empty() {
            v.required(&p.child("key"), "");
        }
        if item.path.is_empty() {
            v.required(&p.child("path"), "");
        }
        validate_local_non_reserved_path(&item.path, &p.child("path"), v);
        validate_mode(item.mode, &p.child("mode"), v);
    }
}

fn validate_downward_file(f: &DownwardAPIVolumeFile, p: &Path, v: &mut Errors) {
    if f.path.is_empty() {
        v.required(&p.child("path"), "");
    }
    validate_local_non_reserved_path(&f.path, &p.child("path"), v);
    validate_mode(f.mode, &p.child("mode"), v);
    match (f.field_ref.is_some(), f.resource_field_ref.is_some()) {
        (true, true) => v.invalid_str(
            p,
            "resource",
            "fieldRef and resourceFieldRef can not be specified simultaneously",
        ),
        (false, false) => v.required(p, "one of fieldRef and resourceFieldRef is required"),
        _ => {}
    }
}
