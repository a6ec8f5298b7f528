//! picolet's configuration: the `kubelet.config.k8s.io/v1beta1`
//! `KubeletConfiguration` file format, kubelet's defaults, validation, and
//! the command-line flags that override the file.
//!
//! What it owns, file by file:
//!
//! * `fields.rs`: [`KubeletConfig`], the fields picolet implements, each
//!   declared once with its key, its default and its validator;
//! * `values.rs`: the validators, one per kind of value (durations, sizes,
//!   paths, eviction thresholds, ...);
//! * `file.rs`: the file format: YAML or JSON, type meta, layers (a board
//!   profile, then the user's file, then flags) and the report of fields
//!   picolet ignores, told apart from kubelet's upstream fields;
//! * `flags.rs`: kubelet's flag names, in one table that maps each flag to a
//!   field; flags are validated by the same code as the file;
//! * [`duration`]: Go durations, parsed and printed (the crate's only
//!   home for them, public for that reason);
//! * `board.rs`: the embedded board profiles `--board` starts from;
//! * `configz.rs`: the configuration in effect as kubelet's `/configz`
//!   serves it.
//!
//! Adding a setting costs one entry in the field list of `fields.rs` and, if
//! it has a flag, one row in the table of `flags.rs`.
//!
//! Why it is shaped this way: picolet accepts real kubelet configuration
//! files so that an edge node can move between picolet and kubelet without
//! rewriting its config. Fields picolet implements are checked strictly: a
//! bad value is an error naming the file (or flag) and the field. Fields it
//! does not implement are reported, not rejected. Settings that would
//! silently weaken security or that picolet cannot honour (`readOnlyPort !=
//! 0`, anonymous authentication, `cgroupDriver: systemd`) are errors.
//!
//! What it must NOT know: the agent, the runtime, or any I/O. The caller
//! reads the file and hands its text to [`resolve`]; the agent builds its own
//! settings from a [`KubeletConfig`]. The one exception is
//! [`KubeletConfig::node_name`], which falls back to the machine's hostname.

mod board;
mod configz;
pub mod duration;
mod fields;
mod file;
mod flags;
mod values;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

pub use fields::{
    AuthorizationMode, CgroupDriver, EnforceNodeAllocatable, EvictionThreshold, KubeletConfig,
    ReservedResources, SwapBehavior, DEFAULT_ADMIN_SOCKET, DEFAULT_CONTAINER_RUNTIME_ENDPOINT,
    DEFAULT_POD_LOGS_DIR, DEFAULT_ROOT_DIR, DEFAULT_STATIC_POD_PATH, EVICTION_SIGNALS,
    MAX_VERBOSITY,
};
pub use file::{did_you_mean, resolve, LoadedConfig, UnknownField, API_VERSION, KIND};
pub use flags::{Flag, FlagKind, Flags, FLAGS};
pub use values::normalize_node_name;

/// Why a configuration could not be loaded. Every variant names where the
/// problem is: the file (and field, line, column) or the flag.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file is not well-formed YAML / JSON.
    #[error("{}{}: invalid {format}: {message}", path.display(), fmt_position(*line, *column))]
    Syntax {
        path: PathBuf,
        /// `"YAML"` or `"JSON"`.
        format: &'static str,
        /// 1-based; `None` when the parser gave no position.
        line: Option<usize>,
        column: Option<usize>,
        message: String,
    },
    /// The file parsed but is not a KubeletConfiguration document at all.
    #[error("{}: {message}", path.display())]
    Document { path: PathBuf, message: String },
    /// A field of the file has a bad value. `field` is a dotted path for
    /// nested fields (`authentication.anonymous.enabled`).
    #[error("{}: field \"{field}\": {message}", path.display())]
    Field {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// A command-line flag has a bad value. `flag` includes the dashes.
    #[error("flag {flag}: {message}")]
    Flag { flag: String, message: String },
}

fn fmt_position(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    }
}
