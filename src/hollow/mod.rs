//! `picolet-hollow`: N simulated nodes in one process, for measuring a
//! fleet against one control plane (issue #24). Built only with the
//! `hollow` cargo feature, as a binary of its own (src/bin/picolet-hollow.rs);
//! the shipped binary never carries it.
//!
//! Each hollow node is a full agent (pod sources, sync, PLEG, status,
//! Node and Lease heartbeat, Events) joined to the API server with its own
//! identity, over its own in-memory runtime ([`MemoryRuntime::hollow`]):
//! images are present at once, containers run until they are stopped.
//! The node API is off; nothing else is shared but the process and its
//! one executor.
//!
//! Per-node roots under one `--state-dir` (see [`node_config`]): the
//! root dir, pod logs and admin socket of node `NAME` are
//! `STATE/NAME/{root,logs,admin.sock}`, so no two nodes share a path.
//! What is process-wide and harmless: the executor and the logger (one
//! log for every node; lines name their pods and nodes), the probe TLS
//! configuration, the tmpfs `noswap` check and the machine facts, which
//! every node reports as its own. Pod cgroups are off, and eviction and
//! image GC are turned off (they would act on the one machine's disk and
//! memory for every node).
//!
//! Identity: with `--kubeconfig-dir DIR`, node `NAME` uses
//! `DIR/NAME.kubeconfig` (e.g. client certificates issued beforehand);
//! with `--bootstrap-kubeconfig FILE`, each node gets its client
//! certificate through a CSR as a kubelet does, writing
//! `STATE/NAME/kubeconfig`.
//!
//! Files: this one parses the arguments and derives each node's
//! configuration (pure); `run.rs` starts the nodes and runs them.

mod run;

use std::ffi::OsString;
use std::path::PathBuf;

use crate::config::{ConfigError, Flags, KubeletConfig};
use crate::cri::in_memory::MemoryRuntime;

pub use run::run;

/// Arguments of `picolet-hollow`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HollowArgs {
    /// `-h`/`--help`: print [`USAGE`] and do nothing else.
    pub help: bool,
    /// `--nodes N`: how many nodes.
    pub nodes: usize,
    /// `--state-dir DIR`: every node's files, one directory per node.
    pub state_dir: PathBuf,
    /// `--kubeconfig-dir DIR`: `DIR/NAME.kubeconfig` per node.
    pub kubeconfig_dir: Option<PathBuf>,
    /// `--bootstrap-kubeconfig FILE`: each node bootstraps its own
    /// client certificate with it.
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// `--name-prefix P`: node `i` is named `P` then `i` (from 0).
    pub name_prefix: String,
    /// `--config FILE`: the KubeletConfiguration every node starts from.
    pub config: Option<PathBuf>,
    /// Every other `--flag=value`: `picolet run`'s flags, for every node.
    pub flags: Flags,
}

/// What `picolet-hollow` cannot run with.
#[derive(Debug, thiserror::Error)]
pub enum HollowError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Args(#[from] lexopt::Error),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("config file {path}: {source}")]
    ConfigFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("node {node}: creating {path}: {source}")]
    StateDir {
        node: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("node {node}: {source}")]
    AgentConfig {
        node: String,
        source: crate::agent::AgentConfigError,
    },
    #[error("node {node}: {source}")]
    Join {
        node: String,
        source: Box<crate::apiserver::join::JoinError>,
    },
}

/// The usage text of `picolet-hollow`.
pub const USAGE: &str = "\
Usage: picolet-hollow --nodes N --state-dir DIR
                      (--kubeconfig-dir DIR | --bootstrap-kubeconfig FILE)
                      [--name-prefix P] [--config FILE] [--FLAG=VALUE ...]

Runs N simulated nodes in this process, each a full agent over an in-memory
runtime, joined to the API server with its own identity. Node i is named
P<i> (P defaults to \"hollow-\"); its files are under DIR/<name>/.
--kubeconfig-dir: node <name> uses <dir>/<name>.kubeconfig.
--bootstrap-kubeconfig: each node gets its client certificate by CSR.
Any other flag of `picolet run` applies to every node (as --FLAG=VALUE).
";

/// Parses the arguments (those after the program's name).
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<HollowArgs, HollowError> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(args);
    let mut a = HollowArgs {
        name_prefix: "hollow-".into(),
        ..Default::default()
    };
    let mut state_dir = None;
    while let Some(arg) = parser.next()? {
        match arg {
            Short('h') | Long("help") => {
                a.help = true;
                return Ok(a);
            }
            Long("nodes") => a.nodes = parser.value()?.parse()?,
            Long("state-dir") => state_dir = Some(PathBuf::from(parser.value()?)),
            Long("kubeconfig-dir") => a.kubeconfig_dir = Some(parser.value()?.into()),
            Long("bootstrap-kubeconfig") => a.bootstrap_kubeconfig = Some(parser.value()?.into()),
            Long("name-prefix") => a.name_prefix = parser.value()?.string()?,
            Long("config") => a.config = Some(parser.value()?.into()),
            Long(name) => {
                let name = name.to_string();
                let value = parser.value()?.string()?;
                if !a.flags.set(&name, value) {
                    return Err(HollowError::Usage(format!("unknown flag --{name}")));
                }
            }
            _ => return Err(arg.unexpected().into()),
        }
    }
    a.state_dir = state_dir.ok_or_else(|| HollowError::Usage("--state-dir is required".into()))?;
    if a.nodes == 0 {
        return Err(HollowError::Usage("--nodes must be at least 1".into()));
    }
    if a.kubeconfig_dir.is_some() == a.bootstrap_kubeconfig.is_some() {
        return Err(HollowError::Usage(
            "give exactly one of --kubeconfig-dir and --bootstrap-kubeconfig".into(),
        ));
    }
    Ok(a)
}

/// The name of node `i`.
pub fn node_name(args: &HollowArgs, i: usize) -> String {
    format!("{}{i}", args.name_prefix)
}

/// Node `name`'s configuration: `base` with its own identity and its own
/// paths under the state dir, no static pods, no node API, no eviction
/// and no image GC.
pub fn node_config(base: &KubeletConfig, args: &HollowArgs, name: &str) -> KubeletConfig {
    let dir = args.state_dir.join(name);
    let mut c = base.clone();
    c.hostname_override = Some(name.to_string());
    c.root_dir = dir.join("root");
    c.pod_logs_dir = dir.join("logs");
    c.admin_socket = dir.join("admin.sock");
    c.static_pod_path = None;
    c.cgroups_per_qos = false;
    c.eviction_hard.clear();
    c.eviction_soft.clear();
    c.image_gc_high_threshold_percent = 100;
    c.image_gc_low_threshold_percent = 99;
    match (&args.kubeconfig_dir, &args.bootstrap_kubeconfig) {
        (Some(d), _) => {
            c.kubeconfig = Some(d.join(format!("{name}.kubeconfig")));
            c.bootstrap_kubeconfig = None;
        }
        (None, b) => {
            c.kubeconfig = Some(dir.join("kubeconfig"));
            c.bootstrap_kubeconfig = b.clone();
        }
    }
    c
}

/// A hollow node's runtime.
pub fn runtime() -> MemoryRuntime {
    MemoryRuntime::hollow()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Result<HollowArgs, HollowError> {
        parse(v.iter().map(OsString::from))
    }

    #[test]
    fn the_arguments_name_the_nodes_their_state_dir_and_their_identity() {
        let a = args(&[
            "--nodes",
            "3",
            "--state-dir",
            "/s",
            "--kubeconfig-dir=/k",
            "--node-status-update-frequency=20s",
        ])
        .unwrap();
        assert_eq!(a.nodes, 3);
        assert_eq!(a.state_dir, PathBuf::from("/s"));
        assert_eq!(node_name(&a, 2), "hollow-2");
        assert!(args(&["--nodes=1", "--state-dir=/s"]).is_err());
        assert!(args(&[
            "--nodes=1",
            "--state-dir=/s",
            "--kubeconfig-dir=/k",
            "--nope=1"
        ])
        .is_err());
    }

    #[test]
    fn each_node_has_its_own_paths_and_kubeconfig_under_the_state_dir() {
        let a = args(&["--nodes=2", "--state-dir=/s", "--kubeconfig-dir=/k"]).unwrap();
        let c = node_config(&KubeletConfig::default(), &a, "hollow-1");
        assert_eq!(c.node_name(), "hollow-1");
        assert_eq!(c.root_dir, PathBuf::from("/s/hollow-1/root"));
        assert_eq!(c.pod_logs_dir, PathBuf::from("/s/hollow-1/logs"));
        assert_eq!(c.admin_socket, PathBuf::from("/s/hollow-1/admin.sock"));
        assert_eq!(c.kubeconfig, Some(PathBuf::from("/k/hollow-1.kubeconfig")));
        assert_eq!(c.static_pod_path, None);
        assert!(c.eviction_hard.is_empty());
        let b = args(&["--nodes=2", "--state-dir=/s", "--bootstrap-kubeconfig=/b"]).unwrap();
        let c = node_config(&KubeletConfig::default(), &b, "hollow-0");
        assert_eq!(c.kubeconfig, Some(PathBuf::from("/s/hollow-0/kubeconfig")));
        assert_eq!(c.bootstrap_kubeconfig, Some(PathBuf::from("/b")));
    }
}
