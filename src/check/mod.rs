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
//! - **config**: each key picolet does not know: a typo fails, naming
//!   the known key it most likely misspells; a kubelet field picolet does
//!   not implement warns. A file that does not load is the only line.
//! - **static pods**: every manifest read exactly as `run` reads it
//!   ([`crate::source::file::ManifestDir::check`]): one `run` would skip
//!   fails (file, and each invalid field); an unknown field warns.
//! - **CNI config**: none in `/etc/cni/net.d` warns when the runtime is
//!   containerd or CRI-O (they read their own configured conf dir, and a
//!   network add-on may write it after the join), fails for another one.
//! - **API server** (with a kubeconfig): a `SelfSubjectReview` answered
//!   with a user is ok (the user and groups shown); no answer, or a
//!   refusal, fails.
//! - **node API certificate** (port on): `tlsCertFile`/`tlsPrivateKeyFile`
//!   unreadable fails, as does `serverTLSBootstrap` without a kubeconfig;
//!   a self-signed one warns.
//! - **swap**: swap on with `memorySwap.swapBehavior: NoSwap` warns
//!   (kubelet's `failSwapOn`, true by default, would refuse to start;
//!   picolet runs, its pods get no swap).
//! - **kubeconfig certificate**: expired fails, within 7 days warns.
//!
//! The verdicts are pure functions over facts; [`host`] reads the facts.
//! Exit code: 0 when no line fails, 1 when one does ([`exit_code`]); `-o
//! json` (or `yaml`) prints the same lines as one document ([`document`]).

pub mod host;

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::cli::term::{Style, Tone};
use crate::config::UnknownField;
use crate::node::eviction::{Signal, Threshold};
use crate::source::file::Outcome;

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
    let year = |t: i64| crate::cli::describe_text::civil(t).0;
    let shown = crate::cli::describe_text::rfc1123z(now);
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

/// `staticPodPath` read as `run` reads it: a `fail` per manifest `run`
/// would skip (naming the file and, for an invalid pod, each field), a
/// `warn` per unknown field `run` would drop, then an `ok` counting the
/// valid pods (when any, or no file at all); or a `fail` when the path
/// cannot be listed.
pub fn manifests(path: Option<&str>, read: Result<Vec<(PathBuf, Outcome)>, String>) -> Vec<Line> {
    let what = "static pods";
    let Some(path) = path else {
        return vec![line(what, Verdict::Ok, "staticPodPath not set")];
    };
    let files = match read {
        Ok(files) => files,
        Err(e) => {
            return vec![line(
                what,
                Verdict::Fail,
                format!("staticPodPath {path}: {e}"),
            )]
        }
    };
    let mut lines = Vec::new();
    let mut valid = 0;
    for (_, outcome) in &files {
        match outcome {
            Ok(unknown) => {
                valid += 1;
                for u in unknown {
                    lines.push(line("static pod field", Verdict::Warn, u.to_string()));
                }
            }
            Err(e) => lines.push(line(what, Verdict::Fail, format!("{e}; run skips it"))),
        }
    }
    if valid > 0 || files.is_empty() {
        lines.push(line(
            what,
            Verdict::Ok,
            format!("{path}: {valid} of {} manifests valid", files.len()),
        ));
    }
    lines
}

/// The configuration's keys picolet does not know (`origin` names the
/// layers read): a typo `fail`s, with the known key it most likely
/// misspells; a kubelet field picolet does not implement `warn`s. In file
/// order.
pub fn config_fields(origin: &str, unknown: &[UnknownField]) -> Vec<Line> {
    let what = "config";
    if unknown.is_empty() {
        return vec![line(
            what,
            Verdict::Ok,
            format!("{origin}: every field known"),
        )];
    }
    // In file order: layer by layer, then by line (unknown lines last).
    let mut sorted: Vec<&UnknownField> = unknown.iter().collect();
    sorted.sort_by_key(|u| {
        let layer = unknown.iter().position(|x| x.origin == u.origin);
        (layer, u.line.is_none(), u.line)
    });
    sorted
        .into_iter()
        .map(|u| {
            let at = match u.line {
                Some(n) => format!("{} line {n}", u.origin.display()),
                None => u.origin.display().to_string(),
            };
            let field = &u.field;
            if u.is_upstream() {
                line(
                    what,
                    Verdict::Warn,
                    format!("{at}: kubelet field {field:?} is not implemented by picolet; ignored"),
                )
            } else {
                let hint = match u.did_you_mean() {
                    Some(k) => format!("; did you mean {k:?}?"),
                    None => String::new(),
                };
                line(
                    what,
                    Verdict::Fail,
                    format!("{at}: unknown field {field:?}{hint}"),
                )
            }
        })
        .collect()
}

/// A configuration that cannot be loaded: the one line, and nothing else
/// can be checked.
pub fn config_error(error: &str) -> Line {
    line("config", Verdict::Fail, error)
}

/// The CNI configuration in `dir` (the names of its `.conf`, `.conflist`
/// and `.json` files, or why it could not be read), for the runtime
/// `runtime` (CRI `Version`'s name, `None` when it did not answer).
///
/// containerd and CRI-O read CNI config themselves, from a directory of
/// their own configuration (`/etc/cni/net.d` by default), and a network
/// add-on often writes it only after the node joins: none there is a
/// `warn` for them, and for a runtime that did not answer. Another runtime
/// without one `fail`s.
pub fn cni(dir: &str, entries: Result<Vec<String>, String>, runtime: Option<&str>) -> Line {
    let what = "CNI config";
    let mut names: Vec<String> = match entries {
        Ok(names) => names
            .into_iter()
            .filter(|n| {
                !n.starts_with('.')
                    && [".conf", ".conflist", ".json"]
                        .iter()
                        .any(|ext| n.ends_with(ext))
            })
            .collect(),
        Err(e) => {
            let verdict = cni_missing_verdict(runtime);
            return line(what, verdict, format!("{dir}: {e}{}", cni_hint(runtime)));
        }
    };
    if names.is_empty() {
        return line(
            what,
            cni_missing_verdict(runtime),
            format!("{dir}: no network config{}", cni_hint(runtime)),
        );
    }
    names.sort();
    line(what, Verdict::Ok, format!("{dir}: {}", names.join(", ")))
}

fn own_cni_config(runtime: Option<&str>) -> bool {
    runtime.is_none_or(|r| matches!(r, "containerd" | "cri-o"))
}

fn cni_missing_verdict(runtime: Option<&str>) -> Verdict {
    if own_cni_config(runtime) {
        Verdict::Warn
    } else {
        Verdict::Fail
    }
}

fn cni_hint(runtime: Option<&str>) -> &'static str {
    if own_cni_config(runtime) {
        "; pods get no network until one is there (install a network add-on, \
         or check the runtime's own CNI conf dir if you changed it)"
    } else {
        "; pods get no network"
    }
}

/// What the API server answered a `SelfSubjectReview` with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Review {
    /// 201: who the credentials are.
    User { name: String, groups: Vec<String> },
    /// Another status, with the API server's message.
    Refused { code: u16, message: String },
    /// No answer (dial, TLS, timeout), or the kubeconfig could not be used.
    Unreachable(String),
}

/// The `SelfSubjectReview` reply's user name and groups.
pub fn parse_review(body: &[u8]) -> Result<(String, Vec<String>), String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("not a SelfSubjectReview: {e}"))?;
    let info = &v["status"]["userInfo"];
    let name = info["username"]
        .as_str()
        .ok_or("the SelfSubjectReview has no status.userInfo.username")?;
    let groups = info["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_str().map(str::to_string))
        .collect();
    Ok((name.to_string(), groups))
}

/// The API server (`server`) and the kubeconfig's credentials, by the
/// `SelfSubjectReview` it answered.
pub fn api_server(server: &str, review: Review) -> Line {
    let what = "API server";
    match review {
        Review::User { name, groups } => {
            let groups = if groups.is_empty() {
                String::new()
            } else {
                format!(" (groups {})", groups.join(", "))
            };
            line(
                what,
                Verdict::Ok,
                format!("{server}: credentials accepted as {name}{groups}"),
            )
        }
        Review::Refused { code: 401, message } => line(
            what,
            Verdict::Fail,
            format!("{server}: credentials refused (401 Unauthorized): {message}"),
        ),
        Review::Refused { code, message } => line(
            what,
            Verdict::Fail,
            format!("{server}: SelfSubjectReview answered {code}: {message}"),
        ),
        Review::Unreachable(e) => line(what, Verdict::Fail, format!("{server}: unreachable: {e}")),
    }
}

/// Where the node API's serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Serving {
    /// `port: 0`: no node API.
    Off,
    /// `tlsCertFile` and `tlsPrivateKeyFile`: each path, and whether it
    /// can be read (or why not).
    Files(Vec<(String, Result<(), String>)>),
    /// `serverTLSBootstrap`: whether a kubeconfig (to ask with) is set,
    /// and the issued certificate's path if one is on disk.
    Bootstrap {
        kubeconfig: bool,
        issued: Option<String>,
    },
    /// Neither: the self-signed certificate `run` makes at this path.
    SelfSigned(String),
}

/// The node API's serving certificate (with the node API `port`).
pub fn serving_certificate(port: u16, serving: Serving) -> Line {
    let what = "node API certificate";
    match serving {
        Serving::Off => line(what, Verdict::Ok, "node API off (port: 0)"),
        Serving::Files(files) => {
            let bad: Vec<String> = files
                .iter()
                .filter_map(|(p, r)| r.as_ref().err().map(|e| format!("{p}: {e}")))
                .collect();
            if bad.is_empty() {
                let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
                line(
                    what,
                    Verdict::Ok,
                    format!("port {port}: {}", paths.join(", ")),
                )
            } else {
                line(what, Verdict::Fail, format!("port {port}: {}", bad.join("; ")))
            }
        }
        Serving::Bootstrap {
            kubeconfig: false, ..
        } => line(
            what,
            Verdict::Fail,
            format!("port {port}: serverTLSBootstrap needs a kubeconfig to ask the cluster with"),
        ),
        Serving::Bootstrap {
            issued: Some(p), ..
        } => line(
            what,
            Verdict::Ok,
            format!("port {port}: issued by the cluster ({p}), serverTLSBootstrap"),
        ),
        Serving::Bootstrap { issued: None, .. } => line(
            what,
            Verdict::Ok,
            format!(
                "port {port}: serverTLSBootstrap: requested at start (self-signed until the CSR is approved)"
            ),
        ),
        Serving::SelfSigned(p) => line(
            what,
            Verdict::Warn,
            format!(
                "port {port}: no tlsCertFile and no serverTLSBootstrap: \
                 a self-signed certificate ({p}) no client can verify"
            ),
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
            let when = crate::cli::describe_text::rfc1123z(t);
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

/// Whether any line failed.
pub fn failed(lines: &[Line]) -> bool {
    lines.iter().any(|l| l.verdict == Verdict::Fail)
}

/// `picolet check`'s exit code: 0 when nothing failed (warnings
/// included), 1 when anything did.
pub fn exit_code(lines: &[Line]) -> i32 {
    i32::from(failed(lines))
}

/// `-o json` (or `yaml`): the same lines as a document,
/// `{"ok": bool, "checks": [{"check", "verdict", "detail"}]}`, `ok` false
/// exactly when the exit code is 1.
pub fn document(lines: &[Line]) -> serde_json::Value {
    let checks: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| {
            serde_json::json!({
                "check": l.what,
                "verdict": l.verdict.as_str(),
                "detail": l.detail,
            })
        })
        .collect();
    serde_json::json!({"ok": !failed(lines), "checks": checks})
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
