//! The `picolet get pods` table: kubectl's `printPod` columns (NAME,
//! READY, STATUS, RESTARTS, AGE; `-o wide` adds IP and NODE) and its
//! `HumanDuration` ages, computed from a v1 `PodList`.
//!
//! Pure: the current time comes in as an argument. It reads only the pod
//! objects the admin socket serves, never the agent's state.

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Pod, PodStatus};

use super::term::{status_tone, Style};

/// kubectl's `HumanDuration` (k8s.io/apimachinery/pkg/util/duration) for a
/// number of seconds: `45s`, `3m20s`, `15m`, `5h30m`, `20h`, `3d4h`, `120d`,
/// `2y30d`, `9y`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    let (m, h) = (s / 60, s / 3600);
    let (d, y) = (h / 24, h / 24 / 365);
    // The leading unit, then the next smaller one unless it is zero.
    let (a, unit_a, b, unit_b) = if s < 60 * 2 {
        (s, 's', 0, 's')
    } else if m < 10 {
        (m, 'm', s % 60, 's')
    } else if m < 60 * 3 {
        (m, 'm', 0, 's')
    } else if h < 8 {
        (h, 'h', m % 60, 'm')
    } else if h < 48 {
        (h, 'h', 0, 'm')
    } else if h < 24 * 8 {
        (d, 'd', h % 24, 'h')
    } else if h < 24 * 365 * 2 {
        (d, 'd', 0, 'h')
    } else if h < 24 * 365 * 8 {
        (y, 'y', d % 365, 'd')
    } else {
        (y, 'y', 0, 'd')
    };
    if b == 0 {
        format!("{a}{unit_a}")
    } else {
        format!("{a}{unit_a}{b}{unit_b}")
    }
}

fn since(
    t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    now_unix: i64,
) -> String {
    match t {
        Some(t) => human_duration(now_unix - t.0.as_second()),
        None => "<unknown>".into(),
    }
}

/// When a container's last run ended (its last state's `finishedAt`).
fn finished(c: &ContainerStatus) -> Option<i64> {
    c.last_state
        .as_ref()?
        .terminated
        .as_ref()?
        .finished_at
        .as_ref()
        .map(|t| t.0.as_second())
}

/// A terminated container's STATUS cell: its reason, else its signal,
/// else its exit code, after `prefix` (`Init:` for an init container).
fn terminated_reason(t: &ContainerStateTerminated, prefix: &str) -> String {
    match (
        t.reason.as_deref().filter(|r| !r.is_empty()),
        t.signal.filter(|s| *s != 0),
    ) {
        (Some(r), _) => format!("{prefix}{r}"),
        (None, Some(sig)) => format!("{prefix}Signal:{sig}"),
        (None, None) => format!("{prefix}ExitCode:{}", t.exit_code),
    }
}

/// The pod's condition `type_` is `True`.
fn condition_true(status: &PodStatus, type_: &str) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// One pod's READY, STATUS and RESTARTS cells, by kubectl's `printPod`.
pub fn pod_row(pod: &Pod, now_unix: i64) -> (String, String, String) {
    let spec = pod.spec.as_ref();
    let status = pod.status.clone().unwrap_or_default();
    let inits = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[]);
    let is_sidecar = |name: &str| {
        inits
            .iter()
            .any(|c| c.name == name && c.restart_policy.as_deref() == Some("Always"))
    };
    let mut total = spec.map(|s| s.containers.len()).unwrap_or(0)
        + inits.iter().filter(|c| is_sidecar(&c.name)).count();
    let mut ready = 0;
    let mut restarts = 0i64;
    let mut sidecar_restarts = 0i64;
    let mut last_restart: Option<i64> = None;
    let mut last_sidecar_restart: Option<i64> = None;

    let phase = status.phase.clone().unwrap_or_default();
    let mut reason = status
        .reason
        .clone()
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| phase.clone());
    if status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("SchedulingGated"))
    {
        reason = "SchedulingGated".into();
    }

    let mut initializing = false;
    for (i, c) in status.init_container_statuses.iter().flatten().enumerate() {
        restarts += i64::from(c.restart_count);
        if let Some(f) = finished(c) {
            last_restart = last_restart.max(Some(f));
        }
        let sidecar = is_sidecar(&c.name);
        if sidecar {
            sidecar_restarts += i64::from(c.restart_count);
            if let Some(f) = finished(c) {
                last_sidecar_restart = last_sidecar_restart.max(Some(f));
            }
        }
        let state = c.state.clone().unwrap_or_default();
        match (&state.terminated, &state.waiting) {
            (Some(t), _) if t.exit_code == 0 => continue,
            _ if sidecar && c.started == Some(true) => {
                ready += usize::from(c.ready);
                continue;
            }
            (Some(t), _) => reason = terminated_reason(t, "Init:"),
            (None, Some(w))
                if w.reason
                    .as_deref()
                    .is_some_and(|r| !r.is_empty() && r != "PodInitializing") =>
            {
                reason = format!("Init:{}", w.reason.as_deref().unwrap_or_default());
            }
            _ => reason = format!("Init:{i}/{}", inits.len()),
        }
        initializing = true;
        break;
    }

    if !initializing || condition_true(&status, "Initialized") {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for c in status.container_statuses.iter().flatten().rev() {
            restarts += i64::from(c.restart_count);
            if let Some(f) = finished(c) {
                last_restart = last_restart.max(Some(f));
            }
            let state = c.state.clone().unwrap_or_default();
            if let Some(r) = state
                .waiting
                .as_ref()
                .and_then(|w| w.reason.clone())
                .filter(|r| !r.is_empty())
            {
                reason = r;
            } else if let Some(t) = &state.terminated {
                reason = terminated_reason(t, "");
            } else if c.ready && state.running.is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = condition_true(&status, "Ready");
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }

    if pod.metadata.deletion_timestamp.is_some() {
        if status.reason.as_deref() == Some("NodeLost") {
            reason = "Unknown".into();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".into();
        }
    }

    total = total.max(ready);
    let restarts = match last_restart {
        Some(at) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(now_unix - at)),
        _ => restarts.to_string(),
    };
    (format!("{ready}/{total}"), reason, restarts)
}

/// Which optional columns `picolet get pods` shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodColumns {
    /// `-o wide`: IP and NODE.
    pub wide: bool,
    /// `-A`: NAMESPACE first.
    pub namespace: bool,
}

/// Renders a v1 `PodList` (JSON, as `GET /pods` returns it) like
/// `kubectl get pods` (`-o wide` adds IP and NODE). Items that are not pods
/// are skipped; an empty list renders as `No resources found.`.
pub fn pods_table(
    list: &serde_json::Value,
    now_unix: i64,
    columns: PodColumns,
    style: Style,
) -> String {
    let PodColumns { wide, namespace } = columns;
    let mut pods: Vec<Pod> = list
        .get("items")
        .and_then(|i| i.as_array())
        .into_iter()
        .flatten()
        // Re-parse the item's text rather than `serde_json::from_value`: same
        // result, but it reuses the JSON-text `Pod` deserializer that the
        // manifest source needs anyway instead of instantiating a second one
        // over `Value` (that one cost ~275 KiB of the stripped release binary).
        .filter_map(|item| serde_json::from_str(&item.to_string()).ok())
        .collect();
    if pods.is_empty() {
        return "No resources found.\n".into();
    }
    let namespace_of = |pod: &Pod| {
        pod.metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into())
    };
    pods.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(pods.len() + 1);
    let mut header: Vec<String> = ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        .map(String::from)
        .to_vec();
    if namespace {
        header.insert(0, "NAMESPACE".into());
    }
    if wide {
        header.extend(["IP", "NODE"].map(String::from));
    }
    rows.push(header);
    for pod in &pods {
        let (ready, status, restarts) = pod_row(pod, now_unix);
        let mut row = vec![
            pod.metadata.name.clone().unwrap_or_default(),
            ready,
            status,
            restarts,
            since(pod.metadata.creation_timestamp.as_ref(), now_unix),
        ];
        if namespace {
            row.insert(0, namespace_of(pod));
        }
        if wide {
            let none = || "<none>".to_string();
            let ip = pod
                .status
                .as_ref()
                .and_then(|s| {
                    s.pod_ips
                        .as_ref()
                        .and_then(|ips| ips.first())
                        .map(|ip| ip.ip.clone())
                        .or_else(|| s.pod_ip.clone())
                })
                .filter(|ip| !ip.is_empty())
                .unwrap_or_else(none);
            let node = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(none);
            row.extend([ip, node]);
        }
        rows.push(row);
    }
    tabulate_in(&rows, style, Some(2))
}

/// kubectl's tabwriter: columns padded to the widest cell plus 3 spaces.
fn tabulate(rows: &[Vec<String>]) -> String {
    tabulate_in(rows, Style::PLAIN, None)
}

/// [`tabulate`] for a terminal: cut to `style.width` (the widest column
/// gives up characters first, its cut cells ending in `…`, no column below
/// 8), and the cells of column `toned` painted by [`status_tone`].
pub fn tabulate_in(rows: &[Vec<String>], style: Style, toned: Option<usize>) -> String {
    const GAP: usize = 3;
    const NARROWEST: usize = 8;
    let columns = rows[0].len();
    let mut widths: Vec<usize> = (0..columns)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut total = widths.iter().sum::<usize>() + GAP * columns.saturating_sub(1);
    while total > style.width {
        let Some((i, w)) = widths.iter().copied().enumerate().max_by_key(|(_, w)| *w) else {
            break;
        };
        if w <= NARROWEST {
            break;
        }
        widths[i] = w - 1;
        total -= 1;
    }
    let mut out = String::new();
    for (r, row) in rows.iter().enumerate() {
        for (i, cell) in row.iter().enumerate() {
            let len = cell.chars().count();
            let shown = if len > widths[i] {
                let mut c: String = cell.chars().take(widths[i].saturating_sub(1)).collect();
                c.push('…');
                c
            } else {
                cell.clone()
            };
            let pad = widths[i] - shown.chars().count().min(widths[i]);
            match status_tone(&shown).filter(|_| r > 0 && toned == Some(i)) {
                Some(tone) => out.push_str(&style.paint(&shown, tone)),
                None => out.push_str(&shown),
            }
            if i + 1 < columns {
                let _ = write!(out, "{:pad$}", "", pad = pad + GAP);
            }
        }
        out.push('\n');
    }
    out
}

/// A signal's amount for people: bytes in Mi (or Ki when small), counts
/// (inodes, PIDs) as they are.
fn amount(signal: &str, v: Option<i64>) -> String {
    let Some(v) = v else {
        return "-".into();
    };
    if signal.ends_with("inodesFree") || signal.starts_with("pid.") {
        return v.to_string();
    }
    if v.abs() >= 1 << 20 {
        format!("{}Mi", v / (1 << 20))
    } else {
        format!("{}Ki", v / 1024)
    }
}

/// Renders `GET /node` (the eviction task's view) for `picolet get node`:
/// the pressure conditions, then each observed signal with its thresholds.
/// `API server: <server> <state>`, with how long ago it last answered,
/// and since when and after how many failed dials it has not.
fn api_server_line(api: &serde_json::Value) -> String {
    let ago = |key: &str| api[key].as_i64().map(human_duration);
    let mut line = format!(
        "API server: {} {}",
        api["server"].as_str().unwrap_or("?"),
        api["state"].as_str().unwrap_or("?")
    );
    let mut detail = Vec::new();
    if let Some(since) = ago("secondsUnreachable") {
        detail.push(format!(
            "for {since}, {} failed attempts",
            api["failedAttempts"].as_u64().unwrap_or(0)
        ));
    }
    if let Some(last) = ago("secondsSinceLastContact") {
        detail.push(format!("last contact {last} ago"));
    }
    if !detail.is_empty() {
        line.push_str(&format!(" ({})", detail.join("; ")));
    }
    line
}

/// `Unschedulable: <spec.unschedulable>` as `kubectl describe node` words
/// it, saying what a cordon means here; unknown until the Node was read.
fn unschedulable_line(unschedulable: &serde_json::Value) -> String {
    match unschedulable.as_bool() {
        Some(true) => "Unschedulable: true (cordoned: no new pods are scheduled here; \
                       `kubectl uncordon` lifts it)"
            .to_string(),
        Some(false) => "Unschedulable: false".to_string(),
        None => "Unschedulable: unknown (the Node not read from the API server yet)".to_string(),
    }
}

pub fn node_table(node: &serde_json::Value, style: Style) -> String {
    let mut out = String::new();
    if let Some(name) = node.get("name").and_then(|n| n.as_str()) {
        let _ = writeln!(out, "Name: {name}\n");
    }
    if let Some(api) = node.get("apiServer").filter(|a| a.is_object()) {
        let _ = writeln!(out, "{}", api_server_line(api));
        let _ = writeln!(out, "{}\n", unschedulable_line(&node["unschedulable"]));
    }
    if let Some(cap) = node.get("capacity").and_then(|c| c.as_object()) {
        let mut rows = vec![["RESOURCE", "CAPACITY", "ALLOCATABLE"]
            .map(String::from)
            .to_vec()];
        for (name, v) in cap {
            let alloc = node
                .get("allocatable")
                .and_then(|a| a.get(name))
                .and_then(|a| a.as_str())
                .unwrap_or("-");
            rows.push(vec![
                name.clone(),
                v.as_str().unwrap_or("-").to_string(),
                alloc.to_string(),
            ]);
        }
        out.push_str(&tabulate(&rows));
        out.push('\n');
    }
    let mut rows = vec![["CONDITION", "STATUS"].map(String::from).to_vec()];
    if let Some(conds) = node.get("conditions").and_then(|c| c.as_object()) {
        for (name, v) in conds {
            let status = if v.as_bool() == Some(true) {
                "True"
            } else {
                "False"
            };
            rows.push(vec![name.clone(), status.into()]);
        }
    }
    out.push_str(&tabulate(&rows));
    out.push('\n');
    let mut rows = vec![["SIGNAL", "AVAILABLE", "CAPACITY", "THRESHOLD", "MET"]
        .map(String::from)
        .to_vec()];
    let empty = serde_json::Map::new();
    let signals = node
        .get("signals")
        .and_then(|s| s.as_object())
        .unwrap_or(&empty);
    let thresholds: Vec<&serde_json::Value> = node
        .get("thresholds")
        .and_then(|t| t.as_array())
        .into_iter()
        .flatten()
        .collect();
    let mut names: Vec<&str> = signals.keys().map(String::as_str).collect();
    for t in &thresholds {
        if let Some(s) = t.get("signal").and_then(|s| s.as_str()) {
            if !names.contains(&s) {
                names.push(s);
            }
        }
    }
    for name in names {
        let obs = signals.get(name);
        let field = |k: &str| obs.and_then(|o| o.get(k)).and_then(|v| v.as_i64());
        let mine: Vec<&&serde_json::Value> = thresholds
            .iter()
            .filter(|t| t.get("signal").and_then(|s| s.as_str()) == Some(name))
            .collect();
        let threshold = if mine.is_empty() {
            "<none>".to_string()
        } else {
            mine.iter()
                .map(|t| {
                    let raw = t.get("value").and_then(|v| v.as_str()).unwrap_or("?");
                    // A quantity in the signal's unit, like AVAILABLE; a
                    // percentage as given.
                    let value = match raw.parse::<i64>() {
                        Ok(n) => amount(name, Some(n)),
                        Err(_) => raw.to_string(),
                    };
                    if t.get("hard").and_then(|h| h.as_bool()) == Some(true) {
                        format!("<{value}")
                    } else {
                        let grace = t
                            .get("gracePeriodSeconds")
                            .and_then(|g| g.as_u64())
                            .unwrap_or(0);
                        format!("<{value} soft {}", human_duration(grace as i64))
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let met = mine
            .iter()
            .any(|t| t.get("met").and_then(|m| m.as_bool()) == Some(true));
        rows.push(vec![
            name.to_string(),
            amount(name, field("available")),
            amount(name, field("capacity")),
            threshold,
            if met { "yes" } else { "no" }.into(),
        ]);
    }
    out.push_str(&tabulate_in(&rows, style, None));
    out
}

#[cfg(test)]
mod tests;
