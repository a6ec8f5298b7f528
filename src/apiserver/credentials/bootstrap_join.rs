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
//! [`super::bootstrap`] and [`crate::pki::csr`].

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::{Method, StatusCode};
use ring::rand::SystemRandom;

use super::bootstrap::{self, BootstrapError, CLIENT_CURRENT_PEM, CSR_PATH};
use crate::apiserver::client::client_tls::{self, TlsError};
use crate::apiserver::client::kubeconfig::{self, KubeconfigError, Source};
use crate::apiserver::client::transport::{Body, Client, Options, BODY_LIMIT};
use crate::pki::csr::{CsrError, NodeKey, Validity};
use crate::pki::rotation::{Next, Rotation};
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
    #[error("{what}: {message}")]
    Renewal { what: String, message: String },
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
    log::info!(
        "TLS bootstrap: requesting a client certificate for system:node:{node_name} from {} (bootstrap kubeconfig {})",
        kc.server.origin(),
        bootstrap_path.display()
    );
    let mut backoff = Duration::from_secs(1);
    let name = loop {
        match create_csr(&client, &bootstrap::csr_object(&request)).await {
            Ok(name) => break name,
            Err(CsrCall::Refused(e)) => return Err(e.into()),
            Err(CsrCall::Failed(e)) => {
                log::warn!("TLS bootstrap: creating the CertificateSigningRequest: {e}")
            }
            Err(CsrCall::Gone) => {
                log::warn!("TLS bootstrap: creating the CertificateSigningRequest: not found")
            }
        }
        rt::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    };
    log::info!(
        "TLS bootstrap: CertificateSigningRequest {name} created, waiting for its certificate"
    );
    let cert = loop {
        match read_csr(&client, &name).await {
            Ok(Some(cert)) => break cert,
            Ok(None) => {}
            Err(CsrCall::Refused(e)) => return Err(e.into()),
            Err(CsrCall::Failed(e)) => log::warn!("TLS bootstrap: reading {name}: {e}"),
            Err(CsrCall::Gone) => log::warn!("TLS bootstrap: reading {name}: not found"),
        }
        rt::sleep(POLL).await;
    };
    let pem_path = write_client_pem(root_dir, cert, &key)?;
    let text = bootstrap::node_kubeconfig(&kc, &pem_path.display().to_string());
    write_private(kubeconfig_path, text.as_bytes())?;
    log::info!(
        "TLS bootstrap: certificate issued by {name}; wrote {} and {}",
        pem_path.display(),
        kubeconfig_path.display()
    );
    Ok(())
}

/// How one call about a CSR went wrong: refused for good, or failed
/// (transport, an unexpected status: try again).
pub(crate) enum CsrCall {
    Refused(BootstrapError),
    /// The CSR no longer exists (deleted, or garbage-collected while
    /// pending): a new one must be posted.
    Gone,
    Failed(String),
}

/// Posts the CSR `object`; its generated name.
pub(crate) async fn create_csr(
    client: &Client,
    object: &serde_json::Value,
) -> Result<String, CsrCall> {
    let body = Body {
        content_type: "application/json",
        bytes: serde_json::to_vec(object).unwrap_or_default(),
    };
    match client
        .request(Method::POST, CSR_PATH, Some(body), BODY_LIMIT, DEADLINE)
        .await
    {
        Ok(r) if r.status == StatusCode::CREATED || r.status == StatusCode::OK => {
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
            bootstrap::csr_name(&v).map_err(CsrCall::Refused)
        }
        Ok(r) => Err(CsrCall::Failed(format!(
            "{} {}",
            r.status,
            String::from_utf8_lossy(&r.body[..r.body.len().min(512)])
        ))),
        Err(e) => Err(CsrCall::Failed(e.to_string())),
    }
}

/// Reads CSR `name`: its certificate once issued.
pub(crate) async fn read_csr(client: &Client, name: &str) -> Result<Option<Vec<u8>>, CsrCall> {
    let path = format!("{CSR_PATH}/{name}");
    match client
        .request(Method::GET, &path, None, BODY_LIMIT, DEADLINE)
        .await
    {
        Ok(r) if r.status == StatusCode::OK => {
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
            bootstrap::issued_certificate(&v).map_err(CsrCall::Refused)
        }
        Ok(r) if r.status == StatusCode::NOT_FOUND => Err(CsrCall::Gone),
        Ok(r) => Err(CsrCall::Failed(r.status.to_string())),
        Err(e) => Err(CsrCall::Failed(e.to_string())),
    }
}

/// Writes `cert` and `key` to `<root-dir>/pki/kubelet-client-current.pem`
/// (0600, in a 0700 directory, through a rename); its path.
fn write_client_pem(
    root_dir: &Path,
    cert: Vec<u8>,
    key: &NodeKey,
) -> Result<PathBuf, BootstrapJoinError> {
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
    Ok(pem_path)
}

/// How long a renewal waits for its CSR to be issued before it counts as
/// failed (kubelet's certificate manager waits as long).
const RENEWAL_WAIT: Duration = Duration::from_secs(15 * 60);
/// The longest sleep of the rotation task: a board without a real-time
/// clock may set its clock late, so the deadline is looked at again.
const MAX_SLEEP: i64 = 3600;

/// The node's current client certificate per `kubeconfig_path`: its
/// validity, if the kubeconfig has one and it can be read.
fn current_validity(kubeconfig_path: &Path, allow_insecure: bool) -> Option<Validity> {
    let kc = kubeconfig::load(kubeconfig_path, allow_insecure).ok()?;
    let pem = kc.client_certificate.as_ref()?.read(kubeconfig_path).ok()?;
    let der = crate::pki::csr::first_certificate_der(&pem).ok()?;
    Validity::of_certificate(&der).ok()
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// `rotateCertificates`: renews the client certificate of
/// `kubeconfig_path` before it expires, for as long as the node runs.
/// A renewal posts a CSR with a new key through `client` (the current
/// certificate: kube-controller-manager approves such a request as
/// `selfnodeclient`), writes the issued certificate and key to
/// `<root-dir>/pki/kubelet-client-current.pem` (0600; the kubeconfig is
/// rewritten to name it if it named another file), and gives `client` the
/// new credential, closing its connections. When decides
/// [`Rotation`]; failures are retried with its back-off.
pub async fn rotate_client_certificates(
    client: Client,
    kubeconfig_path: PathBuf,
    root_dir: PathBuf,
    node_name: String,
    allow_insecure: bool,
) {
    let Some(validity) = current_validity(&kubeconfig_path, allow_insecure) else {
        log::warn!(
            "certificate rotation: {} has no readable client certificate; rotateCertificates does nothing",
            kubeconfig_path.display()
        );
        return;
    };
    let mut state = Rotation::new(validity, fastrand::f64());
    log::info!(
        "certificate rotation: the client certificate expires in {} s; renewal in {} s",
        validity.not_after - now_unix(),
        seconds_until_due(&state, now_unix())
    );
    let mut last_error = String::new();
    loop {
        let now = now_unix();
        if let Next::WaitUntil(at) = state.next(now) {
            rt::sleep(Duration::from_secs((at - now).clamp(1, MAX_SLEEP) as u64)).await;
            continue;
        }
        let renewal = renew(
            &client,
            &kubeconfig_path,
            &root_dir,
            &node_name,
            allow_insecure,
        );
        match Box::pin(renewal).await {
            Ok((name, v)) => {
                let now = now_unix();
                state.renewed(v, now, fastrand::f64());
                last_error.clear();
                log::info!(
                    "certificate rotation: new client certificate issued by {name}, valid for {} s; next renewal in {} s",
                    v.not_after - now,
                    seconds_until_due(&state, now)
                );
            }
            Err(e) => {
                let text = e.to_string();
                if text != last_error {
                    log::warn!("certificate rotation: {text}; retrying with back-off");
                    last_error = text;
                }
                state.failed(now_unix(), fastrand::f64());
            }
        }
    }
}

/// How long until `state` wants a renewal, for the log.
fn seconds_until_due(state: &Rotation, now: i64) -> i64 {
    match state.next(now) {
        Next::WaitUntil(at) => at - now,
        Next::Renew => 0,
    }
}

/// One renewal: the CSR's name and the new certificate's validity.
async fn renew(
    client: &Client,
    kubeconfig_path: &Path,
    root_dir: &Path,
    node_name: &str,
    allow_insecure: bool,
) -> Result<(String, Validity), BootstrapJoinError> {
    let failed = |what: &str, message: String| BootstrapJoinError::Renewal {
        what: what.to_string(),
        message,
    };
    let rng = SystemRandom::new();
    let key = NodeKey::generate(&rng)?;
    let request = key.certificate_request_pem(node_name, &rng)?;
    let name = match create_csr(client, &bootstrap::csr_object(&request)).await {
        Ok(name) => name,
        Err(CsrCall::Refused(e)) => return Err(e.into()),
        Err(CsrCall::Failed(e)) => return Err(failed("creating the CertificateSigningRequest", e)),
        Err(CsrCall::Gone) => {
            return Err(failed(
                "creating the CertificateSigningRequest",
                "not found".into(),
            ))
        }
    };
    log::info!("certificate rotation: CertificateSigningRequest {name} created, waiting for its certificate");
    let waited = rt::timeout(RENEWAL_WAIT, async {
        loop {
            match read_csr(client, &name).await {
                Ok(Some(cert)) => return Ok(cert),
                Ok(None) | Err(CsrCall::Failed(_) | CsrCall::Gone) => {}
                Err(CsrCall::Refused(e)) => return Err(e),
            }
            rt::sleep(POLL).await;
        }
    });
    let cert = match waited.await {
        Some(r) => r?,
        None => return Err(failed(&name, format!("not issued within {RENEWAL_WAIT:?}"))),
    };
    let der = crate::pki::csr::first_certificate_der(&cert)?;
    let validity = Validity::of_certificate(&der)?;
    let pem_path = write_client_pem(root_dir, cert, &key)?;
    let kc = kubeconfig::load(kubeconfig_path, allow_insecure)?;
    let names_pem = |m: &Option<crate::apiserver::client::kubeconfig::Material>| matches!(m.as_ref().map(|m| &m.source), Some(Source::File(p)) if p == &pem_path);
    let kc = if names_pem(&kc.client_certificate) && names_pem(&kc.client_key) {
        kc
    } else {
        let text = bootstrap::node_kubeconfig(&kc, &pem_path.display().to_string());
        write_private(kubeconfig_path, text.as_bytes())?;
        log::info!(
            "certificate rotation: {} now names {}",
            kubeconfig_path.display(),
            pem_path.display()
        );
        kubeconfig::load(kubeconfig_path, allow_insecure)?
    };
    client.set_tls(client_tls::setup(&kc)?);
    Ok((name, validity))
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

/// Whether `kubeconfig_path` must be (re)made with the bootstrap
/// credential: it does not exist, or its client certificate expired at
/// `now_unix` (a board offline past its certificate's lifetime). Says so
/// in the log; an unreadable certificate is left to the join to report.
pub fn needs_bootstrap(kubeconfig_path: &Path, allow_insecure: bool, now_unix: i64) -> bool {
    if !kubeconfig_path.exists() {
        log::info!(
            "TLS bootstrap: {} does not exist yet",
            kubeconfig_path.display()
        );
        return true;
    }
    let Ok(kc) = kubeconfig::load(kubeconfig_path, allow_insecure) else {
        return false;
    };
    let Some(cert) = kc.client_certificate.as_ref() else {
        return false;
    };
    let validity = cert
        .read(kubeconfig_path)
        .ok()
        .and_then(|pem| crate::pki::csr::first_certificate_der(&pem).ok())
        .and_then(|der| crate::pki::csr::Validity::of_certificate(&der).ok());
    match validity {
        Some(v) if v.expired_at(now_unix) => {
            log::warn!(
                "TLS bootstrap: the client certificate of {} expired {} s ago; falling back to the bootstrap credential (--bootstrap-kubeconfig)",
                kubeconfig_path.display(),
                now_unix - v.not_after
            );
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_missing_kubeconfig_needs_the_bootstrap() {
        let dir = tempfile::tempdir().unwrap();
        assert!(needs_bootstrap(&dir.path().join("kubelet.conf"), false, 0));
    }

    #[test]
    fn an_expired_client_certificate_falls_back_to_the_bootstrap_and_a_valid_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let pem = dir.path().join("client.pem");
        let ok = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args([
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-subj",
                "/CN=n",
                "-days",
                "1",
            ])
            .arg("-keyout")
            .arg(&pem)
            .arg("-out")
            .arg(dir.path().join("cert.pem"))
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            eprintln!("openssl not usable: skipping");
            return;
        }
        let mut both = std::fs::read(dir.path().join("cert.pem")).unwrap();
        both.extend(std::fs::read(&pem).unwrap());
        std::fs::write(&pem, &both).unwrap();
        let v = crate::pki::csr::Validity::of_certificate(
            &crate::pki::csr::first_certificate_der(&both).unwrap(),
        )
        .unwrap();
        let kc = dir.path().join("kubelet.conf");
        std::fs::write(
            &kc,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority: {p}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n    client-certificate: {p}\n    client-key: {p}\n",
                p = pem.display()
            ),
        )
        .unwrap();
        kubeconfig::load(&kc, false).unwrap();
        assert!(!needs_bootstrap(&kc, false, v.not_before));
        assert!(needs_bootstrap(&kc, false, v.not_after));
    }
}
