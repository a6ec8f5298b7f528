//! Node allocatable enforced on the `kubepods` cgroup, and the CPU shares
//! of the QoS cgroups, computed the way kubelet's container manager does
//! (`enforceNodeAllocatableCgroups`, `qosContainerManager.setCPUCgroupConfig`).
//!
//! Pure: capacity, reservations and pod specs come in, the values to write
//! go out. Writing them is `cgroups::PodCgroups`' job, deciding when is the
//! agent's. Note kubelet's rule: the `kubepods` memory limit is capacity
//! minus `systemReserved` and `kubeReserved` only; the hard eviction
//! threshold is *not* subtracted (it stays inside the cgroup so that
//! eviction acts before the kernel OOM-kills), although it is subtracted
//! from the allocatable the Node reports.

use k8s_openapi::api::core::v1::PodSpec;

use super::{milli_cpu_to_shares, pod_qos, pod_resources, QosClass, MIN_SHARES};

/// What the node has, as kubelet's `internalCapacity` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capacity {
    /// Online CPUs in millicores.
    pub cpu_millis: u64,
    /// `MemTotal`, in bytes.
    pub memory_bytes: u64,
    /// `/proc/sys/kernel/pid_max`; `None` when unknown.
    pub pids: Option<u64>,
}

/// One of `systemReserved` / `kubeReserved`, the parts that bound cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reserved {
    pub cpu_millis: u64,
    pub memory_bytes: u64,
    pub pids: u64,
}

/// The values for the `kubepods` cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubepodsLimits {
    /// `cpu.shares` (converted to `cpu.weight` on v2).
    pub cpu_shares: u64,
    /// `memory.limit_in_bytes` / `memory.max`.
    pub memory_bytes: u64,
    /// `pids.max`; `None` when pid_max is unknown.
    pub pids: Option<u64>,
}

/// kubelet's `getNodeAllocatableAbsolute` when `enforce` (cgroupsPerQOS
/// and `enforceNodeAllocatable` contains `pods`), otherwise the capacity
/// itself: kubelet sets the `kubepods` cgroup from capacity even then, so
/// that its default CPU share does not starve the pods. Negative results
/// are clamped to zero, like kubelet's.
pub fn kubepods_limits(
    capacity: Capacity,
    system: Reserved,
    kube: Reserved,
    enforce: bool,
) -> KubepodsLimits {
    let minus = |cap: u64, f: fn(&Reserved) -> u64| {
        if enforce {
            cap.saturating_sub(f(&system)).saturating_sub(f(&kube))
        } else {
            cap
        }
    };
    KubepodsLimits {
        cpu_shares: milli_cpu_to_shares(minus(capacity.cpu_millis, |r| r.cpu_millis)),
        memory_bytes: minus(capacity.memory_bytes, |r| r.memory_bytes),
        pids: capacity.pids.map(|p| minus(p, |r| r.pids)),
    }
}

/// `cpu.shares` of the two QoS cgroups below `kubepods`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QosShares {
    /// From the sum of the CPU requests (with overhead) of the Burstable pods.
    pub burstable: u64,
    /// Always the minimum.
    pub besteffort: u64,
}

/// kubelet's `setCPUCgroupConfig`: the Burstable cgroup gets the shares of
/// the sum of its pods' CPU requests, BestEffort the minimum. `pods` are
/// the active pods (not terminated).
pub fn qos_shares<'a>(pods: impl IntoIterator<Item = &'a PodSpec>) -> QosShares {
    let burstable_millis = pods
        .into_iter()
        .filter(|spec| pod_qos(spec) == QosClass::Burstable)
        .map(|spec| pod_resources(spec).cpu_request_millis)
        .fold(0u64, u64::saturating_add);
    QosShares {
        burstable: milli_cpu_to_shares(burstable_millis),
        besteffort: MIN_SHARES,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use std::collections::BTreeMap;

    const MI: u64 = 1 << 20;

    fn pi(mem_mib: u64, cpus: u64) -> Capacity {
        Capacity {
            cpu_millis: cpus * 1000,
            memory_bytes: mem_mib * MI,
            pids: Some(32768),
        }
    }

    fn res(cpu: u64, mem_mib: u64, pids: u64) -> Reserved {
        Reserved {
            cpu_millis: cpu,
            memory_bytes: mem_mib * MI,
            pids,
        }
    }

    #[test]
    fn kubepods_limits_subtract_both_reservations_but_not_the_eviction_threshold() {
        let cases = [
            // (capacity, system, kube, enforce, shares, memory MiB, pids)
            (
                pi(1024, 4),
                res(0, 0, 0),
                res(0, 0, 0),
                true,
                4096,
                1024,
                32768,
            ),
            (
                pi(1024, 4),
                res(500, 100, 0),
                res(250, 50, 1000),
                true,
                3328,
                874,
                31768,
            ),
            (
                pi(256, 1),
                res(100, 32, 0),
                res(100, 32, 0),
                true,
                819,
                192,
                32768,
            ),
            // Not enforced: capacity, whatever is reserved.
            (
                pi(256, 1),
                res(100, 32, 0),
                res(100, 32, 0),
                false,
                1024,
                256,
                32768,
            ),
            // More reserved than there is: zero memory, minimum shares.
            (
                pi(256, 1),
                res(2000, 300, 0),
                res(0, 0, 0),
                true,
                2,
                0,
                32768,
            ),
        ];
        for (cap, sys, kube, enforce, shares, mem, pids) in cases {
            let got = kubepods_limits(cap, sys, kube, enforce);
            assert_eq!(
                got,
                KubepodsLimits {
                    cpu_shares: shares,
                    memory_bytes: mem * MI,
                    pids: Some(pids),
                },
                "{cap:?} {sys:?} {kube:?} enforce={enforce}"
            );
        }
    }

    #[test]
    fn an_unknown_pid_max_leaves_pids_unlimited() {
        let cap = Capacity {
            pids: None,
            ..pi(512, 2)
        };
        assert_eq!(
            kubepods_limits(cap, res(0, 0, 100), res(0, 0, 0), true).pids,
            None
        );
    }

    fn pod(containers: &[(Option<&str>, Option<&str>)]) -> PodSpec {
        let q = |v: Option<&str>| {
            v.map(|v| BTreeMap::from([("cpu".to_string(), Quantity(v.to_string()))]))
        };
        PodSpec {
            containers: containers
                .iter()
                .enumerate()
                .map(|(i, (req, lim))| Container {
                    name: format!("c{i}"),
                    resources: Some(ResourceRequirements {
                        requests: q(*req),
                        limits: q(*lim),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn burstable_shares_are_the_sum_of_burstable_cpu_requests_only() {
        let mut guaranteed = pod(&[(Some("1"), Some("1"))]);
        let r = guaranteed.containers[0].resources.as_mut().unwrap();
        for m in [r.requests.as_mut().unwrap(), r.limits.as_mut().unwrap()] {
            m.insert("memory".to_string(), Quantity("64Mi".to_string()));
        }
        let best_effort = pod(&[(None, None)]);
        let b1 = pod(&[(Some("250m"), None), (Some("250m"), Some("1"))]);
        let b2 = pod(&[(Some("100m"), Some("200m"))]);
        let no_cpu_request = pod(&[(None, Some("300m"))]);
        let cases: [(Vec<&PodSpec>, u64); 5] = [
            (vec![], MIN_SHARES),
            (vec![&guaranteed, &best_effort], MIN_SHARES),
            (vec![&b1], 512),
            (vec![&b1, &b2, &guaranteed], 614),
            // A limit alone makes the request equal to it (defaulting).
            (vec![&no_cpu_request], milli_cpu_to_shares(300)),
        ];
        for (pods, want) in cases {
            let got = qos_shares(pods.iter().copied());
            assert_eq!(got.burstable, want, "{} pods", pods.len());
            assert_eq!(got.besteffort, MIN_SHARES);
        }
    }
}
