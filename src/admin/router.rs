//! A small HTTP router: method and path to a handler, with the 404 and 405
//! answers in one place. The admin socket uses it today; the node API (the
//! kubelet's `:10250` endpoints) is meant to register its routes on the
//! same type.
//!
//! A pattern is an exact path (`/healthz`) or a prefix ending in `/*`
//! (`/containerLogs/*` matches `/containerLogs/ns/pod/c`). Routes are tried
//! in the order they were added. A path no route matches is 404; a path
//! some route matches, but not with this method, is 405 with an `Allow`
//! header listing the methods that would work.
//!
//! Most answers are data, not code: a fixed text, a JSON document, rendered
//! text. [`Handler`] says which, so registering the common routes costs no
//! closure of its own (each boxed closure is a vtable in the binary);
//! [`Handler::Custom`] sees the request head for everything else. Handlers
//! answer synchronously from state they hold and never see the body.
//!
//! One kind of route streams: [`Handler::Stream`] (container logs with
//! `follow`) answers a [`Reply`], whose body may be fed, chunk by chunk,
//! by a task the handler spawned, through a bounded channel. Serve with
//! [`Router::respond`] to get those; [`Router::handle`] answers whole bodies
//! only (a streamed answer there is a 501).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Method, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Frame;
use smol::channel::Receiver;
use smol::stream::{Stream, StreamExt};

/// A response body: the whole answer in memory.
pub type Body = Full<Bytes>;

/// Answers a request from its head ([`Handler::Custom`]).
pub type HandlerFn = Rc<dyn Fn(&Parts) -> Response<Body>>;

/// Answers a request from its head, maybe with a streamed body
/// ([`Handler::Stream`]).
pub type StreamFn = Rc<dyn Fn(&Parts) -> Response<Reply>>;

/// Answers a request from its owned head, later ([`Handler::Upgrade`]).
pub type UpgradeFn = Rc<dyn Fn(Parts) -> Pin<Box<dyn Future<Output = Response<Reply>>>>>;

/// A response body that is either whole or streamed: chunks arrive on the
/// channel, and the body ends when every sender is gone. When the client
/// goes away, the body (the receiver) is dropped and the feeding task's
/// next send fails: that is its signal to stop.
pub enum Reply {
    Whole(Body),
    Stream(Streamed),
}

/// A streamed body: a first chunk already taken off the channel (see
/// [`Router::serve`]), then what the channel brings.
pub struct Streamed {
    first: Option<Bytes>,
    /// Boxed: the receiver's wait for a message is not `Unpin`.
    rx: Pin<Box<Receiver<Bytes>>>,
    /// The channel ended and the body said "not yet" once, so that the
    /// last chunk was flushed before the end.
    ending: bool,
}

impl Reply {
    /// A body fed by the senders of `rx`.
    pub fn stream(rx: Receiver<Bytes>) -> Reply {
        Reply::Stream(Streamed {
            first: None,
            rx: Box::pin(rx),
            ending: false,
        })
    }
}

/// How long [`Router::serve`] holds a streamed answer's head for its
/// first chunk: well under the servers' connection timeout, which a
/// streamed answer is exempt from only once its head is out.
pub const FIRST_CHUNK_WAIT: Duration = Duration::from_secs(2);

/// Holds a streamed answer until its first chunk is there (or the stream
/// ended, or [`FIRST_CHUNK_WAIT`] passed), so the head and the first chunk
/// leave in one write, as Go's kubelet sends them (its head goes out with
/// the first write). The WebSocket log fix itself is the held-back end in
/// [`Reply`]'s `poll_frame`; this only matches kubelet's framing.
async fn prime(r: Response<Reply>) -> Response<Reply> {
    let (parts, body) = r.into_parts();
    let Reply::Stream(mut s) = body else {
        return Response::from_parts(parts, body);
    };
    if s.first.is_none() {
        let next = async { Some(s.rx.as_mut().next().await) };
        let wait = async {
            smol::Timer::after(FIRST_CHUNK_WAIT).await;
            None
        };
        // `Some(None)`: the stream ended before any chunk; the body then
        // ends at once too, as the channel is closed.
        if let Some(Some(chunk)) = smol::future::or(next, wait).await {
            s.first = Some(chunk);
        }
    }
    Response::from_parts(parts, Reply::Stream(s))
}

impl hyper::body::Body for Reply {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Reply::Whole(body) => Pin::new(body).poll_frame(cx),
            Reply::Stream(s) => {
                if let Some(c) = s.first.take() {
                    return Poll::Ready(Some(Ok(Frame::data(c))));
                }
                match s.rx.as_mut().poll_next(cx) {
                    Poll::Ready(Some(c)) => Poll::Ready(Some(Ok(Frame::data(c)))),
                    // The end is held back once: hyper then flushes the
                    // last chunk, and the chunked body's end goes in a
                    // write (a TLS record) of its own. The API server's
                    // WebSocket log streamer (wsstream's messageCopy)
                    // drops a read's data when the same read also brings
                    // the end, so a short log sent whole reached a
                    // `kubectl logs` over WebSocket empty; Go's server,
                    // kubelet's, writes the end apart too.
                    Poll::Ready(None) if !s.ending => {
                        s.ending = true;
                        cx.waker().wake_by_ref();
                        Poll::Pending
                    }
                    other => other.map(|chunk| chunk.map(|c| Ok(Frame::data(c)))),
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Reply::Whole(body) => body.is_end_stream(),
            Reply::Stream(_) => false,
        }
    }
}

/// What answers a route.
#[derive(Clone)]
pub enum Handler {
    /// A fixed `text/plain` answer.
    Text(&'static str),
    /// The value as `application/json` (500 if it cannot be encoded).
    Json(Rc<dyn Fn() -> serde_json::Value>),
    /// The rendered text, with this `Content-Type`.
    Render(Rc<dyn Fn() -> String>, &'static str),
    /// Anything else: the request head in, the response out.
    Custom(HandlerFn),
    /// The request head in, a whole or streamed response out.
    Stream(StreamFn),
    /// The owned request head in, a response (often a 101 whose task
    /// takes the upgraded connection) out, asynchronously.
    Upgrade(UpgradeFn),
}

impl Handler {
    fn answer(&self, req: &Parts) -> Response<Body> {
        match self {
            Handler::Text(body) => text(StatusCode::OK, body),
            Handler::Json(value) => match serde_json::to_vec(&value()) {
                Ok(body) => typed(body, "application/json"),
                Err(e) => {
                    log::error!("{}: encoding the answer: {e}", req.uri.path());
                    text(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "encoding the answer failed\n",
                    )
                }
            },
            Handler::Render(render, content_type) => typed(render(), content_type),
            Handler::Custom(f) => f(req),
            Handler::Stream(f) => match f(req).into_parts() {
                (head, Reply::Whole(body)) => Response::from_parts(head, body),
                (_, Reply::Stream(_)) => streams(),
            },
            Handler::Upgrade(_) => streams(),
        }
    }
}

/// Whether `pattern` (see the module docs) matches `path`.
fn matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) if prefix.ends_with('/') => path.starts_with(prefix),
        _ => pattern == path,
    }
}

#[derive(Clone)]
struct Route {
    method: Method,
    pattern: &'static str,
    handler: Handler,
}

/// Routes, tried in order.
#[derive(Clone, Default)]
pub struct Router {
    routes: Vec<Route>,
}

impl Router {
    /// A router with no routes: everything is 404.
    pub fn new() -> Router {
        Router::default()
    }

    /// Adds a route for `method` on `pattern` (see the module docs).
    pub fn route(mut self, method: Method, pattern: &'static str, handler: Handler) -> Router {
        self.routes.push(Route {
            method,
            pattern,
            handler,
        });
        self
    }

    /// Adds a `GET` route.
    pub fn get(self, pattern: &'static str, handler: Handler) -> Router {
        self.route(Method::GET, pattern, handler)
    }

    /// Answers a request: the first route matching its method and path,
    /// else 405 (the path is known) or 404. Whole bodies only.
    pub fn handle(&self, req: &Parts) -> Response<Body> {
        match self.find(req) {
            Ok(handler) => handler.answer(req),
            Err(allow) => refusal(&allow),
        }
    }

    /// Like [`Router::handle`], with streamed answers too.
    pub fn respond(&self, req: &Parts) -> Response<Reply> {
        match self.find(req) {
            Ok(Handler::Stream(f)) => f(req),
            Ok(Handler::Upgrade(_)) => streams().map(Reply::Whole),
            Ok(handler) => handler.answer(req).map(Reply::Whole),
            Err(allow) => refusal(&allow).map(Reply::Whole),
        }
    }

    /// Like [`Router::respond`], with upgrades too: what the servers call.
    pub async fn serve(&self, req: Parts) -> Response<Reply> {
        match self.find(&req) {
            Ok(Handler::Upgrade(f)) => {
                let f = f.clone();
                f(req).await
            }
            _ => prime(self.respond(&req)).await,
        }
    }

    /// The handler of the request's route, or the methods the path allows
    /// (none: it is unknown).
    fn find(&self, req: &Parts) -> Result<&Handler, String> {
        let path = req.uri.path();
        let mut allow = String::new();
        for r in self.routes.iter().filter(|r| matches(r.pattern, path)) {
            if r.method == req.method {
                return Ok(&r.handler);
            }
            if !allow.split(", ").any(|m| m == r.method.as_str()) {
                if !allow.is_empty() {
                    allow.push_str(", ");
                }
                allow.push_str(r.method.as_str());
            }
        }
        Err(allow)
    }
}

/// The synchronous answer to a route that streams or upgrades.
fn streams() -> Response<Body> {
    text(
        StatusCode::NOT_IMPLEMENTED,
        "this answer streams; this server sends whole answers only\n",
    )
}

/// 404 when no method is allowed, else 405 with the `Allow` header.
fn refusal(allow: &str) -> Response<Body> {
    if allow.is_empty() {
        return text(StatusCode::NOT_FOUND, "not found\n");
    }
    let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    if let Ok(allow) = HeaderValue::from_str(allow) {
        r.headers_mut().insert(header::ALLOW, allow);
    }
    r
}

/// A `text/plain` answer.
pub fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = typed(
        Bytes::from_static(body.as_bytes()),
        "text/plain; charset=utf-8",
    );
    *r.status_mut() = status;
    r
}

/// A 200 answer with this body and `Content-Type`.
pub fn typed(body: impl Into<Bytes>, content_type: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;
    use http_body_util::BodyExt;

    fn head(method: Method, uri: &str) -> Parts {
        Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .unwrap()
            .into_parts()
            .0
    }

    fn body(r: Response<Body>) -> String {
        let bytes = crate::rt::block_on(r.into_body().collect())
            .unwrap()
            .to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn router() -> Router {
        Router::new()
            .get("/healthz", Handler::Text("ok"))
            .route(
                Method::POST,
                "/healthz",
                Handler::Custom(Rc::new(|_| text(StatusCode::ACCEPTED, "posted"))),
            )
            .get(
                "/logs/*",
                Handler::Custom(Rc::new(|req| {
                    typed(req.uri.path().to_string(), "text/plain")
                })),
            )
            .get(
                "/pods",
                Handler::Json(Rc::new(|| serde_json::json!({"kind": "PodList"}))),
            )
            .get(
                "/metrics",
                Handler::Render(Rc::new(|| "up 1\n".into()), "text/plain; version=0.0.4"),
            )
    }

    #[test]
    fn a_request_goes_to_the_route_of_its_method_and_path() {
        let r = router().handle(&head(Method::GET, "/healthz?verbose=1"));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(body(r), "ok");
        let r = router().handle(&head(Method::POST, "/healthz"));
        assert_eq!(r.status(), StatusCode::ACCEPTED);
        let r = router().handle(&head(Method::GET, "/logs/ns/pod"));
        assert_eq!(r.headers()[header::CONTENT_TYPE], "text/plain");
        assert_eq!(body(r), "/logs/ns/pod");
        let r = router().handle(&head(Method::GET, "/pods"));
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(body(r), r#"{"kind":"PodList"}"#);
        let r = router().handle(&head(Method::GET, "/metrics"));
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/plain; version=0.0.4"
        );
        assert_eq!(body(r), "up 1\n");
    }

    #[test]
    fn a_streamed_answer_ends_when_its_senders_are_gone_and_handle_refuses_it() {
        let router = Router::new().get(
            "/stream",
            Handler::Stream(Rc::new(|req| {
                if req.uri.query() == Some("whole") {
                    return typed("all at once", "text/plain").map(Reply::Whole);
                }
                let (tx, rx) = smol::channel::bounded(2);
                tx.try_send(Bytes::from_static(b"one ")).unwrap();
                tx.try_send(Bytes::from_static(b"two")).unwrap();
                Response::new(Reply::stream(rx))
            })),
        );
        let r = router.respond(&head(Method::GET, "/stream"));
        let bytes = crate::rt::block_on(r.into_body().collect())
            .unwrap()
            .to_bytes();
        assert_eq!(&bytes[..], b"one two");
        let r = router.handle(&head(Method::GET, "/stream?whole"));
        assert_eq!(body(r), "all at once");
        let r = router.handle(&head(Method::GET, "/stream"));
        assert_eq!(r.status(), StatusCode::NOT_IMPLEMENTED);
        let r = router.respond(&head(Method::GET, "/nope"));
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn a_served_stream_holds_its_head_until_the_first_chunk_and_an_empty_one_ends() {
        // A sender that writes only after the handler returned, as the log
        // task does: serve's answer already holds that chunk.
        let router = Router::new().get(
            "/stream",
            Handler::Stream(Rc::new(|req| {
                let (tx, rx) = smol::channel::bounded(2);
                if req.uri.query() != Some("empty") {
                    crate::rt::spawn(async move {
                        let _ = tx.send(Bytes::from_static(b"container is alive\n")).await;
                    })
                    .detach();
                }
                Response::new(Reply::stream(rx))
            })),
        );
        let r = crate::rt::block_on(router.serve(head(Method::GET, "/stream")));
        let Reply::Stream(s) = r.body() else {
            panic!("not a stream")
        };
        assert_eq!(s.first.as_deref(), Some(&b"container is alive\n"[..]));
        let bytes = crate::rt::block_on(r.into_body().collect())
            .unwrap()
            .to_bytes();
        assert_eq!(&bytes[..], b"container is alive\n");
        let r = crate::rt::block_on(router.serve(head(Method::GET, "/stream?empty")));
        let bytes = crate::rt::block_on(r.into_body().collect())
            .unwrap()
            .to_bytes();
        assert!(bytes.is_empty());
    }

    #[test]
    fn an_unknown_path_is_404_and_a_wrong_method_is_405_with_allow() {
        let r = router().handle(&head(Method::GET, "/nope"));
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let r = router().handle(&head(Method::GET, "/logs"));
        assert_eq!(
            r.status(),
            StatusCode::NOT_FOUND,
            "a prefix needs its slash"
        );
        let r = router().handle(&head(Method::DELETE, "/healthz"));
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.headers()[header::ALLOW], "GET, POST");
        let r = Router::new().handle(&head(Method::GET, "/"));
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
    }
}
