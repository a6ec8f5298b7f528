//! The TLS bootstrap's I/O: with `--bootstrap-kubeconfig` and no
//! `--kubeconfig` file yet, get this node a client certificate and write
//! the kubeconfig that uses it.
//!
//! The steps, as kubelet takes them: generate an ECDSA P-256 key, post a
//! CertificateSigningRequest with the bootstrap credential, poll it until
//! the signer puts the certificate in `status.certificate` (approval is the
//! controller-manager's `nodeclient` approver), then write
//! `<root-dir>/pki/kubelet-client-current.pem` (certificate and key, 0600)
//! and the kubeconfig naming it. Both are written to a temporary file and
//! renamed, so a reboot mid-way leaves either the old state or the new.
//! The decisions (the CSR object, its status, the kubeconfig text) are in
//! [`super::bootstrap`] and [`super::csr`].

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::{Method, StatusCode};
use ring::rand::SystemRandom;

use super::bootstrap::{self, BootstrapError, CLIENT_CURRENT_PEM, CSR_PATH};
use super::csr::{CsrError, NodeKey};
use super::kubeconfig::{self, KubeconfigError};
use super::tls::TlsError;
use super::transport::{Body, Client, Options, BODY_LIMIT};
use crate::rt;

/// Why the bootstrap could not give the node its kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapJoinError {
    #[error("--bootstrap-kubeconfig: {0}")]
    Kubeconfig(#[from] KubeconfigError),
    #[error("--bootstrap-kubeconfig: {0}")]
    Tls(#[from] TlsError),
    #[error("TLS bootstrap: {0}")]
    Csr(#[from] CsrError),
    #[error("TLS bootstrap: {0}")]
    Refused(#[from] BootstrapError),
    #[error("TLS bootstrap: writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

const DEADLINE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_secs(2);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The file holding the node's current client certificate and key.
pub fn client_pem_path(root_dir: &Path) -> PathBuf {
    root_dir.join("pki").join(CLIENT_CURRENT_PEM)
}

/// Gets a client certificate with the credential of `bootstrap_path` and
/// writes `kubeconfig_path`. Retries until the API server answers; returns
/// an error only when the kubeconfig is unusable or the CSR is refused.
pub async fn bootstrap_client_certificate(
    bootstrap_path: &Path,
    kubeconfig_path: &Path,
    root_dir: &Path,
    node_name: &str,
    allow_insecure: bool,
) -> Result<(), BootstrapJoinError> {
    let kc = kubeconfig::load(bootstrap_path, allow_insecure)?;
    let client = Client::new(&kc, Options::default())?;
    let rng = SystemRandom::new();
    let key = NodeKey::generate(&rng)?;
    let request = key.certificate_request_pem(node_name, &rng)?;
    let body = serde_json::to_vec(&bootstrap::csr_object(&request)).unwrap_or_default();
    log::info!(
        "TLS bootstrap: requesting a client certificate for system:node:{node_name} from {} (bootstrap kubeconfig {})",
        kc.server.origin(),
        bootstrap_path.display()
    );
    let mut backoff = Duration::from_secs(1);
    let name = loop {
        let body = Body {
            content_type: "application/json",
            bytes: body.clone(),
        };
        match client
            .request(Method::POST, CSR_PATH, Some(body), BODY_LIMIT, DEADLINE)
            .await
        {
            Ok(r) if r.status == StatusCode::CREATED || r.status == StatusCode::OK => {
                let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
                break bootstrap::csr_name(&v)?;
            }
            Ok(r) => log::warn!(
                "TLS bootstrap: creating the CertificateSigningRequest: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body[..r.body.len().min(512)])
            ),
            Err(e) => log::warn!("TLS bootstrap: creating the CertificateSigningRequest: {e}"),
        }
        rt::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    };
    log::info!(
        "TLS bootstrap: CertificateSigningRequest {name} created, waiting for its certificate"
    );
    let path = format!("{CSR_PATH}/{name}");
    let cert = loop {
        match client
            .request(Method::GET, &path, None, BODY_LIMIT, DEADLINE)
            .await
        {
            Ok(r) if r.status == StatusCode::OK => {
                let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
                if let Some(cert) = bootstrap::issued_certificate(&v)? {
                    break cert;
                }
            }
            Ok(r) => log::warn!("TLS bootstrap: reading {name}: {}", r.status),
            Err(e) => log::warn!("TLS bootstrap: reading {name}: {e}"),
        }
        rt::sleep(POLL).await;
    };
    let pem_path = client_pem_path(root_dir);
    let pki = pem_path.parent().unwrap_or(root_dir);
    std::fs::create_dir_all(pki)
        .and_then(|()| std::fs::set_permissions(pki, std::fs::Permissions::from_mode(0o700)))
        .map_err(|source| BootstrapJoinError::Write {
            path: pki.to_path_buf(),
            source,
        })?;
    let mut pem = cert;
    if !pem.ends_with(b"\n") {
        pem.push(b'\n');
    }
    pem.extend_from_slice(key.to_pem().as_bytes());
    write_private(&pem_path, &pem)?;
    let text = bootstrap::node_kubeconfig(&kc, &pem_path.display().to_string());
    write_private(kubeconfig_path, text.as_bytes())?;
    log::info!(
        "TLS bootstrap: certificate issued by {name}; wrote {} and {}",
        pem_path.display(),
        kubeconfig_path.display()
    );
    Ok(())
}

/// Writes `bytes` to `path` (0600) through a temporary file and a rename.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), BootstrapJoinError> {
    let err = |source| BootstrapJoinError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}
