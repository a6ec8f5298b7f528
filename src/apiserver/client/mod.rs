//! The connection to one API server: who it is and how we prove who we
//! are ([`kubeconfig`], [`client_tls`]), the hyper transport on our executor
//! ([`transport`]: its dials in `transport_dial`, its answers' bodies in
//! `transport_body`, its errors in [`transport_error`]), what every loop on
//! that connection shares ([`link`]: last contact, dial back-off, the
//! link's metrics), and the pure wire shape of requests and error replies
//! ([`request`]) and of the API server's protobuf ([`protobuf`]).
//!
//! Must not know: which resources are listed or why, pods, the agent.

pub mod client_tls;
pub mod kubeconfig;
pub mod link;
pub mod protobuf;
pub mod request;
pub mod transport;
mod transport_body;
mod transport_dial;
pub mod transport_error;
