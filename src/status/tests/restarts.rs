//! Status tests: restarts: a crash loop's back-off, the previous attempt as
//! the last state, the restart count.

use super::*;

#[test]
fn a_crash_loop_shows_waiting_crash_loop_back_off_and_the_last_exit_code() {
    let p = simple("Always");
    let mut dead = container("a", 3, State::Exited, 2);
    dead.message = "boom".into();
    let o = observed(
        true,
        vec![
            dead,
            container("a", 2, State::Exited, 1),
            container("b", 0, State::Running, 0),
        ],
    );
    let msg = "back-off 20s restarting failed container=a pod=p_default(u1)";
    let s = Facts::new()
        .wait("a", "CrashLoopBackOff", msg)
        .status(&p, &o);
    let a = cs(&s, "a");
    assert_eq!(waiting_reason(a), "CrashLoopBackOff");
    assert_eq!(
        a.state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .message
            .as_deref(),
        Some(msg)
    );
    let last = a.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(last.exit_code, 2);
    assert_eq!(last.reason.as_deref(), Some("Error"));
    assert_eq!(last.message.as_deref(), Some("boom"));
    assert_eq!(last.container_id.as_deref(), Some("containerd://a-3"));
    assert_eq!(last.finished_at.as_ref().unwrap().0.as_second(), 105);
    assert_eq!(a.restart_count, 3);
    assert!(!a.ready);
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(
        cond(&s, "Ready").message.as_deref(),
        Some("containers with unready status: [a]")
    );
}

#[test]
fn an_exited_container_about_to_restart_shows_terminated_and_the_previous_attempt() {
    let p = simple("Always");
    let o = observed(
        true,
        vec![
            container("a", 1, State::Exited, 1),
            container("a", 0, State::Exited, 7),
        ],
    );
    let s = Facts::new().status(&p, &o);
    let a = cs(&s, "a");
    assert_eq!(
        a.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        1
    );
    assert_eq!(
        a.last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        7
    );
}

#[test]
fn a_running_container_whose_previous_attempt_was_removed_has_no_last_state() {
    let p = simple("Always");
    let o = observed(
        true,
        vec![
            container("a", 4, State::Running, 0),
            container("b", 0, State::Running, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    let a = cs(&s, "a");
    assert!(a.last_state.is_none());
    assert_eq!(a.restart_count, 4);
}

#[test]
fn restart_count_is_the_latest_attempt_number() {
    let p = simple("Always");
    let o = observed(
        true,
        vec![
            container("a", 2, State::Running, 0),
            container("a", 1, State::Exited, 137),
            container("b", 0, State::Running, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    assert_eq!(cs(&s, "a").restart_count, 2);
    assert_eq!(cs(&s, "b").restart_count, 0);
    assert_eq!(
        cs(&s, "a")
            .last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        137
    );
}
