//! `serverTLSBootstrap`, the I/O: gets the node API's serving certificate
//! from the cluster and keeps it renewed, swapping it into the running
//! listener ([`ServingCert`]) without a restart.
//!
//! One task, on the node's API-server client (its own credential:
//! the Node authorizer lets a node create and read CSRs):
//! 1. without a usable issued certificate, post a `certificates.k8s.io/v1`
//!    CSR for `kubernetes.io/kubelet-serving` (subject
//!    `system:node:<node>` in `system:nodes`, the hostname and InternalIPs
//!    as subjectAltNames, a new ECDSA P-256 key), and read it until it is
//!    issued. kube-controller-manager signs such a request only once an
//!    operator or an approver approved it, so meanwhile the self-signed
//!    certificate is served; the log says so at once and every
//!    [`super::serving::PENDING_LOG_EVERY`] seconds. A CSR deleted or garbage-collected
//!    while pending is posted again; a denied one after a back-off.
//! 2. once issued: write `<rootDir>/pki/kubelet-server-<date>.pem`
//!    (certificate and key, 0600), point `kubelet-server-current.pem` at it
//!    (a rename: a reboot sees either the old file or the new), serve it.
//! 3. renew at the jittered 70–90 % deadline ([`Rotation`]), as step 1;
//!    should the issued certificate expire first, fall back to the
//!    self-signed one until the renewal is issued.
//!
//! Offline, nothing changes: the certificate on disk is served and the
//! requests are retried with the rotation back-off.

use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_rustls::rustls;
use ring::rand::SystemRandom;

use super::serving::{
    dated_file_name, is_stale_dated_file, next_poll, pending_log_due, serving_names, POLL_INITIAL,
    SERVER_CURRENT_PEM,
};
use super::serving_tls::{certified_key, self_signed_files, validity_of, ServingCert, TlsFiles};
use super::NodeApiError;
use crate::apiserver::client::transport::Client;
use crate::apiserver::credentials::bootstrap::{serving_csr_object, BootstrapError};
use crate::apiserver::credentials::bootstrap_join::{create_csr, read_csr, CsrCall};
use crate::pki::csr::{alt_names, first_certificate_der, CsrError, NodeKey, Validity};
use crate::pki::rotation::{Next, Rotation};
use crate::rt;

/// Why one attempt at a serving certificate failed (retried).
#[derive(Debug, thiserror::Error)]
pub enum ServingError {
    #[error("{0}")]
    Csr(#[from] CsrError),
    #[error("{0}")]
    Refused(#[from] BootstrapError),
    #[error("creating the CertificateSigningRequest: {0}")]
    Create(String),
    #[error("CertificateSigningRequest {0} was deleted before it was issued")]
    Gone(String),
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the issued certificate: {0}")]
    Load(#[from] NodeApiError),
}

/// The longest sleep: a board without a real-time clock may set its clock
/// late, so the deadline is looked at again.
const MAX_SLEEP: i64 = 3600;

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Starts the task keeping `serving` on a cluster-issued certificate.
pub fn start(files: TlsFiles, serving: Arc<ServingCert>, client: Client) -> smol::Task<()> {
    rt::spawn(run(files, serving, client))
}

async fn run(files: TlsFiles, serving: Arc<ServingCert>, client: Client) {
    let now = now_unix();
    let mut state = validity_of(&files.issued_path())
        .filter(|v| !v.expired_at(now))
        .map(|v| Rotation::new(v, fastrand::f64()));
    match &state {
        Some(s) => log::info!(
            "serverTLSBootstrap: serving {} (expires in {} s, renewal in {} s)",
            files.issued_path().display(),
            s.validity().not_after - now,
            (s.deadline() - now).max(0)
        ),
        None => log::info!(
            "serverTLSBootstrap: no issued serving certificate yet; the node API serves its \
             self-signed certificate ({}) until a CertificateSigningRequest is approved and issued",
            files.pki_dir.join("kubelet.crt").display()
        ),
    }
    // Without an issued certificate, failures back off like a renewal.
    let mut first = Rotation::new(
        Validity {
            not_before: now,
            not_after: now,
        },
        0.0,
    );
    let mut last_error = String::new();
    loop {
        let now = now_unix();
        if let Some(s) = &state {
            if let Next::WaitUntil(at) = s.next(now) {
                let until = if s.validity().expired_at(now) {
                    at
                } else {
                    at.min(s.validity().not_after)
                };
                if s.validity().expired_at(now) {
                    fall_back(&files, &serving, now);
                }
                rt::sleep(Duration::from_secs((until - now).clamp(1, MAX_SLEEP) as u64)).await;
                continue;
            }
        } else if let Next::WaitUntil(at) = first.next(now) {
            rt::sleep(Duration::from_secs((at - now).clamp(1, MAX_SLEEP) as u64)).await;
            continue;
        }
        let expiry = state.as_ref().map(|s| s.validity().not_after);
        match Box::pin(obtain(&files, &serving, &client, expiry)).await {
            Ok(v) => {
                let now = now_unix();
                let mut s = Rotation::new(v, fastrand::f64());
                s.renewed(v, now, fastrand::f64());
                log::info!(
                    "serverTLSBootstrap: next renewal of the serving certificate in {} s",
                    match s.next(now) {
                        Next::WaitUntil(at) => at - now,
                        Next::Renew => 0,
                    }
                );
                state = Some(s);
                last_error.clear();
            }
            Err(e) => {
                let text = e.to_string();
                if text != last_error {
                    log::warn!("serverTLSBootstrap: {text}; retrying with back-off");
                    last_error = text;
                }
                match &mut state {
                    Some(s) => s.failed(now_unix(), fastrand::f64()),
                    None => first.failed(now_unix(), fastrand::f64()),
                }
            }
        }
    }
}

/// The issued certificate expired before its renewal was issued: serve
/// the self-signed one again (logged once per expiry).
fn fall_back(files: &TlsFiles, serving: &ServingCert, now: i64) {
    let loaded = self_signed_files(files, now).and_then(|(c, k)| certified_key(&c, &k));
    match loaded {
        Ok(key) => {
            serving.set(key);
            log::warn!(
                "serverTLSBootstrap: the issued serving certificate expired before its renewal \
                 was issued; serving the self-signed certificate meanwhile"
            );
        }
        Err(e) => log::error!("serverTLSBootstrap: the self-signed certificate: {e}"),
    }
}

/// One request: post the CSR, wait for its certificate, write and serve
/// it. `expiry` is the issued certificate in use's `notAfter`, if any.
async fn obtain(
    files: &TlsFiles,
    serving: &ServingCert,
    client: &Client,
    mut expiry: Option<i64>,
) -> Result<Validity, ServingError> {
    let rng = SystemRandom::new();
    let key = NodeKey::generate(&rng)?;
    let (dns, ips) = serving_names(&files.node_name, &files.internal_ips);
    let dns: Vec<&str> = dns.iter().map(String::as_str).collect();
    let request = key.serving_request_pem(&files.node_name, &alt_names(&dns, &ips), &rng)?;
    let name = match create_csr(client, &serving_csr_object(&request)).await {
        Ok(name) => name,
        Err(CsrCall::Refused(e)) => return Err(e.into()),
        Err(CsrCall::Failed(e)) => return Err(ServingError::Create(e)),
        Err(CsrCall::Gone) => return Err(ServingError::Create("404 Not Found".into())),
    };
    let names: Vec<String> = dns
        .iter()
        .map(|d| d.to_string())
        .chain(ips.iter().map(|ip| ip.to_string()))
        .collect();
    let meanwhile = if expiry.is_some() {
        "the current certificate"
    } else {
        "the self-signed certificate"
    };
    log::info!(
        "serverTLSBootstrap: CertificateSigningRequest {name} created for system:node:{} \
         (signer kubernetes.io/kubelet-serving, names {}); serving {meanwhile} until it is \
         approved (kubectl certificate approve {name}) and issued",
        files.node_name,
        names.join(", ")
    );
    let created = now_unix();
    let mut said = created;
    let mut poll = POLL_INITIAL;
    let cert = loop {
        match read_csr(client, &name).await {
            Ok(Some(cert)) => break cert,
            Ok(None) => {
                let now = now_unix();
                if pending_log_due(said, now) {
                    log::info!(
                        "serverTLSBootstrap: CertificateSigningRequest {name} still not issued \
                         after {} s; approve it with kubectl certificate approve {name}",
                        now - created
                    );
                    said = now;
                }
            }
            Err(CsrCall::Refused(e)) => return Err(e.into()),
            Err(CsrCall::Gone) => return Err(ServingError::Gone(name)),
            Err(CsrCall::Failed(e)) => log::debug!("serverTLSBootstrap: reading {name}: {e}"),
        }
        let now = now_unix();
        if expiry.is_some_and(|at| now >= at) {
            fall_back(files, serving, now);
            expiry = None;
        }
        rt::sleep(Duration::from_secs(poll)).await;
        poll = next_poll(poll);
    };
    let validity = Validity::of_certificate(&first_certificate_der(&cert)?)?;
    let (path, issued) = write_issued(&files.pki_dir, cert, &key, now_unix())?;
    serving.set(issued);
    log::info!(
        "serverTLSBootstrap: serving the certificate issued by {name} ({}), valid for {} s; \
         new connections get it",
        path.display(),
        validity.not_after - now_unix()
    );
    Ok(validity)
}

/// Writes the issued certificate and its key to a dated file (0600),
/// points `kubelet-server-current.pem` at it and removes older dated
/// files; the dated file's path and its loaded certificate and key.
fn write_issued(
    pki: &Path,
    mut cert: Vec<u8>,
    key: &NodeKey,
    now: i64,
) -> Result<(PathBuf, rustls::sign::CertifiedKey), ServingError> {
    let write = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ServingError::Write { path, source }
    };
    std::fs::create_dir_all(pki).map_err(write(pki))?;
    if !cert.ends_with(b"\n") {
        cert.push(b'\n');
    }
    cert.extend_from_slice(key.to_pem().as_bytes());
    let dated_name = dated_file_name(now);
    let dated = pki.join(&dated_name);
    let tmp = pki.join(format!(".{dated_name}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(write(&tmp))?;
    std::io::Write::write_all(&mut f, &cert)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, &dated))
        .map_err(write(&dated))?;
    // A certificate that does not load is never made current.
    let loaded = certified_key(&dated, &dated)?;
    let link_tmp = pki.join(format!(".{SERVER_CURRENT_PEM}.tmp"));
    let _ = std::fs::remove_file(&link_tmp);
    let current = pki.join(SERVER_CURRENT_PEM);
    std::os::unix::fs::symlink(&dated_name, &link_tmp)
        .and_then(|()| std::fs::rename(&link_tmp, &current))
        .map_err(write(&current))?;
    if let Ok(entries) = std::fs::read_dir(pki) {
        for e in entries.flatten() {
            if is_stale_dated_file(&e.file_name().to_string_lossy(), &dated_name) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok((dated, loaded))
}
