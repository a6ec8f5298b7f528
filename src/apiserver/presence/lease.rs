//! Pure: the node's heartbeat Lease (`coordination.k8s.io/v1`, namespace
//! `kube-node-lease`, named after the node), as kubelet keeps it.
//!
//! The Lease is owned by the Node (an owner reference, so it goes with the
//! Node), held by the node's name, and renewed every
//! `nodeLeaseDurationSeconds / 4` (kubelet's renew interval fraction). A
//! failed renewal is retried after 100 ms doubling to 7 s (kubelet's lease
//! controller), never waiting longer than the renew interval.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;

/// The namespace of node Leases.
pub const NAMESPACE: &str = "kube-node-lease";
/// kubelet's default `nodeLeaseDurationSeconds`.
pub const DEFAULT_DURATION_SECONDS: i32 = 40;
const RETRY_INITIAL: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(7);

fn owner(node_name: &str, node_uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node_name.into(),
        uid: node_uid.into(),
        ..Default::default()
    }
}

/// A new Lease for the node (to create). `node_uid` is the Node object's
/// UID once it is known (then the Lease is owned by the Node).
pub fn lease(
    node_name: &str,
    node_uid: Option<&str>,
    duration_seconds: i32,
    now: Timestamp,
) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(node_name.into()),
            namespace: Some(NAMESPACE.into()),
            owner_references: node_uid.map(|uid| vec![owner(node_name, uid)]),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node_name.into()),
            lease_duration_seconds: Some(duration_seconds),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}

/// `current` (as last read from the API server, with its resourceVersion
/// for an optimistic update) renewed at `now`: holder, duration and renew
/// time set, the Node's owner reference added when missing.
pub fn renewed(
    current: &Lease,
    node_name: &str,
    node_uid: Option<&str>,
    duration_seconds: i32,
    now: Timestamp,
) -> Lease {
    let mut l = current.clone();
    let spec = l.spec.get_or_insert_with(Default::default);
    spec.holder_identity = Some(node_name.into());
    spec.lease_duration_seconds = Some(duration_seconds);
    spec.renew_time = Some(MicroTime(now));
    if let Some(uid) = node_uid {
        let refs = l.metadata.owner_references.get_or_insert_with(Vec::new);
        if !refs.iter().any(|r| r.kind == "Node" && r.uid == uid) {
            refs.push(owner(node_name, uid));
        }
    }
    l
}

/// Whether `current` is held as this node renews it: its holder and
/// duration, and owned by the Node once its UID is known. Then a renewal
/// moves only `spec.renewTime` ([`renewal_patch`]); otherwise the whole
/// Lease is written ([`renewed`]).
pub fn held_as(
    current: &Lease,
    node_name: &str,
    node_uid: Option<&str>,
    duration_seconds: i32,
) -> bool {
    let Some(spec) = &current.spec else {
        return false;
    };
    let owned = node_uid.is_none_or(|uid| {
        current
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.kind == "Node" && r.uid == uid)
    });
    spec.holder_identity.as_deref() == Some(node_name)
        && spec.lease_duration_seconds == Some(duration_seconds)
        && owned
}

/// A renewal as a JSON merge patch: `spec.renewTime` alone, a twentieth of
/// the bytes of the whole Lease. It carries no `resourceVersion`
/// precondition (36 bytes of each of six renewals a minute): the patch
/// touches nothing but the renew time, and the answer is checked with
/// [`held_as`] before the next renewal, so a Lease someone else took or
/// changed is written whole again one renewal later, as kubelet's update
/// does after its conflict.
///
/// With `trim_managed_fields`, the patch also sets `managedFields` to one
/// empty entry, which the API server takes as "clear them": the Lease is
/// left with none, and the patches that follow add none (the API server
/// starts no managedFields of its own for an object that has none). The
/// Lease comes back whole in every renewal's answer, six times a minute,
/// and the entry a create or update leaves (manager, time, holder,
/// duration, the owner reference keyed by the Node's UID) is a third of
/// it; nothing reads a node Lease's managedFields (they serve server-side
/// apply's conflicts, and nobody applies node Leases). picolet sends it on
/// the first patch after each whole write. (A deliberate difference from
/// kubelet, whose Lease keeps the entry; README, fleets.)
pub fn renewal_patch(now: Timestamp, trim_managed_fields: bool) -> Vec<u8> {
    let mut patch = serde_json::json!({"spec": {"renewTime": MicroTime(now)}});
    if trim_managed_fields {
        patch["metadata"] = serde_json::json!({"managedFields": [{}]});
    }
    serde_json::to_vec(&patch).unwrap_or_default()
}

/// How often the Lease is renewed: a quarter of its duration.
pub fn renew_interval(duration_seconds: i32) -> Duration {
    Duration::from_millis(u64::from(duration_seconds.max(1).unsigned_abs()) * 1000 / 4)
}

/// The wait after a renewal, as kubelet's lease controller waits
/// (`wait.JitterUntil` with a jitter factor of 0.04, sliding): the renew
/// interval plus up to 4 % of it, `random` in `[0, 1)` choosing how much.
/// Nodes started together drift apart instead of renewing in step.
pub fn renew_wait(duration_seconds: i32, random: f64) -> Duration {
    renew_interval(duration_seconds).mul_f64(1.0 + 0.04 * random.clamp(0.0, 1.0))
}

/// The most a renewal waits once the link answers again after an outage:
/// a quarter of the watches' [`crate::apiserver::client::link::RECOVERY_JITTER`],
/// so that a returning node's first request is its renewal, which is what
/// the node lifecycle controller waits for, and a fleet returning at once
/// still does not renew in lock-step.
pub const RECOVERY_JITTER: Duration = Duration::from_millis(250);

/// Whether a renewal patch answered `code` is sent again as it was (the
/// Lease we knew kept): the answer says the API server could not take the
/// write now (429, a 5xx: overload, a timeout, etcd), not that the Lease
/// differs. Any other failure reads the Lease first, as kubelet's lease
/// controller does after a failed update.
pub fn patch_again_after(code: u16) -> bool {
    code == 429 || code >= 500
}

/// The wait before retry number `failures` (1 after the first failure) of
/// a renewal.
pub fn retry_delay(failures: u32, duration_seconds: i32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    (RETRY_INITIAL * 2u32.pow(exp))
        .min(RETRY_MAX)
        .min(renew_interval(duration_seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    #[test]
    fn a_new_lease_is_held_by_the_node_and_owned_by_it_once_its_uid_is_known() {
        let l = lease("pi", Some("node-uid"), 40, t(0));
        assert_eq!(l.metadata.namespace.as_deref(), Some("kube-node-lease"));
        assert_eq!(l.metadata.name.as_deref(), Some("pi"));
        let spec = l.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("pi"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert_eq!(spec.renew_time, Some(MicroTime(t(0))));
        let o = &l.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (o.kind.as_str(), o.name.as_str(), o.uid.as_str()),
            ("Node", "pi", "node-uid")
        );
        assert!(lease("pi", None, 40, t(0))
            .metadata
            .owner_references
            .is_none());
    }

    #[test]
    fn renewing_keeps_the_version_and_moves_the_renew_time() {
        let mut current = lease("pi", None, 40, t(0));
        current.metadata.resource_version = Some("77".into());
        let r = renewed(&current, "pi", Some("u"), 40, t(10));
        assert_eq!(r.metadata.resource_version.as_deref(), Some("77"));
        assert_eq!(r.spec.as_ref().unwrap().renew_time, Some(MicroTime(t(10))));
        assert_eq!(r.metadata.owner_references.as_ref().unwrap().len(), 1);
        let again = renewed(&r, "pi", Some("u"), 40, t(20));
        assert_eq!(again.metadata.owner_references.unwrap().len(), 1);
    }

    #[test]
    fn a_lease_held_as_the_node_renews_it_is_renewed_by_a_patch_of_its_renew_time() {
        let mut l = lease("pi", Some("u"), 40, t(0));
        assert!(held_as(&l, "pi", Some("u"), 40));
        assert!(!held_as(&l, "pi", Some("u"), 60));
        assert!(!held_as(&l, "other", Some("u"), 40));
        assert!(!held_as(&l, "pi", Some("new-uid"), 40));
        l.metadata.owner_references = None;
        assert!(held_as(&l, "pi", None, 40));
        let patch: serde_json::Value =
            serde_json::from_slice(&renewal_patch(t(10), false)).unwrap();
        assert_eq!(
            patch,
            serde_json::json!({"spec": {"renewTime": "2023-11-14T22:13:30.000000Z"}})
        );
    }

    #[test]
    fn the_first_patch_after_a_whole_write_clears_the_managed_fields_with_one_empty_entry() {
        let patch: serde_json::Value = serde_json::from_slice(&renewal_patch(t(10), true)).unwrap();
        assert_eq!(
            patch,
            serde_json::json!({
                "metadata": {"managedFields": [{}]},
                "spec": {"renewTime": "2023-11-14T22:13:30.000000Z"},
            })
        );
    }

    #[test]
    fn the_lease_is_renewed_every_quarter_of_its_duration() {
        assert_eq!(renew_interval(40), Duration::from_secs(10));
        assert_eq!(renew_interval(10), Duration::from_millis(2500));
        // kubelet's jitter: up to 4 % more, never less.
        assert_eq!(renew_wait(40, 0.0), Duration::from_secs(10));
        assert_eq!(renew_wait(40, 0.5), Duration::from_millis(10_200));
        assert!(renew_wait(40, 0.999) < Duration::from_millis(10_400));
    }

    #[test]
    fn a_renewal_the_api_server_could_not_take_is_sent_again_and_any_other_failure_reads_first() {
        for code in [429, 500, 503, 504] {
            assert!(patch_again_after(code), "{code}");
        }
        for code in [400, 401, 403, 404, 409, 422] {
            assert!(!patch_again_after(code), "{code}");
        }
    }

    #[test]
    fn failed_renewals_retry_from_100_ms_doubling_to_7_s() {
        let got: Vec<u128> = (1..=8).map(|n| retry_delay(n, 40).as_millis()).collect();
        assert_eq!(got, [100, 200, 400, 800, 1600, 3200, 6400, 7000]);
        assert_eq!(retry_delay(10, 4), Duration::from_secs(1));
    }
}
