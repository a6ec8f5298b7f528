//! Tests of the command line's parsing: kubelet's flags, get/logs/exec arguments, help and errors.

use super::*;
use std::time::Duration;

fn p(args: &[&str]) -> Result<Command, CliError> {
    parse_with(args.iter().copied(), None)
}

fn run(args: &[&str]) -> RunArgs {
    match p(args) {
        Ok(Command::Run(r)) => r,
        other => panic!("{args:?}: {other:?}"),
    }
}

fn get(args: &[&str]) -> GetArgs {
    match p(args) {
        Ok(Command::GetPods(g)) => g,
        other => panic!("{args:?}: {other:?}"),
    }
}

fn err(args: &[&str]) -> String {
    p(args).expect_err("expected an error").to_string()
}

#[test]
fn no_arguments_or_help_in_any_form_asks_for_help() {
    for args in [&[][..], &["help"], &["--help"], &["-h"]] {
        assert_eq!(p(args).unwrap(), Command::Help(None), "{args:?}");
    }
}

#[test]
fn a_commands_help_flag_or_help_command_asks_for_that_commands_help() {
    for (args, topic) in [
        (&["run", "--help"][..], "run"),
        (&["run", "--max-pods=3", "-h"], "run"),
        (&["check", "--help"], "check"),
        (&["get", "-h"], "get"),
        (&["get", "pods", "--help"], "get"),
        (&["describe", "pod", "x", "-h"], "describe"),
        (&["logs", "--help"], "logs"),
        (&["exec", "-h"], "exec"),
        (&["version", "-h"], "version"),
        (&["help", "exec"], "exec"),
        (&["help", "run"], "run"),
    ] {
        assert_eq!(p(args).unwrap(), Command::Help(Some(topic)), "{args:?}");
    }
    assert_eq!(
        err(&["help", "start"]),
        r#"unknown command "start"; expected run, get, describe, logs, exec, check, version or help"#
    );
}

#[test]
fn the_admin_socket_comes_from_the_flag_then_the_environment_then_the_default() {
    let socket = |args: &[&str], env: Option<&str>| match parse_with(
        args.iter().copied(),
        env.map(OsString::from),
    ) {
        Ok(Command::GetPods(g)) => g.admin_socket,
        Ok(Command::Logs(l)) => l.admin_socket,
        Ok(Command::Describe(d)) => d.admin_socket,
        Ok(Command::Exec(e)) => e.admin_socket,
        other => panic!("{args:?}: {other:?}"),
    };
    for args in [
        &["get", "pods"][..],
        &["logs", "web"],
        &["describe", "pod", "web"],
        &["exec", "web", "--", "true"],
    ] {
        assert_eq!(
            socket(args, None),
            PathBuf::from(config::DEFAULT_ADMIN_SOCKET)
        );
        assert_eq!(
            socket(args, Some("")),
            PathBuf::from(config::DEFAULT_ADMIN_SOCKET)
        );
        assert_eq!(socket(args, Some("/env.sock")), PathBuf::from("/env.sock"));
        let mut flagged = args.to_vec();
        flagged.splice(1..1, ["--admin-socket", "/flag.sock"]);
        assert_eq!(
            socket(&flagged, Some("/env.sock")),
            PathBuf::from("/flag.sock")
        );
    }
}

#[test]
fn an_error_and_its_causes_are_said_once() {
    let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
    let e = crate::cli::client::ClientError::Connect {
        path: PathBuf::from("/run/p.sock"),
        source: io,
    };
    let line = error_line(&e);
    assert_eq!(line.matches("No such file").count(), 1, "{line}");
    assert!(
        line.starts_with("cannot connect to /run/p.sock: No such file"),
        "{line}"
    );
    #[derive(Debug, thiserror::Error)]
    #[error("reading the config")]
    struct Outer(#[source] std::io::Error);
    let e = Outer(std::io::Error::other("disk on fire"));
    assert_eq!(error_line(&e), "reading the config: disk on fire");
}

#[test]
fn version_is_a_command_and_a_flag() {
    assert_eq!(p(&["version"]).unwrap(), Command::Version);
    assert_eq!(p(&["--version"]).unwrap(), Command::Version);
    assert_eq!(err(&["version", "extra"]), r#"unexpected argument "extra""#);
}

#[test]
fn an_unknown_command_or_a_flag_before_the_command_is_an_error() {
    assert_eq!(
        err(&["start"]),
        r#"unknown command "start"; expected run, get, describe, logs, exec, check, version or help"#
    );
    assert_eq!(
        err(&["--config", "x"]),
        "expected a command (run, get, describe, logs, exec, check, version or help) before --config"
    );
}

#[test]
fn run_with_no_flags_has_no_config_and_empty_flags() {
    assert_eq!(run(&["run"]), RunArgs::default());
}

#[test]
fn run_accepts_both_equals_and_space_separated_values() {
    let r = run(&[
        "run",
        "--config=/etc/picolet/config.yaml",
        "--max-pods",
        "16",
        "--root-dir=/data",
    ]);
    assert_eq!(r.config, Some(PathBuf::from("/etc/picolet/config.yaml")));
    assert_eq!(r.flags.get("max-pods"), Some("16"));
    assert_eq!(r.flags.get("root-dir"), Some("/data"));
}

#[test]
fn every_kubelet_flag_is_collected_as_a_raw_string() {
    let r = run(&[
        "run",
        "--pod-manifest-path=/m",
        "--container-runtime-endpoint",
        "unix:///c.sock",
        "--cgroup-driver=cgroupfs",
        "--cgroup-root=/edge",
        "--cgroups-per-qos=false",
        "--file-check-frequency=5s",
        "--sync-frequency=1m",
        "--max-pods=8",
        "--runtime-request-timeout=30s",
        "--container-log-max-size=1Mi",
        "--container-log-max-files=3",
        "--serialize-image-pulls",
        "--cluster-dns=10.0.0.10,10.0.0.11",
        "--cluster-domain=cluster.local",
        "--pod-pids-limit=100",
        "--eviction-hard=memory.available<100Mi",
        "--node-status-update-frequency=20s",
        "--hostname-override=edge-1",
        "--admin-socket=/tmp/a.sock",
        "--board=rpi4",
        "--v=2",
    ]);
    let f = r.flags;
    assert_eq!(f.get("pod-manifest-path"), Some("/m"));
    assert_eq!(f.get("container-runtime-endpoint"), Some("unix:///c.sock"));
    assert_eq!(f.get("cgroup-driver"), Some("cgroupfs"));
    assert_eq!(f.get("cgroup-root"), Some("/edge"));
    assert_eq!(f.get("cgroups-per-qos"), Some("false"));
    assert_eq!(f.get("file-check-frequency"), Some("5s"));
    assert_eq!(f.get("sync-frequency"), Some("1m"));
    assert_eq!(f.get("max-pods"), Some("8"));
    assert_eq!(f.get("runtime-request-timeout"), Some("30s"));
    assert_eq!(f.get("container-log-max-size"), Some("1Mi"));
    assert_eq!(f.get("container-log-max-files"), Some("3"));
    assert_eq!(f.get("serialize-image-pulls"), Some("true"));
    assert_eq!(f.all("cluster-dns"), ["10.0.0.10,10.0.0.11"]);
    assert_eq!(f.get("cluster-domain"), Some("cluster.local"));
    assert_eq!(f.get("pod-pids-limit"), Some("100"));
    assert_eq!(f.all("eviction-hard"), ["memory.available<100Mi"]);
    assert_eq!(f.get("node-status-update-frequency"), Some("20s"));
    assert_eq!(f.get("hostname-override"), Some("edge-1"));
    assert_eq!(f.get("admin-socket"), Some("/tmp/a.sock"));
    assert_eq!(f.get("board"), Some("rpi4"));
    assert_eq!(f.get("v"), Some("2"));
}

#[test]
fn a_bare_boolean_flag_means_true_and_does_not_swallow_the_next_argument() {
    let r = run(&["run", "--cgroups-per-qos", "--max-pods=3"]);
    assert_eq!(r.flags.get("cgroups-per-qos"), Some("true"));
    assert_eq!(r.flags.get("max-pods"), Some("3"));
    assert_eq!(
        err(&["run", "--serialize-image-pulls", "false"]),
        r#"unexpected argument "false""#
    );
}

#[test]
fn repeatable_flags_accumulate_and_others_keep_the_last_value() {
    let r = run(&[
        "run",
        "--cluster-dns=1.1.1.1",
        "--cluster-dns",
        "8.8.8.8",
        "--max-pods=1",
        "--max-pods=2",
    ]);
    assert_eq!(r.flags.all("cluster-dns"), ["1.1.1.1", "8.8.8.8"]);
    assert_eq!(r.flags.get("max-pods"), Some("2"));
}

#[test]
fn verbosity_is_accepted_in_every_kubelet_spelling() {
    for args in [
        &["run", "-v", "4"][..],
        &["run", "-v=4"],
        &["run", "-v4"],
        &["run", "--v=4"],
        &["run", "--v", "4"],
    ] {
        assert_eq!(run(args).flags.get("v"), Some("4"), "{args:?}");
    }
}

#[test]
fn a_verbosity_outside_zero_to_ten_is_rejected_by_the_cli() {
    assert_eq!(
        err(&["run", "-v", "11"]),
        r#"flag -v: invalid value "11": expected a log level between 0 and 10"#
    );
    assert_eq!(
        err(&["run", "--v=loud"]),
        r#"flag --v: invalid value "loud": expected a log level between 0 and 10"#
    );
}

#[test]
fn an_unknown_flag_is_an_error_naming_it() {
    assert_eq!(
        err(&["run", "--cert-dir=/x"]),
        "unknown flag --cert-dir for `picolet run`"
    );
    assert_eq!(err(&["run", "-x"]), "unknown flag -x for `picolet run`");
    assert_eq!(
        err(&["get", "pods", "--max-pods=3"]),
        "unknown flag --max-pods for `picolet get`"
    );
}

#[test]
fn a_missing_value_names_the_flag() {
    assert_eq!(err(&["run", "--max-pods"]), "flag --max-pods needs a value");
    assert_eq!(err(&["run", "--config"]), "flag --config needs a value");
    assert_eq!(
        err(&["run", "--max-pods", "--cgroup-root", "/"]),
        "flag --max-pods needs a value"
    );
    assert_eq!(err(&["run", "-v"]), "flag -v needs a value");
    assert_eq!(err(&["get", "pods", "-o"]), "flag -o needs a value");
}

#[test]
fn check_takes_the_config_and_runs_flags() {
    match p(&["check", "--config", "/etc/picolet.yaml", "--root-dir=/data"]) {
        Ok(Command::Check(args)) => {
            assert_eq!(args.config, Some(PathBuf::from("/etc/picolet.yaml")));
            assert_eq!(args.flags.get("root-dir"), Some("/data"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(p(&["check", "-h"]).unwrap(), Command::Help(Some("check")));
}

#[test]
fn check_takes_an_output_format_and_run_does_not() {
    match p(&["check", "-o", "json"]) {
        Ok(Command::Check(args)) => assert_eq!(args.output, OutputFormat::Json),
        other => panic!("{other:?}"),
    }
    match p(&["check", "--output=yaml"]) {
        Ok(Command::Check(args)) => assert_eq!(args.output, OutputFormat::Yaml),
        other => panic!("{other:?}"),
    }
    assert!(p(&["check", "-o", "wide"]).is_err());
    assert!(p(&["run", "-o", "json"]).is_err());
}

#[test]
fn run_rejects_positional_arguments() {
    assert_eq!(err(&["run", "pods"]), r#"unexpected argument "pods""#);
}

#[test]
fn get_pods_defaults_to_the_table_on_the_default_socket() {
    let g = get(&["get", "pods"]);
    assert_eq!(g.admin_socket, PathBuf::from(config::DEFAULT_ADMIN_SOCKET));
    assert_eq!(g.output, OutputFormat::Table);
    assert_eq!(g.namespace, "default");
    assert!(!g.all_namespaces);
    assert_eq!(g.name, None);
}

#[test]
fn get_pods_takes_kubectls_namespace_flags_and_a_pod_name() {
    let g = get(&["get", "pods", "-A"]);
    assert!(g.all_namespaces);
    let g = get(&["get", "pods", "--all-namespaces"]);
    assert!(g.all_namespaces);
    let g = get(&["get", "pods", "-n", "kube-system"]);
    assert_eq!(
        (g.namespace.as_str(), g.all_namespaces),
        ("kube-system", false)
    );
    let g = get(&["get", "pod", "web", "--namespace=edge"]);
    assert_eq!(
        (g.namespace.as_str(), g.name.as_deref()),
        ("edge", Some("web"))
    );
    let g = get(&["get", "pod/web", "-o", "yaml"]);
    assert_eq!(g.name.as_deref(), Some("web"));
    assert_eq!(g.output, OutputFormat::Yaml);
}

#[test]
fn get_pods_accepts_output_and_socket_in_any_order() {
    for args in [
        &["get", "pods", "-o", "wide", "--admin-socket", "/tmp/p.sock"][..],
        &["get", "-owide", "pods", "--admin-socket=/tmp/p.sock"],
        &[
            "get",
            "--output=wide",
            "--admin-socket",
            "/tmp/p.sock",
            "po",
        ],
    ] {
        let g = get(args);
        assert_eq!(g.output, OutputFormat::Wide, "{args:?}");
        assert_eq!(g.admin_socket, PathBuf::from("/tmp/p.sock"), "{args:?}");
    }
    assert_eq!(get(&["get", "pod", "-o=json"]).output, OutputFormat::Json);
}

#[test]
fn get_needs_a_known_resource_and_output_format() {
    assert_eq!(
        err(&["get"]),
        "`picolet get` needs a resource: picolet get pods, picolet get node"
    );
    assert_eq!(
        err(&["get", "deployments"]),
        r#"unknown resource "deployments"; picolet can get pods or node"#
    );
    for args in [&["get", "node"][..], &["get", "nodes", "-o", "json"]] {
        assert!(matches!(p(args), Ok(Command::GetNode(_))), "{args:?}");
    }
    assert_eq!(
        err(&["get", "pods", "web", "extra"]),
        r#"unexpected argument "extra""#
    );
    assert_eq!(err(&["get", "node", "x"]), r#"unexpected argument "x""#);
    assert_eq!(
        get(&["get", "pods", "-o", "yaml"]).output,
        OutputFormat::Yaml
    );
    assert_eq!(
        err(&["get", "pods", "-o", "xml"]),
        r#"flag -o: invalid value "xml": expected wide, json or yaml"#
    );
}

fn logs(args: &[&str]) -> LogsArgs {
    match p(args) {
        Ok(Command::Logs(l)) => l,
        other => panic!("{args:?}: {other:?}"),
    }
}

#[test]
fn logs_takes_kubectls_flags_and_builds_kubelets_query() {
    let l = logs(&["logs", "web"]);
    assert_eq!((l.namespace.as_str(), l.pod.as_str()), ("default", "web"));
    assert_eq!(l.container, None);
    assert_eq!(l.uri("app"), "/containerLogs/default/web/app");
    let l = logs(&[
        "logs",
        "-n",
        "edge",
        "web",
        "-c=app",
        "-f",
        "--previous",
        "--tail",
        "2",
        "--timestamps",
        "--limit-bytes=100",
        "--admin-socket=/tmp/a.sock",
    ]);
    assert_eq!(l.admin_socket, PathBuf::from("/tmp/a.sock"));
    assert_eq!(
        l.uri(l.container.as_deref().unwrap()),
        "/containerLogs/edge/web/app?follow=true&previous=true&timestamps=true&tailLines=2&limitBytes=100"
    );
    assert_eq!(
        logs(&["logs", "web", "side"]).container.as_deref(),
        Some("side")
    );
    assert_eq!(logs(&["logs", "web", "--tail=-1"]).tail, None);
}

#[test]
fn logs_needs_a_pod_and_valid_numbers() {
    assert_eq!(
        err(&["logs"]),
        "`picolet logs` needs a pod: picolet logs POD [-c CONTAINER]"
    );
    assert_eq!(
        err(&["logs", "web", "--tail", "x"]),
        r#"flag --tail: invalid value "x": expected an integer"#
    );
    assert_eq!(
        err(&["logs", "web", "--limit-bytes=0"]),
        r#"flag --limit-bytes: invalid value "0": must be greater than 0"#
    );
    assert_eq!(
        err(&["logs", "web", "-x"]),
        "unknown flag -x for `picolet logs`"
    );
    assert_eq!(err(&["logs", "a", "b", "c"]), r#"unexpected argument "c""#);
}

#[test]
fn every_flag_in_the_config_table_is_accepted_by_run() {
    for flag in config::FLAGS {
        let arg = if flag.name == "v" {
            "--v=1".to_string()
        } else {
            format!("--{}=x", flag.name)
        };
        let r = run(&["run", &arg]);
        assert_ne!(r.flags, Flags::default(), "{} ({:?})", flag.name, flag.kind);
    }
}

#[test]
fn flags_parsed_from_the_command_line_override_defaults_through_resolve() {
    let r = run(&[
        "run",
        "--max-pods=12",
        "--sync-frequency",
        "30s",
        "--cgroups-per-qos=false",
    ]);
    let loaded = config::resolve(None, &r.flags).unwrap();
    assert_eq!(loaded.config.max_pods, 12);
    assert_eq!(loaded.config.sync_frequency, Duration::from_secs(30));
    assert!(!loaded.config.cgroups_per_qos);
    assert!(loaded.unknown_fields.is_empty());
}

#[test]
fn flag_validation_errors_surface_through_resolve_naming_the_flag() {
    let r = run(&["run", "--max-pods=lots"]);
    assert_eq!(
        config::resolve(None, &r.flags).unwrap_err().to_string(),
        r#"flag --max-pods: expected a positive integer, got "lots""#
    );
}

#[test]
fn every_flag_a_command_declares_is_in_that_commands_help() {
    for (command, table) in [
        ("run", RUN_FLAGS),
        ("check", CHECK_FLAGS),
        ("get", GET_FLAGS),
        ("logs", LOGS_FLAGS),
        ("describe", describe::FLAGS),
        ("exec", exec::FLAGS),
    ] {
        let mut help = command_usage(command);
        if command == "check" {
            // check's help names run's flags as `[flags...]`.
            help.push_str(&command_usage("run"));
        }
        for spec in table {
            let long = format!("--{}", spec.long);
            let short = spec.short.map(|c| format!("-{c}"));
            assert!(
                help.contains(&long) || short.is_some_and(|s| help.contains(&s)),
                "{command}: {long} is not in its help"
            );
        }
    }
}

#[test]
fn non_utf8_values_are_rejected_naming_the_flag() {
    use std::os::unix::ffi::OsStringExt;
    let bad = OsString::from_vec(vec![b'/', 0xff]);
    let e = parse([OsString::from("run"), OsString::from("--root-dir"), bad]).unwrap_err();
    assert_eq!(e.to_string(), "flag --root-dir: value is not valid UTF-8");
}
