//! Resource requirements (`ValidateContainerResourceRequirements`): names,
//! quantities (parsed by [`crate::quantity`]), requests against limits, and
//! the pod-level `spec.resources`. See [`super`] for the contract.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::meta::qualified_name_errors;
use super::{BadValue, Errors, Path, IS_NEGATIVE};
use crate::quantity::Quantity as Qty;

// ---------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------

/// Go's `ErrFormatWrong`: what the API server says of a malformed quantity.
pub(super) const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// `IsStandardResourceName`'s single-word names.
const STANDARD_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

fn is_huge_pages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// `IsNativeResource`: unprefixed, or in the `kubernetes.io/` domain.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `IsExtendedResourceName`: a prefixed name outside `kubernetes.io/`.
fn is_extended(name: &str) -> bool {
    !is_native(name)
        && !name.starts_with("requests.")
        && qualified_name_errors(&format!("requests.{name}")).is_empty()
}

/// `validateContainerResourceName`.
fn validate_container_resource_name(name: &str, path: &Path, v: &mut Errors) {
    let bare = || BadValue::Bare(name.to_string());
    let errs = qualified_name_errors(name);
    let had_errors = !errs.is_empty();
    for msg in errs {
        v.invalid(path, bare(), msg);
    }
    let single = !name.contains('/');
    if !had_errors && single && !STANDARD_RESOURCES.contains(&name) && !is_huge_pages(name) {
        v.invalid(
            path,
            bare(),
            "must be a standard resource type or fully qualified",
        );
    }
    if single {
        if !matches!(name, "cpu" | "memory" | "ephemeral-storage") && !is_huge_pages(name) {
            v.invalid(path, bare(), "must be a standard resource for containers");
        }
    } else if !is_native(name) && !is_extended(name) {
        v.invalid(
            path,
            bare(),
            "doesn't follow extended resource name standard",
        );
    }
}

/// A quantity that parsed, is not negative and fits an `i64` of the unit the
/// runtime is given (millicores for cpu, bytes or counts otherwise).
fn validate_quantity(name: &str, q: &Quantity, path: &Path, v: &mut Errors) -> Option<Qty> {
    let written = q.0.trim();
    let Ok(parsed) = Qty::parse(written) else {
        v.invalid_str(path, written, QUANTITY_FORMAT);
        return None;
    };
    if parsed.is_negative() {
        v.invalid_str(path, written, IS_NEGATIVE);
        return None;
    }
    let (fits, unit) = if name == "cpu" {
        (parsed.milli_value(), "m")
    } else {
        (parsed.value(), "")
    };
    if fits.map_or(true, |n| n > i64::MAX as u64) {
        v.invalid_str(
            path,
            written,
            format!("must be less than or equal to {}{unit}", i64::MAX),
        );
        return None;
    }
    if is_extended(name) && parsed.milli_value().map_or(true, |m| m % 1000 != 0) {
        v.invalid(
            path,
            BadValue::Bare(written.to_string()),
            "must be an integer",
        );
    }
    Some(parsed)
}

/// `a <= b`, exactly enough for resource amounts.
fn not_above(a: &Qty, b: &Qty) -> bool {
    match (a.milli_value(), b.milli_value()) {
        (Ok(x), Ok(y)) => x <= y,
        _ => a.value().unwrap_or(u64::MAX) <= b.value().unwrap_or(u64::MAX),
    }
}

fn same_amount(a: &Qty, b: &Qty) -> bool {
    not_above(a, b) && not_above(b, a)
}

/// `IsOvercommitAllowed`: native resources except huge pages.
fn overcommit_allowed(name: &str) -> bool {
    is_native(name) && !is_huge_pages(name)
}

/// `ValidateContainerResourceRequirements`.
pub(super) fn validate_resources(r: &ResourceRequirements, path: &Path, v: &mut Errors) {
    let empty = BTreeMap::new();
    let limits = r.limits.as_ref().unwrap_or(&empty);
    let requests = r.requests.as_ref().unwrap_or(&empty);
    let (lim_path, req_path) = (path.child("limits"), path.child("requests"));
    let mut parsed_limits = HashMap::new();
    let mut cpu_or_memory = false;
    let mut huge_pages = false;
    for (name, q) in limits {
        let p = lim_path.key(name);
        validate_container_resource_name(name, &p, v);
        if let Some(parsed) = validate_quantity(name, q, &p, v) {
            parsed_limits.insert(name.as_str(), parsed);
        }
        huge_pages |= is_huge_pages(name);
        cpu_or_memory |= matches!(name.as_str(), "cpu" | "memory");
    }
    for (name, q) in requests {
        let p = req_path.key(name);
        validate_container_resource_name(name, &p, v);
        let parsed = validate_quantity(name, q, &p, v);
        match (parsed, parsed_limits.get(name.as_str())) {
            (Some(req), Some(lim)) => {
                let limit = limits[name].0.trim();
                if !overcommit_allowed(name) && !same_amount(&req, lim) {
                    v.invalid_str(
                        &req_path,
                        q.0.trim(),
                        format!("must be equal to {name} limit of {limit}"),
                    );
                } else if !not_above(&req, lim) {
                    v.invalid_str(
                        &req_path,
                        q.0.trim(),
                        format!("must be less than or equal to {name} limit of {limit}"),
                    );
                }
            }
            _ if !limits.contains_key(name) && !overcommit_allowed(name) => {
                v.required(
                    &lim_path,
                    "Limit must be set for non overcommitable resources",
                );
            }
            _ => {}
        }
        huge_pages |= is_huge_pages(name);
        cpu_or_memory |= matches!(name.as_str(), "cpu" | "memory");
    }
    if huge_pages && !cpu_or_memory {
        v.forbidden(path, "HugePages require cpu or memory");
    }
}

/// Pod-level `spec.resources` (`validatePodResources`): cpu and memory only.
pub(super) fn validate_pod_resources(r: &ResourceRequirements, path: &Path, v: &mut Errors) {
    if r.claims.as_ref().is_some_and(|c| !c.is_empty()) {
        v.forbidden(
            &path.child("claims"),
            "claims cannot be set for Resources at pod-level",
        );
    }
    let empty = BTreeMap::new();
    let limits = r.limits.as_ref().unwrap_or(&empty);
    let mut parsed_limits = HashMap::new();
    for (kind, list) in [
        ("limits", limits),
        ("requests", r.requests.as_ref().unwrap_or(&empty)),
    ] {
        for (name, q) in list {
            let p = path.child(kind).key(name);
            if !matches!(name.as_str(), "cpu" | "memory") {
                v.not_supported(&p, name, &["cpu", "memory"]);
                continue;
            }
            let Some(parsed) = validate_quantity(name, q, &p, v) else {
                continue;
            };
            if kind == "limits" {
                parsed_limits.insert(name.as_str(), parsed);
            } else if let Some(lim) = parsed_limits.get(name.as_str()) {
                if !not_above(&parsed, lim) {
                    v.invalid_str(
                        &path.child("requests"),
                        q.0.trim(),
                        format!(
                            "must be less than or equal to {name} limit of {}",
                            limits[name].0.trim()
                        ),
                    );
                }
            }
        }
    }
}
