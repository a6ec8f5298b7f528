//! `/exec/...`, `/attach/...` and `/portForward/...`: kubelet's streaming
//! endpoints, served (not redirected) the way kubelet serves them today.
//!
//! A request names the pod (and, for exec and attach, the container), in
//! kubelet's path forms `/exec/{namespace}/{pod}/{container}` and
//! `/exec/{namespace}/{pod}/{uid}/{container}` (`/portForward/{namespace}/
//! {pod}[/{uid}]`), and its options in the query ([`Session::parse`],
//! pure). The pod workers find the running container (or the pod's
//! sandbox, `PodWorkers::session_target`); the view asks the runtime for
//! a streaming URL (CRI `Exec`, `Attach`,
//! `PortForward`), and relays the client's upgraded connection (SPDY/3.1
//! or WebSocket, whichever it asked for) byte for byte to that URL
//! ([`crate::net::upgrade`]). At most [`MAX_SESSIONS`] run at once per
//! listener.
//!
//! Refusals are kubelet's: 404 `pod does not exist`, 404 for a container
//! the pod does not have, 500 `container not found ("c")` when it has no
//! running instance, 400 for bad options, 500 naming the CRI call when the
//! runtime refuses, and the runtime's own answer when its streaming server
//! refuses the upgrade.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use http::request::Parts;
use http::{header, Response, StatusCode};

use super::Views;
use crate::admin::router::{typed, Reply, UpgradeFn};
use crate::cri::{api, RuntimeService};
use crate::net::upgrade;
use crate::rt;

/// Sessions relayed at once (per listener); more are refused with 429.
pub const MAX_SESSIONS: usize = 16;
/// How long the runtime's streaming server may take to answer the upgrade.
const UPGRADE_DEADLINE: Duration = Duration::from_secs(30);

/// Which streaming endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Exec,
    Attach,
    PortForward,
}

/// A streaming request, from its path and query.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Session {
    pub kind: Option<Kind>,
    pub namespace: String,
    pub pod: String,
    /// The pod UID, when the path has one.
    pub uid: Option<String>,
    /// Empty for portForward.
    pub container: String,
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
    pub ports: Vec<i32>,
}

/// A query value, percent- and `+`-decoded.
fn decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match u8::from_str_radix(v.get(i + 1..i + 3).unwrap_or(""), 16) {
                Ok(b) => {
                    out.push(b);
                    i += 2;
                }
                Err(_) => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// kubelet's boolean query values (`1`; `true` as clients also send).
fn truthy(v: &str) -> bool {
    matches!(v, "1" | "true" | "True" | "TRUE")
}

impl Session {
    /// Parses `path` and `query`; the message is the 400 (or 404) text.
    pub fn parse(path: &str, query: &str) -> Result<Session, (StatusCode, String)> {
        let bad = |m: &str| (StatusCode::BAD_REQUEST, m.to_string());
        let (kind, rest) = if let Some(r) = path.strip_prefix("/exec/") {
            (Kind::Exec, r)
        } else if let Some(r) = path.strip_prefix("/attach/") {
            (Kind::Attach, r)
        } else if let Some(r) = path.strip_prefix("/portForward/") {
            (Kind::PortForward, r)
        } else {
            return Err((StatusCode::NOT_FOUND, "not found".into()));
        };
        let parts: Vec<&str> = rest.split('/').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err((StatusCode::NOT_FOUND, "not found".into()));
        }
        let mut s = Session {
            kind: Some(kind),
            ..Session::default()
        };
        let owned = |p: &&str| p.to_string();
        match (kind, parts.as_slice()) {
            (Kind::PortForward, [ns, pod]) => (s.namespace, s.pod) = (owned(ns), owned(pod)),
            (Kind::PortForward, [ns, pod, uid]) => {
                (s.namespace, s.pod, s.uid) = (owned(ns), owned(pod), Some(owned(uid)))
            }
            (Kind::Exec | Kind::Attach, [ns, pod, c]) => {
                (s.namespace, s.pod, s.container) = (owned(ns), owned(pod), owned(c))
            }
            (Kind::Exec | Kind::Attach, [ns, pod, uid, c]) => {
                (s.namespace, s.pod, s.uid, s.container) =
                    (owned(ns), owned(pod), Some(owned(uid)), owned(c))
            }
            _ => return Err((StatusCode::NOT_FOUND, "not found".into())),
        }
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = decode(v);
            match k {
                "command" => s.command.push(v),
                "stdin" | "input" => s.stdin |= truthy(&v),
                "stdout" | "output" => s.stdout |= truthy(&v),
                "stderr" | "error" => s.stderr |= truthy(&v),
                "tty" => s.tty |= truthy(&v),
                "port" => s.ports.push(
                    v.parse::<u16>()
                        .ok()
                        .filter(|p| *p > 0)
                        .ok_or_else(|| bad(&format!("invalid port {v:?}")))?
                        .into(),
                ),
                _ => {}
            }
        }
        if kind != Kind::PortForward {
            if !(s.stdin || s.stdout || s.stderr) {
                return Err(bad("you must specify at least 1 of stdin, stdout, stderr"));
            }
            // kubelet: with a TTY, stderr is merged into stdout.
            if s.tty {
                s.stderr = false;
            }
            if kind == Kind::Exec && s.command.is_empty() {
                return Err(bad("you must specify a command (query parameter command)"));
            }
        }
        Ok(s)
    }
}

fn refuse(status: StatusCode, message: impl Into<String>) -> Response<Reply> {
    let mut r = typed(message.into() + "\n", "text/plain; charset=utf-8");
    *r.status_mut() = status;
    r.map(Reply::Whole)
}

/// Counts a running session; uncounts it when dropped.
struct SessionSlot(Rc<Cell<usize>>);

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

impl<R: RuntimeService> Views<R> {
    /// The streaming routes' handler, with its own session count.
    pub(in crate::agent) fn streaming_handler(self: &Rc<Self>) -> UpgradeFn {
        let me = self.clone();
        let sessions = Rc::new(Cell::new(0usize));
        Rc::new(move |head| {
            let (me, sessions) = (me.clone(), sessions.clone());
            Box::pin(async move { me.stream_session(head, sessions).await })
        })
    }

    async fn stream_session(
        self: Rc<Self>,
        mut head: Parts,
        sessions: Rc<Cell<usize>>,
    ) -> Response<Reply> {
        let s = match Session::parse(head.uri.path(), head.uri.query().unwrap_or("")) {
            Ok(s) => s,
            Err((status, message)) => return refuse(status, message),
        };
        let target = match self.workers.session_target(
            &s.namespace,
            &s.pod,
            s.uid.as_deref(),
            &s.container,
            s.kind == Some(Kind::PortForward),
        ) {
            Ok(t) => t,
            Err((status, message)) => return refuse(status, message),
        };
        if sessions.get() >= MAX_SESSIONS {
            return refuse(
                StatusCode::TOO_MANY_REQUESTS,
                format!("{MAX_SESSIONS} streaming sessions are open; try again later"),
            );
        }
        let Some(cri) = self.workers.runtime().cri().cloned() else {
            return refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "this runtime has no streaming server",
            );
        };
        let url = match s.kind {
            Some(Kind::Exec) => cri
                .exec(api::ExecRequest {
                    container_id: target,
                    cmd: s.command,
                    tty: s.tty,
                    stdin: s.stdin,
                    stdout: s.stdout,
                    stderr: s.stderr,
                })
                .await
                .map(|r| r.url),
            Some(Kind::Attach) => cri
                .attach(api::AttachRequest {
                    container_id: target,
                    stdin: s.stdin,
                    tty: s.tty,
                    stdout: s.stdout,
                    stderr: s.stderr,
                })
                .await
                .map(|r| r.url),
            _ => cri
                .port_forward(api::PortForwardRequest {
                    pod_sandbox_id: target,
                    port: s.ports,
                })
                .await
                .map(|r| r.url),
        };
        let url = match url {
            Ok(u) => u,
            Err(e) => return refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        };
        let answer = match upgrade::open(&url, &head.method, &head.headers, UPGRADE_DEADLINE).await
        {
            Ok(a) => a,
            Err(e) => return refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        };
        log::debug!(
            "{} {}: the runtime's streaming server answered {}",
            head.method,
            head.uri.path(),
            answer.status.as_u16()
        );
        let mut r = Response::new(Reply::Whole(answer_body(&answer)));
        *r.status_mut() = answer.status;
        *r.headers_mut() = answer.headers;
        let Some(upstream) = answer.stream else {
            r.headers_mut().remove(header::TRANSFER_ENCODING);
            r.headers_mut().remove(header::CONTENT_LENGTH);
            return r;
        };
        let Some(on_upgrade) = head.extensions.remove::<hyper::upgrade::OnUpgrade>() else {
            return refuse(StatusCode::BAD_REQUEST, "the connection cannot be upgraded");
        };
        sessions.set(sessions.get() + 1);
        let slot = SessionSlot(sessions);
        let early = answer.rest;
        rt::spawn(async move {
            let _slot = slot;
            match on_upgrade.await {
                Ok(client) => {
                    log::debug!("streaming session: upgraded; relaying");
                    upgrade::splice(client, upstream, early).await;
                    log::debug!("streaming session ended");
                }
                Err(e) => log::debug!("streaming session: upgrade: {e}"),
            }
        })
        .detach();
        r
    }
}

/// The body relayed with a refusal (none with a `101`).
fn answer_body(a: &upgrade::Answer) -> crate::admin::router::Body {
    if a.stream.is_some() {
        return Default::default();
    }
    http_body_util::Full::new(bytes::Bytes::from(a.rest.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_paths_and_queries_give_the_session() {
        let s = Session::parse(
            "/exec/default/web/app",
            "command=sh&command=-c&command=echo+hi%21&stdin=1&stdout=1&stderr=1&tty=0",
        )
        .unwrap();
        assert_eq!(s.kind, Some(Kind::Exec));
        assert_eq!(
            (&*s.namespace, &*s.pod, &*s.container),
            ("default", "web", "app")
        );
        assert_eq!(s.uid, None);
        assert_eq!(s.command, ["sh", "-c", "echo hi!"]);
        assert!(s.stdin && s.stdout && s.stderr && !s.tty);
        let s =
            Session::parse("/attach/ns/p/uid-1/c", "input=1&output=true&tty=1&stderr=1").unwrap();
        assert_eq!(s.kind, Some(Kind::Attach));
        assert_eq!(s.uid.as_deref(), Some("uid-1"));
        assert_eq!(s.container, "c");
        assert!(s.stdin && s.stdout && s.tty);
        assert!(!s.stderr, "a TTY merges stderr into stdout");
    }

    #[test]
    fn the_api_servers_query_names_input_output_and_error_select_the_streams() {
        // What kube-apiserver sends the node for `kubectl exec` (core/v1's
        // ExecStdinParam, ExecStdoutParam, ExecStderrParam).
        let s = Session::parse(
            "/exec/default/web/web",
            "command=cat&command=%2Fetc%2Fhostname&error=1&output=1",
        )
        .unwrap();
        assert_eq!(s.command, ["cat", "/etc/hostname"]);
        assert!(s.stdout && s.stderr && !s.stdin && !s.tty);
        let s = Session::parse(
            "/exec/default/web/web",
            "command=sh&input=1&output=1&error=1",
        )
        .unwrap();
        assert!(s.stdin && s.stdout && s.stderr);
    }

    #[test]
    fn port_forward_takes_ports_and_no_container() {
        let s = Session::parse("/portForward/ns/p", "port=80&port=8080").unwrap();
        assert_eq!(s.kind, Some(Kind::PortForward));
        assert_eq!(s.ports, [80, 8080]);
        assert_eq!(s.container, "");
        let s = Session::parse("/portForward/ns/p/uid", "").unwrap();
        assert_eq!(s.uid.as_deref(), Some("uid"));
        assert_eq!(
            Session::parse("/portForward/ns/p", "port=0").unwrap_err().0,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            Session::parse("/portForward/ns/p", "port=http")
                .unwrap_err()
                .0,
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn bad_paths_are_404_and_bad_options_400() {
        for path in [
            "/exec/ns/p",
            "/exec/ns//c",
            "/exec/ns/p/u/c/x",
            "/portForward/ns",
            "/other/ns/p/c",
        ] {
            assert_eq!(
                Session::parse(path, "command=ls&stdout=1").unwrap_err().0,
                StatusCode::NOT_FOUND,
                "{path}"
            );
        }
        let (status, text) = Session::parse("/exec/ns/p/c", "command=ls").unwrap_err();
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            text.contains("at least 1 of stdin, stdout, stderr"),
            "{text}"
        );
        let (status, _) = Session::parse("/exec/ns/p/c", "stdout=1").unwrap_err();
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(Session::parse("/attach/ns/p/c", "stdout=1").is_ok());
    }

    #[test]
    fn query_values_are_percent_decoded() {
        assert_eq!(decode("a%20b+c"), "a b c");
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz%41"), "%zzA");
        assert_eq!(decode("%2F"), "/");
    }
}
