//! Merging the sources' sets and admitting pods: which pods the node runs.
//!
//! [`merge`] is a pure function of the last set of every configured source,
//! whether each source is ready, the node as admission sees it, and the pods
//! already admitted. Its rules:
//! - a UID claimed by two sources belongs to the first in
//!   [`PodSource::ALL`] order; the other claim is rejected;
//! - admission is stable: a pod already admitted stays admitted, and a
//!   newcomer is admitted only if kubelet would admit it beside the pods
//!   admitted so far ([`crate::pod::admission::admit`]: `maxPods`,
//!   allocatable, node name, host ports, node selector and affinity, taints
//!   for API pods) and the host and runtime support what it asks for
//!   ([`crate::pod::host_support::admit`]); newcomers are considered in UID
//!   order, so the outcome does not depend on the order of files or events.
//!   An established pod is never displaced by a newcomer, and a refused
//!   pod stays refused (its phase is Failed, which is final);
//! - a source is ready once it delivered an authoritative set (see
//!   [`super::SourceUpdate::authoritative`]).
//!
//! The agent applies the result: a pod no longer desired is terminated, a
//! new one gets a worker, a refused one is logged and reported with phase
//! Failed and kubelet's reason and message.
//!
//! Pure: no I/O, no clock, no logging; must not know the agent or the
//! runtime.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::rc::Rc;

use k8s_openapi::api::core::v1::Pod;

use super::PodSource;
use crate::pod::accessors::{full_name, uid};
use crate::pod::admission::{self, NodeView};
use crate::pod::host_support::{self, HostSupport};

/// What the agent keeps of one configured source.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceState {
    /// The source's last set (empty before its first). Shared with the
    /// agent's entries of the pods it runs: one copy of each pod.
    pub pods: Vec<Rc<Pod>>,
    /// The source delivered an authoritative set at least once.
    pub ready: bool,
}

/// Why a pod was not admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// Admission refused it, with kubelet's reason and message.
    Refused(admission::Rejection),
    /// An earlier source already wants a pod with this UID.
    DuplicateUid { owner: PodSource },
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Refused(r) => write!(f, "{}: {}", r.reason, r.message),
            Rejection::DuplicateUid { owner } => {
                write!(f, "source {owner} already has a pod with this UID")
            }
        }
    }
}

/// A pod a source wants that the node does not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    pub uid: String,
    /// `<namespace>/<name>`, for the log line.
    pub name: String,
    pub source: PodSource,
    pub reason: Rejection,
}

/// The outcome of [`merge`].
#[derive(Debug, PartialEq)]
pub struct Merged<'a> {
    /// The pods the node should run, by UID, with the source that wants them.
    pub desired: BTreeMap<String, (PodSource, &'a Rc<Pod>)>,
    /// Pods a source wants that were not admitted.
    pub rejected: Vec<Rejected>,
    /// The sources that delivered an authoritative set.
    pub ready: BTreeSet<PodSource>,
}

/// May the runtime's leftovers of a pod from `origin` be removed when no
/// source wants the pod? Yes once that source is ready, or when it is not
/// configured at all (nothing will ever claim them). For a pod of unknown
/// origin (`None`), only when every configured source is ready.
pub fn may_remove(sources: &BTreeMap<PodSource, SourceState>, origin: Option<PodSource>) -> bool {
    match origin {
        Some(s) => sources.get(&s).is_none_or(|st| st.ready),
        None => sources.values().all(|st| st.ready),
    }
}

/// Merges the last set of every source and admits pods.
///
/// `sources` holds every configured source; `node` and `host` what
/// admission knows of the node (`node.max_pods` is `maxPods`); `admitted`
/// the UIDs of the pods the node already runs (not those being terminated);
/// `refused` the pods refused before, by UID, with why: as kubelet's, a
/// refusal is final (the pod is Failed), so they stay refused with the same
/// reason even if the node could take them now.
pub fn merge<'a>(
    sources: &'a BTreeMap<PodSource, SourceState>,
    node: &NodeView,
    host: &HostSupport,
    admitted: &BTreeSet<String>,
    refused: &BTreeMap<String, admission::Rejection>,
) -> Merged<'a> {
    let mut rejected = Vec::new();
    let mut claimed: BTreeMap<&'a str, (PodSource, &'a Rc<Pod>)> = BTreeMap::new();
    // BTreeMap iterates in PodSource order, which is ALL's precedence order.
    for (&source, state) in sources {
        for pod in &state.pods {
            let id = uid(pod);
            match claimed.get(id) {
                Some(&(owner, _)) => rejected.push(Rejected {
                    uid: id.to_string(),
                    name: full_name(pod),
                    source,
                    reason: Rejection::DuplicateUid { owner },
                }),
                None => {
                    claimed.insert(id, (source, pod));
                }
            }
        }
    }
    let mut desired: BTreeMap<String, (PodSource, &'a Rc<Pod>)> = BTreeMap::new();
    let mut newcomers = Vec::new();
    for (id, claim) in claimed {
        if admitted.contains(id) {
            desired.insert(id.to_string(), claim);
        } else {
            newcomers.push((id, claim));
        }
    }
    // `claimed` is a BTreeMap: newcomers are already in UID order.
    for (id, (source, pod)) in newcomers {
        let others: Vec<&Pod> = desired.values().map(|(_, p)| p.as_ref()).collect();
        let is_static = source != PodSource::Api;
        let verdict = match refused.get(id) {
            Some(before) => Err(before.clone()),
            None => admission::admit(pod, node, &others, is_static)
                .and_then(|()| host_support::admit(pod, host)),
        };
        match verdict {
            Ok(()) => {
                desired.insert(id.to_string(), (source, pod));
            }
            Err(r) => rejected.push(Rejected {
                uid: id.to_string(),
                name: full_name(pod),
                source,
                reason: Rejection::Refused(r),
            }),
        }
    }
    let ready = sources
        .iter()
        .filter(|(_, s)| s.ready)
        .map(|(k, _)| *k)
        .collect();
    Merged {
        desired,
        rejected,
        ready,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(uid: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(format!("p-{uid}")),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            spec: Some(Default::default()),
            ..Default::default()
        }
    }

    fn state(uids: &[&str], ready: bool) -> SourceState {
        SourceState {
            pods: uids.iter().map(|u| Rc::new(pod(u))).collect(),
            ready,
        }
    }

    fn set(uids: &[&str]) -> BTreeSet<String> {
        uids.iter().map(|s| s.to_string()).collect()
    }

    struct Case {
        name: &'static str,
        file: Option<(&'static [&'static str], bool)>,
        api: Option<(&'static [&'static str], bool)>,
        max_pods: usize,
        admitted: &'static [&'static str],
        desired: &'static [&'static str],
        rejected: &'static [(&'static str, &'static str)],
        ready: &'static [PodSource],
    }

    #[test]
    fn merging_follows_the_table() {
        let cases = [
            Case {
                name: "one ready source, room for all",
                file: Some((&["a", "b"], true)),
                api: None,
                max_pods: 110,
                admitted: &[],
                desired: &["a", "b"],
                rejected: &[],
                ready: &[PodSource::File],
            },
            Case {
                name: "newcomers beyond maxPods are rejected in UID order",
                file: Some((&["c", "a", "b"], true)),
                api: None,
                max_pods: 2,
                admitted: &[],
                desired: &["a", "b"],
                rejected: &[("c", "OutOfpods: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2")],
                ready: &[PodSource::File],
            },
            Case {
                name: "an established pod is never displaced by a newcomer",
                file: Some((&["a", "z"], true)),
                api: None,
                max_pods: 1,
                admitted: &["z"],
                desired: &["z"],
                rejected: &[("a", "OutOfpods: Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1")],
                ready: &[PodSource::File],
            },
            Case {
                name: "established pods stay even above a lowered maxPods",
                file: Some((&["a", "b"], true)),
                api: None,
                max_pods: 1,
                admitted: &["a", "b"],
                desired: &["a", "b"],
                rejected: &[],
                ready: &[PodSource::File],
            },
            Case {
                name: "a pod gone from its source frees its slot",
                file: Some((&["b"], true)),
                api: Some((&["c"], true)),
                max_pods: 2,
                admitted: &["a", "b"],
                desired: &["b", "c"],
                rejected: &[],
                ready: &[PodSource::File, PodSource::Api],
            },
            Case {
                name: "a UID two sources claim belongs to the file source",
                file: Some((&["a"], true)),
                api: Some((&["a", "b"], true)),
                max_pods: 110,
                admitted: &[],
                desired: &["a", "b"],
                rejected: &[("a", "source file already has a pod with this UID")],
                ready: &[PodSource::File, PodSource::Api],
            },
            Case {
                name: "a source that never read successfully is not ready",
                file: Some((&["a"], true)),
                api: Some((&[], false)),
                max_pods: 110,
                admitted: &[],
                desired: &["a"],
                rejected: &[],
                ready: &[PodSource::File],
            },
        ];
        for c in cases {
            let mut sources = BTreeMap::new();
            if let Some((uids, ready)) = c.file {
                sources.insert(PodSource::File, state(uids, ready));
            }
            if let Some((uids, ready)) = c.api {
                sources.insert(PodSource::Api, state(uids, ready));
            }
            let node = NodeView {
                name: "node".into(),
                max_pods: c.max_pods,
                ..Default::default()
            };
            let m = merge(
                &sources,
                &node,
                &HostSupport::default(),
                &set(c.admitted),
                &BTreeMap::new(),
            );
            let desired: Vec<&str> = m.desired.keys().map(String::as_str).collect();
            assert_eq!(desired, c.desired, "{}: desired", c.name);
            let rejected: Vec<(String, String)> = m
                .rejected
                .iter()
                .map(|r| (r.uid.clone(), r.reason.to_string()))
                .collect();
            let want: Vec<(String, String)> = c
                .rejected
                .iter()
                .map(|(u, r)| (u.to_string(), r.to_string()))
                .collect();
            assert_eq!(rejected, want, "{}: rejected", c.name);
            let ready: Vec<PodSource> = m.ready.iter().copied().collect();
            assert_eq!(ready, c.ready, "{}: ready", c.name);
        }
    }

    fn manifest(uid: &str, yaml: &str) -> Rc<Pod> {
        let mut p: Pod = serde_yaml_ng::from_str(yaml).expect("test pod parses");
        p.metadata.uid = Some(uid.into());
        p.metadata.name = Some(uid.into());
        Rc::new(p)
    }

    #[test]
    fn pods_the_node_cannot_honour_are_refused_with_kubelets_reasons() {
        let mut sources = BTreeMap::new();
        sources.insert(
            PodSource::File,
            SourceState {
                pods: vec![
                    manifest("a", "spec: {nodeSelector: {kubernetes.io/arch: s390x}, containers: [{name: c}]}"),
                    manifest("b", "spec: {hostUsers: false, containers: [{name: c}]}"),
                    manifest("c", "spec: {nodeSelector: {kubernetes.io/hostname: node}, containers: [{name: c}]}"),
                    manifest("d", "spec: {containers: [{name: c, resources: {requests: {cpu: '8'}}}]}"),
                ],
                ready: true,
            },
        );
        let node = NodeView {
            name: "node".into(),
            labels: BTreeMap::from([
                ("kubernetes.io/hostname".to_string(), "node".to_string()),
                ("kubernetes.io/arch".to_string(), "arm64".to_string()),
            ]),
            cpu_millis: Some(4000),
            max_pods: 110,
            ..Default::default()
        };
        let m = merge(
            &sources,
            &node,
            &HostSupport::default(),
            &BTreeSet::new(),
            &BTreeMap::new(),
        );
        assert_eq!(m.desired.keys().collect::<Vec<_>>(), ["c"]);
        let reasons: Vec<(&str, &str)> = m
            .rejected
            .iter()
            .map(|r| match &r.reason {
                Rejection::Refused(x) => (r.uid.as_str(), x.reason.as_str()),
                other => panic!("{other}"),
            })
            .collect();
        assert_eq!(
            reasons,
            [
                ("a", "NodeAffinity"),
                ("b", "UserNamespacesNotSupported"),
                ("d", "OutOfcpu")
            ]
        );
    }

    #[test]
    fn a_refused_pod_stays_refused_when_the_node_could_take_it_later() {
        let mut sources = BTreeMap::new();
        sources.insert(
            PodSource::Api,
            SourceState {
                pods: vec![
                    manifest(
                        "a",
                        "spec: {nodeSelector: {disk: ssd}, containers: [{name: c}]}",
                    ),
                    manifest(
                        "b",
                        "spec: {nodeSelector: {disk: ssd}, containers: [{name: c}]}",
                    ),
                ],
                ready: true,
            },
        );
        let mut node = NodeView {
            name: "node".into(),
            max_pods: 110,
            ..Default::default()
        };
        let host = HostSupport::default();
        let first = merge(&sources, &node, &host, &BTreeSet::new(), &BTreeMap::new());
        assert!(first.desired.is_empty());
        let refused: BTreeMap<String, admission::Rejection> = first
            .rejected
            .iter()
            .filter(|r| r.uid == "a")
            .map(|r| match &r.reason {
                Rejection::Refused(x) => (r.uid.clone(), x.clone()),
                other => panic!("{other}"),
            })
            .collect();
        // The node is labelled: a pod never refused is admitted now, the
        // refused one stays Failed for the same reason.
        node.labels.insert("disk".into(), "ssd".into());
        let later = merge(&sources, &node, &host, &BTreeSet::new(), &refused);
        assert_eq!(later.desired.keys().collect::<Vec<_>>(), ["b"]);
        assert_eq!(later.rejected.len(), 1);
        assert_eq!(later.rejected[0].uid, "a");
        assert_eq!(
            later.rejected[0].reason,
            Rejection::Refused(refused["a"].clone())
        );
    }

    #[test]
    fn pods_of_a_source_that_is_not_ready_may_not_be_removed() {
        let mut sources = BTreeMap::new();
        sources.insert(PodSource::File, state(&[], true));
        sources.insert(PodSource::Api, state(&[], false));
        assert!(may_remove(&sources, Some(PodSource::File)));
        assert!(!may_remove(&sources, Some(PodSource::Api)));
        assert!(!may_remove(&sources, None), "unknown origin waits for all");
        sources.remove(&PodSource::Api);
        assert!(
            may_remove(&sources, Some(PodSource::Api)),
            "nothing will claim the pods of a source that is not configured"
        );
    }
}
