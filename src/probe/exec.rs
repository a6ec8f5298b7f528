//! The exec runner: kubelet's `pkg/probe/exec` over CRI `ExecSync`.
//!
//! The timeout goes to the runtime in whole seconds (at least 1), with a
//! little headroom on our side for the runtime to report it. Exit 0 is
//! success; anything else is a failure carrying the output (stdout then
//! stderr, [`MAX_READ`] at most). A CRI error other than a timeout is
//! `Unknown`, which kubelet throws away rather than counting.

use std::time::Duration;

use super::{ProbeResult, MAX_READ};
use crate::cri::{api, CriError, Runtime};
use crate::rt;

/// Headroom over an exec probe's timeout for the runtime to report it.
const EXEC_SLACK: Duration = Duration::from_secs(1);

/// Runs `cmd` in the container with CRI ExecSync.
pub async fn exec(
    rt: &Runtime,
    container_id: &str,
    cmd: &[String],
    timeout: Duration,
) -> ProbeResult {
    let secs = (timeout.as_nanos().div_ceil(1_000_000_000) as i64).max(1);
    let req = api::ExecSyncRequest {
        container_id: container_id.to_string(),
        cmd: cmd.to_vec(),
        timeout: secs,
    };
    let timed_out = || ProbeResult::failure(format!("command {:?} timed out", cmd.join(" ")));
    match rt::timeout(timeout + EXEC_SLACK, rt.exec_sync(req)).await {
        None => timed_out(),
        Some(Err(e)) if e.code() == tonic::Code::DeadlineExceeded => timed_out(),
        Some(Err(e)) => ProbeResult::unknown(exec_error(&e)),
        Some(Ok(r)) => {
            let mut out = r.stdout;
            out.extend_from_slice(&r.stderr);
            out.truncate(MAX_READ);
            let text = String::from_utf8_lossy(&out).trim_end().to_string();
            if r.exit_code == 0 {
                ProbeResult::success(text)
            } else if text.is_empty() {
                ProbeResult::failure(format!(
                    "command {:?} exited with code {}",
                    cmd.join(" "),
                    r.exit_code
                ))
            } else {
                ProbeResult::failure(text)
            }
        }
    }
}

fn exec_error(e: &CriError) -> String {
    format!("exec failed: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::Outcome;

    #[test]
    fn an_exec_probe_without_a_runtime_is_unknown_not_failed() {
        let rt_ = Runtime::new(
            "/nonexistent/picolet-prober-test.sock".into(),
            Duration::from_secs(1),
        );
        let r = rt::block_on(exec(&rt_, "c1", &["true".into()], Duration::from_secs(1)));
        assert_eq!(r.outcome, Outcome::Unknown, "{}", r.message);
    }
}
