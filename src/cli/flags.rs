//! The one flag parser of every `picolet` command: each command declares
//! its flags as a table of [`Spec`]s and reads what was given, one
//! [`Arg`] at a time, from a [`FlagParser`].
//!
//! Why it exists: the commands used to spell out the same `lexopt` loop
//! each, with `-h`/`--help`, unknown flags, missing values and non-UTF-8
//! values handled (and worded) once per command. Here they are handled
//! once: `-h`/`--help` is [`Arg::Help`] everywhere; a flag not in the
//! table is "unknown flag -x for `picolet CMD`"; a value is attached
//! (`--flag=v`, `-fv`, `-f=v`) or the next argument, never a following
//! `--flag`. What a value *means* (a number, an output format, a path
//! that must not be empty) stays with the command, which owns its rules.
//!
//! `picolet run` also takes every kubelet flag of
//! [`crate::config::FLAGS`]; it passes them as [`FlagParser::with_extra`],
//! a lookup of long names beyond its table, so that table stays the only
//! list of kubelet flags.

use std::ffi::OsString;

use lexopt::prelude::*;

use super::CliError;

/// How a flag takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// A switch: `-A`, `--follow`. Its value is `true`; an attached
    /// value (`--follow=x`) is an error.
    Nothing,
    /// `--flag VALUE`, `--flag=VALUE`, `-fVALUE`, `-f=VALUE`.
    Value,
    /// A kubelet boolean: bare (`true`) or `--flag=VALUE`; never the
    /// next argument.
    ValueOrTrue,
}

/// One flag a command takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The name after `--`.
    pub long: &'static str,
    /// The letter after `-`, if it has one.
    pub short: Option<char>,
    pub takes: Takes,
}

impl Spec {
    /// A flag with a long name only.
    pub const fn long(long: &'static str, takes: Takes) -> Spec {
        Spec {
            long,
            short: None,
            takes,
        }
    }

    /// A flag with a long name and a letter.
    pub const fn both(long: &'static str, short: char, takes: Takes) -> Spec {
        Spec {
            long,
            short: Some(short),
            takes,
        }
    }
}

/// A flag as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    /// Its long name (also when given by its letter).
    pub name: String,
    /// How it was spelled (`-n`, `--namespace`): error messages name it so.
    pub spelled: String,
    /// Its value; a switch's is `true`.
    pub value: String,
}

/// One argument of the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// `-h` or `--help`: the command's help was asked for.
    Help,
    /// A flag of the command's table (or its extra lookup).
    Flag(Given),
    /// A positional argument.
    Value(OsString),
}

/// The flags of one command, read from a `lexopt` parser.
pub struct FlagParser {
    parser: lexopt::Parser,
    /// The command an unknown flag is reported for.
    command: &'static str,
    table: &'static [Spec],
    extra: fn(&str) -> Option<Takes>,
}

impl FlagParser {
    /// `command`'s flags, `table`, from the rest of `parser`.
    pub fn new(parser: lexopt::Parser, command: &'static str, table: &'static [Spec]) -> Self {
        FlagParser {
            parser,
            command,
            table,
            extra: |_| None,
        }
    }

    /// Also the long flags `extra` knows (how each takes its value),
    /// after the table.
    pub fn with_extra(mut self, extra: fn(&str) -> Option<Takes>) -> Self {
        self.extra = extra;
        self
    }

    /// The next argument; `None` at the end.
    pub fn next(&mut self) -> Result<Option<Arg>, CliError> {
        let (spec, spelled) = match self.parser.next()? {
            None => return Ok(None),
            Some(Value(v)) => return Ok(Some(Arg::Value(v))),
            Some(Short('h') | Long("help")) => return Ok(Some(Arg::Help)),
            Some(Short(c)) => (
                self.table
                    .iter()
                    .find(|s| s.short == Some(c))
                    .map(|s| (s.long.to_string(), s.takes)),
                format!("-{c}"),
            ),
            Some(Long(name)) => (
                self.table
                    .iter()
                    .find(|s| s.long == name)
                    .map(|s| s.takes)
                    .or_else(|| (self.extra)(name))
                    .map(|takes| (name.to_string(), takes)),
                format!("--{name}"),
            ),
        };
        let Some((name, takes)) = spec else {
            return Err(CliError::UnknownFlag {
                command: self.command,
                flag: spelled,
            });
        };
        let value = match takes {
            Takes::Nothing => "true".to_string(),
            Takes::Value => take_value(&mut self.parser, &spelled)?,
            Takes::ValueOrTrue => match self.parser.optional_value() {
                Some(v) => v.into_string().map_err(|_| CliError::NotUnicode {
                    flag: spelled.clone(),
                })?,
                None => "true".to_string(),
            },
        };
        Ok(Some(Arg::Flag(Given {
            name,
            spelled,
            value,
        })))
    }

    /// Every argument left, as given (`exec`'s command).
    pub fn rest(&mut self) -> Result<Vec<OsString>, CliError> {
        Ok(self.parser.raw_args()?.collect())
    }
}

/// The value of `flag`: attached (`--flag=v`, `-vV`) or the next argument. A
/// following `--other-flag` is not taken as the value: `--max-pods
/// --cgroup-root /` is a missing value, not `max-pods = "--cgroup-root"`.
fn take_value(parser: &mut lexopt::Parser, flag: &str) -> Result<String, CliError> {
    if let Some(v) = parser.optional_value() {
        return v.into_string().map_err(|_| CliError::NotUnicode {
            flag: flag.to_string(),
        });
    }
    let next_is_flag = parser
        .try_raw_args()
        .and_then(|raw| {
            raw.peek()
                .and_then(|next| next.to_str())
                .map(|next| next.starts_with("--"))
        })
        .unwrap_or(false);
    if next_is_flag {
        return Err(CliError::MissingValue {
            flag: flag.to_string(),
        });
    }
    match parser.value() {
        Ok(v) => v.into_string().map_err(|_| CliError::NotUnicode {
            flag: flag.to_string(),
        }),
        Err(lexopt::Error::MissingValue { .. }) => Err(CliError::MissingValue {
            flag: flag.to_string(),
        }),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[Spec] = &[
        Spec::both("namespace", 'n', Takes::Value),
        Spec::both("all", 'A', Takes::Nothing),
        Spec::long("bare", Takes::ValueOrTrue),
    ];

    /// Every argument of `args`, one line each, or the error's message.
    fn read(args: &[&str]) -> Result<Vec<String>, String> {
        let mut p = FlagParser::new(lexopt::Parser::from_args(args.iter().copied()), "t", TABLE)
            .with_extra(|name| (name == "extra").then_some(Takes::Value));
        let mut out = Vec::new();
        loop {
            match p.next().map_err(|e| e.to_string())? {
                None => return Ok(out),
                Some(Arg::Help) => out.push("help".to_string()),
                Some(Arg::Value(v)) => out.push(format!("value {}", v.to_string_lossy())),
                Some(Arg::Flag(g)) => out.push(format!("{} ({}) = {}", g.name, g.spelled, g.value)),
            }
        }
    }

    #[test]
    fn each_spelling_of_a_flag_reads_as_its_long_name_and_value() {
        for (args, want) in [
            (&["-n", "kube"][..], "namespace (-n) = kube"),
            (&["-nkube"], "namespace (-n) = kube"),
            (&["-n=kube"], "namespace (-n) = kube"),
            (&["--namespace", "kube"], "namespace (--namespace) = kube"),
            (&["--namespace=kube"], "namespace (--namespace) = kube"),
            (&["-A"], "all (-A) = true"),
            (&["--all"], "all (--all) = true"),
            (&["--bare"], "bare (--bare) = true"),
            (&["--bare=false"], "bare (--bare) = false"),
            (&["--extra", "x"], "extra (--extra) = x"),
        ] {
            assert_eq!(read(args), Ok(vec![want.to_string()]), "{args:?}");
        }
    }

    #[test]
    fn help_positionals_and_combined_letters_come_in_order() {
        assert_eq!(
            read(&["pod", "-An", "x", "-h", "--help"]).unwrap(),
            [
                "value pod",
                "all (-A) = true",
                "namespace (-n) = x",
                "help",
                "help"
            ]
        );
        assert_eq!(
            read(&["--bare", "false"]).unwrap(),
            ["bare (--bare) = true", "value false"],
            "a bare boolean does not take the next argument"
        );
    }

    #[test]
    fn errors_name_the_flag_as_it_was_spelled() {
        for (args, want) in [
            (&["-x"][..], "unknown flag -x for `picolet t`"),
            (&["--nope=1"], "unknown flag --nope for `picolet t`"),
            (&["-n"], "flag -n needs a value"),
            (&["--namespace", "--all"], "flag --namespace needs a value"),
            (
                &["--all=1"],
                r#"unexpected argument for option '--all': "1""#,
            ),
        ] {
            assert_eq!(read(args), Err(want.to_string()), "{args:?}");
        }
    }

    #[test]
    fn the_rest_is_every_argument_left_as_given() {
        let mut p = FlagParser::new(
            lexopt::Parser::from_args(["pod", "-n", "--", "-A"]),
            "t",
            TABLE,
        );
        assert_eq!(p.next().unwrap(), Some(Arg::Value("pod".into())));
        assert_eq!(p.rest().unwrap(), ["-n", "--", "-A"]);
    }
}
