//! A pod's derived facts: the rules that turn a pod (plus, at most, one
//! fact about the node) into a value several modules need. Each rule lives
//! here once; the agent, [`crate::status`] and the probes call it.
//!
//! - [`qos`]: the pod's QoS class ([`crate::qos::pod_qos`] of its spec);
//! - [`is_critical`]: kubelet's critical pods (static or system-critical);
//! - [`pod_ips`]: the IPs a pod's containers see and the status reports;
//! - [`grace_period`]: how long a stop may take;
//! - [`log_dir`], [`pod_dir`]: where the pod's logs and files live;
//! - [`probes_differ`]: whether an update of the pod changes its probes.
//!
//! Pure: no I/O, no clock, no logging.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

use super::accessors::{host_network, name, spec, uid};
use super::observed::ObservedSandbox;
use crate::qos::{self, QosClass};

/// kubelet's `SystemCriticalPriority`: pods at or above it are critical.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// A critical pod (kubelet's `IsCriticalPod`): a static pod (any source
/// but the API server), or one whose priority is system-critical. Critical
/// pods never swap.
pub fn is_critical(pod: &Pod) -> bool {
    let source = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(super::labels::CONFIG_SOURCE_ANNOTATION));
    source.is_none_or(|s| s != "api")
        || spec(pod)
            .priority
            .is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY)
}

/// The grace period when neither the pod nor its deletion names one.
pub const DEFAULT_GRACE_PERIOD_SECONDS: i64 = 30;

/// The pod's QoS class (BestEffort for a pod without a spec).
pub fn qos(pod: &Pod) -> QosClass {
    pod.spec
        .as_ref()
        .map(qos::pod_qos)
        .unwrap_or(QosClass::BestEffort)
}

/// The pod's IPs, primary first, as its containers see them and as
/// `status.podIPs` reports them: the node's (`host_ips`, the pod's
/// `status.hostIPs`) for a `hostNetwork` pod (the runtime's answer does not
/// count there), else the sandbox's primary and additional IPs. Empty
/// strings are never IPs.
pub fn pod_ips(pod: &Pod, sandbox: Option<&ObservedSandbox>, host_ips: &[String]) -> Vec<String> {
    pod_ip_strs(pod, sandbox, host_ips)
        .map(str::to_string)
        .collect()
}

/// [`pod_ips`], borrowed: the one rule both it and [`first_pod_ip`] read.
fn pod_ip_strs<'a>(
    pod: &Pod,
    sandbox: Option<&'a ObservedSandbox>,
    host_ips: &'a [String],
) -> impl Iterator<Item = &'a str> {
    let host = host_network(pod);
    let from_host = host_ips.iter().filter(move |_| host);
    // A sandbox without a primary IP has none of its own.
    let from_sandbox = sandbox
        .filter(|s| !host && !s.ip.is_empty())
        .into_iter()
        .flat_map(|s| std::iter::once(&s.ip).chain(&s.additional_ips));
    from_host
        .chain(from_sandbox)
        .map(String::as_str)
        .filter(|ip| !ip.is_empty())
}

/// An event's `involvedObject.fieldPath` for container `name` of `pod`, as
/// kubelet's `GenerateContainerRef` writes it: `spec.initContainers{name}`,
/// `spec.ephemeralContainers{name}` or `spec.containers{name}`.
pub fn container_field_path(pod: &Pod, name: &str) -> String {
    let s = crate::pod::accessors::spec(pod);
    let has = |cs: Option<&Vec<k8s_openapi::api::core::v1::Container>>| {
        cs.is_some_and(|cs| cs.iter().any(|c| c.name == name))
    };
    let list = if has(s.init_containers.as_ref()) {
        "initContainers"
    } else if !s.containers.iter().any(|c| c.name == name)
        && s.ephemeral_containers
            .as_ref()
            .is_some_and(|cs| cs.iter().any(|c| c.name == name))
    {
        "ephemeralContainers"
    } else {
        "containers"
    };
    format!("spec.{list}{{{name}}}")
}

/// The primary pod IP ("" when there is none yet).
pub fn pod_ip(pod: &Pod, sandbox: Option<&ObservedSandbox>, host_ips: &[String]) -> String {
    first_pod_ip(pod, sandbox, host_ips).to_string()
}

/// [`pod_ip`], borrowed: for the probe loops, which ask at every tick.
pub fn first_pod_ip<'a>(
    pod: &Pod,
    sandbox: Option<&'a ObservedSandbox>,
    host_ips: &'a [String],
) -> &'a str {
    pod_ip_strs(pod, sandbox, host_ips).next().unwrap_or("")
}

/// Seconds a stop of the pod's containers may take: the deletion's grace
/// period if the pod is being deleted with one, else
/// `terminationGracePeriodSeconds`, else 30; never negative.
pub fn grace_period(pod: &Pod) -> i64 {
    pod.metadata
        .deletion_grace_period_seconds
        .or(spec(pod).termination_grace_period_seconds)
        .unwrap_or(DEFAULT_GRACE_PERIOD_SECONDS)
        .max(0)
}

/// kubelet's reason and message for a pod past `activeDeadlineSeconds`.
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
pub const DEADLINE_EXCEEDED_MESSAGE: &str =
    "Pod was active on the node longer than the specified deadline";

/// Seconds left before the pod's `activeDeadlineSeconds` passes, counted
/// from its start time (Unix seconds, `status.startTime`); 0 or less once
/// it has passed (kubelet's `pastActiveDeadline`: at the deadline, not
/// after it), `None` without a deadline. The spec is read at every call,
/// so a deadline the API shortened counts at once.
pub fn active_deadline_left(pod: &Pod, start_unix: i64, now_unix: i64) -> Option<i64> {
    let deadline = spec(pod).active_deadline_seconds?;
    Some(start_unix.saturating_add(deadline) - now_unix)
}

/// The pod's log directory under `podLogsDir`:
/// `<namespace>_<name>_<uid>` (kubelet's `BuildPodLogsDirectory`).
pub fn log_dir(pod_logs_dir: &Path, pod: &Pod) -> PathBuf {
    super::spec::log_directory(
        pod_logs_dir,
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        name(pod),
        uid(pod),
    )
}

/// The pod's own directory under the kubelet root dir (`pods/<uid>`):
/// volumes, hosts file, termination logs.
pub fn pod_dir(root_dir: &Path, pod_uid: &str) -> PathBuf {
    root_dir.join("pods").join(pod_uid)
}

/// Whether `new`, an update of `old`, changes any container's probes
/// (startup, readiness, liveness; init containers' too, for sidecars) or
/// the set of containers. Only then do the probe results start over:
/// kubelet keeps a container's readiness across updates of the pod's
/// labels, annotations or anything else, so that a `kubectl label` never
/// takes a pod out of its Service's endpoints.
pub fn probes_differ(old: &Pod, new: &Pod) -> bool {
    fn probes(pod: &Pod) -> Vec<(&str, [Option<&k8s_openapi::api::core::v1::Probe>; 3])> {
        let Some(s) = pod.spec.as_ref() else {
            return Vec::new();
        };
        s.init_containers
            .iter()
            .flatten()
            .chain(&s.containers)
            .map(|c| {
                (
                    c.name.as_str(),
                    [
                        c.startup_probe.as_ref(),
                        c.readiness_probe.as_ref(),
                        c.liveness_probe.as_ref(),
                    ],
                )
            })
            .collect()
    }
    probes(old) != probes(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml_ng::from_str(yaml).expect("test pod parses")
    }

    #[test]
    fn the_primary_pod_ip_is_the_first_of_the_pod_ips_for_every_kind_of_pod() {
        let host = vec![
            String::new(),
            "192.0.2.7".to_string(),
            "2001:db8::7".to_string(),
        ];
        let sandbox = |ip: &str| ObservedSandbox {
            ip: ip.into(),
            additional_ips: vec![String::new(), "fd00::9".into()],
            ..Default::default()
        };
        let on_host = pod("spec:\n  hostNetwork: true\n  containers: [{name: c}]\n");
        let on_pod_net = pod("spec:\n  containers: [{name: c}]\n");
        let cases = [
            (&on_host, None, vec!["192.0.2.7", "2001:db8::7"]),
            (
                &on_host,
                Some(sandbox("10.0.0.5")),
                vec!["192.0.2.7", "2001:db8::7"],
            ),
            (
                &on_pod_net,
                Some(sandbox("10.0.0.5")),
                vec!["10.0.0.5", "fd00::9"],
            ),
            (&on_pod_net, Some(sandbox("")), vec![]),
            (&on_pod_net, None, vec![]),
        ];
        for (p, s, want) in cases {
            let all = pod_ips(p, s.as_ref(), &host);
            assert_eq!(all, want);
            assert_eq!(
                first_pod_ip(p, s.as_ref(), &host),
                want.first().copied().unwrap_or("")
            );
            assert_eq!(
                pod_ip(p, s.as_ref(), &host),
                want.first().copied().unwrap_or("")
            );
        }
    }

    #[test]
    fn the_active_deadline_counts_from_the_start_and_passes_at_its_second() {
        let p = |extra: &str| pod(&format!("spec:\n{extra}  containers: [{{name: c}}]\n"));
        let cases = [
            ("", 1000, None),
            ("  activeDeadlineSeconds: 30\n", 1000, Some(30)),
            ("  activeDeadlineSeconds: 30\n", 1029, Some(1)),
            ("  activeDeadlineSeconds: 30\n", 1030, Some(0)),
            ("  activeDeadlineSeconds: 5\n", 1100, Some(-95)),
        ];
        for (extra, now, want) in cases {
            assert_eq!(
                active_deadline_left(&p(extra), 1000, now),
                want,
                "{extra} {now}"
            );
        }
    }

    fn sandbox(ip: &str, more: &[&str]) -> ObservedSandbox {
        ObservedSandbox {
            id: "s".into(),
            ready: true,
            ip: ip.into(),
            additional_ips: more.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn an_init_containers_event_names_spec_init_containers_in_its_field_path() {
        let p = pod(concat!(
            "spec:\n  initContainers: [{name: setup}]\n  containers: [{name: app}]\n",
            "  ephemeralContainers: [{name: debug}]\n",
        ));
        assert_eq!(
            container_field_path(&p, "setup"),
            "spec.initContainers{setup}"
        );
        assert_eq!(container_field_path(&p, "app"), "spec.containers{app}");
        assert_eq!(
            container_field_path(&p, "debug"),
            "spec.ephemeralContainers{debug}"
        );
        assert_eq!(container_field_path(&p, "gone"), "spec.containers{gone}");
    }

    #[test]
    fn a_host_network_pod_has_the_host_ip_whatever_the_sandbox_says() {
        let p = pod("spec: {hostNetwork: true, containers: []}");
        let s = sandbox("10.0.0.5", &[]);
        let host = ["192.168.1.2".to_string(), "fd00::2".to_string()];
        assert_eq!(pod_ips(&p, Some(&s), &host), host);
        assert_eq!(pod_ips(&p, None, &host[..1]), ["192.168.1.2"]);
        assert!(pod_ips(&p, None, &[String::new()]).is_empty());
    }

    #[test]
    fn a_pod_network_pod_has_the_sandbox_ips_primary_first_without_empty_ones() {
        let p = pod("spec: {containers: []}");
        let s = sandbox("10.0.0.5", &["", "fd00::5"]);
        assert_eq!(
            pod_ips(&p, Some(&s), &["192.168.1.2".to_string()]),
            ["10.0.0.5", "fd00::5"]
        );
        assert_eq!(pod_ip(&p, Some(&s), &["h".to_string()]), "10.0.0.5");
        assert!(pod_ips(&p, None, &["192.168.1.2".to_string()]).is_empty());
        assert_eq!(
            pod_ip(&p, Some(&sandbox("", &["x"])), &["h".to_string()]),
            ""
        );
    }

    #[test]
    fn the_grace_period_prefers_the_deletion_then_the_spec_then_thirty_seconds() {
        let mut p = pod("spec: {terminationGracePeriodSeconds: 5, containers: []}");
        assert_eq!(grace_period(&p), 5);
        p.metadata.deletion_grace_period_seconds = Some(1);
        assert_eq!(grace_period(&p), 1);
        assert_eq!(grace_period(&Pod::default()), 30);
        p.metadata.deletion_grace_period_seconds = Some(-4);
        assert_eq!(grace_period(&p), 0);
    }

    #[test]
    fn log_and_pod_dirs_are_named_by_namespace_name_and_uid() {
        let p = pod("metadata: {name: web, namespace: edge, uid: u1}");
        assert_eq!(
            log_dir(Path::new("/var/log/pods"), &p),
            Path::new("/var/log/pods/edge_web_u1")
        );
        assert_eq!(
            pod_dir(Path::new("/var/lib/picolet"), "u1"),
            Path::new("/var/lib/picolet/pods/u1")
        );
        assert_eq!(qos(&p), QosClass::BestEffort);
    }

    #[test]
    fn a_label_change_keeps_the_probes_and_a_probe_change_does_not() {
        let base = pod(
            "metadata: {name: web, uid: u1}\nspec:\n  containers:\n  - name: main\n    readinessProbe: {exec: {command: [\"true\"]}, periodSeconds: 2}\n",
        );
        let mut labelled = base.clone();
        labelled.metadata.labels = Some([("chaos".to_string(), "1".to_string())].into());
        labelled.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
        assert!(!probes_differ(&base, &labelled));
        let mut slower = base.clone();
        slower.spec.as_mut().unwrap().containers[0]
            .readiness_probe
            .as_mut()
            .unwrap()
            .period_seconds = Some(5);
        assert!(probes_differ(&base, &slower));
        let mut more = base.clone();
        let mut sidecar = more.spec.as_ref().unwrap().containers[0].clone();
        sidecar.name = "side".into();
        more.spec.as_mut().unwrap().init_containers = Some(vec![sidecar]);
        assert!(probes_differ(&base, &more));
    }
}
