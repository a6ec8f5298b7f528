//! The container runtime a test runs picolet against -- owned by the test
//! harness (tests/harness).
//!
//! [`ContainerRuntime`] is a private containerd or CRI-O
//! (`PICOLET_TEST_RUNTIME=containerd|crio`, [`runtime_kind`]) in a fresh
//! temp dir: own root, state, socket, runc root, log and CNI bridge/subnet
//! (a [`NetSlot`]), with the base test images imported, and a cleanup that
//! does not leak runc processes, mounts, network namespaces, bridges or
//! cgroups even when the test panicked. The runtime-specific parts (config,
//! command, readiness, image import) live in [`super::containerd`] and
//! [`super::crio`]; what they share (slots, CNI config, cleanup) is here.
//!
//! A test that cannot hold on one runtime calls [`only_on`] and carries
//! `only_on_<kind>` in its name, so that `make test` skips it on the other
//! runtime by name, in plain sight ("N filtered out"), and a run that does
//! not skip it fails with the reason.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::{
    containerd, crio, ensure_image, ensure_images, next_instance, run_quiet, signal, tail,
    terminate, write_file, DirLock, BASE_IMAGES, GRACE,
};

/// How long a runtime gets to answer on its socket after being spawned.
const RUNTIME_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Where harness instances claim their network slot (bridge + /24).
const SLOT_DIR: &str = "/run/picolet-test/slots";
/// Slots: bridge `pcl<N>` and subnet 10.244.N.0/24 for N in 1..=SLOTS.
const SLOTS: usize = 250;

// ---------------------------------------------------------------------------
// Which runtime
// ---------------------------------------------------------------------------

/// The container runtimes picolet is tested against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeKind {
    Containerd,
    Crio,
}

impl RuntimeKind {
    /// `$PICOLET_TEST_RUNTIME`: `containerd` (also when unset or empty) or
    /// `crio`. Panics on anything else, naming both.
    pub fn from_env() -> RuntimeKind {
        match std::env::var("PICOLET_TEST_RUNTIME").as_deref() {
            Err(_) | Ok("") | Ok("containerd") => RuntimeKind::Containerd,
            Ok("crio") | Ok("cri-o") => RuntimeKind::Crio,
            Ok(other) => {
                panic!("PICOLET_TEST_RUNTIME={other:?}: expected \"containerd\" or \"crio\"")
            }
        }
    }

    /// The name the runtime gives itself in CRI's `Version`
    /// (`runtime_name`): `containerd` or `cri-o`.
    pub fn runtime_name(self) -> &'static str {
        match self {
            RuntimeKind::Containerd => "containerd",
            RuntimeKind::Crio => "cri-o",
        }
    }

    /// The value of `PICOLET_TEST_RUNTIME` that selects it, as test names
    /// spell it (`only_on_containerd`, `only_on_crio`).
    pub fn env_value(self) -> &'static str {
        match self {
            RuntimeKind::Containerd => "containerd",
            RuntimeKind::Crio => "crio",
        }
    }
}

/// The runtime this test process runs on ([`RuntimeKind::from_env`], read
/// once).
pub fn runtime_kind() -> RuntimeKind {
    static KIND: OnceLock<RuntimeKind> = OnceLock::new();
    *KIND.get_or_init(RuntimeKind::from_env)
}

/// For a test that cannot hold on every runtime (its name ends in
/// `only_on_<kind>`): panics unless this process runs on `kind`, with
/// `why`, which cites the other runtime's documented behaviour. A test that
/// cannot hold fails; it never passes by doing nothing.
pub fn only_on(kind: RuntimeKind, why: &str) {
    let now = runtime_kind();
    assert!(
        now == kind,
        "this test holds only on {} and this run is on {} (PICOLET_TEST_RUNTIME={}): {why}\n\
         `make test` skips it there by name (`--skip only_on_{}`).",
        kind.runtime_name(),
        now.runtime_name(),
        now.env_value(),
        kind.env_value(),
    );
}

// ---------------------------------------------------------------------------
// Storage
// ---------------------------------------------------------------------------

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

/// A claimed network slot N: bridge `pcl<N>`, subnet `10.244.N.0/24`.
/// Claimed by creating `SLOT_DIR/<N>` (holding the owner's pid and temp dir,
/// and the cgroup roots made for it); the slots of owners that are gone are
/// swept (their leftovers cleaned) and freed at every claim.
struct NetSlot {
    n: usize,
}

impl NetSlot {
    fn claim(dir: &Path) -> NetSlot {
        fs::create_dir_all(SLOT_DIR).unwrap_or_else(|e| panic!("creating {SLOT_DIR}: {e}"));
        // One claim at a time, across processes: a slot swept as dead must
        // not be claimed afresh meanwhile and then swept again.
        let _lock = DirLock::take(Path::new(SLOT_DIR)).unwrap_or_else(|e| panic!("{e}"));
        Self::reclaim_dead();
        let me = std::process::id();
        let start = (me as usize * 7 + next_instance() * 13) % SLOTS;
        for i in 0..SLOTS {
            let n = (start + i) % SLOTS + 1;
            let path = Path::new(SLOT_DIR).join(n.to_string());
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
        panic!("no free network slot in {SLOT_DIR} (all {SLOTS} taken by live test processes)");
    }

    /// Frees the slots of test processes that died without dropping their
    /// runtime (SIGKILL, an abort), sweeping what they left behind: a
    /// runtime's containers outlive it (shims, conmons), and would run on
    /// until the next claim of the same slot otherwise.
    fn reclaim_dead() {
        let Ok(entries) = fs::read_dir(SLOT_DIR) else {
            return;
        };
        for e in entries.flatten() {
            if let Ok(n) = e.file_name().to_string_lossy().parse::<usize>() {
                Self::reclaim_if_dead(n, &e.path());
            }
        }
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
        let listed = |file: &str| -> Vec<String> {
            let text = fs::read_to_string(path.join(file)).unwrap_or_default();
            text.lines()
                .filter(|l| l.starts_with('/') && l.len() > 5)
                .map(str::to_string)
                .collect()
        };
        // The picolets first, so that none restarts a pod meanwhile.
        for dir in listed("picolets") {
            kill_processes_naming(&dir);
            let _ = fs::remove_dir_all(dir);
        }
        if let Some(old) = lines.next().filter(|d| d.starts_with('/') && d.len() > 5) {
            sweep(Path::new(old), &format!("pcl{n}"), &listed("cgroups"));
            let _ = fs::remove_dir_all(old);
        }
        let _ = fs::remove_dir_all(path);
    }

    /// Notes, in `file` of the slot, a line for [`NetSlot::reclaim_if_dead`]
    /// to clean up should the owner die without doing it: a cgroup root
    /// (`cgroups`) or the temp dir of a picolet (`picolets`).
    fn record(&self, file: &str, line: &str) {
        let path = Path::new(SLOT_DIR).join(self.n.to_string()).join(file);
        if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "{line}");
        }
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
// Cleanup of everything a runtime instance may leave behind
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

    // 1. Containers in our private runc root, `<dir>/runc`: containerd's
    //    shim adds the namespace below it (ctr runs pointed at the same root
    //    do the same), CRI-O's runtime_root is that folder itself. Any dir
    //    holding a state.json is a container whose parent is a runc root.
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

    // 2. Processes started for this dir: the daemon itself and its shims
    //    or conmons (their command lines carry paths in dir).
    kill_processes_naming(&dir_s);

    // 3. Mounts under dir (rootfs overlays, netns bind mounts, shm).
    unmount_under(dir);

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

/// SIGKILLs every process (but this one) whose command line contains `s`.
fn kill_processes_naming(s: &str) {
    let me = std::process::id();
    let Ok(procs) = fs::read_dir("/proc") else {
        return;
    };
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
        if String::from_utf8_lossy(&cmdline)
            .replace('\0', " ")
            .contains(s)
        {
            signal(pid, "KILL");
        }
    }
}

/// Mount points at or below `dir`, deepest first.
/// Unmounts every mount point under `dir`, deepest first; lazily when one
/// is busy. Used by the runtime's sweep and by a picolet's cleanup (its
/// tmpfs volumes), so that the temp dirs can go.
pub fn unmount_under(dir: &Path) {
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
}

/// The mount points under `dir` (by /proc/self/mountinfo), deepest first.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
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

/// Writes `dir/cni/10-picolet-test.conflist`: the pod network of the
/// runtime in `dir` (both runtimes read CNI config from `dir/cni`). Both set
/// up the loopback interface themselves with /usr/lib/cni/loopback; this
/// list is the pod network proper. No default route and no masquerading:
/// pods reach only their /24.
fn write_conflist(dir: &Path, slot: &NetSlot) {
    for sub in ["cni", "cni-ipam"] {
        fs::create_dir_all(dir.join(sub)).expect("CNI dirs");
    }
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
        n = slot.n,
        bridge = slot.bridge(),
        subnet = slot.subnet(),
        ipam = dir.join("cni-ipam").display(),
    );
    write_file(&dir.join("cni/10-picolet-test.conflist"), &conflist);
}

// ---------------------------------------------------------------------------
// The runtime
// ---------------------------------------------------------------------------

/// A private containerd or CRI-O with the base test images imported and a
/// per-instance CNI bridge network. Dropping it tears everything down.
pub struct ContainerRuntime {
    kind: RuntimeKind,
    dir: TempDir,
    child: Option<Child>,
    slot: NetSlot,
    snapshotter: &'static str,
    /// Pod cgroup roots of the Picolets started against us: swept on drop.
    cgroup_roots: Arc<Mutex<Vec<String>>>,
    /// The temp dirs of the Picolets started against us: see
    /// [`ContainerRuntime::adopt_picolet_dir`].
    picolet_dirs: Arc<Mutex<Vec<PathBuf>>>,
}

/// The name the test files were written with; it is the runtime of
/// [`runtime_kind`], containerd or CRI-O.
pub type Containerd = ContainerRuntime;

impl ContainerRuntime {
    /// Starts a fresh runtime of [`runtime_kind`] and imports the base test
    /// images. Panics with the tail of the runtime's log if it does not
    /// come up.
    pub fn start() -> ContainerRuntime {
        ContainerRuntime::start_kind(runtime_kind())
    }

    /// Like [`ContainerRuntime::start`], for a given runtime.
    pub fn start_kind(kind: RuntimeKind) -> ContainerRuntime {
        let images = ensure_images();
        let dir = tempfile::Builder::new()
            .prefix(match kind {
                RuntimeKind::Containerd => "picolet-ctrd.",
                RuntimeKind::Crio => "picolet-crio.",
            })
            .tempdir()
            .expect("temp dir for the container runtime");
        let snapshotter = snapshotter();
        // Before a slot is claimed or a daemon started: a missing crio
        // fails here, saying what to set.
        match kind {
            RuntimeKind::Containerd => containerd::write_config(dir.path(), snapshotter),
            RuntimeKind::Crio => crio::write_config(dir.path(), crio::storage_driver(snapshotter)),
        }
        let slot = NetSlot::claim(dir.path());
        write_conflist(dir.path(), &slot);
        let mut rt = ContainerRuntime {
            kind,
            dir,
            child: None,
            slot,
            snapshotter,
            cgroup_roots: Arc::new(Mutex::new(Vec::new())),
            picolet_dirs: Arc::new(Mutex::new(Vec::new())),
        };
        rt.spawn();
        for name in BASE_IMAGES {
            rt.import(&images.join(format!("{name}.tar")));
        }
        rt
    }

    /// Which runtime this is.
    pub fn kind(&self) -> RuntimeKind {
        self.kind
    }

    /// Builds (if needed) and imports the extra test image `name`, e.g.
    /// `grpc-health` for `docker.io/picolet/grpc-health:test`. Panics, naming
    /// what to install, if it cannot be built.
    pub fn import_test_image(&self, name: &str) {
        self.import(&ensure_image(name));
    }

    /// Imports one OCI tarball (`ctr images import`, or `skopeo copy` into
    /// CRI-O's store); panics with the runtime's log tail on failure.
    fn import(&self, path: &Path) {
        let done = match self.kind {
            RuntimeKind::Containerd => containerd::import(self.dir(), self.snapshotter, path),
            RuntimeKind::Crio => crio::import(self.dir(), self.storage_driver(), path),
        };
        if let Err(e) = done {
            panic!(
                "importing {}: {e}\n--- {} ---\n{}",
                path.display(),
                self.log_path().display(),
                tail(&self.log_path(), 40)
            );
        }
    }

    /// True if the runtime's image store has `name` (a full reference, e.g.
    /// [`super::BUSYBOX_IMAGE`]), asked with the runtime's own tools (`ctr`,
    /// `skopeo`), not through the CRI.
    pub fn has_image(&self, name: &str) -> bool {
        match self.kind {
            RuntimeKind::Containerd => containerd::has_image(self.dir(), name),
            RuntimeKind::Crio => crio::has_image(self.dir(), self.storage_driver(), name),
        }
    }

    /// The temp dir everything of this instance lives in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The CRI socket path.
    pub fn socket(&self) -> PathBuf {
        match self.kind {
            RuntimeKind::Containerd => containerd::socket(self.dir()),
            RuntimeKind::Crio => crio::socket(self.dir()),
        }
    }

    /// The CRI endpoint, `unix://<socket>`.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// Where the daemon's stdout and stderr go.
    pub fn log_path(&self) -> PathBuf {
        self.dir().join(match self.kind {
            RuntimeKind::Containerd => "containerd.log",
            RuntimeKind::Crio => "crio.log",
        })
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The containerd snapshotter the overlay probe chose (`overlayfs` or
    /// `native`); CRI-O uses the matching [`ContainerRuntime::storage_driver`].
    pub fn snapshotter(&self) -> &'static str {
        self.snapshotter
    }

    /// CRI-O's containers-storage driver: `overlay` or `vfs`.
    pub fn storage_driver(&self) -> &'static str {
        crio::storage_driver(self.snapshotter)
    }

    /// The runc root (containerd: CRI's runtime `Root`, the shim adds the
    /// namespace; CRI-O: `runtime_root`). Pass it to `ctr run --runc-root`
    /// so the cleanup finds such containers too.
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
    /// containerd only: ctr is containerd's client, and a test that needs
    /// it on CRI-O panics here (use [`ContainerRuntime::has_image`] or the
    /// CRI, or [`only_on`]).
    pub fn ctr(&self, args: &[&str]) -> Output {
        assert!(
            self.kind == RuntimeKind::Containerd,
            "ctr {args:?}: ctr is containerd's client and this runtime is CRI-O \
             (PICOLET_TEST_RUNTIME=crio); ask through the CRI or a runtime-neutral helper"
        );
        containerd::ctr(self.dir(), args)
    }

    /// Like [`ContainerRuntime::ctr`], but panics unless ctr succeeds, and
    /// returns its stdout.
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

    /// Stops the daemon with SIGTERM (SIGKILL after a grace period).
    /// Containers keep running (containerd's shims, CRI-O's conmons), as
    /// with a real runtime restart.
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
    /// removed from every hierarchy when this runtime is dropped, after
    /// all containers are gone. [`super::Picolet`] registers its cgroupRoot.
    pub fn adopt_cgroup_root(&self, root: &str) {
        self.slot.record("cgroups", root);
        self.cgroup_roots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(root.to_string());
    }

    /// Notes the temp dir of a [`super::Picolet`] started against us: if
    /// this test process dies without dropping it, the next claim of a
    /// network slot kills that picolet (found by its command line) with the
    /// runtime's leftovers. And once this runtime has stopped, the dir is
    /// removed if it is there again: a sandbox picolet asked for just
    /// before it was stopped is still finished by the runtime, and CRI-O
    /// creates the pod's log directory (with its parents) as it does, after
    /// the Picolet removed its temp dir (seen in CI: the eviction test's
    /// static hog, coming back as picolet stopped).
    pub fn adopt_picolet_dir(&self, dir: &Path) {
        self.slot.record("picolets", &dir.display().to_string());
        self.picolet_dirs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(dir.to_path_buf());
    }

    fn spawn(&mut self) {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("runtime log file");
        let _ = fs::remove_file(self.socket());
        let mut cmd = match self.kind {
            RuntimeKind::Containerd => containerd::command(self.dir()),
            RuntimeKind::Crio => crio::command(self.dir()),
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {cmd:?} (is it installed? `make deps`): {e}"));
        self.child = Some(child);

        let name = self.kind.runtime_name();
        let start = Instant::now();
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!(
                    "{name} exited during startup ({status})\n--- {} ---\n{}",
                    self.log_path().display(),
                    tail(&self.log_path(), 40)
                );
            }
            let ready = match self.kind {
                RuntimeKind::Containerd => containerd::answers(self.dir()),
                RuntimeKind::Crio => crio::answers(self.dir()),
            };
            if ready {
                return;
            }
            if start.elapsed() > RUNTIME_READY_TIMEOUT {
                panic!(
                    "{name} did not answer on {} within {RUNTIME_READY_TIMEOUT:?}\n--- {} ---\n{}",
                    self.socket().display(),
                    self.log_path().display(),
                    tail(&self.log_path(), 40)
                );
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for ContainerRuntime {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!(
                "--- {name} log tail ({}) ---\n{}\n--- end of {name} log ---",
                self.log_path().display(),
                tail(&self.log_path(), 30),
                name = self.kind.runtime_name(),
            );
        }
        self.stop();
        if std::env::var_os("PICOLET_TEST_KEEP").is_none() {
            for dir in self
                .picolet_dirs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                // Gone (as the Picolet left it) unless the runtime made it
                // again; nothing is mounted there by then.
                let _ = fs::remove_dir_all(dir);
            }
        }
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
