//! Tests of the transport against a local rustls + hyper server on the same
//! executor (HTTP/2 or HTTP/1.1-only by ALPN), and a TCP proxy that can
//! blackhole a connection.

use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::rc::Rc;
use std::sync::Arc;

use futures_rustls::rustls::pki_types::pem::PemObject;
use futures_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use futures_rustls::rustls::server::WebPkiClientVerifier;
use futures_rustls::rustls::{RootCertStore, ServerConfig};
use futures_rustls::TlsAcceptor;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::stream::StreamExt;

use super::*;
use crate::apiserver::client::client_tls::testpki::{self, Pki};
use crate::apiserver::client::kubeconfig::Source;
use crate::rt::{Io, LocalExec, SmolTimer};

type ResBody = UnsyncBoxBody<Bytes, Infallible>;

fn full(s: impl Into<Bytes>) -> ResBody {
    Full::new(s.into()).boxed_unsync()
}

#[derive(Default)]
struct Seen {
    /// TCP connections accepted.
    accepted: Cell<u32>,
    /// Connections whose client presented a certificate.
    with_client_cert: Cell<u32>,
    /// Senders of open watch streams, to push lines or end them.
    watches: RefCell<Vec<smol::channel::Sender<Bytes>>>,
}

struct TestServer {
    addr: SocketAddr,
    seen: Rc<Seen>,
    _task: smol::Task<()>,
}

fn server_config(pki: &Pki, alpn: &[&[u8]]) -> Arc<ServerConfig> {
    let provider = Arc::new(client_tls::provider());
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(&pki.read("ca.crt")).unwrap())
        .unwrap();
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .unwrap();
    let certs = CertificateDer::pem_slice_iter(&pki.read("server.crt"))
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(&pki.read("server.key")).unwrap();
    let mut c = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .unwrap();
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(c)
}

async fn handle(
    req: http::Request<Incoming>,
    seen: Rc<Seen>,
) -> Result<http::Response<ResBody>, Infallible> {
    let path = req.uri().path().to_string();
    let auth = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let resp = match path.as_str() {
        "/api/v1/pods" => http::Response::new(full(format!(
            "auth={auth};version={:?};query={}",
            req.version(),
            req.uri().query().unwrap_or("")
        ))),
        "/prefix/api/v1/nodes" => http::Response::new(full("prefixed")),
        "/big" => http::Response::new(full(vec![b'x'; 100_000])),
        "/hang" => {
            smol::future::pending::<()>().await;
            unreachable!()
        }
        "/bad-gateway" => http::Response::builder()
            .status(502)
            .header("content-type", "text/html")
            .body(full("<html><title>502 Bad Gateway</title></html>"))
            .unwrap(),
        "/watch" => {
            let (tx, rx) = smol::channel::unbounded::<Bytes>();
            tx.try_send(Bytes::from_static(b"first\n")).unwrap();
            seen.watches.borrow_mut().push(tx);
            let body = StreamBody::new(rx.map(|b| Ok::<_, Infallible>(Frame::data(b))));
            http::Response::new(BodyExt::boxed_unsync(body))
        }
        _ => http::Response::builder()
            .status(404)
            .body(full("not found"))
            .unwrap(),
    };
    Ok(resp)
}

fn start_server(pki: &Pki, alpn: &[&[u8]]) -> TestServer {
    let listener = smol::Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
    let addr = listener.get_ref().local_addr().unwrap();
    let acceptor = TlsAcceptor::from(server_config(pki, alpn));
    let seen = Rc::new(Seen::default());
    let s = seen.clone();
    let task = rt::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            s.accepted.set(s.accepted.get() + 1);
            let acceptor = acceptor.clone();
            let s = s.clone();
            rt::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                if tls.get_ref().1.peer_certificates().is_some() {
                    s.with_client_cert.set(s.with_client_cert.get() + 1);
                }
                let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                let svc = hyper::service::service_fn(move |req| handle(req, s.clone()));
                if h2 {
                    let _ = hyper::server::conn::http2::Builder::new(LocalExec)
                        .timer(SmolTimer)
                        .serve_connection(Io(tls), svc)
                        .await;
                } else {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(Io(tls), svc)
                        .await;
                }
            })
            .detach();
        }
    });
    TestServer {
        addr,
        seen,
        _task: task,
    }
}

/// A TCP proxy that forwards until told to blackhole: then it accepts
/// and reads but forwards nothing, in either direction.
struct Proxy {
    addr: SocketAddr,
    blackhole: Rc<Cell<bool>>,
    _task: smol::Task<()>,
}

fn start_proxy(upstream: SocketAddr) -> Proxy {
    let listener = smol::Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
    let addr = listener.get_ref().local_addr().unwrap();
    let blackhole = Rc::new(Cell::new(false));
    let b = blackhole.clone();
    let task = rt::spawn(async move {
        while let Ok((down, _)) = listener.accept().await {
            let Ok(up) = smol::Async::<TcpStream>::connect(upstream).await else {
                continue;
            };
            let (down, up) = (Rc::new(down), Rc::new(up));
            for (from, to) in [(down.clone(), up.clone()), (up, down)] {
                let b = b.clone();
                rt::spawn(async move {
                    let mut buf = vec![0u8; 16 * 1024];
                    loop {
                        let n = match (&*from).read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        if !b.get() && (&*to).write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                })
                .detach();
            }
        }
    });
    Proxy {
        addr,
        blackhole,
        _task: task,
    }
}

fn kubeconfig(pki: &Pki, addr: SocketAddr) -> Kubeconfig {
    Kubeconfig {
        path: PathBuf::from("/test/kubelet.conf"),
        context: "c".into(),
        server: Server {
            host: addr.ip().to_string(),
            port: addr.port(),
            base_path: String::new(),
        },
        tls_server_name: None,
        certificate_authority: Some(Material {
            field: "clusters[0].cluster.certificate-authority".into(),
            source: Source::File(pki.path("ca.crt")),
        }),
        insecure_skip_tls_verify: false,
        client_certificate: Some(Material {
            field: "users[0].user.client-certificate".into(),
            source: Source::File(pki.path("client.crt")),
        }),
        client_key: Some(Material {
            field: "users[0].user.client-key".into(),
            source: Source::File(pki.path("client.key")),
        }),
        token: Some(Material {
            field: "users[0].user.token".into(),
            source: Source::Data(b"s3cret".to_vec()),
        }),
    }
}

const H2_AND_H1: &[&[u8]] = &[b"h2", b"http/1.1"];
const H1_ONLY: &[&[u8]] = &[b"http/1.1"];
const LONG: Duration = Duration::from_secs(3600);

async fn get(c: &Client, path: &str) -> Result<Response, TransportError> {
    c.request(Method::GET, path, None, BODY_LIMIT, LONG).await
}

#[test]
fn every_request_and_watch_shares_one_http2_connection() {
    let pki = testpki::generate();
    rt::block_on(async {
        let srv = start_server(&pki, H2_AND_H1);
        let c = Client::new(&kubeconfig(&pki, srv.addr), Options::default()).unwrap();
        let mut watch = c.stream("/watch", JSON, LONG).await.unwrap();
        assert_eq!(watch.status, StatusCode::OK);
        let (a, b) = smol::future::zip(
            get(&c, "/api/v1/pods?limit=1"),
            smol::future::zip(get(&c, "/api/v1/pods"), get(&c, "/api/v1/pods")),
        )
        .await;
        for r in [a.unwrap(), b.0.unwrap(), b.1.unwrap()] {
            assert_eq!(r.status, StatusCode::OK);
            let text = String::from_utf8(r.body).unwrap();
            assert!(
                text.starts_with("auth=Bearer s3cret;version=HTTP/2.0"),
                "{text}"
            );
        }
        assert_eq!(watch.chunk().await.unwrap().unwrap(), "first\n");
        assert_eq!(srv.seen.accepted.get(), 1);
        assert_eq!(srv.seen.with_client_cert.get(), 1);
        assert_eq!(c.stats().connects, 1);
        assert_eq!(c.stats().requests, 4);
        assert_eq!(c.protocol(), Some(Protocol::Http2));
    });
}

#[test]
fn a_watch_stream_delivers_chunks_as_they_come_and_ends_cleanly() {
    let pki = testpki::generate();
    rt::block_on(async {
        let srv = start_server(&pki, H2_AND_H1);
        let c = Client::new(&kubeconfig(&pki, srv.addr), Options::default()).unwrap();
        let mut w = c.stream("/watch", JSON, LONG).await.unwrap();
        assert_eq!(w.chunk().await.unwrap().unwrap(), "first\n");
        let tx = srv.seen.watches.borrow()[0].clone();
        tx.send(Bytes::from_static(b"second\n")).await.unwrap();
        assert_eq!(w.chunk().await.unwrap().unwrap(), "second\n");
        srv.seen.watches.borrow_mut().clear();
        drop(tx);
        assert_eq!(w.chunk().await.unwrap(), None);
    });
}

#[test]
fn http11_is_used_when_alpn_does_not_give_h2_one_connection_per_stream() {
    let pki = testpki::generate();
    rt::block_on(async {
        let srv = start_server(&pki, H1_ONLY);
        let c = Client::new(&kubeconfig(&pki, srv.addr), Options::default()).unwrap();
        let mut w = c.stream("/watch", JSON, LONG).await.unwrap();
        assert_eq!(c.protocol(), Some(Protocol::Http11));
        let r = get(&c, "/api/v1/pods?x=1").await.unwrap();
        let text = String::from_utf8(r.body).unwrap();
        assert_eq!(text, "auth=Bearer s3cret;version=HTTP/1.1;query=x=1");
        assert_eq!(w.chunk().await.unwrap().unwrap(), "first\n");
        assert_eq!(
            srv.seen.accepted.get(),
            2,
            "the watch holds its own connection"
        );
        // The request's connection goes back to the pool once ready.
        for _ in 0..10_000 {
            if !c.inner.conn.borrow().h1_idle.is_empty() {
                break;
            }
            smol::future::yield_now().await;
        }
        get(&c, "/api/v1/pods").await.unwrap();
        assert_eq!(srv.seen.accepted.get(), 2, "an idle connection is reused");
    });
}

#[test]
fn a_server_path_prefix_is_kept() {
    let pki = testpki::generate();
    rt::block_on(async {
        let srv = start_server(&pki, H2_AND_H1);
        let mut k = kubeconfig(&pki, srv.addr);
        k.server.base_path = "/prefix".into();
        let c = Client::new(&k, Options::default()).unwrap();
        let r = get(&c, "/api/v1/nodes").await.unwrap();
        assert_eq!(r.body, b"prefixed");
    });
}

#[test]
fn a_server_certificate_from_another_ca_is_refused() {
    let pki = testpki::generate();
    rt::block_on(async {
        let srv = start_server(&pki, H2_AND_H1);
        let mut k = kubeconfig(&pki, srv.addr);
        k.certificate_authority.as_mut().unwrap().source = Source::File(pki.path("other-ca.crt"));
        let c = Client::new(&k, Options::default()).unwrap();
        let e = get(&c, "/api/v1/pods").await.unwrap_err();
        assert!(matches!(e, TransportError::Tls { .. }), "{e}");
        // The next attempt waits: the dial backs off.
        let e = get(&c, "/api/v1/pods").await.unwrap_err();
        assert!(matches!(e, TransportError::BackingOff { .. }), "{e}");
    });
}

#[test]
fn a_server_certificate_for_another_name_is_refused() {
    let pki = testpki::generate();
    rt::block_on(async {
        let srv = start_server(&pki, H2_AND_H1);
        let mut k = kubeconfig(&pki, srv.addr);
        k.tls_server_name = Some("not-the-apiserver.example".into());
        let c = Client::new(&k, Options::default()).unwrap();
        let e = get(&c, "/api/v1/pods").await.unwrap_err();
        assert!(matches!(e, TransportError::Tls { .. }), "{e}");
        // ... and the name the certificate has is accepted.
        let mut k = kubeconfig(&pki, srv.addr);
        k.tls_server_name = Some("localhost".into());
        let c = Client::new(&k, Options::default()).unwrap();
        get(&c, "/api/v1/pods").await.unwrap();
    });
}

#[test]
fn insecure_skip_tls_verify_connects_without_a_ca() {
    let pki = testpki::generate();
    rt::block_on(async {
        let srv = start_server(&pki, H2_AND_H1);
        let mut k = kubeconfig(&pki, srv.addr);
        k.certificate_authority = None;
        k.insecure_skip_tls_verify = true;
        let c = Client::new(&k, Options::default()).unwrap();
        assert_eq!(
            get(&c, "/api/v1/pods").await.unwrap().status,
            StatusCode::OK
        );
    });
}

#[test]
fn a_body_over_the_limit_is_an_error_naming_the_limit() {
    let pki = testpki::generate();
    rt::block_on(async {
        let srv = start_server(&pki, H2_AND_H1);
        let c = Client::new(&kubeconfig(&pki, srv.addr), Options::default()).unwrap();
        let e = c
            .request(Method::GET, "/big", None, 1000, LONG)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("body larger than 1000 bytes"), "{e}");
        let ok = c
            .request(Method::GET, "/big", None, 100_000, LONG)
            .await
            .unwrap();
        assert_eq!(ok.body.len(), 100_000);
    });
}

#[test]
fn a_request_without_an_answer_ends_at_its_deadline() {
    let pki = testpki::generate();
    rt::block_on(async {
        let srv = start_server(&pki, H2_AND_H1);
        let c = Client::new(&kubeconfig(&pki, srv.addr), Options::default()).unwrap();
        // Connect first, so the deadline applies to the request alone.
        get(&c, "/api/v1/pods").await.unwrap();
        let e = c
            .request(
                Method::GET,
                "/hang",
                None,
                BODY_LIMIT,
                Duration::from_millis(50),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, TransportError::Timeout { .. }), "{e}");
        // A watch's deadline covers its whole life: long enough for the
        // answer and the first chunk under qemu-user on a busy CI machine
        // (50 ms was not, on armv7), while the server then never sends
        // another chunk, so the deadline is still what ends it.
        let mut w = c
            .stream("/watch", JSON, Duration::from_secs(3))
            .await
            .unwrap();
        assert_eq!(w.chunk().await.unwrap().unwrap(), "first\n");
        let e = w.chunk().await.unwrap_err();
        assert!(matches!(e, TransportError::Timeout { .. }), "{e}");
    });
}

#[test]
fn an_error_status_is_a_response_with_its_body() {
    let pki = testpki::generate();
    rt::block_on(async {
        let srv = start_server(&pki, H2_AND_H1);
        let c = Client::new(&kubeconfig(&pki, srv.addr), Options::default()).unwrap();
        let r = get(&c, "/bad-gateway").await.unwrap();
        assert_eq!(r.status, StatusCode::BAD_GATEWAY);
        let e = crate::apiserver::client::request::ApiError::from_reply(r.status.as_u16(), &r.body);
        assert_eq!(e.message, "HTML page: 502 Bad Gateway");
        let s = c.stream("/bad-gateway", JSON, LONG).await.unwrap();
        assert_eq!(s.status, StatusCode::BAD_GATEWAY);
        assert!(!s.collect(ERROR_BODY_LIMIT).await.unwrap().is_empty());
    });
}

#[test]
fn a_blackholed_link_is_noticed_by_pings_and_one_new_connection_follows() {
    let pki = testpki::generate();
    rt::block_on(async {
        let srv = start_server(&pki, H2_AND_H1);
        let proxy = start_proxy(srv.addr);
        // A PING every 200 ms, unanswered after 2 s: short enough for a
        // test, long enough that a slow answer (qemu-user emulating the TLS
        // of a board beside CI's builds took over 200 ms) is not taken for
        // a dead link before the blackhole.
        let options = Options {
            keep_alive_interval: Duration::from_millis(200),
            keep_alive_timeout: Duration::from_secs(2),
            ..Options::default()
        };
        let c = Client::new(&kubeconfig(&pki, proxy.addr), options).unwrap();
        let mut w1 = c.stream("/watch", JSON, LONG).await.unwrap();
        let mut w2 = c.stream("/watch", JSON, LONG).await.unwrap();
        assert_eq!(w1.chunk().await.unwrap().unwrap(), "first\n");
        assert_eq!(w2.chunk().await.unwrap().unwrap(), "first\n");
        proxy.blackhole.set(true);
        // Nothing arrives any more; the unanswered PING ends both streams
        // long before their one-hour deadline.
        for w in [&mut w1, &mut w2] {
            let e = w.chunk().await.unwrap_err();
            assert!(matches!(e, TransportError::Body { .. }), "{e}");
            // hyper's kind of error, then what it was.
            assert!(
                e.to_string()
                    .contains("reading the body: error reading a body from connection: "),
                "{e}"
            );
        }
        proxy.blackhole.set(false);
        let (a, b) = smol::future::zip(get(&c, "/api/v1/pods"), get(&c, "/api/v1/pods")).await;
        a.unwrap();
        b.unwrap();
        assert_eq!(c.stats().connects, 2, "one new handshake for both requests");
    });
}

#[test]
fn a_refused_connection_is_a_connect_error_then_backs_off() {
    let pki = testpki::generate();
    // A port bound but not listening refuses connections, and stays ours
    // for the test: a closed listener's port could be taken by another
    // test's server meanwhile (seen under qemu-user).
    let (_bound, port) = crate::net::dial::refusing_port();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    rt::block_on(async {
        let c = Client::new(&kubeconfig(&pki, addr), Options::default()).unwrap();
        let e = get(&c, "/api/v1/pods").await.unwrap_err();
        assert!(matches!(e, TransportError::Connect { .. }), "{e}");
        assert!(e.to_string().contains(&format!("https://{addr}")), "{e}");
        let e = get(&c, "/api/v1/pods").await.unwrap_err();
        assert!(matches!(e, TransportError::BackingOff { .. }), "{e}");
    });
}

#[test]
fn a_token_file_is_read_and_a_missing_one_is_a_credentials_error() {
    let pki = testpki::generate();
    rt::block_on(async {
        let srv = start_server(&pki, H2_AND_H1);
        let mut k = kubeconfig(&pki, srv.addr);
        std::fs::write(pki.path("token"), "from-file\n").unwrap();
        k.token = Some(Material {
            field: "users[0].user.tokenFile".into(),
            source: Source::File(pki.path("token")),
        });
        let c = Client::new(&k, Options::default()).unwrap();
        let r = get(&c, "/api/v1/pods").await.unwrap();
        assert!(String::from_utf8(r.body)
            .unwrap()
            .starts_with("auth=Bearer from-file;"));
        k.token.as_mut().unwrap().source = Source::File(pki.path("nope"));
        let c = Client::new(&k, Options::default()).unwrap();
        let e = get(&c, "/api/v1/pods").await.unwrap_err();
        assert!(e.to_string().contains("users[0].user.tokenFile"), "{e}");
    });
}

#[test]
fn a_transport_error_names_its_causes_not_only_their_kind() {
    #[derive(Debug)]
    struct Kind(io::Error);
    impl fmt::Display for Kind {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("http2 error")
        }
    }
    impl std::error::Error for Kind {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let e = Kind(io::Error::other("keep-alive timed out"));
    assert_eq!(Causes(&e).to_string(), "http2 error: keep-alive timed out");
    let plain = io::Error::other("connection refused");
    assert_eq!(Causes(&plain).to_string(), "connection refused");
}

#[test]
fn a_new_tls_setup_closes_the_connection_and_the_next_one_presents_the_new_certificate() {
    let pki = testpki::generate();
    rt::block_on(async {
        let srv = start_server(&pki, H2_AND_H1);
        let mut without = kubeconfig(&pki, srv.addr);
        without.client_certificate = None;
        without.client_key = None;
        let c = Client::new(&without, Options::default()).unwrap();
        let mut watch = c.stream("/watch", JSON, LONG).await.unwrap();
        assert_eq!(watch.chunk().await.unwrap().unwrap(), "first\n");
        assert_eq!(srv.seen.with_client_cert.get(), 0);
        c.set_tls(client_tls::setup(&kubeconfig(&pki, srv.addr)).unwrap());
        // The watch on the old connection ends with it (the bound only
        // keeps a broken build from hanging).
        let ended = rt::timeout(Duration::from_secs(60), watch.chunk()).await;
        assert!(matches!(ended, Some(Err(_)) | Some(Ok(None))), "{ended:?}");
        let r = get(&c, "/api/v1/pods").await.unwrap();
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(srv.seen.accepted.get(), 2);
        assert_eq!(srv.seen.with_client_cert.get(), 1);
        assert_eq!(c.stats().connects, 2);
    });
}
