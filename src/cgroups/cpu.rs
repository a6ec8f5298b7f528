//! The CPU controller: file names for both versions, the `cpu.max` value
//! format, and a parser for `cpu.stat` (v1 and v2 keys) used by stats and
//! eviction code. Values are computed in [`crate::qos`].

/// v1 `cpu.shares`.
pub const V1_SHARES: &str = "cpu.shares";
/// v1 CFS quota in µs (`-1` = unlimited).
pub const V1_CFS_QUOTA: &str = "cpu.cfs_quota_us";
/// v1 CFS period in µs.
pub const V1_CFS_PERIOD: &str = "cpu.cfs_period_us";
/// v1 total CPU time in ns (cpuacct controller).
pub const V1_CPUACCT_USAGE: &str = "cpuacct.usage";
/// v2 `cpu.weight` (1..=10000).
pub const V2_WEIGHT: &str = "cpu.weight";
/// v2 `cpu.max`: `"<quota|max> <period>"`.
pub const V2_MAX: &str = "cpu.max";
/// `cpu.stat`, present in both versions with different keys.
pub const STAT: &str = "cpu.stat";

/// `cpu.max` content for a quota (`-1` or less = `max`) and period.
pub fn v2_max_value(quota_us: i64, period_us: u64) -> String {
    if quota_us < 0 {
        format!("max {period_us}")
    } else {
        format!("{quota_us} {period_us}")
    }
}

/// Parses `cpu.max` into `(quota, period)`, quota `None` for `max`.
pub fn parse_v2_max(s: &str) -> Option<(Option<u64>, u64)> {
    let mut it = s.split_whitespace();
    let quota = super::parse_max(it.next()?)?;
    let period = it.next().map_or(Some(100_000), |p| p.parse().ok())?;
    it.next().is_none().then_some((quota, period))
}

/// A cgroup's CPU settings as kubelet reads them back (`ResourceConfig`):
/// the shares, the CFS quota in µs (`None`: unlimited) and its period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuConfig {
    pub shares: u64,
    pub quota_us: Option<u64>,
    pub period_us: u64,
}

/// kubelet's `cpuWeightToCPUShares`: a v2 `cpu.weight` (1..=10000) as
/// v1 shares (2..=262144). Not the inverse of the runtime's conversion:
/// a weight holds less than a share does, so 102 shares (100m) come back
/// as 80.
pub fn weight_to_shares(weight: u64) -> u64 {
    (weight.saturating_sub(1) * 262_142) / 9_999 + 2
}

/// Parses v1 `cpu.cfs_quota_us`: `-1` (unlimited, `Some(None)`) or µs.
pub fn parse_v1_quota(s: &str) -> Option<Option<u64>> {
    match s.trim().parse::<i64>().ok()? {
        -1 => Some(None),
        q => u64::try_from(q).ok().map(Some),
    }
}

/// CPU accounting for one cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStat {
    /// Total CPU time in µs (v2 `usage_usec`; v1 from `cpuacct.usage`).
    pub usage_usec: Option<u64>,
    pub user_usec: Option<u64>,
    pub system_usec: Option<u64>,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    /// Time throttled in µs (v2 `throttled_usec`; v1 `throttled_time` / 1000).
    pub throttled_usec: u64,
}

/// Parses `cpu.stat` (either version); unknown and malformed lines are ignored.
pub fn parse_stat(s: &str) -> CpuStat {
    let mut st = CpuStat::default();
    for line in s.lines() {
        let mut it = line.split_whitespace();
        let (Some(key), Some(Ok(v))) = (it.next(), it.next().map(str::parse::<u64>)) else {
            continue;
        };
        match key {
            "usage_usec" => st.usage_usec = Some(v),
            "user_usec" => st.user_usec = Some(v),
            "system_usec" => st.system_usec = Some(v),
            "nr_periods" => st.nr_periods = v,
            "nr_throttled" => st.nr_throttled = v,
            "throttled_usec" => st.throttled_usec = v,
            "throttled_time" => st.throttled_usec = v / 1000,
            _ => {}
        }
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_cpu_stat_is_parsed_by_key() {
        let st = parse_stat("usage_usec 100\nuser_usec 60\nsystem_usec 40\nnr_periods 5\nnr_throttled 1\nthrottled_usec 9\nnr_bursts 0\n");
        assert_eq!(
            st,
            CpuStat {
                usage_usec: Some(100),
                user_usec: Some(60),
                system_usec: Some(40),
                nr_periods: 5,
                nr_throttled: 1,
                throttled_usec: 9
            }
        );
    }

    #[test]
    fn v1_throttled_time_in_nanoseconds_becomes_microseconds() {
        let st = parse_stat("nr_periods 3\nnr_throttled 2\nthrottled_time 2500000\ngarbage\nx y\n");
        assert_eq!(
            (
                st.nr_periods,
                st.nr_throttled,
                st.throttled_usec,
                st.usage_usec
            ),
            (3, 2, 2500, None)
        );
    }

    #[test]
    fn cpu_max_is_formatted_and_parsed_both_ways() {
        assert_eq!(v2_max_value(-1, 100_000), "max 100000");
        assert_eq!(v2_max_value(50_000, 100_000), "50000 100000");
        assert_eq!(parse_v2_max("max 100000\n"), Some((None, 100_000)));
        assert_eq!(parse_v2_max("25000 50000"), Some((Some(25_000), 50_000)));
        assert_eq!(parse_v2_max("nope"), None);
    }

    #[test]
    fn a_weight_comes_back_as_fewer_shares_than_were_written() {
        // 100m is 102 shares, written as weight 4, read back as 80 (79m).
        assert_eq!(crate::qos::shares_to_weight(102), 4);
        assert_eq!(weight_to_shares(4), 80);
        assert_eq!(weight_to_shares(1), 2);
        assert_eq!(weight_to_shares(10_000), 262_144);
    }

    #[test]
    fn v1_quota_minus_one_is_unlimited() {
        assert_eq!(parse_v1_quota("-1\n"), Some(None));
        assert_eq!(parse_v1_quota("50000"), Some(Some(50_000)));
        assert_eq!(parse_v1_quota("-5"), None);
        assert_eq!(parse_v1_quota("x"), None);
    }
}
