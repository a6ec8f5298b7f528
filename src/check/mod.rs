//! `picolet check`: the node's preflight, one verdict per line (`ok`,
//! `warn`, `fail`), for an operator bringing up a board before the first
//! `picolet run`, or asking why a running one misbehaves. It needs no
//! running picolet: it reads the configuration (`--config` and `run`'s
//! flags) and the host.
//!
//! What is checked, and why each verdict:
//! - **kernel**: below 3.10 fails (no cgroup namespaces, overlayfs);
//!   below 4.19 warns (kubeadm's recommended LTS floor); on cgroup v2
//!   below 5.8 warns (the kernel Kubernetes documents for cgroup v2).
//! - **cgroups**: v2 ok, v1 warns (maintenance mode; kubelet 1.35+ refuses
//!   it unless `failCgroupV1: false`); missing `cpu`, `memory` or `pids`
//!   fails (pods get no limits), missing `cpuset` or `hugetlb` warns.
//! - **container runtime**: CRI `Version` on `containerRuntimeEndpoint`
//!   answers (fail names the socket).
//! - **nodefs** (`rootDir`) and **imagefs** (the runtime's image store):
//!   space and inodes against the eviction thresholds: a hard one met
//!   fails (picolet would evict at once), a soft one warns.
//! - **clock**: a year before this build's fails (TLS and certificate
//!   checks break, logs lie); an unsynchronised clock (the kernel's NTP
//!   status, `adjtimex`) warns.
//! - **static pods**: `staticPodPath` must be a readable directory.
//! - **swap**: swap on with `memorySwap.swapBehavior: NoSwap` warns
//!   (kubelet's `failSwapOn`, true by default, would refuse to start;
//!   picolet runs, its pods get no swap).
//! - **kubeconfig certificate**: expired fails, within 7 days warns.
//!
//! The verdicts are pure functions over facts ([`Facts`]); [`host`] reads
//! the facts.

pub mod host;

use std::fmt::Write as _;

use crate::admin::term::{Style, Tone};
use crate::node::eviction::{Signal, Threshold};

/// A line's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    Ok,
    Warn,
    Fail,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::Fail => "fail",
        }
    }
}

/// One checked item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub what: &'static str,
    pub verdict: Verdict,
    pub detail: String,
}

fn line(what: &'static str, verdict: Verdict, detail: impl Into<String>) -> Line {
    Line {
        what,
        verdict,
        detail: detail.into(),
    }
}

/// A filesystem's space and inodes (statvfs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStat {
    pub available_bytes: u64,
    pub capacity_bytes: u64,
    pub inodes_free: u64,
    pub inodes: u64,
}

/// `major.minor` of a kernel release (`6.1.0-rpi7-rpi-v8` is (6, 1)).
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

pub fn kernel(release: &str, cgroup_v2: bool) -> Line {
    let what = "kernel";
    match kernel_version(release) {
        None => line(
            what,
            Verdict::Warn,
            format!("{release}: cannot read the version"),
        ),
        Some(v) if v < (3, 10) => line(
            what,
            Verdict::Fail,
            format!("{release}: older than 3.10, too old for containers"),
        ),
        Some(v) if v < (4, 19) => line(
            what,
            Verdict::Warn,
            format!("{release}: older than 4.19, the oldest LTS kernel Kubernetes recommends"),
        ),
        Some(v) if cgroup_v2 && v < (5, 8) => line(
            what,
            Verdict::Warn,
            format!("{release}: cgroup v2 wants 5.8 or later"),
        ),
        Some(_) => line(what, Verdict::Ok, release),
    }
}

/// The cgroup version line, then the controllers line.
pub fn cgroups(v2: Option<bool>, controllers: &[String]) -> Vec<Line> {
    let Some(v2) = v2 else {
        return vec![line(
            "cgroups",
            Verdict::Fail,
            "no cgroup filesystem at /sys/fs/cgroup",
        )];
    };
    let version = if v2 {
        line("cgroups", Verdict::Ok, "v2 (unified)")
    } else {
        line(
            "cgroups",
            Verdict::Warn,
            "v1: in maintenance mode; kubelet 1.35 and later refuse it unless failCgroupV1: false",
        )
    };
    let has = |c: &str| controllers.iter().any(|x| x == c);
    let missing = |names: &[&'static str]| -> Vec<&'static str> {
        names.iter().copied().filter(|c| !has(c)).collect()
    };
    let required = missing(&["cpu", "memory", "pids"]);
    let optional = missing(&["cpuset", "hugetlb"]);
    let controllers_line = if !required.is_empty() {
        line(
            "cgroup controllers",
            Verdict::Fail,
            format!(
                "missing {}: pods cannot be limited (enable them on the kernel command line)",
                required.join(", ")
            ),
        )
    } else if !optional.is_empty() {
        line(
            "cgroup controllers",
            Verdict::Warn,
            format!(
                "missing {}: no CPU pinning or hugepage limits",
                optional.join(", ")
            ),
        )
    } else {
        line("cgroup controllers", Verdict::Ok, controllers.join(" "))
    };
    vec![version, controllers_line]
}

/// The runtime's answer to CRI `Version`: (name, version, CRI version),
/// or why it did not answer.
pub fn runtime(endpoint: &str, answer: Result<(String, String, String), String>) -> Line {
    match answer {
        Ok((name, version, api)) => line(
            "container runtime",
            Verdict::Ok,
            format!("{name} {version} (CRI {api}) at {endpoint}"),
        ),
        Err(e) => line(
            "container runtime",
            Verdict::Fail,
            format!("{endpoint} does not answer CRI Version: {e}"),
        ),
    }
}

/// Bytes for people: `1.5Gi`, `300Mi`, `12Ki`.
pub fn bytes(b: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
    for (unit, size) in UNITS {
        if b >= size {
            let tenths = b * 10 / size;
            return match tenths % 10 {
                0 => format!("{}{unit}", tenths / 10),
                t => format!("{}.{t}{unit}", tenths / 10),
            };
        }
    }
    format!("{b}")
}

/// A filesystem (`nodefs` or `imagefs`) against the thresholds of its two
/// signals (`.available`, `.inodesFree`).
pub fn filesystem(
    what: &'static str,
    path: &str,
    stat: Result<FsStat, String>,
    thresholds: &[Threshold],
) -> Line {
    let stat = match stat {
        Ok(s) => s,
        Err(e) => return line(what, Verdict::Fail, format!("{path}: {e}")),
    };
    let (space, inodes) = if what == "imagefs" {
        (Signal::ImageFsAvailable, Signal::ImageFsInodesFree)
    } else {
        (Signal::NodeFsAvailable, Signal::NodeFsInodesFree)
    };
    let mut verdict = Verdict::Ok;
    let mut notes = Vec::new();
    for t in thresholds {
        let (have, of) = if t.signal == space {
            (stat.available_bytes, stat.capacity_bytes)
        } else if t.signal == inodes {
            (stat.inodes_free, stat.inodes)
        } else {
            continue;
        };
        let at = t.quantity(of);
        if of == 0 || have >= at {
            continue;
        }
        let (v, kind) = if t.hard {
            (Verdict::Fail, "hard")
        } else {
            (Verdict::Warn, "soft")
        };
        verdict = verdict.max(v);
        let amount = |n: u64| {
            if t.signal == space {
                bytes(n)
            } else {
                format!("{n} inodes")
            }
        };
        notes.push(format!(
            "{} {} is under the {kind} eviction threshold {} ({})",
            t.signal.as_str(),
            amount(have),
            t.value,
            amount(at)
        ));
    }
    let mut detail = format!(
        "{path}: {} free of {}, {} of {} inodes free",
        bytes(stat.available_bytes),
        bytes(stat.capacity_bytes),
        stat.inodes_free,
        stat.inodes
    );
    for n in notes {
        let _ = write!(detail, "; {n}");
    }
    line(what, verdict, detail)
}

/// The clock: `now` and this build's time (unix seconds), and the kernel's
/// NTP state (`None`: unknown).
pub fn clock(now: i64, built: i64, synchronised: Option<bool>) -> Line {
    let year = |t: i64| crate::admin::describe::civil(t).0;
    let shown = crate::admin::describe::rfc1123z(now);
    if year(now) < year(built) {
        return line(
            "clock",
            Verdict::Fail,
            format!(
                "{shown} is before this build ({}): set the time (no RTC? enable NTP)",
                year(built)
            ),
        );
    }
    match synchronised {
        Some(false) => line(
            "clock",
            Verdict::Warn,
            format!("{shown}, not synchronised (NTP): certificates and events may be off"),
        ),
        Some(true) => line("clock", Verdict::Ok, format!("{shown}, synchronised")),
        None => line("clock", Verdict::Ok, shown),
    }
}

/// `staticPodPath`: its entries counted, or why it cannot be read.
pub fn manifests(path: Option<&str>, read: Result<usize, String>) -> Line {
    let Some(path) = path else {
        return line("static pods", Verdict::Ok, "staticPodPath not set");
    };
    match read {
        Ok(n) => line(
            "static pods",
            Verdict::Ok,
            format!("{path}: {n} entries readable"),
        ),
        Err(e) => line(
            "static pods",
            Verdict::Fail,
            format!("staticPodPath {path}: {e}"),
        ),
    }
}

/// Swap (`SwapTotal` bytes) against `memorySwap.swapBehavior`.
pub fn swap(swap_total: u64, limited_swap: bool) -> Line {
    if swap_total == 0 {
        return line("swap", Verdict::Ok, "off");
    }
    if limited_swap {
        return line(
            "swap",
            Verdict::Ok,
            format!(
                "{} on; memorySwap.swapBehavior: LimitedSwap",
                bytes(swap_total)
            ),
        );
    }
    line(
        "swap",
        Verdict::Warn,
        format!(
            "{} on: kubelet's failSwapOn (default true) would refuse to start; \
             picolet runs, its pods get no swap (memorySwap.swapBehavior: NoSwap)",
            bytes(swap_total)
        ),
    )
}

/// The kubeconfig's client certificate: its `notAfter`, or why it could
/// not be read; `None`: the kubeconfig has no client certificate.
pub fn certificate(path: &str, not_after: Option<Result<i64, String>>, now: i64) -> Line {
    const WEEK: i64 = 7 * 86_400;
    let what = "kubeconfig certificate";
    match not_after {
        None => line(
            what,
            Verdict::Ok,
            format!("{path}: no client certificate (token)"),
        ),
        Some(Err(e)) => line(what, Verdict::Fail, format!("{path}: {e}")),
        Some(Ok(t)) => {
            let when = crate::admin::describe::rfc1123z(t);
            if t <= now {
                line(what, Verdict::Fail, format!("{path}: expired {when}"))
            } else if t - now < WEEK {
                line(what, Verdict::Warn, format!("{path}: expires {when}"))
            } else {
                line(what, Verdict::Ok, format!("{path}: valid until {when}"))
            }
        }
    }
}

/// Whether any line failed (`picolet check` exits 1).
pub fn failed(lines: &[Line]) -> bool {
    lines.iter().any(|l| l.verdict == Verdict::Fail)
}

/// The report: `verdict  what  detail`, one line each, verdicts coloured
/// on a terminal.
pub fn render(lines: &[Line], style: Style) -> String {
    let width = lines.iter().map(|l| l.what.len()).max().unwrap_or(0);
    let mut out = String::new();
    for l in lines {
        let tone = match l.verdict {
            Verdict::Ok => Tone::Good,
            Verdict::Warn => Tone::Warn,
            Verdict::Fail => Tone::Bad,
        };
        let word = format!("{:<4}", l.verdict.as_str());
        let _ = writeln!(
            out,
            "{}  {:<width$}  {}",
            style.paint(&word, tone),
            l.what,
            l.detail
        );
    }
    out
}

#[cfg(test)]
mod tests;
