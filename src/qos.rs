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
//! * [`allocatable`] — the `kubepods` cgroup's limits from capacity minus
//!   `systemReserved`/`kubeReserved`, and the QoS cgroups' CPU shares
//!   (`pkg/kubelet/cm` node allocatable and QoS container managers).
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

pub mod allocatable;

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
mod tests;
