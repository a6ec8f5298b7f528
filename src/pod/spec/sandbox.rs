//! The `RunPodSandbox` config (kubelet's `generatePodSandboxConfig`):
//! metadata, labels, annotations (the pod's, and kubelet's
//! `kubernetes.io/config.seen`), hostname, port mappings, namespaces,
//! the pod's resources and overhead, and the sandbox security context.
//! The sandbox gets no hugepage limits: kubelet sends them per container
//! only (see `container`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::dns::{dns_config, HOSTNAME_MAX_LEN};
use super::security::{pod_supplemental_groups, selinux_option, supplemental_groups_policy};
use crate::cri::api;
use crate::pod::accessors::{
    self, host_network, name as pod_name, namespace as pod_namespace, spec, uid as pod_uid,
};
use crate::pod::labels::*;
use crate::qos;

/// The pod's user-namespace mapping (`hostUsers: false`): `length` IDs
/// from `host_id` on the host appear as 0.. in the pod, for users and
/// groups alike, as kubelet's user-namespace manager allocates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserNsMapping {
    pub host_id: u32,
    pub length: u32,
}

/// Environment-specific inputs to [`sandbox_config`].
#[derive(Debug, Clone, Copy)]
pub struct SandboxParams<'a> {
    /// Sandbox attempt (0 for the first sandbox of this pod UID).
    pub attempt: u32,
    /// Pod cgroup from the cgroup manager ("" = let the runtime decide).
    pub cgroup_parent: &'a str,
    /// KubeletConfiguration `podLogsDir` (normally /var/log/pods).
    pub pod_logs_dir: &'a Path,
    /// KubeletConfiguration `clusterDNS`.
    pub cluster_dns: &'a [String],
    /// KubeletConfiguration `clusterDomain` ("" = none).
    pub cluster_domain: &'a str,
    /// Contents of the host's resolv.conf (`resolvConf`); `None` when
    /// `resolvConf` is "" (kubelet then points pods at 127.0.0.1).
    pub host_resolv_conf: Option<&'a str>,
    /// The pod's user-namespace mapping; `None` runs it in the host's user
    /// namespace (admission refuses `hostUsers: false` where the runtime
    /// cannot give it one).
    pub user_ns: Option<UserNsMapping>,
    /// When picolet first saw the pod, Unix nanoseconds: the sandbox's
    /// `kubernetes.io/config.seen` annotation.
    pub seen_unix_nanos: i64,
}

/// The annotation kubelet's pod config adds to each pod it first sees, and
/// hands to the sandbox with the pod's own.
pub const CONFIG_SEEN_ANNOTATION: &str = "kubernetes.io/config.seen";

/// Unix nanoseconds as kubelet writes `kubernetes.io/config.seen` (Go's
/// RFC3339NanoFixed: nine fraction digits always), in UTC: kubelet uses the
/// host's zone, which on picolet's boards is UTC.
pub fn config_seen(unix_nanos: i64) -> String {
    let secs = unix_nanos.div_euclid(1_000_000_000);
    let frac = unix_nanos.rem_euclid(1_000_000_000);
    let ts = k8s_openapi::jiff::Timestamp::from_second(secs)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    // Display is RFC 3339 in UTC; whole seconds print no fraction.
    let whole = ts.to_string();
    let date_time = whole.strip_suffix('Z').unwrap_or(&whole);
    format!("{date_time}.{frac:09}Z")
}

/// `<pod_logs_dir>/<namespace>_<name>_<uid>`, kubelet's `BuildPodLogsDirectory`.
pub fn log_directory(pod_logs_dir: &Path, namespace: &str, name: &str, uid: &str) -> PathBuf {
    pod_logs_dir.join(format!("{namespace}_{name}_{uid}"))
}

/// A container instance's log file under its pod's log directory,
/// `<container>/<attempt>.log`: the CRI `log_path` (relative to the
/// sandbox's `log_directory`), as kubelet's `BuildContainerLogsDirectory`
/// and restart count name it. Rotated files add a suffix to it.
pub fn container_log_path(container: &str, attempt: u32) -> String {
    format!("{container}/{attempt}.log")
}

/// The labels kubelet puts on a sandbox: the pod's labels plus the three
/// `io.kubernetes.pod.*` identity labels.
pub fn sandbox_labels(pod: &Pod) -> HashMap<String, String> {
    let mut labels: HashMap<String, String> = pod
        .metadata
        .labels
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    labels.insert(POD_NAME_LABEL.into(), pod_name(pod).into());
    labels.insert(POD_NAMESPACE_LABEL.into(), pod_namespace(pod).into());
    labels.insert(POD_UID_LABEL.into(), pod_uid(pod).into());
    labels
}

/// The `RunPodSandbox` config for `pod` (kubelet's `generatePodSandboxConfig`),
/// with the warnings about what of the pod could not be honoured as written
/// (the caller logs them, once per pod: they are the same at every call).
pub fn sandbox_config(pod: &Pod, p: &SandboxParams) -> (api::PodSandboxConfig, Vec<String>) {
    let s = spec(pod);
    let mut warnings = Vec::new();
    let hostname = if host_network(pod) {
        // kubelet leaves the hostname empty for host-network pods: they keep
        // the node's UTS namespace.
        String::new()
    } else {
        let (host, domain) = pod_hostname_and_domain(pod, p.cluster_domain);
        if s.set_hostname_as_fqdn.unwrap_or(false) && !domain.is_empty() {
            let fqdn = format!("{host}.{domain}");
            if fqdn.len() > HOSTNAME_MAX_LEN + 1 {
                warnings.push(format!(
                    "FQDN {fqdn:?} is longer than 64 characters; using the short hostname"
                ));
                host
            } else {
                fqdn
            }
        } else {
            host
        }
    };

    let port_mappings = s
        .containers
        .iter()
        .flat_map(|c| container_port_mappings(c, &mut warnings))
        .collect();
    let dns = dns_config(pod, p, &mut warnings);

    let config = api::PodSandboxConfig {
        metadata: Some(api::PodSandboxMetadata {
            name: pod_name(pod).into(),
            uid: pod_uid(pod).into(),
            namespace: pod_namespace(pod).into(),
            attempt: p.attempt,
        }),
        hostname,
        log_directory: log_directory(
            p.pod_logs_dir,
            pod_namespace(pod),
            pod_name(pod),
            pod_uid(pod),
        )
        .to_string_lossy()
        .into_owned(),
        dns_config: Some(dns),
        port_mappings,
        labels: sandbox_labels(pod),
        annotations: pod
            .metadata
            .annotations
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain([(
                CONFIG_SEEN_ANNOTATION.to_string(),
                config_seen(p.seen_unix_nanos),
            )])
            .collect(),
        linux: Some(sandbox_linux_config(pod, p.cgroup_parent, p.user_ns)),
    };
    (config, warnings)
}

/// kubelet's `MakePortMappings` + `toRuntimeProtocol`: every declared port
/// (host_port 0 when none; the runtimes only publish entries with a host
/// port), skipping a repeated port name.
fn container_port_mappings(c: &Container, warnings: &mut Vec<String>) -> Vec<api::PortMapping> {
    let mut names = std::collections::HashSet::new();
    let mut out = Vec::new();
    for port in c.ports.iter().flatten() {
        let protocol = port.protocol.as_deref().unwrap_or("TCP");
        let host_ip = port.host_ip.as_deref().unwrap_or("");
        let host_port = port.host_port.unwrap_or(0);
        let name = match port.name.as_deref() {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => {
                let family = if host_ip.is_empty() {
                    "any"
                } else if host_ip.contains(':') {
                    "v6"
                } else {
                    "v4"
                };
                format!(
                    "{family}-{protocol}-{host_ip}:{}:{host_port}",
                    port.container_port
                )
            }
        };
        if !names.insert(name.clone()) {
            warnings.push(format!(
                "container {:?}: port name {name:?} is defined more than once",
                c.name
            ));
            continue;
        }
        let protocol = match protocol {
            "UDP" => api::Protocol::Udp,
            "SCTP" => api::Protocol::Sctp,
            "TCP" => api::Protocol::Tcp,
            other => {
                warnings.push(format!(
                    "container {:?}: unknown protocol {other:?}, using TCP",
                    c.name
                ));
                api::Protocol::Tcp
            }
        };
        out.push(api::PortMapping {
            protocol: protocol as i32,
            container_port: port.container_port,
            host_port,
            host_ip: host_ip.into(),
        });
    }
    out
}

/// The pod's namespace modes (kubelet's `NamespacesForPod`), shared by the
/// sandbox and every container: the host's user namespace, or the pod's
/// own with its mapping.
pub fn namespace_options(pod: &Pod, user_ns: Option<UserNsMapping>) -> api::NamespaceOption {
    let s = spec(pod);
    let mode = |host: Option<bool>, otherwise: api::NamespaceMode| {
        if host.unwrap_or(false) {
            api::NamespaceMode::Node
        } else {
            otherwise
        }
    };
    let pid_otherwise = if s.share_process_namespace.unwrap_or(false) {
        api::NamespaceMode::Pod
    } else {
        api::NamespaceMode::Container
    };
    api::NamespaceOption {
        network: mode(s.host_network, api::NamespaceMode::Pod) as i32,
        pid: mode(s.host_pid, pid_otherwise) as i32,
        ipc: mode(s.host_ipc, api::NamespaceMode::Pod) as i32,
        target_id: String::new(),
        userns_options: Some(user_namespace(user_ns)),
    }
}

/// The CRI user namespace: NODE, or POD with the same mapping for users
/// and groups (kubelet's `GetOrCreateUserNamespaceMappings`).
fn user_namespace(user_ns: Option<UserNsMapping>) -> api::UserNamespace {
    match user_ns {
        None => api::UserNamespace {
            mode: api::NamespaceMode::Node as i32,
            uids: Vec::new(),
            gids: Vec::new(),
        },
        Some(m) => {
            let mapping = api::IdMapping {
                host_id: m.host_id,
                container_id: 0,
                length: m.length,
            };
            api::UserNamespace {
                mode: api::NamespaceMode::Pod as i32,
                uids: vec![mapping],
                gids: vec![mapping],
            }
        }
    }
}

/// Runtime resources as CRI's `LinuxContainerResources`
/// (kubelet's `calculateLinuxResources`).
pub(super) fn linux_resources(r: qos::RuntimeResources) -> api::LinuxContainerResources {
    let cpu = qos::container_cpu(r.cpu_request_millis, r.cpu_limit_millis);
    api::LinuxContainerResources {
        cpu_period: super::as_i64(cpu.period_us),
        cpu_quota: cpu.quota_us,
        cpu_shares: super::as_i64(cpu.shares),
        memory_limit_in_bytes: super::as_i64(r.memory_limit_bytes),
        ..Default::default()
    }
}

fn sandbox_linux_config(
    pod: &Pod,
    cgroup_parent: &str,
    user_ns: Option<UserNsMapping>,
) -> api::LinuxPodSandboxConfig {
    let psc = spec(pod).security_context.as_ref();
    let privileged = accessors::all_containers(pod).map(|(c, _)| c).any(|c| {
        c.security_context
            .as_ref()
            .and_then(|sc| sc.privileged)
            .unwrap_or(false)
    });
    let security_context = api::LinuxSandboxSecurityContext {
        namespace_options: Some(namespace_options(pod, user_ns)),
        selinux_options: psc
            .and_then(|sc| sc.se_linux_options.as_ref())
            .map(selinux_option),
        run_as_user: psc
            .and_then(|sc| sc.run_as_user)
            .map(|value| api::Int64Value { value }),
        run_as_group: psc
            .and_then(|sc| sc.run_as_group)
            .map(|value| api::Int64Value { value }),
        supplemental_groups: pod_supplemental_groups(pod),
        supplemental_groups_policy: supplemental_groups_policy(pod),
        privileged,
        // kubelet forces runtime/default on the sandbox (kubernetes#84623).
        seccomp: Some(api::SecurityProfile {
            profile_type: api::security_profile::ProfileType::RuntimeDefault as i32,
            localhost_ref: String::new(),
        }),
        ..Default::default()
    };
    api::LinuxPodSandboxConfig {
        cgroup_parent: cgroup_parent.into(),
        security_context: Some(security_context),
        sysctls: psc
            .and_then(|sc| sc.sysctls.as_ref())
            .into_iter()
            .flatten()
            // As kubelet hands them to the runtime: `/`-separated names in
            // the dotted form (CRI-O applies `kernel/shm_rmid_forced` as
            // is, which sets nothing).
            .map(|s| {
                (
                    crate::pod::sysctls::normalize_name(&s.name),
                    s.value.clone(),
                )
            })
            .collect(),
        // kubelet's applySandboxResources: an empty overhead when the pod
        // has none.
        overhead: Some(
            qos::overhead_resources(spec(pod))
                .map(linux_resources)
                .unwrap_or_default(),
        ),
        resources: Some(linux_resources(qos::sandbox_resources(spec(pod)))),
    }
}

/// The pod's hostname and domain (kubelet's `GeneratePodHostNameAndDomain`):
/// `spec.hostnameOverride` alone when set (the HostnameOverride feature,
/// on by default since v1.35; the API server only accepts a DNS-1123
/// subdomain there, and anything else is ignored here), else
/// `spec.hostname` or the pod name; cut to 63 characters without a
/// trailing `-`/`.`. The domain is `<subdomain>.<ns>.svc.<clusterDomain>`
/// when `spec.subdomain` is set (and no override), else "".
pub fn pod_hostname_and_domain(pod: &Pod, cluster_domain: &str) -> (String, String) {
    let s = spec(pod);
    let hostname_override = s
        .hostname_override
        .as_deref()
        .filter(|h| crate::names::is_dns1123_subdomain(h));
    let hostname = match (hostname_override, s.hostname.as_deref()) {
        (Some(h), _) => h,
        (None, Some(h)) if !h.is_empty() => h,
        _ => pod_name(pod),
    };
    let hostname = if hostname.len() > HOSTNAME_MAX_LEN {
        let mut cut = HOSTNAME_MAX_LEN;
        while !hostname.is_char_boundary(cut) {
            cut -= 1;
        }
        hostname[..cut].trim_end_matches(['-', '.']).to_string()
    } else {
        hostname.to_string()
    };
    let domain = match s.subdomain.as_deref() {
        Some(sub) if !sub.is_empty() && hostname_override.is_none() => {
            format!("{sub}.{}.svc.{cluster_domain}", pod_namespace(pod))
        }
        _ => String::new(),
    };
    (hostname, domain)
}
