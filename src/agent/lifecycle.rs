//! A pod's lifecycle on this node, as the agent keeps it per pod
//! ([`Lifecycle`]), with its transitions and the questions the other loops
//! ask of it (may it run, is its deletion under way, do its requests count,
//! which grace period stops it). Pure: no I/O, no clock, no agent state;
//! the pod worker (`sync.rs`) has one sync per state, the sources, the
//! eviction task and the deadline check make the transitions.
//!
//! Upstream kubelet's pod workers name three stages: `SyncPod` (run it),
//! `SyncTerminatingPod` (stop it) and `SyncTerminatedPod` (clean up).
//! [`Lifecycle::Running`] is the first. [`Lifecycle::Evicted`] is a pod the
//! node stopped for good that its source still wants: it stays stopped
//! (stopped again when found running) and reports phase Failed.
//! [`Lifecycle::Deleted`] is terminating and terminated in one sync: its
//! containers stop, its sandboxes, cgroup and directories are removed and
//! the agent forgets it.

use crate::node::eviction::Condition;

/// Why and how the node stopped a pod for good.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Evicted {
    /// The status message.
    pub message: String,
    /// The grace period its containers are stopped with.
    pub grace: i64,
    /// The pressure that evicted it; a static pod comes back when it ends.
    /// `None`: its `activeDeadlineSeconds` passed (reason
    /// `DeadlineExceeded`, no `DisruptionTarget`), for good.
    pub condition: Option<Condition>,
    /// When (Unix seconds), for the `DisruptionTarget` condition.
    pub at_unix: i64,
}

/// Where a pod is in its life on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Lifecycle {
    /// Its source wants it and the node runs it: each sync plans and acts
    /// (kubelet's `SyncPod`).
    Running,
    /// Its source wants it, but the node stopped it for good (node
    /// pressure, or its `activeDeadlineSeconds` passed): each sync keeps
    /// it stopped; its status says why.
    Evicted(Evicted),
    /// No source wants it any more (removed from its source, deletion
    /// asked in the API, or an orphan found in the runtime): the next sync
    /// stops it, removes it from the runtime and forgets it (kubelet's
    /// `SyncTerminatingPod` then `SyncTerminatedPod`). An eviction that came
    /// before is kept: it still sets the status and the grace period, and
    /// the pod stays stopped when its source wants it again.
    Deleted { evicted: Option<Evicted> },
}

impl Lifecycle {
    /// A pod no source wants (an orphan, or a pod whose deletion is asked
    /// before it was ever run).
    pub const DELETED: Lifecycle = Lifecycle::Deleted { evicted: None };

    /// Its source no longer wants it: terminate it, then forget it. A
    /// deleted pod stays deleted.
    pub fn delete(&mut self) {
        let evicted = match std::mem::replace(self, Lifecycle::DELETED) {
            Lifecycle::Running => None,
            Lifecycle::Evicted(ev) => Some(ev),
            Lifecycle::Deleted { evicted } => evicted,
        };
        *self = Lifecycle::Deleted { evicted };
    }

    /// Its source wants it (again). Returns whether it was deleted, i.e.
    /// whether it is taken up again; an evicted pod stays evicted.
    pub fn revive(&mut self) -> bool {
        match self {
            Lifecycle::Deleted { evicted } => {
                *self = match evicted.take() {
                    Some(ev) => Lifecycle::Evicted(ev),
                    None => Lifecycle::Running,
                };
                true
            }
            Lifecycle::Running | Lifecycle::Evicted(_) => false,
        }
    }

    /// The node stops it for good (`why` replaces an earlier eviction). A
    /// deleted pod stays deleted, with this eviction's status and grace.
    pub fn evict(&mut self, why: Evicted) {
        match self {
            Lifecycle::Deleted { evicted } => *evicted = Some(why),
            Lifecycle::Running | Lifecycle::Evicted(_) => *self = Lifecycle::Evicted(why),
        }
    }

    /// Runs a pod evicted for a pressure again when `pressure_on` says that
    /// pressure is over; returns that pressure when it did. A pod stopped
    /// for its `activeDeadlineSeconds`, or deleted, is not run again.
    pub fn readmit(&mut self, pressure_on: impl Fn(Condition) -> bool) -> Option<Condition> {
        let Lifecycle::Evicted(ev) = self else {
            return None;
        };
        let condition = ev.condition.filter(|c| !pressure_on(*c))?;
        *self = Lifecycle::Running;
        Some(condition)
    }

    /// Should the node run it: is it neither evicted nor deleted?
    pub fn should_run(&self) -> bool {
        matches!(self, Lifecycle::Running)
    }

    /// Does a source want it (running or evicted, not deleted)? Only a
    /// wanted pod is probed, counts as admitted, keeps its leftovers in the
    /// runtime from GC, and is woken by the objects it references.
    pub fn is_wanted(&self) -> bool {
        !self.is_deleted()
    }

    /// Is its termination under way (its status says it is terminating)?
    pub fn is_deleted(&self) -> bool {
        matches!(self, Lifecycle::Deleted { .. })
    }

    /// The eviction that stopped it, if any (deleted or not).
    pub fn evicted(&self) -> Option<&Evicted> {
        match self {
            Lifecycle::Evicted(ev) => Some(ev),
            Lifecycle::Deleted { evicted } => evicted.as_ref(),
            Lifecycle::Running => None,
        }
    }

    /// Do its requests count towards the QoS cgroups' CPU shares? A
    /// running pod's do; a deleted one's while it is still `active` in the
    /// runtime; an evicted one's never.
    pub fn requests_count(&self, active: bool) -> bool {
        match self {
            Lifecycle::Running => true,
            Lifecycle::Evicted(_) | Lifecycle::Deleted { evicted: Some(_) } => false,
            Lifecycle::Deleted { evicted: None } => active,
        }
    }

    /// The grace period its containers are stopped with: the pod's own
    /// (`pod_grace`), or the eviction's when shorter.
    pub fn grace_period(&self, pod_grace: i64) -> i64 {
        self.evicted()
            .map_or(pod_grace, |ev| ev.grace.min(pod_grace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pressure(grace: i64) -> Evicted {
        Evicted {
            message: "low on memory".into(),
            grace,
            condition: Some(Condition::MemoryPressure),
            at_unix: 100,
        }
    }

    fn deadline() -> Evicted {
        Evicted {
            message: "deadline".into(),
            grace: 30,
            condition: None,
            at_unix: 100,
        }
    }

    fn states() -> Vec<(&'static str, Lifecycle)> {
        vec![
            ("running", Lifecycle::Running),
            ("evicted", Lifecycle::Evicted(pressure(5))),
            ("deleted", Lifecycle::DELETED),
            (
                "deleted after eviction",
                Lifecycle::Deleted {
                    evicted: Some(pressure(5)),
                },
            ),
        ]
    }

    #[test]
    fn each_state_answers_the_other_loops_questions() {
        // (should_run, is_wanted, is_deleted, evicted?, requests count
        // while active, requests count once stopped)
        let want = [
            ("running", (true, true, false, false, true, true)),
            ("evicted", (false, true, false, true, false, false)),
            ("deleted", (false, false, true, false, true, false)),
            (
                "deleted after eviction",
                (false, false, true, true, false, false),
            ),
        ];
        for ((name, l), (wname, w)) in states().into_iter().zip(want) {
            assert_eq!(name, wname);
            let got = (
                l.should_run(),
                l.is_wanted(),
                l.is_deleted(),
                l.evicted().is_some(),
                l.requests_count(true),
                l.requests_count(false),
            );
            assert_eq!(got, w, "{name}");
        }
    }

    #[test]
    fn deleting_keeps_an_eviction_and_reviving_gives_it_back() {
        let want = [
            ("running", Lifecycle::DELETED, Lifecycle::Running),
            (
                "evicted",
                Lifecycle::Deleted {
                    evicted: Some(pressure(5)),
                },
                Lifecycle::Evicted(pressure(5)),
            ),
            ("deleted", Lifecycle::DELETED, Lifecycle::Running),
            (
                "deleted after eviction",
                Lifecycle::Deleted {
                    evicted: Some(pressure(5)),
                },
                Lifecycle::Evicted(pressure(5)),
            ),
        ];
        for ((name, mut l), (_, deleted, revived)) in states().into_iter().zip(want) {
            l.delete();
            assert_eq!(l, deleted, "{name} deleted");
            assert!(l.revive(), "{name}: a deleted pod is taken up again");
            assert_eq!(l, revived, "{name} revived");
        }
    }

    #[test]
    fn reviving_a_pod_that_is_not_deleted_changes_nothing() {
        for (name, mut l) in states().into_iter().take(2) {
            let before = l.clone();
            assert!(!l.revive(), "{name}");
            assert_eq!(l, before, "{name}");
        }
    }

    #[test]
    fn evicting_stops_a_pod_and_a_deleted_pod_stays_deleted() {
        let want = [
            ("running", Lifecycle::Evicted(deadline())),
            ("evicted", Lifecycle::Evicted(deadline())),
            (
                "deleted",
                Lifecycle::Deleted {
                    evicted: Some(deadline()),
                },
            ),
            (
                "deleted after eviction",
                Lifecycle::Deleted {
                    evicted: Some(deadline()),
                },
            ),
        ];
        for ((name, mut l), (_, after)) in states().into_iter().zip(want) {
            l.evict(deadline());
            assert_eq!(l, after, "{name}");
        }
    }

    #[test]
    fn only_a_pod_evicted_for_a_pressure_that_ended_runs_again() {
        let ended = |_| false;
        let on = |_| true;
        let cases: [(&str, Lifecycle, bool, Option<Condition>); 5] = [
            (
                "pressure over",
                Lifecycle::Evicted(pressure(5)),
                false,
                Some(Condition::MemoryPressure),
            ),
            (
                "pressure still on",
                Lifecycle::Evicted(pressure(5)),
                true,
                None,
            ),
            (
                "deadline passed",
                Lifecycle::Evicted(deadline()),
                false,
                None,
            ),
            (
                "deleted after eviction",
                Lifecycle::Deleted {
                    evicted: Some(pressure(5)),
                },
                false,
                None,
            ),
            ("running", Lifecycle::Running, false, None),
        ];
        for (name, mut l, pressure_on, want) in cases {
            let before = l.clone();
            let got = if pressure_on {
                l.readmit(on)
            } else {
                l.readmit(ended)
            };
            assert_eq!(got, want, "{name}");
            let after = if want.is_some() {
                Lifecycle::Running
            } else {
                before
            };
            assert_eq!(l, after, "{name}");
        }
    }

    #[test]
    fn an_eviction_shortens_the_grace_period_never_lengthens_it() {
        let cases = [
            (Lifecycle::Running, 30, 30),
            (Lifecycle::Evicted(pressure(5)), 30, 5),
            (Lifecycle::Evicted(pressure(60)), 30, 30),
            (
                Lifecycle::Deleted {
                    evicted: Some(pressure(5)),
                },
                30,
                5,
            ),
            (Lifecycle::DELETED, 30, 30),
        ];
        for (l, pod_grace, want) in cases {
            assert_eq!(l.grace_period(pod_grace), want, "{l:?}");
        }
    }
}
