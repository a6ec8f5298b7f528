//! The link to one API server as every loop on its [`Client`] shares it:
//! when it last answered, the dial back-off in force, and the counters
//! `/metrics` shows. Nothing here does I/O; time comes in as an argument.
//!
//! - Dial back-off: 1 s doubling to 30 s; each wait is drawn within the
//!   upper half of the current step ([`dial_wait`]), so it never exceeds
//!   30 s and a fleet whose shared uplink returns does not dial in
//!   lock-step. A failed TLS handshake is a failed dial like a refused
//!   connect.
//! - Every successful exchange (a dial, or any answer with a status)
//!   records the time and wakes the loops waiting out a back-off after a
//!   link failure ([`Link::recovered`]): they retry within
//!   [`RECOVERY_JITTER`] instead of after their own back-off.
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
/// The longest wait between dials.
pub const DIAL_BACKOFF_MAX: Duration = Duration::from_secs(30);
pub use super::reflector_backoff::RECOVERY_JITTER;

/// The wait after a failed dial at back-off step `step`, with `unit` a
/// random number in [0, 1): within [step/2, step], never above
/// [`DIAL_BACKOFF_MAX`].
pub fn dial_wait(step: Duration, unit: f64) -> Duration {
    step.min(DIAL_BACKOFF_MAX)
        .mul_f64(0.5 + 0.5 * unit.clamp(0.0, 1.0))
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
}

impl Link {
    /// The API server answered at `now`: wakes every [`Link::recovered`].
    pub fn succeeded(&self, now: Instant) {
        self.last_success.set(Some(now));
        self.backoff_until.set(None);
        self.generation.set(self.generation.get().wrapping_add(1));
        for w in self.waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// A dial failed: the next one is not before `until`.
    pub fn backing_off(&self, until: Instant) {
        self.backoff_until.set(Some(until));
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
    fn a_dial_wait_stays_within_half_the_step_and_the_step_and_never_above_thirty_seconds() {
        let mut step = DIAL_BACKOFF_INITIAL;
        let mut steps = Vec::new();
        for _ in 0..10 {
            steps.push(step);
            step = next_step(step);
        }
        assert_eq!(steps[0], Duration::from_secs(1));
        assert_eq!(steps[5], Duration::from_secs(30));
        assert_eq!(steps[9], Duration::from_secs(30));
        for step in steps {
            for unit in [0.0, 0.25, 0.5, 0.999_999] {
                let w = dial_wait(step, unit);
                assert!(w >= step / 2 && w <= step, "{step:?} {unit}: {w:?}");
                assert!(w <= DIAL_BACKOFF_MAX, "{w:?}");
            }
        }
        // What a handshake cut once produced: 30 s plus up to 30 s of jitter.
        assert!(dial_wait(DIAL_BACKOFF_MAX, 0.536) < Duration::from_secs(31));
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
