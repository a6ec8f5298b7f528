//! The node API's self-signed serving certificate, made when neither
//! `tlsCertFile` nor `tlsPrivateKeyFile` is set: an ECDSA P-256 key and a
//! one-year certificate for the node's name and addresses, issued by
//! itself (subject `<node>@<unix time>`, as kubelet names its own).
//!
//! The certificate is not a CA (so a client can pin it as its own trust
//! anchor, as `--kubelet-certificate-authority` does), has the
//! `serverAuth` extended key usage and the names as subjectAltNames.
//!
//! Pure apart from the random source handed in: time comes in as Unix
//! seconds; `serving_tls.rs` stores the PEM files.

use std::net::IpAddr;

use ring::rand::SecureRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};

use crate::pki::csr::{alt_names, pem, CsrError};
use crate::pki::der::{self, tag};

const OID_EC_PUBLIC_KEY: &[u64] = &[1, 2, 840, 10045, 2, 1];
const OID_PRIME256V1: &[u64] = &[1, 2, 840, 10045, 3, 1, 7];
const OID_ECDSA_WITH_SHA256: &[u64] = &[1, 2, 840, 10045, 4, 3, 2];
const OID_COMMON_NAME: &[u64] = &[2, 5, 4, 3];
const OID_KEY_USAGE: &[u64] = &[2, 5, 29, 15];
const OID_SUBJECT_ALT_NAME: &[u64] = &[2, 5, 29, 17];
const OID_EXT_KEY_USAGE: &[u64] = &[2, 5, 29, 37];
const OID_SERVER_AUTH: &[u64] = &[1, 3, 6, 1, 5, 5, 7, 3, 1];

/// How long the certificate is valid (kubelet's: one year).
pub const LIFETIME_SECS: i64 = 365 * 24 * 3600;

/// A made certificate and its key, both PEM.
pub struct SelfSigned {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for SelfSigned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SelfSigned(<redacted>)")
    }
}

/// A self-signed serving certificate for `node_name`, its DNS names `dns`
/// (the node name is always one) and `ips`, valid from `now_unix` for
/// [`LIFETIME_SECS`].
pub fn self_signed(
    node_name: &str,
    dns: &[&str],
    ips: &[IpAddr],
    now_unix: i64,
    rng: &dyn SecureRandom,
) -> Result<SelfSigned, CsrError> {
    let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, rng)
        .map_err(|_| CsrError::KeyGeneration)?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, doc.as_ref(), rng)
        .map_err(|e| CsrError::KeyRejected(e.to_string()))?;

    let name = der::sequence(&[&der::tlv(
        tag::SET,
        &der::sequence(&[
            &der::oid(OID_COMMON_NAME),
            &der::tlv(
                tag::UTF8_STRING,
                format!("{node_name}@{now_unix}").as_bytes(),
            ),
        ]),
    )]);
    let mut serial = [0u8; 16];
    rng.fill(&mut serial).map_err(|_| CsrError::KeyGeneration)?;
    serial[0] = (serial[0] & 0x7f) | 0x40; // positive, and no leading zero byte
    let alg = der::sequence(&[&der::oid(OID_ECDSA_WITH_SHA256)]);
    let validity = der::sequence(&[&time(now_unix), &time(now_unix + LIFETIME_SECS)]);
    let spki = der::sequence(&[
        &der::sequence(&[&der::oid(OID_EC_PUBLIC_KEY), &der::oid(OID_PRIME256V1)]),
        &der::bit_string(pair.public_key().as_ref()),
    ]);

    let mut names = vec![node_name];
    names.extend_from_slice(dns);
    let alt_names = alt_names(&names, ips);
    let extension = |oid: &[u64], critical: bool, value: &[u8]| {
        let oid = der::oid(oid);
        let value = der::tlv(0x04, value); // OCTET STRING
        if critical {
            der::sequence(&[&oid, &der::tlv(0x01, &[0xff]), &value])
        } else {
            der::sequence(&[&oid, &value])
        }
    };
    // digitalSignature (bit 0) and keyEncipherment (bit 2): 0xa0, 5 unused bits.
    let key_usage = der::tlv(tag::BIT_STRING, &[5, 0xa0]);
    let extensions = der::sequence(&[
        &extension(OID_KEY_USAGE, true, &key_usage),
        &extension(
            OID_EXT_KEY_USAGE,
            false,
            &der::sequence(&[&der::oid(OID_SERVER_AUTH)]),
        ),
        &extension(
            OID_SUBJECT_ALT_NAME,
            false,
            &der::tlv(tag::SEQUENCE, &alt_names),
        ),
    ]);
    let tbs = der::sequence(&[
        &der::tlv(tag::CONTEXT_0, &der::small_uint(2)), // v3
        &der::tlv(tag::INTEGER, &serial),
        &alg,
        &name,
        &validity,
        &name,
        &spki,
        &der::tlv(0xa3, &extensions), // [3] extensions
    ]);
    let sig = pair.sign(rng, &tbs).map_err(|_| CsrError::Signing)?;
    let cert = der::sequence(&[&tbs, &alg, &der::bit_string(sig.as_ref())]);
    Ok(SelfSigned {
        cert_pem: pem("CERTIFICATE", &cert),
        key_pem: pem("PRIVATE KEY", doc.as_ref()),
    })
}

/// The UTC calendar time of Unix seconds: year, month, day, hour, minute,
/// second.
pub fn civil(unix: i64) -> [i64; 6] {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    [year, month, day, secs / 3600, secs / 60 % 60, secs % 60]
}

/// A UTCTime (years before 2050) or GeneralizedTime of Unix seconds.
fn time(unix: i64) -> Vec<u8> {
    let [year, month, day, h, m, s] = civil(unix);
    let hms = format!("{month:02}{day:02}{h:02}{m:02}{s:02}Z");
    if (1950..2050).contains(&year) {
        der::tlv(tag::UTC_TIME, format!("{:02}{hms}", year % 100).as_bytes())
    } else {
        der::tlv(tag::GENERALIZED_TIME, format!("{year:04}{hms}").as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::csr::{first_certificate_der, Validity};
    use crate::pki::der::Reader;
    use std::net::Ipv4Addr;

    #[test]
    fn times_are_utc_before_2050_and_generalized_after() {
        assert_eq!(time(0), der::tlv(tag::UTC_TIME, b"700101000000Z"));
        assert_eq!(
            time(1_709_251_199),
            der::tlv(tag::UTC_TIME, b"240229235959Z")
        );
        assert_eq!(
            time(2_524_608_000),
            der::tlv(tag::GENERALIZED_TIME, b"20500101000000Z")
        );
    }

    #[test]
    fn a_self_signed_certificate_is_valid_for_a_year_and_names_the_node() {
        let rng = ring::rand::SystemRandom::new();
        let now = 1_767_225_600; // 2026-01-01
        let made = self_signed(
            "edge-1",
            &["localhost"],
            &[IpAddr::V4(Ipv4Addr::LOCALHOST)],
            now,
            &rng,
        )
        .unwrap();
        let cert = first_certificate_der(made.cert_pem.as_bytes()).unwrap();
        let v = Validity::of_certificate(&cert).unwrap();
        assert_eq!((v.not_before, v.not_after), (now, now + LIFETIME_SECS));
        let user = super::super::authn::user_of_certificate(&cert)
            .unwrap()
            .unwrap();
        assert_eq!(user.name, format!("edge-1@{now}"));
        // The SAN extension holds both names and the address.
        let has = |needle: &[u8]| cert.windows(needle.len()).any(|w| w == needle);
        assert!(has(&der::tlv(0x82, b"edge-1")));
        assert!(has(&der::tlv(0x82, b"localhost")));
        assert!(has(&der::tlv(0x87, &[127, 0, 0, 1])));
        assert!(made.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(Reader::new(&cert).expect(tag::SEQUENCE).is_ok());
    }

    #[test]
    fn a_self_signed_certificate_verifies_against_itself_for_its_names() {
        use futures_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
        let rng = ring::rand::SystemRandom::new();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let made = self_signed(
            "edge-1",
            &[],
            &[IpAddr::V4(Ipv4Addr::LOCALHOST)],
            now - 60,
            &rng,
        )
        .unwrap();
        let der = CertificateDer::from(first_certificate_der(made.cert_pem.as_bytes()).unwrap());
        let anchor = webpki::anchor_from_trusted_cert(&der).unwrap();
        let ee = webpki::EndEntityCert::try_from(&der).unwrap();
        let t = UnixTime::since_unix_epoch(std::time::Duration::from_secs(now as u64));
        ee.verify_for_usage(
            &[webpki::ring::ECDSA_P256_SHA256],
            &[anchor],
            &[],
            t,
            webpki::KeyUsage::server_auth(),
            None,
            None,
        )
        .unwrap();
        for name in ["edge-1", "127.0.0.1"] {
            ee.verify_is_valid_for_subject_name(&ServerName::try_from(name).unwrap())
                .unwrap();
        }
        assert!(ee
            .verify_is_valid_for_subject_name(&ServerName::try_from("other").unwrap())
            .is_err());
    }
}
