//! The environment (kubelet's `makeEnvironmentVariables`): `env` and
//! `envFrom` in order with `$(VAR)` expansion (`expansion.Expand`), the
//! downward API (`fieldRef`, `resourceFieldRef`), then the Service
//! variables (`service_env`) the pod's own do not set; `$(VAR)` sees those
//! too.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{
    Container, EnvVar, ObjectFieldSelector, Pod, ResourceFieldSelector,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::container::ContainerParams;
use super::service_env::pod_service_env;
use super::{millis, parse_resource, units, SpecError, SpecErrorKind};
use crate::pod::accessors::{
    self, name as pod_name, namespace as pod_namespace, spec, uid as pod_uid,
};
use crate::pod::config_objects::{is_env_var_name, ConfigObjects, Kind, Lookup};
use crate::quantity::Quantity as Qty;

/// kubelet's `expansion.Expand`: `$(NAME)` is replaced by `lookup(NAME)`,
/// left as written when the lookup fails; `$$` is an escaped `$`; any other
/// `$` is copied through.
pub fn expand(input: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let b = input.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < b.len() {
        if b[cursor] == b'$' && cursor + 1 < b.len() {
            out.extend_from_slice(&b[checkpoint..cursor]);
            let rest = &b[cursor + 1..];
            let advance = match rest[0] {
                b'$' => {
                    out.push(b'$');
                    1
                }
                b'(' => match rest.iter().position(|&ch| ch == b')') {
                    Some(close) => {
                        // `(` and `)` are ASCII, so these are char boundaries.
                        let name = &input[cursor + 2..cursor + 1 + close];
                        match lookup(name) {
                            Some(v) => out.extend_from_slice(v.as_bytes()),
                            None => out.extend_from_slice(format!("$({name})").as_bytes()),
                        }
                        close + 1
                    }
                    None => {
                        out.extend_from_slice(b"$(");
                        1
                    }
                },
                other => {
                    out.push(b'$');
                    out.push(other);
                    1
                }
            };
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    out.extend_from_slice(&b[checkpoint.min(b.len())..]);
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Ordered env with later assignments replacing earlier ones in place;
/// `$(VAR)` falls back on the Service variables.
#[derive(Default)]
struct Env {
    vars: Vec<(String, String)>,
    index: HashMap<String, usize>,
    services: HashMap<String, String>,
}

impl Env {
    fn set(&mut self, k: &str, v: String) {
        match self.index.get(k) {
            Some(&i) => self.vars[i].1 = v,
            None => {
                self.index.insert(k.to_string(), self.vars.len());
                self.vars.push((k.to_string(), v));
            }
        }
    }
    fn get(&self, k: &str) -> Option<String> {
        match self.index.get(k) {
            Some(&i) => Some(self.vars[i].1.clone()),
            None => self.services.get(k).cloned(),
        }
    }
}

pub(super) fn container_env(
    pod: &Pod,
    c: &Container,
    p: &ContainerParams,
) -> Result<Vec<(String, String)>, SpecError> {
    let service_vars = pod_service_env(pod, p.services).map_err(|e| {
        SpecError::new(&c.name, "env", e.to_string()).with_kind(SpecErrorKind::NotYetKnown)
    })?;
    let mut env = Env {
        services: service_vars.iter().cloned().collect(),
        ..Env::default()
    };
    for (i, from) in c.env_from.iter().flatten().enumerate() {
        let field = format!("envFrom[{i}]");
        let prefix = from.prefix.as_deref().unwrap_or_default();
        let mut put = |k: &str, v: String| {
            let key = format!("{prefix}{k}");
            if is_env_var_name(&key) {
                env.set(&key, v);
            }
        };
        if let Some(cm) = from.config_map_ref.as_ref() {
            let optional = cm.optional == Some(true);
            let Some(objects) = p.objects else {
                if optional {
                    continue;
                }
                return Err(SpecError::new(
                    &c.name,
                    field,
                    format!(
                        "configMapRef {:?} is not supported for static pods",
                        cm.name
                    ),
                ));
            };
            let Some(obj) = found(
                objects.config_map(pod_namespace(pod), &cm.name),
                Kind::ConfigMap,
                &cm.name,
                optional,
                &c.name,
                &field,
            )?
            else {
                continue;
            };
            for (k, v) in obj.data.iter().flatten() {
                put(k, v.clone());
            }
        } else if let Some(sec) = from.secret_ref.as_ref() {
            let optional = sec.optional == Some(true);
            let Some(objects) = p.objects else {
                if optional {
                    continue;
                }
                return Err(SpecError::new(
                    &c.name,
                    field,
                    format!("secretRef {:?} is not supported for static pods", sec.name),
                ));
            };
            let Some(obj) = found(
                objects.secret(pod_namespace(pod), &sec.name),
                Kind::Secret,
                &sec.name,
                optional,
                &c.name,
                &field,
            )?
            else {
                continue;
            };
            for (k, v) in obj.data.iter().flatten() {
                put(k, String::from_utf8_lossy(&v.0).into_owned());
            }
        }
    }
    for e in c.env.iter().flatten() {
        let value = env_value(pod, c, p, e, &env)?;
        if let Some(v) = value {
            env.set(&e.name, v);
        }
    }
    for (k, v) in service_vars {
        if !env.index.contains_key(&k) {
            env.vars.push((k, v));
        }
    }
    Ok(env.vars)
}

/// The keys of `envFrom` sources that are skipped as invalid variable
/// names, one message per source in kubelet's words (its
/// `InvalidEnvironmentVariableNames` event); objects not found yield none.
pub fn env_from_skipped(pod: &Pod, c: &Container, objects: &dyn ConfigObjects) -> Vec<String> {
    let ns = pod_namespace(pod);
    let mut out = Vec::new();
    for from in c.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or_default();
        let (what, name, keys): (&str, &str, Vec<String>) =
            if let Some(cm) = from.config_map_ref.as_ref() {
                let keys = match objects.config_map(ns, &cm.name) {
                    Lookup::Found(o) => o.data.iter().flatten().map(|(k, _)| k.clone()).collect(),
                    _ => Vec::new(),
                };
                ("configMap", &cm.name, keys)
            } else if let Some(s) = from.secret_ref.as_ref() {
                let keys = match objects.secret(ns, &s.name) {
                    Lookup::Found(o) => o.data.iter().flatten().map(|(k, _)| k.clone()).collect(),
                    _ => Vec::new(),
                };
                ("secret", &s.name, keys)
            } else {
                continue;
            };
        let mut bad: Vec<String> = keys
            .into_iter()
            .map(|k| format!("{prefix}{k}"))
            .filter(|k| !is_env_var_name(k))
            .collect();
        if bad.is_empty() {
            continue;
        }
        bad.sort();
        out.push(format!(
            "Keys [{}] from the EnvFrom {what} {ns}/{name} were skipped since they are considered invalid environment variable names.",
            bad.join(", ")
        ));
    }
    out
}

/// The object behind a reference: `None` when an optional one is missing;
/// kubelet's `configmap "x" not found` when a required one is; a wait when
/// nothing is known yet.
fn found<T>(
    l: Lookup<T>,
    kind: Kind,
    name: &str,
    optional: bool,
    container: &str,
    field: &str,
) -> Result<Option<std::rc::Rc<T>>, SpecError> {
    match l {
        Lookup::Found(o) => Ok(Some(o)),
        Lookup::NotFound if optional => Ok(None),
        Lookup::NotFound => Err(SpecError::new(
            container,
            field,
            format!("{} {name:?} not found", kind.as_str()),
        )
        .with_kind(SpecErrorKind::Missing)),
        Lookup::NotYetKnown => Err(SpecError::new(
            container,
            field,
            format!("{} {name:?} is not known yet", kind.as_str()),
        )
        .with_kind(SpecErrorKind::NotYetKnown)),
    }
}

/// One env var's value; `None` when an optional source is skipped.
fn env_value(
    pod: &Pod,
    c: &Container,
    p: &ContainerParams,
    e: &EnvVar,
    env: &Env,
) -> Result<Option<String>, SpecError> {
    let field = format!("env {:?}", e.name);
    let err = |reason: String| SpecError::new(&c.name, field.clone(), reason);
    if let Some(v) = e.value.as_deref().filter(|v| !v.is_empty()) {
        return Ok(Some(expand(v, &|name| env.get(name))));
    }
    let Some(from) = e.value_from.as_ref() else {
        return Ok(Some(String::new()));
    };
    if let Some(fr) = from.field_ref.as_ref() {
        return field_ref_value(pod, p, fr).map(Some).map_err(err);
    }
    if let Some(rf) = from.resource_field_ref.as_ref() {
        return resource_field_value(pod, c, p, rf).map(Some).map_err(err);
    }
    let missing_key = |kind: &str, key: &str, name: &str| {
        err(format!(
            "couldn't find key {key} in {kind} {}/{name}",
            pod_namespace(pod)
        ))
        .with_kind(SpecErrorKind::Missing)
    };
    if let Some(cm) = from.config_map_key_ref.as_ref() {
        let optional = cm.optional == Some(true);
        let Some(objects) = p.objects else {
            if optional {
                return Ok(None);
            }
            return Err(err(
                "configMapKeyRef is not supported for static pods".into()
            ));
        };
        let l = objects.config_map(pod_namespace(pod), &cm.name);
        let Some(obj) = found(l, Kind::ConfigMap, &cm.name, optional, &c.name, &field)? else {
            return Ok(None);
        };
        return match obj.data.as_ref().and_then(|d| d.get(&cm.key)) {
            Some(v) => Ok(Some(v.clone())),
            None if optional => Ok(None),
            None => Err(missing_key("ConfigMap", &cm.key, &cm.name)),
        };
    }
    if let Some(s) = from.secret_key_ref.as_ref() {
        let optional = s.optional == Some(true);
        let Some(objects) = p.objects else {
            if optional {
                return Ok(None);
            }
            return Err(err("secretKeyRef is not supported for static pods".into()));
        };
        let l = objects.secret(pod_namespace(pod), &s.name);
        let Some(obj) = found(l, Kind::Secret, &s.name, optional, &c.name, &field)? else {
            return Ok(None);
        };
        return match obj.data.as_ref().and_then(|d| d.get(&s.key)) {
            Some(v) => Ok(Some(String::from_utf8_lossy(&v.0).into_owned())),
            None if optional => Ok(None),
            None => Err(missing_key("Secret", &s.key, &s.name)),
        };
    }
    if let Some(f) = from.file_key_ref.as_ref() {
        if f.optional == Some(true) {
            return Ok(None);
        }
        return Err(err("fileKeyRef is not supported".into()));
    }
    Ok(Some(String::new()))
}

/// Go's `%q` for the strings that occur in label/annotation values.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `k="v"` lines, sorted by key (kubelet's `fieldpath.FormatMap`).
pub(super) fn format_map(m: Option<&BTreeMap<String, String>>) -> String {
    m.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// kubelet's `podFieldSelectorRuntimeValue` + `ExtractFieldPathAsString`.
pub(super) fn field_ref_value(
    pod: &Pod,
    p: &ContainerParams,
    fr: &ObjectFieldSelector,
) -> Result<String, String> {
    if let Some(v) = fr.api_version.as_deref() {
        if !v.is_empty() && v != "v1" {
            return Err(format!("fieldRef: unsupported pod version {v:?}"));
        }
    }
    let path = fr.field_path.as_str();
    let s = spec(pod);
    let pod_ip = p.pod_ips.first().map(String::as_str).unwrap_or(p.pod_ip);
    let pod_ips = if p.pod_ips.is_empty() {
        if p.pod_ip.is_empty() {
            String::new()
        } else {
            p.pod_ip.to_string()
        }
    } else {
        p.pod_ips.join(",")
    };
    if let Some(s) = path.strip_suffix("']") {
        if let Some((base, key)) = s.split_once("['") {
            return match base {
                "metadata.labels" => Ok(pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|m| m.get(key))
                    .cloned()
                    .unwrap_or_default()),
                "metadata.annotations" => Ok(pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|m| m.get(key))
                    .cloned()
                    .unwrap_or_default()),
                _ => Err(format!(
                    "fieldRef: field label does not support subscript: {path:?}"
                )),
            };
        }
    }
    Ok(match path {
        "metadata.name" => pod_name(pod).into(),
        "metadata.namespace" => pod_namespace(pod).into(),
        "metadata.uid" => pod_uid(pod).into(),
        "metadata.labels" => format_map(pod.metadata.labels.as_ref()),
        "metadata.annotations" => format_map(pod.metadata.annotations.as_ref()),
        "spec.nodeName" | "spec.host" => s.node_name.clone().unwrap_or_default(),
        "spec.serviceAccountName" => s.service_account_name.clone().unwrap_or_default(),
        "status.hostIP" => p.host_ips.first().cloned().unwrap_or_default(),
        "status.hostIPs" => p.host_ips.join(","),
        "status.podIP" => pod_ip.into(),
        "status.podIPs" => pod_ips,
        other => return Err(format!("fieldRef: unsupported fieldPath {other:?}")),
    })
}

pub(super) fn quantity_of<'c>(
    c: &'c Container,
    kind: &str,
    resource: &str,
) -> Option<&'c Quantity> {
    let r = c.resources.as_ref()?;
    let m = if kind == "limits" {
        r.limits.as_ref()?
    } else {
        r.requests.as_ref()?
    };
    m.get(resource)
}

/// A request, falling back to the limit as API defaulting does.
fn request_of<'c>(c: &'c Container, resource: &str) -> Option<&'c Quantity> {
    quantity_of(c, "requests", resource).or_else(|| quantity_of(c, "limits", resource))
}

/// The node's allocatable as the downward API reads it: the default of a
/// container's unset (or zero) `limits.cpu`, `limits.memory` and
/// `limits.ephemeral-storage` (kubelet's `defaultPodLimitsForDownwardAPI`).
/// CPU in millicores, the others in bytes; `None` is a resource the node
/// does not report (kubelet then leaves the limit unset, which reads as 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeAllocatable {
    pub cpu_millis: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub ephemeral_storage_bytes: Option<u64>,
}

/// The limit a container's unset `limits.<resource>` defaults to: the
/// pod-level limit when the pod sets one (cpu and memory only, as pod-level
/// resources go), else the node's allocatable, else zero.
fn default_limit(pod: &Pod, resource: &str, alloc: &NodeAllocatable) -> Result<Qty, String> {
    let node = match resource {
        "cpu" => alloc.cpu_millis.map(Qty::from_millis),
        "memory" => alloc.memory_bytes.map(Qty::from_value),
        _ => alloc.ephemeral_storage_bytes.map(Qty::from_value),
    };
    if matches!(resource, "cpu" | "memory") && node.is_some() {
        let pod_limit = spec(pod)
            .resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get(resource));
        if let Some(q) = pod_limit {
            let q = parse_resource(&q.0)
                .ok_or_else(|| format!("resourceFieldRef: invalid quantity {:?}", q.0))?;
            if !q.is_zero() {
                return Ok(q);
            }
        }
    }
    Ok(node.unwrap_or_else(|| Qty::from_value(0)))
}

/// kubelet's `containerResourceRuntimeValue` with `defaultPodLimitsForDownwardAPI`:
/// unset (or zero) limits default to the pod-level limit or node
/// allocatable; values are rounded up to whole divisors (`1m` for CPU
/// millicores, `1Mi` for mebibytes).
pub(super) fn resource_field_value(
    pod: &Pod,
    c: &Container,
    p: &ContainerParams,
    rf: &ResourceFieldSelector,
) -> Result<String, String> {
    let target = match rf.container_name.as_deref().filter(|n| !n.is_empty()) {
        None => c,
        Some(name) => accessors::all_containers(pod)
            .map(|(c, _)| c)
            .find(|x| x.name == name)
            .ok_or_else(|| format!("resourceFieldRef: container {name:?} not found in the pod"))?,
    };
    let divisor = match rf.divisor.as_ref() {
        None => Qty::from_value(1),
        Some(d) => {
            let q = parse_resource(&d.0)
                .ok_or_else(|| format!("resourceFieldRef: invalid divisor {:?}", d.0))?;
            if q.is_zero() {
                Qty::from_value(1)
            } else {
                q
            }
        }
    };
    let parse = |q: &Quantity| {
        parse_resource(&q.0).ok_or_else(|| format!("resourceFieldRef: invalid quantity {:?}", q.0))
    };
    let (kind, resource) = rf
        .resource
        .split_once('.')
        .ok_or_else(|| format!("resourceFieldRef: unsupported resource {:?}", rf.resource))?;
    let value = match (kind, resource) {
        ("limits", "cpu" | "memory" | "ephemeral-storage") => {
            let set = match quantity_of(target, "limits", resource) {
                Some(q) => Some(parse(q)?).filter(|q| !q.is_zero()),
                None => None,
            };
            match set {
                Some(q) => q,
                None => default_limit(pod, resource, &p.node_allocatable)?,
            }
        }
        ("requests", "cpu" | "memory" | "ephemeral-storage") => {
            match request_of(target, resource) {
                Some(q) => parse(q)?,
                None => Qty::from_value(0),
            }
        }
        ("limits" | "requests", r) if r.starts_with("hugepages-") => {
            match quantity_of(target, kind, resource) {
                Some(q) => parse(q)?,
                None => Qty::from_value(0),
            }
        }
        _ => {
            return Err(format!(
                "resourceFieldRef: unsupported resource {:?}",
                rf.resource
            ))
        }
    };
    let n = if resource == "cpu" {
        ceil_div(millis(value), millis(divisor).max(1))
    } else {
        ceil_div(units(value), units(divisor).max(1))
    };
    Ok(n.to_string())
}

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}
