//! The settings picolet implements: [`KubeletConfig`], each field declared
//! once with its KubeletConfiguration key, its default and the function that
//! validates a value for it.
//!
//! The declaration (the `kubelet_config!` list below) generates the struct,
//! its `Default` and the table [`FIELDS`] that the file format and the flags
//! both set fields through, so a value is checked by the same code whichever
//! way it came. Values arrive as `serde_json::Value`s: the file decodes into
//! them, and flags are turned into them (see `flags.rs`). The validators
//! named in the list live in `values.rs`; they return a bare message, and
//! the caller adds the file or flag and the field.
//!
//! Pure, except [`KubeletConfig::node_name`], which reads the machine's
//! hostname when `--hostname-override` is not given.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use serde_json::Value;

use super::values::swap_behavior;
use super::values::{
    absolute_path, anonymous_authentication, authorization_mode, board_name, boolean,
    cgroup_driver, cgroup_root, dns_domain, enforce_node_allocatable, eviction_grace_map,
    eviction_map, grace_seconds, hostname_override, ip_address, ip_list, log_files, log_size,
    max_images, node_ips, node_labels, non_negative_duration, non_negative_u32,
    normalize_node_name, optional_path, parse_runtime_endpoint, percent, pids_limit, port_or_zero,
    positive_duration, positive_u32, read_only_port, reserved, reserved_cgroup, runtime_endpoint,
    static_pod_path, sysctl_patterns, taints, verbosity,
};

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
    /// The value in effect, as `/configz` shows it (`Null`: left out).
    pub get: fn(&KubeletConfig) -> Value,
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
                    get: |cfg| super::configz::ConfigValue::config_value(&cfg.$field),
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
        /// `eventRecordQPS`: event writes per second (0: no limit). Default 50.
        event_record_qps: u32 = 50,
            file("eventRecordQPS") => non_negative_u32;
        /// `eventBurst`: event writes in a burst (with QPS > 0). Default 100.
        event_burst: u32 = 100,
            file("eventBurst") => positive_u32;
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
        /// `evictionSoft`, signal -> threshold; each needs a grace period in
        /// `evictionSoftGracePeriod`. Default empty.
        eviction_soft: BTreeMap<String, EvictionThreshold> = BTreeMap::new(),
            file("evictionSoft") => eviction_map;
        /// `evictionSoftGracePeriod`, signal -> how long a soft threshold
        /// must hold before pods are evicted. Default empty.
        eviction_soft_grace_period: BTreeMap<String, Duration> = BTreeMap::new(),
            file("evictionSoftGracePeriod") => eviction_grace_map;
        /// `evictionMinimumReclaim`, signal -> how much beyond the threshold
        /// to reclaim once eviction starts. Default empty (none).
        eviction_minimum_reclaim: BTreeMap<String, EvictionThreshold> = BTreeMap::new(),
            file("evictionMinimumReclaim") => eviction_map;
        /// `evictionPressureTransitionPeriod`: how long a pressure
        /// condition stays after its threshold stops being met. Default 5m.
        eviction_pressure_transition_period: Duration = Duration::from_secs(300),
            file("evictionPressureTransitionPeriod") => positive_duration;
        /// `evictionMaxPodGracePeriod`: the longest grace period (seconds)
        /// a pod evicted for a soft threshold gets. Default 0.
        eviction_max_pod_grace_period: i64 = 0,
            file("evictionMaxPodGracePeriod") => grace_seconds;
        /// `systemReserved`.
        system_reserved: ReservedResources = ReservedResources::default(),
            file("systemReserved") => reserved;
        /// `kubeReserved`.
        kube_reserved: ReservedResources = ReservedResources::default(),
            file("kubeReserved") => reserved;
        /// `enforceNodeAllocatable`: where node allocatable is enforced.
        /// Default `["pods"]`; `["none"]` or `[]`: nowhere.
        enforce_node_allocatable: EnforceNodeAllocatable = EnforceNodeAllocatable::PODS,
            file("enforceNodeAllocatable") => enforce_node_allocatable;
        /// `systemReservedCgroup`: the cgroup `system-reserved` enforcement
        /// would limit. Default empty.
        system_reserved_cgroup: String = String::new(),
            file("systemReservedCgroup") => reserved_cgroup;
        /// `kubeReservedCgroup`: the cgroup `kube-reserved` enforcement
        /// would limit. Default empty.
        kube_reserved_cgroup: String = String::new(),
            file("kubeReservedCgroup") => reserved_cgroup;
        /// `imageGCHighThresholdPercent`, 0..=100. Default 85.
        image_gc_high_threshold_percent: u8 = 85,
            file("imageGCHighThresholdPercent") => percent;
        /// `imageGCLowThresholdPercent`, 0..=100 and < high. Default 80.
        image_gc_low_threshold_percent: u8 = 80,
            file("imageGCLowThresholdPercent") => percent;
        /// `imageMinimumGCAge`: an unused image younger than this is not
        /// garbage-collected. Default 2m.
        image_minimum_gc_age: Duration = Duration::from_secs(120),
            file("imageMinimumGCAge") => non_negative_duration;
        /// `nodeStatusUpdateFrequency`. Default 10s.
        node_status_update_frequency: Duration = Duration::from_secs(10),
            file("nodeStatusUpdateFrequency") => positive_duration;
        /// `nodeLeaseDurationSeconds`. Default 40.
        node_lease_duration_seconds: u32 = 40,
            file("nodeLeaseDurationSeconds") => positive_u32;
        /// `nodeStatusReportFrequency`: post an unchanged Node status this
        /// often. Default 5m.
        node_status_report_frequency: Duration = Duration::from_secs(300),
            file("nodeStatusReportFrequency") => positive_duration;
        /// `nodeStatusMaxImages`: how many images `status.images` lists,
        /// the largest first; -1: every image. Default 50.
        node_status_max_images: i32 = 50,
            file("nodeStatusMaxImages") => max_images;
        /// `rotateCertificates` / `--rotate-certificates`: renew the client
        /// certificate at a jittered 70-90 % of its lifetime through a
        /// CertificateSigningRequest. Default false (kubelet's).
        rotate_certificates: bool = false,
            file("rotateCertificates") => boolean;
        /// `serverTLSBootstrap`: with no `tlsCertFile`, get the node API's
        /// serving certificate from the cluster (a CSR for the signer
        /// `kubernetes.io/kubelet-serving`), renewed like the client one.
        /// Default false (kubelet's).
        server_tls_bootstrap: bool = false,
            file("serverTLSBootstrap") => boolean;
        /// `registerNode`: create the Node object at start. Default true.
        register_node: bool = true,
            file("registerNode") => boolean;
        /// `allowedUnsafeSysctls`: sysctls (or `prefix*` patterns) pods may
        /// set beyond kubelet's safe set; each must be namespaced.
        allowed_unsafe_sysctls: Vec<String> = Vec::new(),
            file("allowedUnsafeSysctls") => sysctl_patterns;
        /// `registerWithTaints` / `--register-with-taints`: taints the Node
        /// is created with.
        register_with_taints: Vec<Taint> = Vec::new(),
            file("registerWithTaints") => taints;
        /// `port`: the node API's port, reported in the Node's
        /// `daemonEndpoints`. Default 10250; 0 serves no node API.
        port: u16 = 10250,
            file("port") => port_or_zero;
        /// `address`: the IP address the node API listens on. Default
        /// 0.0.0.0 (every IPv4 address).
        address: IpAddr = IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            file("address") => ip_address;
        /// `tlsCertFile`: the node API's serving certificate (PEM, the
        /// chain after it). Unset: a self-signed one under `rootDir/pki`.
        tls_cert_file: Option<PathBuf> = None,
            file("tlsCertFile") => optional_path;
        /// `tlsPrivateKeyFile`: the key of `tlsCertFile`.
        tls_private_key_file: Option<PathBuf> = None,
            file("tlsPrivateKeyFile") => optional_path;
        /// `authentication.x509.clientCAFile`: client certificates signed
        /// by these CAs authenticate as their CN, in their O groups.
        client_ca_file: Option<PathBuf> = None,
            file("authentication.x509.clientCAFile") => optional_path;
        /// `authentication.webhook.enabled`: bearer tokens checked with a
        /// TokenReview. Default true.
        authentication_webhook_enabled: bool = true,
            file("authentication.webhook.enabled") => boolean;
        /// `authentication.webhook.cacheTTL`. Default 2m.
        authentication_webhook_cache_ttl: Duration = Duration::from_secs(120),
            file("authentication.webhook.cacheTTL") => non_negative_duration;
        /// `authorization.mode`: `Webhook` (SubjectAccessReview, the
        /// default) or `AlwaysAllow`.
        authorization_mode: AuthorizationMode = AuthorizationMode::Webhook,
            file("authorization.mode") => authorization_mode;
        /// `authorization.webhook.cacheAuthorizedTTL`. Default 5m.
        authorization_webhook_cache_authorized_ttl: Duration = Duration::from_secs(300),
            file("authorization.webhook.cacheAuthorizedTTL") => non_negative_duration;
        /// `authorization.webhook.cacheUnauthorizedTTL`. Default 30s.
        authorization_webhook_cache_unauthorized_ttl: Duration = Duration::from_secs(30),
            file("authorization.webhook.cacheUnauthorizedTTL") => non_negative_duration;
        /// `healthzPort`: plain HTTP `/healthz`. Default 10248; 0 disables.
        healthz_port: u16 = 10248,
            file("healthzPort") => port_or_zero;
        /// `healthzBindAddress`. Default 127.0.0.1.
        healthz_bind_address: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            file("healthzBindAddress") => ip_address;
        /// `memorySwap.swapBehavior`. Default NoSwap.
        memory_swap_behavior: SwapBehavior = SwapBehavior::NoSwap,
            file("memorySwap.swapBehavior") => swap_behavior;
        /// `logging.verbosity` / `-v`, 0..=10. Default 0.
        verbosity: u8 = 0,
            file("logging.verbosity") => verbosity;

        // ---- flag-only, picolet-specific ----

        /// `--root-dir`: picolet's state directory. Default [`DEFAULT_ROOT_DIR`].
        root_dir: PathBuf = PathBuf::from(DEFAULT_ROOT_DIR),
            flag("rootDir") => absolute_path;
        /// `--hostname-override`, validated and lowercased.
        hostname_override: Option<String> = None,
            flag("hostnameOverride") => hostname_override;
        /// `--admin-socket`. Default [`DEFAULT_ADMIN_SOCKET`].
        admin_socket: PathBuf = PathBuf::from(DEFAULT_ADMIN_SOCKET),
            flag("adminSocket") => absolute_path;
        /// `--kubeconfig`: how to reach the API server. `None`: standalone,
        /// static pods only.
        kubeconfig: Option<PathBuf> = None,
            flag("kubeconfig") => optional_path;
        /// `--bootstrap-kubeconfig`: when the `--kubeconfig` file does not
        /// exist, the credential to request a client certificate with (TLS
        /// bootstrap), after which `--kubeconfig` is written.
        bootstrap_kubeconfig: Option<PathBuf> = None,
            flag("bootstrapKubeconfig") => optional_path;
        /// `--node-ip`: the node's InternalIP addresses (at most one per IP
        /// family). Empty: the address of the default route.
        node_ip: Vec<IpAddr> = Vec::new(),
            flag("nodeIP") => node_ips;
        /// `--node-labels`: labels the Node is registered with (checked
        /// against what NodeRestriction lets a node set on itself).
        node_labels: BTreeMap<String, String> = BTreeMap::new(),
            flag("nodeLabels") => node_labels;
        /// `--allow-insecure-kubeconfig`: accept a kubeconfig with
        /// `insecure-skip-tls-verify: true` (logged loudly). Default false.
        allow_insecure_kubeconfig: bool = false,
            flag("allowInsecureKubeconfig") => boolean;
        /// `--offline-image-fallback`: when a pull fails for a network
        /// reason and the image is on the node, run it anyway. Default true.
        offline_image_fallback: bool = true,
            flag("offlineImageFallback") => boolean;
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

/// `authorization.mode` of the node API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Every request is asked of the API server (SubjectAccessReview).
    Webhook,
    /// Every authenticated request is allowed.
    AlwaysAllow,
}

/// The cgroup driver. Only `cgroupfs` is implemented; `systemd` is rejected
/// with an explicit "not supported yet" error rather than misbehaving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupDriver {
    Cgroupfs,
}

/// `memorySwap.swapBehavior`: may containers use the node's swap?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SwapBehavior {
    /// No container swaps (kubelet's default).
    #[default]
    NoSwap,
    /// Burstable containers of non-critical pods get a share of the swap
    /// in proportion to their memory request (cgroup v2 only).
    LimitedSwap,
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

/// `enforceNodeAllocatable`, as the set of kubelet's enforcement keys
/// (`pods`, `system-reserved`, `kube-reserved`; the `-compressible` forms
/// count as their plain key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnforceNodeAllocatable {
    /// `pods`: the `kubepods` cgroup is limited to node allocatable.
    pub pods: bool,
    /// `system-reserved`: `systemReservedCgroup` is limited to
    /// `systemReserved`.
    pub system_reserved: bool,
    /// `kube-reserved`: `kubeReservedCgroup` is limited to `kubeReserved`.
    pub kube_reserved: bool,
}

impl EnforceNodeAllocatable {
    /// kubelet's default, `["pods"]`.
    pub const PODS: EnforceNodeAllocatable = EnforceNodeAllocatable {
        pods: true,
        system_reserved: false,
        kube_reserved: false,
    };
}

impl Default for EnforceNodeAllocatable {
    fn default() -> Self {
        EnforceNodeAllocatable::PODS
    }
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
        if let Some(signal) = self
            .eviction_soft
            .keys()
            .find(|s| !self.eviction_soft_grace_period.contains_key(*s))
        {
            return Err((
                "evictionSoftGracePeriod",
                format!("evictionSoft has {signal:?} but no grace period for it"),
            ));
        }
        if let Some(signal) = self
            .eviction_soft_grace_period
            .keys()
            .find(|s| !self.eviction_soft.contains_key(*s))
        {
            return Err((
                "evictionSoftGracePeriod",
                format!("{signal:?} has a grace period but no evictionSoft threshold"),
            ));
        }
        let enforce = self.enforce_node_allocatable;
        for (on, cgroup, field, key) in [
            (
                enforce.system_reserved,
                &self.system_reserved_cgroup,
                "systemReservedCgroup",
                "system-reserved",
            ),
            (
                enforce.kube_reserved,
                &self.kube_reserved_cgroup,
                "kubeReservedCgroup",
                "kube-reserved",
            ),
        ] {
            if on && cgroup.is_empty() {
                return Err((
                    field,
                    format!("must be specified when {key:?} is in enforceNodeAllocatable"),
                ));
            }
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
    fn the_node_name_falls_back_to_the_machine_hostname() {
        let name = KubeletConfig::default().node_name();
        assert!(
            normalize_node_name(&name).as_deref() == Some(name.as_str()),
            "{name}"
        );
    }
}
