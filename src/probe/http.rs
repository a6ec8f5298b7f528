//! The httpGet runner for probes and lifecycle hooks: kubelet's
//! `pkg/probe/http` policy on top of `crate::net`'s HTTP/1.1 client.
//!
//! - One HTTP/1.1 GET per hop, `User-Agent: kube-probe/1.36` (hooks:
//!   `kube-lifecycle/1.36`) unless set, `Accept: */*` unless set (an empty
//!   `Accept` removes it), `Connection: close`; an `httpHeaders` entry
//!   `Host` overrides the Host header.
//! - 200..=399 is success; a hook passes on any answer, 500 included
//!   (kubelet fails a hook only when the request itself fails).
//! - Redirects are followed (at most [`MAX_REDIRECTS`] requests) while they
//!   stay on the same host name; a redirect elsewhere ends the probe as a
//!   success with kubelet's warning ("Probe terminated redirects", the
//!   `ProbeWarning` event).
//! - At most [`MAX_READ`] of the body is read; 1 KiB of it goes into a
//!   redirect's warning, none into a failure's message (kubelet keeps the
//!   body out of the Unhealthy event).
//! - HTTPS skips certificate verification (`net::probe_tls::Verify::Skip`), like
//!   kubelet's `InsecureSkipVerify`.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;

use super::handler::{HttpPurpose, HttpTarget};
use super::{ProbeResult, LIFECYCLE_USER_AGENT, MAX_READ, PROBE_USER_AGENT};
use crate::net::http1::{self, Http1Error, Response};
use crate::net::probe_tls::Verify;
use crate::net::url::{encode_path, Url};
use crate::rt;

/// How many HTTP requests one probe may make, redirects included.
pub const MAX_REDIRECTS: usize = 10;
/// How much of a failing response's body goes into the message.
const BODY_IN_MESSAGE: usize = 1024;

/// An HTTP GET probe (or hook, per `t.purpose`).
pub async fn http_get(t: &HttpTarget, timeout: Duration) -> ProbeResult {
    let url = Url {
        scheme: t.scheme,
        host: t.host.clone(),
        port: t.port,
        path: encode_path(&t.path),
    };
    match rt::timeout(timeout, http_follow(t, url.clone())).await {
        Some(r) => r,
        None => ProbeResult::failure(format!(
            "Get \"{url}\": context deadline exceeded (Client.Timeout of {timeout:?} exceeded)"
        )),
    }
}

async fn http_follow(t: &HttpTarget, first: Url) -> ProbeResult {
    let host_override = t
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.clone());
    let mut url = first.clone();
    let mut host_header = host_override.clone().unwrap_or_else(|| url.authority());
    for _ in 0..MAX_REDIRECTS {
        let answer = match request(t, &url, &host_header).await {
            Ok(a) => a,
            Err(e) => return ProbeResult::failure(format!("Get \"{url}\": {e}")),
        };
        let redirect = matches!(answer.status, 301 | 302 | 303 | 307 | 308);
        if let (true, Some(loc)) = (redirect, answer.header(http::header::LOCATION)) {
            let Some((next, relative)) = url.join(loc) else {
                return ProbeResult::failure(format!(
                    "Get \"{url}\": failed to parse Location header {loc:?}"
                ));
            };
            if !next.host.eq_ignore_ascii_case(&first.host) {
                // kubelet does not follow a redirect off the probed host;
                // the 3xx itself is the (successful) answer, with a warning.
                return finish(t, answer.status, &answer.body, Some(&next));
            }
            host_header = match (&host_override, relative) {
                (Some(h), true) => h.clone(),
                _ => next.authority(),
            };
            log::debug!("probe {url}: {} redirect to {next}", answer.status);
            url = next;
            continue;
        }
        return finish(t, answer.status, &answer.body, None);
    }
    ProbeResult::failure(format!(
        "Get \"{url}\": stopped after {MAX_REDIRECTS} redirects"
    ))
}

fn finish(t: &HttpTarget, status: u16, body: &[u8], off_host: Option<&Url>) -> ProbeResult {
    if t.purpose == HttpPurpose::Lifecycle {
        return ProbeResult::success(format!(
            "HTTP lifecycle hook answered with statuscode: {status}"
        ));
    }
    if (200..400).contains(&status) {
        // A 3xx answer (a redirect off the probed host, or one without a
        // Location to follow) passes with kubelet's warning.
        if off_host.is_some() || status >= 300 {
            return ProbeResult::warning(format!(
                "Probe terminated redirects, Response body: {}",
                snippet(body)
            ));
        }
        return ProbeResult::success(format!("HTTP probe succeeded with statuscode: {status}"));
    }
    // kubelet keeps the body out of a failure's message (it becomes the
    // Unhealthy event, which anyone reading events sees).
    ProbeResult::failure(format!("HTTP probe failed with statuscode: {status}"))
}

/// The start of a body, as text, for a message.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(BODY_IN_MESSAGE)]);
    let mut s = text.trim().to_string();
    if body.len() > BODY_IN_MESSAGE {
        s.push_str("...");
    }
    s
}

/// One hop: kubelet's headers on `net`'s client.
async fn request(t: &HttpTarget, url: &Url, host_header: &str) -> Result<Response, Http1Error> {
    let stream = http1::connect(url, Verify::Skip).await?;
    let mut req = http::Request::get(url.path.as_str());
    let h = req.headers_mut().expect("builder is valid so far");
    let (n, v) = http1::header("host", host_header)?;
    h.insert(n, v);
    for (name, value) in &t.headers {
        if name.eq_ignore_ascii_case("host") {
            continue;
        }
        // kubelet: an empty Accept removes the header.
        if name.eq_ignore_ascii_case("accept") && value.is_empty() {
            continue;
        }
        let (n, v) = http1::header(name, value)?;
        h.append(n, v);
    }
    if !t
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("user-agent"))
    {
        let ua = match t.purpose {
            HttpPurpose::Probe => PROBE_USER_AGENT,
            HttpPurpose::Lifecycle => LIFECYCLE_USER_AGENT,
        };
        h.insert(http::header::USER_AGENT, http::HeaderValue::from_static(ua));
    }
    if !t
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("accept"))
    {
        h.insert(http::header::ACCEPT, http::HeaderValue::from_static("*/*"));
    }
    h.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    let req = req
        .body(Empty::<Bytes>::new())
        .map_err(|e| Http1Error::Header(e.to_string()))?;
    http1::send(stream, req, MAX_READ).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::dial::refusing_port;
    use crate::net::url::Scheme;
    use crate::probe::Outcome;
    use smol::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
    use smol::Async;
    use std::cell::RefCell;
    use std::net::TcpListener;
    use std::rc::Rc;

    const T: Duration = Duration::from_secs(5);

    /// A one-request-per-connection HTTP/1.1 server on 127.0.0.1: `answer`
    /// maps the request head to the whole response. Returns the port and
    /// the request heads seen.
    fn serve_http(
        answer: impl Fn(&str, u16) -> String + 'static,
    ) -> (u16, Rc<RefCell<Vec<String>>>) {
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let port = listener.get_ref().local_addr().unwrap().port();
        let seen = Rc::new(RefCell::new(Vec::new()));
        let log = seen.clone();
        rt::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                read_head(stream, &answer, port, &log).await;
            }
        })
        .detach();
        (port, seen)
    }

    async fn read_head<S: AsyncRead + AsyncWrite + Unpin>(
        mut s: S,
        answer: &impl Fn(&str, u16) -> String,
        port: u16,
        log: &Rc<RefCell<Vec<String>>>,
    ) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let head = String::from_utf8_lossy(&buf).to_string();
        log.borrow_mut().push(head.clone());
        let _ = s.write_all(answer(&head, port).as_bytes()).await;
        let _ = s.flush().await;
        let _ = s.close().await;
    }

    fn response(status: &str, extra: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
            body.len()
        )
    }

    fn target(port: u16, path: &str) -> HttpTarget {
        HttpTarget {
            scheme: Scheme::Http,
            host: "127.0.0.1".into(),
            port,
            path: path.into(),
            headers: vec![],
            purpose: HttpPurpose::Probe,
        }
    }

    #[test]
    fn a_200_answer_is_a_success_and_the_request_carries_kubelets_headers() {
        rt::block_on(async {
            let (port, seen) = serve_http(|_, _| response("200 OK", "", "ok"));
            let r = http_get(&target(port, "/healthz?x=1"), T).await;
            assert_eq!(r.outcome, Outcome::Success, "{}", r.message);
            let head = seen.borrow()[0].to_ascii_lowercase();
            assert!(head.starts_with("get /healthz?x=1 http/1.1\r\n"), "{head}");
            assert!(
                head.contains(&format!("host: 127.0.0.1:{port}\r\n")),
                "{head}"
            );
            assert!(head.contains("user-agent: kube-probe/1.36\r\n"), "{head}");
            assert!(head.contains("accept: */*\r\n"), "{head}");
        });
    }

    #[test]
    fn a_500_answer_is_a_failure_naming_the_status_code_but_not_the_body() {
        rt::block_on(async {
            let (port, _) =
                serve_http(|_, _| response("500 Internal Server Error", "", "database down"));
            let r = http_get(&target(port, "/"), T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert_eq!(r.message, "HTTP probe failed with statuscode: 500");
        });
    }

    #[test]
    fn custom_headers_are_sent_and_a_host_header_overrides_the_host() {
        rt::block_on(async {
            let (port, seen) = serve_http(|_, _| response("204 No Content", "", ""));
            let mut t = target(port, "/");
            t.headers = vec![
                ("Host".into(), "example.test".into()),
                ("X-Probe".into(), "yes".into()),
                ("Accept".into(), "application/json".into()),
                ("User-Agent".into(), "mine".into()),
            ];
            let r = http_get(&t, T).await;
            assert_eq!(r.outcome, Outcome::Success, "{}", r.message);
            let head = seen.borrow()[0].to_ascii_lowercase();
            assert!(head.contains("host: example.test\r\n"), "{head}");
            assert!(head.contains("x-probe: yes\r\n"), "{head}");
            assert!(
                head.contains("accept: application/json\r\n") && !head.contains("*/*"),
                "{head}"
            );
            assert!(
                head.contains("user-agent: mine\r\n") && !head.contains("kube-probe"),
                "{head}"
            );
        });
    }

    #[test]
    fn a_redirect_to_the_same_host_is_followed() {
        rt::block_on(async {
            let (port, seen) = serve_http(|head, _| {
                if head.starts_with("GET /old ") {
                    response("302 Found", "Location: /new\r\n", "")
                } else if head.starts_with("GET /new ") {
                    response("500 Internal Server Error", "", "")
                } else {
                    response("404 Not Found", "", "")
                }
            });
            let r = http_get(&target(port, "/old"), T).await;
            assert_eq!(
                r.outcome,
                Outcome::Failure,
                "the 500 after the redirect counts: {}",
                r.message
            );
            assert!(r.message.contains("statuscode: 500"), "{}", r.message);
            assert_eq!(seen.borrow().len(), 2);
        });
    }

    #[test]
    fn an_absolute_redirect_to_the_same_host_name_on_another_port_is_followed() {
        rt::block_on(async {
            let (ok_port, _) = serve_http(|_, _| response("200 OK", "", ""));
            let (port, _) = serve_http(move |_, _| {
                response(
                    "301 Moved Permanently",
                    &format!("Location: http://127.0.0.1:{ok_port}/x\r\n"),
                    "",
                )
            });
            let r = http_get(&target(port, "/"), T).await;
            assert_eq!(r.outcome, Outcome::Success, "{}", r.message);
            assert!(r.message.contains("statuscode: 200"), "{}", r.message);
        });
    }

    #[test]
    fn a_redirect_to_another_host_is_not_followed_and_counts_as_success_with_a_warning() {
        rt::block_on(async {
            let (port, seen) = serve_http(|_, _| {
                response(
                    "302 Found",
                    "Location: http://192.0.2.1/elsewhere\r\n",
                    "moved",
                )
            });
            let r = http_get(&target(port, "/"), T).await;
            assert_eq!(r.outcome, Outcome::Success, "{}", r.message);
            assert!(r.warning, "kubelet's probe.Warning: a ProbeWarning event");
            assert_eq!(
                r.message,
                "Probe terminated redirects, Response body: moved"
            );
            assert_eq!(seen.borrow().len(), 1);
        });
    }

    #[test]
    fn a_redirect_loop_fails_after_ten_requests() {
        rt::block_on(async {
            let (port, seen) =
                serve_http(|_, _| response("307 Temporary Redirect", "Location: /again\r\n", ""));
            let r = http_get(&target(port, "/"), T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(
                r.message.contains("stopped after 10 redirects"),
                "{}",
                r.message
            );
            assert_eq!(seen.borrow().len(), MAX_REDIRECTS);
        });
    }

    #[test]
    fn a_server_that_never_answers_fails_the_probe_at_the_timeout() {
        rt::block_on(async {
            let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
            let port = listener.get_ref().local_addr().unwrap().port();
            let _hold = rt::spawn(async move {
                let mut conns = Vec::new();
                loop {
                    conns.push(listener.accept().await);
                }
            });
            let r = http_get(&target(port, "/"), Duration::from_millis(300)).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(r.message.contains("deadline exceeded"), "{}", r.message);
        });
    }

    #[test]
    fn a_refused_connection_fails_the_http_probe() {
        let (_refusing, port) = refusing_port();
        let r = rt::block_on(http_get(&target(port, "/"), T));
        assert_eq!(r.outcome, Outcome::Failure);
        assert!(r.message.contains("dial tcp 127.0.0.1:"), "{}", r.message);
    }

    #[test]
    fn a_big_body_is_read_only_up_to_ten_kib() {
        rt::block_on(async {
            let big = "x".repeat(100 * 1024);
            let (port, _) = serve_http(move |_, _| response("503 Service Unavailable", "", &big));
            let r = http_get(&target(port, "/"), T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(
                r.message.len() < 2 * 1024,
                "message is bounded: {} bytes",
                r.message.len()
            );
        });
    }

    #[test]
    fn a_lifecycle_get_passes_on_any_answer_and_says_kube_lifecycle() {
        rt::block_on(async {
            let (port, seen) = serve_http(|_, _| response("500 Internal Server Error", "", ""));
            let mut t = target(port, "/");
            t.purpose = HttpPurpose::Lifecycle;
            let r = http_get(&t, T).await;
            assert_eq!(r.outcome, Outcome::Success, "{}", r.message);
            assert!(
                seen.borrow()[0].contains("user-agent: kube-lifecycle/1.36\r\n"),
                "{:?}",
                seen.borrow()
            );
        });
    }

    #[cfg(feature = "https-probes")]
    #[test]
    fn an_https_probe_accepts_a_self_signed_certificate() {
        use futures_rustls::rustls;
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        const CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBojCCAUigAwIBAgIUaInmlB7Un50lp2v7EvfaMyzmww0wCgYIKoZIzj0EAwIw
HTEbMBkGA1UEAwwScGljb2xldC1wcm9iZS10ZXN0MCAXDTI2MTEyOTE5MTgwOVoY
DzIxMjYxMTA1MTkxODA5WjAdMRswGQYDVQQDDBJwaWNvbGV0LXByb2JlLXRlc3Qw
WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAASFa1J0bExmiOkDUvU7PVS1mJMFmAQJ
QdaWnkAoONBAIr+OcVD7o8Y53nZQtTcUJLP6F4tkuUdNbWFz8tjWEMxPo2QwYjAd
BgNVHQ4EFgQUd90ozYz0wbp3HNRLkKCMF/8T+jYwHwYDVR0jBBgwFoAUd90ozYz0
wbp3HNRLkKCMF/8T+jYwDwYDVR0TAQH/BAUwAwEB/zAPBgNVHREECDAGhwR/AAAB
MAoGCCqGSM49BAMCA0gAMEUCIQCjZxxy650sVjt68ODMsTtG9nHSJdfn9Q77+wAI
VkPEHAIgS2GO8d0VpDSYnzvepV8kcg/C4CqSK47jyW1qEU3i7G0=
-----END CERTIFICATE-----";
        // A throwaway key for this test only (self-signed, CN picolet-probe-test).
        const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgePhfFf/B8VqYrYqF
GTCsX7kEJHsdqGxjJ8gOiw7aKWahRANCAASFa1J0bExmiOkDUvU7PVS1mJMFmAQJ
QdaWnkAoONBAIr+OcVD7o8Y53nZQtTcUJLP6F4tkuUdNbWFz8tjWEMxP
-----END PRIVATE KEY-----";
        let cert = CertificateDer::from_pem_slice(CERT.as_bytes()).unwrap();
        let key = PrivateKeyDer::from_pem_slice(KEY.as_bytes()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
        let acceptor = futures_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        rt::block_on(async {
            let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
            let port = listener.get_ref().local_addr().unwrap().port();
            let seen = Rc::new(RefCell::new(Vec::new()));
            let log = seen.clone();
            let _server = rt::spawn(async move {
                loop {
                    let (tcp, _) = listener.accept().await.unwrap();
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        read_head(
                            tls,
                            &|_: &str, _| response("200 OK", "", "secure"),
                            port,
                            &log,
                        )
                        .await;
                    }
                }
            });
            let mut t = target(port, "/tls");
            t.scheme = Scheme::Https;
            let r = http_get(&t, T).await;
            assert_eq!(r.outcome, Outcome::Success, "{}", r.message);
            assert!(
                seen.borrow()[0].starts_with("GET /tls HTTP/1.1"),
                "{:?}",
                seen.borrow()
            );
            // A plain HTTP answer to the TLS hello fails the probe.
            let plain = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
            let plain_port = plain.get_ref().local_addr().unwrap().port();
            let _plain = rt::spawn(async move {
                let (mut s, _) = plain.accept().await.unwrap();
                let _ = s
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
                    .await;
                rt::sleep(Duration::from_secs(1)).await;
            });
            let mut t = target(plain_port, "/");
            t.scheme = Scheme::Https;
            let r = http_get(&t, T).await;
            assert_eq!(r.outcome, Outcome::Failure, "{}", r.message);
            assert!(r.message.contains("tls"), "{}", r.message);
        });
    }

    #[cfg(not(feature = "https-probes"))]
    #[test]
    fn an_https_probe_without_tls_compiled_in_fails_saying_so() {
        rt::block_on(async {
            let (port, _) = serve_http(|_, _| response("200 OK", "", ""));
            let mut t = target(port, "/");
            t.scheme = Scheme::Https;
            let r = http_get(&t, T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(r.message.contains("https-probes"), "{}", r.message);
        });
    }
}
