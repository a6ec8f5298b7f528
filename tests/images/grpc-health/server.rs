//! A minimal `grpc.health.v1.Health/Check` server: the peer of picolet's gRPC
//! probe, both in `src/prober.rs`'s unit tests (included there with
//! `#[path]`) and in the `docker.io/picolet/grpc-health:test` image that the
//! integration tests run (see `main.rs` beside this file).
//!
//! HTTP/2 is hyper's server on the caller's smol executor (`crate::rt`, which
//! is picolet's runtime glue in both places); gRPC framing is done by hand
//! (5-byte length prefix, `grpc-status` trailers), because the only method is
//! one unary call and tonic's server would pull in a tokio transport.
//!
//! Behaviour, as a real health server:
//! - `Check` for a known service (`""` and the configured names) answers
//!   SERVING, or NOT_SERVING while `not_serving_file` exists (a test flips it
//!   by exec'ing this binary's `not-serving` / `serving` subcommands);
//! - an unknown service name answers gRPC status NOT_FOUND "unknown service",
//!   as grpc-go's health server does;
//! - any other method answers UNIMPLEMENTED.

use std::convert::Infallible;
use std::io;
use std::net::TcpListener;
use std::path::PathBuf;
use std::rc::Rc;

use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::{BodyExt, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use prost::Message;
use smol::Async;

use crate::rt::{Io, LocalExec, SmolTimer};

/// The one method served.
pub const CHECK_PATH: &str = "/grpc.health.v1.Health/Check";

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    pub service: String,
}

/// `grpc.health.v1.HealthCheckResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckResponse {
    #[prost(enumeration = "ServingStatus", tag = "1")]
    pub status: i32,
}

/// `grpc.health.v1.HealthCheckResponse.ServingStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ServingStatus {
    Unknown = 0,
    Serving = 1,
    NotServing = 2,
    ServiceUnknown = 3,
}

/// What the server knows.
#[derive(Clone, Debug)]
pub struct Config {
    /// While this file exists every known service is NOT_SERVING.
    pub not_serving_file: PathBuf,
    /// Known service names besides `""` (the server as a whole).
    pub services: Vec<String>,
}

type ResBody = StreamBody<smol::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

/// Serves connections from `listener` until the task is dropped.
pub async fn serve(listener: Async<TcpListener>, config: Config) -> io::Result<()> {
    let config = Rc::new(config);
    loop {
        let (stream, _) = listener.accept().await?;
        let config = config.clone();
        crate::rt::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let config = config.clone();
                async move { Ok::<_, Infallible>(handle(req, &config).await) }
            });
            let mut builder = hyper::server::conn::http2::Builder::new(LocalExec);
            builder.timer(SmolTimer);
            if let Err(e) = builder.serve_connection(Io(stream), service).await {
                eprintln!("grpc-health: connection: {e}");
            }
        })
        .detach();
    }
}

async fn handle(req: http::Request<Incoming>, config: &Config) -> http::Response<ResBody> {
    if req.uri().path() != CHECK_PATH {
        return status_only(12, "unknown method");
    }
    let body = match Limited::new(req.into_body(), 64 * 1024).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return status_only(13, &format!("reading request: {e}")),
    };
    // One uncompressed length-prefixed message.
    if body.len() < 5
        || body[0] != 0
        || u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize != body.len() - 5
    {
        return status_only(13, "malformed gRPC frame");
    }
    let request = match HealthCheckRequest::decode(&body[5..]) {
        Ok(r) => r,
        Err(e) => return status_only(13, &format!("decoding HealthCheckRequest: {e}")),
    };
    if !request.service.is_empty() && !config.services.contains(&request.service) {
        return status_only(5, "unknown service");
    }
    let status = if config.not_serving_file.exists() {
        ServingStatus::NotServing
    } else {
        ServingStatus::Serving
    };
    let msg = HealthCheckResponse {
        status: status as i32,
    }
    .encode_to_vec();
    let mut frame = BytesMut::with_capacity(5 + msg.len());
    frame.put_u8(0);
    frame.put_u32(msg.len() as u32);
    frame.put_slice(&msg);
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let frames = vec![
        Ok(Frame::data(frame.freeze())),
        Ok(Frame::trailers(trailers)),
    ];
    http::Response::builder()
        .header("content-type", "application/grpc")
        .body(StreamBody::new(smol::stream::iter(frames)))
        .expect("static response parts are valid")
}

/// A trailers-only gRPC error response.
fn status_only(code: u32, message: &str) -> http::Response<ResBody> {
    let message =
        http::HeaderValue::from_str(message).unwrap_or(http::HeaderValue::from_static("error"));
    http::Response::builder()
        .header("content-type", "application/grpc")
        .header("grpc-status", code)
        .header("grpc-message", message)
        .body(StreamBody::new(smol::stream::iter(Vec::new())))
        .expect("static response parts are valid")
}
