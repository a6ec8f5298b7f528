//! A manifest directory read once for `picolet check`: every file read
//! and parsed exactly as [`super::ManifestDir::scan`] reads it (the same
//! listing, bounded read, decoding, defaults and validation), but each
//! file's outcome returned rather than logged, and no pod kept.

use std::io;
use std::path::PathBuf;

use super::UnknownField;
use super::{parse_manifest_with_unknown_fields, read_limited, ManifestDir, ManifestError};

/// One manifest file's outcome: the unknown fields of a valid pod (which
/// `run` would start, warning about each), or why `run` would skip it.
pub type Outcome = Result<Vec<UnknownField>, ManifestError>;

impl ManifestDir {
    /// Every candidate file in name order with its [`Outcome`]; `Err` when
    /// the directory (or file) cannot be listed, a missing one included.
    /// No parse budget: a check reads everything at once.
    pub fn check(&self) -> io::Result<Vec<(PathBuf, Outcome)>> {
        let files = self.list()?;
        Ok(files
            .into_iter()
            .map(|(path, regular)| {
                let outcome = if regular {
                    read_limited(&path).and_then(|bytes| {
                        let text = std::str::from_utf8(&bytes)
                            .map_err(|_| ManifestError::NotText { path: path.clone() })?;
                        parse_manifest_with_unknown_fields(text, &path, &self.node_name)
                            .map(|(_, unknown)| unknown)
                    })
                } else {
                    Err(ManifestError::NotAFile { path: path.clone() })
                };
                (path, outcome)
            })
            .collect())
    }
}
