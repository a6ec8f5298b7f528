//! Probes and lifecycle hooks: kubelet's prober (`pkg/kubelet/prober`,
//! `pkg/probe/{http,tcp,grpc,exec}`) and lifecycle handlers
//! (`pkg/kubelet/lifecycle`).
//!
//! - [`worker`]: the pure state machine that decides when a probe is due
//!   and what a result means (thresholds, kills, the startup gate).
//! - [`handler`]: a v1 `Probe` or `LifecycleHandler` turned into a
//!   [`Handler`] (pure: defaults, named ports, the pod IP).
//! - the runners, which talk to the container: [`http`] (httpGet, also for
//!   hooks), [`tcp`] (tcpSocket), [`mod@grpc`] (the gRPC health protocol) and
//!   [`mod@exec`] (CRI `ExecSync`); [`run_handler`] picks one and also runs a
//!   `sleep` hook.
//!
//! The agent owns the loop: it spawns one task per probe, asks the
//! [`Worker`] what to do, calls [`run_handler`], and applies the changes.
//! This module must NOT know the agent, its pod table or the CRI beyond
//! `ExecSync`; network plumbing (dialing, HTTP/1.1, TLS, URLs) lives in
//! `crate::net`, and only kubelet's probe policy lives here.
//!
//! Every runner works on the caller's smol executor (no threads) and obeys
//! its timeout. Probe hosts are IP addresses in practice (the pod IP, or an
//! explicit `host`): an IP literal or `localhost` is used as is; other names
//! are not resolved (see `crate::net::dial`), and such a probe fails with a
//! message saying so.

pub mod exec;
pub mod grpc;
pub mod handler;
pub mod http;
pub mod tcp;
pub mod worker;

use std::time::Duration;

use crate::cri::Runtime;
use crate::rt;

pub use exec::exec;
pub use grpc::grpc;
pub use handler::{
    lifecycle_handler, probe_handler, resolve_port, Handler, HandlerError, HttpPurpose, HttpTarget,
};
pub use http::{http_get, MAX_REDIRECTS};
pub use tcp::tcp_socket;
pub use worker::{
    wants_readiness_now, Change, ContainerView, FollowUp, Outcome, Params, ProbeType, Step, Worker,
};

pub use crate::net::url::Scheme;

/// kubelet's `User-Agent` for probes (`kube-probe/<major>.<minor>`).
pub const PROBE_USER_AGENT: &str = "kube-probe/1.36";
/// kubelet's `User-Agent` for lifecycle hooks.
pub const LIFECYCLE_USER_AGENT: &str = "kube-lifecycle/1.36";
/// How much of a response body or of exec output is read (kubelet's limit).
pub const MAX_READ: usize = 10 * 1024;

/// The outcome of one probe or hook, with a message for logs and events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeResult {
    pub outcome: Outcome,
    /// e.g. "HTTP probe failed with statuscode: 500".
    pub message: String,
    /// A success kubelet warns about (its `probe.Warning`: an HTTP probe
    /// answered with a redirect it did not follow): the `ProbeWarning`
    /// event carries the message.
    pub warning: bool,
}

impl ProbeResult {
    pub(crate) fn success(message: impl Into<String>) -> Self {
        ProbeResult {
            outcome: Outcome::Success,
            message: message.into(),
            warning: false,
        }
    }
    pub(crate) fn warning(message: impl Into<String>) -> Self {
        ProbeResult {
            warning: true,
            ..ProbeResult::success(message)
        }
    }
    pub(crate) fn failure(message: impl Into<String>) -> Self {
        ProbeResult {
            outcome: Outcome::Failure,
            message: message.into(),
            warning: false,
        }
    }
    pub(crate) fn unknown(message: impl Into<String>) -> Self {
        ProbeResult {
            outcome: Outcome::Unknown,
            message: message.into(),
            warning: false,
        }
    }
}

/// Runs a handler for the container `container_id` within `timeout`.
pub async fn run_handler(
    rt: &Runtime,
    container_id: &str,
    h: &Handler,
    timeout: Duration,
) -> ProbeResult {
    match h {
        Handler::Exec { command } => exec(rt, container_id, command, timeout).await,
        Handler::HttpGet(t) => http_get(t, timeout).await,
        Handler::TcpSocket { host, port } => tcp_socket(host, *port, timeout).await,
        Handler::Grpc {
            host,
            port,
            service,
        } => grpc(host, *port, service, timeout).await,
        Handler::Sleep(d) => match rt::timeout(timeout, rt::sleep(*d)).await {
            Some(()) => ProbeResult::success(""),
            None => ProbeResult::failure("container terminated before sleep hook finished"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(5);

    #[test]
    fn a_sleep_hook_longer_than_its_timeout_fails() {
        let rt_ = Runtime::new(
            "/nonexistent/picolet-prober-test.sock".into(),
            Duration::from_secs(1),
        );
        let r = rt::block_on(run_handler(
            &rt_,
            "c1",
            &Handler::Sleep(Duration::from_secs(30)),
            Duration::from_millis(50),
        ));
        assert_eq!(r.outcome, Outcome::Failure);
        let r = rt::block_on(run_handler(
            &rt_,
            "c1",
            &Handler::Sleep(Duration::from_millis(10)),
            T,
        ));
        assert_eq!(r.outcome, Outcome::Success);
    }
}
