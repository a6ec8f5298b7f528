//! Config tests: the defaults, kubelet's except where picolet says
//! otherwise.

use super::*;

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
