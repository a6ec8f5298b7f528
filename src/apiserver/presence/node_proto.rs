//! Pure: the node's own Node as its watch delivers it in protobuf, read
//! into the [`NodeView`] the JSON decoder would give: metadata (name, UID,
//! resourceVersion, labels, annotations), spec (pod CIDRs, provider ID,
//! unschedulable, taints), the conditions and `nodeInfo.bootID`.
//!
//! The Node watch asks for protobuf (docs/fleet.md has the bytes): after
//! each status report the whole Node comes back on it, and each minute a
//! bookmark. The messages name only what a [`NodeView`] keeps, with their
//! numbers from `k8s.io/api/core/v1`'s `generated.proto`; the status
//! images, addresses, capacity and `managedFields` are skipped by prost,
//! never decoded. Where Go writes a field that JSON omits when empty (a
//! `false`, an empty string), the view has it absent, as from JSON.
//!
//! Must not know: the watch, the cache, admission.

use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use prost::Message;

use super::node_object::{NodeView, NodeViewInfo, NodeViewStatus};
use crate::apiserver::client::protobuf::{self, Meta, ProtobufError};

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoNode {
    #[prost(message, optional, tag = "1")]
    metadata: Option<Meta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<ProtoSpec>,
    #[prost(message, optional, tag = "3")]
    status: Option<ProtoStatus>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoSpec {
    #[prost(string, optional, tag = "1")]
    pod_cidr: Option<String>,
    #[prost(string, optional, tag = "3")]
    provider_id: Option<String>,
    #[prost(bool, optional, tag = "4")]
    unschedulable: Option<bool>,
    #[prost(message, repeated, tag = "5")]
    taints: Vec<ProtoTaint>,
    #[prost(string, repeated, tag = "7")]
    pod_cidrs: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoTaint {
    #[prost(string, optional, tag = "1")]
    key: Option<String>,
    #[prost(string, optional, tag = "2")]
    value: Option<String>,
    #[prost(string, optional, tag = "3")]
    effect: Option<String>,
    #[prost(message, optional, tag = "4")]
    time_added: Option<protobuf::Time>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoStatus {
    #[prost(message, repeated, tag = "4")]
    conditions: Vec<ProtoCondition>,
    #[prost(message, optional, tag = "7")]
    node_info: Option<ProtoInfo>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoCondition {
    #[prost(string, optional, tag = "1")]
    type_: Option<String>,
    #[prost(string, optional, tag = "2")]
    status: Option<String>,
    #[prost(message, optional, tag = "3")]
    last_heartbeat_time: Option<protobuf::Time>,
    #[prost(message, optional, tag = "4")]
    last_transition_time: Option<protobuf::Time>,
    #[prost(string, optional, tag = "5")]
    reason: Option<String>,
    #[prost(string, optional, tag = "6")]
    message: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoInfo {
    #[prost(string, optional, tag = "3")]
    boot_id: Option<String>,
}

/// A string JSON would omit when empty.
fn set(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

/// A time; Go writes a zero `metav1.Time` as `null` in JSON.
fn time(t: Option<protobuf::Time>) -> Option<Time> {
    t.filter(|t| t.seconds.unwrap_or(0) != 0 || t.nanos.unwrap_or(0) != 0)
        .and_then(|t| t.timestamp())
        .map(Time)
}

/// The Node in `object` (enveloped, as a watch event carries it).
pub fn decode(object: &[u8]) -> Result<NodeView, ProtobufError> {
    let n = ProtoNode::decode(protobuf::unwrap(object)?.as_slice())?;
    let spec = n.spec.map(|s| {
        let taints: Vec<Taint> = s
            .taints
            .into_iter()
            .map(|t| Taint {
                key: t.key.unwrap_or_default(),
                value: set(t.value),
                effect: t.effect.unwrap_or_default(),
                time_added: time(t.time_added),
            })
            .collect();
        NodeSpec {
            pod_cidr: set(s.pod_cidr),
            pod_cidrs: (!s.pod_cidrs.is_empty()).then_some(s.pod_cidrs),
            provider_id: set(s.provider_id),
            unschedulable: s.unschedulable.filter(|u| *u),
            taints: (!taints.is_empty()).then_some(taints),
            ..Default::default()
        }
    });
    let status = n.status.map(|s| {
        let conditions: Vec<NodeCondition> = s
            .conditions
            .into_iter()
            .map(|c| NodeCondition {
                type_: c.type_.unwrap_or_default(),
                status: c.status.unwrap_or_default(),
                last_heartbeat_time: time(c.last_heartbeat_time),
                last_transition_time: time(c.last_transition_time),
                reason: set(c.reason),
                message: set(c.message),
            })
            .collect();
        NodeViewStatus {
            conditions: (!conditions.is_empty()).then_some(conditions),
            node_info: s.node_info.map(|i| NodeViewInfo {
                boot_id: i.boot_id.unwrap_or_default(),
            }),
        }
    });
    Ok(NodeView {
        metadata: n.metadata.unwrap_or_default().into_object_meta(),
        spec,
        status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::client::protobuf::tests::enveloped;
    use crate::apiserver::presence::node_object::WatchedNode;

    fn t(seconds: i64) -> Option<protobuf::Time> {
        Some(protobuf::Time {
            seconds: Some(seconds),
            nanos: Some(0),
        })
    }

    #[test]
    fn a_protobuf_node_reads_as_the_view_its_json_gives() {
        let node = ProtoNode {
            metadata: Some(Meta {
                name: Some("pi-1".into()),
                uid: Some("u-1".into()),
                resource_version: Some("812".into()),
                labels: [("zone".to_string(), "a".to_string())].into(),
                ..Default::default()
            }),
            spec: Some(ProtoSpec {
                pod_cidr: Some(String::new()),
                provider_id: None,
                unschedulable: Some(true),
                taints: vec![ProtoTaint {
                    key: Some("dedicated".into()),
                    value: Some("edge".into()),
                    effect: Some("NoSchedule".into()),
                    time_added: None,
                }],
                pod_cidrs: vec![],
            }),
            status: Some(ProtoStatus {
                conditions: vec![ProtoCondition {
                    type_: Some("Ready".into()),
                    status: Some("Unknown".into()),
                    last_heartbeat_time: t(1_700_000_000),
                    last_transition_time: t(1_700_000_040),
                    reason: Some("NodeStatusUnknown".into()),
                    message: Some("Kubelet stopped posting node status.".into()),
                }],
                node_info: Some(ProtoInfo {
                    boot_id: Some("b-1".into()),
                }),
            }),
        };
        let json = serde_json::json!({
            "metadata": {"name": "pi-1", "uid": "u-1", "resourceVersion": "812",
                         "labels": {"zone": "a"}},
            "spec": {"unschedulable": true,
                     "taints": [{"key": "dedicated", "value": "edge", "effect": "NoSchedule"}]},
            "status": {
                "conditions": [{"type": "Ready", "status": "Unknown",
                    "lastHeartbeatTime": "2023-11-14T22:13:20Z",
                    "lastTransitionTime": "2023-11-14T22:14:00Z",
                    "reason": "NodeStatusUnknown",
                    "message": "Kubelet stopped posting node status."}],
                "nodeInfo": {"bootID": "b-1"}
            }
        });
        let from_json: NodeView = serde_json::from_value(json).unwrap();
        let view = decode(&enveloped(&node)).unwrap();
        assert_eq!(view, from_json);
        let w = WatchedNode::of(&view);
        assert!(w.unschedulable);
        assert_eq!(w.conditions, vec![("Ready".into(), "Unknown".into())]);
    }

    #[test]
    fn a_schedulable_node_without_taints_has_them_absent_as_in_json() {
        let node = ProtoNode {
            metadata: Some(Meta {
                name: Some("pi-1".into()),
                ..Default::default()
            }),
            spec: Some(ProtoSpec {
                unschedulable: Some(false),
                ..Default::default()
            }),
            status: None,
        };
        let view = decode(&enveloped(&node)).unwrap();
        let spec = view.spec.unwrap();
        assert_eq!(spec.unschedulable, None);
        assert_eq!(spec.taints, None);
    }

    #[test]
    fn json_is_not_taken_for_a_protobuf_node() {
        assert!(matches!(
            decode(br#"{"kind":"Node"}"#),
            Err(ProtobufError::NoEnvelope)
        ));
    }
}
