//! Test binaries kept as `.xz` files beside the repo -- owned by the test
//! harness (tests/harness).
//!
//! Some parts the integration tests run are not packaged by Debian (CRI-O's
//! `crio` and `pinns`; see [`super::crio`]). They are kept compressed in a
//! read-only folder (`<repo>/../shared/<part>` in CI) with a `SHA256SUMS`
//! of the `.xz` files and a README whose table gives each unpacked binary's
//! sha256. [`from_folder`] hands out an executable path for one of them:
//! the plain file if the folder has it, else the `.xz` unpacked once into a
//! cache folder under cargo's target dir, verified against both checksums
//! when the folder lists them, under a file lock so that concurrent test
//! processes unpack each binary exactly once and never see half a file.
//!
//! It also fetches release files ([`download`], with `curl`) for parts that
//! are only looked for on the internet when the user asks for it. It knows
//! nothing of what the binaries are. Uses the `xz`, `sha256sum` and `curl`
//! commands (`make deps` installs them).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `<target dir>/<name>`: where unpacked and downloaded binaries are cached
/// (`$CARGO_TARGET_DIR` if set, else the repo's `target/`).
pub fn cache_root(name: &str) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join(name)
}

/// An executable `name` from `dir`: `dir/name` itself when it is an
/// executable file, else `dir/name.xz` unpacked into
/// `cache/<first 16 hex digits of the .xz's sha256>/name`. The error says
/// what the folder lacks or which checksum did not match.
pub fn from_folder(dir: &Path, name: &str, cache: &Path) -> Result<PathBuf, String> {
    if !dir.is_dir() {
        return Err("no such folder".into());
    }
    let plain = dir.join(name);
    if is_executable(&plain) {
        return Ok(plain);
    }
    let xz_name = format!("{name}.xz");
    let xz = dir.join(&xz_name);
    if !xz.is_file() {
        return Err(format!("has neither {name} (executable) nor {xz_name}"));
    }
    let xz_sum = listed_sum(&dir.join("SHA256SUMS"), &xz_name);
    let unpacked_sum = readme_sum(&dir.join("README.md"), &xz_name);
    // Keyed by the .xz's checksum: a changed file never hits a stale cache,
    // and a listed checksum needs no hashing on a cache hit.
    let key = match &xz_sum {
        Some(sum) => sum.clone(),
        None => sha256(&xz)?,
    };
    let out_dir = cache.join(&key[..16]);
    let out = out_dir.join(name);
    if is_executable(&out) {
        return Ok(out);
    }
    let _lock = super::DirLock::take(&out_dir)?;
    if is_executable(&out) {
        return Ok(out); // unpacked by another process while we waited
    }
    if let Some(want) = &xz_sum {
        check_sum(&xz, want, "SHA256SUMS")?;
    }
    let tmp = out_dir.join(format!(".{name}.{}", std::process::id()));
    let file = fs::File::create(&tmp).map_err(|e| format!("creating {}: {e}", tmp.display()))?;
    let status = Command::new("xz")
        .arg("-dc")
        .arg(&xz)
        .stdin(Stdio::null())
        .stdout(file)
        .status()
        .map_err(|e| format!("running xz (install xz-utils: `make deps`): {e}"))?;
    let verified = if !status.success() {
        Err(format!("xz -dc {} failed ({status})", xz.display()))
    } else if let Some(want) = &unpacked_sum {
        check_sum(&tmp, want, &format!("{}'s README", dir.display()))
    } else {
        Ok(())
    };
    if let Err(e) = verified.and_then(|()| install(&tmp, &out)) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(out)
}

/// Downloads `url` to `dest` (atomically: a partial download never has the
/// final name). Fails at once, with curl's message, without network.
pub fn download(url: &str, dest: &Path) -> Result<(), String> {
    let tmp = dest.with_extension(format!("part.{}", std::process::id()));
    let out = Command::new("curl")
        .args(["-fsSL", "--connect-timeout", "15", "--retry", "2", "-o"])
        .arg(&tmp)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running curl (install curl: `make deps`): {e}"))?;
    if !out.status.success() {
        let _ = fs::remove_file(&tmp);
        return Err(format!(
            "curl {url}: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    fs::rename(&tmp, dest).map_err(|e| format!("renaming to {}: {e}", dest.display()))
}

/// Fails unless `path` has sha256 `want` (lowercase hex); `source` names
/// where `want` came from.
pub fn check_sum(path: &Path, want: &str, source: &str) -> Result<(), String> {
    let got = sha256(path)?;
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "{} has sha256 {got}, but {source} says {want}",
            path.display()
        ))
    }
}

pub fn is_executable(p: &Path) -> bool {
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Makes `tmp` executable and renames it to `out` (atomic).
pub fn install(tmp: &Path, out: &Path) -> Result<(), String> {
    fs::set_permissions(tmp, fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {e}", tmp.display()))?;
    fs::rename(tmp, out).map_err(|e| format!("renaming to {}: {e}", out.display()))
}

/// The checksum a `sha256sum`-style list gives for `file`, if it lists it.
pub fn listed_sum(list: &Path, file: &str) -> Option<String> {
    fs::read_to_string(list).ok()?.lines().find_map(|l| {
        let (sum, name) = l.split_once(char::is_whitespace)?;
        (name.trim().trim_start_matches('*') == file && is_sha256(sum)).then(|| sum.to_lowercase())
    })
}

/// The 64-hex-digit cell of the README table row that names `` `file` ``.
fn readme_sum(readme: &Path, file: &str) -> Option<String> {
    let text = fs::read_to_string(readme).ok()?;
    let quoted = format!("`{file}`");
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with('|') && l.contains(&quoted))?;
    row.split(|c: char| !c.is_ascii_hexdigit())
        .find(|w| is_sha256(w))
        .map(str::to_lowercase)
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

pub fn sha256(path: &Path) -> Result<String, String> {
    let out = Command::new("sha256sum")
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running sha256sum: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.split_whitespace().next() {
        Some(sum) if out.status.success() && is_sha256(sum) => Ok(sum.to_lowercase()),
        _ => Err(format!(
            "sha256sum {}: {} {}",
            path.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}
