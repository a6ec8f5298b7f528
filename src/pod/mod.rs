//! Pods: API defaulting, translation to CRI requests, and planning.
//!
//! - `defaults`: the API server's defaulting, for pods that never saw one
//!   (static pods).
//! - `spec`: pure translation of a pod into CRI sandbox and container configs.
//! - `plan`: pure `plan(desired, observed) -> Vec<Action>`.
//! - `validation`: the API server's pod validation, for every pod picolet
//!   would run.
//!
//! Nothing here does I/O; the agent executes the actions.

pub mod defaults;
pub mod plan;
pub mod spec;
pub mod validation;

use k8s_openapi::api::core::v1::Pod;

/// `serde_json::to_value`, by way of JSON text: the same `Value`, but it
/// reuses the `Serialize` code that `serde_json::to_vec` of a `Pod` needs
/// anyway instead of instantiating a second copy of every k8s-openapi type's
/// serializer for `serde_json::value::Serializer` (~85 KiB of the stripped
/// release binary). Use this, not `serde_json::to_value`, for k8s-openapi
/// types; it is not for hot paths.
pub fn to_json_value<T: serde::Serialize + ?Sized>(v: &T) -> serde_json::Result<serde_json::Value> {
    serde_json::from_slice(&serde_json::to_vec(v)?)
}

/// `<namespace>/<name>` for logs.
pub fn full_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// The pod's UID ("" when unset).
pub fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}
