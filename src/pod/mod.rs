//! Pods: API defaulting, translation to CRI requests, and planning.
//!
//! - `defaults`: the API server's defaulting, for pods that never saw one
//!   (static pods).
//! - `spec`: pure translation of a pod into CRI sandbox and container configs.
//! - `plan`: pure `plan(desired, observed) -> Vec<Action>`.
//!
//! Nothing here does I/O; the agent executes the actions.

pub mod defaults;
pub mod plan;
pub mod spec;

use k8s_openapi::api::core::v1::Pod;

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
