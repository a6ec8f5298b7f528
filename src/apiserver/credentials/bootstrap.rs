//! The TLS bootstrap's API side, pure: the `certificates.k8s.io/v1`
//! CertificateSigningRequest picolet posts with its bootstrap credential,
//! what the CSR's status says (issued, denied, failed, still pending), and
//! the kubeconfig written once the certificate is issued.
//!
//! kubelet's layout is followed: the issued certificate and its key go in
//! one file, `<root-dir>/pki/kubelet-client-current.pem` (0600), and the
//! new kubeconfig points at the bootstrap kubeconfig's server and CA with
//! `client-certificate` and `client-key` both naming that file.
//!
//! Must NOT know: files, sockets or the clock; the caller (the join) does
//! the I/O and hands replies in.

use base64::Engine as _;
use serde_json::Value;
use thiserror::Error;

use crate::apiserver::client::kubeconfig::{Kubeconfig, Source};
use crate::pki::csr::{SERVING_SIGNER_NAME, SERVING_USAGES, SIGNER_NAME, USAGES};

/// kubelet's file for the current client certificate and key.
pub const CLIENT_CURRENT_PEM: &str = "kubelet-client-current.pem";

/// The path of the CSR collection.
pub const CSR_PATH: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/// Why a CSR did not give a certificate.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum BootstrapError {
    #[error("CertificateSigningRequest {name}: {condition}: {message}")]
    Refused {
        name: String,
        condition: String,
        message: String,
    },
    #[error("CertificateSigningRequest {name}: status.certificate is not base64")]
    BadCertificate { name: String },
    #[error("CertificateSigningRequest reply is not an object with metadata.name")]
    NoName,
}

/// The CSR object for `request_pem` (a `CERTIFICATE REQUEST` PEM block):
/// kubelet's signer and usages, a generated `node-csr-` name.
pub fn csr_object(request_pem: &str) -> Value {
    csr_object_for(request_pem, "node-csr-", SIGNER_NAME, &USAGES)
}

/// The CSR object of the node API's serving certificate
/// (`serverTLSBootstrap`): signer `kubernetes.io/kubelet-serving`, a
/// generated `csr-` name (kubelet's).
pub fn serving_csr_object(request_pem: &str) -> Value {
    csr_object_for(request_pem, "csr-", SERVING_SIGNER_NAME, &SERVING_USAGES)
}

fn csr_object_for(request_pem: &str, prefix: &str, signer: &str, usages: &[&str]) -> Value {
    let request = base64::engine::general_purpose::STANDARD.encode(request_pem);
    serde_json::json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": { "generateName": prefix },
        "spec": {
            "request": request,
            "signerName": signer,
            "usages": usages,
        },
    })
}

/// The CSR's `metadata.name` in a create reply.
pub fn csr_name(reply: &Value) -> Result<String, BootstrapError> {
    reply["metadata"]["name"]
        .as_str()
        .map(str::to_owned)
        .ok_or(BootstrapError::NoName)
}

/// What a CSR's status says: `Ok(Some(pem))` once issued, `Ok(None)` while
/// pending (approved or not), an error once denied or failed.
pub fn issued_certificate(csr: &Value) -> Result<Option<Vec<u8>>, BootstrapError> {
    let name = csr["metadata"]["name"].as_str().unwrap_or("?").to_owned();
    let conditions = csr["status"]["conditions"].as_array();
    for c in conditions.into_iter().flatten() {
        let kind = c["type"].as_str().unwrap_or_default();
        if (kind == "Denied" || kind == "Failed") && c["status"].as_str() != Some("False") {
            return Err(BootstrapError::Refused {
                name,
                condition: kind.to_owned(),
                message: c["message"].as_str().unwrap_or_default().to_owned(),
            });
        }
    }
    match csr["status"]["certificate"].as_str() {
        None | Some("") => Ok(None),
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map(Some)
            .map_err(|_| BootstrapError::BadCertificate { name }),
    }
}

/// The node's kubeconfig: the bootstrap kubeconfig's server, CA and
/// `tls-server-name`, and `client_pem` (certificate and key in one file)
/// as both `client-certificate` and `client-key`.
pub fn node_kubeconfig(bootstrap: &Kubeconfig, client_pem: &str) -> String {
    let mut cluster = format!("    server: {}\n", yaml_str(&bootstrap.server.to_string()));
    match bootstrap.certificate_authority.as_ref().map(|m| &m.source) {
        Some(Source::File(p)) => cluster.push_str(&format!(
            "    certificate-authority: {}\n",
            yaml_str(&p.display().to_string())
        )),
        Some(Source::Data(d)) => cluster.push_str(&format!(
            "    certificate-authority-data: {}\n",
            base64::engine::general_purpose::STANDARD.encode(d)
        )),
        None => {}
    }
    if let Some(n) = &bootstrap.tls_server_name {
        cluster.push_str(&format!("    tls-server-name: {}\n", yaml_str(n)));
    }
    let pem = yaml_str(client_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: default-cluster\n  cluster:\n{cluster}\
         contexts:\n- name: default-context\n  context:\n    cluster: default-cluster\n    \
         namespace: default\n    user: default-auth\ncurrent-context: default-context\n\
         users:\n- name: default-auth\n  user:\n    client-certificate: {pem}\n    \
         client-key: {pem}\n"
    )
}

/// A YAML double-quoted scalar (JSON string syntax is valid YAML).
fn yaml_str(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::client::kubeconfig::{parse, Material};
    use std::path::{Path, PathBuf};

    fn bootstrap_kubeconfig() -> Kubeconfig {
        parse(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1:6443\n    certificate-authority: /etc/kubernetes/ca.crt\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: abcdef.0123456789abcdef\n",
            Path::new("/etc/picolet/bootstrap.conf"),
            false,
        )
        .unwrap()
    }

    #[test]
    fn the_csr_object_asks_kubelets_signer_and_usages() {
        let o = csr_object("-----BEGIN CERTIFICATE REQUEST-----\n");
        assert_eq!(o["spec"]["signerName"], SIGNER_NAME);
        assert_eq!(
            o["spec"]["usages"],
            serde_json::json!(["digital signature", "client auth"])
        );
        let req = base64::engine::general_purpose::STANDARD
            .decode(o["spec"]["request"].as_str().unwrap())
            .unwrap();
        assert!(req.starts_with(b"-----BEGIN CERTIFICATE REQUEST-----"));
    }

    #[test]
    fn the_serving_csr_object_asks_the_kubelet_serving_signer_for_server_auth() {
        let o = serving_csr_object("-----BEGIN CERTIFICATE REQUEST-----\n");
        assert_eq!(o["spec"]["signerName"], "kubernetes.io/kubelet-serving");
        assert_eq!(
            o["spec"]["usages"],
            serde_json::json!(["digital signature", "server auth"])
        );
        assert_eq!(o["metadata"]["generateName"], "csr-");
    }

    #[test]
    fn a_pending_csr_has_no_certificate_yet() {
        let csr = serde_json::json!({"metadata": {"name": "node-csr-a"},
            "status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        assert_eq!(issued_certificate(&csr), Ok(None));
    }

    #[test]
    fn an_issued_csr_gives_its_certificate() {
        let csr = serde_json::json!({"metadata": {"name": "node-csr-a"},
            "status": {"certificate": "Y2VydA=="}});
        assert_eq!(issued_certificate(&csr), Ok(Some(b"cert".to_vec())));
    }

    #[test]
    fn a_denied_csr_is_an_error_naming_it_and_the_reason() {
        let csr = serde_json::json!({"metadata": {"name": "node-csr-a"},
            "status": {"conditions": [{"type": "Denied", "status": "True", "message": "no"}]}});
        let e = issued_certificate(&csr).unwrap_err();
        assert_eq!(
            e.to_string(),
            "CertificateSigningRequest node-csr-a: Denied: no"
        );
    }

    #[test]
    fn the_node_kubeconfig_keeps_the_server_and_ca_and_names_the_client_pem() {
        let b = bootstrap_kubeconfig();
        let text = node_kubeconfig(&b, "/var/lib/picolet/pki/kubelet-client-current.pem");
        let k = parse(&text, Path::new("/var/lib/picolet/kubeconfig"), false).unwrap();
        assert_eq!(k.server, b.server);
        assert_eq!(k.certificate_authority, b.certificate_authority);
        let pem = PathBuf::from("/var/lib/picolet/pki/kubelet-client-current.pem");
        assert_eq!(
            k.client_certificate.map(|m| m.source),
            Some(Source::File(pem.clone()))
        );
        assert_eq!(k.client_key.map(|m| m.source), Some(Source::File(pem)));
        assert!(k.token.is_none());
    }

    #[test]
    fn an_inline_ca_is_kept_inline() {
        let mut b = bootstrap_kubeconfig();
        b.certificate_authority = Some(Material {
            field: "x".into(),
            source: Source::Data(b"-----BEGIN CERTIFICATE-----\n".to_vec()),
        });
        let text = node_kubeconfig(&b, "/p.pem");
        let k = parse(&text, Path::new("/k"), false).unwrap();
        assert_eq!(
            k.certificate_authority.map(|m| m.source),
            Some(Source::Data(b"-----BEGIN CERTIFICATE-----\n".to_vec()))
        );
    }
}
