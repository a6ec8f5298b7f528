//! Integration test harness -- owned by the test harness (tests/harness).
//!
//! Gives each integration test a private, disposable world to run picolet in:
//!
//! * [`ContainerRuntime`] (test files still call it by its old name,
//!   [`Containerd`]): a real containerd or CRI-O, chosen by
//!   `PICOLET_TEST_RUNTIME` ([`runtime_kind`]), in a fresh temp dir (own
//!   root, state, socket, CNI bridge and subnet, runc root), with the
//!   busybox and pause images from `tests/images/build-images.sh` imported
//!   (others, such as grpc-health, by
//!   [`ContainerRuntime::import_test_image`]), and a cleanup that does not
//!   leak runc processes, mounts, network namespaces, bridges or cgroups
//!   even when the test panicked ([`runtime`], [`containerd`], [`crio`]).
//! * [`Picolet`]: the picolet binary under test, started against that
//!   runtime with its own KubeletConfiguration, static pod directory and
//!   admin socket, plus a tiny HTTP/1.1 client for the admin socket.
//! * [`wait_until`] (and [`poll_until`], its non-panicking twin): the one
//!   polling helper. Tests wait for conditions with generous timeouts and
//!   never assert on timing; "nothing happened" is shown by waiting for an
//!   event that proves time passed (a probe count in [`Picolet::metric`], a
//!   log line of picolet's next rescan), never by a fixed sleep.
//!
//! The harness only talks to the picolet binary and to the runtime through
//! the runtime's own tools (`ctr`, `crio status`, `skopeo`, `runc`, `ip`,
//! `mount`); it knows nothing of picolet's internals. Use it from a test
//! file with `mod harness;`.
//!
//! Environment knobs (all optional):
//! * `PICOLET_TEST_RUNTIME`: `containerd` (default) or `crio`. `make test`
//!   runs the integration suite once with each.
//! * `CRIO_ASSETS`, `CRIO_ASSETS_DOWNLOAD=1`: where `crio` and `pinns` come
//!   from (default `../shared/cri-o` beside the repo; see [`crio`]).
//! * `PICOLET_TEST_IMAGES`: directory holding busybox.tar, pause.tar and
//!   grpc-health.tar (default `<repo>/target/test-images`, built on demand
//!   by `tests/images/build-images.sh`). An image that cannot be built fails
//!   the test with the script's message, which names what to install.
//! * `PICOLET_TEST_SNAPSHOTTER`: force `overlayfs` or `native` (CRI-O:
//!   the `overlay` or `vfs` storage driver).
//! * `PICOLET_TEST_KEEP=1`: keep the temp dirs of passing tests for a look.
//! * `PICOLET_BIN`: run this picolet binary instead of the one cargo built.
#![allow(dead_code)]

pub mod assets;
pub mod containerd;
pub mod crio;
pub mod faultproxy;
pub mod hollow;
pub mod kube;
pub mod runtime;
pub mod supervisor;
pub mod workload;

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

#[allow(unused_imports)] // each test file uses some
pub use runtime::{only_on, runtime_kind, snapshotter, ContainerRuntime, Containerd, RuntimeKind};

/// The name both runtimes use for the sandbox image (containerd's
/// `sandbox_image`, CRI-O's `pause_image`).
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.9";
/// The general purpose image for test containers.
pub const BUSYBOX_IMAGE: &str = "docker.io/library/busybox:latest";
/// The containerd namespace the CRI plugin works in.
pub const K8S_NAMESPACE: &str = "k8s.io";

/// How long picolet gets, once spawned, until its admin socket's /healthz
/// answers 200 (the runtime answered).
const PICOLET_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a process gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(10);

static INSTANCE: AtomicUsize = AtomicUsize::new(0);

/// A number unique within this test process.
fn next_instance() -> usize {
    INSTANCE.fetch_add(1, Ordering::SeqCst)
}

// ---------------------------------------------------------------------------
// Polling
// ---------------------------------------------------------------------------

/// Polls `f` until it returns `Some`, and returns that value. Panics naming
/// `what` if `timeout` passes first. Polls quickly at first, then every 500ms.
pub fn wait_until<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
    poll_until(timeout, f)
        .unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}

/// Like [`wait_until`], but returns `None` when `timeout` passes, for a
/// caller that wants to panic with what it saw last.
pub fn poll_until<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(20);
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() >= timeout {
            return None;
        }
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

// ---------------------------------------------------------------------------
// Small process helpers
// ---------------------------------------------------------------------------

/// Runs a command to completion with a deadline, capturing its output.
/// Returns None if the deadline passed (the command is then killed).
fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Option<Output> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let err_t = thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let status = wait_child(&mut child, timeout);
    let status = match status {
        Some(s) => s,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
    };
    Some(Output {
        status,
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
    })
}

/// Runs a command for its side effect only; failures are ignored (cleanup).
fn run_quiet(cmd: &mut Command, timeout: Duration) -> bool {
    run_with_timeout(cmd, timeout).is_some_and(|o| o.status.success())
}

/// Waits up to `timeout` for the child to exit.
pub fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) => {}
            Err(_) => return None,
        }
        if start.elapsed() >= timeout {
            return None;
        }
        thread::sleep(Duration::from_millis(25));
    }
}

/// Sends a signal (name without SIG, e.g. "TERM") with the shell's builtin
/// kill: the harness uses std only, and procps' kill(1) may be missing.
pub fn signal(pid: u32, sig: &str) {
    let _ = Command::new("sh")
        .args(["-c", "kill -s \"$0\" \"$1\"", sig, &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit status.
fn terminate(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    if let Ok(Some(s)) = child.try_wait() {
        return Some(s);
    }
    signal(child.id(), "TERM");
    if let Some(s) = wait_child(child, grace) {
        return Some(s);
    }
    let _ = child.kill();
    wait_child(child, GRACE)
}

/// The last `lines` lines of a file, or a note that it could not be read.
pub fn tail(path: &Path, lines: usize) -> String {
    match fs::read(path) {
        Ok(b) => {
            let s = String::from_utf8_lossy(&b);
            let all: Vec<&str> = s.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}

fn write_file(path: &Path, contents: &str) {
    fs::write(path, contents).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// An exclusive `flock` on `<dir>/.lock` (the folder is created), released
/// when dropped or when the process dies: one process at a time in a
/// shared folder (the assets cache, the network slots).
pub struct DirLock(#[allow(dead_code)] fs::File);

impl DirLock {
    pub fn take(dir: &Path) -> Result<DirLock, String> {
        fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let path = dir.join(".lock");
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("opening {}: {e}", path.display()))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| format!("locking {}: {e}", path.display()))?;
        Ok(DirLock(file))
    }
}

// ---------------------------------------------------------------------------
// Test images
// ---------------------------------------------------------------------------

/// Directory holding the test images (busybox.tar, pause.tar, ...).
pub fn images_dir() -> PathBuf {
    std::env::var_os("PICOLET_TEST_IMAGES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-images"))
}

/// The images every [`ContainerRuntime`] imports: the sandbox image and the
/// general purpose one.
const BASE_IMAGES: [&str; 2] = ["pause", "busybox"];

/// Builds the base test images, busybox and pause (once per process; the
/// script itself is idempotent, locks its output directory and renames
/// atomically, so concurrent test binaries are safe too). Returns the
/// images directory.
pub fn ensure_images() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| build_images(&BASE_IMAGES))
}

/// Builds the test image `name` (`grpc-health`, or a base image) unless it
/// is up to date, and returns its tarball. Panics with the build script's
/// output, which names the tool or package to install, when it cannot be
/// built: a test whose image is missing fails, it is not skipped.
pub fn ensure_image(name: &str) -> PathBuf {
    build_images(&[name]).join(format!("{name}.tar"))
}

/// Runs tests/images/build-images.sh for `names`; panics unless every
/// tarball is there afterwards.
fn build_images(names: &[&str]) -> PathBuf {
    let dir = images_dir();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/images/build-images.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(&dir)
        .args(names)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {} (is bash installed?): {e}", script.display()));
    if !out.status.success() {
        panic!(
            "{} could not build the test image(s) {names:?} ({}); install what it names, or run `make deps images`:\n{}{}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for name in names {
        let tar = dir.join(format!("{name}.tar"));
        assert!(
            tar.is_file(),
            "{} missing after {} succeeded",
            tar.display(),
            script.display()
        );
    }
    dir
}
// ---------------------------------------------------------------------------
// Picolet
// ---------------------------------------------------------------------------

/// The picolet binary under test, with its own config, static pod
/// directory, root dir, pod logs dir and admin socket in a temp dir.
pub struct Picolet {
    dir: TempDir,
    child: Option<Child>,
    hostname: String,
    cgroup_root: String,
    /// Flags after the harness's own (e.g. `--kubeconfig`).
    extra_args: Vec<String>,
    /// Environment variables set for picolet beyond the inherited ones
    /// (e.g. `NOTIFY_SOCKET`).
    extra_env: Vec<(String, std::ffi::OsString)>,
}

impl Picolet {
    /// Starts picolet against `runtime` with the default test config.
    pub fn start(runtime: &ContainerRuntime) -> Picolet {
        Picolet::start_with(runtime, "")
    }

    /// Like [`Picolet::start`], appending `extra_config` (top-level YAML keys
    /// of the KubeletConfiguration that the default does not set) to the
    /// config file.
    pub fn start_with(runtime: &ContainerRuntime, extra_config: &str) -> Picolet {
        Picolet::start_with_args(runtime, extra_config, |_| Vec::new())
    }

    /// Like [`Picolet::start_with`], with more flags on the command line,
    /// made by `args` from the instance (its node name is known by then:
    /// `--kubeconfig` with that node's credential, say).
    pub fn start_with_args(
        runtime: &ContainerRuntime,
        extra_config: &str,
        args: impl FnOnce(&Picolet) -> Vec<String>,
    ) -> Picolet {
        Picolet::start_named(runtime, None, extra_config, args)
    }

    /// Like [`Picolet::start_with_args`], with `name` as the node name
    /// (`--hostname-override`) instead of the unique `picolet-test-<pid>-<n>`
    /// (the demo's `picolet-demo`). The name must be unique among the
    /// nodes of the control plane it joins; the cgroup root stays unique.
    pub fn start_named(
        runtime: &ContainerRuntime,
        name: Option<&str>,
        extra_config: &str,
        args: impl FnOnce(&Picolet) -> Vec<String>,
    ) -> Picolet {
        Picolet::start_full(runtime, name, extra_config, args, Vec::new())
    }

    /// Like [`Picolet::start`], with `env` added to picolet's environment.
    pub fn start_with_env(
        runtime: &ContainerRuntime,
        env: Vec<(String, std::ffi::OsString)>,
    ) -> Picolet {
        Picolet::start_full(runtime, None, "", |_| Vec::new(), env)
    }

    fn start_full(
        runtime: &ContainerRuntime,
        name: Option<&str>,
        extra_config: &str,
        args: impl FnOnce(&Picolet) -> Vec<String>,
        extra_env: Vec<(String, std::ffi::OsString)>,
    ) -> Picolet {
        let dir = tempfile::Builder::new()
            .prefix("picolet-test.")
            .tempdir()
            .expect("temp dir for picolet");
        let n = next_instance();
        let pid = std::process::id();
        let hostname = name.map_or_else(|| format!("picolet-test-{pid}-{n}"), str::to_string);
        let cgroup_root = format!("/picolet-test-{pid}-{n}");
        runtime.adopt_cgroup_root(&cgroup_root);
        runtime.adopt_picolet_dir(dir.path());
        let mut p = Picolet {
            dir,
            child: None,
            hostname,
            cgroup_root,
            extra_args: Vec::new(),
            extra_env,
        };
        for sub in ["manifests", "logs", "root", "staging"] {
            fs::create_dir_all(p.dir().join(sub)).expect("picolet dirs");
        }
        let config = format!(
            "# Written by tests/harness; see tests/harness/mod.rs.\n\
             apiVersion: kubelet.config.k8s.io/v1beta1\n\
             kind: KubeletConfiguration\n\
             staticPodPath: {manifests}\n\
             containerRuntimeEndpoint: {endpoint}\n\
             cgroupDriver: cgroupfs\n\
             cgroupRoot: {cgroup_root}\n\
             podLogsDir: {logs}\n\
             {file_check}\
             {sync}\
             {eviction}\
             {image_gc}\
             {ports}\
             {extra}",
            manifests = p.manifests_dir().display(),
            endpoint = runtime.endpoint(),
            cgroup_root = p.cgroup_root,
            logs = p.logs_dir().display(),
            // Tests rescan the manifest directory every 2 s (inotify is
            // the fast path) unless they choose (the bench: kubelet's 20 s).
            file_check = if extra_config.contains("fileCheckFrequency:") {
                ""
            } else {
                "fileCheckFrequency: 2s\n"
            },
            // No node API or healthz listener unless a test asks: tests run
            // side by side, and the defaults (0.0.0.0:10250, :10248) clash.
            ports = match (
                extra_config.contains("port:"),
                extra_config.contains("healthzPort:"),
            ) {
                (false, false) => "port: 0\nhealthzPort: 0\n",
                (false, true) => "port: 0\n",
                (true, false) => "healthzPort: 0\n",
                (true, true) => "",
            },
            // Tests resync every 10 s unless they choose (the bench uses
            // kubelet's default, 1m, to compare like with like).
            sync = if extra_config.contains("syncFrequency:") {
                ""
            } else {
                "syncFrequency: 10s\n"
            },
            // Node-pressure eviction and image GC act on this shared
            // machine's real disk and memory: absolute thresholds far from
            // what tests use, and no image GC, unless a test sets its own.
            eviction = if extra_config.contains("evictionHard:") {
                ""
            } else {
                "evictionHard: {memory.available: 100Mi, nodefs.available: 1Gi, imagefs.available: 1Gi}\n"
            },
            image_gc = if extra_config.contains("imageGCHighThresholdPercent:") {
                ""
            } else {
                "imageGCHighThresholdPercent: 100\n"
            },
            extra = extra_config,
        );
        write_file(&p.config_path(), &config);
        p.extra_args = args(&p);
        p.spawn();
        p
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir().join("config.yaml")
    }

    /// The staticPodPath.
    pub fn manifests_dir(&self) -> PathBuf {
        self.dir().join("manifests")
    }

    /// The podLogsDir.
    pub fn logs_dir(&self) -> PathBuf {
        self.dir().join("logs")
    }

    /// The --root-dir.
    pub fn root_dir(&self) -> PathBuf {
        self.dir().join("root")
    }

    pub fn admin_socket(&self) -> PathBuf {
        self.dir().join("picolet.sock")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir().join("picolet.log")
    }

    /// The --hostname-override (node name) of this instance.
    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    /// The cgroupRoot of this instance, e.g. `/picolet-test-123-4`.
    pub fn cgroup_root(&self) -> &str {
        &self.cgroup_root
    }

    /// picolet's stdout and stderr so far (all runs of this instance).
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The process id of the running picolet, if any.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// True while the picolet process runs.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Writes a static pod manifest atomically (written aside, then renamed
    /// into the manifests dir). `name` gets `.yaml` unless it has an
    /// extension already.
    pub fn write_manifest(&self, name: &str, yaml: &str) {
        let file = manifest_file_name(name);
        let staged = self.dir().join("staging").join(&file);
        write_file(&staged, yaml);
        let target = self.manifests_dir().join(&file);
        fs::rename(&staged, &target)
            .unwrap_or_else(|e| panic!("moving manifest to {}: {e}", target.display()));
    }

    /// Removes a static pod manifest written by [`Picolet::write_manifest`].
    pub fn remove_manifest(&self, name: &str) {
        let target = self.manifests_dir().join(manifest_file_name(name));
        fs::remove_file(&target).unwrap_or_else(|e| panic!("removing {}: {e}", target.display()));
    }

    /// Sends SIGTERM and waits for a graceful exit (SIGKILL after a grace
    /// period). Returns the exit status, None if it was not running.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        terminate(&mut child, GRACE)
    }

    /// SIGKILL, simulating a crash. Containers are left as they are.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops (if running) and starts again with the same dirs and config.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// A plain HTTP/1.1 GET over the admin socket. Returns status and body.
    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(&self.admin_socket(), path)
            .unwrap_or_else(|e| panic!("GET {path} on {}: {e}", self.admin_socket().display()))
    }

    /// The static pod `<name>-<node>` in GET /pods, if picolet reports it.
    pub fn find_pod(&self, name: &str) -> Option<serde_json::Value> {
        let full = format!("{name}-{}", self.hostname);
        self.pods()["items"]
            .as_array()?
            .iter()
            .find(|i| i["metadata"]["name"] == full.as_str())
            .cloned()
    }

    /// The value of one series of GET /metrics (Prometheus text), named
    /// exactly as exposed, labels included, e.g.
    /// `prober_probe_total{probe_type="Liveness",result="successful"}`.
    /// `None` while the series is not exposed (a counter not yet counted).
    pub fn metric(&self, series: &str) -> Option<f64> {
        let (status, body) = self.get("/metrics");
        assert_eq!(status, 200, "GET /metrics answered {status}: {body}");
        body.lines().find_map(|l| {
            let value = l.strip_prefix(series)?.strip_prefix(' ')?;
            Some(
                value
                    .trim()
                    .parse()
                    .unwrap_or_else(|e| panic!("GET /metrics: {series} has no number ({e}): {l}")),
            )
        })
    }

    /// GET /pods as JSON; panics unless it answers 200 with JSON.
    pub fn pods(&self) -> serde_json::Value {
        let (status, body) = self.get("/pods");
        assert_eq!(status, 200, "GET /pods answered {status}: {body}");
        serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("GET /pods is not JSON ({e}): {body}"))
    }

    fn spawn(&mut self) {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("picolet log file");
        let _ = writeln!(&log, "=== harness: starting picolet ===");
        let _ = fs::remove_file(self.admin_socket());
        let bin = picolet_bin();
        let child = Command::new(&bin)
            .arg("run")
            .arg("--config")
            .arg(self.config_path())
            .arg("--root-dir")
            .arg(self.root_dir())
            .arg("--hostname-override")
            .arg(&self.hostname)
            .arg("--admin-socket")
            .arg(self.admin_socket())
            .args(&self.extra_args)
            .env("RUST_BACKTRACE", "1")
            .envs(self.extra_env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {}: {e}", bin.display()));
        self.child = Some(child);

        let start = Instant::now();
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!(
                    "picolet exited during startup ({status})\n--- {} ---\n{}",
                    self.log_path().display(),
                    tail(&self.log_path(), 40)
                );
            }
            // The socket opens first; /healthz answers 200 once the
            // runtime has answered (503 "waiting for the runtime" before).
            if matches!(http_get(&self.admin_socket(), "/healthz"), Ok((200, _))) {
                return;
            }
            if start.elapsed() > PICOLET_READY_TIMEOUT {
                panic!(
                    "picolet's {} did not answer /healthz with 200 within {PICOLET_READY_TIMEOUT:?}\n--- {} ---\n{}",
                    self.admin_socket().display(),
                    self.log_path().display(),
                    tail(&self.log_path(), 40)
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Picolet {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            terminate(&mut child, Duration::from_secs(5));
        }
        if thread::panicking() {
            eprintln!(
                "--- picolet log tail ({}) ---\n{}\n--- end of picolet log ---",
                self.log_path().display(),
                tail(&self.log_path(), 60)
            );
        }
        if std::env::var_os("PICOLET_TEST_KEEP").is_some() && !thread::panicking() {
            let kept = std::mem::replace(&mut self.dir, TempDir::new().expect("temp dir")).keep();
            eprintln!("PICOLET_TEST_KEEP: kept {}", kept.display());
            return;
        }
        // picolet leaves its volume mounts (tmpfs for Secrets, tokens,
        // memory emptyDirs) in place when it stops, as kubelet does, so
        // that a restarted agent finds them; the test is over, so they go,
        // or the temp dir could not be removed.
        runtime::unmount_under(self.dir.path());
    }
}

/// The status of container `name` in a pod from [`Picolet::find_pod`]
/// (`status.containerStatuses[]`), or null.
pub fn container_status(pod: &serde_json::Value, name: &str) -> serde_json::Value {
    pod["status"]["containerStatuses"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name).cloned())
        .unwrap_or(serde_json::Value::Null)
}

/// The picolet binary under test: `$PICOLET_BIN` if set (`make bench` uses
/// the static musl build that boards ship), else the one cargo built.
pub fn picolet_bin() -> PathBuf {
    std::env::var_os("PICOLET_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| match option_env!("CARGO_BIN_EXE_picolet") {
            Some(bin) => PathBuf::from(bin),
            // Outside an integration test (`make demo-cluster`): the release
            // build.
            None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/picolet"),
        })
}

fn manifest_file_name(name: &str) -> String {
    assert!(
        !name.is_empty() && !name.contains('/'),
        "bad manifest name {name:?}"
    );
    if [".yaml", ".yml", ".json"].iter().any(|e| name.ends_with(e)) {
        name.to_string()
    } else {
        format!("{name}.yaml")
    }
}

// ---------------------------------------------------------------------------
// HTTP/1.1 over a unix socket
// ---------------------------------------------------------------------------

/// GET `path` on the unix socket with `Connection: close`; handles bodies
/// delimited by Content-Length, chunked encoding, or end of stream.
pub fn http_get(socket: &Path, path: &str) -> Result<(u16, String), String> {
    let mut s = UnixStream::connect(socket).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(60))).ok();
    s.set_write_timeout(Some(Duration::from_secs(60))).ok();
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: picolet-test-harness\r\nAccept: */*\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
    parse_http_response(&raw)
}

fn parse_http_response(raw: &[u8]) -> Result<(u16, String), String> {
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no end of headers in {:?}", String::from_utf8_lossy(raw)))?;
    let head = String::from_utf8_lossy(&raw[..head_end]);
    let body = &raw[head_end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
            chunked = true;
        } else if k == "content-length" {
            length = v.parse::<usize>().ok();
        }
    }
    let body = if chunked {
        dechunk(body)?
    } else if let Some(n) = length {
        body.get(..n)
            .ok_or_else(|| format!("body shorter than Content-Length {n}"))?
            .to_vec()
    } else {
        body.to_vec()
    };
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunk size")?;
        let size_s = String::from_utf8_lossy(&b[..eol]);
        let size_s = size_s.split(';').next().unwrap_or("").trim();
        let size =
            usize::from_str_radix(size_s, 16).map_err(|_| format!("bad chunk size {size_s:?}"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = b.get(..size).ok_or("truncated chunk")?;
        out.extend_from_slice(chunk);
        b = b.get(size + 2..).ok_or("truncated chunk end")?;
    }
}
