//! A private containerd for the integration tests -- owned by the test
//! harness (tests/harness).
//!
//! What [`super::ContainerRuntime`] needs to run containerd (the default,
//! `PICOLET_TEST_RUNTIME=containerd`): the config that keeps one instance
//! inside its temp dir ([`write_config`]: own root, state, socket, runc
//! root, CNI config dir), the command that runs it, and `ctr`, its client,
//! to tell when it answers and to import and list images. containerd,
//! runc, ctr and the CNI plugins are Debian's (`make deps`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use super::{run_quiet, run_with_timeout, write_file, K8S_NAMESPACE, PAUSE_IMAGE};

/// Upper bound for one `ctr` invocation (an import of our images takes < 5s).
const CTR_TIMEOUT: Duration = Duration::from_secs(120);

/// The gRPC (and CRI) socket of the instance in `dir`.
pub fn socket(dir: &Path) -> PathBuf {
    dir.join("containerd.sock")
}

/// Writes `config.toml` into `dir` and makes the directories it names. The
/// CNI conflist is the caller's (`dir/cni`, shared with CRI-O).
pub fn write_config(dir: &Path, snapshotter: &str) {
    for sub in ["root", "state", "cni", "cni-ipam", "runc", "opt"] {
        std::fs::create_dir_all(dir.join(sub)).expect("containerd dirs");
    }
    let p = |s: &str| dir.join(s).display().to_string();
    let config = format!(
        r#"# Written by tests/harness for one test; see tests/harness/containerd.rs.
version = 2
root = "{root}"
state = "{state}"
oom_score = 0
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{sock}"

[ttrpc]
  address = "{sock}.ttrpc"

[debug]
  level = "info"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "{opt}"

  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "{pause}"
    # No CAP_SYS_RESOURCE here: runc could not lower oom_score_adj otherwise.
    restrict_oom_score_adj = true
    disable_apparmor = true
    enable_selinux = false
    # Keep network namespace mounts inside our temp dir.
    netns_mounts_under_state_dir = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "{snapshotter}"
      default_runtime_name = "runc"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "{runc}"

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "{cni}"
      max_conf_num = 1
"#,
        root = p("root"),
        state = p("state"),
        sock = socket(dir).display(),
        opt = p("opt"),
        pause = PAUSE_IMAGE,
        runc = p("runc"),
        cni = p("cni"),
    );
    write_file(&dir.join("config.toml"), &config);
}

/// The command that runs the instance in `dir` in the foreground.
pub fn command(dir: &Path) -> Command {
    let mut cmd = Command::new("containerd");
    cmd.arg("--config").arg(dir.join("config.toml"));
    cmd
}

/// True once the instance in `dir` answers `ctr version`.
pub fn answers(dir: &Path) -> bool {
    let socket = socket(dir);
    socket.exists()
        && run_quiet(
            Command::new("ctr")
                .arg("--address")
                .arg(&socket)
                .args(["--timeout", "5s", "version"]),
            Duration::from_secs(10),
        )
}

/// `ctr --address <sock> -n k8s.io ARGS...` against the instance in `dir`.
/// Panics only if ctr cannot be run or hangs past a generous deadline.
pub fn ctr(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new("ctr");
    cmd.arg("--address")
        .arg(socket(dir))
        .args(["-n", K8S_NAMESPACE])
        .args(args);
    run_with_timeout(&mut cmd, CTR_TIMEOUT)
        .unwrap_or_else(|| panic!("ctr {args:?} did not finish within {CTR_TIMEOUT:?}"))
}

/// `ctr images import` of one OCI tarball.
pub fn import(dir: &Path, snapshotter: &str, tar: &Path) -> Result<(), String> {
    let out = ctr(
        dir,
        &[
            "images",
            "import",
            "--snapshotter",
            snapshotter,
            tar.to_str().expect("utf-8 image path"),
        ],
    );
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ctr images import {}: {}\n{}",
            tar.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// True if `ctr images ls -q` lists `name`.
pub fn has_image(dir: &Path, name: &str) -> bool {
    let out = ctr(dir, &["images", "ls", "-q"]);
    out.status.success()
        && String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.trim() == name)
}
