//! Status tests: init containers, and the waiting reasons of containers not
//! started yet.

use super::*;

#[test]
fn a_failed_init_container_under_never_fails_the_pod() {
    let mut p = with_init();
    p.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    let o = observed(false, vec![container("i1", 0, State::Exited, 1)]);
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    let init = cond(&s, "Initialized");
    assert_eq!(init.status, "False");
    assert_eq!(
        init.message.as_deref(),
        Some("containers with incomplete status: [i1 i2]")
    );
}

#[test]
fn a_pending_init_container_keeps_app_containers_pod_initializing() {
    let p = with_init();
    let o = observed(
        true,
        vec![
            container("i1", 0, State::Exited, 0),
            container("i2", 0, State::Running, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    let inits = s.init_container_statuses.as_ref().unwrap();
    assert_eq!(
        inits.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["i1", "i2"]
    );
    assert!(inits[0].ready);
    assert!(inits[1].state.as_ref().unwrap().running.is_some());
    assert_eq!(waiting_reason(cs(&s, "a")), "PodInitializing");
    let init = cond(&s, "Initialized");
    assert_eq!(init.status, "False");
    assert_eq!(init.reason.as_deref(), Some("ContainersNotInitialized"));
    assert_eq!(
        init.message.as_deref(),
        Some("containers with incomplete status: [i2]")
    );
}

#[test]
fn init_containers_not_yet_started_wait_in_pod_initializing() {
    let p = with_init();
    let o = ObservedPod::default();
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    assert_eq!(waiting_reason(cs(&s, "i1")), "PodInitializing");
    assert_eq!(waiting_reason(cs(&s, "a")), "PodInitializing");
    assert!(s.pod_ip.is_none());
}

#[test]
fn an_initialized_pod_creating_app_containers_shows_container_creating() {
    let p = with_init();
    let o = observed(
        true,
        vec![
            container("i1", 0, State::Exited, 0),
            container("i2", 0, State::Exited, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    assert_eq!(waiting_reason(cs(&s, "a")), "ContainerCreating");
    assert_eq!(cond(&s, "Initialized").status, "True");
    assert_eq!(s.phase.as_deref(), Some("Pending"));
}

#[test]
fn an_image_pull_error_shows_err_image_pull() {
    let p = simple("Always");
    let o = observed(true, vec![container("b", 0, State::Running, 0)]);
    let s = Facts::new()
        .wait("a", "ErrImagePull", "failed to pull image \"busybox\"")
        .status(&p, &o);
    let a = cs(&s, "a");
    assert_eq!(waiting_reason(a), "ErrImagePull");
    assert!(a.container_id.is_none());
    assert_eq!(a.image_id, "");
    assert_eq!(s.phase.as_deref(), Some("Pending"));
}

#[test]
fn a_new_pod_without_init_containers_shows_container_creating() {
    let p = simple("Always");
    let s = Facts::new().status(&p, &ObservedPod::default());
    assert_eq!(waiting_reason(cs(&s, "a")), "ContainerCreating");
    assert!(s.init_container_statuses.is_none());
}
