//! Probes and lifecycle handlers (`validateProbe`, `validateHandler`):
//! exactly one handler each, ports, schemes, header names, and the numeric
//! fields. See [`super`] for the contract.

use k8s_openapi::api::core::v1::{HTTPGetAction, LifecycleHandler, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::containers::validate_port_num_or_name;
use super::{Errors, Path};

// ---------------------------------------------------------------------------
// Probes and lifecycle handlers
// ---------------------------------------------------------------------------

/// `validateProbe`. Zero means "default" for the numeric fields (see the
/// module docs), so only negatives are refused.
pub(super) fn validate_probe(probe: &Probe, p: &Path, v: &mut Errors) {
    let mut handlers = 0;
    let mut one = |field: &str, present: bool, v: &mut Errors| -> bool {
        if !present {
            return false;
        }
        if handlers > 0 {
            v.forbidden(&p.child(field), "may not specify more than 1 handler type");
            return false;
        }
        handlers += 1;
        true
    };
    if one("exec", probe.exec.is_some(), v) {
        validate_exec(
            probe.exec.as_ref().and_then(|e| e.command.as_deref()),
            &p.child("exec"),
            v,
        );
    }
    if one("httpGet", probe.http_get.is_some(), v) {
        validate_http_get(
            probe.http_get.as_ref().expect("checked"),
            &p.child("httpGet"),
            v,
        );
    }
    if one("tcpSocket", probe.tcp_socket.is_some(), v) {
        let tcp = probe.tcp_socket.as_ref().expect("checked");
        validate_port_num_or_name(&tcp.port, &p.child("tcpSocket").child("port"), v);
    }
    if one("grpc", probe.grpc.is_some(), v) {
        let port = probe.grpc.as_ref().expect("checked").port;
        validate_port_num_or_name(&IntOrString::Int(port), &p.child("grpc").child("port"), v);
    }
    if handlers == 0 {
        v.required(p, "must specify a handler type");
    }
    for (field, value) in [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ] {
        v.non_negative(&p.child(field), value.map(i64::from));
    }
    if let Some(g) = probe.termination_grace_period_seconds.filter(|g| *g <= 0) {
        v.invalid_int(
            &p.child("terminationGracePeriodSeconds"),
            g,
            "must be greater than 0",
        );
    }
}

/// Liveness and startup probes: `successThreshold` must be 1 (0 is Go's
/// "unset", which defaults to 1).
pub(super) fn success_must_be_one(probe: &Probe, p: &Path, v: &mut Errors) {
    if let Some(n) = probe.success_threshold.filter(|n| *n != 1 && *n != 0) {
        v.invalid_int(&p.child("successThreshold"), n.into(), "must be 1");
    }
}

/// `validateHandler` for `postStart` / `preStop`.
pub(super) fn validate_lifecycle_handler(
    h: &LifecycleHandler,
    grace: Option<i64>,
    p: &Path,
    v: &mut Errors,
) {
    let present = [
        ("exec", h.exec.is_some()),
        ("httpGet", h.http_get.is_some()),
        ("tcpSocket", h.tcp_socket.is_some()),
        ("sleep", h.sleep.is_some()),
    ];
    let mut handlers = 0;
    for (field, is_set) in present {
        if !is_set {
            continue;
        }
        if handlers > 0 {
            v.forbidden(&p.child(field), "may not specify more than 1 handler type");
            continue;
        }
        handlers += 1;
        match field {
            "exec" => validate_exec(
                h.exec.as_ref().and_then(|e| e.command.as_deref()),
                &p.child("exec"),
                v,
            ),
            "httpGet" => validate_http_get(
                h.http_get.as_ref().expect("checked"),
                &p.child("httpGet"),
                v,
            ),
            "tcpSocket" => {
                let tcp = h.tcp_socket.as_ref().expect("checked");
                validate_port_num_or_name(&tcp.port, &p.child("tcpSocket").child("port"), v);
            }
            _ => {
                let seconds = h.sleep.as_ref().expect("checked").seconds;
                if let Some(g) = grace.filter(|g| seconds < 0 || seconds > *g) {
                    v.invalid_int(
                        &p.child("sleep"),
                        seconds,
                        format!("must be non-negative and less than terminationGracePeriodSeconds ({g})"),
                    );
                }
            }
        }
    }
    if handlers == 0 {
        v.required(p, "must specify a handler type");
    }
}

fn validate_exec(command: Option<&[String]>, p: &Path, v: &mut Errors) {
    if command.unwrap_or(&[]).is_empty() {
        v.required(&p.child("command"), "");
    }
}

fn validate_http_get(h: &HTTPGetAction, p: &Path, v: &mut Errors) {
    validate_port_num_or_name(&h.port, &p.child("port"), v);
    match h.scheme.as_deref().unwrap_or("HTTP") {
        "HTTP" | "HTTPS" => {}
        other => v.not_supported(&p.child("scheme"), other, &["HTTP", "HTTPS"]),
    }
    for header in h.http_headers.iter().flatten() {
        let name = header.name.as_str();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            v.invalid_str(
                &p.child("httpHeaders"),
                name,
                "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')",
            );
        }
    }
}
