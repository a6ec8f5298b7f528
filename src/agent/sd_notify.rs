//! systemd's readiness protocol (`Type=notify`, sd_notify(3)): when
//! `$NOTIFY_SOCKET` names a unix datagram socket (a path, or an abstract
//! name when it starts with '@'), picolet sends it `STATUS=` while it waits
//! for the runtime, `READY=1` once it is up (admin socket open, runtime
//! answered, the static pod source started) and `STOPPING=1` on shutdown.
//! Without the variable every call is a no-op. The message text is built by
//! pure functions; sending is best effort (a failure is logged, never fatal:
//! systemd would only time the start out).

/// One state change for the service manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice<'a> {
    /// Still starting: what picolet waits for.
    Waiting(&'a str),
    /// Up: the admin socket answers and the runtime does.
    Ready(&'a str),
    /// Shutting down; pods keep running.
    Stopping,
}

/// The datagram's text for `notice`: newline-separated `KEY=VALUE` lines
/// (a newline inside a status would start a bogus key, so it is replaced).
pub fn message(notice: &Notice<'_>) -> String {
    let status = |s: &str| s.replace('\n', " ");
    match notice {
        Notice::Waiting(s) => format!("STATUS={}\n", status(s)),
        Notice::Ready(s) => format!("READY=1\nSTATUS={}\n", status(s)),
        Notice::Stopping => "STOPPING=1\nSTATUS=shutting down\n".to_string(),
    }
}

/// Where `$NOTIFY_SOCKET` points: a filesystem path or an abstract name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Path(std::path::PathBuf),
    Abstract(Vec<u8>),
}

/// `$NOTIFY_SOCKET`'s value as a target; `None` when empty or neither an
/// absolute path nor '@name' (systemd's two forms).
pub fn target(value: &std::ffi::OsStr) -> Option<Target> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = value.as_bytes();
    match bytes.first()? {
        b'@' if bytes.len() > 1 => Some(Target::Abstract(bytes[1..].to_vec())),
        b'/' => Some(Target::Path(std::path::PathBuf::from(value))),
        _ => None,
    }
}

/// Sends `notice` to `$NOTIFY_SOCKET`, if set.
pub fn notify(notice: Notice<'_>) {
    let Some(value) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Some(to) = target(&value) else {
        log::warn!("NOTIFY_SOCKET={value:?}: neither an absolute path nor an abstract name");
        return;
    };
    if let Err(e) = send(&to, message(&notice).as_bytes()) {
        log::warn!("notifying systemd at {value:?}: {e}");
    }
}

fn send(to: &Target, msg: &[u8]) -> std::io::Result<usize> {
    let socket = std::os::unix::net::UnixDatagram::unbound()?;
    match to {
        Target::Path(p) => socket.send_to(msg, p),
        Target::Abstract(name) => {
            #[cfg(target_os = "linux")]
            {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                socket.send_to_addr(msg, &addr)
            }
            #[cfg(not(target_os = "linux"))]
            {
                let _ = name;
                Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn ready_carries_ready_and_a_status_line() {
        assert_eq!(
            message(&Notice::Ready("running")),
            "READY=1\nSTATUS=running\n"
        );
    }

    #[test]
    fn waiting_is_only_a_status_and_newlines_in_it_are_flattened() {
        assert_eq!(
            message(&Notice::Waiting("waiting for\nthe runtime")),
            "STATUS=waiting for the runtime\n"
        );
    }

    #[test]
    fn stopping_says_stopping() {
        assert!(message(&Notice::Stopping).starts_with("STOPPING=1\n"));
    }

    #[test]
    fn an_at_sign_names_an_abstract_socket_and_a_slash_a_path() {
        assert_eq!(
            target(OsStr::new("@/org/freedesktop/systemd1/notify")),
            Some(Target::Abstract(
                b"/org/freedesktop/systemd1/notify".to_vec()
            ))
        );
        assert_eq!(
            target(OsStr::new("/run/systemd/notify")),
            Some(Target::Path("/run/systemd/notify".into()))
        );
    }

    #[test]
    fn an_empty_or_relative_value_is_no_target() {
        assert_eq!(target(OsStr::new("")), None);
        assert_eq!(target(OsStr::new("@")), None);
        assert_eq!(target(OsStr::new("run/notify")), None);
    }
}
