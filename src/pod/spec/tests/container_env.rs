//! Container tests: command and args, env and its expansion, the downward
//! API's field and resource refs, ConfigMap and Secret key refs.

use super::*;

#[test]
fn command_and_args_expand_vars_and_double_dollar_escapes() {
    let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: a
    image: x
    command: ["/bin/$(CMD)"]
    args: ["--port=$(PORT)", "$$(PORT)", "$(MISSING)", "cost $5", "$(", "x$$y", "tail$"]
    env:
    - {name: CMD, value: server}
    - {name: PORT, value: "8080"}
"#);
    let cfg = container_config(&p, first(&p), &params()).unwrap();
    assert_eq!(cfg.command, vec!["/bin/server"]);
    assert_eq!(
        cfg.args,
        vec![
            "--port=8080",
            "$(PORT)",
            "$(MISSING)",
            "cost $5",
            "$(",
            "x$y",
            "tail$"
        ]
    );
}

#[test]
fn env_values_expand_only_against_earlier_vars() {
    let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: a
    image: x
    env:
    - {name: A, value: one}
    - {name: B, value: "$(A)-two-$(C)"}
    - {name: C, value: three}
    - {name: D, value: "$$(A)"}
    - {name: E}
"#);
    let cfg = container_config(&p, first(&p), &params()).unwrap();
    let got: Vec<(&str, &str)> = cfg
        .envs
        .iter()
        .map(|kv| (kv.key.as_str(), kv.value.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("A", "one"),
            ("B", "one-two-$(C)"),
            ("C", "three"),
            ("D", "$(A)"),
            ("E", "")
        ]
    );
}

#[test]
fn downward_api_field_refs_resolve_pod_metadata_and_ips() {
    let p = pod(r#"
metadata:
  name: p
  namespace: n
  uid: u-1
  labels: {tier: edge}
  annotations: {note: hi}
spec:
  nodeName: node-1
  serviceAccountName: sa
  containers:
  - name: a
    image: x
    env:
    - {name: NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: NS, valueFrom: {fieldRef: {apiVersion: v1, fieldPath: metadata.namespace}}}
    - {name: UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}
    - {name: TIER, valueFrom: {fieldRef: {fieldPath: "metadata.labels['tier']"}}}
    - {name: NOTE, valueFrom: {fieldRef: {fieldPath: "metadata.annotations['note']"}}}
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: SA, valueFrom: {fieldRef: {fieldPath: spec.serviceAccountName}}}
    - {name: HOST_IP, valueFrom: {fieldRef: {fieldPath: status.hostIP}}}
    - {name: HOST_IPS, valueFrom: {fieldRef: {fieldPath: status.hostIPs}}}
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: POD_IPS, valueFrom: {fieldRef: {fieldPath: status.podIPs}}}
    - {name: URL, value: "http://$(POD_IP):80/$(NAME)"}
"#);
    let ips = vec!["10.0.0.7".to_string(), "fd00::7".to_string()];
    let cfg = container_config(
        &p,
        first(&p),
        &ContainerParams {
            pod_ips: &ips,
            ..params()
        },
    )
    .unwrap();
    let e = |k| env_of(&cfg, k).unwrap();
    assert_eq!(e("NAME"), "p");
    assert_eq!(e("NS"), "n");
    assert_eq!(e("UID"), "u-1");
    assert_eq!(e("TIER"), "edge");
    assert_eq!(e("NOTE"), "hi");
    assert_eq!(e("NODE"), "node-1");
    assert_eq!(e("SA"), "sa");
    assert_eq!(e("HOST_IP"), "192.168.1.10");
    assert_eq!(e("HOST_IPS"), "192.168.1.10,fd00::10");
    assert_eq!(e("POD_IP"), "10.0.0.7");
    assert_eq!(e("POD_IPS"), "10.0.0.7,fd00::7");
    assert_eq!(e("URL"), "http://10.0.0.7:80/p");
}

#[test]
fn unsupported_field_ref_is_an_error_naming_the_var() {
    let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: a
    image: x
    env:
    - {name: PHASE, valueFrom: {fieldRef: {fieldPath: status.phase}}}
"#);
    let err = container_config(&p, first(&p), &params()).unwrap_err();
    assert_eq!(err.field, "env \"PHASE\"");
    assert!(err.to_string().contains("status.phase"), "{err}");
}

#[test]
fn resource_field_refs_round_up_by_divisor_and_default_limits_to_allocatable() {
    let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: a
    image: x
    resources:
      requests: {cpu: 250m, memory: 64Mi}
      limits: {cpu: 1500m, memory: 128Mi}
    env:
    - {name: CPU_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}
    - {name: CPU_LIMIT_M, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}
    - {name: CPU_REQ, valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: "1"}}}
    - {name: MEM_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory}}}
    - {name: MEM_REQ_MI, valueFrom: {resourceFieldRef: {resource: requests.memory, divisor: 1Mi}}}
    - {name: SIDE_MEM, valueFrom: {resourceFieldRef: {containerName: b, resource: limits.memory, divisor: 1Mi}}}
  - name: b
    image: y
"#);
    let cp = ContainerParams {
        node_allocatable: NodeAllocatable {
            cpu_millis: Some(4000),
            memory_bytes: Some(2 << 30),
            ephemeral_storage_bytes: None,
        },
        ..params()
    };
    let cfg = container_config(&p, first(&p), &cp).unwrap();
    let e = |k| env_of(&cfg, k).unwrap();
    assert_eq!(e("CPU_LIMIT"), "2");
    assert_eq!(e("CPU_LIMIT_M"), "1500");
    assert_eq!(e("CPU_REQ"), "1");
    assert_eq!(e("MEM_LIMIT"), "134217728");
    assert_eq!(e("MEM_REQ_MI"), "64");
    assert_eq!(e("SIDE_MEM"), "2048");

    // Without a limit and without allocatable the limit stays unset: 0.
    let cfg = container_config(&p, first(&p), &params()).unwrap();
    assert_eq!(env_of(&cfg, "SIDE_MEM").unwrap(), "0");
}

#[test]
fn config_map_key_ref_is_rejected_naming_the_env_var_unless_optional() {
    let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: app
    image: x
    env:
    - {name: OPT, valueFrom: {configMapKeyRef: {name: cm, key: k, optional: true}}}
    - {name: FOO, valueFrom: {configMapKeyRef: {name: cm, key: k}}}
"#);
    let err = container_config(&p, first(&p), &params()).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"container "app": env "FOO": configMapKeyRef is not supported for static pods"#
    );
    let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: app
    image: x
    env:
    - {name: OPT, valueFrom: {secretKeyRef: {name: s, key: k, optional: true}}}
    envFrom:
    - configMapRef: {name: maybe, optional: true}
"#);
    let cfg = container_config(&p, first(&p), &params()).unwrap();
    assert!(cfg.envs.is_empty());
    let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: app
    image: x
    envFrom:
    - secretRef: {name: creds}
"#);
    let err = container_config(&p, first(&p), &params()).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"container "app": envFrom[0]: secretRef "creds" is not supported for static pods"#
    );
}

#[test]
fn expand_matches_kubelet_semantics() {
    let lookup = |k: &str| (k == "A").then(|| "x".to_string());
    assert_eq!(expand("$(A)$(A)", &lookup), "xx");
    assert_eq!(expand("$$(A)", &lookup), "$(A)");
    assert_eq!(expand("$$$(A)", &lookup), "$x");
    assert_eq!(expand("$(B)", &lookup), "$(B)");
    assert_eq!(expand("$(A", &lookup), "$(A");
    assert_eq!(expand("$", &lookup), "$");
    assert_eq!(expand("é$(A)ü", &lookup), "éxü");
}
