//! The `picolet` command: parses the command line, loads the configuration
//! and runs the agent on one thread, or talks to a running agent through
//! its admin socket. All policy lives in the library; this file only wires.

use std::path::Path;
use std::rc::Rc;

use anyhow::{bail, Context, Result};
use picolet::agent::{Agent, AgentConfig};
use picolet::cli::{self, Command};
use picolet::config::{self, KubeletConfig};

fn main() {
    if let Err(e) = real_main() {
        eprintln!("picolet: {e:#}");
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
        Command::Help => {
            print!("{}", cli::usage());
            Ok(())
        }
        Command::GetPods(args) => get_pods(&args),
        Command::Run(args) => run(args),
    }
}

fn get_pods(args: &cli::GetArgs) -> Result<()> {
    let (status, body) = picolet::admin::get(&args.admin_socket, "/pods")?;
    if status != 200 {
        bail!(
            "admin socket {}: HTTP {status}: {}",
            args.admin_socket.display(),
            String::from_utf8_lossy(&body)
        );
    }
    let list: serde_json::Value = serde_json::from_slice(&body).context("decoding the pod list")?;
    if args.output == cli::OutputFormat::Json {
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(());
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    print!(
        "{}",
        picolet::admin::pods_table(&list, now, args.output == cli::OutputFormat::Wide)
    );
    Ok(())
}

fn run(args: cli::RunArgs) -> Result<()> {
    // Layers: the board profile (--board), then the config file, then flags.
    let board_origin;
    let mut layers: Vec<(String, &Path)> = Vec::new();
    if let Some(board) = &args.flags.board {
        let text = picolet::board::profile(board).with_context(|| {
            format!(
                "--board {board:?}: unknown board; known boards: {}",
                picolet::board::names().join(", ")
            )
        })?;
        board_origin = std::path::PathBuf::from(format!("board:{board}"));
        layers.push((text.to_string(), board_origin.as_path()));
    }
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        layers.push((text, path.as_path()));
    }
    let (mut cfg, unknown) = if layers.is_empty() {
        (KubeletConfig::default(), Vec::new())
    } else {
        let refs: Vec<(&str, &Path)> = layers.iter().map(|(t, p)| (t.as_str(), *p)).collect();
        let loaded = config::from_layers(&refs)?;
        (loaded.config, loaded.unknown_fields)
    };
    cfg.apply_flags(&args.flags)?;
    picolet::logger::init(cfg.verbosity);
    if let Some(path) = &args.config {
        for field in &unknown {
            if config::is_upstream_field(field) {
                log::warn!(
                    "{}: kubelet field {field:?} is not implemented by picolet; ignoring it",
                    path.display()
                );
            } else {
                log::warn!(
                    "{}: unknown field {field:?} (typo?); ignoring it",
                    path.display()
                );
            }
        }
    }
    let agent_cfg = AgentConfig::new(&cfg)?;
    let node_name = agent_cfg.node_name.clone();
    set_own_oom_score_adj();
    log::info!(
        "picolet {} starting on node {node_name}",
        env!("CARGO_PKG_VERSION")
    );
    let agent = Agent::new(agent_cfg);
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

/// kubelet protects itself from the OOM killer with -999. Without
/// CAP_SYS_RESOURCE that fails; say so once and go on.
fn set_own_oom_score_adj() {
    if let Err(e) = std::fs::write("/proc/self/oom_score_adj", "-999") {
        log::info!("could not set picolet's oom_score_adj to -999 ({e}); continuing without it");
    }
}
