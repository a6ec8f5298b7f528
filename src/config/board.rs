//! Board profiles: the KubeletConfiguration each supported board starts from.
//!
//! Owned by the cross-build work (`cross/`, `boards/`). Each directory under
//! `boards/` describes one board (build facts in `board.env`, image overlay in
//! `rootfs/`, see `boards/README.md`); its `config.yaml` is a
//! `kubelet.config.k8s.io/v1beta1` KubeletConfiguration tuned for the board's
//! memory and storage. Those files are embedded here at compile time so that
//! `picolet run --board rpi4` needs no file on the device: the profile is the
//! base configuration and a `--config` file overrides it field by field (the
//! merge itself is the file format's, in `file.rs`).
//!
//! Why embed rather than read `/etc`: the profile is part of what a given
//! picolet binary was tested with, and a board booted from an initramfs may
//! have no writable or persistent `/etc` at all.

/// Name and embedded `config.yaml` of every board, in `names()` order.
const PROFILES: &[(&str, &str)] = &[
    ("rpi4", include_str!("../../boards/rpi4/config.yaml")),
    ("rpi3", include_str!("../../boards/rpi3/config.yaml")),
    (
        "visionfive2",
        include_str!("../../boards/visionfive2/config.yaml"),
    ),
    (
        "gateway-arm64",
        include_str!("../../boards/gateway-arm64/config.yaml"),
    ),
    (
        "qemu-x86_64",
        include_str!("../../boards/qemu-x86_64/config.yaml"),
    ),
    (
        "qemu-aarch64",
        include_str!("../../boards/qemu-aarch64/config.yaml"),
    ),
];

/// The names of all known board profiles, as accepted by `--board`.
pub fn names() -> impl Iterator<Item = &'static str> {
    PROFILES.iter().map(|(name, _)| *name)
}

/// The board's KubeletConfiguration (YAML text), or `None` for an unknown
/// board. Names are matched exactly (they are directory names).
pub fn profile(name: &str) -> Option<&'static str> {
    PROFILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, yaml)| *yaml)
}

/// The message for a `--board` that names no profile.
pub fn unknown(name: &str) -> String {
    format!(
        "unknown board {name:?}; known boards: {}",
        names().collect::<Vec<_>>().join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn every_named_board_has_a_profile_and_names_match_exactly() {
        assert_eq!(names().count(), PROFILES.len());
        for name in names() {
            assert!(profile(name).is_some(), "{name}");
        }
        assert_eq!(profile("no-such-board"), None);
        assert_eq!(profile("RPI4"), None);
        assert!(unknown("x").starts_with("unknown board \"x\"; known boards: rpi4, rpi3"));
    }

    #[test]
    fn every_profile_is_a_kubelet_configuration() {
        for name in names() {
            let text = profile(name).unwrap();
            let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(text)
                .unwrap_or_else(|e| panic!("boards/{name}/config.yaml: {e}"));
            assert_eq!(
                doc.get("apiVersion").and_then(|v| v.as_str()),
                Some("kubelet.config.k8s.io/v1beta1"),
                "boards/{name}/config.yaml: apiVersion"
            );
            assert_eq!(
                doc.get("kind").and_then(|v| v.as_str()),
                Some("KubeletConfiguration"),
                "boards/{name}/config.yaml: kind"
            );
        }
    }

    /// Every profile passes picolet's own validation, with no field that
    /// picolet would warn about, and keeps the settings the images rely on.
    #[test]
    fn every_profile_loads_cleanly() {
        use crate::config::{file, CgroupDriver};
        for name in names() {
            let origin = format!("boards/{name}/config.yaml");
            let loaded = file::from_layers(&[(profile(name).unwrap(), Path::new(&origin))])
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(
                loaded.unknown_fields.is_empty(),
                "{origin}: fields picolet ignores: {:?}",
                loaded.unknown_fields
            );
            let cfg = loaded.config;
            assert_eq!(
                cfg.static_pod_path.as_deref(),
                Some(Path::new("/etc/kubernetes/manifests")),
                "{origin}"
            );
            assert_eq!(
                cfg.container_runtime_endpoint, "unix:///run/containerd/containerd.sock",
                "{origin}"
            );
            assert_eq!(cfg.cgroup_driver, CgroupDriver::Cgroupfs, "{origin}");
            assert!(
                (8..=64).contains(&cfg.max_pods),
                "{origin}: maxPods {}",
                cfg.max_pods
            );
            assert!(
                cfg.eviction_hard.contains_key("memory.available")
                    && cfg.eviction_hard.contains_key("nodefs.available")
                    && cfg.eviction_hard.contains_key("imagefs.available"),
                "{origin}: evictionHard {:?}",
                cfg.eviction_hard
            );
            assert!(cfg.system_reserved.memory_bytes.is_some(), "{origin}");
            assert!(cfg.kube_reserved.memory_bytes.is_some(), "{origin}");
            assert!(cfg.container_log_max_size <= 8 * 1024 * 1024, "{origin}");
            assert!(
                cfg.image_gc_low_threshold_percent < cfg.image_gc_high_threshold_percent,
                "{origin}"
            );
        }
    }
}
