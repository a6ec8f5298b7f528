//! `serverTLSBootstrap`, the decisions: which serving certificate the node
//! API presents, the names its CertificateSigningRequest asks for, where
//! the issued certificate is kept and how often a pending request is
//! mentioned in the log.
//!
//! The sources, in order: `tlsCertFile`/`tlsPrivateKeyFile` when set (then
//! `serverTLSBootstrap` is ignored, as the operator chose the files); with
//! `serverTLSBootstrap`, the certificate the cluster issued, while it has
//! not expired; else the self-signed one (`<rootDir>/pki/kubelet.crt`),
//! which is also what is served while the first CSR waits for approval.
//!
//! kubelet's layout for the issued certificate is kept: certificate and key
//! in one file `<rootDir>/pki/kubelet-server-<date>.pem` (0600) and the
//! symlink `kubelet-server-current.pem` naming it, swapped by a rename.
//!
//! Must NOT know: files, sockets, the clock; [`super::serving_bootstrap`]
//! does the I/O.

use std::net::IpAddr;

use super::cert::civil;
use crate::pki::csr::Validity;

/// The symlink to the issued serving certificate and key.
pub const SERVER_CURRENT_PEM: &str = "kubelet-server-current.pem";
/// How often a still-pending CSR is mentioned in the log (seconds).
pub const PENDING_LOG_EVERY: i64 = 300;
/// The first and the longest wait between two reads of a pending CSR
/// (seconds): a pending request may wait hours for an operator, and a board
/// on a metered uplink should not ask every 2 s all that time.
pub const POLL_INITIAL: u64 = 2;
pub const POLL_MAX: u64 = 30;

/// Where the node API's serving certificate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertSource {
    /// `tlsCertFile` and `tlsPrivateKeyFile`.
    Configured,
    /// The certificate the cluster issued (`kubelet-server-current.pem`).
    Issued,
    /// The self-signed certificate (`kubelet.crt`, `kubelet.key`).
    SelfSigned,
}

/// The source to serve at `now` (Unix seconds): `configured` when both
/// files are set, `issued` the validity of the issued certificate if one
/// is on disk and readable.
pub fn choose_source(
    configured: bool,
    server_tls_bootstrap: bool,
    issued: Option<Validity>,
    now: i64,
) -> CertSource {
    if configured {
        return CertSource::Configured;
    }
    match issued {
        Some(v) if server_tls_bootstrap && !v.expired_at(now) => CertSource::Issued,
        _ => CertSource::SelfSigned,
    }
}

/// The names a serving CSR asks for, as kubelet takes them from the
/// Node's status addresses: the hostname as the DNS name, each
/// InternalIP as an address (each once, in order).
pub fn serving_names(hostname: &str, internal_ips: &[IpAddr]) -> (Vec<String>, Vec<IpAddr>) {
    let dns = if hostname.is_empty() {
        Vec::new()
    } else {
        vec![hostname.to_lowercase()]
    };
    let mut ips: Vec<IpAddr> = Vec::new();
    for ip in internal_ips {
        if !ips.contains(ip) {
            ips.push(*ip);
        }
    }
    (dns, ips)
}

/// The dated file an issued certificate issued at `now` is written to
/// (kubelet's `kubelet-server-YYYY-MM-DD-HH-MM-SS.pem`, UTC).
pub fn dated_file_name(now: i64) -> String {
    let [y, mo, d, h, mi, s] = civil(now);
    format!("kubelet-server-{y:04}-{mo:02}-{d:02}-{h:02}-{mi:02}-{s:02}.pem")
}

/// Whether a dated file `name` (not `keep`, not the symlink) is an older
/// issued certificate, to be removed once a newer one is in use.
pub fn is_stale_dated_file(name: &str, keep: &str) -> bool {
    name != keep
        && name != SERVER_CURRENT_PEM
        && name.starts_with("kubelet-server-")
        && name.ends_with(".pem")
}

/// Whether to say again that a CSR is pending, last said at `last`.
pub fn pending_log_due(last: i64, now: i64) -> bool {
    now - last >= PENDING_LOG_EVERY
}

/// The next wait between reads of a pending CSR after `previous` seconds.
pub fn next_poll(previous: u64) -> u64 {
    (previous * 2).clamp(POLL_INITIAL, POLL_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(from: i64, to: i64) -> Option<Validity> {
        Some(Validity {
            not_before: from,
            not_after: to,
        })
    }

    #[test]
    fn configured_files_win_over_the_bootstrap() {
        assert_eq!(
            choose_source(true, true, valid(0, 100), 50),
            CertSource::Configured
        );
        assert_eq!(choose_source(true, false, None, 50), CertSource::Configured);
    }

    #[test]
    fn an_issued_certificate_is_served_until_it_expires_then_the_self_signed_one() {
        assert_eq!(
            choose_source(false, true, valid(0, 100), 99),
            CertSource::Issued
        );
        assert_eq!(
            choose_source(false, true, valid(0, 100), 100),
            CertSource::SelfSigned
        );
        assert_eq!(choose_source(false, true, None, 0), CertSource::SelfSigned);
    }

    #[test]
    fn an_issued_certificate_is_ignored_without_server_tls_bootstrap() {
        assert_eq!(
            choose_source(false, false, valid(0, 100), 1),
            CertSource::SelfSigned
        );
    }

    #[test]
    fn the_serving_names_are_the_lowercase_hostname_and_each_internal_ip_once() {
        let a: IpAddr = "192.168.1.20".parse().unwrap();
        let b: IpAddr = "fd00::20".parse().unwrap();
        let (dns, ips) = serving_names("Pi-7", &[a, b, a]);
        assert_eq!(dns, ["pi-7"]);
        assert_eq!(ips, [a, b]);
        assert_eq!(serving_names("", &[]), (vec![], vec![]));
    }

    #[test]
    fn the_dated_file_is_named_by_its_utc_time_as_kubelet_names_it() {
        assert_eq!(
            dated_file_name(1_764_585_000), // 2025-12-01T10:30:00Z
            "kubelet-server-2025-12-01-10-30-00.pem"
        );
    }

    #[test]
    fn only_older_dated_files_are_stale() {
        let keep = "kubelet-server-2025-12-01-10-30-00.pem";
        assert!(is_stale_dated_file(
            "kubelet-server-2025-01-01-00-00-00.pem",
            keep
        ));
        assert!(!is_stale_dated_file(keep, keep));
        assert!(!is_stale_dated_file(SERVER_CURRENT_PEM, keep));
        assert!(!is_stale_dated_file("kubelet.crt", keep));
        assert!(!is_stale_dated_file("kubelet-client-current.pem", keep));
    }

    #[test]
    fn a_pending_request_is_mentioned_every_five_minutes() {
        assert!(!pending_log_due(1000, 1000 + PENDING_LOG_EVERY - 1));
        assert!(pending_log_due(1000, 1000 + PENDING_LOG_EVERY));
    }

    #[test]
    fn polls_of_a_pending_request_back_off_to_thirty_seconds() {
        assert_eq!(next_poll(0), 2);
        assert_eq!(next_poll(2), 4);
        assert_eq!(next_poll(16), 30);
        assert_eq!(next_poll(30), 30);
    }
}
