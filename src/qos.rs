//! Pod quality-of-service class, pod-level resource totals, and the kubelet's
//! conversions from Kubernetes resource units to cgroup knob values.
//!
//! This module is **pure**: no I/O, no clock, no logging. It takes a
//! [`PodSpec`] and returns numbers, so every rule here can be unit-tested
//! against the upstream kubelet's behaviour. The I/O side (writing those
//! numbers into cgroup files) lives in [`crate::cgroups`].
//!
//! What it mirrors upstream (Kubernetes v1.36):
//!
//! * [`pod_qos`] — `pkg/apis/core/v1/helper/qos.ComputePodQOS`: init and app
//!   containers are considered, only `cpu` and `memory` count, only values
//!   `> 0` count, and requests/limits are compared **as pod-wide sums**; with
//!   pod-level resources (`spec.resources`, the `PodLevelResources` feature,
//!   on by default since 1.34) only the pod-level values count.
//! * [`pod_resources`] — `component-helpers/resource.PodRequests`/`PodLimits`
//!   as used by `cm.ResourceConfigForPod` (the pod cgroup): the effective value is
//!   `max(sum of app containers + sidecars, max over init containers)` (with
//!   restartable "sidecar" init containers accumulated as upstream does), a
//!   limit only exists when *every* container declares it, a pod-level value
//!   replaces the containers' sum, and `spec.overhead` is added.
//! * [`sandbox_resources`] — what kubelet sends in
//!   `LinuxPodSandboxConfig.resources` (`calculateSandboxResources`: the same
//!   sums without the overhead, limits summed over the containers that
//!   declare one) and [`overhead_resources`] (`overhead`).
//! * [`container_cpu`], [`container_memory_limit_bytes`] — a container's
//!   values for the runtime, falling back to the pod-level limit when the
//!   container declares none (`getCPULimit`/`getMemoryLimit`).
//! * [`milli_cpu_to_shares`], [`milli_cpu_to_quota`] — `pkg/kubelet/cm`
//!   helpers; [`shares_to_weight`] — the cgroup v2 conversion used by
//!   runc/libcontainer (`CpuSharesToCpuWeight`).
//! * [`container_oom_score_adj`] — `pkg/kubelet/qos/policy.go`
//!   `GetContainerOOMScoreAdjust`, with its node-critical, sidecar and
//!   pod-level-request rules.
//!
//! Defaulting: the API server copies a limit into the request when only the
//! limit is set, per container and for pod-level resources. Static pods
//! never pass through the API server, so that defaulting is applied here
//! (per resource).
//!
//! Deliberately not supported (yet): in-place resize status
//! (`status.containerStatuses[].resources`) is ignored.
//!
//! Quantities are parsed by [`crate::quantity`]; those that fail to parse
//! (or are negative) are treated as absent (the config loader is expected to
//! have rejected them already), and amounts beyond `u64` saturate. CPU is
//! handled in millicores and memory in bytes, both rounded *up* like
//! `Quantity.MilliValue()` and `Quantity.Value()`.

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;
use std::fmt;

use crate::quantity::{self, QuantityError};

/// Kubernetes pod QoS class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    /// The API spelling (`status.qosClass`).
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }

    /// Parses the API spelling; anything else is `None`.
    pub fn parse(s: &str) -> Option<QosClass> {
        match s {
            "Guaranteed" => Some(QosClass::Guaranteed),
            "Burstable" => Some(QosClass::Burstable),
            "BestEffort" => Some(QosClass::BestEffort),
            _ => None,
        }
    }
}

impl fmt::Display for QosClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Pod-wide resource totals, as the kubelet applies them to the pod cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PodResources {
    /// Effective CPU request in millicores (0 when nothing requests CPU).
    pub cpu_request_millis: u64,
    /// CPU limit in millicores; `Some` only when every container declares one.
    pub cpu_limit_millis: Option<u64>,
    /// Memory limit in bytes; `Some` only when every container declares one.
    pub memory_limit_bytes: Option<u64>,
    /// Effective memory request in bytes (0 when nothing requests memory).
    pub memory_request_bytes: u64,
}

/// Minimum `cpu.shares` the kernel accepts (and BestEffort's value).
pub const MIN_SHARES: u64 = 2;
/// Maximum `cpu.shares` the kernel accepts.
pub const MAX_SHARES: u64 = 262_144;
/// `cpu.shares` for one full CPU.
pub const SHARES_PER_CPU: u64 = 1024;
/// Default CFS period (`cpu.cfs_period_us`), 100ms.
pub const QUOTA_PERIOD_US: u64 = 100_000;
/// Smallest CFS quota the kubelet writes (1ms).
pub const MIN_QUOTA_PERIOD_US: i64 = 1000;

const CPU: &str = "cpu";
const MEMORY: &str = "memory";

/// Which resource, and therefore which unit (millicores or bytes).
#[derive(Clone, Copy)]
enum Res {
    Cpu,
    Memory,
}

impl Res {
    fn name(self) -> &'static str {
        match self {
            Res::Cpu => CPU,
            Res::Memory => MEMORY,
        }
    }
    /// Millicores or bytes, rounded up; saturates at `u64::MAX`. Negative
    /// or malformed quantities are `None`.
    fn parse(self, s: &str) -> Option<u64> {
        let q = quantity::Quantity::parse(s).ok()?;
        let amount = match self {
            Res::Cpu => q.milli_value(),
            Res::Memory => q.value(),
        };
        match amount {
            Ok(n) => Some(n),
            Err(QuantityError::TooLarge) => Some(u64::MAX),
            Err(_) => None,
        }
    }
}

fn lookup(map: Option<&BTreeMap<String, Quantity>>, res: Res) -> Option<u64> {
    map.and_then(|m| m.get(res.name()))
        .and_then(|q| res.parse(&q.0))
}

/// The container's limit for `res`, if declared and parseable.
fn container_limit(c: &Container, res: Res) -> Option<u64> {
    lookup(c.resources.as_ref().and_then(|r| r.limits.as_ref()), res)
}

/// The container's request for `res`, defaulted from its limit when the
/// request key is absent (API-server defaulting).
fn container_request(c: &Container, res: Res) -> Option<u64> {
    let r = c.resources.as_ref()?;
    match r.requests.as_ref().and_then(|m| m.get(res.name())) {
        Some(q) => res.parse(&q.0),
        None => container_limit(c, res),
    }
}

/// A container's effective memory request in bytes (defaulted from its
/// limit), the input the kubelet feeds to [`oom_score_adj`].
pub fn container_memory_request_bytes(c: &Container) -> u64 {
    container_request(c, Res::Memory).unwrap_or(0)
}

/// The pod-level `spec.resources`, when it names `cpu` or `memory`
/// (`IsPodLevelResourcesSet`).
fn pod_level(spec: &PodSpec) -> Option<&ResourceRequirements> {
    let r = spec.resources.as_ref()?;
    let names = |m: Option<&BTreeMap<String, Quantity>>| {
        m.is_some_and(|m| m.contains_key(CPU) || m.contains_key(MEMORY))
    };
    (names(r.requests.as_ref()) || names(r.limits.as_ref())).then_some(r)
}

/// The pod-level limit for `res`, if declared.
fn pod_level_limit(spec: &PodSpec, res: Res) -> Option<u64> {
    lookup(pod_level(spec)?.limits.as_ref(), res)
}

/// The pod-level request for `res`, defaulted from the pod-level limit as
/// the API server does.
fn pod_level_request(spec: &PodSpec, res: Res) -> Option<u64> {
    let r = pod_level(spec)?;
    match r.requests.as_ref().and_then(|m| m.get(res.name())) {
        Some(q) => res.parse(&q.0),
        None => lookup(r.limits.as_ref(), res),
    }
}

/// Pod-level requests are set (`IsPodLevelRequestsSet`, after defaulting).
fn pod_level_requests_set(spec: &PodSpec) -> bool {
    pod_level_request(spec, Res::Cpu).is_some() || pod_level_request(spec, Res::Memory).is_some()
}

/// A restartable init container (`restartPolicy: Always`): a sidecar.
pub fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

fn init_containers(spec: &PodSpec) -> &[Container] {
    spec.init_containers.as_deref().unwrap_or(&[])
}

/// Computes the pod's QoS class exactly like `qos.ComputePodQOS`, pod-level
/// resources included (ephemeral containers never count).
pub fn pod_qos(spec: &PodSpec) -> QosClass {
    // Sums of values > 0, keyed by resource; `None` = resource never seen.
    let mut requests: [Option<u64>; 2] = [None, None];
    let mut limits: [Option<u64>; 2] = [None, None];
    let mut is_guaranteed = true;
    if let Some(r) = pod_level(spec) {
        let mut limits_found = 0;
        for (i, res) in [Res::Cpu, Res::Memory].into_iter().enumerate() {
            requests[i] = pod_level_request(spec, res).filter(|v| *v > 0);
            limits[i] = lookup(r.limits.as_ref(), res).filter(|v| *v > 0);
            // ComputePodQOS asks for both keys in the pod-level limits.
            limits_found += usize::from(
                r.limits
                    .as_ref()
                    .is_some_and(|m| m.contains_key(res.name())),
            );
        }
        if limits_found != 2 {
            is_guaranteed = false;
        }
    } else {
        for c in spec.containers.iter().chain(init_containers(spec)) {
            let mut limits_found = 0;
            for (i, res) in [Res::Cpu, Res::Memory].into_iter().enumerate() {
                if let Some(v) = container_request(c, res).filter(|v| *v > 0) {
                    requests[i] = Some(requests[i].unwrap_or(0).saturating_add(v));
                }
                if let Some(v) = container_limit(c, res).filter(|v| *v > 0) {
                    limits_found += 1;
                    limits[i] = Some(limits[i].unwrap_or(0).saturating_add(v));
                }
            }
            if limits_found != 2 {
                is_guaranteed = false;
            }
        }
    }
    let count = |m: &[Option<u64>; 2]| m.iter().filter(|v| v.is_some()).count();
    if count(&requests) == 0 && count(&limits) == 0 {
        return QosClass::BestEffort;
    }
    if is_guaranteed {
        for i in 0..2 {
            if let Some(req) = requests[i] {
                if limits[i] != Some(req) {
                    is_guaranteed = false;
                }
            }
        }
    }
    if is_guaranteed && count(&requests) == count(&limits) {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

/// `max(app + sidecars, max over init containers)` with upstream's sidecar
/// accounting: init container *i* uses its own value plus all sidecars
/// started before it. `value` returns 0 for "not set".
fn aggregate(spec: &PodSpec, value: impl Fn(&Container) -> u64) -> u64 {
    let mut total: u64 = spec
        .containers
        .iter()
        .map(&value)
        .fold(0, u64::saturating_add);
    let mut sidecars: u64 = 0;
    let mut init_max: u64 = 0;
    for c in init_containers(spec) {
        let v = value(c);
        let in_use = if is_sidecar(c) {
            total = total.saturating_add(v);
            sidecars = sidecars.saturating_add(v);
            sidecars
        } else {
            v.saturating_add(sidecars)
        };
        init_max = init_max.max(in_use);
    }
    total.max(init_max)
}

/// Pod limit for `res` as `cm.ResourceConfigForPod` applies it: the
/// pod-level limit when declared; else `Some` only when every container
/// (app and init) declares a non-zero limit.
fn pod_limit(spec: &PodSpec, res: Res) -> Option<u64> {
    if let Some(v) = pod_level_limit(spec, res).filter(|v| *v > 0) {
        return Some(v);
    }
    let mut all = spec
        .containers
        .iter()
        .chain(init_containers(spec))
        .peekable();
    all.peek()?;
    if !all.all(|c| container_limit(c, res).is_some_and(|v| v > 0)) {
        return None;
    }
    Some(aggregate(spec, |c| container_limit(c, res).unwrap_or(0)))
}

/// The pod's effective request for `res` without the overhead
/// (`PodRequests`): the pod-level request when set, else the containers'
/// aggregate. `None` when nothing names the resource.
fn pod_request(spec: &PodSpec, res: Res) -> Option<u64> {
    if let Some(v) = pod_level_request(spec, res) {
        return Some(v);
    }
    let named = spec
        .containers
        .iter()
        .chain(init_containers(spec))
        .any(|c| container_request(c, res).is_some());
    named.then(|| aggregate(spec, |c| container_request(c, res).unwrap_or(0)))
}

/// Pod-wide request and limit totals (see [`PodResources`]), including
/// `spec.overhead` (added to requests always, to limits only when present).
pub fn pod_resources(spec: &PodSpec) -> PodResources {
    let overhead = |res: Res| lookup(spec.overhead.as_ref(), res).unwrap_or(0);
    let request = |res: Res| {
        pod_request(spec, res)
            .unwrap_or(0)
            .saturating_add(overhead(res))
    };
    let limit = |res: Res| pod_limit(spec, res).map(|v| v.saturating_add(overhead(res)));
    PodResources {
        cpu_request_millis: request(Res::Cpu),
        cpu_limit_millis: limit(Res::Cpu),
        memory_limit_bytes: limit(Res::Memory),
        memory_request_bytes: request(Res::Memory),
    }
}

/// CPU and memory values for the runtime, before conversion to CRI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RuntimeResources {
    /// The CPU request in millicores; `None` when nothing requests CPU
    /// (the shares then come from the limit).
    pub cpu_request_millis: Option<u64>,
    /// The CPU limit in millicores (0: none).
    pub cpu_limit_millis: u64,
    /// The memory limit in bytes (0: none).
    pub memory_limit_bytes: u64,
}

/// What kubelet sends as the sandbox's resources
/// (`calculateSandboxResources`): the pod's requests (pod-level when set)
/// and its limits summed over the containers that declare one (pod-level
/// when set), without the overhead.
pub fn sandbox_resources(spec: &PodSpec) -> RuntimeResources {
    let limit = |res: Res| {
        pod_level_limit(spec, res)
            .unwrap_or_else(|| aggregate(spec, |c| container_limit(c, res).unwrap_or(0)))
    };
    RuntimeResources {
        cpu_request_millis: pod_request(spec, Res::Cpu),
        cpu_limit_millis: limit(Res::Cpu),
        memory_limit_bytes: limit(Res::Memory),
    }
}

/// `spec.overhead` as runtime resources (kubelet treats it as requests =
/// limits); `None` without an overhead.
pub fn overhead_resources(spec: &PodSpec) -> Option<RuntimeResources> {
    let o = spec.overhead.as_ref()?;
    let cpu = lookup(Some(o), Res::Cpu).unwrap_or(0);
    Some(RuntimeResources {
        cpu_request_millis: Some(cpu),
        cpu_limit_millis: cpu,
        memory_limit_bytes: lookup(Some(o), Res::Memory).unwrap_or(0),
    })
}

/// A container's values for the runtime (`generateLinuxContainerResources`):
/// its own CPU request, and its limits, or the pod-level limits when it
/// declares none.
pub fn container_resources(spec: &PodSpec, c: &Container) -> RuntimeResources {
    let limit = |res: Res| {
        container_limit(c, res)
            .filter(|v| *v > 0)
            .or_else(|| pod_level_limit(spec, res))
            .unwrap_or(0)
    };
    let cpu_request = c
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|m| m.get(CPU))
        .map(|q| Res::Cpu.parse(&q.0).unwrap_or(0));
    RuntimeResources {
        cpu_request_millis: cpu_request,
        cpu_limit_millis: limit(Res::Cpu),
        memory_limit_bytes: limit(Res::Memory),
    }
}

/// A container's memory limit in bytes for the runtime (its own, else the
/// pod-level one; 0 when none).
pub fn container_memory_limit_bytes(spec: &PodSpec, c: &Container) -> u64 {
    container_resources(spec, c).memory_limit_bytes
}

/// `cpu.shares` for a CPU request in millicores (kubelet `MilliCPUToShares`):
/// 0 → 2, otherwise `m * 1024 / 1000` clamped to `[2, 262144]`.
pub fn milli_cpu_to_shares(milli_cpu: u64) -> u64 {
    if milli_cpu == 0 {
        return MIN_SHARES;
    }
    (milli_cpu.saturating_mul(SHARES_PER_CPU) / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// CFS quota in µs for a CPU limit (kubelet `MilliCPUToQuota`):
/// `m * period / 1000`, at least 1000µs. A limit of 0 returns 0, meaning
/// "no quota" (the cgroup layer then writes unlimited).
pub fn milli_cpu_to_quota(milli_cpu: u64, period_us: u64) -> i64 {
    if milli_cpu == 0 {
        return 0;
    }
    let quota = (milli_cpu as u128 * period_us as u128 / 1000).min(i64::MAX as u128) as i64;
    quota.max(MIN_QUOTA_PERIOD_US)
}

/// A container's CPU values for the runtime (CRI `LinuxContainerResources`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerCpu {
    /// `cpu.shares`.
    pub shares: u64,
    /// CFS quota in µs; 0 = no limit.
    pub quota_us: i64,
    /// CFS period in µs.
    pub period_us: u64,
}

/// A container's CPU shares, quota and period from its CPU request and
/// limit in millicores (kubelet's `generateLinuxContainerResources`): the
/// shares come from the request, or from the limit when no request is
/// declared; the quota from the limit (0 = none) over [`QUOTA_PERIOD_US`].
pub fn container_cpu(request_millis: Option<u64>, limit_millis: u64) -> ContainerCpu {
    ContainerCpu {
        shares: milli_cpu_to_shares(request_millis.unwrap_or(limit_millis)),
        quota_us: milli_cpu_to_quota(limit_millis, QUOTA_PERIOD_US),
        period_us: QUOTA_PERIOD_US,
    }
}

/// cgroup v2 `cpu.weight` for v1 `cpu.shares` (runc's linear mapping
/// `1 + ((shares - 2) * 9999) / 262142`; 2 → 1, 262144 → 10000). Shares are
/// clamped into the valid v1 range first so the result is always `1..=10000`.
pub fn shares_to_weight(shares: u64) -> u64 {
    let s = shares.clamp(MIN_SHARES, MAX_SHARES);
    1 + ((s - 2) * 9999) / 262_142
}

/// `oom_score_adj` of Guaranteed containers and node-critical pods.
pub const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
/// `oom_score_adj` of BestEffort containers.
pub const BEST_EFFORT_OOM_SCORE_ADJ: i64 = 1000;
/// The priority class whose pods are killed last (`IsNodeCriticalPod`).
pub const SYSTEM_NODE_CRITICAL: &str = "system-node-critical";

/// `1000 - 1000 * request / capacity`, in Go's int64 arithmetic
/// (truncating division).
fn proportional(request: i128, capacity: i128) -> i64 {
    (1000 - (1000 * request) / capacity).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// The kubelet's `oom_score_adj` for container `c` of a pod
/// (`GetContainerOOMScoreAdjust`):
/// - a `system-node-critical` pod, or a Guaranteed one: −997; BestEffort: 1000;
/// - Burstable: `1000 − 1000·request/capacity`, where with pod-level
///   requests each container's request gets an equal share of what the
///   pod requests beyond its containers; a sidecar gets at most the score
///   of the regular container with the smallest request; the result is
///   kept within `[3, 999]` (3 is `1000 + guaranteedOOMScoreAdj`, 999 keeps
///   it ahead of BestEffort).
///
/// `node_memory_capacity_bytes` is the machine's memory; 0 (unknown) gives 999.
pub fn container_oom_score_adj(
    spec: &PodSpec,
    c: &Container,
    node_memory_capacity_bytes: u64,
) -> i64 {
    if spec.priority_class_name.as_deref() == Some(SYSTEM_NODE_CRITICAL) {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    match pod_qos(spec) {
        QosClass::Guaranteed => return GUARANTEED_OOM_SCORE_ADJ,
        QosClass::BestEffort => return BEST_EFFORT_OOM_SCORE_ADJ,
        QosClass::Burstable => {}
    }
    if node_memory_capacity_bytes == 0 {
        return BEST_EFFORT_OOM_SCORE_ADJ - 1;
    }
    let capacity = node_memory_capacity_bytes as i128;
    let request = container_memory_request_bytes(c) as i128;
    let pod_level = pod_level_requests_set(spec);
    let share = if pod_level {
        remaining_pod_memory_per_container(spec)
    } else {
        0
    };
    let mut adj = proportional(request + share, capacity);
    let sidecar = is_sidecar(c) && init_containers(spec).iter().any(|i| i.name == c.name);
    if sidecar {
        let min_regular = spec
            .containers
            .iter()
            .map(|r| container_memory_request_bytes(r) as i128)
            .min()
            .unwrap_or(0);
        adj = adj.min(proportional(min_regular + share, capacity));
    }
    if adj < 1000 + GUARANTEED_OOM_SCORE_ADJ {
        1000 + GUARANTEED_OOM_SCORE_ADJ
    } else if adj == BEST_EFFORT_OOM_SCORE_ADJ {
        adj - 1
    } else {
        adj
    }
}

/// The pod-level memory request not claimed by any container, divided
/// equally among all (init and app) containers
/// (`remainingPodMemReqPerContainer`).
fn remaining_pod_memory_per_container(spec: &PodSpec) -> i128 {
    let Some(pod) = pod_level_request(spec, Res::Memory).filter(|v| *v > 0) else {
        return 0;
    };
    let n = (spec.containers.len() + init_containers(spec).len()) as i128;
    if n == 0 {
        return 0;
    }
    let claimed = aggregate(spec, |c| container_request(c, Res::Memory).unwrap_or(0));
    (pod as i128 - claimed as i128) / n
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceRequirements;

    fn rl(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
        if pairs.is_empty() {
            return None;
        }
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect(),
        )
    }

    fn ctr(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: rl(requests),
                limits: rl(limits),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn sidecar(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        Container {
            restart_policy: Some("Always".into()),
            ..ctr(requests, limits)
        }
    }

    fn spec(containers: Vec<Container>, init: Vec<Container>) -> PodSpec {
        PodSpec {
            containers,
            init_containers: if init.is_empty() { None } else { Some(init) },
            ..Default::default()
        }
    }

    const FULL: &[(&str, &str)] = &[("cpu", "500m"), ("memory", "128Mi")];

    #[test]
    fn quantities_parse_to_millicores_and_bytes_rounding_up() {
        assert_eq!(Res::Cpu.parse("100m"), Some(100));
        assert_eq!(Res::Cpu.parse("0.5"), Some(500));
        assert_eq!(Res::Cpu.parse("2"), Some(2000));
        assert_eq!(Res::Cpu.parse("1.0001"), Some(1001));
        assert_eq!(Res::Cpu.parse("250000u"), Some(250));
        assert_eq!(Res::Cpu.parse("1n"), Some(1));
        assert_eq!(Res::Memory.parse("128Mi"), Some(128 << 20));
        assert_eq!(Res::Memory.parse("1G"), Some(1_000_000_000));
        assert_eq!(Res::Memory.parse("512"), Some(512));
        assert_eq!(Res::Memory.parse("1.5Gi"), Some(3 << 29));
        assert_eq!(Res::Memory.parse("1e3"), Some(1000));
        assert_eq!(Res::Memory.parse("12E-1"), Some(2));
        assert_eq!(Res::Memory.parse("1k"), Some(1000));
        assert_eq!(Res::Cpu.parse("0"), Some(0));
        assert_eq!(Res::Cpu.parse("-0"), Some(0));
        assert_eq!(Res::Memory.parse("1000Ei"), Some(u64::MAX));
    }

    #[test]
    fn malformed_or_negative_quantities_are_rejected() {
        for bad in [
            "", "m", "abc", "1..2", "1.2.3", "10Q", "1mi", "-1", "1e", "--1",
        ] {
            assert_eq!(Res::Cpu.parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_pod_without_any_requests_or_limits_is_best_effort() {
        let s = spec(vec![ctr(&[], &[]), Container::default()], vec![]);
        assert_eq!(pod_qos(&s), QosClass::BestEffort);
    }

    #[test]
    fn zero_valued_and_non_compute_resources_do_not_leave_best_effort() {
        let s = spec(
            vec![ctr(
                &[("cpu", "0"), ("ephemeral-storage", "1Gi")],
                &[("nvidia.com/gpu", "1")],
            )],
            vec![],
        );
        assert_eq!(pod_qos(&s), QosClass::BestEffort);
    }

    #[test]
    fn equal_cpu_and_memory_requests_and_limits_everywhere_is_guaranteed() {
        let s = spec(
            vec![ctr(FULL, FULL), ctr(FULL, FULL)],
            vec![ctr(FULL, FULL)],
        );
        assert_eq!(pod_qos(&s), QosClass::Guaranteed);
    }

    #[test]
    fn limits_alone_default_the_requests_and_give_guaranteed() {
        let s = spec(vec![ctr(&[], FULL)], vec![]);
        assert_eq!(pod_qos(&s), QosClass::Guaranteed);
    }

    #[test]
    fn a_request_below_its_limit_is_burstable() {
        let s = spec(
            vec![ctr(&[("cpu", "100m"), ("memory", "128Mi")], FULL)],
            vec![],
        );
        assert_eq!(pod_qos(&s), QosClass::Burstable);
    }

    #[test]
    fn a_container_missing_the_memory_limit_makes_the_pod_burstable() {
        let s = spec(
            vec![ctr(FULL, FULL), ctr(&[("cpu", "1")], &[("cpu", "1")])],
            vec![],
        );
        assert_eq!(pod_qos(&s), QosClass::Burstable);
    }

    #[test]
    fn an_init_container_without_limits_makes_the_pod_burstable() {
        let s = spec(vec![ctr(FULL, FULL)], vec![ctr(&[("cpu", "100m")], &[])]);
        assert_eq!(pod_qos(&s), QosClass::Burstable);
        // An init container with no resources at all also breaks Guaranteed.
        let s = spec(vec![ctr(FULL, FULL)], vec![ctr(&[], &[])]);
        assert_eq!(pod_qos(&s), QosClass::Burstable);
    }

    #[test]
    fn only_requests_and_no_limits_is_burstable() {
        let s = spec(vec![ctr(&[("memory", "1Gi")], &[])], vec![]);
        assert_eq!(pod_qos(&s), QosClass::Burstable);
    }

    #[test]
    fn qos_class_names_round_trip() {
        for q in [
            QosClass::Guaranteed,
            QosClass::Burstable,
            QosClass::BestEffort,
        ] {
            assert_eq!(QosClass::parse(q.as_str()), Some(q));
            assert_eq!(q.to_string(), q.as_str());
        }
        assert_eq!(QosClass::parse("guaranteed"), None);
    }

    #[test]
    fn pod_requests_are_the_larger_of_the_app_sum_and_the_biggest_init_container() {
        let s = spec(
            vec![
                ctr(&[("cpu", "100m"), ("memory", "64Mi")], &[]),
                ctr(&[("cpu", "200m"), ("memory", "64Mi")], &[]),
            ],
            vec![
                ctr(&[("cpu", "250m"), ("memory", "32Mi")], &[]),
                ctr(&[("cpu", "1")], &[]),
            ],
        );
        let r = pod_resources(&s);
        assert_eq!(r.cpu_request_millis, 1000);
        assert_eq!(r.memory_request_bytes, 128 << 20);
        assert_eq!(r.cpu_limit_millis, None);
        assert_eq!(r.memory_limit_bytes, None);
    }

    #[test]
    fn pod_limits_exist_only_when_every_container_declares_them() {
        let s = spec(
            vec![
                ctr(&[], &[("cpu", "1"), ("memory", "100Mi")]),
                ctr(&[], &[("cpu", "500m")]),
            ],
            vec![ctr(&[], &[("cpu", "2"), ("memory", "1Gi")])],
        );
        let r = pod_resources(&s);
        assert_eq!(r.cpu_limit_millis, Some(2000));
        assert_eq!(r.memory_limit_bytes, None);
        // requests default from limits: cpu max(1500, 2000), memory max(100Mi, 1Gi)
        assert_eq!(r.cpu_request_millis, 2000);
        assert_eq!(r.memory_request_bytes, 1 << 30);
    }

    #[test]
    fn sidecar_init_containers_add_to_the_app_containers() {
        let s = spec(
            vec![ctr(&[], &[("cpu", "300m"), ("memory", "100")])],
            vec![
                sidecar(&[], &[("cpu", "200m"), ("memory", "50")]),
                ctr(&[], &[("cpu", "400m"), ("memory", "10")]),
            ],
        );
        let r = pod_resources(&s);
        // app 300 + sidecar 200 = 500; second init runs beside the sidecar: 400 + 200 = 600
        assert_eq!(r.cpu_request_millis, 600);
        assert_eq!(r.cpu_limit_millis, Some(600));
        // memory: app 100 + sidecar 50 = 150 vs 10 + 50 = 60
        assert_eq!(r.memory_limit_bytes, Some(150));
    }

    #[test]
    fn pod_overhead_is_added_to_requests_and_to_existing_limits() {
        let mut s = spec(vec![ctr(&[("memory", "100Mi")], &[("cpu", "1")])], vec![]);
        s.overhead = rl(&[("cpu", "250m"), ("memory", "20Mi")]);
        let r = pod_resources(&s);
        assert_eq!(r.cpu_request_millis, 1250);
        assert_eq!(r.cpu_limit_millis, Some(1250));
        assert_eq!(r.memory_request_bytes, 120 << 20);
        assert_eq!(r.memory_limit_bytes, None);
    }

    #[test]
    fn a_pod_with_no_containers_has_no_limits() {
        assert_eq!(pod_resources(&PodSpec::default()), PodResources::default());
    }

    #[test]
    fn container_memory_request_falls_back_to_its_limit() {
        assert_eq!(
            container_memory_request_bytes(&ctr(&[], &[("memory", "1Ki")])),
            1024
        );
        assert_eq!(
            container_memory_request_bytes(&ctr(&[("memory", "1")], &[("memory", "1Ki")])),
            1
        );
        assert_eq!(container_memory_request_bytes(&Container::default()), 0);
    }

    #[test]
    fn cpu_shares_follow_the_kubelet_formula_and_clamps() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2);
        assert_eq!(milli_cpu_to_shares(100), 102);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_shares(500_000), 262_144);
    }

    #[test]
    fn cpu_quota_follows_the_kubelet_formula_with_a_one_millisecond_floor() {
        assert_eq!(milli_cpu_to_quota(0, QUOTA_PERIOD_US), 0);
        assert_eq!(milli_cpu_to_quota(1, QUOTA_PERIOD_US), 1000);
        assert_eq!(milli_cpu_to_quota(10, QUOTA_PERIOD_US), 1000);
        assert_eq!(milli_cpu_to_quota(250, QUOTA_PERIOD_US), 25_000);
        assert_eq!(milli_cpu_to_quota(2000, QUOTA_PERIOD_US), 200_000);
        assert_eq!(milli_cpu_to_quota(500, 50_000), 25_000);
    }

    #[test]
    fn a_container_without_a_cpu_request_gets_shares_from_its_limit() {
        let c = container_cpu(None, 500);
        assert_eq!((c.shares, c.quota_us, c.period_us), (512, 50_000, 100_000));
        let c = container_cpu(Some(250), 0);
        assert_eq!((c.shares, c.quota_us), (256, 0));
        assert_eq!(container_cpu(None, 0).shares, MIN_SHARES);
    }

    #[test]
    fn cpu_weight_maps_the_shares_range_onto_one_to_ten_thousand() {
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(0), 1);
        assert_eq!(shares_to_weight(1024), 39);
        assert_eq!(shares_to_weight(262_144), 10_000);
        assert_eq!(shares_to_weight(u64::MAX), 10_000);
    }

    const CAP: u64 = 1000 << 20;

    fn with_pod_level(
        mut s: PodSpec,
        requests: &[(&str, &str)],
        limits: &[(&str, &str)],
    ) -> PodSpec {
        s.resources = Some(ResourceRequirements {
            requests: rl(requests),
            limits: rl(limits),
            ..Default::default()
        });
        s
    }

    fn named(name: &str, c: Container) -> Container {
        Container {
            name: name.into(),
            ..c
        }
    }

    #[test]
    fn oom_score_adj_follows_the_kubelet_table() {
        let burstable = |mem: &str| ctr(&[("memory", mem)], &[]);
        let one = |c: Container| spec(vec![c], vec![]);
        // (case, pod spec, container index in init+app order, want)
        let sidecar_pod = |sidecar_mem: &str, app_mem: &str| {
            spec(
                vec![named("app", burstable(app_mem))],
                vec![named("log", sidecar(&[("memory", sidecar_mem)], &[]))],
            )
        };
        let mut critical = one(burstable("100Mi"));
        critical.priority_class_name = Some(SYSTEM_NODE_CRITICAL.into());
        let pod_level = with_pod_level(
            spec(
                vec![
                    named("a", burstable("100Mi")),
                    named("b", Container::default()),
                ],
                vec![],
            ),
            &[("memory", "400Mi")],
            &[],
        );
        let cases: Vec<(&str, PodSpec, &str, i64)> = vec![
            ("guaranteed", one(ctr(FULL, FULL)), "c", -997),
            ("best effort", one(Container::default()), "", 1000),
            (
                "burstable: a tenth of the memory",
                one(burstable("100Mi")),
                "c",
                900,
            ),
            (
                "burstable: no memory request",
                one(ctr(&[("cpu", "1")], &[])),
                "c",
                999,
            ),
            (
                "burstable: almost all the memory",
                one(burstable("998Mi")),
                "c",
                3,
            ),
            (
                "burstable: more than the node",
                one(burstable("2000Mi")),
                "c",
                3,
            ),
            ("node-critical priority class", critical, "c", -997),
            (
                "a sidecar gets at most the score of the smallest regular container",
                sidecar_pod("10Mi", "100Mi"),
                "log",
                900,
            ),
            (
                "a sidecar requesting more keeps its own score",
                sidecar_pod("500Mi", "100Mi"),
                "log",
                500,
            ),
            (
                "the regular container of a pod with a sidecar",
                sidecar_pod("10Mi", "100Mi"),
                "app",
                900,
            ),
            (
                "pod-level requests: a share of the unclaimed memory is added",
                pod_level.clone(),
                "a",
                750,
            ),
            (
                "pod-level requests: a container without a request gets the share",
                pod_level,
                "b",
                850,
            ),
        ];
        for (case, s, name, want) in cases {
            let c = s
                .init_containers
                .iter()
                .flatten()
                .chain(&s.containers)
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("{case}: no container {name:?}"));
            assert_eq!(container_oom_score_adj(&s, c, CAP), want, "{case}");
        }
        let s = one(burstable("100Mi"));
        assert_eq!(
            container_oom_score_adj(&s, &s.containers[0], 0),
            999,
            "unknown capacity"
        );
    }

    #[test]
    fn pod_level_resources_decide_the_qos_class() {
        let plain = || spec(vec![ctr(&[], &[]), ctr(&[("cpu", "100m")], &[])], vec![]);
        let cases: Vec<(&str, PodSpec, QosClass)> = vec![
            (
                "pod limits for cpu and memory default the requests: guaranteed",
                with_pod_level(plain(), &[], &[("cpu", "1"), ("memory", "200Mi")]),
                QosClass::Guaranteed,
            ),
            (
                "pod requests below the pod limits: burstable",
                with_pod_level(
                    plain(),
                    &[("cpu", "500m"), ("memory", "100Mi")],
                    &[("cpu", "1"), ("memory", "200Mi")],
                ),
                QosClass::Burstable,
            ),
            (
                "a pod limit for memory only: burstable",
                with_pod_level(plain(), &[], &[("memory", "200Mi")]),
                QosClass::Burstable,
            ),
            (
                "pod requests only: burstable, whatever the containers say",
                with_pod_level(
                    spec(vec![ctr(FULL, FULL)], vec![]),
                    &[("memory", "1Gi")],
                    &[],
                ),
                QosClass::Burstable,
            ),
            (
                "pod-level values of other resources only: the containers decide",
                with_pod_level(plain(), &[("ephemeral-storage", "1Gi")], &[]),
                QosClass::Burstable,
            ),
            (
                "no pod-level resources: the containers decide",
                spec(vec![ctr(FULL, FULL)], vec![]),
                QosClass::Guaranteed,
            ),
        ];
        for (case, s, want) in cases {
            assert_eq!(pod_qos(&s), want, "{case}");
        }
    }

    #[test]
    fn pod_level_limits_are_the_pod_cgroup_limits_and_pod_requests_replace_the_sums() {
        let s = with_pod_level(
            spec(vec![ctr(&[("cpu", "100m")], &[]), ctr(&[], &[])], vec![]),
            &[("cpu", "500m")],
            &[("cpu", "1"), ("memory", "200Mi")],
        );
        let r = pod_resources(&s);
        assert_eq!(r.cpu_request_millis, 500);
        assert_eq!(r.cpu_limit_millis, Some(1000));
        assert_eq!(r.memory_limit_bytes, Some(200 << 20));
        assert_eq!(
            r.memory_request_bytes,
            200 << 20,
            "defaulted from the pod limit"
        );
    }

    #[test]
    fn a_container_without_limits_in_a_pod_with_limits_gets_the_pod_limits() {
        // The pod: no container resources, spec.resources.limits {cpu: 1, memory: 200Mi}.
        let s = with_pod_level(
            spec(vec![ctr(&[], &[])], vec![]),
            &[],
            &[("cpu", "1"), ("memory", "200Mi")],
        );
        let r = container_resources(&s, &s.containers[0]);
        let cpu = container_cpu(r.cpu_request_millis, r.cpu_limit_millis);
        assert_eq!(
            (cpu.shares, cpu.quota_us, cpu.period_us),
            (1024, 100_000, 100_000)
        );
        assert_eq!(r.memory_limit_bytes, 209_715_200);
        // Its own limits win.
        let s = with_pod_level(
            spec(vec![ctr(&[], &[("memory", "50Mi")])], vec![]),
            &[],
            &[("memory", "200Mi")],
        );
        assert_eq!(container_memory_limit_bytes(&s, &s.containers[0]), 50 << 20);
    }

    #[test]
    fn sandbox_resources_sum_what_is_declared_without_the_overhead() {
        let mut s = spec(
            vec![
                ctr(&[("cpu", "250m")], &[("cpu", "500m"), ("memory", "100Mi")]),
                ctr(&[], &[]),
            ],
            vec![sidecar(&[], &[("cpu", "100m")])],
        );
        s.overhead = rl(&[("cpu", "50m"), ("memory", "10Mi")]);
        let r = sandbox_resources(&s);
        // requests: 250m + the sidecar's 100m (defaulted from its limit)
        assert_eq!(r.cpu_request_millis, Some(350));
        assert_eq!(r.cpu_limit_millis, 600);
        assert_eq!(r.memory_limit_bytes, 100 << 20);
        let o = overhead_resources(&s).expect("has an overhead");
        assert_eq!(
            (
                o.cpu_request_millis,
                o.cpu_limit_millis,
                o.memory_limit_bytes
            ),
            (Some(50), 50, 10 << 20)
        );
        assert_eq!(
            sandbox_resources(&spec(vec![ctr(&[], &[])], vec![])),
            RuntimeResources::default()
        );
        assert_eq!(overhead_resources(&spec(vec![], vec![])), None);
    }
}
