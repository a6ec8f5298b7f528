//! The node's presence in the cluster: its Node object as kubelet writes
//! it ([`node_object`], pure), the Lease ([`lease`], pure), the task that
//! registers the Node and keeps its status and Lease fresh ([`heartbeat`]),
//! Node events ([`node_events`]), the image list ([`node_images`]), the
//! CSINode ([`csi_node`]), and the watch of the node's own Node object
//! for labels and taints ([`node_watch`], read in protobuf by
//! [`node_proto`]; the Lease's answer by [`lease_proto`]).
//!
//! Must not know: pods being run or the runtime; facts come in from the
//! agent's node view.

pub mod csi_node;
pub mod heartbeat;
pub mod lease;
pub mod lease_proto;
pub mod node_events;
pub mod node_images;
pub mod node_object;
pub mod node_proto;
pub mod node_watch;
