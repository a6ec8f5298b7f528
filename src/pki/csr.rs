//! The node's credentials from the cluster: an ECDSA P-256 key, the
//! PKCS#10 certificate request kubelet sends for the signer
//! `kubernetes.io/kube-apiserver-client-kubelet` (its client certificate)
//! or, with the node's names as subjectAltNames, for
//! `kubernetes.io/kubelet-serving` (the node API's serving certificate),
//! the PEM files written next to the kubeconfig, and when an issued
//! certificate must be renewed.
//!
//! Pure apart from the random source handed in: no files, no network, no
//! clock (time comes in as Unix seconds). The CSR's DER is written by
//! [`super::der`] so no ASN.1 crate is linked.

use base64::Engine as _;
use ring::rand::SecureRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use thiserror::Error;

use super::der::{self, tag, DerError, Reader};

/// The signer kubelet asks for its client certificate.
pub const SIGNER_NAME: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The usages kubelet requests; the `nodeclient`/`selfnodeclient` approvers
/// accept exactly these (key encipherment is also allowed, not needed for EC).
pub const USAGES: [&str; 2] = ["digital signature", "client auth"];
/// The signer of the node API's serving certificate (`serverTLSBootstrap`).
pub const SERVING_SIGNER_NAME: &str = "kubernetes.io/kubelet-serving";
/// kubelet's usages for a serving certificate with an ECDSA key (key
/// encipherment is for RSA keys only).
pub const SERVING_USAGES: [&str; 2] = ["digital signature", "server auth"];
/// The organization of every node identity.
pub const NODES_GROUP: &str = "system:nodes";

const OID_EC_PUBLIC_KEY: &[u64] = &[1, 2, 840, 10045, 2, 1];
const OID_PRIME256V1: &[u64] = &[1, 2, 840, 10045, 3, 1, 7];
const OID_ECDSA_WITH_SHA256: &[u64] = &[1, 2, 840, 10045, 4, 3, 2];
const OID_ORGANIZATION: &[u64] = &[2, 5, 4, 10];
const OID_COMMON_NAME: &[u64] = &[2, 5, 4, 3];
const OID_EXTENSION_REQUEST: &[u64] = &[1, 2, 840, 113549, 1, 9, 14];
const OID_SUBJECT_ALT_NAME: &[u64] = &[2, 5, 29, 17];

/// Why a key or request could not be made, or a certificate not read.
#[derive(Debug, Error)]
pub enum CsrError {
    #[error("generating the node's client key failed")]
    KeyGeneration,
    #[error("the node's client key could not be read: {0}")]
    KeyRejected(String),
    #[error("signing the certificate request failed")]
    Signing,
    #[error("issued certificate is not PEM (no CERTIFICATE block)")]
    NoCertificate,
    #[error("issued certificate: {0}")]
    Der(#[from] DerError),
}

/// A freshly generated node key: PKCS#8 DER (what ring makes and reads).
pub struct NodeKey {
    pkcs8: Vec<u8>,
    pair: EcdsaKeyPair,
}

impl std::fmt::Debug for NodeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeKey(<redacted>)")
    }
}

impl NodeKey {
    /// A new ECDSA P-256 key from `rng`.
    pub fn generate(rng: &dyn SecureRandom) -> Result<Self, CsrError> {
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, rng)
            .map_err(|_| CsrError::KeyGeneration)?;
        let pkcs8 = doc.as_ref().to_vec();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &pkcs8, rng)
            .map_err(|e| CsrError::KeyRejected(e.to_string()))?;
        Ok(NodeKey { pkcs8, pair })
    }

    /// The key as a `PRIVATE KEY` PEM block (to be written 0600).
    pub fn to_pem(&self) -> String {
        pem("PRIVATE KEY", &self.pkcs8)
    }

    /// The PKCS#10 request for `system:node:<node_name>` in `system:nodes`,
    /// as a `CERTIFICATE REQUEST` PEM block: the CSR object's `spec.request`
    /// is this, base64-encoded once more by JSON.
    pub fn certificate_request_pem(
        &self,
        node_name: &str,
        rng: &dyn SecureRandom,
    ) -> Result<String, CsrError> {
        Ok(pem(
            "CERTIFICATE REQUEST",
            &self.certificate_request_der(node_name, None, rng)?,
        ))
    }

    /// The serving certificate's request: the same subject, and an
    /// extensionRequest attribute with `alt_names` (the content of a
    /// GeneralNames SEQUENCE, from [`crate::nodeapi::cert::alt_names`]) as
    /// the subjectAltName extension.
    pub fn serving_request_pem(
        &self,
        node_name: &str,
        alt_names: &[u8],
        rng: &dyn SecureRandom,
    ) -> Result<String, CsrError> {
        Ok(pem(
            "CERTIFICATE REQUEST",
            &self.certificate_request_der(node_name, Some(alt_names), rng)?,
        ))
    }

    fn certificate_request_der(
        &self,
        node_name: &str,
        alt_names: Option<&[u8]>,
        rng: &dyn SecureRandom,
    ) -> Result<Vec<u8>, CsrError> {
        let cn = format!("system:node:{node_name}");
        let rdn = |oid: &[u64], value: &str| {
            der::tlv(
                tag::SET,
                &der::sequence(&[
                    &der::oid(oid),
                    &der::tlv(tag::UTF8_STRING, value.as_bytes()),
                ]),
            )
        };
        // Go's pkix.Name order: O before CN.
        let subject = der::sequence(&[
            &rdn(OID_ORGANIZATION, NODES_GROUP),
            &rdn(OID_COMMON_NAME, &cn),
        ]);
        let spki = der::sequence(&[
            &der::sequence(&[&der::oid(OID_EC_PUBLIC_KEY), &der::oid(OID_PRIME256V1)]),
            &der::bit_string(self.pair.public_key().as_ref()),
        ]);
        let attributes = match alt_names {
            None => der::tlv(tag::CONTEXT_0, &[]),
            Some(names) => {
                let san = der::sequence(&[
                    &der::oid(OID_SUBJECT_ALT_NAME),
                    &der::tlv(0x04, &der::tlv(tag::SEQUENCE, names)), // OCTET STRING
                ]);
                let request = der::sequence(&[
                    &der::oid(OID_EXTENSION_REQUEST),
                    &der::tlv(tag::SET, &der::sequence(&[&san])),
                ]);
                der::tlv(tag::CONTEXT_0, &request)
            }
        };
        let info = der::sequence(&[&der::small_uint(0), &subject, &spki, &attributes]);
        let sig = self.pair.sign(rng, &info).map_err(|_| CsrError::Signing)?;
        Ok(der::sequence(&[
            &info,
            &der::sequence(&[&der::oid(OID_ECDSA_WITH_SHA256)]),
            &der::bit_string(sig.as_ref()),
        ]))
    }
}

/// The content of a subjectAltName's GeneralNames SEQUENCE: each DNS name
/// of `dns` once (an entry that parses as an address counts as one), then
/// each address once, in the order given.
pub fn alt_names(dns: &[&str], ips: &[std::net::IpAddr]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for &d in dns {
        if !d.is_empty() && !seen.contains(&d) && d.parse::<std::net::IpAddr>().is_err() {
            seen.push(d);
            out.extend(der::tlv(0x82, d.as_bytes())); // [2] dNSName
        }
    }
    let mut ip_list: Vec<std::net::IpAddr> = dns.iter().filter_map(|d| d.parse().ok()).collect();
    ip_list.extend_from_slice(ips);
    for (i, ip) in ip_list.iter().enumerate() {
        if ip_list[..i].contains(ip) {
            continue;
        }
        let bytes = match ip {
            std::net::IpAddr::V4(v4) => v4.octets().to_vec(),
            std::net::IpAddr::V6(v6) => v6.octets().to_vec(),
        };
        out.extend(der::tlv(0x87, &bytes)); // [7] iPAddress
    }
    out
}

/// `data` as one PEM block with 64-column lines.
pub fn pem(label: &str, data: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(data);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The DER of the first `CERTIFICATE` block of a PEM text.
pub fn first_certificate_der(pem_text: &[u8]) -> Result<Vec<u8>, CsrError> {
    let text = std::str::from_utf8(pem_text).map_err(|_| CsrError::NoCertificate)?;
    let begin = "-----BEGIN CERTIFICATE-----";
    let start = text.find(begin).ok_or(CsrError::NoCertificate)? + begin.len();
    let end = text[start..]
        .find("-----END CERTIFICATE-----")
        .ok_or(CsrError::NoCertificate)?;
    let b64: String = text[start..start + end]
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| CsrError::NoCertificate)
}

/// An X.509 certificate's validity, in Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

impl Validity {
    /// Reads `tbsCertificate.validity` of a DER certificate.
    pub fn of_certificate(cert_der: &[u8]) -> Result<Self, CsrError> {
        let mut cert = Reader::new(cert_der).expect(tag::SEQUENCE)?;
        let mut tbs = cert.expect(tag::SEQUENCE)?;
        if tbs.peek_tag() == Some(tag::CONTEXT_0) {
            tbs.any()?; // version
        }
        tbs.expect(tag::INTEGER)?; // serialNumber
        tbs.expect(tag::SEQUENCE)?; // signature
        tbs.expect(tag::SEQUENCE)?; // issuer
        let mut validity = tbs.expect(tag::SEQUENCE)?;
        let mut time = || -> Result<i64, CsrError> {
            let (t, r) = validity.any()?;
            Ok(der::time_to_unix(t, r.bytes())?)
        };
        let not_before = time()?;
        let not_after = time()?;
        Ok(Validity {
            not_before,
            not_after,
        })
    }

    /// When to renew: kubelet's jittered deadline, `notBefore` plus 70 % to
    /// 90 % of the lifetime; `jitter` in `[0, 1)` picks the point.
    pub fn rotation_deadline(&self, jitter: f64) -> i64 {
        let total = (self.not_after - self.not_before).max(0) as f64;
        let fraction = 0.7 + 0.2 * jitter.clamp(0.0, 1.0);
        self.not_before + (total * fraction).round() as i64
    }

    /// Whether the certificate has expired at `now` (Unix seconds): then
    /// the board falls back to its bootstrap credential.
    pub fn expired_at(&self, now: i64) -> bool {
        now >= self.not_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use std::process::Command;

    /// These tests check our DER against openssl: without it they fail and
    /// say what to install (`make deps` installs it).
    fn need_openssl() {
        assert!(
            Command::new("openssl").arg("version").output().is_ok(),
            "openssl not found: install it (Debian: apt-get install openssl, or `make deps`)"
        );
    }

    #[test]
    fn a_certificate_request_verifies_with_openssl_and_names_the_node() {
        need_openssl();
        let rng = SystemRandom::new();
        let key = NodeKey::generate(&rng).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.csr");
        std::fs::write(&path, key.certificate_request_pem("pi-7", &rng).unwrap()).unwrap();
        let out = Command::new("openssl")
            .args(["req", "-noout", "-text", "-verify", "-in"])
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("verify OK"), "{text}");
        assert!(
            text.contains("O = system:nodes, CN = system:node:pi-7"),
            "{text}"
        );
        assert!(text.contains("prime256v1"), "{text}");
    }

    #[test]
    fn a_serving_certificate_request_carries_the_node_names_as_subject_alt_names() {
        need_openssl();
        let rng = SystemRandom::new();
        let key = NodeKey::generate(&rng).unwrap();
        let names = alt_names(&["pi-7"], &["192.168.1.20".parse().unwrap()]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serving.csr");
        std::fs::write(
            &path,
            key.serving_request_pem("pi-7", &names, &rng).unwrap(),
        )
        .unwrap();
        let out = Command::new("openssl")
            .args(["req", "-noout", "-text", "-verify", "-in"])
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("verify OK"), "{text}");
        assert!(
            text.contains("O = system:nodes, CN = system:node:pi-7"),
            "{text}"
        );
        assert!(text.contains("DNS:pi-7, IP Address:192.168.1.20"), "{text}");
    }

    #[test]
    fn the_private_key_pem_is_read_by_openssl_as_a_p256_key() {
        need_openssl();
        let key = NodeKey::generate(&SystemRandom::new()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.pem");
        std::fs::write(&path, key.to_pem()).unwrap();
        let out = Command::new("openssl")
            .args(["pkey", "-noout", "-text", "-in"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).contains("P-256"));
    }

    #[test]
    fn the_validity_of_an_openssl_certificate_is_read() {
        need_openssl();
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-subj",
                "/CN=t",
                "-days",
                "3",
                "-keyout",
            ])
            .arg(dir.path().join("k.pem"))
            .arg("-out")
            .arg(dir.path().join("c.pem"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pem_text = std::fs::read(dir.path().join("c.pem")).unwrap();
        let v = Validity::of_certificate(&first_certificate_der(&pem_text).unwrap()).unwrap();
        assert_eq!(v.not_after - v.not_before, 3 * 86_400);
    }

    #[test]
    fn the_rotation_deadline_falls_between_70_and_90_percent_of_the_lifetime() {
        let v = Validity {
            not_before: 1000,
            not_after: 2000,
        };
        assert_eq!(v.rotation_deadline(0.0), 1700);
        assert_eq!(v.rotation_deadline(0.5), 1800);
        assert_eq!(v.rotation_deadline(0.25), 1750);
        assert_eq!(v.rotation_deadline(7.0), 1900);
    }

    #[test]
    fn a_certificate_is_expired_from_its_not_after_on() {
        let v = Validity {
            not_before: 0,
            not_after: 10,
        };
        assert!(!v.expired_at(9));
        assert!(v.expired_at(10));
    }

    #[test]
    fn text_without_a_certificate_block_is_an_error() {
        assert!(matches!(
            first_certificate_der(b"-----BEGIN PRIVATE KEY-----\n"),
            Err(CsrError::NoCertificate)
        ));
    }

    #[test]
    fn the_key_is_never_printed_by_debug() {
        let key = NodeKey::generate(&SystemRandom::new()).unwrap();
        assert_eq!(format!("{key:?}"), "NodeKey(<redacted>)");
    }
}
