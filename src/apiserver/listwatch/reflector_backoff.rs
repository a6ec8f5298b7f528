//! The reflector's back-off (client-go's values: 800 ms doubling to 30 s,
//! plus up to as much again of jitter, reset after 2 min without failure),
//! which remembers whether the last failure was of the link, so the link's
//! return can cut it short ([`super::reflector::Reflector::link_recovered`]).

use std::time::{Duration, Instant};

use super::reflector::{BACKOFF_INITIAL, BACKOFF_MAX, BACKOFF_RESET};

/// How long, at most, a loop waits (randomly) after the link answered
/// again before it retries: enough to spread a fleet's retries, short
/// enough that recovery takes seconds.
pub const RECOVERY_JITTER: Duration = Duration::from_secs(1);

/// Exponential back-off with jitter (client-go's reflector values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Backoff {
    next: Duration,
    last_failure: Option<Instant>,
    /// The last failure was of the link (no answer), not an error status.
    link_failure: bool,
}

impl Backoff {
    pub(super) fn new() -> Self {
        Backoff {
            next: BACKOFF_INITIAL,
            last_failure: None,
            link_failure: false,
        }
    }

    /// The wait after a failure at `now`: the current step (reset after
    /// [`BACKOFF_RESET`] without failure) plus up to as much again.
    /// `link` says the failure was of the link (no answer).
    pub(super) fn fail(&mut self, now: Instant, rand: u64, link: bool) -> Duration {
        self.link_failure = link;
        if let Some(t) = self.last_failure {
            if now.saturating_duration_since(t) >= BACKOFF_RESET {
                self.next = BACKOFF_INITIAL;
            }
        }
        let base = self.next;
        self.next = (base * 2).min(BACKOFF_MAX);
        self.last_failure = Some(now);
        base + base.mul_f64(unit(rand))
    }

    /// Whether the last failure was of the link.
    pub(super) fn after_link_failure(&self) -> bool {
        self.last_failure.is_some() && self.link_failure
    }
}

/// A number in [0, 1) from the high 53 bits of `rand`.
pub(super) fn unit(rand: u64) -> f64 {
    (rand >> 11) as f64 / (1u64 << 53) as f64
}
