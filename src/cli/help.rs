//! The help texts: the global one ([`usage`]: every command on a line)
//! and each command's own ([`command_usage`]: `picolet run --help`,
//! `picolet help logs`), with its flags. The flags of `run` and `check`
//! come from the one flag table, [`crate::config::FLAGS`].

use crate::config;

/// Every command, in the order the help lists them.
pub const COMMANDS: &[&str] = &[
    "run", "get", "describe", "logs", "exec", "check", "version", "help",
];

/// [`COMMANDS`] as an error message lists them.
pub const COMMAND_LIST: &str = "run, get, describe, logs, exec, check, version or help";

/// The global help: what each command does, and where its flags are.
pub fn usage() -> String {
    format!(
        "\
picolet: a kubelet for constrained edge hardware

Usage:
  picolet run [--config FILE] [flags...]   run the node agent (as root)
  picolet get pods [NAME] [-n NS|-A] [-o wide|json|yaml]
                                           list pods of a running picolet
  picolet get node [-o json|yaml]          its capacity, allocatable, eviction signals
  picolet describe pod NAME [-n NS] [-o json|yaml]
                                           a pod's status, containers and recent events
  picolet logs POD [-n NS] [-c C] [-f] [-p] [--tail N] [--timestamps] [--limit-bytes N]
                                           a container's log (its previous instance's: -p)
  picolet exec POD [-n NS] [-c C] [-i] [-t] -- COMMAND [ARG...]
                                           run a command in a container
  picolet check [--config FILE] [flags...] preflight: kernel, cgroups, runtime, disks,
                                           clock, swap, certificates (exit 1 on fail)
  picolet version                          print the version
  picolet help [COMMAND]                   print this help, or a command's

`picolet COMMAND --help` prints a command's flags (`picolet run --help`:
every kubelet flag). get, describe, logs and exec ask a running picolet
through its admin socket:
{ADMIN_SOCKET}"
    )
}

/// The `--admin-socket` line of the client commands' help.
const ADMIN_SOCKET: &str = "      \
  --admin-socket PATH          the admin socket (root only) [$PICOLET_ADMIN_SOCKET,
                                   else /run/picolet/picolet.sock]
";

/// The help of `command` (one of [`COMMANDS`]).
pub fn command_usage(command: &str) -> String {
    let (head, flags) = match command {
        "run" => return run_usage(),
        "check" => (
            "\
Usage: picolet check [--config FILE] [-o json|yaml] [flags...]

The node's preflight, with no running picolet: config fields, kernel,
cgroups, the runtime (CRI Version), CNI config, disks, clock, every static
pod manifest as `run` reads it, swap, the API server (SelfSubjectReview),
certificates; one line per check (ok, warn, fail). Exit 0 when nothing
fails, 1 when anything does. It reads the config and flags `picolet run`
would (`picolet run --help` lists them).

",
            "\
Flags:
  -o, --output json|yaml           the same lines as one document
",
        ),
        "get" => (
            "\
Usage: picolet get pods [NAME] [-n NS | -A] [-o wide|json|yaml]
       picolet get node [-o json|yaml]

The pods of a running picolet (kubectl's columns), or its node: capacity,
allocatable, pressure conditions and eviction signals.

Flags:
  -n, --namespace NS               the pods' namespace [default]
  -A, --all-namespaces             every namespace, with a NAMESPACE column
  -o, --output FORMAT              wide (pods), json or yaml [table]
",
            ADMIN_SOCKET,
        ),
        "describe" => (
            "\
Usage: picolet describe pod NAME [-n NS] [-o json|yaml]

What `kubectl describe pod` prints: the pod's status, its containers and
its recent events (kept by picolet, so offline too).

Flags:
  -n, --namespace NS               the pod's namespace [default]
  -o, --output FORMAT              json or yaml: the pod and its events as a List
",
            ADMIN_SOCKET,
        ),
        "logs" => (
            "\
Usage: picolet logs POD [CONTAINER] [-n NS] [-c C] [-f] [-p] [--tail N]
                    [--timestamps] [--limit-bytes N]

A container's log, as `kubectl logs` prints it.

Flags:
  -n, --namespace NS               the pod's namespace [default]
  -c, --container C                the container [the only one, or the default one]
  -f, --follow                     follow until the container stops
  -p, --previous                   the previous instance's log
      --tail N                     the last N lines [all]
      --timestamps                 each line's time (RFC3339Nano, UTC)
      --limit-bytes N              at most N bytes
",
            ADMIN_SOCKET,
        ),
        "exec" => (
            "\
Usage: picolet exec POD [-n NS] [-c C] [-i] [-t] -- COMMAND [ARG...]

Runs a command in a running container; picolet exits with its exit code.

Flags:
  -n, --namespace NS               the pod's namespace [default]
  -c, --container C                the container [the only one, or the default one]
  -i, --stdin                      copy stdin to the command
  -t, --tty                        give the command a terminal (stdin must be one)
",
            ADMIN_SOCKET,
        ),
        "version" => ("Usage: picolet version\n\nPrints picolet's version.\n", ""),
        _ => return usage(),
    };
    format!("{head}{flags}")
}

/// `picolet run --help`: every flag, from [`config::FLAGS`].
fn run_usage() -> String {
    let mut text = String::from(
        "\
Usage: picolet run [--config FILE] [flags...]

Runs the node agent. It needs root: it creates the pods' cgroups, mounts
their volumes and connects to the container runtime's socket.

Flags:
",
    );
    help_line(
        &mut text,
        "--config FILE",
        "KubeletConfiguration file (YAML or JSON);\nflags below override it",
    );
    for flag in config::FLAGS {
        let name = match flag.name.len() {
            1 => format!("-{0}, --{0}", flag.name),
            _ => format!("--{}", flag.name),
        };
        let spelled = match flag.kind.needs_value() {
            true => format!("{name} {}", flag.arg),
            false => format!("{name}[=BOOL]"),
        };
        help_line(&mut text, &spelled, flag.help);
    }
    text.push_str(
        "
  Flags take --flag=value or --flag value; booleans take --flag or --flag=false.
  DUR is a Go duration (30s, 1m30s); SIZE a quantity (10Mi, 1G).
",
    );
    text
}

/// One flag of the help: its spelling, then its help in a column (lines
/// after the first indented to that column).
fn help_line(text: &mut String, spelled: &str, help: &str) {
    const COLUMN: usize = 33;
    let mut line = format!("  {spelled:<COLUMN$}");
    if spelled.len() >= COLUMN {
        line.push_str("  ");
    }
    for (i, part) in help.split('\n').enumerate() {
        if i > 0 {
            line.push('\n');
            line.push_str(&" ".repeat(COLUMN + 2));
        }
        line.push_str(part);
    }
    text.push_str(line.trim_end());
    text.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_global_help_names_every_command_and_no_kubelet_flag() {
        let u = usage();
        for cmd in COMMANDS {
            assert!(u.contains(&format!("picolet {cmd}")), "{cmd}");
            assert!(COMMAND_LIST.contains(cmd), "{cmd}");
        }
        assert!(!u.contains("--max-pods"), "{u}");
        assert!(u.contains("PICOLET_ADMIN_SOCKET"), "{u}");
    }

    #[test]
    fn run_help_lists_every_flag_and_only_runs() {
        let u = command_usage("run");
        assert!(u.starts_with("Usage: picolet run"), "{u}");
        for flag in config::FLAGS {
            if flag.name != "v" {
                assert!(u.contains(&format!("--{}", flag.name)), "--{}", flag.name);
            }
        }
        assert!(u.contains("-v, --v"));
        assert!(u.contains("--config"));
        assert!(!u.contains("picolet get"), "{u}");
    }

    #[test]
    fn each_command_has_its_own_help() {
        for cmd in COMMANDS {
            let u = command_usage(cmd);
            if *cmd == "help" {
                assert_eq!(u, usage());
                continue;
            }
            assert!(u.starts_with(&format!("Usage: picolet {cmd}")), "{u}");
        }
        for cmd in ["get", "describe", "logs", "exec"] {
            assert!(command_usage(cmd).contains("--admin-socket"), "{cmd}");
        }
        assert!(command_usage("exec").contains("--stdin"));
        assert!(command_usage("logs").contains("--limit-bytes"));
    }
}
