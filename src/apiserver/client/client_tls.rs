//! The rustls client configuration for the API server, from a kubeconfig.
//!
//! The server certificate is verified with webpki against the kubeconfig's
//! CA only (picolet ships no system roots), for the server's host or the
//! kubeconfig's `tls-server-name`. The client certificate and key, when the
//! kubeconfig has them, authenticate the node (the Node authorizer reads
//! `system:node:<name>` from the certificate's subject). ALPN offers `h2`
//! first and `http/1.1` second.
//!
//! The crypto provider is ring's, with the same small set of cipher suites
//! and key exchange groups as the HTTPS probes (AES-128-GCM and ChaCha20,
//! X25519 and P-256) so the two share code. Signatures are limited to what
//! Kubernetes PKIs use (kubeadm, k3s, kubelet certificate rotation): ECDSA
//! P-256 and RSA (2048-8192 bits, PKCS#1 and PSS) with SHA-256. Ed25519,
//! P-384 and SHA-384/512 signatures on the server's chain are refused
//! (a handshake error naming the unsupported algorithm); client keys may be
//! RSA or ECDSA (PKCS#1, SEC1 or PKCS#8), not Ed25519. Each of those would
//! cost binary size on every board for PKIs nobody runs.
//!
//! Unlike the probes, even `insecure-skip-tls-verify` (allowed only when the
//! caller said so, see [`super::kubeconfig`]) still checks the handshake
//! signature against the presented certificate; only the chain and name are
//! not checked.

use std::fmt;
use std::sync::Arc;

use futures_rustls::rustls;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{ring as rustls_ring, CryptoProvider, KeyProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::sign::SigningKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::kubeconfig::{Kubeconfig, KubeconfigError, Material};

/// Errors building the TLS configuration; each names the kubeconfig field.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error("kubeconfig {path}: {field}: {message}")]
    Material {
        path: String,
        field: String,
        message: String,
    },
    #[error("kubeconfig {path}: {field}: {source}")]
    Rustls {
        path: String,
        field: String,
        source: rustls::Error,
    },
}

/// What a connection needs for its TLS handshake.
#[derive(Clone)]
pub struct TlsSetup {
    pub config: Arc<ClientConfig>,
    /// The name sent as SNI and checked against the certificate.
    pub server_name: ServerName<'static>,
}

impl fmt::Debug for TlsSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSetup")
            .field("server_name", &self.server_name)
            .field("alpn", &self.config.alpn_protocols)
            .finish_non_exhaustive()
    }
}

/// ALPN protocol ids, in order of preference.
pub const ALPN_H2: &[u8] = b"h2";
pub const ALPN_HTTP11: &[u8] = b"http/1.1";

/// The signature algorithms accepted on the server's certificates and
/// handshake.
static SIGNATURES: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
    all: &[
        webpki::ring::ECDSA_P256_SHA256,
        webpki::ring::RSA_PKCS1_2048_8192_SHA256,
        webpki::ring::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
    ],
    mapping: &[
        (
            SignatureScheme::ECDSA_NISTP256_SHA256,
            &[webpki::ring::ECDSA_P256_SHA256],
        ),
        (
            SignatureScheme::RSA_PSS_SHA256,
            &[webpki::ring::RSA_PSS_2048_8192_SHA256_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA256,
            &[webpki::ring::RSA_PKCS1_2048_8192_SHA256],
        ),
    ],
};

/// Client keys: RSA or ECDSA, no Ed25519.
#[derive(Debug)]
struct ClientKeys;

impl KeyProvider for ClientKeys {
    fn load_private_key(
        &self,
        key: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
        if !matches!(key, PrivateKeyDer::Pkcs1(_)) {
            if let Ok(k) = rustls_ring::sign::any_ecdsa_type(&key) {
                return Ok(k);
            }
        }
        match rustls_ring::sign::RsaSigningKey::new(&key) {
            Ok(k) => Ok(Arc::new(k)),
            Err(_) => Err(rustls::Error::General(
                "the client key is neither an RSA nor an ECDSA key".into(),
            )),
        }
    }
}

/// The crypto provider: ring, a small suite list, the signatures above.
pub fn provider() -> CryptoProvider {
    use rustls_ring::cipher_suite as cs;
    let ring = rustls_ring::default_provider();
    CryptoProvider {
        signature_verification_algorithms: SIGNATURES,
        key_provider: &ClientKeys,
        cipher_suites: vec![
            cs::TLS13_AES_128_GCM_SHA256,
            cs::TLS13_CHACHA20_POLY1305_SHA256,
            cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ],
        kx_groups: vec![
            rustls_ring::kx_group::X25519,
            rustls_ring::kx_group::SECP256R1,
        ],
        ..ring
    }
}

/// Servers whose TLS sessions are kept for resumption (rustls keeps up to
/// eight TLS 1.3 tickets for each): the API server, with room to spare.
const SESSION_CACHE: usize = 4;

/// Builds the TLS setup for `k`, reading its certificate files now.
pub fn setup(k: &Kubeconfig) -> Result<TlsSetup, TlsError> {
    let path = k.path.display().to_string();
    let provider = Arc::new(provider());
    let material_err = |m: &Material, message: String| TlsError::Material {
        path: path.clone(),
        field: m.field.clone(),
        message,
    };
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("the provider has TLS 1.2 and 1.3 suites");
    let builder = if k.insecure_skip_tls_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SkipChainVerification(provider.clone())))
    } else {
        let m = k
            .certificate_authority
            .as_ref()
            .expect("kubeconfig::parse requires a CA unless insecure");
        let pem = m.read(&k.path)?;
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| material_err(m, format!("bad PEM: {e}")))?;
            roots.add(cert).map_err(|source| TlsError::Rustls {
                path: path.clone(),
                field: m.field.clone(),
                source,
            })?;
        }
        if roots.is_empty() {
            return Err(material_err(m, "no CERTIFICATE in PEM".into()));
        }
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| material_err(m, e.to_string()))?;
        builder.with_webpki_verifier(verifier)
    };
    let mut config = match (&k.client_certificate, &k.client_key) {
        (Some(cm), Some(km)) => {
            let pem = cm.read(&k.path)?;
            let certs = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| material_err(cm, format!("bad PEM: {e}")))?;
            if certs.is_empty() {
                return Err(material_err(cm, "no CERTIFICATE in PEM".into()));
            }
            let pem = km.read(&k.path)?;
            // The error text of a key never quotes the key.
            let key = PrivateKeyDer::from_pem_slice(&pem)
                .map_err(|_| material_err(km, "no usable PRIVATE KEY in PEM".into()))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|source| TlsError::Rustls {
                    path: path.clone(),
                    field: km.field.clone(),
                    source,
                })?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP11.to_vec()];
    // A node talks to one API server: rustls's default cache for 256
    // servers is a 14 KiB table allocated up front, per kubeconfig (and a
    // hollow fleet has one per node: heaptrack, docs/fleet.md). A few
    // entries keep resumption, which spares a reconnect the certificate
    // exchange on a slow uplink.
    config.resumption = rustls::client::Resumption::in_memory_sessions(SESSION_CACHE);

    let name = k.tls_server_name.as_deref().unwrap_or(&k.server.host);
    let server_name = ServerName::try_from(name.to_string()).map_err(|e| TlsError::Material {
        path: path.clone(),
        field: if k.tls_server_name.is_some() {
            "tls-server-name".into()
        } else {
            "server".into()
        },
        message: format!("{name:?} is not a valid server name: {e}"),
    })?;
    Ok(TlsSetup {
        config: Arc::new(config),
        server_name,
    })
}

/// `insecure-skip-tls-verify`: the certificate chain and name are not
/// checked, but the handshake must still be signed by the presented key.
#[derive(Debug)]
struct SkipChainVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for SkipChainVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
pub(crate) mod testpki {
    //! Certificates for tests, made with the `openssl` command line tool
    //! (no test dependency): a CA, a server certificate for 127.0.0.1 and
    //! `localhost`, and a client certificate for `system:node:<name>`.

    use std::path::{Path, PathBuf};
    use std::process::Command;

    pub struct Pki {
        pub dir: tempfile::TempDir,
    }

    impl Pki {
        pub fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        pub fn read(&self, name: &str) -> Vec<u8> {
            std::fs::read(self.path(name)).unwrap()
        }
    }

    fn openssl(dir: &Path, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("the openssl command line tool is needed by these tests");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn issue(dir: &Path, name: &str, subject: &str, ext: &str, key_alg: &[&str]) {
        let key = format!("{name}.key");
        let csr = format!("{name}.csr");
        let crt = format!("{name}.crt");
        let extfile = format!("{name}.ext");
        std::fs::write(dir.join(&extfile), ext).unwrap();
        let mut args = vec!["req", "-new", "-nodes", "-newkey"];
        args.extend_from_slice(key_alg);
        args.extend_from_slice(&["-keyout", &key, "-out", &csr, "-subj", subject]);
        openssl(dir, &args);
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-out",
                &crt,
                "-extfile",
                &extfile,
            ],
        );
    }

    /// A fresh CA with `server.{crt,key}` (EC P-256) and `client.{crt,key}`
    /// (RSA 2048, as kubeadm issues them) plus `other-ca.crt`.
    pub fn generate() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let ec = ["ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
        for ca in ["ca", "other-ca"] {
            let mut args = vec!["req", "-x509", "-nodes", "-newkey"];
            args.extend_from_slice(&ec);
            let key = format!("{ca}.key");
            let crt = format!("{ca}.crt");
            args.extend_from_slice(&[
                "-keyout",
                &key,
                "-out",
                &crt,
                "-subj",
                "/CN=picolet-test-ca",
                "-days",
                "2",
            ]);
            openssl(d, &args);
        }
        issue(
            d,
            "server",
            "/CN=kube-apiserver",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
            &ec,
        );
        issue(
            d,
            "client",
            "/O=system:nodes/CN=system:node:pi",
            "extendedKeyUsage=clientAuth\n",
            &["rsa:2048"],
        );
        Pki { dir }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::apiserver::client::kubeconfig::{Server, Source};

    fn kubeconfig(pki: &testpki::Pki) -> Kubeconfig {
        Kubeconfig {
            path: PathBuf::from("/test/kubelet.conf"),
            context: "c".into(),
            server: Server {
                host: "127.0.0.1".into(),
                port: 6443,
                base_path: String::new(),
            },
            tls_server_name: None,
            certificate_authority: Some(Material {
                field: "clusters[0].cluster.certificate-authority".into(),
                source: Source::File(pki.path("ca.crt")),
            }),
            insecure_skip_tls_verify: false,
            client_certificate: Some(Material {
                field: "users[0].user.client-certificate-data".into(),
                source: Source::Data(pki.read("client.crt")),
            }),
            client_key: Some(Material {
                field: "users[0].user.client-key-data".into(),
                source: Source::Data(pki.read("client.key")),
            }),
            token: None,
        }
    }

    #[test]
    fn a_kubeconfig_with_ca_and_client_certificate_builds_a_config_offering_h2_first() {
        let pki = testpki::generate();
        let s = setup(&kubeconfig(&pki)).unwrap();
        assert_eq!(
            s.config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        assert!(s.config.client_auth_cert_resolver.has_certs());
        assert_eq!(
            format!("{:?}", s.server_name),
            "IpAddress(V4(Ipv4Addr([127, 0, 0, 1])))"
        );
    }

    #[test]
    fn tls_server_name_replaces_the_host_for_verification() {
        let pki = testpki::generate();
        let mut k = kubeconfig(&pki);
        k.tls_server_name = Some("kubernetes.default.svc".into());
        let s = setup(&k).unwrap();
        assert!(format!("{:?}", s.server_name).contains("kubernetes.default.svc"));
    }

    #[test]
    fn a_key_that_is_not_pem_is_named_by_its_field_without_its_contents() {
        let pki = testpki::generate();
        let mut k = kubeconfig(&pki);
        k.client_key.as_mut().unwrap().source = Source::Data(b"SEKRIT not a key".to_vec());
        let e = setup(&k).unwrap_err().to_string();
        assert!(e.contains("users[0].user.client-key-data"), "{e}");
        assert!(!e.contains("SEKRIT"), "{e}");
    }

    #[test]
    fn a_ca_file_without_certificates_is_an_error_naming_the_field() {
        let pki = testpki::generate();
        let mut k = kubeconfig(&pki);
        k.certificate_authority.as_mut().unwrap().source = Source::Data(b"nothing".to_vec());
        let e = setup(&k).unwrap_err().to_string();
        assert!(
            e.contains("clusters[0].cluster.certificate-authority"),
            "{e}"
        );
        let mut k = kubeconfig(&pki);
        k.certificate_authority.as_mut().unwrap().source =
            Source::File(Path::new("/nonexistent/ca.crt").into());
        let e = setup(&k).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/ca.crt"), "{e}");
    }

    #[test]
    fn a_certificate_that_does_not_match_its_key_is_refused() {
        let pki = testpki::generate();
        let mut k = kubeconfig(&pki);
        k.client_key.as_mut().unwrap().source = Source::Data(pki.read("server.key"));
        let e = setup(&k).unwrap_err().to_string();
        assert!(e.contains("users[0].user.client-key-data"), "{e}");
    }
}
