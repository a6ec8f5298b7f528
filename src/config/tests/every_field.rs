//! Config tests: every implemented field parsed, and the special meanings
//! of some values.

use super::*;

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
