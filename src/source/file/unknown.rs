//! The keys of a static pod manifest that the Pod type does not have:
//! found by [`crate::decode::unknown`] on the decoded document, each with
//! its line in the file, and worded for the log as the API server words
//! its warning. [`super::ManifestDir`] logs them once per file content.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

use crate::decode;

/// A key of a manifest that the Pod type does not have. The API server
/// warns about such a key and drops it; kubelet drops it silently; picolet
/// drops it and warns, once per key, when it reads the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    pub path: PathBuf,
    /// 1-based line of the key in the file, when found.
    pub line: Option<usize>,
    /// The API server's spelling: `spec.containers[0].comand`.
    pub field: String,
}

impl std::fmt::Display for UnknownField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "manifest {}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, " line {line}")?;
        }
        write!(f, ": unknown field \"{}\" (typo?); ignoring it", self.field)
    }
}

/// The keys of the decoded document `json` that `pod` lacks, each with its
/// line in the file (`line_of` maps a JSON line to it).
pub(super) fn unknown_fields(
    json: &str,
    pod: &Pod,
    path: &Path,
    line_of: impl Fn(usize) -> Option<usize>,
) -> Vec<UnknownField> {
    let (Ok(written), Ok(kept)) = (
        serde_json::from_str::<serde_json::Value>(json),
        crate::pod::to_json_value(pod),
    ) else {
        return Vec::new();
    };
    let fields = decode::unknown::unknown_fields(&written, &kept);
    let lines = decode::unknown::key_lines(json, &fields);
    let mut unknown: Vec<UnknownField> = fields
        .into_iter()
        .zip(lines)
        .map(|(field, line)| UnknownField {
            path: path.to_owned(),
            line: line.and_then(&line_of),
            field,
        })
        .collect();
    unknown.sort_by_key(|u| u.line);
    unknown
}
