//! The node itself, apart from its pods: what the machine is ([`info`]),
//! and the kernel's resource stats ([`stats`]) that node-pressure eviction
//! and image GC decide on. Must not know pods' sync, the API server or the
//! runtime's transport: it reads the kernel and returns plain values.

pub mod info;
pub mod stats;
