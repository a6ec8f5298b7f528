//! A new connection to the API server: its name resolved (on a
//! short-lived thread: getaddrinfo blocks), TCP connected and tuned, the
//! TLS handshake, then HTTP/2 or HTTP/1.1 as ALPN chose, its driver on a
//! task of its own. [`super::transport::Client`] decides when to dial (one
//! at a time, after the back-off) and keeps what comes back.

use std::cell::{Cell, RefCell};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::rc::Rc;
use std::time::Duration;

use futures_rustls::TlsConnector;
use hyper::client::conn::{http1, http2};
use smol::Async;

use super::client_tls::{self, TlsSetup};
use super::kubeconfig::Server;
use super::transport::{Causes, Options, ReqBody, TransportError};
use crate::rt::{self, Io, LocalExec, SmolTimer};

/// A new connection: HTTP/2 comes with a handle on its socket.
pub(super) enum Dialed {
    H2(http2::SendRequest<ReqBody>, Option<TcpStream>),
    H1(http1::SendRequest<ReqBody>),
}

/// Dials `server` with the TLS setup in effect once TCP is connected (a
/// rotation may replace it meanwhile).
pub(super) async fn dial(
    server: &Server,
    tls_setup: &RefCell<TlsSetup>,
    options: &Options,
    resolving: &Rc<Cell<bool>>,
) -> Result<Dialed, TransportError> {
    let name = || server.to_string();
    let addrs = resolve(server, resolving).await?;
    let mut last = None;
    let mut tcp = None;
    for addr in addrs {
        match Async::<TcpStream>::connect(addr).await {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let tcp = tcp.ok_or_else(|| TransportError::Connect {
        server: name(),
        source: last.unwrap_or_else(|| io::Error::other("no address")),
    })?;
    tune(&tcp);
    let socket = tcp.get_ref().try_clone().ok();
    let setup = tls_setup.borrow().clone();
    let tls = TlsConnector::from(setup.config)
        .connect(setup.server_name, tcp)
        .await
        .map_err(|source| TransportError::Tls {
            server: name(),
            source,
        })?;
    let h2 = tls.get_ref().1.alpn_protocol() == Some(client_tls::ALPN_H2);
    let handshake = |source| TransportError::Handshake {
        server: name(),
        source,
    };
    if h2 {
        let o = options;
        let mut b = http2::Builder::new(LocalExec);
        b.timer(SmolTimer)
            .keep_alive_interval(o.keep_alive_interval)
            .keep_alive_timeout(o.keep_alive_timeout)
            .keep_alive_while_idle(true)
            .max_frame_size(16 * 1024)
            .initial_stream_window_size(256 * 1024)
            .initial_connection_window_size(1024 * 1024);
        let (sender, conn) = b.handshake(Io(tls)).await.map_err(handshake)?;
        let name = name();
        rt::spawn(async move {
            if let Err(e) = conn.await {
                log::info!("connection to API server {name} ended: {}", Causes(&e));
            }
        })
        .detach();
        log::debug!("connected to API server {server} (HTTP/2)");
        Ok(Dialed::H2(sender, socket))
    } else {
        let (sender, conn) = http1::handshake::<_, ReqBody>(Io(tls))
            .await
            .map_err(handshake)?;
        rt::spawn(async move {
            if let Err(e) = conn.await {
                log::debug!(
                    "HTTP/1.1 connection to the API server ended: {}",
                    Causes(&e)
                );
            }
        })
        .detach();
        log::debug!("connected to API server {server} (HTTP/1.1)");
        Ok(Dialed::H1(sender))
    }
}

/// The server's addresses. A host name is resolved on a short-lived
/// thread (getaddrinfo blocks), one at a time.
async fn resolve(
    server: &Server,
    resolving: &Rc<Cell<bool>>,
) -> Result<Vec<SocketAddr>, TransportError> {
    if let Ok(ip) = server.host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, server.port)]);
    }
    let err = |source| TransportError::Resolve {
        server: server.to_string(),
        source,
    };
    if resolving.get() {
        return Err(err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "the previous lookup has not returned yet",
        )));
    }
    let (tx, rx) = smol::channel::bounded(1);
    let host = (server.host.clone(), server.port);
    let busy = resolving.clone();
    busy.set(true);
    let spawned = std::thread::Builder::new()
        .name("picolet-dns".into())
        .spawn(move || {
            let r = host.to_socket_addrs().map(Vec::from_iter);
            let _ = tx.send_blocking(r);
        });
    if let Err(e) = spawned {
        busy.set(false);
        return Err(err(e));
    }
    let r = rx.recv().await;
    busy.set(false);
    match r {
        Ok(Ok(addrs)) if !addrs.is_empty() => Ok(addrs),
        Ok(Ok(_)) => Err(err(io::Error::new(io::ErrorKind::NotFound, "no address"))),
        Ok(Err(e)) => Err(err(e)),
        Err(_) => Err(err(io::Error::other("resolver thread ended"))),
    }
}

/// TCP options: no Nagle delay (small requests), and kernel keep-alives so
/// an HTTP/1.1 connection (which has no PINGs) also notices a dead peer.
fn tune(tcp: &Async<TcpStream>) {
    use rustix::net::sockopt;
    let fd = tcp.get_ref();
    let _ = sockopt::set_tcp_nodelay(fd, true);
    let _ = sockopt::set_socket_keepalive(fd, true);
    let _ = sockopt::set_tcp_keepidle(fd, Duration::from_secs(15));
    let _ = sockopt::set_tcp_keepintvl(fd, Duration::from_secs(5));
    let _ = sockopt::set_tcp_keepcnt(fd, 3);
}
