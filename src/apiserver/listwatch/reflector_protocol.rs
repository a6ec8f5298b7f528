//! Pure: the list/watch [`Reflector`]'s vocabulary with its driver and its
//! consumer: what the driver tells it ([`Input`], [`Failure`]), what it
//! answers ([`Step`]: the consumer's [`Event`]s and what to do [`Next`],
//! such as a [`Request`] to send), and where it is ([`State`],
//! [`Streaming`]).
//!
//! Must not know: how a step is decided (that is [`Reflector::step`]) or
//! how a request is sent.
//!
//! [`Reflector`]: super::reflector::Reflector
//! [`Reflector::step`]: super::reflector::Reflector::step

use std::collections::BTreeMap;
use std::time::Instant;

use super::reflector_objects::ObjectKey;
use super::watch::{ListPage, WatchEvent};
use crate::apiserver::client::request::ApiError;

/// A request the driver must send now (replacing any request in flight).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// One LIST page; `continue_token` for every page after the first. No
    /// resourceVersion: a consistent read.
    List {
        limit: u32,
        continue_token: Option<String>,
    },
    /// WATCH from `resource_version`, bookmarks on.
    Watch {
        resource_version: String,
        timeout_seconds: u32,
    },
    /// The streaming list: WATCH with `sendInitialEvents=true`.
    StreamingList { timeout_seconds: u32 },
}

/// Why the request in flight produced no usable answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The server answered with an error status.
    Status(ApiError),
    /// No usable answer: connection, TLS, deadline, malformed or truncated
    /// body.
    Transport,
}

/// What the driver tells the reflector.
#[derive(Clone, Debug, PartialEq)]
pub enum Input<K> {
    /// Nothing happened, or a [`Next::Wait`] elapsed: what now? (Also the
    /// first input.)
    Tick,
    /// The answer to a [`Request::List`].
    Page(ListPage<K>),
    /// One event of the watch (or streaming list) in flight.
    Event(WatchEvent<K>),
    /// The watch's body ended cleanly (after a complete line).
    Ended,
    /// The request in flight failed.
    Failed(Failure),
}

/// What the consumer learns.
#[derive(Clone, Debug, PartialEq)]
pub enum Event<K> {
    /// The object was added or changed (the new state).
    Applied(K),
    /// The object is gone (its last known state).
    Deleted(K),
    /// The store is now an authoritative copy: after the first (re)list or
    /// streaming list, or, for a store restored from disk, at the first
    /// bookmark. Never after an error, an empty reply or a timeout.
    Synced,
}

/// What the driver does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Send this request, dropping any request or stream in flight.
    Send(Request),
    /// Keep reading the current stream (or waiting for the current reply).
    Continue,
    /// Nothing in flight; step with [`Input::Tick`] at this instant.
    Wait(Instant),
}

/// The result of one step.
#[derive(Clone, Debug, PartialEq)]
pub struct Step<K> {
    pub events: Vec<Event<K>>,
    pub next: Next,
}

/// Where the reflector is.
#[derive(Clone, Debug, PartialEq)]
pub enum State<K> {
    /// Nothing in flight, nothing to wait for: the next tick sends.
    Idle,
    /// Backing off after a failure.
    Waiting { until: Instant },
    /// LIST pages in flight; `acc` holds the pages received so far.
    Listing {
        acc: BTreeMap<ObjectKey, Box<K>>,
        continue_token: Option<String>,
    },
    /// A streaming list in flight, before its initial-events-end bookmark.
    StreamingList {
        acc: BTreeMap<ObjectKey, Box<K>>,
        started: Instant,
    },
    /// A watch in flight.
    Watching { started: Instant, events: bool },
}

/// Whether the server does the streaming list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Streaming {
    Untried,
    Supported,
    Unsupported,
}
