//! The crash-safe on-disk copy of one resource's objects, so a node that
//! reboots with its uplink down still knows its pods.
//!
//! One directory per resource (the caller picks it under the root dir, e.g.
//! `<root>/apiserver/pods`), holding one file per object and a `sync` file
//! with the last sync point (the resourceVersion a watch may resume from).
//! Every file is an envelope:
//!
//! ```text
//! picolet-cache 1 <crc32 of body, 8 hex digits> <body length>\n
//! <namespace>\n<name>\n<resourceVersion>\n<payload: the object's JSON>
//! ```
//!
//! Writes are atomic (a `.tmp-` file, fsync, rename over the entry, fsync
//! of the directory), so a crash or power cut at any instant leaves either
//! the old entry or the new one. Nothing is written when nothing changed
//! (same resourceVersion and checksum): SD cards wear out.
//!
//! Loading never panics and never fails because of one entry: a truncated
//! file, a bad checksum, an unknown format or an entry stored under the
//! wrong file name is removed with a log line naming the file; it will be
//! fetched again. Leftover `.tmp-` files of an interrupted write are
//! removed. The directory's mode is a parameter (secrets will live in a
//! 0700 root-only directory); files get the same mode without execute bits.
//!
//! Policy is the caller's: the cache stores what it is told. For a correct
//! resume, the sync point must only be set once every object change up to
//! it is stored (at [`Event::Synced`](super::reflector::Event::Synced), or
//! after an event's change was stored).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::reflector::{Object, ObjectKey};

const MAGIC: &str = "picolet-cache 1";
const SYNC_FILE: &str = "sync";
const ENTRY_SUFFIX: &str = ".entry";
const TMP_PREFIX: &str = ".tmp-";
/// Longer encoded keys are stored under a hash (file names are limited to
/// 255 bytes; a namespace and a name can exceed that).
const MAX_PLAIN_NAME: usize = 200;

/// Errors of the cache directory itself (not of one entry: a bad entry is
/// discarded, not an error).
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cache directory {dir}: {source}")]
    Dir { dir: PathBuf, source: io::Error },
    #[error("writing cache file {file}: {source}")]
    Write { file: PathBuf, source: io::Error },
    #[error("removing cache file {file}: {source}")]
    Remove { file: PathBuf, source: io::Error },
    #[error("encoding {key} for the cache: {source}")]
    Encode {
        key: String,
        source: serde_json::Error,
    },
}

/// One stored object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: ObjectKey,
    pub resource_version: String,
    /// The object's JSON.
    pub data: Vec<u8>,
}

/// What [`Cache::open`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Every intact entry, by key.
    pub entries: Vec<Entry>,
    /// The last sync point, if one was stored intact.
    pub resource_version: Option<String>,
    /// Files discarded as corrupt, truncated or misplaced.
    pub discarded: usize,
}

impl Loaded {
    /// The entries decoded as `K`; an entry that does not decode is
    /// skipped with a log line (it will be fetched again).
    pub fn objects<K: DeserializeOwned>(&self, dir: &Path) -> Vec<K> {
        self.entries
            .iter()
            .filter_map(|e| {
                match std::str::from_utf8(&e.data)
                    .map_err(|e| e.to_string())
                    .and_then(|t| serde_json::from_str(t).map_err(|e| e.to_string()))
                {
                    Ok(o) => Some(o),
                    Err(err) => {
                        log::warn!(
                            "cache {}: entry {} does not decode ({err}); it will be fetched again",
                            dir.display(),
                            e.key
                        );
                        None
                    }
                }
            })
            .collect()
    }
}

/// The on-disk cache of one resource.
#[derive(Debug)]
pub struct Cache {
    dir: PathBuf,
    file_mode: u32,
    /// What is on disk: key -> (resourceVersion, checksum of the body).
    index: BTreeMap<ObjectKey, (String, u32)>,
    resource_version: Option<String>,
    writes: u64,
}

impl Cache {
    /// Opens the cache in `dir` (created with `mode` if missing, and set to
    /// `mode` if it differs), loading every intact entry.
    pub fn open(dir: impl Into<PathBuf>, mode: u32) -> Result<(Cache, Loaded), CacheError> {
        let dir = dir.into();
        let dir_err = |source| CacheError::Dir {
            dir: dir.clone(),
            source,
        };
        if let Some(parent) = dir.parent() {
            fs::create_dir_all(parent).map_err(dir_err)?;
        }
        match fs::DirBuilder::new().mode(mode).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(dir_err(e)),
        }
        let meta = fs::metadata(&dir).map_err(dir_err)?;
        if !meta.is_dir() {
            return Err(dir_err(io::Error::other("not a directory")));
        }
        if meta.permissions().mode() & 0o7777 != mode {
            fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).map_err(dir_err)?;
        }

        let mut cache = Cache {
            dir: dir.clone(),
            file_mode: mode & 0o666,
            index: BTreeMap::new(),
            resource_version: None,
            writes: 0,
        };
        let mut loaded = Loaded::default();
        let mut names: Vec<String> = Vec::new();
        for entry in fs::read_dir(&dir).map_err(dir_err)? {
            let entry = entry.map_err(dir_err)?;
            match entry.file_name().into_string() {
                Ok(n) => names.push(n),
                Err(n) => log::warn!(
                    "cache {}: ignoring file with a non-UTF-8 name {n:?}",
                    dir.display()
                ),
            }
        }
        names.sort();
        for name in names {
            let path = dir.join(&name);
            if name.starts_with(TMP_PREFIX) {
                log::info!(
                    "cache: removing {} left by an interrupted write",
                    path.display()
                );
                cache.discard_file(&path);
                continue;
            }
            let is_sync = name == SYNC_FILE;
            if !is_sync && !name.ends_with(ENTRY_SUFFIX) {
                log::warn!("cache: ignoring unknown file {}", path.display());
                continue;
            }
            let decoded = fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|bytes| decode(&bytes));
            let entry = match decoded {
                Ok(e) => e,
                Err(why) => {
                    log::warn!(
                        "cache: discarding {}: {why}; it will be fetched again",
                        path.display()
                    );
                    cache.discard_file(&path);
                    loaded.discarded += 1;
                    continue;
                }
            };
            if is_sync {
                if entry.key.name.is_empty() && entry.key.namespace.is_none() {
                    cache.resource_version = Some(entry.resource_version.clone());
                    loaded.resource_version = Some(entry.resource_version);
                } else {
                    log::warn!("cache: discarding {}: not a sync point", path.display());
                    cache.discard_file(&path);
                    loaded.discarded += 1;
                }
                continue;
            }
            if entry.key.name.is_empty() || file_name(&entry.key) != name {
                log::warn!(
                    "cache: discarding {}: it holds {:?}, stored under the wrong name",
                    path.display(),
                    entry.key.to_string()
                );
                cache.discard_file(&path);
                loaded.discarded += 1;
                continue;
            }
            cache.index.insert(
                entry.key.clone(),
                (entry.resource_version.clone(), crc32(&body(&entry))),
            );
            loaded.entries.push(entry);
        }
        Ok((cache, loaded))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The stored sync point.
    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }

    /// How many files were written (or removed) since opening.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// The keys stored.
    pub fn keys(&self) -> impl Iterator<Item = &ObjectKey> {
        self.index.keys()
    }

    /// Stores `data` for `key` at `resource_version`; `false` (nothing
    /// written) when the same is already stored.
    pub fn put(
        &mut self,
        key: &ObjectKey,
        resource_version: &str,
        data: &[u8],
    ) -> Result<bool, CacheError> {
        let entry = Entry {
            key: key.clone(),
            resource_version: resource_version.to_string(),
            data: data.to_vec(),
        };
        let body = body(&entry);
        let sum = crc32(&body);
        if self
            .index
            .get(key)
            .is_some_and(|(rv, c)| rv == resource_version && *c == sum)
        {
            return Ok(false);
        }
        self.write(&file_name(key), &body, sum)?;
        self.index
            .insert(key.clone(), (resource_version.to_string(), sum));
        Ok(true)
    }

    /// Stores an object (as JSON, at its resourceVersion).
    pub fn put_object<K: Object + Serialize>(&mut self, obj: &K) -> Result<bool, CacheError> {
        let Some(key) = ObjectKey::of(obj) else {
            return Ok(false);
        };
        let data = serde_json::to_vec(obj).map_err(|source| CacheError::Encode {
            key: key.to_string(),
            source,
        })?;
        let rv = obj.metadata().resource_version.clone().unwrap_or_default();
        self.put(&key, &rv, &data)
    }

    /// Removes `key`; `false` when it was not stored.
    pub fn remove(&mut self, key: &ObjectKey) -> Result<bool, CacheError> {
        if self.index.remove(key).is_none() {
            return Ok(false);
        }
        let file = self.dir.join(file_name(key));
        match fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(CacheError::Remove { file, source }),
        }
        self.writes += 1;
        sync_dir(&self.dir).map_err(|source| CacheError::Remove { file, source })?;
        Ok(true)
    }

    /// Stores the sync point; `false` when it is already stored.
    pub fn set_resource_version(&mut self, resource_version: &str) -> Result<bool, CacheError> {
        if self.resource_version.as_deref() == Some(resource_version) {
            return Ok(false);
        }
        let body = body(&Entry {
            key: ObjectKey {
                namespace: None,
                name: String::new(),
            },
            resource_version: resource_version.to_string(),
            data: Vec::new(),
        });
        let sum = crc32(&body);
        self.write(SYNC_FILE, &body, sum)?;
        self.resource_version = Some(resource_version.to_string());
        Ok(true)
    }

    /// temp file, fsync, rename, fsync of the directory.
    fn write(&mut self, name: &str, body: &[u8], sum: u32) -> Result<(), CacheError> {
        let file = self.dir.join(name);
        let tmp = self.dir.join(format!("{TMP_PREFIX}{name}"));
        let err = |source| CacheError::Write {
            file: file.clone(),
            source,
        };
        let mut bytes = format!("{MAGIC} {sum:08x} {}\n", body.len()).into_bytes();
        bytes.extend_from_slice(body);
        write_atomically(&file, &tmp, &bytes, self.file_mode).map_err(err)?;
        self.writes += 1;
        Ok(())
    }

    fn discard_file(&mut self, path: &Path) {
        if let Err(e) = fs::remove_file(path) {
            log::warn!("cache: removing {}: {e}", path.display());
        } else {
            self.writes += 1;
        }
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// Replaces `file` with `bytes` (mode `mode`) so that a crash leaves the
/// old content or the new: written to `tmp` in the same directory,
/// fsynced, renamed over `file`, then the directory fsynced. A failed
/// write removes `tmp`.
pub fn write_atomically(file: &Path, tmp: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let written = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(tmp)?;
        // An existing tmp file keeps its old mode through `open`.
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(tmp, file)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(tmp);
        return Err(e);
    }
    sync_dir(file.parent().unwrap_or(Path::new(".")))
}

/// Creates `dir` with mode 0700, and its missing parents with the default
/// mode, and sets 0700 on `dir` if it already existed with another mode:
/// the home of what only root may read (Secrets, tokens).
pub fn private_dir(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent)?;
    }
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    if fs::metadata(dir)?.permissions().mode() & 0o7777 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// The envelope body of an entry.
fn body(e: &Entry) -> Vec<u8> {
    let mut b = Vec::with_capacity(e.data.len() + 64);
    b.extend_from_slice(e.key.namespace.as_deref().unwrap_or("").as_bytes());
    b.push(b'\n');
    b.extend_from_slice(e.key.name.as_bytes());
    b.push(b'\n');
    b.extend_from_slice(e.resource_version.as_bytes());
    b.push(b'\n');
    b.extend_from_slice(&e.data);
    b
}

/// Parses an envelope; the error says what is wrong with it.
fn decode(bytes: &[u8]) -> Result<Entry, String> {
    let nl = bytes
        .iter()
        .position(|b| *b == b'\n')
        .ok_or("no header (empty or truncated)")?;
    let header = std::str::from_utf8(&bytes[..nl]).map_err(|_| "header is not text")?;
    let rest = header
        .strip_prefix(MAGIC)
        .and_then(|r| r.strip_prefix(' '))
        .ok_or_else(|| format!("unknown format {:?}", truncate(header)))?;
    let (sum, len) = rest.split_once(' ').ok_or("malformed header")?;
    let sum = u32::from_str_radix(sum, 16).map_err(|_| "malformed checksum")?;
    let len: usize = len.parse().map_err(|_| "malformed length")?;
    let body = &bytes[nl + 1..];
    if body.len() != len {
        return Err(format!(
            "truncated or padded: {} bytes of {len}",
            body.len()
        ));
    }
    if crc32(body) != sum {
        return Err("checksum mismatch".into());
    }
    let mut parts = body.splitn(4, |b| *b == b'\n');
    let mut text = || -> Result<String, String> {
        let p = parts.next().ok_or("missing field")?;
        String::from_utf8(p.to_vec()).map_err(|_| "field is not text".to_string())
    };
    let namespace = text()?;
    let name = text()?;
    let resource_version = text()?;
    let data = parts.next().ok_or("missing payload")?.to_vec();
    Ok(Entry {
        key: ObjectKey {
            namespace: Some(namespace).filter(|n| !n.is_empty()),
            name,
        },
        resource_version,
        data,
    })
}

fn truncate(s: &str) -> String {
    s.chars().take(40).collect()
}

/// The file of a key: `<namespace>_<name>.entry` (`_<name>.entry` without a
/// namespace), bytes outside `[A-Za-z0-9.-]` as `%XX`; a long one becomes
/// `~<hash>.entry` (the key inside the file is what counts).
fn file_name(key: &ObjectKey) -> String {
    fn push(s: &mut String, part: &str) {
        for b in part.bytes() {
            if b.is_ascii_alphanumeric() || b == b'.' || b == b'-' {
                s.push(b as char);
            } else {
                s.push_str(&format!("%{b:02X}"));
            }
        }
    }
    let mut s = String::new();
    push(&mut s, key.namespace.as_deref().unwrap_or(""));
    s.push('_');
    push(&mut s, &key.name);
    if s.len() > MAX_PLAIN_NAME || s.starts_with('.') {
        s = format!("~{:016x}", fnv1a64(s.as_bytes()));
    }
    s.push_str(ENTRY_SUFFIX);
    s
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// CRC-32 (IEEE 802.3, as zlib and gzip), table-driven.
fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    let mut c = !0u32;
    for b in bytes {
        c = TABLE[((c ^ u32::from(*b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn key(ns: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey {
            namespace: ns.map(Into::into),
            name: name.into(),
        }
    }

    fn open(dir: &Path) -> (Cache, Loaded) {
        Cache::open(dir, 0o755).unwrap()
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn entries_and_the_sync_point_survive_a_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pods");
        let (mut c, loaded) = open(&dir);
        assert_eq!(loaded, Loaded::default());
        assert!(c
            .put(&key(Some("default"), "a"), "5", b"{\"a\":1}")
            .unwrap());
        assert!(c.put(&key(None, "node-1"), "6", b"{}").unwrap());
        assert!(c.set_resource_version("7").unwrap());
        drop(c);
        let (c, loaded) = open(&dir);
        assert_eq!(loaded.resource_version.as_deref(), Some("7"));
        assert_eq!(c.resource_version(), Some("7"));
        assert_eq!(loaded.discarded, 0);
        assert_eq!(
            loaded.entries,
            vec![
                Entry {
                    key: key(None, "node-1"),
                    resource_version: "6".into(),
                    data: b"{}".to_vec()
                },
                Entry {
                    key: key(Some("default"), "a"),
                    resource_version: "5".into(),
                    data: b"{\"a\":1}".to_vec()
                },
            ]
        );
        assert_eq!(files(&dir), ["_node-1.entry", "default_a.entry", "sync"]);
    }

    #[test]
    fn nothing_is_written_when_nothing_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut c, _) = open(tmp.path());
        let k = key(Some("ns"), "a");
        assert!(c.put(&k, "5", b"x").unwrap());
        assert!(!c.put(&k, "5", b"x").unwrap());
        assert!(c.put(&k, "5", b"y").unwrap(), "same version, other content");
        assert!(c.put(&k, "6", b"y").unwrap());
        assert!(c.set_resource_version("9").unwrap());
        assert!(!c.set_resource_version("9").unwrap());
        assert!(c.remove(&k).unwrap());
        assert!(!c.remove(&k).unwrap());
        assert_eq!(c.writes(), 5);
        // Reopened, the index knows what is on disk: no rewrite either.
        c.put(&k, "7", b"z").unwrap();
        let (mut c, _) = open(tmp.path());
        assert!(!c.put(&k, "7", b"z").unwrap());
        assert!(!c.set_resource_version("9").unwrap());
        assert_eq!(c.writes(), 0);
    }

    #[test]
    fn a_truncated_entry_is_discarded_and_the_rest_loads() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut c, _) = open(tmp.path());
        c.put(&key(Some("ns"), "good"), "1", b"{\"good\":true}")
            .unwrap();
        c.put(&key(Some("ns"), "cut"), "2", b"{\"cut\":true}")
            .unwrap();
        let cut = tmp.path().join("ns_cut.entry");
        let bytes = fs::read(&cut).unwrap();
        for len in [0, 5, 20, bytes.len() - 1] {
            fs::write(&cut, &bytes[..len]).unwrap();
            let (_, loaded) = open(tmp.path());
            assert_eq!(loaded.entries.len(), 1, "cut at {len}");
            assert_eq!(loaded.entries[0].key.name, "good");
            assert_eq!(loaded.discarded, 1);
            assert!(!cut.exists(), "a discarded entry is removed");
        }
    }

    #[test]
    fn a_bad_checksum_discards_the_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut c, _) = open(tmp.path());
        c.put(&key(Some("ns"), "a"), "1", b"{\"x\":1}").unwrap();
        let f = tmp.path().join("ns_a.entry");
        let mut bytes = fs::read(&f).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x01;
        fs::write(&f, &bytes).unwrap();
        let (c, loaded) = open(tmp.path());
        assert!(loaded.entries.is_empty());
        assert_eq!(loaded.discarded, 1);
        assert_eq!(c.keys().count(), 0);
    }

    #[test]
    fn garbage_and_misplaced_files_are_discarded_without_panicking() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let (mut c, _) = open(d);
        c.put(&key(Some("ns"), "a"), "1", b"{}").unwrap();
        fs::copy(d.join("ns_a.entry"), d.join("ns_b.entry")).unwrap();
        fs::write(d.join("x.entry"), b"\xff\xfe\x00garbage").unwrap();
        fs::write(d.join("y.entry"), b"picolet-cache 1 zz 3\nabc").unwrap();
        fs::write(d.join("z.entry"), b"picolet-cache 9 00000000 0\n").unwrap();
        fs::write(d.join("sync"), b"").unwrap();
        fs::write(d.join("README"), b"not ours").unwrap();
        let (_, loaded) = open(d);
        assert_eq!(loaded.entries.len(), 1);
        assert_eq!(loaded.entries[0].key, key(Some("ns"), "a"));
        assert_eq!(
            loaded.resource_version, None,
            "a bad sync file means relist"
        );
        assert_eq!(loaded.discarded, 5);
        assert_eq!(files(d), ["README", "ns_a.entry"]);
    }

    #[test]
    fn a_leftover_temp_file_is_removed_and_the_entry_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let (mut c, _) = open(d);
        c.put(&key(Some("ns"), "a"), "1", b"old").unwrap();
        // A crash between writing the temp file and renaming it.
        fs::write(d.join(".tmp-ns_a.entry"), b"picolet-cache 1 half").unwrap();
        let (_, loaded) = open(d);
        assert_eq!(loaded.entries.len(), 1);
        assert_eq!(loaded.entries[0].data, b"old");
        assert_eq!(loaded.discarded, 0);
        assert_eq!(files(d), ["ns_a.entry"]);
    }

    #[test]
    fn a_missing_directory_is_created_with_the_given_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b/secrets");
        let (mut c, loaded) = Cache::open(&dir, 0o700).unwrap();
        assert!(loaded.entries.is_empty());
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700);
        c.put(&key(Some("ns"), "s"), "1", b"secret").unwrap();
        let mode = fs::metadata(dir.join("ns_s.entry"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        // An existing directory with a looser mode is tightened.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        Cache::open(&dir, 0o700).unwrap();
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn a_file_where_the_directory_should_be_is_an_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("pods");
        fs::write(&f, b"").unwrap();
        let e = Cache::open(&f, 0o755).unwrap_err().to_string();
        assert!(e.contains(&f.display().to_string()), "{e}");
    }

    #[test]
    fn odd_and_long_names_get_safe_unique_file_names() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut c, _) = open(tmp.path());
        let long = "x".repeat(253);
        let keys = [
            key(Some("ns"), "a_b"),
            key(Some("ns_a"), "b"),
            key(None, "system:node:pi"),
            key(Some("ns"), "../../etc/passwd"),
            key(Some(&"n".repeat(63)), &long),
            key(Some("ns"), &long),
        ];
        for (i, k) in keys.iter().enumerate() {
            c.put(k, &i.to_string(), k.name.as_bytes()).unwrap();
        }
        let names = files(tmp.path());
        assert_eq!(names.len(), keys.len(), "{names:?}");
        assert!(names.iter().all(|n| n.len() < 255 && !n.contains('/')));
        let (_, loaded) = open(tmp.path());
        assert_eq!(loaded.entries.len(), keys.len());
        assert_eq!(loaded.discarded, 0);
    }

    #[test]
    fn objects_round_trip_as_json() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut c, _) = open(tmp.path());
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                resource_version: Some("42".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(c.put_object(&pod).unwrap());
        assert!(!c.put_object(&pod).unwrap());
        let (_, loaded) = open(tmp.path());
        assert_eq!(loaded.entries[0].resource_version, "42");
        let pods: Vec<Pod> = loaded.objects(tmp.path());
        assert_eq!(pods, vec![pod]);
        // An entry whose JSON is not a pod is skipped, not fatal.
        let (mut c, _) = open(tmp.path());
        c.put(&key(Some("default"), "bad"), "1", b"[1,2]").unwrap();
        let (_, loaded) = open(tmp.path());
        assert_eq!(loaded.objects::<Pod>(tmp.path()).len(), 1);
    }
}
