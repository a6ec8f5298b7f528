//! resourceFieldRef in env and in downwardAPI volumes: unset limits read
//! the pod-level limit or the node's allocatable, divisors round up.

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Volume};

use super::*;
use crate::pod::config_objects::{ConfigObjects, Lookup};

const NO_LIMITS: &str = r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: c
    image: x
    env:
    - {name: CPU, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}
    - {name: CPU_M, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}
    - {name: MEM_MI, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}
    - {name: EPH, valueFrom: {resourceFieldRef: {resource: limits.ephemeral-storage}}}
    - {name: EPH_GI, valueFrom: {resourceFieldRef: {resource: limits.ephemeral-storage, divisor: 1Gi}}}
    - {name: EPH_REQ, valueFrom: {resourceFieldRef: {resource: requests.ephemeral-storage}}}
"#;

fn node() -> NodeAllocatable {
    NodeAllocatable {
        cpu_millis: Some(3500),
        memory_bytes: Some((1 << 30) + 1),
        ephemeral_storage_bytes: Some(10 << 30),
    }
}

fn with_node() -> ContainerParams<'static> {
    ContainerParams {
        node_allocatable: node(),
        ..params()
    }
}

#[test]
fn unset_limits_in_env_fall_back_to_node_allocatable_rounded_up_by_divisor() {
    let p = pod(NO_LIMITS);
    let cfg = container_config(&p, first(&p), &with_node()).unwrap();
    let e = |k| env_of(&cfg, k).unwrap();
    assert_eq!(e("CPU"), "4");
    assert_eq!(e("CPU_M"), "3500");
    assert_eq!(e("MEM_MI"), "1025");
    assert_eq!(e("EPH"), (10u64 << 30).to_string());
    assert_eq!(e("EPH_GI"), "10");
    assert_eq!(e("EPH_REQ"), "0");
}

#[test]
fn a_zero_limit_counts_as_unset_and_a_set_limit_wins_over_allocatable() {
    let p = pod(&NO_LIMITS.replace(
        "    image: x\n",
        "    image: x\n    resources: {limits: {cpu: '0', memory: 100Mi, ephemeral-storage: 1500M}}\n",
    ));
    let cfg = container_config(&p, first(&p), &with_node()).unwrap();
    let e = |k| env_of(&cfg, k).unwrap();
    assert_eq!(e("CPU_M"), "3500");
    assert_eq!(e("MEM_MI"), "100");
    assert_eq!(e("EPH"), "1500000000");
    assert_eq!(e("EPH_GI"), "2");
}

#[test]
fn pod_level_cpu_and_memory_limits_come_before_node_allocatable() {
    let p = pod(&NO_LIMITS.replace(
        "spec:\n",
        "spec:\n  resources: {limits: {cpu: 500m, memory: 64Mi}}\n",
    ));
    let cfg = container_config(&p, first(&p), &with_node()).unwrap();
    let e = |k| env_of(&cfg, k).unwrap();
    assert_eq!(e("CPU_M"), "500");
    assert_eq!(e("MEM_MI"), "64");
    assert_eq!(e("EPH_GI"), "10");
}

#[test]
fn a_resource_the_node_does_not_report_reads_as_zero_not_as_an_error() {
    let p = pod(NO_LIMITS);
    let cfg = container_config(&p, first(&p), &params()).unwrap();
    assert_eq!(env_of(&cfg, "CPU").unwrap(), "0");
    assert_eq!(env_of(&cfg, "MEM_MI").unwrap(), "0");
}

struct Nothing;

impl ConfigObjects for Nothing {
    fn config_map(&self, _: &str, _: &str) -> Lookup<ConfigMap> {
        Lookup::NotFound
    }
    fn secret(&self, _: &str, _: &str) -> Lookup<Secret> {
        Lookup::NotFound
    }
}

#[test]
fn a_downward_api_volume_reads_unset_limits_from_node_allocatable() {
    let p = pod(concat!(
        "metadata: {name: p, namespace: n, uid: u}\n",
        "spec:\n  containers: [{name: c, image: x}]\n  volumes:\n",
        "  - name: v\n    downwardAPI:\n      items:\n",
        "      - {path: cpu, resourceFieldRef: {containerName: c, resource: limits.cpu, divisor: 1m}}\n",
        "      - {path: mem, resourceFieldRef: {containerName: c, resource: limits.memory, divisor: 1Mi}}\n",
        "      - {path: eph, resourceFieldRef: {containerName: c, resource: limits.ephemeral-storage, divisor: 1Gi}}\n",
    ));
    let v: &Volume = &p.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
    let d = Downward {
        node_allocatable: node(),
    };
    let payload = volume_payload(&p, v, &Nothing, &d).unwrap();
    let text = |k: &str| String::from_utf8(payload.0[k].data.clone()).unwrap();
    assert_eq!(text("cpu"), "3500");
    assert_eq!(text("mem"), "1025");
    assert_eq!(text("eph"), "10");
}
