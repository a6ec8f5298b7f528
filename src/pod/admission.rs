//! Pod admission: may this node run this pod, next to the pods it already
//! admitted? kubelet's predicate admit handler, pure.
//!
//! The checks run in kubelet's order and the first failure is the answer,
//! with kubelet's reason and message, so `kubectl describe` reads the same
//! as on any node:
//! 0. node pressure (the eviction manager's admit handler): under
//!    MemoryPressure alone a BestEffort pod is refused unless it tolerates
//!    the memory-pressure taint; under DiskPressure or PIDPressure every pod
//!    is; critical (and static) pods never are (`Evicted`);
//! 1. sysctls on the node's allowlist (`SysctlForbidden`, see
//!    [`super::sysctls`]), then the pod's OS: a `kubernetes.io/os` pod
//!    label for another OS (`PodOSSelectorNodeLabelDoesNotMatch`), a
//!    `spec.os.name` other than linux (`PodOSNotSupported`);
//! 2. resources fit: pods (`OutOfpods`), then the `cpu` and `memory`
//!    requests against allocatable (`OutOfcpu`, `OutOfmemory`);
//! 3. the node name (`NodeName`), host ports (`NodePorts`), node selector and
//!    required node affinity (`NodeAffinity`) on the node's labels;
//! 4. untolerated `NoExecute` taints (`TaintToleration`), except for static
//!    pods, which kubelet never refuses for a taint.
//!
//! A refused pod is reported with phase Failed by the caller. This module
//! must not know where pods come from or how the node's facts were read.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration,
};

use crate::qos;

/// What admission needs to know about the node.
#[derive(Debug, Clone, Default)]
pub struct NodeView {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// Allocatable CPU (millicores) and memory (bytes); `None` is "not
    /// known", which admits anything.
    pub cpu_millis: Option<u64>,
    pub memory_bytes: Option<u64>,
    /// `maxPods`.
    pub max_pods: usize,
    /// The pressure conditions of the eviction manager.
    pub pressure: crate::node::eviction::Conditions,
    /// The sysctls pods may set (safe ones and `allowedUnsafeSysctls`).
    pub sysctls: super::sysctls::Allowlist,
}

/// Why a pod was refused: kubelet's `reason` and `message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: String,
    pub message: String,
}

fn predicate(name: &str, why: &str) -> Rejection {
    Rejection {
        reason: name.to_string(),
        message: format!("Predicate {name} failed: {why}"),
    }
}

fn insufficient(resource: &str, requested: u64, used: u64, capacity: u64) -> Rejection {
    Rejection {
        reason: format!("OutOf{resource}"),
        message: format!(
            "Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, capacity: {capacity}"
        ),
    }
}

/// kubelet's OS checks, before any predicate: a pod labelled
/// `kubernetes.io/os` for another OS (`PodOSSelectorNodeLabelDoesNotMatch`),
/// then a pod whose `spec.os.name` is not Linux (`PodOSNotSupported`).
fn os_matches(pod: &Pod) -> Result<(), Rejection> {
    let label = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("kubernetes.io/os"));
    if label.is_some_and(|os| os != "linux") {
        return Err(Rejection {
            reason: "PodOSSelectorNodeLabelDoesNotMatch".into(),
            message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
                .into(),
        });
    }
    let os = pod.spec.as_ref().and_then(|s| s.os.as_ref());
    if os.is_some_and(|os| os.name != "linux") {
        return Err(Rejection {
            reason: "PodOSNotSupported".into(),
            message: "Failed to admit pod as the OS field doesn't match node OS".into(),
        });
    }
    Ok(())
}

/// Admits `pod` onto `node` beside `admitted` (the pods already running or
/// admitted, not including `pod`), or says why not.
pub fn admit(
    pod: &Pod,
    node: &NodeView,
    admitted: &[&Pod],
    is_static: bool,
) -> Result<(), Rejection> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    under_pressure(pod, &node.pressure, is_static)?;
    node.sysctls.admit(pod)?;
    os_matches(pod)?;
    if admitted.len() + 1 > node.max_pods {
        return Err(insufficient(
            "pods",
            1,
            admitted.len() as u64,
            node.max_pods as u64,
        ));
    }
    let want = qos::pod_resources(spec);
    let used = admitted
        .iter()
        .filter_map(|p| p.spec.as_ref())
        .map(qos::pod_resources)
        .fold((0u64, 0u64), |(c, m), r| {
            (
                c.saturating_add(r.cpu_request_millis),
                m.saturating_add(r.memory_request_bytes),
            )
        });
    let fits = |resource: &str, requested: u64, used: u64, capacity: Option<u64>| match capacity {
        Some(cap) if requested > 0 && used.saturating_add(requested) > cap => {
            Err(insufficient(resource, requested, used, cap))
        }
        _ => Ok(()),
    };
    fits("cpu", want.cpu_request_millis, used.0, node.cpu_millis)?;
    fits(
        "memory",
        want.memory_request_bytes,
        used.1,
        node.memory_bytes,
    )?;

    if let Some(name) = spec.node_name.as_deref() {
        if !name.is_empty() && name != node.name {
            return Err(predicate(
                "NodeName",
                "node(s) didn't match the requested node name",
            ));
        }
    }
    let taken: HashSet<(String, String, i32)> =
        admitted.iter().flat_map(|p| host_ports(p)).collect();
    if host_ports(pod).iter().any(|p| taken.contains(p)) {
        return Err(predicate(
            "NodePorts",
            "node(s) didn't have free ports for the requested pod ports",
        ));
    }
    if !matches_node_selector(pod, node) {
        return Err(predicate(
            "NodeAffinity",
            "node(s) didn't match Pod's node affinity/selector",
        ));
    }
    if !is_static {
        let tolerations = spec.tolerations.as_deref().unwrap_or(&[]);
        let untolerated = node
            .taints
            .iter()
            .filter(|t| t.effect == "NoExecute")
            .any(|t| !tolerations.iter().any(|tol| tolerates(tol, t)));
        if untolerated {
            return Err(predicate(
                "TaintToleration",
                "node(s) had untolerated taint(s)",
            ));
        }
    }
    Ok(())
}

/// `(protocol, hostIP, hostPort)` of every container port with a host port.
fn host_ports(pod: &Pod) -> Vec<(String, String, i32)> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|p| *p > 0)?;
            let ip = p.host_ip.clone().filter(|ip| !ip.is_empty());
            Some((
                p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                ip.unwrap_or_else(|| "0.0.0.0".into()),
                port,
            ))
        })
        .collect()
}

/// `nodeSelector` (every pair present) and the required node affinity
/// (any term, each term all of its requirements).
pub fn matches_node_selector(pod: &Pod, node: &NodeView) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| node.labels.get(k) == Some(v));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let affinity_ok = required.is_none_or(|r| {
        r.node_selector_terms
            .iter()
            .any(|term| term_matches(term, node))
    });
    selector_ok && affinity_ok
}

/// An empty term matches nothing, as in the API.
fn term_matches(term: &NodeSelectorTerm, node: &NodeView) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, node.labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            let value = (r.key == "metadata.name").then_some(node.name.as_str());
            requirement_matches(r, value)
        })
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or(&[]);
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), Some(want)) = (
                value.and_then(number),
                values.first().and_then(|s| number(s)),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                have > want
            } else {
                have < want
            }
        }
        _ => false,
    }
}

/// The API's toleration rule: effects match (empty tolerates all), keys
/// match (empty key with `Exists` tolerates every key), and `Exists` or an
/// equal value.
/// kubelet's eviction admit handler.
fn under_pressure(
    pod: &Pod,
    pressure: &crate::node::eviction::Conditions,
    is_static: bool,
) -> Result<(), Rejection> {
    use crate::node::eviction::Condition;
    if !pressure.any() || is_static || crate::pod::facts::is_critical(pod) {
        return Ok(());
    }
    let only_memory = pressure.get(Condition::MemoryPressure) && pressure.iter().count() == 1;
    if only_memory {
        let spec = crate::pod::accessors::spec(pod);
        if qos::pod_qos(spec) != qos::QosClass::BestEffort {
            return Ok(());
        }
        let taint = Taint {
            key: Condition::MemoryPressure.taint_key().into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        if spec
            .tolerations
            .iter()
            .flatten()
            .any(|t| tolerates(t, &taint))
        {
            return Ok(());
        }
    }
    let names: Vec<&str> = pressure.iter().map(|c| c.as_str()).collect();
    Err(Rejection {
        reason: "Evicted".into(),
        message: format!("The node had condition: [{}]. ", names.join(" ")),
    })
}

pub fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    let effect_ok = tol
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    let key = tol.key.as_deref().unwrap_or("");
    let op = tol.operator.as_deref().unwrap_or("Equal");
    let key_ok = if key.is_empty() {
        op == "Exists"
    } else {
        key == taint.key
    };
    let value_ok = match op {
        "Exists" => true,
        "Equal" | "" => tol.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        _ => false,
    };
    effect_ok && key_ok && value_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn node() -> NodeView {
        NodeView {
            name: "pi-1".into(),
            labels: BTreeMap::from([
                ("kubernetes.io/arch".to_string(), "arm64".to_string()),
                ("kubernetes.io/hostname".to_string(), "pi-1".to_string()),
                ("cores".to_string(), "4".to_string()),
            ]),
            taints: Vec::new(),
            cpu_millis: Some(2000),
            memory_bytes: Some(512 << 20),
            max_pods: 3,
            pressure: Default::default(),
            sysctls: Default::default(),
        }
    }

    #[test]
    fn a_pod_for_another_os_is_refused_before_any_predicate() {
        let cases = [
            (
                "spec:\n  os: {name: windows}\n  containers: [{name: a, image: x}]\n",
                Err(("PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS")),
            ),
            (
                "metadata: {labels: {kubernetes.io/os: windows}}\nspec:\n  os: {name: windows}\n  containers: [{name: a, image: x}]\n",
                Err(("PodOSSelectorNodeLabelDoesNotMatch", "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label")),
            ),
            (
                "metadata: {labels: {kubernetes.io/os: linux}}\nspec:\n  os: {name: linux}\n  containers: [{name: a, image: x}]\n",
                Ok(()),
            ),
            (
                // The OS check comes before the resources fit.
                "spec:\n  os: {name: windows}\n  containers: [{name: a, image: x, resources: {requests: {cpu: '64'}}}]\n",
                Err(("PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS")),
            ),
        ];
        for (yaml, want) in cases {
            let got = admit(&pod(yaml), &node(), &[], false).map_err(|r| (r.reason, r.message));
            let want = want.map_err(|(r, m)| (r.to_string(), m.to_string()));
            assert_eq!(got, want, "{yaml}");
        }
    }

    #[test]
    fn a_pod_with_a_forbidden_sysctl_is_refused() {
        let p = pod("spec:\n  securityContext: {sysctls: [{name: kernel.msgmax, value: '1'}]}\n  containers: [{name: a, image: x}]\n");
        let r = admit(&p, &node(), &[], true).unwrap_err();
        assert_eq!(
            (r.reason.as_str(), r.message.as_str()),
            (
                "SysctlForbidden",
                "forbidden sysctl: \"kernel.msgmax\" not allowlisted"
            )
        );
    }

    #[test]
    fn node_pressure_refuses_pods_as_the_eviction_admit_handler_does() {
        use crate::node::eviction::{Condition, Conditions};
        let best_effort = pod("metadata: {name: be, annotations: {kubernetes.io/config.source: api}}\nspec:\n  containers: [{name: a, image: x}]\n");
        let burstable = pod("metadata: {name: bu, annotations: {kubernetes.io/config.source: api}}\nspec:\n  containers: [{name: a, image: x, resources: {requests: {memory: 1Mi}}}]\n");
        let tolerant = pod("metadata: {name: t, annotations: {kubernetes.io/config.source: api}}\nspec:\n  tolerations: [{key: node.kubernetes.io/memory-pressure, operator: Exists, effect: NoSchedule}]\n  containers: [{name: a, image: x}]\n");
        let critical = pod("metadata: {name: c, annotations: {kubernetes.io/config.source: api}}\nspec:\n  priority: 2000001000\n  containers: [{name: a, image: x}]\n");
        let with = |cs: &[Condition]| {
            let mut p = Conditions::default();
            cs.iter().for_each(|c| p.set(*c));
            NodeView {
                pressure: p,
                ..node()
            }
        };
        let mem = with(&[Condition::MemoryPressure]);
        let disk = with(&[Condition::MemoryPressure, Condition::DiskPressure]);
        let table = [
            (
                &best_effort,
                &mem,
                false,
                Some("The node had condition: [MemoryPressure]. "),
            ),
            (&burstable, &mem, false, None),
            (&tolerant, &mem, false, None),
            (&best_effort, &mem, true, None),
            (&critical, &disk, false, None),
            (
                &burstable,
                &disk,
                false,
                Some("The node had condition: [MemoryPressure DiskPressure]. "),
            ),
            (&best_effort, &node(), false, None),
        ];
        for (p, n, is_static, want) in table {
            let got = admit(p, n, &[], is_static).err();
            assert_eq!(
                got.as_ref()
                    .map(|r| (r.reason.as_str(), r.message.as_str())),
                want.map(|m| ("Evicted", m)),
                "{:?}",
                p.metadata.name
            );
        }
    }

    const PLAIN: &str = "metadata: {name: p}\nspec:\n  containers: [{name: c, image: i}]\n";

    fn reason(r: Result<(), Rejection>) -> String {
        r.map_or_else(|e| e.reason, |_| "admitted".into())
    }

    #[test]
    fn a_plain_pod_is_admitted() {
        assert_eq!(reason(admit(&pod(PLAIN), &node(), &[], false)), "admitted");
    }

    #[test]
    fn a_pod_beyond_max_pods_is_out_of_pods_with_kubelets_message() {
        let p = pod(PLAIN);
        let e = admit(&p, &node(), &[&p, &p, &p], false).unwrap_err();
        assert_eq!(e.reason, "OutOfpods");
        assert_eq!(
            e.message,
            "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"
        );
    }

    #[test]
    fn requests_over_allocatable_are_out_of_that_resource() {
        let big = |cpu: &str, mem: &str| {
            pod(&format!(
                "spec:\n  containers:\n  - name: c\n    image: i\n    resources: {{requests: {{cpu: \"{cpu}\", memory: \"{mem}\"}}}}\n"
            ))
        };
        let half = big("1", "100Mi");
        assert_eq!(
            reason(admit(&big("3", "1Mi"), &node(), &[], false)),
            "OutOfcpu"
        );
        assert_eq!(
            reason(admit(&big("1500m", "1Mi"), &node(), &[&half], false)),
            "OutOfcpu"
        );
        assert_eq!(
            reason(admit(&big("1", "1Gi"), &node(), &[], false)),
            "OutOfmemory"
        );
        assert_eq!(
            reason(admit(&big("1", "100Mi"), &node(), &[&half], false)),
            "admitted"
        );
        let e = admit(&big("3", "1Mi"), &node(), &[], false).unwrap_err();
        assert_eq!(
            e.message,
            "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"
        );
    }

    #[test]
    fn a_node_selector_that_does_not_match_the_labels_is_node_affinity() {
        let p = pod("spec:\n  nodeSelector: {kubernetes.io/arch: amd64}\n  containers: [{name: c, image: i}]\n");
        let e = admit(&p, &node(), &[], true).unwrap_err();
        assert_eq!(e.reason, "NodeAffinity");
        assert!(
            e.message.starts_with("Predicate NodeAffinity failed"),
            "{}",
            e.message
        );
        let ok = pod("spec:\n  nodeSelector: {kubernetes.io/arch: arm64}\n  containers: [{name: c, image: i}]\n");
        assert_eq!(reason(admit(&ok, &node(), &[], true)), "admitted");
    }

    #[test]
    fn required_node_affinity_terms_are_ored_and_their_expressions_anded() {
        let with = |terms: &str| {
            pod(&format!(
                "spec:\n  containers: [{{name: c, image: i}}]\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms: {terms}\n"
            ))
        };
        let cases = [
            ("[{matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [arm64, arm]}]}]", true),
            ("[{matchExpressions: [{key: kubernetes.io/arch, operator: NotIn, values: [arm64]}]}]", false),
            ("[{matchExpressions: [{key: gpu, operator: Exists}]}, {matchExpressions: [{key: cores, operator: Gt, values: ['2']}]}]", true),
            ("[{matchExpressions: [{key: cores, operator: Lt, values: ['2']}]}]", false),
            ("[{matchExpressions: [{key: gpu, operator: DoesNotExist}, {key: cores, operator: In, values: ['4']}]}]", true),
            ("[{matchFields: [{key: metadata.name, operator: In, values: [pi-1]}]}]", true),
            ("[{matchFields: [{key: metadata.name, operator: In, values: [pi-2]}]}]", false),
            ("[{}]", false),
            ("[]", false),
        ];
        for (terms, want) in cases {
            assert_eq!(
                matches_node_selector(&with(terms), &node()),
                want,
                "{terms}"
            );
        }
    }

    #[test]
    fn an_untolerated_no_execute_taint_refuses_api_pods_but_not_static_pods() {
        let mut n = node();
        n.taints = vec![Taint {
            key: "dedicated".into(),
            value: Some("db".into()),
            effect: "NoExecute".into(),
            time_added: None,
        }];
        let p = pod(PLAIN);
        assert_eq!(reason(admit(&p, &n, &[], false)), "TaintToleration");
        assert_eq!(reason(admit(&p, &n, &[], true)), "admitted");
        let tolerant = pod("spec:\n  containers: [{name: c, image: i}]\n  tolerations: [{key: dedicated, operator: Equal, value: db, effect: NoExecute}]\n");
        assert_eq!(reason(admit(&tolerant, &n, &[], false)), "admitted");
        n.taints[0].effect = "NoSchedule".into();
        assert_eq!(reason(admit(&p, &n, &[], false)), "admitted");
    }

    #[test]
    fn tolerations_follow_the_api_rules() {
        let taint = Taint {
            key: "k".into(),
            value: Some("v".into()),
            effect: "NoExecute".into(),
            time_added: None,
        };
        let tol = |yaml: &str| -> Toleration { serde_yaml_ng::from_str(yaml).unwrap() };
        assert!(tolerates(&tol("{operator: Exists}"), &taint));
        assert!(tolerates(&tol("{key: k, operator: Exists}"), &taint));
        assert!(tolerates(&tol("{key: k, value: v}"), &taint));
        assert!(!tolerates(&tol("{key: k, value: w}"), &taint));
        assert!(!tolerates(
            &tol("{key: k, value: v, effect: NoSchedule}"),
            &taint
        ));
        assert!(!tolerates(&tol("{value: v}"), &taint));
    }

    #[test]
    fn a_host_port_already_taken_is_node_ports() {
        let web = pod("spec:\n  containers: [{name: c, image: i, ports: [{containerPort: 80, hostPort: 8080}]}]\n");
        assert_eq!(reason(admit(&web, &node(), &[&web], false)), "NodePorts");
        let udp = pod("spec:\n  containers: [{name: c, image: i, ports: [{containerPort: 80, hostPort: 8080, protocol: UDP}]}]\n");
        assert_eq!(reason(admit(&udp, &node(), &[&web], false)), "admitted");
    }

    #[test]
    fn a_pod_for_another_node_is_node_name() {
        let p = pod("spec:\n  nodeName: pi-2\n  containers: [{name: c, image: i}]\n");
        assert_eq!(reason(admit(&p, &node(), &[], false)), "NodeName");
    }
}
