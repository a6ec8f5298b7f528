//! Tests of the file format and the fields together: what a
//! KubeletConfiguration document turns into, and how each bad value is
//! reported. Flags, durations, quantities and board profiles are tested
//! next to their code. Here: the shared helpers and what has no subject
//! file in `tests/` (defaults, every field, unknown fields, bad values, the
//! document, layers, joining a cluster).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::file::{from_layers, is_upstream_field};
use super::*;

mod bad_values;
mod cluster;
mod defaults;
mod document;
mod every_field;
mod layers;
mod unknown_fields;

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

fn flags(pairs: &[(&str, &str)]) -> Flags {
    let mut f = Flags::default();
    for (name, value) in pairs {
        assert!(f.set(name, value.to_string()), "no flag --{name}");
    }
    f
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
