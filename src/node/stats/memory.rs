//! Memory of one cgroup, v1 and v2: usage, working set (usage minus
//! inactive file pages: v1 `total_inactive_file`, v2 `inactive_file`) and
//! RSS (v1 `total_rss`, v2 `anon`), the numbers kubelet's eviction uses;
//! and v2's `memory.events` counters, which say when a cgroup reached its
//! limit (the eviction task's notification between passes).

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

/// The counters of a v2 `memory.events` (or `memory.events.local`) file
/// that mean the cgroup reached its limits: `high` (usage went over
/// `memory.high`), `max` (an allocation hit `memory.max` and had to
/// reclaim), `oom` and `oom_kill`. `low` (protection breached) is not a
/// limit and is left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryEvents {
    pub high: u64,
    pub max: u64,
    pub oom: u64,
    pub oom_kill: u64,
}

impl MemoryEvents {
    /// Parses the file; missing keys count as 0 (older kernels lack
    /// `oom_kill`). `None` when none of the four is present.
    pub fn parse(text: &str) -> Option<MemoryEvents> {
        let get = |k| keyed(text, k);
        let (high, max, oom, oom_kill) = (get("high"), get("max"), get("oom"), get("oom_kill"));
        if high.is_none() && max.is_none() && oom.is_none() && oom_kill.is_none() {
            return None;
        }
        Some(MemoryEvents {
            high: high.unwrap_or(0),
            max: max.unwrap_or(0),
            oom: oom.unwrap_or(0),
            oom_kill: oom_kill.unwrap_or(0),
        })
    }

    /// The most serious counter that grew since `before`, by its key
    /// (`oom_kill`, `oom`, `max`, `high`); `None` if none did. A counter that
    /// went down (the cgroup was recreated) counts as grown.
    pub fn grown_since(&self, before: &MemoryEvents) -> Option<&'static str> {
        [
            ("oom_kill", self.oom_kill, before.oom_kill),
            ("oom", self.oom, before.oom),
            ("max", self.max, before.max),
            ("high", self.high, before.high),
        ]
        .into_iter()
        .find(|(_, now, then)| now != then)
        .map(|(key, _, _)| key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_events_are_parsed_from_the_v2_file() {
        let text = "low 0\nhigh 2\nmax 17\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(
            MemoryEvents::parse(text),
            Some(MemoryEvents {
                high: 2,
                max: 17,
                oom: 1,
                oom_kill: 1
            })
        );
        let old_kernel = "low 0\nhigh 0\nmax 3\noom 0\n";
        assert_eq!(MemoryEvents::parse(old_kernel).map(|e| e.max), Some(3));
        assert_eq!(MemoryEvents::parse("low 5\n"), None);
        assert_eq!(MemoryEvents::parse(""), None);
    }

    #[test]
    fn the_most_serious_grown_counter_names_the_event() {
        let base = MemoryEvents {
            high: 1,
            max: 1,
            oom: 1,
            oom_kill: 1,
        };
        let with = |f: fn(&mut MemoryEvents)| {
            let mut e = base;
            f(&mut e);
            e
        };
        let table = [
            (base, None),
            (with(|e| e.high += 1), Some("high")),
            (with(|e| e.max += 3), Some("max")),
            (
                with(|e| {
                    e.max += 1;
                    e.oom += 1;
                    e.oom_kill += 1
                }),
                Some("oom_kill"),
            ),
            (with(|e| e.oom += 1), Some("oom")),
            // Recreated cgroup: counters start again from 0.
            (MemoryEvents::default(), Some("oom_kill")),
        ];
        for (now, want) in table {
            assert_eq!(now.grown_since(&base), want, "{now:?}");
        }
    }

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
