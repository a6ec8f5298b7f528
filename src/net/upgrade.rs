//! Relaying an upgraded HTTP/1.1 connection (SPDY/3.1 or WebSocket) to
//! another server, byte for byte: what kubelet does with exec, attach and
//! portForward since it stopped redirecting clients to the runtime's
//! streaming server.
//!
//! [`open`] dials the upstream URL, sends a request line with the URL's
//! path and query and the client's upgrade headers ([`request_head`],
//! pure), and reads the answer's head ([`parse_head`], pure). On a `101`
//! the caller answers its own client with the same head and hands both
//! connections to [`splice`], which copies each direction until either
//! side closes. Any other answer is the upstream's refusal, relayed as is.
//!
//! Nothing here knows pods or the runtime: an upstream URL in, bytes out.
//! Everything runs on the caller's executor; a session is one task.

use std::io;
use std::net::TcpStream;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use smol::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use smol::Async;

use super::dial::dial_timeout;
use super::url::{Scheme, Url};
use crate::rt;

/// The largest answer head read from the upstream.
pub const HEAD_LIMIT: usize = 16 * 1024;
/// The largest refusal body relayed.
const REFUSAL_LIMIT: usize = 16 * 1024;
/// Bytes copied at a time, per direction.
const CHUNK: usize = 16 * 1024;

/// The client's headers that say which protocol it wants: carried to the
/// upstream, which chooses.
const UPGRADE_HEADERS: &[&str] = &[
    "connection",
    "upgrade",
    "x-stream-protocol-version",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "sec-websocket-extensions",
];

/// Why an upstream session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    #[error("streaming URL {0:?}: not an http:// URL")]
    Url(String),
    #[error("streaming server: {0}")]
    Dial(super::dial::DialError),
    #[error("streaming server {addr}: {source}")]
    Io { addr: String, source: io::Error },
    #[error("streaming server {addr}: malformed answer: {what}")]
    Protocol { addr: String, what: String },
    #[error("streaming server {addr}: no answer within {after:?}")]
    Timeout { addr: String, after: Duration },
}

/// The request sent upstream: `method` on `target` (path and query) at
/// `authority`, with the client's upgrade headers from `client`.
pub fn request_head(method: &Method, target: &str, authority: &str, client: &HeaderMap) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\nHost: {authority}\r\n").into_bytes();
    for (name, value) in client {
        if UPGRADE_HEADERS.contains(&name.as_str()) {
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// An answer's head: status, headers, and the head's length in `buf`.
/// `Ok(None)`: more bytes are needed.
pub fn parse_head(buf: &[u8]) -> Result<Option<(StatusCode, HeaderMap, usize)>, String> {
    let mut raw = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut raw);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let status = response
        .code
        .and_then(|c| StatusCode::from_u16(c).ok())
        .ok_or("no status code")?;
    let mut headers = HeaderMap::new();
    for h in response.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|e| e.to_string())?;
        let value = HeaderValue::from_bytes(h.value).map_err(|e| e.to_string())?;
        headers.append(name, value);
    }
    Ok(Some((status, headers, len)))
}

/// The upstream's answer to an upgrade request.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// After a `101`: bytes the upstream sent past its head, to be given to
    /// the client first. Otherwise: the refusal's body (bounded).
    pub rest: Vec<u8>,
    /// The connection, after a `101`.
    pub stream: Option<Async<TcpStream>>,
}

/// Sends the upgrade request for `url` with the client's `method` and
/// headers, and reads the answer's head, all within `deadline`.
pub async fn open(
    url: &str,
    method: &Method,
    client: &HeaderMap,
    deadline: Duration,
) -> Result<Answer, UpgradeError> {
    let parsed = Url::parse(url)
        .filter(|u| u.scheme == Scheme::Http)
        .ok_or_else(|| UpgradeError::Url(url.to_string()))?;
    let addr = parsed.authority();
    match rt::timeout(deadline, exchange(&parsed, method, client)).await {
        Some(r) => r,
        None => Err(UpgradeError::Timeout {
            addr,
            after: deadline,
        }),
    }
}

async fn exchange(url: &Url, method: &Method, client: &HeaderMap) -> Result<Answer, UpgradeError> {
    let addr = url.authority();
    let io_err = |source| UpgradeError::Io {
        addr: addr.clone(),
        source,
    };
    let mut stream = dial_timeout(&url.host, url.port, Duration::from_secs(10))
        .await
        .map_err(UpgradeError::Dial)?;
    stream
        .write_all(&request_head(method, &url.path, &addr, client))
        .await
        .map_err(io_err)?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let (status, headers, len) = loop {
        let n = stream.read(&mut chunk).await.map_err(io_err)?;
        if n == 0 {
            return Err(UpgradeError::Protocol {
                addr,
                what: "closed before the answer's head".into(),
            });
        }
        buf.extend_from_slice(&chunk[..n]);
        let protocol = |what| UpgradeError::Protocol {
            addr: addr.clone(),
            what,
        };
        if let Some(head) = parse_head(&buf).map_err(protocol)? {
            break head;
        }
        if buf.len() > HEAD_LIMIT {
            return Err(protocol(format!("head longer than {HEAD_LIMIT} bytes")));
        }
    };
    let mut rest = buf.split_off(len);
    if status == StatusCode::SWITCHING_PROTOCOLS {
        return Ok(Answer {
            status,
            headers,
            rest,
            stream: Some(stream),
        });
    }
    // A refusal: its body, as far as the upstream sends it (it closes).
    while rest.len() < REFUSAL_LIMIT {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => rest.extend_from_slice(&chunk[..n]),
        }
        let expected = headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        if expected.is_some_and(|n| rest.len() >= n) {
            break;
        }
    }
    rest.truncate(REFUSAL_LIMIT);
    Ok(Answer {
        status,
        headers,
        rest,
        stream: None,
    })
}

/// A hyper connection (the upgraded client) as a futures byte stream.
struct HyperIo<T>(T);

impl<T: hyper::rt::Read + Unpin> AsyncRead for HyperIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let mut rb = hyper::rt::ReadBuf::new(buf);
        match Pin::new(&mut self.0).poll_read(cx, rb.unfilled()) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(rb.filled().len())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: hyper::rt::Write + Unpin> AsyncWrite for HyperIo<T> {
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
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Copies `from` to `to`, flushing after each chunk, until `from` ends or
/// either side fails.
async fn copy(mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).await.is_err() || to.flush().await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Splices the upgraded `client` and the `upstream` connection: `early`
/// (the upstream's bytes read with its head) goes to the client first,
/// then each direction is copied until either side closes; then both are
/// closed.
pub async fn splice<C>(client: C, upstream: Async<TcpStream>, early: Vec<u8>)
where
    C: hyper::rt::Read + hyper::rt::Write + Unpin,
{
    let (client_r, mut client_w) = smol::io::split(HyperIo(client));
    if !early.is_empty()
        && (client_w.write_all(&early).await.is_err() || client_w.flush().await.is_err())
    {
        return;
    }
    {
        let up = copy(client_r, &upstream);
        let down = copy(&upstream, &mut client_w);
        let ended = smol::future::or(
            async {
                up.await;
                "the client"
            },
            async {
                down.await;
                "the upstream"
            },
        )
        .await;
        log::debug!("upgraded session: {ended} closed its side");
    }
    let _ = upstream.get_ref().shutdown(std::net::Shutdown::Both);
    // A TLS client gets its close_notify; a gone one is not waited for.
    let _ = rt::timeout(Duration::from_secs(5), client_w.close()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_request_carries_only_the_clients_upgrade_headers() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("Upgrade"));
        h.insert("upgrade", HeaderValue::from_static("SPDY/3.1"));
        h.append(
            "x-stream-protocol-version",
            HeaderValue::from_static("v4.channel.k8s.io"),
        );
        h.append(
            "x-stream-protocol-version",
            HeaderValue::from_static("v3.channel.k8s.io"),
        );
        h.insert("authorization", HeaderValue::from_static("Bearer secret"));
        h.insert("cookie", HeaderValue::from_static("a=b"));
        let head = request_head(&Method::POST, "/exec/AbC?x=1", "127.0.0.1:4000", &h);
        let head = String::from_utf8(head).unwrap();
        assert_eq!(
            head,
            "POST /exec/AbC?x=1 HTTP/1.1\r\nHost: 127.0.0.1:4000\r\n\
             connection: Upgrade\r\nupgrade: SPDY/3.1\r\n\
             x-stream-protocol-version: v4.channel.k8s.io\r\n\
             x-stream-protocol-version: v3.channel.k8s.io\r\n\r\n"
        );
        assert!(!head.contains("secret"), "credentials never go upstream");
    }

    #[test]
    fn an_answer_head_is_parsed_once_complete() {
        let full = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\n\
                     X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n\x80\x03";
        assert_eq!(parse_head(&full[..20]).unwrap().map(|h| h.2), None);
        let (status, headers, len) = parse_head(full).unwrap().unwrap();
        assert_eq!(status, StatusCode::SWITCHING_PROTOCOLS);
        assert_eq!(headers["upgrade"], "SPDY/3.1");
        assert_eq!(headers["x-stream-protocol-version"], "v4.channel.k8s.io");
        assert_eq!(&full[len..], b"\x80\x03");
        assert!(parse_head(b"NOT HTTP\r\n\r\n").is_err());
    }

    #[test]
    fn only_plain_http_streaming_urls_are_opened() {
        let e = rt::block_on(open(
            "https://127.0.0.1:1/exec/x",
            &Method::GET,
            &HeaderMap::new(),
            Duration::from_secs(1),
        ));
        assert!(matches!(e, Err(UpgradeError::Url(_))));
    }
}
