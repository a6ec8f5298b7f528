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
    fn the_nodes_pressure_files_are_parsed_as_the_kernel_writes_them() {
        // /proc/pressure/cpu on 6.x: `full` is there, always 0 for the node.
        let cpu = parse(
            "some avg10=16.70 avg60=6.68 avg300=2.31 total=9713544\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .unwrap();
        assert_eq!(
            (cpu.some.avg10, cpu.some.avg60, cpu.some.avg300),
            (1670, 668, 231)
        );
        assert_eq!(cpu.some.total_us, 9713544);
        assert_eq!(cpu.full, Some(PsiLine::default()));
        let memory = parse(
            "some avg10=0.00 avg60=0.31 avg300=0.30 total=1750950\nfull avg10=0.00 avg60=0.29 avg300=0.29 total=1639152\n",
        )
        .unwrap();
        assert_eq!(memory.full.unwrap().total_us, 1639152);
        assert_eq!(memory.full.unwrap().avg60, 29);
    }

    #[test]
    fn a_cgroup_and_the_node_name_their_files_differently() {
        let t = crate::cgroups::testutil::TempTree::new("stats-psi");
        t.put(
            "pod/io.pressure",
            "some avg10=1.00 avg60=0.00 avg300=0.00 total=10\nfull avg10=0.50 avg60=0.00 avg300=0.00 total=5\n",
        );
        t.put(
            "pressure/io",
            "some avg10=2.00 avg60=0.00 avg300=0.00 total=20\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        );
        let mut buf = Buf::new();
        let pod = read(&t.path().join("pod"), "io", &mut buf).unwrap();
        assert_eq!((pod.some.total_us, pod.some.avg10), (10, 100));
        let node = read(&t.path().join("pressure"), "io", &mut buf).unwrap();
        assert_eq!(node.some.total_us, 20);
        let err = read(&t.path().join("pod"), "cpu", &mut buf).unwrap_err();
        assert!(err.is_not_found(), "{err}");
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
