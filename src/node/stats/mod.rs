//! Resource stats read straight from the kernel (no cAdvisor, never the
//! runtime's stats calls): memory, swap, CPU and pids of a cgroup, PSI,
//! the node's `/proc/meminfo` and process count, filesystem usage by statfs,
//! and where a container's writable layer is (its root mount).
//!
//! One file per source. Each has `&str` parsers (pure, tested by table) and
//! a thin reader that takes its root as a `&Path`, so tests run on temp
//! trees. Readers fill a caller-owned [`Buf`] instead of allocating a string
//! per file: a pass every 10 s on a Pi reads a dozen small files and
//! allocates nothing once the buffer has grown.
//!
//! Must not know pods, the agent or eviction's decisions: it returns plain
//! numbers.

pub mod cpu;
pub mod fs;
pub mod layer;
pub mod meminfo;
pub mod memory;
pub mod node;
pub mod pids;
pub mod psi;
pub mod swap;

use crate::cgroups::CgroupVersion;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// A failed read, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("reading {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("unexpected content in {}", .path.display())]
    Parse { path: PathBuf },
}

impl StatsError {
    /// True when the file does not exist (a cgroup that went away, a kernel
    /// without PSI): callers usually skip such a value.
    pub fn is_not_found(&self) -> bool {
        matches!(self, StatsError::Read { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// A reusable read buffer.
#[derive(Debug, Default)]
pub struct Buf(String);

impl Buf {
    /// An empty buffer: it grows to the largest file it has read (a
    /// buffer that is never used, like the eviction loop's for memory
    /// events on cgroup v1, costs nothing).
    pub fn new() -> Buf {
        Buf(String::new())
    }

    /// Reads `path` whole into the buffer and returns its text.
    pub fn read(&mut self, path: &Path) -> Result<&str, StatsError> {
        self.0.clear();
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_string(&mut self.0))
            .map_err(|source| StatsError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(&self.0)
    }

    /// Reads `path` and parses it with `parse`; `None` from the parser is a
    /// [`StatsError::Parse`] naming the file.
    pub fn parse<T>(
        &mut self,
        path: &Path,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<T, StatsError> {
        let text = self.read(path)?;
        parse(text).ok_or_else(|| StatsError::Parse {
            path: path.to_path_buf(),
        })
    }
}

/// The value of `key` in a flat keyed file (`key value` per line, as
/// `memory.stat`, `cpu.stat`, `memory.events`), without building a map.
pub fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?;
        let v = rest.strip_prefix(' ')?;
        v.trim().parse().ok()
    })
}

/// The directory of the cgroup `cgroup` (an absolute cgroup path such as
/// `/kubepods/burstable/pod<uid>`, or `/` for the root) under the mount
/// root: on v1 in `controller`'s hierarchy, on v2 in the unified one.
pub fn cgroup_dir(
    mount_root: &Path,
    version: CgroupVersion,
    controller: &str,
    cgroup: &str,
) -> PathBuf {
    let rel = cgroup.trim_start_matches('/');
    let base = match version {
        CgroupVersion::V1 => mount_root.join(controller),
        CgroupVersion::V2 => mount_root.to_path_buf(),
    };
    if rel.is_empty() {
        base
    } else {
        base.join(rel)
    }
}

/// A single unsigned integer (surrounding whitespace allowed).
pub fn single(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyed_value_is_found_by_whole_key_only() {
        let text = "inactive_file 10\ntotal_inactive_file 300\nrss 7\n";
        assert_eq!(keyed(text, "inactive_file"), Some(10));
        assert_eq!(keyed(text, "total_inactive_file"), Some(300));
        assert_eq!(keyed(text, "rss"), Some(7));
        assert_eq!(keyed(text, "rs"), None);
        assert_eq!(keyed(text, "swap"), None);
        assert_eq!(keyed("rss x\n", "rss"), None);
    }

    #[test]
    fn a_missing_file_is_a_read_error_naming_it() {
        let mut buf = Buf::new();
        let err = buf
            .read(Path::new("/nonexistent/picolet/stat"))
            .unwrap_err();
        assert!(err.is_not_found());
        assert!(
            err.to_string().contains("/nonexistent/picolet/stat"),
            "{err}"
        );
    }

    #[test]
    fn the_buffer_is_reused_between_reads() {
        let t = crate::cgroups::testutil::TempTree::new("stats-buf");
        t.put("a", "12\n");
        t.put("b", "x\n");
        let mut buf = Buf::new();
        assert_eq!(buf.parse(&t.path().join("a"), single).unwrap(), 12);
        let err = buf.parse(&t.path().join("b"), single).unwrap_err();
        assert!(matches!(err, StatsError::Parse { .. }));
    }

    #[test]
    fn a_cgroup_directory_depends_on_the_version() {
        let root = Path::new("/sys/fs/cgroup");
        assert_eq!(
            cgroup_dir(root, CgroupVersion::V1, "memory", "/kubepods/besteffort"),
            Path::new("/sys/fs/cgroup/memory/kubepods/besteffort")
        );
        assert_eq!(
            cgroup_dir(root, CgroupVersion::V2, "memory", "/kubepods"),
            Path::new("/sys/fs/cgroup/kubepods")
        );
        assert_eq!(
            cgroup_dir(root, CgroupVersion::V2, "memory", "/"),
            Path::new("/sys/fs/cgroup")
        );
    }
}
