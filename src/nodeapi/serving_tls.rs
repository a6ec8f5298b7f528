//! The node API's rustls server configuration: the serving certificate
//! (`tlsCertFile`/`tlsPrivateKeyFile`; with `serverTLSBootstrap` the one
//! the cluster issued, `<rootDir>/pki/kubelet-server-current.pem`; else a
//! self-signed one kept in `<rootDir>/pki/kubelet.crt` and `kubelet.key`,
//! key 0600, reused across restarts and made again only when missing or
//! expired; [`super::serving::choose_source`] decides) and the client
//! certificate verifier (`authentication.x509.clientCAFile`; a client
//! certificate is optional, so bearer tokens work on the same port).
//!
//! The certificate is served through [`ServingCert`], a resolver whose
//! certificate can be replaced while the listener runs: a certificate
//! issued later reaches every new connection without a restart.
//!
//! The crypto provider is the API-server client's (ring, the same small
//! suite and signature set); ALPN offers HTTP/1.1 only.

use std::fs;
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_rustls::rustls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};

use super::cert;
use super::serving::{choose_source, CertSource, SERVER_CURRENT_PEM};
use super::NodeApiError;
use crate::apiserver::client::client_tls::{provider, ALPN_HTTP11};
use crate::pki::csr::{first_certificate_der, Validity};

/// What the TLS configuration is made from.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// `tlsCertFile` and `tlsPrivateKeyFile`, when both are set.
    pub cert_and_key: Option<(PathBuf, PathBuf)>,
    /// `authentication.x509.clientCAFile`.
    pub client_ca: Option<PathBuf>,
    /// Where a self-signed certificate is kept (`<rootDir>/pki`).
    pub pki_dir: PathBuf,
    pub node_name: String,
    /// The self-signed certificate's IP addresses.
    pub addresses: Vec<IpAddr>,
    /// `serverTLSBootstrap`.
    pub server_tls_bootstrap: bool,
    /// The Node's InternalIPs (`--node-ip`, else the detected one): the
    /// serving CSR's addresses.
    pub internal_ips: Vec<IpAddr>,
}

impl TlsFiles {
    /// The symlink to the issued certificate and key.
    pub fn issued_path(&self) -> PathBuf {
        self.pki_dir.join(SERVER_CURRENT_PEM)
    }
}

/// The validity of the certificate in PEM file `path`, if readable.
pub fn validity_of(path: &Path) -> Option<Validity> {
    let pem = fs::read(path).ok()?;
    let der = first_certificate_der(&pem).ok()?;
    Validity::of_certificate(&der).ok()
}

fn read(field: &'static str, path: &Path) -> Result<Vec<u8>, NodeApiError> {
    fs::read(path).map_err(|source| NodeApiError::File {
        field,
        path: path.to_path_buf(),
        source,
    })
}

/// The serving certificate's paths: the configured ones, the issued one,
/// or the self-signed pair, made now when missing or expired at
/// `now_unix`.
pub fn serving_files(f: &TlsFiles, now_unix: i64) -> Result<(PathBuf, PathBuf), NodeApiError> {
    let issued = f
        .server_tls_bootstrap
        .then(|| validity_of(&f.issued_path()));
    match choose_source(
        f.cert_and_key.is_some(),
        f.server_tls_bootstrap,
        issued.flatten(),
        now_unix,
    ) {
        CertSource::Configured => {
            if let Some(pair) = &f.cert_and_key {
                return Ok(pair.clone());
            }
        }
        CertSource::Issued => return Ok((f.issued_path(), f.issued_path())),
        CertSource::SelfSigned => {}
    }
    self_signed_files(f, now_unix)
}

/// The self-signed pair, made now when missing or expired at `now_unix`.
pub fn self_signed_files(f: &TlsFiles, now_unix: i64) -> Result<(PathBuf, PathBuf), NodeApiError> {
    let cert_path = f.pki_dir.join("kubelet.crt");
    let key_path = f.pki_dir.join("kubelet.key");
    let current = fs::read(&cert_path)
        .ok()
        .and_then(|pem| first_certificate_der(&pem).ok())
        .and_then(|der| Validity::of_certificate(&der).ok())
        .is_some_and(|v| !v.expired_at(now_unix) && key_path.is_file());
    if current {
        return Ok((cert_path, key_path));
    }
    let rng = ring::rand::SystemRandom::new();
    let made = cert::self_signed(&f.node_name, &[], &f.addresses, now_unix, &rng)?;
    let file_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| NodeApiError::File {
            field: "self-signed serving certificate",
            path,
            source,
        }
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&f.pki_dir)
        .map_err(file_err(&f.pki_dir))?;
    // The key first, 0600 from creation; then the certificate.
    write_new(&key_path, made.key_pem.as_bytes(), 0o600).map_err(file_err(&key_path))?;
    write_new(&cert_path, made.cert_pem.as_bytes(), 0o644).map_err(file_err(&cert_path))?;
    log::info!(
        "made a self-signed serving certificate for {} in {}",
        f.node_name,
        cert_path.display()
    );
    Ok((cert_path, key_path))
}

/// Writes `data` to `path` through a temp file created with `mode`, then
/// renamed over it.
fn write_new(path: &Path, data: &[u8], mode: u32) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = fs::remove_file(&tmp);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)?;
    file.write_all(data)?;
    file.sync_all()?;
    fs::rename(&tmp, path)
}

/// The serving certificate presented to new connections, replaceable
/// while the listener runs.
#[derive(Debug)]
pub struct ServingCert(std::sync::RwLock<Arc<CertifiedKey>>);

impl ServingCert {
    /// Serves `key` to every connection from now on.
    pub fn set(&self, key: CertifiedKey) {
        if let Ok(mut k) = self.0.write() {
            *k = Arc::new(key);
        }
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.read().ok().map(|k| Arc::clone(&k))
    }
}

/// The certificate chain of `cert_path` and the key of `key_path` (may be
/// the same file), checked to belong together.
pub fn certified_key(cert_path: &Path, key_path: &Path) -> Result<CertifiedKey, NodeApiError> {
    let pem = read("tlsCertFile", cert_path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| NodeApiError::Pem {
            field: "tlsCertFile",
            path: cert_path.to_path_buf(),
            message: format!("bad PEM: {e}"),
        })?;
    if certs.is_empty() {
        return Err(NodeApiError::Pem {
            field: "tlsCertFile",
            path: cert_path.to_path_buf(),
            message: "no CERTIFICATE in PEM".into(),
        });
    }
    let pem = read("tlsPrivateKeyFile", key_path)?;
    // The error text of a key never quotes the key.
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|_| NodeApiError::Pem {
        field: "tlsPrivateKeyFile",
        path: key_path.to_path_buf(),
        message: "no usable PRIVATE KEY in PEM".into(),
    })?;
    CertifiedKey::from_der(certs, key, &provider()).map_err(|source| NodeApiError::Rustls {
        field: "tlsPrivateKeyFile",
        source,
    })
}

/// TLS sessions the node API keeps for resumption.
const SESSION_CACHE: usize = 32;

/// The server configuration of `f` at `now_unix`, and the handle through
/// which its serving certificate is replaced.
pub fn server_config(
    f: &TlsFiles,
    now_unix: i64,
) -> Result<(Arc<ServerConfig>, Arc<ServingCert>), NodeApiError> {
    let provider = Arc::new(provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("the provider has TLS 1.2 and 1.3 suites");
    let builder = match &f.client_ca {
        Some(path) => {
            let field = "authentication.x509.clientCAFile";
            let pem = read(field, path)?;
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| NodeApiError::Pem {
                    field,
                    path: path.clone(),
                    message: format!("bad PEM: {e}"),
                })?;
                roots
                    .add(cert)
                    .map_err(|source| NodeApiError::Rustls { field, source })?;
            }
            if roots.is_empty() {
                return Err(NodeApiError::Pem {
                    field,
                    path: path.clone(),
                    message: "no CERTIFICATE in PEM".into(),
                });
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| NodeApiError::Pem {
                    field,
                    path: path.clone(),
                    message: e.to_string(),
                })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let (cert_path, key_path) = serving_files(f, now_unix)?;
    let serving = Arc::new(ServingCert(std::sync::RwLock::new(Arc::new(
        certified_key(&cert_path, &key_path)?,
    ))));
    let mut config = builder.with_cert_resolver(serving.clone());
    config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
    // The node API's clients are the API server and a metrics scraper or
    // two: rustls's default of 256 sessions is a 12 KiB table allocated
    // up front.
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE);
    Ok((Arc::new(config), serving))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path) -> TlsFiles {
        TlsFiles {
            cert_and_key: None,
            client_ca: None,
            pki_dir: dir.join("pki"),
            node_name: "edge-1".into(),
            addresses: vec!["127.0.0.1".parse().unwrap()],
            server_tls_bootstrap: false,
            internal_ips: vec![],
        }
    }

    #[test]
    fn a_self_signed_certificate_is_made_once_with_a_private_key_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let now = 1_767_225_600;
        server_config(&f, now).unwrap();
        let (cert, key) = serving_files(&f, now).unwrap();
        let mode = fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let first = fs::read(&cert).unwrap();
        serving_files(&f, now + 3600).unwrap();
        assert_eq!(fs::read(&cert).unwrap(), first, "reused across restarts");
        serving_files(&f, now + cert::LIFETIME_SECS + 1).unwrap();
        assert_ne!(fs::read(&cert).unwrap(), first, "made again once expired");
    }

    #[test]
    fn with_server_tls_bootstrap_an_issued_certificate_on_disk_is_served_until_it_expires() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = files(dir.path());
        f.server_tls_bootstrap = true;
        let now = 1_767_225_600;
        let rng = ring::rand::SystemRandom::new();
        let issued = cert::self_signed("edge-1", &[], &[], now, &rng).unwrap();
        fs::create_dir_all(&f.pki_dir).unwrap();
        fs::write(f.issued_path(), issued.cert_pem + &issued.key_pem).unwrap();
        let (cert_path, key_path) = serving_files(&f, now + 1).unwrap();
        assert_eq!(
            (&cert_path, &key_path),
            (&f.issued_path(), &f.issued_path())
        );
        let (_, serving) = server_config(&f, now + 1).unwrap();
        serving.set(certified_key(&cert_path, &key_path).unwrap());
        let later = now + cert::LIFETIME_SECS;
        assert_eq!(
            serving_files(&f, later).unwrap().0,
            f.pki_dir.join("kubelet.crt")
        );
        f.server_tls_bootstrap = false;
        assert_eq!(
            serving_files(&f, now + 1).unwrap().0,
            f.pki_dir.join("kubelet.crt")
        );
    }

    #[test]
    fn a_key_that_does_not_match_the_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let rng = ring::rand::SystemRandom::new();
        let a = cert::self_signed("a", &[], &[], 0, &rng).unwrap();
        let b = cert::self_signed("b", &[], &[], 0, &rng).unwrap();
        let (c, k) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        fs::write(&c, a.cert_pem).unwrap();
        fs::write(&k, b.key_pem).unwrap();
        let e = certified_key(&c, &k).unwrap_err().to_string();
        assert!(e.starts_with("tlsPrivateKeyFile"), "{e}");
    }

    #[test]
    fn a_missing_client_ca_file_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = files(dir.path());
        f.client_ca = Some(dir.path().join("nope.crt"));
        let e = server_config(&f, 0).unwrap_err().to_string();
        assert!(e.starts_with("authentication.x509.clientCAFile "), "{e}");
        assert!(e.contains("nope.crt"), "{e}");
    }
}
