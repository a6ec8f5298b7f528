//! Pure: the API server's protobuf encoding
//! (`application/vnd.kubernetes.protobuf`), the parts every partial reader
//! shares: the envelope, `metav1.ObjectMeta` as far as the node reads it,
//! `metav1.Time` and `metav1.Status`.
//!
//! picolet asks for protobuf only where the bytes on a metered uplink pay
//! for it: the Lease renewal's answer (`presence::lease_proto`) and the
//! watch of the node's own Node (`listwatch::watch_proto`,
//! `presence::node_proto`); everything else is JSON, decoded by the one
//! serde decoder per type. A non-streaming answer is the four bytes
//! `k8s\0`, then a `runtime.Unknown` whose `raw` is the object. The
//! messages here name only the fields read, with their numbers from
//! Kubernetes' `generated.proto`; prost skips the others, so an object's
//! `managedFields` and status images cost nothing to decode.
//!
//! Must not know: requests, connections, which resource is read.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Status};
use k8s_openapi::jiff::Timestamp;
use prost::Message;

/// The media type of the API server's protobuf.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// What a watch that reads protobuf asks for: protobuf, or JSON from a
/// server that cannot encode the type in protobuf (a custom resource, an
/// aggregated API); the answer's `Content-Type` says which came.
pub const PROTOBUF_OR_JSON: &str = "application/vnd.kubernetes.protobuf, application/json";

/// The envelope's first bytes.
const MAGIC: &[u8] = b"k8s\0";

/// Why bytes are not the protobuf object they should be.
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    #[error("not the API server's protobuf (no k8s envelope)")]
    NoEnvelope,
    #[error("{0}")]
    Decode(#[from] prost::DecodeError),
}

/// Whether a `Content-Type` names the API server's protobuf.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case(PROTOBUF))
}

#[derive(Clone, PartialEq, prost::Message)]
struct Unknown {
    #[prost(bytes = "vec", optional, tag = "2")]
    raw: Option<Vec<u8>>,
}

/// The object inside the envelope of `body`.
pub fn unwrap(body: &[u8]) -> Result<Vec<u8>, ProtobufError> {
    let rest = body.strip_prefix(MAGIC).ok_or(ProtobufError::NoEnvelope)?;
    Ok(Unknown::decode(rest)?.raw.unwrap_or_default())
}

/// `metav1.Time` and `metav1.MicroTime`: seconds and nanoseconds.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Time {
    #[prost(int64, optional, tag = "1")]
    pub seconds: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    pub nanos: Option<i32>,
}

impl Time {
    /// The instant; `None` when out of range.
    pub fn timestamp(&self) -> Option<Timestamp> {
        Timestamp::new(self.seconds.unwrap_or(0), self.nanos.unwrap_or(0)).ok()
    }
}

/// `metav1.OwnerReference`: what names the owner.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Owner {
    #[prost(string, optional, tag = "1")]
    pub kind: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub uid: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub api_version: Option<String>,
}

/// `metav1.ObjectMeta`: identity, version, labels, annotations and owners
/// (not `managedFields`, not timestamps: nothing the node reads).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Meta {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub namespace: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub resource_version: Option<String>,
    #[prost(btree_map = "string, string", tag = "11")]
    pub labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    pub annotations: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "13")]
    pub owner_references: Vec<Owner>,
}

impl Meta {
    /// As k8s-openapi has it (an empty map or list is absent, as in JSON).
    pub fn into_object_meta(self) -> ObjectMeta {
        let owners: Vec<OwnerReference> = self
            .owner_references
            .into_iter()
            .map(|o| OwnerReference {
                api_version: o.api_version.unwrap_or_default(),
                kind: o.kind.unwrap_or_default(),
                name: o.name.unwrap_or_default(),
                uid: o.uid.unwrap_or_default(),
                ..Default::default()
            })
            .collect();
        ObjectMeta {
            name: self.name,
            namespace: self.namespace,
            uid: self.uid,
            resource_version: self.resource_version,
            labels: (!self.labels.is_empty()).then_some(self.labels),
            annotations: (!self.annotations.is_empty()).then_some(self.annotations),
            owner_references: (!owners.is_empty()).then_some(owners),
            ..Default::default()
        }
    }
}

/// Any top-level object, read for its metadata alone (field 1 in every
/// Kubernetes type).
#[derive(Clone, PartialEq, prost::Message)]
pub struct MetaOnly {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Meta>,
}

/// The metadata of the enveloped object in `object`, whatever its type: a
/// watch bookmark, or a write's answer asked as `PartialObjectMetadata`
/// ([`METADATA_ONLY`](super::request::METADATA_ONLY)).
pub fn metadata(object: &[u8]) -> Result<Meta, ProtobufError> {
    let m = MetaOnly::decode(unwrap(object)?.as_slice())?;
    Ok(m.metadata.unwrap_or_default())
}

/// `metav1.Status`: what an error says.
#[derive(Clone, PartialEq, prost::Message)]
struct ProtoStatus {
    #[prost(string, optional, tag = "2")]
    status: Option<String>,
    #[prost(string, optional, tag = "3")]
    message: Option<String>,
    #[prost(string, optional, tag = "4")]
    reason: Option<String>,
    #[prost(int32, optional, tag = "6")]
    code: Option<i32>,
}

/// The `metav1.Status` in `object` (an enveloped protobuf object).
pub fn status(object: &[u8]) -> Result<Status, ProtobufError> {
    let s = ProtoStatus::decode(unwrap(object)?.as_slice())?;
    Ok(Status {
        status: s.status,
        message: s.message,
        reason: s.reason,
        code: s.code,
        ..Default::default()
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `object` in the envelope, as the API server writes it.
    pub(crate) fn enveloped(object: &impl Message) -> Vec<u8> {
        let unknown = Unknown {
            raw: Some(object.encode_to_vec()),
        };
        let mut body = MAGIC.to_vec();
        body.extend(unknown.encode_to_vec());
        body
    }

    /// A `metav1.Status` as the API server encodes it.
    pub(crate) fn status_bytes(code: i32, reason: &str, message: &str) -> Vec<u8> {
        enveloped(&ProtoStatus {
            status: Some("Failure".into()),
            message: Some(message.into()),
            reason: Some(reason.into()),
            code: Some(code),
        })
    }

    #[test]
    fn the_protobuf_media_type_is_told_from_json_with_or_without_parameters() {
        assert!(is_protobuf("application/vnd.kubernetes.protobuf"));
        assert!(is_protobuf(
            "application/vnd.kubernetes.protobuf;stream=watch"
        ));
        assert!(!is_protobuf("application/json"));
        assert!(!is_protobuf(""));
    }

    #[test]
    fn json_is_not_taken_for_an_enveloped_object() {
        assert!(matches!(
            unwrap(br#"{"kind":"Lease"}"#),
            Err(ProtobufError::NoEnvelope)
        ));
        assert!(unwrap(b"k8s\0\x12\x05ab").is_err());
    }

    #[test]
    fn a_protobuf_status_reads_as_its_code_reason_and_message() {
        let body = status_bytes(410, "Expired", "too old resource version: 1 (5)");
        let s = status(&body).unwrap();
        assert_eq!(s.code, Some(410));
        assert_eq!(s.reason.as_deref(), Some("Expired"));
        assert_eq!(
            s.message.as_deref(),
            Some("too old resource version: 1 (5)")
        );
    }

    #[test]
    fn any_object_reads_as_its_metadata_and_json_is_refused() {
        let answer = enveloped(&MetaOnly {
            metadata: Some(Meta {
                name: Some("pi".into()),
                resource_version: Some("4711".into()),
                ..Default::default()
            }),
        });
        let m = metadata(&answer).unwrap();
        assert_eq!(m.resource_version.as_deref(), Some("4711"));
        assert!(matches!(
            metadata(br#"{"kind":"Status"}"#),
            Err(ProtobufError::NoEnvelope)
        ));
    }

    #[test]
    fn empty_labels_and_owners_read_as_absent_as_they_do_in_json() {
        let m = Meta {
            name: Some("pi".into()),
            ..Default::default()
        }
        .into_object_meta();
        assert_eq!(m.labels, None);
        assert_eq!(m.annotations, None);
        assert_eq!(m.owner_references, None);
    }
}
