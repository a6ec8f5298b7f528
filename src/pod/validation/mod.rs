//! Pod validation: the API server's rules (`ValidatePodCreate`) for the
//! fields picolet reads, so a pod the API server would refuse is never
//! started here either.
//!
//! Why: kubelet validates static pods with the API's own rules before it runs
//! them, and picolet must too. Without it `memory: -1Gi`, `cpu: 1e400` or
//! `terminationGracePeriodSeconds: -5` reach the runtime, and the pod loops
//! forever on `writing "9223372036854775807" to .../cpu.cfs_quota_us:
//! Invalid argument`. Pods from the API server were validated there already;
//! [`validate_pod`] is for them too, as defence in depth.
//!
//! The errors are apimachinery's `field.Error`s, field path and wording
//! included: `spec.containers[0].resources.limits[memory]: Invalid value:
//! "-1Gi": must be greater than or equal to 0`. Map keys are subscripted as
//! the API server does (`limits[memory]`, not `limits.memory`), and the
//! API's quirks are kept where a user would search for the message (a
//! volumeMount's `subPath` error is reported at `volumeMounts.subPath`,
//! without the index, exactly as the API server reports it).
//!
//! Deliberate differences from the API server, each because picolet sees the
//! pod after its own defaulting or runs it itself:
//! - `terminationGracePeriodSeconds` must not be negative (the API server
//!   quietly turns a negative value into 1; a static pod gets no such
//!   mutation, and a negative grace period means nothing to the runtime);
//! - quantities must also fit what the runtime is told: at most
//!   9223372036854775807 (bytes, or millicores for cpu), so `cpu: 1e400` is
//!   refused instead of saturating into the cgroup;
//! - probe fields that Go's defaulting turns from 0 into a default (period,
//!   timeout, thresholds, an httpGet's empty path) are accepted as 0 / empty:
//!   picolet's prober applies the same defaults;
//! - a quantity is shown as written, not in Go's canonical form;
//! - only the volume sources picolet can mount (emptyDir, hostPath,
//!   configMap, secret, downwardAPI, projected) are looked into; the others
//!   are only counted (one source per volume) and the translation refuses
//!   them.
//!
//! Pure: a `&Pod` in, errors out. No I/O, no clock, no logging.
//!
//! What it must NOT know: where the pod came from (callers add the file or
//! the source to the message) or what the node can run.

mod containers;
mod handlers;
mod meta;
mod resources;
mod security;
mod volumes;

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::fmt;

use k8s_openapi::api::core::v1::{Pod, PodDNSConfig, PodSpec, Toleration};

use meta::{
    label_value_errors, qualified_name_errors, validate_dns1123_label, validate_dns1123_subdomain,
    validate_labels, validate_metadata,
};
use security::validate_pod_security_context;

/// apimachinery's `IsNegativeErrorMsg`.
const IS_NEGATIVE: &str = "must be greater than or equal to 0";
/// apimachinery's `TotalAnnotationSizeLimitB`: all annotation keys and values
/// of an object together.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// The kind of a [`FieldError`], as apimachinery's `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
}

impl ErrorType {
    /// The words the API server uses for it.
    fn as_str(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
        }
    }
}

/// The offending value, printed the way Go's `%q` / `%v` print it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadValue {
    /// Not printed (Required, Forbidden, TooLong).
    None,
    /// A string, printed quoted: `"-1Gi"`.
    Str(String),
    /// A number: `-5`.
    Int(i64),
    /// A name printed bare, as Go prints types with a `String()` method
    /// (resource names, quantities): `pids`.
    Bare(String),
    /// A whole struct; Go dumps its fields, we print `{...}`.
    Struct,
}

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadValue::None => Ok(()),
            BadValue::Str(s) => f.write_str(&go_quote(s)),
            BadValue::Int(n) => write!(f, "{n}"),
            BadValue::Bare(s) => f.write_str(s),
            BadValue::Struct => f.write_str("{...}"),
        }
    }
}

/// One validation failure: where, what kind, the value and the detail.
/// Displays exactly as the API server's `field.Error`:
/// `spec.restartPolicy: Unsupported value: "Sometimes": supported values:
/// "Always", "OnFailure", "Never"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub kind: ErrorType,
    /// The field path: `spec.containers[0].resources.limits[memory]`.
    pub field: String,
    pub value: BadValue,
    pub detail: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.kind.as_str())?;
        let shows_value = !matches!(
            self.kind,
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong
        );
        if shows_value && self.value != BadValue::None {
            write!(f, ": {}", self.value)?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// All errors as one line, `; `-separated, for a log line.
pub fn summary(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Validates `pod` (already defaulted) with the API server's rules for the
/// fields picolet uses. `Err` holds every problem found, in field order.
pub fn validate_pod(pod: &Pod) -> Result<(), Vec<FieldError>> {
    let mut v = Errors::default();
    validate_metadata(&pod.metadata, &mut v);
    match pod.spec.as_ref() {
        Some(spec) => validate_spec(spec, &Path::new("spec"), &mut v),
        None => v.required(&Path::new("spec"), ""),
    }
    if v.0.is_empty() {
        Ok(())
    } else {
        Err(v.0)
    }
}

/// [`validate_pod`] and the one rule of `ValidatePodCreate` that only a
/// pod's creation checks: `spec.ephemeralContainers` cannot be set then
/// (they are added later through the API's `ephemeralcontainers`
/// subresource). For static pods, which kubelet validates as created, so a
/// manifest with ephemeral containers is refused, not run. Not for pods
/// from the API server, which gain them by update.
pub fn validate_pod_create(pod: &Pod) -> Result<(), Vec<FieldError>> {
    let mut errors = validate_pod(pod).err().unwrap_or_default();
    let ephemeral = pod
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref());
    if ephemeral.is_some_and(|e| !e.is_empty()) {
        let mut v = Errors::default();
        v.forbidden(
            &Path::new("spec").child("ephemeralContainers"),
            "cannot be set on create",
        );
        errors.extend(v.0);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

// ---------------------------------------------------------------------------
// Field paths and the error list
// ---------------------------------------------------------------------------

/// apimachinery's `field.Path`: `.child`, `[index]`, `[key]`.
#[derive(Debug, Clone)]
pub(crate) struct Path(String);

impl Path {
    pub(crate) fn new(root: &str) -> Path {
        Path(root.to_string())
    }
    pub(crate) fn child(&self, name: &str) -> Path {
        Path(format!("{}.{name}", self.0))
    }
    pub(crate) fn index(&self, i: usize) -> Path {
        Path(format!("{}[{i}]", self.0))
    }
    pub(crate) fn key(&self, k: &str) -> Path {
        Path(format!("{}[{k}]", self.0))
    }
}

/// The errors found so far.
#[derive(Default)]
pub(crate) struct Errors(pub(crate) Vec<FieldError>);

impl Errors {
    fn push(&mut self, kind: ErrorType, path: &Path, value: BadValue, detail: impl Into<String>) {
        self.0.push(FieldError {
            kind,
            field: path.0.clone(),
            value,
            detail: detail.into(),
        });
    }
    pub(crate) fn required(&mut self, path: &Path, detail: &str) {
        self.push(ErrorType::Required, path, BadValue::None, detail);
    }
    pub(crate) fn forbidden(&mut self, path: &Path, detail: &str) {
        self.push(ErrorType::Forbidden, path, BadValue::None, detail);
    }
    pub(crate) fn invalid(&mut self, path: &Path, value: BadValue, detail: impl Into<String>) {
        self.push(ErrorType::Invalid, path, value, detail);
    }
    pub(crate) fn invalid_str(&mut self, path: &Path, value: &str, detail: impl Into<String>) {
        self.invalid(path, BadValue::Str(value.to_string()), detail);
    }
    pub(crate) fn invalid_int(&mut self, path: &Path, value: i64, detail: impl Into<String>) {
        self.invalid(path, BadValue::Int(value), detail);
    }
    pub(crate) fn duplicate(&mut self, path: &Path, value: &str) {
        self.push(
            ErrorType::Duplicate,
            path,
            BadValue::Str(value.to_string()),
            "",
        );
    }
    pub(crate) fn not_found(&mut self, path: &Path, value: &str) {
        self.push(
            ErrorType::NotFound,
            path,
            BadValue::Str(value.to_string()),
            "",
        );
    }
    /// `Unsupported value: "x": supported values: "a", "b"`, `supported`
    /// in the order the API server lists them.
    pub(crate) fn not_supported(&mut self, path: &Path, value: &str, supported: &[&str]) {
        let list = supported
            .iter()
            .map(|s| go_quote(s))
            .collect::<Vec<_>>()
            .join(", ");
        self.push(
            ErrorType::NotSupported,
            path,
            BadValue::Str(value.to_string()),
            format!("supported values: {list}"),
        );
    }
    pub(crate) fn too_long(&mut self, path: &Path, max: usize) {
        self.push(
            ErrorType::TooLong,
            path,
            BadValue::None,
            format!("must have at most {max} bytes"),
        );
    }
    /// `value` must be one of `supported` (an empty value is Required).
    pub(crate) fn one_of(&mut self, path: &Path, value: Option<&str>, supported: &[&str]) {
        match value.unwrap_or("") {
            "" => self.required(path, ""),
            v if supported.contains(&v) => {}
            v => self.not_supported(path, v, supported),
        }
    }
    pub(crate) fn non_negative(&mut self, path: &Path, value: Option<i64>) {
        if let Some(n) = value.filter(|n| *n < 0) {
            self.invalid_int(path, n, IS_NEGATIVE);
        }
    }
}

/// Go's `%q`: double-quoted, with `\"`, `\\` and non-printable characters
/// escaped (`\x00`, `\n`, `\u00a0`).
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// ---------------------------------------------------------------------------
// The pod spec
// ---------------------------------------------------------------------------

fn validate_spec(spec: &PodSpec, path: &Path, v: &mut Errors) {
    let grace = spec.termination_grace_period_seconds;
    match grace {
        None => v.required(&path.child("terminationGracePeriodSeconds"), ""),
        Some(g) => v.non_negative(&path.child("terminationGracePeriodSeconds"), Some(g)),
    }
    let host_users = spec.host_users.unwrap_or(true);
    let vols = volumes::validate_volumes(
        spec.volumes.as_deref().unwrap_or(&[]),
        &path.child("volumes"),
        v,
    );
    let ctx = containers::Context {
        volumes: &vols,
        grace,
        host_users,
    };
    containers::validate_containers(&spec.containers, &ctx, &path.child("containers"), v);
    containers::validate_init_containers(
        spec.init_containers.as_deref().unwrap_or(&[]),
        &spec.containers,
        &ctx,
        &path.child("initContainers"),
        v,
    );
    if let Some(resources) = spec.resources.as_ref() {
        resources::validate_pod_resources(resources, &path.child("resources"), v);
    }
    validate_host_network_ports(spec, path, v);
    v.one_of(
        &path.child("restartPolicy"),
        spec.restart_policy.as_deref(),
        &["Always", "OnFailure", "Never"],
    );
    v.one_of(
        &path.child("dnsPolicy"),
        spec.dns_policy.as_deref(),
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
    );
    validate_labels(spec.node_selector.as_ref(), &path.child("nodeSelector"), v);
    if let Some(sc) = spec.security_context.as_ref() {
        validate_pod_security_context(sc, &path.child("securityContext"), v);
    }
    validate_dns_config(
        spec.dns_config.as_ref(),
        spec.dns_policy.as_deref(),
        &path.child("dnsConfig"),
        v,
    );
    for (field, value) in [
        ("serviceAccountName", spec.service_account_name.as_deref()),
        ("nodeName", spec.node_name.as_deref()),
        ("priorityClassName", spec.priority_class_name.as_deref()),
        ("runtimeClassName", spec.runtime_class_name.as_deref()),
    ] {
        if let Some(name) = value.filter(|n| !n.is_empty() || field == "runtimeClassName") {
            validate_dns1123_subdomain(name, &path.child(field), v);
        }
    }
    if let Some(d) = spec.active_deadline_seconds {
        if !(1..=i64::from(i32::MAX)).contains(&d) {
            v.invalid_int(
                &path.child("activeDeadlineSeconds"),
                d,
                format!("must be between 1 and {}, inclusive", i32::MAX),
            );
        }
    }
    for field in ["hostname", "subdomain"] {
        let value = if field == "hostname" {
            spec.hostname.as_deref()
        } else {
            spec.subdomain.as_deref()
        };
        if let Some(name) = value.filter(|n| !n.is_empty()) {
            validate_dns1123_label(name, &path.child(field), v);
        }
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        validate_toleration(t, &path.child("tolerations").index(i), v);
    }
    validate_host_aliases(spec, path, v);
    if let Some(policy) = spec.preemption_policy.as_deref() {
        v.one_of(
            &path.child("preemptionPolicy"),
            Some(policy),
            &["PreemptLowerPriority", "Never"],
        );
    }
    validate_os(spec, path, v);
    containers::check_host_port_conflicts(&spec.containers, &path.child("containers"), v);
}

/// With `hostNetwork`, each container port's `hostPort` must be its
/// `containerPort`.
fn validate_host_network_ports(spec: &PodSpec, path: &Path, v: &mut Errors) {
    if spec.host_network.unwrap_or(false) {
        for (i, c) in spec.containers.iter().enumerate() {
            for (j, p) in c.ports.iter().flatten().enumerate() {
                let host_port = p.host_port.unwrap_or(0);
                if host_port != p.container_port {
                    v.invalid_int(
                        &path
                            .child("containers")
                            .index(i)
                            .child("ports")
                            .index(j)
                            .child("hostPort"),
                        host_port.into(),
                        "must match `containerPort` when `hostNetwork` is true",
                    );
                }
            }
        }
    }
}

/// `hostAliases`: each an IP and DNS-1123 subdomains.
fn validate_host_aliases(spec: &PodSpec, path: &Path, v: &mut Errors) {
    for (i, alias) in spec.host_aliases.iter().flatten().enumerate() {
        let p = path.child("hostAliases").index(i);
        validate_ip(&alias.ip, &p.child("ip"), v);
        for (j, h) in alias.hostnames.iter().flatten().enumerate() {
            validate_dns1123_subdomain(h, &p.child("hostnames").index(j), v);
        }
    }
}

/// `os.name`: `linux` or `windows` when `os` is set.
fn validate_os(spec: &PodSpec, path: &Path, v: &mut Errors) {
    if let Some(os) = spec.os.as_ref() {
        match os.name.as_str() {
            "" => v.required(&path.child("os").child("name"), "cannot be empty"),
            "linux" | "windows" => {}
            other => v.not_supported(&path.child("os"), other, &["linux", "windows"]),
        }
    }
}

/// `IsValidIP`.
fn validate_ip(ip: &str, path: &Path, v: &mut Errors) {
    if ip.parse::<std::net::IpAddr>().is_err() {
        v.invalid_str(
            path,
            ip,
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        );
    }
}

fn validate_toleration(t: &Toleration, path: &Path, v: &mut Errors) {
    let key = t.key.as_deref().unwrap_or("");
    let operator = t.operator.as_deref().unwrap_or("");
    let value = t.value.as_deref().unwrap_or("");
    let effect = t.effect.as_deref().unwrap_or("");
    if !key.is_empty() {
        for msg in qualified_name_errors(key) {
            v.invalid_str(&path.child("key"), key, msg);
        }
    }
    if key.is_empty() && operator != "Exists" {
        v.invalid_str(
            &path.child("operator"),
            operator,
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        );
    }
    if t.toleration_seconds.is_some() && effect != "NoExecute" {
        v.invalid_str(
            &path.child("effect"),
            effect,
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        );
    }
    match operator {
        "Equal" | "" => {
            let errs = label_value_errors(value);
            if !errs.is_empty() {
                v.invalid_str(&path.child("operator"), value, errs.join(";"));
            }
        }
        "Exists" => {
            if !value.is_empty() {
                v.invalid_str(
                    &path.child("operator"),
                    value,
                    "value must be empty when `operator` is 'Exists'",
                );
            }
        }
        other => v.not_supported(&path.child("operator"), other, &["Equal", "Exists"]),
    }
    if !effect.is_empty() && !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        v.not_supported(
            &path.child("effect"),
            effect,
            &["NoSchedule", "PreferNoSchedule", "NoExecute"],
        );
    }
}

fn validate_dns_config(
    config: Option<&PodDNSConfig>,
    policy: Option<&str>,
    path: &Path,
    v: &mut Errors,
) {
    if policy == Some("None") {
        match config {
            None => {
                return v.required(path, "must provide `dnsConfig` when `dnsPolicy` is None");
            }
            Some(c) if c.nameservers.as_deref().unwrap_or(&[]).is_empty() => {
                return v.required(
                    &path.child("nameservers"),
                    "must provide at least one DNS nameserver when `dnsPolicy` is None",
                );
            }
            Some(_) => {}
        }
    }
    let Some(c) = config else {
        return;
    };
    let list = |items: &[String]| {
        let quoted: Vec<String> = items.iter().map(|s| go_quote(s)).collect();
        BadValue::Bare(format!("[]string{{{}}}", quoted.join(", ")))
    };
    let nameservers = c.nameservers.as_deref().unwrap_or(&[]);
    if nameservers.len() > 3 {
        v.invalid(
            &path.child("nameservers"),
            list(nameservers),
            "must not have more than 3 nameservers",
        );
    }
    for (i, ns) in nameservers.iter().enumerate() {
        validate_ip(ns, &path.child("nameservers").index(i), v);
    }
    let searches = c.searches.as_deref().unwrap_or(&[]);
    if searches.len() > 32 {
        v.invalid(
            &path.child("searches"),
            list(searches),
            "must not have more than 32 search paths",
        );
    }
    if searches.join(" ").len() > 2048 {
        v.invalid(
            &path.child("searches"),
            list(searches),
            "must not have more than 2048 characters (including spaces) in the search list",
        );
    }
    for (i, s) in searches.iter().enumerate() {
        if s != "." {
            validate_dns1123_subdomain(
                s.strip_suffix('.').unwrap_or(s),
                &path.child("searches").index(i),
                v,
            );
        }
    }
    for (i, o) in c.options.iter().flatten().enumerate() {
        if o.name.as_deref().unwrap_or("").is_empty() {
            v.required(&path.child("options").index(i), "must not be empty");
        }
    }
}

/// `validateLocalDescendingPath`: relative, and no `..` element.
pub(crate) fn validate_local_descending_path(p: &str, path: &Path, v: &mut Errors) {
    if p.starts_with('/') {
        v.invalid_str(path, p, "must be a relative path");
    }
    validate_no_backsteps(p, path, v);
}

/// `validatePathNoBacksteps`: no `..` element.
pub(crate) fn validate_no_backsteps(p: &str, path: &Path, v: &mut Errors) {
    if p.split('/').any(|part| part == "..") {
        v.invalid_str(path, p, "must not contain '..'");
    }
}

/// Names already seen, for Duplicate errors.
pub(crate) type Seen<'a> = HashSet<&'a str>;
