//! Probe state: kubelet's prober worker as a pure state machine.
//!
//! One [`Worker`] per (container, probe type). The prober loop asks
//! [`Worker::step`] whether a probe is due and allowed at `now`, runs the
//! probe (exec, httpGet, tcpSocket, grpc) itself, and feeds the outcome to
//! [`Worker::record`], which says when the published result flips and
//! whether the container must be killed. Nothing here does I/O or reads a
//! clock: time comes in as an `Instant`.
//!
//! kubelet's rules:
//! - readiness starts as Failure, liveness as Success, startup as Unknown;
//! - no probe runs before `initialDelaySeconds` after the container started;
//! - while a startup probe has not succeeded, liveness and readiness wait;
//!   once it succeeded it is not run again for that container;
//! - a result flips only after `successThreshold` consecutive successes or
//!   `failureThreshold` consecutive failures;
//! - a liveness or startup failure kills the container and puts the worker
//!   on hold until a new container (a new ID) appears, which resets it;
//! - probes tick on a fixed grid (`next = previous + period`), so they do
//!   not drift; a late tick is skipped rather than queued;
//! - a readiness probe can be run at once, off the grid ([`Worker::trigger`]):
//!   kubelet's prober manager does so at every status it generates for a
//!   started, running container that is not ready yet, so Ready follows a
//!   startup probe's success within moments rather than a period later;
//! - a published change is acted on at once ([`Change::follow_up`]): a
//!   startup result or a kill syncs the pod, a readiness result writes the
//!   pod's status, as kubelet's sync loop does with its probe managers'
//!   updates (never at the next periodic resync).

use std::time::{Duration, Instant};

/// Which probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeType {
    Liveness,
    Readiness,
    Startup,
}

impl ProbeType {
    /// kubelet's spelling in events and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeType::Liveness => "Liveness",
            ProbeType::Readiness => "Readiness",
            ProbeType::Startup => "Startup",
        }
    }
}

/// A probe's (or a worker's published) result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
    Unknown,
}

/// The timing parameters of a v1 Probe, defaulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(10),
            timeout: Duration::from_secs(1),
            success_threshold: 1,
            failure_threshold: 3,
        }
    }
}

impl Params {
    /// From the API's fields (seconds; `None` = kubelet default). Liveness
    /// and startup probes must have successThreshold 1.
    pub fn from_api(
        kind: ProbeType,
        initial_delay: Option<i32>,
        period: Option<i32>,
        timeout: Option<i32>,
        success: Option<i32>,
        failure: Option<i32>,
    ) -> Params {
        let secs = |v: Option<i32>, d: u64| {
            Duration::from_secs(v.filter(|v| *v > 0).map(|v| v as u64).unwrap_or(d))
        };
        let success = if kind == ProbeType::Readiness {
            success.filter(|v| *v > 0).unwrap_or(1) as u32
        } else {
            1
        };
        Params {
            initial_delay: Duration::from_secs(initial_delay.unwrap_or(0).max(0) as u64),
            period: secs(period, 10),
            timeout: secs(timeout, 1),
            success_threshold: success,
            failure_threshold: failure.filter(|v| *v > 0).unwrap_or(3) as u32,
        }
    }
}

/// What the worker knows of its container at a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerView<'a> {
    pub id: &'a str,
    pub running: bool,
    /// When the container started running.
    pub started_at: Instant,
    /// The startup probe has succeeded (or there is none).
    pub started: bool,
}

/// What the loop should do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Run the probe now, with this timeout.
    Probe { timeout: Duration },
    /// Nothing to do until `next`.
    Wait { next: Instant },
}

/// A published change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    pub result: Outcome,
    /// Liveness or startup failed: kill the container.
    pub kill: bool,
}

/// What the node does at once about a [`Change`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FollowUp {
    /// Sync the pod now (which writes its status): a kill to carry out, or
    /// a container that has started, after which a native sidecar's
    /// followers start and readiness is probed.
    SyncPod,
    /// Write the pod's status now: a container's `ready`, the pod's
    /// `ContainersReady` and `Ready` changed.
    WriteStatus,
}

impl Change {
    /// What this change of a `kind` probe calls for at once (kubelet's sync
    /// loop: liveness and startup updates sync the pod, readiness updates
    /// set the container's readiness in the status manager). `None`: a
    /// liveness result that kills nothing changes nothing shown.
    pub fn follow_up(self, kind: ProbeType) -> Option<FollowUp> {
        match kind {
            _ if self.kill => Some(FollowUp::SyncPod),
            ProbeType::Startup => Some(FollowUp::SyncPod),
            ProbeType::Readiness => Some(FollowUp::WriteStatus),
            ProbeType::Liveness => None,
        }
    }
}

/// Whether a status just generated calls for an immediate readiness probe
/// of a container (kubelet's `UpdatePodStatus`): it has a readiness probe
/// that has not succeeded (`ready` is `Some(false)`), it has started (no
/// startup probe, or one that succeeded), and it runs.
pub fn wants_readiness_now(ready: Option<bool>, started: Option<bool>, running: bool) -> bool {
    ready == Some(false) && started != Some(false) && running
}

/// One probe of one container.
#[derive(Clone, Debug)]
pub struct Worker {
    kind: ProbeType,
    params: Params,
    container_id: Option<String>,
    last: Outcome,
    run: u32,
    result: Outcome,
    on_hold: bool,
    next_due: Instant,
    /// [`Worker::trigger`] asked for a probe off the grid.
    triggered: bool,
}

impl Worker {
    /// A worker whose first tick is at `first_due` (the caller spreads
    /// workers over the period with jitter so they do not fire together).
    pub fn new(kind: ProbeType, params: Params, first_due: Instant) -> Worker {
        Worker {
            kind,
            params,
            container_id: None,
            last: Outcome::Unknown,
            run: 0,
            result: Self::initial(kind),
            on_hold: false,
            next_due: first_due,
            triggered: false,
        }
    }

    fn initial(kind: ProbeType) -> Outcome {
        match kind {
            ProbeType::Readiness => Outcome::Failure,
            ProbeType::Liveness => Outcome::Success,
            ProbeType::Startup => Outcome::Unknown,
        }
    }

    /// The probe type.
    pub fn kind(&self) -> ProbeType {
        self.kind
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The published result.
    pub fn result(&self) -> Outcome {
        self.result
    }

    /// When the next tick is due.
    pub fn next_due(&self) -> Instant {
        self.next_due
    }

    /// Asks for a probe at the next step even before the next tick, which
    /// stays where it was on the grid (kubelet's manual trigger of a
    /// readiness worker). The usual gates still apply: a container not
    /// started, not running, on hold or within its initial delay is not
    /// probed, and the request is then dropped.
    pub fn trigger(&mut self) {
        self.triggered = true;
    }

    fn reset(&mut self, id: Option<&str>) {
        self.container_id = id.map(str::to_string);
        self.last = Outcome::Unknown;
        self.run = 0;
        self.result = Self::initial(self.kind);
        self.on_hold = false;
    }

    /// Advances the tick grid past `now`, skipping missed ticks.
    fn advance(&mut self, now: Instant) {
        let period = self.params.period.max(Duration::from_millis(100));
        self.next_due += period;
        if self.next_due <= now {
            let behind = now - self.next_due;
            let skip = behind.as_nanos() / period.as_nanos() + 1;
            self.next_due += period * skip as u32;
        }
    }

    /// Decides what happens at `now`. Returns the published result change
    /// caused by the container itself (a new container resets the result;
    /// a stopped one makes readiness fail) alongside the step.
    pub fn step(
        &mut self,
        container: Option<&ContainerView>,
        now: Instant,
    ) -> (Step, Option<Change>) {
        let before = self.result;
        let step = self.decide(container, now);
        let change = (self.result != before).then_some(Change {
            result: self.result,
            kill: false,
        });
        (step, change)
    }

    fn decide(&mut self, container: Option<&ContainerView>, now: Instant) -> Step {
        let triggered = std::mem::take(&mut self.triggered);
        if now >= self.next_due {
            self.advance(now);
        } else if !triggered {
            return Step::Wait {
                next: self.next_due,
            };
        }
        let wait = Step::Wait {
            next: self.next_due,
        };
        let Some(c) = container else {
            self.reset(None);
            return wait;
        };
        if self.container_id.as_deref() != Some(c.id) {
            self.reset(Some(c.id));
        }
        if !c.running {
            if self.kind == ProbeType::Readiness {
                self.result = Outcome::Failure;
            }
            return wait;
        }
        if self.on_hold {
            return wait;
        }
        match self.kind {
            ProbeType::Startup if c.started => return wait,
            ProbeType::Liveness | ProbeType::Readiness if !c.started => return wait,
            _ => {}
        }
        if now.saturating_duration_since(c.started_at) < self.params.initial_delay {
            return wait;
        }
        Step::Probe {
            timeout: self.params.timeout,
        }
    }

    /// Records a probe outcome; returns the change when the result flips.
    pub fn record(&mut self, outcome: Outcome) -> Option<Change> {
        if outcome == self.last {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = outcome;
            self.run = 1;
        }
        let threshold = match outcome {
            Outcome::Success => self.params.success_threshold,
            Outcome::Failure => self.params.failure_threshold,
            Outcome::Unknown => return None,
        };
        if self.run < threshold || self.result == outcome {
            return None;
        }
        self.result = outcome;
        let kill = outcome == Outcome::Failure
            && matches!(self.kind, ProbeType::Liveness | ProbeType::Startup);
        if kill {
            self.on_hold = true;
            self.run = 0;
        }
        Some(Change {
            result: outcome,
            kill,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(period: u64, success: u32, failure: u32) -> Params {
        Params {
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(period),
            timeout: Duration::from_secs(1),
            success_threshold: success,
            failure_threshold: failure,
        }
    }

    fn view(id: &str, t0: Instant) -> ContainerView<'_> {
        ContainerView {
            id,
            running: true,
            started_at: t0,
            started: true,
        }
    }

    /// Runs `outcomes` one per period and returns the changes.
    fn drive(w: &mut Worker, t0: Instant, outcomes: &[Outcome]) -> Vec<Option<Change>> {
        let mut out = Vec::new();
        for (i, o) in outcomes.iter().enumerate() {
            let now = t0 + Duration::from_secs(i as u64 * w.params.period.as_secs());
            let c = view("c1", t0);
            let (step, _) = w.step(Some(&c), now);
            assert!(matches!(step, Step::Probe { .. }), "tick {i}: {step:?}");
            out.push(w.record(*o));
        }
        out
    }

    #[test]
    fn readiness_starts_failed_and_flips_after_success_threshold() {
        let t0 = Instant::now();
        let mut w = Worker::new(ProbeType::Readiness, params(1, 2, 3), t0);
        assert_eq!(w.result(), Outcome::Failure);
        let changes = drive(&mut w, t0, &[Outcome::Success, Outcome::Success]);
        assert_eq!(
            changes,
            vec![
                None,
                Some(Change {
                    result: Outcome::Success,
                    kill: false
                })
            ]
        );
    }

    #[test]
    fn liveness_kills_only_after_failure_threshold_consecutive_failures() {
        let t0 = Instant::now();
        let mut w = Worker::new(ProbeType::Liveness, params(1, 1, 3), t0);
        let o = [
            Outcome::Failure,
            Outcome::Failure,
            Outcome::Success,
            Outcome::Failure,
            Outcome::Failure,
            Outcome::Failure,
        ];
        let changes = drive(&mut w, t0, &o);
        assert_eq!(&changes[..5], &[None, None, None, None, None]);
        assert_eq!(
            changes[5],
            Some(Change {
                result: Outcome::Failure,
                kill: true
            })
        );
    }

    #[test]
    fn a_killed_container_holds_the_worker_until_a_new_container_appears() {
        let t0 = Instant::now();
        let mut w = Worker::new(ProbeType::Liveness, params(1, 1, 1), t0);
        drive(&mut w, t0, &[Outcome::Failure]);
        let (step, _) = w.step(Some(&view("c1", t0)), t0 + Duration::from_secs(1));
        assert!(matches!(step, Step::Wait { .. }), "on hold");
        let (step, change) = w.step(Some(&view("c2", t0)), t0 + Duration::from_secs(2));
        assert!(
            matches!(step, Step::Probe { .. }),
            "new container probes again"
        );
        assert_eq!(
            change,
            Some(Change {
                result: Outcome::Success,
                kill: false
            }),
            "result reset"
        );
    }

    #[test]
    fn nothing_runs_before_the_initial_delay() {
        let t0 = Instant::now();
        let mut p = params(1, 1, 3);
        p.initial_delay = Duration::from_secs(5);
        let mut w = Worker::new(ProbeType::Readiness, p, t0);
        for s in 0..5 {
            let (step, _) = w.step(Some(&view("c1", t0)), t0 + Duration::from_secs(s));
            assert!(matches!(step, Step::Wait { .. }), "second {s}");
        }
        let (step, _) = w.step(Some(&view("c1", t0)), t0 + Duration::from_secs(5));
        assert!(matches!(step, Step::Probe { .. }));
    }

    /// Steps a readiness worker (initialDelaySeconds 15, periodSeconds 10)
    /// every 100 ms from `from` to 40 s after its container started,
    /// triggering it at `triggers` (seconds after the start), with a probe
    /// that always succeeds; returns when it first ran, in ms after the
    /// container started.
    fn first_readiness_probe(first_due_ms: u64, from_ms: u64, triggers: &[u64]) -> Option<u64> {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let p = Params::from_api(ProbeType::Readiness, Some(15), None, None, None, None);
        let mut w = Worker::new(ProbeType::Readiness, p, at(first_due_ms));
        let c = view("c1", t0);
        for ms in (from_ms..=40_000).step_by(100) {
            if triggers.iter().any(|s| s * 1000 == ms) {
                w.trigger();
            }
            if let (Step::Probe { .. }, _) = w.step(Some(&c), at(ms)) {
                let change = w.record(Outcome::Success);
                assert_eq!(change.map(|c| c.result), Some(Outcome::Success));
                return Some(ms);
            }
        }
        None
    }

    #[test]
    fn readiness_is_not_probed_before_the_initial_delay_whatever_the_grid_or_the_triggers() {
        // (first tick, worker created, triggers): the worker of a pod seen
        // before its container started, or of a pod changed after.
        let cases: &[(u64, u64, &[u64])] = &[
            (0, 0, &[]),
            (3_700, 0, &[]),
            (9_900, 0, &[]),
            (0, 0, &[1, 2, 5, 14]),
            (6_000, 0, &[14, 15]),
            (20_000, 12_000, &[13]),
            (12_300, 12_000, &[]),
            (0, 0, &[15]),
        ];
        for (first, from, triggers) in cases {
            let ran = first_readiness_probe(*first, *from, triggers)
                .unwrap_or_else(|| panic!("{first} {from} {triggers:?}: never probed"));
            assert!(
                ran >= 15_000,
                "{first} {from} {triggers:?}: probed {ran} ms after the start"
            );
            assert!(
                ran < 25_000,
                "{first} {from} {triggers:?}: probed at the first tick or trigger after the delay, not {ran}"
            );
        }
        assert_eq!(
            first_readiness_probe(0, 0, &[15]),
            Some(15_000),
            "a trigger right at the end of the delay probes at once"
        );
    }

    #[test]
    fn liveness_and_readiness_wait_for_the_startup_probe() {
        let t0 = Instant::now();
        let mut w = Worker::new(ProbeType::Liveness, params(1, 1, 1), t0);
        let c = ContainerView {
            id: "c1",
            running: true,
            started_at: t0,
            started: false,
        };
        assert!(matches!(w.step(Some(&c), t0).0, Step::Wait { .. }));
        let mut s = Worker::new(ProbeType::Startup, params(1, 1, 1), t0);
        assert!(matches!(s.step(Some(&c), t0).0, Step::Probe { .. }));
        let started = ContainerView { started: true, ..c };
        assert!(
            matches!(
                s.step(Some(&started), t0 + Duration::from_secs(1)).0,
                Step::Wait { .. }
            ),
            "startup done"
        );
    }

    #[test]
    fn readiness_is_probed_at_once_when_triggered_after_the_startup_probe_succeeded() {
        // kubelet: startupProbe and readinessProbe, periodSeconds 10 both.
        let t0 = Instant::now();
        let secs = |s: u64| t0 + Duration::from_secs(s);
        let mut startup = Worker::new(ProbeType::Startup, params(10, 1, 30), t0);
        let mut ready = Worker::new(ProbeType::Readiness, params(10, 1, 3), secs(3));
        let starting = ContainerView {
            id: "c1",
            running: true,
            started_at: t0,
            started: false,
        };
        // t=3: readiness waits for the startup probe.
        assert!(matches!(
            ready.step(Some(&starting), secs(3)).0,
            Step::Wait { .. }
        ));
        // t=10: the startup probe succeeds; the pod syncs at once.
        assert!(matches!(
            startup.step(Some(&starting), secs(10)).0,
            Step::Probe { .. }
        ));
        let change = startup.record(Outcome::Success).expect("started");
        assert_eq!(
            change.follow_up(ProbeType::Startup),
            Some(FollowUp::SyncPod)
        );
        // The sync's status: started, running, not ready: trigger readiness.
        assert!(wants_readiness_now(Some(false), Some(true), true));
        ready.trigger();
        let started = ContainerView {
            started: true,
            ..starting
        };
        let (step, _) = ready.step(Some(&started), secs(10));
        assert!(
            matches!(step, Step::Probe { .. }),
            "probed at 10 s, not at its next tick (13 s): {step:?}"
        );
        let change = ready.record(Outcome::Success).expect("ready");
        assert_eq!(
            change.follow_up(ProbeType::Readiness),
            Some(FollowUp::WriteStatus),
            "the status is written at once, not at the next resync"
        );
        assert_eq!(ready.next_due(), secs(13), "the grid does not move");
        assert!(matches!(
            ready.step(Some(&started), secs(11)).0,
            Step::Wait { .. }
        ));
        assert!(matches!(
            ready.step(Some(&started), secs(13)).0,
            Step::Probe { .. }
        ));
    }

    #[test]
    fn a_trigger_does_not_probe_a_container_that_has_not_started() {
        let t0 = Instant::now();
        let mut ready = Worker::new(ProbeType::Readiness, params(10, 1, 3), t0);
        let starting = ContainerView {
            id: "c1",
            running: true,
            started_at: t0,
            started: false,
        };
        ready.step(Some(&starting), t0);
        ready.trigger();
        let at = t0 + Duration::from_secs(1);
        assert!(matches!(
            ready.step(Some(&starting), at).0,
            Step::Wait { .. }
        ));
        let started = ContainerView {
            started: true,
            ..starting
        };
        assert!(
            matches!(ready.step(Some(&started), at).0, Step::Wait { .. }),
            "the trigger was used up"
        );
    }

    #[test]
    fn only_a_started_running_unready_container_wants_readiness_now() {
        assert!(wants_readiness_now(Some(false), None, true));
        assert!(wants_readiness_now(Some(false), Some(true), true));
        assert!(
            !wants_readiness_now(Some(false), Some(false), true),
            "not started"
        );
        assert!(
            !wants_readiness_now(Some(false), Some(true), false),
            "not running"
        );
        assert!(!wants_readiness_now(Some(true), Some(true), true), "ready");
        assert!(!wants_readiness_now(None, None, true), "no readiness probe");
    }

    #[test]
    fn liveness_results_that_kill_nothing_need_no_follow_up() {
        let live = Change {
            result: Outcome::Success,
            kill: false,
        };
        assert_eq!(live.follow_up(ProbeType::Liveness), None);
        let kill = Change {
            result: Outcome::Failure,
            kill: true,
        };
        assert_eq!(kill.follow_up(ProbeType::Liveness), Some(FollowUp::SyncPod));
        let unready = Change {
            result: Outcome::Failure,
            kill: false,
        };
        assert_eq!(
            unready.follow_up(ProbeType::Readiness),
            Some(FollowUp::WriteStatus)
        );
    }

    #[test]
    fn a_startup_failure_kills_the_container() {
        let t0 = Instant::now();
        let mut s = Worker::new(ProbeType::Startup, params(1, 1, 2), t0);
        let c = ContainerView {
            id: "c1",
            running: true,
            started_at: t0,
            started: false,
        };
        s.step(Some(&c), t0);
        assert_eq!(s.record(Outcome::Failure), None);
        s.step(Some(&c), t0 + Duration::from_secs(1));
        assert_eq!(
            s.record(Outcome::Failure),
            Some(Change {
                result: Outcome::Failure,
                kill: true
            })
        );
    }

    #[test]
    fn a_stopped_container_is_not_ready() {
        let t0 = Instant::now();
        let mut w = Worker::new(ProbeType::Readiness, params(1, 1, 1), t0);
        drive(&mut w, t0, &[Outcome::Success]);
        let stopped = ContainerView {
            running: false,
            ..view("c1", t0)
        };
        let (_, change) = w.step(Some(&stopped), t0 + Duration::from_secs(1));
        assert_eq!(
            change,
            Some(Change {
                result: Outcome::Failure,
                kill: false
            })
        );
    }

    #[test]
    fn ticks_stay_on_a_fixed_grid_and_late_ticks_are_skipped_not_queued() {
        let t0 = Instant::now();
        let mut w = Worker::new(ProbeType::Readiness, params(1, 1, 1), t0);
        let c = view("c1", t0);
        // Run 350 ms late: the next tick is still on the 1 s grid.
        w.step(Some(&c), t0 + Duration::from_millis(350));
        assert_eq!(w.next_due(), t0 + Duration::from_secs(1));
        // Stall for 5.5 s: one probe, then the next grid point after now.
        let (step, _) = w.step(Some(&c), t0 + Duration::from_millis(6500));
        assert!(matches!(step, Step::Probe { .. }));
        assert_eq!(w.next_due(), t0 + Duration::from_secs(7));
    }

    #[test]
    fn liveness_and_startup_ignore_a_success_threshold_above_one() {
        let p = Params::from_api(ProbeType::Liveness, None, Some(1), None, Some(5), None);
        assert_eq!(p.success_threshold, 1);
        let p = Params::from_api(ProbeType::Readiness, None, None, None, Some(5), Some(0));
        assert_eq!(
            (p.success_threshold, p.failure_threshold, p.period),
            (5, 3, Duration::from_secs(10))
        );
    }
}
