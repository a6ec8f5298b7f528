//! kubelet's Summary API (`/stats/summary`, the JSON of
//! `k8s.io/kubelet/pkg/apis/stats/v1alpha1` that metrics-server and other
//! consumers read) and the Prometheus text of `/metrics/resource` built
//! from it, with kubelet's field and metric names.
//!
//! Only what picolet measures is here: the structs are our own, small, and
//! serialize only; a value picolet could not read is left out (kubelet
//! omits nil pointers too). Pressure stall information (`psi` in `cpu`,
//! `memory` and `io`) is there wherever the kernel has it (cgroup v2 and
//! `/proc/pressure`; kubelet's `KubeletPSI` gate is GA and on in v1.36);
//! `swap` wherever the kernel accounts it. The agent reads the kernel's numbers
//! (`agent/views/stats_summary.rs`, with [`crate::node::stats`]) and fills these;
//! this file is pure: times come in as arguments.

use std::fmt::Write;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

/// The whole answer.
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    pub node: NodeStats,
    pub pods: Vec<PodStats>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    pub node_name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system_containers: Vec<ContainerStats>,
    pub start_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rlimit: Option<RlimitStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<IoStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapStats>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_fs: Option<FsStats>,
}

#[derive(Debug, Default, Serialize)]
pub struct RlimitStats {
    pub time: String,
    pub maxpid: u64,
    pub curproc: u64,
}

#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_nano_cores: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_core_nano_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psi: Option<PsiStats>,
}

#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major_page_faults: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psi: Option<PsiStats>,
}

/// kubelet's IOStats: only the time and the I/O pressure, so picolet
/// writes it only where it has the pressure.
#[derive(Debug, Default, Clone, Serialize)]
pub struct IoStats {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psi: Option<PsiStats>,
}

/// A resource's pressure stall information: kubelet's PSIStats. `full` is
/// written even where the kernel has no `full` line (CPU before 5.13),
/// as zeros, as kubelet does.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct PsiStats {
    pub full: PsiData,
    pub some: PsiData,
}

/// One line of a pressure file: averages in percent; `total` is the
/// kernel's stall time counter as kubelet passes it on (the kernel's
/// microseconds, though kubelet's type comment says nanoseconds).
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize)]
pub struct PsiData {
    pub total: u64,
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
}

impl PsiStats {
    pub fn of(psi: &crate::node::stats::psi::Psi) -> PsiStats {
        let data = |l: &crate::node::stats::psi::PsiLine| PsiData {
            total: l.total_us,
            avg10: f64::from(l.avg10) / 100.0,
            avg60: f64::from(l.avg60) / 100.0,
            avg300: f64::from(l.avg300) / 100.0,
        };
        PsiStats {
            full: psi.full.as_ref().map(data).unwrap_or_default(),
            some: data(&psi.some),
        }
    }
}

/// kubelet's SwapStats: bytes swapped out, and what the swap limit leaves
/// (left out without a limit).
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SwapStats {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_usage_bytes: Option<u64>,
}

impl SwapStats {
    pub fn of(time: &str, swap: &crate::node::stats::swap::SwapStats) -> SwapStats {
        SwapStats {
            time: time.to_string(),
            swap_available_bytes: swap.available,
            swap_usage_bytes: Some(swap.usage),
        }
    }
}

#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_free: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_used: Option<u64>,
}

impl FsStats {
    /// A filesystem's numbers from statfs (`used` = capacity - available,
    /// as kubelet reports a whole filesystem).
    pub fn of_filesystem(time: &str, fs: &crate::node::stats::fs::FsStats) -> FsStats {
        FsStats {
            time: time.to_string(),
            available_bytes: Some(fs.available_bytes),
            capacity_bytes: Some(fs.capacity_bytes),
            used_bytes: Some(fs.capacity_bytes.saturating_sub(fs.available_bytes)),
            inodes_free: Some(fs.inodes_free),
            inodes: Some(fs.inodes),
            inodes_used: Some(fs.inodes.saturating_sub(fs.inodes_free)),
        }
    }

    /// What a part of a filesystem uses (a container's logs): its
    /// filesystem's size and free space, and `used` bytes of its own.
    pub fn part_of(time: &str, fs: Option<&crate::node::stats::fs::FsStats>, used: u64) -> FsStats {
        FsStats {
            time: time.to_string(),
            available_bytes: fs.map(|f| f.available_bytes),
            capacity_bytes: fs.map(|f| f.capacity_bytes),
            used_bytes: Some(used),
            inodes_free: fs.map(|f| f.inodes_free),
            inodes: fs.map(|f| f.inodes),
            inodes_used: None,
        }
    }
}

#[derive(Debug, Default, Serialize)]
pub struct PodReference {
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    pub pod_ref: PodReference,
    pub start_time: String,
    pub containers: Vec<ContainerStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// The pod's local volumes (emptyDir): kubelet's `volume`.
    #[serde(rename = "volume", skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeStats>,
    #[serde(rename = "ephemeral-storage", skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage: Option<FsStats>,
    #[serde(rename = "process_stats", skip_serializing_if = "Option::is_none")]
    pub process_stats: Option<ProcessStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<IoStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapStats>,
}

/// One volume's usage: kubelet's VolumeStats (the FsStats fields and the
/// volume's name).
#[derive(Debug, Default, Serialize)]
pub struct VolumeStats {
    #[serde(flatten)]
    pub fs: FsStats,
    pub name: String,
}

#[derive(Debug, Default, Serialize)]
pub struct ProcessStats {
    pub process_count: u64,
}

#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    pub name: String,
    pub start_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<IoStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapStats>,
}

/// A time as the Summary writes it (RFC 3339, UTC, seconds).
pub fn time(unix_secs: i64) -> String {
    Timestamp::from_second(unix_secs)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// One reading of a cgroup's CPU counter: nanoseconds of CPU time, at
/// Unix nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuSample {
    pub usage_ns: u64,
    pub at_unix_nanos: i128,
}

/// kubelet's `usageNanoCores`: CPU time over wall time between two
/// readings; `None` without an earlier one, when no time passed, or when
/// the counter went back (the cgroup was recreated).
pub fn nano_cores(prev: Option<CpuSample>, now: CpuSample) -> Option<u64> {
    let prev = prev?;
    let elapsed = now.at_unix_nanos - prev.at_unix_nanos;
    if elapsed <= 0 || now.usage_ns < prev.usage_ns {
        return None;
    }
    u64::try_from((now.usage_ns - prev.usage_ns) as i128 * 1_000_000_000 / elapsed).ok()
}

/// `CpuStats` from a reading and the one before.
pub fn cpu_stats(time: &str, prev: Option<CpuSample>, now: CpuSample) -> CpuStats {
    CpuStats {
        time: time.to_string(),
        usage_nano_cores: nano_cores(prev, now),
        usage_core_nano_seconds: Some(now.usage_ns),
        psi: None,
    }
}

/// Escapes a Prometheus label value.
fn label(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// One metric family: its header, then one sample per `(labels, value)`
/// (labels with their braces, or empty), each at the scrape's time when
/// `now_unix_ms` is given. A family without samples is left out, as
/// kubelet leaves it.
fn family(
    out: &mut String,
    now_unix_ms: Option<i64>,
    (name, kind, help): (&str, &str, &str),
    samples: impl IntoIterator<Item = (String, String)>,
) {
    let mut header = false;
    for (labels, value) in samples {
        if !header {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            header = true;
        }
        match now_unix_ms {
            Some(ms) => writeln!(out, "{name}{labels} {value} {ms}"),
            None => writeln!(out, "{name}{labels} {value}"),
        }
        .expect("writing to a String");
    }
}

/// The one family whose samples carry no time, as kubelet's: its value is
/// a time already.
const UNSTAMPED: &str = "container_start_time_seconds";

/// Nanoseconds as seconds.
fn secs(ns: u64) -> String {
    (ns as f64 / 1e9).to_string()
}

fn pod_labels(p: &PodStats) -> String {
    format!(
        "namespace=\"{}\",pod=\"{}\"",
        label(&p.pod_ref.namespace),
        label(&p.pod_ref.name)
    )
}

/// The node's families: CPU time, working set, swap.
fn node_metrics(out: &mut String, node: &NodeStats, now_unix_ms: i64) {
    let cpu = node.cpu.as_ref().and_then(|c| c.usage_core_nano_seconds);
    let ws = node.memory.as_ref().and_then(|m| m.working_set_bytes);
    let swap = node.swap.as_ref().and_then(|s| s.swap_usage_bytes);
    let families = [
        (
            (
                "node_cpu_usage_seconds_total",
                "counter",
                "CPU time the node used, in core-seconds.",
            ),
            cpu.map(secs),
        ),
        (
            (
                "node_memory_working_set_bytes",
                "gauge",
                "The node's working set, in bytes.",
            ),
            ws.map(|b| b.to_string()),
        ),
        (
            (
                "node_swap_usage_bytes",
                "gauge",
                "Swap the node uses now, in bytes (Linux only).",
            ),
            swap.map(|b| b.to_string()),
        ),
    ];
    for (head, value) in families {
        family(
            out,
            Some(now_unix_ms),
            head,
            value.map(|v| (String::new(), v)),
        );
    }
}

type ContainerGet = fn(&ContainerStats) -> Option<String>;

/// Each container's families: CPU time, working set, swap used and its
/// limit (what is available plus what is used), start time.
const CONTAINER_FAMILIES: [((&str, &str, &str), ContainerGet); 5] = [
    (
        (
            "container_cpu_usage_seconds_total",
            "counter",
            "CPU time the container used, in core-seconds.",
        ),
        |c| Some(secs(c.cpu.as_ref()?.usage_core_nano_seconds?)),
    ),
    (
        (
            "container_memory_working_set_bytes",
            "gauge",
            "The container's working set, in bytes.",
        ),
        |c| Some(c.memory.as_ref()?.working_set_bytes?.to_string()),
    ),
    (
        (
            "container_swap_usage_bytes",
            "gauge",
            "Swap the container uses now, in bytes (Linux only).",
        ),
        |c| Some(c.swap.as_ref()?.swap_usage_bytes?.to_string()),
    ),
    (
        (
            "container_swap_limit_bytes",
            "gauge",
            "The container's swap limit, in bytes (Linux only).",
        ),
        |c| {
            let s = c.swap.as_ref()?;
            let limit = s.swap_available_bytes? + s.swap_usage_bytes.unwrap_or(0);
            Some(limit.to_string())
        },
    ),
    (
        (
            "container_start_time_seconds",
            "gauge",
            "When the container started, in seconds since the Unix epoch.",
        ),
        |c| {
            let t: Timestamp = c.start_time.parse().ok()?;
            Some(t.as_second().to_string())
        },
    ),
];

type PodGet = fn(&PodStats) -> Option<String>;

/// Each pod's families: CPU time, working set, swap used.
const POD_FAMILIES: [((&str, &str, &str), PodGet); 3] = [
    (
        (
            "pod_cpu_usage_seconds_total",
            "counter",
            "CPU time the pod used, in core-seconds.",
        ),
        |p| Some(secs(p.cpu.as_ref()?.usage_core_nano_seconds?)),
    ),
    (
        (
            "pod_memory_working_set_bytes",
            "gauge",
            "The pod's working set, in bytes.",
        ),
        |p| Some(p.memory.as_ref()?.working_set_bytes?.to_string()),
    ),
    (
        (
            "pod_swap_usage_bytes",
            "gauge",
            "Swap the pod uses now, in bytes (Linux only).",
        ),
        |p| Some(p.swap.as_ref()?.swap_usage_bytes?.to_string()),
    ),
];

/// `/metrics/resource` in the Prometheus text format, with kubelet's metric
/// names: node, pod and container CPU time, working set and swap, each
/// container's swap limit and start time, and whether reading failed
/// (`scrape_error` is the older name of `resource_scrape_error`). Samples
/// carry the scrape's time in milliseconds, except the containers' start
/// times, which carry none (as kubelet's). kubelet has no pressure
/// families here (they are cAdvisor's, on `/metrics/cadvisor`).
pub fn resource_metrics(s: &Summary, scrape_failed: bool, now_unix_ms: i64) -> String {
    let mut out = String::new();
    node_metrics(&mut out, &s.node, now_unix_ms);
    for (head, get) in CONTAINER_FAMILIES {
        let samples = s.pods.iter().flat_map(|p| {
            p.containers.iter().filter_map(move |c| {
                let labels = format!("{{container=\"{}\",{}}}", label(&c.name), pod_labels(p));
                Some((labels, get(c)?))
            })
        });
        let stamp = (head.0 != UNSTAMPED).then_some(now_unix_ms);
        family(&mut out, stamp, head, samples);
    }
    for (head, get) in POD_FAMILIES {
        let samples = s
            .pods
            .iter()
            .filter_map(|p| Some((format!("{{{}}}", pod_labels(p)), get(p)?)));
        family(&mut out, Some(now_unix_ms), head, samples);
    }
    let failed = u8::from(scrape_failed);
    for (name, help) in [
        (
            "resource_scrape_error",
            "1 when reading some resource stats failed, else 0.",
        ),
        ("scrape_error", "The older name of resource_scrape_error."),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {failed}"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "2026-12-01T05:00:00Z";

    fn sample(usage_ns: u64, at_secs: i128) -> CpuSample {
        CpuSample {
            usage_ns,
            at_unix_nanos: at_secs * 1_000_000_000,
        }
    }

    #[test]
    fn a_volume_is_kubelets_fs_stats_with_its_name() {
        let v = serde_json::to_value(VolumeStats {
            fs: FsStats {
                time: "t".into(),
                used_bytes: Some(4096),
                ..Default::default()
            },
            name: "scratch".into(),
        })
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"time": "t", "usedBytes": 4096, "name": "scratch"})
        );
    }

    #[test]
    fn nano_cores_need_two_readings_that_went_forward() {
        let table = [
            (None, sample(5, 10), None),
            (
                Some(sample(0, 10)),
                sample(500_000_000, 11),
                Some(500_000_000),
            ),
            (
                Some(sample(0, 10)),
                sample(4_000_000_000, 12),
                Some(2_000_000_000),
            ),
            (Some(sample(9, 10)), sample(5, 11), None),
            (Some(sample(0, 10)), sample(5, 10), None),
        ];
        for (prev, now, want) in table {
            assert_eq!(nano_cores(prev, now), want, "{prev:?} {now:?}");
        }
    }

    fn swap(usage: u64, available: Option<u64>) -> SwapStats {
        let s = crate::node::stats::swap::SwapStats { usage, available };
        SwapStats::of(T, &s)
    }

    fn summary() -> Summary {
        let mem = |ws| MemoryStats {
            time: T.into(),
            working_set_bytes: Some(ws),
            usage_bytes: Some(ws * 2),
            ..Default::default()
        };
        let cpu = |ns| cpu_stats(T, None, sample(ns, 1));
        Summary {
            node: NodeStats {
                node_name: "edge-1".into(),
                start_time: time(1_700_000_000),
                cpu: Some(cpu(3_000_000_000)),
                memory: Some(mem(1000)),
                rlimit: Some(RlimitStats {
                    time: T.into(),
                    maxpid: 100,
                    curproc: 7,
                }),
                swap: Some(swap(0, Some(1 << 20))),
                ..Default::default()
            },
            pods: vec![PodStats {
                pod_ref: PodReference {
                    name: "web".into(),
                    namespace: "edge".into(),
                    uid: "u1".into(),
                },
                start_time: T.into(),
                containers: vec![ContainerStats {
                    name: "app".into(),
                    start_time: T.into(),
                    cpu: Some(cpu(1_500_000_000)),
                    memory: Some(mem(300)),
                    logs: Some(FsStats::part_of(T, None, 42)),
                    io: None,
                    swap: Some(swap(4096, Some(8192))),
                }],
                cpu: Some(cpu(2_000_000_000)),
                memory: Some(mem(400)),
                ephemeral_storage: None,
                process_stats: Some(ProcessStats { process_count: 2 }),
                volumes: Vec::new(),
                io: None,
                swap: Some(swap(4096, None)),
            }],
        }
    }

    #[test]
    fn the_summary_has_kubelets_field_names_and_omits_what_is_unknown() {
        let v = serde_json::to_value(summary()).unwrap();
        assert_eq!(v["node"]["nodeName"], "edge-1");
        assert_eq!(v["node"]["startTime"], "2023-11-14T22:13:20Z");
        assert_eq!(v["node"]["cpu"]["usageCoreNanoSeconds"], 3_000_000_000u64);
        assert!(v["node"]["cpu"].get("usageNanoCores").is_none());
        assert_eq!(v["node"]["memory"]["workingSetBytes"], 1000);
        assert!(v["node"]["memory"].get("rssBytes").is_none());
        assert_eq!(v["node"]["rlimit"]["maxpid"], 100);
        assert_eq!(v["node"]["rlimit"]["curproc"], 7);
        assert!(v["node"].get("fs").is_none());
        let pod = &v["pods"][0];
        assert_eq!(pod["podRef"]["uid"], "u1");
        assert_eq!(pod["process_stats"]["process_count"], 2);
        assert_eq!(pod["containers"][0]["logs"]["usedBytes"], 42);
        assert_eq!(pod["containers"][0]["startTime"], T);
    }

    #[test]
    fn resource_metrics_use_kubelets_names_and_labels() {
        let text = resource_metrics(&summary(), false, 1234);
        for line in [
            "node_cpu_usage_seconds_total 3 1234",
            "node_memory_working_set_bytes 1000 1234",
            r#"container_cpu_usage_seconds_total{container="app",namespace="edge",pod="web"} 1.5 1234"#,
            r#"container_memory_working_set_bytes{container="app",namespace="edge",pod="web"} 300 1234"#,
            r#"container_start_time_seconds{container="app",namespace="edge",pod="web"} 1796101200"#,
            r#"pod_cpu_usage_seconds_total{namespace="edge",pod="web"} 2 1234"#,
            r#"pod_memory_working_set_bytes{namespace="edge",pod="web"} 400 1234"#,
            "# TYPE container_cpu_usage_seconds_total counter",
            "node_swap_usage_bytes 0 1234",
            r#"container_swap_usage_bytes{container="app",namespace="edge",pod="web"} 4096 1234"#,
            r#"container_swap_limit_bytes{container="app",namespace="edge",pod="web"} 12288 1234"#,
            r#"pod_swap_usage_bytes{namespace="edge",pod="web"} 4096 1234"#,
            "# TYPE node_swap_usage_bytes gauge",
            "# TYPE container_swap_limit_bytes gauge",
            "resource_scrape_error 0",
            "scrape_error 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(
            resource_metrics(&Summary::default(), true, 0).contains("resource_scrape_error 1\n")
        );
        assert_eq!(label("a\"b\\c\nd"), r#"a\"b\\c\nd"#);
    }

    #[test]
    fn a_family_without_samples_is_left_out() {
        let mut s = summary();
        s.node.swap = None;
        s.pods[0].containers[0].swap = Some(swap(4096, None));
        let text = resource_metrics(&s, false, 1);
        assert!(!text.contains("node_swap_usage_bytes"), "{text}");
        assert!(
            !text.contains("container_swap_limit_bytes"),
            "no limit, no limit family: {text}"
        );
        assert!(text.contains("container_swap_usage_bytes{"), "{text}");
        let empty = resource_metrics(&Summary::default(), false, 1);
        assert!(!empty.contains("container_"), "{empty}");
        assert!(!empty.contains("# HELP pod_"), "{empty}");
    }

    #[test]
    fn swap_has_kubelets_field_names_and_leaves_out_an_unknown_limit() {
        let v = serde_json::to_value(summary()).unwrap();
        assert_eq!(
            v["node"]["swap"],
            serde_json::json!({"time": T, "swapAvailableBytes": 1048576, "swapUsageBytes": 0})
        );
        let pod = &v["pods"][0];
        assert_eq!(
            pod["swap"],
            serde_json::json!({"time": T, "swapUsageBytes": 4096})
        );
        assert_eq!(pod["containers"][0]["swap"]["swapAvailableBytes"], 8192);
    }

    #[test]
    fn pressure_is_kubelets_psi_in_percent_with_full_always_written() {
        use crate::node::stats::psi;
        let memory = psi::parse(
            "some avg10=0.05 avg60=12.64 avg300=0.29 total=1191620\nfull avg10=0.04 avg60=0.41 avg300=100.00 total=772809\n",
        )
        .unwrap();
        let old_cpu = psi::parse("some avg10=1.50 avg60=0.00 avg300=0.00 total=3\n").unwrap();
        let mut s = summary();
        s.node.memory.as_mut().unwrap().psi = Some(PsiStats::of(&memory));
        s.node.cpu.as_mut().unwrap().psi = Some(PsiStats::of(&old_cpu));
        s.pods[0].io = Some(IoStats {
            time: T.into(),
            psi: Some(PsiStats::of(&memory)),
        });
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v["node"]["memory"]["psi"],
            serde_json::json!({
                "full": {"total": 772809, "avg10": 0.04, "avg60": 0.41, "avg300": 100.0},
                "some": {"total": 1191620, "avg10": 0.05, "avg60": 12.64, "avg300": 0.29},
            })
        );
        assert_eq!(
            v["node"]["cpu"]["psi"]["full"],
            serde_json::json!({"total": 0, "avg10": 0.0, "avg60": 0.0, "avg300": 0.0})
        );
        assert_eq!(v["node"]["cpu"]["psi"]["some"]["avg10"], 1.5);
        assert_eq!(v["pods"][0]["io"]["time"], T);
        assert_eq!(v["pods"][0]["io"]["psi"]["some"]["total"], 1191620);
        assert!(v["node"].get("io").is_none());
        assert!(v["pods"][0]["cpu"].get("psi").is_none());
        let text = serde_json::to_string(&s).unwrap();
        assert!(text.contains(r#""avg60":12.64"#), "{text}");
    }
}
