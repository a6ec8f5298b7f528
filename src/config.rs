//! KubeletConfiguration: reading, defaulting and validating picolet's settings.
//!
//! This module owns everything that decides *what* picolet is configured to
//! do, before any I/O happens on the node:
//!
//! * parsing a `kubelet.config.k8s.io/v1beta1` `KubeletConfiguration` file
//!   (YAML, or JSON when the file starts with `{`) into a typed, validated
//!   [`KubeletConfig`], filling kubelet's defaults for unset fields;
//! * applying command-line [`Flags`] on top (flags override the file, as with
//!   kubelet) with [`KubeletConfig::apply_flags`];
//! * the small value grammars the rest of the crate shares: Go durations
//!   ([`parse_go_duration`], [`format_go_duration`]) and Kubernetes quantities
//!   ([`parse_quantity_bytes`], [`parse_quantity_millis`], config-level rules
//!   on top of the crate's one quantity parser in [`crate::quantity`]).
//!
//! Why it is shaped this way: picolet accepts real kubelet configuration files
//! so that an edge node can be moved between picolet and kubelet without
//! rewriting its config. Fields picolet implements are checked strictly (a bad
//! value is an error naming the field and the file). Fields picolet does not
//! implement, whether they are real kubelet fields (`address`, `featureGates`,
//! ...) or typos, are returned in [`LoadedConfig::unknown_fields`] so the
//! caller can warn once per name; [`is_upstream_field`] tells the two apart
//! for a better warning. Settings that would silently weaken security or that
//! picolet cannot honour (`readOnlyPort != 0`, anonymous authentication,
//! `cgroupDriver: systemd`) are errors rather than warnings.
//!
//! The file is decoded into a `serde_json::Value` (via `serde_yaml_ng`) and
//! known fields are pulled out by name; flags are turned into the same
//! `Value`s and go through the same per-field code, so a value is validated
//! identically whether it comes from the file or from a flag.
//!
//! Options that kubelet only takes from flags and that are picolet-specific
//! (`root_dir`, `hostname_override`, `admin_socket`, `board`) live in
//! [`KubeletConfig`] too, so the agent receives one value with everything.
//!
//! Only [`load`] and [`KubeletConfig::node_name`] touch the filesystem; the
//! rest is pure and unit-tested below.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::quantity::Quantity;

/// The only `apiVersion` picolet accepts.
pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
/// The only `kind` picolet accepts.
pub const KIND: &str = "KubeletConfiguration";

/// picolet's default `staticPodPath`. Kubelet's default is empty (no static
/// pods), but static pods are picolet's main pod source, so an unset field
/// means the conventional kubeadm directory. Set `staticPodPath: ""` (or
/// `--pod-manifest-path=`) to disable static pods.
pub const DEFAULT_STATIC_POD_PATH: &str = "/etc/kubernetes/manifests";
/// Kubelet's default CRI endpoint.
pub const DEFAULT_CONTAINER_RUNTIME_ENDPOINT: &str = "unix:///run/containerd/containerd.sock";
/// Kubelet's default `podLogsDir`.
pub const DEFAULT_POD_LOGS_DIR: &str = "/var/log/pods";
/// picolet's state directory (kubelet's is `/var/lib/kubelet`; picolet uses
/// its own so the two never share state on one machine).
pub const DEFAULT_ROOT_DIR: &str = "/var/lib/picolet";
/// Where the admin socket (used by `picolet get pods`) listens.
pub const DEFAULT_ADMIN_SOCKET: &str = "/run/picolet/picolet.sock";
/// Highest accepted log verbosity (`-v`).
pub const MAX_VERBOSITY: u8 = 10;

/// Eviction signals picolet accepts in `evictionHard` (kubelet's set).
pub const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "allocatableMemory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
];

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// Why a configuration could not be loaded. Every variant names where the
/// problem is: the file (and field, line, column) or the flag.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not well-formed YAML / JSON.
    #[error("{}{}: invalid {format}: {message}", path.display(), fmt_position(*line, *column))]
    Syntax {
        path: PathBuf,
        /// `"YAML"` or `"JSON"`.
        format: &'static str,
        /// 1-based; `None` when the parser gave no position.
        line: Option<usize>,
        column: Option<usize>,
        message: String,
    },
    /// The file parsed but is not a KubeletConfiguration document at all.
    #[error("{}: {message}", path.display())]
    Document { path: PathBuf, message: String },
    /// A field of the file has a bad value. `field` is a dotted path for
    /// nested fields (`authentication.anonymous.enabled`).
    #[error("{}: field \"{field}\": {message}", path.display())]
    Field {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// A command-line flag has a bad value. `flag` includes the dashes.
    #[error("flag {flag}: {message}")]
    Flag { flag: String, message: String },
}

fn fmt_position(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    }
}

/// A string that is not a valid Go duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason}")]
pub struct DurationError {
    pub input: String,
    pub reason: String,
}

/// A string that is not a valid (or not an acceptable) Kubernetes quantity.
/// `reason` is a [`crate::quantity::QuantityError`]'s message, or a rule of
/// the config's own (no sub-unit suffixes on byte sizes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {input:?}: {reason}")]
pub struct QuantityError {
    pub input: String,
    pub reason: String,
}

// ---------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------

/// The cgroup driver. Only `cgroupfs` is implemented; `systemd` is rejected
/// with an explicit "not supported yet" error rather than misbehaving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupDriver {
    Cgroupfs,
}

/// One `evictionHard` threshold: an absolute amount or a percentage of
/// capacity. The unit of `Quantity` depends on the signal: bytes for
/// `*.available` memory/filesystem signals, a count for `*.inodesFree` and
/// `pid.available`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EvictionThreshold {
    Quantity(u64),
    /// 0.0..=100.0
    Percentage(f64),
}

impl fmt::Display for EvictionThreshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvictionThreshold::Quantity(q) => write!(f, "{q}"),
            EvictionThreshold::Percentage(p) => write!(f, "{p}%"),
        }
    }
}

/// `systemReserved` / `kubeReserved`: resources set aside from node
/// allocatable. `None` means nothing reserved for that resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReservedResources {
    /// `cpu`, in millicores (`"500m"` = 500, `"1"` = 1000).
    pub cpu_millis: Option<u64>,
    /// `memory`, in bytes.
    pub memory_bytes: Option<u64>,
    /// `ephemeral-storage`, in bytes.
    pub ephemeral_storage_bytes: Option<u64>,
    /// `pid`, a count.
    pub pids: Option<u64>,
}

/// picolet's validated configuration: the KubeletConfiguration fields picolet
/// implements (defaults = kubelet's, except `static_pod_path`), plus the
/// flag-only options at the end.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeletConfig {
    /// `staticPodPath` / `--pod-manifest-path`. `None` = no static pods.
    /// Default [`DEFAULT_STATIC_POD_PATH`]. A relative path in the file is
    /// resolved against the file's directory (as kubelet does).
    pub static_pod_path: Option<PathBuf>,
    /// `containerRuntimeEndpoint` as given (`unix:///path` or `/path`),
    /// validated: only unix sockets with absolute paths are accepted. Use
    /// [`KubeletConfig::runtime_socket_path`] for the socket path.
    pub container_runtime_endpoint: String,
    /// `cgroupDriver`.
    pub cgroup_driver: CgroupDriver,
    /// `cgroupRoot`, a cgroup path starting with `/` (relative to the
    /// cgroup mount, not a filesystem path). Default `/`.
    pub cgroup_root: String,
    /// `cgroupsPerQOS`. Default true.
    pub cgroups_per_qos: bool,
    /// `podLogsDir`, absolute. Default `/var/log/pods`.
    pub pod_logs_dir: PathBuf,
    /// `fileCheckFrequency`: static pod directory rescan period. Default 20s.
    pub file_check_frequency: Duration,
    /// `syncFrequency`: periodic pod resync. Default 1m.
    pub sync_frequency: Duration,
    /// `maxPods`. Default 110.
    pub max_pods: u32,
    /// `runtimeRequestTimeout`: CRI call timeout. Default 2m.
    pub runtime_request_timeout: Duration,
    /// `containerLogMaxSize`, in bytes. Default 10Mi.
    pub container_log_max_size: u64,
    /// `containerLogMaxFiles`, >= 2. Default 5.
    pub container_log_max_files: u32,
    /// `serializeImagePulls`. Default true.
    pub serialize_image_pulls: bool,
    /// `clusterDNS`. Default empty.
    pub cluster_dns: Vec<IpAddr>,
    /// `clusterDomain`. Default empty.
    pub cluster_domain: String,
    /// `podPidsLimit`; -1 (or 0) = unlimited. Default -1.
    pub pod_pids_limit: i64,
    /// `evictionHard`, signal -> threshold. A map given in the file or by
    /// flag *replaces* the defaults (kubelet without MergeDefaultEvictionSettings).
    pub eviction_hard: BTreeMap<String, EvictionThreshold>,
    /// `systemReserved`.
    pub system_reserved: ReservedResources,
    /// `kubeReserved`.
    pub kube_reserved: ReservedResources,
    /// `imageGCHighThresholdPercent`, 0..=100. Default 85.
    pub image_gc_high_threshold_percent: u8,
    /// `imageGCLowThresholdPercent`, 0..=100 and < high. Default 80.
    pub image_gc_low_threshold_percent: u8,
    /// `nodeStatusUpdateFrequency`. Default 10s.
    pub node_status_update_frequency: Duration,
    /// `nodeLeaseDurationSeconds`. Default 40.
    pub node_lease_duration_seconds: u32,
    /// `logging.verbosity` / `-v`, 0..=10. Default 0.
    pub verbosity: u8,

    // ---- flag-only, picolet-specific ----
    /// `--root-dir`: picolet's state directory. Default [`DEFAULT_ROOT_DIR`].
    pub root_dir: PathBuf,
    /// `--hostname-override`, validated and lowercased.
    pub hostname_override: Option<String>,
    /// `--admin-socket`. Default [`DEFAULT_ADMIN_SOCKET`].
    pub admin_socket: PathBuf,
    /// `--board`: reserved for board profiles; not interpreted yet.
    pub board: Option<String>,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        KubeletConfig {
            static_pod_path: Some(PathBuf::from(DEFAULT_STATIC_POD_PATH)),
            container_runtime_endpoint: DEFAULT_CONTAINER_RUNTIME_ENDPOINT.to_string(),
            cgroup_driver: CgroupDriver::Cgroupfs,
            cgroup_root: "/".to_string(),
            cgroups_per_qos: true,
            pod_logs_dir: PathBuf::from(DEFAULT_POD_LOGS_DIR),
            file_check_frequency: Duration::from_secs(20),
            sync_frequency: Duration::from_secs(60),
            max_pods: 110,
            runtime_request_timeout: Duration::from_secs(120),
            container_log_max_size: 10 * 1024 * 1024,
            container_log_max_files: 5,
            serialize_image_pulls: true,
            cluster_dns: Vec::new(),
            cluster_domain: String::new(),
            pod_pids_limit: -1,
            eviction_hard: default_eviction_hard(),
            system_reserved: ReservedResources::default(),
            kube_reserved: ReservedResources::default(),
            image_gc_high_threshold_percent: 85,
            image_gc_low_threshold_percent: 80,
            node_status_update_frequency: Duration::from_secs(10),
            node_lease_duration_seconds: 40,
            verbosity: 0,
            root_dir: PathBuf::from(DEFAULT_ROOT_DIR),
            hostname_override: None,
            admin_socket: PathBuf::from(DEFAULT_ADMIN_SOCKET),
            board: None,
        }
    }
}

/// Kubelet's default hard eviction thresholds.
pub fn default_eviction_hard() -> BTreeMap<String, EvictionThreshold> {
    BTreeMap::from([
        (
            "memory.available".to_string(),
            EvictionThreshold::Quantity(100 * 1024 * 1024),
        ),
        (
            "nodefs.available".to_string(),
            EvictionThreshold::Percentage(10.0),
        ),
        (
            "nodefs.inodesFree".to_string(),
            EvictionThreshold::Percentage(5.0),
        ),
        (
            "imagefs.available".to_string(),
            EvictionThreshold::Percentage(15.0),
        ),
    ])
}

/// A parsed configuration file.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    pub config: KubeletConfig,
    /// Fields picolet ignored: unknown names and kubelet fields picolet does
    /// not implement, as dotted paths (`authentication.foo`), each once, in
    /// document-key order (sorted). Warn about each one.
    pub unknown_fields: Vec<String>,
}

/// Command-line overrides, as raw strings exactly as given (the CLI does no
/// validation; [`KubeletConfig::apply_flags`] does, with the same rules as the
/// file). `None` = flag not given. Boolean flags given bare are `"true"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// `--pod-manifest-path`; empty disables static pods.
    pub pod_manifest_path: Option<String>,
    pub container_runtime_endpoint: Option<String>,
    pub cgroup_driver: Option<String>,
    pub cgroup_root: Option<String>,
    pub cgroups_per_qos: Option<String>,
    pub file_check_frequency: Option<String>,
    pub sync_frequency: Option<String>,
    pub max_pods: Option<String>,
    pub runtime_request_timeout: Option<String>,
    pub container_log_max_size: Option<String>,
    pub container_log_max_files: Option<String>,
    pub serialize_image_pulls: Option<String>,
    /// `--cluster-dns`, one entry per occurrence, each comma-separated.
    pub cluster_dns: Option<Vec<String>>,
    pub cluster_domain: Option<String>,
    pub pod_pids_limit: Option<String>,
    /// `--eviction-hard`, one entry per occurrence, each `signal<value,...`.
    pub eviction_hard: Option<Vec<String>>,
    pub node_status_update_frequency: Option<String>,
    /// `-v` / `--v`, already a number (the CLI checks it, so the logger can
    /// be set up before the configuration is loaded); range-checked again
    /// by `apply_flags`.
    pub verbosity: Option<u8>,
    pub root_dir: Option<String>,
    pub hostname_override: Option<String>,
    pub admin_socket: Option<String>,
    pub board: Option<String>,
}

/// How a flag takes its value on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// `--flag VALUE` or `--flag=VALUE`.
    Value,
    /// `--flag` (= true) or `--flag=true|false`.
    Bool,
    /// Like `Value`, but may be repeated; occurrences accumulate.
    List,
}

/// Every flag [`Flags`] holds (long name without dashes), how it takes its
/// value, and the config-file field it overrides (`None` = flag-only).
pub const FLAGS: &[(&str, FlagKind, Option<&str>)] = &[
    ("pod-manifest-path", FlagKind::Value, Some("staticPodPath")),
    (
        "container-runtime-endpoint",
        FlagKind::Value,
        Some("containerRuntimeEndpoint"),
    ),
    ("cgroup-driver", FlagKind::Value, Some("cgroupDriver")),
    ("cgroup-root", FlagKind::Value, Some("cgroupRoot")),
    ("cgroups-per-qos", FlagKind::Bool, Some("cgroupsPerQOS")),
    (
        "file-check-frequency",
        FlagKind::Value,
        Some("fileCheckFrequency"),
    ),
    ("sync-frequency", FlagKind::Value, Some("syncFrequency")),
    ("max-pods", FlagKind::Value, Some("maxPods")),
    (
        "runtime-request-timeout",
        FlagKind::Value,
        Some("runtimeRequestTimeout"),
    ),
    (
        "container-log-max-size",
        FlagKind::Value,
        Some("containerLogMaxSize"),
    ),
    (
        "container-log-max-files",
        FlagKind::Value,
        Some("containerLogMaxFiles"),
    ),
    (
        "serialize-image-pulls",
        FlagKind::Bool,
        Some("serializeImagePulls"),
    ),
    ("cluster-dns", FlagKind::List, Some("clusterDNS")),
    ("cluster-domain", FlagKind::Value, Some("clusterDomain")),
    ("pod-pids-limit", FlagKind::Value, Some("podPidsLimit")),
    ("eviction-hard", FlagKind::List, Some("evictionHard")),
    (
        "node-status-update-frequency",
        FlagKind::Value,
        Some("nodeStatusUpdateFrequency"),
    ),
    ("v", FlagKind::Value, Some("logging.verbosity")),
    ("root-dir", FlagKind::Value, None),
    ("hostname-override", FlagKind::Value, None),
    ("admin-socket", FlagKind::Value, None),
    ("board", FlagKind::Value, None),
];

/// How the flag `name` (long name, no dashes) takes its value; `None` if
/// picolet has no such flag.
pub fn flag_kind(name: &str) -> Option<FlagKind> {
    FLAGS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, k, _)| *k)
}

impl Flags {
    /// Records one occurrence of flag `name` (long name, no dashes). Returns
    /// false if there is no such string flag (`v` is typed: set
    /// [`Flags::verbosity`] directly). Repeated `List` flags accumulate;
    /// other repeated flags keep the last value.
    pub fn set(&mut self, name: &str, value: String) -> bool {
        let slot = match name {
            "cluster-dns" => {
                self.cluster_dns.get_or_insert_with(Vec::new).push(value);
                return true;
            }
            "eviction-hard" => {
                self.eviction_hard.get_or_insert_with(Vec::new).push(value);
                return true;
            }
            _ => match self.slot_mut(name) {
                Some(slot) => slot,
                None => return false,
            },
        };
        *slot = Some(value);
        true
    }

    fn slot_mut(&mut self, name: &str) -> Option<&mut Option<String>> {
        Some(match name {
            "pod-manifest-path" => &mut self.pod_manifest_path,
            "container-runtime-endpoint" => &mut self.container_runtime_endpoint,
            "cgroup-driver" => &mut self.cgroup_driver,
            "cgroup-root" => &mut self.cgroup_root,
            "cgroups-per-qos" => &mut self.cgroups_per_qos,
            "file-check-frequency" => &mut self.file_check_frequency,
            "sync-frequency" => &mut self.sync_frequency,
            "max-pods" => &mut self.max_pods,
            "runtime-request-timeout" => &mut self.runtime_request_timeout,
            "container-log-max-size" => &mut self.container_log_max_size,
            "container-log-max-files" => &mut self.container_log_max_files,
            "serialize-image-pulls" => &mut self.serialize_image_pulls,
            "cluster-domain" => &mut self.cluster_domain,
            "pod-pids-limit" => &mut self.pod_pids_limit,
            "node-status-update-frequency" => &mut self.node_status_update_frequency,
            "root-dir" => &mut self.root_dir,
            "hostname-override" => &mut self.hostname_override,
            "admin-socket" => &mut self.admin_socket,
            "board" => &mut self.board,
            _ => return None,
        })
    }

    fn get(&self, name: &str) -> Option<&String> {
        // Same table as slot_mut, read-only; lists are handled by the caller.
        match name {
            "pod-manifest-path" => self.pod_manifest_path.as_ref(),
            "container-runtime-endpoint" => self.container_runtime_endpoint.as_ref(),
            "cgroup-driver" => self.cgroup_driver.as_ref(),
            "cgroup-root" => self.cgroup_root.as_ref(),
            "cgroups-per-qos" => self.cgroups_per_qos.as_ref(),
            "file-check-frequency" => self.file_check_frequency.as_ref(),
            "sync-frequency" => self.sync_frequency.as_ref(),
            "max-pods" => self.max_pods.as_ref(),
            "runtime-request-timeout" => self.runtime_request_timeout.as_ref(),
            "container-log-max-size" => self.container_log_max_size.as_ref(),
            "container-log-max-files" => self.container_log_max_files.as_ref(),
            "serialize-image-pulls" => self.serialize_image_pulls.as_ref(),
            "cluster-domain" => self.cluster_domain.as_ref(),
            "pod-pids-limit" => self.pod_pids_limit.as_ref(),
            "node-status-update-frequency" => self.node_status_update_frequency.as_ref(),
            "root-dir" => self.root_dir.as_ref(),
            "hostname-override" => self.hostname_override.as_ref(),
            "admin-socket" => self.admin_socket.as_ref(),
            "board" => self.board.as_ref(),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------

/// Reads and parses the KubeletConfiguration file at `path`.
pub fn load(path: &Path) -> Result<LoadedConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    from_str(&text, path)
}

/// Parses a KubeletConfiguration document. `origin` is the file it came from:
/// it names the file in errors, and relative `staticPodPath`s are resolved
/// against its directory.
pub fn from_str(text: &str, origin: &Path) -> Result<LoadedConfig, ConfigError> {
    let doc = parse_document(text, origin)?;
    let document_err = |message: String| ConfigError::Document {
        path: origin.to_path_buf(),
        message,
    };
    let map = match doc {
        Value::Object(map) => map,
        Value::Null => {
            return Err(document_err(format!(
                "the file is empty; expected a {KIND} (apiVersion: {API_VERSION})"
            )))
        }
        other => {
            return Err(document_err(format!(
                "expected a {KIND} mapping at the top level, got {}",
                json_type(&other)
            )))
        }
    };
    let field_err = |field: &str, message: String| ConfigError::Field {
        path: origin.to_path_buf(),
        field: field.to_string(),
        message,
    };

    check_type_meta(
        &map,
        "kind",
        KIND,
        " (is this a KubeletConfiguration file?)",
    )
    .map_err(|m| field_err("kind", m))?;
    check_type_meta(&map, "apiVersion", API_VERSION, "").map_err(|m| field_err("apiVersion", m))?;

    let base = origin.parent().filter(|p| !p.as_os_str().is_empty());
    let mut config = KubeletConfig::default();
    let mut unknown = Vec::new();
    for (key, value) in &map {
        match key.as_str() {
            "apiVersion" | "kind" => {}
            "authentication" => walk_known(value, key, &AUTHENTICATION, &mut unknown)
                .and_then(|()| check_authentication(value))
                .map_err(|(f, m)| field_err(&f, m))?,
            "authorization" => walk_known(value, key, &AUTHORIZATION, &mut unknown)
                .map_err(|(f, m)| field_err(&f, m))?,
            "logging" => {
                walk_known(value, key, &LOGGING, &mut unknown)
                    .map_err(|(f, m)| field_err(&f, m))?;
                if let Some(v) = value.get("verbosity").filter(|v| !v.is_null()) {
                    set_field(&mut config, "logging.verbosity", v, base)
                        .map_err(|m| field_err("logging.verbosity", m))?;
                }
            }
            k if FILE_FIELDS.contains(&k) => {
                if !value.is_null() {
                    set_field(&mut config, k, value, base).map_err(|m| field_err(k, m))?;
                }
            }
            _ => unknown.push(key.clone()),
        }
    }
    config
        .check_consistency()
        .map_err(|(f, m)| field_err(f, m))?;
    Ok(LoadedConfig {
        config,
        unknown_fields: unknown,
    })
}

/// Parses several KubeletConfiguration documents, each overriding the one
/// before (a board profile, then the user's file). Each layer is first
/// checked on its own, so an error names the right file and position; then
/// the layers are merged field by field (nested mappings are merged, lists
/// and scalars replaced) and the result is parsed as one document.
pub fn from_layers(layers: &[(&str, &Path)]) -> Result<LoadedConfig, ConfigError> {
    let Some(&(_, last_origin)) = layers.last() else {
        return Ok(LoadedConfig {
            config: KubeletConfig::default(),
            unknown_fields: Vec::new(),
        });
    };
    if layers.len() == 1 {
        return from_str(layers[0].0, layers[0].1);
    }
    let mut merged = Value::Object(Default::default());
    let mut unknown = Vec::new();
    for (text, origin) in layers {
        let loaded = from_str(text, origin)?;
        for f in loaded.unknown_fields {
            if !unknown.contains(&f) {
                unknown.push(f);
            }
        }
        merge_value(&mut merged, parse_document(text, origin)?);
    }
    let text = serde_json::to_string(&merged).expect("a JSON value serializes");
    let mut loaded = from_str(&text, last_origin)?;
    loaded.unknown_fields = unknown;
    Ok(loaded)
}

/// Merges `over` into `base`: mappings recursively, anything else replaced.
/// `evictionHard` and the reserved maps are replaced whole, as kubelet does
/// for a map given on a higher layer.
fn merge_value(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                let whole = matches!(
                    k.as_str(),
                    "evictionHard" | "evictionSoft" | "systemReserved" | "kubeReserved"
                );
                match b.get_mut(&k) {
                    Some(slot) if !whole => merge_value(slot, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

fn parse_document(text: &str, origin: &Path) -> Result<Value, ConfigError> {
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text).map_err(|e| {
            let (line, column) = (e.line(), e.column());
            let message = e.to_string();
            let suffix = format!(" at line {line} column {column}");
            ConfigError::Syntax {
                path: origin.to_path_buf(),
                format: "JSON",
                line: (line > 0).then_some(line),
                column: (line > 0).then_some(column),
                message: message
                    .strip_suffix(&suffix)
                    .unwrap_or(&message)
                    .to_string(),
            }
        });
    }
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_yaml_ng::from_str(text).map_err(|e| {
        let loc = e.location().map(|l| (l.line(), l.column()));
        let message = e.to_string();
        let message = match loc {
            Some((l, c)) => {
                let suffix = format!(" at line {l} column {c}");
                message
                    .strip_suffix(&suffix)
                    .unwrap_or(&message)
                    .to_string()
            }
            None => message,
        };
        ConfigError::Syntax {
            path: origin.to_path_buf(),
            format: "YAML",
            line: loc.map(|(l, _)| l),
            column: loc.map(|(_, c)| c),
            message,
        }
    })
}

fn check_type_meta(
    map: &Map<String, Value>,
    key: &str,
    want: &str,
    hint: &str,
) -> Result<(), String> {
    match map.get(key) {
        None | Some(Value::Null) => Err(format!("missing; expected {want:?}{hint}")),
        Some(Value::String(s)) if s == want => Ok(()),
        Some(other) => Err(format!("expected {want:?}, got {}{hint}", show(other))),
    }
}

/// Top-level fields picolet implements (besides apiVersion, kind and the
/// nested authentication / authorization / logging handled separately).
const FILE_FIELDS: &[&str] = &[
    "staticPodPath",
    "containerRuntimeEndpoint",
    "cgroupDriver",
    "cgroupRoot",
    "cgroupsPerQOS",
    "podLogsDir",
    "fileCheckFrequency",
    "syncFrequency",
    "maxPods",
    "runtimeRequestTimeout",
    "containerLogMaxSize",
    "containerLogMaxFiles",
    "serializeImagePulls",
    "clusterDNS",
    "clusterDomain",
    "podPidsLimit",
    "evictionHard",
    "systemReserved",
    "kubeReserved",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "nodeStatusUpdateFrequency",
    "nodeLeaseDurationSeconds",
    "readOnlyPort",
];

/// Is `name` (a top-level field name, or the first segment of a dotted path)
/// a real kubelet v1beta1 KubeletConfiguration field? Lets the caller say
/// "not implemented by picolet" instead of "unknown field (typo?)".
pub fn is_upstream_field(name: &str) -> bool {
    let top = name.split('.').next().unwrap_or(name);
    UPSTREAM_FIELDS.contains(&top)
}

const UPSTREAM_FIELDS: &[&str] = &[
    "enableServer",
    "staticPodPath",
    "podLogsDir",
    "syncFrequency",
    "fileCheckFrequency",
    "httpCheckFrequency",
    "staticPodURL",
    "staticPodURLHeader",
    "address",
    "port",
    "readOnlyPort",
    "tlsCertFile",
    "tlsPrivateKeyFile",
    "tlsCipherSuites",
    "tlsMinVersion",
    "rotateCertificates",
    "serverTLSBootstrap",
    "authentication",
    "authorization",
    "registryPullQPS",
    "registryBurst",
    "imagePullCredentialsVerificationPolicy",
    "preloadedImagesVerificationAllowlist",
    "eventRecordQPS",
    "eventBurst",
    "enableDebuggingHandlers",
    "enableContentionProfiling",
    "healthzPort",
    "healthzBindAddress",
    "oomScoreAdj",
    "clusterDomain",
    "clusterDNS",
    "streamingConnectionIdleTimeout",
    "nodeStatusUpdateFrequency",
    "nodeStatusReportFrequency",
    "nodeLeaseDurationSeconds",
    "imageMinimumGCAge",
    "imageMaximumGCAge",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "volumeStatsAggPeriod",
    "kubeletCgroups",
    "systemCgroups",
    "cgroupRoot",
    "cgroupsPerQOS",
    "cgroupDriver",
    "cpuManagerPolicy",
    "singleProcessOOMKill",
    "cpuManagerPolicyOptions",
    "cpuManagerReconcilePeriod",
    "memoryManagerPolicy",
    "topologyManagerPolicy",
    "topologyManagerScope",
    "topologyManagerPolicyOptions",
    "qosReserved",
    "runtimeRequestTimeout",
    "hairpinMode",
    "maxPods",
    "podCIDR",
    "podPidsLimit",
    "resolvConf",
    "runOnce",
    "cpuCFSQuota",
    "cpuCFSQuotaPeriod",
    "nodeStatusMaxImages",
    "maxOpenFiles",
    "contentType",
    "kubeAPIQPS",
    "kubeAPIBurst",
    "serializeImagePulls",
    "maxParallelImagePulls",
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionPressureTransitionPeriod",
    "evictionMaxPodGracePeriod",
    "evictionMinimumReclaim",
    "mergeDefaultEvictionSettings",
    "podsPerCore",
    "enableControllerAttachDetach",
    "protectKernelDefaults",
    "makeIPTablesUtilChains",
    "iptablesMasqueradeBit",
    "iptablesDropBit",
    "featureGates",
    "failSwapOn",
    "memorySwap",
    "containerLogMaxSize",
    "containerLogMaxFiles",
    "containerLogMaxWorkers",
    "containerLogMonitorInterval",
    "configMapAndSecretChangeDetectionStrategy",
    "systemReserved",
    "kubeReserved",
    "reservedSystemCPUs",
    "showHiddenMetricsForVersion",
    "systemReservedCgroup",
    "kubeReservedCgroup",
    "enforceNodeAllocatable",
    "allowedUnsafeSysctls",
    "volumePluginDir",
    "providerID",
    "kernelMemcgNotification",
    "logging",
    "enableSystemLogHandler",
    "enableSystemLogQuery",
    "shutdownGracePeriod",
    "shutdownGracePeriodCriticalPods",
    "shutdownGracePeriodByPodPriority",
    "crashLoopBackOff",
    "reservedMemory",
    "enableProfilingHandler",
    "enableDebugFlagsHandler",
    "seccompDefault",
    "memoryThrottlingFactor",
    "registerWithTaints",
    "registerNode",
    "tracing",
    "localStorageCapacityIsolation",
    "containerRuntimeEndpoint",
    "imageServiceEndpoint",
    "failCgroupV1",
    "userNamespaces",
];

// --- nested structures picolet accepts but does not act on -----------------

/// The shape of a nested structure: which keys exist (anything else is
/// reported as unknown).
enum Shape {
    Leaf,
    Object(&'static [(&'static str, Shape)]),
}

const AUTHENTICATION: Shape = Shape::Object(&[
    ("anonymous", Shape::Object(&[("enabled", Shape::Leaf)])),
    (
        "webhook",
        Shape::Object(&[("enabled", Shape::Leaf), ("cacheTTL", Shape::Leaf)]),
    ),
    ("x509", Shape::Object(&[("clientCAFile", Shape::Leaf)])),
]);

const AUTHORIZATION: Shape = Shape::Object(&[
    ("mode", Shape::Leaf),
    (
        "webhook",
        Shape::Object(&[
            ("cacheAuthorizedTTL", Shape::Leaf),
            ("cacheUnauthorizedTTL", Shape::Leaf),
        ]),
    ),
]);

const LOGGING: Shape = Shape::Object(&[("verbosity", Shape::Leaf)]);

/// Records keys of `value` not in `shape` as `path.key`; errors (with the
/// dotted field name) if an object is expected and something else is there.
fn walk_known(
    value: &Value,
    path: &str,
    shape: &Shape,
    unknown: &mut Vec<String>,
) -> Result<(), (String, String)> {
    let Shape::Object(fields) = shape else {
        return Ok(());
    };
    match value {
        Value::Null => Ok(()),
        Value::Object(map) => {
            for (key, v) in map {
                let sub = format!("{path}.{key}");
                match fields.iter().find(|(name, _)| name == key) {
                    Some((_, shape)) => walk_known(v, &sub, shape, unknown)?,
                    None => unknown.push(sub),
                }
            }
            Ok(())
        }
        other => Err((
            path.to_string(),
            format!("expected a mapping, got {}", show(other)),
        )),
    }
}

fn check_authentication(value: &Value) -> Result<(), (String, String)> {
    const FIELD: &str = "authentication.anonymous.enabled";
    match value.pointer("/anonymous/enabled") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(()),
        Some(Value::Bool(true)) => Err((
            FIELD.to_string(),
            "anonymous authentication is not supported: picolet never serves anonymous \
             requests; set it to false or remove it"
                .to_string(),
        )),
        Some(other) => Err((
            FIELD.to_string(),
            format!("expected true or false, got {}", show(other)),
        )),
    }
}

// ---------------------------------------------------------------------------
// Fields
// ---------------------------------------------------------------------------

/// Validates `value` for the field `key` and stores it. Shared by the file
/// (`key` = KubeletConfiguration name) and flags (value converted to JSON
/// first). `base` resolves relative paths (the config file's directory).
fn set_field(
    cfg: &mut KubeletConfig,
    key: &str,
    v: &Value,
    base: Option<&Path>,
) -> Result<(), String> {
    match key {
        "staticPodPath" => {
            let s = string(v)?;
            cfg.static_pod_path = if s.is_empty() {
                None
            } else {
                let p = Path::new(s);
                Some(match base {
                    Some(base) if p.is_relative() => base.join(p),
                    _ => p.to_path_buf(),
                })
            };
        }
        "containerRuntimeEndpoint" => {
            let s = string(v)?;
            parse_runtime_endpoint(s)?;
            cfg.container_runtime_endpoint = s.to_string();
        }
        "cgroupDriver" => cfg.cgroup_driver = parse_cgroup_driver(string(v)?)?,
        "cgroupRoot" => {
            let s = string(v)?;
            absolute_path(s, "an absolute cgroup path such as \"/\"")?;
            cfg.cgroup_root = s.to_string();
        }
        "cgroupsPerQOS" => cfg.cgroups_per_qos = boolean(v)?,
        "podLogsDir" => cfg.pod_logs_dir = absolute_path(string(v)?, "an absolute path")?,
        "fileCheckFrequency" => cfg.file_check_frequency = positive_duration(v)?,
        "syncFrequency" => cfg.sync_frequency = positive_duration(v)?,
        "runtimeRequestTimeout" => cfg.runtime_request_timeout = positive_duration(v)?,
        "nodeStatusUpdateFrequency" => cfg.node_status_update_frequency = positive_duration(v)?,
        "maxPods" => {
            cfg.max_pods = integer(v, 1, i64::from(i32::MAX), "a positive integer")? as u32
        }
        "containerLogMaxSize" => {
            let s = quantity_text(v)
                .ok_or_else(|| format!("expected a size such as \"10Mi\", got {}", show(v)))?;
            let bytes = parse_quantity_bytes(&s).map_err(|e| e.to_string())?;
            if bytes == 0 {
                return Err(format!(
                    "expected a positive size such as \"10Mi\", got {s:?}"
                ));
            }
            cfg.container_log_max_size = bytes;
        }
        "containerLogMaxFiles" => {
            cfg.container_log_max_files =
                integer(v, 2, i64::from(i32::MAX), "an integer >= 2")? as u32
        }
        "serializeImagePulls" => cfg.serialize_image_pulls = boolean(v)?,
        "clusterDNS" => {
            let items = v
                .as_array()
                .ok_or_else(|| format!("expected a list of IP addresses, got {}", show(v)))?;
            cfg.cluster_dns = items
                .iter()
                .map(|item| {
                    let s = item
                        .as_str()
                        .ok_or_else(|| format!("expected an IP address, got {}", show(item)))?;
                    s.trim()
                        .parse::<IpAddr>()
                        .map_err(|_| format!("expected an IP address, got {s:?}"))
                })
                .collect::<Result<_, _>>()?;
        }
        "clusterDomain" => {
            let s = string(v)?;
            if !s.is_empty() && !is_dns_subdomain(s.trim_end_matches('.')) {
                return Err(format!(
                    "expected a DNS domain such as \"cluster.local\", got {s:?}"
                ));
            }
            cfg.cluster_domain = s.to_string();
        }
        "podPidsLimit" => {
            cfg.pod_pids_limit = integer(v, -1, i64::MAX, "-1 (unlimited) or a positive integer")?
        }
        "evictionHard" => cfg.eviction_hard = eviction_map(v)?,
        "systemReserved" => cfg.system_reserved = reserved(v)?,
        "kubeReserved" => cfg.kube_reserved = reserved(v)?,
        "imageGCHighThresholdPercent" => {
            cfg.image_gc_high_threshold_percent =
                integer(v, 0, 100, "a percentage between 0 and 100")? as u8
        }
        "imageGCLowThresholdPercent" => {
            cfg.image_gc_low_threshold_percent =
                integer(v, 0, 100, "a percentage between 0 and 100")? as u8
        }
        "nodeLeaseDurationSeconds" => {
            cfg.node_lease_duration_seconds =
                integer(v, 1, i64::from(i32::MAX), "a positive integer")? as u32
        }
        "readOnlyPort" => {
            if integer(v, 0, 65535, "a port number")? != 0 {
                return Err(
                    "picolet never opens a read-only port; set it to 0 or remove it".to_string(),
                );
            }
        }
        "logging.verbosity" => {
            cfg.verbosity = integer(
                v,
                0,
                i64::from(MAX_VERBOSITY),
                "a log level between 0 and 10",
            )? as u8
        }
        // Flag-only options.
        "rootDir" => cfg.root_dir = absolute_path(string(v)?, "an absolute path")?,
        "adminSocket" => cfg.admin_socket = absolute_path(string(v)?, "an absolute path")?,
        "hostnameOverride" => {
            let s = string(v)?;
            let name = normalize_node_name(s).ok_or_else(|| {
                format!("expected a valid node name (a DNS subdomain), got {s:?}")
            })?;
            cfg.hostname_override = Some(name);
        }
        "board" => {
            let s = string(v)?;
            if s.is_empty()
                || !s
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(format!(
                    "expected a board name (letters, digits, '-', '_', '.'), got {s:?}"
                ));
            }
            cfg.board = Some(s.to_string());
        }
        other => return Err(format!("internal error: no handler for field {other:?}")),
    }
    Ok(())
}

/// How a value looks in an error message: strings quoted, others as JSON.
fn show(v: &Value) -> String {
    match v {
        Value::Object(_) => "a mapping".to_string(),
        Value::Array(_) => "a list".to_string(),
        other => other.to_string(),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn string(v: &Value) -> Result<&str, String> {
    v.as_str()
        .ok_or_else(|| format!("expected a string, got {}", show(v)))
}

/// A quantity's text: a string, or a bare number (`memory: 100`), which
/// Kubernetes' Quantity also accepts.
fn quantity_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn boolean(v: &Value) -> Result<bool, String> {
    v.as_bool()
        .ok_or_else(|| format!("expected true or false, got {}", show(v)))
}

fn integer(v: &Value, min: i64, max: i64, what: &str) -> Result<i64, String> {
    match v.as_i64() {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected {what}, got {}", show(v))),
    }
}

fn positive_duration(v: &Value) -> Result<Duration, String> {
    let s = v.as_str().ok_or_else(|| {
        format!(
            "expected a duration string such as \"1m30s\", got {}",
            show(v)
        )
    })?;
    let d = parse_go_duration(s).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err(format!("expected a duration greater than zero, got {s:?}"));
    }
    Ok(d)
}

fn absolute_path(s: &str, what: &str) -> Result<PathBuf, String> {
    if s.starts_with('/') {
        Ok(PathBuf::from(s))
    } else {
        Err(format!("expected {what}, got {s:?}"))
    }
}

fn parse_runtime_endpoint(s: &str) -> Result<PathBuf, String> {
    let path = if let Some(rest) = s.strip_prefix("unix://") {
        rest
    } else if s.contains("://") {
        return Err(format!(
            "only unix sockets are supported (unix:///path or /path), got {s:?}"
        ));
    } else {
        s
    };
    absolute_path(path, "unix:///absolute/path or an absolute socket path").map_err(|_| {
        format!("expected unix:///absolute/path or an absolute socket path, got {s:?}")
    })
}

fn parse_cgroup_driver(s: &str) -> Result<CgroupDriver, String> {
    match s {
        "cgroupfs" => Ok(CgroupDriver::Cgroupfs),
        "systemd" => {
            Err("the systemd cgroup driver is not supported yet; use \"cgroupfs\"".to_string())
        }
        other => Err(format!("expected \"cgroupfs\", got {other:?}")),
    }
}

fn eviction_map(v: &Value) -> Result<BTreeMap<String, EvictionThreshold>, String> {
    let map = v
        .as_object()
        .ok_or_else(|| format!("expected a mapping of signal to threshold, got {}", show(v)))?;
    let mut out = BTreeMap::new();
    for (signal, value) in map {
        if !EVICTION_SIGNALS.contains(&signal.as_str()) {
            return Err(format!(
                "unknown eviction signal {signal:?}; expected one of {}",
                EVICTION_SIGNALS.join(", ")
            ));
        }
        let s = quantity_text(value).ok_or_else(|| {
            format!(
                "signal {signal:?}: expected a quantity or percentage, got {}",
                show(value)
            )
        })?;
        let threshold =
            parse_eviction_threshold(&s).map_err(|e| format!("signal {signal:?}: {e}"))?;
        out.insert(signal.clone(), threshold);
    }
    Ok(out)
}

/// Parses an eviction threshold value: `"10%"` or a quantity (`"100Mi"`).
pub fn parse_eviction_threshold(s: &str) -> Result<EvictionThreshold, String> {
    let s = s.trim();
    if let Some(pct) = s.strip_suffix('%') {
        return match pct.trim().parse::<f64>() {
            Ok(p) if (0.0..=100.0).contains(&p) => Ok(EvictionThreshold::Percentage(p)),
            _ => Err(format!(
                "expected a percentage between 0% and 100%, got {s:?}"
            )),
        };
    }
    parse_quantity_bytes(s)
        .map(EvictionThreshold::Quantity)
        .map_err(|e| format!("expected a quantity (\"100Mi\") or a percentage (\"10%\"): {e}"))
}

fn reserved(v: &Value) -> Result<ReservedResources, String> {
    let map = v.as_object().ok_or_else(|| {
        format!(
            "expected a mapping of resource to quantity, got {}",
            show(v)
        )
    })?;
    let mut out = ReservedResources::default();
    for (resource, value) in map {
        let s = quantity_text(value)
            .ok_or_else(|| format!("{resource}: expected a quantity, got {}", show(value)))?;
        let bytes = || parse_quantity_bytes(&s).map_err(|e| format!("{resource}: {e}"));
        match resource.as_str() {
            "cpu" => {
                out.cpu_millis = Some(parse_quantity_millis(&s).map_err(|e| format!("cpu: {e}"))?)
            }
            "memory" => out.memory_bytes = Some(bytes()?),
            "ephemeral-storage" => out.ephemeral_storage_bytes = Some(bytes()?),
            "pid" => out.pids = Some(bytes()?),
            other => {
                return Err(format!(
                "cannot reserve {other:?}; picolet supports cpu, memory, ephemeral-storage and pid"
            ))
            }
        }
    }
    Ok(out)
}

/// Lowercases and checks a node name (RFC 1123 DNS subdomain), as kubelet
/// does for `--hostname-override` and the machine hostname.
pub fn normalize_node_name(raw: &str) -> Option<String> {
    let name = raw.trim().to_ascii_lowercase();
    is_dns_subdomain(&name).then_some(name)
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

impl KubeletConfig {
    /// Cross-field checks, run after the file and after flags. Returns the
    /// field to blame.
    fn check_consistency(&self) -> Result<(), (&'static str, String)> {
        if self.image_gc_low_threshold_percent >= self.image_gc_high_threshold_percent {
            return Err((
                "imageGCLowThresholdPercent",
                format!(
                    "must be less than imageGCHighThresholdPercent ({}), got {}",
                    self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent
                ),
            ));
        }
        Ok(())
    }

    /// Applies command-line overrides on top of this configuration (flags win
    /// over the file, as with kubelet). Map and list flags (`--eviction-hard`,
    /// `--cluster-dns`) replace the file's value entirely. Relative paths in
    /// flags are kept as given (relative to the working directory), except
    /// where an absolute path is required.
    pub fn apply_flags(&mut self, flags: &Flags) -> Result<(), ConfigError> {
        for (name, kind, file_key) in FLAGS {
            let flag_err = |message: String| ConfigError::Flag {
                flag: format!("--{name}"),
                message,
            };
            let value = match (*name, kind) {
                ("cluster-dns", _) => match &flags.cluster_dns {
                    Some(items) => Value::Array(
                        items
                            .iter()
                            .flat_map(|s| s.split(','))
                            .map(str::trim)
                            .filter(|s| !s.is_empty())
                            .map(|s| Value::String(s.to_string()))
                            .collect(),
                    ),
                    None => continue,
                },
                ("v", _) => match flags.verbosity {
                    Some(level) => Value::from(level),
                    None => continue,
                },
                ("eviction-hard", _) => match &flags.eviction_hard {
                    Some(items) => eviction_flag_to_json(items).map_err(flag_err)?,
                    None => continue,
                },
                (_, FlagKind::Bool) => match flags.get(name) {
                    Some(s) => parse_go_bool(s)
                        .map(Value::Bool)
                        .unwrap_or_else(|| Value::String(s.clone())),
                    None => continue,
                },
                _ => match flags.get(name) {
                    Some(s) => match s.trim().parse::<i64>() {
                        Ok(n) if expects_integer(name) => Value::from(n),
                        _ => Value::String(s.clone()),
                    },
                    None => continue,
                },
            };
            let key = file_key.unwrap_or(match *name {
                "root-dir" => "rootDir",
                "hostname-override" => "hostnameOverride",
                "admin-socket" => "adminSocket",
                _ => "board",
            });
            set_field(self, key, &value, None).map_err(flag_err)?;
        }
        self.check_consistency()
            .map_err(|(field, message)| ConfigError::Flag {
                flag: "(combined with the config file)".to_string(),
                message: format!("{field} {message}"),
            })
    }

    /// The CRI socket path: [`KubeletConfig::container_runtime_endpoint`]
    /// without `unix://`.
    pub fn runtime_socket_path(&self) -> PathBuf {
        parse_runtime_endpoint(&self.container_runtime_endpoint)
            .unwrap_or_else(|_| PathBuf::from(&self.container_runtime_endpoint))
    }

    /// The node's name: `--hostname-override` if given, else the machine's
    /// hostname (`/proc/sys/kernel/hostname`, falling back to `uname`),
    /// trimmed and lowercased as kubelet does. Falls back to `"localhost"` if
    /// neither yields a valid name.
    pub fn node_name(&self) -> String {
        if let Some(name) = &self.hostname_override {
            return name.clone();
        }
        let from_proc = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
        let from_uname = || {
            rustix::system::uname()
                .nodename()
                .to_string_lossy()
                .into_owned()
        };
        from_proc
            .as_deref()
            .and_then(normalize_node_name)
            .or_else(|| normalize_node_name(&from_uname()))
            .unwrap_or_else(|| "localhost".to_string())
    }
}

fn expects_integer(flag: &str) -> bool {
    matches!(
        flag,
        "max-pods" | "container-log-max-files" | "pod-pids-limit"
    )
}

/// Go's `strconv.ParseBool`, which kubelet's boolean flags use.
fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// `--eviction-hard` occurrences (`memory.available<100Mi,nodefs.available<10%`)
/// to the file's map form. `=` is accepted as a separator too. Later
/// occurrences add to (and override keys of) earlier ones.
fn eviction_flag_to_json(items: &[String]) -> Result<Value, String> {
    let mut map = Map::new();
    for pair in items
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (k, v) = pair
            .split_once('<')
            .or_else(|| pair.split_once('='))
            .ok_or_else(|| {
                format!(
                    "expected SIGNAL<VALUE pairs such as \"memory.available<100Mi\", got {pair:?}"
                )
            })?;
        map.insert(k.trim().to_string(), Value::String(v.trim().to_string()));
    }
    Ok(Value::Object(map))
}

// ---------------------------------------------------------------------------
// Go durations
// ---------------------------------------------------------------------------

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Parses a Go `time.Duration` string: `"20s"`, `"1m0s"`, `"1h2m3.5s"`,
/// `"500ms"`, `"1.5µs"`, `"0"`. Units: ns, us (µs, μs), ms, s, m, h.
/// Negative durations are rejected (no picolet setting can use one), except
/// `-0`. Like Go, values beyond ~292 years are an overflow error.
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason: &str| DurationError {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let mut rest = input;
    let mut negative = false;
    if let Some(r) = rest.strip_prefix('-') {
        negative = true;
        rest = r;
    } else if let Some(r) = rest.strip_prefix('+') {
        rest = r;
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(err("empty duration"));
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, r) = rest.split_at(int_len);
        rest = r;
        let mut frac_part = "";
        if let Some(r) = rest.strip_prefix('.') {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &r[..n];
            rest = &r[n..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err("expected a number"));
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (unit, r) = rest.split_at(unit_len);
        rest = r;
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => NANOS_PER_SEC,
            "m" => 60 * NANOS_PER_SEC,
            "h" => 3600 * NANOS_PER_SEC,
            "" => return Err(err("missing unit (ns, us, ms, s, m, h)")),
            other => {
                return Err(DurationError {
                    input: input.to_string(),
                    reason: format!("unknown unit {other:?} (expected ns, us, ms, s, m, h)"),
                })
            }
        };
        let overflow = || err("duration too large");
        let int: u128 = if int_part.is_empty() {
            0
        } else if int_part.len() > 20 {
            return Err(overflow());
        } else {
            int_part.parse().map_err(|_| overflow())?
        };
        // Digits beyond 20 cannot matter at nanosecond resolution.
        let frac_digits = &frac_part[..frac_part.len().min(20)];
        let frac_nanos = if frac_digits.is_empty() {
            0
        } else {
            let f: u128 = frac_digits.parse().map_err(|_| overflow())?;
            f * unit_nanos / 10u128.pow(frac_digits.len() as u32)
        };
        total = int
            .checked_mul(unit_nanos)
            .and_then(|n| n.checked_add(frac_nanos))
            .and_then(|n| n.checked_add(total))
            .ok_or_else(overflow)?;
        if total > i64::MAX as u128 {
            return Err(overflow());
        }
    }
    if negative && total != 0 {
        return Err(err("negative durations are not allowed"));
    }
    Ok(Duration::from_nanos(total as u64))
}

/// Formats a duration as Go's `Duration.String` does: `"1h2m3.5s"`,
/// `"1m0s"`, `"500ms"`, `"1.5µs"`, `"0s"`.
pub fn format_go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", fixed_point(nanos, 3));
    }
    if nanos < NANOS_PER_SEC {
        return format!("{}ms", fixed_point(nanos, 6));
    }
    let seconds = fixed_point(nanos % (60 * NANOS_PER_SEC), 9);
    let total_minutes = nanos / (60 * NANOS_PER_SEC);
    let (hours, minutes) = (total_minutes / 60, total_minutes % 60);
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// `value / 10^digits` as a decimal without trailing zeros.
fn fixed_point(value: u128, digits: u32) -> String {
    let scale = 10u128.pow(digits);
    let (int, frac) = (value / scale, value % scale);
    if frac == 0 {
        return int.to_string();
    }
    let frac = format!("{frac:0width$}", width = digits as usize);
    format!("{int}.{}", frac.trim_end_matches('0'))
}

// ---------------------------------------------------------------------------
// Quantities
// ---------------------------------------------------------------------------

/// Parses with the crate's one quantity parser ([`crate::quantity`]) and
/// names the input in the error.
fn parse_quantity(input: &str) -> Result<Quantity, QuantityError> {
    Quantity::parse(input).map_err(|e| QuantityError::new(input, e))
}

impl QuantityError {
    fn new(input: &str, reason: impl ToString) -> QuantityError {
        QuantityError {
            input: input.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// Parses a Kubernetes quantity as a byte count (or any whole count):
/// `"10Mi"` = 10485760, `"1k"` = 1000, `"1.5Ki"` = 1536, `"1e3"` = 1000,
/// `"123"` = 123. Fractions of a byte round up, as `Quantity.Value()` does.
/// Negative values are rejected, and so are the sub-unit suffixes `m`, `u`
/// and `n`: `"100m"` is a hundred *milli*bytes, almost certainly a typo for
/// `100M` or `100Mi`. That rule is the config's, not the grammar's: pods may
/// say `"100m"` of memory and get 1 byte, as in Kubernetes.
pub fn parse_quantity_bytes(input: &str) -> Result<u64, QuantityError> {
    let q = parse_quantity(input)?;
    if let Some(suffix) = q.sub_unit_suffix() {
        let hint = if suffix == "m" {
            "; did you mean \"M\" (10^6) or \"Mi\" (2^20)?"
        } else {
            ""
        };
        return Err(QuantityError::new(
            input,
            format!(
                "suffix {suffix:?} means a fraction of a unit, which makes no sense here{hint}"
            ),
        ));
    }
    q.value().map_err(|e| QuantityError::new(input, e))
}

/// Parses a Kubernetes quantity in thousandths, as `Quantity.MilliValue()`:
/// for CPU, millicores. `"100m"` = 100, `"0.5"` = 500, `"2"` = 2000,
/// `"1Ki"` = 1024000. Rounds up; negative values are rejected.
pub fn parse_quantity_millis(input: &str) -> Result<u64, QuantityError> {
    parse_quantity(input)?
        .milli_value()
        .map_err(|e| QuantityError::new(input, e))
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod layer_tests {
    use super::*;

    const BOARD: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 16\ncontainerLogMaxSize: 2Mi\nevictionHard: {memory.available: 50Mi, nodefs.available: 500Mi}\n";

    #[test]
    fn a_config_file_overrides_the_board_profile_field_by_field() {
        let file = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 20\nevictionHard: {memory.available: 80Mi}\n";
        let l = from_layers(&[
            (BOARD, Path::new("board:rpi4")),
            (file, Path::new("/etc/picolet/config.yaml")),
        ])
        .unwrap();
        assert_eq!(l.config.max_pods, 20);
        assert_eq!(
            l.config.container_log_max_size,
            2 * 1024 * 1024,
            "kept from the board"
        );
        assert_eq!(
            l.config.eviction_hard.len(),
            1,
            "a map on a higher layer replaces the board's"
        );
    }

    #[test]
    fn an_error_in_a_layer_names_that_layer() {
        let file = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: many\n";
        let e = from_layers(&[
            (BOARD, Path::new("board:rpi4")),
            (file, Path::new("/etc/picolet/config.yaml")),
        ])
        .unwrap_err();
        assert!(
            e.to_string().contains("/etc/picolet/config.yaml") && e.to_string().contains("maxPods"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGIN: &str = "/etc/picolet/config.yaml";

    fn parse(text: &str) -> Result<LoadedConfig, ConfigError> {
        from_str(text, Path::new(ORIGIN))
    }

    fn doc(body: &str) -> String {
        format!("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n{body}")
    }

    fn parse_ok(body: &str) -> LoadedConfig {
        parse(&doc(body)).unwrap_or_else(|e| panic!("{e}"))
    }

    fn parse_err(body: &str) -> String {
        parse(&doc(body))
            .expect_err("expected an error")
            .to_string()
    }

    fn flags_err(flags: &Flags) -> String {
        KubeletConfig::default()
            .apply_flags(flags)
            .expect_err("expected an error")
            .to_string()
    }

    // --- defaults ---

    #[test]
    fn defaults_are_kubelets_except_the_static_pod_path() {
        let c = KubeletConfig::default();
        assert_eq!(
            c.static_pod_path,
            Some(PathBuf::from("/etc/kubernetes/manifests"))
        );
        assert_eq!(
            c.container_runtime_endpoint,
            "unix:///run/containerd/containerd.sock"
        );
        assert_eq!(
            c.runtime_socket_path(),
            PathBuf::from("/run/containerd/containerd.sock")
        );
        assert_eq!(c.cgroup_driver, CgroupDriver::Cgroupfs);
        assert_eq!(c.cgroup_root, "/");
        assert!(c.cgroups_per_qos);
        assert_eq!(c.pod_logs_dir, PathBuf::from("/var/log/pods"));
        assert_eq!(c.file_check_frequency, Duration::from_secs(20));
        assert_eq!(c.sync_frequency, Duration::from_secs(60));
        assert_eq!(c.max_pods, 110);
        assert_eq!(c.runtime_request_timeout, Duration::from_secs(120));
        assert_eq!(c.container_log_max_size, 10 * 1024 * 1024);
        assert_eq!(c.container_log_max_files, 5);
        assert!(c.serialize_image_pulls);
        assert!(c.cluster_dns.is_empty());
        assert_eq!(c.cluster_domain, "");
        assert_eq!(c.pod_pids_limit, -1);
        assert_eq!(c.eviction_hard.len(), 4);
        assert_eq!(
            c.eviction_hard["memory.available"],
            EvictionThreshold::Quantity(104_857_600)
        );
        assert_eq!(
            c.eviction_hard["nodefs.available"],
            EvictionThreshold::Percentage(10.0)
        );
        assert_eq!(
            c.eviction_hard["nodefs.inodesFree"],
            EvictionThreshold::Percentage(5.0)
        );
        assert_eq!(
            c.eviction_hard["imagefs.available"],
            EvictionThreshold::Percentage(15.0)
        );
        assert_eq!(c.system_reserved, ReservedResources::default());
        assert_eq!(c.kube_reserved, ReservedResources::default());
        assert_eq!(c.image_gc_high_threshold_percent, 85);
        assert_eq!(c.image_gc_low_threshold_percent, 80);
        assert_eq!(c.node_status_update_frequency, Duration::from_secs(10));
        assert_eq!(c.node_lease_duration_seconds, 40);
        assert_eq!(c.verbosity, 0);
        assert_eq!(c.root_dir, PathBuf::from("/var/lib/picolet"));
        assert_eq!(c.hostname_override, None);
        assert_eq!(c.admin_socket, PathBuf::from("/run/picolet/picolet.sock"));
        assert_eq!(c.board, None);
    }

    #[test]
    fn a_minimal_file_yields_the_defaults_and_no_unknown_fields() {
        let loaded = parse_ok("");
        assert_eq!(loaded.config, KubeletConfig::default());
        assert!(loaded.unknown_fields.is_empty());
    }

    #[test]
    fn null_values_mean_unset_and_keep_the_default() {
        let loaded = parse_ok("maxPods: null\nsyncFrequency: ~\n");
        assert_eq!(loaded.config, KubeletConfig::default());
    }

    // --- every field ---

    #[test]
    fn every_implemented_field_is_parsed() {
        let loaded = parse_ok(
            r#"
staticPodPath: /srv/manifests
containerRuntimeEndpoint: unix:///run/crio/crio.sock
cgroupDriver: cgroupfs
cgroupRoot: /picolet
cgroupsPerQOS: false
podLogsDir: /data/logs
fileCheckFrequency: 5s
syncFrequency: 1m30s
maxPods: 16
runtimeRequestTimeout: 30s
containerLogMaxSize: 1Mi
containerLogMaxFiles: 2
serializeImagePulls: false
clusterDNS: [10.96.0.10, "fd00::a"]
clusterDomain: cluster.local
podPidsLimit: 1024
evictionHard:
  memory.available: 50Mi
  nodefs.available: "7.5%"
systemReserved:
  cpu: 100m
  memory: 64Mi
  ephemeral-storage: 1Gi
  pid: "100"
kubeReserved:
  cpu: "0.5"
imageGCHighThresholdPercent: 90
imageGCLowThresholdPercent: 70
nodeStatusUpdateFrequency: 20s
nodeLeaseDurationSeconds: 60
readOnlyPort: 0
logging:
  verbosity: 4
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
    cacheTTL: 2m0s
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 5m0s
    cacheUnauthorizedTTL: 30s
"#,
        );
        assert!(
            loaded.unknown_fields.is_empty(),
            "{:?}",
            loaded.unknown_fields
        );
        let c = loaded.config;
        assert_eq!(c.static_pod_path, Some(PathBuf::from("/srv/manifests")));
        assert_eq!(c.container_runtime_endpoint, "unix:///run/crio/crio.sock");
        assert_eq!(
            c.runtime_socket_path(),
            PathBuf::from("/run/crio/crio.sock")
        );
        assert_eq!(c.cgroup_root, "/picolet");
        assert!(!c.cgroups_per_qos);
        assert_eq!(c.pod_logs_dir, PathBuf::from("/data/logs"));
        assert_eq!(c.file_check_frequency, Duration::from_secs(5));
        assert_eq!(c.sync_frequency, Duration::from_secs(90));
        assert_eq!(c.max_pods, 16);
        assert_eq!(c.runtime_request_timeout, Duration::from_secs(30));
        assert_eq!(c.container_log_max_size, 1024 * 1024);
        assert_eq!(c.container_log_max_files, 2);
        assert!(!c.serialize_image_pulls);
        assert_eq!(
            c.cluster_dns,
            vec![
                "10.96.0.10".parse::<IpAddr>().unwrap(),
                "fd00::a".parse().unwrap()
            ]
        );
        assert_eq!(c.cluster_domain, "cluster.local");
        assert_eq!(c.pod_pids_limit, 1024);
        assert_eq!(
            c.eviction_hard,
            BTreeMap::from([
                (
                    "memory.available".to_string(),
                    EvictionThreshold::Quantity(50 * 1024 * 1024)
                ),
                (
                    "nodefs.available".to_string(),
                    EvictionThreshold::Percentage(7.5)
                ),
            ])
        );
        assert_eq!(
            c.system_reserved,
            ReservedResources {
                cpu_millis: Some(100),
                memory_bytes: Some(64 * 1024 * 1024),
                ephemeral_storage_bytes: Some(1 << 30),
                pids: Some(100),
            }
        );
        assert_eq!(
            c.kube_reserved,
            ReservedResources {
                cpu_millis: Some(500),
                ..Default::default()
            }
        );
        assert_eq!(c.image_gc_high_threshold_percent, 90);
        assert_eq!(c.image_gc_low_threshold_percent, 70);
        assert_eq!(c.node_status_update_frequency, Duration::from_secs(20));
        assert_eq!(c.node_lease_duration_seconds, 60);
        assert_eq!(c.verbosity, 4);
    }

    #[test]
    fn an_empty_static_pod_path_disables_static_pods() {
        assert_eq!(
            parse_ok("staticPodPath: \"\"\n").config.static_pod_path,
            None
        );
    }

    #[test]
    fn a_relative_static_pod_path_is_resolved_against_the_config_files_directory() {
        let c = parse_ok("staticPodPath: manifests\n").config;
        assert_eq!(
            c.static_pod_path,
            Some(PathBuf::from("/etc/picolet/manifests"))
        );
    }

    #[test]
    fn a_bare_absolute_socket_path_is_a_valid_runtime_endpoint() {
        let c = parse_ok("containerRuntimeEndpoint: /run/k3s/containerd/containerd.sock\n").config;
        assert_eq!(
            c.runtime_socket_path(),
            PathBuf::from("/run/k3s/containerd/containerd.sock")
        );
    }

    #[test]
    fn an_empty_eviction_hard_map_disables_hard_eviction() {
        assert!(parse_ok("evictionHard: {}\n")
            .config
            .eviction_hard
            .is_empty());
    }

    // --- unknown fields ---

    #[test]
    fn unknown_and_unimplemented_fields_are_reported_not_rejected() {
        let loaded = parse_ok(
            "address: 0.0.0.0\nport: 10250\nfeatureGates: {Foo: true}\ntlsCertFile: /x\nrotateCertificates: true\nmaxPodz: 3\n",
        );
        assert_eq!(
            loaded.unknown_fields,
            vec![
                "address",
                "featureGates",
                "maxPodz",
                "port",
                "rotateCertificates",
                "tlsCertFile"
            ]
        );
        assert_eq!(loaded.config, KubeletConfig::default());
    }

    #[test]
    fn unknown_nested_fields_are_reported_with_a_dotted_path() {
        let loaded = parse_ok(
            "authentication:\n  foo: 1\n  webhook:\n    bar: true\nauthorization:\n  baz: x\nlogging:\n  format: json\n  verbosity: 2\n",
        );
        assert_eq!(
            loaded.unknown_fields,
            vec![
                "authentication.foo",
                "authentication.webhook.bar",
                "authorization.baz",
                "logging.format"
            ]
        );
        assert_eq!(loaded.config.verbosity, 2);
    }

    #[test]
    fn upstream_kubelet_fields_are_told_apart_from_typos() {
        assert!(is_upstream_field("featureGates"));
        assert!(is_upstream_field("address"));
        assert!(is_upstream_field("logging.format"));
        assert!(!is_upstream_field("maxPodz"));
        assert!(!is_upstream_field("authentication2.foo"));
    }

    // --- bad values ---

    #[test]
    fn a_field_with_a_bad_value_names_the_field_and_the_file() {
        assert_eq!(
            parse_err("maxPods: abc\n"),
            r#"/etc/picolet/config.yaml: field "maxPods": expected a positive integer, got "abc""#
        );
    }

    #[test]
    fn zero_or_fractional_max_pods_is_rejected() {
        assert!(parse_err("maxPods: 0\n").contains("expected a positive integer, got 0"));
        assert!(parse_err("maxPods: 1.5\n").contains("got 1.5"));
    }

    #[test]
    fn the_systemd_cgroup_driver_is_rejected_as_not_supported_yet() {
        let e = parse_err("cgroupDriver: systemd\n");
        assert!(e.contains(r#"field "cgroupDriver""#), "{e}");
        assert!(e.contains("not supported yet"), "{e}");
    }

    #[test]
    fn a_non_zero_read_only_port_is_rejected() {
        let e = parse_err("readOnlyPort: 10255\n");
        assert!(
            e.contains(r#"field "readOnlyPort": picolet never opens a read-only port"#),
            "{e}"
        );
    }

    #[test]
    fn anonymous_authentication_is_rejected() {
        let e = parse_err("authentication:\n  anonymous:\n    enabled: true\n");
        assert!(
            e.contains(r#"field "authentication.anonymous.enabled""#),
            "{e}"
        );
        let e = parse_err("authentication:\n  anonymous:\n    enabled: yes please\n");
        assert!(e.contains("expected true or false"), "{e}");
        let e = parse_err("authentication: 3\n");
        assert!(
            e.contains(r#"field "authentication": expected a mapping"#),
            "{e}"
        );
    }

    #[test]
    fn runtime_endpoints_other_than_unix_sockets_are_rejected() {
        assert!(
            parse_err("containerRuntimeEndpoint: tcp://1.2.3.4:5\n").contains("only unix sockets")
        );
        assert!(parse_err("containerRuntimeEndpoint: unix://relative.sock\n").contains("absolute"));
        assert!(parse_err("containerRuntimeEndpoint: \"\"\n").contains("absolute"));
    }

    #[test]
    fn relative_pod_logs_dir_and_cgroup_root_are_rejected() {
        assert!(parse_err("podLogsDir: logs\n")
            .contains(r#"field "podLogsDir": expected an absolute path, got "logs""#));
        assert!(parse_err("cgroupRoot: picolet\n").contains(r#"field "cgroupRoot""#));
    }

    #[test]
    fn bad_durations_name_the_field() {
        let e = parse_err("syncFrequency: 1 minute\n");
        assert!(
            e.starts_with(
                r#"/etc/picolet/config.yaml: field "syncFrequency": invalid duration "1 minute""#
            ),
            "{e}"
        );
        assert!(parse_err("fileCheckFrequency: 0s\n").contains("greater than zero"));
        assert!(parse_err("runtimeRequestTimeout: 30\n").contains("expected a duration string"));
        assert!(parse_err("nodeStatusUpdateFrequency: -10s\n").contains("negative"));
    }

    #[test]
    fn too_few_log_files_and_a_zero_log_size_are_rejected() {
        assert!(parse_err("containerLogMaxFiles: 1\n").contains("expected an integer >= 2, got 1"));
        assert!(parse_err("containerLogMaxSize: \"0\"\n").contains("positive size"));
        assert!(parse_err("containerLogMaxSize: 10m\n").contains("did you mean"));
    }

    #[test]
    fn cluster_dns_entries_must_be_ip_addresses() {
        let e = parse_err("clusterDNS: [10.0.0.10, kube-dns]\n");
        assert!(
            e.contains(r#"field "clusterDNS": expected an IP address, got "kube-dns""#),
            "{e}"
        );
        assert!(parse_err("clusterDNS: 10.0.0.10\n").contains("expected a list"));
    }

    #[test]
    fn eviction_thresholds_must_be_known_signals_with_quantities_or_percentages() {
        assert!(parse_err("evictionHard:\n  memory.free: 1Mi\n")
            .contains("unknown eviction signal \"memory.free\""));
        assert!(parse_err("evictionHard:\n  memory.available: lots\n")
            .contains("signal \"memory.available\""));
        assert!(
            parse_err("evictionHard:\n  nodefs.available: 120%\n").contains("between 0% and 100%")
        );
    }

    #[test]
    fn reserved_resources_must_be_known_and_non_negative() {
        assert!(parse_err("systemReserved:\n  gpu: \"1\"\n").contains("cannot reserve \"gpu\""));
        assert!(parse_err("kubeReserved:\n  memory: -1Mi\n").contains("negative"));
        assert!(parse_err("kubeReserved:\n  memory: [1]\n")
            .contains("memory: expected a quantity, got a list"));
        assert_eq!(
            parse_ok("kubeReserved:\n  memory: 100\n  cpu: 1\n")
                .config
                .kube_reserved
                .cpu_millis,
            Some(1000)
        );
    }

    #[test]
    fn image_gc_thresholds_must_be_percentages_with_low_below_high() {
        assert!(parse_err("imageGCHighThresholdPercent: 101\n").contains("between 0 and 100"));
        let e = parse_err("imageGCHighThresholdPercent: 50\n");
        assert!(e.contains(r#"field "imageGCLowThresholdPercent": must be less than imageGCHighThresholdPercent (50), got 80"#), "{e}");
    }

    #[test]
    fn pod_pids_limit_below_minus_one_is_rejected() {
        assert!(parse_err("podPidsLimit: -2\n").contains("-1 (unlimited)"));
        assert_eq!(parse_ok("podPidsLimit: 0\n").config.pod_pids_limit, 0);
    }

    #[test]
    fn verbosity_above_ten_is_rejected() {
        assert!(parse_err("logging:\n  verbosity: 11\n").contains(r#"field "logging.verbosity""#));
    }

    #[test]
    fn a_bad_cluster_domain_is_rejected() {
        assert!(parse_err("clusterDomain: \"Cluster Local\"\n").contains("DNS domain"));
        assert_eq!(
            parse_ok("clusterDomain: cluster.local.\n")
                .config
                .cluster_domain,
            "cluster.local."
        );
    }

    // --- document level ---

    #[test]
    fn a_wrong_kind_or_api_version_is_a_clear_error() {
        let e = parse("apiVersion: v1\nkind: Pod\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            r#"/etc/picolet/config.yaml: field "kind": expected "KubeletConfiguration", got "Pod" (is this a KubeletConfiguration file?)"#
        );
        let e = parse("apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(r#"field "apiVersion": expected "kubelet.config.k8s.io/v1beta1", got "kubelet.config.k8s.io/v1""#), "{e}");
        let e = parse("kind: KubeletConfiguration\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(r#"field "apiVersion": missing"#), "{e}");
    }

    #[test]
    fn an_empty_file_or_a_non_mapping_is_rejected() {
        assert!(parse("")
            .unwrap_err()
            .to_string()
            .contains("the file is empty"));
        assert!(parse("- a\n- b\n")
            .unwrap_err()
            .to_string()
            .contains("got a list"));
    }

    #[test]
    fn yaml_syntax_errors_carry_the_file_line_and_column() {
        let err = parse(&doc("maxPods: 3\n  bad: [\n")).unwrap_err();
        match &err {
            ConfigError::Syntax {
                path,
                format,
                line,
                column,
                ..
            } => {
                assert_eq!(path, Path::new(ORIGIN));
                assert_eq!(*format, "YAML");
                assert_eq!(*line, Some(4));
                assert!(column.is_some());
            }
            other => panic!("unexpected error {other:?}"),
        }
        let text = err.to_string();
        assert!(text.starts_with("/etc/picolet/config.yaml:4:"), "{text}");
        assert!(text.contains("invalid YAML"), "{text}");
    }

    #[test]
    fn a_json_file_is_parsed() {
        let text = r#"{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                       "maxPods": 7, "evictionHard": {"memory.available": "1Gi"}, "bogus": 1}"#;
        let loaded = from_str(text, Path::new("/etc/picolet/config.json")).unwrap();
        assert_eq!(loaded.config.max_pods, 7);
        assert_eq!(
            loaded.config.eviction_hard["memory.available"],
            EvictionThreshold::Quantity(1 << 30)
        );
        assert_eq!(loaded.unknown_fields, vec!["bogus"]);
    }

    #[test]
    fn json_syntax_errors_carry_the_file_line_and_column() {
        let err = from_str("{\n  \"maxPods\": 3,\n  oops\n}", Path::new("/c.json")).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("/c.json:3:"), "{text}");
        assert!(text.contains("invalid JSON"), "{text}");
        assert!(!text.contains("at line"), "position given twice: {text}");
    }

    #[test]
    fn load_reports_a_missing_file_by_name() {
        let e = load(Path::new("/nonexistent/picolet.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent/picolet.yaml: "), "{e}");
    }

    // --- flags ---

    #[test]
    fn flags_override_the_file() {
        let mut c = parse_ok("maxPods: 16\nsyncFrequency: 30s\nclusterDNS: [10.0.0.10]\nevictionHard:\n  memory.available: 1Mi\n").config;
        let flags = Flags {
            pod_manifest_path: Some("/srv/pods".into()),
            container_runtime_endpoint: Some("/run/crio.sock".into()),
            cgroup_driver: Some("cgroupfs".into()),
            cgroup_root: Some("/edge".into()),
            cgroups_per_qos: Some("false".into()),
            file_check_frequency: Some("1s".into()),
            sync_frequency: Some("2m".into()),
            max_pods: Some("32".into()),
            runtime_request_timeout: Some("15s".into()),
            container_log_max_size: Some("5M".into()),
            container_log_max_files: Some("3".into()),
            serialize_image_pulls: Some("f".into()),
            cluster_dns: Some(vec!["10.0.0.53,10.0.0.54".into(), "fd00::53".into()]),
            cluster_domain: Some("edge.local".into()),
            pod_pids_limit: Some("256".into()),
            eviction_hard: Some(vec![
                "memory.available<200Mi,nodefs.available<5%".into(),
                "pid.available<10".into(),
            ]),
            node_status_update_frequency: Some("1m".into()),
            verbosity: Some(3),
            root_dir: Some("/data/picolet".into()),
            hostname_override: Some("Edge-01".into()),
            admin_socket: Some("/tmp/p.sock".into()),
            board: Some("rpi4".into()),
        };
        c.apply_flags(&flags).unwrap();
        assert_eq!(c.static_pod_path, Some(PathBuf::from("/srv/pods")));
        assert_eq!(c.container_runtime_endpoint, "/run/crio.sock");
        assert_eq!(c.runtime_socket_path(), PathBuf::from("/run/crio.sock"));
        assert_eq!(c.cgroup_root, "/edge");
        assert!(!c.cgroups_per_qos);
        assert_eq!(c.file_check_frequency, Duration::from_secs(1));
        assert_eq!(c.sync_frequency, Duration::from_secs(120));
        assert_eq!(c.max_pods, 32);
        assert_eq!(c.runtime_request_timeout, Duration::from_secs(15));
        assert_eq!(c.container_log_max_size, 5_000_000);
        assert_eq!(c.container_log_max_files, 3);
        assert!(!c.serialize_image_pulls);
        assert_eq!(c.cluster_dns.len(), 3);
        assert_eq!(c.cluster_domain, "edge.local");
        assert_eq!(c.pod_pids_limit, 256);
        assert_eq!(
            c.eviction_hard,
            BTreeMap::from([
                (
                    "memory.available".to_string(),
                    EvictionThreshold::Quantity(200 * 1024 * 1024)
                ),
                (
                    "nodefs.available".to_string(),
                    EvictionThreshold::Percentage(5.0)
                ),
                ("pid.available".to_string(), EvictionThreshold::Quantity(10)),
            ])
        );
        assert_eq!(c.node_status_update_frequency, Duration::from_secs(60));
        assert_eq!(c.verbosity, 3);
        assert_eq!(c.root_dir, PathBuf::from("/data/picolet"));
        assert_eq!(c.hostname_override.as_deref(), Some("edge-01"));
        assert_eq!(c.node_name(), "edge-01");
        assert_eq!(c.admin_socket, PathBuf::from("/tmp/p.sock"));
        assert_eq!(c.board.as_deref(), Some("rpi4"));
    }

    #[test]
    fn no_flags_leave_the_configuration_unchanged() {
        let mut c = parse_ok("maxPods: 16\n").config;
        let before = c.clone();
        c.apply_flags(&Flags::default()).unwrap();
        assert_eq!(c, before);
    }

    #[test]
    fn an_empty_pod_manifest_path_flag_disables_static_pods() {
        let mut c = KubeletConfig::default();
        c.apply_flags(&Flags {
            pod_manifest_path: Some(String::new()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.static_pod_path, None);
    }

    #[test]
    fn a_flag_with_a_bad_value_names_the_flag() {
        assert_eq!(
            flags_err(&Flags {
                max_pods: Some("abc".into()),
                ..Default::default()
            }),
            r#"flag --max-pods: expected a positive integer, got "abc""#
        );
        assert!(flags_err(&Flags {
            cgroups_per_qos: Some("maybe".into()),
            ..Default::default()
        })
        .starts_with("flag --cgroups-per-qos: expected true or false"));
        assert!(flags_err(&Flags {
            cluster_dns: Some(vec!["8.8.8.8,dns".into()]),
            ..Default::default()
        })
        .starts_with("flag --cluster-dns: expected an IP address, got \"dns\""));
        assert!(flags_err(&Flags {
            eviction_hard: Some(vec!["memory.available".into()]),
            ..Default::default()
        })
        .starts_with("flag --eviction-hard: expected SIGNAL<VALUE"));
        assert!(flags_err(&Flags {
            verbosity: Some(11),
            ..Default::default()
        })
        .starts_with("flag --v: "));
        assert!(flags_err(&Flags {
            sync_frequency: Some("1x".into()),
            ..Default::default()
        })
        .starts_with("flag --sync-frequency: invalid duration"));
        assert!(flags_err(&Flags {
            root_dir: Some("state".into()),
            ..Default::default()
        })
        .starts_with("flag --root-dir: expected an absolute path"));
        assert!(flags_err(&Flags {
            hostname_override: Some("bad_name".into()),
            ..Default::default()
        })
        .starts_with("flag --hostname-override: "));
        assert!(flags_err(&Flags {
            board: Some("".into()),
            ..Default::default()
        })
        .starts_with("flag --board: "));
        assert!(flags_err(&Flags {
            cgroup_driver: Some("systemd".into()),
            ..Default::default()
        })
        .contains("not supported yet"));
    }

    #[test]
    fn a_string_flag_that_looks_like_a_number_stays_a_string() {
        // `--cluster-domain=123` must not become a JSON number and fail as "expected a string".
        let mut c = KubeletConfig::default();
        c.apply_flags(&Flags {
            cluster_domain: Some("123".into()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.cluster_domain, "123");
    }

    #[test]
    fn every_flag_in_the_table_has_a_slot_in_flags() {
        for (name, _, _) in FLAGS.iter().filter(|(name, _, _)| *name != "v") {
            let mut f = Flags::default();
            assert!(f.set(name, "x".into()), "{name}");
            assert_ne!(f, Flags::default(), "{name}");
        }
        assert!(!Flags::default().set("kubeconfig", "x".into()));
        assert!(!Flags::default().set("v", "3".into()), "v is typed");
        assert_eq!(flag_kind("cgroups-per-qos"), Some(FlagKind::Bool));
        assert_eq!(flag_kind("cluster-dns"), Some(FlagKind::List));
        assert_eq!(flag_kind("nope"), None);
    }

    #[test]
    fn node_names_are_trimmed_lowercased_and_validated() {
        assert_eq!(
            normalize_node_name(" Edge-01.Local\n").as_deref(),
            Some("edge-01.local")
        );
        assert_eq!(normalize_node_name(""), None);
        assert_eq!(normalize_node_name("-a"), None);
        assert_eq!(normalize_node_name("a..b"), None);
        assert_eq!(normalize_node_name("under_score"), None);
    }

    #[test]
    fn the_node_name_falls_back_to_the_machine_hostname() {
        let name = KubeletConfig::default().node_name();
        assert!(
            normalize_node_name(&name).as_deref() == Some(name.as_str()),
            "{name}"
        );
    }

    // --- durations ---

    #[test]
    fn go_durations_parse() {
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("+5s", Duration::from_secs(5)),
            ("0s", Duration::ZERO),
            ("20s", Duration::from_secs(20)),
            ("1m0s", Duration::from_secs(60)),
            ("1h2m3.5s", Duration::from_millis(3_723_500)),
            ("500ms", Duration::from_millis(500)),
            ("1.5us", Duration::from_nanos(1_500)),
            ("1µs", Duration::from_micros(1)),
            ("1μs", Duration::from_micros(1)),
            ("7ns", Duration::from_nanos(7)),
            (".5s", Duration::from_millis(500)),
            ("1.s", Duration::from_secs(1)),
            ("2h45m", Duration::from_secs(9_900)),
            ("1s1s", Duration::from_secs(2)),
            ("0.000000001s", Duration::from_nanos(1)),
            ("1.0000000009s", Duration::from_secs(1)),
            ("2562047h", Duration::from_secs(2_562_047 * 3600)),
        ];
        for (input, want) in cases {
            assert_eq!(parse_go_duration(input), Ok(*want), "{input}");
        }
    }

    #[test]
    fn malformed_go_durations_are_rejected_with_a_reason() {
        for (input, reason) in [
            ("", "empty"),
            ("-", "empty"),
            ("10", "missing unit"),
            ("1d", "unknown unit"),
            ("1 s", "unknown unit"),
            ("s", "expected a number"),
            (".s", "expected a number"),
            ("1h-2m", "unknown unit \"h-\""),
            ("-1s", "negative"),
            ("2562048h", "too large"),
            ("99999999999999999999999h", "too large"),
        ] {
            let err = parse_go_duration(input).expect_err(input);
            assert!(err.reason.contains(reason), "{input}: {err}");
            assert_eq!(err.input, input);
        }
    }

    #[test]
    fn go_durations_format_like_go() {
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_micros(1_250), "1.25ms"),
            (Duration::from_secs(20), "20s"),
            (Duration::from_secs(60), "1m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(3_723_500), "1h2m3.5s"),
            (Duration::from_nanos(1_000_000_001), "1.000000001s"),
        ];
        for (d, want) in cases {
            assert_eq!(format_go_duration(*d), *want);
            assert_eq!(parse_go_duration(want), Ok(*d), "round trip {want}");
        }
    }

    // --- quantities ---

    #[test]
    fn quantities_parse_to_bytes() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("123", 123),
            ("+5", 5),
            ("1Ki", 1024),
            ("10Mi", 10 * 1024 * 1024),
            ("1Gi", 1 << 30),
            ("2Ti", 2 << 40),
            ("1Pi", 1 << 50),
            ("1Ei", 1 << 60),
            ("1k", 1_000),
            ("1M", 1_000_000),
            ("1G", 1_000_000_000),
            ("1T", 1_000_000_000_000),
            ("1P", 1_000_000_000_000_000),
            ("1E", 1_000_000_000_000_000_000),
            ("1.5Ki", 1536),
            ("0.5Gi", 1 << 29),
            ("1e3", 1000),
            ("1E3", 1000),
            ("1.5e3", 1500),
            ("0.5", 1),
            ("1e-3", 1),
            ("007", 7),
            (".5k", 500),
            ("-0", 0),
            ("18446744073709551615", u64::MAX),
        ];
        for (input, want) in cases {
            assert_eq!(parse_quantity_bytes(input), Ok(*want), "{input}");
        }
    }

    #[test]
    fn quantities_parse_to_millis() {
        let cases: &[(&str, u64)] = &[
            ("100m", 100),
            ("0.5", 500),
            ("2", 2_000),
            ("1500m", 1_500),
            ("1u", 1),
            ("1000000n", 1),
            ("1Ki", 1_024_000),
            ("1k", 1_000_000),
            ("0.0001", 1),
        ];
        for (input, want) in cases {
            assert_eq!(parse_quantity_millis(input), Ok(*want), "{input}");
        }
    }

    #[test]
    fn malformed_or_unacceptable_quantities_are_rejected() {
        for (input, reason) in [
            ("", "empty"),
            ("Mi", "expected a number"),
            ("1..2", "expected a number"),
            ("1.2.3", "expected a number"),
            ("1K", "unknown suffix"),
            ("1mi", "unknown suffix"),
            ("1 Mi", "unknown suffix"),
            ("1e", "unknown suffix"),
            ("1e3.5", "unknown suffix"),
            ("-1", "negative"),
            ("-5Mi", "negative"),
            ("100m", "did you mean"),
            ("5n", "fraction of a unit"),
            ("16Ei", "too large"),
            ("18446744073709551616", "too large"),
            ("1e99999", "unknown suffix"),
        ] {
            let err = parse_quantity_bytes(input).expect_err(input);
            assert!(err.reason.contains(reason), "{input}: {err}");
        }
        assert!(parse_quantity_millis("20000000000000000")
            .unwrap_err()
            .reason
            .contains("too large"));
        assert!(parse_quantity_millis("-100m")
            .unwrap_err()
            .reason
            .contains("negative"));
    }

    #[test]
    fn eviction_thresholds_parse_as_quantity_or_percentage() {
        assert_eq!(
            parse_eviction_threshold("100Mi"),
            Ok(EvictionThreshold::Quantity(100 << 20))
        );
        assert_eq!(
            parse_eviction_threshold("10%"),
            Ok(EvictionThreshold::Percentage(10.0))
        );
        assert_eq!(
            parse_eviction_threshold("0%"),
            Ok(EvictionThreshold::Percentage(0.0))
        );
        assert!(parse_eviction_threshold("x%").is_err());
        assert!(parse_eviction_threshold("-1%").is_err());
        assert_eq!(EvictionThreshold::Percentage(7.5).to_string(), "7.5%");
        assert_eq!(EvictionThreshold::Quantity(42).to_string(), "42");
    }
}
