//! `picolet exec POD [-c C] [-n NS] [-i] [-t] -- CMD...`: the command line
//! ([`parse`], pure), the request URI ([`ExecArgs::uri`], pure), and the
//! terminal's raw mode for `-t` ([`RawMode`], restored when dropped).
//! The session itself is [`crate::cli::exec_client`]'s.

use std::ffi::OsString;
use std::path::PathBuf;

use super::flags::{Arg, FlagParser, Spec, Takes};
use super::{CliError, Command};

/// Arguments of `picolet exec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecArgs {
    /// `--admin-socket PATH`; default `$PICOLET_ADMIN_SOCKET`, else
    /// [`crate::config::DEFAULT_ADMIN_SOCKET`].
    pub admin_socket: PathBuf,
    /// `-n`/`--namespace`; `default` when not given.
    pub namespace: String,
    pub pod: String,
    /// `-c`/`--container`; `None`: kubectl's default container.
    pub container: Option<String>,
    /// `-i`/`--stdin`.
    pub stdin: bool,
    /// `-t`/`--tty`.
    pub tty: bool,
    /// After `--`.
    pub command: Vec<String>,
}

/// A query value, percent-encoded (RFC 3986 unreserved bytes kept).
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl ExecArgs {
    /// The admin socket's `/exec/...` URI for `container`. With a TTY,
    /// stderr is merged into stdout (kubelet's rule), so it is not asked.
    pub fn uri(&self, container: &str) -> String {
        let mut uri = format!(
            "/exec/{}/{}/{}?",
            escape(&self.namespace),
            escape(&self.pod),
            escape(container)
        );
        for arg in &self.command {
            uri.push_str("command=");
            uri.push_str(&escape(arg));
            uri.push('&');
        }
        if self.stdin {
            uri.push_str("stdin=1&");
        }
        uri.push_str("stdout=1");
        uri.push_str(if self.tty { "&tty=1" } else { "&stderr=1" });
        uri
    }
}

/// The flags of `exec` (kubectl's).
pub(super) const FLAGS: &[Spec] = &[
    Spec::long("admin-socket", Takes::Value),
    Spec::both("namespace", 'n', Takes::Value),
    Spec::both("container", 'c', Takes::Value),
    Spec::both("stdin", 'i', Takes::Nothing),
    Spec::both("tty", 't', Takes::Nothing),
];

/// Parses `exec`'s arguments (after the word `exec`).
pub(super) fn parse(parser: lexopt::Parser, admin_socket: PathBuf) -> Result<Command, CliError> {
    let mut parser = FlagParser::new(parser, "exec", FLAGS);
    let mut args = ExecArgs {
        admin_socket,
        namespace: "default".into(),
        pod: String::new(),
        container: None,
        stdin: false,
        tty: false,
        command: Vec::new(),
    };
    while let Some(arg) = parser.next()? {
        match arg {
            Arg::Help => return Ok(Command::Help(Some("exec"))),
            Arg::Flag(given) => match given.name.as_str() {
                "admin-socket" => args.admin_socket = PathBuf::from(given.value),
                "namespace" => args.namespace = given.value,
                "container" => args.container = Some(given.value),
                "stdin" => args.stdin = true,
                _ => args.tty = true,
            },
            Arg::Value(v) if args.pod.is_empty() => args.pod = string(v)?,
            Arg::Value(v) => {
                args.command.push(string(v)?);
                for rest in parser.rest()? {
                    args.command.push(string(rest)?);
                }
            }
        }
    }
    if args.pod.is_empty() || args.command.is_empty() {
        return Err(CliError::MissingExecCommand);
    }
    Ok(Command::Exec(args))
}

fn string(v: OsString) -> Result<String, CliError> {
    v.into_string().map_err(|v| CliError::NotUnicode {
        flag: v.to_string_lossy().into_owned(),
    })
}

/// The terminal on stdin in raw mode while this lives (`-t`): keys go to
/// the command as typed, and the command's terminal echoes them.
pub struct RawMode(rustix::termios::Termios);

impl RawMode {
    /// Raw mode on stdin; `None` when stdin is not a terminal. Also the
    /// terminal's size (columns, rows).
    pub fn enter() -> Option<(RawMode, (u16, u16))> {
        let fd = rustix::stdio::stdin();
        let saved = rustix::termios::tcgetattr(fd).ok()?;
        let mut raw = saved.clone();
        raw.make_raw();
        rustix::termios::tcsetattr(fd, rustix::termios::OptionalActions::Flush, &raw).ok()?;
        let size = rustix::termios::tcgetwinsize(fd)
            .map(|w| (w.ws_col, w.ws_row))
            .unwrap_or((80, 24));
        Some((RawMode(saved), size))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(
            rustix::stdio::stdin(),
            rustix::termios::OptionalActions::Flush,
            &self.0,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<ExecArgs, CliError> {
        match super::super::parse(args.iter().copied())? {
            Command::Exec(a) => Ok(a),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn exec_takes_kubectls_flags_and_the_command_after_the_pod() {
        let a = p(&[
            "exec", "web", "-it", "-c", "app", "-n", "edge", "--", "sh", "-c", "ls -l",
        ])
        .unwrap();
        assert_eq!(a.pod, "web");
        assert_eq!(a.container.as_deref(), Some("app"));
        assert_eq!(a.namespace, "edge");
        assert!(a.stdin && a.tty);
        assert_eq!(a.command, ["sh", "-c", "ls -l"]);
        let a = p(&["exec", "web", "--", "cat", "-n", "--", "f"]).unwrap();
        assert_eq!(
            a.command,
            ["cat", "-n", "--", "f"],
            "flags after -- are the command's"
        );
        assert!(!a.stdin && !a.tty);
        assert!(p(&["exec", "web"]).is_err(), "a command is needed");
        assert!(p(&["exec"]).is_err());
        assert!(p(&["exec", "web", "-x", "--", "ls"]).is_err());
    }

    #[test]
    fn the_uri_escapes_the_command_and_asks_for_the_streams() {
        let a = p(&["exec", "web", "-i", "--", "sh", "-c", "echo a&b=c"]).unwrap();
        assert_eq!(
            a.uri("app"),
            "/exec/default/web/app?command=sh&command=-c&command=echo%20a%26b%3Dc&stdin=1&stdout=1&stderr=1"
        );
        let a = p(&["exec", "web", "-t", "--", "top"]).unwrap();
        assert_eq!(
            a.uri("app"),
            "/exec/default/web/app?command=top&stdout=1&tty=1"
        );
    }
}
