//! Unit tests of `qos`: quantities, the QoS class and pod totals (with
//! sidecars and pod-level resources), CPU conversions, and the
//! `oom_score_adj` table.

use super::*;
use k8s_openapi::api::core::v1::ResourceRequirements;

fn rl(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
    if pairs.is_empty() {
        return None;
    }
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect(),
    )
}

fn ctr(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
    Container {
        name: "c".into(),
        resources: Some(ResourceRequirements {
            requests: rl(requests),
            limits: rl(limits),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn sidecar(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
    Container {
        restart_policy: Some("Always".into()),
        ..ctr(requests, limits)
    }
}

fn spec(containers: Vec<Container>, init: Vec<Container>) -> PodSpec {
    PodSpec {
        containers,
        init_containers: if init.is_empty() { None } else { Some(init) },
        ..Default::default()
    }
}

const FULL: &[(&str, &str)] = &[("cpu", "500m"), ("memory", "128Mi")];

#[test]
fn quantities_parse_to_millicores_and_bytes_rounding_up() {
    assert_eq!(Res::Cpu.parse("100m"), Some(100));
    assert_eq!(Res::Cpu.parse("0.5"), Some(500));
    assert_eq!(Res::Cpu.parse("2"), Some(2000));
    assert_eq!(Res::Cpu.parse("1.0001"), Some(1001));
    assert_eq!(Res::Cpu.parse("250000u"), Some(250));
    assert_eq!(Res::Cpu.parse("1n"), Some(1));
    assert_eq!(Res::Memory.parse("128Mi"), Some(128 << 20));
    assert_eq!(Res::Memory.parse("1G"), Some(1_000_000_000));
    assert_eq!(Res::Memory.parse("512"), Some(512));
    assert_eq!(Res::Memory.parse("1.5Gi"), Some(3 << 29));
    assert_eq!(Res::Memory.parse("1e3"), Some(1000));
    assert_eq!(Res::Memory.parse("12E-1"), Some(2));
    assert_eq!(Res::Memory.parse("1k"), Some(1000));
    assert_eq!(Res::Cpu.parse("0"), Some(0));
    assert_eq!(Res::Cpu.parse("-0"), Some(0));
    assert_eq!(Res::Memory.parse("1000Ei"), Some(u64::MAX));
}

#[test]
fn malformed_or_negative_quantities_are_rejected() {
    for bad in [
        "", "m", "abc", "1..2", "1.2.3", "10Q", "1mi", "-1", "1e", "--1",
    ] {
        assert_eq!(Res::Cpu.parse(bad), None, "{bad:?}");
    }
}

#[test]
fn a_pod_without_any_requests_or_limits_is_best_effort() {
    let s = spec(vec![ctr(&[], &[]), Container::default()], vec![]);
    assert_eq!(pod_qos(&s), QosClass::BestEffort);
}

#[test]
fn zero_valued_and_non_compute_resources_do_not_leave_best_effort() {
    let s = spec(
        vec![ctr(
            &[("cpu", "0"), ("ephemeral-storage", "1Gi")],
            &[("nvidia.com/gpu", "1")],
        )],
        vec![],
    );
    assert_eq!(pod_qos(&s), QosClass::BestEffort);
}

#[test]
fn equal_cpu_and_memory_requests_and_limits_everywhere_is_guaranteed() {
    let s = spec(
        vec![ctr(FULL, FULL), ctr(FULL, FULL)],
        vec![ctr(FULL, FULL)],
    );
    assert_eq!(pod_qos(&s), QosClass::Guaranteed);
}

#[test]
fn limits_alone_default_the_requests_and_give_guaranteed() {
    let s = spec(vec![ctr(&[], FULL)], vec![]);
    assert_eq!(pod_qos(&s), QosClass::Guaranteed);
}

#[test]
fn a_request_below_its_limit_is_burstable() {
    let s = spec(
        vec![ctr(&[("cpu", "100m"), ("memory", "128Mi")], FULL)],
        vec![],
    );
    assert_eq!(pod_qos(&s), QosClass::Burstable);
}

#[test]
fn a_container_missing_the_memory_limit_makes_the_pod_burstable() {
    let s = spec(
        vec![ctr(FULL, FULL), ctr(&[("cpu", "1")], &[("cpu", "1")])],
        vec![],
    );
    assert_eq!(pod_qos(&s), QosClass::Burstable);
}

#[test]
fn an_init_container_without_limits_makes_the_pod_burstable() {
    let s = spec(vec![ctr(FULL, FULL)], vec![ctr(&[("cpu", "100m")], &[])]);
    assert_eq!(pod_qos(&s), QosClass::Burstable);
    // An init container with no resources at all also breaks Guaranteed.
    let s = spec(vec![ctr(FULL, FULL)], vec![ctr(&[], &[])]);
    assert_eq!(pod_qos(&s), QosClass::Burstable);
}

#[test]
fn only_requests_and_no_limits_is_burstable() {
    let s = spec(vec![ctr(&[("memory", "1Gi")], &[])], vec![]);
    assert_eq!(pod_qos(&s), QosClass::Burstable);
}

#[test]
fn qos_class_names_round_trip() {
    for q in [
        QosClass::Guaranteed,
        QosClass::Burstable,
        QosClass::BestEffort,
    ] {
        assert_eq!(QosClass::parse(q.as_str()), Some(q));
        assert_eq!(q.to_string(), q.as_str());
    }
    assert_eq!(QosClass::parse("guaranteed"), None);
}

#[test]
fn pod_requests_are_the_larger_of_the_app_sum_and_the_biggest_init_container() {
    let s = spec(
        vec![
            ctr(&[("cpu", "100m"), ("memory", "64Mi")], &[]),
            ctr(&[("cpu", "200m"), ("memory", "64Mi")], &[]),
        ],
        vec![
            ctr(&[("cpu", "250m"), ("memory", "32Mi")], &[]),
            ctr(&[("cpu", "1")], &[]),
        ],
    );
    let r = pod_resources(&s);
    assert_eq!(r.cpu_request_millis, 1000);
    assert_eq!(r.memory_request_bytes, 128 << 20);
    assert_eq!(r.cpu_limit_millis, None);
    assert_eq!(r.memory_limit_bytes, None);
}

#[test]
fn pod_limits_exist_only_when_every_container_declares_them() {
    let s = spec(
        vec![
            ctr(&[], &[("cpu", "1"), ("memory", "100Mi")]),
            ctr(&[], &[("cpu", "500m")]),
        ],
        vec![ctr(&[], &[("cpu", "2"), ("memory", "1Gi")])],
    );
    let r = pod_resources(&s);
    assert_eq!(r.cpu_limit_millis, Some(2000));
    assert_eq!(r.memory_limit_bytes, None);
    // requests default from limits: cpu max(1500, 2000), memory max(100Mi, 1Gi)
    assert_eq!(r.cpu_request_millis, 2000);
    assert_eq!(r.memory_request_bytes, 1 << 30);
}

#[test]
fn sidecar_init_containers_add_to_the_app_containers() {
    let s = spec(
        vec![ctr(&[], &[("cpu", "300m"), ("memory", "100")])],
        vec![
            sidecar(&[], &[("cpu", "200m"), ("memory", "50")]),
            ctr(&[], &[("cpu", "400m"), ("memory", "10")]),
        ],
    );
    let r = pod_resources(&s);
    // app 300 + sidecar 200 = 500; second init runs beside the sidecar: 400 + 200 = 600
    assert_eq!(r.cpu_request_millis, 600);
    assert_eq!(r.cpu_limit_millis, Some(600));
    // memory: app 100 + sidecar 50 = 150 vs 10 + 50 = 60
    assert_eq!(r.memory_limit_bytes, Some(150));
}

#[test]
fn pod_overhead_is_added_to_requests_and_to_existing_limits() {
    let mut s = spec(vec![ctr(&[("memory", "100Mi")], &[("cpu", "1")])], vec![]);
    s.overhead = rl(&[("cpu", "250m"), ("memory", "20Mi")]);
    let r = pod_resources(&s);
    assert_eq!(r.cpu_request_millis, 1250);
    assert_eq!(r.cpu_limit_millis, Some(1250));
    assert_eq!(r.memory_request_bytes, 120 << 20);
    assert_eq!(r.memory_limit_bytes, None);
}

#[test]
fn a_pod_with_no_containers_has_no_limits() {
    assert_eq!(pod_resources(&PodSpec::default()), PodResources::default());
}

#[test]
fn container_memory_request_falls_back_to_its_limit() {
    assert_eq!(
        container_memory_request_bytes(&ctr(&[], &[("memory", "1Ki")])),
        1024
    );
    assert_eq!(
        container_memory_request_bytes(&ctr(&[("memory", "1")], &[("memory", "1Ki")])),
        1
    );
    assert_eq!(container_memory_request_bytes(&Container::default()), 0);
}

#[test]
fn cpu_shares_follow_the_kubelet_formula_and_clamps() {
    assert_eq!(milli_cpu_to_shares(0), 2);
    assert_eq!(milli_cpu_to_shares(1), 2);
    assert_eq!(milli_cpu_to_shares(100), 102);
    assert_eq!(milli_cpu_to_shares(1000), 1024);
    assert_eq!(milli_cpu_to_shares(500_000), 262_144);
}

#[test]
fn cpu_quota_follows_the_kubelet_formula_with_a_one_millisecond_floor() {
    assert_eq!(milli_cpu_to_quota(0, QUOTA_PERIOD_US), 0);
    assert_eq!(milli_cpu_to_quota(1, QUOTA_PERIOD_US), 1000);
    assert_eq!(milli_cpu_to_quota(10, QUOTA_PERIOD_US), 1000);
    assert_eq!(milli_cpu_to_quota(250, QUOTA_PERIOD_US), 25_000);
    assert_eq!(milli_cpu_to_quota(2000, QUOTA_PERIOD_US), 200_000);
    assert_eq!(milli_cpu_to_quota(500, 50_000), 25_000);
}

#[test]
fn a_container_without_a_cpu_request_gets_shares_from_its_limit() {
    let c = container_cpu(None, 500);
    assert_eq!((c.shares, c.quota_us, c.period_us), (512, 50_000, 100_000));
    let c = container_cpu(Some(250), 0);
    assert_eq!((c.shares, c.quota_us), (256, 0));
    assert_eq!(container_cpu(None, 0).shares, MIN_SHARES);
}

#[test]
fn cpu_weight_maps_the_shares_range_onto_one_to_ten_thousand() {
    assert_eq!(shares_to_weight(2), 1);
    assert_eq!(shares_to_weight(0), 1);
    assert_eq!(shares_to_weight(1024), 39);
    assert_eq!(shares_to_weight(262_144), 10_000);
    assert_eq!(shares_to_weight(u64::MAX), 10_000);
}

const CAP: u64 = 1000 << 20;

fn with_pod_level(mut s: PodSpec, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> PodSpec {
    s.resources = Some(ResourceRequirements {
        requests: rl(requests),
        limits: rl(limits),
        ..Default::default()
    });
    s
}

fn named(name: &str, c: Container) -> Container {
    Container {
        name: name.into(),
        ..c
    }
}

#[test]
fn oom_score_adj_follows_the_kubelet_table() {
    let burstable = |mem: &str| ctr(&[("memory", mem)], &[]);
    let one = |c: Container| spec(vec![c], vec![]);
    // (case, pod spec, container index in init+app order, want)
    let sidecar_pod = |sidecar_mem: &str, app_mem: &str| {
        spec(
            vec![named("app", burstable(app_mem))],
            vec![named("log", sidecar(&[("memory", sidecar_mem)], &[]))],
        )
    };
    let mut critical = one(burstable("100Mi"));
    critical.priority_class_name = Some(SYSTEM_NODE_CRITICAL.into());
    let pod_level = with_pod_level(
        spec(
            vec![
                named("a", burstable("100Mi")),
                named("b", Container::default()),
            ],
            vec![],
        ),
        &[("memory", "400Mi")],
        &[],
    );
    let cases: Vec<(&str, PodSpec, &str, i64)> = vec![
        ("guaranteed", one(ctr(FULL, FULL)), "c", -997),
        ("best effort", one(Container::default()), "", 1000),
        (
            "burstable: a tenth of the memory",
            one(burstable("100Mi")),
            "c",
            900,
        ),
        (
            "burstable: no memory request",
            one(ctr(&[("cpu", "1")], &[])),
            "c",
            999,
        ),
        (
            "burstable: almost all the memory",
            one(burstable("998Mi")),
            "c",
            3,
        ),
        (
            "burstable: more than the node",
            one(burstable("2000Mi")),
            "c",
            3,
        ),
        ("node-critical priority class", critical, "c", -997),
        (
            "a sidecar gets at most the score of the smallest regular container",
            sidecar_pod("10Mi", "100Mi"),
            "log",
            900,
        ),
        (
            "a sidecar requesting more keeps its own score",
            sidecar_pod("500Mi", "100Mi"),
            "log",
            500,
        ),
        (
            "the regular container of a pod with a sidecar",
            sidecar_pod("10Mi", "100Mi"),
            "app",
            900,
        ),
        (
            "pod-level requests: a share of the unclaimed memory is added",
            pod_level.clone(),
            "a",
            750,
        ),
        (
            "pod-level requests: a container without a request gets the share",
            pod_level,
            "b",
            850,
        ),
    ];
    for (case, s, name, want) in cases {
        let c = s
            .init_containers
            .iter()
            .flatten()
            .chain(&s.containers)
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("{case}: no container {name:?}"));
        assert_eq!(container_oom_score_adj(&s, c, CAP), want, "{case}");
    }
    let s = one(burstable("100Mi"));
    assert_eq!(
        container_oom_score_adj(&s, &s.containers[0], 0),
        999,
        "unknown capacity"
    );
}

#[test]
fn pod_level_resources_decide_the_qos_class() {
    let plain = || spec(vec![ctr(&[], &[]), ctr(&[("cpu", "100m")], &[])], vec![]);
    let cases: Vec<(&str, PodSpec, QosClass)> = vec![
        (
            "pod limits for cpu and memory default the requests: guaranteed",
            with_pod_level(plain(), &[], &[("cpu", "1"), ("memory", "200Mi")]),
            QosClass::Guaranteed,
        ),
        (
            "pod requests below the pod limits: burstable",
            with_pod_level(
                plain(),
                &[("cpu", "500m"), ("memory", "100Mi")],
                &[("cpu", "1"), ("memory", "200Mi")],
            ),
            QosClass::Burstable,
        ),
        (
            "a pod limit for memory only: burstable",
            with_pod_level(plain(), &[], &[("memory", "200Mi")]),
            QosClass::Burstable,
        ),
        (
            "pod requests only: burstable, whatever the containers say",
            with_pod_level(
                spec(vec![ctr(FULL, FULL)], vec![]),
                &[("memory", "1Gi")],
                &[],
            ),
            QosClass::Burstable,
        ),
        (
            "pod-level values of other resources only: the containers decide",
            with_pod_level(plain(), &[("ephemeral-storage", "1Gi")], &[]),
            QosClass::Burstable,
        ),
        (
            "no pod-level resources: the containers decide",
            spec(vec![ctr(FULL, FULL)], vec![]),
            QosClass::Guaranteed,
        ),
    ];
    for (case, s, want) in cases {
        assert_eq!(pod_qos(&s), want, "{case}");
    }
}

#[test]
fn pod_level_limits_are_the_pod_cgroup_limits_and_pod_requests_replace_the_sums() {
    let s = with_pod_level(
        spec(vec![ctr(&[("cpu", "100m")], &[]), ctr(&[], &[])], vec![]),
        &[("cpu", "500m")],
        &[("cpu", "1"), ("memory", "200Mi")],
    );
    let r = pod_resources(&s);
    assert_eq!(r.cpu_request_millis, 500);
    assert_eq!(r.cpu_limit_millis, Some(1000));
    assert_eq!(r.memory_limit_bytes, Some(200 << 20));
    assert_eq!(
        r.memory_request_bytes,
        200 << 20,
        "defaulted from the pod limit"
    );
}

#[test]
fn a_container_without_limits_in_a_pod_with_limits_gets_the_pod_limits() {
    // The pod: no container resources, spec.resources.limits {cpu: 1, memory: 200Mi}.
    let s = with_pod_level(
        spec(vec![ctr(&[], &[])], vec![]),
        &[],
        &[("cpu", "1"), ("memory", "200Mi")],
    );
    let r = container_resources(&s, &s.containers[0]);
    let cpu = container_cpu(r.cpu_request_millis, r.cpu_limit_millis);
    assert_eq!(
        (cpu.shares, cpu.quota_us, cpu.period_us),
        (1024, 100_000, 100_000)
    );
    assert_eq!(r.memory_limit_bytes, 209_715_200);
    // Its own limits win.
    let s = with_pod_level(
        spec(vec![ctr(&[], &[("memory", "50Mi")])], vec![]),
        &[],
        &[("memory", "200Mi")],
    );
    assert_eq!(container_memory_limit_bytes(&s, &s.containers[0]), 50 << 20);
}

#[test]
fn sandbox_resources_sum_what_is_declared_without_the_overhead() {
    let mut s = spec(
        vec![
            ctr(&[("cpu", "250m")], &[("cpu", "500m"), ("memory", "100Mi")]),
            ctr(&[], &[]),
        ],
        vec![sidecar(&[], &[("cpu", "100m")])],
    );
    s.overhead = rl(&[("cpu", "50m"), ("memory", "10Mi")]);
    let r = sandbox_resources(&s);
    // requests: 250m + the sidecar's 100m (defaulted from its limit)
    assert_eq!(r.cpu_request_millis, Some(350));
    assert_eq!(r.cpu_limit_millis, 600);
    assert_eq!(r.memory_limit_bytes, 100 << 20);
    let o = overhead_resources(&s).expect("has an overhead");
    assert_eq!(
        (
            o.cpu_request_millis,
            o.cpu_limit_millis,
            o.memory_limit_bytes
        ),
        (Some(50), 50, 10 << 20)
    );
    assert_eq!(
        sandbox_resources(&spec(vec![ctr(&[], &[])], vec![])),
        RuntimeResources::default()
    );
    assert_eq!(overhead_resources(&spec(vec![], vec![])), None);
}
