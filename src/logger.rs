//! The `log` backend: klog-style lines on stderr.
//!
//! picolet writes its own logs rather than pulling in `env_logger` (and its
//! regex and humantime dependencies): one line per record, in the format
//! kubelet operators already grep for,
//!
//! ```text
//! I1129 18:50:30.123456 picolet::agent] started container nginx
//! ```
//!
//! (level letter `E`/`W`/`I`/`D`/`T`, month and day, UTC time with
//! microseconds, the record's target, then the message). The level comes
//! from `-v`, klog-style: 0–3 → Info, 4–5 → Debug, 6 and up → Trace;
//! `RUST_LOG` is not read. Records from other crates stay at Info or above
//! unless the verbosity is 8 or more, so `-v=6` shows picolet's trace and not
//! a dependency's. Lines are plain text, never colour codes: stderr is
//! usually a file or journald, and klog does not colour either.
//!
//! Each line is formatted into a reused thread-local buffer and written to
//! stderr with one `write_all` under the stderr lock, so lines never
//! interleave and the steady state allocates nothing. The calendar
//! arithmetic is done here (Howard Hinnant's `civil_from_days`) rather than
//! with a date-time crate.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use log::{Level, LevelFilter, Log, Metadata, Record};

/// The process-wide logger; `init` sets its verbosity.
struct Logger {
    verbosity: AtomicU8,
}

static LOGGER: Logger = Logger {
    verbosity: AtomicU8::new(0),
};

/// The level picolet's own records are shown at, for a `-v` verbosity.
pub fn level_for(verbosity: u8) -> LevelFilter {
    match verbosity {
        0..=3 => LevelFilter::Info,
        4..=5 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    }
}

/// Installs the logger (once per process; later calls only change the
/// verbosity).
pub fn init(verbosity: u8) {
    LOGGER.verbosity.store(verbosity, Ordering::Relaxed);
    // Err means a logger is already installed: ours (tests, a second init)
    // keeps working with the new verbosity.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level_for(verbosity));
}

impl Logger {
    fn filter(&self, target: &str) -> LevelFilter {
        let v = self.verbosity.load(Ordering::Relaxed);
        let own = target == "picolet" || target.starts_with("picolet::");
        if own || v >= 8 {
            level_for(v)
        } else {
            level_for(v).min(LevelFilter::Info)
        }
    }
}

impl Log for Logger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= self.filter(metadata.target())
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        thread_local! {
            static BUF: RefCell<String> = const { RefCell::new(String::new()) };
        }
        let emit = |buf: &mut String| {
            buf.clear();
            format_line(
                buf,
                record.level(),
                now.as_secs() as i64,
                now.subsec_micros(),
                record.target(),
                record.args(),
            );
            // Nothing sensible to do when stderr is gone.
            let _ = std::io::stderr().lock().write_all(buf.as_bytes());
            // Do not let one huge message pin memory for the process lifetime.
            if buf.capacity() > 64 * 1024 {
                *buf = String::new();
            }
        };
        // A record logged while formatting another (a Display impl that logs)
        // finds the buffer borrowed and gets a fresh one.
        BUF.with(|cell| match cell.try_borrow_mut() {
            Ok(mut buf) => emit(&mut buf),
            Err(_) => emit(&mut String::new()),
        });
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

/// klog's level letter.
fn letter(level: Level) -> char {
    match level {
        Level::Error => 'E',
        Level::Warn => 'W',
        Level::Info => 'I',
        Level::Debug => 'D',
        Level::Trace => 'T',
    }
}

/// Days since 1970-01-01 → (year, month 1–12, day 1–31), proleptic
/// Gregorian (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// UTC calendar fields of a Unix time: (year, month, day, hour, minute, second).
fn civil(unix_secs: i64) -> (i64, u32, u32, u32, u32, u32) {
    let (y, mo, d) = civil_from_days(unix_secs.div_euclid(86_400));
    let sod = unix_secs.rem_euclid(86_400) as u32;
    (y, mo, d, sod / 3600, sod / 60 % 60, sod % 60)
}

/// Appends the klog header `I1129 18:50:30.123456 ` to `out`.
pub fn format_header(out: &mut String, level: Level, unix_secs: i64, micros: u32) {
    let (_, mo, d, h, mi, s) = civil(unix_secs);
    let _ = write!(
        out,
        "{}{mo:02}{d:02} {h:02}:{mi:02}:{s:02}.{micros:06} ",
        letter(level)
    );
}

/// Appends one whole line (header, target, message, newline) to `out`.
fn format_line(
    out: &mut String,
    level: Level,
    unix_secs: i64,
    micros: u32,
    target: &str,
    args: &std::fmt::Arguments,
) {
    format_header(out, level, unix_secs, micros);
    let _ = write!(out, "{target}] {args}");
    if !out.ends_with('\n') {
        out.push('\n');
    }
}

/// A sortable UTC stamp for file names, `20231129-185030`, as kubelet
/// suffixes rotated container logs.
pub fn compact_timestamp(t: SystemTime) -> String {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_header_is_klog_style_in_utc_with_microseconds() {
        let mut s = String::new();
        // 2023-11-29T18:50:30Z
        format_header(&mut s, Level::Info, 1_701_283_830, 123_456);
        assert_eq!(s, "I1129 18:50:30.123456 ");
        s.clear();
        format_header(&mut s, Level::Warn, 0, 7);
        assert_eq!(s, "W0101 00:00:00.000007 ");
    }

    #[test]
    fn a_line_names_the_target_and_ends_with_one_newline() {
        let mut s = String::new();
        format_line(
            &mut s,
            Level::Error,
            1_701_283_830,
            0,
            "picolet::agent",
            &format_args!("boom {}", 1),
        );
        assert_eq!(s, "E1129 18:50:30.000000 picolet::agent] boom 1\n");
        s.clear();
        format_line(
            &mut s,
            Level::Debug,
            1_701_283_830,
            0,
            "picolet",
            &format_args!("x\n"),
        );
        assert_eq!(s, "D1129 18:50:30.000000 picolet] x\n");
    }

    #[test]
    fn a_line_is_plain_text_without_colour_codes() {
        let mut s = String::new();
        for level in [Level::Error, Level::Warn, Level::Info, Level::Debug] {
            format_line(&mut s, level, 0, 0, "picolet", &format_args!("x"));
        }
        assert!(!s.contains('\u{1b}'), "{s:?}");
    }

    #[test]
    fn civil_from_days_handles_leap_years_and_century_rules() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29)); // 2000 is a leap year
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(19_783), (2024, 3, 1));
        assert_eq!(civil_from_days(47_541), (2100, 3, 1)); // 2100 is not
        assert_eq!(civil_from_days(19_722), (2023, 12, 31));
    }

    #[test]
    fn compact_timestamps_sort_as_text() {
        let t = UNIX_EPOCH + Duration::from_secs(1_701_283_830);
        assert_eq!(compact_timestamp(t), "20231129-185030");
        assert_eq!(compact_timestamp(UNIX_EPOCH), "19700101-000000");
    }

    #[test]
    fn verbosity_maps_to_levels_like_klog() {
        assert_eq!(level_for(0), LevelFilter::Info);
        assert_eq!(level_for(3), LevelFilter::Info);
        assert_eq!(level_for(4), LevelFilter::Debug);
        assert_eq!(level_for(6), LevelFilter::Trace);
    }

    #[test]
    fn other_crates_stay_at_info_below_verbosity_eight() {
        let l = Logger {
            verbosity: AtomicU8::new(6),
        };
        assert_eq!(l.filter("picolet::pleg"), LevelFilter::Trace);
        assert_eq!(l.filter("hyper::proto"), LevelFilter::Info);
        l.verbosity.store(8, Ordering::Relaxed);
        assert_eq!(l.filter("hyper::proto"), LevelFilter::Trace);
    }
}
