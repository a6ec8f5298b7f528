//! The gRPC channel to the container runtime: HTTP/2 over a unix socket.
//!
//! One HTTP/2 connection carries every CRI call. When the runtime goes away
//! (containerd restarted, socket gone), the next call finds the connection
//! closed and dials again; failed dials back off from 100 ms to 5 s so a dead
//! runtime costs nothing, and a call made during the back-off window fails
//! fast as `Unavailable` instead of piling up.
//!
//! The channel is a `tower_service::Service`, which is all tonic's generated
//! client needs; it is cheap to clone (shared `Rc` state).

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::client::conn::http2::SendRequest;
use smol::Async;

use crate::rt::{Io, LocalExec, SmolTimer};

type ReqBody = tonic::body::Body;

const BACKOFF_INITIAL: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Errors from the channel itself (not from the runtime's answers).
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("connecting to {path}: {source}")]
    Connect { path: PathBuf, source: io::Error },
    #[error("runtime at {path} is unreachable; next attempt in {wait:?}")]
    BackingOff { path: PathBuf, wait: Duration },
    #[error("HTTP/2 handshake with {path}: {source}")]
    Handshake { path: PathBuf, source: hyper::Error },
    #[error("HTTP/2 request: {0}")]
    Request(#[from] hyper::Error),
}

struct State {
    sender: Option<SendRequest<ReqBody>>,
    next_attempt: Option<Instant>,
    backoff: Duration,
    connects: u64,
}

/// A lazily connected, self-healing HTTP/2 channel on a unix socket.
#[derive(Clone)]
pub struct Channel {
    path: Rc<PathBuf>,
    state: Rc<RefCell<State>>,
}

impl Channel {
    /// A channel for `path`; nothing is dialled until the first call.
    pub fn new(path: PathBuf) -> Self {
        Channel {
            path: Rc::new(path),
            state: Rc::new(RefCell::new(State {
                sender: None,
                next_attempt: None,
                backoff: BACKOFF_INITIAL,
                connects: 0,
            })),
        }
    }

    /// The socket path.
    pub fn path(&self) -> &PathBuf {
        &self.path
    }

    /// How many connections were established so far (1 after the first call;
    /// more after the runtime restarted).
    pub fn connects(&self) -> u64 {
        self.state.borrow().connects
    }

    async fn sender(&self) -> Result<SendRequest<ReqBody>, ChannelError> {
        {
            let mut st = self.state.borrow_mut();
            if let Some(s) = &st.sender {
                if !s.is_closed() {
                    return Ok(s.clone());
                }
                st.sender = None;
                log::info!(
                    "connection to container runtime {} closed; reconnecting",
                    self.path.display()
                );
            }
            if let Some(at) = st.next_attempt {
                let now = Instant::now();
                if now < at {
                    return Err(ChannelError::BackingOff {
                        path: (*self.path).clone(),
                        wait: at - now,
                    });
                }
            }
        }
        match self.dial().await {
            Ok(s) => {
                let mut st = self.state.borrow_mut();
                st.sender = Some(s.clone());
                st.next_attempt = None;
                st.backoff = BACKOFF_INITIAL;
                st.connects += 1;
                Ok(s)
            }
            Err(e) => {
                let mut st = self.state.borrow_mut();
                st.next_attempt = Some(Instant::now() + st.backoff);
                st.backoff = (st.backoff * 2).min(BACKOFF_MAX);
                Err(e)
            }
        }
    }

    async fn dial(&self) -> Result<SendRequest<ReqBody>, ChannelError> {
        let path = (*self.path).clone();
        let connect = Async::<std::os::unix::net::UnixStream>::connect(&path);
        let stream = match crate::rt::timeout(CONNECT_TIMEOUT, connect).await {
            Some(Ok(s)) => s,
            Some(Err(source)) => return Err(ChannelError::Connect { path, source }),
            None => {
                return Err(ChannelError::Connect {
                    path,
                    source: io::Error::new(io::ErrorKind::TimedOut, "connect timed out"),
                })
            }
        };
        let mut builder = hyper::client::conn::http2::Builder::new(LocalExec);
        builder
            .timer(SmolTimer)
            .keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(10))
            .max_frame_size(16 * 1024)
            .initial_stream_window_size(256 * 1024)
            .initial_connection_window_size(1024 * 1024);
        let (sender, conn) =
            builder
                .handshake(Io(stream))
                .await
                .map_err(|source| ChannelError::Handshake {
                    path: path.clone(),
                    source,
                })?;
        crate::rt::spawn(async move {
            if let Err(e) = conn.await {
                log::debug!("container runtime connection ended: {e}");
            }
        })
        .detach();
        Ok(sender)
    }
}

impl tower_service::Service<http::Request<ReqBody>> for Channel {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = ChannelError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>>>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let mut sender = this.sender().await?;
            let res = sender.send_request(req).await;
            if res.is_err() && sender.is_closed() {
                this.state.borrow_mut().sender = None;
            }
            Ok(res?)
        })
    }
}
