//! Probe and lifecycle handlers: a v1 `Probe` or `LifecycleHandler` of a
//! container turned into a [`Handler`] that a runner can execute.
//!
//! Pure (no I/O): it applies kubelet's defaults (host = the pod IP, path =
//! `/`, scheme = HTTP, gRPC service = `""`), resolves named ports against
//! the container's ports, and refuses specs kubelet would fail at run time
//! (no handler, two handlers, a `tcpSocket` hook) with a [`HandlerError`].

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::net::url::{join_host_port, Scheme};

/// Who sends an HTTP GET: decides the `User-Agent` and whether the status
/// code matters. kubelet fails a lifecycle hook only when the request
/// itself fails; any answer, 500 included, lets it pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HttpPurpose {
    #[default]
    Probe,
    Lifecycle,
}

/// Where an httpGet probe or hook goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpTarget {
    pub scheme: Scheme,
    /// An IP address (the pod IP by default) or `localhost`.
    pub host: String,
    pub port: u16,
    /// Path and optional query, starting with `/`.
    pub path: String,
    /// `httpHeaders`, in order; a `Host` entry overrides the Host header.
    pub headers: Vec<(String, String)>,
    pub purpose: HttpPurpose,
}

impl HttpTarget {
    /// The URL, as kubelet prints it in messages.
    pub fn url(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme.as_str(),
            join_host_port(&self.host, self.port),
            self.path
        )
    }
}

/// A probe or lifecycle action, ready to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handler {
    Exec {
        command: Vec<String>,
    },
    HttpGet(HttpTarget),
    TcpSocket {
        host: String,
        port: u16,
    },
    Grpc {
        host: String,
        port: u16,
        service: String,
    },
    /// A `sleep` lifecycle hook.
    Sleep(Duration),
}

/// Why a probe or hook spec cannot be run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    #[error("no handler specified (need one of exec, httpGet, tcpSocket, grpc)")]
    None,
    #[error("more than one handler specified ({0})")]
    Several(String),
    #[error("exec handler has no command")]
    EmptyCommand,
    #[error("invalid port number: {0}")]
    InvalidPort(i64),
    #[error("port {0} not found")]
    PortNotFound(String),
    #[error("unsupported scheme {0:?} (HTTP or HTTPS)")]
    Scheme(String),
    #[error("no host: the pod has no IP yet")]
    NoHost,
    #[error("tcpSocket is not supported as a lifecycle handler")]
    TcpLifecycle,
    #[error("invalid sleep duration: {0}s")]
    Sleep(i64),
}

/// A port given as a number or as the name of one of `container`'s ports.
pub fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    resolve(port, container).map_err(|e| e.to_string())
}

fn resolve(port: &IntOrString, container: &Container) -> Result<u16, HandlerError> {
    let number = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => {
            let named = container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| i64::from(p.container_port));
            // kubelet's "last ditch effort": a number stored as a string.
            match named.or_else(|| name.parse().ok()) {
                Some(n) => n,
                None => return Err(HandlerError::PortNotFound(name.clone())),
            }
        }
    };
    u16::try_from(number)
        .ok()
        .filter(|p| *p > 0)
        .ok_or(HandlerError::InvalidPort(number))
}

fn host_or_pod_ip(host: Option<&String>, pod_ip: &str) -> Result<String, HandlerError> {
    let host = host
        .map(String::as_str)
        .filter(|h| !h.is_empty())
        .unwrap_or(pod_ip);
    if host.is_empty() {
        return Err(HandlerError::NoHost);
    }
    Ok(host.to_string())
}

fn http_target(
    a: &k8s_openapi::api::core::v1::HTTPGetAction,
    pod_ip: &str,
    c: &Container,
    purpose: HttpPurpose,
) -> Result<HttpTarget, HandlerError> {
    let scheme = match a.scheme.as_deref() {
        None | Some("") => Scheme::Http,
        Some(s) if s.eq_ignore_ascii_case("http") => Scheme::Http,
        Some(s) if s.eq_ignore_ascii_case("https") => Scheme::Https,
        Some(s) => return Err(HandlerError::Scheme(s.to_string())),
    };
    let path = match a.path.as_deref() {
        None | Some("") => "/".to_string(),
        Some(p) if p.starts_with('/') => p.to_string(),
        Some(p) => format!("/{p}"),
    };
    Ok(HttpTarget {
        scheme,
        host: host_or_pod_ip(a.host.as_ref(), pod_ip)?,
        port: resolve(&a.port, c)?,
        path,
        headers: a
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect(),
        purpose,
    })
}

fn exec_command(a: &k8s_openapi::api::core::v1::ExecAction) -> Result<Handler, HandlerError> {
    match &a.command {
        Some(c) if !c.is_empty() => Ok(Handler::Exec { command: c.clone() }),
        _ => Err(HandlerError::EmptyCommand),
    }
}

fn exactly_one(set: &[(&str, bool)]) -> Result<(), HandlerError> {
    let names: Vec<&str> = set.iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect();
    match names.len() {
        0 => Err(HandlerError::None),
        1 => Ok(()),
        _ => Err(HandlerError::Several(names.join(", "))),
    }
}

/// The handler of a probe: host defaults to the pod IP, path to `/`, scheme
/// to HTTP, the gRPC service to `""`; named ports are resolved.
pub fn probe_handler(p: &Probe, pod_ip: &str, c: &Container) -> Result<Handler, HandlerError> {
    exactly_one(&[
        ("exec", p.exec.is_some()),
        ("httpGet", p.http_get.is_some()),
        ("tcpSocket", p.tcp_socket.is_some()),
        ("grpc", p.grpc.is_some()),
    ])?;
    if let Some(e) = &p.exec {
        return exec_command(e);
    }
    if let Some(h) = &p.http_get {
        return Ok(Handler::HttpGet(http_target(
            h,
            pod_ip,
            c,
            HttpPurpose::Probe,
        )?));
    }
    if let Some(t) = &p.tcp_socket {
        return Ok(Handler::TcpSocket {
            host: host_or_pod_ip(t.host.as_ref(), pod_ip)?,
            port: resolve(&t.port, c)?,
        });
    }
    let g = p.grpc.as_ref().expect("exactly one handler is set");
    Ok(Handler::Grpc {
        host: host_or_pod_ip(None, pod_ip)?,
        port: resolve(&IntOrString::Int(g.port), c)?,
        service: g.service.clone().unwrap_or_default(),
    })
}

/// The handler of a postStart/preStop hook. `tcpSocket` is accepted by the
/// API only for compatibility and fails at run time in kubelet; here it is
/// refused up front.
pub fn lifecycle_handler(
    h: &LifecycleHandler,
    pod_ip: &str,
    c: &Container,
) -> Result<Handler, HandlerError> {
    exactly_one(&[
        ("exec", h.exec.is_some()),
        ("httpGet", h.http_get.is_some()),
        ("tcpSocket", h.tcp_socket.is_some()),
        ("sleep", h.sleep.is_some()),
    ])?;
    if let Some(e) = &h.exec {
        return exec_command(e);
    }
    if let Some(g) = &h.http_get {
        return Ok(Handler::HttpGet(http_target(
            g,
            pod_ip,
            c,
            HttpPurpose::Lifecycle,
        )?));
    }
    if h.tcp_socket.is_some() {
        return Err(HandlerError::TcpLifecycle);
    }
    let s = h
        .sleep
        .as_ref()
        .expect("exactly one handler is set")
        .seconds;
    u64::try_from(s)
        .map(|s| Handler::Sleep(Duration::from_secs(s)))
        .map_err(|_| HandlerError::Sleep(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerPort, GRPCAction, HTTPGetAction, HTTPHeader, SleepAction, TCPSocketAction,
    };

    fn container_with_port(name: &str, port: i32) -> Container {
        Container {
            name: "app".into(),
            ports: Some(vec![ContainerPort {
                name: Some(name.into()),
                container_port: port,
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn ports_resolve_by_number_by_name_and_by_a_number_in_a_string() {
        let c = container_with_port("http", 8080);
        assert_eq!(resolve_port(&IntOrString::Int(9000), &c), Ok(9000));
        assert_eq!(
            resolve_port(&IntOrString::String("http".into()), &c),
            Ok(8080)
        );
        assert_eq!(
            resolve_port(&IntOrString::String("9090".into()), &c),
            Ok(9090)
        );
        assert_eq!(
            resolve_port(&IntOrString::String("metrics".into()), &c),
            Err("port metrics not found".into())
        );
        assert_eq!(
            resolve_port(&IntOrString::Int(0), &c),
            Err("invalid port number: 0".into())
        );
        assert_eq!(
            resolve_port(&IntOrString::Int(70000), &c),
            Err("invalid port number: 70000".into())
        );
    }

    #[test]
    fn an_http_probe_defaults_to_the_pod_ip_root_path_and_plain_http() {
        let c = container_with_port("web", 80);
        let p = Probe {
            http_get: Some(HTTPGetAction {
                port: IntOrString::String("web".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let h = probe_handler(&p, "10.1.0.5", &c).unwrap();
        assert_eq!(
            h,
            Handler::HttpGet(HttpTarget {
                scheme: Scheme::Http,
                host: "10.1.0.5".into(),
                port: 80,
                path: "/".into(),
                headers: vec![],
                purpose: HttpPurpose::Probe,
            })
        );
        let p = Probe {
            http_get: Some(HTTPGetAction {
                host: Some("127.0.0.1".into()),
                path: Some("healthz".into()),
                scheme: Some("HTTPS".into()),
                port: IntOrString::Int(8443),
                http_headers: Some(vec![HTTPHeader {
                    name: "X-A".into(),
                    value: "b".into(),
                }]),
            }),
            ..Default::default()
        };
        let Handler::HttpGet(t) = probe_handler(&p, "10.1.0.5", &c).unwrap() else {
            panic!()
        };
        assert_eq!(
            (t.scheme, t.host.as_str(), t.port, t.path.as_str()),
            (Scheme::Https, "127.0.0.1", 8443, "/healthz")
        );
        assert_eq!(t.headers, vec![("X-A".to_string(), "b".to_string())]);
        assert_eq!(t.url(), "https://127.0.0.1:8443/healthz");
    }

    #[test]
    fn tcp_grpc_and_exec_probes_take_their_defaults() {
        let c = container_with_port("grpc", 50051);
        let tcp = Probe {
            tcp_socket: Some(TCPSocketAction {
                host: None,
                port: IntOrString::String("grpc".into()),
            }),
            ..Default::default()
        };
        assert_eq!(
            probe_handler(&tcp, "fd00::5", &c),
            Ok(Handler::TcpSocket {
                host: "fd00::5".into(),
                port: 50051
            })
        );
        let g = Probe {
            grpc: Some(GRPCAction {
                port: 50051,
                service: None,
            }),
            ..Default::default()
        };
        assert_eq!(
            probe_handler(&g, "10.1.0.5", &c),
            Ok(Handler::Grpc {
                host: "10.1.0.5".into(),
                port: 50051,
                service: String::new()
            })
        );
        let e = Probe {
            exec: Some(k8s_openapi::api::core::v1::ExecAction {
                command: Some(vec!["cat".into(), "/ok".into()]),
            }),
            ..Default::default()
        };
        assert_eq!(
            probe_handler(&e, "", &c),
            Ok(Handler::Exec {
                command: vec!["cat".into(), "/ok".into()]
            })
        );
    }

    #[test]
    fn a_probe_with_no_handler_or_two_handlers_or_no_pod_ip_is_refused() {
        let c = Container::default();
        assert_eq!(
            probe_handler(&Probe::default(), "10.0.0.1", &c),
            Err(HandlerError::None)
        );
        let two = Probe {
            grpc: Some(GRPCAction {
                port: 1,
                service: None,
            }),
            tcp_socket: Some(TCPSocketAction {
                host: None,
                port: IntOrString::Int(1),
            }),
            ..Default::default()
        };
        assert_eq!(
            probe_handler(&two, "10.0.0.1", &c),
            Err(HandlerError::Several("tcpSocket, grpc".into()))
        );
        let tcp = Probe {
            tcp_socket: Some(TCPSocketAction {
                host: None,
                port: IntOrString::Int(1),
            }),
            ..Default::default()
        };
        assert_eq!(probe_handler(&tcp, "", &c), Err(HandlerError::NoHost));
    }

    #[test]
    fn lifecycle_handlers_cover_exec_http_and_sleep_but_refuse_tcp() {
        let c = Container::default();
        let sleep = LifecycleHandler {
            sleep: Some(SleepAction { seconds: 3 }),
            ..Default::default()
        };
        assert_eq!(
            lifecycle_handler(&sleep, "10.0.0.1", &c),
            Ok(Handler::Sleep(Duration::from_secs(3)))
        );
        let http = LifecycleHandler {
            http_get: Some(HTTPGetAction {
                port: IntOrString::Int(8080),
                path: Some("/stop".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let Ok(Handler::HttpGet(t)) = lifecycle_handler(&http, "10.0.0.1", &c) else {
            panic!()
        };
        assert_eq!(
            (t.purpose, t.url()),
            (
                HttpPurpose::Lifecycle,
                "http://10.0.0.1:8080/stop".to_string()
            )
        );
        let tcp = LifecycleHandler {
            tcp_socket: Some(TCPSocketAction {
                host: None,
                port: IntOrString::Int(1),
            }),
            ..Default::default()
        };
        assert_eq!(
            lifecycle_handler(&tcp, "10.0.0.1", &c),
            Err(HandlerError::TcpLifecycle)
        );
    }
}
