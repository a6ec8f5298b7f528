//! Processes, ports and plain HTTP for the test control plane -- owned by
//! the test harness (tests/harness/kube).
//!
//! Each component runs as the leader of its own process group, so one
//! signal reaches all it started. The reaper cleans up after a test process
//! that died without dropping its control plane.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

/// A component's process, leader of its own process group.
pub struct Proc {
    pub child: Child,
}

impl Proc {
    fn signal_group(&self, sig: rustix::process::Signal) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process_group(pid, sig);
        }
    }

    /// SIGKILL to the whole group, and reap.
    pub fn kill(mut self) {
        self.signal_group(rustix::process::Signal::KILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, up to `grace` to exit, then SIGKILL.
    pub fn stop(mut self, grace: Duration) {
        self.signal_group(rustix::process::Signal::TERM);
        if super::super::wait_child(&mut self.child, grace).is_none() {
            self.kill();
        } else {
            // The group may hold children of the component; leave none.
            self.signal_group(rustix::process::Signal::KILL);
        }
    }

    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

/// Starts the reaper: `sh` reading a line from a pipe whose other end only
/// this process holds. End of file (this process died without dropping the
/// control plane) makes it SIGKILL every process whose command line names
/// `dir` and remove `dir`; a line (a clean drop) makes it exit.
pub fn spawn_reaper(dir: &Path) -> (Child, ChildStdin) {
    const SCRIPT: &str = r#"
read line
[ -n "$line" ] && exit 0
d=$PICOLET_KUBE_DIR
case "$d" in /?*/picolet-kube.?*) ;; *) exit 0 ;; esac
for p in /proc/[0-9]*; do
    [ "$p" = "/proc/$$" ] && continue
    grep -aqF -- "$d/" "$p/cmdline" 2>/dev/null && kill -9 "${p#/proc/}" 2>/dev/null
done
rm -rf -- "$d"
"#;
    let mut child = Command::new("sh")
        .args(["-c", SCRIPT])
        .env("PICOLET_KUBE_DIR", dir)
        // Its own group: a Ctrl-C to the test run must not kill it first.
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning the control plane reaper (sh)");
    let stdin = child.stdin.take().expect("reaper stdin");
    (child, stdin)
}

/// A port that was free a moment ago (bound to :0, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("finding a free port")
}

/// A plain HTTP/1.1 request with `Connection: close` (etcd's gateway).
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
    s.set_write_timeout(Some(Duration::from_secs(30))).ok();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
    super::super::parse_http_response(&raw)
}
