//! Pod sources: where the set of desired pods comes from.
//!
//! picolet has (or will have) two sources of pods, mirroring the kubelet's
//! `kubernetes.io/config.source` values:
//!
//! - [`PodSource::File`]: static pods from a manifest directory
//!   ([`file`] parses, [`watch`] watches), available today;
//! - [`PodSource::Api`]: pods bound to this node by the API server, later.
//!
//! # Design: every update is the whole set
//!
//! A source never sends "add X" / "remove Y" deltas. Each [`SourceUpdate`]
//! carries the *complete current set* of pods from that source (the kubelet's
//! `SET` operation). The agent keeps the last set per source and diffs sets by
//! pod UID: a UID that disappeared is a pod to kill, a new UID a pod to start.
//!
//! This is deliberately the simplest contract that is always correct:
//! a missed or coalesced event cannot desynchronise the agent, a source may
//! re-send the same set at any time (the agent's diff is then empty), and
//! restarting a source is just sending its first set again. The cost, copying
//! a handful of pods on a change, is nothing at static-pod scale.
//!
//! Identity is the UID. For file pods the UID is derived from the manifest
//! content (see [`file::parse_manifest`]), so *editing* a manifest changes the
//! UID and the agent sees "old pod gone, new pod added", which is exactly the
//! kubelet's restart-on-edit behaviour for static pods.

use std::fmt;

use k8s_openapi::api::core::v1::Pod;

pub mod file;
pub mod watch;

pub use file::{ManifestDir, ManifestError};
pub use watch::FileSource;

pub use crate::pod::labels::{CONFIG_HASH_ANNOTATION, CONFIG_SOURCE_ANNOTATION};

/// Where a set of pods came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PodSource {
    /// Static pods from the manifest directory (`staticPodPath`).
    File,
    /// Pods bound to this node by the API server.
    Api,
}

impl PodSource {
    /// The kubelet's `kubernetes.io/config.source` value: `"file"` or `"api"`.
    pub fn as_str(self) -> &'static str {
        match self {
            PodSource::File => "file",
            PodSource::Api => "api",
        }
    }
}

impl fmt::Display for PodSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The complete current set of pods from one source (SET semantics: pods not
/// in `pods` are no longer wanted from that source).
#[derive(Debug, Clone, PartialEq)]
pub struct SourceUpdate {
    /// Which source this set replaces.
    pub source: PodSource,
    /// Every pod the source currently wants, already defaulted, each with a
    /// UID. Order is stable (for files: by file name) but carries no meaning.
    pub pods: Vec<Pod>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_print_as_the_kubelet_annotation_values() {
        assert_eq!(PodSource::File.to_string(), "file");
        assert_eq!(PodSource::Api.as_str(), "api");
    }
}
