//! Static pod manifests: parsing one file, and reading a whole directory.
//!
//! This module owns the *meaning* of a manifest directory; [`super::watch`]
//! owns *when* to look at it. Everything is pure except
//! [`ManifestDir::scan`], the one function that reads the filesystem.
//!
//! [`parse_manifest`] reproduces the kubelet's static pod handling
//! (`pkg/kubelet/config/common.go`, `applyDefaults` and `tryDecodeSinglePod`):
//!
//! - one Pod per file, YAML or JSON, `kind: Pod`, `apiVersion: v1`;
//! - the namespace defaults to `default`; the pod is renamed
//!   `<name>-<nodename>` and bound to the node (`spec.nodeName`);
//! - the UID is an md5 over the node name, the file path and the pod as
//!   written (before defaulting), so the same manifest always yields the same
//!   UID and any edit yields a new one (which makes the agent restart the
//!   pod, as the kubelet does); an explicit `metadata.uid` is kept;
//! - `kubernetes.io/config.source: file` and `kubernetes.io/config.hash:
//!   <uid>` annotations, a toleration for every `NoExecute` taint, and
//!   `status.phase: Pending`;
//! - then the API server's defaults ([`crate::pod::defaults::apply`]) and
//!   its validation ([`crate::pod::validation::validate_pod`]): a pod the
//!   API server would refuse is never started.
//!
//! Hostile input: the directory is outside input, and picolet parses it on
//! its only thread. So a file is read without blocking (a FIFO or device is
//! refused, whatever a symlink points at) and only up to
//! [`MAX_MANIFEST_BYTES`]; its depth, node count and alias expansion are
//! bounded ([`crate::decode`]) before serde sees it; and one scan parses at
//! most [`SCAN_BUDGET_BYTES`] of changed files, leaving the rest for the next
//! scan ([`ManifestDir::has_deferred`]), so a hundred files dropped at once
//! cost a hundred short scans, not one long one.
//!
//! [`ManifestDir`] turns a directory into a complete set of pods (see the SET
//! semantics in [`super`]). One bad file never hides the others: it is logged
//! (once per distinct content) and skipped.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus, Toleration};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{PodSource, SourceUpdate, CONFIG_HASH_ANNOTATION, CONFIG_SOURCE_ANNOTATION};
use crate::decode::{self, LimitError, Limits};
use crate::pod::validation::{self, FieldError};

/// What a manifest may be: [`Limits::MANIFEST`].
const LIMITS: Limits = Limits::MANIFEST;

/// Largest manifest picolet will read (256 KiB). A real pod manifest is a few
/// KiB; the limit keeps a stray log or core file in the directory from eating
/// the memory of a 256 MiB board, and bounds how long one parse holds the
/// thread (libyaml reads ~50 MB/s on a desktop core, less on a board).
pub const MAX_MANIFEST_BYTES: u64 = LIMITS.max_bytes as u64;

/// How many bytes of changed manifests one scan parses (at least one file is
/// always parsed). The rest wait for the next scan.
pub const SCAN_BUDGET_BYTES: usize = 256 * 1024;

/// Why a manifest file was rejected. Every variant's message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read manifest {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Not a regular file (a FIFO, a device, a socket), whatever a symlink
    /// to it is called.
    #[error("manifest {} is not a regular file", .path.display())]
    NotAFile { path: PathBuf },
    /// The file is larger than [`MAX_MANIFEST_BYTES`].
    #[error("manifest {} is {size} bytes, over the {limit}-byte limit", .path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    /// The document nests too deeply or has too many nodes (aliases
    /// included); it was refused before it was parsed.
    #[error("manifest {} {source}", .path.display())]
    Limit {
        path: PathBuf,
        #[source]
        source: LimitError,
    },
    /// The file is not UTF-8 text.
    #[error("manifest {} is not UTF-8 text", .path.display())]
    NotText { path: PathBuf },
    /// The file holds no document (empty, or only comments).
    #[error("manifest {} is empty", .path.display())]
    Empty { path: PathBuf },
    /// The file holds more than one non-empty YAML document.
    #[error(
        "manifest {} holds {count} YAML documents; a static pod manifest must hold exactly one Pod",
        .path.display()
    )]
    MultipleDocuments { path: PathBuf, count: usize },
    /// YAML/JSON syntax error, or a field of the wrong type. `message` is
    /// the decoder's and already says "at line L column C" when known.
    #[error("cannot decode manifest {} as {format}: {message}", .path.display())]
    Decode {
        path: PathBuf,
        format: &'static str,
        message: String,
        /// 1-based line of the error, when the decoder knows it.
        line: Option<usize>,
        /// 1-based column of the error, when the decoder knows it.
        column: Option<usize>,
    },
    /// The object is not a `v1` `Pod`.
    #[error(
        "manifest {} must be kind Pod, apiVersion v1; found kind {kind:?}, apiVersion {api_version:?}",
        .path.display()
    )]
    NotAPod {
        path: PathBuf,
        kind: String,
        api_version: String,
    },
    /// The document is not an object at all.
    #[error("manifest {} is invalid: {message}", .path.display())]
    Invalid { path: PathBuf, message: String },
    /// The pod breaks the API server's validation rules; every problem is
    /// listed with its field path.
    #[error("manifest {} is invalid: {}", .path.display(), validation::summary(.errors))]
    Validation {
        path: PathBuf,
        errors: Vec<FieldError>,
    },
}

impl ManifestError {
    /// The manifest file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ManifestError::Io { path, .. }
            | ManifestError::NotAFile { path }
            | ManifestError::TooLarge { path, .. }
            | ManifestError::Limit { path, .. }
            | ManifestError::NotText { path }
            | ManifestError::Empty { path }
            | ManifestError::MultipleDocuments { path, .. }
            | ManifestError::Decode { path, .. }
            | ManifestError::NotAPod { path, .. }
            | ManifestError::Invalid { path, .. }
            | ManifestError::Validation { path, .. } => path,
        }
    }

    /// `(line, column)`, 1-based, for decode errors that have a location.
    pub fn location(&self) -> Option<(usize, usize)> {
        match self {
            ManifestError::Decode {
                line: Some(l),
                column: Some(c),
                ..
            } => Some((*l, *c)),
            ManifestError::Limit { source, .. } => {
                let at = match source {
                    LimitError::TooDeep { at, .. }
                    | LimitError::TooManyNodes { at, .. }
                    | LimitError::AliasExpansion { at, .. } => at,
                    LimitError::TooLarge { .. } => return None,
                };
                Some((at.line, at.column))
            }
            _ => None,
        }
    }
}

/// Parse one static pod manifest, apply the kubelet's static pod rules and
/// the API server's defaults, and validate the result with the API server's
/// rules. `path` is used in errors and in the UID; `node_name` is this
/// node's (normalised, lower-case) name.
pub fn parse_manifest(text: &str, path: &Path, node_name: &str) -> Result<Pod, ManifestError> {
    if text.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge {
            path: path.to_owned(),
            size: text.len() as u64,
            limit: MAX_MANIFEST_BYTES,
        });
    }
    let mut pod = decode(text, path)?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        // Renaming would hide it: `-<node>` is a name of sorts.
        let mut errors = validation::validate_pod(&pod).err().unwrap_or_default();
        errors.retain(|e| e.field == "metadata.name");
        return Err(ManifestError::Validation {
            path: path.to_owned(),
            errors,
        });
    }

    // The UID: md5 over the node, the file and the pod as written. k8s-openapi
    // serialises fields in a fixed order and maps as BTreeMaps, so this JSON
    // is canonical: formatting, comments or YAML-vs-JSON do not change it.
    let written = serde_json::to_vec(&pod).expect("a Pod always serialises to JSON");
    let mut hasher = md5::Context::new();
    hasher.consume(format!("host:{node_name}"));
    hasher.consume(format!("file:{}", path.display()));
    hasher.consume(&written);
    let hash = format!("{:x}", hasher.compute());

    let meta = &mut pod.metadata;
    meta.name = Some(format!("{name}-{}", node_name.to_lowercase()));
    if meta.namespace.as_deref().unwrap_or("").is_empty() {
        meta.namespace = Some("default".into());
    }
    if meta.uid.as_deref().unwrap_or("").is_empty() {
        meta.uid = Some(hash);
    }
    let uid = meta.uid.clone().unwrap_or_default();
    let annotations = meta.annotations.get_or_insert_with(Default::default);
    annotations.insert(
        CONFIG_SOURCE_ANNOTATION.into(),
        PodSource::File.as_str().into(),
    );
    annotations.insert(CONFIG_HASH_ANNOTATION.into(), uid);

    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    spec.node_name = Some(node_name.to_owned());
    // Static pods tolerate every NoExecute taint, so node problems never
    // evict them (kubelet: AddOrUpdateTolerationInPod).
    let tolerate_all = Toleration {
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        ..Default::default()
    };
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    match tolerations
        .iter_mut()
        .find(|t| same_toleration(t, &tolerate_all))
    {
        Some(existing) => *existing = tolerate_all,
        None => tolerations.push(tolerate_all),
    }
    pod.status.get_or_insert_with(PodStatus::default).phase = Some("Pending".into());

    crate::pod::defaults::apply(&mut pod);
    validation::validate_pod(&pod).map_err(|errors| ManifestError::Validation {
        path: path.to_owned(),
        errors,
    })?;
    Ok(pod)
}

/// Kubelet's `Toleration.MatchToleration`: same key, operator, value, effect.
fn same_toleration(a: &Toleration, b: &Toleration) -> bool {
    let s = |o: &Option<String>| o.clone().unwrap_or_default();
    s(&a.key) == s(&b.key)
        && s(&a.operator) == s(&b.operator)
        && s(&a.value) == s(&b.value)
        && s(&a.effect) == s(&b.effect)
}

/// Text → `Pod`, within [`LIMITS`], checking one document and
/// `kind`/`apiVersion` first so those mistakes get a clear message rather
/// than a serde one.
fn decode(text: &str, path: &Path) -> Result<Pod, ManifestError> {
    let limit = |source| ManifestError::Limit {
        path: path.to_owned(),
        source,
    };
    if !text.trim_start().starts_with('{') {
        decode::check_yaml(text, &LIMITS).map_err(limit)?;
        return decode_yaml(text, path);
    }
    decode::check_json(text.as_bytes(), &LIMITS).map_err(limit)?;
    // Looks like JSON, but `{kind: Pod, ...}` is a YAML flow mapping: if it
    // is not JSON but is YAML, take it; if it is neither, the JSON error is
    // the one that makes sense to the author.
    match decode_json(text, path) {
        Err(json @ ManifestError::Decode { .. }) => {
            if decode::check_yaml(text, &LIMITS).is_err() {
                return Err(json);
            }
            decode_yaml(text, path).map_err(|_| json)
        }
        other => other,
    }
}

fn decode_json(text: &str, path: &Path) -> Result<Pod, ManifestError> {
    let err = |e: serde_json::Error| ManifestError::Decode {
        path: path.to_owned(),
        format: "JSON",
        message: e.to_string(),
        line: Some(e.line()).filter(|&l| l > 0),
        column: Some(e.column()).filter(|&c| c > 0),
    };
    match serde_json::from_str::<Head>(text).map_err(err)? {
        Head::Object { kind, api_version } => check_kind(path, kind, api_version)?,
        _ => return Err(not_a_mapping(path)),
    }
    serde_json::from_str(text).map_err(err)
}

fn decode_yaml(text: &str, path: &Path) -> Result<Pod, ManifestError> {
    let err = |e: serde_yaml_ng::Error| ManifestError::Decode {
        path: path.to_owned(),
        format: "YAML",
        message: e.to_string(),
        line: e.location().map(|l| l.line()),
        column: e.location().map(|l| l.column()),
    };
    // Find the non-empty documents (`---` separators with nothing between
    // them, or a trailing `---`, produce null documents, which are ignored).
    // Only their type meta is kept: the rest is skipped, not built.
    let mut found = None;
    let mut count = 0;
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let head = Head::deserialize(doc).map_err(err)?;
        if !matches!(head, Head::Null) {
            count += 1;
            found.get_or_insert((i, head));
        }
    }
    let Some((index, head)) = found else {
        return Err(ManifestError::Empty {
            path: path.to_owned(),
        });
    };
    if count > 1 {
        return Err(ManifestError::MultipleDocuments {
            path: path.to_owned(),
            count,
        });
    }
    let Head::Object { kind, api_version } = head else {
        return Err(not_a_mapping(path));
    };
    check_kind(path, kind, api_version)?;
    // Decode the Pod straight from the text so type errors keep their
    // location.
    let doc = serde_yaml_ng::Deserializer::from_str(text)
        .nth(index)
        .expect("the document was there a moment ago");
    Pod::deserialize(doc).map_err(err)
}

fn not_a_mapping(path: &Path) -> ManifestError {
    ManifestError::Invalid {
        path: path.to_owned(),
        message: "the document is not a mapping (expected a Pod object)".into(),
    }
}

fn check_kind(
    path: &Path,
    kind: Option<String>,
    api_version: Option<String>,
) -> Result<(), ManifestError> {
    if kind.as_deref() == Some("Pod") && api_version.as_deref() == Some("v1") {
        return Ok(());
    }
    Err(ManifestError::NotAPod {
        path: path.to_owned(),
        kind: kind.unwrap_or_default(),
        api_version: api_version.unwrap_or_default(),
    })
}

/// A document's top level as far as the manifest rules need it: null, an
/// object with its `kind` and `apiVersion` (when they are strings), or
/// anything else. Everything else in the document is skipped, not built.
enum Head {
    Null,
    Object {
        kind: Option<String>,
        api_version: Option<String>,
    },
    Other,
}

/// A mapping key, as far as [`Head`] cares.
enum HeadKey {
    Kind,
    ApiVersion,
    Other,
}

/// A string value, or `None` for anything else (skipped).
struct MaybeStr(Option<String>);

/// One visitor for the three: `Head` for documents, `HeadKey` for keys,
/// `MaybeStr` for values. Whatever a visitor does not want it skips.
struct Skim<T>(fn(Option<&str>) -> T, fn() -> T);

impl<'de, T> Visitor<'de> for Skim<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        Ok((self.0)(Some(v)))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<T, E> {
        Ok((self.0)(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<T, E> {
        Ok((self.0)(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<T, E> {
        Ok((self.0)(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<T, E> {
        Ok((self.0)(None))
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<T, E> {
        Ok((self.0)(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok((self.1)())
    }
    fn visit_none<E: de::Error>(self) -> Result<T, E> {
        Ok((self.1)())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok((self.0)(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok((self.0)(None))
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<T, A::Error> {
        de::VariantAccess::newtype_variant::<IgnoredAny>(data.variant::<IgnoredAny>()?.1)?;
        Ok((self.0)(None))
    }
}

impl<'de> Deserialize<'de> for HeadKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let key = |s: Option<&str>| match s {
            Some("kind") => HeadKey::Kind,
            Some("apiVersion") => HeadKey::ApiVersion,
            _ => HeadKey::Other,
        };
        d.deserialize_any(Skim(key, || HeadKey::Other))
    }
}

impl<'de> Deserialize<'de> for MaybeStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Skim(|s| MaybeStr(s.map(str::to_owned)), || MaybeStr(None)))
    }
}

impl<'de> Deserialize<'de> for Head {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Top;
        impl<'de> Visitor<'de> for Top {
            type Value = Head;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a Pod object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Head, A::Error> {
                let (mut kind, mut api_version) = (None, None);
                while let Some(key) = map.next_key::<HeadKey>()? {
                    match key {
                        HeadKey::Kind => kind = map.next_value::<MaybeStr>()?.0,
                        HeadKey::ApiVersion => api_version = map.next_value::<MaybeStr>()?.0,
                        HeadKey::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Head::Object { kind, api_version })
            }
            fn visit_unit<E: de::Error>(self) -> Result<Head, E> {
                Ok(Head::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Head, E> {
                Ok(Head::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Head, D::Error> {
                d.deserialize_any(self)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Head, E> {
                Ok(Head::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Head, E> {
                Ok(Head::Other)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Head, E> {
                Ok(Head::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Head, E> {
                Ok(Head::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Head, E> {
                Ok(Head::Other)
            }
            fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Head, E> {
                Ok(Head::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Head, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Head::Other)
            }
            fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Head, A::Error> {
                de::VariantAccess::newtype_variant::<IgnoredAny>(data.variant::<IgnoredAny>()?.1)?;
                Ok(Head::Other)
            }
        }
        d.deserialize_any(Top)
    }
}

/// Editor droppings and hidden files that are never manifests. (The kubelet
/// ignores names starting with `.`; the rest are swap/backup/temp files that
/// would otherwise be parsed mid-edit.)
pub fn is_ignored_file_name(name: &str) -> bool {
    name.starts_with('.')
        || name.ends_with('~')
        || name.ends_with(".swp")
        || name.ends_with(".swx")
        || name.ends_with(".tmp")
}

/// What the last scan made of one file, so unchanged files are neither
/// re-parsed nor re-logged.
struct Cached {
    /// The file's content md5, or the text of the error that kept us from
    /// reading it.
    key: CacheKey,
    /// The parsed pod; `None` when the file is broken.
    pod: Option<Pod>,
}

#[derive(PartialEq)]
enum CacheKey {
    Content(md5::Digest),
    Error(String),
    /// Read but not parsed yet: the scan's parse budget was spent.
    Deferred,
}

/// A static pod directory (`staticPodPath`) and what picolet last read from
/// it. As in the kubelet, the path may also be a single manifest file.
pub struct ManifestDir {
    path: PathBuf,
    node_name: String,
    cache: HashMap<PathBuf, Cached>,
    /// Duplicate `(kept, dropped)` file pairs already reported.
    duplicates: HashSet<(PathBuf, PathBuf)>,
    /// Whether the "directory missing" warning was given since it vanished.
    warned_missing: bool,
    /// Last directory read error logged, so it is logged once.
    dir_error: Option<String>,
    /// The last set returned, handed out again if the directory cannot be
    /// listed for a reason other than not existing.
    last: Vec<Pod>,
    /// How many problems were logged (each problem is logged once).
    reported: usize,
    /// The last scan left changed files unparsed (see [`SCAN_BUDGET_BYTES`]).
    deferred: bool,
    #[cfg(test)]
    messages: Vec<String>,
}

impl ManifestDir {
    /// A manifest directory for node `node_name`; nothing is read yet.
    pub fn new(path: impl Into<PathBuf>, node_name: impl Into<String>) -> Self {
        ManifestDir {
            path: path.into(),
            node_name: node_name.into(),
            cache: HashMap::new(),
            duplicates: HashSet::new(),
            warned_missing: false,
            dir_error: None,
            last: Vec::new(),
            reported: 0,
            deferred: false,
            #[cfg(test)]
            messages: Vec::new(),
        }
    }

    /// Log a problem. Callers make sure each distinct problem comes here
    /// once, however many scans see it.
    fn report(&mut self, level: log::Level, message: String) {
        self.reported += 1;
        log::log!(level, "{message}");
        #[cfg(test)]
        self.messages.push(message);
    }

    /// The directory (or file) being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the last [`scan`](Self::scan) left changed files for the next
    /// one, having spent its [`SCAN_BUDGET_BYTES`]. Their previous pods (if
    /// any) stay in the set meanwhile; the caller should scan again soon.
    pub fn has_deferred(&self) -> bool {
        self.deferred
    }

    /// Read every manifest and return the complete set of valid pods, in file
    /// name order. Broken files are logged once per distinct content and
    /// skipped; a missing directory is an empty set (with one warning). If the
    /// directory exists but cannot be listed (permissions, I/O error) the
    /// previous set is returned, so a transient error never kills pods.
    pub fn scan(&mut self) -> SourceUpdate {
        let pods = match self.list() {
            Ok(files) => {
                self.warned_missing = false;
                self.dir_error = None;
                let pods = self.read_files(files);
                self.last = pods.clone();
                pods
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !self.warned_missing {
                    let message = format!(
                        "static pod path {} does not exist; no static pods until it does",
                        self.path.display()
                    );
                    self.report(log::Level::Warn, message);
                    self.warned_missing = true;
                }
                self.cache.clear();
                self.duplicates.clear();
                self.last.clear();
                Vec::new()
            }
            Err(e) => {
                let msg = e.to_string();
                if self.dir_error.as_deref() != Some(msg.as_str()) {
                    let message = format!(
                        "cannot list static pod path {}: {msg}; keeping the previous {} pod(s)",
                        self.path.display(),
                        self.last.len()
                    );
                    self.report(log::Level::Error, message);
                    self.dir_error = Some(msg);
                }
                self.last.clone()
            }
        };
        SourceUpdate {
            source: PodSource::File,
            pods,
        }
    }

    /// The candidate manifest files, sorted by name, each with whether it
    /// is a regular file (a FIFO, socket or device is listed, to be
    /// reported, but never opened: opening some devices has effects).
    fn list(&self) -> io::Result<Vec<(PathBuf, bool)>> {
        let meta = fs::metadata(&self.path)?;
        if meta.is_file() {
            return Ok(vec![(self.path.clone(), true)]);
        }
        let mut files = Vec::new();
        for entry in fs::read_dir(&self.path)? {
            let entry = entry?;
            let name = entry.file_name();
            if is_ignored_file_name(&name.to_string_lossy()) {
                continue;
            }
            let path = entry.path();
            // Follow symlinks, as the kubelet does.
            match fs::metadata(&path) {
                Ok(m) if m.is_file() => files.push((path, true)),
                Ok(m) if m.is_dir() => {
                    log::debug!("not recursing into manifest directory {}", path.display())
                }
                Ok(_) => files.push((path, false)),
                // Dangling symlink, or deleted since read_dir.
                Err(_) => {}
            }
        }
        files.sort();
        Ok(files)
    }

    fn read_files(&mut self, files: Vec<(PathBuf, bool)>) -> Vec<Pod> {
        let mut cache = HashMap::with_capacity(files.len());
        let mut budget = Budget {
            left: SCAN_BUDGET_BYTES,
            parsed_any: false,
        };
        self.deferred = false;
        for (path, regular) in files {
            let previous = self.cache.remove(&path);
            let cached = self.read_one(&path, regular, previous, &mut budget);
            cache.insert(path, cached);
        }
        self.cache = cache; // files that vanished drop out here

        // Duplicate names (or explicit UIDs): the first file by name wins.
        let mut paths: Vec<&PathBuf> = self.cache.keys().collect();
        paths.sort();
        let mut by_name: HashMap<(String, String), &Path> = HashMap::new();
        let mut by_uid: HashMap<String, &Path> = HashMap::new();
        let mut duplicates = HashSet::new();
        let mut messages = Vec::new();
        let mut pods = Vec::with_capacity(paths.len());
        for path in paths {
            let Some(pod) = self.cache[path].pod.as_ref() else {
                continue;
            };
            let name = (
                pod.metadata.namespace.clone().unwrap_or_default(),
                pod.metadata.name.clone().unwrap_or_default(),
            );
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let clash = match by_name.get(&name) {
                Some(first) => Some((*first, format!("pod {}/{}", name.0, name.1))),
                None => by_uid
                    .get(&uid)
                    .map(|first| (*first, format!("pod UID {uid}"))),
            };
            if let Some((first, what)) = clash {
                let pair = (first.to_owned(), path.clone());
                if !self.duplicates.contains(&pair) {
                    messages.push(format!(
                        "static pod manifests {} and {} both define {what}; keeping {} and ignoring {}",
                        first.display(),
                        path.display(),
                        first.display(),
                        path.display()
                    ));
                }
                duplicates.insert(pair);
                continue;
            }
            by_name.insert(name, path);
            by_uid.insert(uid, path);
            pods.push(pod.clone());
        }
        self.duplicates = duplicates;
        for message in messages {
            self.report(log::Level::Error, message);
        }
        pods
    }

    /// Read and parse one file, reusing (and not re-logging) the previous
    /// result when the content is unchanged. A changed file that does not fit
    /// the scan's `budget` keeps its previous result, to be parsed next time.
    fn read_one(
        &mut self,
        path: &Path,
        regular: bool,
        previous: Option<Cached>,
        budget: &mut Budget,
    ) -> Cached {
        let read = if regular {
            read_limited(path)
        } else {
            Err(ManifestError::NotAFile {
                path: path.to_owned(),
            })
        };
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(e) => {
                let key = CacheKey::Error(e.to_string());
                let transient = matches!(e, ManifestError::Io { .. });
                let (logged, last_pod) = match previous {
                    Some(p) => (p.key == key, p.pod),
                    None => (false, None),
                };
                // An I/O hiccup on a file we have already parsed keeps its
                // pod; anything else (too large) drops it.
                let pod = if transient { last_pod } else { None };
                if !logged {
                    let what = if pod.is_some() {
                        "keeping the pod it last defined"
                    } else {
                        "skipping it"
                    };
                    self.report(log::Level::Error, format!("{e}; {what}"));
                }
                return Cached { key, pod };
            }
        };
        let key = CacheKey::Content(md5::compute(&bytes));
        if previous.as_ref().is_some_and(|p| p.key == key) {
            return previous.expect("checked just above");
        }
        if budget.parsed_any && bytes.len() > budget.left {
            self.deferred = true;
            log::debug!(
                "manifest {} changed; parsing it in the next scan (this one parsed {} bytes)",
                path.display(),
                SCAN_BUDGET_BYTES - budget.left
            );
            return match previous {
                Some(p) => Cached {
                    key: CacheKey::Deferred,
                    pod: p.pod,
                },
                None => Cached {
                    key: CacheKey::Deferred,
                    pod: None,
                },
            };
        }
        budget.parsed_any = true;
        budget.left = budget.left.saturating_sub(bytes.len());
        let parsed = match std::str::from_utf8(&bytes) {
            Ok(text) => parse_manifest(text, path, &self.node_name),
            Err(_) => Err(ManifestError::NotText {
                path: path.to_owned(),
            }),
        };
        match parsed {
            Ok(pod) => Cached {
                key,
                pod: Some(pod),
            },
            Err(e) => {
                self.report(log::Level::Error, format!("{e}; skipping it"));
                Cached { key, pod: None }
            }
        }
    }
}

/// How much more one scan may parse.
struct Budget {
    /// Bytes left of [`SCAN_BUDGET_BYTES`].
    left: usize,
    /// A file was parsed already (the first one always is).
    parsed_any: bool,
}

/// Read a file, refusing anything over [`MAX_MANIFEST_BYTES`] without
/// reading it all, and anything that is not a regular file. The listing
/// already left FIFOs and devices unopened; this covers one swapped in
/// since: the open neither blocks (a FIFO would hang the thread until
/// someone writes to it) nor adopts a terminal.
fn read_limited(path: &Path) -> Result<Vec<u8>, ManifestError> {
    let io_err = |source| ManifestError::Io {
        path: path.to_owned(),
        source,
    };
    let too_large = |size| ManifestError::TooLarge {
        path: path.to_owned(),
        size,
        limit: MAX_MANIFEST_BYTES,
    };
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32)
        .open(path)
        .map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    if !meta.is_file() {
        return Err(ManifestError::NotAFile {
            path: path.to_owned(),
        });
    }
    let size = meta.len();
    if size > MAX_MANIFEST_BYTES {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // The file may grow between stat and read: read one byte past the limit
    // to notice.
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = "edge-1";

    const NGINX: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: nginx
    image: nginx:1.27
";

    fn parse(text: &str) -> Result<Pod, ManifestError> {
        parse_manifest(text, Path::new("/etc/picolet/manifests/web.yaml"), NODE)
    }

    fn uid(pod: &Pod) -> String {
        pod.metadata.uid.clone().unwrap()
    }

    #[test]
    fn a_static_pod_is_renamed_bound_and_annotated_like_the_kubelet_does() {
        let pod = parse(NGINX).unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("web-edge-1"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some(NODE));
        let a = pod.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[CONFIG_SOURCE_ANNOTATION], "file");
        assert_eq!(a[CONFIG_HASH_ANNOTATION], uid(&pod));
        assert_eq!(uid(&pod).len(), 32, "hex md5");
        assert_eq!(
            pod.status.as_ref().unwrap().phase.as_deref(),
            Some("Pending")
        );
    }

    #[test]
    fn a_static_pod_tolerates_every_no_execute_taint_once() {
        let pod = parse(NGINX).unwrap();
        let tolerations = pod.spec.unwrap().tolerations.unwrap();
        assert_eq!(tolerations.len(), 1);
        assert_eq!(tolerations[0].operator.as_deref(), Some("Exists"));
        assert_eq!(tolerations[0].effect.as_deref(), Some("NoExecute"));
        assert_eq!(tolerations[0].key, None);

        let with_same = format!(
            "{NGINX}  tolerations:\n  - operator: Exists\n    effect: NoExecute\n    tolerationSeconds: 5\n"
        );
        let tolerations = parse(&with_same)
            .unwrap()
            .spec
            .unwrap()
            .tolerations
            .unwrap();
        assert_eq!(tolerations.len(), 1, "an identical toleration is replaced");
        assert_eq!(tolerations[0].toleration_seconds, None);
    }

    #[test]
    fn api_defaults_are_applied() {
        let pod = parse(NGINX).unwrap();
        let spec = pod.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(
            spec.containers[0].image_pull_policy.as_deref(),
            Some("IfNotPresent")
        );
    }

    #[test]
    fn an_explicit_namespace_and_uid_are_kept() {
        let text = NGINX.replace(
            "  name: web\n",
            "  name: web\n  namespace: kube-system\n  uid: 1234-abcd\n",
        );
        let pod = parse(&text).unwrap();
        assert_eq!(pod.metadata.namespace.as_deref(), Some("kube-system"));
        assert_eq!(uid(&pod), "1234-abcd");
        assert_eq!(
            pod.metadata.annotations.unwrap()[CONFIG_HASH_ANNOTATION],
            "1234-abcd"
        );
    }

    #[test]
    fn the_same_manifest_gives_the_same_uid_every_time() {
        assert_eq!(uid(&parse(NGINX).unwrap()), uid(&parse(NGINX).unwrap()));
        // Formatting and comments are not content.
        let reformatted = format!(
            "# the web server\n{}",
            NGINX.replace("kind: Pod", "kind:   Pod")
        );
        assert_eq!(
            uid(&parse(NGINX).unwrap()),
            uid(&parse(&reformatted).unwrap())
        );
    }

    #[test]
    fn editing_a_manifest_changes_the_pod_uid() {
        let edited = NGINX.replace("nginx:1.27", "nginx:1.28");
        assert_ne!(uid(&parse(NGINX).unwrap()), uid(&parse(&edited).unwrap()));
    }

    #[test]
    fn the_uid_depends_on_the_node_and_the_file() {
        let here = parse(NGINX).unwrap();
        let other_node = parse_manifest(NGINX, Path::new("/etc/picolet/manifests/web.yaml"), "n2");
        let other_file = parse_manifest(NGINX, Path::new("/etc/picolet/manifests/w.yaml"), NODE);
        assert_ne!(uid(&here), uid(&other_node.unwrap()));
        assert_ne!(uid(&here), uid(&other_file.unwrap()));
    }

    #[test]
    fn json_manifests_are_accepted_and_hash_like_the_same_yaml() {
        let json = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}"#;
        let pod = parse(json).unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("web-edge-1"));
        assert_eq!(uid(&pod), uid(&parse(NGINX).unwrap()));
    }

    #[test]
    fn a_yaml_flow_mapping_is_not_mistaken_for_json() {
        let flow = "{apiVersion: v1, kind: Pod, metadata: {name: web},
            spec: {containers: [{name: nginx, image: 'nginx:1.27'}]}}";
        assert_eq!(uid(&parse(flow).unwrap()), uid(&parse(NGINX).unwrap()));
    }

    #[test]
    fn a_multi_document_file_is_rejected_with_its_name() {
        let text = format!("{NGINX}---\n{}", NGINX.replace("web", "db"));
        let err = parse(&text).unwrap_err();
        assert!(
            matches!(err, ManifestError::MultipleDocuments { count: 2, .. }),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains("/etc/picolet/manifests/web.yaml"), "{msg}");
        assert!(msg.contains("2 YAML documents"), "{msg}");
    }

    #[test]
    fn empty_documents_around_the_pod_are_ignored() {
        let text = format!("---\n{NGINX}---\n");
        assert!(parse(&text).is_ok());
    }

    #[test]
    fn an_empty_file_is_rejected() {
        assert!(matches!(
            parse("# nothing\n").unwrap_err(),
            ManifestError::Empty { .. }
        ));
        assert!(matches!(
            parse("").unwrap_err(),
            ManifestError::Empty { .. }
        ));
    }

    #[test]
    fn a_yaml_syntax_error_reports_line_and_column() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n   labels: {a: b}\n";
        let err = parse(text).unwrap_err();
        assert!(
            matches!(err, ManifestError::Decode { format: "YAML", .. }),
            "{err:?}"
        );
        let (line, _column) = err.location().expect("a location");
        assert_eq!(line, 5, "{err}");
        let msg = err.to_string();
        assert!(msg.contains("web.yaml"), "{msg}");
        assert!(msg.contains("line 5"), "{msg}");
    }

    #[test]
    fn a_type_error_reports_line_and_column() {
        let text = NGINX.replace("  - name: nginx\n    image: nginx:1.27\n", "    nope\n");
        let err = parse(&text).unwrap_err();
        let (line, column) = err.location().expect("a location");
        assert_eq!((line, column), (7, 5), "{err}");
        assert!(err.to_string().contains("web.yaml"));
    }

    #[test]
    fn a_json_syntax_error_reports_line_and_column() {
        let err = parse("{\"apiVersion\": \"v1\",\n  \"kind\": }").unwrap_err();
        assert!(
            matches!(err, ManifestError::Decode { format: "JSON", .. }),
            "{err:?}"
        );
        assert_eq!(err.location().map(|(l, _)| l), Some(2), "{err}");
    }

    #[test]
    fn only_v1_pods_are_accepted() {
        let deployment = NGINX.replace("kind: Pod", "kind: Deployment");
        let err = parse(&deployment).unwrap_err();
        assert!(matches!(err, ManifestError::NotAPod { .. }), "{err:?}");
        assert!(err.to_string().contains("\"Deployment\""), "{err}");
        let v2 = NGINX.replace("apiVersion: v1", "apiVersion: v2");
        assert!(matches!(
            parse(&v2).unwrap_err(),
            ManifestError::NotAPod { .. }
        ));
        let no_kind = NGINX.replace("kind: Pod\n", "");
        assert!(matches!(
            parse(&no_kind).unwrap_err(),
            ManifestError::NotAPod { .. }
        ));
    }

    #[test]
    fn a_pod_needs_a_valid_name() {
        let unnamed = NGINX.replace("  name: web\n", "  labels: {a: b}\n");
        let err = parse(&unnamed).unwrap_err();
        assert_eq!(
            err.to_string(),
            "manifest /etc/picolet/manifests/web.yaml is invalid: metadata.name: Required value: name or generateName is required"
        );
        let bad = NGINX.replace("name: web", "name: Web_Server");
        let err = parse(&bad).unwrap_err();
        assert!(matches!(err, ManifestError::Validation { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("metadata.name: Invalid value: \"Web_Server-edge-1\": a lowercase RFC 1123 subdomain"),
            "{err}"
        );
        let dotted = NGINX.replace("name: web", "name: web.edge");
        assert!(parse(&dotted).is_ok(), "a DNS subdomain may contain dots");
    }

    #[test]
    fn a_pod_needs_containers_with_images() {
        let none = NGINX.replace("  - name: nginx\n    image: nginx:1.27\n", "  []\n");
        let none = none.replace("  containers:\n  []", "  containers: []");
        assert!(parse(&none)
            .unwrap_err()
            .to_string()
            .ends_with("is invalid: spec.containers: Required value"));
        let no_image = NGINX.replace("    image: nginx:1.27\n", "");
        assert!(parse(&no_image)
            .unwrap_err()
            .to_string()
            .ends_with("is invalid: spec.containers[0].image: Required value"));
    }

    #[test]
    fn a_pod_the_api_server_would_refuse_is_refused_with_every_field_named() {
        let text = NGINX.replace(
            "    image: nginx:1.27\n",
            "    image: nginx:1.27\n    resources:\n      limits: {memory: -1Gi, cpu: 1e400, pids: 10}\n",
        ) + "  terminationGracePeriodSeconds: -5\n";
        let err = parse(&text).unwrap_err();
        let ManifestError::Validation { errors, .. } = &err else {
            panic!("{err:?}");
        };
        let msg = err.to_string();
        assert!(
            msg.starts_with("manifest /etc/picolet/manifests/web.yaml is invalid: "),
            "{msg}"
        );
        for want in [
            "spec.terminationGracePeriodSeconds: Invalid value: -5: must be greater than or equal to 0",
            "spec.containers[0].resources.limits[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0",
            "spec.containers[0].resources.limits[cpu]: Invalid value: \"1e400\": must be less than or equal to 9223372036854775807m",
            "spec.containers[0].resources.limits[pids]: Invalid value: pids: must be a standard resource for containers",
        ] {
            assert!(errors.iter().any(|e| e.to_string() == want), "{want}\n{msg}");
        }
    }

    #[test]
    fn a_deeply_nested_manifest_is_refused_before_it_is_parsed() {
        let deep = format!("{NGINX}a: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        assert!(deep.len() < MAX_MANIFEST_BYTES as usize);
        let err = parse(&deep).unwrap_err();
        assert!(
            matches!(
                &err,
                ManifestError::Limit {
                    source: LimitError::TooDeep { .. },
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(err.location().map(|(l, _)| l), Some(9));
        assert!(
            err.to_string()
                .starts_with("manifest /etc/picolet/manifests/web.yaml nests deeper than 64 levels (at line 9 column"),
            "{err}"
        );
        // Looking like JSON does not help, nor does falling back to YAML.
        let json = format!("{{\"a\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(
            parse(&json).unwrap_err(),
            ManifestError::Limit { .. }
        ));
        let flow = format!("{{a: {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(
            parse(&flow).unwrap_err(),
            ManifestError::Decode { .. } | ManifestError::Limit { .. }
        ));
    }

    #[test]
    fn an_alias_bomb_is_refused_by_arithmetic() {
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for (n, prev) in ["b", "c", "d", "e", "f", "g", "h", "i"]
            .iter()
            .zip(["a", "b", "c", "d", "e", "f", "g", "h"])
        {
            bomb.push_str(&format!(
                "{n}: &{n} [{}]\n",
                vec![format!("*{prev}"); 10].join(", ")
            ));
        }
        let text = format!("{NGINX}{bomb}");
        let err = parse(&text).unwrap_err();
        assert!(
            err.to_string().contains("expands aliases to more than"),
            "{err}"
        );
    }

    #[test]
    fn odd_documents_get_clear_errors() {
        for (text, want) in [
            ("- a\n- b\n", "the document is not a mapping"),
            ("just a string\n", "the document is not a mapping"),
            ("[1, 2]", "the document is not a mapping"),
            ("{\"kind\": 5, \"apiVersion\": \"v1\"}", "found kind \"\""),
            ("!!binary aGVsbG8=\n", "the document is not a mapping"),
            ("kind: !custom Pod\napiVersion: v1\n", "found kind \"\""),
            (
                "? [a, b]\n: c\nkind: Pod\n",
                "found kind \"Pod\", apiVersion \"\"",
            ),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn an_oversized_manifest_is_rejected() {
        let huge = format!("{NGINX}#{}\n", "x".repeat(MAX_MANIFEST_BYTES as usize));
        let err = parse(&huge).unwrap_err();
        assert!(matches!(err, ManifestError::TooLarge { .. }), "{err:?}");
        assert!(err.to_string().contains("web.yaml"));
    }

    #[test]
    fn editor_and_hidden_files_are_ignored() {
        for name in [
            ".web.yaml",
            "web.yaml~",
            ".web.yaml.swp",
            "web.yaml.swp",
            "web.tmp",
        ] {
            assert!(is_ignored_file_name(name), "{name}");
        }
        assert!(!is_ignored_file_name("web.yaml"));
        assert!(!is_ignored_file_name("web.json"));
    }

    // --- ManifestDir ---------------------------------------------------------

    /// A fresh directory under the system temp dir, removed on drop.
    pub(crate) struct TempDir(pub PathBuf);

    impl TempDir {
        pub(crate) fn new(tag: &str) -> Self {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("picolet-{tag}-{}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
        pub(crate) fn write(&self, name: &str, text: &str) {
            fs::write(self.0.join(name), text).unwrap();
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn names(update: &SourceUpdate) -> Vec<String> {
        update
            .pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect()
    }

    fn pod_yaml(name: &str) -> String {
        NGINX.replace("name: web", &format!("name: {name}"))
    }

    #[test]
    fn a_directory_becomes_the_set_of_its_pods_in_file_name_order() {
        let dir = TempDir::new("set");
        dir.write("b.yaml", &pod_yaml("bravo"));
        dir.write("a.yaml", &pod_yaml("alpha"));
        dir.write(".hidden.yaml", &pod_yaml("hidden"));
        dir.write("a.yaml.swp", "binary junk");
        dir.write("a.yaml~", &pod_yaml("backup"));
        fs::create_dir(dir.0.join("sub")).unwrap();
        let mut md = ManifestDir::new(&dir.0, NODE);
        let update = md.scan();
        assert_eq!(update.source, PodSource::File);
        assert_eq!(names(&update), ["alpha-edge-1", "bravo-edge-1"]);
        assert_eq!(
            md.scan(),
            update,
            "rescanning an unchanged directory gives the same set"
        );
    }

    #[test]
    fn a_broken_manifest_does_not_hide_the_others() {
        let dir = TempDir::new("broken");
        dir.write("a.yaml", &pod_yaml("alpha"));
        dir.write("b.yaml", "apiVersion: v1\nkind: Pod\nmetadata: [\n");
        dir.write("c.json", "{\"kind\": \"Pod\"");
        dir.write("d.yaml", &pod_yaml("delta"));
        let mut md = ManifestDir::new(&dir.0, NODE);
        assert_eq!(names(&md.scan()), ["alpha-edge-1", "delta-edge-1"]);
    }

    #[test]
    fn a_broken_manifest_is_logged_once() {
        let dir = TempDir::new("logonce");
        dir.write("broken-once.yaml", "kind: Pod\nmetadata: {name: x\n");
        let mut md = ManifestDir::new(&dir.0, NODE);
        md.scan();
        md.scan();
        md.scan();
        assert_eq!(md.reported, 1);
        let msg = &md.messages[0];
        assert!(
            msg.contains("broken-once.yaml") && msg.contains("line 3"),
            "{msg}"
        );
        // Different broken content is a new problem, logged again.
        dir.write("broken-once.yaml", "kind: Pod\nmetadata: {name: y\n");
        md.scan();
        md.scan();
        assert_eq!(md.reported, 2);
        // Fixed, then broken the same way again: logged again.
        dir.write("broken-once.yaml", &pod_yaml("fixed"));
        md.scan();
        dir.write("broken-once.yaml", "kind: Pod\nmetadata: {name: y\n");
        md.scan();
        assert_eq!(md.reported, 3);
    }

    #[test]
    fn a_missing_directory_is_an_empty_set_with_one_warning() {
        let dir = TempDir::new("missing");
        let missing = dir.0.join("not-there");
        let mut md = ManifestDir::new(&missing, NODE);
        assert!(md.scan().pods.is_empty());
        assert!(md.scan().pods.is_empty());
        assert_eq!(md.reported, 1);
        fs::create_dir(&missing).unwrap();
        fs::write(missing.join("a.yaml"), pod_yaml("alpha")).unwrap();
        assert_eq!(
            names(&md.scan()),
            ["alpha-edge-1"],
            "the directory appearing is noticed"
        );
    }

    #[test]
    fn the_first_file_wins_when_two_define_the_same_pod() {
        let dir = TempDir::new("dupe");
        dir.write("10-web.yaml", &pod_yaml("web"));
        dir.write(
            "20-web.yaml",
            &pod_yaml("web").replace("nginx:1.27", "nginx:1.28"),
        );
        let mut md = ManifestDir::new(&dir.0, NODE);
        let update = md.scan();
        assert_eq!(names(&update), ["web-edge-1"]);
        let image = update.pods[0].spec.as_ref().unwrap().containers[0]
            .image
            .clone();
        assert_eq!(image.as_deref(), Some("nginx:1.27"));
        md.scan();
        assert_eq!(md.reported, 1, "reported once");
        let (first, second) = (dir.0.join("10-web.yaml"), dir.0.join("20-web.yaml"));
        let msg = &md.messages[0];
        assert!(msg.contains(&first.display().to_string()), "{msg}");
        assert!(msg.contains(&second.display().to_string()), "{msg}");
    }

    #[test]
    fn an_oversized_file_is_skipped_without_being_read() {
        let dir = TempDir::new("huge");
        dir.write("a.yaml", &pod_yaml("alpha"));
        let f = fs::File::create(dir.0.join("core")).unwrap();
        f.set_len(MAX_MANIFEST_BYTES + 1).unwrap();
        let mut md = ManifestDir::new(&dir.0, NODE);
        assert_eq!(names(&md.scan()), ["alpha-edge-1"]);
    }

    #[test]
    fn a_single_file_path_is_a_one_pod_source() {
        let dir = TempDir::new("single");
        dir.write("only.yaml", &pod_yaml("only"));
        let mut md = ManifestDir::new(dir.0.join("only.yaml"), NODE);
        assert_eq!(names(&md.scan()), ["only-edge-1"]);
    }

    fn mkfifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }

    #[test]
    fn a_fifo_is_refused_without_blocking_even_behind_a_symlink() {
        let dir = TempDir::new("fifo");
        let fifo = dir.0.join("pipe.yaml");
        mkfifo(&fifo);
        // Nobody writes to it: a blocking open would hang this test.
        let err = read_limited(&fifo).unwrap_err();
        assert!(matches!(err, ManifestError::NotAFile { .. }), "{err:?}");
        assert!(err.to_string().ends_with("pipe.yaml is not a regular file"));
        std::os::unix::fs::symlink(&fifo, dir.0.join("link.yaml")).unwrap();
        assert!(matches!(
            read_limited(&dir.0.join("link.yaml")),
            Err(ManifestError::NotAFile { .. })
        ));
        dir.write("a.yaml", &pod_yaml("alpha"));
        std::os::unix::fs::symlink("/dev/null", dir.0.join("null.yaml")).unwrap();
        let mut md = ManifestDir::new(&dir.0, NODE);
        assert_eq!(names(&md.scan()), ["alpha-edge-1"]);
        md.scan();
        let special: Vec<&String> = md
            .messages
            .iter()
            .filter(|m| m.contains("is not a regular file; skipping it"))
            .collect();
        assert_eq!(
            special.len(),
            3,
            "the FIFO and both links, once each: {:?}",
            md.messages
        );
    }

    #[test]
    fn binary_garbage_is_not_text() {
        let dir = TempDir::new("garbage");
        let garbage: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        fs::write(dir.0.join("garbage.yaml"), garbage).unwrap();
        dir.write("a.yaml", &pod_yaml("alpha"));
        let mut md = ManifestDir::new(&dir.0, NODE);
        assert_eq!(names(&md.scan()), ["alpha-edge-1"]);
        assert!(
            md.messages[0].ends_with("garbage.yaml is not UTF-8 text; skipping it"),
            "{:?}",
            md.messages
        );
    }

    #[test]
    fn one_scan_parses_a_bounded_amount_and_leaves_the_rest_for_the_next() {
        let dir = TempDir::new("budget");
        // Five valid pods of ~100 KiB each (a big annotation).
        let big = |name: &str| {
            pod_yaml(name).replace(
                "  name: ",
                &format!(
                    "  annotations:\n    note: \"{}\"\n  name: ",
                    "x".repeat(100 * 1024)
                ),
            )
        };
        for n in ["a", "b", "c", "d", "e"] {
            dir.write(&format!("{n}.yaml"), &big(n));
        }
        let mut md = ManifestDir::new(&dir.0, NODE);
        let first = md.scan();
        assert_eq!(names(&first), ["a-edge-1", "b-edge-1"]);
        assert!(md.has_deferred());
        md.scan();
        let third = md.scan();
        assert_eq!(
            names(&third),
            ["a-edge-1", "b-edge-1", "c-edge-1", "d-edge-1", "e-edge-1"]
        );
        assert!(!md.has_deferred());
        // A changed file waiting for its turn keeps its previous pod.
        for n in ["a", "b", "c"] {
            dir.write(
                &format!("{n}.yaml"),
                &big(n).replace("nginx:1.27", "nginx:1.28"),
            );
        }
        let update = md.scan();
        assert!(md.has_deferred());
        assert_eq!(update.pods.len(), 5);
        let image = |u: &SourceUpdate, i: usize| {
            u.pods[i].spec.as_ref().unwrap().containers[0]
                .image
                .clone()
                .unwrap()
        };
        assert_eq!(image(&update, 0), "nginx:1.28");
        assert_eq!(
            image(&update, 2),
            "nginx:1.27",
            "c waits, still defined by its old content"
        );
        let update = md.scan();
        assert_eq!(image(&update, 2), "nginx:1.28");
        assert!(
            md.messages.is_empty(),
            "deferring is not a problem: {:?}",
            md.messages
        );
    }
}
