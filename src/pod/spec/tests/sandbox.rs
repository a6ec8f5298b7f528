//! Sandbox tests: metadata, hostname, DNS, hosts file, ports, namespaces,
//! resources and overhead, user namespaces.

use super::*;

#[test]
fn what_cannot_be_honoured_comes_back_as_warnings_not_log_lines() {
    let p = pod(r#"
metadata: {name: web, namespace: edge, uid: u1}
spec:
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
    for needle in ["Sideways", "\"http\" is defined more than once", "QUIC"] {
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
    assert_eq!(
        cfg.annotations["kubernetes.io/config.seen"],
        "2023-11-14T22:13:20.012345678Z"
    );
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
fn hostname_override_replaces_hostname_and_subdomain() {
    let with = |extra: &str| {
        pod(&BASIC.replace(
            "  terminationGracePeriodSeconds: 30",
            &format!("  hostname: h\n  subdomain: sub\n{extra}"),
        ))
    };
    let p = with("  hostnameOverride: edge.gateway-1");
    assert_eq!(
        pod_hostname_and_domain(&p, "cluster.local"),
        ("edge.gateway-1".to_string(), String::new())
    );
    assert_eq!(
        sandbox_config(&p, &sandbox_params(&[], None)).0.hostname,
        "edge.gateway-1"
    );
    let hosts = hosts_file(&p, &["10.0.0.5".to_string()], "cluster.local");
    assert!(hosts.contains("10.0.0.5\tedge.gateway-1\n"), "{hosts}");
    let long = with(&format!("  hostnameOverride: {}", "b".repeat(62) + ".c"));
    assert_eq!(
        pod_hostname_and_domain(&long, "cluster.local").0,
        "b".repeat(62)
    );
    assert_eq!(
        pod_hostname_and_domain(&with(""), "cluster.local"),
        ("h".to_string(), "sub.edge.svc.cluster.local".to_string())
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
fn cluster_first_without_cluster_dns_falls_back_to_the_host_and_without_resolv_conf_to_localhost() {
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
    let ns = namespace_options(&pod(BASIC), None);
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
    assert_eq!(
        namespace_options(&p, None).pid,
        api::NamespaceMode::Node as i32
    );
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
    sysctls:
    - {name: net.ipv4.ip_unprivileged_port_start, value: "0"}
    - {name: kernel/shm_rmid_forced, value: "1"}
    - {name: net/ipv4/conf/eno2.100/rp_filter, value: "1"}
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
    // `/`-separated names reach the runtime dotted, as from kubelet.
    assert_eq!(linux.sysctls["kernel.shm_rmid_forced"], "1");
    assert_eq!(linux.sysctls["net.ipv4.conf.eno2/100.rp_filter"], "1");
    assert_eq!(linux.sysctls.len(), 3);
    let sc = linux.security_context.unwrap();
    assert_eq!(sc.run_as_user, Some(api::Int64Value { value: 1000 }));
    assert_eq!(sc.run_as_group, Some(api::Int64Value { value: 2000 }));
    assert_eq!(sc.supplemental_groups, vec![3000, 4000, 5000]);
    assert!(sc.privileged);
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
fn the_sandbox_carries_the_pods_resources_and_overhead_as_kubelet_sends_them() {
    let p = pod(r#"
metadata: {name: web, namespace: edge, uid: u1}
spec:
  overhead: {cpu: 250m, memory: 64Mi}
  resources: {limits: {cpu: "1", memory: 200Mi}}
  containers:
  - {name: app, image: x}
"#);
    let linux = sandbox_config(&p, &sandbox_params(&[], None))
        .0
        .linux
        .unwrap();
    let r = linux.resources.unwrap();
    // The pod-level request defaults from its limit: shares from 1 CPU.
    assert_eq!(
        (r.cpu_shares, r.cpu_quota, r.cpu_period),
        (1024, 100_000, 100_000)
    );
    assert_eq!(r.memory_limit_in_bytes, 209_715_200);
    let o = linux.overhead.unwrap();
    assert_eq!(
        (o.cpu_shares, o.cpu_quota, o.memory_limit_in_bytes),
        (256, 25_000, 64 << 20)
    );
    // A pod without an overhead sends an empty one, and BestEffort totals.
    let linux = sandbox_config(&pod(BASIC), &sandbox_params(&[], None))
        .0
        .linux
        .unwrap();
    assert_eq!(
        linux.overhead,
        Some(api::LinuxContainerResources::default())
    );
    let r = linux.resources.unwrap();
    assert_eq!(
        (r.cpu_shares, r.cpu_quota, r.memory_limit_in_bytes),
        (2, 0, 0)
    );
}

#[test]
fn a_pod_with_a_user_namespace_gets_its_mapping_for_users_and_groups() {
    let mut params = sandbox_params(&[], None);
    params.user_ns = Some(UserNsMapping {
        host_id: 65536,
        length: 65536,
    });
    let cfg = sandbox_config(&pod(BASIC), &params).0;
    let ns = cfg
        .linux
        .unwrap()
        .security_context
        .unwrap()
        .namespace_options
        .unwrap()
        .userns_options
        .unwrap();
    assert_eq!(ns.mode, api::NamespaceMode::Pod as i32);
    let m = api::IdMapping {
        host_id: 65536,
        container_id: 0,
        length: 65536,
    };
    assert_eq!((ns.uids, ns.gids), (vec![m], vec![m]));
    let host = namespace_options(&pod(BASIC), None).userns_options.unwrap();
    assert_eq!(host.mode, api::NamespaceMode::Node as i32);
}

#[test]
fn config_seen_has_nine_fraction_digits_always_and_replaces_a_manifests_own() {
    assert_eq!(
        config_seen(1_700_000_000_000_000_000),
        "2023-11-14T22:13:20.000000000Z"
    );
    assert_eq!(config_seen(1_000_000_001), "1970-01-01T00:00:01.000000001Z");
    let p = pod(
        "metadata: {name: web, namespace: edge, uid: u1, annotations: {kubernetes.io/config.seen: old}}\nspec: {containers: [{name: a, image: x}]}",
    );
    let cfg = sandbox_config(&p, &sandbox_params(&[], None)).0;
    assert_eq!(
        cfg.annotations["kubernetes.io/config.seen"],
        "2023-11-14T22:13:20.012345678Z"
    );
}
