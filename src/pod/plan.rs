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
//!   then the sidecars, last declared first;
//! - an ephemeral container (`kubectl debug`) starts once in the ready
//!   sandbox, even while init containers still run, and never again: any
//!   instance of its name in the runtime, running or exited, means it was
//!   started. It starts before the init and app containers, and not at all
//!   when the pod is being stopped or gets a new sandbox.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::backoff::Backoff;
use crate::pleg::State;
use crate::pod::accessors::{
    app_containers, ephemeral_containers, init_containers, restart_policy,
};
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
    /// Pull (per policy), create and start an ephemeral container, once.
    StartEphemeralContainer { name: String },
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
    // Which init containers to start, by index (marks, not a sorted list).
    let mut to_start = vec![false; inits.len()];
    let mut kills: Vec<Action> = Vec::new();
    for (i, ic) in inits.iter().enumerate().rev() {
        let sidecar = is_sidecar(ic);
        let Some(st) = in_sandbox(&ic.name) else {
            if previously_initialized && sidecar {
                to_start[i] = true;
            }
            continue;
        };
        if previously_initialized && !sidecar {
            continue;
        }
        match st.state {
            State::Created => to_start[i] = true,
            State::Running if !sidecar => {} // wait for it to finish
            State::Running => {
                if let Some(reason) = kill_reason(st, ctx) {
                    kills.push(kill(st, reason));
                    to_start[i] = true;
                } else if started(ic, ctx) {
                    if i + 1 == inits.len() {
                        initialized = true;
                    } else if !previously_initialized {
                        to_start[i + 1] = true;
                    }
                }
            }
            State::Exited if sidecar => to_start[i] = true,
            State::Exited if st.exit_code != 0 => {
                if policy == "Never" {
                    return None;
                }
                to_start[i] = true;
            }
            State::Exited => {
                if i + 1 == inits.len() {
                    initialized = true;
                } else {
                    to_start[i + 1] = true;
                }
            }
            State::Unknown => {
                if !sidecar && policy == "Never" {
                    return None;
                }
                kills.push(kill(st, KillReason::UnknownState));
                to_start[i] = true;
            }
        }
        previously_initialized = true;
    }
    if !previously_initialized && !inits.is_empty() {
        to_start[0] = true;
    }
    actions.extend(kills);
    for (ic, _) in inits.iter().zip(&to_start).filter(|(_, s)| **s) {
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

/// The actions for a pod whose sandbox is missing or not ready: a new
/// sandbox with the first container to start, or, when nothing is left to
/// run, only the pod killed.
fn without_ready_sandbox(pod: &Pod, observed: &ObservedPod, policy: &str) -> Vec<Action> {
    let sandbox = observed.latest_sandbox();
    let mut actions = Vec::new();
    let ran_before = sandbox.is_some() && !observed.containers.is_empty();
    if policy == "Never" && ran_before {
        // Finished for good: just make sure nothing is left running.
        if observed.is_active() {
            actions.push(Action::KillPod);
        }
        return actions;
    }
    let apps: Vec<(String, bool)> = app_containers(pod)
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
        .collect();
    // A pod with nothing left to run gets no new sandbox, whatever its
    // init containers (kubelet's computePodActions).
    let to_start = match init_containers(pod).first() {
        Some(first) if !apps.is_empty() => vec![(first.name.clone(), true)],
        _ => apps,
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
    actions
}

/// The app containers' actions (step 3 of [`plan`]), after the
/// `init_actions` first entries of `actions`: start, kill, restart or wait,
/// and kill the pod when every app container is done for good.
fn app_container_actions(
    pod: &Pod,
    observed: &ObservedPod,
    uid: &str,
    policy: &str,
    ctx: &Context,
    actions: &mut Vec<Action>,
    init_actions: usize,
) {
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
                    restart_or_wait(actions, uid, c, false, ctx);
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
}

/// Computes the actions that move the pod towards its spec.
pub fn plan(pod: &Pod, observed: &ObservedPod, ctx: &Context) -> Vec<Action> {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let policy = restart_policy(pod);
    let mut actions = Vec::new();

    // 1. The sandbox.
    let sandbox = observed.latest_sandbox();
    if !sandbox.map(|s| s.ready).unwrap_or(false) {
        return without_ready_sandbox(pod, observed, policy);
    }
    let sandbox_id = &sandbox.expect("checked above").id;
    actions.extend(prune_init_containers(pod, observed));

    // 2a. Ephemeral containers, whatever the initialization's progress.
    for ec in ephemeral_containers(pod) {
        if observed.latest(&ec.name).is_none() {
            actions.push(Action::StartEphemeralContainer {
                name: ec.name.clone(),
            });
        }
    }

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
    app_container_actions(pod, observed, uid, policy, ctx, &mut actions, init_actions);
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
mod tests;
