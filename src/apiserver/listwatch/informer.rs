//! The I/O side of one list/watch: runs a [`Reflector`] over the
//! [`Client`], keeps the resource's disk [`Cache`] in step, and hands the
//! consumer batches of [`Event`]s.
//!
//! The reflector decides (what to request, how a reply changes the store);
//! this loop only does what it says: sends the request, decodes the reply
//! into [`Input`]s, sleeps through back-offs, and writes each change to the
//! cache before the consumer sees it. Errors are logged when they start or
//! change, not at every retry; nothing here ever empties the store.
//!
//! Cache policy: an object is written when an event changes it; the sync
//! point is written at every [`Event::Synced`] and, during a watch, at most
//! every [`RESOURCE_VERSION_PERSIST`] (after the changes it covers are on
//! disk), so a restart resumes the watch close to where it was without a
//! write per event. A resumed watch whose version is too old gets a `410`
//! and relists once, which is always correct.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use http::StatusCode;
use k8s_openapi::ListableResource;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::disk_cache::{Cache, Loaded};
use super::reflector::{Event, Failure, Input, Next, Object, ObjectKey, Reflector, Request};
use super::watch::{self, DecodeError, WatchEvent};
use super::watch_proto;
use crate::apiserver::client::protobuf::PROTOBUF_OR_JSON;
use crate::apiserver::client::request::{ApiError, Selectors};
use crate::apiserver::client::transport::{BodyStream, Client, BODY_LIMIT, ERROR_BODY_LIMIT, JSON};

/// During a watch, the sync point is written at most this often.
pub const RESOURCE_VERSION_PERSIST: Duration = Duration::from_secs(300);

struct Flight<K> {
    body: BodyStream,
    decoder: EventDecoder<K>,
}

/// The decoder of the watch in flight: the body's encoding, as answered.
enum EventDecoder<K> {
    Json(watch::Decoder),
    Protobuf(watch_proto::Decoder, watch_proto::Reader<K>),
}

impl<K: serde::de::DeserializeOwned> EventDecoder<K> {
    fn push(&mut self, chunk: &[u8]) {
        match self {
            EventDecoder::Json(d) => d.push(chunk),
            EventDecoder::Protobuf(d, _) => d.push(chunk),
        }
    }

    fn next_event(&mut self) -> Option<Result<WatchEvent<K>, DecodeError>> {
        match self {
            EventDecoder::Json(d) => d.next_event::<K>(),
            EventDecoder::Protobuf(d, read) => d.next_event(*read),
        }
    }

    fn finish(&self) -> Result<(), DecodeError> {
        match self {
            EventDecoder::Json(d) => d.finish(),
            EventDecoder::Protobuf(d, _) => d.finish(),
        }
    }
}

/// One resource's list/watch loop.
pub struct Informer<K> {
    client: Client,
    collection: String,
    selectors: Selectors,
    reflector: Reflector<K>,
    cache: Option<Cache>,
    next: Next,
    flight: Option<Flight<K>>,
    /// Watches ask for protobuf, read by this (see [`Informer::with_protobuf_watch`]).
    protobuf: Option<watch_proto::Reader<K>>,
    last_error: Option<String>,
    rv_persisted_at: Option<Instant>,
}

impl<K> Informer<K>
where
    K: Object + ListableResource + DeserializeOwned + Serialize,
{
    /// An informer for `collection` (see
    /// [`collection_path`](crate::apiserver::client::request::collection_path)) filtered by
    /// `selectors`. With a cache, the store starts as the cache's objects
    /// and the first request resumes the watch from its sync point (or
    /// relists when it has none).
    pub fn new(
        client: Client,
        collection: String,
        selectors: Selectors,
        cache: Option<(Cache, Loaded)>,
    ) -> Self {
        let (reflector, cache) = match cache {
            Some((cache, loaded)) => {
                let objects: Vec<K> = loaded.objects(cache.dir());
                let rv = loaded.resource_version.clone().unwrap_or_default();
                (Reflector::resume(objects, rv), Some(cache))
            }
            None => (Reflector::new(), None),
        };
        Informer {
            client,
            collection,
            selectors,
            reflector,
            cache,
            next: Next::Continue,
            flight: None,
            protobuf: None,
            last_error: None,
            rv_persisted_at: None,
        }
    }

    /// Replaces the reflector (e.g. one built `without_streaming_list`).
    pub fn with_reflector(mut self, f: impl FnOnce(Reflector<K>) -> Reflector<K>) -> Self {
        self.reflector = f(self.reflector);
        self
    }

    /// Watches (a streaming list's initial events included) ask for the
    /// API server's protobuf, read by `read`; a server that answers JSON
    /// is read as JSON. LISTs stay JSON. For a resource whose watch costs
    /// a metered uplink (the node's own Node: docs/fleet.md).
    pub fn with_protobuf_watch(mut self, read: watch_proto::Reader<K>) -> Self {
        self.protobuf = Some(read);
        self
    }

    /// The current objects (restored from the cache until the first sync).
    pub fn store(&self) -> &BTreeMap<ObjectKey, Box<K>> {
        self.reflector.store()
    }

    /// See [`Reflector::keep_versions_only`]: returns the objects restored
    /// from the cache, which the consumer keeps from now on.
    pub fn keep_versions_only(&mut self) -> Vec<K>
    where
        K: Default,
    {
        self.reflector.keep_versions_only()
    }

    pub fn reflector(&self) -> &Reflector<K> {
        &self.reflector
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Runs until the store changes or becomes authoritative, and returns
    /// what happened (never an empty batch). Cancel-safe between awaits
    /// only in the sense that dropping the future drops the request in
    /// flight; the next call starts over from the reflector's state.
    pub async fn next(&mut self) -> Vec<Event<K>> {
        loop {
            let input = match std::mem::replace(&mut self.next, Next::Continue) {
                Next::Send(req) => {
                    self.flight = None;
                    self.send(req).await
                }
                Next::Continue => match self.flight.is_some() {
                    true => self.read().await,
                    false => Input::Tick,
                },
                Next::Wait(until) => {
                    self.flight = None;
                    // The back-off ends at `until`, or sooner when another
                    // request on the connection gets an answer.
                    let recovered = smol::future::or(
                        async {
                            smol::Timer::at(until).await;
                            false
                        },
                        async {
                            self.client.link().recovered().await;
                            true
                        },
                    )
                    .await;
                    if recovered {
                        let now = Instant::now();
                        self.next = self.reflector.link_recovered(now, fastrand::u64(..));
                        continue;
                    }
                    Input::Tick
                }
            };
            let now = Instant::now();
            let step = self.reflector.step(now, fastrand::u64(..), input);
            self.next = step.next;
            if let Next::Send(req) = &self.next {
                self.flight = None;
                let link = self.client.link();
                match req {
                    Request::Watch { .. } => link.count_watch_reconnect(),
                    Request::StreamingList { .. }
                    | Request::List {
                        continue_token: None,
                        ..
                    } => link.count_relist(),
                    Request::List { .. } => {}
                }
            }
            if step.events.is_empty() {
                continue;
            }
            self.persist(&step.events, now);
            return step.events;
        }
    }

    async fn send(&mut self, req: Request) -> Input<K> {
        let path = req.path_and_query(&self.collection, &self.selectors);
        let deadline = req.deadline();
        if !req.is_watch() {
            let r = self
                .client
                .request(http::Method::GET, &path, None, BODY_LIMIT, deadline)
                .await;
            return match r {
                Err(e) => self.failed(Failure::Transport, e.to_string()),
                Ok(r) if r.status != StatusCode::OK => {
                    let e = ApiError::from_reply(r.status.as_u16(), &r.body);
                    let text = format!("LIST {path}: {e}");
                    self.failed(Failure::Status(e), text)
                }
                Ok(r) => match watch::decode_list::<K>(&r.body) {
                    Ok(page) => {
                        self.recovered();
                        Input::Page(page)
                    }
                    Err(e) => self.failed(Failure::Transport, format!("LIST {path}: {e}")),
                },
            };
        }
        let accept = match self.protobuf {
            Some(_) => PROTOBUF_OR_JSON,
            None => JSON,
        };
        match self.client.stream(&path, accept, deadline).await {
            Err(e) => self.failed(Failure::Transport, e.to_string()),
            Ok(body) if body.status != StatusCode::OK => {
                let code = body.status.as_u16();
                let bytes = body.collect(ERROR_BODY_LIMIT).await.unwrap_or_default();
                let e = ApiError::from_reply(code, &bytes);
                let text = format!("WATCH {path}: {e}");
                self.failed(Failure::Status(e), text)
            }
            Ok(body) => {
                let decoder = match (self.protobuf, body.protobuf) {
                    (Some(read), true) => {
                        EventDecoder::Protobuf(watch_proto::Decoder::default(), read)
                    }
                    _ => EventDecoder::Json(watch::Decoder::default()),
                };
                self.flight = Some(Flight { body, decoder });
                self.read().await
            }
        }
    }

    async fn read(&mut self) -> Input<K> {
        loop {
            let Some(f) = &mut self.flight else {
                return Input::Tick;
            };
            match f.decoder.next_event() {
                Some(Ok(WatchEvent::Error(e))) => {
                    let text = format!("watch of {}: {e}", self.collection);
                    if e.is_gone() {
                        log::info!("API server: {text}; relisting");
                        self.last_error = Some(text);
                    } else {
                        self.failed(Failure::Transport, text);
                    }
                    self.flight = None;
                    return Input::Event(WatchEvent::Error(e));
                }
                Some(Ok(ev)) => {
                    self.recovered();
                    return Input::Event(ev);
                }
                Some(Err(e)) => {
                    let text = format!("watch of {}: {e}", self.collection);
                    self.flight = None;
                    return self.failed(Failure::Transport, text);
                }
                None => {}
            }
            match f.body.chunk().await {
                Ok(Some(bytes)) => f.decoder.push(&bytes),
                Ok(None) => {
                    let end = f.decoder.finish();
                    self.flight = None;
                    return match end {
                        Ok(()) => Input::Ended,
                        Err(e) => {
                            let text = format!("watch of {}: {e}", self.collection);
                            self.failed(Failure::Transport, text)
                        }
                    };
                }
                Err(e) => {
                    self.flight = None;
                    return self.failed(Failure::Transport, e.to_string());
                }
            }
        }
    }

    /// Logs a failure when it is new (not at every retry), and not when
    /// the link is down: the transport reports that outage once.
    fn failed(&mut self, f: Failure, text: String) -> Input<K> {
        let outage = matches!(f, Failure::Transport) && self.client.link().is_down();
        if !outage && self.last_error.as_deref() != Some(text.as_str()) {
            log::warn!("API server: {text}; retrying");
            self.last_error = Some(text);
        }
        Input::Failed(f)
    }

    fn recovered(&mut self) {
        if let Some(e) = self.last_error.take() {
            log::info!("API server: {} answers again (after: {e})", self.collection);
        }
    }

    /// Writes the changes to the cache; then, if due, the sync point.
    fn persist(&mut self, events: &[Event<K>], now: Instant) {
        let Some(cache) = &mut self.cache else {
            return;
        };
        let mut synced = false;
        for e in events {
            let r = match e {
                Event::Applied(o) => cache.put_object(o).map(drop),
                Event::Deleted(o) => match ObjectKey::of(o) {
                    Some(k) => cache.remove(&k).map(drop),
                    None => Ok(()),
                },
                Event::Synced => {
                    synced = true;
                    Ok(())
                }
            };
            if let Err(e) = r {
                log::warn!("{e}");
            }
        }
        if synced {
            // Entries the authoritative set lacks (including any that did
            // not decode at load) go too.
            let stale: Vec<ObjectKey> = cache
                .keys()
                .filter(|k| !self.reflector.versions().contains_key(k))
                .cloned()
                .collect();
            for k in stale {
                if let Err(e) = cache.remove(&k) {
                    log::warn!("{e}");
                }
            }
        }
        let due = synced
            || self
                .rv_persisted_at
                .is_none_or(|t| now.saturating_duration_since(t) >= RESOURCE_VERSION_PERSIST);
        if due && self.reflector.is_synced() {
            if let Some(rv) = self.reflector.resource_version() {
                match cache.set_resource_version(rv) {
                    Ok(_) => self.rv_persisted_at = Some(now),
                    Err(e) => log::warn!("{e}"),
                }
            }
        }
    }
}
