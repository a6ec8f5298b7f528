//! One HTTP/1.1 request and its response, on any byte stream.
//!
//! hyper writes the request and parses the response (status line, headers,
//! `Content-Length`, chunked and close-delimited bodies); this module adds
//! what every caller here needs around it: dialing (with TLS for `https`),
//! header validation with errors naming the header, and a cap on how much
//! of the body is read, so a hostile or broken peer cannot make the agent
//! buffer without bound. One request per connection: callers send
//! `Connection: close`, and the connection is dropped when [`send`]
//! returns. Nothing is spawned: the connection is driven inside the
//! caller's future, so the client works on any executor.
//!
//! Policy stays with the caller: which headers to send, whether to follow
//! a redirect, what a status code means, and the overall deadline (wrap the
//! whole exchange in `rt::timeout`).

use std::fmt;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body_util::{BodyExt, Empty};

use super::dial::{dial, DialError};
use super::probe_tls::{self, TlsError, Verify};
use super::url::{Scheme, Url};
use super::BoxStream;
use crate::rt::Io;

/// Why a request got no answer. Messages are the text Go puts after
/// `Get "URL": `, so the dial and TLS errors are printed, not chained as
/// `source` (which would also cost an error vtable each). `Debug` prints
/// the same text: the derived one would pull hyper's error internals into
/// the binary for nothing.
#[derive(thiserror::Error)]
pub enum Http1Error {
    #[error("{0}")]
    Dial(DialError),
    #[error("{0}")]
    Tls(TlsError),
    #[error("invalid header {0:?}")]
    Header(String),
    #[error("{0}")]
    Http(#[from] hyper::Error),
    #[error("reading body: {0}")]
    Body(hyper::Error),
}

impl fmt::Debug for Http1Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl From<DialError> for Http1Error {
    fn from(e: DialError) -> Self {
        Http1Error::Dial(e)
    }
}

impl From<TlsError> for Http1Error {
    fn from(e: TlsError) -> Self {
        Http1Error::Tls(e)
    }
}

/// An answer: the status, the headers and the start of the body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: HeaderMap,
    /// At most the `max_body` bytes asked for; more may have been sent.
    pub body: Vec<u8>,
}

impl Response {
    /// A header's value, if present and text.
    pub fn header(&self, name: HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Dials `url` and, for `https`, runs the TLS handshake checked per
/// `verify`.
pub async fn connect(url: &Url, verify: Verify) -> Result<BoxStream, Http1Error> {
    let tcp = dial(&url.host, url.port).await?;
    Ok(match url.scheme {
        Scheme::Http => Box::new(tcp),
        Scheme::Https => probe_tls::connect(tcp, &url.host, verify).await?,
    })
}

/// A validated header, or [`Http1Error::Header`] naming it.
pub fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), Http1Error> {
    let bad = || Http1Error::Header(name.to_string());
    let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
    let v = HeaderValue::from_str(value).map_err(|_| bad())?;
    Ok((n, v))
}

/// Sends `req` (its URI is the request target, e.g. `/healthz?x=1`) on
/// `stream` and reads the response with at most `max_body` bytes of its
/// body; reading stops there and the rest is never buffered.
pub async fn send(
    stream: BoxStream,
    req: http::Request<Empty<Bytes>>,
    max_body: usize,
) -> Result<Response, Http1Error> {
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(Io(stream)).await?;
    let exchange = async move {
        let resp = sender.send_request(req).await?;
        let status = resp.status().as_u16();
        let (parts, mut body) = resp.into_parts();
        let mut buf = Vec::new();
        while buf.len() < max_body {
            match body.frame().await {
                None => break,
                Some(Err(e)) => return Err(Http1Error::Body(e)),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        let room = max_body - buf.len();
                        buf.extend_from_slice(&data[..data.len().min(room)]);
                    }
                }
            }
        }
        Ok(Response {
            status,
            headers: parts.headers,
            body: buf,
        })
    };
    // The connection moves bytes only while it is polled: it runs beside
    // the exchange, in this future, and is dropped (the socket closed) when
    // the exchange ends or the caller gives up. No task, no executor.
    let conn = async {
        if let Err(e) = conn.await {
            log::trace!("HTTP/1.1 connection: {e}");
        }
        std::future::pending().await
    };
    smol::future::or(exchange, conn).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rt;
    use smol::io::{AsyncReadExt, AsyncWriteExt};
    use smol::Async;
    use std::os::unix::net::UnixStream;

    /// Sends a GET on one end of a socket pair, answers `raw` from the
    /// other end once the request head is in, and returns the result.
    fn exchange(raw: &'static [u8], max_body: usize) -> Result<Response, Http1Error> {
        let (client, server) = Async::<UnixStream>::pair().unwrap();
        rt::block_on(async move {
            let _peer = rt::spawn(async move {
                let mut server = server;
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if server.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let _ = server.write_all(raw).await;
            });
            let req = http::Request::get("/x")
                .header("host", "localhost")
                .header("connection", "close")
                .body(Empty::new())
                .unwrap();
            send(Box::new(client), req, max_body).await
        })
    }

    #[test]
    fn bodies_are_read_by_length_by_chunks_or_to_the_end_and_capped() {
        let r = exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 100).unwrap();
        assert_eq!((r.status, r.body), (200, b"ok".to_vec()));
        let r = exchange(
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nX-A: b\r\n\r\n4\r\nnot \r\n5;x=y\r\nfound\r\n0\r\n\r\n",
            100,
        )
        .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (404, &b"not found"[..]));
        assert_eq!(r.header(HeaderName::from_static("x-a")), Some("b"));
        let r = exchange(b"HTTP/1.0 200 OK\r\n\r\nuntil eof", 100).unwrap();
        assert_eq!(r.body, b"until eof");
        let r = exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nuntil eof", 5).unwrap();
        assert_eq!(r.body, b"until");
    }

    #[test]
    fn a_truncated_or_malformed_answer_is_an_error() {
        let e = exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok", 100).unwrap_err();
        assert!(matches!(e, Http1Error::Body(_)), "{e}");
        assert!(exchange(b"garbage", 100).is_err());
    }

    #[test]
    fn a_header_that_cannot_be_sent_is_named() {
        let e = header("bad name", "v").unwrap_err();
        assert_eq!(e.to_string(), "invalid header \"bad name\"");
        assert!(header("X-Ok", "line\nbreak").is_err());
    }
}
