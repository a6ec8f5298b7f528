//! The admin socket: a tiny HTTP/1.1 API on a unix socket, its blocking
//! client, and the `kubectl get pods`-style table the CLI prints.
//!
//! picolet has no API server to report to, so operators ask the agent
//! directly: `picolet pods` connects to the socket (default
//! `/run/picolet/picolet.sock`) and reads `GET /pods`. The socket is the only
//! access control, so it is created `0600` inside a `0700` directory and is
//! never world-accessible, not even between `bind` and `chmod` (the umask is
//! narrowed around `bind`).
//!
//! Routes: `GET /healthz` → `ok`; `GET /pods` → a v1 `PodList` as JSON;
//! other paths 404, other methods 405. Every connection serves exactly one
//! request (no keep-alive), must send its headers within
//! [`HEADER_TIMEOUT`] and finish within [`CONNECTION_TIMEOUT`], and at most
//! [`MAX_CONNECTIONS`] are served at once, so a stuck or hostile local
//! client cannot pin memory in the agent.
//!
//! The server runs on picolet's single-threaded executor ([`crate::rt`]); the
//! client is plain blocking `std` I/O, because the CLI is a short-lived
//! process that needs no executor.

use std::cell::Cell;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use smol::Async;

use crate::rt;

/// How long a client may take to send its request headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one connection may live, request and response included.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections served at once; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 64;
/// The largest response the client accepts.
const MAX_RESPONSE: u64 = 64 << 20;

/// The admin socket's and its client's errors.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("is picolet running? cannot connect to {}: {source}", path.display())]
    Connect { path: PathBuf, source: io::Error },
    #[error("admin socket {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("admin socket {}: malformed HTTP response: {what}", path.display())]
    Protocol { path: PathBuf, what: String },
    #[error("{} exists and is not a socket; refusing to replace it", path.display())]
    NotASocket { path: PathBuf },
    #[error("{} is in use: another picolet is serving it", path.display())]
    InUse { path: PathBuf },
    #[error("creating admin socket {}: {source}", path.display())]
    Bind { path: PathBuf, source: io::Error },
    #[error("accepting on admin socket {}: {source}", path.display())]
    Accept { path: PathBuf, source: io::Error },
}

/// The current pods as a v1 `PodList` (`apiVersion`, `kind`, `items`).
pub type PodsFn = Rc<dyn Fn() -> serde_json::Value>;

/// Renders `/metrics` (Prometheus text format).
pub type MetricsFn = Rc<dyn Fn() -> String>;

/// What the admin socket serves.
#[derive(Clone)]
pub struct Handlers {
    /// `GET /pods`: a v1 PodList.
    pub pods: PodsFn,
    /// `GET /metrics`; `None` answers 404.
    pub metrics: Option<MetricsFn>,
}

impl From<PodsFn> for Handlers {
    fn from(pods: PodsFn) -> Self {
        Handlers {
            pods,
            metrics: None,
        }
    }
}

// ---- server ------------------------------------------------------------

/// Creates the admin socket at `path`, mode 0600.
///
/// The parent directory is created 0700 if missing. A stale socket left by a
/// previous run is removed; a live one (something accepts on it) is
/// [`AdminError::InUse`], and a non-socket file is never removed.
pub fn bind(path: &Path) -> Result<Async<UnixListener>, AdminError> {
    let bind_err = |source| AdminError::Bind {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.exists() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(bind_err)?;
        }
    }
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(AdminError::InUse {
                    path: path.to_path_buf(),
                });
            }
            fs::remove_file(path).map_err(bind_err)?;
        }
        Ok(_) => {
            return Err(AdminError::NotASocket {
                path: path.to_path_buf(),
            })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(bind_err(e)),
    }
    // The socket inode gets its mode from the umask at bind(2): narrow it so
    // the socket is 0600 from birth. The umask is process-wide; picolet's
    // only other thread is the I/O reactor, which creates no files.
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
    let bound = UnixListener::bind(path);
    rustix::process::umask(old);
    let listener = bound.map_err(bind_err)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(bind_err)?;
    Async::new(listener).map_err(bind_err)
}

/// Binds the admin socket at `path` and serves it until an accept fails
/// for good (or the future is dropped).
pub async fn serve(path: &Path, handlers: impl Into<Handlers>) -> Result<(), AdminError> {
    let listener = bind(path)?;
    serve_listener(&listener, path, handlers).await
}

/// Counts a live connection; uncounts it when the connection task ends.
struct Slot(Rc<Cell<usize>>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// Serves an already bound admin socket (`path` only names it in errors).
pub async fn serve_listener(
    listener: &Async<UnixListener>,
    path: &Path,
    handlers: impl Into<Handlers>,
) -> Result<(), AdminError> {
    let handlers: Handlers = handlers.into();
    let active = Rc::new(Cell::new(0usize));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(rt::SmolTimer)
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(false)
        .max_buf_size(16 * 1024)
        .max_headers(32);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) if is_transient(&e) => {
                // Out of descriptors, or the peer gave up: wait, don't spin.
                log::warn!("admin socket {}: accept: {e}", path.display());
                rt::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(source) => {
                return Err(AdminError::Accept {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        if active.get() >= MAX_CONNECTIONS {
            log::warn!(
                "admin socket {}: {MAX_CONNECTIONS} connections open; refusing one",
                path.display()
            );
            continue; // dropping `stream` closes it
        }
        active.set(active.get() + 1);
        let slot = Slot(active.clone());
        let handlers = handlers.clone();
        let conn = builder.serve_connection(
            rt::Io(stream),
            hyper::service::service_fn(move |req: Request<Incoming>| {
                let response = route(&req, &handlers);
                async move { Ok::<_, Infallible>(response) }
            }),
        );
        rt::spawn(async move {
            let _slot = slot;
            match rt::timeout(CONNECTION_TIMEOUT, conn).await {
                None => log::debug!("admin connection timed out"),
                Some(Err(e)) => log::debug!("admin connection: {e}"),
                Some(Ok(())) => {}
            }
        })
        .detach();
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == rustix::io::Errno::MFILE.raw_os_error()
            || code == rustix::io::Errno::NFILE.raw_os_error()
            || code == rustix::io::Errno::NOBUFS.raw_os_error()
            || code == rustix::io::Errno::NOMEM.raw_os_error()
            || code == rustix::io::Errno::CONNABORTED.raw_os_error()
            || code == rustix::io::Errno::INTR.raw_os_error()
    )
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Answers one request.
fn route<B>(req: &Request<B>, handlers: &Handlers) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let known =
        matches!(path, "/healthz" | "/pods") || (path == "/metrics" && handlers.metrics.is_some());
    if !known {
        return text(StatusCode::NOT_FOUND, "not found\n");
    }
    if req.method() != Method::GET {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET"));
        return r;
    }
    match path {
        "/healthz" => text(StatusCode::OK, "ok"),
        "/metrics" => {
            let body = handlers.metrics.as_ref().map(|m| m()).unwrap_or_default();
            let mut r = Response::new(Full::new(Bytes::from(body)));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        _ => match serde_json::to_vec(&(handlers.pods)()) {
            Ok(body) => {
                let mut r = Response::new(Full::new(Bytes::from(body)));
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    header::HeaderValue::from_static("application/json"),
                );
                r
            }
            Err(e) => {
                log::error!("admin socket: encoding the pod list: {e}");
                text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "encoding the pod list failed\n",
                )
            }
        },
    }
}

// ---- client ------------------------------------------------------------

/// `GET uri` on the admin socket at `path`: the status code and the body.
pub fn get(path: &Path, uri: &str) -> Result<(u16, Vec<u8>), AdminError> {
    let io_err = |source| AdminError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut stream = UnixStream::connect(path).map_err(|source| AdminError::Connect {
        path: path.to_path_buf(),
        source,
    })?;
    stream
        .set_read_timeout(Some(CONNECTION_TIMEOUT))
        .map_err(io_err)?;
    stream
        .set_write_timeout(Some(CONNECTION_TIMEOUT))
        .map_err(io_err)?;
    let request = format!(
        "GET {uri} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: picolet\r\nAccept: application/json, */*\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).map_err(io_err)?;
    let mut raw = Vec::new();
    stream
        .take(MAX_RESPONSE + 1)
        .read_to_end(&mut raw)
        .map_err(io_err)?;
    if raw.len() as u64 > MAX_RESPONSE {
        return Err(AdminError::Protocol {
            path: path.to_path_buf(),
            what: "response too large".into(),
        });
    }
    parse_response(&raw).map_err(|what| AdminError::Protocol {
        path: path.to_path_buf(),
        what,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Parses a whole HTTP/1.1 response read until EOF.
fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = find(raw, b"\r\n\r\n").ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "headers are not UTF-8")?;
    let rest = &raw[end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(format!("bad status line {status_line:?}"));
    }
    let code: u16 = parts
        .next()
        .and_then(|c| c.parse().ok())
        .filter(|c| (100..1000).contains(c))
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("bad header {line:?}"));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| format!("bad Content-Length {value:?}"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value
                .split(',')
                .any(|v| v.trim().eq_ignore_ascii_case("chunked"));
        }
    }
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(n) = length {
        if rest.len() < n {
            return Err(format!("body truncated: {} of {n} bytes", rest.len()));
        }
        rest[..n].to_vec()
    } else {
        rest.to_vec()
    };
    Ok((code, body))
}

/// Decodes a chunked body (extensions and trailers are ignored).
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let eol = find(rest, b"\r\n").ok_or("chunk size line truncated")?;
        let line = std::str::from_utf8(&rest[..eol]).map_err(|_| "bad chunk size")?;
        let size_hex = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| format!("bad chunk size {size_hex:?}"))?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(body);
        }
        if rest.len() < size + 2 || &rest[size..size + 2] != b"\r\n" {
            return Err("chunk truncated".into());
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

// ---- table -------------------------------------------------------------

/// kubectl's `HumanDuration` (k8s.io/apimachinery/pkg/util/duration) for a
/// number of seconds: `45s`, `3m20s`, `15m`, `5h30m`, `20h`, `3d4h`, `120d`,
/// `2y30d`, `9y`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = hours / 24 % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn since(
    t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    now_unix: i64,
) -> String {
    match t {
        Some(t) => human_duration(now_unix - t.0.as_second()),
        None => "<unknown>".into(),
    }
}

/// One pod's READY, STATUS and RESTARTS cells, by kubectl's `printPod`.
pub fn pod_row(pod: &Pod, now_unix: i64) -> (String, String, String) {
    let spec = pod.spec.as_ref();
    let status = pod.status.clone().unwrap_or_default();
    let inits = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[]);
    let is_sidecar = |name: &str| {
        inits
            .iter()
            .any(|c| c.name == name && c.restart_policy.as_deref() == Some("Always"))
    };
    let mut total = spec.map(|s| s.containers.len()).unwrap_or(0)
        + inits.iter().filter(|c| is_sidecar(&c.name)).count();
    let mut ready = 0;
    let mut restarts = 0i64;
    let mut sidecar_restarts = 0i64;
    let mut last_restart: Option<i64> = None;
    let mut last_sidecar_restart: Option<i64> = None;
    let finished = |c: &ContainerStatus| -> Option<i64> {
        c.last_state
            .as_ref()?
            .terminated
            .as_ref()?
            .finished_at
            .as_ref()
            .map(|t| t.0.as_second())
    };

    let phase = status.phase.clone().unwrap_or_default();
    let mut reason = status
        .reason
        .clone()
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| phase.clone());
    if status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("SchedulingGated"))
    {
        reason = "SchedulingGated".into();
    }

    let mut initializing = false;
    for (i, c) in status.init_container_statuses.iter().flatten().enumerate() {
        restarts += i64::from(c.restart_count);
        if let Some(f) = finished(c) {
            last_restart = last_restart.max(Some(f));
        }
        let sidecar = is_sidecar(&c.name);
        if sidecar {
            sidecar_restarts += i64::from(c.restart_count);
            if let Some(f) = finished(c) {
                last_sidecar_restart = last_sidecar_restart.max(Some(f));
            }
        }
        let state = c.state.clone().unwrap_or_default();
        match (&state.terminated, &state.waiting) {
            (Some(t), _) if t.exit_code == 0 => continue,
            _ if sidecar && c.started == Some(true) => {
                ready += usize::from(c.ready);
                continue;
            }
            (Some(t), _) => {
                reason = match (
                    t.reason.as_deref().filter(|r| !r.is_empty()),
                    t.signal.filter(|s| *s != 0),
                ) {
                    (Some(r), _) => format!("Init:{r}"),
                    (None, Some(sig)) => format!("Init:Signal:{sig}"),
                    (None, None) => format!("Init:ExitCode:{}", t.exit_code),
                };
            }
            (None, Some(w))
                if w.reason
                    .as_deref()
                    .is_some_and(|r| !r.is_empty() && r != "PodInitializing") =>
            {
                reason = format!("Init:{}", w.reason.as_deref().unwrap_or_default());
            }
            _ => reason = format!("Init:{i}/{}", inits.len()),
        }
        initializing = true;
        break;
    }

    let initialized = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Initialized" && c.status == "True");
    if !initializing || initialized {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for c in status.container_statuses.iter().flatten().rev() {
            restarts += i64::from(c.restart_count);
            if let Some(f) = finished(c) {
                last_restart = last_restart.max(Some(f));
            }
            let state = c.state.clone().unwrap_or_default();
            if let Some(r) = state
                .waiting
                .as_ref()
                .and_then(|w| w.reason.clone())
                .filter(|r| !r.is_empty())
            {
                reason = r;
            } else if let Some(t) = &state.terminated {
                reason = match (
                    t.reason.as_deref().filter(|r| !r.is_empty()),
                    t.signal.filter(|s| *s != 0),
                ) {
                    (Some(r), _) => r.to_string(),
                    (None, Some(sig)) => format!("Signal:{sig}"),
                    (None, None) => format!("ExitCode:{}", t.exit_code),
                };
            } else if c.ready && state.running.is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }

    if pod.metadata.deletion_timestamp.is_some() {
        if status.reason.as_deref() == Some("NodeLost") {
            reason = "Unknown".into();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".into();
        }
    }

    total = total.max(ready);
    let restarts = match last_restart {
        Some(at) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(now_unix - at)),
        _ => restarts.to_string(),
    };
    (format!("{ready}/{total}"), reason, restarts)
}

/// Renders a v1 `PodList` (JSON, as `GET /pods` returns it) like
/// `kubectl get pods` (`-o wide` adds IP and NODE). Items that are not pods
/// are skipped; an empty list renders as `No resources found.`.
pub fn pods_table(list: &serde_json::Value, now_unix: i64, wide: bool) -> String {
    let mut pods: Vec<Pod> = list
        .get("items")
        .and_then(|i| i.as_array())
        .into_iter()
        .flatten()
        // Re-parse the item's text rather than `serde_json::from_value`: same
        // result, but it reuses the JSON-text `Pod` deserializer that the
        // manifest source needs anyway instead of instantiating a second one
        // over `Value` (that one cost ~275 KiB of the stripped release binary).
        .filter_map(|item| serde_json::from_str(&item.to_string()).ok())
        .collect();
    if pods.is_empty() {
        return "No resources found.\n".into();
    }
    pods.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(pods.len() + 1);
    let mut header: Vec<String> = ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        .map(String::from)
        .to_vec();
    if wide {
        header.extend(["IP", "NODE"].map(String::from));
    }
    rows.push(header);
    for pod in &pods {
        let (ready, status, restarts) = pod_row(pod, now_unix);
        let mut row = vec![
            pod.metadata.name.clone().unwrap_or_default(),
            ready,
            status,
            restarts,
            since(pod.metadata.creation_timestamp.as_ref(), now_unix),
        ];
        if wide {
            let none = || "<none>".to_string();
            let ip = pod
                .status
                .as_ref()
                .and_then(|s| {
                    s.pod_ips
                        .as_ref()
                        .and_then(|ips| ips.first())
                        .map(|ip| ip.ip.clone())
                        .or_else(|| s.pod_ip.clone())
                })
                .filter(|ip| !ip.is_empty())
                .unwrap_or_else(none);
            let node = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(none);
            row.extend([ip, node]);
        }
        rows.push(row);
    }
    // kubectl's tabwriter: columns padded to the widest cell plus 3 spaces.
    let columns = rows[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == columns {
                out.push_str(cell);
            } else {
                let _ = write!(out, "{cell:<width$}", width = widths[i] + 3);
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: i64 = 1_700_000_000;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn running(name: &str, ready: bool, restarts: i32) -> serde_json::Value {
        json!({"name": name, "image": "i", "imageID": "", "ready": ready, "restartCount": restarts,
               "state": {"running": {"startedAt": "2023-11-14T22:00:00Z"}}})
    }

    fn waiting(name: &str, reason: &str, restarts: i32) -> serde_json::Value {
        json!({"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": restarts,
               "state": {"waiting": {"reason": reason}}})
    }

    fn terminated(name: &str, code: i32, reason: &str) -> serde_json::Value {
        json!({"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": 0,
               "state": {"terminated": {"exitCode": code, "reason": reason}}})
    }

    fn two_container_pod(phase: &str, statuses: Vec<serde_json::Value>) -> Pod {
        pod(json!({
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": "2023-11-14T22:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": phase, "containerStatuses": statuses,
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }))
    }

    fn init_pod(inits: Vec<serde_json::Value>, app: Vec<serde_json::Value>) -> Pod {
        pod(json!({
            "metadata": {"name": "db"},
            "spec": {"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": inits, "containerStatuses": app}
        }))
    }

    #[test]
    fn the_status_column_is_running_with_ready_counts() {
        let p = two_container_pod(
            "Running",
            vec![running("a", true, 0), running("b", false, 0)],
        );
        assert_eq!(
            pod_row(&p, NOW),
            ("1/2".into(), "Running".into(), "0".into())
        );
    }

    #[test]
    fn the_status_column_shows_a_waiting_reason_and_restarts() {
        let p = two_container_pod(
            "Running",
            vec![waiting("a", "CrashLoopBackOff", 5), running("b", true, 1)],
        );
        let (ready, status, restarts) = pod_row(&p, NOW);
        assert_eq!(
            (ready.as_str(), status.as_str(), restarts.as_str()),
            ("1/2", "CrashLoopBackOff", "6")
        );
        let p = two_container_pod(
            "Pending",
            vec![
                waiting("a", "ErrImagePull", 0),
                waiting("b", "ContainerCreating", 0),
            ],
        );
        assert_eq!(pod_row(&p, NOW).1, "ErrImagePull");
        let p = two_container_pod(
            "Pending",
            vec![
                waiting("a", "ContainerCreating", 0),
                waiting("b", "ContainerCreating", 0),
            ],
        );
        assert_eq!(pod_row(&p, NOW).1, "ContainerCreating");
    }

    #[test]
    fn the_restarts_column_says_how_long_ago_the_last_restart_was() {
        let mut a = running("a", true, 2);
        a["lastState"] =
            json!({"terminated": {"exitCode": 1, "finishedAt": "2023-11-14T22:08:20Z"}});
        let p = two_container_pod("Running", vec![a, running("b", true, 0)]);
        // 22:13:20 - 22:08:20 = 5m
        assert_eq!(pod_row(&p, NOW).2, "2 (5m ago)");
    }

    #[test]
    fn the_status_column_shows_completed_and_error_for_finished_pods() {
        let p = two_container_pod(
            "Succeeded",
            vec![
                terminated("a", 0, "Completed"),
                terminated("b", 0, "Completed"),
            ],
        );
        assert_eq!(pod_row(&p, NOW).1, "Completed");
        let p = two_container_pod(
            "Failed",
            vec![terminated("a", 0, "Completed"), terminated("b", 1, "Error")],
        );
        assert_eq!(pod_row(&p, NOW).1, "Completed"); // kubectl reports the first container's reason
        let p = two_container_pod(
            "Failed",
            vec![terminated("a", 1, "Error"), terminated("b", 0, "Completed")],
        );
        assert_eq!(pod_row(&p, NOW).1, "Error");
        let p = two_container_pod(
            "Failed",
            vec![terminated("a", 137, ""), terminated("b", 0, "Completed")],
        );
        assert_eq!(pod_row(&p, NOW).1, "ExitCode:137");
    }

    #[test]
    fn a_completed_container_next_to_a_running_one_shows_running() {
        let p = two_container_pod(
            "Running",
            vec![terminated("a", 0, "Completed"), running("b", true, 0)],
        );
        assert_eq!(pod_row(&p, NOW).1, "Running");
    }

    #[test]
    fn the_status_column_counts_init_containers() {
        let p = init_pod(
            vec![terminated("i1", 0, "Completed"), running("i2", false, 0)],
            vec![waiting("a", "PodInitializing", 0)],
        );
        assert_eq!(
            pod_row(&p, NOW),
            ("0/1".into(), "Init:1/2".into(), "0".into())
        );
        let p = init_pod(
            vec![
                waiting("i1", "PodInitializing", 0),
                waiting("i2", "PodInitializing", 0),
            ],
            vec![waiting("a", "PodInitializing", 0)],
        );
        assert_eq!(pod_row(&p, NOW).1, "Init:0/2");
        let p = init_pod(
            vec![
                waiting("i1", "CrashLoopBackOff", 3),
                waiting("i2", "PodInitializing", 0),
            ],
            vec![waiting("a", "PodInitializing", 0)],
        );
        assert_eq!(
            pod_row(&p, NOW),
            ("0/1".into(), "Init:CrashLoopBackOff".into(), "3".into())
        );
        let p = init_pod(
            vec![terminated("i1", 2, "Error")],
            vec![waiting("a", "PodInitializing", 0)],
        );
        assert_eq!(pod_row(&p, NOW).1, "Init:Error");
        let p = init_pod(
            vec![
                terminated("i1", 0, "Completed"),
                terminated("i2", 0, "Completed"),
            ],
            vec![waiting("a", "PodInitializing", 0)],
        );
        assert_eq!(pod_row(&p, NOW).1, "PodInitializing");
    }

    #[test]
    fn a_deleted_pod_shows_terminating_unless_it_finished() {
        let mut p = two_container_pod(
            "Running",
            vec![running("a", true, 0), running("b", true, 0)],
        );
        p.metadata.deletion_timestamp = Some(crate::status::time_from_unix(NOW));
        assert_eq!(pod_row(&p, NOW).1, "Terminating");
        p.status.as_mut().unwrap().phase = Some("Succeeded".into());
        p.status.as_mut().unwrap().container_statuses = Some(vec![serde_json::from_value(
            terminated("a", 0, "Completed"),
        )
        .unwrap()]);
        assert_eq!(pod_row(&p, NOW).1, "Completed");
    }

    #[test]
    fn ages_print_like_kubectl() {
        assert_eq!(human_duration(-5), "<invalid>");
        assert_eq!(human_duration(-1), "0s");
        assert_eq!(human_duration(45), "45s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(300), "5m");
        assert_eq!(human_duration(15 * 60 + 10), "15m");
        assert_eq!(human_duration(179 * 60), "179m");
        assert_eq!(human_duration(3 * 3600), "3h");
        assert_eq!(human_duration(5 * 3600 + 30 * 60), "5h30m");
        assert_eq!(human_duration(20 * 3600), "20h");
        assert_eq!(human_duration(2 * 86_400), "2d");
        assert_eq!(human_duration(3 * 86_400 + 4 * 3600), "3d4h");
        assert_eq!(human_duration(120 * 86_400), "120d");
        assert_eq!(human_duration((2 * 365 + 30) * 86_400), "2y30d");
        assert_eq!(human_duration(9 * 365 * 86_400), "9y");
    }

    #[test]
    fn the_table_aligns_columns_and_adds_ip_and_node_when_wide() {
        let mut p = two_container_pod(
            "Running",
            vec![running("a", true, 0), running("b", true, 0)],
        );
        p.status.as_mut().unwrap().pod_ip = Some("10.88.0.5".into());
        p.spec.as_mut().unwrap().node_name = Some("edge-1".into());
        let list = json!({"apiVersion": "v1", "kind": "PodList", "items": [p]});
        assert_eq!(
            pods_table(&list, NOW, false),
            "NAME   READY   STATUS    RESTARTS   AGE\nweb    2/2     Running   0          13m\n"
        );
        assert_eq!(
            pods_table(&list, NOW, true),
            "NAME   READY   STATUS    RESTARTS   AGE   IP          NODE\nweb    2/2     Running   0          13m   10.88.0.5   edge-1\n"
        );
        assert_eq!(
            pods_table(&json!({"items": []}), NOW, false),
            "No resources found.\n"
        );
    }

    #[test]
    fn the_client_parses_content_length_and_chunked_bodies() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").unwrap();
        assert_eq!(r, (200, b"ok".to_vec()));
        let r = parse_response(
            b"HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n4\r\nnot \r\n5;x=y\r\nfound\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r, (404, b"not found".to_vec()));
        let r = parse_response(b"HTTP/1.0 200 OK\r\n\r\nuntil eof").unwrap();
        assert_eq!(r.1, b"until eof");
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok").is_err());
        assert!(parse_response(b"garbage").is_err());
    }

    #[test]
    fn the_client_error_names_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.sock");
        let e = get(&path, "/healthz").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("is picolet running? cannot connect to "),
            "{msg}"
        );
        assert!(msg.contains("absent.sock"), "{msg}");
    }

    #[test]
    fn bind_refuses_to_replace_a_regular_file_and_replaces_a_stale_socket() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, "x").unwrap();
        assert!(matches!(bind(&file), Err(AdminError::NotASocket { .. })));
        let stale = dir.path().join("stale.sock");
        drop(UnixListener::bind(&stale).unwrap()); // leaves the socket file behind
        rt::block_on(async {
            let live = bind(&stale).unwrap();
            assert!(matches!(bind(&stale), Err(AdminError::InUse { .. })));
            drop(live);
        });
    }

    #[test]
    fn the_server_answers_healthz_pods_and_errors_on_a_private_socket() {
        let dir = tempfile::tempdir().unwrap();
        let sock_dir = dir.path().join("run/picolet");
        let path = sock_dir.join("picolet.sock");
        let pods: PodsFn = Rc::new(
            || json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [{"metadata": {"name": "web"}}]}),
        );
        rt::block_on(async {
            let listener = bind(&path).unwrap();
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(&sock_dir), 0o700);
            let server = rt::spawn({
                let path = path.clone();
                async move { serve_listener(&listener, &path, pods).await }
            });
            let (tx, rx) = smol::channel::bounded(1);
            let client_path = path.clone();
            let client = std::thread::spawn(move || {
                let results = (
                    get(&client_path, "/healthz").unwrap(),
                    get(&client_path, "/pods").unwrap(),
                    get(&client_path, "/nope").unwrap(),
                    raw_request(
                        &client_path,
                        "POST /pods HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    ),
                );
                tx.send_blocking(results).unwrap();
            });
            let (healthz, pods, missing, post) = rx.recv().await.unwrap();
            client.join().unwrap();
            assert_eq!(healthz, (200, b"ok".to_vec()));
            assert_eq!(pods.0, 200);
            let list: serde_json::Value = serde_json::from_slice(&pods.1).unwrap();
            assert_eq!(list["kind"], "PodList");
            assert_eq!(list["apiVersion"], "v1");
            assert_eq!(list["items"][0]["metadata"]["name"], "web");
            assert_eq!(missing.0, 404);
            assert!(post.starts_with("HTTP/1.1 405"), "{post}");
            assert!(post.to_ascii_lowercase().contains("allow: get"), "{post}");
            drop(server);
        });
    }

    /// Sends raw bytes and reads the raw response.
    fn raw_request(path: &Path, request: &str) -> String {
        let mut s = UnixStream::connect(path).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }
}
