//! API-server defaulting for pods that never went through an API server.
//!
//! Pods from the API server arrive already defaulted (`SetDefaults_Pod` and
//! friends in `k8s.io/kubernetes/pkg/apis/core/v1/defaults.go`). Static pods
//! read from a manifest directory do not, yet the rest of picolet (the agent,
//! the CRI translation, probes, QoS) assumes the defaulted shape: a restart
//! policy is always present, every port has a protocol, every probe has a
//! period, and so on. [`apply`] fills in exactly those defaults so the rest of
//! the code can treat file pods and API pods the same way.
//!
//! Everything here is pure: no I/O, no clock. Explicit values in the manifest
//! always win; only missing (`None`) fields are filled in.
//!
//! [`normalize_image`] lives here too: it is the docker reference
//! normalisation (`busybox` → `docker.io/library/busybox:latest`) that CRI-O
//! needs, and it shares the tag/digest parsing with the image pull policy
//! default.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, HTTPGetAction, Lifecycle, Pod, PodSecurityContext, PodSpec,
    Probe, ResourceRequirements, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The file mode the API server gives secret, configMap, downwardAPI and
/// projected volumes when `defaultMode` is unset (0644).
pub const DEFAULT_VOLUME_MODE: i32 = 0o644;

/// Apply the API server's defaults to `pod`, in place. Idempotent.
pub fn apply(pod: &mut Pod) {
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    apply_spec(spec);
}

fn apply_spec(spec: &mut PodSpec) {
    set(&mut spec.restart_policy, "Always");
    spec.termination_grace_period_seconds.get_or_insert(30);
    set(&mut spec.dns_policy, "ClusterFirst");
    set(&mut spec.scheduler_name, "default-scheduler");
    spec.security_context
        .get_or_insert_with(PodSecurityContext::default);
    spec.enable_service_links.get_or_insert(true);

    let host_network = spec.host_network.unwrap_or(false);
    for c in spec.containers.iter_mut() {
        apply_container(c, host_network);
    }
    for c in spec.init_containers.iter_mut().flatten() {
        apply_container(c, host_network);
    }
    if let Some(resources) = spec.resources.as_mut() {
        requests_default_to_limits(resources);
    }
    for v in spec.volumes.iter_mut().flatten() {
        apply_volume(v);
    }
}

fn apply_container(c: &mut Container, host_network: bool) {
    if c.image_pull_policy.is_none() {
        let policy = match c.image.as_deref() {
            Some(image) if pulls_always(image) => "Always",
            _ => "IfNotPresent",
        };
        c.image_pull_policy = Some(policy.to_owned());
    }
    set(&mut c.termination_message_path, "/dev/termination-log");
    set(&mut c.termination_message_policy, "File");
    for p in c.ports.iter_mut().flatten() {
        apply_port(p, host_network);
    }
    for probe in [
        &mut c.liveness_probe,
        &mut c.readiness_probe,
        &mut c.startup_probe,
    ] {
        if let Some(probe) = probe.as_mut() {
            apply_probe(probe);
        }
    }
    if let Some(lifecycle) = c.lifecycle.as_mut() {
        apply_lifecycle(lifecycle);
    }
    for e in c.env.iter_mut().flatten() {
        apply_env(e);
    }
    if let Some(resources) = c.resources.as_mut() {
        requests_default_to_limits(resources);
    }
}

fn apply_port(p: &mut ContainerPort, host_network: bool) {
    set(&mut p.protocol, "TCP");
    // With host networking the container port *is* the host port.
    if host_network && p.host_port.is_none() {
        p.host_port = Some(p.container_port);
    }
}

fn apply_probe(p: &mut Probe) {
    p.timeout_seconds.get_or_insert(1);
    p.period_seconds.get_or_insert(10);
    p.success_threshold.get_or_insert(1);
    p.failure_threshold.get_or_insert(3);
    if let Some(h) = p.http_get.as_mut() {
        apply_http_get(h);
    }
    if let Some(g) = p.grpc.as_mut() {
        set(&mut g.service, "");
    }
}

fn apply_lifecycle(l: &mut Lifecycle) {
    for handler in [&mut l.post_start, &mut l.pre_stop].into_iter().flatten() {
        if let Some(h) = handler.http_get.as_mut() {
            apply_http_get(h);
        }
    }
}

fn apply_http_get(h: &mut HTTPGetAction) {
    set(&mut h.scheme, "HTTP");
}

fn apply_env(e: &mut EnvVar) {
    if let Some(field_ref) = e.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
        set(&mut field_ref.api_version, "v1");
    }
}

/// When only limits are given, requests default to the limits (per resource).
fn requests_default_to_limits(r: &mut ResourceRequirements) {
    let Some(limits) = r.limits.as_ref() else {
        return;
    };
    if limits.is_empty() {
        return;
    }
    let requests: &mut BTreeMap<String, Quantity> = r.requests.get_or_insert_with(BTreeMap::new);
    for (name, value) in limits {
        requests
            .entry(name.clone())
            .or_insert_with(|| value.clone());
    }
}

fn apply_volume(v: &mut Volume) {
    // A volume with no source at all is an emptyDir.
    if volume_has_no_source(v) {
        v.empty_dir = Some(Default::default());
    }
    if let Some(e) = v.empty_dir.as_mut() {
        set(&mut e.medium, "");
    }
    if let Some(h) = v.host_path.as_mut() {
        set(&mut h.type_, "");
    }
    if let Some(s) = v.secret.as_mut() {
        s.default_mode.get_or_insert(DEFAULT_VOLUME_MODE);
    }
    if let Some(c) = v.config_map.as_mut() {
        c.default_mode.get_or_insert(DEFAULT_VOLUME_MODE);
    }
    if let Some(d) = v.downward_api.as_mut() {
        d.default_mode.get_or_insert(DEFAULT_VOLUME_MODE);
    }
    if let Some(p) = v.projected.as_mut() {
        p.default_mode.get_or_insert(DEFAULT_VOLUME_MODE);
    }
}

fn volume_has_no_source(v: &Volume) -> bool {
    // `Volume` has ~30 optional sources; rather than listing them (and going
    // stale when k8s-openapi adds one), look at what serialises: k8s-openapi
    // omits `None` fields, so a source-less volume is `{"name": ...}`.
    match super::to_json_value(v) {
        Ok(serde_json::Value::Object(map)) => map.keys().all(|k| k == "name"),
        _ => false,
    }
}

fn set(field: &mut Option<String>, value: &str) {
    if field.is_none() {
        *field = Some(value.to_owned());
    }
}

/// The API server's pull policy rule: `Always` when the tag is `latest`, or
/// when there is neither a tag nor a digest (which means `latest`).
fn pulls_always(image: &str) -> bool {
    let r = ImageRef::parse(image);
    match r.tag {
        Some(tag) => tag == "latest",
        None => r.digest.is_none(),
    }
}

/// A docker image reference split into its parts (no validation).
struct ImageRef<'a> {
    /// Everything before the tag/digest: `[domain/]path`.
    name: &'a str,
    tag: Option<&'a str>,
    digest: Option<&'a str>,
}

impl<'a> ImageRef<'a> {
    fn parse(image: &'a str) -> Self {
        let (rest, digest) = match image.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest)),
            None => (image, None),
        };
        // A ':' is a tag separator only after the last '/', otherwise it is
        // a registry port (`localhost:5000/foo`).
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        ImageRef { name, tag, digest }
    }
}

/// The fully-qualified form of an image reference, as docker's
/// `ParseNormalizedNamed` + `TagNameOnly` produce it:
///
/// - `busybox` → `docker.io/library/busybox:latest`
/// - `foo/bar:1` → `docker.io/foo/bar:1`
/// - `registry.k8s.io/pause:3.9` → unchanged
/// - `busybox@sha256:…` → `docker.io/library/busybox@sha256:…` (a digest
///   pins the image, so no `:latest` is added)
///
/// The first path component is a registry when it contains `.` or `:`, is
/// `localhost`, or has upper-case letters (the docker rule). The input is
/// trimmed but otherwise not validated; CRI-O will reject garbage.
pub fn normalize_image(image: &str) -> String {
    let image = image.trim();
    let r = ImageRef::parse(image);
    let (domain, path) = match r.name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.chars().any(|c| c.is_ascii_uppercase()) =>
        {
            (first, rest.to_owned())
        }
        _ => ("docker.io", r.name.to_owned()),
    };
    let domain = if domain == "index.docker.io" {
        "docker.io"
    } else {
        domain
    };
    let path = if domain == "docker.io" && !path.contains('/') {
        format!("library/{path}")
    } else {
        path
    };
    let mut out = format!("{domain}/{path}");
    match (r.tag, r.digest) {
        (None, None) => out.push_str(":latest"),
        (tag, digest) => {
            if let Some(tag) = tag {
                out.push(':');
                out.push_str(tag);
            }
            if let Some(digest) = digest {
                out.push('@');
                out.push_str(digest);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EnvVarSource, HostPathVolumeSource, ObjectFieldSelector};

    fn pod_with(containers: Vec<Container>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn container(image: &str) -> Container {
        Container {
            name: "c".into(),
            image: Some(image.into()),
            ..Default::default()
        }
    }

    fn pull_policy(image: &str) -> String {
        let mut pod = pod_with(vec![container(image)]);
        apply(&mut pod);
        pod.spec.unwrap().containers[0]
            .image_pull_policy
            .clone()
            .unwrap()
    }

    #[test]
    fn an_empty_pod_gets_the_pod_level_defaults() {
        let mut pod = Pod::default();
        apply(&mut pod);
        let spec = pod.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
        assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
        assert_eq!(spec.security_context, Some(PodSecurityContext::default()));
        assert_eq!(spec.enable_service_links, Some(true));
    }

    #[test]
    fn explicit_values_are_never_overwritten() {
        let mut pod = pod_with(vec![Container {
            image_pull_policy: Some("Never".into()),
            termination_message_policy: Some("FallbackToLogsOnError".into()),
            ..container("busybox")
        }]);
        let spec = pod.spec.as_mut().unwrap();
        spec.restart_policy = Some("OnFailure".into());
        spec.termination_grace_period_seconds = Some(5);
        spec.enable_service_links = Some(false);
        apply(&mut pod);
        let spec = pod.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("OnFailure"));
        assert_eq!(spec.termination_grace_period_seconds, Some(5));
        assert_eq!(spec.enable_service_links, Some(false));
        let c = &spec.containers[0];
        assert_eq!(c.image_pull_policy.as_deref(), Some("Never"));
        assert_eq!(
            c.termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError")
        );
    }

    #[test]
    fn applying_twice_changes_nothing() {
        let mut pod = pod_with(vec![container("nginx")]);
        apply(&mut pod);
        let once = pod.clone();
        apply(&mut pod);
        assert_eq!(pod, once);
    }

    #[test]
    fn latest_or_untagged_images_are_always_pulled() {
        assert_eq!(pull_policy("busybox"), "Always");
        assert_eq!(pull_policy("busybox:latest"), "Always");
        assert_eq!(pull_policy("localhost:5000/busybox"), "Always");
        assert_eq!(
            pull_policy("docker.io/library/busybox:latest@sha256:abc"),
            "Always"
        );
    }

    #[test]
    fn tagged_or_digested_images_are_pulled_if_not_present() {
        assert_eq!(pull_policy("busybox:1.36"), "IfNotPresent");
        assert_eq!(pull_policy("localhost:5000/busybox:1"), "IfNotPresent");
        assert_eq!(pull_policy("busybox@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn containers_get_termination_message_and_port_defaults() {
        let mut pod = pod_with(vec![Container {
            ports: Some(vec![ContainerPort {
                container_port: 80,
                ..Default::default()
            }]),
            ..container("nginx:1")
        }]);
        pod.spec.as_mut().unwrap().init_containers = Some(vec![container("init:1")]);
        apply(&mut pod);
        let spec = pod.spec.unwrap();
        let c = &spec.containers[0];
        assert_eq!(
            c.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
        let port = &c.ports.as_ref().unwrap()[0];
        assert_eq!(port.protocol.as_deref(), Some("TCP"));
        assert_eq!(port.host_port, None);
        let init = &spec.init_containers.unwrap()[0];
        assert_eq!(init.termination_message_policy.as_deref(), Some("File"));
    }

    #[test]
    fn host_network_ports_default_their_host_port() {
        let mut pod = pod_with(vec![Container {
            ports: Some(vec![ContainerPort {
                container_port: 8080,
                ..Default::default()
            }]),
            ..container("nginx:1")
        }]);
        pod.spec.as_mut().unwrap().host_network = Some(true);
        apply(&mut pod);
        let spec = pod.spec.unwrap();
        let port = &spec.containers[0].ports.as_ref().unwrap()[0];
        assert_eq!(port.host_port, Some(8080));
    }

    #[test]
    fn probes_get_timing_thresholds_and_http_scheme() {
        let mut pod = pod_with(vec![Container {
            liveness_probe: Some(Probe {
                http_get: Some(HTTPGetAction {
                    port: k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(80),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            readiness_probe: Some(Probe {
                period_seconds: Some(2),
                ..Default::default()
            }),
            ..container("nginx:1")
        }]);
        apply(&mut pod);
        let spec = pod.spec.unwrap();
        let c = &spec.containers[0];
        let live = c.liveness_probe.as_ref().unwrap();
        assert_eq!(live.timeout_seconds, Some(1));
        assert_eq!(live.period_seconds, Some(10));
        assert_eq!(live.success_threshold, Some(1));
        assert_eq!(live.failure_threshold, Some(3));
        let http = live.http_get.as_ref().unwrap();
        assert_eq!(http.scheme.as_deref(), Some("HTTP"));
        assert_eq!(http.path, None, "the API server does not default the path");
        assert_eq!(c.readiness_probe.as_ref().unwrap().period_seconds, Some(2));
        assert!(c.startup_probe.is_none(), "absent probes stay absent");
    }

    #[test]
    fn env_field_refs_default_to_api_version_v1() {
        let mut pod = pod_with(vec![Container {
            env: Some(vec![EnvVar {
                name: "NODE".into(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "spec.nodeName".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..container("nginx:1")
        }]);
        apply(&mut pod);
        let spec = pod.spec.unwrap();
        let c = &spec.containers[0];
        let field_ref = c.env.as_ref().unwrap()[0]
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref();
        assert_eq!(field_ref.unwrap().api_version.as_deref(), Some("v1"));
    }

    #[test]
    fn requests_default_to_limits_when_only_limits_are_set() {
        let q = |s: &str| Quantity(s.into());
        let mut pod = pod_with(vec![Container {
            resources: Some(ResourceRequirements {
                limits: Some(BTreeMap::from([
                    ("cpu".into(), q("500m")),
                    ("memory".into(), q("64Mi")),
                ])),
                requests: Some(BTreeMap::from([("cpu".into(), q("100m"))])),
                ..Default::default()
            }),
            ..container("nginx:1")
        }]);
        apply(&mut pod);
        let spec = pod.spec.unwrap();
        let c = &spec.containers[0];
        let requests = c.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(requests["cpu"], q("100m"), "an explicit request wins");
        assert_eq!(requests["memory"], q("64Mi"));
    }

    #[test]
    fn volumes_get_source_defaults() {
        let mut pod = pod_with(vec![container("nginx:1")]);
        pod.spec.as_mut().unwrap().volumes = Some(vec![
            Volume {
                name: "bare".into(),
                ..Default::default()
            },
            Volume {
                name: "host".into(),
                host_path: Some(HostPathVolumeSource {
                    path: "/data".into(),
                    type_: None,
                }),
                ..Default::default()
            },
            Volume {
                name: "secret".into(),
                secret: Some(Default::default()),
                ..Default::default()
            },
        ]);
        apply(&mut pod);
        let volumes = pod.spec.unwrap().volumes.unwrap();
        let bare = volumes[0]
            .empty_dir
            .as_ref()
            .expect("a source-less volume is an emptyDir");
        assert_eq!(bare.medium.as_deref(), Some(""));
        assert_eq!(
            volumes[1].host_path.as_ref().unwrap().type_.as_deref(),
            Some("")
        );
        assert!(volumes[1].empty_dir.is_none());
        assert_eq!(
            volumes[2].secret.as_ref().unwrap().default_mode,
            Some(0o644)
        );
    }

    #[test]
    fn short_image_names_are_fully_qualified() {
        assert_eq!(
            normalize_image("busybox"),
            "docker.io/library/busybox:latest"
        );
        assert_eq!(
            normalize_image("busybox:1.36"),
            "docker.io/library/busybox:1.36"
        );
        assert_eq!(normalize_image("foo/bar:1"), "docker.io/foo/bar:1");
        assert_eq!(
            normalize_image("index.docker.io/foo/bar"),
            "docker.io/foo/bar:latest"
        );
        assert_eq!(
            normalize_image("docker.io/nginx"),
            "docker.io/library/nginx:latest"
        );
    }

    #[test]
    fn qualified_image_names_are_unchanged() {
        assert_eq!(
            normalize_image("registry.k8s.io/pause:3.9"),
            "registry.k8s.io/pause:3.9"
        );
        assert_eq!(
            normalize_image("localhost:5000/team/app:v2"),
            "localhost:5000/team/app:v2"
        );
        assert_eq!(normalize_image("localhost/app"), "localhost/app:latest");
        assert_eq!(normalize_image("quay.io/a/b/c:1"), "quay.io/a/b/c:1");
    }

    #[test]
    fn digests_are_kept_and_no_latest_tag_is_added() {
        assert_eq!(
            normalize_image("busybox@sha256:0123"),
            "docker.io/library/busybox@sha256:0123"
        );
        assert_eq!(
            normalize_image("ghcr.io/x/y:1.0@sha256:0123"),
            "ghcr.io/x/y:1.0@sha256:0123"
        );
    }
}
