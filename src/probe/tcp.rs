//! The tcpSocket runner: kubelet's `pkg/probe/tcp`. A connection opened
//! within the timeout is success; it is closed at once.

use std::time::Duration;

use super::ProbeResult;
use crate::net::dial::dial_timeout;

/// Succeeds when a TCP connection to `host:port` opens within `timeout`.
pub async fn tcp_socket(host: &str, port: u16, timeout: Duration) -> ProbeResult {
    match dial_timeout(host, port, timeout).await {
        Ok(_) => ProbeResult::success(""),
        Err(e) => ProbeResult::failure(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::dial::refusing_port;
    use crate::probe::Outcome;
    use crate::rt;
    use std::net::TcpListener;

    const T: Duration = Duration::from_secs(5);

    #[test]
    fn a_tcp_probe_succeeds_on_a_listening_port_and_fails_on_a_closed_one() {
        rt::block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = l.local_addr().unwrap().port();
            assert_eq!(
                tcp_socket("127.0.0.1", port, T).await.outcome,
                Outcome::Success
            );
            let (_refusing, closed) = refusing_port();
            let r = tcp_socket("127.0.0.1", closed, T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(r.message.contains("dial tcp"), "{}", r.message);
            let r = tcp_socket("probe-target.invalid", port, T).await;
            assert_eq!(r.outcome, Outcome::Failure);
            assert!(r.message.contains("need an IP address"), "{}", r.message);
            assert_eq!(
                tcp_socket("localhost", port, T).await.outcome,
                Outcome::Success
            );
        });
    }
}
