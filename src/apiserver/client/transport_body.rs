//! The answers' bodies: read whole within a size limit ([`collect`]), or
//! as they come, each read within the request's deadline ([`BodyStream`],
//! a watch). Both count the bytes received in the client's [`Stats`].

use std::cell::Cell;
use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::http1;

use super::transport::{Answer, Client, ReqBody, Stats, TransportError};
use crate::rt;

/// The whole body, at most `limit` bytes.
pub(super) async fn collect(
    mut body: Incoming,
    limit: usize,
    what: &str,
    stats: &Cell<Stats>,
) -> Result<Vec<u8>, TransportError> {
    use http_body::Body as _;
    let too_large = || TransportError::TooLarge {
        what: what.to_string(),
        limit,
    };
    if body.size_hint().lower() > limit as u64 {
        return Err(too_large());
    }
    let mut buf = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|source| TransportError::Body {
            what: what.to_string(),
            source,
        })?;
        if let Ok(data) = frame.into_data() {
            let mut s = stats.get();
            s.bytes_received += data.len() as u64;
            stats.set(s);
            if buf.len() + data.len() > limit {
                return Err(too_large());
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf)
}

/// A streamed answer (a watch): its status and its body as it comes.
pub struct BodyStream {
    pub status: StatusCode,
    /// The body is the API server's protobuf (its `Content-Type`), not JSON.
    pub protobuf: bool,
    body: Incoming,
    deadline: Instant,
    after: Duration,
    what: String,
    stats: Client,
    /// An HTTP/1.1 connection is the stream's own; dropped with it.
    _h1: Option<http1::SendRequest<ReqBody>>,
}

impl fmt::Debug for BodyStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyStream")
            .field("status", &self.status)
            .field("what", &self.what)
            .finish_non_exhaustive()
    }
}

impl BodyStream {
    /// The stream of `answer`'s body, read until `deadline` (`.0`, the
    /// instant; `.1`, the request's deadline as given, for the error),
    /// counted in `client`'s stats; the answer's HTTP/1.1 connection, if
    /// any, is the stream's own.
    pub(super) fn new(
        answer: Answer,
        deadline: (Instant, Duration),
        what: String,
        client: Client,
    ) -> Self {
        let Answer {
            status,
            protobuf,
            body,
            h1,
        } = answer;
        BodyStream {
            status,
            protobuf,
            body,
            deadline: deadline.0,
            after: deadline.1,
            what,
            stats: client,
            _h1: h1,
        }
    }

    /// The next chunk; `None` at the end of the body. Past the deadline the
    /// stream fails with [`TransportError::Timeout`].
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, TransportError> {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let frame = match rt::timeout(left, self.body.frame()).await {
                None => {
                    return Err(TransportError::Timeout {
                        what: self.what.clone(),
                        after: self.after,
                    })
                }
                Some(None) => return Ok(None),
                Some(Some(f)) => f.map_err(|source| TransportError::Body {
                    what: self.what.clone(),
                    source,
                })?,
            };
            match frame.into_data() {
                Ok(data) if !data.is_empty() => {
                    self.stats.count(|s| s.bytes_received += data.len() as u64);
                    return Ok(Some(data));
                }
                _ => {}
            }
        }
    }

    /// The rest of the body, at most `limit` bytes (an error reply).
    pub async fn collect(mut self, limit: usize) -> Result<Vec<u8>, TransportError> {
        let mut buf = Vec::new();
        while let Some(data) = self.chunk().await? {
            if buf.len() + data.len() > limit {
                return Err(TransportError::TooLarge {
                    what: self.what.clone(),
                    limit,
                });
            }
            buf.extend_from_slice(&data);
        }
        Ok(buf)
    }
}
