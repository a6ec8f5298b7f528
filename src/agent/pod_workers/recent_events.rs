//! The last few events of each pod, in memory, for `picolet describe pod`.
//!
//! Events go to the API server through the event sink
//! ([`crate::apiserver::pods::event_sync`]) when there is one; a standalone board,
//! or one whose uplink is down, still wants to see why a pod is stuck. So
//! the agent also keeps, for every event it records, a small copy here,
//! served as a v1 `EventList` on the admin socket's `GET /events`.
//!
//! Bounded twice: [`PER_POD`] events per pod (the oldest goes; an event
//! equal to a kept one, same container, type, reason and message, folds
//! into it as kubelet's correlator does: `count` grows, `lastTimestamp`
//! moves), and [`PODS`] pods (the pod whose last event is oldest goes).
//! A pod's events are dropped when the agent forgets the pod.
//!
//! Pure: time comes in as an argument.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{json, Value};

/// Events kept per pod.
pub const PER_POD: usize = 10;
/// Pods whose events are kept.
pub const PODS: usize = 256;

/// One kept event.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Kept {
    /// The container's `fieldPath` (`spec.initContainers{name}`, ...).
    field_path: Option<String>,
    warning: bool,
    reason: String,
    message: String,
    count: u32,
    /// Unix seconds.
    first: i64,
    last: i64,
}

#[derive(Debug, Default)]
struct PodEvents {
    namespace: String,
    name: String,
    events: VecDeque<Kept>,
    last: i64,
}

/// Recent events, per pod UID.
#[derive(Debug, Default)]
pub struct RecentEvents {
    pods: BTreeMap<String, PodEvents>,
}

/// What one event is about: the pod (namespace, name, UID) and maybe one
/// of its containers (its `fieldPath`,
/// [`crate::pod::facts::container_field_path`]).
pub struct About<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub field_path: Option<&'a str>,
}

impl RecentEvents {
    /// Records an event at `now` (unix seconds).
    pub fn record(&mut self, about: About, warning: bool, reason: &str, message: &str, now: i64) {
        if !self.pods.contains_key(about.uid) && self.pods.len() >= PODS {
            let oldest = self
                .pods
                .iter()
                .min_by_key(|(_, p)| p.last)
                .map(|(uid, _)| uid.clone());
            if let Some(uid) = oldest {
                self.pods.remove(&uid);
            }
        }
        let pod = self.pods.entry(about.uid.to_string()).or_default();
        pod.namespace = about.namespace.to_string();
        pod.name = about.name.to_string();
        pod.last = now;
        let same = |k: &Kept| {
            k.field_path.as_deref() == about.field_path
                && k.warning == warning
                && k.reason == reason
                && k.message == message
        };
        if let Some(i) = pod.events.iter().position(same) {
            let mut k = pod.events.remove(i).expect("position is in range");
            k.count = k.count.saturating_add(1);
            k.last = now;
            pod.events.push_back(k);
            return;
        }
        if pod.events.len() >= PER_POD {
            pod.events.pop_front();
        }
        pod.events.push_back(Kept {
            field_path: about.field_path.map(str::to_string),
            warning,
            reason: reason.to_string(),
            message: message.to_string(),
            count: 1,
            first: now,
            last: now,
        });
    }

    /// Drops the events of pod `uid` (the agent forgot it).
    pub fn forget(&mut self, uid: &str) {
        self.pods.remove(uid);
    }

    /// Every kept event as a v1 `EventList`, oldest first per pod.
    pub fn event_list(&self) -> Value {
        let time = |t: i64| Value::String(rfc3339(t));
        let mut items = Vec::new();
        for (uid, pod) in &self.pods {
            for k in &pod.events {
                let mut involved = json!({
                    "kind": "Pod",
                    "namespace": pod.namespace,
                    "name": pod.name,
                    "uid": uid,
                });
                if let Some(f) = &k.field_path {
                    involved["fieldPath"] = Value::String(f.clone());
                }
                items.push(json!({
                    "metadata": {"namespace": pod.namespace},
                    "involvedObject": involved,
                    "type": if k.warning { "Warning" } else { "Normal" },
                    "reason": k.reason,
                    "message": k.message,
                    "count": k.count,
                    "firstTimestamp": time(k.first),
                    "lastTimestamp": time(k.last),
                    "source": {"component": "kubelet"},
                }));
            }
        }
        json!({"apiVersion": "v1", "kind": "EventList", "metadata": {}, "items": items})
    }
}

/// Unix seconds as RFC 3339 UTC (`2026-12-01T10:04:55Z`), the API's time.
pub fn rfc3339(unix: i64) -> String {
    crate::status::time_from_unix(unix).0.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn about<'a>(uid: &'a str, field_path: Option<&'a str>) -> About<'a> {
        About {
            namespace: "default",
            name: uid,
            uid,
            field_path,
        }
    }

    #[test]
    fn a_repeated_event_folds_into_one_with_a_count_and_moves_last() {
        let mut r = RecentEvents::default();
        r.record(
            about("u", Some("spec.containers{app}")),
            false,
            "Pulled",
            "pulled",
            100,
        );
        r.record(
            about("u", Some("spec.containers{app}")),
            true,
            "BackOff",
            "back-off",
            101,
        );
        r.record(
            about("u", Some("spec.containers{app}")),
            true,
            "BackOff",
            "back-off",
            160,
        );
        let list = r.event_list();
        let items = list["items"].as_array().unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[1]["reason"], "BackOff");
        assert_eq!(items[1]["type"], "Warning");
        assert_eq!(items[1]["count"], 2);
        assert_eq!(items[1]["firstTimestamp"], "1970-01-01T00:01:41Z");
        assert_eq!(items[1]["lastTimestamp"], "1970-01-01T00:02:40Z");
        assert_eq!(
            items[1]["involvedObject"]["fieldPath"],
            "spec.containers{app}"
        );
    }

    #[test]
    fn a_pod_keeps_only_its_last_events_and_the_quietest_pod_goes_first() {
        let mut r = RecentEvents::default();
        for i in 0..(PER_POD as i64 + 5) {
            r.record(about("u", None), false, "Started", &format!("n{i}"), i);
        }
        let list = r.event_list();
        let items = list["items"].as_array().unwrap();
        assert_eq!(items.len(), PER_POD);
        assert_eq!(items[0]["message"], "n5");
        for i in 0..PODS as i64 {
            r.record(
                about(&format!("p{i}"), None),
                false,
                "Created",
                "x",
                1000 + i,
            );
        }
        assert_eq!(r.pods.len(), PODS);
        assert!(!r.pods.contains_key("u"), "u's last event is the oldest");
        r.forget("p1");
        assert!(!r.pods.contains_key("p1"));
    }
}
