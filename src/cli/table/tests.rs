//! Tests of the node and pod tables: columns, conditions, widths, ages.

use super::*;
use serde_json::json;

#[test]
fn the_node_table_says_whether_the_api_server_answers_and_since_when() {
    let line = |api: serde_json::Value| {
        let t = node_table(&json!({"name": "edge-1", "apiServer": api}), Style::PLAIN);
        t.lines().nth(2).unwrap_or_default().to_string()
    };
    assert_eq!(
        line(
            json!({"server": "https://k:6443", "state": "reachable", "secondsSinceLastContact": 3})
        ),
        "API server: https://k:6443 reachable (last contact 3s ago)"
    );
    assert_eq!(
        line(json!({"server": "https://k:6443", "state": "unreachable",
                    "secondsUnreachable": 400, "failedAttempts": 14, "secondsSinceLastContact": 410})),
        "API server: https://k:6443 unreachable (for 6m40s, 14 failed attempts; last contact 6m50s ago)"
    );
    assert_eq!(
        line(
            json!({"server": "https://k:6443", "state": "not contacted yet",
                    "lastContact": null, "secondsSinceLastContact": null})
        ),
        "API server: https://k:6443 not contacted yet"
    );
    let standalone = node_table(&json!({"name": "edge-1"}), Style::PLAIN);
    assert!(!standalone.contains("API server"), "{standalone}");
    assert!(!standalone.contains("Unschedulable"), "{standalone}");
}

#[test]
fn the_node_table_says_whether_the_node_is_cordoned() {
    let line = |unschedulable: serde_json::Value| {
        let api = json!({"server": "https://k:6443", "state": "reachable"});
        let t = node_table(
            &json!({"name": "edge-1", "apiServer": api, "unschedulable": unschedulable}),
            Style::PLAIN,
        );
        t.lines().nth(3).unwrap_or_default().to_string()
    };
    assert_eq!(
        line(json!(true)),
        "Unschedulable: true (cordoned: no new pods are scheduled here; `kubectl uncordon` lifts it)"
    );
    assert_eq!(line(json!(false)), "Unschedulable: false");
    assert_eq!(
        line(serde_json::Value::Null),
        "Unschedulable: unknown (the Node not read from the API server yet)"
    );
}

#[test]
fn the_node_table_shows_conditions_signals_and_thresholds() {
    let node = json!({
        "conditions": {"MemoryPressure": true, "DiskPressure": false, "PIDPressure": false},
        "signals": {
            "memory.available": {"available": 52428800, "capacity": 1073741824},
            "nodefs.inodesFree": {"available": 1000, "capacity": 5000},
        },
        "thresholds": [
            {"signal": "memory.available", "value": "104857600", "hard": true, "gracePeriodSeconds": 0, "met": true},
            {"signal": "memory.available", "value": "200Mi", "hard": false, "gracePeriodSeconds": 90, "met": false},
            {"signal": "pid.available", "value": "10%", "hard": true, "gracePeriodSeconds": 0, "met": false},
        ],
    });
    let t = node_table(&node, Style::PLAIN);
    let want = "\
CONDITION        STATUS
DiskPressure     False
MemoryPressure   True
PIDPressure      False

SIGNAL              AVAILABLE   CAPACITY   THRESHOLD                 MET
memory.available    50Mi        1024Mi     <100Mi, <200Mi soft 90s   yes
nodefs.inodesFree   1000        5000       <none>                    no
pid.available       -           -          <10%                      no
";
    assert_eq!(t, want, "{t}");
}

#[test]
fn the_node_table_starts_with_capacity_and_allocatable() {
    let node = json!({
        "name": "edge-1",
        "capacity": {"cpu": "4", "memory": "1048576Ki", "pods": "110"},
        "allocatable": {"cpu": "3500m", "memory": "838860Ki", "pods": "110"},
    });
    let t = node_table(&node, Style::PLAIN);
    assert!(
        t.starts_with(
            "Name: edge-1\n\n\
RESOURCE   CAPACITY    ALLOCATABLE
cpu        4           3500m
memory     1048576Ki   838860Ki
pods       110         110
"
        ),
        "{t}"
    );
}

#[test]
fn a_table_wider_than_the_terminal_cuts_its_widest_column() {
    let rows = vec![
        vec!["NAME".to_string(), "MESSAGE".to_string()],
        vec!["web".to_string(), "x".repeat(40)],
    ];
    let style = Style {
        colour: false,
        width: 30,
    };
    let t = tabulate_in(&rows, style, None);
    for line in t.lines() {
        assert!(line.chars().count() <= 30, "{line:?}");
    }
    assert!(t.ends_with("…\n"), "{t}");
    let painted = Style {
        colour: true,
        width: 80,
    };
    let rows = vec![
        vec!["NAME".to_string(), "STATUS".to_string()],
        vec!["web".to_string(), "Running".to_string()],
    ];
    assert_eq!(
        tabulate_in(&rows, painted, Some(1)),
        "NAME   STATUS\nweb    \x1b[32mRunning\x1b[0m\n"
    );
}

const NOW: i64 = 1_700_000_000;

fn pod(v: serde_json::Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

fn running(name: &str, ready: bool, restarts: i32) -> serde_json::Value {
    json!({"name": name, "image": "i", "imageID": "", "ready": ready, "restartCount": restarts,
           "state": {"running": {"startedAt": "2023-11-14T22:00:00Z"}}})
}

fn waiting(name: &str, reason: &str, restarts: i32) -> serde_json::Value {
    json!({"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": restarts,
           "state": {"waiting": {"reason": reason}}})
}

fn terminated(name: &str, code: i32, reason: &str) -> serde_json::Value {
    json!({"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": 0,
           "state": {"terminated": {"exitCode": code, "reason": reason}}})
}

fn two_container_pod(phase: &str, statuses: Vec<serde_json::Value>) -> Pod {
    pod(json!({
        "metadata": {"name": "web", "namespace": "default", "creationTimestamp": "2023-11-14T22:00:00Z"},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": phase, "containerStatuses": statuses,
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))
}

fn init_pod(inits: Vec<serde_json::Value>, app: Vec<serde_json::Value>) -> Pod {
    pod(json!({
        "metadata": {"name": "db"},
        "spec": {"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]},
        "status": {"phase": "Pending", "initContainerStatuses": inits, "containerStatuses": app}
    }))
}

#[test]
fn the_status_column_is_running_with_ready_counts() {
    let p = two_container_pod(
        "Running",
        vec![running("a", true, 0), running("b", false, 0)],
    );
    assert_eq!(
        pod_row(&p, NOW),
        ("1/2".into(), "Running".into(), "0".into())
    );
}

#[test]
fn the_status_column_shows_a_waiting_reason_and_restarts() {
    let p = two_container_pod(
        "Running",
        vec![waiting("a", "CrashLoopBackOff", 5), running("b", true, 1)],
    );
    let (ready, status, restarts) = pod_row(&p, NOW);
    assert_eq!(
        (ready.as_str(), status.as_str(), restarts.as_str()),
        ("1/2", "CrashLoopBackOff", "6")
    );
    let p = two_container_pod(
        "Pending",
        vec![
            waiting("a", "ErrImagePull", 0),
            waiting("b", "ContainerCreating", 0),
        ],
    );
    assert_eq!(pod_row(&p, NOW).1, "ErrImagePull");
    let p = two_container_pod(
        "Pending",
        vec![
            waiting("a", "ContainerCreating", 0),
            waiting("b", "ContainerCreating", 0),
        ],
    );
    assert_eq!(pod_row(&p, NOW).1, "ContainerCreating");
}

#[test]
fn the_restarts_column_says_how_long_ago_the_last_restart_was() {
    let mut a = running("a", true, 2);
    a["lastState"] = json!({"terminated": {"exitCode": 1, "finishedAt": "2023-11-14T22:08:20Z"}});
    let p = two_container_pod("Running", vec![a, running("b", true, 0)]);
    // 22:13:20 - 22:08:20 = 5m
    assert_eq!(pod_row(&p, NOW).2, "2 (5m ago)");
}

#[test]
fn the_status_column_shows_completed_and_error_for_finished_pods() {
    let p = two_container_pod(
        "Succeeded",
        vec![
            terminated("a", 0, "Completed"),
            terminated("b", 0, "Completed"),
        ],
    );
    assert_eq!(pod_row(&p, NOW).1, "Completed");
    let p = two_container_pod(
        "Failed",
        vec![terminated("a", 0, "Completed"), terminated("b", 1, "Error")],
    );
    assert_eq!(pod_row(&p, NOW).1, "Completed"); // kubectl reports the first container's reason
    let p = two_container_pod(
        "Failed",
        vec![terminated("a", 1, "Error"), terminated("b", 0, "Completed")],
    );
    assert_eq!(pod_row(&p, NOW).1, "Error");
    let p = two_container_pod(
        "Failed",
        vec![terminated("a", 137, ""), terminated("b", 0, "Completed")],
    );
    assert_eq!(pod_row(&p, NOW).1, "ExitCode:137");
}

#[test]
fn a_completed_container_next_to_a_running_one_shows_running() {
    let p = two_container_pod(
        "Running",
        vec![terminated("a", 0, "Completed"), running("b", true, 0)],
    );
    assert_eq!(pod_row(&p, NOW).1, "Running");
}

#[test]
fn the_status_column_counts_init_containers() {
    let p = init_pod(
        vec![terminated("i1", 0, "Completed"), running("i2", false, 0)],
        vec![waiting("a", "PodInitializing", 0)],
    );
    assert_eq!(
        pod_row(&p, NOW),
        ("0/1".into(), "Init:1/2".into(), "0".into())
    );
    let p = init_pod(
        vec![
            waiting("i1", "PodInitializing", 0),
            waiting("i2", "PodInitializing", 0),
        ],
        vec![waiting("a", "PodInitializing", 0)],
    );
    assert_eq!(pod_row(&p, NOW).1, "Init:0/2");
    let p = init_pod(
        vec![
            waiting("i1", "CrashLoopBackOff", 3),
            waiting("i2", "PodInitializing", 0),
        ],
        vec![waiting("a", "PodInitializing", 0)],
    );
    assert_eq!(
        pod_row(&p, NOW),
        ("0/1".into(), "Init:CrashLoopBackOff".into(), "3".into())
    );
    let p = init_pod(
        vec![terminated("i1", 2, "Error")],
        vec![waiting("a", "PodInitializing", 0)],
    );
    assert_eq!(pod_row(&p, NOW).1, "Init:Error");
    let p = init_pod(
        vec![
            terminated("i1", 0, "Completed"),
            terminated("i2", 0, "Completed"),
        ],
        vec![waiting("a", "PodInitializing", 0)],
    );
    assert_eq!(pod_row(&p, NOW).1, "PodInitializing");
}

#[test]
fn a_deleted_pod_shows_terminating_unless_it_finished() {
    let mut p = two_container_pod(
        "Running",
        vec![running("a", true, 0), running("b", true, 0)],
    );
    p.metadata.deletion_timestamp = Some(crate::status::time_from_unix(NOW));
    assert_eq!(pod_row(&p, NOW).1, "Terminating");
    p.status.as_mut().unwrap().phase = Some("Succeeded".into());
    p.status.as_mut().unwrap().container_statuses = Some(vec![serde_json::from_value(terminated(
        "a",
        0,
        "Completed",
    ))
    .unwrap()]);
    assert_eq!(pod_row(&p, NOW).1, "Completed");
}

#[test]
fn ages_print_like_kubectl() {
    assert_eq!(human_duration(-5), "<invalid>");
    assert_eq!(human_duration(-1), "0s");
    assert_eq!(human_duration(45), "45s");
    assert_eq!(human_duration(119), "119s");
    assert_eq!(human_duration(200), "3m20s");
    assert_eq!(human_duration(300), "5m");
    assert_eq!(human_duration(15 * 60 + 10), "15m");
    assert_eq!(human_duration(179 * 60), "179m");
    assert_eq!(human_duration(3 * 3600), "3h");
    assert_eq!(human_duration(5 * 3600 + 30 * 60), "5h30m");
    assert_eq!(human_duration(20 * 3600), "20h");
    assert_eq!(human_duration(2 * 86_400), "2d");
    assert_eq!(human_duration(3 * 86_400 + 4 * 3600), "3d4h");
    assert_eq!(human_duration(120 * 86_400), "120d");
    assert_eq!(human_duration((2 * 365 + 30) * 86_400), "2y30d");
    assert_eq!(human_duration(9 * 365 * 86_400), "9y");
}

#[test]
fn the_table_aligns_columns_and_adds_ip_and_node_when_wide() {
    let mut p = two_container_pod(
        "Running",
        vec![running("a", true, 0), running("b", true, 0)],
    );
    p.status.as_mut().unwrap().pod_ip = Some("10.88.0.5".into());
    p.spec.as_mut().unwrap().node_name = Some("edge-1".into());
    let list = json!({"apiVersion": "v1", "kind": "PodList", "items": [p]});
    assert_eq!(
        pods_table(&list, NOW, PodColumns::default(), Style::PLAIN),
        "NAME   READY   STATUS    RESTARTS   AGE\nweb    2/2     Running   0          13m\n"
    );
    assert_eq!(
        pods_table(&list, NOW, PodColumns { wide: true, namespace: false }, Style::PLAIN),
        "NAME   READY   STATUS    RESTARTS   AGE   IP          NODE\nweb    2/2     Running   0          13m   10.88.0.5   edge-1\n"
    );
    assert_eq!(
        pods_table(
            &json!({"items": []}),
            NOW,
            PodColumns::default(),
            Style::PLAIN
        ),
        "No resources found.\n"
    );
    assert_eq!(
        pods_table(&list, NOW, PodColumns { wide: false, namespace: true }, Style::PLAIN),
        "NAMESPACE   NAME   READY   STATUS    RESTARTS   AGE\ndefault     web    2/2     Running   0          13m\n"
    );
}
