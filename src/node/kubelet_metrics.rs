//! Pure: kubelet's own metric families on `/metrics`, with kubelet's
//! names, labels, HELP text (component-base's `[ALPHA]` prefix included),
//! types and buckets: `kubelet_node_name`, `kubelet_running_pods`,
//! `kubelet_running_containers`, `kubelet_pod_start_duration_seconds`,
//! `kubelet_pleg_relist_duration_seconds`, `kubelet_runtime_operations_total`
//! and `kubelet_evictions`.
//!
//! The agent keeps [`KubeletMetrics`] (two histograms and the eviction
//! counters: fixed arrays, nothing allocated per observation) and hands
//! the rest, counted at scrape time, in a [`Scrape`]. As with kubelet, a
//! labelled family with no series yet is not written at all.

use std::fmt::Write;

/// kubelet's `podStartupDurationBuckets` (seconds).
pub const POD_START_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
    300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];
/// Prometheus' default buckets (kubelet's `metrics.DefBuckets`).
pub const DEFAULT_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// The most buckets a [`Histogram`] has.
const MAX_BUCKETS: usize = 25;

/// A cumulative histogram over fixed upper bounds.
#[derive(Clone, Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Observations at or under each bound (not cumulative).
    counts: [u64; MAX_BUCKETS],
    count: u64,
    sum: f64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Histogram {
        assert!(bounds.len() <= MAX_BUCKETS, "too many buckets");
        Histogram {
            bounds,
            counts: [0; MAX_BUCKETS],
            count: 0,
            sum: 0.0,
        }
    }

    pub fn observe(&mut self, value: f64) {
        if let Some(i) = self.bounds.iter().position(|b| value <= *b) {
            self.counts[i] += 1;
        }
        self.count += 1;
        self.sum += value;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The `_bucket`, `_sum` and `_count` series of `name`.
    fn render(&self, out: &mut String, name: &str) {
        let mut cumulative = 0;
        for (bound, n) in self.bounds.iter().zip(self.counts) {
            cumulative += n;
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

/// The eviction signals `kubelet_evictions` is labelled with.
pub const EVICTION_SIGNALS: [&str; 9] = [
    "memory.available",
    "allocatableMemory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
];

/// What the agent records between scrapes.
#[derive(Clone, Debug)]
pub struct KubeletMetrics {
    pub pod_start: Histogram,
    pub pleg_relist: Histogram,
    /// Pods evicted, per [`EVICTION_SIGNALS`] entry.
    evictions: [u64; EVICTION_SIGNALS.len()],
}

impl Default for KubeletMetrics {
    fn default() -> Self {
        KubeletMetrics {
            pod_start: Histogram::new(POD_START_BUCKETS),
            pleg_relist: Histogram::new(DEFAULT_BUCKETS),
            evictions: [0; EVICTION_SIGNALS.len()],
        }
    }
}

impl KubeletMetrics {
    /// Counts one eviction for `signal` (one of [`EVICTION_SIGNALS`]).
    pub fn evicted(&mut self, signal: &str) {
        if let Some(i) = EVICTION_SIGNALS.iter().position(|s| *s == signal) {
            self.evictions[i] += 1;
        }
    }
}

/// What is counted at scrape time.
#[derive(Clone, Debug, Default)]
pub struct Scrape<'a> {
    pub node_name: &'a str,
    /// Sandboxes that are ready.
    pub running_pods: u64,
    /// Containers per kubelet state: created, running, exited, unknown.
    pub containers: [u64; 4],
    /// CRI calls made, by kubelet's operation name (`list_containers`, ...).
    pub runtime_operations: Vec<(&'static str, u64)>,
}

fn family(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} [ALPHA] {help}\n# TYPE {name} {kind}");
}

/// Appends kubelet's families to `out`.
pub fn render(out: &mut String, m: &KubeletMetrics, s: &Scrape<'_>) {
    if !m.evictions.iter().all(|n| *n == 0) {
        family(
            out,
            "kubelet_evictions",
            "Cumulative number of pod evictions by eviction signal",
            "counter",
        );
        for (signal, n) in EVICTION_SIGNALS.iter().zip(m.evictions) {
            if n > 0 {
                let _ = writeln!(out, "kubelet_evictions{{eviction_signal=\"{signal}\"}} {n}");
            }
        }
    }
    family(
        out,
        "kubelet_node_name",
        "The node's name. The count is always 1.",
        "gauge",
    );
    let _ = writeln!(out, "kubelet_node_name{{node=\"{}\"}} 1", s.node_name);
    family(
        out,
        "kubelet_pleg_relist_duration_seconds",
        "Duration in seconds for relisting pods in PLEG.",
        "histogram",
    );
    m.pleg_relist
        .render(out, "kubelet_pleg_relist_duration_seconds");
    family(
        out,
        "kubelet_pod_start_duration_seconds",
        "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
        "histogram",
    );
    m.pod_start
        .render(out, "kubelet_pod_start_duration_seconds");
    family(
        out,
        "kubelet_running_containers",
        "Number of containers currently running",
        "gauge",
    );
    for (state, n) in ["created", "running", "exited", "unknown"]
        .iter()
        .zip(s.containers)
    {
        if n > 0 || *state != "unknown" {
            let _ = writeln!(
                out,
                "kubelet_running_containers{{container_state=\"{state}\"}} {n}"
            );
        }
    }
    family(
        out,
        "kubelet_running_pods",
        "Number of pods that have a running pod sandbox",
        "gauge",
    );
    let _ = writeln!(out, "kubelet_running_pods {}", s.running_pods);
    if s.runtime_operations.iter().any(|(_, n)| *n > 0) {
        family(
            out,
            "kubelet_runtime_operations_total",
            "Cumulative number of runtime operations by operation type.",
            "counter",
        );
        for (op, n) in s.runtime_operations.iter().filter(|(_, n)| *n > 0) {
            let _ = writeln!(
                out,
                "kubelet_runtime_operations_total{{operation_type=\"{op}\"}} {n}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_cumulatively_up_to_inf() {
        let mut h = Histogram::new(DEFAULT_BUCKETS);
        h.observe(0.003);
        h.observe(0.2);
        h.observe(42.0);
        let mut out = String::new();
        h.render(&mut out, "x");
        assert!(out.contains("x_bucket{le=\"0.005\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"0.1\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"0.25\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"10\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("x_sum 42.2"), "{out}");
        assert!(out.contains("x_count 3\n"), "{out}");
        assert_eq!(out.matches("x_bucket").count(), DEFAULT_BUCKETS.len() + 1);
    }

    #[test]
    fn kubelets_families_have_its_names_labels_help_and_types() {
        let mut m = KubeletMetrics::default();
        m.pod_start.observe(1.5);
        m.evicted("memory.available");
        m.evicted("no.such.signal");
        let s = Scrape {
            node_name: "pi-1",
            running_pods: 2,
            containers: [1, 3, 4, 0],
            runtime_operations: vec![("list_containers", 7), ("version", 0)],
        };
        let mut out = String::new();
        render(&mut out, &m, &s);
        for line in [
            "# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox",
            "# TYPE kubelet_running_pods gauge",
            "kubelet_running_pods 2",
            "# TYPE kubelet_running_containers gauge",
            "kubelet_running_containers{container_state=\"created\"} 1",
            "kubelet_running_containers{container_state=\"running\"} 3",
            "kubelet_running_containers{container_state=\"exited\"} 4",
            "# TYPE kubelet_pod_start_duration_seconds histogram",
            "kubelet_pod_start_duration_seconds_bucket{le=\"2\"} 1",
            "kubelet_pod_start_duration_seconds_bucket{le=\"3600\"} 1",
            "kubelet_pod_start_duration_seconds_count 1",
            "# TYPE kubelet_pleg_relist_duration_seconds histogram",
            "kubelet_pleg_relist_duration_seconds_count 0",
            "# TYPE kubelet_runtime_operations_total counter",
            "kubelet_runtime_operations_total{operation_type=\"list_containers\"} 7",
            "kubelet_node_name{node=\"pi-1\"} 1",
            "# TYPE kubelet_evictions counter",
            "kubelet_evictions{eviction_signal=\"memory.available\"} 1",
        ] {
            assert!(out.lines().any(|l| l == line), "{line}\n{out}");
        }
        assert!(!out.contains("operation_type=\"version\""), "{out}");
        assert!(!out.contains("container_state=\"unknown\""), "{out}");
        let mut quiet = String::new();
        render(&mut quiet, &KubeletMetrics::default(), &Scrape::default());
        assert!(!quiet.contains("kubelet_evictions"), "{quiet}");
        assert!(
            !quiet.contains("kubelet_runtime_operations_total"),
            "{quiet}"
        );
        for line in out.lines().filter(|l| l.starts_with("# TYPE")) {
            let name = line.split(' ').nth(2).unwrap();
            assert_eq!(out.matches(&format!("# TYPE {name} ")).count(), 1);
        }
    }
}
