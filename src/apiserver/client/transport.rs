//! The connection to the API server: hyper over rustls on our executor.
//!
//! One [`Client`] per API server. With HTTP/2 (ALPN `h2`, what
//! kube-apiserver offers) ONE connection carries every request and every
//! watch. An HTTP/2 keep-alive PING goes out once nothing was read for
//! 15 s, idle or not, and a PING unanswered for 15 s closes the connection,
//! so a dead uplink (a NAT that forgot us, a blackholed route) is noticed
//! within 30 s of the last byte read instead of the kernel's TCP timeouts.
//! A healthy node reads its Lease renewal's answer every 10 s, so it sends
//! no PING at all: a PING every 10 s, as before, went out just ahead of
//! each renewal and cost 78 bytes of each renewal's 652 on the wire
//! (docs/fleet.md). Every stream on a dead connection then fails at once, and the
//! next request makes ONE new TLS handshake that all waiting requests share
//! (a lock serialises dials). Failed dials (a refused connect, a cut TLS
//! handshake alike) back off 1 s doubling to 4 s, each wait jittered
//! within the upper half of its step, never above 4 s and counted from the
//! failed dial's start ([`link::dial_wait`], which says why 4 s); a
//! request made during the window fails fast, and the client itself dials
//! again at the window's end until the link answers ([`Client::redial`]).
//! Every answer is recorded on the shared [`Link`], which wakes the loops
//! waiting out a back-off.
//!
//! When ALPN does not give `h2` (a proxy in between), HTTP/1.1 is used: one
//! connection per concurrent request or watch, and up to a few idle
//! connections are kept for reuse.
//!
//! Every request has a deadline covering the whole exchange, body included
//! (a [`BodyStream`] carries its deadline: a watch's is its
//! `timeoutSeconds` plus slack). Buffered bodies have a size limit (an
//! error names it), so a proxy's endless reply cannot exhaust memory.
//!
//! Authentication is the TLS client certificate and/or a bearer token; a
//! `tokenFile` is re-read at most once a minute, as client-go does. The
//! token is marked sensitive in the header map and never logged.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::io;
use std::net::TcpStream;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderValue, Method, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};

use super::client_tls::{self, TlsError, TlsSetup};
use super::kubeconfig::{Kubeconfig, Material, Server};
use super::link::{self, Link, DIAL_BACKOFF_INITIAL};
use crate::rt;

pub(super) type ReqBody = Full<Bytes>;

/// The default limit of a buffered body (a LIST page, an object).
pub const BODY_LIMIT: usize = 16 << 20;
/// The most read of an error reply's body.
pub const ERROR_BODY_LIMIT: usize = 64 << 10;
/// A token file is re-read after this long.
const TOKEN_REREAD: Duration = Duration::from_secs(60);

/// Tunables; [`Options::default`] is what picolet uses.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long nothing is read before an HTTP/2 PING (also while idle).
    pub keep_alive_interval: Duration,
    /// A PING unanswered for this long closes the connection.
    pub keep_alive_timeout: Duration,
    /// TCP connect plus TLS handshake.
    pub connect_timeout: Duration,
    /// `User-Agent` of every request.
    pub user_agent: String,
    /// Idle HTTP/1.1 connections kept for reuse.
    pub http1_idle: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            keep_alive_interval: Duration::from_secs(15),
            keep_alive_timeout: Duration::from_secs(15),
            connect_timeout: Duration::from_secs(10),
            user_agent: format!(
                "picolet/{} ({}/{})",
                env!("CARGO_PKG_VERSION"),
                std::env::consts::OS,
                crate::node::info::go_arch()
            ),
            http1_idle: 4,
        }
    }
}

use super::transport_body::collect;
pub use super::transport_body::BodyStream;
use super::transport_dial::{dial, Dialed};
pub use super::transport_error::{Causes, TransportError};

/// The protocol ALPN chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Http2,
    Http11,
}

/// Counters, for logs and the bench.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// TLS connections established.
    pub connects: u64,
    /// Requests sent (a watch is one).
    pub requests: u64,
    /// Body bytes received.
    pub bytes_received: u64,
}

/// A request body.
#[derive(Clone, Debug)]
pub struct Body {
    pub content_type: &'static str,
    pub bytes: Vec<u8>,
}

/// What every request asks for unless it says otherwise.
pub const JSON: &str = "application/json";

/// A buffered answer.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: StatusCode,
    pub body: Vec<u8>,
}

enum Sender {
    H2(http2::SendRequest<ReqBody>),
    H1(http1::SendRequest<ReqBody>),
}

struct Conn {
    h2: Option<http2::SendRequest<ReqBody>>,
    /// The HTTP/2 connection's socket (a second handle), to shut it down:
    /// its driver then fails every stream on it at once.
    h2_socket: Option<TcpStream>,
    h1_idle: Vec<http1::SendRequest<ReqBody>>,
    protocol: Option<Protocol>,
    next_attempt: Option<Instant>,
    backoff: Duration,
}

struct Token {
    material: Material,
    cached: RefCell<Option<(HeaderValue, Instant)>>,
}

struct Inner {
    server: Server,
    kubeconfig: PathBuf,
    tls: RefCell<TlsSetup>,
    token: Option<Token>,
    options: Options,
    user_agent: HeaderValue,
    conn: RefCell<Conn>,
    dial_lock: smol::lock::Mutex<()>,
    stats: Cell<Stats>,
    resolving: Rc<Cell<bool>>,
    link: Link,
    /// A redial task is under way ([`Client::redial`]).
    redialing: Cell<bool>,
}

/// A client for one API server; cheap to clone (shared state).
#[derive(Clone)]
pub struct Client {
    inner: Rc<Inner>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.inner.server.to_string())
            .field("stats", &self.inner.stats.get())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for the kubeconfig's server; reads its certificate files
    /// now (a failure names the field). Nothing is dialled yet.
    pub fn new(k: &Kubeconfig, options: Options) -> Result<Self, TlsError> {
        let tls = client_tls::setup(k)?;
        Ok(Self::with_tls(k, tls, options))
    }

    /// A client with a prepared TLS setup.
    pub fn with_tls(k: &Kubeconfig, tls: TlsSetup, options: Options) -> Self {
        let user_agent = HeaderValue::from_str(&options.user_agent)
            .unwrap_or_else(|_| HeaderValue::from_static("picolet"));
        Client {
            inner: Rc::new(Inner {
                server: k.server.clone(),
                kubeconfig: k.path.clone(),
                tls: RefCell::new(tls),
                token: k.token.clone().map(|material| Token {
                    material,
                    cached: RefCell::new(None),
                }),
                options,
                user_agent,
                conn: RefCell::new(Conn {
                    h2: None,
                    h2_socket: None,
                    h1_idle: Vec::new(),
                    protocol: None,
                    next_attempt: None,
                    backoff: DIAL_BACKOFF_INITIAL,
                }),
                dial_lock: smol::lock::Mutex::new(()),
                stats: Cell::new(Stats::default()),
                resolving: Rc::new(Cell::new(false)),
                link: Link::default(),
                redialing: Cell::new(false),
            }),
        }
    }

    /// The server, for messages.
    pub fn server(&self) -> &Server {
        &self.inner.server
    }

    pub fn stats(&self) -> Stats {
        self.inner.stats.get()
    }

    /// The link's shared state: last answer, back-off, counters.
    pub fn link(&self) -> &Link {
        &self.inner.link
    }

    /// Makes new connections use `tls` (a renewed client certificate) and
    /// closes the current ones, as kubelet does after a rotation: requests
    /// and watches on them fail and are retried on a new connection. A new
    /// rustls configuration also means no TLS session is resumed with the
    /// old certificate.
    pub fn set_tls(&self, tls: TlsSetup) {
        *self.inner.tls.borrow_mut() = tls;
        let mut c = self.inner.conn.borrow_mut();
        c.h2 = None;
        if let Some(socket) = c.h2_socket.take() {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
        c.h1_idle.clear();
    }

    /// The protocol of the last connection (None before the first).
    pub fn protocol(&self) -> Option<Protocol> {
        self.inner.conn.borrow().protocol
    }

    /// Waits for a connection able to take a request (dialling if there is
    /// none, or sharing the dial under way) within `deadline`, without
    /// sending one. A request whose body stamps the time (a Lease
    /// renewal's `renewTime`) builds it after this, so that a wait for the
    /// link does not send a time from before the wait.
    pub async fn connect(&self, deadline: Duration) -> Result<(), TransportError> {
        match rt::timeout(deadline, Box::pin(self.sender())).await {
            Some(r) => r.map(drop),
            None => Err(TransportError::Connect {
                server: self.inner.server.to_string(),
                source: io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no connection within the deadline",
                ),
            }),
        }
    }

    /// Sends a request and reads its whole body (at most `limit` bytes),
    /// all within `deadline`. Any status is a `Response`; only transport
    /// failures are errors.
    pub async fn request(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<Body>,
        limit: usize,
        deadline: Duration,
    ) -> Result<Response, TransportError> {
        self.request_accepting(method, path_and_query, body, JSON, limit, deadline)
            .await
    }

    /// [`Client::request`] asking for the answer as `accept` (e.g. the
    /// API server's protobuf, a fraction of the JSON's bytes).
    pub async fn request_accepting(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<Body>,
        accept: &'static str,
        limit: usize,
        deadline: Duration,
    ) -> Result<Response, TransportError> {
        let what = format!("{method} {path_and_query}");
        let exchange = async {
            let a = self
                .send(method, path_and_query, body, accept, &what)
                .await?;
            let body = collect(a.body, limit, &what, &self.inner.stats).await?;
            if let Some(s) = a.h1 {
                self.give_back(s);
            }
            Ok(Response {
                status: a.status,
                body,
            })
        };
        // Boxed: a TLS dial and an HTTP exchange make a large future.
        match rt::timeout(deadline, Box::pin(exchange)).await {
            Some(r) => r,
            None => Err(TransportError::Timeout {
                what,
                after: deadline,
            }),
        }
    }

    /// Sends a GET whose body is read as it comes (a watch), asking for
    /// it as `accept` (JSON, or [`PROTOBUF_OR_JSON`]: the stream says which
    /// came, [`BodyStream::protobuf`]). The deadline covers the headers and
    /// every later read.
    ///
    /// [`PROTOBUF_OR_JSON`]: super::protobuf::PROTOBUF_OR_JSON
    pub async fn stream(
        &self,
        path_and_query: &str,
        accept: &'static str,
        deadline: Duration,
    ) -> Result<BodyStream, TransportError> {
        let what = format!("GET {path_and_query}");
        let until = Instant::now() + deadline;
        let sent = rt::timeout(
            deadline,
            Box::pin(self.send(Method::GET, path_and_query, None, accept, &what)),
        )
        .await;
        match sent {
            Some(Ok(a)) => Ok(BodyStream::new(a, (until, deadline), what, self.clone())),
            Some(Err(e)) => Err(e),
            None => Err(TransportError::Timeout {
                what,
                after: deadline,
            }),
        }
    }

    async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<Body>,
        accept: &'static str,
        what: &str,
    ) -> Result<Answer, TransportError> {
        let sender = Box::pin(self.sender()).await?;
        let is_h2 = matches!(sender, Sender::H2(_));
        let req = self.build(method, path_and_query, body, accept, is_h2, what)?;
        self.count(|s| s.requests += 1);
        let http = |source| TransportError::Http {
            what: what.to_string(),
            source,
        };
        match sender {
            Sender::H2(mut s) => {
                let r = s.send_request(req).await;
                if r.is_err() && s.is_closed() {
                    let mut c = self.inner.conn.borrow_mut();
                    if c.h2.as_ref().is_some_and(|cur| cur.is_closed()) {
                        c.h2 = None;
                    }
                }
                let resp = r.map_err(http)?;
                self.answered();
                Ok(Answer::of(resp, None))
            }
            Sender::H1(mut s) => {
                s.ready().await.map_err(http)?;
                let resp = s.send_request(req).await.map_err(http)?;
                self.answered();
                Ok(Answer::of(resp, Some(s)))
            }
        }
    }

    fn build(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<Body>,
        accept: &'static str,
        h2: bool,
        what: &str,
    ) -> Result<http::Request<ReqBody>, TransportError> {
        let invalid = |message: String| TransportError::Invalid {
            what: what.to_string(),
            message,
        };
        let server = &self.inner.server;
        let uri = if h2 {
            format!("{}{}{path_and_query}", server.origin(), server.base_path)
        } else {
            format!("{}{path_and_query}", server.base_path)
        };
        let mut b = http::Request::builder()
            .method(method)
            .uri(uri)
            .header(header::ACCEPT, accept)
            .header(header::USER_AGENT, self.inner.user_agent.clone());
        if !h2 {
            b = b.header(header::HOST, server.authority());
        }
        if let Some(t) = &self.inner.token {
            b = b.header(header::AUTHORIZATION, self.bearer(t)?);
        }
        let bytes = match body {
            Some(body) => {
                b = b.header(header::CONTENT_TYPE, body.content_type);
                Bytes::from(body.bytes)
            }
            None => Bytes::new(),
        };
        b.body(Full::new(bytes)).map_err(|e| invalid(e.to_string()))
    }

    /// The `Authorization` header, re-reading a token file once a minute.
    fn bearer(&self, t: &Token) -> Result<HeaderValue, TransportError> {
        let now = Instant::now();
        if let Some((v, at)) = &*t.cached.borrow() {
            if matches!(t.material.source, super::kubeconfig::Source::Data(_))
                || now.saturating_duration_since(*at) < TOKEN_REREAD
            {
                return Ok(v.clone());
            }
        }
        let read = t.material.read(&self.inner.kubeconfig).and_then(|bytes| {
            let token = String::from_utf8_lossy(&bytes).trim().to_string();
            let mut v = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                super::kubeconfig::KubeconfigError::Field {
                    path: self.inner.kubeconfig.clone(),
                    field: t.material.field.clone(),
                    message: "the token is not a valid header value".into(),
                }
            })?;
            v.set_sensitive(true);
            Ok(v)
        });
        let mut cached = t.cached.borrow_mut();
        match read {
            Ok(v) => {
                *cached = Some((v.clone(), now));
                Ok(v)
            }
            Err(e) => match &mut *cached {
                // Keep the last good token; try the file again later.
                Some((v, at)) => {
                    log::warn!("{e}; using the token read before");
                    *at = now;
                    Ok(v.clone())
                }
                None => Err(TransportError::Credentials(e.to_string())),
            },
        }
    }

    pub(super) fn count(&self, f: impl FnOnce(&mut Stats)) {
        let mut s = self.inner.stats.get();
        f(&mut s);
        self.inner.stats.set(s);
    }

    /// A connection able to take a request now, if there is one.
    fn ready_sender(&self) -> Option<Sender> {
        let mut c = self.inner.conn.borrow_mut();
        if let Some(s) = &c.h2 {
            if !s.is_closed() {
                return Some(Sender::H2(s.clone()));
            }
            c.h2 = None;
            log::info!(
                "connection to API server {} closed; reconnecting",
                self.inner.server
            );
        }
        while let Some(s) = c.h1_idle.pop() {
            if s.is_ready() {
                return Some(Sender::H1(s));
            }
        }
        None
    }

    async fn sender(&self) -> Result<Sender, TransportError> {
        if let Some(s) = self.ready_sender() {
            return Ok(s);
        }
        // One dial at a time: requests waiting here share its connection.
        let _dialing = self.inner.dial_lock.lock().await;
        if let Some(s) = self.ready_sender() {
            return Ok(s);
        }
        if let Some(at) = self.inner.conn.borrow().next_attempt {
            let now = Instant::now();
            if now < at {
                return Err(TransportError::BackingOff {
                    server: self.inner.server.to_string(),
                    wait: at - now,
                });
            }
        }
        let started = Instant::now();
        let dialed = match rt::timeout(
            self.inner.options.connect_timeout,
            Box::pin(dial(
                &self.inner.server,
                &self.inner.tls,
                &self.inner.options,
                &self.inner.resolving,
            )),
        )
        .await
        {
            Some(r) => r,
            None => Err(TransportError::Connect {
                server: self.inner.server.to_string(),
                source: io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connect and TLS handshake timed out",
                ),
            }),
        };
        let mut c = self.inner.conn.borrow_mut();
        match dialed {
            Ok(s) => {
                c.next_attempt = None;
                c.backoff = DIAL_BACKOFF_INITIAL;
                self.answered();
                let (protocol, sender) = match s {
                    Dialed::H2(h2, socket) => {
                        c.h2 = Some(h2.clone());
                        c.h2_socket = socket;
                        (Protocol::Http2, Sender::H2(h2))
                    }
                    Dialed::H1(h1) => (Protocol::Http11, Sender::H1(h1)),
                };
                c.protocol = Some(protocol);
                drop(c);
                self.count(|s| s.connects += 1);
                Ok(sender)
            }
            Err(e) => {
                // Within the documented bounds: the step's upper half, at
                // most DIAL_BACKOFF_MAX, counted from this dial's start.
                let until = link::next_dial(started, Instant::now(), c.backoff, fastrand::f64());
                c.next_attempt = Some(until);
                c.backoff = link::next_step(c.backoff);
                drop(c);
                self.inner.link.backing_off(until);
                self.redial();
                let said = self.inner.link.dial_failed(Instant::now());
                if let Some(said) = said {
                    log_reachability(&self.inner.server.to_string(), said, Some(&e));
                }
                // After an outage's first failed dial, one steady error:
                // the cause is in the transport's own lines.
                if said != Some(link::Reachability::Unreachable) {
                    return Err(TransportError::Unreachable {
                        server: self.inner.server.to_string(),
                    });
                }
                Err(e)
            }
        }
    }

    /// After a failed dial: dials again at each back-off's end until a dial
    /// succeeds (which wakes every loop waiting on [`Link::recovered`]), so
    /// the link's return is found within the back-off (at most 4 s) and
    /// not at the next retry of whichever loop comes first. One such task
    /// at a time; it holds the client only while it dials, and ends with
    /// the client, or once a connection is up.
    fn redial(&self) {
        if self.inner.redialing.replace(true) {
            return;
        }
        let weak = Rc::downgrade(&self.inner);
        rt::spawn(async move {
            while let Some(at) = weak.upgrade().and_then(|i| i.conn.borrow().next_attempt) {
                rt::sleep(at.saturating_duration_since(Instant::now())).await;
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                let client = Client { inner };
                if client.ready_sender().is_some() || client.sender().await.is_ok() {
                    break;
                }
            }
            if let Some(inner) = weak.upgrade() {
                inner.redialing.set(false);
            }
        })
        .detach();
    }

    /// The API server answered: the link's record, and the line that
    /// ends an outage.
    fn answered(&self) {
        if let Some(said) = self.inner.link.succeeded(Instant::now()) {
            log_reachability(&self.inner.server.to_string(), said, None);
        }
    }

    /// Puts an HTTP/1.1 connection back in the pool once it is ready.
    fn give_back(&self, mut s: http1::SendRequest<ReqBody>) {
        let this = self.clone();
        rt::spawn(async move {
            if s.ready().await.is_ok() {
                let mut c = this.inner.conn.borrow_mut();
                if c.h1_idle.len() < this.inner.options.http1_idle {
                    c.h1_idle.push(s);
                }
            }
        })
        .detach();
    }
}

/// The log line of an outage's start, its five-minute reminders and its
/// end (see [`link::OfflineLog`]); `error` is the failed dial's.
fn log_reachability(server: &str, said: link::Reachability, error: Option<&TransportError>) {
    let error = error.map(|e| format!(": {e}")).unwrap_or_default();
    match said {
        link::Reachability::Unreachable => log::warn!(
            "API server {server} unreachable{error}; pods keep running, picolet retries \
             (a reminder every {}m while it lasts)",
            link::OFFLINE_REPORT_EVERY.as_secs() / 60
        ),
        link::Reachability::StillUnreachable { failures, down_for } => log::warn!(
            "API server {server} still unreachable after {}s, {failures} failed attempts{error}",
            down_for.as_secs()
        ),
        link::Reachability::Back { failures, down_for } => log::info!(
            "API server {server} answers again after {}s unreachable ({failures} failed attempts)",
            down_for.as_secs()
        ),
    }
}

/// What [`Client::send`] got back: the status, whether the body is the
/// API server's protobuf (its `Content-Type`), the body, and the HTTP/1.1
/// connection it came on (given back once the body is read).
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) protobuf: bool,
    pub(super) body: Incoming,
    pub(super) h1: Option<http1::SendRequest<ReqBody>>,
}

impl Answer {
    fn of(resp: http::Response<Incoming>, h1: Option<http1::SendRequest<ReqBody>>) -> Self {
        let (parts, body) = resp.into_parts();
        let protobuf = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(super::protobuf::is_protobuf);
        Answer {
            status: parts.status,
            protobuf,
            body,
            h1,
        }
    }
}

#[cfg(test)]
impl Client {
    /// A client of an API server that never answers (nothing listens on
    /// port 1), for unit tests of the loops that own a client.
    pub(crate) fn unreachable() -> Client {
        let k = Kubeconfig {
            path: PathBuf::from("/test/kubelet.conf"),
            context: "c".into(),
            server: Server {
                host: "127.0.0.1".into(),
                port: 1,
                base_path: String::new(),
            },
            tls_server_name: None,
            certificate_authority: None,
            insecure_skip_tls_verify: true,
            client_certificate: None,
            client_key: None,
            token: None,
        };
        Client::new(&k, Options::default()).expect("a client of 127.0.0.1:1")
    }
}

#[cfg(test)]
mod tests;
