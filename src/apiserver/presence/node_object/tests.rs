//! Tests of the Node object's pure parts: labels, status and conditions, when to post, label validation.

use super::*;

pub(crate) fn facts() -> NodeFacts {
    NodeFacts {
        name: "pi".into(),
        hostname: "Pi".into(),
        internal_ips: vec!["192.168.1.20".into()],
        capacity: Resources {
            cpu_millis: 4000,
            memory_bytes: 3_977_601_024,
            ephemeral_storage_bytes: 31_568_000 * 1024,
            pods: 110,
        },
        reserved: Resources {
            cpu_millis: 250,
            memory_bytes: 100 << 20,
            ephemeral_storage_bytes: 0,
            pods: 0,
        },
        hugepages: vec![],
        images: vec![],
        operating_system: "linux".into(),
        architecture: "arm64".into(),
        kernel_version: "6.6.31+rpt-rpi-v8".into(),
        os_image: "Debian GNU/Linux 12 (bookworm)".into(),
        container_runtime_version: "containerd://1.7.24".into(),
        kubelet_version: "v1.36.0".into(),
        machine_id: "m".into(),
        system_uuid: "s".into(),
        boot_id: "b".into(),
        labels: [("example.com/rack".to_string(), "r1".to_string())].into(),
        taints: vec![],
        kubelet_port: 10250,
        ready: Readiness::Ready,
        memory_pressure: false,
        disk_pressure: false,
        pid_pressure: false,
    }
}

pub(crate) fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

fn q(m: &BTreeMap<String, Quantity>, k: &str) -> String {
    m[k].0.clone()
}

#[test]
fn allocatable_is_capacity_minus_reservations_never_negative() {
    let s = status(&facts(), None, t(0));
    let cap = s.capacity.unwrap();
    let alloc = s.allocatable.unwrap();
    assert_eq!(q(&cap, "cpu"), "4");
    assert_eq!(q(&cap, "memory"), "3884376Ki");
    assert_eq!(q(&cap, "pods"), "110");
    assert_eq!(q(&alloc, "cpu"), "3750m");
    assert_eq!(q(&alloc, "memory"), "3781976Ki");
    assert_eq!(q(&alloc, "ephemeral-storage"), q(&cap, "ephemeral-storage"));
    let mut f = facts();
    f.reserved.cpu_millis = 9000;
    let alloc = status(&f, None, t(0)).allocatable.unwrap();
    assert_eq!(q(&alloc, "cpu"), "0");
}

#[test]
fn each_huge_page_size_is_a_resource_taken_from_allocatable_memory() {
    let mut f = facts();
    f.hugepages = vec![
        HugePages {
            page_size_bytes: 2 << 20,
            total_bytes: 64 << 20,
        },
        HugePages {
            page_size_bytes: 1 << 30,
            total_bytes: 0,
        },
    ];
    let s = status(&f, None, t(0));
    let (cap, alloc) = (s.capacity.unwrap(), s.allocatable.unwrap());
    assert_eq!(q(&cap, "hugepages-2Mi"), "64Mi");
    assert_eq!(q(&cap, "hugepages-1Gi"), "0");
    assert_eq!(q(&alloc, "hugepages-2Mi"), "64Mi");
    assert_eq!(q(&alloc, "hugepages-1Gi"), "0");
    assert_eq!(q(&cap, "memory"), "3884376Ki");
    assert_eq!(q(&alloc, "memory"), "3716440Ki");
}

#[test]
fn status_images_are_omitted_when_there_are_none() {
    let mut f = facts();
    assert!(status(&f, None, t(0)).images.is_none());
    f.images = vec![ContainerImage {
        names: Some(vec!["busybox:1".into()]),
        size_bytes: Some(1),
    }];
    assert_eq!(status(&f, None, t(0)).images.unwrap().len(), 1);
}

#[test]
fn the_node_declares_websocket_streaming_and_no_feature_it_does_not_do() {
    let declared = status(&facts(), None, t(0)).declared_features.unwrap();
    assert_eq!(declared, ["ExtendWebSocketsToKubelet"]);
    for not_done in [
        "InPlacePodLevelResourcesVerticalScaling",
        "InPlacePodVerticalScalingInitContainers",
        "RestartAllContainersOnContainerExits",
    ] {
        assert!(!declared.iter().any(|f| f == not_done), "{not_done}");
    }
}

#[test]
fn quantities_use_the_largest_exact_suffix() {
    let table = [
        (0, "0"),
        (1000, "1000"),
        (1024, "1Ki"),
        (4 << 30, "4Gi"),
        (1536 << 20, "1536Mi"),
    ];
    for (bytes, want) in table {
        assert_eq!(binary(bytes), want);
    }
    assert_eq!(cpu(500), "500m");
    assert_eq!(cpu(2000), "2");
}

#[test]
fn the_node_carries_labels_addresses_info_and_endpoints() {
    let n = node(&facts(), t(0));
    let l = n.metadata.labels.unwrap();
    assert_eq!(l[LABEL_HOSTNAME], "pi");
    assert_eq!(l[LABEL_ARCH], "arm64");
    assert_eq!(l[LABEL_OS], "linux");
    assert_eq!(l["example.com/rack"], "r1");
    let s = n.status.unwrap();
    let addrs: Vec<_> = s
        .addresses
        .unwrap()
        .into_iter()
        .map(|a| format!("{}={}", a.type_, a.address))
        .collect();
    assert_eq!(addrs, ["InternalIP=192.168.1.20", "Hostname=pi"]);
    let info = s.node_info.unwrap();
    assert_eq!(info.container_runtime_version, "containerd://1.7.24");
    assert_eq!(info.kubelet_version, "v1.36.0");
    assert_eq!(
        s.daemon_endpoints.unwrap().kubelet_endpoint.unwrap().port,
        10250
    );
    assert!(n.spec.unwrap().taints.is_none());
    assert_eq!(
        n.metadata.annotations.unwrap()[ANNOTATION_CONTROLLER_MANAGED_ATTACH_DETACH],
        "true"
    );
}

#[test]
fn conditions_use_kubelets_reasons_and_messages() {
    let mut f = facts();
    f.ready = Readiness::NotReady(vec![
        "container runtime is down".into(),
        "PLEG is not healthy".into(),
    ]);
    f.disk_pressure = true;
    let c = conditions(&f, &[], t(0));
    let got: Vec<_> = c
        .iter()
        .map(|c| {
            format!(
                "{} {} {} {}",
                c.type_,
                c.status,
                c.reason.as_deref().unwrap(),
                c.message.as_deref().unwrap()
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            "Ready False KubeletNotReady container runtime is down, PLEG is not healthy",
            "MemoryPressure False KubeletHasSufficientMemory kubelet has sufficient memory available",
            "DiskPressure True KubeletHasDiskPressure kubelet has disk pressure",
            "PIDPressure False KubeletHasSufficientPID kubelet has sufficient PID available",
        ]
    );
}

#[test]
fn a_transition_time_is_kept_until_the_status_changes() {
    let f = facts();
    let first = status(&f, None, t(0));
    let second = status(&f, Some(&first), t(10));
    let ready = &second.conditions.as_ref().unwrap()[0];
    assert_eq!(ready.last_transition_time, Some(Time(t(0))));
    assert_eq!(ready.last_heartbeat_time, Some(Time(t(10))));
    let mut g = f.clone();
    g.ready = Readiness::NotReady(vec!["container runtime is down".into()]);
    let third = status(&g, Some(&second), t(20));
    let ready = &third.conditions.as_ref().unwrap()[0];
    assert_eq!(ready.last_transition_time, Some(Time(t(20))));
    let mem = &third.conditions.as_ref().unwrap()[1];
    assert_eq!(mem.last_transition_time, Some(Time(t(0))));
}

#[test]
fn the_api_disagrees_when_one_of_our_conditions_has_another_status_there_or_is_missing() {
    let ours = NodeStatus {
        conditions: Some(vec![
            condition("Ready", true, "KubeletReady", String::new()),
            condition(
                "MemoryPressure",
                false,
                "KubeletHasSufficientMemory",
                String::new(),
            ),
        ]),
        ..Default::default()
    };
    let api = |c: &[(&str, &str)]| WatchedNode {
        conditions: c
            .iter()
            .map(|(t, s)| (t.to_string(), s.to_string()))
            .collect(),
        ..Default::default()
    };
    let same = api(&[
        ("Ready", "True"),
        ("MemoryPressure", "False"),
        ("NetworkUnavailable", "False"),
    ]);
    assert!(
        !same.conditions_disagree(&ours),
        "other writers' conditions are not ours"
    );
    let unknown = api(&[("Ready", "Unknown"), ("MemoryPressure", "Unknown")]);
    assert!(unknown.conditions_disagree(&ours));
    assert!(api(&[("Ready", "True")]).conditions_disagree(&ours));
    assert!(!unknown.conditions_disagree(&NodeStatus::default()));
}

#[test]
fn a_status_is_posted_when_changed_or_when_the_report_frequency_passed() {
    let f = facts();
    let minute = Duration::from_secs(60);
    let five = Duration::from_secs(300);
    let a = status(&f, None, t(0));
    let b = status(&f, Some(&a), t(10));
    assert!(should_post(&a, None, Duration::ZERO, five));
    assert!(
        !should_post(&b, Some(&a), minute, five),
        "only the heartbeat moved"
    );
    assert!(should_post(&b, Some(&a), five, five));
    let mut g = f.clone();
    g.memory_pressure = true;
    let c = status(&g, Some(&b), t(20));
    assert!(should_post(&c, Some(&b), minute, five));
    // Any field but the heartbeats counts, the conditions' other
    // fields too.
    let mut d = b.clone();
    d.images = Some(vec![ContainerImage::default()]);
    assert!(should_post(&d, Some(&b), minute, five));
    let mut e = b.clone();
    e.conditions.as_mut().unwrap()[0].message = Some("changed".into());
    assert!(should_post(&e, Some(&b), minute, five));
    let mut h = b.clone();
    h.conditions.as_mut().unwrap().pop();
    assert!(should_post(&h, Some(&b), minute, five));
}

#[test]
fn a_node_view_reads_metadata_spec_and_conditions_and_ignores_the_rest() {
    let json = r#"{"kind":"Node","apiVersion":"v1","metadata":{"name":"pi","uid":"u","resourceVersion":"9","labels":{"a":"b"}},
        "spec":{"taints":[{"key":"k","effect":"NoExecute"}]},
        "status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z"}],
                  "images":[{"names":["x"],"sizeBytes":1}],"nodeInfo":{"kubeletVersion":"v1"}}}"#;
    let v: NodeView = serde_json::from_str(json).unwrap();
    assert_eq!(v.metadata.uid.as_deref(), Some("u"));
    assert_eq!(
        v.spec.as_ref().unwrap().taints.as_ref().unwrap()[0].effect,
        "NoExecute"
    );
    let prev = v.previous_status();
    let c = &prev.conditions.as_ref().unwrap()[0];
    assert_eq!(c.type_, "Ready");
    let back: NodeView = serde_json::from_slice(&serde_json::to_vec(&v).unwrap()).unwrap();
    assert_eq!(back, v);
    assert_eq!(
        crate::apiserver::client::request::object_path::<NodeView>(None, "pi"),
        "/api/v1/nodes/pi"
    );
}

#[test]
fn a_watched_node_gives_admission_its_labels_and_taints_and_ignores_heartbeats() {
    let json = r#"{"metadata":{"name":"pi","resourceVersion":"9","labels":{"a":"b"}},
        "spec":{"unschedulable":true,"taints":[{"key":"k","value":"v","effect":"NoExecute"},{"key":"x","effect":"NoSchedule"}]}}"#;
    let v: NodeView = serde_json::from_str(json).unwrap();
    let w = WatchedNode::of(&v);
    assert_eq!(w.labels.get("a").map(String::as_str), Some("b"));
    assert_eq!(w.taints.len(), 2);
    assert!(w.unschedulable);
    assert_eq!(w.resource_version.as_deref(), Some("9"));
    assert_eq!(
        w.summary(),
        "labels a=b; taints k=v:NoExecute,x:NoSchedule; unschedulable"
    );
    assert!(w.admission_differs(None));
    let mut heartbeat = w.clone();
    heartbeat.resource_version = Some("10".into());
    assert!(!heartbeat.admission_differs(Some(&w)));
    let mut labelled = heartbeat.clone();
    labelled.labels.insert("disk".into(), "ssd".into());
    assert!(labelled.admission_differs(Some(&heartbeat)));
    let mut untainted = labelled.clone();
    untainted.taints.clear();
    assert!(untainted.admission_differs(Some(&labelled)));
    assert!(untainted.differs(Some(&labelled)));
    assert!(!heartbeat.differs(Some(&w)));
    let mut uncordoned = untainted.clone();
    uncordoned.unschedulable = false;
    assert!(!uncordoned.admission_differs(Some(&untainted)));
    assert!(
        uncordoned.differs(Some(&untainted)),
        "picolet get node shows it"
    );
    assert_eq!(
        WatchedNode::of(&NodeView::default()).summary(),
        "labels ; taints none"
    );
}

#[test]
fn node_labels_follow_kubelets_rule() {
    let ok = [
        "example.com/x",
        "plain",
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "node.kubernetes.io/instance-type",
        "kubelet.kubernetes.io/anything",
        "foo.node.kubernetes.io/bar",
    ];
    for k in ok {
        let m = [(k.to_string(), "v".to_string())].into();
        assert!(validate_node_labels(&m).is_ok(), "{k}");
    }
    let bad = [
        "node-role.kubernetes.io/master",
        "kubernetes.io/role",
        "example.k8s.io/x",
        "node-restriction.kubernetes.io/x",
    ];
    for k in bad {
        let m = [(k.to_string(), "v".to_string())].into();
        let e = validate_node_labels(&m).unwrap_err();
        assert_eq!(e.label, k);
    }
}

#[test]
fn a_replayed_node_older_than_our_last_post_is_history_not_disagreement() {
    let replayed = WatchedNode {
        resource_version: Some("90".into()),
        conditions: vec![("Ready".into(), "Unknown".into())],
        ..Default::default()
    };
    assert!(replayed.older_than(Some(100)));
    assert!(!replayed.older_than(Some(90)));
    assert!(!replayed.older_than(None));
    let unversioned = WatchedNode::default();
    assert!(!unversioned.older_than(Some(100)));
}
