//! Pure: the node's event recorder. Which Events the API server is owed,
//! and the request that carries each one.
//!
//! It does what kubelet's recorder (client-go's broadcaster and event
//! correlator) does, sized for a board:
//! - **Deduplication**: an event with the same involved object, type,
//!   reason, message and source as one already recorded is the same Event:
//!   its `count` grows and its `lastTimestamp` moves, sent as a PATCH. The
//!   correlator's memory is bounded ([`Recorder::new`]'s `remembered`), the
//!   least recently seen forgotten first.
//! - **Rate limit**: a token bucket of `eventRecordQPS` refilled per second
//!   up to `eventBurst` (`--event-qps`, `--event-burst`); QPS 0 is no limit,
//!   as in kubelet. A write waits for its token in the buffer.
//! - **Offline buffer**: writes wait in a bounded FIFO while the API server
//!   is unreachable; past its capacity the oldest is dropped. An event seen
//!   again while its write waits folds into that write (a crash loop
//!   offline for an hour is one Event with a large count, not a flood).
//!   The I/O task ([`super::event_sync`]) flushes it on reconnect.
//!
//! Time comes in as an argument (API time, [`Timestamp`]); nothing here
//! does I/O or reads a clock.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

/// The component kubelet names as its events' source.
pub const COMPONENT: &str = "kubelet";

/// kubelet's event reasons (pkg/kubelet/events), plus picolet's own.
pub mod reason {
    pub const PULLING: &str = "Pulling";
    pub const PULLED: &str = "Pulled";
    pub const FAILED: &str = "Failed";
    pub const BACK_OFF: &str = "BackOff";
    pub const CREATED: &str = "Created";
    pub const STARTED: &str = "Started";
    pub const KILLING: &str = "Killing";
    pub const UNHEALTHY: &str = "Unhealthy";
    pub const EVICTED: &str = "Evicted";
    pub const NODE_READY: &str = "NodeReady";
    pub const NODE_NOT_READY: &str = "NodeNotReady";
    pub const REBOOTED: &str = "Rebooted";
    pub const STARTING: &str = "Starting";
    pub const NODE_ALLOCATABLE_ENFORCED: &str = "NodeAllocatableEnforced";
    /// picolet's: a pull failed for a network reason and the image already
    /// on the node runs (issue #8, "Images offline").
    pub const OFFLINE_IMAGE: &str = "PullFailedUsingLocalImage";
}

/// `Normal` or `Warning`, the two event types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What an event is about (an `ObjectReference`'s fields that matter).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Involved {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    /// `spec.containers{name}` (`spec.initContainers{name}`, ...) for a
    /// container's event, as kubelet writes it.
    pub field_path: Option<String>,
}

impl Involved {
    /// A pod, or one of its containers (`field_path`: the container's,
    /// [`crate::pod::facts::container_field_path`]).
    pub fn pod(namespace: &str, name: &str, uid: &str, field_path: Option<String>) -> Self {
        Involved {
            kind: "Pod".into(),
            namespace: Some(namespace.into()),
            name: name.into(),
            uid: uid.into(),
            field_path,
        }
    }

    /// The node: kubelet names it by name with the name as UID, and its
    /// events live in the `default` namespace.
    pub fn node(name: &str) -> Self {
        Involved {
            kind: "Node".into(),
            namespace: None,
            name: name.into(),
            uid: name.into(),
            field_path: None,
        }
    }

    /// Where the Event object lives.
    fn event_namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or("default")
    }
}

/// The identity of an event for deduplication (client-go's
/// `getEventKey`, source included: ours is always this node's kubelet).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    involved: Involved,
    type_: EventType,
    reason: String,
    message: String,
}

#[derive(Clone, Debug)]
struct Entry {
    /// The Event's name (`<object>.<hex>`, as client-go makes it).
    name: String,
    count: i32,
    first: Timestamp,
    last: Timestamp,
    /// The API server has this Event (later sightings PATCH it).
    created: bool,
    /// A write of this entry is in the buffer.
    queued: bool,
    /// Recency for the correlator's bound.
    seen: u64,
}

/// One request the I/O task makes.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// `POST namespaces/<ns>/events`.
    Create {
        namespace: String,
        event: Box<Event>,
    },
    /// `PATCH namespaces/<ns>/events/<name>` (strategic merge) with
    /// [`Write::body`].
    Patch {
        namespace: String,
        name: String,
        count: i32,
        last: Timestamp,
    },
}

impl Write {
    /// The namespace of the Event.
    pub fn namespace(&self) -> &str {
        match self {
            Write::Create { namespace, .. } | Write::Patch { namespace, .. } => namespace,
        }
    }

    /// The request body (JSON).
    pub fn body(&self) -> Vec<u8> {
        match self {
            Write::Create { event, .. } => create_body(event),
            Write::Patch { count, last, .. } => {
                let last = serde_json::to_string(&Time(*last)).expect("a time serializes");
                format!("{{\"count\":{count},\"lastTimestamp\":{last}}}").into_bytes()
            }
        }
    }
}

/// A write handed out, to report back with [`Recorder::done`].
#[derive(Clone, Debug, PartialEq)]
pub struct Ticket {
    key: Key,
    pub write: Write,
}

/// How a write went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The API server took it.
    Accepted,
    /// Not answered, or answered 5xx/429: keep it, try again later.
    Retry,
    /// The PATCHed Event is gone (404: it expired): create it anew.
    Gone,
    /// Refused for good (4xx): drop it.
    Refused,
}

/// The token bucket of kubelet's event client.
#[derive(Clone, Debug)]
struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: Option<Timestamp>,
}

impl Bucket {
    fn refill(&mut self, now: Timestamp) {
        if let Some(at) = self.at {
            let dt = now.duration_since(at).as_secs_f64().max(0.0);
            self.tokens = (self.tokens + dt * self.qps).min(self.burst);
        }
        self.at = Some(now);
    }

    /// Takes a token, or says how long until one is there.
    fn take(&mut self, now: Timestamp) -> Result<(), Duration> {
        if self.qps <= 0.0 {
            return Ok(());
        }
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

/// The recorder of one node.
#[derive(Clone, Debug)]
pub struct Recorder {
    host: String,
    entries: BTreeMap<Key, Entry>,
    remembered: usize,
    queue: VecDeque<Key>,
    buffer: usize,
    bucket: Bucket,
    tick: u64,
    dropped: u64,
}

impl Recorder {
    /// A recorder for node `host`: `qps`/`burst` as `eventRecordQPS` and
    /// `eventBurst`; `buffer` writes wait at most; `remembered` events are
    /// kept for deduplication.
    pub fn new(host: &str, qps: f64, burst: u32, buffer: usize, remembered: usize) -> Self {
        let burst = f64::from(burst.max(1));
        Recorder {
            host: host.into(),
            entries: BTreeMap::new(),
            remembered: remembered.max(1),
            queue: VecDeque::new(),
            buffer: buffer.max(1),
            bucket: Bucket {
                qps,
                burst,
                tokens: burst,
                at: None,
            },
            tick: 0,
            dropped: 0,
        }
    }

    /// Writes waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Nothing waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Writes dropped because the buffer was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Records one event at `now`.
    pub fn record(
        &mut self,
        involved: Involved,
        type_: EventType,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) {
        self.tick += 1;
        let key = Key {
            involved,
            type_,
            reason: reason.into(),
            message: message.into(),
        };
        let tick = self.tick;
        if let Some(e) = self.entries.get_mut(&key) {
            e.count = e.count.saturating_add(1);
            e.last = now;
            e.seen = tick;
            if !e.queued {
                e.queued = true;
                self.enqueue(key);
            }
            return;
        }
        if self.entries.len() >= self.remembered {
            self.forget_least_recent();
        }
        let name = format!(
            "{}.{:x}",
            key.involved.name,
            now.as_nanosecond() as u128 + u128::from(tick)
        );
        self.entries.insert(
            key.clone(),
            Entry {
                name,
                count: 1,
                first: now,
                last: now,
                created: false,
                queued: true,
                seen: tick,
            },
        );
        self.enqueue(key);
    }

    fn enqueue(&mut self, key: Key) {
        if self.queue.len() >= self.buffer {
            if let Some(old) = self.queue.pop_front() {
                self.dropped += 1;
                self.unqueue_dropped(&old);
            }
        }
        self.queue.push_back(key);
    }

    /// A dropped write: an Event the API server never had is forgotten.
    fn unqueue_dropped(&mut self, key: &Key) {
        if let Some(e) = self.entries.get_mut(key) {
            if e.created {
                e.queued = false;
            } else {
                self.entries.remove(key);
            }
        }
    }

    fn forget_least_recent(&mut self) {
        let oldest = self
            .entries
            .iter()
            .filter(|(_, e)| !e.queued)
            .min_by_key(|(_, e)| e.seen)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            self.entries.remove(&k);
        }
    }

    /// The next write to make at `now`: `Ok(None)` when nothing waits,
    /// `Err(wait)` when the rate limit says wait.
    pub fn next(&mut self, now: Timestamp) -> Result<Option<Ticket>, Duration> {
        let Some(key) = self.queue.front().cloned() else {
            return Ok(None);
        };
        self.bucket.take(now)?;
        self.queue.pop_front();
        let e = self
            .entries
            .get_mut(&key)
            .expect("a queued key has an entry");
        e.queued = false;
        let namespace = key.involved.event_namespace().to_string();
        let write = if e.created {
            Write::Patch {
                namespace,
                name: e.name.clone(),
                count: e.count,
                last: e.last,
            }
        } else {
            Write::Create {
                namespace: namespace.clone(),
                event: Box::new(event(&key, e, &self.host, &namespace)),
            }
        };
        Ok(Some(Ticket { key, write }))
    }

    /// Reports how a write went.
    pub fn done(&mut self, ticket: Ticket, outcome: Outcome) {
        let Some(e) = self.entries.get_mut(&ticket.key) else {
            return;
        };
        match outcome {
            Outcome::Accepted => e.created = true,
            Outcome::Retry => {
                if !e.queued {
                    e.queued = true;
                    self.queue.push_front(ticket.key);
                }
            }
            Outcome::Gone => {
                e.created = false;
                if !e.queued {
                    e.queued = true;
                    self.queue.push_front(ticket.key);
                }
            }
            Outcome::Refused => {
                if !e.created && !e.queued {
                    self.entries.remove(&ticket.key);
                }
            }
        }
    }
}

/// The POST body of a new Event, written field by field: k8s-openapi's
/// `Serialize` for `Event` (every field of the type, with its generic
/// map code) cost the aarch64 binary more than its 4 MiB budget allowed,
/// while these few fields are all picolet ever sets.
fn create_body(e: &Event) -> Vec<u8> {
    let i = &e.involved_object;
    let source = e.source.as_ref();
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": e.metadata.name,
            "namespace": e.metadata.namespace,
        },
        "involvedObject": {
            "apiVersion": i.api_version,
            "kind": i.kind,
            "namespace": i.namespace,
            "name": i.name,
            "uid": i.uid,
            "fieldPath": i.field_path,
        },
        "reason": e.reason,
        "message": e.message,
        "source": {
            "component": source.and_then(|s| s.component.as_deref()),
            "host": source.and_then(|s| s.host.as_deref()),
        },
        "firstTimestamp": e.first_timestamp,
        "lastTimestamp": e.last_timestamp,
        "count": e.count,
        "type": e.type_,
        "reportingComponent": e.reporting_component,
        "reportingInstance": e.reporting_instance,
    });
    serde_json::to_vec(&body).expect("JSON values always serialize")
}

fn event(key: &Key, e: &Entry, host: &str, namespace: &str) -> Event {
    let i = &key.involved;
    Event {
        metadata: ObjectMeta {
            name: Some(e.name.clone()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some(i.kind.clone()),
            namespace: i.namespace.clone(),
            name: Some(i.name.clone()),
            uid: Some(i.uid.clone()),
            field_path: i.field_path.clone(),
            ..Default::default()
        },
        reason: Some(key.reason.clone()),
        message: Some(key.message.clone()),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: Some(host.into()),
        }),
        first_timestamp: Some(Time(e.first)),
        last_timestamp: Some(Time(e.last)),
        count: Some(e.count),
        type_: Some(key.type_.as_str().into()),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(host.into()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn pod(c: &str) -> Involved {
        Involved::pod("ns", "p", "u1", Some(format!("spec.containers{{{c}}}")))
    }

    fn recorder() -> Recorder {
        Recorder::new("pi-1", 50.0, 100, 8, 16)
    }

    fn drain(r: &mut Recorder, now: Timestamp) -> Vec<Write> {
        let mut out = Vec::new();
        while let Ok(Some(tk)) = r.next(now) {
            out.push(tk.write.clone());
            r.done(tk, Outcome::Accepted);
        }
        out
    }

    #[test]
    fn a_first_event_is_created_with_kubelets_source_and_field_path() {
        let mut r = recorder();
        r.record(
            pod("c"),
            EventType::Normal,
            reason::STARTED,
            "Started container c",
            t(0),
        );
        let w = drain(&mut r, t(0));
        let [Write::Create { namespace, event }] = w.as_slice() else {
            panic!("{w:?}")
        };
        assert_eq!(namespace, "ns");
        assert_eq!(event.count, Some(1));
        assert_eq!(event.type_.as_deref(), Some("Normal"));
        assert_eq!(event.reason.as_deref(), Some("Started"));
        assert_eq!(
            event.involved_object.field_path.as_deref(),
            Some("spec.containers{c}")
        );
        let src = event.source.as_ref().unwrap();
        assert_eq!(src.component.as_deref(), Some("kubelet"));
        assert_eq!(src.host.as_deref(), Some("pi-1"));
        assert_eq!(event.reporting_instance.as_deref(), Some("pi-1"));
        assert!(event.metadata.name.as_deref().unwrap().starts_with("p."));
    }

    #[test]
    fn the_same_event_again_patches_its_count_and_last_timestamp() {
        let mut r = recorder();
        let msg = "Back-off restarting failed container c in pod p_ns(u1)";
        r.record(pod("c"), EventType::Warning, reason::BACK_OFF, msg, t(0));
        let created = drain(&mut r, t(0));
        let Write::Create { event, .. } = &created[0] else {
            panic!()
        };
        r.record(pod("c"), EventType::Warning, reason::BACK_OFF, msg, t(10));
        let w = drain(&mut r, t(10));
        assert_eq!(
            w,
            vec![Write::Patch {
                namespace: "ns".into(),
                name: event.metadata.name.clone().unwrap(),
                count: 2,
                last: t(10),
            }]
        );
        assert_eq!(
            String::from_utf8(w[0].body()).unwrap(),
            "{\"count\":2,\"lastTimestamp\":\"2023-11-14T22:13:30Z\"}"
        );
    }

    #[test]
    fn events_that_differ_in_any_part_of_their_key_are_separate() {
        let mut r = recorder();
        let cases = [
            (pod("c"), EventType::Normal, "Started", "m"),
            (pod("d"), EventType::Normal, "Started", "m"),
            (pod("c"), EventType::Warning, "Started", "m"),
            (pod("c"), EventType::Normal, "Created", "m"),
            (pod("c"), EventType::Normal, "Started", "other"),
            (Involved::node("pi-1"), EventType::Normal, "Started", "m"),
        ];
        for (i, ty, reason, msg) in cases.clone() {
            r.record(i, ty, reason, msg, t(0));
        }
        let w = drain(&mut r, t(0));
        assert_eq!(w.len(), cases.len());
        assert!(w.iter().all(|w| matches!(w, Write::Create { .. })));
        assert_eq!(w[5].namespace(), "default");
    }

    #[test]
    fn offline_sightings_fold_into_the_waiting_write() {
        let mut r = recorder();
        for s in 0..5 {
            r.record(pod("c"), EventType::Warning, reason::BACK_OFF, "m", t(s));
        }
        assert_eq!(r.len(), 1);
        let w = drain(&mut r, t(5));
        let [Write::Create { event, .. }] = w.as_slice() else {
            panic!("{w:?}")
        };
        assert_eq!(event.count, Some(5));
        assert_eq!(event.first_timestamp, Some(Time(t(0))));
        assert_eq!(event.last_timestamp, Some(Time(t(4))));
    }

    #[test]
    fn a_full_buffer_drops_the_oldest_write_first() {
        let mut r = Recorder::new("pi-1", 0.0, 1, 3, 16);
        for i in 0..5 {
            r.record(
                pod("c"),
                EventType::Normal,
                "Started",
                &format!("m{i}"),
                t(i),
            );
        }
        assert_eq!(r.len(), 3);
        assert_eq!(r.dropped(), 2);
        let msgs: Vec<String> = drain(&mut r, t(9))
            .into_iter()
            .map(|w| match w {
                Write::Create { event, .. } => event.message.unwrap(),
                w => panic!("{w:?}"),
            })
            .collect();
        assert_eq!(msgs, ["m2", "m3", "m4"]);
    }

    #[test]
    fn a_failed_write_is_retried_first_and_nothing_is_lost() {
        let mut r = recorder();
        r.record(pod("c"), EventType::Normal, "Pulled", "a", t(0));
        r.record(pod("c"), EventType::Normal, "Created", "b", t(0));
        let tk = r.next(t(0)).unwrap().unwrap();
        r.done(tk, Outcome::Retry);
        let w = drain(&mut r, t(1));
        let reasons: Vec<_> = w
            .iter()
            .map(|w| match w {
                Write::Create { event, .. } => event.reason.clone().unwrap(),
                w => panic!("{w:?}"),
            })
            .collect();
        assert_eq!(reasons, ["Pulled", "Created"]);
    }

    #[test]
    fn an_expired_event_is_created_again() {
        let mut r = recorder();
        r.record(pod("c"), EventType::Warning, "BackOff", "m", t(0));
        drain(&mut r, t(0));
        r.record(pod("c"), EventType::Warning, "BackOff", "m", t(1));
        let tk = r.next(t(1)).unwrap().unwrap();
        assert!(matches!(tk.write, Write::Patch { .. }));
        r.done(tk, Outcome::Gone);
        let w = drain(&mut r, t(1));
        assert!(matches!(&w[..], [Write::Create { event, .. }] if event.count == Some(2)));
    }

    #[test]
    fn the_token_bucket_allows_a_burst_then_qps() {
        let mut r = Recorder::new("pi-1", 2.0, 3, 100, 100);
        for i in 0..10 {
            r.record(
                pod("c"),
                EventType::Normal,
                "Started",
                &format!("m{i}"),
                t(0),
            );
        }
        let mut sent = 0;
        while let Ok(Some(tk)) = r.next(t(0)) {
            r.done(tk, Outcome::Accepted);
            sent += 1;
        }
        assert_eq!(sent, 3);
        assert_eq!(r.next(t(0)), Err(Duration::from_millis(500)));
        // One second later: two more tokens.
        for _ in 0..2 {
            let tk = r.next(t(1)).unwrap().unwrap();
            r.done(tk, Outcome::Accepted);
        }
        assert!(r.next(t(1)).is_err());
    }

    #[test]
    fn the_correlator_forgets_the_least_recently_seen_event() {
        let mut r = Recorder::new("pi-1", 0.0, 1, 8, 2);
        r.record(pod("c"), EventType::Normal, "A", "m", t(0));
        r.record(pod("c"), EventType::Normal, "B", "m", t(1));
        drain(&mut r, t(1));
        r.record(pod("c"), EventType::Normal, "A", "m", t(2)); // A is recent
        drain(&mut r, t(2));
        r.record(pod("c"), EventType::Normal, "C", "m", t(3)); // B goes
        drain(&mut r, t(3));
        r.record(pod("c"), EventType::Normal, "B", "m", t(4));
        let w = drain(&mut r, t(4));
        assert!(matches!(&w[..], [Write::Create { event, .. }] if event.count == Some(1)));
    }
}
