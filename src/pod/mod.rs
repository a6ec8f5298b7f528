//! Pods: the one vocabulary for reading a pod and the pure rules about it.
//!
//! - `accessors`: reading a pod (containers, restart policy, hostNetwork,
//!   identity) with the API defaults applied on read;
//! - `labels`: the CRI label/annotation keys and the source annotations;
//! - `facts`: derived facts (QoS, pod IPs, grace period, log dir, pod dir,
//!   cgroup parent);
//! - `observed`: what the runtime holds for a pod ([`ObservedPod`]);
//! - `defaults`: the API server's defaulting, for pods that never saw one
//!   (static pods);
//! - `spec`: pure translation of a pod into CRI sandbox and container
//!   configs, returning its warnings instead of logging them;
//! - `plan`: pure `plan(desired, observed) -> Vec<Action>`;
//! - `admission`: kubelet's predicate admission (resources, node name,
//!   ports, node selector and affinity, taints);
//! - `sysctls`: which sysctls a pod may set (kubelet's allowlist);
//! - `host_support`: refusals for what the host or runtime cannot give
//!   (AppArmor, `supplementalGroupsPolicy: Strict`, `hostUsers: false`).

//! - `validation`: the API server's pod validation, for every pod picolet
//!   would run;
//! - `config_objects`: which ConfigMaps and Secrets a pod references, and
//!   the lookup (found / not found / not known yet) through which `spec`
//!   reads them.
//!
//! Nothing here does I/O, reads a clock or logs; it must not know the
//! runtime client, the executor or the agent. The agent executes the
//! actions and logs the warnings.

pub mod accessors;
pub mod admission;
pub mod config_objects;
pub mod defaults;
pub mod facts;
pub mod host_support;
pub mod labels;
pub mod observed;
pub mod plan;
pub mod spec;
pub mod sysctls;
pub mod validation;

pub use accessors::{full_name, uid};
pub use observed::{ObservedContainer, ObservedPod, ObservedSandbox, RuntimeResources};

/// `serde_json::to_value`, by way of JSON text: the same `Value`, but it
/// reuses the `Serialize` code that `serde_json::to_vec` of a `Pod` needs
/// anyway instead of instantiating a second copy of every k8s-openapi type's
/// serializer for `serde_json::value::Serializer` (~85 KiB of the stripped
/// release binary). Use this, not `serde_json::to_value`, for k8s-openapi
/// types; it is not for hot paths.
pub fn to_json_value<T: serde::Serialize + ?Sized>(v: &T) -> serde_json::Result<serde_json::Value> {
    serde_json::from_slice(&serde_json::to_vec(v)?)
}
