//! Pure: a Lease as the API server answers it in protobuf
//! (`application/vnd.kubernetes.protobuf`), read for what a renewal needs:
//! its resourceVersion, holder, duration, renew time and owner references.
//!
//! The Lease renewal asks for protobuf because the answer to every renewal
//! is the whole Lease, managedFields included, and protobuf carries it in
//! fewer bytes than JSON (docs/fleet.md). The encoding is the API server's
//! envelope: the four bytes `k8s\0`, then a `runtime.Unknown` whose `raw`
//! is the `coordination.k8s.io/v1` Lease. The messages below name only the
//! fields read, with their numbers from Kubernetes' `generated.proto`;
//! prost skips the others.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use prost::Message;

/// What a renewal asks for: protobuf, which [`decode`] reads.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The envelope's first bytes.
const MAGIC: &[u8] = b"k8s\0";

#[derive(Clone, PartialEq, prost::Message)]
struct Unknown {
    #[prost(bytes = "vec", optional, tag = "2")]
    raw: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoLease {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ProtoMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<ProtoSpec>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoMeta {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "3")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "6")]
    resource_version: Option<String>,
    #[prost(message, repeated, tag = "13")]
    owner_references: Vec<ProtoOwner>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoOwner {
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(string, optional, tag = "3")]
    name: Option<String>,
    #[prost(string, optional, tag = "4")]
    uid: Option<String>,
    #[prost(string, optional, tag = "5")]
    api_version: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoSpec {
    #[prost(string, optional, tag = "1")]
    holder_identity: Option<String>,
    #[prost(int32, optional, tag = "2")]
    lease_duration_seconds: Option<i32>,
    #[prost(message, optional, tag = "4")]
    renew_time: Option<ProtoTime>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoTime {
    #[prost(int64, optional, tag = "1")]
    seconds: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    nanos: Option<i32>,
}

/// Why an answer is not a protobuf Lease.
#[derive(Debug, thiserror::Error)]
pub enum LeaseProtoError {
    #[error("the answer is not the API server's protobuf (no k8s envelope)")]
    NoEnvelope,
    #[error("decoding the protobuf Lease: {0}")]
    Decode(#[from] prost::DecodeError),
}

/// The Lease in `body` (the API server's protobuf answer), with the fields
/// a renewal reads; the others are left unset.
pub fn decode(body: &[u8]) -> Result<Lease, LeaseProtoError> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or(LeaseProtoError::NoEnvelope)?;
    let unknown = Unknown::decode(rest)?;
    let p = ProtoLease::decode(unknown.raw.unwrap_or_default().as_slice())?;
    let meta = p.metadata.unwrap_or_default();
    let owners: Vec<OwnerReference> = meta
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
    Ok(Lease {
        metadata: ObjectMeta {
            name: meta.name,
            namespace: meta.namespace,
            resource_version: meta.resource_version,
            owner_references: (!owners.is_empty()).then_some(owners),
            ..Default::default()
        },
        spec: p.spec.map(|s| LeaseSpec {
            holder_identity: s.holder_identity,
            lease_duration_seconds: s.lease_duration_seconds,
            renew_time: s.renew_time.and_then(|t| {
                Timestamp::new(t.seconds.unwrap_or(0), t.nanos.unwrap_or(0))
                    .ok()
                    .map(MicroTime)
            }),
            ..Default::default()
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(lease: &ProtoLease) -> Vec<u8> {
        let unknown = Unknown {
            raw: Some(lease.encode_to_vec()),
        };
        let mut body = MAGIC.to_vec();
        body.extend(unknown.encode_to_vec());
        body
    }

    #[test]
    fn a_protobuf_lease_reads_as_the_lease_a_renewal_needs() {
        let body = encoded(&ProtoLease {
            metadata: Some(ProtoMeta {
                name: Some("pi".into()),
                namespace: Some("kube-node-lease".into()),
                resource_version: Some("77".into()),
                owner_references: vec![ProtoOwner {
                    kind: Some("Node".into()),
                    name: Some("pi".into()),
                    uid: Some("u".into()),
                    api_version: Some("v1".into()),
                }],
            }),
            spec: Some(ProtoSpec {
                holder_identity: Some("pi".into()),
                lease_duration_seconds: Some(40),
                renew_time: Some(ProtoTime {
                    seconds: Some(1_700_000_000),
                    nanos: Some(5_000),
                }),
            }),
        });
        let l = decode(&body).unwrap();
        assert_eq!(l.metadata.resource_version.as_deref(), Some("77"));
        assert!(crate::apiserver::presence::lease::held_as(
            &l,
            "pi",
            Some("u"),
            40
        ));
        let renew = l.spec.unwrap().renew_time.unwrap().0;
        assert_eq!(renew, Timestamp::new(1_700_000_000, 5_000).unwrap());
    }

    #[test]
    fn json_is_not_taken_for_a_protobuf_lease() {
        assert!(matches!(
            decode(br#"{"kind":"Lease"}"#),
            Err(LeaseProtoError::NoEnvelope)
        ));
        assert!(decode(b"k8s\0\x12\x05ab").is_err());
    }
}
