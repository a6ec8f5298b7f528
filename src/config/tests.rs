//! Tests of the file format and the fields together: what a
//! KubeletConfiguration document turns into, and how each bad value is
//! reported. Flags, durations, quantities and board profiles are tested
//! next to their code.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::file::{from_layers, is_upstream_field};
use super::*;

const ORIGIN: &str = "/etc/picolet/config.yaml";

fn from_str(text: &str, origin: &Path) -> Result<LoadedConfig, ConfigError> {
    from_layers(&[(text, origin)])
}

/// The names of the ignored fields, in order.
fn unknown_names(loaded: &LoadedConfig) -> Vec<&str> {
    loaded
        .unknown_fields
        .iter()
        .map(|f| f.field.as_str())
        .collect()
}

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
    let file =
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: many\n";
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
    let loaded = parse_ok("tlsMinVersion: VersionTLS12\nfeatureGates: {Foo: true}\nmaxPodz: 3\n");
    assert_eq!(
        unknown_names(&loaded),
        vec!["featureGates", "maxPodz", "tlsMinVersion"]
    );
    assert_eq!(loaded.config, KubeletConfig::default());
}

#[test]
fn the_node_api_fields_are_read() {
    let c = parse_ok(
        "address: 192.168.1.20\nport: 0\nhealthzPort: 0\nhealthzBindAddress: \"::1\"\n\
         tlsCertFile: /etc/p/tls.crt\ntlsPrivateKeyFile: /etc/p/tls.key\n\
         authentication:\n  x509:\n    clientCAFile: /etc/p/ca.crt\n  webhook:\n    enabled: false\n    cacheTTL: 10s\n\
         authorization:\n  mode: AlwaysAllow\n  webhook:\n    cacheAuthorizedTTL: 1m\n    cacheUnauthorizedTTL: 0s\n",
    )
    .config;
    assert_eq!(c.address.to_string(), "192.168.1.20");
    assert_eq!((c.port, c.healthz_port), (0, 0));
    assert_eq!(c.healthz_bind_address.to_string(), "::1");
    assert_eq!(c.tls_cert_file, Some(PathBuf::from("/etc/p/tls.crt")));
    assert_eq!(
        c.tls_private_key_file,
        Some(PathBuf::from("/etc/p/tls.key"))
    );
    assert_eq!(c.client_ca_file, Some(PathBuf::from("/etc/p/ca.crt")));
    assert!(!c.authentication_webhook_enabled);
    assert_eq!(c.authentication_webhook_cache_ttl, Duration::from_secs(10));
    assert_eq!(
        c.authorization_mode,
        crate::config::AuthorizationMode::AlwaysAllow
    );
    assert_eq!(
        c.authorization_webhook_cache_authorized_ttl,
        Duration::from_secs(60)
    );
    assert_eq!(
        c.authorization_webhook_cache_unauthorized_ttl,
        Duration::ZERO
    );
    let d = KubeletConfig::default();
    assert_eq!(
        (d.address.to_string(), d.port),
        ("0.0.0.0".to_string(), 10250)
    );
    assert_eq!(
        (d.healthz_bind_address.to_string(), d.healthz_port),
        ("127.0.0.1".to_string(), 10248)
    );
    assert_eq!(
        d.authorization_mode,
        crate::config::AuthorizationMode::Webhook
    );
    let e = parse_err("authorization:\n  mode: RBAC\n");
    assert!(e.contains("expected Webhook or AlwaysAllow"), "{e}");
    assert!(!d.server_tls_bootstrap);
    assert!(
        parse_ok("serverTLSBootstrap: true\n")
            .config
            .server_tls_bootstrap
    );
}

#[test]
fn unknown_nested_fields_are_reported_with_a_dotted_path() {
    let loaded = parse_ok(
        "authentication:\n  foo: 1\n  webhook:\n    bar: true\nauthorization:\n  baz: x\nlogging:\n  format: json\n  verbosity: 2\n",
    );
    assert_eq!(
        unknown_names(&loaded),
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
    assert!(parse_err("containerRuntimeEndpoint: tcp://1.2.3.4:5\n").contains("only unix sockets"));
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
    assert!(parse_err("evictionHard:\n  nodefs.available: 120%\n").contains("between 0% and 100%"));
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
fn enforce_node_allocatable_defaults_to_pods_and_none_or_empty_enforces_nothing() {
    use crate::config::EnforceNodeAllocatable;
    let nothing = EnforceNodeAllocatable {
        pods: false,
        system_reserved: false,
        kube_reserved: false,
    };
    let table = [
        ("", EnforceNodeAllocatable::PODS),
        ("enforceNodeAllocatable: [pods]\n", EnforceNodeAllocatable::PODS),
        ("enforceNodeAllocatable: [none]\n", nothing),
        ("enforceNodeAllocatable: []\n", nothing),
        (
            "enforceNodeAllocatable: [pods, kube-reserved-compressible]\nkubeReservedCgroup: /picolet\n",
            EnforceNodeAllocatable {
                kube_reserved: true,
                ..EnforceNodeAllocatable::PODS
            },
        ),
    ];
    for (body, want) in table {
        assert_eq!(
            parse_ok(body).config.enforce_node_allocatable,
            want,
            "{body:?}"
        );
    }
}

#[test]
fn enforcing_a_reservation_needs_its_cgroup_and_none_stands_alone() {
    assert!(parse_err("enforceNodeAllocatable: [pods, none]\n")
        .contains("may not contain additional enforcements"));
    assert!(
        parse_err("enforceNodeAllocatable: [nodes]\n").contains("unknown enforcement \"nodes\"")
    );
    assert!(parse_err("enforceNodeAllocatable: pods\n").contains("expected a list"));
    let err = parse_err("enforceNodeAllocatable: [pods, system-reserved]\n");
    assert!(err.contains("systemReservedCgroup"), "{err}");
    assert!(
        err.contains("\"system-reserved\" is in enforceNodeAllocatable"),
        "{err}"
    );
    assert!(parse_err("kubeReservedCgroup: picolet\n").contains("absolute cgroup path"));
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
fn node_status_max_images_is_minus_one_or_more_and_50_by_default() {
    assert!(parse_err("nodeStatusMaxImages: -2\n").contains("-1 (every image)"));
    assert_eq!(
        parse_ok("nodeStatusMaxImages: -1\n")
            .config
            .node_status_max_images,
        -1
    );
    assert_eq!(KubeletConfig::default().node_status_max_images, 50);
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
    assert_eq!(unknown_names(&loaded), vec!["bogus"]);
}

#[test]
fn json_syntax_errors_carry_the_file_line_and_column() {
    let err = from_str("{\n  \"maxPods\": 3,\n  oops\n}", Path::new("/c.json")).unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("/c.json:3:"), "{text}");
    assert!(text.contains("invalid JSON"), "{text}");
    assert!(!text.contains("at line"), "position given twice: {text}");
}

// --- resolve: board, file, flags ---

fn flags(pairs: &[(&str, &str)]) -> Flags {
    let mut f = Flags::default();
    for (name, value) in pairs {
        assert!(f.set(name, value.to_string()), "no flag --{name}");
    }
    f
}

#[test]
fn resolve_layers_the_board_then_the_file_then_the_flags() {
    let file = doc("maxPods: 20\ncontainerLogMaxFiles: 4\n");
    let loaded = resolve(
        Some((Path::new(ORIGIN), &file)),
        &flags(&[("board", "rpi4"), ("container-log-max-files", "3")]),
    )
    .unwrap();
    let c = loaded.config;
    assert_eq!(c.board.as_deref(), Some("rpi4"));
    assert_eq!(c.container_log_max_size, 2 * 1024 * 1024, "from the board");
    assert_eq!(c.max_pods, 20, "the file over the board");
    assert_eq!(c.container_log_max_files, 3, "the flag over the file");
    assert!(loaded.unknown_fields.is_empty());
}

#[test]
fn resolve_without_a_board_or_a_file_is_the_defaults_plus_the_flags() {
    let loaded = resolve(
        None,
        &flags(&[("max-pods", "12"), ("sync-frequency", "30s")]),
    )
    .unwrap();
    assert_eq!(loaded.config.max_pods, 12);
    assert_eq!(loaded.config.sync_frequency, Duration::from_secs(30));
    assert_eq!(
        KubeletConfig {
            max_pods: 110,
            sync_frequency: Duration::from_secs(60),
            ..loaded.config
        },
        KubeletConfig::default()
    );
}

#[test]
fn an_unknown_board_is_an_error_listing_the_known_ones() {
    let e = resolve(None, &flags(&[("board", "rpi9")]))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(r#"flag --board: unknown board "rpi9"; known boards: rpi4, "#),
        "{e}"
    );
}

#[test]
fn cross_field_rules_apply_to_the_merged_layers_not_to_each_layer() {
    let board = doc("imageGCHighThresholdPercent: 70\nimageGCLowThresholdPercent: 60\n");
    let file = doc("imageGCHighThresholdPercent: 90\n");
    let c = from_layers(&[(&board, Path::new("board:x")), (&file, Path::new(ORIGIN))])
        .unwrap()
        .config;
    assert_eq!(
        (
            c.image_gc_low_threshold_percent,
            c.image_gc_high_threshold_percent
        ),
        (60, 90)
    );
}

#[test]
fn unknown_fields_name_the_layer_that_set_them_and_read_as_warnings() {
    let board = doc("featureGates: {A: true}\n");
    let file = doc("maxPodz: 3\n");
    let loaded =
        from_layers(&[(&board, Path::new("board:x")), (&file, Path::new(ORIGIN))]).unwrap();
    let warnings: Vec<String> = loaded
        .unknown_fields
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        warnings,
        [
            r#"board:x: kubelet field "featureGates" is not implemented by picolet; ignoring it"#,
            r#"/etc/picolet/config.yaml line 3: unknown field "maxPodz" (typo?); ignoring it"#,
        ]
    );
}

#[test]
fn flag_only_settings_are_unknown_fields_in_a_file() {
    let loaded = parse_ok("rootDir: /x\nadminSocket: /y\n");
    assert_eq!(unknown_names(&loaded), ["adminSocket", "rootDir"]);
    assert_eq!(loaded.config, KubeletConfig::default());
}

#[test]
fn a_known_mapping_given_as_something_else_names_the_nested_field() {
    let e = parse_err("authentication:\n  webhook: 3\n");
    assert!(
        e.contains(r#"field "authentication.webhook": expected a mapping, got 3"#),
        "{e}"
    );
    let e = parse_err("logging: on\n");
    assert!(e.contains(r#"field "logging": expected a mapping"#), "{e}");
}

#[test]
fn every_file_field_picolet_reads_is_a_kubelet_field() {
    for f in super::fields::FIELDS.iter().filter(|f| f.in_file) {
        assert!(is_upstream_field(f.key), "{}", f.key);
    }
}

// --- joining a cluster ---

#[test]
fn node_labels_taints_and_addresses_come_from_kubelets_flags() {
    let mut flags = Flags::default();
    for (k, v) in [
        ("kubeconfig", "/etc/picolet/kubelet.conf"),
        ("node-ip", "192.168.1.20"),
        ("node-labels", "site=plant-3,example.com/rack=r1"),
        (
            "register-with-taints",
            "dedicated=edge:NoSchedule,maint:NoExecute",
        ),
    ] {
        assert!(flags.set(k, v.into()), "{k}");
    }
    let c = resolve(None, &flags).unwrap().config;
    assert_eq!(
        c.kubeconfig,
        Some(PathBuf::from("/etc/picolet/kubelet.conf"))
    );
    assert_eq!(
        c.node_ip,
        vec!["192.168.1.20".parse::<std::net::IpAddr>().unwrap()]
    );
    assert_eq!(c.node_labels["site"], "plant-3");
    assert_eq!(c.node_labels["example.com/rack"], "r1");
    let taints: Vec<(&str, Option<&str>, &str)> = c
        .register_with_taints
        .iter()
        .map(|t| (t.key.as_str(), t.value.as_deref(), t.effect.as_str()))
        .collect();
    assert_eq!(
        taints,
        [
            ("dedicated", Some("edge"), "NoSchedule"),
            ("maint", None, "NoExecute")
        ]
    );
    assert!(c.offline_image_fallback);
    assert!(!c.allow_insecure_kubeconfig);
}

#[test]
fn bad_node_labels_taints_and_addresses_name_the_flag() {
    for (k, v) in [
        ("node-labels", "no-equals-sign"),
        ("node-labels", "bad key=x"),
        ("register-with-taints", "k=v:Sometimes"),
        ("node-ip", "0.0.0.0"),
        ("node-ip", "10.0.0.1,10.0.0.2"),
    ] {
        let mut flags = Flags::default();
        flags.set(k, v.into());
        let e = resolve(None, &flags).unwrap_err().to_string();
        assert!(e.starts_with(&format!("flag --{k}")), "{k}={v}: {e}");
    }
}

#[test]
fn register_with_taints_in_the_file_are_taint_objects() {
    let c = parse_ok(
        "registerWithTaints: [{key: edge, value: 'true', effect: NoSchedule}]
registerNode: false
nodeStatusReportFrequency: 1m
",
    )
    .config;
    assert_eq!(c.register_with_taints[0].key, "edge");
    assert!(!c.register_node);
    assert_eq!(c.node_status_report_frequency, Duration::from_secs(60));
}

#[test]
fn allowed_unsafe_sysctls_must_be_known_to_be_namespaced() {
    let c = parse_ok("allowedUnsafeSysctls: [kernel.msg*, net.core.somaxconn]\n").config;
    assert_eq!(
        c.allowed_unsafe_sysctls,
        ["kernel.msg*".to_string(), "net.core.somaxconn".to_string()]
    );
    let e = parse_err("allowedUnsafeSysctls: [vm.swappiness]\n");
    assert!(
        e.contains(r#"field "allowedUnsafeSysctls": the sysctls "vm.swappiness" are not known to be namespaced"#),
        "{e}"
    );
}

#[test]
fn a_soft_threshold_without_a_grace_period_is_a_config_error() {
    let e = parse_err("evictionSoft:\n  memory.available: 200Mi\n");
    assert!(
        e.contains(r#"field "evictionSoftGracePeriod": evictionSoft has "memory.available" but no grace period for it"#),
        "{e}"
    );
    let e = parse_err("evictionSoftGracePeriod:\n  nodefs.available: 1m\n");
    assert!(
        e.contains("has a grace period but no evictionSoft threshold"),
        "{e}"
    );
}

#[test]
fn soft_thresholds_reclaim_and_grace_periods_are_parsed() {
    let c = parse_ok(
        "evictionSoft:\n  memory.available: 200Mi\n  nodefs.available: 15%\nevictionSoftGracePeriod:\n  memory.available: 1m30s\n  nodefs.available: 0s\nevictionMinimumReclaim:\n  nodefs.available: 100Mi\nevictionPressureTransitionPeriod: 30s\nevictionMaxPodGracePeriod: 20\nimageMinimumGCAge: 0s\n",
    )
    .config;
    assert_eq!(
        c.eviction_soft["nodefs.available"],
        EvictionThreshold::Percentage(15.0)
    );
    assert_eq!(
        c.eviction_soft_grace_period["memory.available"],
        Duration::from_secs(90)
    );
    assert_eq!(
        c.eviction_minimum_reclaim["nodefs.available"],
        EvictionThreshold::Quantity(100 << 20)
    );
    assert_eq!(
        c.eviction_pressure_transition_period,
        Duration::from_secs(30)
    );
    assert_eq!(c.eviction_max_pod_grace_period, 20);
    assert_eq!(c.image_minimum_gc_age, Duration::ZERO);
    let e = parse_err("evictionSoftGracePeriod:\n  memory.avail: 1m\n");
    assert!(e.contains("unknown eviction signal"), "{e}");
}

#[test]
fn event_qps_and_burst_default_to_kubelets_and_take_their_flags_and_fields() {
    let d = resolve(None, &flags(&[])).unwrap().config;
    assert_eq!((d.event_record_qps, d.event_burst), (50, 100));
    let file = doc("eventRecordQPS: 5\neventBurst: 10\n");
    let c = resolve(
        Some((Path::new(ORIGIN), &file)),
        &flags(&[("event-qps", "0")]),
    )
    .unwrap()
    .config;
    assert_eq!((c.event_record_qps, c.event_burst), (0, 10));
    let bad = doc("eventBurst: 0\n");
    assert!(resolve(Some((Path::new(ORIGIN), &bad)), &flags(&[])).is_err());
}

#[test]
fn a_misspelt_key_suggests_the_known_key_nearest_it() {
    assert_eq!(did_you_mean("staticPodPth"), Some("staticPodPath"));
    assert_eq!(did_you_mean("StaticPodPath"), Some("staticPodPath"));
    assert_eq!(did_you_mean("maxPodz"), Some("maxPods"));
    assert_eq!(did_you_mean("prot"), Some("port"), "two letters swapped");
    assert_eq!(
        did_you_mean("authentication.webhok"),
        Some("authentication.webhook"),
        "a nested mapping"
    );
    assert_eq!(did_you_mean("nothingLikeAnyField"), None);
    assert_eq!(did_you_mean("x"), None);
    let loaded = parse_ok("staticPodPth: /etc/kubernetes/manifests\nfeatureGates: {}\n");
    let hints: Vec<Option<&str>> = loaded
        .unknown_fields
        .iter()
        .map(UnknownField::did_you_mean)
        .collect();
    assert_eq!(
        hints,
        [None, Some("staticPodPath")],
        "a kubelet field picolet does not implement is no typo"
    );
}

#[test]
fn the_installed_example_config_is_valid_and_has_no_unknown_fields() {
    // cross/install/config.yaml: what `make install` and the Debian
    // package put in /etc/picolet/config.yaml.
    let text = include_str!("../../cross/install/config.yaml");
    let loaded = from_str(text, Path::new(ORIGIN)).expect("the example config parses");
    assert!(
        loaded.unknown_fields.is_empty(),
        "{:?}",
        loaded.unknown_fields
    );
    let c = loaded.config;
    assert_eq!(
        c.static_pod_path,
        Some(PathBuf::from("/etc/kubernetes/manifests"))
    );
    assert_eq!(
        c.container_runtime_endpoint,
        "unix:///run/containerd/containerd.sock"
    );
}
