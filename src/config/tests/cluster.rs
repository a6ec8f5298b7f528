//! Config tests: joining a cluster: node labels, taints and addresses from
//! kubelet's flags and the file.

use super::*;

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
