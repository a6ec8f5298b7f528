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
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use prost::Message;

use crate::apiserver::client::protobuf::{self, Meta, ProtobufError, Time};

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoLease {
    #[prost(message, optional, tag = "1")]
    metadata: Option<Meta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<ProtoSpec>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoSpec {
    #[prost(string, optional, tag = "1")]
    holder_identity: Option<String>,
    #[prost(int32, optional, tag = "2")]
    lease_duration_seconds: Option<i32>,
    #[prost(message, optional, tag = "4")]
    renew_time: Option<Time>,
}

/// The Lease in `body` (the API server's protobuf answer), with the fields
/// a renewal reads; the others are left unset.
pub fn decode(body: &[u8]) -> Result<Lease, ProtobufError> {
    let p = ProtoLease::decode(protobuf::unwrap(body)?.as_slice())?;
    Ok(Lease {
        metadata: p.metadata.unwrap_or_default().into_object_meta(),
        spec: p.spec.map(|s| LeaseSpec {
            holder_identity: s.holder_identity,
            lease_duration_seconds: s.lease_duration_seconds,
            renew_time: s.renew_time.and_then(|t| t.timestamp()).map(MicroTime),
            ..Default::default()
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::client::protobuf::tests::enveloped;
    use crate::apiserver::client::protobuf::Owner;
    use k8s_openapi::jiff::Timestamp;

    #[test]
    fn a_protobuf_lease_reads_as_the_lease_a_renewal_needs() {
        let body = enveloped(&ProtoLease {
            metadata: Some(Meta {
                name: Some("pi".into()),
                namespace: Some("kube-node-lease".into()),
                resource_version: Some("77".into()),
                owner_references: vec![Owner {
                    kind: Some("Node".into()),
                    name: Some("pi".into()),
                    uid: Some("u".into()),
                    api_version: Some("v1".into()),
                }],
                ..Default::default()
            }),
            spec: Some(ProtoSpec {
                holder_identity: Some("pi".into()),
                lease_duration_seconds: Some(40),
                renew_time: Some(Time {
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
            Err(ProtobufError::NoEnvelope)
        ));
    }
}
