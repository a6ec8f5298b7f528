//! tmpfs mounts for memory-backed volumes (emptyDir `medium: Memory`,
//! secret, projected and downwardAPI volumes), as kubelet's emptyDir
//! plugin makes them: `size=` from [`crate::pod::spec::memory_volume_size`]
//! and `noswap` where the kernel has it (Linux 6.4 and later, outside a
//! user namespace), so a Secret never reaches swap; unmounting at teardown.
//!
//! The option string and the kernel-version rule are pure; the probe runs
//! once per process. It must not know pods.

use std::ffi::CString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::OnceLock;

/// tmpfs' `noswap` option, from Linux 6.4 on.
const NOSWAP_KERNEL: (u32, u32) = (6, 4);

/// The mount data: `base` options (e.g. `mode=0755`), then `size=<bytes>`
/// when known, then `noswap` when supported.
pub(super) fn options(base: &str, size: Option<u64>, noswap: bool) -> String {
    let mut opts: Vec<String> = Vec::new();
    if !base.is_empty() {
        opts.push(base.to_string());
    }
    if let Some(size) = size.filter(|s| *s > 0) {
        opts.push(format!("size={size}"));
    }
    if noswap {
        opts.push("noswap".into());
    }
    opts.join(",")
}

/// Whether a kernel release (`uname -r`, e.g. `6.6.31+rpt-rpi-v8`) is one
/// whose tmpfs takes `noswap`.
pub(super) fn release_has_noswap(release: &str) -> bool {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
    match (major, minor) {
        (Some(major), Some(minor)) => (major, minor) >= NOSWAP_KERNEL,
        _ => false,
    }
}

/// Whether `/proc/self/uid_map` shows a user namespace (anything but the
/// initial namespace's full identity mapping).
pub(super) fn in_user_namespace(uid_map: &str) -> bool {
    let fields: Vec<&str> = uid_map.split_whitespace().collect();
    fields != ["0", "0", "4294967295"]
}

/// Whether tmpfs takes `noswap` here: checked once (kubelet's
/// `IsTmpfsNoswapOptionSupported` by kernel version; an unprivileged tmpfs
/// in a user namespace may not turn swap off).
pub(super) fn noswap_supported() -> bool {
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        let uid_map = fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
        if in_user_namespace(&uid_map) {
            log::info!("running in a user namespace: tmpfs volumes without noswap");
            return false;
        }
        let uname = rustix::system::uname();
        release_has_noswap(&uname.release().to_string_lossy())
    })
}

/// Whether `dir` is a mount point (its device differs from its parent's).
pub(super) fn is_mount_point(dir: &Path) -> bool {
    match (fs::metadata(dir), dir.parent().map(fs::metadata)) {
        (Ok(d), Some(Ok(p))) => d.dev() != p.dev(),
        _ => false,
    }
}

/// Mounts a tmpfs on `dir` (nosuid, nodev) with `options`.
pub(super) fn mount(dir: &Path, options: &str) -> rustix::io::Result<()> {
    let data = CString::new(options).map_err(|_| rustix::io::Errno::INVAL)?;
    rustix::mount::mount(
        "tmpfs",
        dir,
        "tmpfs",
        rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV,
        data.as_c_str(),
    )
}

/// Unmounts (lazily) every mount point directly under `dir`.
pub(super) fn unmount_under(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if is_mount_point(&p) {
            if let Err(err) = rustix::mount::unmount(&p, rustix::mount::UnmountFlags::DETACH) {
                log::warn!("unmounting {}: {err}", p.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_carry_the_base_then_the_size_then_noswap() {
        assert_eq!(
            options("mode=0755", Some(64 << 20), true),
            "mode=0755,size=67108864,noswap"
        );
        assert_eq!(options("", Some(1024), false), "size=1024");
        assert_eq!(options("", None, true), "noswap");
        assert_eq!(options("", Some(0), false), "");
    }

    #[test]
    fn noswap_needs_linux_six_four_or_later() {
        assert!(release_has_noswap("6.4.0"));
        assert!(release_has_noswap("6.6.31+rpt-rpi-v8"));
        assert!(release_has_noswap("7.0.1-arch1"));
        assert!(!release_has_noswap("6.1.0-rpi7-rpi-v8"));
        assert!(!release_has_noswap("5.15.0-105-generic"));
        assert!(!release_has_noswap("garbage"));
    }

    #[test]
    fn only_the_initial_identity_uid_map_is_outside_a_user_namespace() {
        assert!(!in_user_namespace("         0          0 4294967295\n"));
        assert!(in_user_namespace("         0     100000      65536\n"));
    }
}
