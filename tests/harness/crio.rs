//! A private CRI-O for the integration tests -- owned by the test harness
//! (tests/harness).
//!
//! What [`super::ContainerRuntime`] needs to run CRI-O instead of
//! containerd (`PICOLET_TEST_RUNTIME=crio`): where `crio` and `pinns` come
//! from ([`binaries`]), the config that keeps one instance inside its temp
//! dir ([`write_config`]: own root, runroot, socket, log, exits, attach and
//! namespaces dirs, CNI config, runc root), the runc wrapper this machine
//! needs, and the image store, filled with `skopeo` from the OCI tarballs
//! of `tests/images/build-images.sh` ([`import`], [`has_image`]).
//!
//! `crio` and `pinns` are looked for the way the control plane's binaries
//! are, first match wins:
//! 1. `$CRIO_ASSETS`: a folder with `crio` and `pinns`, each plain or as
//!    `<name>.xz`. When set, it is the only place looked at.
//! 2. `<repo>/../shared/cri-o` (read-only in CI): `.xz` files with
//!    `SHA256SUMS`, and a README table with the unpacked checksums.
//! 3. The official static release bundle of [`CRIO_VERSION`], only with
//!    `CRIO_ASSETS_DOWNLOAD=1` (a test run fetches nothing unless asked),
//!    checked against the `.sha256sum` published beside it.
//!
//! Unpacked and downloaded binaries are cached in `<target>/crio-assets/`
//! (see [`super::assets`]). Everything else comes from Debian (`make deps`):
//! `conmon`, `runc`, `skopeo`, the CNI plugins and crio's shared libraries.
//!
//! The differences in CRI behaviour between CRI-O and containerd are
//! picolet's business, not the harness's: see `../shared/notes/runtimes.md`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use super::assets;
use super::{run_with_timeout, write_file, PAUSE_IMAGE};

/// The release the download fetches: that of `../shared/cri-o`.
pub const CRIO_VERSION: &str = "v1.37.0";
/// The conmon Debian packages, which CRI-O runs as the container monitor.
const CONMON: &str = "/usr/bin/conmon";
/// Upper bound for one `skopeo` or `crio status` invocation.
const TOOL_TIMEOUT: Duration = Duration::from_secs(120);
/// The OCI runtime CRI-O is given: runc behind a wrapper that clamps
/// `process.oomScoreAdj` (the script says why).
const RUNC_WRAPPER: &str = include_str!("runc-clamp-oom.sh");

/// The CRI-O executables.
pub struct Binaries {
    pub crio: PathBuf,
    pub pinns: PathBuf,
}

/// `crio` and `pinns`, located (and unpacked or downloaded) once per
/// process. Panics saying what to set when they cannot be found.
pub fn binaries() -> &'static Binaries {
    static FOUND: OnceLock<Binaries> = OnceLock::new();
    FOUND.get_or_init(|| {
        locate(
            std::env::var_os("CRIO_ASSETS")
                .map(PathBuf::from)
                .as_deref(),
            &shared_dir(),
            std::env::var("CRIO_ASSETS_DOWNLOAD").as_deref() == Ok("1"),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    })
}

/// `<repo>/../shared/cri-o`.
pub fn shared_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/cri-o")
}

fn cache() -> PathBuf {
    assets::cache_root("crio-assets")
}

/// The lookup, with the environment passed in: `crio_assets` is
/// `$CRIO_ASSETS`, `shared` the shared folder, `download` whether the
/// release bundle may be fetched.
pub fn locate(
    crio_assets: Option<&Path>,
    shared: &Path,
    download: bool,
) -> Result<Binaries, String> {
    let from = |dir: &Path| -> Result<Binaries, String> {
        Ok(Binaries {
            crio: assets::from_folder(dir, "crio", &cache())?,
            pinns: assets::from_folder(dir, "pinns", &cache())?,
        })
    };
    if let Some(dir) = crio_assets {
        return from(dir)
            .map_err(|e| format!("CRIO_ASSETS={}: {e}\n{}", dir.display(), WHAT_TO_SET));
    }
    let shared_err = match from(shared) {
        Ok(b) => return Ok(b),
        Err(e) => e,
    };
    let download_err = if download {
        match download_bundle() {
            Ok(b) => return Ok(b),
            Err(e) => e,
        }
    } else {
        "not tried: set CRIO_ASSETS_DOWNLOAD=1 to allow it".to_string()
    };
    Err(format!(
        "cannot find CRI-O (crio and pinns) for PICOLET_TEST_RUNTIME=crio:\n\
         - CRIO_ASSETS: not set\n\
         - {}: {shared_err}\n\
         - release bundle ({}): {download_err}\n{WHAT_TO_SET}",
        shared.display(),
        bundle_url(),
    ))
}

const WHAT_TO_SET: &str = "Set CRIO_ASSETS to a folder with crio and pinns (plain or .xz), or \
     put them in ../shared/cri-o beside the repo, or set CRIO_ASSETS_DOWNLOAD=1 on a machine \
     with internet access; or run the tests on containerd (PICOLET_TEST_RUNTIME=containerd).";

/// The official static bundle for this machine's architecture.
fn bundle_url() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("https://storage.googleapis.com/cri-o/artifacts/cri-o.{arch}.{CRIO_VERSION}.tar.gz")
}

/// Fetches the release bundle and its published checksum, verifies it, and
/// unpacks `crio` and `pinns` from its `cri-o/bin/` into the cache, once.
fn download_bundle() -> Result<Binaries, String> {
    let url = bundle_url();
    let dir = cache().join(format!("release-{CRIO_VERSION}"));
    let done = Binaries {
        crio: dir.join("crio"),
        pinns: dir.join("pinns"),
    };
    if assets::is_executable(&done.crio) && assets::is_executable(&done.pinns) {
        return Ok(done);
    }
    let _lock = super::DirLock::take(&dir)?;
    if assets::is_executable(&done.crio) && assets::is_executable(&done.pinns) {
        return Ok(done);
    }
    let tarball = dir.join("bundle.tar.gz");
    let sums = dir.join("bundle.tar.gz.sha256sum");
    assets::download(&format!("{url}.sha256sum"), &sums)?;
    let want = fs::read_to_string(&sums)
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_lowercase))
        .ok_or_else(|| format!("{url}.sha256sum has no checksum"))?;
    assets::download(&url, &tarball)?;
    assets::check_sum(&tarball, &want, &format!("{url}.sha256sum"))?;
    let staging = dir.join(format!(".unpack.{}", std::process::id()));
    fs::create_dir_all(&staging).map_err(|e| format!("creating {}: {e}", staging.display()))?;
    let out = Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&staging)
        .args(["--strip-components=2", "cri-o/bin/crio", "cri-o/bin/pinns"])
        .output()
        .map_err(|e| format!("running tar: {e}"))?;
    let result = if out.status.success() {
        assets::install(&staging.join("crio"), &done.crio)
            .and_then(|()| assets::install(&staging.join("pinns"), &done.pinns))
    } else {
        Err(format!(
            "unpacking {}: {}",
            tarball.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    };
    let _ = fs::remove_dir_all(&staging);
    let _ = fs::remove_file(&tarball);
    result.map(|()| done)
}

/// containers-storage's driver for the harness's snapshotter probe
/// ([`super::snapshotter`]): `overlay` where an overlay mount works, else
/// `vfs` (a full copy per layer, as containerd's `native`).
pub fn storage_driver(snapshotter: &str) -> &'static str {
    if snapshotter == "overlayfs" {
        "overlay"
    } else {
        "vfs"
    }
}

/// The containers-storage location of an instance in `dir`, as skopeo
/// names it: `[driver@root+runroot]`.
fn store(dir: &Path, driver: &str) -> String {
    format!(
        "[{driver}@{}+{}]",
        dir.join("root").display(),
        dir.join("runroot").display()
    )
}

/// Writes `crio.conf`, the runc wrapper and the signature policy into
/// `dir`, and makes the directories they name. The CNI conflist is the
/// caller's (`dir/cni`, shared with containerd).
pub fn write_config(dir: &Path, driver: &str) {
    let bins = binaries();
    for sub in [
        "root", "runroot", "logs", "exits", "attach", "ns", "runc", "tmp", "conf.d", "cni",
    ] {
        fs::create_dir_all(dir.join(sub)).expect("crio dirs");
    }
    let p = |s: &str| dir.join(s).display().to_string();
    write_file(
        &dir.join("policy.json"),
        "{\"default\": [{\"type\": \"insecureAcceptAnything\"}]}\n",
    );
    let wrapper = dir.join("runc-clamp-oom.sh");
    write_file(&wrapper, RUNC_WRAPPER);
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).expect("chmod runc wrapper");
    let config = format!(
        r#"# Written by tests/harness for one test; see tests/harness/crio.rs.
[crio]
root = "{root}"
runroot = "{runroot}"
storage_driver = "{driver}"
log_dir = "{logs}"
version_file = "{runroot}/version"
version_file_persist = "{root}/version"
clean_shutdown_file = "{root}/clean.shutdown"

[crio.api]
listen = "{sock}"
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
conmon_cgroup = "pod"
pinns_path = "{pinns}"
container_exits_dir = "{exits}"
container_attach_socket_dir = "{attach}"
namespaces_dir = "{ns}"
# GetContainerEvents streams events only with this (picolet's evented PLEG).
enable_pod_events = true

# No CAP_SYS_RESOURCE here: the wrapper keeps runc from lowering
# oom_score_adj (CRI-O has no restrict_oom_score_adj). conmon runs it with
# monitor_env, CRI-O with its own environment: both name the real runc.
[crio.runtime.runtimes.runc]
runtime_path = "{wrapper}"
runtime_root = "{runc_root}"
monitor_path = "{conmon}"
monitor_env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "RUNC={runc}"]

[crio.image]
pause_image = "{pause}"
signature_policy = "{policy}"

[crio.network]
network_dir = "{cni}"
plugin_dirs = ["/usr/lib/cni"]

[crio.metrics]
enable_metrics = false

[crio.nri]
enable_nri = false
"#,
        root = p("root"),
        runroot = p("runroot"),
        logs = p("logs"),
        sock = socket(dir).display(),
        pinns = bins.pinns.display(),
        exits = p("exits"),
        attach = p("attach"),
        ns = p("ns"),
        wrapper = wrapper.display(),
        runc_root = p("runc"),
        runc = find_runc().display(),
        conmon = CONMON,
        pause = PAUSE_IMAGE,
        policy = p("policy.json"),
        cni = p("cni"),
    );
    write_file(&dir.join("crio.conf"), &config);
}

/// The CRI socket of the instance in `dir`.
pub fn socket(dir: &Path) -> PathBuf {
    dir.join("crio.sock")
}

/// The command that runs the instance in `dir` in the foreground. Its
/// temporary files (exec pid files, process specs) stay in `dir/tmp`.
pub fn command(dir: &Path) -> Command {
    let mut cmd = Command::new(&binaries().crio);
    cmd.arg("--config")
        .arg(dir.join("crio.conf"))
        .arg("--config-dir")
        .arg(dir.join("conf.d"))
        .env("TMPDIR", dir.join("tmp"))
        .env("RUNC", find_runc());
    cmd
}

/// True once the instance in `dir` answers on its socket (`crio status
/// info`, CRI-O's own client, on the socket the CRI is served on).
pub fn answers(dir: &Path) -> bool {
    let socket = socket(dir);
    socket.exists()
        && run_with_timeout(
            Command::new(&binaries().crio)
                .arg("status")
                .arg("--socket")
                .arg(&socket)
                .arg("info"),
            Duration::from_secs(10),
        )
        .is_some_and(|o| o.status.success())
}

/// `skopeo copy` of one OCI tarball into the instance's image store, under
/// every name build-images.sh gave it (its index's
/// `io.containerd.image.name`s, which `ctr images import` uses too). A
/// tarball of several names (agnhost's, the suite's busybox) is copied by
/// its first entry's `org.opencontainers.image.ref.name` (skopeo refuses
/// an archive of several images without one), and the store's copy is
/// then named again for each other name.
pub fn import(dir: &Path, driver: &str, tar: &Path) -> Result<(), String> {
    let names = image_names(tar)?;
    let store = store(dir, driver);
    let copy = |from: String, name: &str| -> Result<(), String> {
        let to = format!("containers-storage:{store}{name}");
        let out = skopeo(dir, &["copy", "--quiet", &from, &to])?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "skopeo copy {from} as {name}: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    let ((first, first_ref), rest) = names
        .split_first()
        .ok_or_else(|| format!("{}: index.json names no image", tar.display()))?;
    let source = match (rest.is_empty(), first_ref) {
        (true, _) => format!("oci-archive:{}", tar.display()),
        (false, Some(r)) => format!("oci-archive:{}:{r}", tar.display()),
        (false, None) => {
            return Err(format!(
                "{}: several images and no org.opencontainers.image.ref.name to pick the first",
                tar.display()
            ))
        }
    };
    copy(source, first)?;
    for (name, _) in rest {
        copy(format!("containers-storage:{store}{first}"), name)?;
    }
    Ok(())
}

/// True if the instance's image store has `name` (a full reference such as
/// `docker.io/library/busybox:latest`).
pub fn has_image(dir: &Path, driver: &str, name: &str) -> bool {
    skopeo(
        dir,
        &[
            "inspect",
            "--raw",
            &format!("containers-storage:{}{name}", store(dir, driver)),
        ],
    )
    .is_ok_and(|o| o.status.success())
}

fn skopeo(dir: &Path, args: &[&str]) -> Result<Output, String> {
    let mut cmd = Command::new("skopeo");
    cmd.arg("--policy")
        .arg(dir.join("policy.json"))
        .args(args)
        .env("TMPDIR", dir.join("tmp"));
    match run_with_timeout(&mut cmd, TOOL_TIMEOUT) {
        Some(out) => Ok(out),
        None => Err(format!(
            "skopeo {args:?} did not finish within {TOOL_TIMEOUT:?}"
        )),
    }
}

/// The names of the images of an OCI tarball, in its index's order: each
/// entry's `io.containerd.image.name`, with its
/// `org.opencontainers.image.ref.name` when it has one.
fn image_names(tar: &Path) -> Result<Vec<(String, Option<String>)>, String> {
    let out = Command::new("tar")
        .arg("-xOf")
        .arg(tar)
        .arg("index.json")
        .output()
        .map_err(|e| format!("running tar: {e}"))?;
    let index: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{}: index.json: {e}", tar.display()))?;
    let names: Vec<(String, Option<String>)> = index["manifests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let a = &m["annotations"];
            let name = a["io.containerd.image.name"].as_str()?.to_string();
            let r = a["org.opencontainers.image.ref.name"]
                .as_str()
                .map(str::to_string);
            Some((name, r))
        })
        .collect();
    if names.is_empty() {
        return Err(format!(
            "{}: index.json names no image (io.containerd.image.name)",
            tar.display()
        ));
    }
    Ok(names)
}

/// runc from PATH (Debian's is /usr/sbin/runc).
fn find_runc() -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join("runc"))
        .find(|p| assets::is_executable(p))
        .unwrap_or_else(|| panic!("runc not found in PATH (install it: `make deps`)"))
}
