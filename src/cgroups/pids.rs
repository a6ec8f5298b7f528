//! The pids controller: `pids.max` (same format in v1 and v2) and
//! `pids.current`, which eviction uses to watch PID pressure per pod.

/// Task limit for the cgroup subtree (`max` = unlimited).
pub const MAX: &str = "pids.max";
/// Number of tasks in the cgroup subtree.
pub const CURRENT: &str = "pids.current";

/// `pids.max` content (`n <= 0` = `max`).
pub fn max_value(limit: i64) -> String {
    if limit <= 0 {
        "max".to_string()
    } else {
        limit.to_string()
    }
}

/// Parses `pids.current`.
pub fn parse_current(s: &str) -> Option<u64> {
    super::parse_u64(s)
}

/// Parses `pids.max`: `Some(None)` for `max`.
pub fn parse_max(s: &str) -> Option<Option<u64>> {
    super::parse_max(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_values_round_trip() {
        assert_eq!(max_value(-1), "max");
        assert_eq!(max_value(0), "max");
        assert_eq!(max_value(100), "100");
        assert_eq!(parse_current("12\n"), Some(12));
        assert_eq!(parse_max("max\n"), Some(None));
        assert_eq!(parse_max("100\n"), Some(Some(100)));
    }
}
