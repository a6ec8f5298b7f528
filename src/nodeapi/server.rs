//! The node API's I/O: the HTTPS listener on `address:port`, the plain
//! `/healthz` listener on `healthzBindAddress:healthzPort`, and the
//! authentication and authorization of each request before the shared
//! [`Router`] answers it.
//!
//! Each connection: at most [`MAX_CONNECTIONS`] at once, the TLS handshake
//! and the request headers within [`HEADER_TIMEOUT`], one request per
//! connection (no keep-alive), all within [`CONNECTION_TIMEOUT`] (the admin
//! socket's limits). Then:
//! 1. who: the verified client certificate's user, else the bearer
//!    token's (TokenReview, cached `authentication.webhook.cacheTTL`),
//!    else 401 `Unauthorized`;
//! 2. may they: `AlwaysAllow`, or a SubjectAccessReview for
//!    `nodes/<subresource>`, the fine-grained one first where there is
//!    one (`pods`, `healthz`, `configz`), then the coarse one (cached: allowed `cacheAuthorizedTTL`, denied
//!    `cacheUnauthorizedTTL`), else 403 with kubelet's text.
//!
//! With the API server unreachable, reviews fail (never cached): a token
//! gets 401 and a Webhook decision 403, unless cached; client certificates
//! with `AlwaysAllow` keep working offline.

use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_rustls::rustls::ServerConfig;
use futures_rustls::TlsAcceptor;
use http::request::Parts;
use http::{header, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use smol::Async;

use super::authn::{self, User};
use super::authz::{self, Attributes};
use super::review_cache::TtlCache;
use super::serving_tls::{server_config, TlsFiles};
use super::NodeApiError;
use crate::admin::router::{text, Handler, Reply, Router};
use crate::admin::{CONNECTION_TIMEOUT, HEADER_TIMEOUT, MAX_CONNECTIONS};
use crate::apiserver::client::transport::{self, Client};
use crate::config::{AuthorizationMode, KubeletConfig};
use crate::rt;

/// The largest review answer read.
const REVIEW_LIMIT: usize = 64 * 1024;
/// How long one review may take.
const REVIEW_DEADLINE: Duration = Duration::from_secs(10);
/// Review answers kept per cache.
const CACHE_CAPACITY: usize = 256;

/// How requests are authenticated and authorized.
pub struct Gate {
    /// The API-server client for reviews; `None` when standalone.
    pub client: Option<Client>,
    pub node_name: String,
    pub webhook_authentication: bool,
    pub token_ttl: Duration,
    pub mode: AuthorizationMode,
    pub allowed_ttl: Duration,
    pub denied_ttl: Duration,
    tokens: RefCell<TtlCache<[u8; 32], Option<User>>>,
    decisions: RefCell<TtlCache<(User, Attributes), bool>>,
}

impl Gate {
    pub fn new(cfg: &KubeletConfig, node_name: &str, client: Option<Client>) -> Self {
        Gate {
            client,
            node_name: node_name.to_string(),
            webhook_authentication: cfg.authentication_webhook_enabled,
            token_ttl: cfg.authentication_webhook_cache_ttl,
            mode: cfg.authorization_mode,
            allowed_ttl: cfg.authorization_webhook_cache_authorized_ttl,
            denied_ttl: cfg.authorization_webhook_cache_unauthorized_ttl,
            tokens: RefCell::new(TtlCache::new(CACHE_CAPACITY)),
            decisions: RefCell::new(TtlCache::new(CACHE_CAPACITY)),
        }
    }

    /// POSTs a review; the answer's body when the API server took it.
    async fn review(&self, path: &str, body: serde_json::Value) -> Option<Vec<u8>> {
        let client = self.client.as_ref()?;
        let bytes = serde_json::to_vec(&body).ok()?;
        let reply = client
            .request(
                Method::POST,
                path,
                Some(transport::Body {
                    content_type: "application/json",
                    bytes,
                }),
                REVIEW_LIMIT,
                REVIEW_DEADLINE,
            )
            .await;
        match reply {
            Ok(r) if r.status.is_success() => Some(r.body),
            Ok(r) => {
                log::warn!("node API: POST {path}: HTTP {}", r.status.as_u16());
                None
            }
            Err(e) => {
                log::warn!("node API: POST {path}: {e}");
                None
            }
        }
    }

    /// The user of a bearer token, through a (cached) TokenReview.
    async fn token_user(&self, token: &str) -> Option<User> {
        if !self.webhook_authentication {
            return None;
        }
        let key: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .ok()?;
        if let Some(cached) = self.tokens.borrow().get(&key, Instant::now()) {
            return cached;
        }
        let body = self
            .review(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                authn::review_body(token),
            )
            .await?;
        let user = authn::decode_review(&body).ok()?;
        self.tokens
            .borrow_mut()
            .insert(key, user.clone(), self.token_ttl, Instant::now());
        user
    }

    /// Whether `user` may do `attrs`.
    async fn allowed(&self, user: &User, attrs: &Attributes) -> bool {
        if self.mode == AuthorizationMode::AlwaysAllow {
            return true;
        }
        let key = (user.clone(), attrs.clone());
        if let Some(cached) = self.decisions.borrow().get(&key, Instant::now()) {
            return cached;
        }
        let Some(body) = self
            .review(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                authz::review_body(user, attrs, &self.node_name),
            )
            .await
        else {
            return false;
        };
        let Ok(allowed) = authz::decode_review(&body) else {
            return false;
        };
        let ttl = if allowed {
            self.allowed_ttl
        } else {
            self.denied_ttl
        };
        self.decisions
            .borrow_mut()
            .insert(key, allowed, ttl, Instant::now());
        allowed
    }

    /// Answers `head` from `router` if its sender (`cert_user`, or its
    /// bearer token) may ask it.
    pub async fn answer(
        &self,
        head: Parts,
        cert_user: Option<&User>,
        router: &Router,
    ) -> Response<Reply> {
        let token_user;
        let user = match cert_user {
            Some(u) => u,
            None => {
                let token = head
                    .headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| authn::bearer_token(v.as_bytes()));
                token_user = match token {
                    Some(t) => self.token_user(t).await,
                    None => None,
                };
                match &token_user {
                    Some(u) => u,
                    None => {
                        return text(StatusCode::UNAUTHORIZED, "Unauthorized\n").map(Reply::Whole)
                    }
                }
            }
        };
        let upgrade = head.headers.contains_key(header::UPGRADE);
        let tried = authz::attributes_to_try(&head.method, head.uri.path(), upgrade);
        let mut allowed = false;
        for attrs in &tried {
            if self.allowed(user, attrs).await {
                allowed = true;
                break;
            }
        }
        if !allowed {
            log::debug!(
                "node API: {} {} refused to {}",
                head.method,
                head.uri.path(),
                user.name
            );
            let mut r = Response::new(Reply::Whole(authz::forbidden_text(user, &tried).into()));
            *r.status_mut() = StatusCode::FORBIDDEN;
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            return r;
        }
        router.serve(head).await
    }
}

/// Counts a live connection; uncounts it when the connection task ends.
struct Slot(Rc<Cell<usize>>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

fn bind(field: &'static str, addr: SocketAddr) -> Result<Async<TcpListener>, NodeApiError> {
    TcpListener::bind(addr)
        .and_then(Async::new)
        .map_err(|source| NodeApiError::Bind {
            field,
            addr,
            source,
        })
}

fn http1() -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(rt::SmolTimer)
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(true) // one request all the same: see `admin::finish`
        // One buffer, not vectored writes: over TLS each write is a record
        // of its own, so a streamed answer's head and first chunk (held
        // together by `Router::serve`) go in one record, as Go's kubelet
        // sends them. (The chunked body's end still goes in a write of its
        // own: see `Reply`'s `poll_frame`.)
        .writev(false)
        .max_buf_size(16 * 1024)
        .max_headers(64);
    builder
}

/// Accepts connections on `listener` forever, at most [`MAX_CONNECTIONS`]
/// at once, each handed to `serve` in a task of its own. A connection must
/// finish within [`CONNECTION_TIMEOUT`] unless `serve` set its flag: a
/// streamed answer (`follow=true` logs) lives until it ends.
async fn accept_loop<F, Fut>(listener: Async<TcpListener>, what: &'static str, serve: F)
where
    F: Fn(Async<std::net::TcpStream>, Rc<Cell<bool>>) -> Fut,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let active = Rc::new(Cell::new(0usize));
    let mut logged = false;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                if !logged {
                    log::warn!("{what}: accept: {e}");
                    logged = true;
                }
                rt::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        if active.get() >= MAX_CONNECTIONS {
            log::warn!("{what}: {MAX_CONNECTIONS} connections open; refusing one");
            continue;
        }
        active.set(active.get() + 1);
        let slot = Slot(active.clone());
        let streaming = Rc::new(Cell::new(false));
        let conn = serve(stream, streaming.clone());
        rt::spawn(async move {
            let _slot = slot;
            let mut conn = std::pin::pin!(conn);
            match rt::timeout(CONNECTION_TIMEOUT, conn.as_mut()).await {
                None if streaming.get() => conn.await,
                None => log::debug!("{what}: connection timed out"),
                Some(()) => {}
            }
        })
        .detach();
    }
}

/// Serves the node API over TLS on `listener`.
pub async fn serve(
    listener: Async<TcpListener>,
    tls: Arc<ServerConfig>,
    router: Rc<Router>,
    gate: Rc<Gate>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let builder = http1();
    accept_loop(listener, "node API", move |stream, streaming| {
        let (acceptor, builder, router, gate) = (
            acceptor.clone(),
            builder.clone(),
            router.clone(),
            gate.clone(),
        );
        async move {
            let tls = match rt::timeout(HEADER_TIMEOUT, acceptor.accept(stream)).await {
                Some(Ok(tls)) => tls,
                Some(Err(e)) => return log::debug!("node API: TLS handshake: {e}"),
                None => return log::debug!("node API: TLS handshake timed out"),
            };
            let cert_user = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|certs| certs.first())
                .and_then(|c| authn::user_of_certificate(c).ok().flatten());
            let cert_user = Rc::new(cert_user);
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (router, gate, cert_user) = (router.clone(), gate.clone(), cert_user.clone());
                let streaming = streaming.clone();
                async move {
                    let (head, _body) = req.into_parts();
                    let mut r = gate
                        .answer(head, cert_user.as_ref().as_ref(), &router)
                        .await;
                    if crate::admin::finish(&mut r) {
                        streaming.set(true);
                    }
                    Ok::<_, Infallible>(r)
                }
            });
            let conn = builder.serve_connection(rt::Io(tls), service);
            if let Err(e) = conn.with_upgrades().await {
                log::debug!("node API connection: {e}");
            }
        }
    })
    .await
}

/// Serves plain-HTTP `GET /healthz` on `listener`.
pub async fn serve_healthz(listener: Async<TcpListener>) {
    let router = Rc::new(Router::new().get("/healthz", Handler::Text("ok")));
    let builder = http1();
    accept_loop(listener, "healthz", move |stream, _streaming| {
        let router = router.clone();
        let conn = builder.serve_connection(
            rt::Io(stream),
            hyper::service::service_fn(move |req: Request<Incoming>| {
                let mut r = router.handle(&req.into_parts().0);
                r.headers_mut()
                    .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
                async move { Ok::<_, Infallible>(r) }
            }),
        );
        async move {
            if let Err(e) = conn.await {
                log::debug!("healthz connection: {e}");
            }
        }
    })
    .await
}

/// The TLS files of `cfg` for node `node_name`.
pub fn tls_files(cfg: &KubeletConfig, node_name: &str) -> TlsFiles {
    let mut addresses = cfg.node_ip.clone();
    if !cfg.address.is_unspecified() && !addresses.contains(&cfg.address) {
        addresses.push(cfg.address);
    }
    TlsFiles {
        cert_and_key: cfg
            .tls_cert_file
            .clone()
            .zip(cfg.tls_private_key_file.clone()),
        client_ca: cfg.client_ca_file.clone(),
        pki_dir: cfg.root_dir.join("pki"),
        node_name: node_name.to_string(),
        addresses,
        server_tls_bootstrap: cfg.server_tls_bootstrap,
        internal_ips: if cfg.node_ip.is_empty() {
            crate::node::info::primary_ipv4()
                .and_then(|ip| ip.parse().ok())
                .into_iter()
                .collect()
        } else {
            cfg.node_ip.clone()
        },
    }
}

/// Starts the node API (unless `port` is 0) and the healthz listener
/// (unless `healthzPort` is 0) with `router`'s routes and `/configz`; reviews go through
/// `client`. The tasks run while the returned handles live. A listener
/// that cannot start is logged and left out: the node's pods do not
/// depend on it.
pub fn start(
    cfg: &KubeletConfig,
    node_name: &str,
    router: Router,
    client: Option<Client>,
) -> Vec<smol::Task<()>> {
    let mut tasks = Vec::new();
    if cfg.healthz_port != 0 {
        let addr = SocketAddr::new(cfg.healthz_bind_address, cfg.healthz_port);
        match bind("healthzPort", addr) {
            Ok(l) => {
                log::info!("serving /healthz on http://{addr}");
                tasks.push(rt::spawn(serve_healthz(l)));
            }
            Err(e) => log::error!("{e}"),
        }
    }
    if cfg.port == 0 {
        return tasks;
    }
    let addr = SocketAddr::new(cfg.address, cfg.port);
    if cfg.client_ca_file.is_none() && !cfg.authentication_webhook_enabled {
        log::warn!(
            "node API: neither authentication.x509.clientCAFile nor \
             authentication.webhook.enabled is set: every request will be refused"
        );
    }
    let now_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let files = tls_files(cfg, node_name);
    let started =
        server_config(&files, now_unix).and_then(|tls| Ok((tls, bind("address/port", addr)?)));
    match started {
        Ok(((tls, serving), listener)) => {
            log::info!("serving the node API on https://{addr}");
            match (
                &client,
                cfg.server_tls_bootstrap,
                cfg.tls_cert_file.is_some(),
            ) {
                (Some(c), true, false) => {
                    tasks.push(super::serving_bootstrap::start(files, serving, c.clone()))
                }
                (_, true, true) => log::warn!(
                    "serverTLSBootstrap is ignored: tlsCertFile/tlsPrivateKeyFile are set"
                ),
                (None, true, _) => log::warn!(
                    "serverTLSBootstrap needs the API server (--kubeconfig); serving the \
                     self-signed certificate"
                ),
                _ => {}
            }
            let gate = Rc::new(Gate::new(cfg, node_name, client));
            // `/configz` is the node API's alone (as kubelet's): the
            // configuration does not change while the process runs.
            let configz = Rc::new(cfg.configz());
            let router = router.get(
                "/configz",
                Handler::Json(Rc::new(move || (*configz).clone())),
            );
            tasks.push(rt::spawn(serve(listener, tls, Rc::new(router), gate)));
        }
        Err(e) => log::error!("node API: {e}"),
    }
    tasks
}
