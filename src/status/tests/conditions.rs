//! Status tests: conditions: a refused pod, reasons and messages, the pod's
//! generation, transition times.

use super::*;

#[test]
fn a_refused_pod_is_failed_with_kubelets_reason_and_message() {
    let st = refused_status(
        "AppArmor",
        "Cannot enforce AppArmor: AppArmor is not enabled on the host",
        "BestEffort",
    );
    assert_eq!(st.phase.as_deref(), Some(FAILED));
    assert_eq!(st.reason.as_deref(), Some("AppArmor"));
    assert_eq!(
        st.message.as_deref(),
        Some("Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host")
    );
}

#[test]
fn a_succeeded_pod_without_init_containers_is_initialized_with_reason_pod_completed() {
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
    let init = cond(&s, "Initialized");
    assert_eq!(
        (init.status.as_str(), init.reason.as_deref()),
        ("True", Some("PodCompleted"))
    );
    assert_eq!(init.message, None);
}

#[test]
fn true_conditions_have_neither_reason_nor_message() {
    let p = with_init();
    let o = observed(
        true,
        vec![
            container("i1", 0, State::Exited, 0),
            container("i2", 0, State::Exited, 0),
            container("a", 0, State::Running, 0),
        ],
    );
    let s = Facts::new().status(&p, &o);
    for t in [
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodReadyToStartContainers",
    ] {
        let c = cond(&s, t);
        assert_eq!(c.status, "True", "{t}");
        assert_eq!(
            (c.reason.as_deref(), c.message.as_deref()),
            (None, None),
            "{t}"
        );
    }
}

#[test]
fn the_status_and_every_condition_carry_the_pods_generation() {
    let mut p = simple("Always");
    p.metadata.generation = Some(3);
    let o = observed(true, vec![container("a", 0, State::Running, 0)]);
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.observed_generation, Some(3));
    for c in s.conditions.as_ref().unwrap() {
        assert_eq!(c.observed_generation, Some(3), "{}", c.type_);
    }
    p.metadata.generation = None;
    let s = Facts::new().status(&p, &o);
    assert_eq!(s.observed_generation, None);
    assert!(s
        .conditions
        .unwrap()
        .iter()
        .all(|c| c.observed_generation.is_none()));
}

fn at(s: &PodStatus, t: &str) -> Option<i64> {
    cond(s, t)
        .last_transition_time
        .as_ref()
        .map(|t| t.0.as_second())
}

#[test]
fn a_conditions_transition_time_is_kept_while_its_status_stays_and_moves_when_it_changes() {
    let p = simple("Always");
    let unready = observed(true, vec![container("a", 0, State::Running, 0)]);
    let mut facts = Facts::new();
    facts.readiness.insert("a".into(), false);
    let mut t = Transitions::default();

    let mut s = facts.status(&p, &unready);
    t.stamp(s.conditions.as_mut().unwrap(), 100);
    assert_eq!(at(&s, "Ready"), Some(100));
    assert_eq!(at(&s, "Initialized"), Some(100));

    // Unchanged at 130: the times stay.
    let mut s = facts.status(&p, &unready);
    t.stamp(s.conditions.as_mut().unwrap(), 130);
    assert_eq!(
        (at(&s, "Ready"), at(&s, "Initialized")),
        (Some(100), Some(100))
    );

    // Ready at 160: Ready and ContainersReady move, Initialized stays.
    facts.readiness.insert("a".into(), true);
    facts.readiness.insert("b".into(), true);
    let ready = observed(
        true,
        vec![
            container("a", 0, State::Running, 0),
            container("b", 0, State::Running, 0),
        ],
    );
    let mut s = facts.status(&p, &ready);
    t.stamp(s.conditions.as_mut().unwrap(), 160);
    assert_eq!(cond(&s, "Ready").status, "True");
    assert_eq!(at(&s, "Ready"), Some(160));
    assert_eq!(at(&s, "ContainersReady"), Some(160));
    assert_eq!(at(&s, "Initialized"), Some(100));
    assert_eq!(at(&s, "PodScheduled"), None, "the scheduler's time stands");
}

#[test]
fn a_condition_that_comes_with_its_own_time_keeps_it() {
    let mut conditions = vec![PodCondition {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        last_transition_time: Some(time_from_unix(50)),
        ..Default::default()
    }];
    let mut t = Transitions::default();
    t.stamp(&mut conditions, 200);
    assert_eq!(conditions[0].last_transition_time, Some(time_from_unix(50)));
    conditions[0].last_transition_time = None;
    t.stamp(&mut conditions, 300);
    assert_eq!(conditions[0].last_transition_time, Some(time_from_unix(50)));
}
