//! The eviction manager's state across passes, kubelet's `synchronize`
//! without the I/O: [`Manager::step`] takes the time and one pass's
//! observations and says which pressure conditions hold and which
//! threshold, if any, to act on now. The agent then reclaims at node level
//! (disk signals: dead containers, then unused images), measures again and
//! asks [`Manager::still_met`]; if so it evicts the first pod of
//! [`super::rank`], one per pass.
//!
//! - A threshold met in the last pass stays met until its minimum reclaim
//!   is available too.
//! - A soft threshold is acted on only once it has been met for its grace
//!   period without a break.
//! - A pressure condition stays true for `evictionPressureTransitionPeriod`
//!   after its last threshold stopped being met.

use std::time::{Duration, Instant};

use super::signal::{Conditions, Observation, Observations};
use super::threshold::Threshold;

/// What one pass decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The node's pressure conditions now.
    pub conditions: Conditions,
    /// The threshold to relieve now, with its observation: memory first,
    /// then in configuration order. `None`: nothing to do.
    pub act: Option<(Threshold, Observation)>,
    /// The thresholds met now (grace periods aside), for display.
    pub met: Vec<Threshold>,
}

/// The manager's memory between passes.
#[derive(Debug, Clone)]
pub struct Manager {
    thresholds: Vec<Threshold>,
    transition: Duration,
    /// Per threshold: since when it has been met without a break.
    first_met: Vec<Option<Instant>>,
    /// Per threshold: met in the last pass (so min-reclaim applies).
    met_last: Vec<bool>,
    /// Per condition: the last time one of its thresholds was met.
    condition_seen: [Option<Instant>; 3],
    conditions: Conditions,
}

impl Manager {
    pub fn new(thresholds: Vec<Threshold>, transition: Duration) -> Manager {
        let n = thresholds.len();
        Manager {
            thresholds,
            transition,
            first_met: vec![None; n],
            met_last: vec![false; n],
            condition_seen: [None; 3],
            conditions: Conditions::default(),
        }
    }

    pub fn thresholds(&self) -> &[Threshold] {
        &self.thresholds
    }

    /// The conditions of the last pass.
    pub fn conditions(&self) -> Conditions {
        self.conditions
    }

    /// Advances by one pass.
    pub fn step(&mut self, now: Instant, obs: &Observations) -> Decision {
        let mut met = Vec::new();
        for (i, t) in self.thresholds.iter().enumerate() {
            let is_met = t.met(obs, false) || (self.met_last[i] && t.met(obs, true));
            self.met_last[i] = is_met;
            if !is_met {
                self.first_met[i] = None;
                continue;
            }
            self.first_met[i].get_or_insert(now);
            met.push(i);
            let c = t.signal.condition() as usize;
            self.condition_seen[c] = Some(now);
        }

        let mut conditions = Conditions::default();
        for c in super::signal::Condition::ALL {
            if self.condition_seen[c as usize]
                .is_some_and(|seen| now.saturating_duration_since(seen) < self.transition)
            {
                conditions.set(c);
            }
        }
        self.conditions = conditions;

        let due = |i: &&usize| {
            let since = self.first_met[**i].unwrap_or(now);
            now.saturating_duration_since(since) >= self.thresholds[**i].grace_period
        };
        let act = met
            .iter()
            .filter(due)
            .min_by_key(|i| {
                let t = &self.thresholds[**i];
                (
                    t.signal.condition() != super::signal::Condition::MemoryPressure,
                    **i,
                )
            })
            .and_then(|i| {
                let t = self.thresholds[*i];
                obs.get(t.signal).map(|o| (t, o))
            });
        Decision {
            conditions,
            act,
            met: met.iter().map(|i| self.thresholds[*i]).collect(),
        }
    }

    /// After node-level reclaim: is `threshold` still met (minimum reclaim
    /// included) with the new observations?
    pub fn still_met(&self, threshold: &Threshold, obs: &Observations) -> bool {
        threshold.met(obs, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EvictionThreshold;
    use crate::node::eviction::signal::{Condition, Signal};

    const MI: u64 = 1 << 20;

    fn hard(signal: Signal, q: u64) -> Threshold {
        Threshold {
            signal,
            value: EvictionThreshold::Quantity(q),
            grace_period: Duration::ZERO,
            min_reclaim: None,
            hard: true,
        }
    }

    fn obs(pairs: &[(Signal, u64)]) -> Observations {
        let mut o = Observations::default();
        for (s, available) in pairs {
            o.set(
                *s,
                Observation {
                    available: *available as i64,
                    capacity: 1000 * MI,
                },
            );
        }
        o
    }

    #[test]
    fn a_hard_threshold_acts_at_once_and_its_condition_lasts_the_transition_period() {
        let mut m = Manager::new(
            vec![hard(Signal::MemoryAvailable, 100 * MI)],
            Duration::from_secs(300),
        );
        let t0 = Instant::now();
        let d = m.step(t0, &obs(&[(Signal::MemoryAvailable, 50 * MI)]));
        assert!(d.conditions.get(Condition::MemoryPressure));
        let (t, o) = d.act.unwrap();
        assert_eq!(
            (t.signal, o.available),
            (Signal::MemoryAvailable, 50 * MI as i64)
        );

        let fine = obs(&[(Signal::MemoryAvailable, 500 * MI)]);
        let d = m.step(t0 + Duration::from_secs(10), &fine);
        assert_eq!(d.act, None);
        assert!(
            d.conditions.get(Condition::MemoryPressure),
            "within the transition period"
        );
        let d = m.step(t0 + Duration::from_secs(300), &fine);
        assert!(!d.conditions.any(), "the transition period has passed");
    }

    #[test]
    fn a_soft_threshold_acts_only_after_its_grace_period_without_a_break() {
        let soft = Threshold {
            hard: false,
            grace_period: Duration::from_secs(60),
            ..hard(Signal::NodeFsAvailable, 100 * MI)
        };
        let mut m = Manager::new(vec![soft], Duration::from_secs(30));
        let low = obs(&[(Signal::NodeFsAvailable, 10 * MI)]);
        let ok = obs(&[(Signal::NodeFsAvailable, 900 * MI)]);
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let table = [
            (0, &low, true, false),
            (30, &low, true, false),
            (40, &ok, true, false),
            (50, &low, true, false),
            (109, &low, true, false),
            (110, &low, true, true),
            (200, &ok, false, false),
        ];
        for (at, o, pressure, act) in table {
            let d = m.step(t0 + s(at), o);
            assert_eq!(
                (d.conditions.get(Condition::DiskPressure), d.act.is_some()),
                (pressure, act),
                "at {at}s"
            );
        }
    }

    #[test]
    fn a_met_threshold_stays_met_until_its_minimum_reclaim_is_available() {
        let t = Threshold {
            min_reclaim: Some(EvictionThreshold::Quantity(50 * MI)),
            ..hard(Signal::NodeFsAvailable, 100 * MI)
        };
        let mut m = Manager::new(vec![t], Duration::ZERO);
        let t0 = Instant::now();
        let at = |a: u64| obs(&[(Signal::NodeFsAvailable, a * MI)]);
        assert!(
            m.step(t0, &at(120)).act.is_none(),
            "never met: no reclaim owed"
        );
        assert!(m.step(t0, &at(90)).act.is_some());
        assert!(
            m.step(t0, &at(120)).act.is_some(),
            "met last pass: 150Mi needed"
        );
        assert!(m.still_met(&t, &at(149)));
        assert!(!m.still_met(&t, &at(150)));
        assert!(m.step(t0, &at(160)).act.is_none());
        assert!(
            m.step(t0, &at(120)).act.is_none(),
            "resolved: back to the plain threshold"
        );
    }

    #[test]
    fn memory_is_relieved_before_other_resources() {
        let mut m = Manager::new(
            vec![
                hard(Signal::NodeFsAvailable, 100 * MI),
                hard(Signal::PidAvailable, 100),
                hard(Signal::MemoryAvailable, 100 * MI),
            ],
            Duration::from_secs(1),
        );
        let d = m.step(
            Instant::now(),
            &obs(&[
                (Signal::NodeFsAvailable, MI),
                (Signal::PidAvailable, 5),
                (Signal::MemoryAvailable, MI),
            ]),
        );
        assert_eq!(d.act.unwrap().0.signal, Signal::MemoryAvailable);
        assert_eq!(d.met.len(), 3);
        let all: Vec<_> = d.conditions.iter().collect();
        assert_eq!(
            all,
            [
                Condition::MemoryPressure,
                Condition::DiskPressure,
                Condition::PIDPressure
            ]
        );
    }

    #[test]
    fn an_unobserved_signal_meets_nothing() {
        let mut m = Manager::new(vec![hard(Signal::MemoryAvailable, MI)], Duration::ZERO);
        let d = m.step(Instant::now(), &Observations::default());
        assert_eq!(d.act, None);
        assert!(!d.conditions.any());
    }
}
