//! Pure: decoding what the API server sends for LIST and WATCH.
//!
//! A watch reply is a stream of JSON objects, one per line:
//! `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{...}}`. The
//! [`Decoder`] takes the body's chunks as they come (a line may span
//! several chunks, a chunk may hold several lines), bounds the length of a
//! line, and yields typed [`WatchEvent`]s. A malformed line and a stream
//! that ends in the middle of a line are typed errors, never a panic and
//! never "no objects": the caller retries from the last resourceVersion it
//! saw. A LIST reply is one JSON object, decoded by [`decode_list`], which
//! refuses a list without a resourceVersion (that is not an answer the API
//! server gives, so it cannot be a sync point) and takes any list `kind`
//! the server names it by (`ConfigMapList`, `SecretList`, `PodList`, or
//! `List`), refusing only an object that is not a list.
//!
//! Size matters here: every object is decoded by `serde_json::from_str`'s
//! deserializer and nothing else, the one the static pod source uses, so
//! the (large) deserializer of `Pod` exists once in the binary. The event
//! envelope is therefore decoded by a visitor that decodes `object` in
//! place once `type` is known, instead of going through
//! `serde_json::Value` (a second copy of every deserializer). The API
//! server writes `type` before `object` (Go encodes struct fields in
//! order); an event with `object` first is refused as malformed.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, Status};
use serde::de::{self, DeserializeOwned, MapAccess, Visitor};
use serde::Deserialize;

use crate::apiserver::client::request::ApiError;

/// Makes a slim view of a core (`v1`) object listable and watchable: the
/// `k8s_openapi` traits the informer needs, for a struct with a
/// `metadata: ObjectMeta` field. Slim views keep only the fields the node
/// reads, so a cache entry and a decoded list stay small.
///
/// `slim_core_v1_object!(Type, kind, url_path_segment, list_kind, scope)`.
macro_rules! slim_core_v1_object {
    ($ty:ty, $kind:literal, $segment:literal, $list_kind:literal, $scope:ty) => {
        impl k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = "v1";
            const GROUP: &'static str = "";
            const KIND: &'static str = $kind;
            const VERSION: &'static str = "v1";
            const URL_PATH_SEGMENT: &'static str = $segment;
            type Scope = $scope;
        }

        impl k8s_openapi::ListableResource for $ty {
            const LIST_KIND: &'static str = $list_kind;
        }

        impl k8s_openapi::Metadata for $ty {
            type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use slim_core_v1_object;

/// The default bound of one watch line. etcd stores objects up to 1.5 MiB;
/// their JSON with the event envelope fits well within this.
pub const MAX_LINE: usize = 4 << 20;
/// The annotation of the bookmark ending a streaming list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Errors decoding a watch stream or a list.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("watch event longer than {limit} bytes")]
    LineTooLong { limit: usize },
    #[error("malformed watch event ({source}): {snippet}")]
    MalformedEvent {
        source: serde_json::Error,
        snippet: String,
    },
    #[error("malformed protobuf watch event of {length} bytes: {source}")]
    MalformedProtobuf {
        source: crate::apiserver::client::protobuf::ProtobufError,
        length: usize,
    },
    #[error("watch event of unknown type {type_:?}")]
    UnknownEventType { type_: String },
    #[error("watch stream ended in the middle of an event ({pending} bytes pending)")]
    Truncated { pending: usize },
    #[error("malformed list ({source}): {snippet}")]
    MalformedList {
        source: serde_json::Error,
        snippet: String,
    },
    #[error("list without metadata.resourceVersion")]
    ListWithoutResourceVersion,
    #[error("{what} is not UTF-8 text")]
    NotUtf8 { what: &'static str },
}

/// A bookmark: everything up to `resource_version` has been sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bookmark {
    pub resource_version: String,
    /// Annotated `k8s.io/initial-events-end: "true"`: a streaming list's
    /// initial events are complete.
    pub initial_events_end: bool,
}

/// One watch event.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent<K> {
    Added(K),
    Modified(K),
    /// The object's last state before deletion.
    Deleted(K),
    Bookmark(Bookmark),
    /// The server ended the watch with an error (`410` = Gone: relist).
    Error(ApiError),
}

/// One page of a LIST reply.
#[derive(Clone, Debug, PartialEq)]
pub struct ListPage<K> {
    pub items: Vec<K>,
    /// `metadata.resourceVersion`: the list's snapshot.
    pub resource_version: String,
    /// `metadata.continue`: more pages follow (None on the last).
    pub continue_token: Option<String>,
}

/// Splits a byte stream into lines and decodes each as a watch event.
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already searched for a newline.
    scanned: usize,
    limit: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(MAX_LINE)
    }
}

impl Decoder {
    /// A decoder refusing lines longer than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Decoder {
            buf: Vec::new(),
            scanned: 0,
            limit,
        }
    }

    /// Adds the next chunk of the body.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete event, if a whole line is buffered. After an error
    /// the stream is unusable: the caller drops it and watches again.
    pub fn next_event<K: DeserializeOwned>(
        &mut self,
    ) -> Option<Result<WatchEvent<K>, DecodeError>> {
        loop {
            let nl = match self.buf[self.scanned..].iter().position(|b| *b == b'\n') {
                Some(i) => self.scanned + i,
                None => {
                    self.scanned = self.buf.len();
                    if self.buf.len() > self.limit {
                        return Some(Err(DecodeError::LineTooLong { limit: self.limit }));
                    }
                    return None;
                }
            };
            if nl > self.limit {
                return Some(Err(DecodeError::LineTooLong { limit: self.limit }));
            }
            let line: Vec<u8> = self.buf.drain(..=nl).collect();
            self.scanned = 0;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(decode_event(&line));
        }
    }

    /// The stream ended: an error if part of a line is left over.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.buf.iter().all(u8::is_ascii_whitespace) {
            Ok(())
        } else {
            Err(DecodeError::Truncated {
                pending: self.buf.len(),
            })
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct BookmarkMeta {
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct BookmarkObject {
    #[serde(default)]
    metadata: BookmarkMeta,
}

/// `{"type": T, "object": O}`, with O decoded according to T.
struct EventVisitor<K>(std::marker::PhantomData<K>);

impl<'de, K: DeserializeOwned> Visitor<'de> for EventVisitor<K> {
    type Value = WatchEvent<K>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a watch event {\"type\": ..., \"object\": ...}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut ty: Option<String> = None;
        let mut event = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "type" => ty = Some(map.next_value()?),
                "object" => {
                    let Some(t) = ty.as_deref() else {
                        return Err(de::Error::custom("\"object\" before \"type\""));
                    };
                    event = Some(match t {
                        "ADDED" => WatchEvent::Added(map.next_value()?),
                        "MODIFIED" => WatchEvent::Modified(map.next_value()?),
                        "DELETED" => WatchEvent::Deleted(map.next_value()?),
                        "BOOKMARK" => {
                            let b: BookmarkObject = map.next_value()?;
                            WatchEvent::Bookmark(Bookmark {
                                resource_version: b.metadata.resource_version,
                                initial_events_end: b
                                    .metadata
                                    .annotations
                                    .get(INITIAL_EVENTS_END)
                                    .is_some_and(|v| v == "true"),
                            })
                        }
                        "ERROR" => {
                            WatchEvent::Error(ApiError::from_status(&map.next_value::<Status>()?))
                        }
                        other => {
                            return Err(de::Error::unknown_variant(
                                other,
                                &["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"],
                            ))
                        }
                    });
                }
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        event.ok_or_else(|| de::Error::missing_field("object"))
    }
}

struct EventSeed<K>(std::marker::PhantomData<K>);

impl<'de, K: DeserializeOwned> de::DeserializeSeed<'de> for EventSeed<K> {
    type Value = WatchEvent<K>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(EventVisitor(std::marker::PhantomData))
    }
}

/// Decodes one watch line.
pub fn decode_event<K: DeserializeOwned>(line: &[u8]) -> Result<WatchEvent<K>, DecodeError> {
    let text = std::str::from_utf8(line).map_err(|_| DecodeError::NotUtf8 {
        what: "watch event",
    })?;
    let mut d = serde_json::Deserializer::from_str(text);
    let decoded = de::DeserializeSeed::deserialize(EventSeed(std::marker::PhantomData), &mut d)
        .and_then(|ev| d.end().map(|()| ev));
    decoded.map_err(|source| DecodeError::MalformedEvent {
        source,
        snippet: snippet(line),
    })
}

/// A LIST reply's body. Not `k8s_openapi::List`: that one insists on one
/// `kind` (its type's `LIST_KIND`), but the API server names a list by its
/// items (`ConfigMapList`, `SecretList`, `PodList`, ...) and a client may
/// also meet the generic `List`; one slim type read for ConfigMaps and
/// Secrets alike has no single list kind. The `kind` is still checked: it
/// must name a list, so a `Status` (or any other object) answered with 200
/// is malformed, never an empty set.
struct ListBody<K> {
    items: Vec<K>,
    metadata: ListMeta,
}

/// Whether `kind` names a list: `List`, or a type's list (`PodList`).
pub fn is_list_kind(kind: &str) -> bool {
    kind.ends_with("List")
}

impl<'de, K: Deserialize<'de>> Deserialize<'de> for ListBody<K> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<K>(std::marker::PhantomData<K>);
        impl<'de, K: Deserialize<'de>> Visitor<'de> for V<K> {
            type Value = ListBody<K>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list (kind List or <Kind>List)")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut items: Option<Vec<K>> = None;
                let mut metadata: Option<ListMeta> = None;
                while let Some(key) = map.next_key::<ListField>()? {
                    match key {
                        ListField::Kind => {
                            let kind: String = map.next_value()?;
                            if !is_list_kind(&kind) {
                                return Err(de::Error::invalid_value(
                                    de::Unexpected::Str(&kind),
                                    &"List or <Kind>List",
                                ));
                            }
                        }
                        ListField::Items => items = map.next_value()?,
                        ListField::Metadata => metadata = map.next_value()?,
                        ListField::Other => {
                            map.next_value::<de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(ListBody {
                    items: items.unwrap_or_default(),
                    metadata: metadata.unwrap_or_default(),
                })
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// The fields of a list body read by [`ListBody`].
enum ListField {
    Kind,
    Items,
    Metadata,
    Other,
}

impl<'de> Deserialize<'de> for ListField {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ListField;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<ListField, E> {
                Ok(match v {
                    "kind" => ListField::Kind,
                    "items" => ListField::Items,
                    "metadata" => ListField::Metadata,
                    _ => ListField::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

/// Decodes a LIST reply body, whatever list kind the server names it
/// (see [`ListBody`]).
pub fn decode_list<K>(body: &[u8]) -> Result<ListPage<K>, DecodeError>
where
    K: DeserializeOwned,
{
    let text = std::str::from_utf8(body).map_err(|_| DecodeError::NotUtf8 { what: "list" })?;
    let list: ListBody<K> =
        serde_json::from_str(text).map_err(|source| DecodeError::MalformedList {
            source,
            snippet: snippet(body),
        })?;
    let resource_version = list
        .metadata
        .resource_version
        .filter(|rv| !rv.is_empty())
        .ok_or(DecodeError::ListWithoutResourceVersion)?;
    Ok(ListPage {
        items: list.items,
        resource_version,
        continue_token: list.metadata.continue_.filter(|c| !c.is_empty()),
    })
}

/// The start of a line, for a message.
fn snippet(bytes: &[u8]) -> String {
    const N: usize = 120;
    let s = String::from_utf8_lossy(&bytes[..bytes.len().min(N)]);
    let mut s = s.trim().replace('\n', " ");
    if bytes.len() > N {
        s.push_str("...");
    }
    s
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    fn pod_line(ty: &str, name: &str, rv: &str) -> String {
        format!(
            "{{\"type\":\"{ty}\",\"object\":{{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\
             \"metadata\":{{\"name\":\"{name}\",\"namespace\":\"default\",\"uid\":\"u-{name}\",\
             \"resourceVersion\":\"{rv}\"}},\"spec\":{{\"containers\":[]}}}}}}\n"
        )
    }

    fn all(d: &mut Decoder) -> Vec<Result<WatchEvent<Pod>, DecodeError>> {
        std::iter::from_fn(|| d.next_event::<Pod>()).collect()
    }

    fn name(e: &WatchEvent<Pod>) -> String {
        match e {
            WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p) => {
                p.metadata.name.clone().unwrap()
            }
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn events_split_across_chunks_are_reassembled() {
        let stream = pod_line("ADDED", "a", "1") + &pod_line("MODIFIED", "b", "2");
        for cut in [1, 7, 50, stream.len() / 2, stream.len() - 1] {
            let mut d = Decoder::default();
            let mut got = Vec::new();
            for chunk in stream.as_bytes().chunks(cut) {
                d.push(chunk);
                got.extend(all(&mut d).into_iter().map(|e| name(&e.unwrap())));
            }
            assert_eq!(got, vec!["a", "b"], "chunk size {cut}");
            d.finish().unwrap();
        }
    }

    #[test]
    fn every_event_type_is_decoded() {
        let mut d = Decoder::default();
        d.push(pod_line("ADDED", "a", "1").as_bytes());
        d.push(pod_line("MODIFIED", "a", "2").as_bytes());
        d.push(pod_line("DELETED", "a", "3").as_bytes());
        d.push(b"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"4\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n");
        d.push(b"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"5\"}}}\n");
        d.push(b"\n{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: 1 (9)\",\"reason\":\"Expired\",\"code\":410}}\n");
        let got: Vec<_> = all(&mut d).into_iter().map(Result::unwrap).collect();
        assert!(
            matches!(&got[0], WatchEvent::Added(p) if p.metadata.resource_version.as_deref() == Some("1"))
        );
        assert!(matches!(&got[1], WatchEvent::Modified(_)));
        assert!(matches!(&got[2], WatchEvent::Deleted(_)));
        assert_eq!(
            got[3],
            WatchEvent::Bookmark(Bookmark {
                resource_version: "4".into(),
                initial_events_end: true
            })
        );
        assert_eq!(
            got[4],
            WatchEvent::Bookmark(Bookmark {
                resource_version: "5".into(),
                initial_events_end: false
            })
        );
        match &got[5] {
            WatchEvent::Error(e) => {
                assert_eq!(e.code, 410);
                assert!(e.is_gone());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(got.len(), 6);
    }

    #[test]
    fn a_malformed_line_is_an_error_and_never_a_panic() {
        let table: &[&[u8]] = &[
            b"{not json}\n",
            b"{\"type\":\"ADDED\"}\n",
            b"{\"type\":\"EXPLODED\",\"object\":{}}\n",
            b"{\"type\":\"ADDED\",\"object\":{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{}}}\n",
            b"<html><title>502 Bad Gateway</title></html>\n",
            b"{\"object\":{\"metadata\":{\"name\":\"a\"}},\"type\":\"ADDED\"}\n",
            b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{}}} trailing\n",
        ];
        for line in table {
            let mut d = Decoder::default();
            d.push(line);
            let r = d.next_event::<Pod>().unwrap();
            assert!(
                matches!(r, Err(DecodeError::MalformedEvent { .. })),
                "{line:?}: {r:?}"
            );
        }
        let mut d = Decoder::default();
        d.push(b"\xff\xfe\n");
        let r = d.next_event::<Pod>().unwrap();
        assert!(matches!(r, Err(DecodeError::NotUtf8 { .. })), "{r:?}");
    }

    #[test]
    fn a_stream_cut_mid_event_is_truncated_not_empty() {
        let line = pod_line("ADDED", "a", "1");
        let mut d = Decoder::default();
        d.push(&line.as_bytes()[..line.len() - 5]);
        assert!(d.next_event::<Pod>().is_none());
        let e = d.finish().unwrap_err();
        assert!(matches!(e, DecodeError::Truncated { .. }), "{e}");
        let mut d = Decoder::default();
        d.push(b"  \n\n");
        assert!(d.next_event::<Pod>().is_none());
        d.finish().unwrap();
    }

    #[test]
    fn a_line_over_the_limit_is_refused() {
        let mut d = Decoder::new(64);
        d.push(&[b'x'; 65]);
        assert!(matches!(
            d.next_event::<Pod>(),
            Some(Err(DecodeError::LineTooLong { limit: 64 }))
        ));
        let mut d = Decoder::new(64);
        let mut long = vec![b' '; 100];
        long.push(b'\n');
        d.push(&long);
        assert!(matches!(
            d.next_event::<Pod>(),
            Some(Err(DecodeError::LineTooLong { .. }))
        ));
    }

    #[test]
    fn a_list_page_gives_items_version_and_continue_token() {
        let body = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"77","continue":"tok"},"items":[{"metadata":{"name":"a","namespace":"default","uid":"u"}}]}"#;
        let page = decode_list::<Pod>(body).unwrap();
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.resource_version, "77");
        assert_eq!(page.continue_token.as_deref(), Some("tok"));
        let body = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"78","continue":""},"items":[]}"#;
        let page = decode_list::<Pod>(body).unwrap();
        assert!(page.items.is_empty());
        assert_eq!(page.continue_token, None);
    }

    #[test]
    fn a_list_is_read_whatever_list_kind_the_server_names_it() {
        for kind in [
            "PodList",
            "ConfigMapList",
            "SecretList",
            "ServiceList",
            "List",
        ] {
            let body = format!(
                r#"{{"kind":"{kind}","apiVersion":"v1","metadata":{{"resourceVersion":"9"}},"items":[{{"metadata":{{"name":"a"}}}}]}}"#
            );
            let page =
                decode_list::<Pod>(body.as_bytes()).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(page.items.len(), 1, "{kind}");
            assert_eq!(page.resource_version, "9", "{kind}");
        }
        let body = br#"{"metadata":{"resourceVersion":"9"},"items":null}"#;
        assert!(
            decode_list::<Pod>(body).unwrap().items.is_empty(),
            "no kind, null items"
        );
    }

    #[test]
    fn an_object_that_is_not_a_list_is_a_malformed_list() {
        let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{"resourceVersion":"9"},"status":"Failure"}"#;
        let e = decode_list::<Pod>(body).unwrap_err();
        assert!(matches!(e, DecodeError::MalformedList { .. }), "{e}");
        assert!(!is_list_kind("ConfigMap"));
        assert!(is_list_kind("ConfigMapList"));
    }

    #[test]
    fn an_empty_or_versionless_list_reply_is_an_error_not_an_empty_set() {
        let table: &[&[u8]] = &[
            b"",
            b"{}",
            br#"{"items":[]}"#,
            br#"{"metadata":{"resourceVersion":""},"items":[]}"#,
            br#"{"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a"}}"#,
            b"<html>gateway timeout</html>",
        ];
        for body in table {
            assert!(
                decode_list::<Pod>(body).is_err(),
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
