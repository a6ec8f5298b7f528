//! The link to one API server as every loop on its [`Client`] shares it:
//! when it last answered, the dial back-off in force, and the counters
//! `/metrics` shows. Nothing here does I/O; time comes in as an argument.
//!
//! - Dial back-off: 1 s doubling to 4 s; each wait is drawn within the
//!   upper half of the current step ([`dial_wait`]), so it never exceeds
//!   4 s and a fleet whose shared uplink returns does not dial in
//!   lock-step. The wait counts from the failed dial's start
//!   ([`next_dial`]): a dial that hung until its timeout is followed by
//!   the next at once. A failed TLS handshake is a failed dial like a
//!   refused connect. The cap is what a node's return costs: the first
//!   dial after the link comes back is at most 4 s away, however long the
//!   outage was, so the node converges within about 5 s (the chaos soak
//!   measured 7.5 s with the cap at 30 s: the next dial was still seconds
//!   away). The client dials again by itself at the back-off's end while
//!   the link is down (`Client`'s redial), not when some loop's own
//!   retry comes round (the Lease's is up to 7 s, a watch's 30 s). A dial
//!   into a dead link costs a SYN; one every 2-4 s is nothing next to a
//!   node's idle traffic, and only while the link is down.
//! - Every successful exchange (a dial, or any answer with a status)
//!   records the time and wakes the loops waiting out a back-off after a
//!   link failure ([`Link::recovered`]): they retry within
//!   [`RECOVERY_JITTER`] instead of after their own back-off.
//! - What the log says about an outage ([`OfflineLog`]): one warning at
//!   the first failed dial, one every [`OFFLINE_REPORT_EVERY`] while the
//!   API server stays unreachable (with the count of failed dials), one
//!   line when it answers again. The loops on the link say nothing of
//!   their own about a failure while it is down ([`Link::is_down`]).
//!
//! [`Client`]: super::transport::Client

use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The first wait after a failed dial.
pub const DIAL_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// The longest wait between dials (see the module docs for why 4 s).
pub const DIAL_BACKOFF_MAX: Duration = Duration::from_secs(4);
pub use crate::apiserver::listwatch::reflector_backoff::RECOVERY_JITTER;

/// How often the warning that the API server is still unreachable is
/// repeated.
pub const OFFLINE_REPORT_EVERY: Duration = Duration::from_secs(300);

/// What to log about the link's reachability, from [`OfflineLog`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reachability {
    /// A dial failed and the link was up (or had never been tried).
    Unreachable,
    /// Still unreachable: `failures` failed dials over `down_for`.
    StillUnreachable { failures: u64, down_for: Duration },
    /// It answers again after `down_for` and `failures` failed dials.
    Back { failures: u64, down_for: Duration },
}

/// An outage in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Outage {
    since: Instant,
    failures: u64,
    reported: Instant,
}

/// The outage log's state: pure, fed with failed dials and answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OfflineLog {
    outage: Option<Outage>,
}

impl OfflineLog {
    /// A dial failed at `now`: what to log, if anything.
    pub fn failed(&mut self, now: Instant) -> Option<Reachability> {
        let Some(o) = &mut self.outage else {
            self.outage = Some(Outage {
                since: now,
                failures: 1,
                reported: now,
            });
            return Some(Reachability::Unreachable);
        };
        o.failures += 1;
        if now.saturating_duration_since(o.reported) < OFFLINE_REPORT_EVERY {
            return None;
        }
        o.reported = now;
        Some(Reachability::StillUnreachable {
            failures: o.failures,
            down_for: now.saturating_duration_since(o.since),
        })
    }

    /// The API server answered at `now`: what to log, if anything.
    pub fn answered(&mut self, now: Instant) -> Option<Reachability> {
        let o = self.outage.take()?;
        Some(Reachability::Back {
            failures: o.failures,
            down_for: now.saturating_duration_since(o.since),
        })
    }

    /// Since when it is unreachable, and how many dials failed since.
    pub fn outage(&self) -> Option<(Instant, u64)> {
        self.outage.map(|o| (o.since, o.failures))
    }
}

/// The wait after a failed dial at back-off step `step`, with `unit` a
/// random number in [0, 1): within [step/2, step], never above
/// [`DIAL_BACKOFF_MAX`].
pub fn dial_wait(step: Duration, unit: f64) -> Duration {
    step.min(DIAL_BACKOFF_MAX)
        .mul_f64(0.5 + 0.5 * unit.clamp(0.0, 1.0))
}

/// When the next dial may start, after one that started at `started` and
/// failed at `now`: [`dial_wait`] counts from the failed attempt's start,
/// so attempts start at most once per back-off step. A dial that failed
/// fast (a refused connect) waits out nearly the whole step; one that hung
/// until its timeout (a blackholed link, longer than any step) is followed
/// by the next at once, so one dial is always under way while the link is
/// silent and the link's return is met by a handshake already sent.
pub fn next_dial(started: Instant, now: Instant, step: Duration, unit: f64) -> Instant {
    (started + dial_wait(step, unit)).max(now)
}

/// The next back-off step after `step`.
pub fn next_step(step: Duration) -> Duration {
    (step * 2).min(DIAL_BACKOFF_MAX)
}

/// What the link's metrics show, at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkMetrics {
    /// Watches opened from a resourceVersion (a resume or the watch after
    /// a list).
    pub watch_reconnects: u64,
    /// Full lists (LIST or streaming list) started.
    pub relists: u64,
    /// Seconds since the API server last answered; `None` before it ever did.
    pub since_contact: Option<f64>,
    /// The dial back-off in force, seconds (0 when none).
    pub backoff: f64,
}

impl LinkMetrics {
    /// Appends the Prometheus text of these metrics to `out`.
    pub fn render(&self, out: &mut String) {
        let families: [(&str, &str, &str, Option<f64>); 4] = [
            (
                "picolet_apiserver_watch_reconnects_total",
                "counter",
                "Watches of the API server opened from a resourceVersion.",
                Some(self.watch_reconnects as f64),
            ),
            (
                "picolet_apiserver_relists_total",
                "counter",
                "Full lists (LIST or streaming list) of a resource from the API server.",
                Some(self.relists as f64),
            ),
            (
                "picolet_apiserver_seconds_since_last_contact",
                "gauge",
                "Seconds since the API server last answered (absent before the first answer).",
                self.since_contact,
            ),
            (
                "picolet_apiserver_backoff_seconds",
                "gauge",
                "The back-off before the next dial of the API server (0 when none).",
                Some(self.backoff),
            ),
        ];
        for (name, kind, help, value) in families {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            if let Some(v) = value {
                let _ = writeln!(out, "{name} {v}");
            }
        }
    }
}

/// The shared state of the link (one per [`super::transport::Client`]).
#[derive(Debug, Default)]
pub struct Link {
    last_success: Cell<Option<Instant>>,
    backoff_until: Cell<Option<Instant>>,
    watch_reconnects: Cell<u64>,
    relists: Cell<u64>,
    generation: Cell<u64>,
    waiters: RefCell<Vec<Waker>>,
    offline: Cell<OfflineLog>,
}

impl Link {
    /// The API server answered at `now`: wakes every [`Link::recovered`].
    /// Says [`Reachability::Back`] when this ends an outage.
    pub fn succeeded(&self, now: Instant) -> Option<Reachability> {
        self.last_success.set(Some(now));
        self.backoff_until.set(None);
        self.generation.set(self.generation.get().wrapping_add(1));
        for w in self.waiters.borrow_mut().drain(..) {
            w.wake();
        }
        let mut log = self.offline.get();
        let said = log.answered(now);
        self.offline.set(log);
        said
    }

    /// A dial (connect, TLS or HTTP handshake) failed at `now`: what to
    /// log about it, if anything ([`OfflineLog::failed`]).
    pub fn dial_failed(&self, now: Instant) -> Option<Reachability> {
        let mut log = self.offline.get();
        let said = log.failed(now);
        self.offline.set(log);
        said
    }

    /// The last dial failed, and nothing answered since: a loop's failure
    /// now is the outage the link reports, not one of its own to log.
    pub fn is_down(&self) -> bool {
        self.offline.get().outage().is_some()
    }

    /// Since when the API server is unreachable, and how many dials
    /// failed since; `None` while it answers.
    pub fn outage(&self) -> Option<(Instant, u64)> {
        self.offline.get().outage()
    }

    /// The link's state as `picolet get node` shows it (`apiServer` of
    /// `GET /node`): `state` is `reachable`, `unreachable` or `not
    /// contacted yet`; times are Unix seconds, from `now_unix` at `now`.
    pub fn state_json(&self, server: &str, now: Instant, now_unix: i64) -> serde_json::Value {
        let unix = |t: Instant| now_unix - now.saturating_duration_since(t).as_secs() as i64;
        let outage = self.outage();
        let last = self.last_success.get();
        let state = match (outage, last) {
            (Some(_), _) => "unreachable",
            (None, Some(_)) => "reachable",
            (None, None) => "not contacted yet",
        };
        serde_json::json!({
            "server": server,
            "state": state,
            "lastContact": last.map(unix),
            "secondsSinceLastContact": last.map(|t| now.saturating_duration_since(t).as_secs()),
            "unreachableSince": outage.map(|(since, _)| unix(since)),
            "secondsUnreachable": outage.map(|(since, _)| now.saturating_duration_since(since).as_secs()),
            "failedAttempts": outage.map_or(0, |(_, n)| n),
        })
    }

    /// A dial failed: the next one is not before `until`.
    pub fn backing_off(&self, until: Instant) {
        self.backoff_until.set(Some(until));
    }

    /// When the next dial may start, while a dial back-off is in force.
    pub fn backoff_until(&self) -> Option<Instant> {
        self.backoff_until.get()
    }

    pub fn last_success(&self) -> Option<Instant> {
        self.last_success.get()
    }

    pub fn count_relist(&self) {
        self.relists.set(self.relists.get() + 1);
    }

    pub fn count_watch_reconnect(&self) {
        self.watch_reconnects.set(self.watch_reconnects.get() + 1);
    }

    /// The metrics at `now`.
    pub fn metrics(&self, now: Instant) -> LinkMetrics {
        LinkMetrics {
            watch_reconnects: self.watch_reconnects.get(),
            relists: self.relists.get(),
            since_contact: self
                .last_success
                .get()
                .map(|t| now.saturating_duration_since(t).as_secs_f64()),
            backoff: self
                .backoff_until
                .get()
                .map_or(0.0, |t| t.saturating_duration_since(now).as_secs_f64()),
        }
    }

    /// Resolves at the next successful exchange after this call.
    pub fn recovered(&self) -> Recovered<'_> {
        Recovered {
            link: self,
            seen: self.generation.get(),
        }
    }
}

/// See [`Link::recovered`].
pub struct Recovered<'a> {
    link: &'a Link,
    seen: u64,
}

impl Future for Recovered<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.link.generation.get() != self.seen {
            return Poll::Ready(());
        }
        let mut waiters = self.link.waiters.borrow_mut();
        if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
            waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_logged_once_then_every_five_minutes_with_the_count_then_once_when_over() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut log = OfflineLog::default();
        assert_eq!(log.answered(at(0)), None, "no outage, nothing to say");
        assert_eq!(log.failed(at(1)), Some(Reachability::Unreachable));
        // Dials every 30 s: silent until five minutes after the first line.
        let mut said = Vec::new();
        for s in (31..=901).step_by(30) {
            if let Some(r) = log.failed(at(s)) {
                said.push((s, r));
            }
        }
        assert_eq!(
            said,
            [
                (
                    301,
                    Reachability::StillUnreachable {
                        failures: 11,
                        down_for: Duration::from_secs(300)
                    }
                ),
                (
                    601,
                    Reachability::StillUnreachable {
                        failures: 21,
                        down_for: Duration::from_secs(600)
                    }
                ),
                (
                    901,
                    Reachability::StillUnreachable {
                        failures: 31,
                        down_for: Duration::from_secs(900)
                    }
                ),
            ]
        );
        assert_eq!(log.outage(), Some((at(1), 31)));
        assert_eq!(
            log.answered(at(905)),
            Some(Reachability::Back {
                failures: 31,
                down_for: Duration::from_secs(904)
            })
        );
        assert_eq!(log.outage(), None);
        assert_eq!(log.answered(at(906)), None);
        // The next outage starts afresh.
        assert_eq!(log.failed(at(1000)), Some(Reachability::Unreachable));
    }

    #[test]
    fn the_link_state_says_reachable_or_since_when_it_is_not() {
        let link = Link::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let state = |now: u64| link.state_json("https://k:6443", at(now), 1_000 + now as i64);
        let v = state(0);
        assert_eq!(v["state"], "not contacted yet");
        assert!(v["lastContact"].is_null());
        link.succeeded(at(10));
        let v = state(15);
        assert_eq!(v["state"], "reachable");
        assert_eq!(v["lastContact"], 1_010);
        assert!(v["unreachableSince"].is_null());
        link.dial_failed(at(20));
        link.dial_failed(at(50));
        let v = state(60);
        assert_eq!(v["state"], "unreachable");
        assert_eq!(v["server"], "https://k:6443");
        assert_eq!(v["lastContact"], 1_010);
        assert_eq!(v["unreachableSince"], 1_020);
        assert_eq!(v["secondsUnreachable"], 40);
        assert_eq!(v["secondsSinceLastContact"], 50);
        assert_eq!(v["failedAttempts"], 2);
    }

    #[test]
    fn the_link_is_down_from_a_failed_dial_until_an_answer() {
        let link = Link::default();
        let now = Instant::now();
        assert!(!link.is_down());
        assert_eq!(link.dial_failed(now), Some(Reachability::Unreachable));
        assert!(link.is_down());
        assert_eq!(link.dial_failed(now), None);
        assert!(matches!(
            link.succeeded(now),
            Some(Reachability::Back { failures: 2, .. })
        ));
        assert!(!link.is_down());
        assert_eq!(link.succeeded(now), None);
    }

    #[test]
    fn a_dial_wait_stays_within_half_the_step_and_the_step_and_never_above_four_seconds() {
        let mut step = DIAL_BACKOFF_INITIAL;
        let mut steps = Vec::new();
        for _ in 0..10 {
            steps.push(step);
            step = next_step(step);
        }
        assert_eq!(steps[0], Duration::from_secs(1));
        assert_eq!(steps[2], Duration::from_secs(4));
        assert_eq!(steps[9], Duration::from_secs(4));
        for step in steps {
            for unit in [0.0, 0.25, 0.5, 0.999_999] {
                let w = dial_wait(step, unit);
                assert!(w >= step / 2 && w <= step, "{step:?} {unit}: {w:?}");
                assert!(w <= DIAL_BACKOFF_MAX, "{w:?}");
            }
        }
        // However long the outage, the next dial is at most 4 s away.
        assert!(dial_wait(Duration::from_secs(3600), 0.999) <= Duration::from_secs(4));
    }

    #[test]
    fn the_back_off_counts_from_the_failed_dials_start_so_a_dial_that_hung_is_followed_at_once() {
        let t0 = Instant::now();
        let step = Duration::from_secs(4);
        // Refused at once: the step's wait, from the start.
        let refused = next_dial(t0, t0 + Duration::from_millis(5), step, 0.0);
        assert_eq!(refused, t0 + Duration::from_secs(2));
        // Failed after 3 s: only what is left of the wait.
        let slow = next_dial(t0, t0 + Duration::from_secs(3), step, 0.999_999);
        assert!(
            slow > t0 + Duration::from_secs(3) && slow <= t0 + step,
            "{slow:?}"
        );
        // Hung until the 10 s timeout: the next dial may start now.
        let hung = t0 + Duration::from_secs(10);
        assert_eq!(next_dial(t0, hung, step, 0.999_999), hung);
    }

    #[test]
    fn the_metrics_say_how_long_since_the_last_contact_and_the_back_off_in_force() {
        let t0 = Instant::now();
        let link = Link::default();
        assert_eq!(link.metrics(t0).since_contact, None);
        link.succeeded(t0);
        link.count_relist();
        link.count_watch_reconnect();
        link.count_watch_reconnect();
        link.backing_off(t0 + Duration::from_secs(4));
        let m = link.metrics(t0 + Duration::from_secs(3));
        assert_eq!(
            m,
            LinkMetrics {
                watch_reconnects: 2,
                relists: 1,
                since_contact: Some(3.0),
                backoff: 1.0,
            }
        );
        link.succeeded(t0 + Duration::from_secs(5));
        assert_eq!(link.metrics(t0 + Duration::from_secs(5)).backoff, 0.0);
    }

    #[test]
    fn metrics_have_one_help_and_type_per_family_and_counters_end_in_total() {
        let mut out = String::new();
        LinkMetrics {
            watch_reconnects: 3,
            relists: 1,
            since_contact: Some(2.5),
            backoff: 0.0,
        }
        .render(&mut out);
        assert!(
            out.contains("picolet_apiserver_watch_reconnects_total 3\n"),
            "{out}"
        );
        assert!(out.contains("picolet_apiserver_relists_total 1\n"), "{out}");
        assert!(
            out.contains("picolet_apiserver_seconds_since_last_contact 2.5\n"),
            "{out}"
        );
        assert!(
            out.contains("picolet_apiserver_backoff_seconds 0\n"),
            "{out}"
        );
        for line in out.lines().filter(|l| l.starts_with("# TYPE")) {
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(out.matches(&format!("# TYPE {} ", f[2])).count(), 1);
            if f[3] == "counter" {
                assert!(f[2].ends_with("_total"), "{line}");
            }
        }
    }

    #[test]
    fn a_success_wakes_the_loops_waiting_for_the_link_to_recover() {
        let link = Link::default();
        let waiting = link.recovered();
        link.succeeded(Instant::now());
        crate::rt::block_on(waiting);
        let later = link.recovered();
        let mut later = std::pin::pin!(later);
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(
            later.as_mut().poll(&mut cx).is_pending(),
            "only a later success"
        );
    }
}
