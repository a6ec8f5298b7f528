//! `make bench`: picolet's footprint and speed, measured on real parts.
//!
//! For N = 0, 10 and 30 static pods it starts a private containerd and the
//! release picolet, writes N manifests at once, and reports:
//! - the time from writing the manifests to N containers running;
//! - picolet's VmRSS and VmHWM and its thread count, from /proc;
//! - picolet's CPU time (user + system) over an idle window (60 s);
//! - the stripped binary size.
//!
//! Then, for issue-3's scale check, 100 pods each with three probes
//! (startup and readiness httpGet, liveness tcpSocket) at periodSeconds 1:
//! picolet's CPU over the idle window and the probe scheduling lag (delay
//! from a probe's due time to its start; p50/p99 from `/metrics`).
//!
//! It prints a table and asserts nothing: performance is reported, not
//! tested. `make bench` runs the static x86_64 musl build (what the boards
//! ship, `PICOLET_BIN`); without it, the glibc build cargo made. It only runs when `PICOLET_BENCH=1` (set by `make bench`), so a
//! plain `cargo test` skips it. `PICOLET_BENCH_IDLE_SECS` shortens the idle
//! window; `PICOLET_BENCH_PODS` picks the pod counts (e.g. "0,30").

mod harness;
// The API-mode table (issue #8), in its own file.
#[path = "bench/api.rs"]
mod api;

use std::time::{Duration, Instant};

use harness::{wait_until, Containerd, Picolet};

/// kubelet's default resync period (the test harness uses 10 s).
const KUBELET_DEFAULTS: &str = "syncFrequency: 1m0s\n";

struct Row {
    pods: usize,
    start: Option<Duration>,
    rss_kib: u64,
    hwm_kib: u64,
    threads: u64,
    idle_cpu: Duration,
    idle_window: Duration,
    /// The longest single poll since start (the pod start included).
    longest: String,
}

fn proc_status_field(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// utime + stime of a process.
fn cpu_time(pid: u32) -> Duration {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may contain spaces).
    let rest = s.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    let hz = 100; // USER_HZ on Linux
    Duration::from_millis(ticks * 1000 / hz)
}

fn sleeper(i: usize) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bench-{i}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"1000000\"]\n    resources:\n      requests: {{cpu: 10m, memory: 4Mi}}\n"
    )
}

fn running(p: &Picolet) -> usize {
    let pods = p.pods();
    pods["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|i| {
                    i["status"]["containerStatuses"]
                        .as_array()
                        .is_some_and(|cs| {
                            !cs.is_empty() && cs.iter().all(|c| c["state"]["running"].is_object())
                        })
                })
                .count()
        })
        .unwrap_or(0)
}

/// The longest single poll of any task so far (the starvation watchdog's
/// `picolet_executor_longest_poll_seconds`), as text.
fn longest_poll(p: &Picolet) -> String {
    metric(
        &p.get("/metrics").1,
        "picolet_executor_longest_poll_seconds",
    )
    .first()
    .map(|v| format!("{:.1} ms", v * 1000.0))
    .unwrap_or_else(|| "-".into())
}

fn measure(n: usize, idle: Duration) -> Row {
    let c = Containerd::start();
    let p = Picolet::start_with(&c, KUBELET_DEFAULTS);
    let pid = p.pid().expect("picolet runs");
    let t0 = Instant::now();
    for i in 0..n {
        p.write_manifest(&format!("bench-{i}"), &sleeper(i));
    }
    let start = (n > 0).then(|| {
        wait_until(
            &format!("{n} pods running"),
            Duration::from_secs(600),
            || (running(&p) == n).then_some(()),
        );
        t0.elapsed()
    });
    // Let the first sync settle, then measure an idle window.
    std::thread::sleep(Duration::from_secs(2));
    let cpu0 = cpu_time(pid);
    std::thread::sleep(idle);
    let idle_cpu = cpu_time(pid).saturating_sub(cpu0);
    let longest = longest_poll(&p);
    let row = Row {
        pods: n,
        start,
        longest,
        rss_kib: proc_status_field(pid, "VmRSS:"),
        hwm_kib: proc_status_field(pid, "VmHWM:"),
        threads: proc_status_field(pid, "Threads:"),
        idle_cpu,
        idle_window: idle,
    };
    drop(p);
    drop(c);
    row
}

fn prober_pod(i: usize) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: probed-{i}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 8080 -h /www"]
    startupProbe: {{httpGet: {{path: /, port: 8080}}, periodSeconds: 1, failureThreshold: 60}}
    readinessProbe: {{httpGet: {{path: /, port: 8080}}, periodSeconds: 1}}
    livenessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1}}
"#
    )
}

struct ProbeRow {
    pods: usize,
    start: Duration,
    rss_kib: u64,
    threads: u64,
    cpu_per_min: f64,
    p50: String,
    p99: String,
    probes_per_s: f64,
    /// The longest single poll since start (the probed minute included).
    longest: String,
}

fn metric(text: &str, prefix: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect()
}

fn measure_probes(n: usize, idle: Duration) -> ProbeRow {
    let c = Containerd::start();
    let p = Picolet::start_with(&c, KUBELET_DEFAULTS);
    let pid = p.pid().expect("picolet runs");
    let t0 = Instant::now();
    for i in 0..n {
        p.write_manifest(&format!("probed-{i}"), &prober_pod(i));
    }
    wait_until(
        &format!("{n} probed pods ready"),
        Duration::from_secs(900),
        || {
            let pods = p.pods();
            let ready = pods["items"].as_array().map(|items| {
                items
                    .iter()
                    .filter(|i| i["status"]["containerStatuses"][0]["ready"] == true)
                    .count()
            });
            (ready == Some(n)).then_some(())
        },
    );
    let start = t0.elapsed();
    std::thread::sleep(Duration::from_secs(3));
    let total = |m: &str| metric(m, "prober_probe_total").iter().sum::<f64>();
    let before = total(&p.get("/metrics").1);
    let cpu0 = cpu_time(pid);
    std::thread::sleep(idle);
    let cpu = cpu_time(pid).saturating_sub(cpu0);
    let (_, m) = p.get("/metrics");
    let q = |quantile: &str| {
        metric(
            &m,
            &format!("picolet_probe_schedule_lag_seconds{{quantile=\"{quantile}\"}}"),
        )
        .first()
        .map(|v| format!("{:.2} ms", v * 1000.0))
        .unwrap_or_else(|| "-".into())
    };
    ProbeRow {
        pods: n,
        start,
        longest: longest_poll(&p),
        rss_kib: proc_status_field(pid, "VmRSS:"),
        threads: proc_status_field(pid, "Threads:"),
        cpu_per_min: cpu.as_secs_f64() * 60.0 / idle.as_secs_f64().max(1.0),
        p50: q("0.5"),
        p99: q("0.99"),
        probes_per_s: (total(&m) - before) / idle.as_secs_f64().max(1.0),
    }
}

fn main() {
    if std::env::var("PICOLET_BENCH").as_deref() != Ok("1") {
        println!("bench: skipped (run `make bench`, which sets PICOLET_BENCH=1)");
        return;
    }
    let idle = Duration::from_secs(
        std::env::var("PICOLET_BENCH_IDLE_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(60),
    );
    let counts: Vec<usize> = std::env::var("PICOLET_BENCH_PODS")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![0, 10, 30]);
    let bin = harness::picolet_bin();
    let bin = bin.as_path();
    let size = std::fs::metadata(bin).map(|m| m.len()).unwrap_or(0);

    let rows: Vec<Row> = counts.iter().map(|&n| measure(n, idle)).collect();

    println!();
    println!(
        "picolet bench ({}; idle window {} s; binary {} = {:.2} MiB)",
        std::env::consts::ARCH,
        idle.as_secs(),
        bin.display(),
        size as f64 / 1048576.0
    );
    println!();
    println!("| pods | start to running | VmRSS | VmHWM | threads | CPU per idle minute | longest poll |");
    println!("|-----:|-----------------:|------:|------:|--------:|--------------------:|-------------:|");
    for r in &rows {
        let start = r
            .start
            .map(|d| format!("{:.2} s", d.as_secs_f64()))
            .unwrap_or_else(|| "-".into());
        let per_min = r.idle_cpu.as_secs_f64() * 60.0 / r.idle_window.as_secs_f64().max(1.0);
        println!(
            "| {:>4} | {:>16} | {:>5.1} MiB | {:>5.1} MiB | {:>7} | {:>17.2} s | {:>12} |",
            r.pods,
            start,
            r.rss_kib as f64 / 1024.0,
            r.hwm_kib as f64 / 1024.0,
            r.threads,
            per_min,
            r.longest
        );
    }
    let probe_pods: usize = std::env::var("PICOLET_BENCH_PROBE_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    if probe_pods > 0 {
        let r = measure_probes(probe_pods, idle);
        println!();
        println!("| probed pods (3 probes each, 1 s) | start to ready | VmRSS | threads | CPU per minute | probes/s | lag p50 | lag p99 | longest poll |");
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        println!(
            "| {} | {:.1} s | {:.1} MiB | {} | {:.2} s | {:.0} | {} | {} | {} |",
            r.pods,
            r.start.as_secs_f64(),
            r.rss_kib as f64 / 1024.0,
            r.threads,
            r.cpu_per_min,
            r.probes_per_s,
            r.p50,
            r.p99,
            r.longest
        );
    }
    println!();
    println!("Reference, upstream kubelet v1.36 on this machine with 30 static pods: 96 MB RSS, 11 threads, 1.1 s CPU per idle minute, 6.2 s to start them all, 83 MB binary.");
    if std::env::var("PICOLET_BENCH_API").as_deref() != Ok("0") {
        api::run();
    }
}
