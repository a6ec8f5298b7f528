//! Container tests: resources: CPU and memory, quantities, hugepages, swap,
//! pod-level limits.

use super::*;

fn resources_of(yaml_resources: &str) -> api::LinuxContainerResources {
    let p = pod(&format!(
            "metadata: {{name: p, namespace: n, uid: u}}\nspec:\n  containers:\n  - name: a\n    image: x\n    resources: {yaml_resources}\n"
        ));
    let cfg = container_config(
        &p,
        first(&p),
        &ContainerParams {
            oom_score_adj: 42,
            ..params()
        },
    )
    .unwrap();
    cfg.linux.unwrap().resources.unwrap()
}

#[test]
fn cpu_and_memory_map_to_shares_quota_and_memory_limit() {
    let r =
        resources_of("{requests: {cpu: 250m, memory: 64Mi}, limits: {cpu: \"0.5\", memory: 1G}}");
    assert_eq!(r.cpu_shares, 256);
    assert_eq!(r.cpu_period, 100_000);
    assert_eq!(r.cpu_quota, 50_000);
    assert_eq!(r.memory_limit_in_bytes, 1_000_000_000);
    assert_eq!(r.oom_score_adj, 42);
    assert!(r.unified.is_empty());

    // A limit without a request: shares follow the limit.
    let r = resources_of("{limits: {cpu: \"2\", memory: 1e3}}");
    assert_eq!(r.cpu_shares, 2048);
    assert_eq!(r.cpu_quota, 200_000);
    assert_eq!(r.memory_limit_in_bytes, 1000);

    // Tiny values hit the floors.
    let r = resources_of("{requests: {cpu: 1m}, limits: {cpu: 1m}}");
    assert_eq!(r.cpu_shares, 2);
    assert_eq!(r.cpu_quota, 1000);
}

#[test]
fn best_effort_container_gets_two_shares_and_no_limits() {
    let r = resources_of("{}");
    assert_eq!(r.cpu_shares, 2);
    assert_eq!(r.cpu_quota, 0);
    assert_eq!(r.memory_limit_in_bytes, 0);
}

#[test]
fn quantities_parse_exactly() {
    let m = |s: &str| millis(parse_resource(s).unwrap());
    let v = |s: &str| units(parse_resource(s).unwrap());
    assert_eq!(m("100m"), 100);
    assert_eq!(m("0.1"), 100);
    assert_eq!(m("2"), 2000);
    assert_eq!(m("1.0001"), 1001);
    assert_eq!(v("64Mi"), 64 << 20);
    assert_eq!(v("1G"), 1_000_000_000);
    assert_eq!(v("512"), 512);
    assert_eq!(v("1e3"), 1000);
    assert_eq!(v("1.5Ki"), 1536);
    assert_eq!(v("100m"), 1);
    assert!(parse_resource("-1").is_none());
    assert!(parse_resource("12x").is_none());
    assert!(
        parse_resource("1.2.3").is_none(),
        "the old parser panicked here"
    );
    assert!(parse_resource("").is_none());
}

fn resources_with(yaml: &str, p: &ContainerParams) -> api::LinuxContainerResources {
    let p_ = pod(yaml);
    container_config(&p_, first(&p_), p)
        .unwrap()
        .linux
        .unwrap()
        .resources
        .unwrap()
}

#[test]
fn every_hugepage_size_of_the_node_is_limited_to_zero_unless_requested() {
    let sizes = ["1GB".to_string(), "2MB".to_string()];
    let p = ContainerParams {
        hugepage_sizes: &sizes,
        ..params()
    };
    let r = resources_with("spec: {containers: [{name: a, image: x}]}", &p);
    let got: Vec<(&str, u64)> = r
        .hugepage_limits
        .iter()
        .map(|h| (h.page_size.as_str(), h.limit))
        .collect();
    assert_eq!(got, [("1GB", 0), ("2MB", 0)]);
    let r = resources_with(
        "spec: {containers: [{name: a, image: x, resources: {limits: {hugepages-2Mi: 100Mi, memory: 1Gi}}}]}",
        &p,
    );
    let got: Vec<(&str, u64)> = r
        .hugepage_limits
        .iter()
        .map(|h| (h.page_size.as_str(), h.limit))
        .collect();
    assert_eq!(got, [("1GB", 0), ("2MB", 100 << 20)]);
    assert_eq!(hugepage_unit_size(2 << 20).as_deref(), Some("2MB"));
    assert_eq!(hugepage_unit_size(1 << 30).as_deref(), Some("1GB"));
    assert_eq!(hugepage_unit_size(64 << 10).as_deref(), Some("64KB"));
    assert_eq!(hugepage_unit_size(3 << 20).as_deref(), Some("3MB"));
}

#[test]
fn swap_follows_kubelets_no_swap_and_limited_swap_rules() {
    const BURSTABLE: &str = "metadata: {name: p, namespace: n, uid: u, annotations: {kubernetes.io/config.source: api}}\nspec: {containers: [{name: a, image: x, resources: {requests: {memory: 100Mi}, limits: {memory: 200Mi}}}]}";
    const STATIC: &str = "metadata: {name: p, namespace: n, uid: u, annotations: {kubernetes.io/config.source: file}}\nspec: {containers: [{name: a, image: x, resources: {requests: {memory: 100Mi}, limits: {memory: 200Mi}}}]}";
    let with = |swap: Swap| ContainerParams { swap, ..params() };
    // cgroup v1: the swap limit is the memory limit.
    let r = resources_with(BURSTABLE, &with(Swap::CgroupV1));
    assert_eq!(r.memory_swap_limit_in_bytes, 200 << 20);
    assert!(r.unified.is_empty());
    // No swap controller: nothing.
    let r = resources_with(BURSTABLE, &with(Swap::Unavailable));
    assert_eq!(r.memory_swap_limit_in_bytes, 0);
    assert!(r.unified.is_empty());
    // cgroup v2, NoSwap: memory.swap.max = 0.
    let v2 = |limited| Swap::CgroupV2 {
        limited,
        node_memory_bytes: 1000 << 20,
        node_swap_bytes: 500 << 20,
    };
    let r = resources_with(BURSTABLE, &with(v2(false)));
    assert_eq!(
        r.unified.get(CGROUP2_SWAP_MAX).map(String::as_str),
        Some("0")
    );
    // LimitedSwap: the request's share of the swap (100Mi / 1000Mi of 500Mi).
    let r = resources_with(BURSTABLE, &with(v2(true)));
    assert_eq!(r.unified[CGROUP2_SWAP_MAX], (50u64 << 20).to_string());
    // ... but never for a static (critical) pod.
    let r = resources_with(STATIC, &with(v2(true)));
    assert_eq!(r.unified[CGROUP2_SWAP_MAX], "0");
}

#[test]
fn a_container_without_resources_gets_the_pod_level_limits() {
    let r = resources_with(
        "spec:\n  resources: {limits: {cpu: '1', memory: 200Mi}}\n  containers: [{name: a, image: x}]\n",
        &params(),
    );
    assert_eq!(
        (r.cpu_shares, r.cpu_quota, r.cpu_period),
        (1024, 100_000, 100_000)
    );
    assert_eq!(r.memory_limit_in_bytes, 209_715_200);
}
