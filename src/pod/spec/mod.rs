//! Translation of a (defaulted) v1 Pod into CRI requests, as kubelet's
//! kuberuntime does (`kuberuntime_sandbox.go`, `kuberuntime_container.go`,
//! `kuberuntime_container_linux.go`, `kubelet_pods.go`, `network/dns`).
//!
//! Everything here is pure: no I/O, no clock, no logging: what cannot be
//! honoured as written comes back as warnings from [`sandbox_config`] (the
//! agent logs them once per pod), and CPU arithmetic is [`crate::qos`]'s.
//! Label keys are in [`crate::pod::labels`], pod accessors in
//! [`crate::pod::accessors`]. The caller passes everything
//! environment-specific (cluster DNS, the host's resolv.conf contents, the
//! directories it created for volumes and termination logs, the resolved
//! image, the OOM score adjustment, the node's hugepage sizes and swap
//! setup, the user-namespace mapping it allocated) and does the filesystem
//! work itself.
//!
//! One room per part of the request:
//! - `sandbox`: `RunPodSandbox` (metadata, hostname, ports, namespaces, the
//!   pod's resources and overhead);
//! - `dns`: resolv.conf and the managed /etc/hosts;
//! - `container`: `CreateContainer` (labels, annotations, hash, resources
//!   with pod-level fallbacks, hugepages, swap);
//! - `env`: environment, `$(VAR)` expansion, the downward API;
//! - `service_env`: the Service variables (`KUBERNETES_SERVICE_HOST`…);
//! - `volumes`: volume types and mounts;
//! - `security`: security contexts (users, groups, capabilities, seccomp,
//!   AppArmor, masked and read-only paths).
//!
//! Deliberate differences from kubelet, all harmless for the runtimes:
//! - environment variables keep declaration order (kubelet emits a Go map);
//! - resolv.conf options keep first-seen order (kubelet emits a Go map);
//! - `masked_paths` / `readonly_paths` are left empty for privileged
//!   containers (the runtimes ignore them there anyway).
//!
//! It must not know the runtime client, the agent or the host's files.

use crate::quantity::Quantity as Qty;

mod container;
mod dns;
mod env;
mod ephemeral;
mod payload;
mod sandbox;
mod security;
mod service_env;
#[cfg(test)]
mod tests;
mod volumes;

pub use container::{
    container_config, container_hash, container_labels, hugepage_unit_size, legacy_container_hash,
    ContainerParams, Swap, CGROUP2_SWAP_MAX,
};
pub use dns::{
    dns_config, host_network_hosts_file, hosts_file, MAX_DNS_NAMESERVERS,
    MAX_DNS_SEARCH_LIST_CHARS, MAX_DNS_SEARCH_PATHS,
};
pub use env::{env_from_skipped, expand, NodeAllocatable};
pub use ephemeral::share_target_pid;
pub use payload::{
    config_volumes, volume_payload, ConfigVolume, Downward, File, Payload, PayloadError,
    DEFAULT_MODE,
};
pub use sandbox::{
    config_seen, container_log_path, log_directory, namespace_options, pod_hostname_and_domain,
    sandbox_config, sandbox_labels, SandboxParams, UserNsMapping, CONFIG_SEEN_ANNOTATION,
};
pub use security::{
    apparmor_profile, verify_run_as_non_root, AppArmorProfile, ImageUser,
    APPARMOR_ANNOTATION_PREFIX, DEFAULT_MASKED_PATHS, DEFAULT_READONLY_PATHS,
};
pub use service_env::{
    from_services, links_enabled, namespaces_needed, pod_service_env, service_env, ServiceInfo,
    ServicePortInfo, ServiceSource, Services, ServicesNotSynced, MASTER_NAMESPACE, MASTER_SERVICE,
};
pub use volumes::{
    empty_dir_sub_paths, empty_dir_volumes, host_path_volumes, memory_empty_dirs,
    memory_volume_size,
};

/// Where kubelet mounts the managed hosts file.
pub const ETC_HOSTS_PATH: &str = "/etc/hosts";

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// A container spec that cannot be turned into a CRI request. An invalid
/// spec displays as
/// `container "app": env "FOO": configMapKeyRef is not supported for static pods`;
/// a missing object displays as kubelet's message alone
/// (`configmap "x" not found`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The container's name.
    pub container: String,
    /// The offending field, e.g. `env "FOO"` or `volumeMount "data"`.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
    /// Whether waiting can cure it.
    pub kind: SpecErrorKind,
}

/// Why a container config cannot be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecErrorKind {
    /// The spec asks for what cannot be done.
    Invalid,
    /// A non-optional ConfigMap or Secret (or a key of one) does not exist
    /// (kubelet's `CreateContainerConfigError`); it may appear later.
    Missing,
    /// A referenced object is not known yet (never synced, nothing cached):
    /// wait, do not call it missing.
    NotYetKnown,
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            SpecErrorKind::Invalid => write!(
                f,
                "container {:?}: {}: {}",
                self.container, self.field, self.reason
            ),
            SpecErrorKind::Missing | SpecErrorKind::NotYetKnown => f.write_str(&self.reason),
        }
    }
}

impl std::error::Error for SpecError {}

impl SpecError {
    pub(super) fn new(
        container: &str,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        SpecError {
            container: container.to_string(),
            field: field.into(),
            reason: reason.into(),
            kind: SpecErrorKind::Invalid,
        }
    }

    pub(super) fn with_kind(mut self, kind: SpecErrorKind) -> Self {
        self.kind = kind;
        self
    }
}

// ---------------------------------------------------------------------------
// Quantities
// ---------------------------------------------------------------------------

/// A resource quantity from a pod (a request, limit or divisor), parsed by
/// [`crate::quantity`]. No resource can be negative, so negatives are `None`.
pub(super) fn parse_resource(s: &str) -> Option<Qty> {
    Qty::parse(s).ok().filter(|q| !q.is_negative())
}

/// Millicores, rounded up (Go's `MilliValue`); saturates at `u64::MAX`.
pub(super) fn millis(q: Qty) -> u64 {
    q.milli_value().unwrap_or(u64::MAX)
}

/// Whole units (bytes), rounded up (Go's `Value`); saturates at `u64::MAX`.
pub(super) fn units(q: Qty) -> u64 {
    q.value().unwrap_or(u64::MAX)
}

pub(super) fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
