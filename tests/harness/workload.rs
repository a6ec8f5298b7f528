//! What the API-backed workload tests read and do on the node's side of
//! a pod: its containers' output from the CRI log files under
//! `/var/log/pods`, files and their modes under picolet's root dir, and
//! the "reboot" and "crash" they inflict (unmounting tmpfs volumes,
//! SIGKILLing a container through runc). Pods are in `default`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::kube::ControlPlane;
use super::{wait_until, Containerd, Picolet};

/// How long a pod may take to print a line.
const LINE_WAIT: Duration = Duration::from_secs(180);

/// Starts picolet as a node of `cp` with the node's own kubeconfig, at
/// `-v=10`, the verbosity at which a leaked Secret would show.
pub fn join(cp: &ControlPlane, c: &Containerd) -> Picolet {
    Picolet::start_with_args(c, "", |p| {
        let kubeconfig = cp.node_kubeconfig(p.hostname());
        vec![
            "--kubeconfig".to_string(),
            kubeconfig.display().to_string(),
            "--v=10".to_string(),
        ]
    })
}

/// The CRI log files (`<attempt>.log`) of `container` of the pod
/// `default/pod`, every attempt, sorted.
pub fn log_files(p: &Picolet, pod: &str, container: &str) -> Vec<PathBuf> {
    let prefix = format!("default_{pod}_");
    let mut out = Vec::new();
    for e in fs::read_dir(p.logs_dir()).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            for f in fs::read_dir(e.path().join(container))
                .into_iter()
                .flatten()
                .flatten()
            {
                out.push(f.path());
            }
        }
    }
    out.sort();
    out
}

/// The output lines of the pod's container `main` (of one attempt, or of
/// every attempt), with the CRI prefix (time, stream, tag) dropped.
pub fn output(p: &Picolet, pod: &str, attempt: Option<u32>) -> Vec<String> {
    log_files(p, pod, "main")
        .iter()
        .filter(|f| {
            attempt.is_none_or(|a| f.file_name().unwrap().to_string_lossy() == format!("{a}.log"))
        })
        .flat_map(|f| {
            fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .map(|l| l.splitn(4, ' ').nth(3).unwrap_or("").to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Waits until the pod's `main` container printed exactly `want`.
pub fn wait_line(p: &Picolet, pod: &str, attempt: Option<u32>, want: &str) {
    wait_until(&format!("{pod} to print {want:?}"), LINE_WAIT, || {
        output(p, pod, attempt)
            .iter()
            .any(|l| l == want)
            .then_some(())
    });
}

/// Every file under `dir` (not following links) whose bytes contain
/// `needle`, except under `skip`.
pub fn files_containing(dir: &Path, needle: &[u8], skip: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if skip.iter().any(|s| d.starts_with(s)) {
            continue;
        }
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(path);
            } else if t.is_file() {
                let bytes = fs::read(&path).unwrap_or_default();
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    found.push(path);
                }
            }
        }
    }
    found
}

/// The permission bits of `p` (following links).
pub fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Lazily unmounts every mount under `dir` (the tmpfs volumes a reboot
/// would lose).
pub fn unmount_under(dir: &Path) {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let prefix = dir.to_string_lossy().into_owned();
    for target in mounts.lines().filter_map(|l| l.split(' ').nth(1)) {
        if target.starts_with(&prefix) {
            let out = std::process::Command::new("umount")
                .args(["-l", target])
                .output()
                .unwrap();
            assert!(out.status.success(), "umount {target}: {out:?}");
        }
    }
}

/// Whether `path` is a mount point.
pub fn is_mounted(path: &Path) -> bool {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let p = path.to_string_lossy();
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(&*p))
}

/// SIGKILLs the container's process through runc (either runtime's root).
pub fn kill_container(c: &Containerd, id: &str) {
    let killed = [c.runc_root().join("k8s.io"), c.runc_root()]
        .iter()
        .any(|root| {
            std::process::Command::new("runc")
                .arg("--root")
                .arg(root)
                .args(["kill", id, "KILL"])
                .output()
                .is_ok_and(|o| o.status.success())
        });
    assert!(killed, "runc kill {id}");
}
