//! CPU usage of one cgroup: total CPU time in nanoseconds (v1
//! `cpuacct.usage`, v2 `cpu.stat` `usage_usec`). Throttling stays with
//! [`crate::cgroups::cpu`]; eviction needs only the usage counter, and a
//! rate is the difference of two readings over the time between them.

use super::{keyed, single, Buf, StatsError};
use crate::cgroups::CgroupVersion;
use std::path::Path;

/// Parses v2 `cpu.stat` into nanoseconds of CPU time.
pub fn parse_v2_usage_ns(stat: &str) -> Option<u64> {
    keyed(stat, "usage_usec").map(|us| us.saturating_mul(1000))
}

/// Parses v1 `cpuacct.usage` (nanoseconds).
pub fn parse_v1_usage_ns(text: &str) -> Option<u64> {
    single(text)
}

/// The CPU time the whole machine spent busy, from `/proc/stat`'s `cpu`
/// line (user, nice, system, irq, softirq and steal ticks; idle and iowait
/// left out), in nanoseconds. Ticks are `USER_HZ`, 100 on Linux.
pub fn parse_proc_stat_busy_ns(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let busy: u64 = [0, 1, 2, 5, 6, 7]
        .iter()
        .map(|i| ticks.get(*i).copied().unwrap_or(0))
        .sum();
    Some(busy.saturating_mul(10_000_000))
}

/// Reads the CPU time of the cgroup directory `dir` (v1: of the `cpuacct`
/// hierarchy), in nanoseconds.
pub fn read_usage_ns(dir: &Path, version: CgroupVersion, buf: &mut Buf) -> Result<u64, StatsError> {
    match version {
        CgroupVersion::V1 => buf.parse(&dir.join("cpuacct.usage"), parse_v1_usage_ns),
        CgroupVersion::V2 => buf.parse(&dir.join("cpu.stat"), parse_v2_usage_ns),
    }
}

/// Average cores used between two readings (`ns` of CPU time over `ns` of
/// wall time), in millicores; 0 when the counter went back (cgroup
/// recreated) or no time passed.
pub fn millicores(prev_ns: u64, now_ns: u64, elapsed_ns: u64) -> u64 {
    if elapsed_ns == 0 || now_ns < prev_ns {
        return 0;
    }
    ((now_ns - prev_ns) as u128 * 1000 / elapsed_ns as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_usage_is_read_in_nanoseconds_from_either_version() {
        assert_eq!(
            parse_v2_usage_ns("usage_usec 1500\nuser_usec 1000\n"),
            Some(1_500_000)
        );
        assert_eq!(parse_v2_usage_ns("user_usec 1000\n"), None);
        assert_eq!(parse_v1_usage_ns("123456789\n"), Some(123_456_789));
        assert_eq!(parse_v1_usage_ns(""), None);
    }

    #[test]
    fn the_machines_busy_time_leaves_idle_and_iowait_out() {
        let stat = "cpu  10 1 5 1000 50 2 3 4 0 0\ncpu0 10 1 5 1000 50 2 3 4 0 0\n";
        assert_eq!(parse_proc_stat_busy_ns(stat), Some(25 * 10_000_000));
        assert_eq!(parse_proc_stat_busy_ns("intr 5\n"), None);
    }

    #[test]
    fn millicores_are_cpu_time_over_wall_time() {
        let table = [
            (0, 1_000_000_000, 1_000_000_000, 1000),
            (0, 500_000_000, 1_000_000_000, 500),
            (0, 4_000_000_000, 2_000_000_000, 2000),
            (10, 5, 1_000, 0),
            (0, 5, 0, 0),
        ];
        for (prev, now, elapsed, want) in table {
            assert_eq!(
                millicores(prev, now, elapsed),
                want,
                "{prev} {now} {elapsed}"
            );
        }
    }
}
