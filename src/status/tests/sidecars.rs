//! Status tests: sidecars (init containers with restartPolicy Always):
//! initialization, readiness, back-off.

use super::*;

fn with_sidecar() -> Pod {
    pod("metadata: {name: p, uid: u1}\nspec:\n  initContainers:\n  - {name: log, image: busybox, restartPolicy: Always, startupProbe: {exec: {command: [\"true\"]}}}\n  containers:\n  - {name: a, image: busybox}\n")
}

#[test]
fn a_sidecar_not_yet_started_keeps_the_pod_pending_and_not_initialized() {
    let p = with_sidecar();
    let obs = observed(true, vec![container("log", 0, State::Running, 0)]);
    let mut f = Facts::new();
    f.started.insert("log".into(), false);
    let st = f.status(&p, &obs);
    assert_eq!(st.phase.as_deref(), Some(PENDING));
    let init = cond(&st, "Initialized");
    assert_eq!(init.status, "False");
    assert_eq!(
        init.message.as_deref(),
        Some("containers with incomplete status: [log]")
    );
    let log = &st.init_container_statuses.as_ref().unwrap()[0];
    assert_eq!((log.started, log.ready), (Some(false), false));
}

#[test]
fn a_started_sidecar_initializes_the_pod_and_counts_for_readiness() {
    let p = with_sidecar();
    let obs = observed(
        true,
        vec![
            container("log", 0, State::Running, 0),
            container("a", 0, State::Running, 0),
        ],
    );
    let mut f = Facts::new();
    f.started.insert("log".into(), true);
    f.readiness.insert("log".into(), false);
    let st = f.status(&p, &obs);
    assert_eq!(st.phase.as_deref(), Some(RUNNING));
    assert_eq!(cond(&st, "Initialized").status, "True");
    let ready = cond(&st, "ContainersReady");
    assert_eq!(ready.status, "False");
    assert_eq!(
        ready.message.as_deref(),
        Some("containers with unready status: [log]")
    );
    let log = &st.init_container_statuses.as_ref().unwrap()[0];
    assert_eq!((log.started, log.ready), (Some(true), false));
    f.readiness.insert("log".into(), true);
    assert_eq!(cond(&f.status(&p, &obs), "Ready").status, "True");
}

#[test]
fn a_restarting_sidecar_shows_its_back_off_and_keeps_the_pod_running() {
    let p = with_sidecar();
    let obs = observed(
        true,
        vec![
            container("log", 1, State::Exited, 2),
            container("a", 0, State::Running, 0),
        ],
    );
    let f = Facts::new().wait("log", "CrashLoopBackOff", "back-off 10s");
    let st = f.status(&p, &obs);
    assert_eq!(st.phase.as_deref(), Some(RUNNING));
    assert_eq!(cond(&st, "Initialized").status, "True");
    let log = &st.init_container_statuses.as_ref().unwrap()[0];
    let w = log.state.as_ref().unwrap().waiting.as_ref().unwrap();
    assert_eq!(w.reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(log.restart_count, 1);
}
