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
//! [`ManifestDir`] (in `file/dir.rs`) turns a directory into a complete set of pods (see the SET
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
mod dir;
mod head;
mod unknown;

use dir::read_limited;
pub use dir::ManifestDir;

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

#[cfg(test)]
mod tests;
