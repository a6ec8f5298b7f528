//! `picolet describe pod`: kubectl's `describe pod` text, from the v1 Pod
//! the admin socket's `/pods` serves and the events of its `/events`.
//!
//! The sections an operator on a board reads to learn why a pod is not
//! running: its status (phase, IP, QoS, start time, node), each
//! container's state (waiting reason, running since, terminated reason and
//! exit code), readiness and restarts, the pod conditions, and the
//! recent events, ages `10s (x3 over 2m)` like kubectl's.
//!
//! Pure: the pod, its events and the time come in as arguments.

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::{Container, ContainerState, ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use super::table::{human_duration, tabulate_in};
use super::term::{status_tone, Style, Tone};

/// The UTC civil date (year, month 1-12, day 1-31) of unix seconds
/// (Howard Hinnant's days-to-civil algorithm).
pub fn civil(unix: i64) -> (i64, i64, i64) {
    let z = unix.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Unix seconds as kubectl prints times (Go's RFC 1123 with a numeric
/// zone, in UTC): `Tue, 01 Dec 2026 10:04:55 +0000`.
pub fn rfc1123z(unix: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (year, month, day) = civil(unix);
    let secs = unix.rem_euclid(86_400);
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} +0000",
        DAYS[unix.div_euclid(86_400).rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

fn time(t: Option<&Time>) -> String {
    t.map(|t| rfc1123z(t.0.as_second()))
        .unwrap_or_else(|| "<unknown>".into())
}

/// `k=v` lines, the first after the label, the rest under it.
fn pairs(out: &mut String, label: &str, m: Option<&std::collections::BTreeMap<String, String>>) {
    let items: Vec<String> = m
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if items.is_empty() {
        let _ = writeln!(out, "{label:<18}<none>");
        return;
    }
    for (i, item) in items.iter().enumerate() {
        let label = if i == 0 { label } else { "" };
        let _ = writeln!(out, "{label:<18}{item}");
    }
}

/// One container state block (`State:` or `Last State:`), at `indent`.
fn state(out: &mut String, label: &str, s: Option<&ContainerState>, style: Style) {
    let field = |out: &mut String, k: &str, v: &str| {
        let _ = writeln!(out, "      {:<16}{v}", format!("{k}:"));
    };
    let head = |out: &mut String, word: &str| {
        let completed = s
            .and_then(|s| s.terminated.as_ref())
            .is_some_and(|t| t.exit_code == 0);
        let shown = match status_tone(word).filter(|_| !completed) {
            Some(t) => style.paint(word, t),
            None => word.to_string(),
        };
        let _ = writeln!(out, "    {:<18}{shown}", format!("{label}:"));
    };
    match s {
        Some(ContainerState {
            running: Some(r), ..
        }) => {
            head(out, "Running");
            field(out, "Started", &time(r.started_at.as_ref()));
        }
        Some(ContainerState {
            waiting: Some(w), ..
        }) => {
            head(out, "Waiting");
            field(out, "Reason", w.reason.as_deref().unwrap_or(""));
            if let Some(m) = w.message.as_deref().filter(|m| !m.is_empty()) {
                field(out, "Message", m);
            }
        }
        Some(ContainerState {
            terminated: Some(t),
            ..
        }) => {
            head(out, "Terminated");
            field(out, "Reason", t.reason.as_deref().unwrap_or(""));
            if let Some(m) = t.message.as_deref().filter(|m| !m.is_empty()) {
                field(out, "Message", m);
            }
            field(out, "Exit Code", &t.exit_code.to_string());
            if let Some(sig) = t.signal.filter(|s| *s != 0) {
                field(out, "Signal", &sig.to_string());
            }
            field(out, "Started", &time(t.started_at.as_ref()));
            field(out, "Finished", &time(t.finished_at.as_ref()));
        }
        _ => {
            let _ = writeln!(out, "    {:<18}<none>", format!("{label}:"));
        }
    }
}

fn containers(
    out: &mut String,
    heading: &str,
    specs: &[Container],
    statuses: &[ContainerStatus],
    style: Style,
) {
    if specs.is_empty() {
        return;
    }
    let _ = writeln!(out, "{}", style.paint(heading, Tone::Bold));
    for c in specs {
        let st = statuses.iter().find(|s| s.name == c.name);
        let line = |out: &mut String, k: &str, v: &str| {
            let _ = writeln!(out, "    {:<18}{v}", format!("{k}:"));
        };
        let _ = writeln!(out, "  {}:", c.name);
        if let Some(id) = st.and_then(|s| s.container_id.as_deref()) {
            line(out, "Container ID", id);
        }
        line(out, "Image", c.image.as_deref().unwrap_or(""));
        if let Some(id) = st.map(|s| s.image_id.as_str()).filter(|i| !i.is_empty()) {
            line(out, "Image ID", id);
        }
        let ports: Vec<String> = c
            .ports
            .iter()
            .flatten()
            .map(|p| {
                format!(
                    "{}/{}",
                    p.container_port,
                    p.protocol.as_deref().unwrap_or("TCP")
                )
            })
            .collect();
        if !ports.is_empty() {
            line(out, "Port", &ports.join(", "));
        }
        if let Some(cmd) = &c.command {
            line(out, "Command", &cmd.join(" "));
        }
        state(out, "State", st.and_then(|s| s.state.as_ref()), style);
        if let Some(last) = st.and_then(|s| s.last_state.as_ref()) {
            if last.running.is_some() || last.waiting.is_some() || last.terminated.is_some() {
                state(out, "Last State", Some(last), style);
            }
        }
        let ready = if st.is_some_and(|s| s.ready) {
            "True"
        } else {
            "False"
        };
        line(out, "Ready", ready);
        line(
            out,
            "Restart Count",
            &st.map(|s| s.restart_count).unwrap_or(0).to_string(),
        );
        if let Some(r) = &c.resources {
            for (label, list) in [("Limits", &r.limits), ("Requests", &r.requests)] {
                if let Some(list) = list.as_ref().filter(|l| !l.is_empty()) {
                    let _ = writeln!(out, "    {label}:");
                    for (k, v) in list {
                        let _ = writeln!(out, "      {:<16}{}", format!("{k}:"), v.0);
                    }
                }
            }
        }
    }
}

/// The seconds since the epoch of an event's time field.
fn event_time(e: &Value, field: &str) -> Option<i64> {
    let s = e.get(field)?.as_str()?;
    s.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

/// kubectl's event age: `10s`, or `10s (x3 over 2m)` for a repeated one.
fn event_age(e: &Value, now_unix: i64) -> String {
    let last = event_time(e, "lastTimestamp");
    let first = event_time(e, "firstTimestamp").or(last);
    let count = e.get("count").and_then(Value::as_i64).unwrap_or(1);
    let Some(last) = last else {
        return "<unknown>".into();
    };
    let age = human_duration(now_unix - last);
    match first {
        Some(first) if count > 1 => {
            format!("{age} (x{count} over {})", human_duration(now_unix - first))
        }
        _ => age,
    }
}

/// The item of `list` (a v1 `PodList` as JSON) named `name` in
/// `namespace`.
pub fn find_pod<'a>(list: &'a Value, namespace: &str, name: &str) -> Option<&'a Value> {
    list.get("items")?.as_array()?.iter().find(|p| {
        let md = &p["metadata"];
        md["name"] == name && md["namespace"].as_str().unwrap_or("default") == namespace
    })
}

/// The describe text of `pod` with `events` (v1 Events, any order; those
/// not about this pod are skipped), at `now_unix`.
pub fn describe_pod(pod: &Pod, events: &[Value], now_unix: i64, style: Style) -> String {
    let mut out = String::new();
    let md = &pod.metadata;
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let line = |out: &mut String, k: &str, v: &str| {
        let _ = writeln!(out, "{:<18}{v}", format!("{k}:"));
    };
    line(&mut out, "Name", md.name.as_deref().unwrap_or(""));
    line(
        &mut out,
        "Namespace",
        md.namespace.as_deref().unwrap_or("default"),
    );
    if let Some(p) = spec.priority {
        line(&mut out, "Priority", &p.to_string());
    }
    let node = match (spec.node_name.as_deref(), status.host_ip.as_deref()) {
        (Some(n), Some(ip)) if !ip.is_empty() => format!("{n}/{ip}"),
        (Some(n), _) => n.to_string(),
        (None, _) => "<none>".into(),
    };
    line(&mut out, "Node", &node);
    line(&mut out, "Start Time", &time(status.start_time.as_ref()));
    pairs(&mut out, "Labels:", md.labels.as_ref());
    pairs(&mut out, "Annotations:", md.annotations.as_ref());
    let phase = status.phase.as_deref().unwrap_or("Unknown");
    let shown = match (md.deletion_timestamp.is_some(), status_tone(phase)) {
        (true, _) => style.paint("Terminating", Tone::Warn),
        (false, Some(t)) => style.paint(phase, t),
        (false, None) => phase.to_string(),
    };
    line(&mut out, "Status", &shown);
    if let Some(r) = status.reason.as_deref() {
        line(&mut out, "Reason", r);
    }
    if let Some(m) = status.message.as_deref() {
        line(&mut out, "Message", m);
    }
    let ip = status.pod_ip.as_deref().unwrap_or("");
    line(&mut out, "IP", if ip.is_empty() { "<none>" } else { ip });
    if let Some(ips) = status.pod_ips.as_ref().filter(|i| !i.is_empty()) {
        out.push_str("IPs:\n");
        for ip in ips {
            let _ = writeln!(out, "  IP:  {}", ip.ip);
        }
    }
    containers(
        &mut out,
        "Init Containers:",
        spec.init_containers.as_deref().unwrap_or(&[]),
        status.init_container_statuses.as_deref().unwrap_or(&[]),
        style,
    );
    containers(
        &mut out,
        "Containers:",
        &spec.containers,
        status.container_statuses.as_deref().unwrap_or(&[]),
        style,
    );
    let ephemeral: Vec<Container> = crate::pod::accessors::ephemeral_containers(pod)
        .iter()
        .map(crate::pod::accessors::ephemeral_as_container)
        .collect();
    containers(
        &mut out,
        "Ephemeral Containers:",
        &ephemeral,
        status
            .ephemeral_container_statuses
            .as_deref()
            .unwrap_or(&[]),
        style,
    );
    if let Some(conds) = status.conditions.as_ref().filter(|c| !c.is_empty()) {
        let _ = writeln!(out, "{}", style.paint("Conditions:", Tone::Bold));
        let mut rows = vec![vec!["Type".to_string(), "Status".to_string()]];
        rows.extend(
            conds
                .iter()
                .map(|c| vec![c.type_.clone(), c.status.clone()]),
        );
        for l in tabulate_in(&rows, style, Some(1)).lines() {
            let _ = writeln!(out, "  {l}");
        }
    }
    line(
        &mut out,
        "QoS Class",
        status.qos_class.as_deref().unwrap_or("<none>"),
    );
    events_section(&mut out, pod, events, now_unix, style);
    out
}

/// The `Events:` section: the pod's own events (by UID, else by name),
/// oldest first, as kubectl's table.
fn events_section(out: &mut String, pod: &Pod, events: &[Value], now_unix: i64, style: Style) {
    let md = &pod.metadata;
    let uid = md.uid.as_deref().unwrap_or("");
    let mut mine: Vec<&Value> = events
        .iter()
        .filter(|e| {
            let o = &e["involvedObject"];
            match o.get("uid").and_then(Value::as_str) {
                Some(u) if !uid.is_empty() => u == uid,
                _ => o["name"] == md.name.as_deref().unwrap_or("") && o["kind"] == "Pod",
            }
        })
        .collect();
    if mine.is_empty() {
        out.push_str("Events:           <none>\n");
        return;
    }
    mine.sort_by_key(|e| event_time(e, "lastTimestamp"));
    let _ = writeln!(out, "{}", style.paint("Events:", Tone::Bold));
    let mut rows: Vec<Vec<String>> = vec![
        ["Type", "Reason", "Age", "From", "Message"]
            .map(String::from)
            .to_vec(),
        ["----", "------", "----", "----", "-------"]
            .map(String::from)
            .to_vec(),
    ];
    for e in mine {
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        rows.push(vec![
            s("type"),
            s("reason"),
            event_age(e, now_unix),
            e["source"]["component"]
                .as_str()
                .unwrap_or("kubelet")
                .to_string(),
            s("message").replace('\n', " "),
        ]);
    }
    let narrower = Style {
        width: style.width.saturating_sub(2),
        ..style
    };
    for l in tabulate_in(&rows, narrower, None).lines() {
        let l = match l.strip_prefix("Warning") {
            Some(rest) => format!("{}{rest}", style.paint("Warning", Tone::Warn)),
            None => l.to_string(),
        };
        let _ = writeln!(out, "  {l}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: i64 = 1_796_119_495; // Tue, 01 Dec 2026 10:04:55 +0000

    #[test]
    fn times_print_like_kubectls_rfc1123z() {
        assert_eq!(rfc1123z(NOW), "Tue, 01 Dec 2026 10:04:55 +0000");
        assert_eq!(rfc1123z(0), "Thu, 01 Jan 1970 00:00:00 +0000");
        assert_eq!(rfc1123z(951_782_400), "Tue, 29 Feb 2000 00:00:00 +0000");
    }

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "edge", "uid": "u1", "labels": {"app": "web", "tier": "a"}},
            "spec": {
                "nodeName": "board-1",
                "containers": [
                    {"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
                     "resources": {"limits": {"memory": "64Mi"}}},
                    {"name": "pull", "image": "nope:1"},
                ],
            },
            "status": {
                "phase": "Running",
                "hostIP": "192.168.1.5",
                "podIP": "10.88.0.7",
                "podIPs": [{"ip": "10.88.0.7"}],
                "qosClass": "Burstable",
                "startTime": "2026-12-01T10:00:00Z",
                "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [
                    {"name": "app", "image": "nginx:1.27", "imageID": "sha256:ab", "ready": true, "restartCount": 2,
                     "containerID": "containerd://c1",
                     "state": {"running": {"startedAt": "2026-12-01T10:03:00Z"}},
                     "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                        "startedAt": "2026-12-01T10:01:00Z", "finishedAt": "2026-12-01T10:02:59Z"}}},
                    {"name": "pull", "image": "nope:1", "imageID": "", "ready": false, "restartCount": 0,
                     "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"nope:1\""}}},
                ],
            },
        }))
        .unwrap()
    }

    #[test]
    fn describe_lists_ephemeral_containers_after_the_containers() {
        let mut p = pod();
        p.spec.as_mut().unwrap().ephemeral_containers = Some(vec![serde_json::from_value(
            json!({"name": "debugger", "image": "busybox"}),
        )
        .unwrap()]);
        p.status.as_mut().unwrap().ephemeral_container_statuses =
            Some(vec![serde_json::from_value(json!({
                "name": "debugger", "image": "busybox", "imageID": "", "ready": false,
                "restartCount": 0, "containerID": "containerd://d1",
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}
            }))
            .unwrap()]);
        let text = describe_pod(&p, &[], NOW, Style::PLAIN);
        let at = text
            .find("Ephemeral Containers:\n  debugger:")
            .expect(&text);
        assert!(
            at > text.find("Containers:\n  app:").expect(&text),
            "{text}"
        );
        let rest = &text[at..];
        assert!(rest.contains("State:            Terminated"), "{text}");
        assert!(rest.contains("Exit Code:      0"), "{text}");
    }

    #[test]
    fn describe_shows_status_containers_conditions_and_this_pods_events() {
        let events = vec![
            json!({"involvedObject": {"kind": "Pod", "name": "web", "uid": "u1", "fieldPath": "spec.containers{pull}"},
                   "type": "Warning", "reason": "Failed", "message": "Error: ImagePullBackOff", "count": 3,
                   "firstTimestamp": "2026-12-01T10:01:55Z", "lastTimestamp": "2026-12-01T10:04:45Z",
                   "source": {"component": "kubelet"}}),
            json!({"involvedObject": {"kind": "Pod", "name": "web", "uid": "u1"},
                   "type": "Normal", "reason": "Pulled", "message": "Container image \"nginx:1.27\" already present on machine",
                   "count": 1, "firstTimestamp": "2026-12-01T10:00:05Z", "lastTimestamp": "2026-12-01T10:00:05Z"}),
            json!({"involvedObject": {"kind": "Pod", "name": "other", "uid": "u2"},
                   "type": "Normal", "reason": "Started", "message": "not mine",
                   "lastTimestamp": "2026-12-01T10:00:05Z"}),
        ];
        let text = describe_pod(&pod(), &events, NOW, Style::PLAIN);
        let want = "\
Name:             web
Namespace:        edge
Node:             board-1/192.168.1.5
Start Time:       Tue, 01 Dec 2026 10:00:00 +0000
Labels:           app=web
                  tier=a
Annotations:      <none>
Status:           Running
IP:               10.88.0.7
IPs:
  IP:  10.88.0.7
Containers:
  app:
    Container ID:     containerd://c1
    Image:            nginx:1.27
    Image ID:         sha256:ab
    Port:             80/TCP
    State:            Running
      Started:        Tue, 01 Dec 2026 10:03:00 +0000
    Last State:       Terminated
      Reason:         OOMKilled
      Exit Code:      137
      Started:        Tue, 01 Dec 2026 10:01:00 +0000
      Finished:       Tue, 01 Dec 2026 10:02:59 +0000
    Ready:            True
    Restart Count:    2
    Limits:
      memory:         64Mi
  pull:
    Image:            nope:1
    State:            Waiting
      Reason:         ImagePullBackOff
      Message:        Back-off pulling image \"nope:1\"
    Ready:            False
    Restart Count:    0
Conditions:
  Type           Status
  Ready          False
  PodScheduled   True
QoS Class:        Burstable
Events:
  Type      Reason   Age                From      Message
  ----      ------   ----               ----      -------
  Normal    Pulled   4m50s              kubelet   Container image \"nginx:1.27\" already present on machine
  Warning   Failed   10s (x3 over 3m)   kubelet   Error: ImagePullBackOff
";
        assert_eq!(text, want, "{text}");
        assert!(!text.contains("not mine"));
    }

    #[test]
    fn a_pod_without_events_or_status_still_describes() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "bare"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }))
        .unwrap();
        let text = describe_pod(&p, &[], NOW, Style::PLAIN);
        assert!(text.contains("Status:           Unknown\n"), "{text}");
        assert!(text.contains("    State:            <none>\n"), "{text}");
        assert!(text.ends_with("Events:           <none>\n"), "{text}");
    }

    #[test]
    fn colours_mark_states_and_warnings_on_a_terminal() {
        let style = Style {
            colour: true,
            width: 200,
        };
        let text = describe_pod(&pod(), &[], NOW, style);
        assert!(text.contains("\x1b[32mRunning\x1b[0m"), "{text}");
        assert!(text.contains("\x1b[33mWaiting\x1b[0m"), "{text}");
        assert!(text.contains("\x1b[31mTerminated\x1b[0m"), "{text}");
    }
}
