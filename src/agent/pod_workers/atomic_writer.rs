//! kubelet's atomic writer: a volume's files swapped in at once, so a
//! container reading them while they change sees the old set or the new
//! one, never a mix.
//!
//! The layout, as kubelet's (`pkg/volume/util/atomic_writer.go`):
//!
//! ```text
//! <volume>/..2026_12_01_03_04_05.123456789/   the files, in a timestamped dir
//! <volume>/..data -> ..2026_12_01_03_04_05.123456789
//! <volume>/key    -> ..data/key                (one per top-level path)
//! ```
//!
//! A write builds the new timestamped directory, points `..data_tmp` at it
//! and renames that over `..data` (one atomic rename), adds the per-key
//! links that are new, removes those no longer in the payload and then
//! the old directory. Nothing is written when the files on disk already
//! are the payload.
//!
//! With the pod's `securityContext.fsGroup`, kubelet's volume ownership
//! rule (`SetVolumeOwnership`, for these read-only volumes) is applied to
//! the volume directory and the new files before the swap: group = fsGroup,
//! every file's mode gains group read (`defaultMode | 0440`), directories
//! also group search and setgid. [`set_fs_group`] is that rule, also used
//! for emptyDir directories (read-write: group read and write). The payload (`pod::spec::Payload`) is computed
//! elsewhere; this file only does the filesystem work, and it never
//! formats file contents (they may be Secrets).

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{
    lchown, symlink, DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt,
};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::pod::spec::{File, Payload};

const DATA: &str = "..data";
const DATA_TMP: &str = "..data_tmp";

/// A failed write, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{op} {}: {source}", path.display())]
pub struct WriteError {
    op: &'static str,
    path: PathBuf,
    source: io::Error,
}

fn err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> WriteError + use<> {
    let path = path.to_path_buf();
    move |source| WriteError { op, path, source }
}

/// `..YYYY_MM_DD_HH_MM_SS.nnnnnnnnn` (UTC) for `now`: kubelet's
/// timestamped directory name, with nanoseconds for uniqueness.
pub fn timestamp_dir_name(now: SystemTime) -> String {
    let d = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days as i64);
    format!(
        "..{y:04}_{m:02}_{day:02}_{:02}_{:02}_{:02}.{:09}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_nanos()
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// kubelet's mode for a file or directory of a volume owned by an
/// fsGroup: `mode` plus group read (read-only volumes) or group read and
/// write, plus group search and setgid on directories (so new files
/// inherit the group).
pub fn fs_group_mode(mode: u32, is_dir: bool, read_only: bool) -> u32 {
    let mut bits = if read_only { 0o440 } else { 0o660 };
    if is_dir {
        bits |= 0o2000 | 0o110;
    }
    mode | bits
}

/// Gives `path` the group `gid` and [`fs_group_mode`]'s bits; a symbolic
/// link gets the group only (a chmod would reach its target).
pub fn set_fs_group(path: &Path, gid: u32, read_only: bool) -> Result<(), WriteError> {
    lchown(path, None, Some(gid)).map_err(err("chown", path))?;
    let m = fs::symlink_metadata(path).map_err(err("stat", path))?;
    if m.file_type().is_symlink() {
        return Ok(());
    }
    let mode = fs_group_mode(m.permissions().mode() & 0o7777, m.is_dir(), read_only);
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(err("chmod", path))
}

/// [`set_fs_group`] on `dir` and everything under it (read-only volume).
fn set_fs_group_tree(dir: &Path, gid: u32) -> Result<(), WriteError> {
    set_fs_group(dir, gid, true)?;
    for e in fs::read_dir(dir).map_err(err("reading", dir))? {
        let p = e.map_err(err("reading", dir))?.path();
        if fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
            set_fs_group_tree(&p, gid)?;
        } else {
            set_fs_group(&p, gid, true)?;
        }
    }
    Ok(())
}

/// The top-level names of the payload's paths (`a/b` gives `a`).
fn top_level(payload: &Payload) -> BTreeSet<String> {
    payload
        .0
        .keys()
        .map(|p| p.split('/').next().unwrap_or(p).to_string())
        .collect()
}

/// Whether `dir` holds exactly the payload's files, bytes and modes (and
/// group, with an fsGroup).
fn holds(dir: &Path, payload: &Payload, fs_group: Option<u32>) -> bool {
    fn count(dir: &Path) -> Option<usize> {
        let mut n = 0;
        for e in fs::read_dir(dir).ok()? {
            let e = e.ok()?;
            let t = e.file_type().ok()?;
            if t.is_dir() {
                n += count(&e.path())?;
            } else {
                n += 1;
            }
        }
        Some(n)
    }
    let same = |path: &str, f: &File| {
        let p = dir.join(path);
        match (fs::symlink_metadata(&p), fs::read(&p)) {
            (Ok(m), Ok(data)) => {
                let mode = fs_group.map_or(f.mode, |_| fs_group_mode(f.mode, false, true));
                m.is_file()
                    && m.permissions().mode() & 0o7777 == mode
                    && fs_group.is_none_or(|g| m.gid() == g)
                    && f.owner.is_none_or(|u| m.uid() == u)
                    && data == f.data
            }
            _ => false,
        }
    };
    count(dir) == Some(payload.0.len()) && payload.0.iter().all(|(p, f)| same(p, f))
}

/// Writes `payload` into the volume directory `target` (which must
/// exist), owned by the pod's `fs_group` if it has one. Returns whether
/// anything was written.
pub fn write(
    target: &Path,
    payload: &Payload,
    now: SystemTime,
    fs_group: Option<u32>,
) -> Result<bool, WriteError> {
    let data_link = target.join(DATA);
    let old = fs::read_link(&data_link).ok();
    let wanted = top_level(payload);
    if let Some(old) = &old {
        let links_ok = wanted.iter().all(|t| target.join(t).exists());
        if links_ok && holds(&target.join(old), payload, fs_group) {
            return Ok(false);
        }
    }

    // The new timestamped directory, with every file.
    let mut name = timestamp_dir_name(now);
    let mut n = 0;
    let ts_dir = loop {
        let dir = target.join(&name);
        match fs::DirBuilder::new().mode(0o755).create(&dir) {
            Ok(()) => break dir,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 100 => {
                n += 1;
                name = format!("{}{n}", timestamp_dir_name(now));
            }
            Err(e) => return Err(err("creating", &dir)(e)),
        }
    };
    // 0755 whatever the umask: others must be able to walk it.
    fs::set_permissions(&ts_dir, fs::Permissions::from_mode(0o755))
        .map_err(err("chmod", &ts_dir))?;
    for (path, f) in &payload.0 {
        let file = ts_dir.join(path);
        if let Some(parent) = file.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(parent)
                .map_err(err("creating", parent))?;
        }
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(f.mode)
            .open(&file)
            .map_err(err("creating", &file))?;
        out.write_all(&f.data).map_err(err("writing", &file))?;
        fs::set_permissions(&file, fs::Permissions::from_mode(f.mode))
            .map_err(err("chmod", &file))?;
        if let Some(uid) = f.owner {
            lchown(&file, Some(uid), None).map_err(err("chown", &file))?;
        }
    }

    // kubelet sets the volume's ownership before the swap, so the files
    // appear with their group.
    if let Some(gid) = fs_group {
        set_fs_group(target, gid, true)?;
        set_fs_group_tree(&ts_dir, gid)?;
    }

    // The swap: one rename.
    let tmp = target.join(DATA_TMP);
    let _ = fs::remove_file(&tmp);
    symlink(&name, &tmp).map_err(err("linking", &tmp))?;
    if let Some(gid) = fs_group {
        lchown(&tmp, None, Some(gid)).map_err(err("chown", &tmp))?;
    }
    fs::rename(&tmp, &data_link).map_err(err("renaming", &tmp))?;

    // Per-key links: the new ones, then the stale ones go.
    for t in &wanted {
        let link = target.join(t);
        if fs::symlink_metadata(&link).is_err() {
            symlink(Path::new(DATA).join(t), &link).map_err(err("linking", &link))?;
        }
        if let Some(gid) = fs_group {
            lchown(&link, None, Some(gid)).map_err(err("chown", &link))?;
        }
    }
    if let Ok(entries) = fs::read_dir(target) {
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("..") || wanted.contains(&n) {
                continue;
            }
            let p = e.path();
            let r = match fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => fs::remove_dir_all(&p),
                _ => fs::remove_file(&p),
            };
            if let Err(e) = r {
                log::warn!("removing {}: {e}", p.display());
            }
        }
    }
    // Old timestamped directories (the previous one, and any an
    // interrupted write left).
    if let Ok(entries) = fs::read_dir(target) {
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("..") && n != DATA && n != name && e.path().is_dir() {
                if let Err(e) = fs::remove_dir_all(e.path()) {
                    log::warn!("removing {}: {e}", target.join(&n).display());
                }
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn payload(items: &[(&str, &str, u32)]) -> Payload {
        Payload(
            items
                .iter()
                .map(|(p, d, m)| {
                    (
                        p.to_string(),
                        File {
                            data: d.as_bytes().to_vec(),
                            mode: *m,
                            owner: None,
                        },
                    )
                })
                .collect(),
        )
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_directory_name_is_kubelets_utc_timestamp() {
        // 2026-12-01T03:04:05.123Z
        let t = UNIX_EPOCH + Duration::from_millis(1_796_094_245_123);
        assert_eq!(timestamp_dir_name(t), "..2026_12_01_03_04_05.123000000");
        assert_eq!(
            timestamp_dir_name(UNIX_EPOCH),
            "..1970_01_01_00_00_00.000000000"
        );
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn files_appear_behind_the_data_link_with_per_key_links_and_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let p = payload(&[("a", "1", 0o644), ("dir/b", "2", 0o400)]);
        assert!(write(t, &p, at(1), None).unwrap());
        assert_eq!(
            names(t),
            vec!["..1970_01_01_00_00_01.000000000", "..data", "a", "dir"]
        );
        assert_eq!(fs::read_link(t.join("a")).unwrap(), Path::new("..data/a"));
        assert_eq!(fs::read_to_string(t.join("a")).unwrap(), "1");
        assert_eq!(fs::read_to_string(t.join("dir/b")).unwrap(), "2");
        let mode = fs::metadata(t.join("dir/b")).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o400);
    }

    #[test]
    fn the_same_payload_writes_nothing_and_a_change_swaps_everything() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        write(
            t,
            &payload(&[("a", "1", 0o644), ("b", "x", 0o644)]),
            at(1),
            None,
        )
        .unwrap();
        assert!(!write(
            t,
            &payload(&[("a", "1", 0o644), ("b", "x", 0o644)]),
            at(2),
            None
        )
        .unwrap());
        assert!(write(t, &payload(&[("a", "2", 0o644)]), at(3), None).unwrap());
        assert_eq!(
            names(t),
            vec!["..1970_01_01_00_00_03.000000000", "..data", "a"],
            "the old directory and the stale key are gone"
        );
        assert_eq!(fs::read_to_string(t.join("a")).unwrap(), "2");
        // A mode change alone is a change.
        assert!(write(t, &payload(&[("a", "2", 0o600)]), at(4), None).unwrap());
    }

    #[test]
    fn an_empty_payload_leaves_only_the_data_link() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        write(t, &Payload::default(), at(1), None).unwrap();
        assert_eq!(names(t), vec!["..1970_01_01_00_00_01.000000000", "..data"]);
        assert!(!write(t, &Payload::default(), at(2), None).unwrap());
    }

    /// A group the test may give files: any as root, else its own.
    fn some_gid(dir: &Path) -> u32 {
        if fs::metadata("/proc/self").unwrap().uid() == 0 {
            4321
        } else {
            fs::metadata(dir).unwrap().gid()
        }
    }

    #[test]
    fn kubelets_fs_group_bits_add_group_read_and_on_directories_search_and_setgid() {
        assert_eq!(fs_group_mode(0o644, false, true), 0o644);
        assert_eq!(fs_group_mode(0o400, false, true), 0o440);
        assert_eq!(fs_group_mode(0o600, false, false), 0o660);
        assert_eq!(fs_group_mode(0o755, true, true), 0o2755);
        assert_eq!(fs_group_mode(0o700, true, true), 0o2750);
        assert_eq!(fs_group_mode(0o777, true, false), 0o2777);
    }

    #[test]
    fn with_an_fs_group_the_files_and_directories_are_the_groups_and_group_readable() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let gid = some_gid(t);
        let p = payload(&[("a", "1", 0o400), ("dir/b", "2", 0o644)]);
        assert!(write(t, &p, at(1), Some(gid)).unwrap());
        let meta = |p: &str| fs::metadata(t.join(p)).unwrap();
        assert_eq!(meta("a").gid(), gid);
        assert_eq!(meta("a").permissions().mode() & 0o7777, 0o440);
        assert_eq!(meta("dir/b").gid(), gid);
        assert_eq!(meta("dir/b").permissions().mode() & 0o7777, 0o644);
        assert_eq!(meta("dir").permissions().mode() & 0o7777, 0o2755);
        assert_eq!(meta("dir").gid(), gid);
        assert_eq!(meta(".").gid(), gid);
        assert_ne!(meta(".").permissions().mode() & 0o2000, 0);
        assert_eq!(fs::symlink_metadata(t.join("a")).unwrap().gid(), gid);
        // The same payload with the same group is already on disk.
        assert!(!write(t, &p, at(2), Some(gid)).unwrap());
    }

    #[test]
    fn a_file_with_an_owner_is_chowned_to_that_user_and_kept_when_unchanged() {
        if !rustix::process::geteuid().is_root() {
            return; // chown to another user needs root (CI runs as root)
        }
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let mut p = payload(&[("token", "jwt", 0o600), ("ns", "team", 0o644)]);
        p.0.get_mut("token").unwrap().owner = Some(1000);
        assert!(write(t, &p, at(1), None).unwrap());
        let meta = |n: &str| fs::metadata(t.join(n)).unwrap();
        assert_eq!(
            (meta("token").uid(), meta("token").mode() & 0o7777),
            (1000, 0o600)
        );
        assert_eq!(meta("ns").uid(), 0);
        assert!(!write(t, &p, at(2), None).unwrap());
    }
}
