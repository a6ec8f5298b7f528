//! Starting and running the hollow nodes: each node's configuration,
//! agent and API-server side are built as `picolet run` builds them, over
//! its own in-memory runtime; then every agent runs on the one executor
//! until SIGTERM or SIGINT.

use std::rc::Rc;

use super::{node_config, node_name, runtime, HollowArgs, HollowError};
use crate::agent::{Agent, AgentConfig};
use crate::apiserver::join::{join, Joined};
use crate::config::KubeletConfig;
use crate::cri::in_memory::MemoryRuntime;
use crate::rt;

/// One started node: its agent and the tasks of its API-server side
/// (dropping them stops them).
struct Node {
    agent: Rc<Agent<MemoryRuntime>>,
    _joined: Option<Joined>,
}

/// Runs `args.nodes` hollow nodes until a signal.
pub fn run(args: &HollowArgs) -> Result<(), HollowError> {
    let base = base_config(args)?;
    crate::logger::init(base.verbosity);
    let started = std::time::Instant::now();
    let mut nodes = Vec::with_capacity(args.nodes);
    for i in 0..args.nodes {
        nodes.push(start_node(&base, args, &node_name(args, i))?);
    }
    log::info!(
        "hollow: {} nodes started in {:?}",
        nodes.len(),
        started.elapsed()
    );
    rt::block_on(async {
        // Every agent's shutdown waits on this channel; the signal closes it.
        let (stop, stopped) = smol::channel::bounded::<()>(1);
        let tasks: Vec<_> = nodes
            .iter()
            .map(|n| {
                let agent = n.agent.clone();
                let stopped = stopped.clone();
                rt::spawn(async move {
                    agent
                        .run(async move {
                            let _ = stopped.recv().await;
                        })
                        .await
                })
            })
            .collect();
        wait_for_signal().await;
        drop(stop);
        for t in tasks {
            t.await;
        }
    });
    drop(nodes);
    Ok(())
}

/// The configuration every node starts from: `--config` and the flags.
fn base_config(args: &HollowArgs) -> Result<KubeletConfig, HollowError> {
    let text = match &args.config {
        Some(path) => {
            Some(
                std::fs::read_to_string(path).map_err(|source| HollowError::ConfigFile {
                    path: path.clone(),
                    source,
                })?,
            )
        }
        None => None,
    };
    let file = args.config.as_deref().zip(text.as_deref());
    let loaded = crate::config::resolve(file, &args.flags)?;
    for field in &loaded.unknown_fields {
        log::warn!("{field}");
    }
    Ok(loaded.config)
}

/// Node `name`: its directories, its agent over a fresh in-memory
/// runtime, and its API-server side (bootstrapping its certificate first
/// when asked).
fn start_node(base: &KubeletConfig, args: &HollowArgs, name: &str) -> Result<Node, HollowError> {
    let cfg = node_config(base, args, name);
    for dir in [&cfg.root_dir, &cfg.pod_logs_dir] {
        std::fs::create_dir_all(dir).map_err(|source| HollowError::StateDir {
            node: name.to_string(),
            path: dir.clone(),
            source,
        })?;
    }
    let agent_cfg = AgentConfig::new(&cfg).map_err(|source| HollowError::AgentConfig {
        node: name.to_string(),
        source,
    })?;
    let agent = Agent::hollow(agent_cfg, runtime());
    let joined = join(&cfg, name, &agent).map_err(|source| HollowError::Join {
        node: name.to_string(),
        source: Box::new(source),
    })?;
    Ok(Node {
        agent,
        _joined: joined,
    })
}

/// Until SIGTERM or SIGINT (forever if signals cannot be handled).
async fn wait_for_signal() {
    use smol::stream::StreamExt;
    match async_signal::Signals::new([async_signal::Signal::Term, async_signal::Signal::Int]) {
        Ok(mut s) => {
            if let Some(Ok(sig)) = s.next().await {
                log::info!("hollow: received {sig:?}");
            }
        }
        Err(e) => {
            log::warn!("hollow: cannot handle signals: {e}");
            std::future::pending::<()>().await
        }
    }
}
