//! Go durations (`time.Duration`): parsing `"1m30s"` and printing a
//! `Duration` the way Go's `Duration.String` does. The only home of the
//! grammar in the crate: config fields and flags parse with [`parse()`];
//! messages that quote a duration the way kubelet's do (the back-off in a
//! container's waiting reason, say) print with [`format()`].
//!
//! Pure: strings and `Duration`s, no clock.

use std::time::Duration;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// A string that is not a valid Go duration (or one picolet cannot use).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason}")]
pub struct DurationError {
    pub input: String,
    pub reason: String,
}

/// Parses a Go `time.Duration` string: `"20s"`, `"1m0s"`, `"1h2m3.5s"`,
/// `"500ms"`, `"1.5µs"`, `"0"`. Units: ns, us (µs, μs), ms, s, m, h.
/// Negative durations are rejected (no picolet setting can use one), except
/// `-0`. Like Go, values beyond ~292 years are an overflow error.
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let err = |reason: &str| DurationError {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let mut rest = input;
    let mut negative = false;
    if let Some(r) = rest.strip_prefix('-') {
        negative = true;
        rest = r;
    } else if let Some(r) = rest.strip_prefix('+') {
        rest = r;
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(err("empty duration"));
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, r) = rest.split_at(int_len);
        rest = r;
        let mut frac_part = "";
        if let Some(r) = rest.strip_prefix('.') {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &r[..n];
            rest = &r[n..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err("expected a number"));
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (unit, r) = rest.split_at(unit_len);
        rest = r;
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => NANOS_PER_SEC,
            "m" => 60 * NANOS_PER_SEC,
            "h" => 3600 * NANOS_PER_SEC,
            "" => return Err(err("missing unit (ns, us, ms, s, m, h)")),
            other => {
                return Err(err(&format!(
                    "unknown unit {other:?} (expected ns, us, ms, s, m, h)"
                )))
            }
        };
        let overflow = || err("duration too large");
        let int: u128 = if int_part.is_empty() {
            0
        } else if int_part.len() > 20 {
            return Err(overflow());
        } else {
            int_part.parse().map_err(|_| overflow())?
        };
        // Digits beyond 20 cannot matter at nanosecond resolution.
        let frac_digits = &frac_part[..frac_part.len().min(20)];
        let frac_nanos = if frac_digits.is_empty() {
            0
        } else {
            let f: u128 = frac_digits.parse().map_err(|_| overflow())?;
            f * unit_nanos / 10u128.pow(frac_digits.len() as u32)
        };
        total = int
            .checked_mul(unit_nanos)
            .and_then(|n| n.checked_add(frac_nanos))
            .and_then(|n| n.checked_add(total))
            .ok_or_else(overflow)?;
        if total > i64::MAX as u128 {
            return Err(overflow());
        }
    }
    if negative && total != 0 {
        return Err(err("negative durations are not allowed"));
    }
    Ok(Duration::from_nanos(total as u64))
}

/// Formats a duration as Go's `Duration.String` does, as kubelet's messages
/// and flag defaults show them: `"1h2m3.5s"`, `"1m0s"`, `"500ms"`,
/// `"1.5µs"`, `"0s"`.
pub fn format(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", fixed_point(nanos, 3));
    }
    if nanos < NANOS_PER_SEC {
        return format!("{}ms", fixed_point(nanos, 6));
    }
    let seconds = fixed_point(nanos % (60 * NANOS_PER_SEC), 9);
    let total_minutes = nanos / (60 * NANOS_PER_SEC);
    let (hours, minutes) = (total_minutes / 60, total_minutes % 60);
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// `value / 10^digits` as a decimal without trailing zeros.
fn fixed_point(value: u128, digits: u32) -> String {
    let scale = 10u128.pow(digits);
    let (int, frac) = (value / scale, value % scale);
    if frac == 0 {
        return int.to_string();
    }
    let frac = format!("{frac:0width$}", width = digits as usize);
    format!("{int}.{}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("+5s", Duration::from_secs(5)),
            ("0s", Duration::ZERO),
            ("20s", Duration::from_secs(20)),
            ("1m0s", Duration::from_secs(60)),
            ("1h2m3.5s", Duration::from_millis(3_723_500)),
            ("500ms", Duration::from_millis(500)),
            ("1.5us", Duration::from_nanos(1_500)),
            ("1µs", Duration::from_micros(1)),
            ("1μs", Duration::from_micros(1)),
            ("7ns", Duration::from_nanos(7)),
            (".5s", Duration::from_millis(500)),
            ("1.s", Duration::from_secs(1)),
            ("2h45m", Duration::from_secs(9_900)),
            ("1s1s", Duration::from_secs(2)),
            ("0.000000001s", Duration::from_nanos(1)),
            ("1.0000000009s", Duration::from_secs(1)),
            ("2562047h", Duration::from_secs(2_562_047 * 3600)),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input), Ok(*want), "{input}");
        }
    }

    #[test]
    fn malformed_go_durations_are_rejected_with_a_reason() {
        for (input, reason) in [
            ("", "empty"),
            ("-", "empty"),
            ("10", "missing unit"),
            ("1d", "unknown unit"),
            ("1 s", "unknown unit"),
            ("s", "expected a number"),
            (".s", "expected a number"),
            ("1h-2m", "unknown unit \"h-\""),
            ("-1s", "negative"),
            ("2562048h", "too large"),
            ("99999999999999999999999h", "too large"),
        ] {
            let err = parse(input).expect_err(input);
            assert!(err.reason.contains(reason), "{input}: {err}");
            assert_eq!(err.input, input);
        }
    }

    #[test]
    fn go_durations_format_like_go() {
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_micros(1_250), "1.25ms"),
            (Duration::from_secs(20), "20s"),
            (Duration::from_secs(60), "1m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(3_723_500), "1h2m3.5s"),
            (Duration::from_nanos(1_000_000_001), "1.000000001s"),
        ];
        for (d, want) in cases {
            assert_eq!(format(*d), *want);
            assert_eq!(parse(want), Ok(*d), "round trip {want}");
        }
    }

    /// The cases `status.rs` checked when it had its own copy: the back-off
    /// delays of kubelet's waiting messages.
    #[test]
    fn durations_print_like_go() {
        let f = |ms: u64| format(Duration::from_millis(ms));
        assert_eq!(f(0), "0s");
        assert_eq!(f(300), "300ms");
        assert_eq!(f(1_500), "1.5s");
        assert_eq!(f(10_000), "10s");
        assert_eq!(f(20_000), "20s");
        assert_eq!(f(80_000), "1m20s");
        assert_eq!(f(300_000), "5m0s");
        assert_eq!(f(3_600_000), "1h0m0s");
        assert_eq!(format(Duration::from_micros(1_500)), "1.5ms");
        assert_eq!(format(Duration::from_nanos(42)), "42ns");
    }
}
