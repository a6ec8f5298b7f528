//! The bench's scrape table: what one `/stats/summary` and one `/metrics`
//! answer cost picolet with N static pods (default 30), and its RSS with
//! the node API listening.
//!
//! picolet runs with the node API on (`port` on 127.0.0.1, its
//! self-signed serving certificate, no API server), so the RSS includes
//! the TLS server; the scrapes go over the admin socket, which serves the
//! same route table, so the cost measured is the answer's, not the TLS
//! handshake's. CPU per scrape is picolet's utime + stime
//! (`/proc/<pid>/stat`) over `PICOLET_BENCH_SCRAPES` scrapes (default
//! 100), divided by their number; the bytes are those of the last answer.

use std::time::{Duration, Instant};

use super::harness::kube::free_port;
use super::harness::{wait_until, Containerd, Picolet};
use super::{cpu_time, observer, proc_status_field, sleeper, until_running, KUBELET_DEFAULTS};

/// One endpoint's cost.
pub struct Scrape {
    pub path: &'static str,
    pub cpu_per_scrape: Duration,
    pub bytes: usize,
}

pub struct ScrapeRow {
    pub pods: usize,
    pub scrapes: u32,
    pub endpoints: Vec<Scrape>,
    pub rss_kib: u64,
    pub hwm_kib: u64,
}

pub fn measure(n: usize, scrapes: u32) -> ScrapeRow {
    let c = Containerd::start();
    let obs = observer(&c);
    let port = free_port();
    let config = format!("{KUBELET_DEFAULTS}address: 127.0.0.1\nport: {port}\n");
    let p = Picolet::start_with(&c, &config);
    let pid = p.pid().expect("picolet runs");
    wait_until("the node API listens", Duration::from_secs(60), || {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .ok()
            .map(|_| ())
    });
    let t0 = Instant::now();
    for i in 0..n {
        p.write_manifest(&format!("bench-{i}"), &sleeper(i));
    }
    if n > 0 {
        until_running(&obs, n, t0);
    }
    // Every pod in the summary (its stats are read on the scrape) before
    // measuring.
    wait_until(
        "every pod in /stats/summary",
        Duration::from_secs(120),
        || {
            let (_, body) = p.get("/stats/summary");
            let s: serde_json::Value = serde_json::from_str(&body).ok()?;
            (s["pods"].as_array().map(Vec::len) >= Some(n)).then_some(())
        },
    );
    let endpoints = ["/stats/summary", "/metrics", "/metrics/resource"]
        .into_iter()
        .map(|path| {
            let cpu0 = cpu_time(pid);
            let mut bytes = 0;
            for _ in 0..scrapes {
                let (status, body) = p.get(path);
                assert_eq!(status, 200, "{path}: {body}");
                bytes = body.len();
            }
            Scrape {
                path,
                cpu_per_scrape: cpu_time(pid).saturating_sub(cpu0) / scrapes.max(1),
                bytes,
            }
        })
        .collect();
    ScrapeRow {
        pods: n,
        scrapes,
        endpoints,
        rss_kib: proc_status_field(pid, "VmRSS:"),
        hwm_kib: proc_status_field(pid, "VmHWM:"),
    }
}

pub fn print(r: &ScrapeRow) {
    println!();
    println!(
        "| scrape, {} pods, node API on | CPU per scrape (mean of {}) | bytes per answer |",
        r.pods, r.scrapes
    );
    println!("|---|---:|---:|");
    for e in &r.endpoints {
        println!(
            "| `{}` | {:.2} ms | {} |",
            e.path,
            e.cpu_per_scrape.as_secs_f64() * 1000.0,
            e.bytes
        );
    }
    println!(
        "| VmRSS / VmHWM after the scrapes | {:.1} MiB / {:.1} MiB | |",
        r.rss_kib as f64 / 1024.0,
        r.hwm_kib as f64 / 1024.0
    );
}
