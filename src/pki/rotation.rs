//! When to renew the node's client certificate (`rotateCertificates`):
//! the sans-I/O state of the rotation task in
//! [`crate::apiserver::credentials::bootstrap_join::rotate_client_certificates`].
//!
//! kubelet's rule: renew at a deadline picked at random between 70 % and
//! 90 % of the certificate's lifetime (`notBefore + total * (0.7..0.9)`),
//! so a fleet issued at once does not renew at once. A failed renewal (the
//! API server unreachable, the CSR refused, a write failing) is retried
//! after a jittered back-off, 2 s doubling to 5 min; offline, that is all
//! that happens. A renewal never follows another within
//! [`MIN_INTERVAL`]: a signer whose certificates are short and backdated
//! (kube-controller-manager backdates `notBefore` by 5 min) can give a
//! certificate whose deadline has already passed, and the node must not
//! loop on CSRs then.
//!
//! Must NOT know: files, the network, the clock or the random source:
//! times are Unix seconds and jitters numbers in `[0, 1)`, handed in.

use super::csr::Validity;

/// The first retry after a failed renewal.
pub const BACKOFF_INITIAL: i64 = 2;
/// The longest wait between retries.
pub const BACKOFF_MAX: i64 = 300;
/// The shortest time between two renewals.
pub const MIN_INTERVAL: i64 = 30;

/// What the rotation task does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Nothing until this Unix time (then ask again).
    WaitUntil(i64),
    /// Request a new certificate now.
    Renew,
}

/// The rotation state of one client certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotation {
    validity: Validity,
    deadline: i64,
    /// Set after a failure: no attempt before it.
    retry_at: Option<i64>,
    backoff: i64,
}

impl Rotation {
    /// The state for the certificate in use, with its jittered deadline.
    pub fn new(validity: Validity, jitter: f64) -> Self {
        Rotation {
            validity,
            deadline: validity.rotation_deadline(jitter),
            retry_at: None,
            backoff: BACKOFF_INITIAL,
        }
    }

    /// The certificate this state is about.
    pub fn validity(&self) -> Validity {
        self.validity
    }

    /// The renewal deadline picked for it.
    pub fn deadline(&self) -> i64 {
        self.deadline
    }

    /// What to do at `now`.
    pub fn next(&self, now: i64) -> Next {
        let due = self
            .retry_at
            .map_or(self.deadline, |r| r.max(self.deadline));
        if now >= due {
            Next::Renew
        } else {
            Next::WaitUntil(due)
        }
    }

    /// A renewal attempt failed at `now`: wait the back-off (jittered by up
    /// to half of it) and double it.
    pub fn failed(&mut self, now: i64, jitter: f64) {
        let extra = (self.backoff as f64 * 0.5 * jitter.clamp(0.0, 1.0)) as i64;
        self.retry_at = Some(now + self.backoff + extra);
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
    }

    /// A new certificate with `validity` is in use since `now`: its own
    /// deadline, no sooner than [`MIN_INTERVAL`] from now.
    pub fn renewed(&mut self, validity: Validity, now: i64, jitter: f64) {
        *self = Rotation::new(validity, jitter);
        if self.deadline < now + MIN_INTERVAL {
            self.retry_at = Some(now + MIN_INTERVAL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn year() -> Validity {
        Validity {
            not_before: 1_000_000,
            not_after: 1_000_000 + 365 * 86_400,
        }
    }

    #[test]
    fn a_fresh_certificate_waits_for_its_jittered_deadline() {
        let v = year();
        let r = Rotation::new(v, 0.5);
        assert_eq!(r.deadline(), v.not_before + 365 * 86_400 * 8 / 10);
        assert_eq!(r.next(v.not_before + 10), Next::WaitUntil(r.deadline()));
    }

    #[test]
    fn the_deadline_always_falls_between_70_and_90_percent_of_the_lifetime() {
        let v = Validity {
            not_before: 0,
            not_after: 1000,
        };
        for i in 0..100 {
            let d = Rotation::new(v, f64::from(i) / 100.0).deadline();
            assert!((700..=900).contains(&d), "{d}");
        }
    }

    #[test]
    fn at_the_deadline_the_certificate_is_renewed() {
        let r = Rotation::new(year(), 0.0);
        assert_eq!(r.next(r.deadline() - 1), Next::WaitUntil(r.deadline()));
        assert_eq!(r.next(r.deadline()), Next::Renew);
        assert_eq!(r.next(year().not_after + 10), Next::Renew);
    }

    #[test]
    fn a_failed_renewal_is_retried_after_a_growing_back_off_capped_at_five_minutes() {
        let mut r = Rotation::new(year(), 0.0);
        let mut now = r.deadline();
        let mut waits = Vec::new();
        for _ in 0..10 {
            r.failed(now, 0.0);
            let Next::WaitUntil(at) = r.next(now) else {
                panic!("retried at once")
            };
            waits.push(at - now);
            now = at;
            assert_eq!(r.next(now), Next::Renew);
        }
        assert_eq!(&waits[..5], &[2, 4, 8, 16, 32]);
        assert_eq!(*waits.last().unwrap(), 300);
    }

    #[test]
    fn the_back_off_jitter_adds_at_most_half() {
        let mut r = Rotation::new(year(), 0.0);
        let now = r.deadline();
        r.failed(now, 0.999);
        assert_eq!(r.next(now), Next::WaitUntil(now + 2));
        let mut r = Rotation::new(year(), 0.0);
        r.failed(now, 0.0);
        r.failed(now, 0.999);
        assert_eq!(r.next(now), Next::WaitUntil(now + 4 + 1));
    }

    #[test]
    fn a_renewal_starts_over_with_the_new_certificates_deadline_and_back_off() {
        let mut r = Rotation::new(year(), 0.0);
        let now = r.deadline();
        r.failed(now, 0.0);
        r.failed(now, 0.0);
        let new = Validity {
            not_before: now,
            not_after: now + 1000,
        };
        r.renewed(new, now + 5, 0.0);
        assert_eq!(r.validity(), new);
        assert_eq!(r.next(now + 5), Next::WaitUntil(now + 700));
        r.failed(now + 700, 0.0);
        assert_eq!(r.next(now + 700), Next::WaitUntil(now + 702));
    }

    #[test]
    fn a_short_backdated_certificate_is_not_renewed_again_at_once() {
        // kube-controller-manager's signer: notBefore 5 min in the past,
        // notAfter 60 s ahead; the deadline is already behind us.
        let now = 10_000;
        let short = Validity {
            not_before: now - 300,
            not_after: now + 60,
        };
        let mut r = Rotation::new(year(), 0.0);
        r.renewed(short, now, 0.0);
        assert_eq!(r.next(now), Next::WaitUntil(now + MIN_INTERVAL));
        assert_eq!(r.next(now + MIN_INTERVAL), Next::Renew);
    }
}
