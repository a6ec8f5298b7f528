//! The node's heartbeat Lease in `kube-node-lease`, as kubelet keeps it.
//!
//! A Lease named after the node, held by the node, renewed every quarter of
//! `nodeLeaseDurationSeconds` (kubelet's renew interval), and owned by the
//! Node so that it goes when the Node goes. Pure: the caller does the
//! requests and passes the time in.
//!
//! This module must not know the transport or the agent.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};

/// The namespace of node heartbeat Leases.
pub const NAMESPACE: &str = "kube-node-lease";

/// kubelet renews at a quarter of the lease duration.
pub fn renew_interval(lease_duration_seconds: u32) -> Duration {
    Duration::from_millis(u64::from(lease_duration_seconds) * 1000 / 4)
}

/// After a failed renewal kubelet retries sooner: 200 ms doubling, capped
/// at 7 s, and never past the renew interval.
pub fn retry_after(failures: u32, lease_duration_seconds: u32) -> Duration {
    let step = Duration::from_millis(200).saturating_mul(1 << failures.min(8));
    step.min(Duration::from_secs(7))
        .min(renew_interval(lease_duration_seconds))
}

/// The Lease as it should be after a renewal at `now`. `existing` is the
/// Lease read from the API (its resourceVersion makes the update an
/// optimistic-concurrency write); `node_uid` sets the owner reference once
/// the Node is known.
pub fn renewed(
    existing: Option<&Lease>,
    node_name: &str,
    node_uid: Option<&str>,
    lease_duration_seconds: u32,
    now: MicroTime,
) -> Lease {
    let mut lease = existing.cloned().unwrap_or_else(|| Lease {
        metadata: ObjectMeta {
            name: Some(node_name.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            ..ObjectMeta::default()
        },
        spec: None,
    });
    if let Some(uid) = node_uid {
        let owned = lease
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|refs| refs.iter().any(|r| r.uid == uid));
        if !owned {
            lease.metadata.owner_references = Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node_name.to_string(),
                uid: uid.to_string(),
                ..OwnerReference::default()
            }]);
        }
    }
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(node_name.to_string());
    spec.lease_duration_seconds = Some(lease_duration_seconds as i32);
    spec.renew_time = Some(now);
    lease
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> MicroTime {
        MicroTime(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn the_lease_is_renewed_every_quarter_of_its_duration() {
        assert_eq!(renew_interval(40), Duration::from_secs(10));
        assert_eq!(renew_interval(10), Duration::from_millis(2500));
    }

    #[test]
    fn a_failed_renewal_is_retried_sooner_and_capped() {
        assert_eq!(retry_after(0, 40), Duration::from_millis(200));
        assert_eq!(retry_after(1, 40), Duration::from_millis(400));
        assert_eq!(retry_after(20, 40), Duration::from_secs(7));
        assert_eq!(retry_after(20, 8), Duration::from_secs(2));
    }

    #[test]
    fn a_new_lease_is_held_by_the_node_and_owned_by_it() {
        let l = renewed(None, "pi-1", Some("uid-1"), 40, at(10));
        assert_eq!(l.metadata.name.as_deref(), Some("pi-1"));
        assert_eq!(l.metadata.namespace.as_deref(), Some(NAMESPACE));
        let spec = l.spec.as_ref().unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("pi-1"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert_eq!(spec.renew_time, Some(at(10)));
        let owner = &l.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Node", "uid-1"));
    }

    #[test]
    fn a_renewal_keeps_the_resource_version_and_moves_only_the_renew_time() {
        let mut existing = renewed(None, "pi-1", Some("uid-1"), 40, at(10));
        existing.metadata.resource_version = Some("77".into());
        let l = renewed(Some(&existing), "pi-1", None, 40, at(20));
        assert_eq!(l.metadata.resource_version.as_deref(), Some("77"));
        assert_eq!(l.spec.as_ref().unwrap().renew_time, Some(at(20)));
        assert_eq!(
            l.metadata.owner_references,
            existing.metadata.owner_references
        );
    }
}
