//! Pure: a watch answered in protobuf, decoded into the same
//! [`WatchEvent`]s as the JSON stream of [`super::watch`].
//!
//! Why: the node's own Node comes back on its watch after every status
//! report (the whole Node), and its watch brings a bookmark every minute
//! whose JSON is an empty Node with every non-optional field spelled out
//! (~400 bytes). Both cost a metered uplink several times their protobuf
//! size (docs/fleet.md). Only a type with a protobuf reader is watched so.
//!
//! The stream is a sequence of frames, each a 4-byte big-endian length and
//! a `metav1.WatchEvent` (`type` = 1, `object` = 2, a `RawExtension` whose
//! `raw` = 1) without an envelope; the event's object is enveloped
//! (`k8s\0` and a `runtime.Unknown`, [`protobuf::unwrap`]). A bookmark's
//! object is read for its metadata alone, an `ERROR`'s as a
//! `metav1.Status`. As with JSON, a malformed frame and a stream that ends
//! inside a frame are typed errors: the caller watches again from the last
//! resourceVersion it saw.
//!
//! Must not know: requests, the reflector, which type is read (the caller
//! passes its reader).

use prost::Message;

use super::watch::{Bookmark, DecodeError, WatchEvent, INITIAL_EVENTS_END, MAX_LINE};
use crate::apiserver::client::protobuf::{self, ProtobufError};
use crate::apiserver::client::request::ApiError;

/// Reads one object (its enveloped bytes) as the watched type.
pub type Reader<K> = fn(&[u8]) -> Result<K, ProtobufError>;

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoWatchEvent {
    #[prost(string, optional, tag = "1")]
    type_: Option<String>,
    #[prost(message, optional, tag = "2")]
    object: Option<RawExtension>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawExtension {
    #[prost(bytes = "vec", optional, tag = "1")]
    raw: Option<Vec<u8>>,
}

/// Splits a protobuf watch body into frames and decodes each as an event.
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    limit: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(MAX_LINE)
    }
}

impl Decoder {
    /// A decoder refusing frames longer than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Decoder {
            buf: Vec::new(),
            limit,
        }
    }

    /// Adds the next chunk of the body.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete event, if a whole frame is buffered. After an
    /// error the stream is unusable: the caller drops it and watches again.
    pub fn next_event<K>(&mut self, read: Reader<K>) -> Option<Result<WatchEvent<K>, DecodeError>> {
        let header: [u8; 4] = self.buf.get(..4)?.try_into().ok()?;
        let len = u32::from_be_bytes(header) as usize;
        if len > self.limit {
            return Some(Err(DecodeError::LineTooLong { limit: self.limit }));
        }
        let frame = self.buf.get(4..4 + len)?;
        let event = decode_event(frame, read);
        self.buf.drain(..4 + len);
        Some(event)
    }

    /// The stream ended: an error if part of a frame is left over.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.buf.len() {
            0 => Ok(()),
            pending => Err(DecodeError::Truncated { pending }),
        }
    }
}

/// Decodes one frame (a `metav1.WatchEvent`).
pub fn decode_event<K>(frame: &[u8], read: Reader<K>) -> Result<WatchEvent<K>, DecodeError> {
    let malformed = |source: ProtobufError| DecodeError::MalformedProtobuf {
        source,
        length: frame.len(),
    };
    let ev = ProtoWatchEvent::decode(frame).map_err(|e| malformed(e.into()))?;
    let object = ev.object.and_then(|o| o.raw).unwrap_or_default();
    Ok(match ev.type_.as_deref().unwrap_or("") {
        "ADDED" => WatchEvent::Added(read(&object).map_err(malformed)?),
        "MODIFIED" => WatchEvent::Modified(read(&object).map_err(malformed)?),
        "DELETED" => WatchEvent::Deleted(read(&object).map_err(malformed)?),
        "BOOKMARK" => {
            let meta = protobuf::metadata(&object).map_err(malformed)?;
            WatchEvent::Bookmark(Bookmark {
                resource_version: meta.resource_version.unwrap_or_default(),
                initial_events_end: meta
                    .annotations
                    .get(INITIAL_EVENTS_END)
                    .is_some_and(|v| v == "true"),
            })
        }
        "ERROR" => WatchEvent::Error(ApiError::from_status(
            &protobuf::status(&object).map_err(malformed)?,
        )),
        other => {
            return Err(DecodeError::UnknownEventType {
                type_: other.to_string(),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::client::protobuf::tests::enveloped;
    use crate::apiserver::client::protobuf::{Meta, MetaOnly};

    /// A reader of a test type: the object's name.
    fn name(object: &[u8]) -> Result<String, ProtobufError> {
        Ok(protobuf::metadata(object)?.name.unwrap_or_default())
    }

    fn frame(type_: &str, object: Vec<u8>) -> Vec<u8> {
        let ev = ProtoWatchEvent {
            type_: Some(type_.into()),
            object: Some(RawExtension { raw: Some(object) }),
        }
        .encode_to_vec();
        let mut f = (ev.len() as u32).to_be_bytes().to_vec();
        f.extend(ev);
        f
    }

    fn named(name: &str, rv: &str) -> Vec<u8> {
        enveloped(&MetaOnly {
            metadata: Some(Meta {
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            }),
        })
    }

    #[test]
    fn frames_split_across_chunks_decode_in_order() {
        let mut body = frame("ADDED", named("pi", "5"));
        body.extend(frame("MODIFIED", named("pi", "6")));
        let mut d = Decoder::default();
        let mut events = Vec::new();
        for chunk in body.chunks(7) {
            d.push(chunk);
            while let Some(ev) = d.next_event(name) {
                events.push(ev.unwrap());
            }
        }
        assert_eq!(
            events,
            vec![
                WatchEvent::Added("pi".to_string()),
                WatchEvent::Modified("pi".to_string())
            ]
        );
        d.finish().unwrap();
    }

    #[test]
    fn a_bookmark_reads_as_its_resource_version_and_the_end_of_initial_events() {
        let object = enveloped(&MetaOnly {
            metadata: Some(Meta {
                resource_version: Some("42".into()),
                annotations: [(INITIAL_EVENTS_END.to_string(), "true".to_string())].into(),
                ..Default::default()
            }),
        });
        let mut d = Decoder::default();
        d.push(&frame("BOOKMARK", object));
        assert_eq!(
            d.next_event(name).unwrap().unwrap(),
            WatchEvent::Bookmark(Bookmark {
                resource_version: "42".into(),
                initial_events_end: true
            })
        );
    }

    #[test]
    fn an_error_event_is_its_status_and_gone_means_relist() {
        let status = crate::apiserver::client::protobuf::tests::status_bytes(
            410,
            "Expired",
            "too old resource version: 1 (9)",
        );
        let mut d = Decoder::default();
        d.push(&frame("ERROR", status));
        let Some(Ok(WatchEvent::Error(e))) = d.next_event(name) else {
            panic!("not an error event");
        };
        assert!(e.is_gone());
        assert_eq!(e.code, 410);
    }

    #[test]
    fn a_stream_ending_inside_a_frame_is_truncated_not_empty() {
        let body = frame("ADDED", named("pi", "5"));
        let mut d = Decoder::default();
        d.push(&body[..body.len() - 1]);
        assert!(d.next_event(name).is_none());
        assert!(matches!(d.finish(), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn a_frame_over_the_bound_is_refused_before_it_is_buffered_whole() {
        let mut d = Decoder::new(16);
        d.push(&1000u32.to_be_bytes());
        assert!(matches!(
            d.next_event(name),
            Some(Err(DecodeError::LineTooLong { limit: 16 }))
        ));
    }

    #[test]
    fn garbage_and_json_objects_are_malformed_events_not_panics() {
        let mut d = Decoder::default();
        d.push(&frame("ADDED", br#"{"kind":"Node"}"#.to_vec()));
        assert!(matches!(
            d.next_event(name),
            Some(Err(DecodeError::MalformedProtobuf { .. }))
        ));
        let mut d = Decoder::default();
        d.push(&[0, 0, 0, 3, 0xff, 0xff, 0xff]);
        assert!(matches!(
            d.next_event(name),
            Some(Err(DecodeError::MalformedProtobuf { .. }))
        ));
        let mut d = Decoder::default();
        d.push(&frame("RENAMED", named("pi", "5")));
        assert!(matches!(
            d.next_event(name),
            Some(Err(DecodeError::UnknownEventType { .. }))
        ));
    }
}
