//! The I/O side of probes and lifecycle hooks: kubelet's
//! `pkg/probe/{http,tcp,grpc,exec}` and `pkg/kubelet/lifecycle` handlers.
//!
//! [`probe_handler`] and [`lifecycle_handler`] turn a v1 `Probe` or
//! `LifecycleHandler` into a [`Handler`] (pure: defaults, port names, pod
//! IP); [`run_handler`] runs one and gives a [`ProbeResult`]. The state
//! machine that decides when to probe and what a result means is
//! `crate::probe`; this module only talks to the container.
//!
//! Everything runs on the caller's smol executor (no threads), and every
//! check obeys its timeout. kubelet's semantics, kept here:
//! - httpGet: one HTTP/1.1 GET per hop, `User-Agent: kube-probe/1.36`,
//!   `Accept: */*` unless set, `Connection: close`; 200..=399 is success;
//!   redirects are followed (at most 10 requests) while they stay on the
//!   same host name, and a redirect elsewhere ends the probe as a success
//!   (kubelet's "Probe terminated redirects" warning); at most 10 KiB of
//!   the body is read. HTTPS skips certificate verification
//!   ([`InsecureProbeVerifier`]), like kubelet's `InsecureSkipVerify`.
//! - tcpSocket: a connection within the timeout is success.
//! - grpc: `grpc.health.v1.Health/Check` over plaintext HTTP/2; only
//!   SERVING is success.
//! - exec: CRI ExecSync with the timeout in whole seconds (at least 1);
//!   exit 0 is success, anything else failure with the output (10 KiB at
//!   most); a CRI error other than a timeout is `Unknown` (kubelet throws
//!   such a result away).
//!
//! Host names: probe hosts are IP addresses in practice (the pod IP, or an
//! explicit `host`). An IP literal or `localhost` is used as is; other names
//! are not resolved, because the resolver (`getaddrinfo`) blocks and the
//! agent has a single thread. Such a probe fails with a message saying so.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use smol::io::{AsyncRead, AsyncWrite};
use smol::Async;

use crate::cri::{api, CriError, Runtime};
use crate::probe::Outcome;
use crate::rt::{self, Io, LocalExec, SmolTimer};

/// kubelet's `User-Agent` for probes (`kube-probe/<major>.<minor>`).
pub const PROBE_USER_AGENT: &str = "kube-probe/1.36";
/// kubelet's `User-Agent` for lifecycle hooks.
pub const LIFECYCLE_USER_AGENT: &str = "kube-lifecycle/1.36";
/// How much of a response body or of exec output is read (kubelet's limit).
pub const MAX_READ: usize = 10 * 1024;
/// How many HTTP requests one probe may make, redirects included.
pub const MAX_REDIRECTS: usize = 10;
/// How much of a failing response's body goes into the message.
const BODY_IN_MESSAGE: usize = 1024;
/// Headroom over an exec probe's timeout for the runtime to report it.
const EXEC_SLACK: Duration = Duration::from_secs(1);

// --- results and handlers ---------------------------------------------------

/// The outcome of one probe or hook, with a message for logs and events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeResult {
    pub outcome: Outcome,
    /// e.g. "HTTP probe failed with statuscode: 500".
    pub message: String,
}

impl ProbeResult {
    fn success(message: impl Into<String>) -> Self {
        ProbeResult {
            outcome: Outcome::Success,
            message: message.into(),
        }
    }
    fn failure(message: impl Into<String>) -> Self {
        ProbeResult {
            outcome: Outcome::Failure,
            message: message.into(),
        }
    }
    fn unknown(message: impl Into<String>) -> Self {
        ProbeResult {
            outcome: Outcome::Unknown,
            message: message.into(),
        }
    }
}

/// `httpGet.scheme`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// Who sends an HTTP GET: decides the `User-Agent` and whether the status
/// code matters. kubelet fails a lifecycle hook only when the request
/// itself fails; any answer, 500 included, lets it pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HttpPurpose {
    #[default]
    Probe,
    Lifecycle,
}

/// Where an httpGet probe or hook goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpTarget {
    pub scheme: Scheme,
    /// An IP address (the pod IP by default) or `localhost`.
    pub host: String,
    pub port: u16,
    /// Path and optional query, starting with `/`.
    pub path: String,
    /// `httpHeaders`, in order; a `Host` entry overrides the Host header.
    pub headers: Vec<(String, String)>,
    pub purpose: HttpPurpose,
}

impl HttpTarget {
    /// The URL, as kubelet prints it in messages.
    pub fn url(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme.as_str(),
            join_host_port(&self.host, self.port),
            self.path
        )
    }
}

/// A probe or lifecycle action, ready to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handler {
    Exec {
        command: Vec<String>,
    },
    HttpGet(HttpTarget),
    TcpSocket {
        host: String,
        port: u16,
    },
    Grpc {
        host: String,
        port: u16,
        service: String,
    },
    /// A `sleep` lifecycle hook.
    Sleep(Duration),
}

/// Why a probe or hook spec cannot be run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    #[error("no handler specified (need one of exec, httpGet, tcpSocket, grpc)")]
    None,
    #[error("more than one handler specified ({0})")]
    Several(String),
    #[error("exec handler has no command")]
    EmptyCommand,
    #[error("invalid port number: {0}")]
    InvalidPort(i64),
    #[error("port {0} not found")]
    PortNotFound(String),
    #[error("unsupported scheme {0:?} (HTTP or HTTPS)")]
    Scheme(String),
    #[error("no host: the pod has no IP yet")]
    NoHost,
    #[error("tcpSocket is not supported as a lifecycle handler")]
    TcpLifecycle,
    #[error("invalid sleep duration: {0}s")]
    Sleep(i64),
}

/// A port given as a number or as the name of one of `container`'s ports.
pub fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    resolve(port, container).map_err(|e| e.to_string())
}

fn resolve(port: &IntOrString, container: &Container) -> Result<u16, HandlerError> {
    let number = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => {
            let named = container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| i64::from(p.container_port));
            // kubelet's "last ditch effort": a number stored as a string.
            match named.or_else(|| name.parse().ok()) {
                Some(n) => n,
                None => return Err(HandlerError::PortNotFound(name.clone())),
            }
        }
    };
    u16::try_from(number)
        .ok()
        .filter(|p| *p > 0)
        .ok_or(HandlerError::InvalidPort(number))
}

fn host_or_pod_ip(host: Option<&String>, pod_ip: &str) -> Result<String, HandlerError> {
    let host = host
        .map(String::as_str)
        .filter(|h| !h.is_empty())
        .unwrap_or(pod_ip);
    if host.is_empty() {
        return Err(HandlerError::NoHost);
    }
    Ok(host.to_string())
}

fn http_target(
    a: &k8s_openapi::api::core::v1::HTTPGetAction,
    pod_ip: &str,
    c: &Container,
    purpose: HttpPurpose,
) -> Result<HttpTarget, HandlerError> {
    let scheme = match a.scheme.as_deref() {
        None | Some("") => Scheme::Http,
        Some(s) if s.eq_ignore_ascii_case("http") => Scheme::Http,
        Some(s) if s.eq_ignore_ascii_case("https") => Scheme::Https,
        Some(s) => return Err(HandlerError::Scheme(s.to_string())),
    };
    let path = match a.path.as_deref() {
        None | Some("") => "/".to_string(),
        Some(p) if p.starts_with('/') => p.to_string(),
        Some(p) => format!("/{p}"),
    };
    Ok(HttpTarget {
        scheme,
        host: host_or_pod_ip(a.host.as_ref(), pod_ip)?,
        port: resolve(&a.port, c)?,
        path,
        headers: a
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect(),
        purpose,
    })
}

fn exec_command(a: &k8s_openapi::api::core::v1::ExecAction) -> Result<Handler, HandlerError> {
    match &a.command {
        Some(c) if !c.is_empty() => Ok(Handler::Exec { command: c.clone() }),
        _ => Err(HandlerError::EmptyCommand),
    }
}

fn exactly_one(set: &[(&str, bool)]) -> Result<(), HandlerError> {
    let names: Vec<&str> = set.iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect();
    match names.len() {
        0 => Err(HandlerError::None),
        1 => Ok(()),
        _ => Err(HandlerError::Several(names.join(", "))),
    }
}

/// The handler of a probe: host defaults to the pod IP, path to `/`, scheme
/// to HTTP, the gRPC service to `""`; named ports are resolved.
pub fn probe_handler(p: &Probe, pod_ip: &str, c: &Container) -> Result<Handler, HandlerError> {
    exactly_one(&[
        ("exec", p.exec.is_some()),
        ("httpGet", p.http_get.is_some()),
        ("tcpSocket", p.tcp_socket.is_some()),
        ("grpc", p.grpc.is_some()),
    ])?;
    if let Some(e) = &p.exec {
        return exec_command(e);
    }
    if let Some(h) = &p.http_get {
        return Ok(Handler::HttpGet(http_target(
            h,
            pod_ip,
            c,
            HttpPurpose::Probe,
        )?));
    }
    if let Some(t) = &p.tcp_socket {
        return Ok(Handler::TcpSocket {
            host: host_or_pod_ip(t.host.as_ref(), pod_ip)?,
            port: resolve(&t.port, c)?,
        });
    }
    let g = p.grpc.as_ref().expect("exactly one handler is set");
    Ok(Handler::Grpc {
        host: host_or_pod_ip(None, pod_ip)?,
        port: resolve(&IntOrString::Int(g.port), c)?,
        service: g.service.clone().unwrap_or_default(),
    })
}

/// The handler of a postStart/preStop hook. `tcpSocket` is accepted by the
/// API only for compatibility and fails at run time in kubelet; here it is
/// refused up front.
pub fn lifecycle_handler(
    h: &LifecycleHandler,
    pod_ip: &str,
    c: &Container,
) -> Result<Handler, HandlerError> {
    exactly_one(&[
        ("exec", h.exec.is_some()),
        ("httpGet", h.http_get.is_some()),
        ("tcpSocket", h.tcp_socket.is_some()),
        ("sleep", h.sleep.is_some()),
    ])?;
    if let Some(e) = &h.exec {
        return exec_command(e);
    }
    if let Some(g) = &h.http_get {
        return Ok(Handler::HttpGet(http_target(
            g,
            pod_ip,
            c,
            HttpPurpose::Lifecycle,
        )?));
    }
    if h.tcp_socket.is_some() {
        return Err(HandlerError::TcpLifecycle);
    }
    let s = h
        .sleep
        .as_ref()
        .expect("exactly one handler is set")
        .seconds;
    u64::try_from(s)
        .map(|s| Handler::Sleep(Duration::from_secs(s)))
        .map_err(|_| HandlerError::Sleep(s))
}

/// Runs a handler for the container `container_id` within `timeout`.
pub async fn run_handler(
    rt: &Runtime,
    container_id: &str,
    h: &Handler,
    timeout: Duration,
) -> ProbeResult {
    match h {
        Handler::Exec { command } => exec(rt, container_id, command, timeout).await,
        Handler::HttpGet(t) => http_get(t, timeout).await,
        Handler::TcpSocket { host, port } => tcp_socket(host, *port, timeout).await,
        Handler::Grpc {
            host,
            port,
            service,
        } => grpc(host, *port, service, timeout).await,
        Handler::Sleep(d) => match rt::timeout(timeout, rt::sleep(*d)).await {
            Some(()) => ProbeResult::success(""),
            None => ProbeResult::failure("container terminated before sleep hook finished"),
        },
    }
}

// --- addresses ----------------------------------------------------------------

/// `host:port`, with brackets around an IPv6 address.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// An IP literal or `localhost`; see the module docs for why not DNS.
fn socket_addr(host: &str, port: u16) -> io::Result<SocketAddr> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    if bare.eq_ignore_ascii_case("localhost") {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("cannot resolve host name {bare:?}: picolet probes need an IP address"),
    ))
}

/// Go's `dial tcp ADDR: ERR`, so messages read like kubelet's.
#[derive(Debug)]
struct DialError {
    addr: String,
    source: io::Error,
}

impl fmt::Display for DialError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dial tcp {}: {}", self.addr, self.source)
    }
}

async fn dial(host: &str, port: u16) -> Result<Async<TcpStream>, DialError> {
    let addr = join_host_port(host, port);
    let sa = socket_addr(host, port).map_err(|source| DialError {
        addr: addr.clone(),
        source,
    })?;
    Async::<TcpStream>::connect(sa)
        .await
        .map_err(|source| DialError { addr, source })
}

// --- tcpSocket ----------------------------------------------------------------

/// Succeeds when a TCP connection to `host:port` opens within `timeout`.
pub async fn tcp_socket(host: &str, port: u16, timeout: Duration) -> ProbeResult {
    match rt::timeout(timeout, dial(host, port)).await {
        Some(Ok(_)) => ProbeResult::success(""),
        Some(Err(e)) => ProbeResult::failure(e.to_string()),
        None => ProbeResult::failure(format!(
            "dial tcp {}: i/o timeout",
            join_host_port(host, port)
        )),
    }
}

// --- httpGet ------------------------------------------------------------------

/// A byte stream hyper can speak HTTP/1.1 on: plain TCP or TLS.
trait Stream: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Stream for T {}

/// One hop's URL.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Url {
    scheme: Scheme,
    host: String,
    port: u16,
    /// Path and query, starting with `/`.
    path: String,
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let port = if self.port == self.scheme.default_port() {
            String::new()
        } else {
            format!(":{}", self.port)
        };
        let host = if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        write!(f, "{}://{host}{port}{}", self.scheme.as_str(), self.path)
    }
}

impl Url {
    fn authority(&self) -> String {
        join_host_port(&self.host, self.port)
    }

    /// Resolves a `Location` header against this URL. `None` if it cannot
    /// be parsed (Go then fails the request).
    fn join(&self, location: &str) -> Option<(Url, bool)> {
        let lower = location.to_ascii_lowercase();
        let (scheme, rest) = if lower.starts_with("http://") {
            (Scheme::Http, &location[7..])
        } else if lower.starts_with("https://") {
            (Scheme::Https, &location[8..])
        } else if let Some(rest) = location.strip_prefix("//") {
            (self.scheme, rest)
        } else if location.starts_with('/') {
            return Some((
                Url {
                    path: encode_path(location),
                    ..self.clone()
                },
                true,
            ));
        } else {
            // Relative to the current path's directory.
            let base = self.path.split('?').next().unwrap_or("/");
            let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
            return Some((
                Url {
                    path: encode_path(&format!("{dir}{location}")),
                    ..self.clone()
                },
                true,
            ));
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
        let authority = authority.rsplit('@').next().unwrap_or(authority);
        let (host, port) = split_authority(authority, scheme)?;
        let path = match path.split('#').next().unwrap_or("") {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        Some((
            Url {
                scheme,
                host,
                port,
                path: encode_path(&path),
            },
            false,
        ))
    }
}

fn split_authority(authority: &str, scheme: Scheme) -> Option<(String, u16)> {
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, rest) = v6.split_once(']')?;
        let port = match rest.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if rest.is_empty() => scheme.default_port(),
            None => return None,
        };
        return Some((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() => Some((
            h.to_string(),
            if p.is_empty() {
                scheme.default_port()
            } else {
                p.parse().ok()?
            },
        )),
        None if !authority.is_empty() => Some((authority.to_string(), scheme.default_port())),
        _ => None,
    }
}

/// Percent-encodes what may not appear raw in a request target (spaces,
/// controls, non-ASCII); everything else, `%` included, is kept as given.
fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_graphic()
            && !matches!(
                b,
                b'"' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}'
            )
        {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One answered request.
struct Answer {
    status: u16,
    location: Option<String>,
    body: Vec<u8>,
}

/// An HTTP GET probe (or hook, per `t.purpose`).
pub async fn http_get(t: &HttpTarget, timeout: Duration) -> ProbeResult {
    let url = Url {
        scheme: t.scheme,
        host: t.host.clone(),
        port: t.port,
        path: encode_path(&t.path),
    };
    match rt::timeout(timeout, http_follow(t, url.clone())).await {
        Some(r) => r,
        None => ProbeResult::failure(format!(
            "Get \"{url}\": context deadline exceeded (Client.Timeout of {timeout:?} exceeded)"
        )),
    }
}

async fn http_follow(t: &HttpTarget, first: Url) -> ProbeResult {
    let host_override = t
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.clone());
    let mut url = first.clone();
    let mut host_header = host_override.clone().unwrap_or_else(|| url.authority());
    for _ in 0..MAX_REDIRECTS {
        let answer = match request(t, &url, &host_header).await {
            Ok(a) => a,
            Err(e) => return ProbeResult::failure(format!("Get \"{url}\": {e}")),
        };
        let redirect = matches!(answer.status, 301 | 302 | 303 | 307 | 308);
        if let (true, Some(loc)) = (redirect, &answer.location) {
            let Some((next, relative)) = url.join(loc) else {
                return ProbeResult::failure(format!(
                    "Get \"{url}\": failed to parse Location header {loc:?}"
                ));
            };
            if !next.host.eq_ignore_ascii_case(&first.host) {
                // kubelet does not follow a redirect off the probed host;
                // the 3xx itself is the (successful) answer, with a warning.
                return finish(t, answer.status, &answer.body, Some(&next));
            }
            host_header = match (&host_override, relative) {
                (Some(h), true) => h.clone(),
                _ => next.authority(),
            };
            log::debug!("probe {url}: {} redirect to {next}", answer.status);
            url = next;
            continue;
        }
        return finish(t, answer.status, &answer.body, None);
    }
    ProbeResult::failure(format!(
        "Get \"{url}\": stopped after {MAX_REDIRECTS} redirects"
    ))
}

fn finish(t: &HttpTarget, status: u16, body: &[u8], off_host: Option<&Url>) -> ProbeResult {
    if t.purpose == HttpPurpose::Lifecycle {
        return ProbeResult::success(format!(
            "HTTP lifecycle hook answered with statuscode: {status}"
        ));
    }
    if (200..400).contains(&status) {
        if let Some(to) = off_host {
            return ProbeResult::success(format!(
                "Probe terminated redirects (to {to}), Response body: {}",
                snippet(body)
            ));
        }
        return ProbeResult::success(format!("HTTP probe succeeded with statuscode: {status}"));
    }
    let mut message = format!("HTTP probe failed with statuscode: {status}");
    let body = snippet(body);
    if !body.is_empty() {
        message.push_str(", body: ");
        message.push_str(&body);
    }
    ProbeResult::failure(message)
}

/// The start of a body, as text, for a message.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(BODY_IN_MESSAGE)]);
    let mut s = text.trim().to_string();
    if body.len() > BODY_IN_MESSAGE {
        s.push_str("...");
    }
    s
}

/// Errors of one HTTP request (the text after `Get "URL": `).
#[derive(Debug, thiserror::Error)]
enum HttpError {
    #[error("{0}")]
    Dial(DialError),
    #[cfg(feature = "https-probes")]
    #[error("tls: {0}")]
    Tls(io::Error),
    #[error("invalid header {0:?}")]
    Header(String),
    #[error("{0}")]
    Http(#[from] hyper::Error),
    #[error("reading body: {0}")]
    Body(hyper::Error),
    #[cfg(not(feature = "https-probes"))]
    #[error("HTTPS probes are not compiled in (cargo feature https-probes)")]
    NoTls,
}

async fn request(t: &HttpTarget, url: &Url, host_header: &str) -> Result<Answer, HttpError> {
    let tcp = dial(&url.host, url.port).await.map_err(HttpError::Dial)?;
    let stream: Box<dyn Stream> = match url.scheme {
        Scheme::Http => Box::new(tcp),
        Scheme::Https => tls::connect(tcp, &url.host).await?,
    };
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(Io(stream)).await?;
    // Dropping the task (timeout, early return) closes the connection.
    let _conn = rt::spawn(async move {
        if let Err(e) = conn.await {
            log::trace!("probe connection: {e}");
        }
    });

    let mut req = http::Request::get(url.path.as_str());
    let h = req.headers_mut().expect("builder is valid so far");
    let header = |n: &str, v: &str| -> Result<(http::HeaderName, http::HeaderValue), HttpError> {
        let name = http::HeaderName::from_bytes(n.as_bytes())
            .map_err(|_| HttpError::Header(n.to_string()))?;
        let value = http::HeaderValue::from_str(v).map_err(|_| HttpError::Header(n.to_string()))?;
        Ok((name, value))
    };
    let (n, v) = header("host", host_header)?;
    h.insert(n, v);
    for (name, value) in &t.headers {
        if name.eq_ignore_ascii_case("host") {
            continue;
        }
        // kubelet: an empty Accept removes the header.
        if name.eq_ignore_ascii_case("accept") && value.is_empty() {
            continue;
        }
        let (n, v) = header(name, value)?;
        h.append(n, v);
    }
    if !t
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("user-agent"))
    {
        let ua = match t.purpose {
            HttpPurpose::Probe => PROBE_USER_AGENT,
            HttpPurpose::Lifecycle => LIFECYCLE_USER_AGENT,
        };
        h.insert(http::header::USER_AGENT, http::HeaderValue::from_static(ua));
    }
    if !t
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("accept"))
    {
        h.insert(http::header::ACCEPT, http::HeaderValue::from_static("*/*"));
    }
    h.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    let req = req
        .body(Empty::new())
        .map_err(|e| HttpError::Header(e.to_string()))?;

    let resp = sender.send_request(req).await?;
    let status = resp.status().as_u16();
    let location = resp
        .headers()
        .get(http::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    while buf.len() < MAX_READ {
        match body.frame().await {
            None => break,
            Some(Err(e)) => return Err(HttpError::Body(e)),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let room = MAX_READ - buf.len();
                    buf.extend_from_slice(&data[..data.len().min(room)]);
                }
            }
        }
    }
    Ok(Answer {
        status,
        location,
        body: buf,
    })
}

#[cfg(feature = "https-probes")]
mod tls {
    //! TLS for HTTPS probes, without certificate verification.

    use std::io;
    use std::sync::{Arc, OnceLock};

    use futures_rustls::rustls::client::danger::{
        HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
    };
    use futures_rustls::rustls::crypto::ring as rustls_ring;
    use futures_rustls::rustls::crypto::{
        CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom, WebPkiSupportedAlgorithms,
    };
    use futures_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use futures_rustls::rustls::sign::SigningKey;
    use futures_rustls::rustls::{self, ClientConfig, DigitallySignedStruct, SignatureScheme};
    use futures_rustls::TlsConnector;
    use smol::Async;

    use super::{HttpError, Stream};

    /// Accepts any server certificate. Probes only: kubelet's HTTPS probes
    /// and hooks set `InsecureSkipVerify`, because a pod's serving
    /// certificate is typically self-signed or issued for a service name,
    /// never for the pod IP the probe dials; the probe asks "does it
    /// answer?", not "is it who it claims to be?". Handshake signatures are
    /// not checked either: without a trusted certificate they prove nothing
    /// (a man in the middle signs with its own key), and skipping them keeps
    /// RSA/ECDSA verification and certificate parsing out of the binary.
    /// Never use this for anything that sends or trusts data (the
    /// API-server client needs a real verifier).
    #[derive(Debug)]
    pub struct InsecureProbeVerifier;

    impl ServerCertVerifier for InsecureProbeVerifier {
        fn verify_server_cert(
            &self,
            _end_entity: &CertificateDer<'_>,
            _intermediates: &[CertificateDer<'_>],
            _server_name: &ServerName<'_>,
            _ocsp_response: &[u8],
            _now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            _message: &[u8],
            _cert: &CertificateDer<'_>,
            _dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            Ok(HandshakeSignatureValid::assertion())
        }

        fn verify_tls13_signature(
            &self,
            _message: &[u8],
            _cert: &CertificateDer<'_>,
            _dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            Ok(HandshakeSignatureValid::assertion())
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            use SignatureScheme::*;
            vec![
                ECDSA_NISTP256_SHA256,
                ECDSA_NISTP384_SHA384,
                ED25519,
                RSA_PSS_SHA256,
                RSA_PSS_SHA384,
                RSA_PSS_SHA512,
                RSA_PKCS1_SHA256,
                RSA_PKCS1_SHA384,
                RSA_PKCS1_SHA512,
            ]
        }
    }

    /// Random bytes from the kernel, through ring.
    #[derive(Debug)]
    struct SystemRandom;

    impl SecureRandom for SystemRandom {
        fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
            ::ring::rand::SecureRandom::fill(&::ring::rand::SystemRandom::new(), buf)
                .map_err(|_| GetRandomFailed)
        }
    }

    /// Probes never authenticate themselves: no private keys.
    #[derive(Debug)]
    struct NoKeys;

    impl KeyProvider for NoKeys {
        fn load_private_key(
            &self,
            _: PrivateKeyDer<'static>,
        ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
            Err(rustls::Error::General(
                "probes use no client certificate".into(),
            ))
        }
    }

    /// A small ring provider: the mandatory AES-128-GCM and ChaCha20 suites
    /// (TLS 1.3, and ECDHE for TLS 1.2), X25519 and P-256, no signature
    /// verification, no signing. Every mainstream server speaks one of
    /// these; leaving out AES-256/SHA-384, P-384 and ring's RSA/ECDSA code
    /// keeps the binary small.
    fn provider() -> CryptoProvider {
        use rustls_ring::cipher_suite as cs;
        CryptoProvider {
            cipher_suites: vec![
                cs::TLS13_AES_128_GCM_SHA256,
                cs::TLS13_CHACHA20_POLY1305_SHA256,
                cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
                cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
                cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            ],
            kx_groups: vec![
                rustls_ring::kx_group::X25519,
                rustls_ring::kx_group::SECP256R1,
            ],
            signature_verification_algorithms: WebPkiSupportedAlgorithms {
                all: &[],
                mapping: &[],
            },
            secure_random: &SystemRandom,
            key_provider: &NoKeys,
        }
    }

    fn config() -> Arc<ClientConfig> {
        static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
        CONFIG
            .get_or_init(|| {
                let config = ClientConfig::builder_with_provider(Arc::new(provider()))
                    .with_safe_default_protocol_versions()
                    .expect("the provider has TLS 1.2 and 1.3 suites")
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(InsecureProbeVerifier))
                    .with_no_client_auth();
                Arc::new(config)
            })
            .clone()
    }

    pub(super) async fn connect(
        tcp: Async<std::net::TcpStream>,
        host: &str,
    ) -> Result<Box<dyn Stream>, HttpError> {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let name = ServerName::try_from(bare.to_string())
            .map_err(|e| HttpError::Tls(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
        let tls = TlsConnector::from(config())
            .connect(name, tcp)
            .await
            .map_err(HttpError::Tls)?;
        Ok(Box::new(tls))
    }
}

#[cfg(feature = "https-probes")]
pub use tls::InsecureProbeVerifier;

#[cfg(not(feature = "https-probes"))]
mod tls {
    use super::{HttpError, Stream};

    pub(super) async fn connect(
        _: smol::Async<std::net::TcpStream>,
        _: &str,
    ) -> Result<Box<dyn Stream>, HttpError> {
        Err(HttpError::NoTls)
    }
}

// --- grpc ---------------------------------------------------------------------

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    service: String,
}

/// `grpc.health.v1.HealthCheckResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckResponse {
    #[prost(enumeration = "ServingStatus", tag = "1")]
    status: i32,
}

/// `grpc.health.v1.HealthCheckResponse.ServingStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
enum ServingStatus {
    Unknown = 0,
    Serving = 1,
    NotServing = 2,
    ServiceUnknown = 3,
}

impl ServingStatus {
    /// The proto enum's value name, as kubelet's message quotes it.
    fn name(status: i32) -> String {
        match ServingStatus::try_from(status) {
            Ok(ServingStatus::Unknown) => "UNKNOWN".into(),
            Ok(ServingStatus::Serving) => "SERVING".into(),
            Ok(ServingStatus::NotServing) => "NOT_SERVING".into(),
            Ok(ServingStatus::ServiceUnknown) => "SERVICE_UNKNOWN".into(),
            Err(_) => status.to_string(),
        }
    }
}

/// One HTTP/2 connection as a tower service, for `tonic::client::Grpc`.
#[derive(Clone)]
struct H2(hyper::client::conn::http2::SendRequest<tonic::body::Body>);

impl tower_service::Service<http::Request<tonic::body::Body>> for H2 {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = hyper::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Self::Response, hyper::Error>>>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), hyper::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let mut sender = self.0.clone();
        Box::pin(async move { sender.send_request(req).await })
    }
}

/// A gRPC health check of `service` (`""`: the server as a whole).
pub async fn grpc(host: &str, port: u16, service: &str, timeout: Duration) -> ProbeResult {
    let addr = join_host_port(host, port);
    match rt::timeout(timeout, grpc_check(host, port, service)).await {
        Some(r) => r,
        None => ProbeResult::failure(format!(
            "timeout: health rpc to {addr:?} did not complete within {timeout:?}"
        )),
    }
}

async fn grpc_check(host: &str, port: u16, service: &str) -> ProbeResult {
    let addr = join_host_port(host, port);
    let tcp = match dial(host, port).await {
        Ok(s) => s,
        Err(e) => {
            return ProbeResult::failure(format!(
                "error: failed to connect service at {addr:?}: {e}"
            ))
        }
    };
    let mut builder = hyper::client::conn::http2::Builder::new(LocalExec);
    builder.timer(SmolTimer);
    let (sender, conn) = match builder.handshake(Io(tcp)).await {
        Ok(h) => h,
        Err(e) => {
            return ProbeResult::failure(format!(
                "error: failed to connect service at {addr:?}: {e}"
            ))
        }
    };
    // Dropping the task (timeout, return) closes the connection.
    let _conn = rt::spawn(async move {
        if let Err(e) = conn.await {
            log::trace!("grpc probe connection: {e}");
        }
    });
    let origin = match http::Uri::try_from(format!("http://{addr}")) {
        Ok(u) => u,
        Err(e) => return ProbeResult::failure(format!("error: invalid address {addr:?}: {e}")),
    };
    let mut client = tonic::client::Grpc::with_origin(H2(sender), origin);
    let mut req = tonic::Request::new(HealthCheckRequest {
        service: service.to_string(),
    });
    req.metadata_mut().insert(
        "user-agent",
        tonic::metadata::MetadataValue::from_static(PROBE_USER_AGENT),
    );
    let path = http::uri::PathAndQuery::from_static("/grpc.health.v1.Health/Check");
    let codec = tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default();
    if let Err(e) = client.ready().await {
        return ProbeResult::failure(format!("error: failed to connect service at {addr:?}: {e}"));
    }
    match client.unary(req, path, codec).await {
        Ok(resp) => {
            let status = resp.into_inner().status;
            if status == ServingStatus::Serving as i32 {
                ProbeResult::success("service healthy")
            } else {
                ProbeResult::failure(format!("service unhealthy (responded with {:?})", ServingStatus::name(status)))
            }
        }
        Err(s) if s.code() == tonic::Code::Unimplemented => ProbeResult::failure(format!(
            "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
            s.message()
        )),
        Err(s) => ProbeResult::failure(format!("error: health rpc probe failed: {}: {}", s.code(), s.message())),
    }
}

// --- exec -----------------------------------------------------------------------

/// Runs `cmd` in the container with CRI ExecSync.
pub async fn exec(
    rt: &Runtime,
    container_id: &str,
    cmd: &[String],
    timeout: Duration,
) -> ProbeResult {
    let secs = (timeout.as_nanos().div_ceil(1_000_000_000) as i64).max(1);
    let req = api::ExecSyncRequest {
        container_id: container_id.to_string(),
        cmd: cmd.to_vec(),
        timeout: secs,
    };
    let timed_out = || ProbeResult::failure(format!("command {:?} timed out", cmd.join(" ")));
    match rt::timeout(timeout + EXEC_SLACK, rt.exec_sync(req)).await {
        None => timed_out(),
        Some(Err(e)) if e.code() == tonic::Code::DeadlineExceeded => timed_out(),
        Some(Err(e)) => ProbeResult::unknown(exec_error(&e)),
        Some(Ok(r)) => {
            let mut out = r.stdout;
            out.extend_from_slice(&r.stderr);
            out.truncate(MAX_READ);
            let text = String::from_utf8_lossy(&out).trim_end().to_string();
            if r.exit_code == 0 {
                ProbeResult::success(text)
            } else if text.is_empty() {
                ProbeResult::failure(format!(
                    "command {:?} exited with code {}",
                    cmd.join(" "),
                    r.exit_code
                ))
            } else {
                ProbeResult::failure(text)
            }
        }
    }
}

fn exec_error(e: &CriError) -> String {
    format!("exec failed: {e}")
}

#[cfg(test)]
#[path = "../tests/images/grpc-health/server.rs"]
mod grpc_health_server;

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerPort, GRPCAction, HTTPGetAction, HTTPHeader, SleepAction, TCPSocketAction,
    };
    use smol::io::{AsyncReadExt, AsyncWriteExt};
    use std::cell::RefCell;
    use std::net::TcpListener;
    use std::rc::Rc;

    const T: Duration = Duration::from_secs(5);

    /// A one-request-per-connection HTTP/1.1 server on 127.0.0.1: `answer`
    /// maps the request head to the whole response. Returns the port and
    /// the request heads seen.
    fn serve_http(
        answer: impl Fn(&str, u16) -> String + 'static,
    ) -> (u16, Rc<RefCell<Vec<String>>>) {
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let port = listener.get_ref().local_addr().unwrap().port();
        let seen = Rc::new(RefCell::new(Vec::new()));
        let log = seen.clone();
        rt::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                read_head(stream, &answer, port, &log).await;
            }
        })
        .detach();
        (port, seen)
    }

    async fn read_head<S: AsyncRead + AsyncWrite + Unpin>(
        mut s: S,
        answer: &impl Fn(&str, u16) -> String,
        port: u16,
        log: &Rc<RefCell<Vec<String>>>,
    ) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let head = String::from_utf8_lossy(&buf).to_string();
        log.borrow_mut().push(head.clone());
        let _ = s.write_all(answer(&head, port).as_bytes()).await;
        let _ = s.flush().await;
        let _ = s.close().await;
    }

    fn response(status: &str, extra: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
            body.len()
        )
    }

    fn target(port: u16, path: &str) -> HttpTarget {
        HttpTarget {
            scheme: Scheme::Http,
            host: "127.0.0.1".into(),
            port,
            path: path.into(),
            headers: vec![],
            purpose: HttpPurpose::Probe,
        }
    }

    fn container_with_port(name: &str, port: i32) -> Container {
        Container {
            name: "app".into(),
            ports: Some(vec![ContainerPort {
                name: Some(name.into()),
                container_port: port,
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    /// A port on 127.0.0.1 that nothing listens on.
    fn closed_port() -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    #[test]
    fn a_200_answer_is_a_success_and_the_request_carries_kubelets_headers() {
        rt::block_on(async {
            let (port, seen) = serve_http(|_, _| response("200 OK", "", "ok"));
            let r = http_get(&target(port, "/healthz?x=1"), T).await;
            assert_eq!(r.outcome, Outcome::Success, "{}", r.message);
            let head = seen.borrow()[0].to_ascii_lowercase();
            assert!(head.starts_with("get /healthz?x=1 http/1.1\r\n"), "{head}");
            assert!(
                head.contains(&format!("host: 127.0.0.1:{port}\r\n")),
                "{head}"
            );
            assert!(head.contains("user-agent: kube-probe/1.36\r\n"), "{head}");
            assert!(head.contains("accept: */*\r\n"), "{head}");
        });
    }

    #[test]
    fn a_500_answer_is_a_failure_naming_the_status_code_and_the_body() {
        rt::block_on(async {
            let (port, _) =
                serve_http(|_, _| response("500 Internal Server Error", "", "database down"));
            let r = http_get(&target(port, "/"), T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(
                r.message.contains("HTTP probe failed with statuscode: 500"),
                "{}",
                r.message
            );
            assert!(r.message.contains("database down"), "{}", r.message);
        });
    }

    #[test]
    fn custom_headers_are_sent_and_a_host_header_overrides_the_host() {
        rt::block_on(async {
            let (port, seen) = serve_http(|_, _| response("204 No Content", "", ""));
            let mut t = target(port, "/");
            t.headers = vec![
                ("Host".into(), "example.test".into()),
                ("X-Probe".into(), "yes".into()),
                ("Accept".into(), "application/json".into()),
                ("User-Agent".into(), "mine".into()),
            ];
            let r = http_get(&t, T).await;
            assert_eq!(r.outcome, Outcome::Success, "{}", r.message);
            let head = seen.borrow()[0].to_ascii_lowercase();
            assert!(head.contains("host: example.test\r\n"), "{head}");
            assert!(head.contains("x-probe: yes\r\n"), "{head}");
            assert!(
                head.contains("accept: application/json\r\n") && !head.contains("*/*"),
                "{head}"
            );
            assert!(
                head.contains("user-agent: mine\r\n") && !head.contains("kube-probe"),
                "{head}"
            );
        });
    }

    #[test]
    fn a_redirect_to_the_same_host_is_followed() {
        rt::block_on(async {
            let (port, seen) = serve_http(|head, _| {
                if head.starts_with("GET /old ") {
                    response("302 Found", "Location: /new\r\n", "")
                } else if head.starts_with("GET /new ") {
                    response("500 Internal Server Error", "", "")
                } else {
                    response("404 Not Found", "", "")
                }
            });
            let r = http_get(&target(port, "/old"), T).await;
            assert_eq!(
                r.outcome,
                Outcome::Failure,
                "the 500 after the redirect counts: {}",
                r.message
            );
            assert!(r.message.contains("statuscode: 500"), "{}", r.message);
            assert_eq!(seen.borrow().len(), 2);
        });
    }

    #[test]
    fn an_absolute_redirect_to_the_same_host_name_on_another_port_is_followed() {
        rt::block_on(async {
            let (ok_port, _) = serve_http(|_, _| response("200 OK", "", ""));
            let (port, _) = serve_http(move |_, _| {
                response(
                    "301 Moved Permanently",
                    &format!("Location: http://127.0.0.1:{ok_port}/x\r\n"),
                    "",
                )
            });
            let r = http_get(&target(port, "/"), T).await;
            assert_eq!(r.outcome, Outcome::Success, "{}", r.message);
            assert!(r.message.contains("statuscode: 200"), "{}", r.message);
        });
    }

    #[test]
    fn a_redirect_to_another_host_is_not_followed_and_counts_as_success() {
        rt::block_on(async {
            let (port, seen) = serve_http(|_, _| {
                response(
                    "302 Found",
                    "Location: http://192.0.2.1/elsewhere\r\n",
                    "moved",
                )
            });
            let r = http_get(&target(port, "/"), T).await;
            assert_eq!(r.outcome, Outcome::Success, "{}", r.message);
            assert!(
                r.message.contains("Probe terminated redirects"),
                "{}",
                r.message
            );
            assert_eq!(seen.borrow().len(), 1);
        });
    }

    #[test]
    fn a_redirect_loop_fails_after_ten_requests() {
        rt::block_on(async {
            let (port, seen) =
                serve_http(|_, _| response("307 Temporary Redirect", "Location: /again\r\n", ""));
            let r = http_get(&target(port, "/"), T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(
                r.message.contains("stopped after 10 redirects"),
                "{}",
                r.message
            );
            assert_eq!(seen.borrow().len(), MAX_REDIRECTS);
        });
    }

    #[test]
    fn a_server_that_never_answers_fails_the_probe_at_the_timeout() {
        rt::block_on(async {
            let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
            let port = listener.get_ref().local_addr().unwrap().port();
            let _hold = rt::spawn(async move {
                let mut conns = Vec::new();
                loop {
                    conns.push(listener.accept().await);
                }
            });
            let r = http_get(&target(port, "/"), Duration::from_millis(300)).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(r.message.contains("deadline exceeded"), "{}", r.message);
        });
    }

    #[test]
    fn a_refused_connection_fails_the_http_probe() {
        let r = rt::block_on(http_get(&target(closed_port(), "/"), T));
        assert_eq!(r.outcome, Outcome::Failure);
        assert!(r.message.contains("dial tcp 127.0.0.1:"), "{}", r.message);
    }

    #[test]
    fn a_big_body_is_read_only_up_to_ten_kib() {
        rt::block_on(async {
            let big = "x".repeat(100 * 1024);
            let (port, _) = serve_http(move |_, _| response("503 Service Unavailable", "", &big));
            let r = http_get(&target(port, "/"), T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(
                r.message.len() < 2 * 1024,
                "message is bounded: {} bytes",
                r.message.len()
            );
        });
    }

    #[test]
    fn a_lifecycle_get_passes_on_any_answer_and_says_kube_lifecycle() {
        rt::block_on(async {
            let (port, seen) = serve_http(|_, _| response("500 Internal Server Error", "", ""));
            let mut t = target(port, "/");
            t.purpose = HttpPurpose::Lifecycle;
            let r = http_get(&t, T).await;
            assert_eq!(r.outcome, Outcome::Success, "{}", r.message);
            assert!(
                seen.borrow()[0].contains("user-agent: kube-lifecycle/1.36\r\n"),
                "{:?}",
                seen.borrow()
            );
        });
    }

    #[cfg(feature = "https-probes")]
    #[test]
    fn an_https_probe_accepts_a_self_signed_certificate() {
        use futures_rustls::rustls;
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        const CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBojCCAUigAwIBAgIUaInmlB7Un50lp2v7EvfaMyzmww0wCgYIKoZIzj0EAwIw
HTEbMBkGA1UEAwwScGljb2xldC1wcm9iZS10ZXN0MCAXDTI2MTEyOTE5MTgwOVoY
DzIxMjYxMTA1MTkxODA5WjAdMRswGQYDVQQDDBJwaWNvbGV0LXByb2JlLXRlc3Qw
WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAASFa1J0bExmiOkDUvU7PVS1mJMFmAQJ
QdaWnkAoONBAIr+OcVD7o8Y53nZQtTcUJLP6F4tkuUdNbWFz8tjWEMxPo2QwYjAd
BgNVHQ4EFgQUd90ozYz0wbp3HNRLkKCMF/8T+jYwHwYDVR0jBBgwFoAUd90ozYz0
wbp3HNRLkKCMF/8T+jYwDwYDVR0TAQH/BAUwAwEB/zAPBgNVHREECDAGhwR/AAAB
MAoGCCqGSM49BAMCA0gAMEUCIQCjZxxy650sVjt68ODMsTtG9nHSJdfn9Q77+wAI
VkPEHAIgS2GO8d0VpDSYnzvepV8kcg/C4CqSK47jyW1qEU3i7G0=
-----END CERTIFICATE-----";
        // A throwaway key for this test only (self-signed, CN picolet-probe-test).
        const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgePhfFf/B8VqYrYqF
GTCsX7kEJHsdqGxjJ8gOiw7aKWahRANCAASFa1J0bExmiOkDUvU7PVS1mJMFmAQJ
QdaWnkAoONBAIr+OcVD7o8Y53nZQtTcUJLP6F4tkuUdNbWFz8tjWEMxP
-----END PRIVATE KEY-----";
        let cert = CertificateDer::from_pem_slice(CERT.as_bytes()).unwrap();
        let key = PrivateKeyDer::from_pem_slice(KEY.as_bytes()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
        let acceptor = futures_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        rt::block_on(async {
            let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
            let port = listener.get_ref().local_addr().unwrap().port();
            let seen = Rc::new(RefCell::new(Vec::new()));
            let log = seen.clone();
            let _server = rt::spawn(async move {
                loop {
                    let (tcp, _) = listener.accept().await.unwrap();
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        read_head(
                            tls,
                            &|_: &str, _| response("200 OK", "", "secure"),
                            port,
                            &log,
                        )
                        .await;
                    }
                }
            });
            let mut t = target(port, "/tls");
            t.scheme = Scheme::Https;
            let r = http_get(&t, T).await;
            assert_eq!(r.outcome, Outcome::Success, "{}", r.message);
            assert!(
                seen.borrow()[0].starts_with("GET /tls HTTP/1.1"),
                "{:?}",
                seen.borrow()
            );
            // A plain HTTP answer to the TLS hello fails the probe.
            let plain = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
            let plain_port = plain.get_ref().local_addr().unwrap().port();
            let _plain = rt::spawn(async move {
                let (mut s, _) = plain.accept().await.unwrap();
                let _ = s
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
                    .await;
                rt::sleep(Duration::from_secs(1)).await;
            });
            let mut t = target(plain_port, "/");
            t.scheme = Scheme::Https;
            let r = http_get(&t, T).await;
            assert_eq!(r.outcome, Outcome::Failure, "{}", r.message);
            assert!(r.message.contains("tls"), "{}", r.message);
        });
    }

    #[cfg(not(feature = "https-probes"))]
    #[test]
    fn an_https_probe_without_tls_compiled_in_fails_saying_so() {
        rt::block_on(async {
            let (port, _) = serve_http(|_, _| response("200 OK", "", ""));
            let mut t = target(port, "/");
            t.scheme = Scheme::Https;
            let r = http_get(&t, T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(r.message.contains("https-probes"), "{}", r.message);
        });
    }

    #[test]
    fn a_tcp_probe_succeeds_on_a_listening_port_and_fails_on_a_closed_one() {
        rt::block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = l.local_addr().unwrap().port();
            assert_eq!(
                tcp_socket("127.0.0.1", port, T).await.outcome,
                Outcome::Success
            );
            let r = tcp_socket("127.0.0.1", closed_port(), T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(r.message.contains("dial tcp"), "{}", r.message);
            let r = tcp_socket("probe-target.invalid", port, T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(r.message.contains("need an IP address"), "{}", r.message);
            assert_eq!(
                tcp_socket("localhost", port, T).await.outcome,
                Outcome::Success
            );
        });
    }

    fn start_grpc_server(not_serving: &std::path::Path) -> (u16, smol::Task<io::Result<()>>) {
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let port = listener.get_ref().local_addr().unwrap().port();
        let config = grpc_health_server::Config {
            not_serving_file: not_serving.to_path_buf(),
            services: vec!["picolet.test".into()],
        };
        (port, rt::spawn(grpc_health_server::serve(listener, config)))
    }

    #[test]
    fn a_grpc_probe_follows_the_servers_health_status() {
        let dir = tempfile::tempdir().unwrap();
        let flag = dir.path().join("not-serving");
        rt::block_on(async {
            let (port, _server) = start_grpc_server(&flag);
            let r = grpc("127.0.0.1", port, "", T).await;
            assert_eq!(r, ProbeResult::success("service healthy"));
            assert_eq!(
                grpc("127.0.0.1", port, "picolet.test", T).await.outcome,
                Outcome::Success
            );

            std::fs::write(&flag, b"").unwrap();
            let r = grpc("127.0.0.1", port, "", T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert_eq!(
                r.message,
                "service unhealthy (responded with \"NOT_SERVING\")"
            );

            let r = grpc("127.0.0.1", port, "no.such.Service", T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(r.message.contains("unknown service"), "{}", r.message);
        });
    }

    #[test]
    fn a_grpc_probe_fails_when_nothing_listens() {
        let r = rt::block_on(grpc("127.0.0.1", closed_port(), "", T));
        assert_eq!(r.outcome, Outcome::Failure);
        assert!(
            r.message.starts_with("error: failed to connect service"),
            "{}",
            r.message
        );
    }

    #[test]
    fn a_grpc_probe_against_a_silent_server_times_out() {
        rt::block_on(async {
            let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
            let port = listener.get_ref().local_addr().unwrap().port();
            let _hold = rt::spawn(async move {
                let mut conns = Vec::new();
                loop {
                    conns.push(listener.accept().await);
                }
            });
            let r = grpc("127.0.0.1", port, "", Duration::from_millis(300)).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(r.message.starts_with("timeout:"), "{}", r.message);
        });
    }

    #[test]
    fn an_exec_probe_without_a_runtime_is_unknown_not_failed() {
        let rt_ = Runtime::new(
            "/nonexistent/picolet-prober-test.sock".into(),
            Duration::from_secs(1),
        );
        let r = rt::block_on(exec(&rt_, "c1", &["true".into()], Duration::from_secs(1)));
        assert_eq!(r.outcome, Outcome::Unknown, "{}", r.message);
    }

    #[test]
    fn a_sleep_hook_longer_than_its_timeout_fails() {
        let rt_ = Runtime::new(
            "/nonexistent/picolet-prober-test.sock".into(),
            Duration::from_secs(1),
        );
        let r = rt::block_on(run_handler(
            &rt_,
            "c1",
            &Handler::Sleep(Duration::from_secs(30)),
            Duration::from_millis(50),
        ));
        assert_eq!(r.outcome, Outcome::Failure);
        let r = rt::block_on(run_handler(
            &rt_,
            "c1",
            &Handler::Sleep(Duration::from_millis(10)),
            T,
        ));
        assert_eq!(r.outcome, Outcome::Success);
    }

    #[test]
    fn ports_resolve_by_number_by_name_and_by_a_number_in_a_string() {
        let c = container_with_port("http", 8080);
        assert_eq!(resolve_port(&IntOrString::Int(9000), &c), Ok(9000));
        assert_eq!(
            resolve_port(&IntOrString::String("http".into()), &c),
            Ok(8080)
        );
        assert_eq!(
            resolve_port(&IntOrString::String("9090".into()), &c),
            Ok(9090)
        );
        assert_eq!(
            resolve_port(&IntOrString::String("metrics".into()), &c),
            Err("port metrics not found".into())
        );
        assert_eq!(
            resolve_port(&IntOrString::Int(0), &c),
            Err("invalid port number: 0".into())
        );
        assert_eq!(
            resolve_port(&IntOrString::Int(70000), &c),
            Err("invalid port number: 70000".into())
        );
    }

    #[test]
    fn an_http_probe_defaults_to_the_pod_ip_root_path_and_plain_http() {
        let c = container_with_port("web", 80);
        let p = Probe {
            http_get: Some(HTTPGetAction {
                port: IntOrString::String("web".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let h = probe_handler(&p, "10.1.0.5", &c).unwrap();
        assert_eq!(
            h,
            Handler::HttpGet(HttpTarget {
                scheme: Scheme::Http,
                host: "10.1.0.5".into(),
                port: 80,
                path: "/".into(),
                headers: vec![],
                purpose: HttpPurpose::Probe,
            })
        );
        let p = Probe {
            http_get: Some(HTTPGetAction {
                host: Some("127.0.0.1".into()),
                path: Some("healthz".into()),
                scheme: Some("HTTPS".into()),
                port: IntOrString::Int(8443),
                http_headers: Some(vec![HTTPHeader {
                    name: "X-A".into(),
                    value: "b".into(),
                }]),
            }),
            ..Default::default()
        };
        let Handler::HttpGet(t) = probe_handler(&p, "10.1.0.5", &c).unwrap() else {
            panic!()
        };
        assert_eq!(
            (t.scheme, t.host.as_str(), t.port, t.path.as_str()),
            (Scheme::Https, "127.0.0.1", 8443, "/healthz")
        );
        assert_eq!(t.headers, vec![("X-A".to_string(), "b".to_string())]);
        assert_eq!(t.url(), "https://127.0.0.1:8443/healthz");
    }

    #[test]
    fn tcp_grpc_and_exec_probes_take_their_defaults() {
        let c = container_with_port("grpc", 50051);
        let tcp = Probe {
            tcp_socket: Some(TCPSocketAction {
                host: None,
                port: IntOrString::String("grpc".into()),
            }),
            ..Default::default()
        };
        assert_eq!(
            probe_handler(&tcp, "fd00::5", &c),
            Ok(Handler::TcpSocket {
                host: "fd00::5".into(),
                port: 50051
            })
        );
        let g = Probe {
            grpc: Some(GRPCAction {
                port: 50051,
                service: None,
            }),
            ..Default::default()
        };
        assert_eq!(
            probe_handler(&g, "10.1.0.5", &c),
            Ok(Handler::Grpc {
                host: "10.1.0.5".into(),
                port: 50051,
                service: String::new()
            })
        );
        let e = Probe {
            exec: Some(k8s_openapi::api::core::v1::ExecAction {
                command: Some(vec!["cat".into(), "/ok".into()]),
            }),
            ..Default::default()
        };
        assert_eq!(
            probe_handler(&e, "", &c),
            Ok(Handler::Exec {
                command: vec!["cat".into(), "/ok".into()]
            })
        );
    }

    #[test]
    fn a_probe_with_no_handler_or_two_handlers_or_no_pod_ip_is_refused() {
        let c = Container::default();
        assert_eq!(
            probe_handler(&Probe::default(), "10.0.0.1", &c),
            Err(HandlerError::None)
        );
        let two = Probe {
            grpc: Some(GRPCAction {
                port: 1,
                service: None,
            }),
            tcp_socket: Some(TCPSocketAction {
                host: None,
                port: IntOrString::Int(1),
            }),
            ..Default::default()
        };
        assert_eq!(
            probe_handler(&two, "10.0.0.1", &c),
            Err(HandlerError::Several("tcpSocket, grpc".into()))
        );
        let tcp = Probe {
            tcp_socket: Some(TCPSocketAction {
                host: None,
                port: IntOrString::Int(1),
            }),
            ..Default::default()
        };
        assert_eq!(probe_handler(&tcp, "", &c), Err(HandlerError::NoHost));
    }

    #[test]
    fn lifecycle_handlers_cover_exec_http_and_sleep_but_refuse_tcp() {
        let c = Container::default();
        let sleep = LifecycleHandler {
            sleep: Some(SleepAction { seconds: 3 }),
            ..Default::default()
        };
        assert_eq!(
            lifecycle_handler(&sleep, "10.0.0.1", &c),
            Ok(Handler::Sleep(Duration::from_secs(3)))
        );
        let http = LifecycleHandler {
            http_get: Some(HTTPGetAction {
                port: IntOrString::Int(8080),
                path: Some("/stop".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let Ok(Handler::HttpGet(t)) = lifecycle_handler(&http, "10.0.0.1", &c) else {
            panic!()
        };
        assert_eq!(
            (t.purpose, t.url()),
            (
                HttpPurpose::Lifecycle,
                "http://10.0.0.1:8080/stop".to_string()
            )
        );
        let tcp = LifecycleHandler {
            tcp_socket: Some(TCPSocketAction {
                host: None,
                port: IntOrString::Int(1),
            }),
            ..Default::default()
        };
        assert_eq!(
            lifecycle_handler(&tcp, "10.0.0.1", &c),
            Err(HandlerError::TcpLifecycle)
        );
    }

    #[test]
    fn redirect_locations_resolve_against_the_current_url() {
        let base = Url {
            scheme: Scheme::Http,
            host: "10.0.0.1".into(),
            port: 8080,
            path: "/a/b?q".into(),
        };
        let (u, rel) = base.join("c").unwrap();
        assert_eq!((u.path.as_str(), rel), ("/a/c", true));
        let (u, rel) = base.join("/x y").unwrap();
        assert_eq!((u.path.as_str(), rel), ("/x%20y", true));
        let (u, rel) = base.join("https://10.0.0.1/z#frag").unwrap();
        assert_eq!(
            (u.scheme, u.port, u.path.as_str(), rel),
            (Scheme::Https, 443, "/z", false)
        );
        let (u, _) = base.join("//[fd00::1]:9/").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("fd00::1", 9));
        assert_eq!(u.to_string(), "http://[fd00::1]:9/");
    }
}
