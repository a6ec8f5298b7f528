//! Swap: what a cgroup has swapped out and how much more it may swap (v2
//! `memory.swap.current` and `memory.swap.max`; v1 the memory+swap
//! counters `memory.memsw.*` less the memory ones), and the node's from
//! `/proc/meminfo`. A v1 kernel without swap accounting has no `memsw`
//! files: the reader's not-found error, which callers skip.

use super::meminfo::MemInfo;
use super::{single, Buf, StatsError};
use crate::cgroups::memory::parse_v1_limit;
use crate::cgroups::{parse_max, CgroupVersion};
use std::path::Path;

/// One cgroup's (or the node's) swap, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwapStats {
    /// Bytes swapped out now.
    pub usage: u64,
    /// The limit less the usage; `None` when there is no limit.
    pub available: Option<u64>,
}

/// v2: `memory.swap.current` and `memory.swap.max` (`None`: `max`).
pub fn from_v2(current: u64, max: Option<u64>) -> SwapStats {
    SwapStats {
        usage: current,
        available: max.map(|m| m.saturating_sub(current)),
    }
}

/// v1: swap is memory+swap usage less memory usage; the swap limit is the
/// memory+swap limit less the memory limit, and there is none unless both
/// are set. Racy reads (usage read after memsw) floor at 0.
pub fn from_v1(
    memory_usage: u64,
    memsw_usage: u64,
    memory_limit: Option<u64>,
    memsw_limit: Option<u64>,
) -> SwapStats {
    let usage = memsw_usage.saturating_sub(memory_usage);
    let limit = memsw_limit
        .zip(memory_limit)
        .map(|(both, memory)| both.saturating_sub(memory));
    SwapStats {
        usage,
        available: limit.map(|l| l.saturating_sub(usage)),
    }
}

/// The node's swap: `SwapTotal - SwapFree` used, `SwapFree` available
/// (both 0 on a node without swap).
pub fn of_node(m: &MemInfo) -> SwapStats {
    SwapStats {
        usage: m.swap_total.saturating_sub(m.swap_free),
        available: Some(m.swap_free),
    }
}

/// Reads the swap of the cgroup directory `dir` (v1: of the `memory`
/// hierarchy). On v2 a missing `memory.swap.max` is no limit.
pub fn read(dir: &Path, version: CgroupVersion, buf: &mut Buf) -> Result<SwapStats, StatsError> {
    match version {
        CgroupVersion::V2 => {
            let current = buf.parse(&dir.join("memory.swap.current"), single)?;
            let max = match buf.parse(&dir.join("memory.swap.max"), parse_max) {
                Ok(max) => max,
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(e),
            };
            Ok(from_v2(current, max))
        }
        CgroupVersion::V1 => {
            let memsw = buf.parse(&dir.join("memory.memsw.usage_in_bytes"), single)?;
            let memory = buf.parse(&dir.join("memory.usage_in_bytes"), single)?;
            let memsw_limit =
                buf.parse(&dir.join("memory.memsw.limit_in_bytes"), parse_v1_limit)?;
            let memory_limit = buf.parse(&dir.join("memory.limit_in_bytes"), parse_v1_limit)?;
            Ok(from_v1(memory, memsw, memory_limit, memsw_limit))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::testutil::TempTree;

    #[test]
    fn a_limit_file_says_max_or_a_number() {
        // The limit parsers are the cgroup writer's: v2's `max`, v1's
        // page-rounded maximum.
        let v2 = [
            ("max\n", Some(None)),
            ("1073741824\n", Some(Some(1 << 30))),
            ("0\n", Some(Some(0))),
            ("", None),
            ("lots\n", None),
        ];
        for (text, want) in v2 {
            assert_eq!(parse_max(text), want, "{text:?}");
        }
        let v1 = [
            ("9223372036854771712\n", Some(None)),
            ("1073741824\n", Some(Some(1 << 30))),
            ("", None),
            ("lots\n", None),
        ];
        for (text, want) in v1 {
            assert_eq!(parse_v1_limit(text), want, "{text:?}");
        }
    }

    #[test]
    fn v2_swap_is_the_current_value_and_what_the_limit_leaves() {
        assert_eq!(
            from_v2(4096, Some(10_000)),
            SwapStats {
                usage: 4096,
                available: Some(5904)
            }
        );
        assert_eq!(from_v2(4096, None).available, None);
        // kubelet's NoSwap: a limit of 0.
        assert_eq!(from_v2(0, Some(0)).available, Some(0));
        assert_eq!(from_v2(50, Some(10)).available, Some(0));
    }

    #[test]
    fn v1_swap_is_memsw_less_memory() {
        let table = [
            // Memory 1000 used, 1400 with swap; limits 2000 and 3000.
            ((1000, 1400, Some(2000), Some(3000)), (400, Some(600))),
            // No limits (the usual pod cgroup).
            ((1000, 1000, None, None), (0, None)),
            // A memory limit without a memsw limit: swap is unlimited.
            ((1000, 1200, Some(2000), None), (200, None)),
            // Racy reads: memory read after memsw grew past it.
            ((1500, 1400, None, None), (0, None)),
        ];
        for ((mem, memsw, mem_limit, memsw_limit), (usage, available)) in table {
            let s = from_v1(mem, memsw, mem_limit, memsw_limit);
            assert_eq!((s.usage, s.available), (usage, available), "{s:?}");
        }
    }

    #[test]
    fn the_nodes_swap_comes_from_meminfo() {
        let m = super::super::meminfo::parse(
            "MemTotal: 1000 kB\nSwapCached: 0 kB\nSwapTotal: 2048 kB\nSwapFree: 1536 kB\n",
        )
        .unwrap();
        assert_eq!(
            of_node(&m),
            SwapStats {
                usage: 512 * 1024,
                available: Some(1536 * 1024)
            }
        );
        let no_swap =
            super::super::meminfo::parse("MemTotal: 1000 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n")
                .unwrap();
        assert_eq!(
            of_node(&no_swap),
            SwapStats {
                usage: 0,
                available: Some(0)
            }
        );
    }

    #[test]
    fn cgroup_directories_are_read_on_either_version() {
        let t = TempTree::new("stats-swap");
        t.put("v2/memory.swap.current", "8192\n");
        t.put("v2/memory.swap.max", "max\n");
        t.put("v2-limited/memory.swap.current", "8192\n");
        t.put("v2-limited/memory.swap.max", "16384\n");
        t.put("v2-old/memory.swap.current", "0\n");
        t.put("v1/memory.memsw.usage_in_bytes", "12288\n");
        t.put("v1/memory.usage_in_bytes", "4096\n");
        t.put("v1/memory.memsw.limit_in_bytes", "9223372036854771712\n");
        t.put("v1/memory.limit_in_bytes", "9223372036854771712\n");
        t.put("v1-no-accounting/memory.usage_in_bytes", "4096\n");
        let mut buf = Buf::new();
        let mut at = |dir: &str, version| read(&t.path().join(dir), version, &mut buf);
        let v2 = CgroupVersion::V2;
        assert_eq!(at("v2", v2).unwrap(), from_v2(8192, None));
        assert_eq!(at("v2-limited", v2).unwrap().available, Some(8192));
        assert_eq!(at("v2-old", v2).unwrap(), from_v2(0, None));
        assert_eq!(
            at("v1", CgroupVersion::V1).unwrap(),
            SwapStats {
                usage: 8192,
                available: None
            }
        );
        assert!(at("v1-no-accounting", CgroupVersion::V1)
            .unwrap_err()
            .is_not_found());
    }
}
