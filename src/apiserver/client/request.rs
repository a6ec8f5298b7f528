//! Pure: what an API request looks like on the wire, and what an error reply
//! means.
//!
//! Paths follow the API server's layout (`/api/v1/...` for the core group,
//! `/apis/<group>/<version>/...` otherwise), built from k8s-openapi's
//! [`Resource`] constants. Query strings for LIST and WATCH are built from
//! a [`reflector::Request`](crate::apiserver::listwatch::reflector::Request) plus the resource's
//! [`Selectors`]. A non-2xx reply becomes an [`ApiError`]: the
//! `metav1.Status` the API server sends, or, for anything else (an HTML
//! page from a proxy, plain text, nothing), the HTTP status and a short,
//! single-line snippet of the body.

use std::fmt;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use k8s_openapi::Resource;

use crate::apiserver::listwatch::reflector::Request;

/// How long a LIST page (or any non-watch request) may take.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(60);
/// The `Accept` of a write whose answer is not read: the object's
/// metadata alone, in protobuf (a Node's status patch is answered with
/// 1.2 KB instead of the whole Node's 4.9 KB of JSON). An error still
/// comes back as a JSON Status: the API server encodes a Status as
/// PartialObjectMetadata cannot be, and falls back to JSON.
pub const METADATA_ONLY: &str =
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
/// How much longer than its `timeoutSeconds` a watch may last before the
/// client gives up on it (the server ends it at `timeoutSeconds`).
pub const WATCH_SLACK: Duration = Duration::from_secs(30);
/// The most characters of a non-Status error body quoted in a message.
const SNIPPET: usize = 160;

/// The selectors of a watched collection, e.g. `spec.nodeName=<node>` for
/// pods, `metadata.name=<node>` for the node itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selectors {
    pub field_selector: Option<String>,
    pub label_selector: Option<String>,
}

impl Selectors {
    /// Only objects whose fields match, e.g. `spec.nodeName=pi`.
    pub fn fields(selector: impl Into<String>) -> Self {
        Selectors {
            field_selector: Some(selector.into()),
            label_selector: None,
        }
    }
}

/// `/api/v1` or `/apis/<group>/<version>`.
fn group_version_prefix<K: Resource>() -> String {
    if K::GROUP.is_empty() {
        format!("/api/{}", K::VERSION)
    } else {
        format!("/apis/{}/{}", K::GROUP, K::VERSION)
    }
}

/// The collection path: `/api/v1/pods` (every namespace, or a cluster-scoped
/// resource) or `/api/v1/namespaces/<ns>/pods`.
pub fn collection_path<K: Resource>(namespace: Option<&str>) -> String {
    let mut p = group_version_prefix::<K>();
    if let Some(ns) = namespace {
        p.push_str("/namespaces/");
        push_segment(&mut p, ns);
    }
    p.push('/');
    p.push_str(K::URL_PATH_SEGMENT);
    p
}

/// One object's path: the collection path plus `/<name>`.
pub fn object_path<K: Resource>(namespace: Option<&str>, name: &str) -> String {
    let mut p = collection_path::<K>(namespace);
    p.push('/');
    push_segment(&mut p, name);
    p
}

fn push_segment(out: &mut String, segment: &str) {
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':' | b'@') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

/// Appends `key=value` to a query string, percent-encoding the value.
pub fn push_param(query: &mut String, key: &str, value: &str) {
    if !query.is_empty() {
        query.push('&');
    }
    query.push_str(key);
    query.push('=');
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            query.push(b as char);
        } else {
            query.push_str(&format!("%{b:02X}"));
        }
    }
}

impl Request {
    /// The query string (without `?`) of this request for `selectors`.
    pub fn query(&self, selectors: &Selectors) -> String {
        let mut q = String::new();
        match self {
            Request::List {
                limit,
                continue_token,
            } => {
                push_param(&mut q, "limit", &limit.to_string());
                if let Some(c) = continue_token {
                    push_param(&mut q, "continue", c);
                }
            }
            Request::Watch {
                resource_version,
                timeout_seconds,
            } => {
                push_param(&mut q, "watch", "1");
                push_param(&mut q, "resourceVersion", resource_version);
                push_param(&mut q, "allowWatchBookmarks", "true");
                push_param(&mut q, "timeoutSeconds", &timeout_seconds.to_string());
            }
            Request::StreamingList { timeout_seconds } => {
                push_param(&mut q, "watch", "1");
                push_param(&mut q, "sendInitialEvents", "true");
                push_param(&mut q, "resourceVersionMatch", "NotOlderThan");
                push_param(&mut q, "allowWatchBookmarks", "true");
                push_param(&mut q, "timeoutSeconds", &timeout_seconds.to_string());
            }
        }
        if let Some(f) = &selectors.field_selector {
            push_param(&mut q, "fieldSelector", f);
        }
        if let Some(l) = &selectors.label_selector {
            push_param(&mut q, "labelSelector", l);
        }
        q
    }

    /// `collection?query`.
    pub fn path_and_query(&self, collection: &str, selectors: &Selectors) -> String {
        format!("{collection}?{}", self.query(selectors))
    }

    /// Whether the reply is a stream of watch events (else one list page).
    pub fn is_watch(&self) -> bool {
        !matches!(self, Request::List { .. })
    }

    /// How long the whole request, body included, may take.
    pub fn deadline(&self) -> Duration {
        match self {
            Request::List { .. } => REQUEST_DEADLINE,
            Request::Watch {
                timeout_seconds, ..
            }
            | Request::StreamingList { timeout_seconds } => {
                Duration::from_secs(u64::from(*timeout_seconds)) + WATCH_SLACK
            }
        }
    }
}

/// An error answer of the API server (or of something in front of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status code (for a watch ERROR event: the Status's code).
    pub code: u16,
    /// `metav1.Status.reason` (`NotFound`, `Expired`, ...) or, for a reply
    /// that is not a Status, the HTTP reason phrase.
    pub reason: String,
    /// `metav1.Status.message`, or a one-line snippet of the body.
    pub message: String,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code, self.reason)?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    /// From a `metav1.Status` (a watch ERROR event); `code` 0 or missing
    /// becomes 500.
    pub fn from_status(s: &Status) -> Self {
        ApiError {
            code: s
                .code
                .and_then(|c| u16::try_from(c).ok())
                .filter(|c| *c != 0)
                .unwrap_or(500),
            reason: s.reason.clone().unwrap_or_default(),
            message: s.message.clone().unwrap_or_default(),
        }
    }

    /// From an HTTP reply: the body's `metav1.Status` (JSON or protobuf)
    /// if it is one, else the status line and a snippet of the body.
    pub fn from_reply(code: u16, body: &[u8]) -> Self {
        // from_str: the one JSON entry point (see `watch`).
        // A watch that asked for protobuf may get its error in protobuf.
        let parsed = std::str::from_utf8(body)
            .ok()
            .and_then(|t| serde_json::from_str::<Status>(t).ok())
            .or_else(|| super::protobuf::status(body).ok());
        if let Some(s) = parsed {
            if s.reason.is_some() || s.message.is_some() {
                let mut e = ApiError::from_status(&s);
                e.code = code;
                return e;
            }
        }
        let reason = http::StatusCode::from_u16(code)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("")
            .to_string();
        ApiError {
            code,
            reason,
            message: snippet(body),
        }
    }

    /// `410 Gone` or "too old resource version" (`Expired`): the requested
    /// resourceVersion is no longer available; relist.
    pub fn is_gone(&self) -> bool {
        self.code == 410
            || self.reason == "Expired"
            || self.reason == "Gone"
            || self.message.contains("too old resource version")
    }

    /// The server says it cannot serve the request as asked, whoever asks:
    /// 400 (BadRequest), 405, 406, 415, 422 (Invalid: what a server with
    /// the WatchList feature off answers `sendInitialEvents`) or 501. Not
    /// 401/403 (who asks, and the Node authorizer may not know yet of a
    /// pod just bound), 404, 409 nor 429, and not a 5xx.
    pub fn refuses_request_form(&self) -> bool {
        matches!(self.code, 400 | 405 | 406 | 415 | 422 | 501)
    }

    /// A client error that retrying cannot fix by itself (400, 401, 403,
    /// 404, 422, ...); not 408 (timeout), 410 (relist) nor 429 (throttled).
    pub fn is_client_error(&self) -> bool {
        (400..500).contains(&self.code) && !matches!(self.code, 408 | 410 | 429)
    }
}

/// One line of text from a body for a message: an HTML page's `<title>`,
/// else the first characters with whitespace collapsed.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(4096)]);
    let lower = text.to_ascii_lowercase();
    let text = match (lower.find("<title>"), lower.find("</title>")) {
        (Some(a), Some(b)) if a + 7 <= b => format!("HTML page: {}", &text[a + 7..b]),
        _ if lower.trim_start().starts_with('<') => "HTML page".to_string(),
        _ => text.into_owned(),
    };
    let mut out = String::new();
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.chars().count() > SNIPPET {
        out = out.chars().take(SNIPPET).collect::<String>() + "...";
    }
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::{Node, Pod};

    use super::*;

    #[test]
    fn paths_follow_the_api_server_layout() {
        assert_eq!(collection_path::<Pod>(None), "/api/v1/pods");
        assert_eq!(
            collection_path::<Pod>(Some("kube-system")),
            "/api/v1/namespaces/kube-system/pods"
        );
        assert_eq!(object_path::<Node>(None, "pi"), "/api/v1/nodes/pi");
        assert_eq!(
            object_path::<Lease>(Some("kube-node-lease"), "pi"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/pi"
        );
        assert_eq!(
            object_path::<Node>(None, "a b/c"),
            "/api/v1/nodes/a%20b%2Fc"
        );
    }

    #[test]
    fn queries_carry_every_list_and_watch_parameter() {
        let pods = Selectors::fields("spec.nodeName=pi");
        let table = [
            (
                Request::List {
                    limit: 500,
                    continue_token: None,
                },
                "limit=500&fieldSelector=spec.nodeName%3Dpi",
            ),
            (
                Request::List {
                    limit: 500,
                    continue_token: Some("abc/+=".into()),
                },
                "limit=500&continue=abc%2F%2B%3D&fieldSelector=spec.nodeName%3Dpi",
            ),
            (
                Request::Watch {
                    resource_version: "1234".into(),
                    timeout_seconds: 417,
                },
                "watch=1&resourceVersion=1234&allowWatchBookmarks=true&timeoutSeconds=417\
                 &fieldSelector=spec.nodeName%3Dpi",
            ),
            (
                Request::StreamingList {
                    timeout_seconds: 300,
                },
                "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan\
                 &allowWatchBookmarks=true&timeoutSeconds=300&fieldSelector=spec.nodeName%3Dpi",
            ),
        ];
        for (req, want) in table {
            assert_eq!(req.query(&pods), want, "{req:?}");
        }
        let labels = Selectors {
            field_selector: None,
            label_selector: Some("app in (a,b)".into()),
        };
        assert_eq!(
            Request::List {
                limit: 1,
                continue_token: None
            }
            .path_and_query("/api/v1/pods", &labels),
            "/api/v1/pods?limit=1&labelSelector=app%20in%20%28a%2Cb%29"
        );
    }

    #[test]
    fn a_watch_may_last_its_timeout_plus_slack_and_a_list_a_minute() {
        let w = Request::Watch {
            resource_version: "1".into(),
            timeout_seconds: 300,
        };
        assert_eq!(w.deadline(), Duration::from_secs(330));
        assert!(w.is_watch());
        let l = Request::List {
            limit: 1,
            continue_token: None,
        };
        assert_eq!(l.deadline(), REQUEST_DEADLINE);
        assert!(!l.is_watch());
    }

    #[test]
    fn a_status_reply_gives_reason_and_message() {
        let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}"#;
        let e = ApiError::from_reply(410, body);
        assert_eq!(e.reason, "Expired");
        assert!(e.is_gone());
        assert!(!e.is_client_error());
        assert_eq!(
            e.to_string(),
            "410 Expired: too old resource version: 1 (2)"
        );
    }

    #[test]
    fn a_proxys_html_page_is_summarised_by_its_title() {
        let body = b"<html>\n<head><title>502 Bad Gateway</title></head>\n<body>...</body></html>";
        let e = ApiError::from_reply(502, body);
        assert_eq!(e.reason, "Bad Gateway");
        assert_eq!(e.message, "HTML page: 502 Bad Gateway");
        assert!(!e.is_gone());
        assert!(!e.is_client_error());
    }

    #[test]
    fn other_bodies_become_one_short_line() {
        let long = "word\n".repeat(100);
        let e = ApiError::from_reply(503, long.as_bytes());
        assert!(!e.message.contains('\n'));
        assert!(e.message.ends_with("..."));
        assert!(e.message.chars().count() <= SNIPPET + 3);
        let e = ApiError::from_reply(500, b"");
        assert_eq!(e.to_string(), "500 Internal Server Error");
        let e = ApiError::from_reply(403, b"{\"kind\":\"Status\"}");
        assert_eq!(e.reason, "Forbidden");
        assert!(e.is_client_error());
    }

    #[test]
    fn only_a_bad_request_or_unsupported_form_refuses_the_request_form() {
        for code in [400, 405, 406, 415, 422, 501] {
            assert!(
                ApiError::from_reply(code, b"").refuses_request_form(),
                "{code}"
            );
        }
        for code in [401, 403, 404, 409, 410, 429, 500, 503] {
            assert!(
                !ApiError::from_reply(code, b"").refuses_request_form(),
                "{code}"
            );
        }
    }

    #[test]
    fn a_watch_error_event_status_keeps_its_code() {
        let s = Status {
            code: Some(410),
            reason: Some("Gone".into()),
            message: Some("x".into()),
            ..Default::default()
        };
        assert!(ApiError::from_status(&s).is_gone());
        let s = Status {
            message: Some("too old resource version: 5 (9)".into()),
            ..Default::default()
        };
        let e = ApiError::from_status(&s);
        assert_eq!(e.code, 500);
        assert!(e.is_gone());
    }
}
