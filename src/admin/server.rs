//! The admin socket's server: a unix socket created `0600`, serving the
//! admin routes over HTTP/1.1 with hyper on picolet's executor.
//!
//! The socket is the only access control, so it is created `0600` inside a
//! `0700` directory and is never world-accessible, not even between `bind`
//! and `chmod` (the umask is narrowed around `bind`). Every connection
//! serves exactly one request (no keep-alive), must send its headers within
//! [`HEADER_TIMEOUT`] and finish within [`CONNECTION_TIMEOUT`], and at most
//! [`MAX_CONNECTIONS`] are served at once, so a stuck or hostile local
//! client cannot pin memory in the agent.
//!
//! The routes are [`Handlers`], registered by whoever starts the server:
//! `GET /healthz` → `ok`, `GET /pods` → a v1 `PodList` as JSON,
//! `GET /metrics` when a renderer is given, and `GET /node` (eviction
//! signals, thresholds, pressure conditions), `GET /containerLogs/...`,
//! `GET /stats/summary` and `GET /metrics/resource` when the agent gives
//! them.
//!
//! A streamed answer (`follow=true` logs) is the one exception to
//! [`CONNECTION_TIMEOUT`]: once its head is sent, the connection lives
//! until the feeding task ends it (the container stopped) or the client
//! goes away; it still holds one of the [`MAX_CONNECTIONS`]. An upgraded
//! connection (exec, attach, portForward) leaves hyper and the limits
//! here once the `101` is sent: its session task owns it, and the
//! handler bounds how many sessions run at once.

use std::cell::Cell;
use std::convert::Infallible;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use smol::Async;

use super::router::{Handler, Reply, Router, StreamFn, UpgradeFn};
use super::AdminError;
use crate::rt;

/// How long a client may take to send its request headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one connection may live, request and response included.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections served at once; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 64;

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
    /// `GET /node`: the node's eviction signals, thresholds and pressure
    /// conditions as JSON; `None` answers 404.
    pub node: Option<PodsFn>,
    /// `GET /containerLogs/{namespace}/{pod}/{container}`; `None` answers
    /// 404.
    pub logs: Option<StreamFn>,
    /// `GET /stats/summary`: kubelet's Summary, as JSON text; `None`
    /// answers 404.
    pub summary: Option<MetricsFn>,
    /// `GET /metrics/resource`; `None` answers 404.
    pub resource_metrics: Option<MetricsFn>,
    /// `GET /runningpods/`: the pods the runtime runs, a v1 PodList;
    /// `None` answers 404.
    pub running_pods: Option<PodsFn>,
    /// `GET /metrics/probes`: kubelet's prober metrics; `None` answers
    /// 404.
    pub probe_metrics: Option<MetricsFn>,
    /// `GET /events`: the last few events per pod, a v1 EventList
    /// (admin socket's own, for `picolet describe`); `None` answers 404.
    pub events: Option<PodsFn>,
    /// `GET`/`POST` `/exec/...`, `/attach/...` and `/portForward/...`: a
    /// session upgraded to SPDY or WebSocket and relayed to the runtime;
    /// `None` answers 404.
    pub streaming: Option<UpgradeFn>,
}

impl From<PodsFn> for Handlers {
    fn from(pods: PodsFn) -> Self {
        Handlers {
            pods,
            metrics: None,
            node: None,
            logs: None,
            summary: None,
            resource_metrics: None,
            running_pods: None,
            probe_metrics: None,
            events: None,
            streaming: None,
        }
    }
}

impl Handlers {
    /// The admin routes: `GET /healthz`, `GET /pods`, and `GET /metrics`
    /// when there is a renderer.
    pub fn router(self) -> Router {
        let mut router = Router::new()
            .get("/healthz", Handler::Text("ok"))
            .get("/pods", Handler::Json(self.pods));
        if let Some(node) = self.node {
            router = router.get("/node", Handler::Json(node));
        }
        if let Some(logs) = self.logs {
            router = router.get("/containerLogs/*", Handler::Stream(logs));
        }
        if let Some(summary) = self.summary {
            router = router.get(
                "/stats/summary",
                Handler::Render(summary, "application/json"),
            );
        }
        if let Some(running) = self.running_pods {
            router = router
                .get("/runningpods/", Handler::Json(running.clone()))
                .get("/runningpods", Handler::Json(running));
        }
        if let Some(m) = self.probe_metrics {
            router = router.get(
                "/metrics/probes",
                Handler::Render(m, "text/plain; version=0.0.4; charset=utf-8"),
            );
        }
        if let Some(events) = self.events {
            router = router.get("/events", Handler::Json(events));
        }
        if let Some(m) = self.resource_metrics {
            router = router.get(
                "/metrics/resource",
                Handler::Render(m, "text/plain; version=0.0.4; charset=utf-8"),
            );
        }
        if let Some(f) = self.streaming {
            for pattern in ["/exec/*", "/attach/*", "/portForward/*"] {
                for method in [http::Method::GET, http::Method::POST] {
                    router = router.route(method, pattern, Handler::Upgrade(f.clone()));
                }
            }
        }
        match self.metrics {
            Some(m) => router.get(
                "/metrics",
                Handler::Render(m, "text/plain; version=0.0.4; charset=utf-8"),
            ),
            None => router,
        }
    }
}

/// What the admin socket answers while the agent cannot answer yet (the
/// runtime has not answered): every `GET` and `POST`, `/healthz` included,
/// is a 503 whose body is `message`, so `picolet get pods` says what the
/// agent waits for.
pub fn waiting_router(message: String) -> Router {
    let body = bytes::Bytes::from(format!("{message}\n"));
    let answer: super::router::HandlerFn = Rc::new(move |_| {
        let mut r = super::router::typed(body.clone(), "text/plain; charset=utf-8");
        *r.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
        r
    });
    Router::new()
        .get("/*", Handler::Custom(answer.clone()))
        .route(http::Method::POST, "/*", Handler::Custom(answer))
}

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
    serve_router(listener, path, handlers.into().router()).await
}

/// Serves `router` on an already bound unix socket, with the connection
/// limits and timeouts of the module docs.
pub async fn serve_router(
    listener: &Async<UnixListener>,
    path: &Path,
    router: Router,
) -> Result<(), AdminError> {
    let router = Rc::new(router);
    let active = Rc::new(Cell::new(0usize));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(rt::SmolTimer)
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(true) // one request all the same: see `finish`
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
        let router = router.clone();
        let streaming = Rc::new(Cell::new(false));
        let streams = streaming.clone();
        let conn = builder.serve_connection(
            rt::Io(stream),
            hyper::service::service_fn(move |req: Request<Incoming>| {
                let (router, streams) = (router.clone(), streams.clone());
                async move {
                    let (head, _body) = req.into_parts();
                    let mut response = router.serve(head).await;
                    if finish(&mut response) {
                        streams.set(true);
                    }
                    Ok::<_, Infallible>(response)
                }
            }),
        );
        let conn = conn.with_upgrades();
        rt::spawn(async move {
            let _slot = slot;
            let mut conn = std::pin::pin!(conn);
            let done = match rt::timeout(CONNECTION_TIMEOUT, conn.as_mut()).await {
                None if streaming.get() => Some(conn.await),
                done => done,
            };
            match done {
                None => log::debug!("admin connection timed out"),
                Some(Err(e)) => log::debug!("admin connection: {e}"),
                Some(Ok(())) => {}
            }
        })
        .detach();
    }
}

/// Readies an answer for a one-request connection, and says whether it
/// outlives [`CONNECTION_TIMEOUT`] (a streamed body, or a protocol switch
/// whose session task then owns the connection).
///
/// The servers run hyper with keep-alive on, so that a `101` goes out
/// without hyper's `Connection: close` (Go clients drop the `Connection`
/// header that says close, and then refuse the upgrade); every other
/// answer says `Connection: close` itself, which ends the connection
/// after it as before.
pub fn finish(r: &mut http::Response<Reply>) -> bool {
    if r.status() == http::StatusCode::SWITCHING_PROTOCOLS {
        return true;
    }
    r.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    matches!(r.body(), Reply::Stream(_))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::client::get;
    use serde_json::json;
    use std::io::{Read, Write};

    #[test]
    fn a_waiting_agent_answers_every_path_with_503_and_what_it_waits_for() {
        use http_body_util::BodyExt;
        let router = waiting_router("waiting for the runtime at unix:///x.sock".into());
        for (method, path) in [
            (http::Method::GET, "/healthz"),
            (http::Method::GET, "/pods"),
            (http::Method::POST, "/exec/default/web/main"),
        ] {
            let req = Request::builder()
                .method(method)
                .uri(path)
                .body(())
                .unwrap()
                .into_parts()
                .0;
            let r = router.handle(&req);
            assert_eq!(r.status(), http::StatusCode::SERVICE_UNAVAILABLE, "{path}");
            let body = rt::block_on(r.into_body().collect()).unwrap().to_bytes();
            assert_eq!(&body[..], b"waiting for the runtime at unix:///x.sock\n");
        }
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

    #[test]
    fn a_streamed_route_sends_chunks_as_its_task_feeds_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("picolet.sock");
        let logs: StreamFn = Rc::new(|_req| {
            let (tx, rx) = smol::channel::bounded(1);
            rt::spawn(async move {
                for chunk in ["one\n", "two\n", "three\n"] {
                    if tx
                        .send(bytes::Bytes::from_static(chunk.as_bytes()))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            })
            .detach();
            http::Response::new(Reply::stream(rx))
        });
        let handlers = Handlers {
            logs: Some(logs),
            ..Handlers::from(Rc::new(|| json!({})) as PodsFn)
        };
        rt::block_on(async {
            let listener = bind(&path).unwrap();
            let server = rt::spawn({
                let path = path.clone();
                async move { serve_listener(&listener, &path, handlers).await }
            });
            let (tx, rx) = smol::channel::bounded(1);
            let client_path = path.clone();
            let client = std::thread::spawn(move || {
                let mut out = Vec::new();
                let r = crate::cli::client::stream(&client_path, "/containerLogs/a/b/c", &mut out);
                tx.send_blocking((r.unwrap(), out)).unwrap();
            });
            let ((status, _), out) = rx.recv().await.unwrap();
            client.join().unwrap();
            assert_eq!(status, 200);
            assert_eq!(out, b"one\ntwo\nthree\n");
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
