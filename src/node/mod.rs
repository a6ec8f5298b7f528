//! The node itself, apart from its pods: what the machine is ([`info`]),
//! the kernel's resource stats ([`stats`]), and what node-pressure
//! eviction ([`eviction`]) and image GC ([`image_gc_policy`]) decide on them, and
//! kubelet's Summary and `/metrics/resource` built from them ([`summary`]),
//! and kubelet's own `/metrics` families ([`kubelet_metrics`]). Must not know pods' sync, the API server or the
//! runtime's transport: it reads the kernel and returns plain values.

pub mod eviction;
pub mod image_gc_policy;
pub mod info;
pub mod kubelet_metrics;
pub mod stats;
pub mod summary;
pub mod syncfs;
