//! The command line: turns `argv` into a [`Command`], and nothing more.
//!
//! ```text
//! picolet run [--config FILE] [--root-dir DIR] [--hostname-override NAME]
//!             [--admin-socket PATH] [--board NAME] [kubelet flags...]
//! picolet get pods|node [--admin-socket PATH] [-o wide|json|yaml]
//! picolet describe pod NAME [-n NS] [-o json|yaml] [--admin-socket PATH]
//! picolet check [--config FILE] [-o json|yaml] [kubelet flags...]
//! picolet logs POD [-n NS] [-c C] [-f] [--previous] [--tail N] [--timestamps]
//!              [--admin-socket PATH]
//! picolet exec POD [-n NS] [-c C] [-i] [-t] [--admin-socket PATH] -- CMD...
//! picolet version
//! picolet help [COMMAND] | --help | -h;  picolet COMMAND --help
//! ```
//!
//! The client commands' admin socket is `--admin-socket`, else
//! `$PICOLET_ADMIN_SOCKET` ([`parse`] reads it; [`parse_with`] takes it),
//! else the default. The help texts are [`help`]'s; [`error_line`] says
//! an error and its causes once each.
//!
//! Why it is shaped this way: the parser is written on `lexopt` (tiny, no
//! derive machinery) and takes any iterator of `OsString`, so it is pure and
//! unit-testable. It only *collects* kubelet flags, as raw strings, into
//! [`Flags`]; their values are validated by [`crate::config::resolve`] with
//! the same rules as the config file, so a bad value gets the same message
//! whichever way it was given. Which flags exist, how each takes its value
//! and what the help says about it come from the one table
//! [`crate::config::FLAGS`]. How flags are spelled (`--flag=value`,
//! `--flag value`, bare booleans, `-v`), `-h`/`--help`, and the wording of
//! an unknown flag or a missing value are the one parser's, `cli/flags.rs`; each
//! command here (and in `describe`, `exec`) declares its table of flags to
//! it. This module decides what each value means and which command was
//! asked for.

use std::ffi::OsString;
use std::path::PathBuf;

use lexopt::prelude::*;

use crate::config::{self, Flag};

pub mod client;
pub mod describe;
pub use describe::DescribeArgs;
pub mod describe_text;
mod exec;
pub mod exec_client;
pub mod spdy;
pub mod table;
pub mod term;
pub mod yaml;
pub use exec::{ExecArgs, RawMode};
mod flags;
use flags::{Arg, FlagParser, Given, Spec, Takes};
mod help;
pub use help::{command_usage, usage, COMMANDS};

pub use crate::config::Flags;

/// What the user asked picolet to do.
// Built once at startup; boxing RunArgs would only make matching clumsier.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `picolet run`: run the node agent.
    Run(RunArgs),
    /// `picolet get pods`: ask a running picolet over its admin socket.
    GetPods(GetArgs),
    /// `picolet get node`: the node's eviction signals, thresholds and
    /// pressure conditions, from the admin socket.
    GetNode(GetArgs),
    /// `picolet logs`: a container's log, from the admin socket.
    Logs(LogsArgs),
    /// `picolet describe pod`: one pod's status and events.
    Describe(DescribeArgs),
    /// `picolet check`: the node's preflight, from the configuration
    /// (`run`'s flags); needs no running picolet.
    Check(RunArgs),
    /// `picolet exec`: a command in a container, over the admin socket.
    Exec(ExecArgs),
    /// `picolet version` / `--version`.
    Version,
    /// `picolet help`, `--help`, `-h`, or no arguments at all: `None`;
    /// a command's `--help` (or `picolet help COMMAND`): its name.
    Help(Option<&'static str>),
}

/// Arguments of `picolet run`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunArgs {
    /// `--config FILE`: a KubeletConfiguration file. `None` = all defaults.
    pub config: Option<PathBuf>,
    /// Every other flag, unvalidated; applied on top of the file.
    pub flags: Flags,
    /// `-o`/`--output` (`json`, `yaml`): `check` only.
    pub output: OutputFormat,
}

/// Arguments of `picolet get pods`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetArgs {
    /// `--admin-socket PATH`; default `$PICOLET_ADMIN_SOCKET`, else
    /// [`config::DEFAULT_ADMIN_SOCKET`].
    pub admin_socket: PathBuf,
    /// `-o` / `--output`.
    pub output: OutputFormat,
    /// `-n`/`--namespace`; `default` when not given (kubectl's rule).
    pub namespace: String,
    /// `-A`/`--all-namespaces`: every namespace, with a NAMESPACE column.
    pub all_namespaces: bool,
    /// `get pod NAME` (or `pod/NAME`): that pod only.
    pub name: Option<String>,
}

/// Arguments of `picolet logs` (kubectl's flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogsArgs {
    /// `--admin-socket PATH`; default `$PICOLET_ADMIN_SOCKET`, else
    /// [`config::DEFAULT_ADMIN_SOCKET`].
    pub admin_socket: PathBuf,
    /// `-n`/`--namespace`; `default` when not given.
    pub namespace: String,
    pub pod: String,
    /// `-c`/`--container`; `None`: the pod's only (or default) container.
    pub container: Option<String>,
    /// `-f`/`--follow`.
    pub follow: bool,
    /// `-p`/`--previous`.
    pub previous: bool,
    /// `--tail N`; `None` (or `--tail=-1`): every line.
    pub tail: Option<u64>,
    /// `--timestamps`.
    pub timestamps: bool,
    /// `--limit-bytes N`.
    pub limit_bytes: Option<u64>,
}

impl LogsArgs {
    /// The admin socket path of the log request, with kubelet's query.
    pub fn uri(&self, container: &str) -> String {
        let mut uri = format!(
            "/containerLogs/{}/{}/{container}?",
            self.namespace, self.pod
        );
        for (on, key) in [
            (self.follow, "follow=true&"),
            (self.previous, "previous=true&"),
            (self.timestamps, "timestamps=true&"),
        ] {
            if on {
                uri.push_str(key);
            }
        }
        if let Some(n) = self.tail {
            uri.push_str(&format!("tailLines={n}&"));
        }
        if let Some(n) = self.limit_bytes {
            uri.push_str(&format!("limitBytes={n}&"));
        }
        uri.pop();
        uri
    }
}

/// `picolet get pods` output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// The default kubectl-like table.
    #[default]
    Table,
    /// `-o wide`: the table plus extra columns.
    Wide,
    /// `-o json`.
    Json,
    /// `-o yaml`.
    Yaml,
}

/// The `-o` value `value` of `flag`; `wide` only where `wide` is true.
fn output_format(flag: &str, value: String, wide: bool) -> Result<OutputFormat, CliError> {
    match value.as_str() {
        "wide" if wide => Ok(OutputFormat::Wide),
        "json" => Ok(OutputFormat::Json),
        "yaml" => Ok(OutputFormat::Yaml),
        _ => Err(CliError::InvalidValue {
            flag: flag.to_string(),
            value,
            reason: if wide {
                "expected wide, json or yaml"
            } else {
                "expected json or yaml"
            },
        }),
    }
}

/// Why the command line could not be parsed. Messages name the offending
/// flag or argument.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("unknown command {0:?}; expected {list}", list = help::COMMAND_LIST)]
    UnknownCommand(String),
    #[error("expected a command ({list}) before {0}", list = help::COMMAND_LIST)]
    MissingCommand(String),
    #[error("unknown flag {flag} for `picolet {command}`")]
    UnknownFlag { command: &'static str, flag: String },
    #[error("flag {flag} needs a value")]
    MissingValue { flag: String },
    #[error("flag {flag}: invalid value {value:?}: {reason}")]
    InvalidValue {
        flag: String,
        value: String,
        reason: &'static str,
    },
    #[error("flag {flag}: value is not valid UTF-8")]
    NotUnicode { flag: String },
    #[error("unexpected argument {0:?}")]
    UnexpectedArgument(String),
    #[error("`picolet get` needs a resource: picolet get pods, picolet get node")]
    MissingResource,
    #[error("unknown resource {0:?}; picolet can get pods or node")]
    UnknownResource(String),
    #[error("`picolet logs` needs a pod: picolet logs POD [-c CONTAINER]")]
    MissingPod,
    #[error("`picolet describe` needs a pod: picolet describe pod NAME [-n NAMESPACE]")]
    MissingDescribe,
    #[error("unknown resource {0:?}; picolet can describe pods")]
    UnknownDescribe(String),
    #[error("`picolet exec` needs a pod and a command: picolet exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARG...]")]
    MissingExecCommand,
    #[error(transparent)]
    Parse(#[from] lexopt::Error),
}

/// The environment variable naming the admin socket of the client
/// commands (get, describe, logs, exec) when `--admin-socket` does not.
pub const ADMIN_SOCKET_ENV: &str = "PICOLET_ADMIN_SOCKET";

/// Parses the command line, *without* the program name (pass
/// `std::env::args_os().skip(1)`), with [`ADMIN_SOCKET_ENV`] from the
/// environment.
pub fn parse<I>(args: I) -> Result<Command, CliError>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    parse_with(args, std::env::var_os(ADMIN_SOCKET_ENV))
}

/// [`parse`], with `admin_socket_env` as the value of [`ADMIN_SOCKET_ENV`]
/// (unset or empty: [`config::DEFAULT_ADMIN_SOCKET`]).
pub fn parse_with<I>(args: I, admin_socket_env: Option<OsString>) -> Result<Command, CliError>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    let socket = admin_socket_env
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(config::DEFAULT_ADMIN_SOCKET));
    let mut parser = lexopt::Parser::from_args(args);
    let first = match parser.next()? {
        None => return Ok(Command::Help(None)),
        Some(arg) => arg,
    };
    match first {
        Short('h') | Long("help") => Ok(Command::Help(None)),
        Long("version") => Ok(Command::Version),
        Value(cmd) => match cmd.to_str() {
            Some("run") => parse_run(parser, "run"),
            Some("get") => parse_get(parser, socket),
            Some("logs") => parse_logs(parser, socket),
            Some("describe") => describe::parse(parser, socket),
            Some("check") => match parse_run(parser, "check")? {
                Command::Run(args) => Ok(Command::Check(args)),
                other => Ok(other),
            },
            Some("exec") => exec::parse(parser, socket),
            Some("version") => no_more_args(parser, Command::Version, "version"),
            Some("help") => parse_help(parser),
            _ => Err(CliError::UnknownCommand(cmd.to_string_lossy().into_owned())),
        },
        Short(c) => Err(CliError::MissingCommand(format!("-{c}"))),
        Long(name) => Err(CliError::MissingCommand(format!("--{name}"))),
    }
}

/// `picolet help [COMMAND]`.
fn parse_help(mut parser: lexopt::Parser) -> Result<Command, CliError> {
    let topic = match parser.next()? {
        Some(Value(v)) => v.to_string_lossy().into_owned(),
        _ => return Ok(Command::Help(None)),
    };
    match COMMANDS.iter().find(|c| **c == topic) {
        Some(c) => Ok(Command::Help(Some(c))),
        None => Err(CliError::UnknownCommand(topic)),
    }
}

/// `run`'s own flags; every other long flag is a kubelet flag of
/// [`config::FLAGS`].
const RUN_FLAGS: &[Spec] = &[
    Spec::long("config", Takes::Value),
    Spec::both("v", 'v', Takes::Value),
];

/// `check`'s: `run`'s and `-o`.
const CHECK_FLAGS: &[Spec] = &[
    Spec::both("output", 'o', Takes::Value),
    Spec::long("config", Takes::Value),
    Spec::both("v", 'v', Takes::Value),
];

/// How the kubelet flag `name` takes its value, if there is one.
fn kubelet_flag(name: &str) -> Option<Takes> {
    Flag::named(name).map(|f| {
        if f.kind.needs_value() {
            Takes::Value
        } else {
            Takes::ValueOrTrue
        }
    })
}

/// `run`'s flags; `command` is `run` or `check` (whose help `-h` asks).
fn parse_run(parser: lexopt::Parser, command: &'static str) -> Result<Command, CliError> {
    let table = if command == "check" {
        CHECK_FLAGS
    } else {
        RUN_FLAGS
    };
    // An unknown flag is reported for `run`, whose flags `check` takes.
    let mut parser = FlagParser::new(parser, "run", table).with_extra(kubelet_flag);
    let mut args = RunArgs::default();
    while let Some(arg) = parser.next()? {
        let Given {
            name,
            spelled,
            value,
        } = match arg {
            Arg::Help => return Ok(Command::Help(Some(command))),
            Arg::Value(v) => return Err(unexpected(v)),
            Arg::Flag(given) => given,
        };
        match name.as_str() {
            "output" => args.output = output_format(&spelled, value, false)?,
            "config" => {
                if value.is_empty() {
                    return Err(CliError::InvalidValue {
                        flag: spelled,
                        value,
                        reason: "expected a file path",
                    });
                }
                args.config = Some(PathBuf::from(value));
            }
            "v" => {
                let level = value
                    .parse::<u8>()
                    .ok()
                    .filter(|v| *v <= config::MAX_VERBOSITY)
                    .ok_or(CliError::InvalidValue {
                        flag: spelled,
                        value,
                        reason: "expected a log level between 0 and 10",
                    })?;
                args.flags.set("v", level.to_string());
            }
            _ => {
                args.flags.set(&name, value);
            }
        }
    }
    Ok(Command::Run(args))
}

/// The flags of `get`.
const GET_FLAGS: &[Spec] = &[
    Spec::long("admin-socket", Takes::Value),
    Spec::both("output", 'o', Takes::Value),
    Spec::both("namespace", 'n', Takes::Value),
    Spec::both("all-namespaces", 'A', Takes::Nothing),
];

fn parse_get(parser: lexopt::Parser, admin_socket: PathBuf) -> Result<Command, CliError> {
    let mut parser = FlagParser::new(parser, "get", GET_FLAGS);
    let mut args = GetArgs {
        admin_socket,
        output: OutputFormat::Table,
        namespace: "default".into(),
        all_namespaces: false,
        name: None,
    };
    let mut resource: Option<String> = None;
    while let Some(arg) = parser.next()? {
        match arg {
            Arg::Help => return Ok(Command::Help(Some("get"))),
            Arg::Flag(Given {
                name,
                spelled,
                value,
            }) => match name.as_str() {
                "admin-socket" => {
                    if value.is_empty() {
                        return Err(CliError::InvalidValue {
                            flag: spelled,
                            value,
                            reason: "expected a socket path",
                        });
                    }
                    args.admin_socket = PathBuf::from(value);
                }
                "output" => args.output = output_format(&spelled, value, true)?,
                "namespace" => args.namespace = value,
                _ => args.all_namespaces = true,
            },
            Arg::Value(v) if resource.is_none() => {
                let v = v.to_string_lossy().into_owned();
                // kubectl's `pod/NAME` form.
                match v.split_once('/') {
                    Some((kind, name)) => {
                        resource = Some(kind.to_string());
                        args.name = Some(name.to_string());
                    }
                    None => resource = Some(v),
                }
            }
            Arg::Value(v) if args.name.is_none() => {
                args.name = Some(v.to_string_lossy().into_owned())
            }
            Arg::Value(v) => return Err(unexpected(v)),
        }
    }
    match resource.as_deref() {
        None => Err(CliError::MissingResource),
        Some("pods" | "pod" | "po") => Ok(Command::GetPods(args)),
        Some("node" | "nodes" | "no") if args.name.is_none() => Ok(Command::GetNode(args)),
        Some("node" | "nodes" | "no") => {
            Err(CliError::UnexpectedArgument(args.name.unwrap_or_default()))
        }
        Some(other) => Err(CliError::UnknownResource(other.to_string())),
    }
}

/// The flags of `logs` (kubectl's).
const LOGS_FLAGS: &[Spec] = &[
    Spec::long("admin-socket", Takes::Value),
    Spec::both("namespace", 'n', Takes::Value),
    Spec::both("container", 'c', Takes::Value),
    Spec::both("follow", 'f', Takes::Nothing),
    Spec::both("previous", 'p', Takes::Nothing),
    Spec::long("timestamps", Takes::Nothing),
    Spec::long("tail", Takes::Value),
    Spec::long("limit-bytes", Takes::Value),
];

fn parse_logs(parser: lexopt::Parser, admin_socket: PathBuf) -> Result<Command, CliError> {
    let mut parser = FlagParser::new(parser, "logs", LOGS_FLAGS);
    let mut args = LogsArgs {
        admin_socket,
        namespace: "default".into(),
        pod: String::new(),
        container: None,
        follow: false,
        previous: false,
        tail: None,
        timestamps: false,
        limit_bytes: None,
    };
    let number = |flag: &str, value: String| {
        value.parse::<i64>().map_err(|_| CliError::InvalidValue {
            flag: flag.to_string(),
            value,
            reason: "expected an integer",
        })
    };
    while let Some(arg) = parser.next()? {
        match arg {
            Arg::Help => return Ok(Command::Help(Some("logs"))),
            Arg::Flag(Given {
                name,
                spelled,
                value,
            }) => match name.as_str() {
                "admin-socket" => args.admin_socket = PathBuf::from(value),
                "namespace" => args.namespace = value,
                "container" => args.container = Some(value),
                "follow" => args.follow = true,
                "previous" => args.previous = true,
                "timestamps" => args.timestamps = true,
                "tail" => args.tail = u64::try_from(number(&spelled, value)?).ok(),
                _ => {
                    let n = number(&spelled, value.clone())?;
                    args.limit_bytes = Some(u64::try_from(n).ok().filter(|n| *n > 0).ok_or(
                        CliError::InvalidValue {
                            flag: spelled,
                            value,
                            reason: "must be greater than 0",
                        },
                    )?);
                }
            },
            Arg::Value(v) if args.pod.is_empty() => args.pod = v.to_string_lossy().into_owned(),
            Arg::Value(v) if args.container.is_none() => {
                // kubectl's `logs POD CONTAINER`.
                args.container = Some(v.to_string_lossy().into_owned())
            }
            Arg::Value(v) => return Err(unexpected(v)),
        }
    }
    if args.pod.is_empty() {
        return Err(CliError::MissingPod);
    }
    Ok(Command::Logs(args))
}

fn no_more_args(
    mut parser: lexopt::Parser,
    command: Command,
    name: &'static str,
) -> Result<Command, CliError> {
    match parser.next()? {
        None => Ok(command),
        Some(Short('h') | Long("help")) => Ok(Command::Help(Some(name))),
        Some(Value(v)) => Err(unexpected(v)),
        Some(other) => Err(CliError::UnexpectedArgument(match other {
            Short(c) => format!("-{c}"),
            Long(name) => format!("--{name}"),
            Value(_) => unreachable!("handled above"),
        })),
    }
}

fn unexpected(v: OsString) -> CliError {
    CliError::UnexpectedArgument(v.to_string_lossy().into_owned())
}

/// An error and its causes on one line, each said once: a cause whose text
/// the line already holds (a wrapper that prints its source) is skipped.
pub fn error_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = e.source();
    }
    line
}

#[cfg(test)]
mod tests;
