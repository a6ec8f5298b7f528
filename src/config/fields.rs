//! The settings picolet implements: [`KubeletConfig`], each field declared
//! once with its KubeletConfiguration key, its default and the function that
//! validates a value for it.
//!
//! The declaration (the `kubelet_config!` list below) generates the struct,
//! its `Default` and the table [`FIELDS`] that the file format and the flags
//! both set fields through, so a value is checked by the same code whichever
//! way it came. Values arrive as `serde_json::Value`s: the file decodes into
//! them, and flags are turned into them (see `flags.rs`). Validators return
//! a bare message; the caller adds the file or flag and the field.
//!
//! Pure, except [`KubeletConfig::node_name`], which reads the machine's
//! hostname when `--hostname-override` is not given.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::{board, duration};
use crate::names::is_dns1123_subdomain;
use crate::quantity::Quantity;

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

/// One setting of [`KubeletConfig`]: where it may come from and how a value
/// becomes it.
pub(super) struct Field {
    /// The KubeletConfiguration key, dotted when nested
    /// (`logging.verbosity`). For a flag-only setting, the name its flag row
    /// points at (`rootDir`); no file may set it.
    pub key: &'static str,
    /// False for flag-only settings: a file naming them gets the "unknown
    /// field" warning like any other unknown key.
    pub in_file: bool,
    set: fn(&mut KubeletConfig, &Value) -> Result<(), String>,
}

impl Field {
    /// Validates `value` and stores it in `cfg`; on error, a message without
    /// the field's name (the caller knows where the value came from).
    pub fn set(&self, cfg: &mut KubeletConfig, value: &Value) -> Result<(), String> {
        (self.set)(cfg, value)
    }
}

/// The field with `key`, from the file or flag-only.
pub(super) fn field(key: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.key == key)
}

/// Declares [`KubeletConfig`]: every entry is
/// `name: Type = default, file("key") => validator;` (or `flag("key")` for
/// a flag-only setting), where the validator is a
/// `fn(&Value) -> Result<Type, String>`. Generates the struct, `Default`
/// and [`FIELDS`].
macro_rules! kubelet_config {
    (
        $(#[$meta:meta])*
        pub struct KubeletConfig {
            $(
                $(#[doc = $doc:literal])*
                $field:ident: $ty:ty = $default:expr, $source:ident($key:literal) => $parse:expr;
            )*
        }
    ) => {
        $(#[$meta])*
        pub struct KubeletConfig {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Default for KubeletConfig {
            fn default() -> Self {
                KubeletConfig { $( $field: $default, )* }
            }
        }

        /// Every setting of [`KubeletConfig`], in declaration order.
        pub(super) const FIELDS: &[Field] = &[
            $(
                Field {
                    key: $key,
                    in_file: kubelet_config!(@in_file $source),
                    set: |cfg, v| {
                        let parse: fn(&Value) -> Result<$ty, String> = $parse;
                        cfg.$field = parse(v)?;
                        Ok(())
                    },
                },
            )*
        ];
    };
    (@in_file file) => { true };
    (@in_file flag) => { false };
}

kubelet_config! {
    /// picolet's validated configuration: the KubeletConfiguration fields
    /// picolet implements (defaults = kubelet's, except `static_pod_path`),
    /// plus the flag-only options at the end.
    #[derive(Debug, Clone, PartialEq)]
    pub struct KubeletConfig {
        /// `staticPodPath` / `--pod-manifest-path`. `None` = no static pods.
        /// Default [`DEFAULT_STATIC_POD_PATH`]. A relative path in the file is
        /// resolved against the file's directory (as kubelet does).
        static_pod_path: Option<PathBuf> = Some(PathBuf::from(DEFAULT_STATIC_POD_PATH)),
            file("staticPodPath") => static_pod_path;
        /// `containerRuntimeEndpoint` as given (`unix:///path` or `/path`),
        /// validated: only unix sockets with absolute paths are accepted. Use
        /// [`KubeletConfig::runtime_socket_path`] for the socket path.
        container_runtime_endpoint: String = DEFAULT_CONTAINER_RUNTIME_ENDPOINT.to_string(),
            file("containerRuntimeEndpoint") => runtime_endpoint;
        /// `cgroupDriver`.
        cgroup_driver: CgroupDriver = CgroupDriver::Cgroupfs,
            file("cgroupDriver") => cgroup_driver;
        /// `cgroupRoot`, a cgroup path starting with `/` (relative to the
        /// cgroup mount, not a filesystem path). Default `/`.
        cgroup_root: String = "/".to_string(),
            file("cgroupRoot") => cgroup_root;
        /// `cgroupsPerQOS`. Default true.
        cgroups_per_qos: bool = true,
            file("cgroupsPerQOS") => boolean;
        /// `podLogsDir`, absolute. Default `/var/log/pods`.
        pod_logs_dir: PathBuf = PathBuf::from(DEFAULT_POD_LOGS_DIR),
            file("podLogsDir") => absolute_path;
        /// `fileCheckFrequency`: static pod directory rescan period. Default 20s.
        file_check_frequency: Duration = Duration::from_secs(20),
            file("fileCheckFrequency") => positive_duration;
        /// `syncFrequency`: periodic pod resync. Default 1m.
        sync_frequency: Duration = Duration::from_secs(60),
            file("syncFrequency") => positive_duration;
        /// `maxPods`. Default 110.
        max_pods: u32 = 110,
            file("maxPods") => positive_u32;
        /// `runtimeRequestTimeout`: CRI call timeout. Default 2m.
        runtime_request_timeout: Duration = Duration::from_secs(120),
            file("runtimeRequestTimeout") => positive_duration;
        /// `containerLogMaxSize`, in bytes. Default 10Mi.
        container_log_max_size: u64 = 10 * 1024 * 1024,
            file("containerLogMaxSize") => log_size;
        /// `containerLogMaxFiles`, >= 2. Default 5.
        container_log_max_files: u32 = 5,
            file("containerLogMaxFiles") => log_files;
        /// `serializeImagePulls`. Default true.
        serialize_image_pulls: bool = true,
            file("serializeImagePulls") => boolean;
        /// `clusterDNS`. Default empty.
        cluster_dns: Vec<IpAddr> = Vec::new(),
            file("clusterDNS") => ip_list;
        /// `clusterDomain`. Default empty.
        cluster_domain: String = String::new(),
            file("clusterDomain") => dns_domain;
        /// `podPidsLimit`; -1 (or 0) = unlimited. Default -1.
        pod_pids_limit: i64 = -1,
            file("podPidsLimit") => pids_limit;
        /// `evictionHard`, signal -> threshold. A map given in the file or by
        /// flag *replaces* the defaults (kubelet without MergeDefaultEvictionSettings).
        eviction_hard: BTreeMap<String, EvictionThreshold> = default_eviction_hard(),
            file("evictionHard") => eviction_map;
        /// `systemReserved`.
        system_reserved: ReservedResources = ReservedResources::default(),
            file("systemReserved") => reserved;
        /// `kubeReserved`.
        kube_reserved: ReservedResources = ReservedResources::default(),
            file("kubeReserved") => reserved;
        /// `imageGCHighThresholdPercent`, 0..=100. Default 85.
        image_gc_high_threshold_percent: u8 = 85,
            file("imageGCHighThresholdPercent") => percent;
        /// `imageGCLowThresholdPercent`, 0..=100 and < high. Default 80.
        image_gc_low_threshold_percent: u8 = 80,
            file("imageGCLowThresholdPercent") => percent;
        /// `nodeStatusUpdateFrequency`. Default 10s.
        node_status_update_frequency: Duration = Duration::from_secs(10),
            file("nodeStatusUpdateFrequency") => positive_duration;
        /// `nodeLeaseDurationSeconds`. Default 40.
        node_lease_duration_seconds: u32 = 40,
            file("nodeLeaseDurationSeconds") => positive_u32;
        /// `logging.verbosity` / `-v`, 0..=10. Default 0.
        verbosity: u8 = 0,
            file("logging.verbosity") => verbosity;

        // ---- flag-only, picolet-specific ----

        /// `--root-dir`: picolet's state directory. Default [`DEFAULT_ROOT_DIR`].
        root_dir: PathBuf = PathBuf::from(DEFAULT_ROOT_DIR),
            flag("rootDir") => absolute_path;
        /// `--hostname-override`, validated and lowercased.
        hostname_override: Option<String> = None,
            flag("hostnameOverride") => node_name;
        /// `--admin-socket`. Default [`DEFAULT_ADMIN_SOCKET`].
        admin_socket: PathBuf = PathBuf::from(DEFAULT_ADMIN_SOCKET),
            flag("adminSocket") => absolute_path;
        /// `--board`: the board profile the file layers were put on (its
        /// settings are already in the fields above). `None` without
        /// `--board`.
        board: Option<String> = None,
            flag("board") => board_name;
    }
}

/// A check of a value that is not stored.
pub(super) type Check = fn(&Value) -> Result<(), String>;

/// File fields picolet accepts only with the one value that keeps the node
/// safe: checked, never stored.
pub(super) const CHECKED_ONLY: &[(&str, Check)] = &[
    ("readOnlyPort", read_only_port),
    ("authentication.anonymous.enabled", anonymous_authentication),
];

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

/// Kubelet's default hard eviction thresholds.
fn default_eviction_hard() -> BTreeMap<String, EvictionThreshold> {
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

impl KubeletConfig {
    /// Cross-field checks, run after the file layers and after flags.
    /// Returns the field to blame.
    pub(super) fn check_consistency(&self) -> Result<(), (&'static str, String)> {
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

/// Lowercases and checks a node name (a DNS-1123 subdomain, the API
/// server's rule for Node names), as kubelet does for
/// `--hostname-override` and the machine hostname.
pub fn normalize_node_name(raw: &str) -> Option<String> {
    let name = raw.trim().to_ascii_lowercase();
    is_dns1123_subdomain(&name).then_some(name)
}

// ---------------------------------------------------------------------------
// Validators: `fn(&Value) -> Result<T, String>`
// ---------------------------------------------------------------------------

/// How a value looks in an error message: strings quoted, others as JSON.
pub(super) fn show(v: &Value) -> String {
    match v {
        Value::Object(_) => "a mapping".to_string(),
        Value::Array(_) => "a list".to_string(),
        other => other.to_string(),
    }
}

fn string(v: &Value) -> Result<&str, String> {
    v.as_str()
        .ok_or_else(|| format!("expected a string, got {}", show(v)))
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

fn positive_u32(v: &Value) -> Result<u32, String> {
    integer(v, 1, i64::from(i32::MAX), "a positive integer").map(|n| n as u32)
}

fn log_files(v: &Value) -> Result<u32, String> {
    integer(v, 2, i64::from(i32::MAX), "an integer >= 2").map(|n| n as u32)
}

fn pids_limit(v: &Value) -> Result<i64, String> {
    integer(v, -1, i64::MAX, "-1 (unlimited) or a positive integer")
}

fn percent(v: &Value) -> Result<u8, String> {
    integer(v, 0, 100, "a percentage between 0 and 100").map(|n| n as u8)
}

fn verbosity(v: &Value) -> Result<u8, String> {
    integer(
        v,
        0,
        i64::from(MAX_VERBOSITY),
        "a log level between 0 and 10",
    )
    .map(|n| n as u8)
}

fn positive_duration(v: &Value) -> Result<Duration, String> {
    let s = v.as_str().ok_or_else(|| {
        format!(
            "expected a duration string such as \"1m30s\", got {}",
            show(v)
        )
    })?;
    let d = duration::parse(s).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err(format!("expected a duration greater than zero, got {s:?}"));
    }
    Ok(d)
}

fn absolute(s: &str, what: &str) -> Result<PathBuf, String> {
    if s.starts_with('/') {
        Ok(PathBuf::from(s))
    } else {
        Err(format!("expected {what}, got {s:?}"))
    }
}

fn absolute_path(v: &Value) -> Result<PathBuf, String> {
    absolute(string(v)?, "an absolute path")
}

fn static_pod_path(v: &Value) -> Result<Option<PathBuf>, String> {
    let s = string(v)?;
    Ok((!s.is_empty()).then(|| PathBuf::from(s)))
}

fn cgroup_root(v: &Value) -> Result<String, String> {
    let s = string(v)?;
    absolute(s, "an absolute cgroup path such as \"/\"")?;
    Ok(s.to_string())
}

fn runtime_endpoint(v: &Value) -> Result<String, String> {
    let s = string(v)?;
    parse_runtime_endpoint(s)?;
    Ok(s.to_string())
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
    absolute(path, "").map_err(|_| {
        format!("expected unix:///absolute/path or an absolute socket path, got {s:?}")
    })
}

fn cgroup_driver(v: &Value) -> Result<CgroupDriver, String> {
    match string(v)? {
        "cgroupfs" => Ok(CgroupDriver::Cgroupfs),
        "systemd" => {
            Err("the systemd cgroup driver is not supported yet; use \"cgroupfs\"".to_string())
        }
        other => Err(format!("expected \"cgroupfs\", got {other:?}")),
    }
}

fn ip_list(v: &Value) -> Result<Vec<IpAddr>, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("expected a list of IP addresses, got {}", show(v)))?;
    items
        .iter()
        .map(|item| {
            let s = item
                .as_str()
                .ok_or_else(|| format!("expected an IP address, got {}", show(item)))?;
            s.trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("expected an IP address, got {s:?}"))
        })
        .collect()
}

fn dns_domain(v: &Value) -> Result<String, String> {
    let s = string(v)?;
    if !s.is_empty() && !is_dns1123_subdomain(s.trim_end_matches('.')) {
        return Err(format!(
            "expected a DNS domain such as \"cluster.local\", got {s:?}"
        ));
    }
    Ok(s.to_string())
}

fn node_name(v: &Value) -> Result<Option<String>, String> {
    let s = string(v)?;
    normalize_node_name(s)
        .map(Some)
        .ok_or_else(|| format!("expected a valid node name (a DNS subdomain), got {s:?}"))
}

fn board_name(v: &Value) -> Result<Option<String>, String> {
    let s = string(v)?;
    board::profile(s).ok_or_else(|| board::unknown(s))?;
    Ok(Some(s.to_string()))
}

fn read_only_port(v: &Value) -> Result<(), String> {
    if integer(v, 0, 65535, "a port number")? != 0 {
        return Err("picolet never opens a read-only port; set it to 0 or remove it".to_string());
    }
    Ok(())
}

fn anonymous_authentication(v: &Value) -> Result<(), String> {
    if boolean(v)? {
        return Err(
            "anonymous authentication is not supported: picolet never serves anonymous \
             requests; set it to false or remove it"
                .to_string(),
        );
    }
    Ok(())
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

fn log_size(v: &Value) -> Result<u64, String> {
    let s = quantity_text(v)
        .ok_or_else(|| format!("expected a size such as \"10Mi\", got {}", show(v)))?;
    let bytes = parse_quantity_bytes(&s).map_err(|e| e.to_string())?;
    if bytes == 0 {
        return Err(format!(
            "expected a positive size such as \"10Mi\", got {s:?}"
        ));
    }
    Ok(bytes)
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
fn parse_eviction_threshold(s: &str) -> Result<EvictionThreshold, String> {
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

// ---------------------------------------------------------------------------
// Quantities: the config's rules on top of the crate's one parser
// ---------------------------------------------------------------------------

/// A string that is not a valid (or not an acceptable) Kubernetes quantity.
/// `reason` is a [`crate::quantity::QuantityError`]'s message, or a rule of
/// the config's own (no sub-unit suffixes on byte sizes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {input:?}: {reason}")]
struct QuantityError {
    input: String,
    reason: String,
}

impl QuantityError {
    fn new(input: &str, reason: impl ToString) -> QuantityError {
        QuantityError {
            input: input.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// Parses with the crate's one quantity parser ([`crate::quantity`]) and
/// names the input in the error.
fn parse_quantity(input: &str) -> Result<Quantity, QuantityError> {
    Quantity::parse(input).map_err(|e| QuantityError::new(input, e))
}

/// Parses a Kubernetes quantity as a byte count (or any whole count):
/// `"10Mi"` = 10485760, `"1k"` = 1000, `"1.5Ki"` = 1536, `"1e3"` = 1000,
/// `"123"` = 123. Fractions of a byte round up, as `Quantity.Value()` does.
/// Negative values are rejected, and so are the sub-unit suffixes `m`, `u`
/// and `n`: `"100m"` is a hundred *milli*bytes, almost certainly a typo for
/// `100M` or `100Mi`. That rule is the config's, not the grammar's: pods may
/// say `"100m"` of memory and get 1 byte, as in Kubernetes.
fn parse_quantity_bytes(input: &str) -> Result<u64, QuantityError> {
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
fn parse_quantity_millis(input: &str) -> Result<u64, QuantityError> {
    parse_quantity(input)?
        .milli_value()
        .map_err(|e| QuantityError::new(input, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_key_is_declared_once() {
        for (i, f) in FIELDS.iter().enumerate() {
            assert!(
                FIELDS[..i].iter().all(|g| g.key != f.key),
                "{} declared twice",
                f.key
            );
            assert!(
                CHECKED_ONLY.iter().all(|(k, _)| *k != f.key),
                "{} is both stored and checked-only",
                f.key
            );
        }
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
