//! The API-server side of the node (work in progress): the pure builders
//! of the node's own objects. See each file.

pub mod lease;
pub mod mirror;
pub mod node;
pub mod pod_status;
