//! `GET /node` on the admin socket (`picolet get node`): the node's
//! capacity and allocatable, next to the eviction task's signals,
//! thresholds and pressure conditions (housekeeping's `eviction_json`); joined to
//! a cluster, also the API server's state and whether the Node is cordoned
//! (`unschedulable`).
//!
//! Allocatable is kubelet's: capacity minus `kubeReserved`,
//! `systemReserved` and the hard eviction thresholds of `memory.available`
//! (against memory) and `nodefs.available` (against ephemeral-storage),
//! never below zero; `pods` is `maxPods`. The same rule as the Node status
//! the API server gets (`apiserver::presence::node_object`), computed here too because a
//! standalone picolet has no Node object to read it from.
//!
//! Pure, shared by the pod workers' host facts (allocatable memory for
//! memory-backed volumes) and the views' `GET /node` (`views/mod.rs`),
//! which reads the machine.

use serde_json::{json, Value};

use crate::node::eviction::{Signal, Threshold};
use crate::qos::allocatable::Reserved;

/// A node's amounts: CPU in millicores, memory and ephemeral-storage in
/// bytes, pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::agent) struct Amounts {
    pub cpu_millis: u64,
    pub memory_bytes: u64,
    pub ephemeral_storage_bytes: u64,
    pub pods: u64,
}

/// Capacity minus the reservations and the hard eviction thresholds.
pub(in crate::agent) fn allocatable(
    capacity: Amounts,
    reserved: &[Reserved],
    thresholds: &[Threshold],
) -> Amounts {
    let hard = |signal: Signal, of: u64| -> u64 {
        thresholds
            .iter()
            .filter(|t| t.hard && t.signal == signal)
            .map(|t| t.quantity(of))
            .max()
            .unwrap_or(0)
    };
    let cpu: u64 = reserved.iter().map(|r| r.cpu_millis).sum();
    let memory: u64 = reserved.iter().map(|r| r.memory_bytes).sum();
    Amounts {
        cpu_millis: capacity.cpu_millis.saturating_sub(cpu),
        memory_bytes: capacity
            .memory_bytes
            .saturating_sub(memory)
            .saturating_sub(hard(Signal::MemoryAvailable, capacity.memory_bytes)),
        ephemeral_storage_bytes: capacity.ephemeral_storage_bytes.saturating_sub(hard(
            Signal::NodeFsAvailable,
            capacity.ephemeral_storage_bytes,
        )),
        pods: capacity.pods,
    }
}

/// The node's allocatable under `e`'s reservations and hard thresholds,
/// ephemeral-storage reservations included: what the Node reports.
pub(in crate::agent) fn node_allocatable(
    capacity: Amounts,
    e: &super::config::EvictionConfig,
) -> Amounts {
    let mut a = allocatable(
        capacity,
        &[e.kube_reserved, e.system_reserved],
        &e.thresholds,
    );
    a.ephemeral_storage_bytes = a
        .ephemeral_storage_bytes
        .saturating_sub(e.reserved_ephemeral_storage_bytes);
    a
}

/// A resource list as the API writes it: `cpu` in cores or millicores,
/// bytes in `Ki` when they divide (as kubelet's cAdvisor-based capacity).
pub(in crate::agent) fn resources(a: Amounts) -> Value {
    let cpu = if a.cpu_millis.is_multiple_of(1000) {
        (a.cpu_millis / 1000).to_string()
    } else {
        format!("{}m", a.cpu_millis)
    };
    let bytes = |b: u64| {
        if b.is_multiple_of(1024) {
            format!("{}Ki", b / 1024)
        } else {
            b.to_string()
        }
    };
    json!({
        "cpu": cpu,
        "memory": bytes(a.memory_bytes),
        "ephemeral-storage": bytes(a.ephemeral_storage_bytes),
        "pods": a.pods.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EvictionThreshold;
    use std::time::Duration;

    const GI: u64 = 1 << 30;

    fn threshold(signal: Signal, value: EvictionThreshold, hard: bool) -> Threshold {
        Threshold {
            signal,
            value,
            grace_period: Duration::ZERO,
            min_reclaim: None,
            hard,
        }
    }

    #[test]
    fn allocatable_is_capacity_minus_reservations_and_hard_thresholds() {
        let capacity = Amounts {
            cpu_millis: 4000,
            memory_bytes: GI,
            ephemeral_storage_bytes: 100 * GI,
            pods: 110,
        };
        let reserved = Reserved {
            cpu_millis: 500,
            memory_bytes: 100 << 20,
            pids: 0,
        };
        let thresholds = [
            threshold(
                Signal::MemoryAvailable,
                EvictionThreshold::Quantity(100 << 20),
                true,
            ),
            threshold(
                Signal::MemoryAvailable,
                EvictionThreshold::Quantity(300 << 20),
                false,
            ),
            threshold(
                Signal::NodeFsAvailable,
                EvictionThreshold::Percentage(10.0),
                true,
            ),
        ];
        let a = allocatable(capacity, &[reserved, reserved], &thresholds);
        assert_eq!(a.cpu_millis, 3000);
        assert_eq!(
            a.memory_bytes,
            GI - 300 * (1 << 20),
            "soft ones do not count"
        );
        assert_eq!(a.ephemeral_storage_bytes, 90 * GI);
        assert_eq!(a.pods, 110);
        let tiny = Amounts {
            memory_bytes: 1 << 20,
            ..capacity
        };
        assert_eq!(allocatable(tiny, &[reserved], &thresholds).memory_bytes, 0);
    }

    #[test]
    fn reserved_ephemeral_storage_comes_off_allocatable_as_on_the_node() {
        let capacity = Amounts {
            cpu_millis: 4000,
            memory_bytes: GI,
            ephemeral_storage_bytes: 100 * GI,
            pods: 110,
        };
        let e = crate::agent::EvictionConfig {
            reserved_ephemeral_storage_bytes: 5 * GI,
            ..Default::default()
        };
        let a = node_allocatable(capacity, &e);
        assert_eq!(a.ephemeral_storage_bytes, 95 * GI);
        assert_eq!(a.cpu_millis, 4000);
    }

    #[test]
    fn resources_are_written_like_the_api_writes_them() {
        let r = resources(Amounts {
            cpu_millis: 3500,
            memory_bytes: GI,
            ephemeral_storage_bytes: 1000,
            pods: 8,
        });
        assert_eq!(
            r,
            json!({"cpu": "3500m", "memory": "1048576Ki", "ephemeral-storage": "1000", "pods": "8"})
        );
        assert_eq!(
            resources(Amounts {
                cpu_millis: 2000,
                ..Amounts {
                    cpu_millis: 0,
                    memory_bytes: 0,
                    ephemeral_storage_bytes: 0,
                    pods: 0
                }
            })["cpu"],
            "2"
        );
    }
}
