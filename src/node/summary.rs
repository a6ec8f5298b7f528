//! kubelet's Summary API (`/stats/summary`, the JSON of
//! `k8s.io/kubelet/pkg/apis/stats/v1alpha1` that metrics-server and other
//! consumers read) and the Prometheus text of `/metrics/resource` built
//! from it, with kubelet's field and metric names.
//!
//! Only what picolet measures is here: the structs are our own, small, and
//! serialize only; a value picolet could not read is left out (kubelet
//! omits nil pointers too). The agent reads the kernel's numbers
//! (`agent/summary.rs`, with [`crate::node::stats`]) and fills these;
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
    }
}

/// Escapes a Prometheus label value.
fn label(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// One metric family's header.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// `/metrics/resource` in the Prometheus text format, with kubelet's metric
/// names: node, pod and container CPU time and working set, container
/// start times, and whether reading failed (`scrape_error` is the older
/// name of `resource_scrape_error`). Samples carry the scrape's time in
/// milliseconds.
pub fn resource_metrics(s: &Summary, scrape_failed: bool, now_unix_ms: i64) -> String {
    let mut out = String::new();
    let secs = |ns: u64| ns as f64 / 1e9;
    let node_cpu = s.node.cpu.as_ref().and_then(|c| c.usage_core_nano_seconds);
    let node_ws = s.node.memory.as_ref().and_then(|m| m.working_set_bytes);
    let pod_labels = |p: &PodStats| {
        format!(
            "namespace=\"{}\",pod=\"{}\"",
            label(&p.pod_ref.namespace),
            label(&p.pod_ref.name)
        )
    };
    if let Some(ns) = node_cpu {
        family(
            &mut out,
            "node_cpu_usage_seconds_total",
            "counter",
            "CPU time the node used, in core-seconds.",
        );
        let _ = writeln!(
            out,
            "node_cpu_usage_seconds_total {} {now_unix_ms}",
            secs(ns)
        );
    }
    if let Some(b) = node_ws {
        family(
            &mut out,
            "node_memory_working_set_bytes",
            "gauge",
            "The node's working set, in bytes.",
        );
        let _ = writeln!(out, "node_memory_working_set_bytes {b} {now_unix_ms}");
    }
    type Get<'a> = &'a dyn Fn(&ContainerStats) -> Option<String>;
    let containers: [(&str, &str, &str, Get); 3] = [
        (
            "container_cpu_usage_seconds_total",
            "counter",
            "CPU time the container used, in core-seconds.",
            &|c| {
                let ns = c.cpu.as_ref()?.usage_core_nano_seconds?;
                Some(secs(ns).to_string())
            },
        ),
        (
            "container_memory_working_set_bytes",
            "gauge",
            "The container's working set, in bytes.",
            &|c| Some(c.memory.as_ref()?.working_set_bytes?.to_string()),
        ),
        (
            "container_start_time_seconds",
            "gauge",
            "When the container started, in seconds since the Unix epoch.",
            &|c| {
                let t: Timestamp = c.start_time.parse().ok()?;
                Some(t.as_second().to_string())
            },
        ),
    ];
    for (name, kind, help, get) in containers {
        let mut header = false;
        for p in &s.pods {
            for c in &p.containers {
                let Some(v) = get(c) else { continue };
                if !header {
                    family(&mut out, name, kind, help);
                    header = true;
                }
                let _ = writeln!(
                    out,
                    "{name}{{container=\"{}\",{}}} {v} {now_unix_ms}",
                    label(&c.name),
                    pod_labels(p)
                );
            }
        }
    }
    type PodGet<'a> = &'a dyn Fn(&PodStats) -> Option<String>;
    let pods: [(&str, &str, &str, PodGet); 2] = [
        (
            "pod_cpu_usage_seconds_total",
            "counter",
            "CPU time the pod used, in core-seconds.",
            &|p| Some(secs(p.cpu.as_ref()?.usage_core_nano_seconds?).to_string()),
        ),
        (
            "pod_memory_working_set_bytes",
            "gauge",
            "The pod's working set, in bytes.",
            &|p| Some(p.memory.as_ref()?.working_set_bytes?.to_string()),
        ),
    ];
    for (name, kind, help, get) in pods {
        let mut header = false;
        for p in &s.pods {
            let Some(v) = get(p) else { continue };
            if !header {
                family(&mut out, name, kind, help);
                header = true;
            }
            let _ = writeln!(out, "{name}{{{}}} {v} {now_unix_ms}", pod_labels(p));
        }
    }
    let failed = u8::from(scrape_failed);
    family(
        &mut out,
        "resource_scrape_error",
        "gauge",
        "1 when reading some resource stats failed, else 0.",
    );
    let _ = writeln!(out, "resource_scrape_error {failed}");
    family(
        &mut out,
        "scrape_error",
        "gauge",
        "The older name of resource_scrape_error.",
    );
    let _ = writeln!(out, "scrape_error {failed}");
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
                }],
                cpu: Some(cpu(2_000_000_000)),
                memory: Some(mem(400)),
                ephemeral_storage: None,
                process_stats: Some(ProcessStats { process_count: 2 }),
                volumes: Vec::new(),
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
            r#"container_start_time_seconds{container="app",namespace="edge",pod="web"} 1796101200 1234"#,
            r#"pod_cpu_usage_seconds_total{namespace="edge",pod="web"} 2 1234"#,
            r#"pod_memory_working_set_bytes{namespace="edge",pod="web"} 400 1234"#,
            "# TYPE container_cpu_usage_seconds_total counter",
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
}
