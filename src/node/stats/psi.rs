//! Pressure stall information (cgroup v2 `memory.pressure`,
//! `cpu.pressure`, `io.pressure`, or `/proc/pressure/*` for the node):
//! the share of time tasks were stalled, over 10 s, 60 s and 300 s.

use super::{Buf, StatsError};
use std::path::Path;

/// One line of a pressure file; averages in hundredths of a percent
/// (`avg10=1.25` is 125), `total` in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PsiLine {
    pub avg10: u32,
    pub avg60: u32,
    pub avg300: u32,
    pub total_us: u64,
}

/// A pressure file: `some` (at least one task stalled) and `full` (all
/// non-idle tasks stalled; absent for CPU on older kernels).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Psi {
    pub some: PsiLine,
    pub full: Option<PsiLine>,
}

/// `1.25` → 125, without floating point.
fn hundredths(v: &str) -> Option<u32> {
    let (int, frac) = v.split_once('.').unwrap_or((v, "0"));
    let int: u32 = int.parse().ok()?;
    let mut f = frac.bytes().chain(std::iter::repeat(b'0')).take(2);
    let d1 = f.next()?.checked_sub(b'0').filter(|d| *d < 10)? as u32;
    let d2 = f.next()?.checked_sub(b'0').filter(|d| *d < 10)? as u32;
    Some(int * 100 + d1 * 10 + d2)
}

fn parse_line(fields: &str) -> Option<PsiLine> {
    let mut l = PsiLine::default();
    for kv in fields.split_whitespace() {
        let (k, v) = kv.split_once('=')?;
        match k {
            "avg10" => l.avg10 = hundredths(v)?,
            "avg60" => l.avg60 = hundredths(v)?,
            "avg300" => l.avg300 = hundredths(v)?,
            "total" => l.total_us = v.parse().ok()?,
            _ => {}
        }
    }
    Some(l)
}

/// Parses a pressure file. `None` without a valid `some` line.
pub fn parse(text: &str) -> Option<Psi> {
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("some ") {
            some = Some(parse_line(rest)?);
        } else if let Some(rest) = line.strip_prefix("full ") {
            full = Some(parse_line(rest)?);
        }
    }
    Some(Psi { some: some?, full })
}

/// Reads `<dir>/<resource>.pressure` (a v2 cgroup directory), or with
/// `dir` = `/proc/pressure`, `<dir>/<resource>`. `resource` is `memory`,
/// `cpu` or `io`.
pub fn read(dir: &Path, resource: &str, buf: &mut Buf) -> Result<Psi, StatsError> {
    let path = if dir.ends_with("pressure") {
        dir.join(resource)
    } else {
        dir.join(format!("{resource}.pressure"))
    };
    buf.parse(&path, parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_lines_of_a_pressure_file_are_parsed() {
        let psi = parse(
            "some avg10=0.05 avg60=12.64 avg300=0.29 total=1191620\nfull avg10=0.04 avg60=0.41 avg300=100.00 total=772809\n",
        )
        .unwrap();
        assert_eq!(
            psi.some,
            PsiLine {
                avg10: 5,
                avg60: 1264,
                avg300: 29,
                total_us: 1191620
            }
        );
        assert_eq!(psi.full.unwrap().avg300, 10000);
    }

    #[test]
    fn a_cpu_pressure_file_may_lack_the_full_line() {
        let psi = parse("some avg10=1.5 avg60=0 avg300=0.00 total=3\n").unwrap();
        assert_eq!(psi.some.avg10, 150);
        assert_eq!(psi.some.avg60, 0);
        assert_eq!(psi.full, None);
    }

    #[test]
    fn malformed_pressure_files_are_rejected() {
        for text in [
            "",
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
            "some avg10=x total=1\n",
            "some avg10\n",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }
}
