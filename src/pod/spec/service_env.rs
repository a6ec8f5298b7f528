//! Service environment variables (kubelet's `getServiceEnvVarMap` and
//! `envvars.FromServices`): which Services a container learns of, the
//! docker-link style variables each one gives, and which namespaces' Services
//! the node's pods need at all.
//!
//! The master Service, `kubernetes` in `default`, is in every container's
//! environment, even with `enableServiceLinks: false`; with links enabled
//! (the default) so is every Service of the pod's own namespace, where a
//! Service also named `kubernetes` wins over the master one. A Service
//! without a cluster IP (headless `None`, ExternalName's empty one) gives
//! nothing. Variables come Service by Service in name order, each in
//! kubelet's order; kubelet emits a Go map, the container sees the same set.
//! The pod's own `env` and `envFrom` win over these, and `$(VAR)` in `env`
//! may name them (`env::container_env` does the merging).
//!
//! API pods wait until the Services they need were read at least once
//! (kubelet's `serviceHasSynced`); static pods take what is known then, as
//! kubelet does, so a node that never reached the API server starts them
//! without any.
//!
//! Pure: the Services come in through [`Services`]; no I/O, no logging.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;

use crate::pod::accessors::{namespace as pod_namespace, spec};
use crate::pod::config_objects::Lookup;

/// The namespace of the master Service.
pub const MASTER_NAMESPACE: &str = "default";
/// The master Service, whose variables every container gets.
pub const MASTER_SERVICE: &str = "kubernetes";

/// One port of a Service, as the variables need it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServicePortInfo {
    /// Empty for an unnamed port (only the first may be).
    pub name: String,
    pub port: i32,
    /// `TCP`, `UDP` or `SCTP`; empty means `TCP`.
    pub protocol: String,
}

/// A Service, as the variables need it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceInfo {
    pub namespace: String,
    pub name: String,
    /// `spec.clusterIP`: `None` for a headless Service, empty for an
    /// ExternalName one.
    pub cluster_ip: String,
    pub ports: Vec<ServicePortInfo>,
}

/// Where the Services of a namespace are looked up.
pub trait Services {
    /// The Services of `namespace` that have a cluster IP.
    /// [`Lookup::NotYetKnown`] until they were read at least once (now,
    /// or into a cache before).
    fn services(&self, namespace: &str) -> Lookup<[ServiceInfo]>;

    /// The pods the node runs now, so that the namespaces whose Services
    /// they need ([`namespaces_needed`]) are the ones looked after.
    fn track(&self, _pods: &mut dyn Iterator<Item = &Pod>) {}
}

/// The Services a container's environment is made from.
#[derive(Clone, Copy)]
pub struct ServiceSource<'a> {
    pub services: &'a dyn Services,
    /// Wait until the needed namespaces were read (an API pod), rather
    /// than take what is known (a static pod).
    pub wait_for_sync: bool,
}

/// The Services a pod needs have not been read yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServicesNotSynced;

impl std::fmt::Display for ServicesNotSynced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // kubelet's words.
        f.write_str("services have not yet been read at least once, cannot construct envvars")
    }
}

/// Whether a Service has a cluster IP (kubelet's `IsServiceIPSet`).
pub fn has_cluster_ip(s: &ServiceInfo) -> bool {
    !s.cluster_ip.is_empty() && s.cluster_ip != "None"
}

/// Whether `pod` wants the Services of its namespace (`enableServiceLinks`,
/// true when unset).
pub fn links_enabled(pod: &Pod) -> bool {
    spec(pod).enable_service_links != Some(false)
}

/// The namespaces whose Services `pods` need: `default` for the master
/// Service, and the namespace of each pod with links enabled.
pub fn namespaces_needed<'p>(pods: impl IntoIterator<Item = &'p Pod>) -> BTreeSet<String> {
    let mut out = BTreeSet::from([MASTER_NAMESPACE.to_string()]);
    for p in pods {
        if links_enabled(p) {
            out.insert(pod_namespace(p).to_string());
        }
    }
    out
}

/// kubelet's `getServiceEnvVarMap`: the variables a container in
/// `namespace` gets from `services` (which may hold other namespaces').
pub fn service_env<'s>(
    services: impl IntoIterator<Item = &'s ServiceInfo>,
    namespace: &str,
    enable_service_links: bool,
) -> Vec<(String, String)> {
    let mut chosen: BTreeMap<&str, &ServiceInfo> = BTreeMap::new();
    for s in services {
        if !has_cluster_ip(s) {
            continue;
        }
        if s.namespace == MASTER_NAMESPACE && s.name == MASTER_SERVICE {
            chosen.entry(s.name.as_str()).or_insert(s);
        } else if s.namespace == namespace && enable_service_links {
            chosen.insert(s.name.as_str(), s);
        }
    }
    from_services(chosen.into_values())
}

/// kubelet's `envvars.FromServices`: per Service, `<NAME>_SERVICE_HOST`,
/// `<NAME>_SERVICE_PORT` (the first port), `<NAME>_SERVICE_PORT_<PORT>`
/// per named port, then the docker-link variables. A name given twice
/// keeps its first value.
pub fn from_services<'s>(
    services: impl IntoIterator<Item = &'s ServiceInfo>,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut push = |k: String, v: String| {
        if seen.insert(k.clone()) {
            out.push((k, v));
        }
    };
    for s in services {
        // Validation gives every Service with a cluster IP a port; one
        // without is skipped rather than guessed.
        let Some(first) = s.ports.first().filter(|_| has_cluster_ip(s)) else {
            continue;
        };
        let prefix = env_name(&s.name);
        push(format!("{prefix}_SERVICE_HOST"), s.cluster_ip.clone());
        let port_var = format!("{prefix}_SERVICE_PORT");
        push(port_var.clone(), first.port.to_string());
        for p in s.ports.iter().filter(|p| !p.name.is_empty()) {
            push(
                format!("{port_var}_{}", env_name(&p.name)),
                p.port.to_string(),
            );
        }
        for (i, p) in s.ports.iter().enumerate() {
            let proto = if p.protocol.is_empty() {
                "TCP"
            } else {
                &p.protocol
            };
            let lower = proto.to_ascii_lowercase();
            let url = format!("{lower}://{}", host_port(&s.cluster_ip, p.port));
            if i == 0 {
                push(format!("{prefix}_PORT"), url.clone());
            }
            let pp = format!("{prefix}_PORT_{}_{}", p.port, proto.to_ascii_uppercase());
            push(pp.clone(), url);
            push(format!("{pp}_PROTO"), lower);
            push(format!("{pp}_PORT"), p.port.to_string());
            push(format!("{pp}_ADDR"), s.cluster_ip.clone());
        }
    }
    out
}

/// The variables `pod`'s containers get from `source` (none without one:
/// a node with no API server). An API pod waits for namespaces not read
/// yet; a static pod goes without them.
pub fn pod_service_env(
    pod: &Pod,
    source: Option<ServiceSource<'_>>,
) -> Result<Vec<(String, String)>, ServicesNotSynced> {
    let Some(source) = source else {
        return Ok(Vec::new());
    };
    let namespace = pod_namespace(pod);
    let links = links_enabled(pod);
    let mut namespaces = vec![MASTER_NAMESPACE];
    if links && namespace != MASTER_NAMESPACE {
        namespaces.push(namespace);
    }
    let mut lists = Vec::new();
    for ns in namespaces {
        match source.services.services(ns) {
            Lookup::Found(l) => lists.push(l),
            Lookup::NotFound => {}
            Lookup::NotYetKnown if source.wait_for_sync => return Err(ServicesNotSynced),
            Lookup::NotYetKnown => {}
        }
    }
    Ok(service_env(
        lists.iter().flat_map(|l| l.iter()),
        namespace,
        links,
    ))
}

/// kubelet's `makeEnvVariableName`: upper case, `-` as `_`.
fn env_name(s: &str) -> String {
    s.replace('-', "_").to_ascii_uppercase()
}

/// Go's `net.JoinHostPort`: an IPv6 address in brackets.
fn host_port(ip: &str, port: i32) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}
