//! A TLS-terminating HTTP/1.1 fault proxy for watch streams -- owned by the
//! test harness (tests/harness).
//!
//! The TCP [`FaultProxy`](super::FaultProxy) cannot touch what a watch
//! carries: the link is TLS. This one terminates it. It serves a
//! certificate signed by the harness CA (the API server's own serving pair,
//! whose SANs hold 127.0.0.1 and localhost), offers only `http/1.1` by ALPN
//! (so the client under test runs its HTTP/1.1 fallback), and connects
//! upstream with TLS, verifying the API server with the harness CA and
//! presenting a client certificate of the tester's choice (the node's, so
//! the Node authorizer sees the same user).
//!
//! It reads each request and response just far enough to frame them
//! (request line, headers, `Content-Length` or chunked bodies) and passes
//! them on unchanged, except on command: the next chunk of a watch
//! response (`watch=true` / `watch=1` in the request line) whose path
//! matches can be cut in the middle of its JSON line (then the body ends,
//! or the connection just closes), or be preceded by a garbage line, a
//! JSON object of the wrong shape, or an HTML error page; the next matching
//! watch request can be answered `502 Bad Gateway` with an HTML body, as a
//! broken reverse proxy would. And any request of a kind ([`Kind`]: a plain
//! LIST, a resumed watch, a streaming list) whose path matches can be
//! answered by the proxy itself ([`Answer`]): an error status with the API
//! server's `Status` body (403, 429 with `Retry-After`, 500, 503), or a
//! watch that says its resourceVersion expired (410). A fault fires once.
//!
//! Plain blocking std threads, one per connection: HTTP/1.1 carries one
//! exchange at a time, so a connection is a simple request/response loop.
//! It knows nothing of Kubernetes or picolet beyond the `watch` parameter.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{
    ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection, StreamOwned,
};

use crate::harness::kube::pki::CertPair;

const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest request or response head accepted (a sanity bound).
const MAX_HEAD: usize = 64 << 10;

/// What to do to a watch stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFault {
    /// Send the first half of the next chunk's line, then end the body
    /// properly (the last chunk) and close: a stream cut mid-event.
    TruncateMidLine,
    /// Send the first half of the next chunk's line, then close the
    /// connection without ending the body.
    CutMidLine,
    /// A line that is not JSON, before the next chunk.
    GarbageLine,
    /// A JSON object of the wrong shape (a Pod whose name is a list),
    /// before the next chunk.
    WrongShape,
    /// An HTML error page, before the next chunk.
    HtmlPage,
    /// Answer the next matching watch request `502 Bad Gateway` with an
    /// HTML body, without asking the upstream.
    BadGateway,
}

impl WatchFault {
    /// The bytes injected before the next chunk, for the injecting faults.
    fn injected(self) -> Option<&'static [u8]> {
        match self {
            WatchFault::GarbageLine => Some(b"this is not JSON {{{\n"),
            WatchFault::WrongShape => Some(
                b"{\"type\":\"MODIFIED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":[\"not\",\"a\",\"string\"]}}}\n",
            ),
            WatchFault::HtmlPage => Some(HTML_502.as_bytes()),
            _ => None,
        }
    }
}

/// Which requests an [`Answer`] applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A plain LIST (a GET of a collection without `watch`).
    List,
    /// A watch that resumes from a resourceVersion (no
    /// `sendInitialEvents=true`).
    Watch,
    /// A streaming list: a watch with `sendInitialEvents=true`.
    StreamingList,
    /// A relist of either form: a plain LIST or a streaming list.
    Relist,
}

impl Kind {
    fn matches(self, req: &SeenRequest) -> bool {
        let streaming = req.target.contains("sendInitialEvents=true");
        match self {
            Kind::List => req.method == "GET" && !req.is_watch(),
            Kind::Watch => req.is_watch() && !streaming,
            Kind::StreamingList => req.is_watch() && streaming,
            Kind::Relist => req.method == "GET" && (!req.is_watch() || streaming),
        }
    }
}

/// What the proxy answers, itself, to a request an armed answer matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// This HTTP status with the API server's `Status` body for it (403
    /// Forbidden, 500 InternalError, 503 ServiceUnavailable, ...).
    Status(u16),
    /// 429 Too Many Requests with `Retry-After: <seconds>`, as the API
    /// server's priority and fairness answers.
    TooManyRequests { retry_after_seconds: u32 },
    /// 200 and a watch whose only event is an ERROR with the 410 Expired
    /// `Status` ("too old resource version"), then the end of the body:
    /// what a watch from a compacted resourceVersion gets.
    Expired,
}

impl Answer {
    /// The whole HTTP/1.1 response (Content-Length framed, keep-alive).
    fn response(self) -> String {
        let status = |code: u16, reason: &str, message: &str| {
            format!(
                r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"{message}","reason":"{reason}","code":{code}}}"#
            )
        };
        let (line, extra, body) = match self {
            Answer::Status(code) => {
                let (text, reason) = match code {
                    401 => ("Unauthorized", "Unauthorized"),
                    403 => ("Forbidden", "Forbidden"),
                    404 => ("Not Found", "NotFound"),
                    500 => ("Internal Server Error", "InternalError"),
                    503 => ("Service Unavailable", "ServiceUnavailable"),
                    _ => ("Error", "Unknown"),
                };
                (
                    format!("{code} {text}"),
                    String::new(),
                    status(code, reason, &format!("injected by the fault proxy: {text}")),
                )
            }
            Answer::TooManyRequests {
                retry_after_seconds,
            } => (
                "429 Too Many Requests".to_string(),
                format!("Retry-After: {retry_after_seconds}\r\n"),
                status(
                    429,
                    "TooManyRequests",
                    "injected by the fault proxy: the server has received too many requests and has asked us to try again later",
                ),
            ),
            Answer::Expired => (
                "200 OK".to_string(),
                String::new(),
                format!(
                    "{{\"type\":\"ERROR\",\"object\":{}}}\n",
                    status(
                        410,
                        "Expired",
                        "too old resource version: 1 (2) (injected by the fault proxy)"
                    )
                ),
            ),
        };
        format!(
            "HTTP/1.1 {line}\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    }
}

const HTML_502: &str = "<html>\n<head><title>502 Bad Gateway</title></head>\n<body><h1>502 Bad Gateway</h1><hr>proxy</body>\n</html>\n";

/// One request the proxy saw: method and target (path and query).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenRequest {
    pub method: String,
    pub target: String,
}

impl SeenRequest {
    /// A watch: `watch=true` or `watch=1` in the query.
    pub fn is_watch(&self) -> bool {
        self.target
            .split_once('?')
            .is_some_and(|(_, q)| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"))
    }
}

/// The TLS-terminating proxy. Dropping it closes every connection.
pub struct TlsFaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    upstream: SocketAddr,
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
    /// The armed faults, each with the path prefix of the watches it
    /// applies to, in the order armed.
    armed: Mutex<Vec<(String, WatchFault)>>,
    /// The armed answers, each with its path prefix and request kind, in
    /// the order armed.
    answers: Mutex<Vec<(String, Kind, Answer)>>,
    fired: AtomicU64,
    seen: Mutex<Vec<SeenRequest>>,
    /// Clones of every live connection's sockets, so a connection's end
    /// (and a drop of the proxy) can shut them down: a clone keeps the
    /// socket open otherwise.
    sockets: Mutex<HashMap<u64, Vec<TcpStream>>>,
    next_id: AtomicU64,
    shutdown: AtomicBool,
}

impl TlsFaultProxy {
    /// Listens on a free 127.0.0.1 port, serving `serving` (a pair signed
    /// by `ca` for 127.0.0.1), and forwards to `upstream`, verified with
    /// `ca` and presenting `client`.
    pub fn start(upstream: SocketAddr, serving: &CertPair, ca: &Path, client: &CertPair) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(certs(&serving.cert), key(&serving.key))
            .expect("the proxy's serving certificate");
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut roots = RootCertStore::empty();
        for c in certs(ca) {
            roots.add(c).expect("the harness CA");
        }
        let mut upstream_tls = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_client_auth_cert(certs(&client.cert), key(&client.key))
            .expect("the proxy's client certificate");
        upstream_tls.alpn_protocols = vec![b"http/1.1".to_vec()];

        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the TLS fault proxy");
        let addr = listener.local_addr().expect("TLS fault proxy address");
        let shared = Arc::new(Shared {
            upstream,
            server: Arc::new(server),
            client: Arc::new(upstream_tls),
            armed: Mutex::new(Vec::new()),
            answers: Mutex::new(Vec::new()),
            fired: AtomicU64::new(0),
            seen: Mutex::new(Vec::new()),
            sockets: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
        });
        let s = shared.clone();
        let acceptor = thread::Builder::new()
            .name(format!("tlsproxy-{}", addr.port()))
            .spawn(move || {
                for client in listener.incoming() {
                    if s.shutdown.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(client) = client else { continue };
                    let s = s.clone();
                    let _ = thread::Builder::new()
                        .name("tlsproxy-conn".into())
                        .spawn(move || {
                            let id = s.next_id.fetch_add(1, Ordering::SeqCst);
                            if let Err(e) = serve(&s, id, client) {
                                if !s.shutdown.load(Ordering::SeqCst) {
                                    eprintln!("tls fault proxy: connection ended: {e}");
                                }
                            }
                            let socks = lock(&s.sockets).remove(&id).unwrap_or_default();
                            for sock in socks {
                                let _ = sock.shutdown(Shutdown::Both);
                            }
                        });
                }
            })
            .expect("spawning the TLS fault proxy acceptor");
        TlsFaultProxy {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// Where it listens (for a TCP fault proxy in front of it).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:<port>`.
    pub fn https_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Arms `fault` for the next watch whose target starts with
    /// `path_prefix` (e.g. `/api/v1/pods`): its next chunk, or (for
    /// [`WatchFault::BadGateway`]) its next request. Faults armed
    /// before and not yet fired stay armed: a stream fault and a
    /// `BadGateway` armed together hit a stream and then its reconnect.
    pub fn arm(&self, path_prefix: &str, fault: WatchFault) {
        lock(&self.shared.armed).push((path_prefix.to_string(), fault));
    }

    /// Arms `answer` for the next request of `kind` whose target starts
    /// with `path_prefix`: the proxy answers it without asking the API
    /// server. Answers armed for the same requests fire in the order armed,
    /// one per request; each counts as a fired fault.
    pub fn arm_answer(&self, path_prefix: &str, kind: Kind, answer: Answer) {
        lock(&self.shared.answers).push((path_prefix.to_string(), kind, answer));
    }

    /// How many armed faults have fired.
    pub fn fired(&self) -> u64 {
        self.shared.fired.load(Ordering::SeqCst)
    }

    /// Waits until `n` faults have fired; panics after `timeout`.
    pub fn wait_fired(&self, n: u64, timeout: Duration) {
        let start = Instant::now();
        while self.fired() < n {
            assert!(
                start.elapsed() < timeout,
                "timed out after {timeout:?} waiting for {n} faults to fire ({} fired, armed {:?} {:?})",
                self.fired(),
                *lock(&self.shared.armed),
                *lock(&self.shared.answers)
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every request seen so far, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        lock(&self.shared.seen).clone()
    }
}

impl Drop for TlsFaultProxy {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        for (_, socks) in lock(&self.shared.sockets).drain() {
            for s in socks {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn certs(path: &Path) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("certificates in {}: {e}", path.display()))
}

fn key(path: &Path) -> PrivateKeyDer<'static> {
    PrivateKeyDer::from_pem_file(path).unwrap_or_else(|e| panic!("key {}: {e}", path.display()))
}

type Client = BufReader<StreamOwned<ServerConnection, TcpStream>>;
type Upstream = BufReader<StreamOwned<ClientConnection, TcpStream>>;

/// One client connection: a TLS server side, a TLS client side upstream,
/// and the request/response loop between them.
fn serve(shared: &Shared, id: u64, tcp: TcpStream) -> io::Result<()> {
    let _ = tcp.set_nodelay(true);
    register(shared, id, &tcp)?;
    // A second handle on the client's socket, to ask whether the client is
    // still there without touching the TLS stream (see `FaultSite`).
    let client_socket = tcp.try_clone()?;
    let conn = ServerConnection::new(shared.server.clone()).map_err(io::Error::other)?;
    let mut client: Client = BufReader::new(StreamOwned::new(conn, tcp));
    let mut upstream: Option<Upstream> = None;
    loop {
        // The request.
        let Some(head) = read_head(&mut client)? else {
            return Ok(()); // the client closed between requests
        };
        let (method, target) = request_line(&head)?;
        let req = SeenRequest {
            method: method.clone(),
            target: target.clone(),
        };
        let watch = req.is_watch();
        let answer = take_answer(shared, &req);
        lock(&shared.seen).push(req);
        if let Some(answer) = answer {
            // GETs carry no body: nothing to drain. The connection stays
            // usable, as after any framed answer.
            let w = client.get_mut();
            w.write_all(answer.response().as_bytes())?;
            w.flush()?;
            continue;
        }
        if watch && take_fault(shared, &target, |f| f == WatchFault::BadGateway).is_some() {
            // Drain the (bodiless) request and answer as a broken proxy.
            let reply = format!(
                "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{HTML_502}",
                HTML_502.len()
            );
            let w = client.get_mut();
            w.write_all(reply.as_bytes())?;
            w.flush()?;
            w.conn.send_close_notify();
            let _ = w.flush();
            return Ok(());
        }
        let up = match &mut upstream {
            Some(u) => u,
            None => upstream.insert(connect_upstream(shared, id)?),
        };
        up.get_mut().write_all(&head)?;
        forward_body(&mut client, up.get_mut(), &head, false, None)?;
        up.get_mut().flush()?;

        // The response.
        let Some(rhead) = read_head(up)? else {
            return Err(io::Error::other("upstream closed before answering"));
        };
        client.get_mut().write_all(&rhead)?;
        client.get_mut().flush()?;
        let status = status_code(&rhead)?;
        let bodiless = method == "HEAD" || status == 204 || status == 304 || status < 200;
        if bodiless {
            continue;
        }
        let site = (watch && status == 200).then_some(FaultSite {
            shared,
            target: &target,
            client: &client_socket,
        });
        match forward_body(up, client.get_mut(), &rhead, true, site)? {
            Framing::Done => {}
            Framing::Close => {
                client.get_mut().conn.send_close_notify();
                let _ = client.get_mut().flush();
                return Ok(());
            }
        }
        if header(&rhead, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) {
            return Ok(());
        }
    }
}

fn register(shared: &Shared, id: u64, tcp: &TcpStream) -> io::Result<()> {
    let clone = tcp.try_clone()?;
    lock(&shared.sockets).entry(id).or_default().push(clone);
    if shared.shutdown.load(Ordering::SeqCst) {
        let _ = tcp.shutdown(Shutdown::Both);
    }
    Ok(())
}

fn connect_upstream(shared: &Shared, id: u64) -> io::Result<Upstream> {
    let tcp = TcpStream::connect_timeout(&shared.upstream, UPSTREAM_CONNECT_TIMEOUT)?;
    let _ = tcp.set_nodelay(true);
    register(shared, id, &tcp)?;
    let name = ServerName::try_from(shared.upstream.ip().to_string()).map_err(io::Error::other)?;
    let conn = ClientConnection::new(shared.client.clone(), name).map_err(io::Error::other)?;
    Ok(BufReader::new(StreamOwned::new(conn, tcp)))
}

/// The armed fault if it applies to `target` and `which` accepts it; it is
/// disarmed and counted as fired.
fn take_fault(
    shared: &Shared,
    target: &str,
    which: impl Fn(WatchFault) -> bool,
) -> Option<WatchFault> {
    let mut armed = lock(&shared.armed);
    let i = armed
        .iter()
        .position(|(prefix, f)| target.starts_with(prefix.as_str()) && which(*f))?;
    let (_, f) = armed.remove(i);
    shared.fired.fetch_add(1, Ordering::SeqCst);
    eprintln!("tls fault proxy: {f:?} on {target}");
    Some(f)
}

/// The first armed answer for `req`; it is disarmed and counted as fired.
fn take_answer(shared: &Shared, req: &SeenRequest) -> Option<Answer> {
    let mut answers = lock(&shared.answers);
    let i = answers.iter().position(|(prefix, kind, _)| {
        req.target.starts_with(prefix.as_str()) && kind.matches(req)
    })?;
    let (_, _, answer) = answers.remove(i);
    shared.fired.fetch_add(1, Ordering::SeqCst);
    eprintln!(
        "tls fault proxy: answered {answer:?} to {} {}",
        req.method, req.target
    );
    Some(answer)
}

/// Reads a message head (up to and including the empty line); None if the
/// peer closed before sending anything.
fn read_head(r: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        let n = match r.read_until(b'\n', &mut head) {
            Ok(n) => n,
            Err(e) if head.is_empty() && is_eof(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        if n == 0 {
            if head.is_empty() {
                return Ok(None);
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "in a message head",
            ));
        }
        if head.len() > MAX_HEAD {
            return Err(io::Error::other("message head too long"));
        }
        let line = &head[before..];
        if line == b"\r\n" || line == b"\n" {
            if before == 0 {
                head.clear(); // a stray empty line between messages
                continue;
            }
            return Ok(Some(head));
        }
    }
}

fn is_eof(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
    )
}

fn request_line(head: &[u8]) -> io::Result<(String, String)> {
    let text = String::from_utf8_lossy(head);
    let mut parts = text.lines().next().unwrap_or_default().split(' ');
    match (parts.next(), parts.next()) {
        (Some(m), Some(t)) if !m.is_empty() => Ok((m.to_string(), t.to_string())),
        _ => Err(io::Error::other(format!("bad request line: {text:?}"))),
    }
}

fn status_code(head: &[u8]) -> io::Result<u16> {
    let text = String::from_utf8_lossy(head);
    text.lines()
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| io::Error::other(format!("bad status line: {text:?}")))
}

/// The value of header `name` (case-insensitive), if present.
fn header(head: &[u8], name: &str) -> Option<String> {
    String::from_utf8_lossy(head).lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// How a forwarded body ended.
enum Framing {
    /// Framed: the connection may carry the next exchange.
    Done,
    /// Ended by closing (close-delimited, or cut by a fault).
    Close,
}

/// Forwards the body of the message whose head is `head` from `src` to
/// `dst`. A response without length or chunking runs to the end of the
/// stream. `fault`: a watch response the armed fault may apply to.
/// A watch stream that armed faults may hit.
struct FaultSite<'a> {
    shared: &'a Shared,
    target: &'a str,
    /// The client's socket. A client that gave up on this stream (it read
    /// an injected fault and reconnected) leaves the proxy's thread
    /// blocked on the upstream until the next chunk; a fault must not
    /// fire on that dead stream, or the client never sees it and the
    /// test waits for a reconnect that has no reason to happen.
    client: &'a TcpStream,
}

impl FaultSite<'_> {
    /// Whether the client still waits for this response: nothing to read
    /// from it (an HTTP/1.1 client sends nothing while its response
    /// streams; a FIN, a reset or a TLS close_notify mean it is gone).
    fn client_is_waiting(&self) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            rustix::net::recv(
                self.client,
                &mut byte,
                rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT,
            ),
            Err(rustix::io::Errno::AGAIN)
        )
    }
}

fn forward_body(
    src: &mut impl BufRead,
    dst: &mut (impl Write + ?Sized),
    head: &[u8],
    response: bool,
    fault: Option<FaultSite<'_>>,
) -> io::Result<Framing> {
    let chunked = header(head, "transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        return forward_chunked(src, dst, fault);
    }
    if let Some(len) = header(head, "content-length") {
        let len: u64 = len
            .parse()
            .map_err(|_| io::Error::other("bad Content-Length"))?;
        let copied = io::copy(&mut src.take(len), dst)?;
        dst.flush()?;
        if copied < len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "body shorter than Content-Length",
            ));
        }
        return Ok(Framing::Done);
    }
    if !response {
        return Ok(Framing::Done); // a request without a body
    }
    // Close-delimited.
    let mut buf = [0u8; 16 << 10];
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => return Ok(Framing::Close),
            Ok(n) => n,
            Err(e) if is_eof(&e) => return Ok(Framing::Close),
            Err(e) => return Err(e),
        };
        dst.write_all(&buf[..n])?;
        dst.flush()?;
    }
}

fn forward_chunked(
    src: &mut impl BufRead,
    dst: &mut (impl Write + ?Sized),
    fault: Option<FaultSite<'_>>,
) -> io::Result<Framing> {
    loop {
        let mut size_line = Vec::new();
        src.read_until(b'\n', &mut size_line)?;
        if size_line.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "in a chunked body",
            ));
        }
        let text = String::from_utf8_lossy(&size_line);
        let hex = text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(hex, 16)
            .map_err(|_| io::Error::other(format!("bad chunk size line {text:?}")))?;
        if size == 0 {
            // The last chunk, then trailers up to an empty line.
            dst.write_all(&size_line)?;
            loop {
                let mut line = Vec::new();
                src.read_until(b'\n', &mut line)?;
                dst.write_all(&line)?;
                if line == b"\r\n" || line == b"\n" || line.is_empty() {
                    break;
                }
            }
            dst.flush()?;
            return Ok(Framing::Done);
        }
        let mut data = vec![0u8; size];
        src.read_exact(&mut data)?;
        let mut crlf = [0u8; 2];
        src.read_exact(&mut crlf)?;
        let armed = match &fault {
            Some(site) if site.client_is_waiting() => {
                take_fault(site.shared, site.target, |f| f != WatchFault::BadGateway)
            }
            Some(_) => {
                // The client is gone: end this stream instead of
                // forwarding to nobody.
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the client left this watch",
                ));
            }
            None => None,
        };
        match armed {
            None => write_chunk(dst, &data)?,
            Some(f) => {
                if let Some(junk) = f.injected() {
                    write_chunk(dst, junk)?;
                    write_chunk(dst, &data)?;
                } else {
                    // Half of the first line, never its newline.
                    let line = data.iter().position(|b| *b == b'\n').unwrap_or(data.len());
                    let half = (line / 2).max(1).min(data.len());
                    write_chunk(dst, &data[..half])?;
                    if f == WatchFault::TruncateMidLine {
                        dst.write_all(b"0\r\n\r\n")?;
                        dst.flush()?;
                    }
                    return Ok(Framing::Close);
                }
            }
        }
    }
}

fn write_chunk(dst: &mut (impl Write + ?Sized), data: &[u8]) -> io::Result<()> {
    write!(dst, "{:x}\r\n", data.len())?;
    dst.write_all(data)?;
    dst.write_all(b"\r\n")?;
    dst.flush()
}
