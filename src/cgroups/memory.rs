//! The memory controller: file names for both versions, limit value
//! formats, and `&str` parsers for `memory.stat` and limits, plus the
//! kubelet's working-set formula used for eviction decisions.

use super::CgroupVersion;
use std::collections::BTreeMap;

/// v1 hard limit (`-1` = unlimited).
pub const V1_LIMIT: &str = "memory.limit_in_bytes";
/// v1 current usage.
pub const V1_USAGE: &str = "memory.usage_in_bytes";
/// v2 hard limit (`max` = unlimited).
pub const V2_MAX: &str = "memory.max";
/// v2 current usage.
pub const V2_CURRENT: &str = "memory.current";
/// `memory.stat`, both versions (different keys).
pub const STAT: &str = "memory.stat";

/// v1 reads back "unlimited" as `PAGE_COUNTER_MAX * PAGE_SIZE`
/// (9223372036854771712 with 4 KiB pages); anything above 4 EiB is treated
/// as unlimited so other page sizes work too.
const V1_UNLIMITED_FLOOR: u64 = 1 << 62;

/// `memory.limit_in_bytes` content for a limit (negative = `-1`, unlimited).
pub fn v1_limit_value(limit: i64) -> String {
    if limit < 0 {
        "-1".to_string()
    } else {
        limit.to_string()
    }
}

/// `memory.max` content for a limit (negative = `max`).
pub fn v2_max_value(limit: i64) -> String {
    if limit < 0 {
        "max".to_string()
    } else {
        limit.to_string()
    }
}

/// Parses `memory.limit_in_bytes`: `Some(None)` when unlimited.
pub fn parse_v1_limit(s: &str) -> Option<Option<u64>> {
    let v: u64 = s.trim().parse().ok()?;
    Some((v < V1_UNLIMITED_FLOOR).then_some(v))
}

/// Parses `memory.stat` into key → value; malformed lines are skipped.
pub fn parse_stat(s: &str) -> BTreeMap<String, u64> {
    s.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let k = it.next()?;
            let v = it.next()?.parse().ok()?;
            Some((k.to_string(), v))
        })
        .collect()
}

/// Working set as the kubelet/cAdvisor compute it: usage minus inactive
/// file pages (v1 `total_inactive_file`, v2 `inactive_file`), floored at 0.
pub fn working_set(usage: u64, stat: &BTreeMap<String, u64>, version: CgroupVersion) -> u64 {
    let key = match version {
        CgroupVersion::V1 => "total_inactive_file",
        CgroupVersion::V2 => "inactive_file",
    };
    usage.saturating_sub(stat.get(key).copied().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_stat_lines_become_a_map_and_bad_lines_are_skipped() {
        let m = parse_stat("cache 4096\nrss 8192\nbroken\nx notanumber\n");
        assert_eq!(m.len(), 2);
        assert_eq!(m["rss"], 8192);
    }

    #[test]
    fn the_v1_unlimited_sentinel_reads_as_no_limit() {
        assert_eq!(parse_v1_limit("9223372036854771712\n"), Some(None));
        assert_eq!(parse_v1_limit("67108864\n"), Some(Some(64 << 20)));
        assert_eq!(parse_v1_limit("max"), None);
    }

    #[test]
    fn working_set_subtracts_inactive_file_and_never_underflows() {
        let v1 = parse_stat("inactive_file 1\ntotal_inactive_file 300\n");
        assert_eq!(working_set(1000, &v1, CgroupVersion::V1), 700);
        assert_eq!(working_set(1000, &v1, CgroupVersion::V2), 999);
        assert_eq!(working_set(100, &v1, CgroupVersion::V1), 0);
    }

    #[test]
    fn limits_are_formatted_for_each_version() {
        assert_eq!(v1_limit_value(-1), "-1");
        assert_eq!(v2_max_value(-1), "max");
        assert_eq!(v2_max_value(42), "42");
    }
}
