//! Config tests: bad values, each naming its field and the file.

use super::*;

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
