//! Where the control plane's binaries come from -- owned by the test harness
//! (tests/harness/kube).
//!
//! Looked for the way controller-runtime's envtest does it, first match wins:
//! 1. `$KUBE_ASSETS`: a folder holding `etcd`, `kube-apiserver`, `kubectl`,
//!    `kube-controller-manager`, `kube-scheduler`, each unpacked or as
//!    `<name>.xz`. When set it is the only place looked at, so a wrong
//!    folder fails loudly instead of silently using another build.
//! 2. `<repo>/../shared/kube` (read-only in CI): `<name>.xz` with
//!    `SHA256SUMS`, and a README whose table has the unpacked checksums.
//! 3. The official release downloads (dl.k8s.io, etcd's GitHub release),
//!    only when `KUBE_ASSETS_DOWNLOAD=1`: like envtest, which never fetches
//!    by itself (setup-envtest does), a test run makes no network request
//!    unless asked to. Without network the download fails at once with
//!    curl's message.
//!
//! `.xz` files are unpacked once into `<target>/kube-assets/<sha256 of the
//! .xz>/` (or `$KUBE_ASSETS_CACHE`), checked against `SHA256SUMS` (the .xz)
//! and the README (the unpacked binary) when those list them, under a file
//! lock so concurrent test processes unpack each binary exactly once.
//! Uses the `xz`, `sha256sum`, `curl` and `tar` commands.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The versions the release download fetches (those of `shared/kube`).
pub const KUBERNETES_VERSION: &str = "v1.36.2";
pub const ETCD_VERSION: &str = "v3.6.13";

/// Every binary the harness may run.
pub const BINARIES: [&str; 5] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
];

/// The references beside them (`make conformance`, examples/conformance;
/// `make fleet`): upstream kubelet, the e2e suite, its runner, its
/// test-image binary and kubemark. Found the same way; of these only
/// kubelet is a release download.
pub const REFERENCE_BINARIES: [&str; 5] = ["kubelet", "e2e.test", "ginkgo", "agnhost", "kubemark"];

/// The path of an executable `name` (one of [`BINARIES`] or
/// [`REFERENCE_BINARIES`]), unpacking or
/// downloading it first if needed. Panics with what to set when it cannot
/// be found. Cached per process.
pub fn binary(name: &str) -> PathBuf {
    static FOUND: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let found = FOUND.get_or_init(|| Mutex::new(HashMap::new()));
    let mut found = found.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = found.get(name) {
        return p.clone();
    }
    let path = locate(name).unwrap_or_else(|e| panic!("{e}"));
    found.insert(name.to_string(), path.clone());
    path
}

/// `<repo>/../shared/kube`.
pub fn shared_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/kube")
}

/// Where unpacked and downloaded binaries are kept.
pub fn cache_root() -> PathBuf {
    if let Some(d) = std::env::var_os("KUBE_ASSETS_CACHE") {
        return PathBuf::from(d);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("kube-assets")
}

fn locate(name: &str) -> Result<PathBuf, String> {
    locate_in(
        name,
        std::env::var_os("KUBE_ASSETS")
            .map(PathBuf::from)
            .as_deref(),
        &shared_dir(),
        std::env::var("KUBE_ASSETS_DOWNLOAD").as_deref() == Ok("1"),
    )
}

/// The lookup itself, with the environment passed in: `kube_assets` is
/// `$KUBE_ASSETS`, `shared` the shared folder, `download` whether the
/// release download may be tried.
pub fn locate_in(
    name: &str,
    kube_assets: Option<&Path>,
    shared: &Path,
    download: bool,
) -> Result<PathBuf, String> {
    assert!(
        BINARIES.contains(&name) || REFERENCE_BINARIES.contains(&name),
        "unknown control plane binary {name}"
    );
    if let Some(dir) = kube_assets {
        return from_folder(dir, name)
            .map_err(|e| format!("KUBE_ASSETS={}: {e}\n{}", dir.display(), what_to_set(name)));
    }
    let shared_err = match from_folder(shared, name) {
        Ok(p) => return Ok(p),
        Err(e) => e,
    };
    let download_err = if download {
        match self::download(name) {
            Ok(p) => return Ok(p),
            Err(e) => e,
        }
    } else {
        "not tried: set KUBE_ASSETS_DOWNLOAD=1 to allow it".to_string()
    };
    Err(format!(
        "cannot find the control plane binary {name}:\n\
         - KUBE_ASSETS: not set\n\
         - {}: {shared_err}\n\
         - release download ({}): {download_err}\n{}",
        shared.display(),
        release_url(name),
        what_to_set(name)
    ))
}

fn what_to_set(name: &str) -> String {
    format!(
        "Set KUBE_ASSETS to a folder with {name} (unpacked or {name}.xz) and the other \
         control plane binaries ({}), or put them in ../shared/kube beside the repo, or \
         set KUBE_ASSETS_DOWNLOAD=1 on a machine with internet access.",
        BINARIES.join(", ")
    )
}

/// `dir/name` if executable, else `dir/name.xz` unpacked into the cache.
fn from_folder(dir: &Path, name: &str) -> Result<PathBuf, String> {
    if !dir.is_dir() {
        return Err("no such folder".into());
    }
    let plain = dir.join(name);
    if is_executable(&plain) {
        return Ok(plain);
    }
    let xz = dir.join(format!("{name}.xz"));
    if xz.is_file() {
        return unpack(dir, name, &xz);
    }
    Err(format!("has neither {name} (executable) nor {name}.xz"))
}

fn is_executable(p: &Path) -> bool {
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Unpacks `xz` (found in `dir`) into the cache, once, verified.
fn unpack(dir: &Path, name: &str, xz: &Path) -> Result<PathBuf, String> {
    let file = format!("{name}.xz");
    let listed = sums_entry(&dir.join("SHA256SUMS"), &file);
    // The cache key is the .xz's checksum: from SHA256SUMS when it lists
    // the file (no hashing on a cache hit), else computed.
    let key = match &listed {
        Some(sum) => sum.clone(),
        None => sha256(xz)?,
    };
    let cache = cache_root().join(&key[..16]);
    let out = cache.join(name);
    if is_executable(&out) {
        return Ok(out);
    }
    let _lock = CacheLock::take(&cache)?;
    if is_executable(&out) {
        return Ok(out); // another process unpacked it while we waited
    }
    if listed.is_some() {
        let actual = sha256(xz)?;
        if actual != key {
            return Err(format!(
                "{} has sha256 {actual}, but SHA256SUMS says {key}",
                xz.display()
            ));
        }
    }
    let tmp = cache.join(format!(".{name}.{}.tmp", std::process::id()));
    let dst = fs::File::create(&tmp).map_err(|e| format!("creating {}: {e}", tmp.display()))?;
    let status = Command::new("xz")
        .arg("-dc")
        .arg(xz)
        .stdin(Stdio::null())
        .stdout(dst)
        .status()
        .map_err(|e| format!("running xz (install xz-utils; `make deps`): {e}"))?;
    if !status.success() {
        let _ = fs::remove_file(&tmp);
        return Err(format!("xz -dc {} failed: {status}", xz.display()));
    }
    if let Some(want) = readme_unpacked_sum(&dir.join("README.md"), &file) {
        let got = sha256(&tmp)?;
        if got != want {
            let _ = fs::remove_file(&tmp);
            return Err(format!(
                "{name} unpacked from {} has sha256 {got}, but the README says {want}",
                xz.display()
            ));
        }
    }
    install(&tmp, &out)?;
    Ok(out)
}

/// chmod 755 and rename into place (atomic: a reader sees all or nothing).
fn install(tmp: &Path, out: &Path) -> Result<(), String> {
    fs::set_permissions(tmp, fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {e}", tmp.display()))?;
    fs::rename(tmp, out).map_err(|e| format!("renaming to {}: {e}", out.display()))
}

/// The checksum `SHA256SUMS` lists for `file`, if it does.
fn sums_entry(sums: &Path, file: &str) -> Option<String> {
    let text = fs::read_to_string(sums).ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (sum, name) = (f.next()?, f.next()?);
        (name.trim_start_matches('*') == file && is_sha256(sum)).then(|| sum.to_lowercase())
    })
}

/// The unpacked binary's checksum from the README's table row for `file`
/// (the row that names `file` in backticks; its 64-hex-digit cell).
fn readme_unpacked_sum(readme: &Path, file: &str) -> Option<String> {
    let text = fs::read_to_string(readme).ok()?;
    let quoted = format!("`{file}`");
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with('|') && l.contains(&quoted))?;
    row.split(['|', '`', ' '])
        .find(|cell| is_sha256(cell))
        .map(str::to_lowercase)
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn sha256(path: &Path) -> Result<String, String> {
    let out = Command::new("sha256sum")
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running sha256sum: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "sha256sum {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .filter(|s| is_sha256(s))
        .map(str::to_string)
        .ok_or_else(|| format!("sha256sum {}: unexpected output", path.display()))
}

/// An exclusive flock on `<dir>/.lock` (the dir is created), held until
/// dropped; serializes unpacking and downloading across test processes.
struct CacheLock(#[allow(dead_code)] fs::File);

impl CacheLock {
    fn take(dir: &Path) -> Result<CacheLock, String> {
        fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let path = dir.join(".lock");
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("opening {}: {e}", path.display()))?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| format!("locking {}: {e}", path.display()))?;
        Ok(CacheLock(f))
    }
}

// ---------------------------------------------------------------------------
// Release download (opt-in)
// ---------------------------------------------------------------------------

fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

fn release_url(name: &str) -> String {
    if name == "etcd" {
        format!(
            "https://github.com/etcd-io/etcd/releases/download/{ETCD_VERSION}/{}",
            etcd_tarball()
        )
    } else {
        format!(
            "https://dl.k8s.io/release/{KUBERNETES_VERSION}/bin/linux/{}/{name}",
            arch()
        )
    }
}

fn etcd_tarball() -> String {
    format!("etcd-{ETCD_VERSION}-linux-{}.tar.gz", arch())
}

/// Downloads `name` from its release URL, checks it against the checksum
/// published beside it, and installs it into the cache.
fn download(name: &str) -> Result<PathBuf, String> {
    if REFERENCE_BINARIES.contains(&name) && name != "kubelet" {
        return Err(format!(
            "{name} is released only inside kubernetes-test-linux-{}.tar.gz; unpack it into KUBE_ASSETS",
            arch()
        ));
    }
    let cache = cache_root().join(format!("release-{KUBERNETES_VERSION}-etcd-{ETCD_VERSION}"));
    let out = cache.join(name);
    if is_executable(&out) {
        return Ok(out);
    }
    let _lock = CacheLock::take(&cache)?;
    if is_executable(&out) {
        return Ok(out);
    }
    let tmp = cache.join(format!(".{name}.{}.download", std::process::id()));
    let url = release_url(name);
    curl(&url, &tmp)?;
    let want = if name == "etcd" {
        let sums = cache.join(format!(".SHA256SUMS.{}", std::process::id()));
        let base = url.rsplit_once('/').map(|(b, _)| b).unwrap_or(&url);
        curl(&format!("{base}/SHA256SUMS"), &sums)?;
        let want = sums_entry(&sums, &etcd_tarball());
        let _ = fs::remove_file(&sums);
        want.ok_or_else(|| format!("{base}/SHA256SUMS does not list {}", etcd_tarball()))?
    } else {
        let sum = cache.join(format!(".{name}.{}.sha256", std::process::id()));
        curl(&format!("{url}.sha256"), &sum)?;
        let want = fs::read_to_string(&sum).unwrap_or_default();
        let _ = fs::remove_file(&sum);
        want.trim().to_lowercase()
    };
    let got = sha256(&tmp)?;
    if got != want {
        let _ = fs::remove_file(&tmp);
        return Err(format!("{url}: sha256 {got}, published {want}"));
    }
    if name == "etcd" {
        let unpack_dir = cache.join(format!(".etcd.{}", std::process::id()));
        fs::create_dir_all(&unpack_dir).map_err(|e| format!("{}: {e}", unpack_dir.display()))?;
        let status = Command::new("tar")
            .arg("-xzf")
            .arg(&tmp)
            .arg("-C")
            .arg(&unpack_dir)
            .arg("--strip-components=1")
            .status()
            .map_err(|e| format!("running tar: {e}"))?;
        let _ = fs::remove_file(&tmp);
        if !status.success() {
            return Err(format!("unpacking {url}: tar {status}"));
        }
        install(&unpack_dir.join("etcd"), &out)?;
        let _ = fs::remove_dir_all(&unpack_dir);
    } else {
        install(&tmp, &out)?;
    }
    Ok(out)
}

fn curl(url: &str, to: &Path) -> Result<(), String> {
    let out = Command::new("curl")
        .args([
            "--fail",
            "--location",
            "--silent",
            "--show-error",
            "--connect-timeout",
            "10",
            "--max-time",
            "900",
            "--output",
        ])
        .arg(to)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running curl: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        let _ = fs::remove_file(to);
        Err(format!(
            "curl {url}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
