//! `picolet-hollow` as the fleet test and the fleet bench run it -- owned by
//! the test harness (tests/harness).
//!
//! One process of N simulated nodes (the `hollow` feature; docs/fleet.md),
//! each with the node certificate the control plane issued for it, named
//! `<prefix><i>`. A node's kubeconfig may point at another server than the
//! API server (a fault proxy), so a test can cut some nodes' links and not
//! the others'. The process is stopped (SIGTERM, then SIGKILL) on drop.
//!
//! It knows the control plane's kubeconfigs and `/proc`, nothing of what a
//! test checks.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::kube::{ControlPlane, Credentials};

/// Lines of the hollow log a failed test prints.
const LOG_TAIL_LINES: usize = 60;

/// The `picolet-hollow` binary: `$PICOLET_HOLLOW_BIN` if set (`make fleet`
/// uses its own profile's build), else the one cargo built for this test,
/// which only a build with `--features hollow` has.
pub fn hollow_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("PICOLET_HOLLOW_BIN") {
        return PathBuf::from(bin);
    }
    match option_env!("CARGO_BIN_EXE_picolet-hollow") {
        Some(bin) => PathBuf::from(bin),
        None => panic!(
            "no picolet-hollow binary: build this test with `--features hollow` \
             (make test-fleet) or set PICOLET_HOLLOW_BIN"
        ),
    }
}

/// The running `picolet-hollow` process.
pub struct Hollow {
    child: Child,
    dir: PathBuf,
}

impl Drop for Hollow {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.print_log_tail();
        }
        super::signal(self.child.id(), "TERM");
        if super::wait_child(&mut self.child, Duration::from_secs(20)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Hollow {
    /// Starts `nodes` hollow nodes `<prefix>0..` under `dir` (their state
    /// in `dir/state`, the process's log in `dir/hollow.log`). Node `i`
    /// talks to `server(i)`, or to the API server where that is `None`.
    /// `args` go to `picolet-hollow` as they are.
    pub fn start(
        cp: &ControlPlane,
        dir: &Path,
        prefix: &str,
        nodes: usize,
        server: impl Fn(usize) -> Option<String>,
        args: &[String],
    ) -> Hollow {
        let kubeconfigs = dir.join("kubeconfigs");
        fs::create_dir_all(&kubeconfigs).unwrap();
        for i in 0..nodes {
            let name = format!("{prefix}{i}");
            let from = match server(i) {
                Some(url) => cp.node_kubeconfig_with(&name, Credentials::Files, &url),
                None => cp.node_kubeconfig(&name),
            };
            fs::copy(from, kubeconfigs.join(format!("{name}.kubeconfig"))).unwrap();
        }
        let log = fs::File::create(dir.join("hollow.log")).unwrap();
        let child = Command::new(hollow_bin())
            .arg(format!("--nodes={nodes}"))
            .arg(format!("--name-prefix={prefix}"))
            .arg(format!("--state-dir={}", dir.join("state").display()))
            .arg(format!("--kubeconfig-dir={}", kubeconfigs.display()))
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", hollow_bin().display()));
        Hollow {
            child,
            dir: dir.to_path_buf(),
        }
    }

    /// For a failed test: whether the process still runs, and the end of
    /// its log (a node that never joined says why there).
    fn print_log_tail(&mut self) {
        match self.child.try_wait() {
            Ok(Some(status)) => eprintln!("--- picolet-hollow exited: {status} ---"),
            _ => eprintln!("--- picolet-hollow still runs ---"),
        }
        eprintln!(
            "--- hollow log tail ({}) ---\n{}\n--- end of the hollow log ---",
            self.log_path().display(),
            super::tail(&self.log_path(), LOG_TAIL_LINES)
        );
    }

    /// The process's log.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("hollow.log")
    }

    /// The admin socket of node `name`.
    pub fn admin_socket(&self, name: &str) -> PathBuf {
        self.dir.join("state").join(name).join("admin.sock")
    }

    /// (VmRSS in KiB, user+system CPU seconds) of the process now.
    pub fn usage(&self) -> (u64, f64) {
        usage(self.child.id())
    }
}

/// The fleet's Deployment `fleet` in `namespace`: `pods` busybox pods
/// (an image a hollow node has) with a readiness probe, no token, a
/// second's grace; `revision` is a template annotation, so a new one is a
/// rolling update.
pub fn deployment(namespace: &str, pods: usize, revision: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: fleet\n  namespace: {namespace}\n\
         spec:\n  replicas: {pods}\n  selector:\n    matchLabels:\n      app: fleet\n\
         \x20 template:\n    metadata:\n      labels:\n        app: fleet\n\
         \x20     annotations:\n        fleet/revision: \"{revision}\"\n    spec:\n\
         \x20     automountServiceAccountToken: false\n\
         \x20     terminationGracePeriodSeconds: 1\n\
         \x20     containers:\n      - name: app\n        image: docker.io/library/busybox:hollow\n\
         \x20       readinessProbe:\n          httpGet:\n            port: 8080\n\
         \x20         periodSeconds: 5\n"
    )
}

/// `kubectl delete deployment fleet --wait=false` in `namespace`, as the
/// admin.
pub fn delete_deployment(cp: &ControlPlane, namespace: &str) -> std::process::Output {
    cp.kubectl(&[
        "delete",
        "deployment",
        "fleet",
        "-n",
        namespace,
        "--wait=false",
    ])
}

/// The nodes named `prefix…` that the API server shows Ready.
pub fn ready_nodes(cp: &ControlPlane, prefix: &str) -> HashSet<String> {
    let Some(list) = cp.get_json(&["nodes"]) else {
        return HashSet::new();
    };
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| {
            n["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
        .filter_map(|n| n["metadata"]["name"].as_str())
        .filter(|name| name.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// (VmRSS in KiB, user+system CPU seconds) of process `pid` now; zeros
/// when it is gone.
pub fn usage(pid: u32) -> (u64, f64) {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th fields of the whole line.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    // USER_HZ is 100 on Linux.
    (rss, ticks as f64 / 100.0)
}
