//! TCP dialing with a deadline, to IP literals and `localhost` only.
//!
//! Host names are not resolved: the resolver (`getaddrinfo`) blocks, and
//! the agent runs every loop on one thread, so a slow DNS server would stall
//! all of them. A name other than `localhost` fails at once with a message
//! saying so. Errors print like Go's (`dial tcp ADDR: ERR`), which is what
//! kubelet's messages contain.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use smol::Async;

use super::url::join_host_port;
use crate::rt;

/// A failed dial: Go's `dial tcp ADDR: ERR`. Only printed, so it is not a
/// `std::error::Error` (no vtable for a chain nobody walks).
#[derive(Debug)]
pub struct DialError {
    /// `host:port`, IPv6 in brackets.
    pub addr: String,
    pub source: io::Error,
}

impl fmt::Display for DialError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dial tcp {}: {}", self.addr, self.source)
    }
}

/// The address for an IP literal (brackets allowed) or `localhost`.
pub fn socket_addr(host: &str, port: u16) -> io::Result<SocketAddr> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    if bare.eq_ignore_ascii_case("localhost") {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("cannot resolve host name {bare:?}: picolet connections need an IP address"),
    ))
}

/// Opens a TCP connection to `host:port`, waiting as long as the kernel
/// does (callers put their own deadline around the whole exchange).
pub async fn dial(host: &str, port: u16) -> Result<Async<TcpStream>, DialError> {
    let addr = join_host_port(host, port);
    let sa = socket_addr(host, port).map_err(|source| DialError {
        addr: addr.clone(),
        source,
    })?;
    Async::<TcpStream>::connect(sa)
        .await
        .map_err(|source| DialError { addr, source })
}

/// [`dial`] within `timeout`; when it passes, the error is Go's
/// `dial tcp ADDR: i/o timeout`.
pub async fn dial_timeout(
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<Async<TcpStream>, DialError> {
    match rt::timeout(timeout, dial(host, port)).await {
        Some(r) => r,
        None => Err(DialError {
            addr: join_host_port(host, port),
            source: io::Error::new(io::ErrorKind::TimedOut, "i/o timeout"),
        }),
    }
}

/// A loopback port that refuses connections while the returned socket
/// lives: bound, never listening. (A listener bound and dropped frees its
/// port for any other test's server to take meanwhile.)
#[cfg(test)]
pub(crate) fn refusing_port() -> (rustix::fd::OwnedFd, u16) {
    use rustix::net::{bind, getsockname, socket, AddressFamily, SocketType};
    let fd = socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    bind(&fd, &any).unwrap();
    let addr = std::net::SocketAddr::try_from(getsockname(&fd).unwrap()).unwrap();
    (fd, addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_literals_and_localhost_are_dialled_and_names_are_refused() {
        assert_eq!(
            socket_addr("[fd00::1]", 80).unwrap(),
            "[fd00::1]:80".parse().unwrap()
        );
        assert_eq!(
            socket_addr("LocalHost", 8).unwrap(),
            "127.0.0.1:8".parse().unwrap()
        );
        let e = socket_addr("example.test", 80).unwrap_err();
        assert!(e.to_string().contains("need an IP address"), "{e}");
    }

    #[test]
    fn a_refused_dial_reads_like_go() {
        let (_refusing, port) = refusing_port();
        let e = rt::block_on(dial_timeout("127.0.0.1", port, Duration::from_secs(5))).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("dial tcp 127.0.0.1:{port}: ")),
            "{e}"
        );
    }
}
