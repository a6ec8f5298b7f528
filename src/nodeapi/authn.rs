//! Authentication of node API requests: who a verified client certificate
//! names, the bearer token of a request, and the TokenReview that asks the
//! API server who a token is.
//!
//! A client certificate (already verified against
//! `authentication.x509.clientCAFile` by rustls) is the user of its subject
//! CN, in the groups of its O attributes, as the API server reads it. A
//! bearer token is whoever the API server's TokenReview says. Anything else
//! is anonymous, which picolet refuses (401).
//!
//! Pure: DER and JSON in, values out; the review is sent by `server.rs`.

use serde::Deserialize;

use crate::pki::der::{tag, DerError, Reader};

const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
const OID_ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// The user a client certificate names: CN as the name, each O as a group.
/// A certificate without a CN names nobody.
pub fn user_of_certificate(cert_der: &[u8]) -> Result<Option<User>, DerError> {
    let mut cert = Reader::new(cert_der).expect(tag::SEQUENCE)?;
    let mut tbs = cert.expect(tag::SEQUENCE)?;
    if tbs.peek_tag() == Some(tag::CONTEXT_0) {
        tbs.any()?; // version
    }
    tbs.expect(tag::INTEGER)?; // serialNumber
    tbs.expect(tag::SEQUENCE)?; // signature
    tbs.expect(tag::SEQUENCE)?; // issuer
    tbs.expect(tag::SEQUENCE)?; // validity
    let mut subject = tbs.expect(tag::SEQUENCE)?;
    let mut user = User::default();
    while !subject.is_empty() {
        let mut rdn = subject.expect(tag::SET)?;
        while !rdn.is_empty() {
            let mut attr = rdn.expect(tag::SEQUENCE)?;
            let oid = attr.expect(tag::OID)?;
            let (_, value) = attr.any()?;
            let value = String::from_utf8_lossy(value.bytes()).into_owned();
            match oid.bytes() {
                OID_COMMON_NAME => user.name = value,
                OID_ORGANIZATION => user.groups.push(value),
                _ => {}
            }
        }
    }
    Ok((!user.name.is_empty()).then_some(user))
}

/// The token of an `Authorization: Bearer <token>` header value.
pub fn bearer_token(authorization: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(authorization).ok()?;
    let (scheme, token) = s.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The body of a TokenReview of `token`.
pub fn review_body(token: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    })
}

/// The API server's answer: the user, or `None` when not authenticated.
pub fn decode_review(body: &[u8]) -> Result<Option<User>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Review {
        #[serde(default)]
        status: Status,
    }
    #[derive(Deserialize, Default)]
    struct Status {
        #[serde(default)]
        authenticated: bool,
        #[serde(default)]
        user: ReviewUser,
    }
    #[derive(Deserialize, Default)]
    struct ReviewUser {
        #[serde(default)]
        username: String,
        #[serde(default)]
        uid: String,
        #[serde(default)]
        groups: Vec<String>,
    }
    let r: Review = serde_json::from_slice(body)?;
    let u = r.status.user;
    Ok(
        (r.status.authenticated && !u.username.is_empty()).then_some(User {
            name: u.username,
            uid: u.uid,
            groups: u.groups,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::der;

    fn name(attrs: &[(&[u64], &str)]) -> Vec<u8> {
        let rdns: Vec<Vec<u8>> = attrs
            .iter()
            .map(|(oid, v)| {
                der::tlv(
                    tag::SET,
                    &der::sequence(&[&der::oid(oid), &der::tlv(tag::UTF8_STRING, v.as_bytes())]),
                )
            })
            .collect();
        let parts: Vec<&[u8]> = rdns.iter().map(Vec::as_slice).collect();
        der::sequence(&parts)
    }

    fn certificate(subject: &[u8]) -> Vec<u8> {
        let alg = der::sequence(&[&der::oid(&[1, 2, 840, 10045, 4, 3, 2])]);
        let tbs = der::sequence(&[
            &der::tlv(tag::CONTEXT_0, &der::small_uint(2)),
            &der::small_uint(7),
            &alg,
            &name(&[(&[2, 5, 4, 3], "ca")]),
            &der::sequence(&[]),
            subject,
        ]);
        der::sequence(&[&tbs, &alg, &der::bit_string(&[1, 2, 3])])
    }

    #[test]
    fn a_certificate_names_its_cn_as_user_and_its_os_as_groups() {
        let subject = name(&[
            (&[2, 5, 4, 10], "system:masters"),
            (&[2, 5, 4, 10], "ops"),
            (&[2, 5, 4, 3], "kube-apiserver-kubelet-client"),
        ]);
        let user = user_of_certificate(&certificate(&subject))
            .unwrap()
            .unwrap();
        assert_eq!(user.name, "kube-apiserver-kubelet-client");
        assert_eq!(user.groups, ["system:masters", "ops"]);
    }

    #[test]
    fn a_certificate_without_a_cn_names_nobody_and_garbage_is_an_error() {
        let subject = name(&[(&[2, 5, 4, 10], "ops")]);
        assert_eq!(user_of_certificate(&certificate(&subject)).unwrap(), None);
        assert!(user_of_certificate(b"\x30\x05junk").is_err());
    }

    #[test]
    fn only_a_bearer_authorization_carries_a_token() {
        assert_eq!(bearer_token(b"Bearer abc.def"), Some("abc.def"));
        assert_eq!(bearer_token(b"bearer  abc "), Some("abc"));
        assert_eq!(bearer_token(b"Basic dXNlcjpwdw=="), None);
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"Bearer"), None);
    }

    #[test]
    fn a_token_review_answer_gives_the_user_only_when_authenticated() {
        let ok = br#"{"status":{"authenticated":true,"user":{"username":"system:serviceaccount:default:x","uid":"9","groups":["system:serviceaccounts"]}}}"#;
        let u = decode_review(ok).unwrap().unwrap();
        assert_eq!(u.name, "system:serviceaccount:default:x");
        assert_eq!(u.groups, ["system:serviceaccounts"]);
        assert_eq!(
            decode_review(br#"{"status":{"authenticated":false,"error":"x"}}"#).unwrap(),
            None
        );
        assert_eq!(decode_review(br#"{"status":{}}"#).unwrap(), None);
        assert_eq!(review_body("t")["spec"]["token"], "t");
    }
}
