//! Container rules: names, images, ports, env, mounts, resources, probes and
//! lifecycle handlers, security context (the API server's
//! `validateContainerCommon` and friends). See [`super`] for the contract.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvFromSource, EnvVar, ResourceFieldSelector, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::handlers::{success_must_be_one, validate_lifecycle_handler, validate_probe};
use super::meta::{qualified_name_errors, validate_dns1123_label, validate_dns1123_subdomain};
use super::resources::{validate_resources, QUANTITY_FORMAT};
use super::security::validate_security_context;
use super::{validate_local_descending_path, Errors, Path, Seen};
use crate::quantity::Quantity as Qty;

/// What every container's validation needs from the pod.
pub(super) struct Context<'a> {
    /// The pod's valid volumes, by name.
    pub volumes: &'a HashMap<&'a str, &'a Volume>,
    /// `terminationGracePeriodSeconds`.
    pub grace: Option<i64>,
    /// `securityContext.hostUsers` (true unless set to false).
    pub host_users: bool,
}

/// Regular containers (`validateContainers`).
pub(super) fn validate_containers(
    containers: &[Container],
    ctx: &Context,
    path: &Path,
    v: &mut Errors,
) {
    if containers.is_empty() {
        return v.required(path, "");
    }
    let mut names = Seen::new();
    for (i, c) in containers.iter().enumerate() {
        let p = path.index(i);
        validate_container_common(c, ctx, &p, v);
        if !names.insert(c.name.as_str()) {
            v.duplicate(&p.child("name"), &c.name);
        }
        validate_lifecycle_and_probes(c, ctx, &p, v);
        if c.restart_policy.is_some() {
            v.forbidden(
                &p.child("restartPolicy"),
                "may not be set for non-init containers",
            );
        }
    }
}

/// Init containers (`validateInitContainers`): names unique across init and
/// regular containers; probes and hooks only for restartable (sidecar) ones.
pub(super) fn validate_init_containers(
    inits: &[Container],
    regular: &[Container],
    ctx: &Context,
    path: &Path,
    v: &mut Errors,
) {
    let mut names: Seen = regular.iter().map(|c| c.name.as_str()).collect();
    for (i, c) in inits.iter().enumerate() {
        let p = path.index(i);
        validate_container_common(c, ctx, &p, v);
        let restart_always = match c.restart_policy.as_deref() {
            None => false,
            Some("Always") => true,
            Some(other) => {
                v.not_supported(&p.child("restartPolicy"), other, &["Always"]);
                false
            }
        };
        if names.contains(c.name.as_str()) {
            v.duplicate(&p.child("name"), &c.name);
        } else if !c.name.is_empty() {
            names.insert(c.name.as_str());
        }
        check_host_port_conflicts(std::slice::from_ref(c), path, v);
        if restart_always {
            validate_lifecycle_and_probes(c, ctx, &p, v);
        } else {
            let forbidden = "may not be set for init containers without restartPolicy=Always";
            if c.lifecycle.is_some() {
                v.forbidden(&p.child("lifecycle"), forbidden);
            }
            for (field, probe) in [
                ("livenessProbe", &c.liveness_probe),
                ("readinessProbe", &c.readiness_probe),
                ("startupProbe", &c.startup_probe),
            ] {
                if probe.is_some() {
                    v.forbidden(&p.child(field), forbidden);
                }
            }
        }
    }
}

/// `AccumulateUniqueHostPorts`: a `protocol/hostIP/hostPort` only once.
pub(super) fn check_host_port_conflicts(containers: &[Container], path: &Path, v: &mut Errors) {
    let mut seen = HashSet::new();
    for (i, c) in containers.iter().enumerate() {
        for (j, port) in c.ports.iter().flatten().enumerate() {
            let host_port = port.host_port.unwrap_or(0);
            if host_port == 0 {
                continue;
            }
            let key = format!(
                "{}/{}/{host_port}",
                port.protocol.as_deref().unwrap_or(""),
                port.host_ip.as_deref().unwrap_or("")
            );
            if !seen.insert(key.clone()) {
                v.duplicate(
                    &path.index(i).child("ports").index(j).child("hostPort"),
                    &key,
                );
            }
        }
    }
}

fn validate_container_common(c: &Container, ctx: &Context, p: &Path, v: &mut Errors) {
    if c.name.is_empty() {
        v.required(&p.child("name"), "");
    } else {
        validate_dns1123_label(&c.name, &p.child("name"), v);
    }
    match c.image.as_deref().unwrap_or("") {
        "" => v.required(&p.child("image"), ""),
        image if image.trim() != image => v.invalid_str(
            &p.child("image"),
            image,
            "must not have leading or trailing whitespace",
        ),
        _ => {}
    }
    v.one_of(
        &p.child("terminationMessagePolicy"),
        c.termination_message_policy.as_deref(),
        &["File", "FallbackToLogsOnError"],
    );
    validate_ports(c.ports.as_deref().unwrap_or(&[]), &p.child("ports"), v);
    for (i, e) in c.env.iter().flatten().enumerate() {
        validate_env_var(e, &p.child("env").index(i), v);
    }
    validate_env_from(c.env_from.as_deref().unwrap_or(&[]), &p.child("envFrom"), v);
    validate_volume_mounts(c, ctx, &p.child("volumeMounts"), v);
    validate_volume_devices(c, ctx, &p.child("volumeDevices"), v);
    v.one_of(
        &p.child("imagePullPolicy"),
        c.image_pull_policy.as_deref(),
        &["Always", "IfNotPresent", "Never"],
    );
    if let Some(r) = c.resources.as_ref() {
        validate_resources(r, &p.child("resources"), v);
    }
    for rp in c.resize_policy.iter().flatten() {
        let rp_path = p.child("resizePolicy");
        match rp.resource_name.as_str() {
            "cpu" | "memory" => {}
            "" => v.required(&rp_path, ""),
            other => v.not_supported(&rp_path, other, &["cpu", "memory"]),
        }
        match rp.restart_policy.as_str() {
            "NotRequired" | "RestartContainer" => {}
            "" => v.required(&rp_path, ""),
            other => v.not_supported(&rp_path, other, &["NotRequired", "RestartContainer"]),
        }
    }
    if let Some(sc) = c.security_context.as_ref() {
        validate_security_context(sc, ctx.host_users, &p.child("securityContext"), v);
    }
}

fn validate_lifecycle_and_probes(c: &Container, ctx: &Context, p: &Path, v: &mut Errors) {
    if let Some(l) = c.lifecycle.as_ref() {
        let lp = p.child("lifecycle");
        if let Some(h) = l.post_start.as_ref() {
            validate_lifecycle_handler(h, ctx.grace, &lp.child("postStart"), v);
        }
        if let Some(h) = l.pre_stop.as_ref() {
            validate_lifecycle_handler(h, ctx.grace, &lp.child("preStop"), v);
        }
    }
    if let Some(probe) = c.liveness_probe.as_ref() {
        let pp = p.child("livenessProbe");
        validate_probe(probe, &pp, v);
        success_must_be_one(probe, &pp, v);
    }
    if let Some(probe) = c.readiness_probe.as_ref() {
        let pp = p.child("readinessProbe");
        validate_probe(probe, &pp, v);
        if let Some(g) = probe.termination_grace_period_seconds {
            v.invalid_int(
                &pp.child("terminationGracePeriodSeconds"),
                g,
                "must not be set for readinessProbes",
            );
        }
    }
    if let Some(probe) = c.startup_probe.as_ref() {
        let pp = p.child("startupProbe");
        validate_probe(probe, &pp, v);
        success_must_be_one(probe, &pp, v);
    }
}

// ---------------------------------------------------------------------------
// Ports
// ---------------------------------------------------------------------------

/// `IsValidPortName`: an IANA service name.
fn port_name_errors(name: &str) -> Vec<&'static str> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push("must be no more than 15 characters");
    }
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen");
    }
    errs
}

const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

fn validate_ports(ports: &[ContainerPort], path: &Path, v: &mut Errors) {
    let mut names = Seen::new();
    for (i, port) in ports.iter().enumerate() {
        let p = path.index(i);
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            let errs = port_name_errors(name);
            for msg in &errs {
                v.invalid_str(&p.child("name"), name, *msg);
            }
            if errs.is_empty() && !names.insert(name) {
                v.duplicate(&p.child("name"), name);
            }
        }
        match port.container_port {
            0 => v.required(&p.child("containerPort"), ""),
            n if !(1..=65535).contains(&n) => {
                v.invalid_int(&p.child("containerPort"), n.into(), PORT_RANGE)
            }
            _ => {}
        }
        if let Some(hp) = port
            .host_port
            .filter(|hp| *hp != 0 && !(1..=65535).contains(hp))
        {
            v.invalid_int(&p.child("hostPort"), hp.into(), PORT_RANGE);
        }
        match port.protocol.as_deref().unwrap_or("") {
            "" => v.required(&p.child("protocol"), ""),
            "TCP" | "UDP" | "SCTP" => {}
            other => v.not_supported(&p.child("protocol"), other, &["SCTP", "TCP", "UDP"]),
        }
    }
}

/// `ValidatePortNumOrName`.
pub(super) fn validate_port_num_or_name(port: &IntOrString, path: &Path, v: &mut Errors) {
    match port {
        IntOrString::Int(n) => {
            if !(1..=65535).contains(n) {
                v.invalid_int(path, (*n).into(), PORT_RANGE);
            }
        }
        IntOrString::String(name) => {
            for msg in port_name_errors(name) {
                v.invalid_str(path, name, msg);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Environment
// ---------------------------------------------------------------------------

const ENV_NAME_MSG: &str =
    "a valid environment variable name must consist only of printable ASCII characters other than '='";

/// `IsRelaxedEnvVarName` (GA since Kubernetes 1.34): printable ASCII, no `=`.
fn env_name_errors(name: &str) -> Vec<&'static str> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push("environment variable name must be non-empty");
    }
    if name.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        errs.push(ENV_NAME_MSG);
    }
    errs
}

/// `IsConfigMapKey`.
fn config_map_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        errs.push(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
                .to_string(),
        );
    }
    match key {
        "." => errs.push("must not be '.'".to_string()),
        ".." => errs.push("must not be '..'".to_string()),
        k if k.starts_with("..") => errs.push("must not start with '..'".to_string()),
        _ => {}
    }
    errs
}

const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

const RESOURCE_FIELD_PATHS: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

fn validate_env_var(e: &EnvVar, p: &Path, v: &mut Errors) {
    if e.name.is_empty() {
        v.required(&p.child("name"), "");
    } else {
        for msg in env_name_errors(&e.name) {
            v.invalid_str(&p.child("name"), &e.name, msg);
        }
    }
    let Some(from) = e.value_from.as_ref() else {
        return;
    };
    let vp = p.child("valueFrom");
    let mut sources = 0;
    if let Some(f) = from.field_ref.as_ref() {
        sources += 1;
        let fp = vp.child("fieldRef");
        if f.api_version.as_deref().unwrap_or("").is_empty() {
            v.required(&fp.child("apiVersion"), "");
        } else if f.field_path.is_empty() {
            v.required(&fp.child("fieldPath"), "");
        } else if let Some((base, key)) = subscripted(&f.field_path) {
            match base {
                "metadata.annotations" => {
                    for msg in qualified_name_errors(&key.to_lowercase()) {
                        v.invalid_str(&fp, key, msg);
                    }
                }
                "metadata.labels" => {
                    for msg in qualified_name_errors(key) {
                        v.invalid_str(&fp, key, msg);
                    }
                }
                other => v.invalid_str(&fp, other, "does not support subscript"),
            }
        } else if !ENV_FIELD_PATHS.contains(&f.field_path.as_str()) {
            v.not_supported(&fp.child("fieldPath"), &f.field_path, ENV_FIELD_PATHS);
        }
    }
    if let Some(r) = from.resource_field_ref.as_ref() {
        sources += 1;
        validate_resource_field_ref(r, &vp.child("resourceFieldRef"), v);
    }
    for (field, selector) in [
        (
            "configMapKeyRef",
            from.config_map_key_ref.as_ref().map(|s| (&s.name, &s.key)),
        ),
        (
            "secretKeyRef",
            from.secret_key_ref.as_ref().map(|s| (&s.name, &s.key)),
        ),
    ] {
        let Some((name, key)) = selector else {
            continue;
        };
        sources += 1;
        let sp = vp.child(field);
        validate_dns1123_subdomain(name, &sp.child("name"), v);
        if key.is_empty() {
            v.required(&sp.child("key"), "");
        } else {
            for msg in config_map_key_errors(key) {
                v.invalid_str(&sp.child("key"), key, msg);
            }
        }
    }
    if sources == 0 {
        v.invalid_str(
            &vp,
            "",
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        );
    } else if !e.value.as_deref().unwrap_or("").is_empty() {
        v.invalid_str(&vp, "", "may not be specified when `value` is not empty");
    } else if sources > 1 {
        v.invalid_str(
            &vp,
            "",
            "may not have more than one field specified at a time",
        );
    }
}

/// `metadata.labels['key']` → `("metadata.labels", "key")`.
fn subscripted(path: &str) -> Option<(&str, &str)> {
    let (base, rest) = path.split_once("['")?;
    Some((base, rest.strip_suffix("']")?))
}

fn validate_resource_field_ref(r: &ResourceFieldSelector, p: &Path, v: &mut Errors) {
    let resource = r.resource.as_str();
    if resource.is_empty() {
        v.required(&p.child("resource"), "");
    } else if !RESOURCE_FIELD_PATHS.contains(&resource)
        && !resource.starts_with("requests.hugepages-")
        && !resource.starts_with("limits.hugepages-")
    {
        v.not_supported(&p.child("resource"), resource, RESOURCE_FIELD_PATHS);
    }
    let Some(divisor) = r.divisor.as_ref() else {
        return;
    };
    let Ok(d) = Qty::parse(&divisor.0) else {
        return v.invalid_str(&p.child("divisor"), &divisor.0, QUANTITY_FORMAT);
    };
    if d.is_zero() {
        return;
    }
    let millis = d.milli_value().unwrap_or(0);
    let (ok, detail) = match resource.split_once('.').map(|(_, r)| r) {
        Some("cpu") => (
            millis == 1 || millis == 1000,
            "only divisor's values 1m and 1 are supported with the cpu resource",
        ),
        Some(r @ ("memory" | "ephemeral-storage")) => (
            d.sub_unit_suffix().is_none() && is_unit_power(d.value().unwrap_or(0)),
            if r == "memory" {
                "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the memory resource"
            } else {
                "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the local ephemeral storage resource"
            },
        ),
        _ => (true, ""),
    };
    if !ok {
        v.invalid_str(&p.child("divisor"), resource, detail);
    }
}

/// 1, or a power of 1000 or of 1024 up to the exa prefixes.
fn is_unit_power(n: u64) -> bool {
    (0..=6).any(|e| 1000u64.pow(e) == n || 1024u64.pow(e) == n)
}

fn validate_env_from(sources: &[EnvFromSource], path: &Path, v: &mut Errors) {
    for (i, s) in sources.iter().enumerate() {
        let p = path.index(i);
        if let Some(prefix) = s.prefix.as_deref().filter(|x| !x.is_empty()) {
            for msg in env_name_errors(prefix) {
                v.invalid_str(&p.child("prefix"), prefix, msg);
            }
        }
        let refs = [
            (
                "configMapRef",
                s.config_map_ref.as_ref().map(|r| r.name.as_str()),
            ),
            ("secretRef", s.secret_ref.as_ref().map(|r| r.name.as_str())),
        ];
        let mut count = 0;
        for (field, name) in refs {
            let Some(name) = name else { continue };
            count += 1;
            if name.is_empty() {
                v.required(&p.child(field).child("name"), "");
            } else {
                validate_dns1123_subdomain(name, &p.child(field).child("name"), v);
            }
        }
        match count {
            0 => v.invalid_str(
                path,
                "",
                "must specify one of: `configMapRef` or `secretRef`",
            ),
            1 => {}
            _ => v.invalid_str(
                path,
                "",
                "may not have more than one field specified at a time",
            ),
        }
    }
}

// ---------------------------------------------------------------------------
// Volume mounts and devices
// ---------------------------------------------------------------------------

fn validate_volume_mounts(c: &Container, ctx: &Context, path: &Path, v: &mut Errors) {
    let devices: BTreeMap<&str, &str> = c
        .volume_devices
        .iter()
        .flatten()
        .map(|d| (d.name.as_str(), d.device_path.as_str()))
        .collect();
    let privileged = c
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false);
    let mut mount_points = Seen::new();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let p = path.index(i);
        if m.name.is_empty() {
            v.required(&p.child("name"), "");
        }
        if !ctx.volumes.contains_key(m.name.as_str()) {
            v.not_found(&p.child("name"), &m.name);
        }
        if m.mount_path.is_empty() {
            v.required(&p.child("mountPath"), "");
        }
        if !mount_points.insert(m.mount_path.as_str()) {
            v.invalid_str(&p.child("mountPath"), &m.mount_path, "must be unique");
        }
        if devices.contains_key(m.name.as_str()) {
            v.invalid_str(
                &p.child("name"),
                &m.name,
                "must not already exist in volumeDevices",
            );
        }
        if devices.values().any(|d| *d == m.mount_path) {
            v.invalid_str(
                &p.child("mountPath"),
                &m.mount_path,
                "must not already exist as a path in volumeDevices",
            );
        }
        if ctx
            .volumes
            .get(m.name.as_str())
            .is_some_and(|vol| vol.image.is_some())
        {
            for (field, value) in [("subPath", &m.sub_path), ("subPathExpr", &m.sub_path_expr)] {
                if let Some(s) = value.as_deref().filter(|s| !s.is_empty()) {
                    v.invalid_str(&p.child(field), s, "not allowed in image volume sources");
                }
            }
        }
        // As the API server: these are reported at `volumeMounts.subPath`,
        // without the index.
        let sub_path = m.sub_path.as_deref().unwrap_or("");
        if !sub_path.is_empty() {
            validate_local_descending_path(sub_path, &path.child("subPath"), v);
        }
        if let Some(expr) = m.sub_path_expr.as_deref().filter(|s| !s.is_empty()) {
            if !sub_path.is_empty() {
                v.invalid_str(
                    &p.child("subPathExpr"),
                    expr,
                    "subPathExpr and subPath are mutually exclusive",
                );
            }
            validate_local_descending_path(expr, &path.child("subPathExpr"), v);
        }
        validate_mount_propagation(m, privileged, &path.child("mountPropagation"), v);
        validate_recursive_read_only(m, &path.child("recursiveReadOnly"), v);
    }
}

fn validate_mount_propagation(m: &VolumeMount, privileged: bool, path: &Path, v: &mut Errors) {
    match m.mount_propagation.as_deref() {
        None | Some("None") | Some("HostToContainer") => {}
        Some("Bidirectional") => {
            if !privileged {
                v.forbidden(
                    path,
                    "Bidirectional mount propagation is available only to privileged containers",
                );
            }
        }
        Some(other) => v.not_supported(path, other, &["Bidirectional", "HostToContainer", "None"]),
    }
}

fn validate_recursive_read_only(m: &VolumeMount, path: &Path, v: &mut Errors) {
    match m.recursive_read_only.as_deref() {
        None | Some("Disabled") => {}
        Some("IfPossible") | Some("Enabled") => {
            if !m.read_only.unwrap_or(false) {
                v.forbidden(path, "may only be specified when readOnly is true");
            }
            if !matches!(m.mount_propagation.as_deref(), None | Some("None")) {
                v.forbidden(
                    path,
                    "may only be specified when mountPropagation is None or not specified",
                );
            }
        }
        Some(other) => v.not_supported(path, other, &["Disabled", "Enabled", "IfPossible"]),
    }
}

fn validate_volume_devices(c: &Container, ctx: &Context, path: &Path, v: &mut Errors) {
    let mounts: BTreeMap<&str, &str> = c
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.as_str(), m.mount_path.as_str()))
        .collect();
    let (mut names, mut paths) = (Seen::new(), Seen::new());
    for (i, d) in c.volume_devices.iter().flatten().enumerate() {
        let p = path.index(i);
        if d.name.is_empty() {
            v.required(&p.child("name"), "");
        }
        if names.contains(d.name.as_str()) {
            v.invalid_str(&p.child("name"), &d.name, "must be unique");
        }
        match ctx.volumes.get(d.name.as_str()) {
            None => v.not_found(&p.child("name"), &d.name),
            Some(vol) if vol.persistent_volume_claim.is_none() && vol.ephemeral.is_none() => v.invalid_str(
                &p.child("name"),
                &d.name,
                "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode",
            ),
            Some(_) => {}
        }
        if d.device_path.is_empty() {
            v.required(&p.child("devicePath"), "");
        }
        if paths.contains(d.device_path.as_str()) {
            v.invalid_str(&p.child("devicePath"), &d.device_path, "must be unique");
        }
        if d.device_path.split('/').any(|s| s == "..") {
            v.invalid_str(
                &p.child("devicePath"),
                &d.device_path,
                "can not contain backsteps ('..')",
            );
        } else {
            paths.insert(d.device_path.as_str());
        }
        if mounts.contains_key(d.name.as_str()) {
            v.invalid_str(
                &p.child("name"),
                &d.name,
                "must not already exist in volumeMounts",
            );
        }
        if mounts.values().any(|m| *m == d.device_path) {
            v.invalid_str(
                &p.child("devicePath"),
                &d.device_path,
                "must not already exist as a path in volumeMounts",
            );
        }
        if !d.name.is_empty() {
            names.insert(d.name.as_str());
        }
    }
}
