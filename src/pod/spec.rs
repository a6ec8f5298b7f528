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
//! image, the OOM score adjustment computed from the QoS class) and does the
//! filesystem work itself.
//!
//! Deliberate differences from kubelet, all harmless for the runtimes:
//! - environment variables keep declaration order (kubelet emits a Go map);
//! - resolv.conf options keep first-seen order (kubelet emits a Go map);
//! - `masked_paths` / `readonly_paths` are left empty for privileged
//!   containers (the runtimes ignore them there anyway).

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, ObjectFieldSelector, Pod, ResourceFieldSelector,
    SELinuxOptions, SeccompProfile, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::cri::api;
use crate::pod::accessors::{
    self, host_network, name as pod_name, namespace as pod_namespace, spec, uid as pod_uid,
};
use crate::pod::labels::*;
use crate::qos;
use crate::quantity::Quantity as Qty;

/// Where kubelet mounts the managed hosts file.
pub const ETC_HOSTS_PATH: &str = "/etc/hosts";

/// Max nameservers in a pod's resolv.conf (glibc limit; kubelet `MaxDNSNameservers`).
pub const MAX_DNS_NAMESERVERS: usize = 3;
/// Max search domains (kubelet `MaxDNSSearchPaths`).
pub const MAX_DNS_SEARCH_PATHS: usize = 32;
/// Max length of the joined search line (kubelet `MaxDNSSearchListChars`).
pub const MAX_DNS_SEARCH_LIST_CHARS: usize = 2048;
const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;
const HOSTNAME_MAX_LEN: usize = 63;

const DEFAULT_MASKED_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];
const DEFAULT_READONLY_PATHS: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// A container spec that cannot be turned into a CRI request. Displays as
/// `container "app": env "FOO": configMapKeyRef is not supported for static pods`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("container {container:?}: {field}: {reason}")]
pub struct SpecError {
    /// The container's name.
    pub container: String,
    /// The offending field, e.g. `env "FOO"` or `volumeMount "data"`.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl SpecError {
    fn new(container: &str, field: impl Into<String>, reason: impl Into<String>) -> Self {
        SpecError {
            container: container.to_string(),
            field: field.into(),
            reason: reason.into(),
        }
    }
}

// ---------------------------------------------------------------------------
// Sandbox
// ---------------------------------------------------------------------------

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
}

/// `<pod_logs_dir>/<namespace>_<name>_<uid>`, kubelet's `BuildPodLogsDirectory`.
pub fn log_directory(pod_logs_dir: &Path, namespace: &str, name: &str, uid: &str) -> PathBuf {
    pod_logs_dir.join(format!("{namespace}_{name}_{uid}"))
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
    if s.host_users == Some(false) {
        warnings.push(
            "hostUsers: false is not supported; running in the host user namespace".to_string(),
        );
    }
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
            .collect(),
        linux: Some(sandbox_linux_config(pod, p.cgroup_parent)),
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
/// sandbox and every container.
pub fn namespace_options(pod: &Pod) -> api::NamespaceOption {
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
        userns_options: Some(api::UserNamespace {
            mode: api::NamespaceMode::Node as i32,
            uids: Vec::new(),
            gids: Vec::new(),
        }),
    }
}

fn selinux_option(o: &SELinuxOptions) -> api::SeLinuxOption {
    api::SeLinuxOption {
        user: o.user.clone().unwrap_or_default(),
        role: o.role.clone().unwrap_or_default(),
        r#type: o.type_.clone().unwrap_or_default(),
        level: o.level.clone().unwrap_or_default(),
    }
}

/// fsGroup first, then supplementalGroups, as kubelet appends them.
fn pod_supplemental_groups(pod: &Pod) -> Vec<i64> {
    let Some(sc) = spec(pod).security_context.as_ref() else {
        return Vec::new();
    };
    sc.fs_group
        .iter()
        .copied()
        .chain(sc.supplemental_groups.iter().flatten().copied())
        .collect()
}

fn supplemental_groups_policy(pod: &Pod) -> i32 {
    match spec(pod)
        .security_context
        .as_ref()
        .and_then(|sc| sc.supplemental_groups_policy.as_deref())
    {
        Some("Strict") => api::SupplementalGroupsPolicy::Strict as i32,
        _ => api::SupplementalGroupsPolicy::Merge as i32,
    }
}

fn sandbox_linux_config(pod: &Pod, cgroup_parent: &str) -> api::LinuxPodSandboxConfig {
    let psc = spec(pod).security_context.as_ref();
    let privileged = accessors::all_containers(pod).map(|(c, _)| c).any(|c| {
        c.security_context
            .as_ref()
            .and_then(|sc| sc.privileged)
            .unwrap_or(false)
    });
    let security_context = api::LinuxSandboxSecurityContext {
        namespace_options: Some(namespace_options(pod)),
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
            .map(|s| (s.name.clone(), s.value.clone()))
            .collect(),
        overhead: None,
        resources: None,
    }
}

/// The pod's hostname and domain (kubelet's `GeneratePodHostNameAndDomain`):
/// `spec.hostname` or the pod name, cut to 63 characters without a trailing
/// `-`/`.`; the domain is `<subdomain>.<ns>.svc.<clusterDomain>` when
/// `spec.subdomain` is set, else "".
pub fn pod_hostname_and_domain(pod: &Pod, cluster_domain: &str) -> (String, String) {
    let s = spec(pod);
    let hostname = match s.hostname.as_deref() {
        Some(h) if !h.is_empty() => h,
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
        Some(sub) if !sub.is_empty() => {
            format!("{sub}.{}.svc.{cluster_domain}", pod_namespace(pod))
        }
        _ => String::new(),
    };
    (hostname, domain)
}

// ---------------------------------------------------------------------------
// DNS (pkg/kubelet/network/dns)
// ---------------------------------------------------------------------------

/// Parsed resolv.conf: nameservers accumulate, the last `search` line wins,
/// options accumulate with a later option of the same name replacing an
/// earlier one.
fn parse_resolv_conf(contents: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut servers = Vec::new();
    let mut searches = Vec::new();
    let mut options = Vec::new();
    for line in contents.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("nameserver") => {
                if let Some(ns) = fields.next() {
                    servers.push(ns.to_string());
                }
            }
            Some("search") => {
                searches = fields
                    .filter(|s| *s != ".")
                    .map(|s| s.strip_suffix('.').unwrap_or(s).to_string())
                    .collect();
            }
            Some("options") => {
                for opt in fields {
                    merge_option(&mut options, opt.to_string());
                }
            }
            _ => {}
        }
    }
    (servers, searches, options)
}

fn option_name(opt: &str) -> &str {
    opt.split(':').next().unwrap_or(opt)
}

/// Adds `opt`, replacing an option of the same name in place.
fn merge_option(options: &mut Vec<String>, opt: String) {
    match options
        .iter_mut()
        .find(|o| option_name(o) == option_name(&opt))
    {
        Some(existing) => *existing = opt,
        None => options.push(opt),
    }
}

fn omit_duplicates(items: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .filter(|s| seen.insert(s.clone()))
        .collect()
}

/// The pod's DNS config (kubelet's `GetPodDNS`); what cannot be honoured
/// goes to `warnings`.
pub fn dns_config(pod: &Pod, p: &SandboxParams, warnings: &mut Vec<String>) -> api::DnsConfig {
    let s = spec(pod);
    let (host_servers, host_searches, host_options) = p
        .host_resolv_conf
        .map(parse_resolv_conf)
        .unwrap_or_default();

    enum Kind {
        None,
        Cluster,
        Host,
    }
    let kind = match s.dns_policy.as_deref().unwrap_or("ClusterFirst") {
        "None" => Kind::None,
        "ClusterFirstWithHostNet" => Kind::Cluster,
        "Default" => Kind::Host,
        "ClusterFirst" if host_network(pod) => Kind::Host,
        "ClusterFirst" => Kind::Cluster,
        other => {
            warnings.push(format!("invalid dnsPolicy {other:?}, using ClusterFirst"));
            Kind::Cluster
        }
    };

    let mut cfg = match kind {
        Kind::None => api::DnsConfig::default(),
        Kind::Cluster if !p.cluster_dns.is_empty() => {
            let searches = if p.cluster_domain.is_empty() {
                host_searches
            } else {
                let d = p.cluster_domain;
                let mut v = vec![
                    format!("{}.svc.{d}", pod_namespace(pod)),
                    format!("svc.{d}"),
                    d.to_string(),
                ];
                v.extend(host_searches);
                omit_duplicates(v)
            };
            api::DnsConfig {
                servers: p.cluster_dns.to_vec(),
                searches,
                options: vec!["ndots:5".to_string()],
            }
        }
        Kind::Cluster | Kind::Host => {
            // Kind::Cluster without clusterDNS falls back to dnsPolicy
            // Default, as kubelet does; the usual case on an edge node, so
            // no warning.
            if p.host_resolv_conf.is_none() {
                // resolvConf "": kubelet points the pod at the local resolver.
                api::DnsConfig {
                    servers: vec!["127.0.0.1".into()],
                    searches: vec![".".into()],
                    options: Vec::new(),
                }
            } else {
                api::DnsConfig {
                    servers: host_servers,
                    searches: host_searches,
                    options: host_options,
                }
            }
        }
    };

    if let Some(extra) = s.dns_config.as_ref() {
        let mut servers = std::mem::take(&mut cfg.servers);
        servers.extend(extra.nameservers.iter().flatten().cloned());
        cfg.servers = omit_duplicates(servers);
        let mut searches = std::mem::take(&mut cfg.searches);
        searches.extend(extra.searches.iter().flatten().cloned());
        cfg.searches = omit_duplicates(searches);
        for o in extra.options.iter().flatten() {
            let Some(name) = o.name.as_deref() else {
                continue;
            };
            let opt = match o.value.as_deref() {
                Some(v) if !v.is_empty() => format!("{name}:{v}"),
                _ => name.to_string(),
            };
            merge_option(&mut cfg.options, opt);
        }
    }

    // formDNSConfigFitsLimits
    if cfg.servers.len() > MAX_DNS_NAMESERVERS {
        warnings.push(format!(
            "more than {MAX_DNS_NAMESERVERS} nameservers; keeping the first ones"
        ));
        cfg.servers.truncate(MAX_DNS_NAMESERVERS);
    }
    cfg.searches.truncate(MAX_DNS_SEARCH_PATHS);
    cfg.searches
        .retain(|s| s.len() <= DNS1123_SUBDOMAIN_MAX_LEN);
    let joined = cfg.searches.join(" ").len();
    if joined > MAX_DNS_SEARCH_LIST_CHARS {
        let mut len = joined;
        while len > MAX_DNS_SEARCH_LIST_CHARS {
            let Some(last) = cfg.searches.pop() else {
                break;
            };
            len = len.saturating_sub(last.len() + 1);
        }
    }
    cfg
}

// ---------------------------------------------------------------------------
// /etc/hosts
// ---------------------------------------------------------------------------

fn host_aliases_entries(pod: &Pod) -> String {
    let aliases = spec(pod).host_aliases.as_deref().unwrap_or_default();
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for a in aliases {
        let names: Vec<&str> = a.hostnames.iter().flatten().map(String::as_str).collect();
        out.push_str(&format!("{}\t{}\n", a.ip, names.join("\t")));
    }
    out
}

/// kubelet's managed /etc/hosts for a pod-network pod
/// (`managedHostsFileContent`): localhost and ip6 lines, one line per pod IP
/// with the hostname (and FQDN when the pod has a subdomain), then hostAliases.
pub fn hosts_file(pod: &Pod, pod_ips: &[String], cluster_domain: &str) -> String {
    let (hostname, domain) = pod_hostname_and_domain(pod, cluster_domain);
    let mut out = String::from(
        "# Kubernetes-managed hosts file.\n\
         127.0.0.1\tlocalhost\n\
         ::1\tlocalhost ip6-localhost ip6-loopback\n\
         fe00::0\tip6-localnet\n\
         fe00::0\tip6-mcastprefix\n\
         fe00::1\tip6-allnodes\n\
         fe00::2\tip6-allrouters\n",
    );
    for ip in pod_ips {
        if domain.is_empty() {
            out.push_str(&format!("{ip}\t{hostname}\n"));
        } else {
            out.push_str(&format!("{ip}\t{hostname}.{domain}\t{hostname}\n"));
        }
    }
    out.push_str(&host_aliases_entries(pod));
    out
}

/// kubelet's /etc/hosts for a host-network pod (`nodeHostsFileContent`): the
/// node's own hosts file under a header, then hostAliases.
pub fn host_network_hosts_file(pod: &Pod, node_hosts: &str) -> String {
    let mut out = String::from("# Kubernetes-managed hosts file (host network).\n");
    out.push_str(node_hosts);
    out.push_str(&host_aliases_entries(pod));
    out
}

// ---------------------------------------------------------------------------
// Volumes
// ---------------------------------------------------------------------------

/// The volume source's type as written in YAML (`hostPath`, `configMap`, ...).
/// A volume with no source is an emptyDir (API defaulting).
fn volume_type(v: &Volume) -> String {
    if v.host_path.is_some() {
        return "hostPath".into();
    }
    if v.empty_dir.is_some() {
        return "emptyDir".into();
    }
    match super::to_json_value(v) {
        Ok(serde_json::Value::Object(m)) => m
            .keys()
            .find(|k| *k != "name")
            .cloned()
            .unwrap_or_else(|| "emptyDir".into()),
        _ => "unknown".into(),
    }
}

/// Names of the emptyDir volumes (including source-less ones, which API
/// defaulting turns into emptyDir) whose directories the caller must create
/// under `<root-dir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>`.
pub fn empty_dir_volumes(pod: &Pod) -> Vec<String> {
    spec(pod)
        .volumes
        .iter()
        .flatten()
        .filter(|v| volume_type(v) == "emptyDir")
        .map(|v| v.name.clone())
        .collect()
}

/// `(path, type)` of every hostPath volume; creating `DirectoryOrCreate` /
/// `FileOrCreate` paths and checking the other types is the caller's job.
pub fn host_path_volumes(pod: &Pod) -> Vec<(String, Option<String>)> {
    spec(pod)
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.host_path.as_ref())
        .map(|h| (h.path.clone(), h.type_.clone().filter(|t| !t.is_empty())))
        .collect()
}

// ---------------------------------------------------------------------------
// Container
// ---------------------------------------------------------------------------

fn no_volume_dir(_: &str) -> Option<PathBuf> {
    None
}

/// Environment-specific inputs to [`container_config`].
#[derive(Clone, Copy)]
pub struct ContainerParams<'a> {
    /// Restart count; becomes the CRI attempt and the log file `<name>/<attempt>.log`.
    pub attempt: u32,
    /// The image to run: the resolved image ID/ref from ImageStatus/PullImage.
    pub image: &'a str,
    /// Primary pod IP (ignored when `pod_ips` is non-empty: its first entry wins).
    pub pod_ip: &'a str,
    /// All pod IPs.
    pub pod_ips: &'a [String],
    /// The node's IP (downward API `status.hostIP` / `status.hostIPs`).
    pub host_ip: &'a str,
    /// emptyDir volume name -> the host directory the caller created for it.
    pub volume_dir: &'a dyn Fn(&str) -> Option<PathBuf>,
    /// oom_score_adj for this container (from its QoS class).
    pub oom_score_adj: i64,
    /// The pod cgroup (informational; the runtime takes it from the sandbox).
    pub pod_cgroup_parent: &'a str,
    /// Node allocatable CPU, the default for `limits.cpu` in resourceFieldRef.
    pub node_allocatable_cpu_millis: Option<u64>,
    /// Node allocatable memory, the default for `limits.memory` in resourceFieldRef.
    pub node_allocatable_memory_bytes: Option<u64>,
    /// Host file (`<root-dir>/pods/<uid>/containers/<name>/<random>`) to mount
    /// at the container's terminationMessagePath.
    pub termination_log_host_path: Option<&'a Path>,
    /// The pod's managed hosts file, mounted at /etc/hosts unless the
    /// container mounts something there itself.
    pub etc_hosts: Option<&'a Path>,
    /// kubelet's seccomp profile root (`<root-dir>/seccomp`), for Localhost profiles.
    pub seccomp_profile_root: Option<&'a Path>,
}

impl Default for ContainerParams<'_> {
    fn default() -> Self {
        ContainerParams {
            attempt: 0,
            image: "",
            pod_ip: "",
            pod_ips: &[],
            host_ip: "",
            volume_dir: &no_volume_dir,
            oom_score_adj: 0,
            pod_cgroup_parent: "",
            node_allocatable_cpu_millis: None,
            node_allocatable_memory_bytes: None,
            termination_log_host_path: None,
            etc_hosts: None,
            seccomp_profile_root: None,
        }
    }
}

impl std::fmt::Debug for ContainerParams<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerParams")
            .field("attempt", &self.attempt)
            .field("image", &self.image)
            .field("pod_ip", &self.pod_ip)
            .field("pod_ips", &self.pod_ips)
            .field("host_ip", &self.host_ip)
            .field("oom_score_adj", &self.oom_score_adj)
            .field("pod_cgroup_parent", &self.pod_cgroup_parent)
            .field("termination_log_host_path", &self.termination_log_host_path)
            .field("etc_hosts", &self.etc_hosts)
            .finish_non_exhaustive()
    }
}

/// The labels kubelet puts on a container.
pub fn container_labels(pod: &Pod, c: &Container) -> HashMap<String, String> {
    HashMap::from([
        (POD_NAME_LABEL.to_string(), pod_name(pod).to_string()),
        (
            POD_NAMESPACE_LABEL.to_string(),
            pod_namespace(pod).to_string(),
        ),
        (POD_UID_LABEL.to_string(), pod_uid(pod).to_string()),
        (CONTAINER_NAME_LABEL.to_string(), c.name.clone()),
    ])
}

/// A stable hash of the container spec: hex md5 of its JSON serialization
/// (struct fields in a fixed order, maps sorted). Recorded as
/// `io.kubernetes.container.hash`; any spec change changes it.
pub fn container_hash(c: &Container) -> String {
    let json = serde_json::to_vec(c).unwrap_or_default();
    format!("{:x}", md5::compute(json))
}

/// JSON of the ports as Go's `json.Marshal([]v1.ContainerPort)` writes it.
fn ports_json(ports: &[ContainerPort]) -> String {
    let items: Vec<String> = ports
        .iter()
        .map(|p| {
            let mut fields = Vec::new();
            if let Some(n) = p.name.as_deref().filter(|n| !n.is_empty()) {
                fields.push(format!("\"name\":{}", serde_json::Value::from(n)));
            }
            if let Some(hp) = p.host_port.filter(|hp| *hp != 0) {
                fields.push(format!("\"hostPort\":{hp}"));
            }
            fields.push(format!("\"containerPort\":{}", p.container_port));
            if let Some(pr) = p.protocol.as_deref().filter(|s| !s.is_empty()) {
                fields.push(format!("\"protocol\":{}", serde_json::Value::from(pr)));
            }
            if let Some(ip) = p.host_ip.as_deref().filter(|s| !s.is_empty()) {
                fields.push(format!("\"hostIP\":{}", serde_json::Value::from(ip)));
            }
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    format!("[{}]", items.join(","))
}

fn container_annotations(pod: &Pod, c: &Container, attempt: u32) -> HashMap<String, String> {
    let s = spec(pod);
    let mut a = HashMap::new();
    a.insert(CONTAINER_HASH_ANNOTATION.into(), container_hash(c));
    a.insert(
        CONTAINER_RESTART_COUNT_ANNOTATION.into(),
        attempt.to_string(),
    );
    a.insert(
        CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION.into(),
        c.termination_message_path.clone().unwrap_or_default(),
    );
    a.insert(
        CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION.into(),
        c.termination_message_policy.clone().unwrap_or_default(),
    );
    if let Some(g) = pod.metadata.deletion_grace_period_seconds {
        a.insert(POD_DELETION_GRACE_PERIOD_ANNOTATION.into(), g.to_string());
    }
    if let Some(g) = s.termination_grace_period_seconds {
        a.insert(
            POD_TERMINATION_GRACE_PERIOD_ANNOTATION.into(),
            g.to_string(),
        );
    }
    if let Some(pre_stop) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) {
        if let Ok(json) = serde_json::to_string(pre_stop) {
            a.insert(CONTAINER_PRE_STOP_HANDLER_ANNOTATION.into(), json);
        }
    }
    if let Some(ports) = c.ports.as_deref().filter(|p| !p.is_empty()) {
        a.insert(CONTAINER_PORTS_ANNOTATION.into(), ports_json(ports));
    }
    a
}

/// The `CreateContainer` config for container `c` of `pod` (kubelet's
/// `generateContainerConfig` + `generateLinuxContainerConfig`). Works for
/// init containers too.
pub fn container_config(
    pod: &Pod,
    c: &Container,
    p: &ContainerParams,
) -> Result<api::ContainerConfig, SpecError> {
    if c.volume_devices.as_deref().is_some_and(|d| !d.is_empty()) {
        return Err(SpecError::new(
            &c.name,
            "volumeDevices",
            "block volumes are not supported",
        ));
    }
    let envs = container_env(pod, c, p)?;
    let env_map: HashMap<&str, &str> = envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let lookup = |name: &str| env_map.get(name).map(|v| v.to_string());
    let command = c
        .command
        .iter()
        .flatten()
        .map(|s| expand(s, &lookup))
        .collect();
    let args = c
        .args
        .iter()
        .flatten()
        .map(|s| expand(s, &lookup))
        .collect();
    let mounts = container_mounts(pod, c, p, &env_map)?;
    let linux = api::LinuxContainerConfig {
        resources: Some(container_resources(c, p.oom_score_adj)?),
        security_context: Some(container_security_context(pod, c, p)?),
    };
    Ok(api::ContainerConfig {
        metadata: Some(api::ContainerMetadata {
            name: c.name.clone(),
            attempt: p.attempt,
        }),
        image: Some(api::ImageSpec {
            image: p.image.into(),
            annotations: HashMap::new(),
            user_specified_image: c.image.clone().unwrap_or_default(),
            runtime_handler: String::new(),
        }),
        command,
        args,
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs: envs
            .into_iter()
            .map(|(key, value)| api::KeyValue { key, value })
            .collect(),
        mounts,
        devices: Vec::new(),
        labels: container_labels(pod, c),
        annotations: container_annotations(pod, c, p.attempt),
        log_path: format!("{}/{}.log", c.name, p.attempt),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        linux: Some(linux),
    })
}

// ---------------------------------------------------------------------------
// $(VAR) expansion (k8s third_party/forked/golang/expansion)
// ---------------------------------------------------------------------------

/// kubelet's `expansion.Expand`: `$(NAME)` is replaced by `lookup(NAME)`,
/// left as written when the lookup fails; `$$` is an escaped `$`; any other
/// `$` is copied through.
pub fn expand(input: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let b = input.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < b.len() {
        if b[cursor] == b'$' && cursor + 1 < b.len() {
            out.extend_from_slice(&b[checkpoint..cursor]);
            let rest = &b[cursor + 1..];
            let advance = match rest[0] {
                b'$' => {
                    out.push(b'$');
                    1
                }
                b'(' => match rest.iter().position(|&ch| ch == b')') {
                    Some(close) => {
                        // `(` and `)` are ASCII, so these are char boundaries.
                        let name = &input[cursor + 2..cursor + 1 + close];
                        match lookup(name) {
                            Some(v) => out.extend_from_slice(v.as_bytes()),
                            None => out.extend_from_slice(format!("$({name})").as_bytes()),
                        }
                        close + 1
                    }
                    None => {
                        out.extend_from_slice(b"$(");
                        1
                    }
                },
                other => {
                    out.push(b'$');
                    out.push(other);
                    1
                }
            };
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    out.extend_from_slice(&b[checkpoint.min(b.len())..]);
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

// ---------------------------------------------------------------------------
// Environment (kubelet's makeEnvironmentVariables)
// ---------------------------------------------------------------------------

/// Ordered env with later assignments replacing earlier ones in place.
#[derive(Default)]
struct Env {
    vars: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl Env {
    fn set(&mut self, k: &str, v: String) {
        match self.index.get(k) {
            Some(&i) => self.vars[i].1 = v,
            None => {
                self.index.insert(k.to_string(), self.vars.len());
                self.vars.push((k.to_string(), v));
            }
        }
    }
    fn get(&self, k: &str) -> Option<String> {
        self.index.get(k).map(|&i| self.vars[i].1.clone())
    }
}

fn container_env(
    pod: &Pod,
    c: &Container,
    p: &ContainerParams,
) -> Result<Vec<(String, String)>, SpecError> {
    let mut env = Env::default();
    for (i, from) in c.env_from.iter().flatten().enumerate() {
        let field = format!("envFrom[{i}]");
        if let Some(cm) = from.config_map_ref.as_ref() {
            if cm.optional != Some(true) {
                return Err(SpecError::new(
                    &c.name,
                    field,
                    format!(
                        "configMapRef {:?} is not supported for static pods",
                        cm.name
                    ),
                ));
            }
        } else if let Some(sec) = from.secret_ref.as_ref() {
            if sec.optional != Some(true) {
                return Err(SpecError::new(
                    &c.name,
                    field,
                    format!("secretRef {:?} is not supported for static pods", sec.name),
                ));
            }
        }
    }
    for e in c.env.iter().flatten() {
        let value = env_value(pod, c, p, e, &env)?;
        if let Some(v) = value {
            env.set(&e.name, v);
        }
    }
    Ok(env.vars)
}

/// One env var's value; `None` when an optional source is skipped.
fn env_value(
    pod: &Pod,
    c: &Container,
    p: &ContainerParams,
    e: &EnvVar,
    env: &Env,
) -> Result<Option<String>, SpecError> {
    let err = |reason: String| SpecError::new(&c.name, format!("env {:?}", e.name), reason);
    if let Some(v) = e.value.as_deref().filter(|v| !v.is_empty()) {
        return Ok(Some(expand(v, &|name| env.get(name))));
    }
    let Some(from) = e.value_from.as_ref() else {
        return Ok(Some(String::new()));
    };
    if let Some(fr) = from.field_ref.as_ref() {
        return field_ref_value(pod, p, fr).map(Some).map_err(err);
    }
    if let Some(rf) = from.resource_field_ref.as_ref() {
        return resource_field_value(pod, c, p, rf).map(Some).map_err(err);
    }
    if let Some(cm) = from.config_map_key_ref.as_ref() {
        if cm.optional == Some(true) {
            return Ok(None);
        }
        return Err(err(
            "configMapKeyRef is not supported for static pods".into()
        ));
    }
    if let Some(s) = from.secret_key_ref.as_ref() {
        if s.optional == Some(true) {
            return Ok(None);
        }
        return Err(err("secretKeyRef is not supported for static pods".into()));
    }
    if let Some(f) = from.file_key_ref.as_ref() {
        if f.optional == Some(true) {
            return Ok(None);
        }
        return Err(err("fileKeyRef is not supported".into()));
    }
    Ok(Some(String::new()))
}

/// Go's `%q` for the strings that occur in label/annotation values.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `k="v"` lines, sorted by key (kubelet's `fieldpath.FormatMap`).
fn format_map(m: Option<&BTreeMap<String, String>>) -> String {
    m.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// kubelet's `podFieldSelectorRuntimeValue` + `ExtractFieldPathAsString`.
fn field_ref_value(
    pod: &Pod,
    p: &ContainerParams,
    fr: &ObjectFieldSelector,
) -> Result<String, String> {
    if let Some(v) = fr.api_version.as_deref() {
        if !v.is_empty() && v != "v1" {
            return Err(format!("fieldRef: unsupported pod version {v:?}"));
        }
    }
    let path = fr.field_path.as_str();
    let s = spec(pod);
    let pod_ip = p.pod_ips.first().map(String::as_str).unwrap_or(p.pod_ip);
    let pod_ips = if p.pod_ips.is_empty() {
        if p.pod_ip.is_empty() {
            String::new()
        } else {
            p.pod_ip.to_string()
        }
    } else {
        p.pod_ips.join(",")
    };
    if let Some(s) = path.strip_suffix("']") {
        if let Some((base, key)) = s.split_once("['") {
            return match base {
                "metadata.labels" => Ok(pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|m| m.get(key))
                    .cloned()
                    .unwrap_or_default()),
                "metadata.annotations" => Ok(pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|m| m.get(key))
                    .cloned()
                    .unwrap_or_default()),
                _ => Err(format!(
                    "fieldRef: field label does not support subscript: {path:?}"
                )),
            };
        }
    }
    Ok(match path {
        "metadata.name" => pod_name(pod).into(),
        "metadata.namespace" => pod_namespace(pod).into(),
        "metadata.uid" => pod_uid(pod).into(),
        "metadata.labels" => format_map(pod.metadata.labels.as_ref()),
        "metadata.annotations" => format_map(pod.metadata.annotations.as_ref()),
        "spec.nodeName" | "spec.host" => s.node_name.clone().unwrap_or_default(),
        "spec.serviceAccountName" => s.service_account_name.clone().unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => p.host_ip.into(),
        "status.podIP" => pod_ip.into(),
        "status.podIPs" => pod_ips,
        other => return Err(format!("fieldRef: unsupported fieldPath {other:?}")),
    })
}

fn quantity_of<'c>(c: &'c Container, kind: &str, resource: &str) -> Option<&'c Quantity> {
    let r = c.resources.as_ref()?;
    let m = if kind == "limits" {
        r.limits.as_ref()?
    } else {
        r.requests.as_ref()?
    };
    m.get(resource)
}

/// A request, falling back to the limit as API defaulting does.
fn request_of<'c>(c: &'c Container, resource: &str) -> Option<&'c Quantity> {
    quantity_of(c, "requests", resource).or_else(|| quantity_of(c, "limits", resource))
}

/// kubelet's `containerResourceRuntimeValue` with `defaultPodLimitsForDownwardAPI`:
/// unset (or zero) limits default to node allocatable; values are rounded up
/// to whole divisors.
fn resource_field_value(
    pod: &Pod,
    c: &Container,
    p: &ContainerParams,
    rf: &ResourceFieldSelector,
) -> Result<String, String> {
    let target = match rf.container_name.as_deref().filter(|n| !n.is_empty()) {
        None => c,
        Some(name) => accessors::all_containers(pod)
            .map(|(c, _)| c)
            .find(|x| x.name == name)
            .ok_or_else(|| format!("resourceFieldRef: container {name:?} not found in the pod"))?,
    };
    let divisor = match rf.divisor.as_ref() {
        None => Qty::from_value(1),
        Some(d) => {
            let q = parse_resource(&d.0)
                .ok_or_else(|| format!("resourceFieldRef: invalid divisor {:?}", d.0))?;
            if q.is_zero() {
                Qty::from_value(1)
            } else {
                q
            }
        }
    };
    let parse = |q: &Quantity| {
        parse_resource(&q.0).ok_or_else(|| format!("resourceFieldRef: invalid quantity {:?}", q.0))
    };
    let (kind, resource) = rf
        .resource
        .split_once('.')
        .ok_or_else(|| format!("resourceFieldRef: unsupported resource {:?}", rf.resource))?;
    let value = match (kind, resource) {
        ("limits", "cpu") | ("limits", "memory") => {
            let set = match quantity_of(target, "limits", resource) {
                Some(q) => Some(parse(q)?).filter(|q| !q.is_zero()),
                None => None,
            };
            match set {
                Some(q) => q,
                None => {
                    let alloc = if resource == "cpu" {
                        p.node_allocatable_cpu_millis.map(Qty::from_millis)
                    } else {
                        p.node_allocatable_memory_bytes.map(Qty::from_value)
                    };
                    alloc.ok_or_else(|| {
                        format!(
                            "resourceFieldRef: limits.{resource} is not set and node allocatable {resource} is unknown"
                        )
                    })?
                }
            }
        }
        ("requests", "cpu") | ("requests", "memory") => match request_of(target, resource) {
            Some(q) => parse(q)?,
            None => Qty::from_value(0),
        },
        _ => {
            return Err(format!(
                "resourceFieldRef: unsupported resource {:?}",
                rf.resource
            ))
        }
    };
    let n = if resource == "cpu" {
        ceil_div(millis(value), millis(divisor).max(1))
    } else {
        ceil_div(units(value), units(divisor).max(1))
    };
    Ok(n.to_string())
}

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

// ---------------------------------------------------------------------------
// Mounts (kubelet_pods.go makeMounts + kuberuntime makeMounts)
// ---------------------------------------------------------------------------

fn container_mounts(
    pod: &Pod,
    c: &Container,
    p: &ContainerParams,
    env: &HashMap<&str, &str>,
) -> Result<Vec<api::Mount>, SpecError> {
    let volumes: HashMap<&str, &Volume> = spec(pod)
        .volumes
        .iter()
        .flatten()
        .map(|v| (v.name.as_str(), v))
        .collect();
    let privileged = c
        .security_context
        .as_ref()
        .and_then(|sc| sc.privileged)
        .unwrap_or(false);
    let mut mounts = Vec::new();
    let mut mounts_etc_hosts = false;
    for m in c.volume_mounts.iter().flatten() {
        let field = format!("volumeMount {:?}", m.name);
        let err = |reason: String| SpecError::new(&c.name, field.clone(), reason);
        let vol = volumes
            .get(m.name.as_str())
            .ok_or_else(|| err(format!("volume {:?} not found in the pod", m.name)))?;
        let (base, relabel) = match volume_type(vol).as_str() {
            "hostPath" => (
                PathBuf::from(
                    &vol.host_path
                        .as_ref()
                        .map(|h| h.path.clone())
                        .unwrap_or_default(),
                ),
                false,
            ),
            "emptyDir" => {
                let dir = (p.volume_dir)(&m.name).ok_or_else(|| {
                    err(format!(
                        "no host directory was prepared for emptyDir volume {:?}",
                        m.name
                    ))
                })?;
                (dir, true)
            }
            other => {
                return Err(err(format!(
                    "volume {:?} of type {other} is not supported",
                    m.name
                )));
            }
        };
        let sub_path = sub_path(m, env).map_err(&err)?;
        let host_path = match sub_path {
            Some(sp) => base.join(sp),
            None => base,
        };
        let mut container_path = m.mount_path.clone();
        if !container_path.starts_with('/') {
            container_path.insert(0, '/');
        }
        if container_path == ETC_HOSTS_PATH {
            mounts_etc_hosts = true;
        }
        mounts.push(api::Mount {
            container_path,
            host_path: host_path.to_string_lossy().into_owned(),
            readonly: m.read_only.unwrap_or(false),
            selinux_relabel: relabel,
            propagation: mount_propagation(m, privileged).map_err(&err)? as i32,
            ..Default::default()
        });
    }
    if let Some(hosts) = p.etc_hosts {
        if !mounts_etc_hosts {
            mounts.push(api::Mount {
                container_path: ETC_HOSTS_PATH.into(),
                host_path: hosts.to_string_lossy().into_owned(),
                readonly: false,
                selinux_relabel: true,
                ..Default::default()
            });
        }
    }
    if let (Some(host), Some(path)) = (
        p.termination_log_host_path,
        c.termination_message_path
            .as_deref()
            .filter(|s| !s.is_empty()),
    ) {
        mounts.push(api::Mount {
            container_path: path.into(),
            host_path: host.to_string_lossy().into_owned(),
            readonly: false,
            selinux_relabel: true,
            ..Default::default()
        });
    }
    Ok(mounts)
}

/// The validated subPath (or expanded subPathExpr) of a mount.
fn sub_path(m: &VolumeMount, env: &HashMap<&str, &str>) -> Result<Option<String>, String> {
    let sp = match (m.sub_path.as_deref(), m.sub_path_expr.as_deref()) {
        (Some(sp), _) if !sp.is_empty() => sp.to_string(),
        (_, Some(expr)) if !expr.is_empty() => {
            let missing = expr_missing_vars(expr, env);
            if !missing.is_empty() {
                return Err(format!(
                    "subPathExpr {expr:?}: missing value for {}",
                    missing.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
            expand(expr, &|name| env.get(name).map(|v| v.to_string()))
        }
        _ => return Ok(None),
    };
    if Path::new(&sp).is_absolute() {
        return Err(format!("subPath {sp:?} must not be an absolute path"));
    }
    if Path::new(&sp)
        .components()
        .any(|c| c == Component::ParentDir)
        || sp.split('/').any(|c| c == "..")
    {
        return Err(format!("subPath {sp:?} must not contain '..'"));
    }
    Ok(Some(sp))
}

fn expr_missing_vars(expr: &str, env: &HashMap<&str, &str>) -> std::collections::BTreeSet<String> {
    let missing = std::cell::RefCell::new(std::collections::BTreeSet::new());
    expand(expr, &|name| {
        match env.get(name) {
            Some(v) if !v.is_empty() => {}
            _ => {
                missing.borrow_mut().insert(name.to_string());
            }
        }
        Some(String::new())
    });
    missing.into_inner()
}

fn mount_propagation(m: &VolumeMount, privileged: bool) -> Result<api::MountPropagation, String> {
    match m.mount_propagation.as_deref() {
        None | Some("") | Some("None") => Ok(api::MountPropagation::PropagationPrivate),
        Some("HostToContainer") => Ok(api::MountPropagation::PropagationHostToContainer),
        Some("Bidirectional") if privileged => Ok(api::MountPropagation::PropagationBidirectional),
        Some("Bidirectional") => {
            Err("Bidirectional mount propagation is only allowed for privileged containers".into())
        }
        Some(other) => Err(format!("invalid mountPropagation {other:?}")),
    }
}

// ---------------------------------------------------------------------------
// Resources (kuberuntime_container_linux.go)
// ---------------------------------------------------------------------------

fn container_resources(
    c: &Container,
    oom_score_adj: i64,
) -> Result<api::LinuxContainerResources, SpecError> {
    let q = |kind: &str, res: &str| -> Result<Option<Qty>, SpecError> {
        match quantity_of(c, kind, res) {
            None => Ok(None),
            Some(v) => parse_resource(&v.0).map(Some).ok_or_else(|| {
                SpecError::new(
                    &c.name,
                    format!("resources.{kind}.{res}"),
                    format!("invalid quantity {:?}", v.0),
                )
            }),
        }
    };
    let cpu_request = q("requests", "cpu")?;
    let cpu_limit = q("limits", "cpu")?.map(millis).unwrap_or(0);
    let mem_limit = q("limits", "memory")?
        .map(|q| as_i64(units(q)))
        .unwrap_or(0);
    let cpu = qos::container_cpu(cpu_request.map(millis), cpu_limit);
    Ok(api::LinuxContainerResources {
        cpu_period: as_i64(cpu.period_us),
        cpu_quota: cpu.quota_us,
        cpu_shares: as_i64(cpu.shares),
        memory_limit_in_bytes: mem_limit,
        oom_score_adj,
        ..Default::default()
    })
}

// ---------------------------------------------------------------------------
// Security context
// ---------------------------------------------------------------------------

fn seccomp_profile(
    c: &Container,
    sp: &SeccompProfile,
    root: Option<&Path>,
) -> Result<api::SecurityProfile, SpecError> {
    use api::security_profile::ProfileType;
    let (profile_type, localhost_ref) = match sp.type_.as_str() {
        "RuntimeDefault" => (ProfileType::RuntimeDefault, String::new()),
        "Localhost" => {
            let Some(prof) = sp.localhost_profile.as_deref().filter(|s| !s.is_empty()) else {
                return Err(SpecError::new(
                    &c.name,
                    "securityContext.seccompProfile",
                    "localhostProfile must be set if seccompProfile type is Localhost",
                ));
            };
            let Some(root) = root else {
                return Err(SpecError::new(
                    &c.name,
                    "securityContext.seccompProfile",
                    "Localhost profiles need a seccomp profile root",
                ));
            };
            (
                ProfileType::Localhost,
                root.join(prof).to_string_lossy().into_owned(),
            )
        }
        _ => (ProfileType::Unconfined, String::new()),
    };
    Ok(api::SecurityProfile {
        profile_type: profile_type as i32,
        localhost_ref,
    })
}

fn container_security_context(
    pod: &Pod,
    c: &Container,
    p: &ContainerParams,
) -> Result<api::LinuxContainerSecurityContext, SpecError> {
    let psc = spec(pod).security_context.as_ref();
    let csc = c.security_context.as_ref();
    let run_as_user = csc
        .and_then(|s| s.run_as_user)
        .or(psc.and_then(|s| s.run_as_user));
    let run_as_group = csc
        .and_then(|s| s.run_as_group)
        .or(psc.and_then(|s| s.run_as_group));
    let run_as_non_root = csc
        .and_then(|s| s.run_as_non_root)
        .or(psc.and_then(|s| s.run_as_non_root))
        .unwrap_or(false);
    if run_as_non_root && run_as_user == Some(0) {
        return Err(SpecError::new(
            &c.name,
            "securityContext.runAsUser",
            "runAsUser 0 breaks the runAsNonRoot policy",
        ));
    }
    let selinux = csc
        .and_then(|s| s.se_linux_options.as_ref())
        .or(psc.and_then(|s| s.se_linux_options.as_ref()))
        .map(selinux_option);
    let privileged = csc.and_then(|s| s.privileged).unwrap_or(false);
    let capabilities = csc
        .and_then(|s| s.capabilities.as_ref())
        .map(|caps| api::Capability {
            add_capabilities: caps.add.clone().unwrap_or_default(),
            drop_capabilities: caps.drop.clone().unwrap_or_default(),
            add_ambient_capabilities: Vec::new(),
        });
    let seccomp = match csc
        .and_then(|s| s.seccomp_profile.as_ref())
        .or(psc.and_then(|s| s.seccomp_profile.as_ref()))
    {
        Some(sp) => seccomp_profile(c, sp, p.seccomp_profile_root)?,
        None => api::SecurityProfile {
            profile_type: api::security_profile::ProfileType::Unconfined as i32,
            localhost_ref: String::new(),
        },
    };
    let unmasked = csc.and_then(|s| s.proc_mount.as_deref()) == Some("Unmasked");
    let (masked_paths, readonly_paths) = if privileged || unmasked {
        (Vec::new(), Vec::new())
    } else {
        (
            DEFAULT_MASKED_PATHS.iter().map(|s| s.to_string()).collect(),
            DEFAULT_READONLY_PATHS
                .iter()
                .map(|s| s.to_string())
                .collect(),
        )
    };
    Ok(api::LinuxContainerSecurityContext {
        capabilities,
        privileged,
        namespace_options: Some(namespace_options(pod)),
        selinux_options: selinux,
        run_as_user: run_as_user.map(|value| api::Int64Value { value }),
        run_as_username: String::new(),
        readonly_rootfs: csc
            .and_then(|s| s.read_only_root_filesystem)
            .unwrap_or(false),
        supplemental_groups: pod_supplemental_groups(pod),
        no_new_privs: csc
            .and_then(|s| s.allow_privilege_escalation)
            .map(|a| !a)
            .unwrap_or(false),
        run_as_group: run_as_group.map(|value| api::Int64Value { value }),
        masked_paths,
        readonly_paths,
        seccomp: Some(seccomp),
        apparmor: None,
        supplemental_groups_policy: supplemental_groups_policy(pod),
        ..Default::default()
    })
}

// ---------------------------------------------------------------------------
// Quantities
// ---------------------------------------------------------------------------

/// A resource quantity from a pod (a request, limit or divisor), parsed by
/// [`crate::quantity`]. No resource can be negative, so negatives are `None`.
fn parse_resource(s: &str) -> Option<Qty> {
    Qty::parse(s).ok().filter(|q| !q.is_negative())
}

/// Millicores, rounded up (Go's `MilliValue`); saturates at `u64::MAX`.
fn millis(q: Qty) -> u64 {
    q.milli_value().unwrap_or(u64::MAX)
}

/// Whole units (bytes), rounded up (Go's `Value`); saturates at `u64::MAX`.
fn units(q: Qty) -> u64 {
    q.value().unwrap_or(u64::MAX)
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml_ng::from_str(yaml).expect("test pod parses")
    }

    const BASIC: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: edge
  uid: 1234-abcd
  labels: {app: web}
  annotations: {kubernetes.io/config.source: file}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: app
    image: nginx:1.27
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
"#;

    fn sandbox_params<'a>(dns: &'a [String], resolv: Option<&'a str>) -> SandboxParams<'a> {
        SandboxParams {
            attempt: 2,
            cgroup_parent: "/kubepods/burstable/pod1234-abcd",
            pod_logs_dir: Path::new("/var/log/pods"),
            cluster_dns: dns,
            cluster_domain: "cluster.local",
            host_resolv_conf: resolv,
        }
    }

    const HOST_RESOLV: &str = "# generated\nnameserver 192.168.1.1\nnameserver 8.8.8.8\nsearch lan. example.com\noptions edns0 ndots:2\n";

    fn first(pod: &Pod) -> &Container {
        &pod.spec.as_ref().unwrap().containers[0]
    }

    fn params() -> ContainerParams<'static> {
        ContainerParams {
            image: "sha256:deadbeef",
            pod_ip: "10.0.0.5",
            pod_ips: &[],
            host_ip: "192.168.1.10",
            ..Default::default()
        }
    }

    fn env_of(cfg: &api::ContainerConfig, key: &str) -> Option<String> {
        cfg.envs
            .iter()
            .find(|kv| kv.key == key)
            .map(|kv| kv.value.clone())
    }

    #[test]
    fn what_cannot_be_honoured_comes_back_as_warnings_not_log_lines() {
        let p = pod(r#"
metadata: {name: web, namespace: edge, uid: u1}
spec:
  hostUsers: false
  dnsPolicy: Sideways
  containers:
  - name: app
    ports:
    - {name: http, containerPort: 80}
    - {name: http, containerPort: 81}
    - {containerPort: 82, protocol: QUIC}
"#);
        let (cfg, warnings) = sandbox_config(&p, &sandbox_params(&[], None));
        assert_eq!(cfg.port_mappings.len(), 2, "{:?}", cfg.port_mappings);
        let all = warnings.join("\n");
        for needle in [
            "hostUsers",
            "Sideways",
            "\"http\" is defined more than once",
            "QUIC",
        ] {
            assert!(all.contains(needle), "{needle} in {all}");
        }
        let (_, none) = sandbox_config(&pod(BASIC), &sandbox_params(&[], None));
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn sandbox_carries_metadata_labels_annotations_and_log_directory() {
        let p = pod(BASIC);
        let cfg = sandbox_config(&p, &sandbox_params(&[], None)).0;
        let md = cfg.metadata.unwrap();
        assert_eq!(
            (
                md.name.as_str(),
                md.namespace.as_str(),
                md.uid.as_str(),
                md.attempt
            ),
            ("web", "edge", "1234-abcd", 2)
        );
        assert_eq!(cfg.labels["app"], "web");
        assert_eq!(cfg.labels[POD_NAME_LABEL], "web");
        assert_eq!(cfg.labels[POD_NAMESPACE_LABEL], "edge");
        assert_eq!(cfg.labels[POD_UID_LABEL], "1234-abcd");
        assert_eq!(cfg.annotations["kubernetes.io/config.source"], "file");
        assert_eq!(cfg.log_directory, "/var/log/pods/edge_web_1234-abcd");
        assert_eq!(cfg.hostname, "web");
        let linux = cfg.linux.unwrap();
        assert_eq!(linux.cgroup_parent, "/kubepods/burstable/pod1234-abcd");
        let sc = linux.security_context.unwrap();
        assert!(!sc.privileged);
        assert_eq!(
            sc.seccomp.unwrap().profile_type,
            api::security_profile::ProfileType::RuntimeDefault as i32
        );
    }

    #[test]
    fn log_directory_is_namespace_name_uid_under_the_logs_dir() {
        assert_eq!(
            log_directory(Path::new("/var/log/pods"), "ns", "n", "u"),
            PathBuf::from("/var/log/pods/ns_n_u")
        );
    }

    #[test]
    fn hostname_is_spec_hostname_truncated_to_63_chars_and_empty_on_host_network() {
        let long = "a".repeat(62) + "-bc";
        let p = pod(&BASIC.replace(
            "  terminationGracePeriodSeconds: 30",
            &format!("  hostname: {long}\n  subdomain: sub"),
        ));
        let cfg = sandbox_config(&p, &sandbox_params(&[], None)).0;
        assert_eq!(cfg.hostname, "a".repeat(62));
        let p = pod(&BASIC.replace("  terminationGracePeriodSeconds: 30", "  hostNetwork: true"));
        assert_eq!(
            sandbox_config(&p, &sandbox_params(&[], None)).0.hostname,
            ""
        );
    }

    #[test]
    fn cluster_first_dns_uses_cluster_dns_with_search_domains_and_ndots5() {
        let p = pod(BASIC);
        let dns = vec!["10.96.0.10".to_string()];
        let cfg = dns_config(
            &p,
            &sandbox_params(&dns, Some(HOST_RESOLV)),
            &mut Vec::new(),
        );
        assert_eq!(cfg.servers, vec!["10.96.0.10"]);
        assert_eq!(
            cfg.searches,
            vec![
                "edge.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "lan",
                "example.com"
            ]
        );
        assert_eq!(cfg.options, vec!["ndots:5"]);
    }

    #[test]
    fn default_dns_policy_copies_the_host_resolv_conf() {
        let p = pod(&BASIC.replace(
            "  terminationGracePeriodSeconds: 30",
            "  dnsPolicy: Default",
        ));
        let dns = vec!["10.96.0.10".to_string()];
        let cfg = dns_config(
            &p,
            &sandbox_params(&dns, Some(HOST_RESOLV)),
            &mut Vec::new(),
        );
        assert_eq!(cfg.servers, vec!["192.168.1.1", "8.8.8.8"]);
        assert_eq!(cfg.searches, vec!["lan", "example.com"]);
        assert_eq!(cfg.options, vec!["edns0", "ndots:2"]);
    }

    #[test]
    fn cluster_first_without_cluster_dns_falls_back_to_the_host_and_without_resolv_conf_to_localhost(
    ) {
        let p = pod(BASIC);
        let cfg = dns_config(&p, &sandbox_params(&[], Some(HOST_RESOLV)), &mut Vec::new());
        assert_eq!(cfg.servers, vec!["192.168.1.1", "8.8.8.8"]);
        let cfg = dns_config(&p, &sandbox_params(&[], None), &mut Vec::new());
        assert_eq!(cfg.servers, vec!["127.0.0.1"]);
        assert_eq!(cfg.searches, vec!["."]);
    }

    #[test]
    fn host_network_cluster_first_uses_the_host_but_with_host_net_uses_the_cluster() {
        let dns = vec!["10.96.0.10".to_string()];
        let p = pod(&BASIC.replace("  terminationGracePeriodSeconds: 30", "  hostNetwork: true"));
        let cfg = dns_config(
            &p,
            &sandbox_params(&dns, Some(HOST_RESOLV)),
            &mut Vec::new(),
        );
        assert_eq!(cfg.servers, vec!["192.168.1.1", "8.8.8.8"]);
        let p = pod(&BASIC.replace(
            "  terminationGracePeriodSeconds: 30",
            "  hostNetwork: true\n  dnsPolicy: ClusterFirstWithHostNet",
        ));
        let cfg = dns_config(
            &p,
            &sandbox_params(&dns, Some(HOST_RESOLV)),
            &mut Vec::new(),
        );
        assert_eq!(cfg.servers, vec!["10.96.0.10"]);
        assert_eq!(cfg.options, vec!["ndots:5"]);
    }

    #[test]
    fn dns_policy_none_uses_only_dns_config_and_merges_options() {
        let p = pod(&BASIC.replace(
            "  terminationGracePeriodSeconds: 30",
            r#"  dnsPolicy: None
  dnsConfig:
    nameservers: [1.1.1.1, 1.0.0.1, 9.9.9.9, 8.8.8.8]
    searches: [a.example, a.example, b.example]
    options:
    - {name: ndots, value: "2"}
    - {name: edns0}
    - {name: ndots, value: "3"}"#,
        ));
        let dns = vec!["10.96.0.10".to_string()];
        let cfg = dns_config(
            &p,
            &sandbox_params(&dns, Some(HOST_RESOLV)),
            &mut Vec::new(),
        );
        assert_eq!(cfg.servers, vec!["1.1.1.1", "1.0.0.1", "9.9.9.9"]);
        assert_eq!(cfg.searches, vec!["a.example", "b.example"]);
        assert_eq!(cfg.options, vec!["ndots:3", "edns0"]);
    }

    #[test]
    fn dns_config_is_appended_to_cluster_first_and_search_paths_are_limited_to_32() {
        let searches: Vec<String> = (0..40).map(|i| format!("d{i}.example")).collect();
        let p = pod(&BASIC.replace(
            "  terminationGracePeriodSeconds: 30",
            &format!(
                "  dnsConfig:\n    nameservers: [1.1.1.1]\n    searches: [{}]\n    options: [{{name: ndots, value: \"1\"}}]",
                searches.join(", ")
            ),
        ));
        let dns = vec!["10.96.0.10".to_string()];
        let cfg = dns_config(&p, &sandbox_params(&dns, None), &mut Vec::new());
        assert_eq!(cfg.servers, vec!["10.96.0.10", "1.1.1.1"]);
        assert_eq!(cfg.searches.len(), 32);
        assert_eq!(cfg.searches[3], "d0.example");
        assert_eq!(cfg.options, vec!["ndots:1"]);
    }

    #[test]
    fn port_mappings_list_every_container_port_with_protocol_and_host_port() {
        let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: a
    image: x
    ports:
    - {containerPort: 80, hostPort: 8080, protocol: TCP}
    - {containerPort: 53, hostPort: 5353, protocol: UDP, hostIP: 127.0.0.1}
  - name: b
    image: y
    ports:
    - {containerPort: 9000, protocol: SCTP, hostPort: 9000}
    - {containerPort: 9100}
"#);
        let cfg = sandbox_config(&p, &sandbox_params(&[], None)).0;
        let got: Vec<(i32, i32, i32, &str)> = cfg
            .port_mappings
            .iter()
            .map(|m| {
                (
                    m.protocol,
                    m.container_port,
                    m.host_port,
                    m.host_ip.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (api::Protocol::Tcp as i32, 80, 8080, ""),
                (api::Protocol::Udp as i32, 53, 5353, "127.0.0.1"),
                (api::Protocol::Sctp as i32, 9000, 9000, ""),
                (api::Protocol::Tcp as i32, 9100, 0, ""),
            ]
        );
        let with_host_port = cfg.port_mappings.iter().filter(|m| m.host_port > 0).count();
        assert_eq!(with_host_port, 3);
    }

    #[test]
    fn namespace_options_follow_host_network_host_pid_host_ipc_and_share_process_namespace() {
        let ns = namespace_options(&pod(BASIC));
        assert_eq!(ns.network, api::NamespaceMode::Pod as i32);
        assert_eq!(ns.pid, api::NamespaceMode::Container as i32);
        assert_eq!(ns.ipc, api::NamespaceMode::Pod as i32);

        let p = pod(&BASIC.replace(
            "  terminationGracePeriodSeconds: 30",
            "  hostNetwork: true\n  hostIPC: true\n  shareProcessNamespace: true",
        ));
        let cfg = sandbox_config(&p, &sandbox_params(&[], None)).0;
        let ns = cfg
            .linux
            .unwrap()
            .security_context
            .unwrap()
            .namespace_options
            .unwrap();
        assert_eq!(ns.network, api::NamespaceMode::Node as i32);
        assert_eq!(ns.pid, api::NamespaceMode::Pod as i32);
        assert_eq!(ns.ipc, api::NamespaceMode::Node as i32);
        // Containers carry the same options.
        let c = container_config(&p, first(&p), &params()).unwrap();
        let cns = c
            .linux
            .unwrap()
            .security_context
            .unwrap()
            .namespace_options
            .unwrap();
        assert_eq!(cns, ns);

        let p = pod(&BASIC.replace("  terminationGracePeriodSeconds: 30", "  hostPID: true"));
        assert_eq!(namespace_options(&p).pid, api::NamespaceMode::Node as i32);
    }

    #[test]
    fn sandbox_security_context_has_pod_user_groups_sysctls_and_privileged_if_any_container_is() {
        let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  securityContext:
    runAsUser: 1000
    runAsGroup: 2000
    fsGroup: 3000
    supplementalGroups: [4000, 5000]
    sysctls: [{name: net.ipv4.ip_unprivileged_port_start, value: "0"}]
  initContainers:
  - {name: init, image: x, securityContext: {privileged: true}}
  containers:
  - {name: a, image: x}
"#);
        let linux = sandbox_config(&p, &sandbox_params(&[], None))
            .0
            .linux
            .unwrap();
        assert_eq!(linux.sysctls["net.ipv4.ip_unprivileged_port_start"], "0");
        let sc = linux.security_context.unwrap();
        assert_eq!(sc.run_as_user, Some(api::Int64Value { value: 1000 }));
        assert_eq!(sc.run_as_group, Some(api::Int64Value { value: 2000 }));
        assert_eq!(sc.supplemental_groups, vec![3000, 4000, 5000]);
        assert!(sc.privileged);
    }

    #[test]
    fn container_gets_labels_annotations_log_path_and_image() {
        let p = pod(&BASIC.replace(
            "    terminationMessagePolicy: File",
            "    terminationMessagePolicy: File\n    ports: [{name: http, containerPort: 80, protocol: TCP}]\n    workingDir: /srv\n    stdin: true\n    tty: true",
        ));
        let c = first(&p);
        let cfg = container_config(
            &p,
            c,
            &ContainerParams {
                attempt: 3,
                ..params()
            },
        )
        .unwrap();
        assert_eq!(
            cfg.metadata,
            Some(api::ContainerMetadata {
                name: "app".into(),
                attempt: 3
            })
        );
        let img = cfg.image.unwrap();
        assert_eq!(img.image, "sha256:deadbeef");
        assert_eq!(img.user_specified_image, "nginx:1.27");
        assert_eq!(cfg.log_path, "app/3.log");
        assert_eq!(cfg.working_dir, "/srv");
        assert!(cfg.stdin && cfg.tty && !cfg.stdin_once);
        assert_eq!(cfg.labels[CONTAINER_NAME_LABEL], "app");
        assert_eq!(cfg.labels[POD_NAME_LABEL], "web");
        assert_eq!(cfg.labels[POD_NAMESPACE_LABEL], "edge");
        assert_eq!(cfg.labels[POD_UID_LABEL], "1234-abcd");
        assert_eq!(cfg.labels.len(), 4);
        assert_eq!(
            cfg.annotations[CONTAINER_HASH_ANNOTATION],
            container_hash(c)
        );
        assert_eq!(cfg.annotations[CONTAINER_RESTART_COUNT_ANNOTATION], "3");
        assert_eq!(
            cfg.annotations[CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION],
            "/dev/termination-log"
        );
        assert_eq!(
            cfg.annotations[CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION],
            "File"
        );
        assert_eq!(
            cfg.annotations[POD_TERMINATION_GRACE_PERIOD_ANNOTATION],
            "30"
        );
        assert_eq!(
            cfg.annotations[CONTAINER_PORTS_ANNOTATION],
            r#"[{"name":"http","containerPort":80,"protocol":"TCP"}]"#
        );
    }

    #[test]
    fn command_and_args_expand_vars_and_double_dollar_escapes() {
        let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: a
    image: x
    command: ["/bin/$(CMD)"]
    args: ["--port=$(PORT)", "$$(PORT)", "$(MISSING)", "cost $5", "$(", "x$$y", "tail$"]
    env:
    - {name: CMD, value: server}
    - {name: PORT, value: "8080"}
"#);
        let cfg = container_config(&p, first(&p), &params()).unwrap();
        assert_eq!(cfg.command, vec!["/bin/server"]);
        assert_eq!(
            cfg.args,
            vec![
                "--port=8080",
                "$(PORT)",
                "$(MISSING)",
                "cost $5",
                "$(",
                "x$y",
                "tail$"
            ]
        );
    }

    #[test]
    fn env_values_expand_only_against_earlier_vars() {
        let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: a
    image: x
    env:
    - {name: A, value: one}
    - {name: B, value: "$(A)-two-$(C)"}
    - {name: C, value: three}
    - {name: D, value: "$$(A)"}
    - {name: E}
"#);
        let cfg = container_config(&p, first(&p), &params()).unwrap();
        let got: Vec<(&str, &str)> = cfg
            .envs
            .iter()
            .map(|kv| (kv.key.as_str(), kv.value.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("A", "one"),
                ("B", "one-two-$(C)"),
                ("C", "three"),
                ("D", "$(A)"),
                ("E", "")
            ]
        );
    }

    #[test]
    fn downward_api_field_refs_resolve_pod_metadata_and_ips() {
        let p = pod(r#"
metadata:
  name: p
  namespace: n
  uid: u-1
  labels: {tier: edge}
  annotations: {note: hi}
spec:
  nodeName: node-1
  serviceAccountName: sa
  containers:
  - name: a
    image: x
    env:
    - {name: NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: NS, valueFrom: {fieldRef: {apiVersion: v1, fieldPath: metadata.namespace}}}
    - {name: UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}
    - {name: TIER, valueFrom: {fieldRef: {fieldPath: "metadata.labels['tier']"}}}
    - {name: NOTE, valueFrom: {fieldRef: {fieldPath: "metadata.annotations['note']"}}}
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: SA, valueFrom: {fieldRef: {fieldPath: spec.serviceAccountName}}}
    - {name: HOST_IP, valueFrom: {fieldRef: {fieldPath: status.hostIP}}}
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: POD_IPS, valueFrom: {fieldRef: {fieldPath: status.podIPs}}}
    - {name: URL, value: "http://$(POD_IP):80/$(NAME)"}
"#);
        let ips = vec!["10.0.0.7".to_string(), "fd00::7".to_string()];
        let cfg = container_config(
            &p,
            first(&p),
            &ContainerParams {
                pod_ips: &ips,
                ..params()
            },
        )
        .unwrap();
        let e = |k| env_of(&cfg, k).unwrap();
        assert_eq!(e("NAME"), "p");
        assert_eq!(e("NS"), "n");
        assert_eq!(e("UID"), "u-1");
        assert_eq!(e("TIER"), "edge");
        assert_eq!(e("NOTE"), "hi");
        assert_eq!(e("NODE"), "node-1");
        assert_eq!(e("SA"), "sa");
        assert_eq!(e("HOST_IP"), "192.168.1.10");
        assert_eq!(e("POD_IP"), "10.0.0.7");
        assert_eq!(e("POD_IPS"), "10.0.0.7,fd00::7");
        assert_eq!(e("URL"), "http://10.0.0.7:80/p");
    }

    #[test]
    fn unsupported_field_ref_is_an_error_naming_the_var() {
        let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: a
    image: x
    env:
    - {name: PHASE, valueFrom: {fieldRef: {fieldPath: status.phase}}}
"#);
        let err = container_config(&p, first(&p), &params()).unwrap_err();
        assert_eq!(err.field, "env \"PHASE\"");
        assert!(err.to_string().contains("status.phase"), "{err}");
    }

    #[test]
    fn resource_field_refs_round_up_by_divisor_and_default_limits_to_allocatable() {
        let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: a
    image: x
    resources:
      requests: {cpu: 250m, memory: 64Mi}
      limits: {cpu: 1500m, memory: 128Mi}
    env:
    - {name: CPU_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}
    - {name: CPU_LIMIT_M, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}
    - {name: CPU_REQ, valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: "1"}}}
    - {name: MEM_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory}}}
    - {name: MEM_REQ_MI, valueFrom: {resourceFieldRef: {resource: requests.memory, divisor: 1Mi}}}
    - {name: SIDE_MEM, valueFrom: {resourceFieldRef: {containerName: b, resource: limits.memory, divisor: 1Mi}}}
  - name: b
    image: y
"#);
        let cp = ContainerParams {
            node_allocatable_cpu_millis: Some(4000),
            node_allocatable_memory_bytes: Some(2 << 30),
            ..params()
        };
        let cfg = container_config(&p, first(&p), &cp).unwrap();
        let e = |k| env_of(&cfg, k).unwrap();
        assert_eq!(e("CPU_LIMIT"), "2");
        assert_eq!(e("CPU_LIMIT_M"), "1500");
        assert_eq!(e("CPU_REQ"), "1");
        assert_eq!(e("MEM_LIMIT"), "134217728");
        assert_eq!(e("MEM_REQ_MI"), "64");
        assert_eq!(e("SIDE_MEM"), "2048");

        // Without a limit and without allocatable the value is unknowable.
        let err =
            container_config(&p, &p.spec.as_ref().unwrap().containers[0], &params()).unwrap_err();
        assert_eq!(err.field, "env \"SIDE_MEM\"");
    }

    #[test]
    fn config_map_key_ref_is_rejected_naming_the_env_var_unless_optional() {
        let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: app
    image: x
    env:
    - {name: OPT, valueFrom: {configMapKeyRef: {name: cm, key: k, optional: true}}}
    - {name: FOO, valueFrom: {configMapKeyRef: {name: cm, key: k}}}
"#);
        let err = container_config(&p, first(&p), &params()).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"container "app": env "FOO": configMapKeyRef is not supported for static pods"#
        );
        let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: app
    image: x
    env:
    - {name: OPT, valueFrom: {secretKeyRef: {name: s, key: k, optional: true}}}
    envFrom:
    - configMapRef: {name: maybe, optional: true}
"#);
        let cfg = container_config(&p, first(&p), &params()).unwrap();
        assert!(cfg.envs.is_empty());
        let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: app
    image: x
    envFrom:
    - secretRef: {name: creds}
"#);
        let err = container_config(&p, first(&p), &params()).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"container "app": envFrom[0]: secretRef "creds" is not supported for static pods"#
        );
    }

    const VOLUMES: &str = r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  volumes:
  - name: data
    hostPath: {path: /srv/data, type: DirectoryOrCreate}
  - name: scratch
    emptyDir: {}
  - name: defaulted
  - name: cfg
    configMap: {name: cm}
  containers:
  - name: app
    image: x
    terminationMessagePath: /dev/termination-log
    env: [{name: SUB, value: logs}]
    volumeMounts:
    - {name: data, mountPath: /data, readOnly: true}
    - {name: data, mountPath: /data-sub, subPath: a/b, mountPropagation: HostToContainer}
    - {name: scratch, mountPath: /scratch}
    - {name: scratch, mountPath: /logs, subPathExpr: "$(SUB)"}
"#;

    fn volume_dir(name: &str) -> Option<PathBuf> {
        Some(PathBuf::from("/var/lib/picolet/pods/u/volumes/kubernetes.io~empty-dir").join(name))
    }

    #[test]
    fn host_path_and_empty_dir_mounts_with_read_only_sub_path_and_propagation() {
        let p = pod(VOLUMES);
        let hosts = Path::new("/var/lib/picolet/pods/u/etc-hosts");
        let tlog = Path::new("/var/lib/picolet/pods/u/containers/app/abc123");
        let cp = ContainerParams {
            volume_dir: &volume_dir,
            etc_hosts: Some(hosts),
            termination_log_host_path: Some(tlog),
            ..params()
        };
        let cfg = container_config(&p, first(&p), &cp).unwrap();
        let got: Vec<(&str, &str, bool, i32)> = cfg
            .mounts
            .iter()
            .map(|m| {
                (
                    m.container_path.as_str(),
                    m.host_path.as_str(),
                    m.readonly,
                    m.propagation,
                )
            })
            .collect();
        let private = api::MountPropagation::PropagationPrivate as i32;
        let ed = "/var/lib/picolet/pods/u/volumes/kubernetes.io~empty-dir/scratch";
        assert_eq!(
            got,
            vec![
                ("/data", "/srv/data", true, private),
                (
                    "/data-sub",
                    "/srv/data/a/b",
                    false,
                    api::MountPropagation::PropagationHostToContainer as i32
                ),
                ("/scratch", ed, false, private),
                ("/logs", &format!("{ed}/logs") as &str, false, private),
                (
                    "/etc/hosts",
                    "/var/lib/picolet/pods/u/etc-hosts",
                    false,
                    private
                ),
                (
                    "/dev/termination-log",
                    "/var/lib/picolet/pods/u/containers/app/abc123",
                    false,
                    private
                ),
            ]
        );
        assert_eq!(empty_dir_volumes(&p), vec!["scratch", "defaulted"]);
        assert_eq!(
            host_path_volumes(&p),
            vec![(
                "/srv/data".to_string(),
                Some("DirectoryOrCreate".to_string())
            )]
        );
    }

    #[test]
    fn sub_path_with_dot_dot_or_absolute_is_rejected_naming_the_mount() {
        for bad in ["../etc", "a/../../b", "/etc"] {
            let p = pod(&VOLUMES.replace("subPath: a/b", &format!("subPath: {bad:?}")));
            let cp = ContainerParams {
                volume_dir: &volume_dir,
                ..params()
            };
            let err = container_config(&p, first(&p), &cp).unwrap_err();
            assert_eq!(err.field, "volumeMount \"data\"", "{bad}");
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn unsupported_or_unknown_volumes_are_rejected_naming_volume_and_type() {
        let p = pod(&VOLUMES.replace(
            "    - {name: data, mountPath: /data, readOnly: true}",
            "    - {name: cfg, mountPath: /cfg}",
        ));
        let cp = ContainerParams {
            volume_dir: &volume_dir,
            ..params()
        };
        let err = container_config(&p, first(&p), &cp).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"container "app": volumeMount "cfg": volume "cfg" of type configMap is not supported"#
        );
        let p = pod(&VOLUMES.replace(
            "    - {name: data, mountPath: /data, readOnly: true}",
            "    - {name: nope, mountPath: /x}",
        ));
        let err = container_config(&p, first(&p), &cp).unwrap_err();
        assert!(err.to_string().contains("\"nope\" not found"), "{err}");
    }

    #[test]
    fn container_mounting_etc_hosts_itself_does_not_get_the_managed_one() {
        let p = pod(&VOLUMES.replace("mountPath: /scratch}", "mountPath: /etc/hosts}"));
        let cp = ContainerParams {
            volume_dir: &volume_dir,
            etc_hosts: Some(Path::new("/h")),
            ..params()
        };
        let cfg = container_config(&p, first(&p), &cp).unwrap();
        assert_eq!(
            cfg.mounts
                .iter()
                .filter(|m| m.container_path == "/etc/hosts")
                .count(),
            1
        );
        assert!(cfg.mounts.iter().all(|m| m.host_path != "/h"));
    }

    fn resources_of(yaml_resources: &str) -> api::LinuxContainerResources {
        let p = pod(&format!(
            "metadata: {{name: p, namespace: n, uid: u}}\nspec:\n  containers:\n  - name: a\n    image: x\n    resources: {yaml_resources}\n"
        ));
        let cfg = container_config(
            &p,
            first(&p),
            &ContainerParams {
                oom_score_adj: 42,
                ..params()
            },
        )
        .unwrap();
        cfg.linux.unwrap().resources.unwrap()
    }

    #[test]
    fn cpu_and_memory_map_to_shares_quota_and_memory_limit() {
        let r = resources_of(
            "{requests: {cpu: 250m, memory: 64Mi}, limits: {cpu: \"0.5\", memory: 1G}}",
        );
        assert_eq!(r.cpu_shares, 256);
        assert_eq!(r.cpu_period, 100_000);
        assert_eq!(r.cpu_quota, 50_000);
        assert_eq!(r.memory_limit_in_bytes, 1_000_000_000);
        assert_eq!(r.oom_score_adj, 42);
        assert!(r.unified.is_empty());

        // A limit without a request: shares follow the limit.
        let r = resources_of("{limits: {cpu: \"2\", memory: 1e3}}");
        assert_eq!(r.cpu_shares, 2048);
        assert_eq!(r.cpu_quota, 200_000);
        assert_eq!(r.memory_limit_in_bytes, 1000);

        // Tiny values hit the floors.
        let r = resources_of("{requests: {cpu: 1m}, limits: {cpu: 1m}}");
        assert_eq!(r.cpu_shares, 2);
        assert_eq!(r.cpu_quota, 1000);
    }

    #[test]
    fn best_effort_container_gets_two_shares_and_no_limits() {
        let r = resources_of("{}");
        assert_eq!(r.cpu_shares, 2);
        assert_eq!(r.cpu_quota, 0);
        assert_eq!(r.memory_limit_in_bytes, 0);
    }

    #[test]
    fn quantities_parse_exactly() {
        let m = |s: &str| millis(parse_resource(s).unwrap());
        let v = |s: &str| units(parse_resource(s).unwrap());
        assert_eq!(m("100m"), 100);
        assert_eq!(m("0.1"), 100);
        assert_eq!(m("2"), 2000);
        assert_eq!(m("1.0001"), 1001);
        assert_eq!(v("64Mi"), 64 << 20);
        assert_eq!(v("1G"), 1_000_000_000);
        assert_eq!(v("512"), 512);
        assert_eq!(v("1e3"), 1000);
        assert_eq!(v("1.5Ki"), 1536);
        assert_eq!(v("100m"), 1);
        assert!(parse_resource("-1").is_none());
        assert!(parse_resource("12x").is_none());
        assert!(
            parse_resource("1.2.3").is_none(),
            "the old parser panicked here"
        );
        assert!(parse_resource("").is_none());
    }

    #[test]
    fn security_context_merges_pod_and_container_and_maps_capabilities() {
        let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  securityContext:
    runAsUser: 1000
    runAsGroup: 1000
    fsGroup: 2000
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: a
    image: x
    securityContext:
      runAsGroup: 3000
      readOnlyRootFilesystem: true
      allowPrivilegeEscalation: false
      capabilities: {add: [NET_ADMIN], drop: [ALL]}
"#);
        let sc = container_config(&p, first(&p), &params())
            .unwrap()
            .linux
            .unwrap()
            .security_context
            .unwrap();
        assert_eq!(sc.run_as_user, Some(api::Int64Value { value: 1000 }));
        assert_eq!(sc.run_as_group, Some(api::Int64Value { value: 3000 }));
        assert!(sc.readonly_rootfs);
        assert!(sc.no_new_privs);
        assert!(!sc.privileged);
        let caps = sc.capabilities.unwrap();
        assert_eq!(caps.add_capabilities, vec!["NET_ADMIN"]);
        assert_eq!(caps.drop_capabilities, vec!["ALL"]);
        assert_eq!(sc.supplemental_groups, vec![2000]);
        assert_eq!(
            sc.seccomp.unwrap().profile_type,
            api::security_profile::ProfileType::RuntimeDefault as i32
        );
        assert!(sc.masked_paths.contains(&"/proc/kcore".to_string()));
        assert!(sc.readonly_paths.contains(&"/proc/sys".to_string()));
    }

    #[test]
    fn privileged_container_has_no_masked_paths_and_default_is_unconfined_without_no_new_privs() {
        let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: a
    image: x
    securityContext: {privileged: true}
"#);
        let sc = container_config(&p, first(&p), &params())
            .unwrap()
            .linux
            .unwrap()
            .security_context
            .unwrap();
        assert!(sc.privileged);
        assert!(!sc.no_new_privs);
        assert!(sc.masked_paths.is_empty() && sc.readonly_paths.is_empty());
        assert_eq!(
            sc.seccomp.unwrap().profile_type,
            api::security_profile::ProfileType::Unconfined as i32
        );
        assert!(sc.run_as_user.is_none());
    }

    #[test]
    fn run_as_non_root_with_uid_zero_is_rejected() {
        let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  securityContext: {runAsNonRoot: true}
  containers:
  - {name: a, image: x, securityContext: {runAsUser: 0}}
"#);
        assert!(container_config(&p, first(&p), &params()).is_err());
    }

    #[test]
    fn container_hash_is_stable_and_changes_when_the_spec_changes() {
        let p = pod(BASIC);
        let c = first(&p).clone();
        let h = container_hash(&c);
        assert_eq!(h.len(), 32);
        assert_eq!(h, container_hash(&pod(BASIC).spec.unwrap().containers[0]));
        let mut c2 = c.clone();
        c2.image = Some("nginx:1.28".into());
        assert_ne!(h, container_hash(&c2));
        let mut c3 = c.clone();
        c3.args = Some(vec!["-g".into()]);
        assert_ne!(h, container_hash(&c3));
    }

    #[test]
    fn hosts_file_has_localhost_pod_ips_hostname_fqdn_and_host_aliases() {
        let p = pod(BASIC);
        let ips = vec!["10.0.0.5".to_string(), "fd00::5".to_string()];
        assert_eq!(
            hosts_file(&p, &ips, "cluster.local"),
            "# Kubernetes-managed hosts file.\n\
             127.0.0.1\tlocalhost\n\
             ::1\tlocalhost ip6-localhost ip6-loopback\n\
             fe00::0\tip6-localnet\n\
             fe00::0\tip6-mcastprefix\n\
             fe00::1\tip6-allnodes\n\
             fe00::2\tip6-allrouters\n\
             10.0.0.5\tweb\n\
             fd00::5\tweb\n"
        );
        let p = pod(&BASIC.replace(
            "  terminationGracePeriodSeconds: 30",
            "  hostname: h\n  subdomain: sub\n  hostAliases:\n  - {ip: 10.1.1.1, hostnames: [foo.local, bar.local]}",
        ));
        let out = hosts_file(&p, &ips[..1], "cluster.local");
        assert!(out.ends_with(
            "10.0.0.5\th.sub.edge.svc.cluster.local\th\n\n# Entries added by HostAliases.\n10.1.1.1\tfoo.local\tbar.local\n"
        ), "{out}");
        let hn = host_network_hosts_file(&p, "127.0.0.1 localhost\n");
        assert_eq!(
            hn,
            "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n\n# Entries added by HostAliases.\n10.1.1.1\tfoo.local\tbar.local\n"
        );
    }

    #[test]
    fn expand_matches_kubelet_semantics() {
        let lookup = |k: &str| (k == "A").then(|| "x".to_string());
        assert_eq!(expand("$(A)$(A)", &lookup), "xx");
        assert_eq!(expand("$$(A)", &lookup), "$(A)");
        assert_eq!(expand("$$$(A)", &lookup), "$x");
        assert_eq!(expand("$(B)", &lookup), "$(B)");
        assert_eq!(expand("$(A", &lookup), "$(A");
        assert_eq!(expand("$", &lookup), "$");
        assert_eq!(expand("é$(A)ü", &lookup), "éxü");
    }
}
