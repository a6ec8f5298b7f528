//! The node's certificates, shared by the API-server client's TLS
//! bootstrap (`crate::apiserver::credentials`) and the node API's serving
//! certificate (`crate::nodeapi`): an ECDSA P-256 key and its PKCS#10
//! request ([`csr`]), a tiny DER writer and reader ([`der`]), and when to
//! renew an issued certificate ([`rotation`], kubelet's jittered deadline).
//!
//! All pure: randomness and time come in as arguments; files and the CSR's
//! trip to the API server are the callers'.
//!
//! Must not know: the API server, the transport, the node API's listener.

pub mod csr;
pub mod der;
pub mod rotation;
