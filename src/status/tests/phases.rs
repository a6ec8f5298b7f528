//! Status tests: the phase of pods whose containers completed or failed,
//! per restartPolicy.

use super::*;

#[test]
fn a_completed_never_pod_succeeded() {
    let p = simple("Never");
    let o = observed(
        false,
        vec![
            container("a", 0, State::Exited, 0),
            container("b", 0, State::Exited, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    let a = cs(&s, "a");
    assert_eq!(
        a.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("Completed")
    );
    assert_eq!(cond(&s, "Ready").reason.as_deref(), Some("PodCompleted"));
    assert_eq!(cond(&s, "PodReadyToStartContainers").status, "False");
    assert!(s.pod_ip.is_none());
}

#[test]
fn a_completed_on_failure_pod_succeeded() {
    let p = simple("OnFailure");
    let o = observed(
        false,
        vec![
            container("a", 0, State::Exited, 0),
            container("b", 1, State::Exited, 0),
        ],
    );
    assert_eq!(
        Facts::new().status(&p, &o).phase.as_deref(),
        Some("Succeeded")
    );
}

#[test]
fn a_failed_never_pod_failed() {
    let p = simple("Never");
    let mut oom = container("b", 0, State::Exited, 137);
    oom.reason = "OOMKilled".into();
    let o = observed(false, vec![container("a", 0, State::Exited, 0), oom]);
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    let b = cs(&s, "b");
    assert_eq!(
        b.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("OOMKilled")
    );
    assert_eq!(
        cond(&s, "ContainersReady").reason.as_deref(),
        Some("PodFailed")
    );
}

#[test]
fn an_all_terminated_always_pod_is_running_while_it_restarts() {
    let p = simple("Always");
    let o = observed(
        true,
        vec![
            container("a", 0, State::Exited, 0),
            container("b", 0, State::Exited, 1),
        ],
    );
    assert_eq!(
        Facts::new().status(&p, &o).phase.as_deref(),
        Some("Running")
    );
}
