//! The `picolet` command: parses the command line, loads the configuration
//! and runs the agent on one thread, or talks to a running agent through
//! its admin socket. All policy lives in the library; this file only wires.

use std::rc::Rc;

use anyhow::{bail, Context, Result};
use picolet::agent::{Agent, AgentConfig};
use picolet::cli::{self, Command};
use picolet::config;

/// On musl (the boards' builds), dlmalloc rather than musl's own allocator
/// (mallocng). Measured 2026-12-01, x86_64 musl release builds, `make
/// bench` on containerd 1.6:
/// - idle CPU (issue #13): mallocng maps and unmaps a group of 4-40 KiB
///   whenever the last block in it is freed, and the 1 s relist's reply
///   buffers did that about ten times a second with 30 pods (263 `mmap` /
///   `munmap` calls in 25 s, each new page faulted in and zeroed; a fifth
///   of the idle profile). dlmalloc reuses freed blocks. CPU per idle
///   minute at 30 pods, 90 s windows in one session: 0.073 s → 0.047 s.
/// - memory (issue #8): API bench, 110 pods, three runs each, alternating:
///   VmRSS 8225 → 8073 KiB (mean), VmHWM 8517 → 8073 KiB. dlmalloc gives
///   back only the top of its heap, so what it holds at rest is its peak,
///   which was lower than mallocng's resting size. (mimalloc was tried
///   too: 8.5 MiB anonymous with no pods.)
/// - size: +896 B stripped on aarch64, +13 KiB on x86_64.
/// glibc builds (tests, `BENCH_TARGET=host`) keep glibc's malloc.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOC: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

fn main() {
    if let Err(e) = real_main() {
        eprintln!("picolet: {}", cli::error_line(e.as_ref()));
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let cmd = cli::parse(std::env::args_os().skip(1))?;
    match cmd {
        Command::Version => {
            println!(
                "picolet {} (kubelet v1.36 semantics, CRI runtime.v1)",
                env!("CARGO_PKG_VERSION")
            );
            Ok(())
        }
        Command::Help(None) => {
            print!("{}", cli::usage());
            Ok(())
        }
        Command::Help(Some(command)) => {
            print!("{}", cli::command_usage(command));
            Ok(())
        }
        Command::GetPods(args) => get_pods(&args),
        Command::GetNode(args) => get_node(&args),
        Command::Logs(args) => logs(&args),
        Command::Describe(args) => describe(&args),
        Command::Check(args) => check(&args),
        Command::Exec(args) => exec(&args),
        Command::Run(args) => run(args),
    }
}

/// `GET path` on the admin socket, decoded as JSON (`what` names it in an
/// error); any answer but 200 is an error with the socket and the body.
fn admin_json(socket: &std::path::Path, path: &str, what: &str) -> Result<serde_json::Value> {
    let (status, body) = picolet::cli::client::get(socket, path)?;
    if status == 503 {
        // The agent is up and says what it waits for.
        bail!("{}", String::from_utf8_lossy(&body).trim_end());
    }
    if status != 200 {
        bail!(
            "admin socket {}: HTTP {status}: {}",
            socket.display(),
            String::from_utf8_lossy(&body)
        );
    }
    serde_json::from_slice(&body).with_context(|| format!("decoding {what}"))
}

/// Prints `v` as `-o json` or `-o yaml` asked; false for the other
/// formats (the caller renders its table).
fn print_document(v: &serde_json::Value, output: cli::OutputFormat) -> Result<bool> {
    match output {
        cli::OutputFormat::Json => println!("{}", serde_json::to_string_pretty(v)?),
        cli::OutputFormat::Yaml => print!("{}", picolet::cli::yaml::to_yaml(v)),
        _ => return Ok(false),
    }
    Ok(true)
}

fn now_unix() -> Result<i64> {
    Ok(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64)
}

fn get_pods(args: &cli::GetArgs) -> Result<()> {
    let mut list = admin_json(&args.admin_socket, "/pods", "the pod list")?;
    let namespace = (!args.all_namespaces).then_some(args.namespace.as_str());
    let items = picolet::cli::client::select_pods(&list, namespace, args.name.as_deref());
    if let Some(name) = &args.name {
        // kubectl's `get pod NAME`: that pod, or its error.
        let Some(pod) = items.first() else {
            bail!("pods {name:?} not found in namespace {:?}", args.namespace);
        };
        if print_document(pod, args.output)? {
            return Ok(());
        }
    }
    if items.is_empty() && args.output == cli::OutputFormat::Table {
        match namespace {
            Some(ns) => println!("No resources found in {ns} namespace."),
            None => println!("No resources found."),
        }
        return Ok(());
    }
    list["items"] = serde_json::Value::Array(items);
    if print_document(&list, args.output)? {
        return Ok(());
    }
    let columns = picolet::cli::table::PodColumns {
        wide: args.output == cli::OutputFormat::Wide,
        namespace: args.all_namespaces,
    };
    let style = picolet::cli::term::Style::detect();
    print!(
        "{}",
        picolet::cli::table::pods_table(&list, now_unix()?, columns, style)
    );
    Ok(())
}

fn get_node(args: &cli::GetArgs) -> Result<()> {
    let node = admin_json(&args.admin_socket, "/node", "the node")?;
    if print_document(&node, args.output)? {
        return Ok(());
    }
    let style = picolet::cli::term::Style::detect();
    print!("{}", picolet::cli::table::node_table(&node, style));
    Ok(())
}

fn describe(args: &cli::DescribeArgs) -> Result<()> {
    let list = admin_json(&args.admin_socket, "/pods", "the pod list")?;
    let Some(pod) = picolet::cli::describe_text::find_pod(&list, &args.namespace, &args.pod) else {
        bail!(
            "pods {:?} not found in namespace {:?}",
            args.pod,
            args.namespace
        );
    };
    // An older agent without `/events` still describes, without events.
    let events = match picolet::cli::client::get(&args.admin_socket, "/events")? {
        (200, body) => serde_json::from_slice(&body).context("decoding the events")?,
        _ => serde_json::json!({"items": []}),
    };
    let uid = pod["metadata"]["uid"].clone();
    let mine: Vec<serde_json::Value> = events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["uid"] == uid)
        .cloned()
        .collect();
    let mut items = vec![pod.clone()];
    items.extend(mine.iter().cloned());
    let doc = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    if print_document(&doc, args.output)? {
        return Ok(());
    }
    let pod: k8s_openapi::api::core::v1::Pod =
        serde_json::from_str(&pod.to_string()).context("decoding the pod")?;
    let style = picolet::cli::term::Style::detect();
    print!(
        "{}",
        picolet::cli::describe_text::describe_pod(&pod, &mine, now_unix()?, style)
    );
    Ok(())
}

/// `picolet check`: exits 1 when any line fails (a configuration that does
/// not load is one such line), 0 otherwise.
fn check(args: &cli::RunArgs) -> Result<()> {
    let file = match &args.config {
        Some(path) => match read_config_file(path) {
            Ok(text) => Some((path.as_path(), text)),
            Err(e) => {
                let line = picolet::check::config_error(&format!("{e:#}"));
                return print_check(&[line], args.output);
            }
        },
        None => None,
    };
    let origin = match &args.config {
        Some(path) => path.display().to_string(),
        None => "no --config, kubelet's defaults".to_string(),
    };
    let lines = match config::resolve(
        file.as_ref().map(|(path, text)| (*path, text.as_str())),
        &args.flags,
    ) {
        Ok(loaded) => picolet::check::host::run(&loaded, &origin),
        Err(e) => vec![picolet::check::config_error(&e.to_string())],
    };
    print_check(&lines, args.output)
}

fn print_check(lines: &[picolet::check::Line], output: cli::OutputFormat) -> Result<()> {
    if !print_document(&picolet::check::document(lines), output)? {
        print!(
            "{}",
            picolet::check::render(lines, picolet::cli::term::Style::detect())
        );
    }
    let code = picolet::check::exit_code(lines);
    if code != 0 {
        std::io::Write::flush(&mut std::io::stdout())?;
        std::process::exit(code);
    }
    Ok(())
}

fn logs(args: &cli::LogsArgs) -> Result<()> {
    let container = match &args.container {
        Some(c) => c.clone(),
        None => {
            let list = admin_json(&args.admin_socket, "/pods", "the pod list")?;
            picolet::cli::client::log_container(&list, &args.namespace, &args.pod)
                .map_err(anyhow::Error::msg)?
        }
    };
    let mut out = std::io::stdout().lock();
    let (status, body) =
        picolet::cli::client::stream(&args.admin_socket, &args.uri(&container), &mut out)?;
    if status != 200 {
        bail!("{}", String::from_utf8_lossy(&body).trim_end());
    }
    Ok(())
}

/// `picolet exec`: exits with the command's exit code.
fn exec(args: &cli::ExecArgs) -> Result<()> {
    let container = match &args.container {
        Some(c) => c.clone(),
        None => {
            let list = admin_json(&args.admin_socket, "/pods", "the pod list")?;
            picolet::cli::client::log_container(&list, &args.namespace, &args.pod)
                .map_err(anyhow::Error::msg)?
        }
    };
    let raw = if args.tty {
        cli::RawMode::enter()
    } else {
        None
    };
    // kubectl's rule: no TTY unless stdin is a terminal.
    let mut args = args.clone();
    if args.tty && raw.is_none() {
        eprintln!("Unable to use a TTY - input is not a terminal or the right kind of file");
        args.tty = false;
    }
    let uri = args.uri(&container);
    let session = picolet::cli::exec_client::Session {
        socket: &args.admin_socket,
        uri: &uri,
        stdin: args.stdin,
        tty: args.tty,
        size: raw.as_ref().map(|r| r.1),
    };
    let code = picolet::cli::exec_client::run(
        &session,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    drop(raw);
    match code {
        Ok(code) => std::process::exit(code),
        // kubectl's form and exit code for a session that failed.
        Err(e) => {
            eprintln!("error: {}", cli::error_line(&e));
            std::process::exit(1)
        }
    }
}

fn run(args: cli::RunArgs) -> Result<()> {
    let uid = rustix::process::geteuid();
    if !uid.is_root() {
        bail!(
            "picolet run needs root (running as uid {}): it creates the pods' cgroups, \
             mounts their volumes and connects to the container runtime's root-only socket",
            uid.as_raw()
        );
    }
    // Layers: the board profile (--board), then the config file, then flags.
    let file = match &args.config {
        Some(path) => Some((path.as_path(), read_config_file(path)?)),
        None => None,
    };
    let loaded = config::resolve(
        file.as_ref().map(|(path, text)| (*path, text.as_str())),
        &args.flags,
    )?;
    let cfg = loaded.config;
    picolet::logger::init(cfg.verbosity);
    for field in &loaded.unknown_fields {
        log::warn!("{field}");
    }
    let agent_cfg = AgentConfig::new(&cfg)?;
    let node_name = agent_cfg.node_name.clone();
    set_own_oom_score_adj();
    log::info!(
        "picolet {} starting on node {node_name}",
        env!("CARGO_PKG_VERSION")
    );
    let agent = Agent::new(agent_cfg);
    #[cfg(feature = "apiserver")]
    let _joined = picolet::apiserver::join::join(&cfg, &node_name, &agent)?;
    #[cfg(feature = "node-api")]
    let _node_api = picolet::nodeapi::start(
        &cfg,
        &node_name,
        agent.admin_handlers().router(),
        _joined.as_ref().map(|j| j.client.clone()),
    );
    #[cfg(not(feature = "apiserver"))]
    if cfg.kubeconfig.is_some() {
        anyhow::bail!("--kubeconfig: this picolet was built without the apiserver feature");
    }
    picolet::rt::block_on(async {
        let signals =
            async_signal::Signals::new([async_signal::Signal::Term, async_signal::Signal::Int]);
        let shutdown = async move {
            match signals {
                Ok(mut s) => {
                    use smol::stream::StreamExt;
                    if let Some(Ok(sig)) = s.next().await {
                        log::info!("received {sig:?}");
                    }
                }
                Err(e) => {
                    log::warn!("cannot handle signals: {e}");
                    std::future::pending::<()>().await
                }
            }
        };
        Rc::clone(&agent).run(shutdown).await;
    });
    Ok(())
}

/// The config file's text: a regular file within the config's size bound
/// (a FIFO or a device would block or feed the one thread forever).
fn read_config_file(path: &std::path::Path) -> Result<String> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    let limit = picolet::decode::Limits::CONFIG.max_bytes as u64;
    if !meta.is_file() {
        bail!("config file {} is not a regular file", path.display());
    }
    if meta.len() > limit {
        bail!(
            "config file {} is {} bytes, over the {limit}-byte limit",
            path.display(),
            meta.len()
        );
    }
    std::fs::read_to_string(path).with_context(|| format!("reading config file {}", path.display()))
}

/// kubelet protects itself from the OOM killer with -999. Without
/// CAP_SYS_RESOURCE that fails; say so once and go on.
fn set_own_oom_score_adj() {
    if let Err(e) = std::fs::write("/proc/self/oom_score_adj", "-999") {
        log::info!("could not set picolet's oom_score_adj to -999 ({e}); continuing without it");
    }
}
