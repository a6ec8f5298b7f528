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
//!   its validation ([`crate::pod::validation::validate_pod_create`], which
//!   also refuses `ephemeralContainers`, as kubelet does): a pod the
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
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus, Toleration};
use serde::Deserialize;

use super::{PodSource, SourceUpdate, CONFIG_HASH_ANNOTATION, CONFIG_SOURCE_ANNOTATION};
use crate::decode::{self, LimitError, Limits};
use crate::pod::validation::{self, FieldError};
pub use check::Outcome;
use head::Head;
use unknown::unknown_fields;
pub use unknown::UnknownField;

mod check;
mod head;
mod unknown;

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
    parse_manifest_with_unknown_fields(text, path, node_name).map(|(pod, _)| pod)
}

/// [`parse_manifest`], with the keys of the manifest the Pod type does not
/// have, in line order.
pub fn parse_manifest_with_unknown_fields(
    text: &str,
    path: &Path,
    node_name: &str,
) -> Result<(Pod, Vec<UnknownField>), ManifestError> {
    if text.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge {
            path: path.to_owned(),
            size: text.len() as u64,
            limit: MAX_MANIFEST_BYTES,
        });
    }
    let (mut pod, unknown) = decode(text, path)?;
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
    validation::validate_pod_create(&pod).map_err(|errors| ManifestError::Validation {
        path: path.to_owned(),
        errors,
    })?;
    Ok((pod, unknown))
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
fn decode(text: &str, path: &Path) -> Result<(Pod, Vec<UnknownField>), ManifestError> {
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

fn decode_json(text: &str, path: &Path) -> Result<(Pod, Vec<UnknownField>), ManifestError> {
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
    let pod = serde_json::from_str(text).map_err(err)?;
    let unknown = unknown_fields(text, &pod, path, Some);
    Ok((pod, unknown))
}

/// YAML is read as kubelet reads it: converted to JSON, then decoded by the
/// same JSON decoder as everything else (see [`decode::yaml_to_json`]), with
/// errors located in the YAML.
fn decode_yaml(text: &str, path: &Path) -> Result<(Pod, Vec<UnknownField>), ManifestError> {
    let decode_error = |message: String, at: Option<decode::Position>| ManifestError::Decode {
        path: path.to_owned(),
        format: "YAML",
        message,
        line: at.map(|a| a.line),
        column: at.map(|a| a.column),
    };
    let docs = match decode::yaml_to_json(text) {
        Ok(docs) => docs,
        Err(decode::YamlToJsonError::Syntax) => return Err(yaml_syntax_error(text, path)),
        Err(e @ decode::YamlToJsonError::ComplexKey { at })
        | Err(e @ decode::YamlToJsonError::UnknownAlias { at })
        | Err(e @ decode::YamlToJsonError::UnsupportedTag { at, .. }) => {
            return Err(decode_error(format!("the document {e}"), Some(at)))
        }
    };
    // `---` separators with nothing between them, or a trailing `---`,
    // produce null documents, which are ignored.
    let mut docs = docs.into_iter().filter(|d| !d.is_null());
    let Some(doc) = docs.next() else {
        return Err(ManifestError::Empty {
            path: path.to_owned(),
        });
    };
    let more = docs.count();
    if more > 0 {
        return Err(ManifestError::MultipleDocuments {
            path: path.to_owned(),
            count: more + 1,
        });
    }
    let err = |e: serde_json::Error| {
        let (message, at) = doc.locate(&e);
        decode_error(message, at)
    };
    let Head::Object { kind, api_version } =
        serde_json::from_str::<Head>(&doc.json).map_err(err)?
    else {
        return Err(not_a_mapping(path));
    };
    check_kind(path, kind, api_version)?;
    let pod = serde_json::from_str(&doc.json).map_err(err)?;
    let unknown = unknown_fields(&doc.json, &pod, path, |line| {
        doc.position(line).map(|at| at.line)
    });
    Ok((pod, unknown))
}

/// libyaml's own message for a syntax error, with its location, through
/// serde_yaml_ng (the converter cannot reach it).
fn yaml_syntax_error(text: &str, path: &Path) -> ManifestError {
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        if let Err(e) = serde_yaml_ng::Value::deserialize(doc) {
            return ManifestError::Decode {
                path: path.to_owned(),
                format: "YAML",
                message: e.to_string(),
                line: e.location().map(|l| l.line()),
                column: e.location().map(|l| l.column()),
            };
        }
    }
    ManifestError::Decode {
        path: path.to_owned(),
        format: "YAML",
        message: "not valid YAML".into(),
        line: None,
        column: None,
    }
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
    /// The parsed pod; `None` when the file is broken. Shared with the sets
    /// handed out, so a rescan of unchanged files copies nothing.
    pod: Option<Rc<Pod>>,
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
    /// A listing succeeded (or found the path missing) at least once: the
    /// set is authoritative from then on, also across a later error.
    listed: bool,
    /// Last directory read error logged, so it is logged once.
    dir_error: Option<String>,
    /// The last set returned, handed out again if the directory cannot be
    /// listed for a reason other than not existing.
    last: Vec<Rc<Pod>>,
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
            listed: false,
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
                self.listed = true;
                self.dir_error = None;
                let pods = self.read_files(files);
                self.last = pods.clone();
                pods
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // A missing path is a successful read of "no static pods".
                self.listed = true;
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
            authoritative: self.listed,
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

    fn read_files(&mut self, files: Vec<(PathBuf, bool)>) -> Vec<Rc<Pod>> {
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

        // Duplicate names (or explicit UIDs): the pod already running from
        // the last set wins, so a new file never takes down an established
        // workload; between newcomers, the first file by name. The set
        // itself stays in file-name order.
        let established: HashSet<&str> = self
            .last
            .iter()
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        let mut paths: Vec<&PathBuf> = self.cache.keys().collect();
        paths.sort();
        let mut by_priority = paths.clone();
        by_priority.sort_by_key(|path| {
            let uid = self.cache[*path]
                .pod
                .as_ref()
                .and_then(|p| p.metadata.uid.as_deref());
            !uid.is_some_and(|u| established.contains(u))
        });
        let mut by_name: HashMap<(String, String), &Path> = HashMap::new();
        let mut by_uid: HashMap<String, &Path> = HashMap::new();
        let mut duplicates = HashSet::new();
        let mut messages = Vec::new();
        let mut winners: HashSet<&Path> = HashSet::new();
        for path in by_priority {
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
            winners.insert(path);
        }
        let pods: Vec<Rc<Pod>> = paths
            .into_iter()
            .filter(|p| winners.contains(p.as_path()))
            .filter_map(|p| self.cache[p].pod.clone())
            .collect();
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
            Ok(text) => parse_manifest_with_unknown_fields(text, path, &self.node_name),
            Err(_) => Err(ManifestError::NotText {
                path: path.to_owned(),
            }),
        };
        match parsed {
            Ok((pod, unknown)) => {
                for field in unknown {
                    self.report(log::Level::Warn, field.to_string());
                }
                Cached {
                    key,
                    pod: Some(Rc::new(pod)),
                }
            }
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
mod tests;
