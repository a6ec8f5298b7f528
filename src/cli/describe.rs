//! `picolet describe pod NAME [-n NS] [-o json|yaml] [--admin-socket PATH]`
//! on the command line: kubectl's spelling (`describe pod web`,
//! `describe pods/web`, `describe po web -n kube-system`). Parsing only;
//! the text is [`crate::cli::describe_text`]'s.

use std::path::PathBuf;

use super::flags::{Arg, FlagParser, Spec, Takes};
use super::{unexpected, CliError, Command, OutputFormat};

/// Arguments of `picolet describe pod`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeArgs {
    /// `--admin-socket PATH`; default `$PICOLET_ADMIN_SOCKET`, else
    /// [`crate::config::DEFAULT_ADMIN_SOCKET`].
    pub admin_socket: PathBuf,
    /// `-n`/`--namespace`; `default` when not given.
    pub namespace: String,
    pub pod: String,
    /// `-o json|yaml`: the pod and its events as a v1 `List`; the table
    /// output is the describe text.
    pub output: OutputFormat,
}

/// The flags of `describe`.
pub(super) const FLAGS: &[Spec] = &[
    Spec::long("admin-socket", Takes::Value),
    Spec::both("namespace", 'n', Takes::Value),
    Spec::both("output", 'o', Takes::Value),
];

pub(super) fn parse(parser: lexopt::Parser, admin_socket: PathBuf) -> Result<Command, CliError> {
    let mut parser = FlagParser::new(parser, "describe", FLAGS);
    let mut args = DescribeArgs {
        admin_socket,
        namespace: "default".into(),
        pod: String::new(),
        output: OutputFormat::Table,
    };
    let mut resource: Option<String> = None;
    while let Some(arg) = parser.next()? {
        match arg {
            Arg::Help => return Ok(Command::Help(Some("describe"))),
            Arg::Flag(given) => match given.name.as_str() {
                "admin-socket" => args.admin_socket = PathBuf::from(given.value),
                "namespace" => args.namespace = given.value,
                _ => args.output = super::output_format(&given.spelled, given.value, false)?,
            },
            Arg::Value(v) if resource.is_none() => {
                let v = v.to_string_lossy().into_owned();
                // kubectl's `pod/NAME` form.
                match v.split_once('/') {
                    Some((kind, name)) => {
                        resource = Some(kind.to_string());
                        args.pod = name.to_string();
                    }
                    None => resource = Some(v),
                }
            }
            Arg::Value(v) if args.pod.is_empty() => args.pod = v.to_string_lossy().into_owned(),
            Arg::Value(v) => return Err(unexpected(v)),
        }
    }
    match resource.as_deref() {
        Some("pod" | "pods" | "po") => {}
        Some(other) => return Err(CliError::UnknownDescribe(other.to_string())),
        None => return Err(CliError::MissingDescribe),
    }
    if args.pod.is_empty() {
        return Err(CliError::MissingDescribe);
    }
    Ok(Command::Describe(args))
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn describe(args: &[&str]) -> DescribeArgs {
        match parse(args.iter().copied()) {
            Ok(Command::Describe(d)) => d,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn err(args: &[&str]) -> String {
        parse(args.iter().copied()).unwrap_err().to_string()
    }

    #[test]
    fn describe_takes_kubectls_spellings_of_a_pod() {
        let d = describe(&["describe", "pod", "web"]);
        assert_eq!((d.namespace.as_str(), d.pod.as_str()), ("default", "web"));
        assert_eq!(d.output, OutputFormat::Table);
        let d = describe(&[
            "describe",
            "-n",
            "kube-system",
            "pods/etcd",
            "-o",
            "yaml",
            "--admin-socket=/tmp/a.sock",
        ]);
        assert_eq!(d.namespace, "kube-system");
        assert_eq!(d.pod, "etcd");
        assert_eq!(d.output, OutputFormat::Yaml);
        assert_eq!(d.admin_socket, PathBuf::from("/tmp/a.sock"));
        assert_eq!(
            describe(&["describe", "po", "x", "--output=json"]).output,
            OutputFormat::Json
        );
    }

    #[test]
    fn describe_needs_a_pod_and_refuses_other_kinds_and_wide() {
        let need = "`picolet describe` needs a pod: picolet describe pod NAME [-n NAMESPACE]";
        assert_eq!(err(&["describe"]), need);
        assert_eq!(err(&["describe", "pod"]), need);
        assert_eq!(
            err(&["describe", "node", "x"]),
            r#"unknown resource "node"; picolet can describe pods"#
        );
        assert_eq!(
            err(&["describe", "pod", "x", "-o", "wide"]),
            r#"flag -o: invalid value "wide": expected json or yaml"#
        );
        assert_eq!(
            err(&["describe", "pod", "x", "y"]),
            r#"unexpected argument "y""#
        );
        assert_eq!(
            err(&["describe", "pod", "x", "-f"]),
            "unknown flag -f for `picolet describe`"
        );
    }
}
