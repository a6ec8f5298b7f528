//! Eviction thresholds: `evictionHard` and `evictionSoft` (with
//! `evictionSoftGracePeriod`) and `evictionMinimumReclaim` turned into
//! [`Threshold`]s, a quantity or a percentage of the signal's capacity, and
//! whether an observation meets one. A threshold of zero (`0`, `0%`) is
//! disabled, as in kubelet.

use std::collections::BTreeMap;
use std::time::Duration;

use super::signal::{Observations, Signal};
use crate::config::EvictionThreshold;

/// A threshold that cannot be built from the configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    #[error("{field}: unknown eviction signal {signal:?}")]
    UnknownSignal { field: &'static str, signal: String },
    #[error("evictionSoftGracePeriod: evictionSoft has {signal:?} but no grace period for it")]
    NoGracePeriod { signal: String },
}

/// One eviction threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub value: EvictionThreshold,
    /// Zero for a hard threshold.
    pub grace_period: Duration,
    /// `evictionMinimumReclaim` for the signal: once the threshold is met,
    /// it stays met until this much more than the threshold is available.
    pub min_reclaim: Option<EvictionThreshold>,
    pub hard: bool,
}

/// The amount a threshold value stands for against `capacity`: a quantity
/// as is, a percentage of capacity (rounded down, as kubelet's int64 cast).
pub fn quantity(value: EvictionThreshold, capacity: u64) -> u64 {
    match value {
        EvictionThreshold::Quantity(q) => q,
        EvictionThreshold::Percentage(p) => (capacity as f64 * p / 100.0) as u64,
    }
}

fn disabled(value: EvictionThreshold) -> bool {
    match value {
        EvictionThreshold::Quantity(q) => q == 0,
        EvictionThreshold::Percentage(p) => p == 0.0,
    }
}

impl Threshold {
    /// The threshold's amount against the signal's capacity.
    pub fn quantity(&self, capacity: u64) -> u64 {
        quantity(self.value, capacity)
    }

    /// True when the signal is observed below the threshold; with
    /// `with_min_reclaim`, below the threshold plus its minimum reclaim
    /// (kubelet's check of a threshold met in the previous pass).
    pub fn met(&self, obs: &Observations, with_min_reclaim: bool) -> bool {
        let Some(o) = obs.get(self.signal) else {
            return false;
        };
        let mut q = self.quantity(o.capacity);
        if with_min_reclaim {
            q = q.saturating_add(self.min_reclaim.map_or(0, |m| quantity(m, o.capacity)));
        }
        i128::from(q) > i128::from(o.available)
    }
}

/// Builds the thresholds from the configuration's maps (signal names as
/// keys, as the config validated them): hard ones first, then soft ones,
/// each in signal order; disabled (zero) thresholds are left out.
pub fn from_config(
    hard: &BTreeMap<String, EvictionThreshold>,
    soft: &BTreeMap<String, EvictionThreshold>,
    soft_grace: &BTreeMap<String, Duration>,
    min_reclaim: &BTreeMap<String, EvictionThreshold>,
) -> Result<Vec<Threshold>, ThresholdError> {
    let signal = |field: &'static str, name: &str| {
        Signal::parse(name).ok_or_else(|| ThresholdError::UnknownSignal {
            field,
            signal: name.to_string(),
        })
    };
    for name in min_reclaim.keys() {
        signal("evictionMinimumReclaim", name)?;
    }
    let mut out = Vec::new();
    for (field, map, is_hard) in [("evictionHard", hard, true), ("evictionSoft", soft, false)] {
        let mut these = Vec::new();
        for (name, value) in map {
            let s = signal(field, name)?;
            let grace_period = if is_hard {
                Duration::ZERO
            } else {
                *soft_grace
                    .get(name)
                    .ok_or_else(|| ThresholdError::NoGracePeriod {
                        signal: name.clone(),
                    })?
            };
            if disabled(*value) {
                continue;
            }
            these.push(Threshold {
                signal: s,
                value: *value,
                grace_period,
                min_reclaim: min_reclaim.get(name).copied(),
                hard: is_hard,
            });
        }
        these.sort_by_key(|t| t.signal);
        out.extend(these);
    }
    Ok(out)
}

/// The grace period of a pod evicted for `threshold`: 1 s for a hard
/// threshold (kubelet's immediate eviction), else `evictionMaxPodGracePeriod`,
/// or the pod's own `terminationGracePeriodSeconds` when that is shorter.
pub fn pod_grace_period(threshold: &Threshold, max_pod_grace: i64, pod_grace: Option<i64>) -> i64 {
    if threshold.hard {
        return 1;
    }
    match pod_grace {
        Some(g) => max_pod_grace.min(g).max(0),
        None => max_pod_grace.max(0),
    }
}

/// The evicted pod's status message, in kubelet's words: the resource the
/// node was low on, the threshold and what was available.
pub fn message(threshold: &Threshold, capacity: u64, available: i64) -> String {
    format!(
        "The node was low on resource: {}. Threshold quantity: {}, available: {}. (signal {})",
        threshold.signal.resource(),
        show(threshold.signal, threshold.quantity(capacity) as i128),
        show(threshold.signal, available as i128),
        threshold.signal.as_str(),
    )
}

/// Bytes in Ki (kubelet prints quantities like `100Mi` or `51200Ki`);
/// counts as plain numbers.
pub fn show(signal: Signal, v: i128) -> String {
    if signal.counts_inodes() || signal == Signal::PidAvailable {
        return v.to_string();
    }
    const UNITS: [(i128, &str); 3] = [(1 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki")];
    for (size, unit) in UNITS {
        if v != 0 && v % size == 0 {
            return format!("{}{unit}", v / size);
        }
    }
    if v.abs() >= 1024 {
        format!("{}Ki", v / 1024)
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::eviction::signal::Observation;

    fn map<V: Copy>(pairs: &[(&str, V)]) -> BTreeMap<String, V> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    const MI: u64 = 1 << 20;

    fn obs(signal: Signal, available: i64, capacity: u64) -> Observations {
        let mut o = Observations::default();
        o.set(
            signal,
            Observation {
                available,
                capacity,
            },
        );
        o
    }

    #[test]
    fn quantities_and_percentages_are_met_below_the_threshold() {
        use EvictionThreshold::*;
        let table = [
            // value, min reclaim, available, capacity, met, met with reclaim
            (
                Quantity(100 * MI),
                None,
                99 * MI as i64,
                1000 * MI,
                true,
                true,
            ),
            (
                Quantity(100 * MI),
                None,
                100 * MI as i64,
                1000 * MI,
                false,
                false,
            ),
            (
                Percentage(10.0),
                None,
                99 * MI as i64,
                1000 * MI,
                true,
                true,
            ),
            (
                Percentage(10.0),
                None,
                101 * MI as i64,
                1000 * MI,
                false,
                false,
            ),
            (
                Quantity(100 * MI),
                Some(Quantity(50 * MI)),
                120 * MI as i64,
                1000 * MI,
                false,
                true,
            ),
            (
                Quantity(100 * MI),
                Some(Percentage(5.0)),
                151 * MI as i64,
                1000 * MI,
                false,
                false,
            ),
            (Quantity(1), None, -5, 10, true, true),
        ];
        for (value, min_reclaim, available, capacity, met, met_reclaim) in table {
            let t = Threshold {
                signal: Signal::MemoryAvailable,
                value,
                grace_period: Duration::ZERO,
                min_reclaim,
                hard: true,
            };
            let o = obs(Signal::MemoryAvailable, available, capacity);
            assert_eq!(
                (t.met(&o, false), t.met(&o, true)),
                (met, met_reclaim),
                "{value:?} {min_reclaim:?} {available}"
            );
            assert!(!t.met(&Observations::default(), true), "unobserved");
        }
    }

    #[test]
    fn thresholds_come_from_the_config_hard_then_soft_and_zero_is_disabled() {
        use EvictionThreshold::*;
        let hard = map(&[
            ("nodefs.available", Percentage(10.0)),
            ("memory.available", Quantity(100 * MI)),
            ("pid.available", Quantity(0)),
        ]);
        let soft = map(&[("memory.available", Quantity(200 * MI))]);
        let grace = map(&[("memory.available", Duration::from_secs(90))]);
        let reclaim = map(&[("memory.available", Quantity(10 * MI))]);
        let t = from_config(&hard, &soft, &grace, &reclaim).unwrap();
        let summary: Vec<_> = t
            .iter()
            .map(|t| {
                (
                    t.signal,
                    t.hard,
                    t.grace_period.as_secs(),
                    t.min_reclaim.is_some(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (Signal::MemoryAvailable, true, 0, true),
                (Signal::NodeFsAvailable, true, 0, false),
                (Signal::MemoryAvailable, false, 90, true),
            ]
        );
    }

    #[test]
    fn a_soft_threshold_without_a_grace_period_is_rejected() {
        let soft = map(&[("nodefs.available", EvictionThreshold::Percentage(15.0))]);
        let e = from_config(&BTreeMap::new(), &soft, &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(
            e,
            Err(ThresholdError::NoGracePeriod {
                signal: "nodefs.available".into()
            })
        );
        let reclaim = map(&[("memory.free", EvictionThreshold::Quantity(1))]);
        let e = from_config(
            &BTreeMap::new(),
            &BTreeMap::new(),
            &BTreeMap::new(),
            &reclaim,
        );
        assert!(matches!(
            e,
            Err(ThresholdError::UnknownSignal {
                field: "evictionMinimumReclaim",
                ..
            })
        ));
    }

    #[test]
    fn an_evicted_pod_s_grace_period_follows_the_threshold_kind() {
        let hard = Threshold {
            signal: Signal::MemoryAvailable,
            value: EvictionThreshold::Quantity(1),
            grace_period: Duration::ZERO,
            min_reclaim: None,
            hard: true,
        };
        let soft = Threshold {
            hard: false,
            grace_period: Duration::from_secs(30),
            ..hard
        };
        let table = [
            (hard, 60, Some(30), 1),
            (hard, 0, None, 1),
            (soft, 60, Some(30), 30),
            (soft, 20, Some(30), 20),
            (soft, 20, None, 20),
            (soft, 0, Some(30), 0),
        ];
        for (t, max, pod, want) in table {
            assert_eq!(
                pod_grace_period(&t, max, pod),
                want,
                "{} {max} {pod:?}",
                t.hard
            );
        }
    }

    #[test]
    fn the_message_names_the_resource_the_threshold_and_the_signal() {
        let t = Threshold {
            signal: Signal::MemoryAvailable,
            value: EvictionThreshold::Quantity(100 * MI),
            grace_period: Duration::ZERO,
            min_reclaim: None,
            hard: true,
        };
        assert_eq!(
            message(&t, 1000 * MI, 51_200 * 1024),
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. (signal memory.available)"
        );
        assert_eq!(show(Signal::NodeFsInodesFree, 2048), "2048");
        assert_eq!(show(Signal::NodeFsAvailable, 1500), "1Ki");
        assert_eq!(show(Signal::NodeFsAvailable, -2048), "-2Ki");
        assert_eq!(show(Signal::NodeFsAvailable, 0), "0");
    }
}
