//! PLEG: the pod lifecycle event generator.
//!
//! The agent relists sandboxes and containers from the runtime and hands
//! the result to [`Snapshot::from_records`]. [`diff`] compares two
//! snapshots and says which pods changed, so the agent wakes only those
//! pods' workers. [`Cadence`] decides when to relist and what to list
//! (issue #13):
//!
//! - Without runtime events (containerd 1.6 answers `GetContainerEvents`
//!   with Unimplemented) containers are listed every [`RELIST_PERIOD`]
//!   (1 s, kubelet's generic PLEG period). The answer is compared by a
//!   fingerprint of its (ID, state) pairs before anything is decoded, and
//!   when it did not change, `ListPodSandbox` is skipped too: a sandbox
//!   whose containers did not change changed only if it died behind
//!   picolet's back (its pause process killed), since picolet itself
//!   creates, stops and removes sandboxes and its workers observe that
//!   directly. kubelet's generic PLEG lists both every second and would see
//!   that within 1 s; here sandboxes are listed at least every
//!   [`SANDBOX_BACKSTOP`] (10 s), which bounds that case, and after the
//!   runtime came back.
//! - With runtime events (CRI-O, containerd >= 1.7), detected at start, an
//!   event triggers a relist at once and the timed relist becomes a
//!   backstop every [`EVENTED_RELIST_PERIOD`]. kubelet's evented PLEG uses
//!   300 s because its pod cache is fed from the events themselves; here
//!   the relist is still what feeds GC and orphan adoption, so the
//!   backstop lists containers every 10 s, and their fingerprint catches
//!   an event the stream lost. Sandboxes are listed fully only every
//!   [`EVENTED_SANDBOX_BACKSTOP`] (60 s, container GC's period): a sandbox
//!   that dies behind picolet's back is then seen within a minute, where
//!   kubelet's evented PLEG, which has nothing but the events and its
//!   300 s relist, may take five. The full relist every 10 s was a fifth
//!   of an idle hollow node's CPU (`perf`, 1,000 nodes with 10 pods each,
//!   docs/fleet.md).
//!   When the stream fails or ends, the 1 s relist resumes at once and the
//!   stream is retried with a back-off ([`STREAM_RETRY_INITIAL`] doubling
//!   to [`STREAM_RETRY_MAX`]).
//!
//!
//! The pod cache ([`observation_holds`]): a pod worker's periodic resync
//! (`syncFrequency`, once a minute) used to read its pod from the runtime
//! each time (filtered ListPodSandbox, ListContainers, and one
//! ContainerStatus per container: 90 of the 156 CRI calls of an idle
//! minute at 30 pods on containerd 1.6). As kubelet's pod cache does, a
//! timed resync now reuses the pod's last observation when the PLEG vouches
//! for it. The invariant: **a sync plans from an observation that is as
//! fresh as a runtime read would be, or it reads the runtime.** The last
//! observation is reused only when all of these hold:
//!
//! - the worker woke on its timer alone: a spec change, a deletion, a
//!   probe's verdict (liveness/startup kill, readiness), a PLEG event and
//!   the runtime coming back all wake it, and take the full path;
//! - the pod is not being deleted (termination always reads the runtime);
//! - the pod's last sync did nothing to the runtime, or ended with a fresh
//!   observation (the agent forgets the observation time when it acts, and
//!   records it after the closing read);
//! - a full PLEG relist *began after* that observation ended, and it shows
//!   exactly the observed sandboxes and containers (same IDs, same states;
//!   an unknown state never matches). Anything that changes afterwards is a
//!   difference between two relists, so the PLEG wakes the worker for it: a
//!   container that exits within 1 s, a sandbox that dies behind picolet's
//!   back within [`SANDBOX_BACKSTOP`].
//!
//! Only the CRI reads are skipped: the plan still runs, with the current
//! time and probe results, so a crash-loop back-off that expires on the
//! timer still restarts its container. What a reused observation cannot
//! show that a read would (exit code, timestamps) cannot change while the
//! IDs and states stay the same.
//!
//! This module is pure: no CRI types, no I/O, no clock (time comes in).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// A runtime object's state as PLEG sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Created but not started (containers only).
    Created,
    /// Running (a container) or ready (a sandbox).
    Running,
    /// Exited (a container) or not ready (a sandbox).
    Exited,
    /// The runtime could not tell.
    Unknown,
}

/// Whether a record is a sandbox or a container.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Sandbox,
    Container,
}

/// One sandbox or container in a relist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub id: String,
    pub pod_uid: String,
    pub kind: Kind,
    pub state: State,
}

/// The result of one relist, keyed by runtime ID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    records: BTreeMap<String, Record>,
    /// Every pod UID in `records`, kept so that asking costs nothing
    /// between relists.
    uids: BTreeSet<String>,
}

impl Snapshot {
    /// Builds a snapshot from relisted records.
    pub fn from_records(records: impl IntoIterator<Item = Record>) -> Self {
        let records: BTreeMap<String, Record> =
            records.into_iter().map(|r| (r.id.clone(), r)).collect();
        let uids = records.values().map(|r| r.pod_uid.clone()).collect();
        Snapshot { records, uids }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when nothing is known.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Every pod UID that has at least one sandbox or container, in order.
    pub fn pod_uids(&self) -> impl Iterator<Item = &str> {
        self.uids.iter().map(String::as_str)
    }
}

/// How often the containers are listed without runtime events (kubelet's
/// generic PLEG period).
pub const RELIST_PERIOD: Duration = Duration::from_secs(1);
/// The backstop relist while runtime events arrive.
pub const EVENTED_RELIST_PERIOD: Duration = Duration::from_secs(10);
/// The longest sandboxes go unlisted.
pub const SANDBOX_BACKSTOP: Duration = Duration::from_secs(10);
/// The longest sandboxes go unlisted while runtime events arrive.
pub const EVENTED_SANDBOX_BACKSTOP: Duration = Duration::from_secs(60);
/// The first wait before the event stream is tried again.
pub const STREAM_RETRY_INITIAL: Duration = Duration::from_secs(1);
/// The longest wait before the event stream is tried again.
pub const STREAM_RETRY_MAX: Duration = Duration::from_secs(60);

/// Where the runtime's event stream (`GetContainerEvents`) stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Events {
    /// Not asked yet.
    Unknown,
    /// The runtime does not have it (Unimplemented): relist every second,
    /// until the runtime is replaced (a reconnect asks again).
    Unsupported,
    /// The stream is open: relists are a backstop.
    Streaming,
    /// The stream failed or ended; it is tried again at `retry_at`.
    Broken { retry_at: Instant },
}

/// When to relist and what to list: the PLEG's schedule, advanced by what
/// happened (a relist, the event stream's fate).
#[derive(Clone, Debug)]
pub struct Cadence {
    pub events: Events,
    /// When sandboxes were last listed (`None`: never, or they must be).
    sandboxes_listed: Option<Instant>,
    /// The containers' fingerprint at the last full relist.
    fingerprint: Option<(u32, u64)>,
    /// The wait before the stream is tried again after its next failure.
    backoff: Duration,
}

impl Default for Cadence {
    fn default() -> Self {
        Cadence {
            events: Events::Unknown,
            sandboxes_listed: None,
            fingerprint: None,
            backoff: STREAM_RETRY_INITIAL,
        }
    }
}

impl Cadence {
    /// The wait between two timed relists.
    pub fn period(&self) -> Duration {
        match self.events {
            Events::Streaming => EVENTED_RELIST_PERIOD,
            _ => RELIST_PERIOD,
        }
    }

    /// Whether the containers just listed (their fingerprint; `None` when
    /// it could not be read) need a full relist: decoding them, listing
    /// sandboxes, diffing. No when nothing changed and sandboxes were
    /// listed within [`SANDBOX_BACKSTOP`] ([`EVENTED_SANDBOX_BACKSTOP`]
    /// while events arrive).
    pub fn needs_full_relist(&self, fingerprint: Option<(u32, u64)>, now: Instant) -> bool {
        let backstop = match self.events {
            Events::Streaming => EVENTED_SANDBOX_BACKSTOP,
            _ => SANDBOX_BACKSTOP,
        };
        let fresh = self
            .sandboxes_listed
            .is_some_and(|t| now.saturating_duration_since(t) < backstop);
        !(fresh && fingerprint.is_some() && fingerprint == self.fingerprint)
    }

    /// A full relist succeeded.
    pub fn relisted(&mut self, fingerprint: Option<(u32, u64)>, now: Instant) {
        self.fingerprint = fingerprint;
        self.sandboxes_listed = Some(now);
    }

    /// The runtime failed or came back: the next pass relists fully.
    pub fn forget(&mut self) {
        self.fingerprint = None;
        self.sandboxes_listed = None;
    }

    /// The event stream opened.
    pub fn stream_opened(&mut self) {
        self.events = Events::Streaming;
    }

    /// The runtime answered Unimplemented.
    pub fn stream_unsupported(&mut self) {
        self.events = Events::Unsupported;
    }

    /// The stream failed to open, failed or ended: back to the 1 s relist,
    /// and a retry after the back-off. The back-off starts over only when
    /// the stream had `delivered` events: a runtime that ends it at once
    /// (CRI-O with `enable_pod_events = false`) is asked less and less.
    pub fn stream_failed(&mut self, now: Instant, delivered: bool) {
        if delivered {
            self.backoff = STREAM_RETRY_INITIAL;
        }
        self.events = Events::Broken {
            retry_at: now + self.backoff,
        };
        self.backoff = (self.backoff * 2).min(STREAM_RETRY_MAX);
    }

    /// The connection to the runtime was made again (a restarted or
    /// upgraded runtime may have gained events): ask again.
    pub fn reconnected(&mut self) {
        if self.events == Events::Unsupported {
            self.events = Events::Unknown;
        }
        self.forget();
    }

    /// How long until the stream should be tried (again); `None` while it
    /// streams or when the runtime does not have it.
    pub fn stream_retry_in(&self, now: Instant) -> Option<Duration> {
        match self.events {
            Events::Unknown => Some(Duration::ZERO),
            Events::Broken { retry_at } => Some(retry_at.saturating_duration_since(now)),
            Events::Streaming | Events::Unsupported => None,
        }
    }
}

/// One sandbox or container as an observation or a relist shows it.
pub type Seen<'a> = (Kind, &'a str, State);

/// What decides whether a pod's timed resync may reuse its last
/// observation (see the module docs).
#[derive(Clone, Debug)]
pub struct Resync<'a> {
    /// The worker was woken (spec change, deletion, probe, PLEG event)
    /// rather than by its timer alone.
    pub woken: bool,
    /// The pod is being terminated.
    pub deleted: bool,
    /// When the pod's last observation ended; `None` when there is none,
    /// or the last sync acted on the runtime after it.
    pub observed_at: Option<Instant>,
    /// When the PLEG's last full relist began; `None` before the first.
    pub relisted_at: Option<Instant>,
    /// The pod's sandboxes and containers in its last observation.
    pub observed: &'a [Seen<'a>],
    /// The pod's sandboxes and containers in the PLEG's last full relist.
    pub relisted: &'a [Seen<'a>],
}

/// Whether a resync may plan from the pod's last observation instead of
/// reading the runtime.
pub fn observation_holds(r: &Resync) -> bool {
    if r.woken || r.deleted {
        return false;
    }
    let (Some(observed_at), Some(relisted_at)) = (r.observed_at, r.relisted_at) else {
        return false;
    };
    if relisted_at <= observed_at {
        return false;
    }
    if r.observed.iter().any(|(_, _, s)| *s == State::Unknown) {
        return false;
    }
    let set = |v: &[Seen]| {
        let mut v: Vec<(bool, String, State)> = v
            .iter()
            .map(|(k, id, s)| (*k == Kind::Sandbox, id.to_string(), *s))
            .collect();
        v.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        v
    };
    r.observed.len() == r.relisted.len() && set(r.observed) == set(r.relisted)
}

/// Whether a pod the agent has just taken on, not synced yet, may start
/// from an empty observation instead of reading the runtime (two filtered
/// list calls per new pod; issue #13, where 30 pods starting at once made
/// 60 of them while the runtime was busiest).
///
/// It may when the PLEG's last full relist (begun at `relisted_at`) shows
/// nothing of the pod, and began after the agent last forgot a pod
/// (`last_forgotten`). Only pod workers create sandboxes and containers
/// for a pod, and the pod's own worker has not acted yet; a worker that
/// had the same UID before (a static pod's manifest removed and written
/// back) ended before the relist began, so whatever it left is in it.
pub fn nothing_yet(
    relisted_at: Option<Instant>,
    last_forgotten: Option<Instant>,
    relisted: &[Seen],
) -> bool {
    let Some(relisted_at) = relisted_at else {
        return false;
    };
    relisted.is_empty() && last_forgotten.is_none_or(|f| f < relisted_at)
}

/// What happened to one sandbox or container between two relists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    ContainerStarted,
    ContainerDied,
    ContainerRemoved,
    ContainerChanged,
    SandboxChanged,
}

/// A pod lifecycle event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub pod_uid: String,
    pub id: String,
    pub event: EventType,
}

fn container_event(old: Option<State>, new: Option<State>) -> Option<EventType> {
    use State::*;
    match (old, new) {
        (o, n) if o == n => None,
        (_, Some(Running)) => Some(EventType::ContainerStarted),
        (_, Some(Exited)) => Some(EventType::ContainerDied),
        (Some(Running), None) => Some(EventType::ContainerDied),
        (Some(_), None) => Some(EventType::ContainerRemoved),
        _ => Some(EventType::ContainerChanged),
    }
}

/// Compares two relists. Events come in ID order; a container that died and
/// was removed between two relists yields one `ContainerDied`.
pub fn diff(old: &Snapshot, new: &Snapshot) -> Vec<Event> {
    let mut ids: Vec<&String> = old.records.keys().chain(new.records.keys()).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut events = Vec::new();
    for id in ids {
        let o = old.records.get(id);
        let n = new.records.get(id);
        let rec = n.or(o).expect("id comes from one of the snapshots");
        let event = match rec.kind {
            Kind::Container => container_event(o.map(|r| r.state), n.map(|r| r.state)),
            Kind::Sandbox => {
                (o.map(|r| r.state) != n.map(|r| r.state)).then_some(EventType::SandboxChanged)
            }
        };
        if let Some(event) = event {
            events.push(Event {
                pod_uid: rec.pod_uid.clone(),
                id: id.clone(),
                event,
            });
        }
    }
    events
}

/// The distinct pods named by `events`, in order of first appearance.
pub fn changed_pods(events: &[Event]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        if !out.iter().any(|u| u == &e.pod_uid) {
            out.push(e.pod_uid.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, pod: &str, state: State) -> Record {
        Record {
            id: id.into(),
            pod_uid: pod.into(),
            kind: Kind::Container,
            state,
        }
    }
    fn s(id: &str, pod: &str, state: State) -> Record {
        Record {
            id: id.into(),
            pod_uid: pod.into(),
            kind: Kind::Sandbox,
            state,
        }
    }

    #[test]
    fn identical_relists_produce_no_events() {
        let a =
            Snapshot::from_records([c("c1", "p1", State::Running), s("s1", "p1", State::Running)]);
        assert!(diff(&a, &a.clone()).is_empty());
    }

    #[test]
    fn a_new_running_container_is_reported_as_started() {
        let a = Snapshot::default();
        let b = Snapshot::from_records([c("c1", "p1", State::Running)]);
        assert_eq!(
            diff(&a, &b),
            vec![Event {
                pod_uid: "p1".into(),
                id: "c1".into(),
                event: EventType::ContainerStarted
            }]
        );
    }

    #[test]
    fn a_container_that_exits_is_reported_as_died() {
        let a = Snapshot::from_records([c("c1", "p1", State::Running)]);
        let b = Snapshot::from_records([c("c1", "p1", State::Exited)]);
        assert_eq!(diff(&a, &b)[0].event, EventType::ContainerDied);
    }

    #[test]
    fn a_running_container_that_vanishes_is_reported_as_died_not_removed() {
        let a = Snapshot::from_records([c("c1", "p1", State::Running)]);
        assert_eq!(
            diff(&a, &Snapshot::default())[0].event,
            EventType::ContainerDied
        );
    }

    #[test]
    fn an_exited_container_that_vanishes_is_reported_as_removed() {
        let a = Snapshot::from_records([c("c1", "p1", State::Exited)]);
        assert_eq!(
            diff(&a, &Snapshot::default())[0].event,
            EventType::ContainerRemoved
        );
    }

    #[test]
    fn a_sandbox_state_change_is_reported() {
        let a = Snapshot::from_records([s("s1", "p1", State::Running)]);
        let b = Snapshot::from_records([s("s1", "p1", State::Exited)]);
        assert_eq!(diff(&a, &b)[0].event, EventType::SandboxChanged);
    }

    #[test]
    fn only_the_affected_pods_are_named() {
        let a = Snapshot::from_records([
            c("c1", "p1", State::Running),
            c("c2", "p2", State::Running),
            c("c3", "p1", State::Running),
        ]);
        let b = Snapshot::from_records([
            c("c1", "p1", State::Exited),
            c("c2", "p2", State::Running),
            c("c3", "p1", State::Exited),
        ]);
        assert_eq!(changed_pods(&diff(&a, &b)), vec!["p1".to_string()]);
    }

    #[test]
    fn pod_uids_are_distinct_and_ordered() {
        let a = Snapshot::from_records([
            c("c1", "p2", State::Running),
            s("s1", "p1", State::Running),
            c("c2", "p1", State::Running),
        ]);
        assert_eq!(a.pod_uids().collect::<Vec<_>>(), vec!["p1", "p2"]);
    }

    #[test]
    fn an_unchanged_container_list_skips_the_full_relist_until_the_sandbox_backstop() {
        let t0 = Instant::now();
        let mut c = Cadence::default();
        assert!(c.needs_full_relist(Some((1, 7)), t0), "never relisted");
        c.relisted(Some((1, 7)), t0);
        assert!(!c.needs_full_relist(Some((1, 7)), t0 + RELIST_PERIOD));
        assert!(c.needs_full_relist(Some((2, 9)), t0 + RELIST_PERIOD));
        assert!(c.needs_full_relist(None, t0 + RELIST_PERIOD));
        assert!(c.needs_full_relist(Some((1, 7)), t0 + SANDBOX_BACKSTOP));
        c.forget();
        assert!(c.needs_full_relist(Some((1, 7)), t0 + RELIST_PERIOD));
    }

    #[test]
    fn while_events_arrive_sandboxes_are_listed_fully_once_a_minute() {
        let t0 = Instant::now();
        let mut c = Cadence::default();
        c.stream_opened();
        c.relisted(Some((1, 7)), t0);
        assert!(!c.needs_full_relist(Some((1, 7)), t0 + SANDBOX_BACKSTOP));
        assert!(c.needs_full_relist(Some((2, 9)), t0 + SANDBOX_BACKSTOP));
        assert!(c.needs_full_relist(Some((1, 7)), t0 + EVENTED_SANDBOX_BACKSTOP));
        c.stream_failed(t0 + SANDBOX_BACKSTOP, true);
        assert!(
            c.needs_full_relist(Some((1, 7)), t0 + SANDBOX_BACKSTOP),
            "without events, the 10 s bound again"
        );
    }

    #[test]
    fn events_make_the_relist_a_backstop_and_a_failure_brings_back_the_second() {
        let t0 = Instant::now();
        let mut c = Cadence::default();
        assert_eq!(c.stream_retry_in(t0), Some(Duration::ZERO));
        assert_eq!(c.period(), RELIST_PERIOD);
        c.stream_opened();
        assert_eq!(c.period(), EVENTED_RELIST_PERIOD);
        assert_eq!(c.stream_retry_in(t0), None);
        c.stream_failed(t0, true);
        assert_eq!(c.period(), RELIST_PERIOD);
        assert_eq!(c.stream_retry_in(t0), Some(STREAM_RETRY_INITIAL));
    }

    #[test]
    fn stream_retries_back_off_up_to_the_maximum_and_start_over_after_events() {
        let t0 = Instant::now();
        let mut c = Cadence::default();
        let mut waits = Vec::new();
        for _ in 0..10 {
            // Opened, then ended without an event: still backing off.
            c.stream_opened();
            c.stream_failed(t0, false);
            waits.push(c.stream_retry_in(t0).expect("a retry is due"));
        }
        assert_eq!(waits[0], STREAM_RETRY_INITIAL);
        assert_eq!(waits[1], STREAM_RETRY_INITIAL * 2);
        assert_eq!(*waits.last().expect("ten waits"), STREAM_RETRY_MAX);
        c.stream_opened();
        c.stream_failed(t0, true);
        assert_eq!(c.stream_retry_in(t0), Some(STREAM_RETRY_INITIAL));
    }

    #[test]
    fn a_runtime_without_events_is_asked_again_after_a_reconnect() {
        let mut c = Cadence::default();
        c.stream_unsupported();
        assert_eq!(c.stream_retry_in(Instant::now()), None);
        assert_eq!(c.period(), RELIST_PERIOD);
        c.reconnected();
        assert_eq!(c.stream_retry_in(Instant::now()), Some(Duration::ZERO));
    }

    #[test]
    fn a_created_container_is_reported_as_changed() {
        let b = Snapshot::from_records([c("c1", "p1", State::Created)]);
        assert_eq!(
            diff(&Snapshot::default(), &b)[0].event,
            EventType::ContainerChanged
        );
    }

    const RUNNING: [Seen<'static>; 2] = [
        (Kind::Sandbox, "s1", State::Running),
        (Kind::Container, "c1", State::Running),
    ];
    const RUNNING_LISTED: [Seen<'static>; 2] = [
        (Kind::Container, "c1", State::Running),
        (Kind::Sandbox, "s1", State::Running),
    ];
    const EXITED: [Seen<'static>; 2] = [
        (Kind::Sandbox, "s1", State::Running),
        (Kind::Container, "c1", State::Exited),
    ];
    const SANDBOX_DIED: [Seen<'static>; 2] = [
        (Kind::Sandbox, "s1", State::Exited),
        (Kind::Container, "c1", State::Running),
    ];
    const REPLACED: [Seen<'static>; 2] = [
        (Kind::Sandbox, "s1", State::Running),
        (Kind::Container, "c2", State::Running),
    ];
    const EXTRA: [Seen<'static>; 3] = [
        (Kind::Sandbox, "s1", State::Running),
        (Kind::Container, "c1", State::Running),
        (Kind::Container, "c2", State::Exited),
    ];
    const UNKNOWN: [Seen<'static>; 2] = [
        (Kind::Sandbox, "s1", State::Running),
        (Kind::Container, "c1", State::Unknown),
    ];

    /// One row's change to the base case.
    type Change = fn(&mut Resync<'static>);

    /// A timed resync of a pod with one sandbox and one running container,
    /// observed at t0 and relisted at t0 + 1 s, identical: the base case
    /// each row below changes one thing of.
    fn resync_row(change: Change) -> bool {
        let t0 = Instant::now();
        let mut r = Resync {
            woken: false,
            deleted: false,
            observed_at: Some(t0),
            relisted_at: Some(t0 + Duration::from_secs(1)),
            observed: &RUNNING,
            relisted: &RUNNING_LISTED,
        };
        change(&mut r);
        observation_holds(&r)
    }

    #[test]
    fn a_timed_resync_reuses_an_observation_the_pleg_vouches_for() {
        assert!(resync_row(|_| {}), "same IDs and states, in any order");
    }

    #[test]
    fn a_resync_reads_the_runtime_when_anything_could_have_changed() {
        let rows: [(&str, Change); 11] = [
            ("woken by a spec change, probe or PLEG event", |r| {
                r.woken = true
            }),
            ("being deleted", |r| r.deleted = true),
            ("never observed, or acted since", |r| r.observed_at = None),
            ("no relist yet", |r| r.relisted_at = None),
            ("the relist began before the observation ended", |r| {
                r.relisted_at = r.observed_at
            }),
            ("a container exited", |r| r.relisted = &EXITED),
            ("the sandbox died alone", |r| r.relisted = &SANDBOX_DIED),
            ("a container was replaced", |r| r.relisted = &REPLACED),
            ("a container appeared", |r| r.relisted = &EXTRA),
            ("the pod is gone from the runtime", |r| r.relisted = &[]),
            ("the state was unknown", |r| {
                r.observed = &UNKNOWN;
                r.relisted = &UNKNOWN;
            }),
        ];
        for (why, change) in rows {
            assert!(!resync_row(change), "{why}: the runtime must be read");
        }
    }

    #[test]
    fn a_new_pod_starts_from_nothing_only_when_a_relist_after_the_last_forgotten_pod_lacks_it() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(1);
        // (what, the relist began, a pod was last forgotten, the relist shows, may start from nothing)
        type Row<'a> = (
            &'a str,
            Option<Instant>,
            Option<Instant>,
            &'a [Seen<'a>],
            bool,
        );
        let rows: [Row; 5] = [
            (
                "relisted, nothing of it, nothing forgotten",
                Some(t0),
                None,
                &[],
                true,
            ),
            (
                "relisted after the last pod was forgotten",
                Some(later),
                Some(t0),
                &[],
                true,
            ),
            ("no relist yet", None, None, &[], false),
            (
                "a pod was forgotten after the relist began",
                Some(t0),
                Some(later),
                &[],
                false,
            ),
            (
                "the relist shows something of it",
                Some(t0),
                None,
                &RUNNING_LISTED,
                false,
            ),
        ];
        for (what, relisted_at, forgotten, relisted, want) in rows {
            assert_eq!(
                nothing_yet(relisted_at, forgotten, relisted),
                want,
                "{what}"
            );
        }
    }
}
