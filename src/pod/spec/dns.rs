//! DNS and hosts files (kubelet's `pkg/kubelet/network/dns` and
//! `managedHostsFileContent`): the pod's resolv.conf from `dnsPolicy`,
//! `dnsConfig`, clusterDNS and the host's resolv.conf, within glibc's
//! limits; the managed /etc/hosts.

use k8s_openapi::api::core::v1::Pod;

use super::sandbox::{pod_hostname_and_domain, SandboxParams};
use crate::cri::api;
use crate::pod::accessors::{host_network, namespace as pod_namespace, spec};

/// Max nameservers in a pod's resolv.conf (glibc limit; kubelet `MaxDNSNameservers`).
pub const MAX_DNS_NAMESERVERS: usize = 3;
/// Max search domains (kubelet `MaxDNSSearchPaths`).
pub const MAX_DNS_SEARCH_PATHS: usize = 32;
/// Max length of the joined search line (kubelet `MaxDNSSearchListChars`).
pub const MAX_DNS_SEARCH_LIST_CHARS: usize = 2048;
const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;
pub(super) const HOSTNAME_MAX_LEN: usize = 63;

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

// /etc/hosts

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
