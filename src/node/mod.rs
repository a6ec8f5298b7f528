//! The node itself, apart from its pods: what the machine is ([`info`]),
//! and later the kernel stats, eviction and image GC of the node-pressure
//! work. Must not know pods' sync, the API server or the runtime's
//! transport: it reads the kernel and returns plain values.

pub mod info;
