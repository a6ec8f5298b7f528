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
//! # One seam for every source
//!
//! A source is anything implementing [`Source`]: an `async fn next()` that
//! returns its next complete set. The agent spawns one task per configured
//! source and feeds what it returns into [`merge`], the pure function that
//! combines the last set of every source, admits pods (`maxPods` today, the
//! node's allocatable later) and says which sources are *ready*. The
//! file source ([`FileSource`]) is the first; the API-server source will
//! implement the same trait and never touch the agent's internals.
//!
//! # Readiness
//!
//! A source is ready once it delivered a first *authoritative* set
//! ([`SourceUpdate::authoritative`]): a successful read, not an error. A
//! source that cannot reach its origin (the manifest directory unreadable,
//! later the API server unreachable) sends non-authoritative sets until it
//! can. Nothing of a source's pods is removed (orphan killing, GC) before
//! that source is ready, so a restart adopts running pods instead of
//! killing them.
//!
//! This module must not know the agent, the runtime or the executor.
//!
//! Identity is the UID. For file pods the UID is derived from the manifest
//! content (see [`file::parse_manifest`]), so *editing* a manifest changes the
//! UID and the agent sees "old pod gone, new pod added", which is exactly the
//! kubelet's restart-on-edit behaviour for static pods.

use std::fmt;
use std::rc::Rc;

use k8s_openapi::api::core::v1::Pod;

pub mod file;
pub mod merge;
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
    /// Every source, in precedence order (a UID two sources claim belongs
    /// to the first).
    pub const ALL: [PodSource; 2] = [PodSource::File, PodSource::Api];

    /// The source named by a `kubernetes.io/config.source` value.
    pub fn from_annotation(value: &str) -> Option<PodSource> {
        PodSource::ALL.into_iter().find(|s| s.as_str() == value)
    }

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
    /// Shared (`Rc`): a source that keeps its pods hands the agent the same
    /// objects instead of a copy of each at every change (issue #8).
    pub pods: Vec<Rc<Pod>>,
    /// The set comes from a successful read of the source's origin (or is
    /// the last such set, kept across a later error). `false` only before
    /// the first successful read: then `pods` is a placeholder and the
    /// source is not ready.
    pub authoritative: bool,
}

/// A pod source, as the agent drives it: one task per source calls
/// [`Source::next`] in a loop. Implementations own their I/O and timing and
/// must be cancel-safe (a dropped `next` loses no change).
// `async fn` in a public trait: no `Send` bound is wanted (one thread).
#[allow(async_fn_in_trait)]
pub trait Source {
    /// Which source this is.
    fn kind(&self) -> PodSource;

    /// The next complete set, once it differs from the last one returned
    /// (the first call returns at once).
    async fn next(&mut self) -> SourceUpdate;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_print_as_the_kubelet_annotation_values() {
        assert_eq!(PodSource::File.to_string(), "file");
        assert_eq!(PodSource::Api.as_str(), "api");
        assert_eq!(PodSource::from_annotation("file"), Some(PodSource::File));
        assert_eq!(PodSource::from_annotation("http"), None);
    }
}
