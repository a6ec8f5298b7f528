//! The pod-level `status.resources` and `status.allocatedResources`, as
//! kubelet v1.36 reports them for every pod, whether or not its spec has
//! pod-level `resources` (InPlacePodLevelResourcesVerticalScaling, beta and
//! on by default: `convertStatusToAPIStatus`).
//!
//! `allocatedResources` is the pod's total requests over every resource
//! name (`resourcehelper.PodRequests`): the app containers' and sidecars'
//! requests summed, at least the largest any init container needs while it
//! runs beside the sidecars started before it, pod-level requests for `cpu`,
//! `memory` and `hugepages-*` in place of the containers' totals, plus
//! `spec.overhead`. picolet resizes nothing in place, so what is allocated
//! is the spec's.
//!
//! `resources` (`convertToAPIPodLevelResourcesStatus`): while the pod is not
//! Running, the spec's pod-level `resources` with the pod's total requests
//! and total limits (`PodLimits`: limits summed the same way, pod-level
//! ones in their place, the overhead added to each non-zero limit). Once
//! it is Running, the spec's pod-level `resources` with what the pod's
//! cgroup holds: the CPU request from its shares (on cgroup v2 from
//! `cpu.weight`, which cannot hold every request exactly: a `100m` pod
//! shows `79m`), the CPU limit from its CFS quota and the memory limit, and
//! the total memory request where the spec names no pod-level one.
//! Each quantity is written as apimachinery writes the sum (see
//! `quantity::total`).
//!
//! Divergences: kubelet asks whether the pod *was* Running (the phase the
//! API server holds); picolet asks whether the status it is writing says
//! Running, so the cgroup's values show one status update earlier and a
//! finished pod's totals one update earlier. When the pod cgroup cannot be
//! read, kubelet keeps the values its previous status reported; picolet,
//! which keeps no previous status, reports the spec's there.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::pod::RuntimeResources;
use crate::qos::is_sidecar;
use crate::quantity::total::Total;

/// kubelet's `MinShares`: at or below it, a CPU request is the spec's.
const MIN_SHARES_MILLIS: i64 = 2;
/// kubelet's `MinMilliCPULimit`: at or below it, a CPU limit is the spec's.
const MIN_CPU_LIMIT_MILLIS: i64 = 10;

type Totals = BTreeMap<String, Total>;
type ResourceList = BTreeMap<String, Quantity>;

/// The pod's `allocatedResources`: its total requests (`None` when it
/// requests nothing).
pub fn allocated_resources(spec: &PodSpec) -> Option<ResourceList> {
    to_api(pod_requests(spec))
}

/// The pod's `resources`; `running` is whether its phase is Running, and
/// `cgroup` what its pod cgroup holds (`None` when it could not be read).
pub fn resources(
    spec: &PodSpec,
    running: bool,
    cgroup: Option<&RuntimeResources>,
) -> ResourceRequirements {
    let mut r = spec.resources.clone().unwrap_or_default();
    if !running {
        r.requests = to_api(pod_requests(spec));
        r.limits = to_api(pod_limits(spec));
        return r;
    }
    let mut requests = r.requests.take().unwrap_or_default();
    let mut limits = r.limits.take().unwrap_or_default();
    let cg = cgroup.copied().unwrap_or_default();
    if let Some(cpu) = cg.cpu_request_millis {
        if cpu > MIN_SHARES_MILLIS || millis(requests.get("cpu")) > MIN_SHARES_MILLIS {
            requests.insert("cpu".into(), go(Total::from_millis(cpu as u64)));
        }
    }
    if !requests.contains_key("memory") {
        if let Some(m) = pod_requests(spec).remove("memory") {
            requests.insert("memory".into(), go(m));
        }
    }
    if let Some(cpu) = cg.cpu_limit_millis {
        if cpu > MIN_CPU_LIMIT_MILLIS || millis(limits.get("cpu")) > MIN_CPU_LIMIT_MILLIS {
            limits.insert("cpu".into(), go(Total::from_millis(cpu as u64)));
        }
    }
    if let Some(bytes) = cg.memory_limit_bytes {
        limits.insert("memory".into(), go(Total::from_bytes(bytes as u64)));
    }
    r.requests = (!requests.is_empty()).then_some(requests);
    r.limits = (!limits.is_empty()).then_some(limits);
    r
}

/// `PodRequests`: the containers' aggregate, pod-level requests in place
/// of it where set, plus the overhead.
fn pod_requests(spec: &PodSpec) -> Totals {
    let mut reqs = aggregate(spec, |r| r.requests.as_ref());
    let pod_level = spec.resources.as_ref().and_then(|r| r.requests.as_ref());
    if pod_level.is_some_and(|m| m.keys().any(|n| supported(n))) {
        for (name, t) in totals(pod_level) {
            if supported(&name) {
                reqs.insert(name, t);
            }
        }
    }
    add(&mut reqs, &totals(spec.overhead.as_ref()));
    reqs
}

/// `PodLimits`: the containers' aggregate, pod-level limits in place of it
/// where the pod has pod-level resources, the overhead added to each
/// non-zero limit.
fn pod_limits(spec: &PodSpec) -> Totals {
    let mut limits = aggregate(spec, |r| r.limits.as_ref());
    let pod_level = spec.resources.as_ref();
    let names_supported =
        |m: Option<&ResourceList>| m.is_some_and(|m| m.keys().any(|n| supported(n)));
    if pod_level
        .is_some_and(|r| names_supported(r.requests.as_ref()) || names_supported(r.limits.as_ref()))
    {
        for (name, t) in totals(pod_level.and_then(|r| r.limits.as_ref())) {
            if supported(&name) {
                limits.insert(name, t);
            }
        }
    }
    for (name, o) in totals(spec.overhead.as_ref()) {
        if let Some(l) = limits.get_mut(&name).filter(|l| !l.is_zero()) {
            l.add(&o);
        }
    }
    limits
}

/// A resource pod-level `resources` may name (`IsSupportedPodLevelResource`).
fn supported(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

/// The containers' aggregate of one list (requests or limits): app
/// containers and sidecars summed, then at least what each init container
/// needs beside the sidecars declared before it.
fn aggregate(
    spec: &PodSpec,
    pick: impl Fn(&ResourceRequirements) -> Option<&ResourceList>,
) -> Totals {
    let list = |c: &Container| totals(c.resources.as_ref().and_then(&pick));
    let mut sum = Totals::new();
    for c in &spec.containers {
        add(&mut sum, &list(c));
    }
    let mut sidecars = Totals::new();
    let mut init_max = Totals::new();
    for c in spec.init_containers.iter().flatten() {
        let own = list(c);
        let running = if is_sidecar(c) {
            add(&mut sum, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut t = own;
            add(&mut t, &sidecars);
            t
        };
        max(&mut init_max, &running);
    }
    max(&mut sum, &init_max);
    sum
}

fn totals(list: Option<&ResourceList>) -> Totals {
    list.into_iter()
        .flatten()
        .filter_map(|(n, q)| Some((n.clone(), Total::parse(&q.0)?)))
        .collect()
}

/// `addResourceList`.
fn add(into: &mut Totals, list: &Totals) {
    for (name, t) in list {
        match into.get_mut(name) {
            Some(sum) => sum.add(t),
            None => {
                into.insert(name.clone(), *t);
            }
        }
    }
}

/// `maxResourceList`.
fn max(into: &mut Totals, list: &Totals) {
    for (name, t) in list {
        if into.get(name).is_none_or(|m| t.exceeds(m)) {
            into.insert(name.clone(), *t);
        }
    }
}

fn go(t: Total) -> Quantity {
    Quantity(t.to_go_string())
}

/// The totals as the API writes them: `None` when empty (`omitempty`).
fn to_api(t: Totals) -> Option<ResourceList> {
    (!t.is_empty()).then(|| t.into_iter().map(|(n, t)| (n, go(t))).collect())
}

/// A quantity's millis (0 when absent or unreadable).
fn millis(q: Option<&Quantity>) -> i64 {
    q.and_then(|q| crate::quantity::Quantity::parse(&q.0).ok())
        .and_then(|q| q.milli_value().ok())
        .map_or(0, |m| i64::try_from(m).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[(&str, &str)]) -> Option<ResourceList> {
        Some(
            items
                .iter()
                .map(|(n, q)| (n.to_string(), Quantity(q.to_string())))
                .collect(),
        )
    }

    fn container(name: &str, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        Container {
            name: name.into(),
            resources: Some(ResourceRequirements {
                requests: list(requests).filter(|m| !m.is_empty()),
                limits: list(limits).filter(|m| !m.is_empty()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn sidecar(mut c: Container) -> Container {
        c.restart_policy = Some("Always".into());
        c
    }

    #[test]
    fn allocated_resources_sum_every_resource_name_over_the_containers() {
        let spec = PodSpec {
            containers: vec![
                container("a", &[("cpu", "100m"), ("memory", "64Mi")], &[]),
                container(
                    "b",
                    &[
                        ("cpu", "200m"),
                        ("memory", "64Mi"),
                        ("ephemeral-storage", "1Gi"),
                    ],
                    &[],
                ),
            ],
            ..Default::default()
        };
        assert_eq!(
            allocated_resources(&spec),
            list(&[
                ("cpu", "300m"),
                ("memory", "128Mi"),
                ("ephemeral-storage", "1Gi")
            ])
        );
    }

    #[test]
    fn a_pod_that_requests_nothing_has_no_allocated_resources_and_empty_resources() {
        let spec = PodSpec {
            containers: vec![Container::default()],
            ..Default::default()
        };
        assert_eq!(allocated_resources(&spec), None);
        assert_eq!(
            resources(&spec, false, None),
            ResourceRequirements::default()
        );
    }

    #[test]
    fn an_init_container_counts_beside_the_sidecars_declared_before_it() {
        let spec = PodSpec {
            init_containers: Some(vec![
                sidecar(container("side", &[("cpu", "100m")], &[])),
                container("init", &[("cpu", "500m")], &[]),
            ]),
            containers: vec![container("app", &[("cpu", "200m")], &[])],
            ..Default::default()
        };
        // app + sidecar = 300m; init beside the sidecar = 600m.
        assert_eq!(allocated_resources(&spec), list(&[("cpu", "600m")]));
    }

    #[test]
    fn pod_level_requests_replace_the_containers_totals_and_the_overhead_is_added() {
        let spec = PodSpec {
            resources: Some(ResourceRequirements {
                requests: list(&[("cpu", "1"), ("memory", "256Mi")]),
                limits: list(&[("memory", "512Mi")]),
                ..Default::default()
            }),
            overhead: list(&[("cpu", "250m")]),
            containers: vec![container(
                "a",
                &[("cpu", "100m"), ("ephemeral-storage", "1Gi")],
                &[("cpu", "2"), ("memory", "128Mi")],
            )],
            ..Default::default()
        };
        assert_eq!(
            allocated_resources(&spec),
            list(&[
                ("cpu", "1250m"),
                ("memory", "256Mi"),
                ("ephemeral-storage", "1Gi")
            ])
        );
        let r = resources(&spec, false, None);
        assert_eq!(r.requests, allocated_resources(&spec));
        assert_eq!(r.limits, list(&[("cpu", "2250m"), ("memory", "512Mi")]));
    }

    #[test]
    fn before_running_limits_are_summed_over_the_containers_that_declare_one() {
        let spec = PodSpec {
            containers: vec![
                container(
                    "a",
                    &[("cpu", "100m")],
                    &[("cpu", "500m"), ("memory", "128Mi")],
                ),
                container("b", &[("cpu", "100m")], &[]),
            ],
            ..Default::default()
        };
        let r = resources(&spec, false, None);
        assert_eq!(r.requests, list(&[("cpu", "200m")]));
        assert_eq!(r.limits, list(&[("cpu", "500m"), ("memory", "128Mi")]));
    }

    #[test]
    fn a_running_pod_reports_its_cgroups_values_over_the_pod_level_spec() {
        let spec = PodSpec {
            containers: vec![container(
                "a",
                &[("cpu", "100m"), ("memory", "64Mi")],
                &[("cpu", "500m"), ("memory", "128Mi")],
            )],
            ..Default::default()
        };
        let cgroup = RuntimeResources {
            cpu_request_millis: Some(79),
            cpu_limit_millis: Some(500),
            memory_limit_bytes: Some(128 << 20),
        };
        let r = resources(&spec, true, Some(&cgroup));
        assert_eq!(r.requests, list(&[("cpu", "79m"), ("memory", "64Mi")]));
        assert_eq!(r.limits, list(&[("cpu", "500m"), ("memory", "128Mi")]));
    }

    #[test]
    fn a_running_pod_without_cgroup_values_reports_only_its_memory_request() {
        let spec = PodSpec {
            containers: vec![container("a", &[("cpu", "100m"), ("memory", "64Mi")], &[])],
            ..Default::default()
        };
        let r = resources(&spec, true, None);
        assert_eq!(r.requests, list(&[("memory", "64Mi")]));
        assert_eq!(r.limits, None);
    }

    #[test]
    fn minimal_cgroup_cpu_values_keep_the_spec_unless_it_asks_for_more() {
        let spec = PodSpec {
            containers: vec![Container::default()],
            ..Default::default()
        };
        let cgroup = RuntimeResources {
            cpu_request_millis: Some(2),
            cpu_limit_millis: Some(10),
            memory_limit_bytes: None,
        };
        assert_eq!(
            resources(&spec, true, Some(&cgroup)),
            ResourceRequirements::default()
        );
        let spec = PodSpec {
            resources: Some(ResourceRequirements {
                requests: list(&[("cpu", "5m")]),
                limits: list(&[("cpu", "20m")]),
                ..Default::default()
            }),
            ..spec
        };
        let r = resources(&spec, true, Some(&cgroup));
        assert_eq!(r.requests, list(&[("cpu", "2m")]));
        assert_eq!(r.limits, list(&[("cpu", "10m")]));
    }
}
