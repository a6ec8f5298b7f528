//! Planning: what to do to make a pod's runtime state match its spec.
//!
//! [`plan`] is kubelet's `computePodActions` as a pure function: given the
//! desired pod, what the runtime reported for it ([`ObservedPod`]), the
//! crash-loop back-off and the current time, it returns the [`Action`]s the
//! pod worker must perform, in order. It never talks to the runtime and never
//! reads a clock.
//!
//! The rules, as in kubelet:
//! - no ready sandbox → kill what is left, create a sandbox with the next
//!   attempt number and start over from the first init container; except a
//!   `restartPolicy: Never` pod that already ran, which stays finished;
//! - init containers run one at a time, in order (`computeInitContainerActions`);
//!   a failed one is retried (with back-off) unless the policy is `Never`,
//!   which fails the pod;
//! - a sidecar (an init container with `restartPolicy: Always`) is started
//!   in its turn; the next one starts once it is *started* (its startup
//!   probe succeeded, or it runs and has none); it keeps running beside the
//!   app containers and is restarted, behind the back-off, whenever it
//!   exits, fails its liveness probe or its spec changes;
//! - app containers start together once every init container succeeded and
//!   every sidecar started; an exited one restarts per `restartPolicy`,
//!   behind the back-off;
//! - a running container whose spec hash changed, or that failed its
//!   liveness probe, is killed and started again; a hash in picolet's
//!   earlier form (md5) counts as unchanged when it matches the spec;
//! - exited init containers are pruned to the newest instance per name
//!   (`pruneInitContainersBeforeStart`);
//! - when no app container runs and none is due to start, the sandbox is
//!   stopped, sidecars included: sidecars never keep a pod alive;
//! - a pod stops in [`termination_waves`] order: app containers first,
//!   then the sidecars, last declared first.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::backoff::Backoff;
use crate::pleg::State;
use crate::pod::accessors::{app_containers, init_containers, restart_policy};
use crate::pod::observed::{ObservedContainer, ObservedPod};
use crate::qos::is_sidecar;

/// One step for the pod worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Stop every running container (gracefully, in [`termination_waves`]
    /// order) and every ready sandbox.
    KillPod,
    /// Create and start a new sandbox.
    CreateSandbox { attempt: u32 },
    /// Pull (per policy), create and start a container.
    StartContainer {
        name: String,
        init: bool,
        attempt: u32,
        restart: bool,
    },
    /// Stop one running container.
    KillContainer {
        id: String,
        name: String,
        reason: KillReason,
    },
    /// Remove an exited init container that is not its name's newest.
    RemoveContainer { id: String, name: String },
    /// A container waits for its crash-loop back-off to expire.
    BackOff { name: String, remaining: Duration },
}

/// Why a single container is killed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KillReason {
    /// The container spec (its hash) changed.
    SpecChanged,
    /// The liveness probe failed.
    Unhealthy,
    /// The startup probe failed.
    StartupProbeFailed,
    /// The runtime reports an unknown state; stop it to be sure.
    UnknownState,
}

/// Per-container facts that do not come from the runtime.
#[derive(Clone, Debug, Default)]
pub struct Health {
    /// Containers (by name) whose liveness or startup probe says kill.
    pub unhealthy: HashMap<String, KillReason>,
    /// Startup probe results by container name (absent: no result yet).
    pub started: HashMap<String, bool>,
}

/// The worker's inputs besides the pod and what the runtime says.
pub struct Context<'a> {
    pub backoff: &'a Backoff,
    pub health: &'a Health,
    /// Monotonic now, for back-off.
    pub now: Instant,
    /// Wall-clock now in Unix nanoseconds, to age the runtime's timestamps.
    pub now_unix_nanos: i64,
    /// `io.kubernetes.container.hash` of each container spec, by name.
    pub hashes: &'a HashMap<String, String>,
    /// The same in picolet's earlier hash form, by name, so that containers
    /// created before an upgrade are adopted, not restarted.
    pub legacy_hashes: &'a HashMap<String, String>,
}

fn should_restart(policy: &str, exit_code: i32) -> bool {
    match policy {
        "Never" => false,
        "OnFailure" => exit_code != 0,
        _ => true,
    }
}

/// The `Instant` at which the runtime says a container finished.
fn exited_at(c: &ObservedContainer, ctx: &Context) -> Instant {
    let ago = (ctx.now_unix_nanos - c.finished_at).max(0) as u64;
    ctx.now
        .checked_sub(Duration::from_nanos(ago))
        .unwrap_or(ctx.now)
}

fn backoff_remaining(pod_uid: &str, c: &ObservedContainer, ctx: &Context) -> Option<Duration> {
    let key = Backoff::key(pod_uid, &c.name);
    ctx.backoff.remaining(&key, exited_at(c, ctx), ctx.now)
}

/// Pushes a start (or a back-off wait) for an exited container.
fn restart_or_wait(
    actions: &mut Vec<Action>,
    pod_uid: &str,
    last: &ObservedContainer,
    init: bool,
    ctx: &Context,
) {
    match backoff_remaining(pod_uid, last, ctx) {
        Some(remaining) => actions.push(Action::BackOff {
            name: last.name.clone(),
            remaining,
        }),
        None => actions.push(Action::StartContainer {
            name: last.name.clone(),
            init,
            attempt: last.attempt + 1,
            restart: true,
        }),
    }
}

/// The next attempt number for a container name.
fn next_attempt(observed: &ObservedPod, name: &str) -> u32 {
    observed.latest(name).map(|c| c.attempt + 1).unwrap_or(0)
}

/// The spec of a running container changed: its hash is neither the
/// current one nor (for containers created before an upgrade) the legacy one.
fn spec_changed(c: &ObservedContainer, ctx: &Context) -> bool {
    let Some(want) = ctx.hashes.get(&c.name) else {
        return false;
    };
    !c.hash.is_empty() && &c.hash != want && ctx.legacy_hashes.get(&c.name) != Some(&c.hash)
}

/// Why a running container must be killed, if it must: a probe said so,
/// or its spec changed.
fn kill_reason(c: &ObservedContainer, ctx: &Context) -> Option<KillReason> {
    if let Some(r) = ctx.health.unhealthy.get(&c.name) {
        return Some(r.clone());
    }
    spec_changed(c, ctx).then_some(KillReason::SpecChanged)
}

fn kill(c: &ObservedContainer, reason: KillReason) -> Action {
    Action::KillContainer {
        id: c.id.clone(),
        name: c.name.clone(),
        reason,
    }
}

/// kubelet's `pruneInitContainersBeforeStart`: of each init container,
/// only the newest exited instance stays.
fn prune_init_containers(pod: &Pod, observed: &ObservedPod) -> Vec<Action> {
    let mut out = Vec::new();
    for ic in init_containers(pod) {
        // `observed.containers` is newest first per name.
        let exited = observed
            .containers
            .iter()
            .filter(|c| c.name == ic.name && c.state == State::Exited);
        for c in exited.skip(1) {
            out.push(Action::RemoveContainer {
                id: c.id.clone(),
                name: c.name.clone(),
            });
        }
    }
    out
}

/// What the init containers need (kubelet's `computeInitContainerActions`):
/// kills and starts pushed to `actions`; returns whether the pod is
/// initialized (app containers may run), or `None` when the pod failed.
fn init_container_actions(
    pod: &Pod,
    observed: &ObservedPod,
    sandbox_id: &str,
    ctx: &Context,
    actions: &mut Vec<Action>,
) -> Option<bool> {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let policy = restart_policy(pod);
    let inits = init_containers(pod);
    if inits.is_empty() {
        return Some(true);
    }
    // Only containers of the current sandbox count: a new sandbox runs the
    // init containers again.
    let in_sandbox = |name: &str| {
        observed
            .containers
            .iter()
            .find(|c| c.name == name && c.sandbox_id == sandbox_id)
    };
    // An app container created or running: initialization happened before
    // (its init containers may have been removed since).
    let mut initialized = app_containers(pod).iter().any(|c| {
        in_sandbox(&c.name).is_some_and(|o| matches!(o.state, State::Created | State::Running))
    });
    let mut previously_initialized = initialized;
    let mut to_start: Vec<usize> = Vec::new();
    let mut kills: Vec<Action> = Vec::new();
    for (i, ic) in inits.iter().enumerate().rev() {
        let sidecar = is_sidecar(ic);
        let Some(st) = in_sandbox(&ic.name) else {
            if previously_initialized && sidecar {
                to_start.push(i);
            }
            continue;
        };
        if previously_initialized && !sidecar {
            continue;
        }
        match st.state {
            State::Created => to_start.push(i),
            State::Running if !sidecar => {} // wait for it to finish
            State::Running => {
                if let Some(reason) = kill_reason(st, ctx) {
                    kills.push(kill(st, reason));
                    to_start.push(i);
                } else if started(ic, ctx) {
                    if i + 1 == inits.len() {
                        initialized = true;
                    } else if !previously_initialized {
                        to_start.push(i + 1);
                    }
                }
            }
            State::Exited if sidecar => to_start.push(i),
            State::Exited if st.exit_code != 0 => {
                if policy == "Never" {
                    return None;
                }
                to_start.push(i);
            }
            State::Exited => {
                if i + 1 == inits.len() {
                    initialized = true;
                } else {
                    to_start.push(i + 1);
                }
            }
            State::Unknown => {
                if !sidecar && policy == "Never" {
                    return None;
                }
                kills.push(kill(st, KillReason::UnknownState));
                to_start.push(i);
            }
        }
        previously_initialized = true;
    }
    if !previously_initialized && !inits.is_empty() {
        to_start.push(0);
    }
    actions.extend(kills);
    to_start.sort_unstable();
    to_start.dedup();
    for i in to_start {
        let ic = &inits[i];
        match in_sandbox(&ic.name) {
            Some(last) if last.state != State::Running => {
                restart_or_wait(actions, uid, last, true, ctx);
            }
            _ => {
                let attempt = next_attempt(observed, &ic.name);
                actions.push(Action::StartContainer {
                    name: ic.name.clone(),
                    init: true,
                    attempt,
                    restart: attempt > 0,
                });
            }
        }
        // A regular init container that cannot start yet holds the others.
        if !is_sidecar(ic) && matches!(actions.last(), Some(Action::BackOff { .. })) {
            break;
        }
    }
    Some(initialized)
}

/// A running sidecar counts as started once its startup probe succeeded,
/// or at once without one.
fn started(c: &Container, ctx: &Context) -> bool {
    c.startup_probe.is_none() || ctx.health.started.get(&c.name) == Some(&true)
}

/// Computes the actions that move the pod towards its spec.
pub fn plan(pod: &Pod, observed: &ObservedPod, ctx: &Context) -> Vec<Action> {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let policy = restart_policy(pod);
    let mut actions = Vec::new();

    // 1. The sandbox.
    let sandbox = observed.latest_sandbox();
    if !sandbox.map(|s| s.ready).unwrap_or(false) {
        let ran_before = sandbox.is_some() && !observed.containers.is_empty();
        if policy == "Never" && ran_before {
            // Finished for good: just make sure nothing is left running.
            if observed.is_active() {
                actions.push(Action::KillPod);
            }
            return actions;
        }
        let to_start: Vec<(String, bool)> = match init_containers(pod).first() {
            Some(first) => vec![(first.name.clone(), true)],
            None => app_containers(pod)
                .iter()
                .filter(|c| {
                    // With OnFailure, a container that already succeeded stays done.
                    !(policy == "OnFailure"
                        && observed
                            .latest(&c.name)
                            .map(|o| o.state == State::Exited && o.exit_code == 0)
                            .unwrap_or(false))
                })
                .map(|c| (c.name.clone(), false))
                .collect(),
        };
        if to_start.is_empty() {
            if observed.is_active() {
                actions.push(Action::KillPod);
            }
            return actions;
        }
        if observed.is_active() {
            actions.push(Action::KillPod);
        }
        actions.push(Action::CreateSandbox {
            attempt: sandbox.map(|s| s.attempt + 1).unwrap_or(0),
        });
        for (name, init) in to_start {
            let attempt = next_attempt(observed, &name);
            actions.push(Action::StartContainer {
                name,
                init,
                attempt,
                restart: attempt > 0,
            });
        }
        return actions;
    }
    let sandbox_id = &sandbox.expect("checked above").id;
    actions.extend(prune_init_containers(pod, observed));

    // 2. Init containers and sidecars.
    match init_container_actions(pod, observed, sandbox_id, ctx, &mut actions) {
        None => {
            actions.retain(|a| matches!(a, Action::RemoveContainer { .. }));
            actions.push(Action::KillPod);
            return actions;
        }
        Some(false) => return actions,
        Some(true) => {}
    }
    let init_actions = actions.len();

    // 3. App containers.
    let mut keep = 0usize;
    let mut waiting = false;
    for ac in app_containers(pod) {
        let Some(c) = observed.latest(&ac.name) else {
            actions.push(Action::StartContainer {
                name: ac.name.clone(),
                init: false,
                attempt: 0,
                restart: false,
            });
            continue;
        };
        match c.state {
            State::Running => match kill_reason(c, ctx) {
                None => keep += 1,
                Some(reason) => {
                    actions.push(kill(c, reason.clone()));
                    // A container killed for a probe failure obeys the
                    // restart policy as if it had failed (exit 137).
                    if reason == KillReason::SpecChanged || should_restart(policy, 137) {
                        actions.push(Action::StartContainer {
                            name: c.name.clone(),
                            init: false,
                            attempt: c.attempt + 1,
                            restart: true,
                        });
                    }
                }
            },
            State::Exited | State::Created | State::Unknown => {
                let exit_code = if c.state == State::Exited {
                    c.exit_code
                } else {
                    -1
                };
                if c.state == State::Unknown {
                    actions.push(kill(c, KillReason::UnknownState));
                }
                if should_restart(policy, exit_code) {
                    restart_or_wait(&mut actions, uid, c, false, ctx);
                    waiting |= matches!(actions.last(), Some(Action::BackOff { .. }));
                }
            }
        }
    }
    let starting = actions[init_actions..]
        .iter()
        .any(|a| matches!(a, Action::StartContainer { .. }));
    if keep == 0 && !starting && !waiting {
        // Every app container is done and none will restart: stop the
        // sandbox; sidecars do not keep a pod alive.
        actions.retain(|a| matches!(a, Action::RemoveContainer { .. }));
        actions.push(Action::KillPod);
    }
    actions
}

/// The order in which a pod's running containers stop (kubelet's
/// termination ordering): first, together, everything that is not a
/// sidecar (app containers, a running init container, containers the spec
/// does not name); then each sidecar on its own, last declared first, so a
/// sidecar outlives the containers it serves and the sidecars after it.
pub fn termination_waves<'a>(
    pod: &Pod,
    running: impl IntoIterator<Item = &'a ObservedContainer>,
) -> Vec<Vec<&'a ObservedContainer>> {
    let sidecars: Vec<&str> = init_containers(pod)
        .iter()
        .filter(|c| is_sidecar(c))
        .map(|c| c.name.as_str())
        .collect();
    let running: Vec<&ObservedContainer> = running.into_iter().collect();
    let mut waves = vec![running
        .iter()
        .copied()
        .filter(|c| !sidecars.contains(&c.name.as_str()))
        .collect::<Vec<_>>()];
    for name in sidecars.iter().rev() {
        waves.push(
            running
                .iter()
                .copied()
                .filter(|c| c.name == *name)
                .collect(),
        );
    }
    waves.retain(|w| !w.is_empty());
    waves
}

#[cfg(test)]
mod tests {
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
        let p = pod(
            "metadata: {name: p, uid: u1}\nspec:\n  containers:\n  - {name: a, image: busybox}\n",
        );
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
}
