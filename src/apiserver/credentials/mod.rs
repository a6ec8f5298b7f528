//! The node's client certificate from the cluster: the TLS bootstrap's
//! pure side ([`bootstrap`]: the CertificateSigningRequest object, its
//! status, the node kubeconfig) and its I/O ([`bootstrap_join`]: post the
//! CSR, wait, write the files, renew when `crate::pki::rotation` says so).
//! The key, the PKCS#10 request and the certificate's validity are
//! `crate::pki`'s, shared with the node API's serving certificate.
//!
//! Must not know: pods, the agent.

pub mod bootstrap;
pub mod bootstrap_join;
