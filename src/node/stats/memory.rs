//! Memory of one cgroup, v1 and v2: usage, working set (usage minus
//! inactive file pages: v1 `total_inactive_file`, v2 `inactive_file`) and
//! RSS (v1 `total_rss`, v2 `anon`), the numbers kubelet's eviction uses.

use super::{keyed, single, Buf, StatsError};
use crate::cgroups::CgroupVersion;
use std::path::Path;

/// One cgroup's memory, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    pub usage: u64,
    pub working_set: u64,
    pub rss: u64,
}

/// From the usage file's value and `memory.stat`'s text. Missing keys count
/// as 0 (a cgroup with no page cache).
pub fn from_stat(usage: u64, stat: &str, version: CgroupVersion) -> MemoryStats {
    let (inactive, rss) = match version {
        CgroupVersion::V1 => ("total_inactive_file", "total_rss"),
        CgroupVersion::V2 => ("inactive_file", "anon"),
    };
    MemoryStats {
        usage,
        working_set: usage.saturating_sub(keyed(stat, inactive).unwrap_or(0)),
        rss: keyed(stat, rss).unwrap_or(0),
    }
}

/// Reads the memory of the cgroup directory `dir` (on v1, a directory of
/// the `memory` hierarchy; on v2, of the unified one).
pub fn read(dir: &Path, version: CgroupVersion, buf: &mut Buf) -> Result<MemoryStats, StatsError> {
    let usage_file = match version {
        CgroupVersion::V1 => "memory.usage_in_bytes",
        CgroupVersion::V2 => "memory.current",
    };
    let usage = buf.parse(&dir.join(usage_file), single)?;
    let stat = buf.read(&dir.join("memory.stat"))?;
    Ok(from_stat(usage, stat, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_set_and_rss_come_from_the_version_s_keys() {
        let v1 = "inactive_file 1\nrss 2\ntotal_inactive_file 300\ntotal_rss 400\n";
        let v2 = "anon 50\nfile 900\ninactive_file 600\nactive_file 300\n";
        let table = [
            (1000, v1, CgroupVersion::V1, 700, 400),
            (1000, v2, CgroupVersion::V2, 400, 50),
            // More inactive file than usage (racy reads): floored at 0.
            (100, v1, CgroupVersion::V1, 0, 400),
            // No keys: all of it is working set.
            (100, "", CgroupVersion::V2, 100, 0),
        ];
        for (usage, stat, version, ws, rss) in table {
            let m = from_stat(usage, stat, version);
            assert_eq!((m.working_set, m.rss), (ws, rss), "{version:?} {stat:?}");
            assert_eq!(m.usage, usage);
        }
    }

    #[test]
    fn a_cgroup_directory_is_read() {
        let t = crate::cgroups::testutil::TempTree::new("stats-memory");
        t.put("m/memory.usage_in_bytes", "4096\n");
        t.put(
            "m/memory.stat",
            "total_inactive_file 1024\ntotal_rss 2048\n",
        );
        let mut buf = Buf::new();
        let m = read(&t.path().join("m"), CgroupVersion::V1, &mut buf).unwrap();
        assert_eq!(
            m,
            MemoryStats {
                usage: 4096,
                working_set: 3072,
                rss: 2048
            }
        );
    }
}
