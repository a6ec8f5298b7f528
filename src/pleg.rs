//! PLEG: the pod lifecycle event generator.
//!
//! Every second the agent relists sandboxes and containers from the runtime
//! and hands the result to [`Snapshot::from_records`]. [`diff`] compares two
//! snapshots and says which pods changed, so the agent wakes only those pods'
//! workers. This module is pure: no CRI types, no I/O, no clock.

use std::collections::BTreeMap;

/// A runtime object's state as PLEG sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Created but not started (containers only).
    Created,
    /// Running (a container) or ready (a sandbox).
    Running,
    /// Exited (a container) or not ready (a sandbox).
    Exited,
    /// The runtime could not tell.
    Unknown,
}

/// Whether a record is a sandbox or a container.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Sandbox,
    Container,
}

/// One sandbox or container in a relist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub id: String,
    pub pod_uid: String,
    pub kind: Kind,
    pub state: State,
}

/// The result of one relist, keyed by runtime ID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    records: BTreeMap<String, Record>,
}

impl Snapshot {
    /// Builds a snapshot from relisted records.
    pub fn from_records(records: impl IntoIterator<Item = Record>) -> Self {
        Snapshot {
            records: records.into_iter().map(|r| (r.id.clone(), r)).collect(),
        }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when nothing is known.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Every pod UID that has at least one sandbox or container.
    pub fn pod_uids(&self) -> impl Iterator<Item = &str> {
        let mut uids: Vec<&str> = self.records.values().map(|r| r.pod_uid.as_str()).collect();
        uids.sort_unstable();
        uids.dedup();
        uids.into_iter()
    }
}

/// What happened to one sandbox or container between two relists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    ContainerStarted,
    ContainerDied,
    ContainerRemoved,
    ContainerChanged,
    SandboxChanged,
}

/// A pod lifecycle event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub pod_uid: String,
    pub id: String,
    pub event: EventType,
}

fn container_event(old: Option<State>, new: Option<State>) -> Option<EventType> {
    use State::*;
    match (old, new) {
        (o, n) if o == n => None,
        (_, Some(Running)) => Some(EventType::ContainerStarted),
        (_, Some(Exited)) => Some(EventType::ContainerDied),
        (Some(Running), None) => Some(EventType::ContainerDied),
        (Some(_), None) => Some(EventType::ContainerRemoved),
        _ => Some(EventType::ContainerChanged),
    }
}

/// Compares two relists. Events come in ID order; a container that died and
/// was removed between two relists yields one `ContainerDied`.
pub fn diff(old: &Snapshot, new: &Snapshot) -> Vec<Event> {
    let mut ids: Vec<&String> = old.records.keys().chain(new.records.keys()).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut events = Vec::new();
    for id in ids {
        let o = old.records.get(id);
        let n = new.records.get(id);
        let rec = n.or(o).expect("id comes from one of the snapshots");
        let event = match rec.kind {
            Kind::Container => container_event(o.map(|r| r.state), n.map(|r| r.state)),
            Kind::Sandbox => {
                (o.map(|r| r.state) != n.map(|r| r.state)).then_some(EventType::SandboxChanged)
            }
        };
        if let Some(event) = event {
            events.push(Event {
                pod_uid: rec.pod_uid.clone(),
                id: id.clone(),
                event,
            });
        }
    }
    events
}

/// The distinct pods named by `events`, in order of first appearance.
pub fn changed_pods(events: &[Event]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        if !out.iter().any(|u| u == &e.pod_uid) {
            out.push(e.pod_uid.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, pod: &str, state: State) -> Record {
        Record {
            id: id.into(),
            pod_uid: pod.into(),
            kind: Kind::Container,
            state,
        }
    }
    fn s(id: &str, pod: &str, state: State) -> Record {
        Record {
            id: id.into(),
            pod_uid: pod.into(),
            kind: Kind::Sandbox,
            state,
        }
    }

    #[test]
    fn identical_relists_produce_no_events() {
        let a =
            Snapshot::from_records([c("c1", "p1", State::Running), s("s1", "p1", State::Running)]);
        assert!(diff(&a, &a.clone()).is_empty());
    }

    #[test]
    fn a_new_running_container_is_reported_as_started() {
        let a = Snapshot::default();
        let b = Snapshot::from_records([c("c1", "p1", State::Running)]);
        assert_eq!(
            diff(&a, &b),
            vec![Event {
                pod_uid: "p1".into(),
                id: "c1".into(),
                event: EventType::ContainerStarted
            }]
        );
    }

    #[test]
    fn a_container_that_exits_is_reported_as_died() {
        let a = Snapshot::from_records([c("c1", "p1", State::Running)]);
        let b = Snapshot::from_records([c("c1", "p1", State::Exited)]);
        assert_eq!(diff(&a, &b)[0].event, EventType::ContainerDied);
    }

    #[test]
    fn a_running_container_that_vanishes_is_reported_as_died_not_removed() {
        let a = Snapshot::from_records([c("c1", "p1", State::Running)]);
        assert_eq!(
            diff(&a, &Snapshot::default())[0].event,
            EventType::ContainerDied
        );
    }

    #[test]
    fn an_exited_container_that_vanishes_is_reported_as_removed() {
        let a = Snapshot::from_records([c("c1", "p1", State::Exited)]);
        assert_eq!(
            diff(&a, &Snapshot::default())[0].event,
            EventType::ContainerRemoved
        );
    }

    #[test]
    fn a_sandbox_state_change_is_reported() {
        let a = Snapshot::from_records([s("s1", "p1", State::Running)]);
        let b = Snapshot::from_records([s("s1", "p1", State::Exited)]);
        assert_eq!(diff(&a, &b)[0].event, EventType::SandboxChanged);
    }

    #[test]
    fn only_the_affected_pods_are_named() {
        let a = Snapshot::from_records([
            c("c1", "p1", State::Running),
            c("c2", "p2", State::Running),
            c("c3", "p1", State::Running),
        ]);
        let b = Snapshot::from_records([
            c("c1", "p1", State::Exited),
            c("c2", "p2", State::Running),
            c("c3", "p1", State::Exited),
        ]);
        assert_eq!(changed_pods(&diff(&a, &b)), vec!["p1".to_string()]);
    }

    #[test]
    fn a_created_container_is_reported_as_changed() {
        let b = Snapshot::from_records([c("c1", "p1", State::Created)]);
        assert_eq!(
            diff(&Snapshot::default(), &b)[0].event,
            EventType::ContainerChanged
        );
    }
}
