//! TLS client set-up (rustls with ring, TLS 1.2 and 1.3), behind the cargo
//! feature `https-probes`; without it every TLS connect fails with a
//! message naming the feature, and the binary is smaller.
//!
//! Today there is one set-up: [`Verify::Skip`], kubelet's
//! `InsecureSkipVerify` for HTTPS probes and lifecycle hooks. A verifying
//! set-up (a CA bundle, client certificates) for the API-server client and
//! the node API belongs here as a second [`Verify`] kind. It will need
//! signature verification and key loading, which the skip-verify provider
//! deliberately leaves out to stay small; it must not reuse that provider.

use std::io;
use std::net::TcpStream;

use smol::Async;

use super::BoxStream;

/// A failed TLS set-up or handshake.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The handshake failed, or the host is not a valid server name.
    #[error("tls: {0}")]
    Handshake(io::Error),
    #[cfg(not(feature = "https-probes"))]
    #[error("HTTPS is not compiled in (cargo feature https-probes)")]
    NotCompiledIn,
}

/// How the client checks the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// Accept any certificate ([`InsecureSkipVerify`]). Only for requests
    /// that neither send nor trust data: probes and lifecycle hooks.
    Skip,
}

/// Runs the TLS handshake on `tcp` for `host` (an IP literal or a name,
/// brackets allowed).
pub async fn connect(
    tcp: Async<TcpStream>,
    host: &str,
    verify: Verify,
) -> Result<BoxStream, TlsError> {
    imp::connect(tcp, host, verify).await
}

#[cfg(feature = "https-probes")]
pub use imp::InsecureSkipVerify;

#[cfg(feature = "https-probes")]
mod imp {
    use std::io;
    use std::net::TcpStream;
    use std::sync::{Arc, OnceLock};

    use futures_rustls::rustls::client::danger::{
        HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
    };
    use futures_rustls::rustls::crypto::ring as rustls_ring;
    use futures_rustls::rustls::crypto::{
        CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom, WebPkiSupportedAlgorithms,
    };
    use futures_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use futures_rustls::rustls::sign::SigningKey;
    use futures_rustls::rustls::{self, ClientConfig, DigitallySignedStruct, SignatureScheme};
    use futures_rustls::TlsConnector;
    use smol::Async;

    use super::{BoxStream, TlsError, Verify};

    /// Accepts any server certificate, like Go's `InsecureSkipVerify`,
    /// which kubelet sets for HTTPS probes and hooks: a pod's serving
    /// certificate is typically self-signed or issued for a service name,
    /// never for the pod IP that is dialled, and the question asked is
    /// "does it answer?", not "is it who it claims to be?". Handshake
    /// signatures are not checked either: without a trusted certificate
    /// they prove nothing (a man in the middle signs with its own key), and
    /// skipping them keeps RSA/ECDSA verification and certificate parsing
    /// out of the binary. Never use this for anything that sends or trusts
    /// data (the API-server client needs a real verifier).
    #[derive(Debug)]
    pub struct InsecureSkipVerify;

    impl ServerCertVerifier for InsecureSkipVerify {
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
            _message: &[u8],
            _cert: &CertificateDer<'_>,
            _dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            Ok(HandshakeSignatureValid::assertion())
        }

        fn verify_tls13_signature(
            &self,
            _message: &[u8],
            _cert: &CertificateDer<'_>,
            _dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            Ok(HandshakeSignatureValid::assertion())
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            use SignatureScheme::*;
            vec![
                ECDSA_NISTP256_SHA256,
                ECDSA_NISTP384_SHA384,
                ED25519,
                RSA_PSS_SHA256,
                RSA_PSS_SHA384,
                RSA_PSS_SHA512,
                RSA_PKCS1_SHA256,
                RSA_PKCS1_SHA384,
                RSA_PKCS1_SHA512,
            ]
        }
    }

    /// Random bytes from the kernel, through ring.
    #[derive(Debug)]
    struct SystemRandom;

    impl SecureRandom for SystemRandom {
        fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
            ::ring::rand::SecureRandom::fill(&::ring::rand::SystemRandom::new(), buf)
                .map_err(|_| GetRandomFailed)
        }
    }

    /// A skip-verify client never authenticates itself: no private keys.
    #[derive(Debug)]
    struct NoKeys;

    impl KeyProvider for NoKeys {
        fn load_private_key(
            &self,
            _: PrivateKeyDer<'static>,
        ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
            Err(rustls::Error::General(
                "a skip-verify TLS client uses no client certificate".into(),
            ))
        }
    }

    /// A small ring provider: the mandatory AES-128-GCM and ChaCha20 suites
    /// (TLS 1.3, and ECDHE for TLS 1.2), X25519 and P-256, no signature
    /// verification, no signing. Every mainstream server speaks one of
    /// these; leaving out AES-256/SHA-384, P-384 and ring's RSA/ECDSA code
    /// keeps the binary small.
    fn skip_verify_provider() -> CryptoProvider {
        use rustls_ring::cipher_suite as cs;
        CryptoProvider {
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
            signature_verification_algorithms: WebPkiSupportedAlgorithms {
                all: &[],
                mapping: &[],
            },
            secure_random: &SystemRandom,
            key_provider: &NoKeys,
        }
    }

    /// The skip-verify client configuration, built once per process.
    fn skip_verify_config() -> Arc<ClientConfig> {
        static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
        CONFIG
            .get_or_init(|| {
                let config = ClientConfig::builder_with_provider(Arc::new(skip_verify_provider()))
                    .with_safe_default_protocol_versions()
                    .expect("the provider has TLS 1.2 and 1.3 suites")
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(InsecureSkipVerify))
                    .with_no_client_auth();
                Arc::new(config)
            })
            .clone()
    }

    pub(super) async fn connect(
        tcp: Async<TcpStream>,
        host: &str,
        verify: Verify,
    ) -> Result<BoxStream, TlsError> {
        let config = match verify {
            Verify::Skip => skip_verify_config(),
        };
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let name = ServerName::try_from(bare.to_string())
            .map_err(|e| TlsError::Handshake(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
        let tls = TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(TlsError::Handshake)?;
        Ok(Box::new(tls))
    }
}

#[cfg(not(feature = "https-probes"))]
mod imp {
    use std::net::TcpStream;

    use smol::Async;

    use super::{BoxStream, TlsError, Verify};

    pub(super) async fn connect(
        _: Async<TcpStream>,
        _: &str,
        _: Verify,
    ) -> Result<BoxStream, TlsError> {
        Err(TlsError::NotCompiledIn)
    }
}
