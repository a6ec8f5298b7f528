//! The admin socket's client, used by `picolet get pods` and `picolet
//! logs`: one GET over the unix socket, through `crate::net`'s HTTP/1.1
//! client ([`get`]) or, for a log, streamed to a writer as it comes
//! ([`stream`]); and [`log_container`], which container `picolet logs POD`
//! means when it names none (kubectl's rule).
//!
//! The CLI is a short-lived process, so both block: the exchange spawns
//! nothing, so it runs under a bare `smol::block_on`, without the agent's
//! executor (and must not be called from a task of a running agent).
//! [`get`] is bounded in time ([`CONNECTION_TIMEOUT`], like the server)
//! and in size ([`MAX_RESPONSE`]); [`stream`] is bounded by neither (a
//! followed log ends when the container stops or the user interrupts),
//! but an error answer's body is capped.

use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, HeaderValue};
use http_body_util::{BodyExt, Empty};
use smol::io::{AsyncRead, AsyncWrite};
use smol::Async;

use crate::admin::server::CONNECTION_TIMEOUT;
use crate::net::http1;
use crate::rt;

/// The admin socket client's errors. `Debug` prints the message, like
/// `Display`: a derived one costs half a KiB of binary and says less.
#[derive(thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {}: {source}{}", path.display(), connect_hint(source))]
    Connect { path: PathBuf, source: io::Error },
    /// The agent refused the request, or the command of an exec session
    /// could not run: its message alone, as kubectl prints it.
    #[error("{0}")]
    Refused(String),
    #[error("admin socket {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// The request failed (printed in full, not chained as a source).
    #[error("admin socket {}: {error}", path.display())]
    Request {
        path: PathBuf,
        error: crate::net::http1::Http1Error,
    },
    #[error("admin socket {}: malformed HTTP response: {what}", path.display())]
    Protocol { path: PathBuf, what: String },
}

impl std::fmt::Debug for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// What to do about a failed connect to the admin socket.
fn connect_hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::PermissionDenied => {
            "; the admin socket is root-only (mode 0600): run this as root (sudo)"
        }
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
            "; is picolet running? (--admin-socket or PICOLET_ADMIN_SOCKET name another socket)"
        }
        _ => "",
    }
}

/// The largest response the client accepts.
pub const MAX_RESPONSE: usize = 64 << 20;

/// `GET uri` on the admin socket at `path`: the status code and the body.
pub fn get(path: &Path, uri: &str) -> Result<(u16, Vec<u8>), ClientError> {
    smol::block_on(async {
        match rt::timeout(CONNECTION_TIMEOUT, exchange(path, uri)).await {
            Some(r) => r,
            None => Err(ClientError::Io {
                path: path.to_path_buf(),
                source: io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no answer within {CONNECTION_TIMEOUT:?}"),
                ),
            }),
        }
    })
}

/// `GET uri` on the admin socket at `path`, the body of a 200 written to
/// `out` as it arrives (flushed after each chunk). Returns the status, and
/// the body (at most 64 KiB) when it is not 200. A writer that fails (a
/// closed pipe) ends the exchange quietly.
pub fn stream(path: &Path, uri: &str, out: &mut dyn Write) -> Result<(u16, Vec<u8>), ClientError> {
    smol::block_on(async {
        let req = request(path, uri)?;
        let io = connect(path)?;
        let failed = |error: hyper::Error| ClientError::Request {
            path: path.to_path_buf(),
            error: http1::Http1Error::Http(error),
        };
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(rt::Io(io))
                .await
                .map_err(failed)?;
        let exchange = async {
            let resp = sender.send_request(req).await.map_err(failed)?;
            let status = resp.status().as_u16();
            let mut body = resp.into_body();
            let mut error = Vec::new();
            while let Some(frame) = body.frame().await {
                let Ok(data) = frame.map_err(failed)?.into_data() else {
                    continue;
                };
                if status != 200 {
                    let room = (64usize << 10).saturating_sub(error.len());
                    error.extend_from_slice(&data[..data.len().min(room)]);
                } else if out.write_all(&data).and_then(|_| out.flush()).is_err() {
                    break;
                }
            }
            Ok((status, error))
        };
        let conn = async {
            if let Err(e) = conn.await {
                log::trace!("admin connection: {e}");
            }
            std::future::pending().await
        };
        smol::future::or(exchange, conn).await
    })
}

/// The items of a `/pods` list that `picolet get pods` shows: those in
/// `namespace` (every namespace with `None`), and only the one called
/// `name` when it is given. A pod without a namespace is in `default`.
pub fn select_pods(
    list: &serde_json::Value,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Vec<serde_json::Value> {
    list["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .filter(|p| {
            let ns = p["metadata"]["namespace"].as_str().unwrap_or("default");
            namespace.is_none_or(|want| ns == want)
                && name.is_none_or(|want| p["metadata"]["name"] == want)
        })
        .cloned()
        .collect()
}

/// The container `picolet logs POD` means when no `-c` names one, from the
/// `/pods` list: the `kubectl.kubernetes.io/default-container` annotation,
/// else the only container; else kubectl's error listing them.
pub fn log_container(
    list: &serde_json::Value,
    namespace: &str,
    pod: &str,
) -> Result<String, String> {
    let items = list["items"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let Some(p) = items.iter().find(|p| {
        p["metadata"]["name"] == pod
            && p["metadata"]["namespace"].as_str().unwrap_or("default") == namespace
    }) else {
        return Err(format!("pods {pod:?} not found in namespace {namespace:?}"));
    };
    let annotation = &p["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"];
    if let Some(name) = annotation.as_str() {
        return Ok(name.to_string());
    }
    let names = |key: &str| -> Vec<String> {
        p["spec"][key]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .filter_map(|c| c["name"].as_str().map(String::from))
            .collect()
    };
    let containers = names("containers");
    if containers.len() == 1 {
        return Ok(containers[0].clone());
    }
    let mut message = format!(
        "a container name must be specified for pod {pod}, choose one of: [{}]",
        containers.join(" ")
    );
    let init = names("initContainers");
    if !init.is_empty() {
        message.push_str(&format!(
            " or one of the init containers: [{}]",
            init.join(" ")
        ));
    }
    Err(message)
}

/// The GET request for `uri`, with the admin client's headers.
fn request(path: &Path, uri: &str) -> Result<http::Request<Empty<Bytes>>, ClientError> {
    let mut req = http::Request::new(Empty::<Bytes>::new());
    *req.uri_mut() = uri.parse().map_err(|e| ClientError::Protocol {
        path: path.to_path_buf(),
        what: format!("cannot request {uri:?}: {e}"),
    })?;
    let h = req.headers_mut();
    h.insert(header::HOST, HeaderValue::from_static("localhost"));
    h.insert(header::USER_AGENT, HeaderValue::from_static("picolet"));
    let accept = HeaderValue::from_static("application/json, */*");
    h.insert(header::ACCEPT, accept);
    h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    Ok(req)
}

/// Connects to the socket. A local connect does not block: it succeeds or
/// fails at once.
fn connect(path: &Path) -> Result<Plain, ClientError> {
    UnixStream::connect(path)
        .and_then(Async::new)
        .map(Plain)
        .map_err(|source| ClientError::Connect {
            path: path.to_path_buf(),
            source,
        })
}

async fn exchange(path: &Path, uri: &str) -> Result<(u16, Vec<u8>), ClientError> {
    let req = request(path, uri)?;
    let stream = connect(path)?;
    // One byte over the limit tells "too large" from "exactly the limit".
    let resp = http1::send(Box::new(stream), req, MAX_RESPONSE + 1)
        .await
        .map_err(|error| ClientError::Request {
            path: path.to_path_buf(),
            error,
        })?;
    if resp.body.len() > MAX_RESPONSE {
        return Err(ClientError::Protocol {
            path: path.to_path_buf(),
            what: "response too large".into(),
        });
    }
    Ok((resp.status, resp.body))
}

/// The socket as the HTTP client's stream, with plain reads and writes
/// only: one short request gains nothing from vectored I/O, and leaving it
/// out keeps `Async`'s vectored code out of the binary.
struct Plain(Async<UnixStream>);

impl AsyncRead for Plain {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Plain {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_close(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixListener;

    /// What [`get`] makes of `raw`, sent by a server on a private socket
    /// once the request head is in.
    fn parse_response(raw: &'static [u8]) -> Result<(u16, Vec<u8>), ClientError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("raw.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = s.write_all(raw);
        });
        let r = get(&path, "/pods");
        server.join().unwrap();
        r
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
    fn a_log_names_its_container_or_kubectls_error_lists_them() {
        let list = serde_json::json!({"items": [
            {"metadata": {"name": "one", "namespace": "default"},
             "spec": {"containers": [{"name": "app"}]}},
            {"metadata": {"name": "two", "namespace": "edge"},
             "spec": {"containers": [{"name": "a"}, {"name": "b"}],
                      "initContainers": [{"name": "init"}]}},
            {"metadata": {"name": "three", "namespace": "edge",
                          "annotations": {"kubectl.kubernetes.io/default-container": "b"}},
             "spec": {"containers": [{"name": "a"}, {"name": "b"}]}},
        ]});
        assert_eq!(log_container(&list, "default", "one"), Ok("app".into()));
        assert_eq!(log_container(&list, "edge", "three"), Ok("b".into()));
        assert_eq!(
            log_container(&list, "edge", "two"),
            Err("a container name must be specified for pod two, choose one of: [a b] or one of the init containers: [init]".into())
        );
        assert_eq!(
            log_container(&list, "default", "two"),
            Err(r#"pods "two" not found in namespace "default""#.into())
        );
    }

    #[test]
    fn a_streamed_answer_is_written_as_it_comes_and_an_error_body_is_returned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stream.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            for raw in [
                &b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\none\n\r\n4\r\ntwo\n\r\n0\r\n\r\n"[..],
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\ngone",
            ] {
                let (mut s, _) = listener.accept().unwrap();
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                s.write_all(raw).unwrap();
            }
        });
        let mut out = Vec::new();
        assert_eq!(
            stream(&path, "/containerLogs/a/b/c", &mut out).unwrap(),
            (200, vec![])
        );
        assert_eq!(out, b"one\ntwo\n");
        let mut out = Vec::new();
        let r = stream(&path, "/containerLogs/a/b/c", &mut out).unwrap();
        assert_eq!(r, (404, b"gone".to_vec()));
        assert!(out.is_empty());
        server.join().unwrap();
    }

    #[test]
    fn get_pods_selects_by_namespace_and_name() {
        let list = serde_json::json!({"items": [
            {"metadata": {"name": "web", "namespace": "default"}},
            {"metadata": {"name": "web", "namespace": "edge"}},
            {"metadata": {"name": "db"}},
        ]});
        let names = |ns: Option<&str>, name: Option<&str>| -> Vec<String> {
            select_pods(&list, ns, name)
                .iter()
                .map(|p| {
                    format!(
                        "{}/{}",
                        p["metadata"]["namespace"].as_str().unwrap_or("-"),
                        p["metadata"]["name"].as_str().unwrap()
                    )
                })
                .collect()
        };
        assert_eq!(names(Some("default"), None), ["default/web", "-/db"]);
        assert_eq!(names(None, None).len(), 3);
        assert_eq!(names(Some("edge"), Some("web")), ["edge/web"]);
        assert!(names(Some("edge"), Some("db")).is_empty());
    }

    #[test]
    fn the_client_error_names_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.sock");
        let e = get(&path, "/healthz").unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("cannot connect to "), "{msg}");
        assert!(msg.contains("absent.sock"), "{msg}");
        assert!(msg.contains("is picolet running?"), "{msg}");
    }

    mod errors {
        use super::*;

        fn connect(kind: io::ErrorKind) -> String {
            ClientError::Connect {
                path: PathBuf::from("/run/picolet/picolet.sock"),
                source: io::Error::from(kind),
            }
            .to_string()
        }

        #[test]
        fn a_refused_connect_says_why_and_what_to_do() {
            let denied = connect(io::ErrorKind::PermissionDenied);
            assert!(
                denied
                    .starts_with("cannot connect to /run/picolet/picolet.sock: permission denied"),
                "{denied}"
            );
            assert!(
                denied.ends_with("root-only (mode 0600): run this as root (sudo)"),
                "{denied}"
            );
            let missing = connect(io::ErrorKind::NotFound);
            assert!(missing.contains("is picolet running?"), "{missing}");
            assert!(missing.contains("PICOLET_ADMIN_SOCKET"), "{missing}");
        }
    }
}
