//! The grpc runner: kubelet's `pkg/probe/grpc`, one
//! `grpc.health.v1.Health/Check` call over plaintext HTTP/2.
//!
//! Only `SERVING` is success. Messages follow kubelet's ("service
//! unhealthy (responded with \"NOT_SERVING\")", "error: failed to connect
//! service at ..."). The HTTP/2 connection is hyper's client on the
//! caller's executor, wrapped as a tower service for tonic's generated
//! client code; the connection lives as long as the check.

use std::time::Duration;

use super::{ProbeResult, PROBE_USER_AGENT};
use crate::net::dial::dial;
use crate::net::url::join_host_port;
use crate::rt::{self, Io, LocalExec, SmolTimer};

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

#[cfg(test)]
#[path = "../../tests/images/grpc-health/server.rs"]
mod grpc_health_server;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::dial::refusing_port;
    use crate::probe::Outcome;
    use smol::Async;
    use std::io;
    use std::net::TcpListener;

    const T: Duration = Duration::from_secs(5);

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
        let (_refusing, port) = refusing_port();
        let r = rt::block_on(grpc("127.0.0.1", port, "", T));
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
}
