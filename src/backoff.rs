//! Crash-loop back-off, kubelet's way.
//!
//! A container that keeps exiting is restarted after 10 s, then 20 s, 40 s, …
//! up to 5 min. A container that ran for 10 minutes before exiting starts
//! over at 10 s; so does one whose back-off has been idle for twice the
//! maximum. This module is pure: time comes in as an `Instant` argument.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// kubelet's initial crash-loop delay.
pub const INITIAL: Duration = Duration::from_secs(10);
/// kubelet's maximum crash-loop delay.
pub const MAX: Duration = Duration::from_secs(300);
/// A container that ran at least this long resets its back-off.
pub const RESET_AFTER_RUNNING: Duration = Duration::from_secs(600);

#[derive(Clone, Copy, Debug)]
struct Entry {
    delay: Duration,
    last_update: Instant,
}

/// Back-off state per key (pod UID + container name).
#[derive(Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    entries: HashMap<String, Entry>,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(INITIAL, MAX)
    }
}

impl Backoff {
    /// A back-off that starts at `initial` and doubles up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            entries: HashMap::new(),
        }
    }

    /// The key kubelet uses for a container.
    pub fn key(pod_uid: &str, container: &str) -> String {
        format!("{pod_uid}/{container}")
    }

    /// The current delay for `key`, if any.
    pub fn delay(&self, key: &str) -> Option<Duration> {
        self.entries.get(key).map(|e| e.delay)
    }

    /// How much longer a container that exited at `exited_at` must wait
    /// before it may be restarted; `None` when it may restart now.
    pub fn remaining(&self, key: &str, exited_at: Instant, now: Instant) -> Option<Duration> {
        let e = self.entries.get(key)?;
        let ready_at = exited_at + e.delay;
        (now < ready_at).then(|| ready_at - now)
    }

    /// Records a restart of `key` at `now`: the next delay doubles, or starts
    /// over when the entry was idle for twice the maximum.
    pub fn next(&mut self, key: &str, now: Instant) {
        let (initial, max) = (self.initial, self.max);
        let e = self.entries.entry(key.to_string()).or_insert(Entry {
            delay: Duration::ZERO,
            last_update: now,
        });
        let expired = now.saturating_duration_since(e.last_update) > 2 * max;
        e.delay = if e.delay.is_zero() || expired {
            initial
        } else {
            (e.delay * 2).min(max)
        };
        e.last_update = now;
    }

    /// A container ran for `ran_for` before exiting; a long run resets it.
    pub fn observe_run(&mut self, key: &str, ran_for: Duration) {
        if ran_for >= RESET_AFTER_RUNNING {
            self.entries.remove(key);
        }
    }

    /// Forgets one key (it succeeded).
    pub fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Forgets every key of a pod (the pod is gone).
    pub fn forget_pod(&mut self, pod_uid: &str) {
        let prefix = format!("{pod_uid}/");
        self.entries.retain(|k, _| !k.starts_with(&prefix));
    }

    /// Drops entries idle for more than twice the maximum.
    pub fn gc(&mut self, now: Instant) {
        let max = self.max;
        self.entries
            .retain(|_, e| now.saturating_duration_since(e.last_update) <= 2 * max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_failure_waits_ten_seconds() {
        let t0 = Instant::now();
        let mut b = Backoff::default();
        b.next("p/c", t0);
        assert_eq!(b.remaining("p/c", t0, t0), Some(Duration::from_secs(10)));
        assert_eq!(b.remaining("p/c", t0, t0 + Duration::from_secs(10)), None);
    }

    #[test]
    fn repeated_failures_double_the_delay_up_to_five_minutes() {
        let t0 = Instant::now();
        let mut b = Backoff::default();
        let mut seen = Vec::new();
        for i in 0..8 {
            b.next("p/c", t0 + Duration::from_secs(i));
            seen.push(b.delay("p/c").unwrap().as_secs());
        }
        assert_eq!(seen, vec![10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn a_container_that_ran_ten_minutes_starts_over() {
        let t0 = Instant::now();
        let mut b = Backoff::default();
        b.next("p/c", t0);
        b.next("p/c", t0);
        b.observe_run("p/c", Duration::from_secs(600));
        assert_eq!(b.delay("p/c"), None);
        b.next("p/c", t0);
        assert_eq!(b.delay("p/c"), Some(Duration::from_secs(10)));
    }

    #[test]
    fn a_short_run_keeps_the_back_off() {
        let t0 = Instant::now();
        let mut b = Backoff::default();
        b.next("p/c", t0);
        b.observe_run("p/c", Duration::from_secs(30));
        assert_eq!(b.delay("p/c"), Some(Duration::from_secs(10)));
    }

    #[test]
    fn an_entry_idle_for_twice_the_maximum_starts_over() {
        let t0 = Instant::now();
        let mut b = Backoff::default();
        b.next("p/c", t0);
        b.next("p/c", t0);
        b.next("p/c", t0 + Duration::from_secs(601));
        assert_eq!(b.delay("p/c"), Some(Duration::from_secs(10)));
    }

    #[test]
    fn forgetting_a_pod_drops_only_its_containers() {
        let t0 = Instant::now();
        let mut b = Backoff::default();
        b.next("p1/a", t0);
        b.next("p2/a", t0);
        b.forget_pod("p1");
        assert!(b.delay("p1/a").is_none());
        assert!(b.delay("p2/a").is_some());
    }
}
