//! Pure: the list/watch state machine, one design for every resource.
//!
//! In the spirit of client-go's reflector and kube-rs's watcher, but
//! sans-I/O: the driver feeds [`Input`]s (a list page, a watch event, the
//! end of a stream, a failure, or a tick) together with the time and a
//! random number, and [`Reflector::step`] answers with the [`Event`]s for the
//! consumer and what to do [`Next`] (send a request, keep reading, or wait).
//! No clock, no socket, no randomness inside; every transition is a table
//! test below.
//!
//! The protocol:
//!
//! - Without a resourceVersion to resume from, get the full set: the
//!   streaming list (a WATCH with `sendInitialEvents=true`,
//!   `resourceVersionMatch=NotOlderThan`, ending with a bookmark annotated
//!   `k8s.io/initial-events-end: "true"`) while the server is not known to
//!   refuse it, else LIST with `limit`/`continue` pages. Pages (or initial
//!   events) are accumulated and replace the store at once when complete;
//!   the difference against the store, deletions included, is emitted,
//!   then [`Event::Synced`].
//! - Then WATCH from the set's resourceVersion with `allowWatchBookmarks`
//!   and a random `timeoutSeconds` in 5-10 min; every event and bookmark
//!   advances the resourceVersion. After any disconnect the watch resumes
//!   from the last resourceVersion seen: nothing is relisted.
//! - `410 Gone` / "too old resource version" (as an HTTP status or as an
//!   ERROR event) on a watch that resumed from a resourceVersion is the
//!   normal resume signal, not a failure: the resourceVersion is forgotten
//!   and the relist follows within [`GONE_JITTER`] (random, so a fleet
//!   does not relist in lock-step), without touching the back-off; the
//!   diff against the store says what was deleted meanwhile. A `410` to a
//!   request that already relists is a failure like any other.
//! - Every failure waits first: 800 ms doubling to 30 s, plus up to as much
//!   again of random jitter (client-go's 1.0 jitter factor), reset after
//!   2 min without failure, so a fleet does not reconnect in lock-step.
//!   After a failure of the link (no answer), the wait ends early when
//!   another request on the same connection gets an answer: the driver
//!   calls [`Reflector::link_recovered`], and the retry follows within
//!   [`crate::apiserver::client::link::RECOVERY_JITTER`] with the back-off reset.
//! - A server that clearly does not do the streaming list is remembered:
//!   LIST from then on. The clear signals are a plain bookmark before the
//!   initial events end (what a server that ignores `sendInitialEvents`
//!   sends) and an answer saying the request's form is refused (400, 405,
//!   406, 415, 422 as a server with the WatchList feature off answers,
//!   501: [`ApiError::refuses_request_form`]). Any other error status
//!   (401, a 403 while the Node authorizer does not yet know of a pod
//!   just bound, 404, 429) is about this request, not about the server:
//!   the streaming list is sent again after the back-off. A 5xx, a broken
//!   connection or a stream ending before the initial events retries with
//!   a LIST once (client-go's fallback), then streaming again.
//!
//! The store is never emptied by an error, an empty reply or a timeout:
//! only a DELETED event or a completed (re)list that lacks an object
//! removes it. A store restored from the disk cache ([`Reflector::resume`])
//! watches from the cached resourceVersion, and counts as synced at the
//! first bookmark (the server has sent everything up to it) or after the
//! relist a `410` causes.
//!
//! The store keeps no `metadata.managedFields`: nothing in picolet reads
//! them, and as the API server sends a pod (kubectl's fields plus the
//! node's own status fields) they are the largest part of it once decoded
//! (a `serde_json::Value` tree). Every object is stripped of them as it
//! enters ([`Input::Page`], [`Input::Event`], [`Reflector::resume`]), so
//! the store, the events and the disk cache never hold them (issue #8's
//! memory budget).
//!
//! What the reflector itself compares of a stored object is its uid and
//! resourceVersion ([`Version`], kept for every object). A consumer that
//! keeps its own form of each object from the events (the pod source) can
//! have the store keep only those ([`Reflector::keep_versions_only`]): each
//! object is then held once in the process, and a relist's objects are
//! moved into the events rather than copied. A deletion a relist finds is
//! then told with a stub (name, namespace, uid, resourceVersion). Issue #8,
//! x86_64 musl, 110 API pods: anonymous memory 4.6 -> 3.8 MiB, VmRSS
//! 8.8 -> 7.9-8.1 MiB, VmHWM 9.6 -> 8.7-8.8 MiB (see `apiserver::pods`).
//!
//! ResourceVersions are compared as numbers when both are decimal (as
//! Kubernetes now documents them to be comparable), so an event older than
//! the stored object, replayed after resuming from an older
//! resourceVersion, does not roll the object back; otherwise only equality
//! is used.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::reflector_backoff::{unit, Backoff};
use super::reflector_objects::{is_newer, rv, stub, uid, versions_of};
pub use super::reflector_objects::{without_managed_fields, Object, ObjectKey, Version};
pub use super::reflector_protocol::{Event, Failure, Input, Next, Request, State, Step, Streaming};
use super::watch::{Bookmark, ListPage, WatchEvent};

/// LIST page size (client-go's default).
pub const PAGE_SIZE: u32 = 500;
/// A watch asks the server to end it after a random time in this range.
pub const WATCH_TIMEOUT_MIN: u32 = 300;
pub const WATCH_TIMEOUT_MAX: u32 = 600;
/// Back-off after a failure: initial delay, cap, and how long without
/// failure resets it (client-go's reflector values).
pub const BACKOFF_INITIAL: Duration = Duration::from_millis(800);
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);
pub const BACKOFF_RESET: Duration = Duration::from_secs(120);
/// The most a relist waits after a watch answered `410 Gone`.
pub const GONE_JITTER: Duration = Duration::from_secs(1);
/// A watch that ends cleanly sooner than this, without a single event, is
/// treated as a failure (a proxy closing streams at once must not make us
/// reconnect in a tight loop).
pub const MIN_WATCH: Duration = Duration::from_secs(1);

/// A watch's `timeoutSeconds` from `rand`: 300..=600.
fn watch_timeout(rand: u64) -> u32 {
    WATCH_TIMEOUT_MIN + (rand % u64::from(WATCH_TIMEOUT_MAX - WATCH_TIMEOUT_MIN + 1)) as u32
}

/// The list/watch state machine and the store it keeps current.
#[derive(Clone, Debug)]
pub struct Reflector<K> {
    state: State<K>,
    /// Each object boxed: a B-tree node holds 11 values inline whether
    /// used or not, and a Pod is ~2.4 KB inline (issue #8: 110 pods
    /// took ~0.45 MiB of nodes, a box each is ~0.26 MiB).
    store: BTreeMap<ObjectKey, Box<K>>,
    /// The version of every object in the store, also when the store keeps
    /// no objects ([`Reflector::keep_versions_only`]).
    versions: BTreeMap<ObjectKey, Version>,
    /// Set by [`Reflector::keep_versions_only`]: the store keeps no
    /// objects, and a deletion found by a relist is told with this stub.
    versions_only: Option<fn(&ObjectKey, &Version) -> K>,
    /// Where a watch resumes; `None`: the next request (re)lists.
    resource_version: Option<String>,
    streaming: Streaming,
    /// The last streaming list failed: the retry is a plain LIST.
    list_next: bool,
    backoff: Backoff,
    synced: bool,
    page_size: u32,
    /// What the store keeps of each object (see [`Reflector::with_slimming`]).
    slim: fn(K) -> K,
}

impl<K: Object> Default for Reflector<K> {
    fn default() -> Self {
        Reflector::new()
    }
}

impl<K: Object> Reflector<K> {
    /// A reflector with an empty store: the first request lists.
    pub fn new() -> Self {
        Reflector {
            state: State::Idle,
            store: BTreeMap::new(),
            versions: BTreeMap::new(),
            versions_only: None,
            resource_version: None,
            streaming: Streaming::Untried,
            list_next: false,
            backoff: Backoff::new(),
            synced: false,
            page_size: PAGE_SIZE,
            slim: without_managed_fields,
        }
    }

    /// A reflector whose store is restored (from the disk cache) at
    /// `resource_version`: the first request resumes the watch from there.
    /// Objects without a name are dropped.
    pub fn resume(objects: impl IntoIterator<Item = K>, resource_version: String) -> Self {
        let mut r = Reflector::new();
        r.store = objects
            .into_iter()
            .map(without_managed_fields)
            .filter_map(|o| Some((ObjectKey::of(&o)?, Box::new(o))))
            .collect();
        r.versions = versions_of(&r.store);
        r.resource_version = Some(resource_version).filter(|v| !v.is_empty());
        r
    }

    /// Keeps only what `slim` leaves of every object, in the store and in
    /// the events (and so in the cache), instead of dropping `managedFields`
    /// alone. A resource whose users need a few fields says so here: the
    /// pod source keeps a pod's phase, not its whole status. Objects already
    /// in the store (restored from a cache written before) are slimmed now.
    pub fn with_slimming(mut self, slim: fn(K) -> K) -> Self {
        self.slim = slim;
        let store = std::mem::take(&mut self.store);
        self.store = store
            .into_iter()
            .map(|(k, o)| (k, Box::new(slim(*o))))
            .collect();
        self
    }

    /// LIST pages of `n` objects instead of [`PAGE_SIZE`].
    pub fn with_page_size(mut self, n: u32) -> Self {
        self.page_size = n.max(1);
        self
    }

    /// Use plain LIST, never the streaming list.
    pub fn without_streaming_list(mut self) -> Self {
        self.streaming = Streaming::Unsupported;
        self
    }

    /// From now on the store keeps only each object's uid and
    /// resourceVersion (what the reflector compares), not the object: for a
    /// consumer that keeps its own form of every object from the events, so
    /// that each object is held once (issue #8's memory budget: the pod
    /// source). Returns the objects held so far (restored from the cache),
    /// which no event repeats. A deletion a relist finds is told with a
    /// stub: the object's name, namespace, uid and resourceVersion.
    pub fn keep_versions_only(&mut self) -> Vec<K>
    where
        K: Default,
    {
        self.versions_only = Some(stub::<K>);
        std::mem::take(&mut self.store)
            .into_values()
            .map(|o| *o)
            .collect()
    }

    /// The current copy of the objects (empty after
    /// [`Reflector::keep_versions_only`]).
    pub fn store(&self) -> &BTreeMap<ObjectKey, Box<K>> {
        &self.store
    }

    /// The version of every object in the store.
    pub fn versions(&self) -> &BTreeMap<ObjectKey, Version> {
        &self.versions
    }

    /// The resourceVersion a watch would resume from (`None`: relist).
    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }

    /// Whether the store has been authoritative at least once.
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    pub fn state(&self) -> &State<K> {
        &self.state
    }

    pub fn streaming(&self) -> Streaming {
        self.streaming
    }

    /// Advances the machine by one input at `now`; `rand` is a fresh random
    /// number (watch timeouts, back-off jitter).
    pub fn step(&mut self, now: Instant, rand: u64, input: Input<K>) -> Step<K> {
        let mut events = Vec::new();
        let next = match input {
            Input::Tick => self.tick(now, rand),
            Input::Page(mut page) => {
                page.items = page.items.into_iter().map(self.slim).collect();
                self.page(now, rand, page, &mut events)
            }
            Input::Event(ev) => {
                let ev = match ev {
                    WatchEvent::Added(o) => WatchEvent::Added((self.slim)(o)),
                    WatchEvent::Modified(o) => WatchEvent::Modified((self.slim)(o)),
                    WatchEvent::Deleted(o) => WatchEvent::Deleted((self.slim)(o)),
                    other => other,
                };
                self.event(now, rand, ev, &mut events)
            }
            Input::Ended => self.ended(now, rand),
            Input::Failed(f) => self.failed(now, rand, f),
        };
        Step { events, next }
    }

    /// What to do when nothing new arrived.
    fn current(&self, now: Instant) -> Next {
        match &self.state {
            State::Waiting { until } => Next::Wait(*until),
            State::Idle => Next::Wait(now),
            _ => Next::Continue,
        }
    }

    /// Another request on the same connection got an answer at `now`
    /// while this reflector waits out a back-off: after a failure of the
    /// link (not an error status, which the link's return does not
    /// change), the back-off is reset and the retry comes within
    /// [`crate::apiserver::client::link::RECOVERY_JITTER`]. Returns what to do next.
    pub fn link_recovered(&mut self, now: Instant, rand: u64) -> Next {
        if let State::Waiting { until } = self.state {
            if self.backoff.after_link_failure() {
                self.backoff = Backoff::new();
                let soon = now + super::reflector_backoff::RECOVERY_JITTER.mul_f64(unit(rand));
                let until = until.min(soon);
                self.state = State::Waiting { until };
            }
        }
        self.current(now)
    }

    fn tick(&mut self, now: Instant, rand: u64) -> Next {
        match &self.state {
            State::Waiting { until } if now < *until => Next::Wait(*until),
            State::Waiting { .. } | State::Idle => self.start(now, rand),
            _ => Next::Continue,
        }
    }

    /// Sends the request the reflector needs now.
    fn start(&mut self, now: Instant, rand: u64) -> Next {
        let timeout_seconds = watch_timeout(rand);
        match &self.resource_version {
            Some(rv) => {
                let resource_version = rv.clone();
                self.state = State::Watching {
                    started: now,
                    events: false,
                };
                Next::Send(Request::Watch {
                    resource_version,
                    timeout_seconds,
                })
            }
            None if self.streaming != Streaming::Unsupported && !self.list_next => {
                self.state = State::StreamingList {
                    acc: BTreeMap::new(),
                    started: now,
                };
                Next::Send(Request::StreamingList { timeout_seconds })
            }
            None => {
                self.list_next = false;
                self.state = State::Listing {
                    acc: BTreeMap::new(),
                    continue_token: None,
                };
                Next::Send(Request::List {
                    limit: self.page_size,
                    continue_token: None,
                })
            }
        }
    }

    fn page(
        &mut self,
        now: Instant,
        rand: u64,
        page: ListPage<K>,
        out: &mut Vec<Event<K>>,
    ) -> Next {
        let State::Listing { acc, .. } = &mut self.state else {
            return self.current(now);
        };
        for o in page.items {
            match ObjectKey::of(&o) {
                Some(k) => {
                    acc.insert(k, Box::new(o));
                }
                None => log::warn!("{} without a name in a list; ignored", K::KIND),
            }
        }
        if let Some(token) = page.continue_token {
            let acc = std::mem::take(acc);
            self.state = State::Listing {
                acc,
                continue_token: Some(token.clone()),
            };
            return Next::Send(Request::List {
                limit: self.page_size,
                continue_token: Some(token),
            });
        }
        let State::Listing { acc, .. } = std::mem::replace(&mut self.state, State::Idle) else {
            unreachable!("matched above");
        };
        self.replace(acc, page.resource_version, out);
        self.start(now, rand)
    }

    /// A complete set replaces the store: emit the difference and Synced.
    fn replace(
        &mut self,
        new: BTreeMap<ObjectKey, Box<K>>,
        resource_version: String,
        out: &mut Vec<Event<K>>,
    ) {
        let mut old = std::mem::take(&mut self.store);
        let old_versions = std::mem::take(&mut self.versions);
        let versions_only = self.versions_only;
        // The last known state of a deleted object: the stored one, or a
        // stub when the store keeps versions only.
        let mut last_known = |k: &ObjectKey, v: &Version| match (old.remove(k), versions_only) {
            (Some(o), _) => *o,
            (None, Some(stub)) => stub(k, v),
            (None, None) => unreachable!("a stored version without its object"),
        };
        // The keys applied, in order; their objects are taken from `new`
        // at the end (moved, when the store keeps versions only: a relist
        // of every pod is then not held twice).
        let mut applied = Vec::new();
        for (k, o) in &new {
            let o: &K = o;
            match old_versions.get(k) {
                None => applied.push(k.clone()),
                Some(prev) if prev.uid.as_deref() != uid(o) => {
                    out.push(Event::Deleted(last_known(k, prev)));
                    applied.push(k.clone());
                }
                Some(prev) if prev.resource_version.as_deref() != rv(o) || rv(o).is_none() => {
                    applied.push(k.clone())
                }
                Some(_) => {}
            }
        }
        for (k, prev) in &old_versions {
            if !new.contains_key(k) {
                out.push(Event::Deleted(last_known(k, prev)));
            }
        }
        self.versions = versions_of(&new);
        if self.versions_only.is_none() {
            for k in &applied {
                if let Some(o) = new.get(k) {
                    out.push(Event::Applied(K::clone(o)));
                }
            }
            self.store = new;
        } else {
            let mut new = new;
            for k in &applied {
                if let Some(o) = new.remove(k) {
                    out.push(Event::Applied(*o));
                }
            }
        }
        out.push(Event::Synced);
        self.resource_version = Some(resource_version);
        self.synced = true;
    }

    fn event(
        &mut self,
        now: Instant,
        rand: u64,
        ev: WatchEvent<K>,
        out: &mut Vec<Event<K>>,
    ) -> Next {
        match &mut self.state {
            State::StreamingList { acc, started } => match ev {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                    if let Some(k) = ObjectKey::of(&o) {
                        acc.insert(k, Box::new(o));
                    }
                    Next::Continue
                }
                WatchEvent::Deleted(o) => {
                    if let Some(k) = ObjectKey::of(&o) {
                        acc.remove(&k);
                    }
                    Next::Continue
                }
                WatchEvent::Bookmark(Bookmark {
                    resource_version,
                    initial_events_end: true,
                }) => {
                    let started = *started;
                    let acc = std::mem::take(acc);
                    self.streaming = Streaming::Supported;
                    self.state = State::Watching {
                        started,
                        events: true,
                    };
                    self.replace(acc, resource_version, out);
                    Next::Continue
                }
                WatchEvent::Bookmark(_) => {
                    log::info!(
                        "the API server ignores sendInitialEvents for {}: using LIST",
                        K::URL_PATH_SEGMENT
                    );
                    self.streaming = Streaming::Unsupported;
                    self.start(now, rand)
                }
                WatchEvent::Error(e) => self.failed(now, rand, Failure::Status(e)),
            },
            State::Watching { events, .. } => {
                *events = true;
                match ev {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                        self.advance(rv(&o));
                        self.apply(o, out);
                        Next::Continue
                    }
                    WatchEvent::Deleted(o) => {
                        self.advance(rv(&o));
                        self.delete(o, out);
                        Next::Continue
                    }
                    WatchEvent::Bookmark(b) => {
                        self.advance(Some(&b.resource_version));
                        if !self.synced {
                            self.synced = true;
                            out.push(Event::Synced);
                        }
                        Next::Continue
                    }
                    WatchEvent::Error(e) => self.failed(now, rand, Failure::Status(e)),
                }
            }
            _ => self.current(now),
        }
    }

    fn advance(&mut self, resource_version: Option<&str>) {
        if let Some(v) = resource_version.filter(|v| !v.is_empty()) {
            self.resource_version = Some(v.to_string());
        }
    }

    fn apply(&mut self, o: K, out: &mut Vec<Event<K>>) {
        let Some(k) = ObjectKey::of(&o) else {
            log::warn!("{} without a name in a watch event; ignored", K::KIND);
            return;
        };
        if let Some(prev) = self.versions.get(&k) {
            let stale = prev.uid.as_deref() == uid(&o)
                && match (rv(&o), prev.resource_version.as_deref()) {
                    (Some(new), Some(old)) => !is_newer(new, old),
                    _ => false,
                };
            if stale {
                return;
            }
        }
        self.versions.insert(k.clone(), Version::of(&o));
        if self.versions_only.is_none() {
            self.store.insert(k, Box::new(o.clone()));
        }
        out.push(Event::Applied(o));
    }

    fn delete(&mut self, o: K, out: &mut Vec<Event<K>>) {
        let Some(k) = ObjectKey::of(&o) else {
            return;
        };
        let same = match self.versions.get(&k) {
            Some(prev) => uid(&o).is_none() || prev.uid.as_deref() == uid(&o),
            None => false,
        };
        if same {
            self.versions.remove(&k);
            self.store.remove(&k);
            out.push(Event::Deleted(o));
        }
    }

    fn ended(&mut self, now: Instant, rand: u64) -> Next {
        match &self.state {
            State::Watching { started, events }
                if *events || now.saturating_duration_since(*started) >= MIN_WATCH =>
            {
                self.start(now, rand)
            }
            State::Watching { .. } | State::StreamingList { .. } => {
                self.failed(now, rand, Failure::Transport)
            }
            _ => self.current(now),
        }
    }

    fn failed(&mut self, now: Instant, rand: u64, f: Failure) -> Next {
        match &self.state {
            State::Listing { .. } | State::StreamingList { .. } | State::Watching { .. } => {}
            _ => return self.current(now),
        }
        let resumed =
            matches!(self.state, State::Watching { .. }) && self.resource_version.is_some();
        if matches!(&f, Failure::Status(e) if e.is_gone()) && resumed {
            // The normal resume signal: relist now (jittered), no back-off.
            self.resource_version = None;
            let until = now + GONE_JITTER.mul_f64(unit(rand));
            self.state = State::Waiting { until };
            return Next::Wait(until);
        }
        if matches!(self.state, State::StreamingList { .. }) {
            match &f {
                Failure::Status(e) if e.refuses_request_form() => {
                    log::info!(
                        "the API server refuses the streaming list of {} ({e}): using LIST",
                        K::URL_PATH_SEGMENT
                    );
                    self.streaming = Streaming::Unsupported;
                }
                // 401, 403, 404, 429...: about this request now, not the
                // server's support; a LIST would meet the same answer.
                Failure::Status(e) if e.code < 500 => {}
                _ => self.list_next = true,
            }
        }
        if let Failure::Status(e) = &f {
            if e.is_gone() {
                self.resource_version = None;
            }
        }
        let until = now + self.backoff.fail(now, rand, f == Failure::Transport);
        self.state = State::Waiting { until };
        Next::Wait(until)
    }
}

#[cfg(test)]
mod tests;
