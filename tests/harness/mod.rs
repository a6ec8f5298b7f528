//! Integration test harness -- owned by the test harness (tests/harness).
//!
//! Gives each integration test a private, disposable world to run picolet in:
//!
//! * [`Containerd`]: a real containerd in a fresh temp dir (own root, state,
//!   socket, CNI bridge and subnet, runc root), with the busybox and pause
//!   images from `tests/images/build-images.sh` imported (others, such as
//!   grpc-health, by [`Containerd::import_test_image`]), and a cleanup that
//!   does not leak runc processes, mounts, network namespaces, bridges or
//!   cgroups even when the test panicked.
//! * [`Picolet`]: the picolet binary under test, started against that
//!   containerd with its own KubeletConfiguration, static pod directory and
//!   admin socket, plus a tiny HTTP/1.1 client for the admin socket.
//! * [`wait_until`] (and [`poll_until`], its non-panicking twin): the one
//!   polling helper. Tests wait for conditions with generous timeouts and
//!   never assert on timing; "nothing happened" is shown by waiting for an
//!   event that proves time passed (a probe count in [`Picolet::metric`], a
//!   log line of picolet's next rescan), never by a fixed sleep.
//!
//! The harness only talks to the picolet binary and to containerd (through
//! `ctr`, `runc`, `ip`, `mount`); it knows nothing of picolet's internals.
//! Use it from a test file with `mod harness;`.
//!
//! Environment knobs (all optional):
//! * `PICOLET_TEST_IMAGES`: directory holding busybox.tar, pause.tar and
//!   grpc-health.tar (default `<repo>/target/test-images`, built on demand
//!   by `tests/images/build-images.sh`). An image that cannot be built fails
//!   the test with the script's message, which names what to install.
//! * `PICOLET_TEST_SNAPSHOTTER`: force `overlayfs` or `native`.
//! * `PICOLET_TEST_KEEP=1`: keep the temp dirs of passing tests for a look.
//! * `PICOLET_BIN`: run this picolet binary instead of the one cargo built.
#![allow(dead_code)]

pub mod faultproxy;
pub mod kube;

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// The name containerd's CRI plugin uses for the sandbox image.
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.9";
/// The general purpose image for test containers.
pub const BUSYBOX_IMAGE: &str = "docker.io/library/busybox:latest";
/// The containerd namespace the CRI plugin works in.
pub const K8S_NAMESPACE: &str = "k8s.io";

/// How long containerd gets to answer on its socket after being spawned.
const CONTAINERD_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long picolet gets to open its admin socket after being spawned.
const PICOLET_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a process gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(10);
/// Upper bound for one `ctr` invocation (an import of our images takes < 5s).
const CTR_TIMEOUT: Duration = Duration::from_secs(120);
/// Where harness instances claim their network slot (bridge + /24).
const SLOT_DIR: &str = "/run/picolet-test/slots";
/// Slots: bridge `pcl<N>` and subnet 10.244.N.0/24 for N in 1..=SLOTS.
const SLOTS: usize = 250;

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
fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
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
fn signal(pid: u32, sig: &str) {
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

// ---------------------------------------------------------------------------
// Test images
// ---------------------------------------------------------------------------

/// Directory holding the test images (busybox.tar, pause.tar, ...).
pub fn images_dir() -> PathBuf {
    std::env::var_os("PICOLET_TEST_IMAGES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-images"))
}

/// The images every [`Containerd`] imports: the sandbox image and the
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

/// `overlayfs` if an overlay mount works on the temp filesystem, else
/// `native`. Probed once per process.
pub fn snapshotter() -> &'static str {
    static S: OnceLock<&'static str> = OnceLock::new();
    S.get_or_init(|| {
        match std::env::var("PICOLET_TEST_SNAPSHOTTER").as_deref() {
            Ok("overlayfs") => return "overlayfs",
            Ok("native") => return "native",
            _ => {}
        }
        let probe = tempfile::Builder::new()
            .prefix("picolet-ovl-probe")
            .tempdir()
            .expect("temp dir for the overlay probe");
        let p = probe.path();
        for d in ["lower", "upper", "work", "merged"] {
            fs::create_dir(p.join(d)).expect("overlay probe dirs");
        }
        let opts = format!(
            "lowerdir={},upperdir={},workdir={}",
            p.join("lower").display(),
            p.join("upper").display(),
            p.join("work").display()
        );
        let merged = p.join("merged");
        let ok = run_quiet(
            Command::new("mount")
                .args(["-t", "overlay", "overlay", "-o", &opts])
                .arg(&merged),
            Duration::from_secs(20),
        );
        if ok {
            run_quiet(Command::new("umount").arg(&merged), Duration::from_secs(20));
            "overlayfs"
        } else {
            "native"
        }
    })
}

// ---------------------------------------------------------------------------
// Network slots: a unique bridge name and /24 per harness, across processes
// ---------------------------------------------------------------------------

/// A claimed slot N: bridge `pcl<N>`, subnet `10.244.N.0/24`. Claimed by
/// atomically creating `SLOT_DIR/<N>`; a slot whose owner process is gone is
/// swept (its leftovers cleaned) and reused.
struct NetSlot {
    n: usize,
}

impl NetSlot {
    fn claim(dir: &Path) -> NetSlot {
        fs::create_dir_all(SLOT_DIR).unwrap_or_else(|e| panic!("creating {SLOT_DIR}: {e}"));
        let me = std::process::id();
        let start = (me as usize * 7 + next_instance() * 13) % SLOTS;
        // Round 0 takes only free slots; round 1 also reclaims the slots of
        // dead owners (a test process that was SIGKILLed), sweeping what they
        // left behind first.
        for round in 0..2 {
            for i in 0..SLOTS {
                let n = (start + i) % SLOTS + 1;
                let path = Path::new(SLOT_DIR).join(n.to_string());
                if round == 1 {
                    Self::reclaim_if_dead(n, &path);
                }
                match fs::create_dir(&path) {
                    Ok(()) => {
                        write_file(&path.join("owner"), &format!("{me}\n{}\n", dir.display()));
                        // A bridge of that name can only be a leftover.
                        run_quiet(
                            Command::new("ip").args(["link", "del", &format!("pcl{n}")]),
                            Duration::from_secs(10),
                        );
                        return NetSlot { n };
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(e) => panic!("claiming {}: {e}", path.display()),
                }
            }
        }
        panic!("no free network slot in {SLOT_DIR} (all {SLOTS} taken by live test processes)");
    }

    /// Frees slot `n` if the process that claimed it is gone.
    fn reclaim_if_dead(n: usize, path: &Path) {
        let owner = fs::read_to_string(path.join("owner")).unwrap_or_default();
        let mut lines = owner.lines();
        // No owner (yet): a claim in progress; leave it alone.
        let Some(pid) = lines.next().and_then(|l| l.trim().parse::<u32>().ok()) else {
            return;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            return;
        }
        if let Some(old) = lines.next().filter(|d| d.starts_with('/') && d.len() > 5) {
            sweep(Path::new(old), &format!("pcl{n}"), &[]);
            let _ = fs::remove_dir_all(old);
        }
        let _ = fs::remove_dir_all(path);
    }

    fn bridge(&self) -> String {
        format!("pcl{}", self.n)
    }

    fn subnet(&self) -> String {
        format!("10.244.{}.0/24", self.n)
    }

    fn release(&self) {
        let _ = fs::remove_dir_all(Path::new(SLOT_DIR).join(self.n.to_string()));
    }
}

// ---------------------------------------------------------------------------
// Cleanup of everything a containerd instance may leave behind
// ---------------------------------------------------------------------------

/// Best-effort removal of what lives under `dir` or was made for it: runc
/// containers (its private runc root), shims and daemons whose command line
/// names `dir`, mounts under `dir`, the bridge, and the given cgroup roots.
/// Safe to call repeatedly; never panics.
fn sweep(dir: &Path, bridge: &str, cgroup_roots: &[String]) {
    let dir_s = dir.to_string_lossy().to_string();
    if dir_s.len() < 5 || !dir.is_absolute() {
        return; // never sweep something like "/" by mistake
    }

    // 1. Containers in our private runc root: CRI's runtime Root is
    //    `<dir>/runc`, and the shim adds the namespace; ctr runs pointed at
    //    the same root do the same. Any dir holding a state.json is a
    //    container whose parent is a runc root.
    for (root, id) in runc_containers(&dir.join("runc"), 3) {
        run_quiet(
            Command::new("runc")
                .arg("--root")
                .arg(&root)
                .args(["kill", &id, "KILL"]),
            Duration::from_secs(10),
        );
        run_quiet(
            Command::new("runc")
                .arg("--root")
                .arg(&root)
                .args(["delete", "--force", &id]),
            Duration::from_secs(20),
        );
    }

    // 2. Processes started for this dir: containerd itself and its shims
    //    (their command line carries our socket path).
    let me = std::process::id();
    if let Ok(procs) = fs::read_dir("/proc") {
        for p in procs.flatten() {
            let Ok(pid) = p.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(cmdline) = fs::read(p.path().join("cmdline")) else {
                continue;
            };
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(&dir_s) {
                signal(pid, "KILL");
            }
        }
    }

    // 3. Mounts under dir (rootfs overlays, netns bind mounts, shm), deepest
    //    first; lazily if busy.
    for _ in 0..3 {
        let mounts = mounts_under(dir);
        if mounts.is_empty() {
            break;
        }
        for m in mounts {
            if !run_quiet(Command::new("umount").arg(&m), Duration::from_secs(10)) {
                run_quiet(
                    Command::new("umount").arg("-l").arg(&m),
                    Duration::from_secs(10),
                );
            }
        }
    }

    // 4. The bridge (veth peers vanish with their network namespaces).
    if !bridge.is_empty() && Path::new(&format!("/sys/class/net/{bridge}")).exists() {
        run_quiet(
            Command::new("ip").args(["link", "del", bridge]),
            Duration::from_secs(10),
        );
    }

    // 5. Cgroups made under the pods' cgroup roots, in every hierarchy.
    for root in cgroup_roots {
        remove_cgroup_tree(root);
    }
}

/// Mount points at or below `dir`, deepest first.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mountinfo)
        .map(PathBuf::from)
        .filter(|m| m.starts_with(dir))
        .collect();
    found.sort_by_key(|m| std::cmp::Reverse(m.as_os_str().len()));
    found.dedup();
    found
}

/// mountinfo escapes space, tab, newline and backslash as \ooo.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            if let Some(v) = std::str::from_utf8(&b[i + 1..i + 4])
                .ok()
                .and_then(|o| u8::from_str_radix(o, 8).ok())
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// (runc root, container id) for every runc container state below `dir`.
fn runc_containers(dir: &Path, depth: usize) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let path = e.path();
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if path.join("state.json").is_file() {
            found.push((
                dir.to_path_buf(),
                e.file_name().to_string_lossy().into_owned(),
            ));
        } else if depth > 1 {
            found.extend(runc_containers(&path, depth - 1));
        }
    }
    found
}

/// Removes `/sys/fs/cgroup/<hierarchy><root>` depth-first in every hierarchy
/// (cgroup v1 controllers and the unified mount), SIGKILLing whatever still
/// runs in it, and retrying for a while as processes exit.
fn remove_cgroup_tree(root: &str) {
    let root = root.trim_start_matches('/');
    if root.is_empty() || root.contains("..") {
        return;
    }
    let mut tops = vec![PathBuf::from("/sys/fs/cgroup").join(root)];
    if let Ok(hs) = fs::read_dir("/sys/fs/cgroup") {
        for h in hs.flatten() {
            if h.file_type().is_ok_and(|t| t.is_dir()) {
                tops.push(h.path().join(root));
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    for top in tops {
        loop {
            if !top.exists() {
                break;
            }
            kill_cgroup_tree(&top);
            if rmdir_tree(&top) || Instant::now() > deadline {
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

fn kill_cgroup_tree(dir: &Path) {
    if let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) {
        for pid in procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
            signal(pid, "KILL");
        }
    }
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                kill_cgroup_tree(&e.path());
            }
        }
    }
}

fn rmdir_tree(dir: &Path) -> bool {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                rmdir_tree(&e.path());
            }
        }
    }
    fs::remove_dir(dir).is_ok() || !dir.exists()
}

// ---------------------------------------------------------------------------
// Containerd
// ---------------------------------------------------------------------------

/// A private containerd with the CRI plugin, the test images imported, and
/// a per-instance CNI bridge network. Dropping it tears everything down.
pub struct Containerd {
    dir: TempDir,
    child: Option<Child>,
    slot: NetSlot,
    snapshotter: &'static str,
    /// Pod cgroup roots of the Picolets started against us: swept on drop.
    cgroup_roots: Arc<Mutex<Vec<String>>>,
}

impl Containerd {
    /// Starts a fresh containerd and imports the test images. Panics with
    /// the tail of containerd's log if it does not come up.
    pub fn start() -> Containerd {
        let images = ensure_images();
        let dir = tempfile::Builder::new()
            .prefix("picolet-ctrd.")
            .tempdir()
            .expect("temp dir for containerd");
        let slot = NetSlot::claim(dir.path());
        let mut cd = Containerd {
            dir,
            child: None,
            slot,
            snapshotter: snapshotter(),
            cgroup_roots: Arc::new(Mutex::new(Vec::new())),
        };
        cd.write_config();
        cd.spawn();
        for name in BASE_IMAGES {
            cd.import(&images.join(format!("{name}.tar")));
        }
        cd
    }

    /// Builds (if needed) and imports the extra test image `name`, e.g.
    /// `grpc-health` for `docker.io/picolet/grpc-health:test`. Panics, naming
    /// what to install, if it cannot be built.
    pub fn import_test_image(&self, name: &str) {
        self.import(&ensure_image(name));
    }

    /// `ctr images import` of one OCI tarball; panics with containerd's log
    /// tail on failure.
    fn import(&self, path: &Path) {
        let out = self.ctr(&[
            "images",
            "import",
            "--snapshotter",
            self.snapshotter,
            path.to_str().expect("utf-8 image path"),
        ]);
        if !out.status.success() {
            panic!(
                "importing {}: {}\n{}\n--- containerd log ---\n{}",
                path.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr),
                tail(&self.log_path(), 40)
            );
        }
    }

    /// The temp dir everything of this instance lives in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The gRPC socket path.
    pub fn socket(&self) -> PathBuf {
        self.dir().join("containerd.sock")
    }

    /// The CRI endpoint, `unix://<socket>`.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// Where containerd's stdout and stderr go.
    pub fn log_path(&self) -> PathBuf {
        self.dir().join("containerd.log")
    }

    /// containerd's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The snapshotter in use (`overlayfs` or `native`).
    pub fn snapshotter(&self) -> &'static str {
        self.snapshotter
    }

    /// The runc root given to the runc shim (CRI's runtime `Root`); the shim
    /// keeps state in `<runc_root>/<namespace>`. Pass it to `ctr run
    /// --runc-root` so the cleanup finds such containers too.
    pub fn runc_root(&self) -> PathBuf {
        self.dir().join("runc")
    }

    /// The CNI bridge of this instance, e.g. `pcl17`.
    pub fn bridge(&self) -> String {
        self.slot.bridge()
    }

    /// The pod subnet of this instance, e.g. `10.244.17.0/24`.
    pub fn subnet(&self) -> String {
        self.slot.subnet()
    }

    /// True while the daemon process runs.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Runs `ctr --address <sock> -n k8s.io ARGS...` and returns its output.
    /// Panics only if ctr cannot be run or hangs past a generous deadline.
    pub fn ctr(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("ctr");
        cmd.arg("--address")
            .arg(self.socket())
            .args(["-n", K8S_NAMESPACE])
            .args(args);
        run_with_timeout(&mut cmd, CTR_TIMEOUT)
            .unwrap_or_else(|| panic!("ctr {args:?} did not finish within {CTR_TIMEOUT:?}"))
    }

    /// Like [`Containerd::ctr`], but panics unless ctr succeeds, and returns
    /// its stdout.
    pub fn ctr_ok(&self, args: &[&str]) -> String {
        let out = self.ctr(args);
        if !out.status.success() {
            panic!(
                "ctr {args:?} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Stops the daemon with SIGTERM (SIGKILL after a grace period). Shims and
    /// containers keep running, as with a real containerd restart.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            terminate(&mut child, GRACE);
        }
    }

    /// Stops and starts the daemon again with the same dirs and socket.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Registers a cgroup path (e.g. `/picolet-test-1-2`) whose tree is
    /// removed from every hierarchy when this containerd is dropped, after
    /// all containers are gone. [`Picolet`] registers its cgroupRoot.
    pub fn adopt_cgroup_root(&self, root: &str) {
        self.cgroup_roots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(root.to_string());
    }

    fn write_config(&self) {
        let d = self.dir();
        for sub in ["root", "state", "cni", "cni-ipam", "runc", "opt"] {
            fs::create_dir_all(d.join(sub)).expect("containerd dirs");
        }
        let p = |s: &str| d.join(s).display().to_string();
        let config = format!(
            r#"# Written by tests/harness for one test; see tests/harness/mod.rs.
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
            sock = self.socket().display(),
            opt = p("opt"),
            pause = PAUSE_IMAGE,
            snapshotter = self.snapshotter,
            runc = p("runc"),
            cni = p("cni"),
        );
        write_file(&d.join("config.toml"), &config);

        // The loopback interface is set up by the CRI plugin itself with
        // /usr/lib/cni/loopback; this list is the pod network proper. No
        // default route and no masquerading: pods reach only their /24.
        let conflist = format!(
            r#"{{
  "cniVersion": "1.0.0",
  "name": "picolet-test-{n}",
  "plugins": [
    {{
      "type": "bridge",
      "bridge": "{bridge}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {{
        "type": "host-local",
        "ranges": [[{{ "subnet": "{subnet}" }}]],
        "dataDir": "{ipam}"
      }}
    }},
    {{
      "type": "portmap",
      "capabilities": {{ "portMappings": true }}
    }}
  ]
}}
"#,
            n = self.slot.n,
            bridge = self.slot.bridge(),
            subnet = self.slot.subnet(),
            ipam = p("cni-ipam"),
        );
        write_file(&d.join("cni/10-picolet-test.conflist"), &conflist);
    }

    fn spawn(&mut self) {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("containerd log file");
        let _ = fs::remove_file(self.socket());
        let child = Command::new("containerd")
            .arg("--config")
            .arg(self.dir().join("config.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning containerd (is it installed? `make deps`): {e}"));
        self.child = Some(child);

        let start = Instant::now();
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!(
                    "containerd exited during startup ({status})\n--- {} ---\n{}",
                    self.log_path().display(),
                    tail(&self.log_path(), 40)
                );
            }
            let ready = self.socket().exists()
                && run_quiet(
                    Command::new("ctr")
                        .arg("--address")
                        .arg(self.socket())
                        .args(["--timeout", "5s", "version"]),
                    Duration::from_secs(10),
                );
            if ready {
                return;
            }
            if start.elapsed() > CONTAINERD_READY_TIMEOUT {
                panic!(
                    "containerd did not answer on {} within {CONTAINERD_READY_TIMEOUT:?}\n--- {} ---\n{}",
                    self.socket().display(),
                    self.log_path().display(),
                    tail(&self.log_path(), 40)
                );
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!(
                "--- containerd log tail ({}) ---\n{}\n--- end of containerd log ---",
                self.log_path().display(),
                tail(&self.log_path(), 30)
            );
        }
        self.stop();
        let roots = self
            .cgroup_roots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        sweep(self.dir.path(), &self.slot.bridge(), &roots);
        self.slot.release();
        if std::env::var_os("PICOLET_TEST_KEEP").is_some() && !thread::panicking() {
            let kept = std::mem::replace(&mut self.dir, TempDir::new().expect("temp dir")).keep();
            eprintln!("PICOLET_TEST_KEEP: kept {}", kept.display());
        }
    }
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
}

impl Picolet {
    /// Starts picolet against `containerd` with the default test config.
    pub fn start(containerd: &Containerd) -> Picolet {
        Picolet::start_with(containerd, "")
    }

    /// Like [`Picolet::start`], appending `extra_config` (top-level YAML keys
    /// of the KubeletConfiguration that the default does not set) to the
    /// config file.
    pub fn start_with(containerd: &Containerd, extra_config: &str) -> Picolet {
        Picolet::start_with_args(containerd, extra_config, |_| Vec::new())
    }

    /// Like [`Picolet::start_with`], with more flags on the command line,
    /// made by `args` from the instance (its node name is known by then:
    /// `--kubeconfig` with that node's credential, say).
    pub fn start_with_args(
        containerd: &Containerd,
        extra_config: &str,
        args: impl FnOnce(&Picolet) -> Vec<String>,
    ) -> Picolet {
        let dir = tempfile::Builder::new()
            .prefix("picolet-test.")
            .tempdir()
            .expect("temp dir for picolet");
        let n = next_instance();
        let pid = std::process::id();
        let hostname = format!("picolet-test-{pid}-{n}");
        let cgroup_root = format!("/picolet-test-{pid}-{n}");
        containerd.adopt_cgroup_root(&cgroup_root);
        let mut p = Picolet {
            dir,
            child: None,
            hostname,
            cgroup_root,
            extra_args: Vec::new(),
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
             fileCheckFrequency: 2s\n\
             {sync}\
             {extra}",
            manifests = p.manifests_dir().display(),
            endpoint = containerd.endpoint(),
            cgroup_root = p.cgroup_root,
            logs = p.logs_dir().display(),
            // Tests resync every 10 s unless they choose (the bench uses
            // kubelet's default, 1m, to compare like with like).
            sync = if extra_config.contains("syncFrequency:") {
                ""
            } else {
                "syncFrequency: 10s\n"
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
            if UnixStream::connect(self.admin_socket()).is_ok() {
                return;
            }
            if start.elapsed() > PICOLET_READY_TIMEOUT {
                panic!(
                    "picolet did not open {} within {PICOLET_READY_TIMEOUT:?}\n--- {} ---\n{}",
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
        }
    }
}

/// The picolet binary under test: `$PICOLET_BIN` if set (`make bench` uses
/// the static musl build that boards ship), else the one cargo built.
pub fn picolet_bin() -> PathBuf {
    std::env::var_os("PICOLET_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_picolet")))
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
