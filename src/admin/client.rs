//! The admin socket's client, used by `picolet get pods`: one GET over the
//! unix socket, through `crate::net`'s HTTP/1.1 client.
//!
//! The CLI is a short-lived process, so [`get`] blocks: the exchange
//! spawns nothing, so it runs under a bare `smol::block_on`, without the
//! agent's executor (and must not be called from a task of a running
//! agent). It is bounded in time ([`CONNECTION_TIMEOUT`], like the server)
//! and in size ([`MAX_RESPONSE`]).

use std::io;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, HeaderValue};
use http_body_util::Empty;
use smol::io::{AsyncRead, AsyncWrite};
use smol::Async;

use super::server::CONNECTION_TIMEOUT;
use super::AdminError;
use crate::net::http1;
use crate::rt;

/// The largest response the client accepts.
pub const MAX_RESPONSE: usize = 64 << 20;

/// `GET uri` on the admin socket at `path`: the status code and the body.
pub fn get(path: &Path, uri: &str) -> Result<(u16, Vec<u8>), AdminError> {
    smol::block_on(async {
        match rt::timeout(CONNECTION_TIMEOUT, exchange(path, uri)).await {
            Some(r) => r,
            None => Err(AdminError::Io {
                path: path.to_path_buf(),
                source: io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no answer within {CONNECTION_TIMEOUT:?}"),
                ),
            }),
        }
    })
}

async fn exchange(path: &Path, uri: &str) -> Result<(u16, Vec<u8>), AdminError> {
    // A local connect does not block: it succeeds or fails at once.
    let stream = UnixStream::connect(path)
        .and_then(Async::new)
        .map_err(|source| AdminError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
    let mut req = http::Request::new(Empty::<Bytes>::new());
    *req.uri_mut() = uri.parse().map_err(|e| AdminError::Protocol {
        path: path.to_path_buf(),
        what: format!("cannot request {uri:?}: {e}"),
    })?;
    let h = req.headers_mut();
    h.insert(header::HOST, HeaderValue::from_static("localhost"));
    h.insert(header::USER_AGENT, HeaderValue::from_static("picolet"));
    let accept = HeaderValue::from_static("application/json, */*");
    h.insert(header::ACCEPT, accept);
    h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    // One byte over the limit tells "too large" from "exactly the limit".
    let resp = http1::send(Box::new(Plain(stream)), req, MAX_RESPONSE + 1)
        .await
        .map_err(|error| AdminError::Request {
            path: path.to_path_buf(),
            error,
        })?;
    if resp.body.len() > MAX_RESPONSE {
        return Err(AdminError::Protocol {
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
    fn parse_response(raw: &'static [u8]) -> Result<(u16, Vec<u8>), AdminError> {
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
}
