//! The fuzz targets: each takes arbitrary bytes, drives one parser of outside
//! input the way picolet does, and checks properties that must hold for
//! every input. Shared by `tests/fuzz.rs` (the engine) and
//! `tests/fuzz_regressions.rs` (replaying the corpus and every crasher).
//!
//! A target fails by panicking. It returns a short *signature* of what the
//! input did (which error, roughly, or how far it got); the engine keeps
//! inputs with a signature it has not seen, a cheap stand-in for coverage.

use std::path::Path;

use picolet::config::{self, duration, Flags};
use picolet::pod::spec::{self, ContainerParams, SandboxParams};
use picolet::pod::validation::validate_pod;
use picolet::qos;
use picolet::quantity::Quantity;
use picolet::source::file::parse_manifest;

/// A target: bytes in, outcome signature out; fails by panicking.
pub type Target = fn(&[u8]) -> String;

/// Every target, by the name used for its corpus and crasher directories.
pub const TARGETS: &[(&str, Target)] = &[
    ("manifest", manifest),
    ("config", kubelet_config),
    ("quantity", quantity),
    ("duration", go_duration),
    ("pod-to-cri", pod_to_cri),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// The first words of an error with the numbers and quoted parts blanked
/// (double or single quotes),
/// so "line 3" and "line 4", or two unknown suffixes, count as the same
/// outcome.
fn signature(prefix: &str, message: &str) -> String {
    let mut out = String::from(prefix);
    out.push(':');
    let (mut quote, mut escaped) = (None, false);
    for c in message.chars().take(120) {
        match c {
            _ if escaped => escaped = false,
            '\\' if quote.is_some() => escaped = true,
            '"' | '\'' if quote.is_none() => quote = Some(c),
            c if Some(c) == quote => quote = None,
            _ if quote.is_some() => {}
            '0'..='9' => {
                if !out.ends_with('#') {
                    out.push('#');
                }
            }
            c => out.push(c),
        }
        if out.len() >= 64 {
            break;
        }
    }
    out
}

fn text(input: &[u8]) -> Option<&str> {
    std::str::from_utf8(input).ok()
}

/// The static pod path: decode, the kubelet's static pod rules, API
/// defaulting and validation. A pod that comes out must validate again (the
/// rules are idempotent) and must keep its name and UID.
pub fn manifest(input: &[u8]) -> String {
    let Some(text) = text(input) else {
        return "not-utf8".into();
    };
    let path = Path::new("/etc/kubernetes/manifests/fuzz.yaml");
    match parse_manifest(text, path, "node-1") {
        Ok(pod) => {
            if let Err(errs) = validate_pod(&pod) {
                panic!("a pod parse_manifest returned does not validate: {errs:?}");
            }
            assert!(pod
                .metadata
                .name
                .as_deref()
                .is_some_and(|n| n.ends_with("-node-1")));
            assert!(!pod.metadata.uid.as_deref().unwrap_or("").is_empty());
            "ok".into()
        }
        Err(e) => signature(
            "err",
            &e.to_string().replace(&path.display().to_string(), ""),
        ),
    }
}

/// The KubeletConfiguration loader, with no flags.
pub fn kubelet_config(input: &[u8]) -> String {
    let Some(text) = text(input) else {
        return "not-utf8".into();
    };
    match config::resolve(
        Some((Path::new("/etc/picolet/config.yaml"), text)),
        &Flags::default(),
    ) {
        Ok(loaded) => {
            // What was loaded is a valid configuration: loading its own
            // values again must not fail on the same file.
            let _ = loaded.config.runtime_socket_path();
            format!("ok:{}", loaded.unknown_fields.len().min(3))
        }
        Err(e) => signature("err", &e.to_string()),
    }
}

/// Quantities: `value` and `milli_value` agree (ceil(ceil(1000x)/1000) =
/// ceil(x)), negatives never convert, zero is zero.
pub fn quantity(input: &[u8]) -> String {
    let Some(text) = text(input) else {
        return "not-utf8".into();
    };
    let q = match Quantity::parse(text) {
        Ok(q) => q,
        Err(e) => return signature("err", &e.to_string()),
    };
    let (value, milli) = (q.value(), q.milli_value());
    if q.is_negative() {
        assert!(
            value.is_err() && milli.is_err(),
            "{text:?}: a negative converted"
        );
        return "negative".into();
    }
    if q.is_zero() {
        assert_eq!((value.clone(), milli.clone()), (Ok(0), Ok(0)), "{text:?}");
    }
    if let (Ok(v), Ok(m)) = (&value, &milli) {
        assert_eq!(
            m.div_ceil(1000),
            *v,
            "{text:?}: value and milli_value disagree"
        );
    }
    if milli.is_ok() {
        assert!(value.is_ok(), "{text:?}: fits in millis but not in units");
    }
    format!(
        "ok:{}:{}:{}",
        value.is_ok(),
        milli.is_ok(),
        q.sub_unit_suffix().unwrap_or("")
    )
}

/// Go durations: whatever parses prints back to something that parses to
/// the same duration.
pub fn go_duration(input: &[u8]) -> String {
    let Some(text) = text(input) else {
        return "not-utf8".into();
    };
    match duration::parse(text) {
        Ok(d) => {
            let printed = duration::format(d);
            let again = duration::parse(&printed).unwrap_or_else(|e| {
                panic!("{text:?} printed as {printed:?}, which does not parse: {e}")
            });
            assert_eq!(again, d, "{text:?} printed as {printed:?}");
            "ok".into()
        }
        Err(e) => signature("err", &e.reason),
    }
}

/// Pod → CRI: every pod that passes the static pod path is translated the
/// way the agent would (sandbox, every container, QoS, volumes, hosts file).
/// Translation may refuse a pod (a `SpecError`), never panic.
pub fn pod_to_cri(input: &[u8]) -> String {
    let Some(text) = text(input) else {
        return "not-utf8".into();
    };
    let path = Path::new("/etc/kubernetes/manifests/fuzz.yaml");
    let pod = match parse_manifest(text, path, "node-1") {
        Ok(pod) => pod,
        // Inputs near validity are kept too: they are how valid ones evolve.
        Err(e) => return signature("invalid", &e.to_string()),
    };
    let logs = Path::new("/var/log/pods");
    let dns = ["10.96.0.10".to_string()];
    let sandbox = SandboxParams {
        attempt: 0,
        cgroup_parent: "/kubepods/besteffort/podfuzz",
        pod_logs_dir: logs,
        cluster_dns: &dns,
        cluster_domain: "cluster.local",
        host_resolv_conf: Some("nameserver 1.1.1.1\nsearch example.com\noptions ndots:2\n"),
        user_ns: None,
        seen_unix_nanos: 0,
    };
    let _ = spec::sandbox_config(&pod, &sandbox);
    let _ = spec::hosts_file(&pod, &["10.88.0.5".to_string()], "cluster.local");
    let _ = spec::empty_dir_volumes(&pod);
    let _ = spec::host_path_volumes(&pod);
    let pod_spec = pod.spec.as_ref().expect("a validated pod has a spec");
    let class = qos::pod_qos(pod_spec);
    let _ = qos::pod_resources(pod_spec);
    let ips = ["10.88.0.5".to_string()];
    let host_ips = ["192.168.1.2".to_string()];
    let mut refused = 0;
    for c in pod_spec
        .init_containers
        .iter()
        .flatten()
        .chain(pod_spec.containers.iter())
    {
        let _ = spec::container_hash(c);
        let params = ContainerParams {
            image: "sha256:0000",
            pod_ip: "10.88.0.5",
            pod_ips: &ips,
            host_ips: &host_ips,
            oom_score_adj: qos::container_oom_score_adj(pod_spec, c, 1 << 30),
            node_allocatable: spec::NodeAllocatable {
                cpu_millis: Some(4000),
                memory_bytes: Some(1 << 30),
                ephemeral_storage_bytes: Some(8 << 30),
            },
            ..ContainerParams::default()
        };
        if spec::container_config(&pod, c, &params).is_err() {
            refused += 1;
        }
    }
    let volumes = pod_spec.volumes.as_ref().map_or(0, Vec::len);
    let containers =
        pod_spec.containers.len() + pod_spec.init_containers.as_ref().map_or(0, Vec::len);
    format!(
        "ok:{}:containers:{}:volumes:{}:refused:{}",
        class.as_str(),
        containers.min(4),
        volumes.min(4),
        refused.min(2)
    )
}
