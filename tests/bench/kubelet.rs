//! Upstream kubelet in the start-latency table, when `KUBELET=path` names a
//! kubelet binary (it is optional: the bench says when it is absent).
//!
//! kubelet runs standalone (no API server: static pods only, as picolet
//! does in the bench) against the same private runtime, with its HTTP
//! server off, the cgroupfs driver, its own cgroup root and pod logs
//! directory (made beforehand: kubelet refuses a missing one), and its
//! defaults otherwise (`syncFrequency` 1m). Eviction thresholds are zeroed
//! so a busy build machine's disk does not make it refuse the pods.
//! Untested: no kubelet binary was at hand when this was written.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running kubelet with its temp dir; killed (and its static pods'
/// directory emptied) on drop.
pub struct Kubelet {
    child: Child,
    dir: tempfile::TempDir,
}

/// The kubelet binary from `KUBELET`, if it names an executable.
pub fn binary() -> Option<PathBuf> {
    let p = PathBuf::from(std::env::var_os("KUBELET")?);
    p.is_file().then_some(p)
}

impl Kubelet {
    /// Starts `bin` against the runtime at `endpoint` (`unix://...`), with
    /// pods under `cgroup_root`.
    pub fn start(bin: &Path, endpoint: &str, cgroup_root: &str) -> Kubelet {
        let dir = tempfile::Builder::new()
            .prefix("picolet-bench-kubelet.")
            .tempdir()
            .expect("temp dir for kubelet");
        for sub in ["manifests", "logs", "root"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("kubelet dirs");
        }
        let config = format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\n\
             kind: KubeletConfiguration\n\
             staticPodPath: {manifests}\n\
             containerRuntimeEndpoint: {endpoint}\n\
             cgroupDriver: cgroupfs\n\
             cgroupRoot: {cgroup_root}\n\
             podLogsDir: {logs}\n\
             enableServer: false\n\
             failSwapOn: false\n\
             fileCheckFrequency: 2s\n\
             evictionHard: {{memory.available: \"0%\", nodefs.available: \"0%\", imagefs.available: \"0%\"}}\n\
             authentication: {{anonymous: {{enabled: false}}, webhook: {{enabled: false}}}}\n\
             authorization: {{mode: AlwaysAllow}}\n",
            manifests = dir.path().join("manifests").display(),
            logs = dir.path().join("logs").display(),
        );
        make_cgroup_root(cgroup_root);
        let config_path = dir.path().join("config.yaml");
        std::fs::write(&config_path, config).expect("kubelet config");
        let log = std::fs::File::create(dir.path().join("kubelet.log")).expect("kubelet log");
        let child = Command::new(bin)
            .arg(format!("--config={}", config_path.display()))
            .arg(format!("--root-dir={}", dir.path().join("root").display()))
            .arg(format!(
                "--hostname-override=bench-kubelet-{}",
                std::process::id()
            ))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("kubelet log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        Kubelet { child, dir }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn root_dir(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    pub fn manifests_dir(&self) -> PathBuf {
        self.dir.path().join("manifests")
    }

    /// Removes every static pod and waits (up to a minute) for kubelet to
    /// stop them, so the runtime is left clean for the next row.
    pub fn stop_pods(&self, still_running: impl Fn() -> usize) {
        for e in std::fs::read_dir(self.manifests_dir())
            .into_iter()
            .flatten()
            .flatten()
        {
            let _ = std::fs::remove_file(e.path());
        }
        let _ = crate::harness::poll_until(std::time::Duration::from_secs(60), || {
            (still_running() == 0).then_some(())
        });
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// kubelet refuses a `cgroupRoot` that does not exist: make it, in the
/// unified hierarchy or in every v1 controller.
fn make_cgroup_root(root: &str) {
    let base = Path::new("/sys/fs/cgroup");
    let rel = root.trim_start_matches('/');
    if base.join("cgroup.controllers").exists() {
        let _ = std::fs::create_dir_all(base.join(rel));
        return;
    }
    for e in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if is_dir {
            let _ = std::fs::create_dir_all(e.path().join(rel));
        }
    }
}
