//! A terminated container's message, as kubelet reads it
//! (`kuberuntime`'s `getTerminationMessage` and
//! `readLastStringFromContainerLogs`).
//!
//! When the runtime reports a container exited, its `terminationMessagePath`
//! file (the host file picolet bind-mounted there, found among the CRI
//! status's mounts) is read: its last 4096 bytes. With
//! `terminationMessagePolicy: FallbackToLogsOnError`, a non-zero exit and
//! no file or an empty one, the message is the end of the container's log
//! instead: its last 80 lines, then their last 2048 bytes. The message
//! follows the runtime's own, after `": "`. The path and the policy are the
//! ones the container was created with (its CRI annotations), as kubelet
//! reads them.
//!
//! The decisions and the log's tail are pure ([`fallback_to_logs`],
//! [`log_tail`], [`joined`]); [`message`] does the reads. The log is read
//! from its last [`LOG_WINDOW`] bytes, not whole: the last 2048 bytes of
//! the last 80 lines lie there unless the 80 lines are under 2048 bytes of
//! text spread over more than 64 KiB of raw lines, which a CRI line's
//! ~40-byte prefix cannot make.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use crate::cri::api;
use crate::logs::line::{Assembler, Output};
use crate::logs::LogOptions;
use crate::pod::labels::{
    CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION, CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION,
};

/// kubelet's `MaxContainerTerminationMessageLength`.
pub const MAX_MESSAGE: u64 = 4096;
/// kubelet's `MaxContainerTerminationMessageLogLines`.
pub const LOG_LINES: u64 = 80;
/// kubelet's `MaxContainerTerminationMessageLogLength`.
pub const MAX_LOG_MESSAGE: usize = 2048;
/// How much of the end of the log file is read for its last lines.
pub const LOG_WINDOW: u64 = 64 << 10;

/// Whether an empty or missing termination message falls back to the log:
/// `FallbackToLogsOnError`, a non-zero exit, and a container that ran
/// (kubelet leaves out `ContainerCannotRun`).
pub fn fallback_to_logs(policy: &str, exit_code: i32, reason: &str) -> bool {
    policy == "FallbackToLogsOnError" && exit_code != 0 && reason != "ContainerCannotRun"
}

/// The runtime's message and the termination message, as kubelet joins them.
pub fn joined(runtime_message: &str, termination: &str) -> String {
    match (runtime_message.is_empty(), termination.is_empty()) {
        (_, true) => runtime_message.to_string(),
        (true, false) => termination.to_string(),
        (false, false) => format!("{runtime_message}: {termination}"),
    }
}

/// The last [`LOG_LINES`] lines of a CRI log's end, then their last
/// [`MAX_LOG_MESSAGE`] bytes. `from_start`: `bytes` is the whole file;
/// otherwise its first (cut) line is dropped.
pub fn log_tail(bytes: &[u8], from_start: bool) -> Vec<u8> {
    let bytes = match (from_start, bytes.iter().position(|b| *b == b'\n')) {
        (true, _) => bytes,
        (false, Some(i)) => &bytes[i + 1..],
        (false, None) => &[],
    };
    let opts = LogOptions {
        tail_lines: Some(LOG_LINES),
        ..Default::default()
    };
    let mut asm = Assembler::new(&opts);
    let mut output = Output::new(&opts);
    let mut out = Vec::new();
    for raw in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        if let Some(line) = asm.push(raw) {
            output.line(line, &mut out);
        }
    }
    let rest = asm.finish();
    if !rest.is_empty() {
        output.line(rest, &mut out);
    }
    output.end_backlog(&mut out);
    let cut = out.len().saturating_sub(MAX_LOG_MESSAGE);
    out.split_off(cut)
}

/// The last `max` bytes of a file, and whether that is the whole file.
fn read_tail(path: &Path, max: u64) -> io::Result<(Vec<u8>, bool)> {
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let from = len.saturating_sub(max);
    f.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::with_capacity(len.min(max) as usize);
    f.take(max).read_to_end(&mut buf)?;
    Ok((buf, from == 0))
}

/// The message of an exited container: the runtime's, joined with what
/// its termination message file (or, per its policy, its log) says.
pub fn message(status: &api::ContainerStatus) -> String {
    let annotation = |key| status.annotations.get(key).map(String::as_str);
    let path = annotation(CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION).unwrap_or("");
    let policy = annotation(CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION).unwrap_or("");
    let fallback = fallback_to_logs(policy, status.exit_code, &status.reason);
    let host = status
        .mounts
        .iter()
        .find(|m| !path.is_empty() && m.container_path == path)
        .map(|m| m.host_path.as_str());
    let (text, check_logs) = match host {
        None => (String::new(), fallback),
        Some(host) => match read_tail(Path::new(host), MAX_MESSAGE) {
            Ok((data, _)) => (
                String::from_utf8_lossy(&data).into_owned(),
                fallback && data.is_empty(),
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (String::new(), fallback),
            Err(e) => (
                format!("Error on reading termination log {host}: {e}"),
                false,
            ),
        },
    };
    let text = if check_logs && !status.log_path.is_empty() {
        match read_tail(Path::new(&status.log_path), LOG_WINDOW) {
            Ok((bytes, whole)) => String::from_utf8_lossy(&log_tail(&bytes, whole)).into_owned(),
            Err(e) => format!("Error on reading termination message from logs: {e}"),
        }
    } else {
        text
    };
    joined(&status.message, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cri(lines: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for l in lines {
            out.extend_from_slice(l.as_bytes());
            out.push(b'\n');
        }
        out
    }

    #[test]
    fn only_an_error_exit_under_fallback_to_logs_on_error_reads_the_log() {
        assert!(fallback_to_logs("FallbackToLogsOnError", 1, "Error"));
        assert!(!fallback_to_logs("FallbackToLogsOnError", 0, "Completed"));
        assert!(!fallback_to_logs("File", 1, "Error"));
        assert!(!fallback_to_logs(
            "FallbackToLogsOnError",
            128,
            "ContainerCannotRun"
        ));
    }

    #[test]
    fn the_runtimes_message_comes_first_then_the_termination_message() {
        assert_eq!(joined("", "bye"), "bye");
        assert_eq!(joined("OOM", ""), "OOM");
        assert_eq!(joined("OOM", "bye"), "OOM: bye");
        assert_eq!(joined("", ""), "");
    }

    #[test]
    fn the_log_fallback_is_the_last_eighty_lines_joined_from_their_pieces() {
        let mut lines: Vec<String> = (0..100)
            .map(|i| format!("2026-01-01T00:00:00.{i:09}Z stdout F line {i}"))
            .collect();
        lines.push("2026-01-01T00:00:01Z stderr P fat".into());
        lines.push("2026-01-01T00:00:01Z stderr F al".into());
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let tail = String::from_utf8(log_tail(&cri(&refs), true)).unwrap();
        let got: Vec<&str> = tail.lines().collect();
        assert_eq!(got.len(), 80);
        assert_eq!(got[0], "line 21");
        assert_eq!(got[79], "fatal");
    }

    #[test]
    fn the_log_fallback_keeps_the_last_2048_bytes() {
        let long = "x".repeat(1000);
        let lines: Vec<String> = (0..5)
            .map(|i| format!("2026-01-01T00:00:00Z stdout F {i}{long}"))
            .collect();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let tail = log_tail(&cri(&refs), true);
        assert_eq!(tail.len(), MAX_LOG_MESSAGE);
        assert!(tail.ends_with(format!("4{long}\n").as_bytes()));
    }

    #[test]
    fn a_window_cut_in_the_middle_of_a_line_drops_that_line() {
        let raw = cri(&[
            "00:00Z stdout F cut in half",
            "2026-01-01T00:00:00Z stdout F whole",
        ]);
        assert_eq!(log_tail(&raw[3..], false), b"whole\n");
        assert_eq!(log_tail(b"no newline at all", false), b"");
    }

    #[test]
    fn a_line_the_container_left_unfinished_ends_the_message() {
        let raw = b"2026-01-01T00:00:00Z stdout F done\n2026-01-01T00:00:01Z stdout P half";
        assert_eq!(log_tail(raw, true), b"done\nhalf");
    }

    fn exited(dir: &Path, policy: &str, exit_code: i32) -> api::ContainerStatus {
        api::ContainerStatus {
            state: api::ContainerState::ContainerExited as i32,
            exit_code,
            annotations: [
                (
                    CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION.to_string(),
                    "/dev/termination-log".to_string(),
                ),
                (
                    CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION.to_string(),
                    policy.to_string(),
                ),
            ]
            .into(),
            mounts: vec![api::Mount {
                container_path: "/dev/termination-log".into(),
                host_path: dir.join("termination-log-0").display().to_string(),
                ..Default::default()
            }],
            log_path: dir.join("0.log").display().to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn the_file_gives_its_last_4096_bytes_and_an_empty_one_under_fallback_the_logs_end() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("termination-log-0");
        std::fs::write(
            dir.path().join("0.log"),
            cri(&["2026-01-01T00:00:00Z stderr F panic: boom"]),
        )
        .unwrap();

        std::fs::write(&file, format!("{}THE END", "x".repeat(5000))).unwrap();
        let m = message(&exited(dir.path(), "File", 1));
        assert_eq!(m.len(), 4096);
        assert!(m.ends_with("xTHE END"));

        std::fs::write(&file, "").unwrap();
        assert_eq!(message(&exited(dir.path(), "File", 1)), "");
        assert_eq!(
            message(&exited(dir.path(), "FallbackToLogsOnError", 1)),
            "panic: boom\n"
        );
        assert_eq!(message(&exited(dir.path(), "FallbackToLogsOnError", 0)), "");

        std::fs::remove_file(&file).unwrap();
        let mut st = exited(dir.path(), "FallbackToLogsOnError", 2);
        st.message = "OOMKilled".into();
        assert_eq!(message(&st), "OOMKilled: panic: boom\n");
    }
}
