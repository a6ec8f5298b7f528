//! The value grammars of the configuration: one validator per kind of
//! field, `fn(&Value) -> Result<T, String>`, turning a JSON value (from the
//! file, or made from a flag) into what the field holds, or into a message
//! that the caller prefixes with the file or flag and the field. Also the
//! config's own rules on top of the crate's quantity grammar (no
//! fractions of a byte).
//!
//! Pure.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use serde_json::Value;

use super::fields::{
    AuthorizationMode, CgroupDriver, EnforceNodeAllocatable, EvictionThreshold, ReservedResources,
    SwapBehavior, EVICTION_SIGNALS, MAX_VERBOSITY,
};
use super::{board, duration};
use crate::names::is_dns1123_subdomain;
use crate::quantity::Quantity;

/// Lowercases and checks a node name (a DNS-1123 subdomain, the API
/// server's rule for Node names), as kubelet does for
/// `--hostname-override` and the machine hostname.
pub fn normalize_node_name(raw: &str) -> Option<String> {
    let name = raw.trim().to_ascii_lowercase();
    is_dns1123_subdomain(&name).then_some(name)
}

// ---------------------------------------------------------------------------
// Validators: `fn(&Value) -> Result<T, String>`
// ---------------------------------------------------------------------------

/// How a value looks in an error message: strings quoted, others as JSON.
pub(super) fn show(v: &Value) -> String {
    match v {
        Value::Object(_) => "a mapping".to_string(),
        Value::Array(_) => "a list".to_string(),
        other => other.to_string(),
    }
}

fn string(v: &Value) -> Result<&str, String> {
    v.as_str()
        .ok_or_else(|| format!("expected a string, got {}", show(v)))
}

pub(super) fn boolean(v: &Value) -> Result<bool, String> {
    v.as_bool()
        .ok_or_else(|| format!("expected true or false, got {}", show(v)))
}

fn integer(v: &Value, min: i64, max: i64, what: &str) -> Result<i64, String> {
    match v.as_i64() {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected {what}, got {}", show(v))),
    }
}

pub(super) fn positive_u32(v: &Value) -> Result<u32, String> {
    integer(v, 1, i64::from(i32::MAX), "a positive integer").map(|n| n as u32)
}

pub(super) fn non_negative_u32(v: &Value) -> Result<u32, String> {
    integer(v, 0, i64::from(i32::MAX), "a non-negative integer").map(|n| n as u32)
}

pub(super) fn log_files(v: &Value) -> Result<u32, String> {
    integer(v, 2, i64::from(i32::MAX), "an integer >= 2").map(|n| n as u32)
}

pub(super) fn pids_limit(v: &Value) -> Result<i64, String> {
    integer(v, -1, i64::MAX, "-1 (unlimited) or a positive integer")
}

pub(super) fn max_images(v: &Value) -> Result<i32, String> {
    integer(
        v,
        -1,
        i64::from(i32::MAX),
        "-1 (every image) or a non-negative integer",
    )
    .map(|n| n as i32)
}

pub(super) fn percent(v: &Value) -> Result<u8, String> {
    integer(v, 0, 100, "a percentage between 0 and 100").map(|n| n as u8)
}

pub(super) fn verbosity(v: &Value) -> Result<u8, String> {
    integer(
        v,
        0,
        i64::from(MAX_VERBOSITY),
        "a log level between 0 and 10",
    )
    .map(|n| n as u8)
}

/// A Go duration, zero allowed (`imageMinimumGCAge: 0s`).
pub(super) fn non_negative_duration(v: &Value) -> Result<Duration, String> {
    let s = v.as_str().ok_or_else(|| {
        format!(
            "expected a duration string such as \"1m30s\", got {}",
            show(v)
        )
    })?;
    duration::parse(s).map_err(|e| e.to_string())
}

pub(super) fn positive_duration(v: &Value) -> Result<Duration, String> {
    let s = v.as_str().ok_or_else(|| {
        format!(
            "expected a duration string such as \"1m30s\", got {}",
            show(v)
        )
    })?;
    let d = duration::parse(s).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err(format!("expected a duration greater than zero, got {s:?}"));
    }
    Ok(d)
}

fn absolute(s: &str, what: &str) -> Result<PathBuf, String> {
    if s.starts_with('/') {
        Ok(PathBuf::from(s))
    } else {
        Err(format!("expected {what}, got {s:?}"))
    }
}

pub(super) fn absolute_path(v: &Value) -> Result<PathBuf, String> {
    absolute(string(v)?, "an absolute path")
}

pub(super) fn static_pod_path(v: &Value) -> Result<Option<PathBuf>, String> {
    let s = string(v)?;
    Ok((!s.is_empty()).then(|| PathBuf::from(s)))
}

pub(super) fn cgroup_root(v: &Value) -> Result<String, String> {
    let s = string(v)?;
    absolute(s, "an absolute cgroup path such as \"/\"")?;
    Ok(s.to_string())
}

pub(super) fn runtime_endpoint(v: &Value) -> Result<String, String> {
    let s = string(v)?;
    parse_runtime_endpoint(s)?;
    Ok(s.to_string())
}

pub(super) fn parse_runtime_endpoint(s: &str) -> Result<PathBuf, String> {
    let path = if let Some(rest) = s.strip_prefix("unix://") {
        rest
    } else if s.contains("://") {
        return Err(format!(
            "only unix sockets are supported (unix:///path or /path), got {s:?}"
        ));
    } else {
        s
    };
    absolute(path, "").map_err(|_| {
        format!("expected unix:///absolute/path or an absolute socket path, got {s:?}")
    })
}

pub(super) fn cgroup_driver(v: &Value) -> Result<CgroupDriver, String> {
    match string(v)? {
        "cgroupfs" => Ok(CgroupDriver::Cgroupfs),
        "systemd" => {
            Err("the systemd cgroup driver is not supported yet; use \"cgroupfs\"".to_string())
        }
        other => Err(format!("expected \"cgroupfs\", got {other:?}")),
    }
}

pub(super) fn ip_list(v: &Value) -> Result<Vec<IpAddr>, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("expected a list of IP addresses, got {}", show(v)))?;
    items
        .iter()
        .map(|item| {
            let s = item
                .as_str()
                .ok_or_else(|| format!("expected an IP address, got {}", show(item)))?;
            s.trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("expected an IP address, got {s:?}"))
        })
        .collect()
}

pub(super) fn dns_domain(v: &Value) -> Result<String, String> {
    let s = string(v)?;
    if !s.is_empty() && !is_dns1123_subdomain(s.trim_end_matches('.')) {
        return Err(format!(
            "expected a DNS domain such as \"cluster.local\", got {s:?}"
        ));
    }
    Ok(s.to_string())
}

pub(super) fn hostname_override(v: &Value) -> Result<Option<String>, String> {
    let s = string(v)?;
    normalize_node_name(s)
        .map(Some)
        .ok_or_else(|| format!("expected a valid node name (a DNS subdomain), got {s:?}"))
}

pub(super) fn board_name(v: &Value) -> Result<Option<String>, String> {
    let s = string(v)?;
    board::profile(s).ok_or_else(|| board::unknown(s))?;
    Ok(Some(s.to_string()))
}

pub(super) fn read_only_port(v: &Value) -> Result<(), String> {
    if integer(v, 0, 65535, "a port number")? != 0 {
        return Err("picolet never opens a read-only port; set it to 0 or remove it".to_string());
    }
    Ok(())
}

pub(super) fn anonymous_authentication(v: &Value) -> Result<(), String> {
    if boolean(v)? {
        return Err(
            "anonymous authentication is not supported: picolet never serves anonymous \
             requests; set it to false or remove it"
                .to_string(),
        );
    }
    Ok(())
}

/// A quantity's text: a string, or a bare number (`memory: 100`), which
/// Kubernetes' Quantity also accepts.
fn quantity_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

pub(super) fn log_size(v: &Value) -> Result<u64, String> {
    let s = quantity_text(v)
        .ok_or_else(|| format!("expected a size such as \"10Mi\", got {}", show(v)))?;
    let bytes = parse_quantity_bytes(&s).map_err(|e| e.to_string())?;
    if bytes == 0 {
        return Err(format!(
            "expected a positive size such as \"10Mi\", got {s:?}"
        ));
    }
    Ok(bytes)
}

/// `evictionSoftGracePeriod`: signal -> Go duration (zero allowed).
pub(super) fn eviction_grace_map(v: &Value) -> Result<BTreeMap<String, Duration>, String> {
    let map = v.as_object().ok_or_else(|| {
        format!(
            "expected a mapping of signal to grace period, got {}",
            show(v)
        )
    })?;
    let mut out = BTreeMap::new();
    for (signal, value) in map {
        if !EVICTION_SIGNALS.contains(&signal.as_str()) {
            return Err(format!(
                "unknown eviction signal {signal:?}; expected one of {}",
                EVICTION_SIGNALS.join(", ")
            ));
        }
        let d = non_negative_duration(value).map_err(|e| format!("signal {signal:?}: {e}"))?;
        out.insert(signal.clone(), d);
    }
    Ok(out)
}

/// A grace period in seconds (`evictionMaxPodGracePeriod`): an int32.
pub(super) fn grace_seconds(v: &Value) -> Result<i64, String> {
    integer(
        v,
        i64::from(i32::MIN),
        i64::from(i32::MAX),
        "a number of seconds",
    )
}

pub(super) fn eviction_map(v: &Value) -> Result<BTreeMap<String, EvictionThreshold>, String> {
    let map = v
        .as_object()
        .ok_or_else(|| format!("expected a mapping of signal to threshold, got {}", show(v)))?;
    let mut out = BTreeMap::new();
    for (signal, value) in map {
        if !EVICTION_SIGNALS.contains(&signal.as_str()) {
            return Err(format!(
                "unknown eviction signal {signal:?}; expected one of {}",
                EVICTION_SIGNALS.join(", ")
            ));
        }
        let s = quantity_text(value).ok_or_else(|| {
            format!(
                "signal {signal:?}: expected a quantity or percentage, got {}",
                show(value)
            )
        })?;
        let threshold =
            parse_eviction_threshold(&s).map_err(|e| format!("signal {signal:?}: {e}"))?;
        out.insert(signal.clone(), threshold);
    }
    Ok(out)
}

/// Parses an eviction threshold value: `"10%"` or a quantity (`"100Mi"`).
fn parse_eviction_threshold(s: &str) -> Result<EvictionThreshold, String> {
    let s = s.trim();
    if let Some(pct) = s.strip_suffix('%') {
        return match pct.trim().parse::<f64>() {
            Ok(p) if (0.0..=100.0).contains(&p) => Ok(EvictionThreshold::Percentage(p)),
            _ => Err(format!(
                "expected a percentage between 0% and 100%, got {s:?}"
            )),
        };
    }
    parse_quantity_bytes(s)
        .map(EvictionThreshold::Quantity)
        .map_err(|e| format!("expected a quantity (\"100Mi\") or a percentage (\"10%\"): {e}"))
}

/// `enforceNodeAllocatable`: a list of kubelet's enforcement keys; `none`
/// stands alone.
pub(super) fn enforce_node_allocatable(v: &Value) -> Result<EnforceNodeAllocatable, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("expected a list such as [\"pods\"], got {}", show(v)))?;
    let mut out = EnforceNodeAllocatable {
        pods: false,
        system_reserved: false,
        kube_reserved: false,
    };
    let mut none = false;
    for item in items {
        match string(item)? {
            "pods" => out.pods = true,
            "system-reserved" | "system-reserved-compressible" => out.system_reserved = true,
            "kube-reserved" | "kube-reserved-compressible" => out.kube_reserved = true,
            "none" => none = true,
            other => {
                return Err(format!(
                    "unknown enforcement {other:?}; expected pods, system-reserved, \
                     system-reserved-compressible, kube-reserved, kube-reserved-compressible \
                     or none"
                ))
            }
        }
    }
    if none && items.len() > 1 {
        return Err("may not contain additional enforcements when \"none\" is specified".into());
    }
    Ok(out)
}

/// `systemReservedCgroup` / `kubeReservedCgroup`: empty, or an absolute
/// cgroup path.
pub(super) fn reserved_cgroup(v: &Value) -> Result<String, String> {
    let s = string(v)?;
    if !s.is_empty() {
        absolute(s, "an absolute cgroup path such as \"/system.slice\"")?;
    }
    Ok(s.to_string())
}

pub(super) fn reserved(v: &Value) -> Result<ReservedResources, String> {
    let map = v.as_object().ok_or_else(|| {
        format!(
            "expected a mapping of resource to quantity, got {}",
            show(v)
        )
    })?;
    let mut out = ReservedResources::default();
    for (resource, value) in map {
        let s = quantity_text(value)
            .ok_or_else(|| format!("{resource}: expected a quantity, got {}", show(value)))?;
        let bytes = || parse_quantity_bytes(&s).map_err(|e| format!("{resource}: {e}"));
        match resource.as_str() {
            "cpu" => {
                out.cpu_millis = Some(parse_quantity_millis(&s).map_err(|e| format!("cpu: {e}"))?)
            }
            "memory" => out.memory_bytes = Some(bytes()?),
            "ephemeral-storage" => out.ephemeral_storage_bytes = Some(bytes()?),
            "pid" => out.pids = Some(bytes()?),
            other => {
                return Err(format!(
                "cannot reserve {other:?}; picolet supports cpu, memory, ephemeral-storage and pid"
            ))
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Quantities: the config's rules on top of the crate's one parser
// ---------------------------------------------------------------------------

/// A string that is not a valid (or not an acceptable) Kubernetes quantity.
/// `reason` is a [`crate::quantity::QuantityError`]'s message, or a rule of
/// the config's own (no sub-unit suffixes on byte sizes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {input:?}: {reason}")]
struct QuantityError {
    input: String,
    reason: String,
}

impl QuantityError {
    fn new(input: &str, reason: impl ToString) -> QuantityError {
        QuantityError {
            input: input.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// Parses with the crate's one quantity parser ([`crate::quantity`]) and
/// names the input in the error.
fn parse_quantity(input: &str) -> Result<Quantity, QuantityError> {
    Quantity::parse(input).map_err(|e| QuantityError::new(input, e))
}

/// Parses a Kubernetes quantity as a byte count (or any whole count):
/// `"10Mi"` = 10485760, `"1k"` = 1000, `"1.5Ki"` = 1536, `"1e3"` = 1000,
/// `"123"` = 123. Fractions of a byte round up, as `Quantity.Value()` does.
/// Negative values are rejected, and so are the sub-unit suffixes `m`, `u`
/// and `n`: `"100m"` is a hundred *milli*bytes, almost certainly a typo for
/// `100M` or `100Mi`. That rule is the config's, not the grammar's: pods may
/// say `"100m"` of memory and get 1 byte, as in Kubernetes.
fn parse_quantity_bytes(input: &str) -> Result<u64, QuantityError> {
    let q = parse_quantity(input)?;
    if let Some(suffix) = q.sub_unit_suffix() {
        let hint = if suffix == "m" {
            "; did you mean \"M\" (10^6) or \"Mi\" (2^20)?"
        } else {
            ""
        };
        return Err(QuantityError::new(
            input,
            format!(
                "suffix {suffix:?} means a fraction of a unit, which makes no sense here{hint}"
            ),
        ));
    }
    q.value().map_err(|e| QuantityError::new(input, e))
}

/// Parses a Kubernetes quantity in thousandths, as `Quantity.MilliValue()`:
/// for CPU, millicores. `"100m"` = 100, `"0.5"` = 500, `"2"` = 2000,
/// `"1Ki"` = 1024000. Rounds up; negative values are rejected.
fn parse_quantity_millis(input: &str) -> Result<u64, QuantityError> {
    parse_quantity(input)?
        .milli_value()
        .map_err(|e| QuantityError::new(input, e))
}

pub(super) fn optional_path(v: &Value) -> Result<Option<PathBuf>, String> {
    let s = string(v)?;
    Ok((!s.is_empty()).then(|| PathBuf::from(s)))
}

/// A port, or 0 for "do not listen".
pub(super) fn port_or_zero(v: &Value) -> Result<u16, String> {
    integer(v, 0, 65535, "a port number between 0 (disabled) and 65535").map(|n| n as u16)
}

/// One IP address (`address`, `healthzBindAddress`).
pub(super) fn ip_address(v: &Value) -> Result<IpAddr, String> {
    let s = string(v)?;
    s.parse()
        .map_err(|_| format!("expected an IP address, got {s:?}"))
}

/// `authorization.mode`: `Webhook` or `AlwaysAllow`.
pub(super) fn authorization_mode(v: &Value) -> Result<AuthorizationMode, String> {
    match string(v)? {
        "Webhook" => Ok(AuthorizationMode::Webhook),
        "AlwaysAllow" => Ok(AuthorizationMode::AlwaysAllow),
        other => Err(format!("expected Webhook or AlwaysAllow, got {other:?}")),
    }
}

/// `--node-ip`: one address, or two of different families (dual stack).
pub(super) fn node_ips(v: &Value) -> Result<Vec<IpAddr>, String> {
    let ips = ip_list(v)?;
    let bad = ips
        .iter()
        .find(|ip| ip.is_unspecified() || ip.is_multicast());
    if let Some(ip) = bad {
        return Err(format!("expected a unicast node address, got {ip}"));
    }
    match ips.as_slice() {
        [] | [_] => Ok(ips),
        [a, b] if a.is_ipv4() != b.is_ipv4() => Ok(ips),
        _ => Err("expected one address, or one IPv4 and one IPv6 address".to_string()),
    }
}

/// `--node-labels k=v,...` (the flag) or a map (were it ever in a file):
/// keys are qualified names, values label values.
pub(super) fn node_labels(v: &Value) -> Result<BTreeMap<String, String>, String> {
    let pair = |s: &str| {
        s.split_once('=')
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .ok_or_else(|| format!("expected key=value, got {s:?}"))
    };
    let pairs: Vec<(String, String)> = match v {
        Value::Array(items) => items
            .iter()
            .map(|item| pair(string(item)?))
            .collect::<Result<_, String>>()?,
        Value::String(s) => s
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(pair)
            .collect::<Result<_, String>>()?,
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| Ok((k.clone(), string(v)?.to_string())))
            .collect::<Result<_, String>>()?,
        other => return Err(format!("expected key=value pairs, got {}", show(other))),
    };
    let mut labels = BTreeMap::new();
    for (k, v) in pairs {
        crate::names::check_qualified_name(&k).map_err(|e| format!("label key {k:?}: {e}"))?;
        crate::names::check_label_value(&v).map_err(|e| format!("label {k:?} value {v:?}: {e}"))?;
        labels.insert(k, v);
    }
    Ok(labels)
}

/// `allowedUnsafeSysctls`: sysctl names or `prefix*` patterns, each known
/// to be namespaced (kubelet refuses to start otherwise).
pub(super) fn sysctl_patterns(v: &Value) -> Result<Vec<String>, String> {
    let Value::Array(items) = v else {
        return Err(format!("expected a list of sysctls, got {}", show(v)));
    };
    let list = items
        .iter()
        .map(|item| string(item).map(str::to_string))
        .collect::<Result<Vec<_>, String>>()?;
    crate::pod::sysctls::Allowlist::new(None, &list)?;
    Ok(list)
}

/// `registerWithTaints` (a list of Taint objects in the file) or
/// `--register-with-taints key=value:Effect,...` (strings from the flag).
pub(super) fn taints(v: &Value) -> Result<Vec<Taint>, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("expected a list of taints, got {}", show(v)))?;
    items
        .iter()
        .map(|item| {
            let taint = match item {
                Value::String(s) => {
                    let (kv, effect) = s.rsplit_once(':').ok_or_else(|| {
                        format!("expected key[=value]:Effect, got {s:?}")
                    })?;
                    let (key, value) = match kv.split_once('=') {
                        Some((k, v)) => (k, Some(v.to_string())),
                        None => (kv, None),
                    };
                    Taint {
                        key: key.to_string(),
                        value,
                        effect: effect.to_string(),
                        time_added: None,
                    }
                }
                Value::Object(_) => serde_json::from_value::<Taint>(item.clone())
                    .map_err(|e| format!("expected a taint {{key, value, effect}}: {e}"))?,
                other => return Err(format!("expected a taint, got {}", show(other))),
            };
            crate::names::check_qualified_name(&taint.key)
                .map_err(|e| format!("taint key {:?}: {e}", taint.key))?;
            if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&taint.effect.as_str()) {
                return Err(format!(
                    "taint {:?}: effect must be NoSchedule, PreferNoSchedule or NoExecute, got {:?}",
                    taint.key, taint.effect
                ));
            }
            Ok(taint)
        })
        .collect()
}

/// `memorySwap.swapBehavior`: `NoSwap` (or empty) or `LimitedSwap`.
pub(super) fn swap_behavior(v: &Value) -> Result<SwapBehavior, String> {
    match string(v)? {
        "" | "NoSwap" => Ok(SwapBehavior::NoSwap),
        "LimitedSwap" => Ok(SwapBehavior::LimitedSwap),
        other => Err(format!("expected NoSwap or LimitedSwap, got {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_are_trimmed_lowercased_and_validated() {
        assert_eq!(
            normalize_node_name(" Edge-01.Local\n").as_deref(),
            Some("edge-01.local")
        );
        assert_eq!(normalize_node_name(""), None);
        assert_eq!(normalize_node_name("-a"), None);
        assert_eq!(normalize_node_name("a..b"), None);
        assert_eq!(normalize_node_name("under_score"), None);
    }

    #[test]
    fn quantities_parse_to_bytes() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("123", 123),
            ("+5", 5),
            ("1Ki", 1024),
            ("10Mi", 10 * 1024 * 1024),
            ("1Gi", 1 << 30),
            ("2Ti", 2 << 40),
            ("1Pi", 1 << 50),
            ("1Ei", 1 << 60),
            ("1k", 1_000),
            ("1M", 1_000_000),
            ("1G", 1_000_000_000),
            ("1T", 1_000_000_000_000),
            ("1P", 1_000_000_000_000_000),
            ("1E", 1_000_000_000_000_000_000),
            ("1.5Ki", 1536),
            ("0.5Gi", 1 << 29),
            ("1e3", 1000),
            ("1E3", 1000),
            ("1.5e3", 1500),
            ("0.5", 1),
            ("1e-3", 1),
            ("007", 7),
            (".5k", 500),
            ("-0", 0),
            ("18446744073709551615", u64::MAX),
        ];
        for (input, want) in cases {
            assert_eq!(parse_quantity_bytes(input), Ok(*want), "{input}");
        }
    }

    #[test]
    fn quantities_parse_to_millis() {
        let cases: &[(&str, u64)] = &[
            ("100m", 100),
            ("0.5", 500),
            ("2", 2_000),
            ("1500m", 1_500),
            ("1u", 1),
            ("1000000n", 1),
            ("1Ki", 1_024_000),
            ("1k", 1_000_000),
            ("0.0001", 1),
        ];
        for (input, want) in cases {
            assert_eq!(parse_quantity_millis(input), Ok(*want), "{input}");
        }
    }

    #[test]
    fn malformed_or_unacceptable_quantities_are_rejected() {
        for (input, reason) in [
            ("", "empty"),
            ("Mi", "expected a number"),
            ("1..2", "expected a number"),
            ("1.2.3", "expected a number"),
            ("1K", "unknown suffix"),
            ("1mi", "unknown suffix"),
            ("1 Mi", "unknown suffix"),
            ("1e", "unknown suffix"),
            ("1e3.5", "unknown suffix"),
            ("-1", "negative"),
            ("-5Mi", "negative"),
            ("100m", "did you mean"),
            ("5n", "fraction of a unit"),
            ("16Ei", "too large"),
            ("18446744073709551616", "too large"),
            ("1e99999", "unknown suffix"),
        ] {
            let err = parse_quantity_bytes(input).expect_err(input);
            assert!(err.reason.contains(reason), "{input}: {err}");
        }
        assert!(parse_quantity_millis("20000000000000000")
            .unwrap_err()
            .reason
            .contains("too large"));
        assert!(parse_quantity_millis("-100m")
            .unwrap_err()
            .reason
            .contains("negative"));
    }

    #[test]
    fn eviction_thresholds_parse_as_quantity_or_percentage() {
        assert_eq!(
            parse_eviction_threshold("100Mi"),
            Ok(EvictionThreshold::Quantity(100 << 20))
        );
        assert_eq!(
            parse_eviction_threshold("10%"),
            Ok(EvictionThreshold::Percentage(10.0))
        );
        assert_eq!(
            parse_eviction_threshold("0%"),
            Ok(EvictionThreshold::Percentage(0.0))
        );
        assert!(parse_eviction_threshold("x%").is_err());
        assert!(parse_eviction_threshold("-1%").is_err());
        assert_eq!(EvictionThreshold::Percentage(7.5).to_string(), "7.5%");
        assert_eq!(EvictionThreshold::Quantity(42).to_string(), "42");
    }

    #[test]
    fn node_labels_come_as_key_value_pairs_or_a_mapping_and_bad_keys_are_named() {
        let got = node_labels(&Value::from("zone=shed, example.com/tier=edge")).unwrap();
        assert_eq!(got["zone"], "shed");
        assert_eq!(got["example.com/tier"], "edge");
        let got = node_labels(&serde_json::json!({"a": "b"})).unwrap();
        assert_eq!(got["a"], "b");
        assert!(node_labels(&Value::from("novalue"))
            .unwrap_err()
            .contains("key=value"));
        assert!(node_labels(&Value::from("-bad=x"))
            .unwrap_err()
            .contains("\"-bad\""));
        assert!(node_labels(&Value::from("k=has space")).is_err());
    }

    #[test]
    fn swap_behavior_is_no_swap_or_limited_swap() {
        assert_eq!(
            swap_behavior(&Value::from("")).unwrap(),
            SwapBehavior::NoSwap
        );
        assert_eq!(
            swap_behavior(&Value::from("LimitedSwap")).unwrap(),
            SwapBehavior::LimitedSwap
        );
        assert!(swap_behavior(&Value::from("UnlimitedSwap"))
            .unwrap_err()
            .contains("LimitedSwap"));
    }
}
