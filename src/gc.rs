//! Garbage collection of dead containers and sandboxes, decided purely.
//!
//! kubelet's container GC with picolet's fixed policy (`MaxPerPodContainer`
//! = 1, `MinAge` = 0):
//! - for a pod that still exists, keep every running container and the
//!   newest dead container per container name (its exit code and logs are
//!   what `lastState` and `kubectl logs --previous` show); remove older dead
//!   ones. Init containers too: only the latest exited instance of each
//!   stays, as kubelet keeps it (the pod worker prunes them at sync as
//!   well, see `pod::plan`);
//! - keep a live pod's newest sandbox; remove older sandboxes that are not
//!   ready and hold no container that is kept;
//! - for a pod that no longer exists, remove every sandbox that is no
//!   longer ready (removing a sandbox removes its containers). A pod that
//!   still has something running is terminated by the agent first.
//!
//! Which pods are live is the caller's input: the agent counts as live the
//! pods of a source that has not delivered its first authoritative set
//! (see `source::merge::may_remove`), so a restart never deletes what it
//! should adopt. Pure: no I/O, no clock; it must not know the runtime.

use std::collections::{HashMap, HashSet};

use crate::pleg::State;

/// A sandbox as GC sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sandbox {
    pub id: String,
    pub pod_uid: String,
    pub attempt: u32,
    pub created_at: i64,
    pub ready: bool,
}

/// A container as GC sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    pub id: String,
    pub pod_uid: String,
    pub sandbox_id: String,
    pub name: String,
    pub attempt: u32,
    pub created_at: i64,
    pub state: State,
}

/// One removal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Removal {
    Container { id: String, pod_uid: String },
    Sandbox { id: String, pod_uid: String },
}

/// Decides what to remove. `live` holds the UIDs of pods that exist.
pub fn collect(
    sandboxes: &[Sandbox],
    containers: &[Container],
    live: &HashSet<String>,
) -> Vec<Removal> {
    let mut out = Vec::new();

    // Containers of live pods: newest dead one per (pod, name) stays.
    let mut by_name: HashMap<(&str, &str), Vec<&Container>> = HashMap::new();
    for c in containers.iter().filter(|c| live.contains(&c.pod_uid)) {
        by_name.entry((&c.pod_uid, &c.name)).or_default().push(c);
    }
    let mut kept: HashSet<&str> = HashSet::new();
    let mut groups: Vec<_> = by_name.into_values().collect();
    groups.sort_by(|a, b| a[0].id.cmp(&b[0].id));
    for mut group in groups {
        group.sort_by_key(|c| std::cmp::Reverse((c.attempt, c.created_at)));
        let mut kept_dead = false;
        for c in group {
            let running = matches!(c.state, State::Running | State::Unknown);
            if running || !kept_dead {
                kept_dead |= !running;
                kept.insert(&c.id);
            } else {
                out.push(Removal::Container {
                    id: c.id.clone(),
                    pod_uid: c.pod_uid.clone(),
                });
            }
        }
    }

    // Sandboxes.
    let mut newest: HashMap<&str, (u32, i64)> = HashMap::new();
    for s in sandboxes {
        let e = newest
            .entry(&s.pod_uid)
            .or_insert((s.attempt, s.created_at));
        if (s.attempt, s.created_at) > *e {
            *e = (s.attempt, s.created_at);
        }
    }
    for s in sandboxes {
        if s.ready {
            continue;
        }
        if live.contains(&s.pod_uid) {
            let is_newest = newest.get(s.pod_uid.as_str()) == Some(&(s.attempt, s.created_at));
            let holds_kept = containers
                .iter()
                .any(|c| c.sandbox_id == s.id && kept.contains(c.id.as_str()));
            if is_newest || holds_kept {
                continue;
            }
        } else if containers
            .iter()
            .any(|c| c.sandbox_id == s.id && matches!(c.state, State::Running | State::Unknown))
        {
            continue; // the agent stops it first
        }
        out.push(Removal::Sandbox {
            id: s.id.clone(),
            pod_uid: s.pod_uid.clone(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb(id: &str, pod: &str, attempt: u32, ready: bool) -> Sandbox {
        Sandbox {
            id: id.into(),
            pod_uid: pod.into(),
            attempt,
            created_at: attempt as i64,
            ready,
        }
    }
    fn ct(id: &str, pod: &str, sandbox: &str, name: &str, attempt: u32, state: State) -> Container {
        Container {
            id: id.into(),
            pod_uid: pod.into(),
            sandbox_id: sandbox.into(),
            name: name.into(),
            attempt,
            created_at: attempt as i64,
            state,
        }
    }
    fn live(uids: &[&str]) -> HashSet<String> {
        uids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_the_newest_dead_container_per_name_is_kept() {
        let containers = vec![
            ct("c0", "p", "s0", "a", 0, State::Exited),
            ct("c1", "p", "s0", "a", 1, State::Exited),
            ct("c2", "p", "s0", "a", 2, State::Exited),
            ct("c3", "p", "s0", "a", 3, State::Running),
        ];
        let r = collect(&[sb("s0", "p", 0, true)], &containers, &live(&["p"]));
        assert_eq!(
            r,
            vec![
                Removal::Container {
                    id: "c1".into(),
                    pod_uid: "p".into()
                },
                Removal::Container {
                    id: "c0".into(),
                    pod_uid: "p".into()
                },
            ]
        );
    }

    #[test]
    fn only_the_latest_exited_instance_of_an_init_container_is_kept_across_sandboxes() {
        let containers = vec![
            ct("i0", "p", "s0", "init", 0, State::Exited),
            ct("i1", "p", "s0", "init", 1, State::Exited),
            ct("i2", "p", "s1", "init", 2, State::Exited),
            ct("a0", "p", "s1", "app", 0, State::Running),
        ];
        let sandboxes = [sb("s0", "p", 0, false), sb("s1", "p", 1, true)];
        let r = collect(&sandboxes, &containers, &live(&["p"]));
        let removed: Vec<&str> = r
            .iter()
            .filter_map(|x| match x {
                Removal::Container { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(removed, ["i1", "i0"]);
    }

    #[test]
    fn a_live_pods_newest_sandbox_is_kept_even_when_not_ready() {
        let r = collect(
            &[sb("s0", "p", 0, false), sb("s1", "p", 1, false)],
            &[],
            &live(&["p"]),
        );
        assert_eq!(
            r,
            vec![Removal::Sandbox {
                id: "s0".into(),
                pod_uid: "p".into()
            }]
        );
    }

    #[test]
    fn an_old_sandbox_holding_the_kept_dead_container_stays() {
        let containers = vec![ct("c0", "p", "s0", "a", 0, State::Exited)];
        let r = collect(
            &[sb("s0", "p", 0, false), sb("s1", "p", 1, true)],
            &containers,
            &live(&["p"]),
        );
        assert!(r.is_empty());
    }

    #[test]
    fn sandboxes_of_pods_that_are_gone_are_removed_once_stopped() {
        let r = collect(
            &[sb("s0", "gone", 0, false), sb("s1", "gone2", 0, true)],
            &[],
            &live(&[]),
        );
        assert_eq!(
            r,
            vec![Removal::Sandbox {
                id: "s0".into(),
                pod_uid: "gone".into()
            }]
        );
    }

    #[test]
    fn a_gone_pods_sandbox_with_a_running_container_waits_for_the_agent() {
        let containers = vec![ct("c0", "gone", "s0", "a", 0, State::Running)];
        assert!(collect(&[sb("s0", "gone", 0, false)], &containers, &live(&[])).is_empty());
    }
}
