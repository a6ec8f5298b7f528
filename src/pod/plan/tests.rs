//! Unit tests of `pod::plan`: sandbox, init containers, sidecars, restarts,
//! back-off, pruning, the hash upgrade and the termination order.

use super::*;
use crate::pod::ObservedSandbox;

fn pod(yaml: &str) -> Pod {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn two_containers(policy: &str) -> Pod {
    pod(&format!(
            "metadata: {{name: p, uid: u1}}\nspec:\n  restartPolicy: {policy}\n  containers:\n  - {{name: a, image: busybox}}\n  - {{name: b, image: busybox}}\n"
        ))
}

fn with_init() -> Pod {
    pod("metadata: {name: p, uid: u1}\nspec:\n  initContainers:\n  - {name: i1, image: busybox}\n  - {name: i2, image: busybox}\n  containers:\n  - {name: a, image: busybox}\n")
}

fn sandbox(attempt: u32, ready: bool) -> ObservedSandbox {
    ObservedSandbox {
        id: format!("s{attempt}"),
        attempt,
        ready,
        created_at: attempt as i64,
        ..Default::default()
    }
}

fn container(name: &str, attempt: u32, state: State, exit_code: i32) -> ObservedContainer {
    ObservedContainer {
        id: format!("{name}-{attempt}"),
        sandbox_id: "s0".into(),
        name: name.into(),
        attempt,
        state,
        exit_code,
        finished_at: 1_000_000_000,
        ..Default::default()
    }
}

struct Fixture {
    backoff: Backoff,
    health: Health,
    now: Instant,
    hashes: HashMap<String, String>,
    legacy: HashMap<String, String>,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            backoff: Backoff::default(),
            health: Health::default(),
            now: Instant::now(),
            hashes: HashMap::new(),
            legacy: HashMap::new(),
        }
    }
    fn plan(&self, pod: &Pod, observed: &ObservedPod) -> Vec<Action> {
        let ctx = Context {
            backoff: &self.backoff,
            health: &self.health,
            now: self.now,
            now_unix_nanos: 1_000_000_000,
            hashes: &self.hashes,
            legacy_hashes: &self.legacy,
        };
        plan(pod, observed, &ctx)
    }
}

fn start(name: &str, init: bool, attempt: u32) -> Action {
    Action::StartContainer {
        name: name.into(),
        init,
        attempt,
        restart: attempt > 0,
    }
}

#[test]
fn a_new_pod_gets_a_sandbox_and_all_its_containers() {
    let f = Fixture::new();
    let actions = f.plan(&two_containers("Always"), &ObservedPod::default());
    assert_eq!(
        actions,
        vec![
            Action::CreateSandbox { attempt: 0 },
            start("a", false, 0),
            start("b", false, 0)
        ]
    );
}

#[test]
fn a_running_pod_needs_nothing() {
    let f = Fixture::new();
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![
            container("a", 0, State::Running, 0),
            container("b", 0, State::Running, 0),
        ],
    };
    assert!(f.plan(&two_containers("Always"), &obs).is_empty());
}

#[test]
fn init_containers_run_one_at_a_time_before_app_containers() {
    let f = Fixture::new();
    let p = with_init();
    assert_eq!(
        f.plan(&p, &ObservedPod::default()),
        vec![Action::CreateSandbox { attempt: 0 }, start("i1", true, 0)]
    );
    let mut obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![container("i1", 0, State::Running, 0)],
    };
    assert!(f.plan(&p, &obs).is_empty());
    obs.containers = vec![container("i1", 0, State::Exited, 0)];
    assert_eq!(f.plan(&p, &obs), vec![start("i2", true, 0)]);
    obs.containers.push(container("i2", 0, State::Exited, 0));
    assert_eq!(f.plan(&p, &obs), vec![start("a", false, 0)]);
}

#[test]
fn a_failed_init_container_is_retried_unless_the_policy_is_never() {
    let f = Fixture::new();
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![container("i1", 0, State::Exited, 1)],
    };
    assert_eq!(f.plan(&with_init(), &obs), vec![start("i1", true, 1)]);
    let mut never = with_init();
    never.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    assert_eq!(f.plan(&never, &obs), vec![Action::KillPod]);
}

#[test]
fn an_exited_container_restarts_with_policy_always() {
    let f = Fixture::new();
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![
            container("a", 0, State::Exited, 0),
            container("b", 0, State::Running, 0),
        ],
    };
    assert_eq!(
        f.plan(&two_containers("Always"), &obs),
        vec![start("a", false, 1)]
    );
}

#[test]
fn on_failure_restarts_only_failed_containers() {
    let f = Fixture::new();
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![
            container("a", 0, State::Exited, 0),
            container("b", 0, State::Exited, 2),
        ],
    };
    assert_eq!(
        f.plan(&two_containers("OnFailure"), &obs),
        vec![start("b", false, 1)]
    );
}

#[test]
fn a_completed_pod_with_policy_never_gets_its_sandbox_stopped() {
    let f = Fixture::new();
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![
            container("a", 0, State::Exited, 0),
            container("b", 0, State::Exited, 1),
        ],
    };
    assert_eq!(
        f.plan(&two_containers("Never"), &obs),
        vec![Action::KillPod]
    );
}

#[test]
fn a_finished_never_pod_is_not_recreated_when_its_sandbox_is_gone() {
    let f = Fixture::new();
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, false)],
        containers: vec![
            container("a", 0, State::Exited, 0),
            container("b", 0, State::Exited, 0),
        ],
    };
    assert!(f.plan(&two_containers("Never"), &obs).is_empty());
}

#[test]
fn a_dead_sandbox_is_replaced_with_the_next_attempt_and_containers_restart() {
    let f = Fixture::new();
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, false)],
        containers: vec![
            container("a", 0, State::Running, 0),
            container("b", 0, State::Exited, 137),
        ],
    };
    assert_eq!(
        f.plan(&two_containers("Always"), &obs),
        vec![
            Action::KillPod,
            Action::CreateSandbox { attempt: 1 },
            start("a", false, 1),
            start("b", false, 1)
        ]
    );
}

#[test]
fn a_crash_looping_container_waits_for_its_back_off() {
    let mut f = Fixture::new();
    f.backoff.next(&Backoff::key("u1", "a"), f.now);
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![
            container("a", 3, State::Exited, 1),
            container("b", 0, State::Running, 0),
        ],
    };
    let actions = f.plan(&two_containers("Always"), &obs);
    assert_eq!(
        actions,
        vec![Action::BackOff {
            name: "a".into(),
            remaining: Duration::from_secs(10)
        }]
    );
}

#[test]
fn a_pod_in_back_off_keeps_its_sandbox_even_with_nothing_running() {
    let mut f = Fixture::new();
    f.backoff.next(&Backoff::key("u1", "a"), f.now);
    let p =
        pod("metadata: {name: p, uid: u1}\nspec:\n  containers:\n  - {name: a, image: busybox}\n");
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![container("a", 1, State::Exited, 1)],
    };
    assert!(matches!(
        f.plan(&p, &obs).as_slice(),
        [Action::BackOff { .. }]
    ));
}

#[test]
fn a_changed_spec_restarts_the_running_container() {
    let mut f = Fixture::new();
    f.hashes.insert("a".into(), "new".into());
    let mut a = container("a", 0, State::Running, 0);
    a.hash = "old".into();
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![a, container("b", 0, State::Running, 0)],
    };
    assert_eq!(
        f.plan(&two_containers("Always"), &obs),
        vec![
            Action::KillContainer {
                id: "a-0".into(),
                name: "a".into(),
                reason: KillReason::SpecChanged
            },
            start("a", false, 1)
        ]
    );
}

#[test]
fn an_unhealthy_container_is_killed_and_restarted_per_policy() {
    let mut f = Fixture::new();
    f.health.unhealthy.insert("a".into(), KillReason::Unhealthy);
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![
            container("a", 0, State::Running, 0),
            container("b", 0, State::Running, 0),
        ],
    };
    assert_eq!(
        f.plan(&two_containers("OnFailure"), &obs),
        vec![
            Action::KillContainer {
                id: "a-0".into(),
                name: "a".into(),
                reason: KillReason::Unhealthy
            },
            start("a", false, 1)
        ]
    );
    let never = f.plan(&two_containers("Never"), &obs);
    assert_eq!(
        never,
        vec![Action::KillContainer {
            id: "a-0".into(),
            name: "a".into(),
            reason: KillReason::Unhealthy
        }]
    );
}

fn with_sidecar(startup_probe: bool) -> Pod {
    let probe = if startup_probe {
        ", startupProbe: {exec: {command: [\"true\"]}}"
    } else {
        ""
    };
    pod(&format!(
            "metadata: {{name: p, uid: u1}}\nspec:\n  restartPolicy: OnFailure\n  initContainers:\n  - {{name: log, image: busybox, restartPolicy: Always{probe}}}\n  - {{name: setup, image: busybox}}\n  containers:\n  - {{name: a, image: busybox}}\n"
        ))
}

fn ready_sandbox(containers: Vec<ObservedContainer>) -> ObservedPod {
    ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers,
    }
}

#[test]
fn a_sidecar_starts_first_and_the_next_init_container_once_it_runs() {
    let f = Fixture::new();
    let p = with_sidecar(false);
    assert_eq!(
        f.plan(&p, &ObservedPod::default()),
        vec![Action::CreateSandbox { attempt: 0 }, start("log", true, 0)]
    );
    let obs = ready_sandbox(vec![container("log", 0, State::Running, 0)]);
    assert_eq!(f.plan(&p, &obs), vec![start("setup", true, 0)]);
    let obs = ready_sandbox(vec![
        container("log", 0, State::Running, 0),
        container("setup", 0, State::Running, 0),
    ]);
    assert!(f.plan(&p, &obs).is_empty(), "the init container runs");
    let obs = ready_sandbox(vec![
        container("log", 0, State::Running, 0),
        container("setup", 0, State::Exited, 0),
    ]);
    assert_eq!(f.plan(&p, &obs), vec![start("a", false, 0)]);
}

#[test]
fn a_sidecar_with_a_startup_probe_holds_the_next_one_until_it_started() {
    let mut f = Fixture::new();
    let p = with_sidecar(true);
    let obs = ready_sandbox(vec![container("log", 0, State::Running, 0)]);
    assert!(f.plan(&p, &obs).is_empty(), "no startup result yet");
    f.health.started.insert("log".into(), false);
    assert!(f.plan(&p, &obs).is_empty(), "not started yet");
    f.health.started.insert("log".into(), true);
    assert_eq!(f.plan(&p, &obs), vec![start("setup", true, 0)]);
}

#[test]
fn an_exited_sidecar_restarts_behind_its_back_off_whatever_the_pod_policy() {
    let mut f = Fixture::new();
    let p = with_sidecar(false);
    let obs = ready_sandbox(vec![
        container("log", 0, State::Exited, 0),
        container("setup", 0, State::Exited, 0),
        container("a", 0, State::Running, 0),
    ]);
    assert_eq!(f.plan(&p, &obs), vec![start("log", true, 1)]);
    f.backoff.next(&Backoff::key("u1", "log"), f.now);
    assert!(matches!(
        f.plan(&p, &obs).as_slice(),
        [Action::BackOff { name, .. }] if name == "log"
    ));
}

#[test]
fn a_sidecar_failing_its_liveness_probe_is_killed_and_started_again() {
    let mut f = Fixture::new();
    f.health
        .unhealthy
        .insert("log".into(), KillReason::Unhealthy);
    let p = with_sidecar(false);
    let obs = ready_sandbox(vec![
        container("log", 0, State::Running, 0),
        container("setup", 0, State::Exited, 0),
        container("a", 0, State::Running, 0),
    ]);
    assert_eq!(
        f.plan(&p, &obs),
        vec![
            Action::KillContainer {
                id: "log-0".into(),
                name: "log".into(),
                reason: KillReason::Unhealthy
            },
            start("log", true, 1),
        ]
    );
}

#[test]
fn sidecars_do_not_keep_a_finished_pod_alive() {
    let f = Fixture::new();
    let p = with_sidecar(false);
    let obs = ready_sandbox(vec![
        container("log", 0, State::Running, 0),
        container("setup", 0, State::Exited, 0),
        container("a", 0, State::Exited, 0),
    ]);
    assert_eq!(f.plan(&p, &obs), vec![Action::KillPod]);
    // Stopped, it stays finished: no new sandbox runs the sidecar again.
    let done = ObservedPod {
        sandboxes: vec![sandbox(0, false)],
        containers: vec![
            container("log", 0, State::Exited, 137),
            container("setup", 0, State::Exited, 0),
            container("a", 0, State::Exited, 0),
        ],
    };
    assert!(f.plan(&p, &done).is_empty());
}

#[test]
fn the_pod_stops_app_containers_first_then_sidecars_last_declared_first() {
    let p = pod("metadata: {name: p, uid: u1}\nspec:\n  initContainers:\n  - {name: s1, restartPolicy: Always}\n  - {name: s2, restartPolicy: Always}\n  containers:\n  - {name: a}\n  - {name: b}\n");
    let running = [
        container("s1", 0, State::Running, 0),
        container("a", 0, State::Running, 0),
        container("s2", 0, State::Running, 0),
        container("b", 0, State::Running, 0),
    ];
    let waves: Vec<Vec<&str>> = termination_waves(&p, &running)
        .into_iter()
        .map(|w| w.into_iter().map(|c| c.name.as_str()).collect())
        .collect();
    assert_eq!(waves, [vec!["a", "b"], vec!["s2"], vec!["s1"]]);
}

#[test]
fn only_the_newest_exited_instance_of_an_init_container_is_kept() {
    let f = Fixture::new();
    let p = with_init();
    let obs = ready_sandbox(vec![
        container("i1", 2, State::Exited, 1),
        container("i1", 1, State::Exited, 1),
        container("i1", 0, State::Exited, 1),
    ]);
    assert_eq!(
        f.plan(&p, &obs),
        vec![
            Action::RemoveContainer {
                id: "i1-1".into(),
                name: "i1".into()
            },
            Action::RemoveContainer {
                id: "i1-0".into(),
                name: "i1".into()
            },
            start("i1", true, 3),
        ]
    );
}

#[test]
fn a_container_created_before_the_hash_changed_form_is_adopted_not_restarted() {
    let mut f = Fixture::new();
    f.hashes.insert("a".into(), "1f2e3d4c".into());
    f.legacy
        .insert("a".into(), "0123456789abcdef0123456789abcdef".into());
    let mut a = container("a", 0, State::Running, 0);
    a.hash = "0123456789abcdef0123456789abcdef".into();
    let obs = ready_sandbox(vec![a, container("b", 0, State::Running, 0)]);
    assert!(f.plan(&two_containers("Always"), &obs).is_empty());
}

fn debugged(init: bool) -> Pod {
    let inits = if init {
        "  initContainers:\n  - {name: i1, image: busybox}\n"
    } else {
        ""
    };
    pod(&format!("metadata: {{name: p, uid: u1}}\nspec:\n{inits}  containers:\n  - {{name: a, image: busybox}}\n  ephemeralContainers:\n  - {{name: debugger, image: busybox, targetContainerName: a}}\n"))
}

fn start_ephemeral(name: &str) -> Action {
    Action::StartEphemeralContainer { name: name.into() }
}

#[test]
fn an_ephemeral_container_added_to_a_running_pod_is_started_once() {
    let f = Fixture::new();
    let p = debugged(false);
    let mut obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![container("a", 0, State::Running, 0)],
    };
    assert_eq!(f.plan(&p, &obs), vec![start_ephemeral("debugger")]);
    obs.containers
        .insert(0, container("debugger", 0, State::Running, 0));
    assert!(f.plan(&p, &obs).is_empty());
}

#[test]
fn an_exited_ephemeral_container_is_never_restarted_whatever_its_exit_code() {
    let f = Fixture::new();
    for code in [0, 1] {
        let obs = ObservedPod {
            sandboxes: vec![sandbox(0, true)],
            containers: vec![
                container("debugger", 0, State::Exited, code),
                container("a", 0, State::Running, 0),
            ],
        };
        assert!(f.plan(&debugged(false), &obs).is_empty(), "exit {code}");
    }
}

#[test]
fn an_ephemeral_container_starts_while_init_containers_still_run() {
    let f = Fixture::new();
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![container("i1", 0, State::Running, 0)],
    };
    assert_eq!(
        f.plan(&debugged(true), &obs),
        vec![start_ephemeral("debugger")]
    );
}

#[test]
fn an_ephemeral_container_waits_for_a_sandbox_and_is_not_started_in_a_stopping_pod() {
    let f = Fixture::new();
    // No sandbox yet: the sandbox and the app containers come first.
    assert_eq!(
        f.plan(&debugged(false), &ObservedPod::default()),
        vec![Action::CreateSandbox { attempt: 0 }, start("a", false, 0)]
    );
    // Every app container is done and none restarts: the pod stops.
    let mut done = debugged(false);
    done.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![container("a", 0, State::Exited, 0)],
    };
    assert_eq!(f.plan(&done, &obs), vec![Action::KillPod]);
}

#[test]
fn a_running_ephemeral_container_does_not_keep_a_finished_pod_alive() {
    let f = Fixture::new();
    let mut p = debugged(false);
    p.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    let obs = ObservedPod {
        sandboxes: vec![sandbox(0, true)],
        containers: vec![
            container("debugger", 0, State::Running, 0),
            container("a", 0, State::Exited, 0),
        ],
    };
    assert_eq!(f.plan(&p, &obs), vec![Action::KillPod]);
}
