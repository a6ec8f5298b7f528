//! `/proc/meminfo`: the node's memory capacity, its swap, and, on cgroup
//! v2 (whose root cgroup has no `memory.current`), the node's working set.

use super::{Buf, StatsError};
use std::path::Path;

/// The few `/proc/meminfo` fields eviction and the summary need, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemInfo {
    pub total: u64,
    pub free: u64,
    pub available: u64,
    pub inactive_file: u64,
    /// `SwapTotal`: 0 on a node without swap.
    pub swap_total: u64,
    /// `SwapFree`.
    pub swap_free: u64,
}

impl MemInfo {
    /// The node's working set as cAdvisor computes it for the root cgroup
    /// without a memcg: `(MemTotal - MemFree) - Inactive(file)`, floored at 0.
    pub fn working_set(&self) -> u64 {
        self.total
            .saturating_sub(self.free)
            .saturating_sub(self.inactive_file)
    }
}

/// Parses `/proc/meminfo` (values in kB). `None` without `MemTotal`.
pub fn parse(text: &str) -> Option<MemInfo> {
    let mut m = MemInfo::default();
    let mut has_total = false;
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let Some(kb) = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
        else {
            continue;
        };
        let bytes = kb.saturating_mul(1024);
        match key {
            "MemTotal" => {
                m.total = bytes;
                has_total = true;
            }
            "MemFree" => m.free = bytes,
            "MemAvailable" => m.available = bytes,
            "Inactive(file)" => m.inactive_file = bytes,
            "SwapTotal" => m.swap_total = bytes,
            "SwapFree" => m.swap_free = bytes,
            _ => {}
        }
    }
    has_total.then_some(m)
}

/// Reads `<proc>/meminfo`; `proc` is normally `/proc`.
pub fn read(proc: &Path, buf: &mut Buf) -> Result<MemInfo, StatsError> {
    buf.parse(&proc.join("meminfo"), parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "MemTotal:        1000 kB\nMemFree:          200 kB\nMemAvailable:     600 kB\nBuffers:           10 kB\nActive(file):     100 kB\nInactive(file):   300 kB\nSwapCached:         0 kB\nSwapTotal:        512 kB\nSwapFree:         384 kB\nZswap:              0 kB\n";

    #[test]
    fn meminfo_fields_are_read_in_bytes() {
        let m = parse(SAMPLE).unwrap();
        assert_eq!(
            m,
            MemInfo {
                total: 1000 * 1024,
                free: 200 * 1024,
                available: 600 * 1024,
                inactive_file: 300 * 1024,
                swap_total: 512 * 1024,
                swap_free: 384 * 1024,
            }
        );
        assert_eq!(m.working_set(), 500 * 1024);
    }

    #[test]
    fn meminfo_without_a_total_is_rejected() {
        assert_eq!(parse("MemFree: 1 kB\n"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn the_working_set_never_underflows() {
        let m = MemInfo {
            total: 10,
            free: 8,
            available: 0,
            inactive_file: 5,
            ..MemInfo::default()
        };
        assert_eq!(m.working_set(), 0);
    }
}
