//! Container tests: labels, annotations and hash, env and the downward
//! API, mounts, resources (pod-level, hugepages, swap), security context.

use super::*;

#[test]
fn container_gets_labels_annotations_log_path_and_image() {
    let p = pod(&BASIC.replace(
            "    terminationMessagePolicy: File",
            "    terminationMessagePolicy: File\n    ports: [{name: http, containerPort: 80, protocol: TCP}]\n    workingDir: /srv\n    stdin: true\n    tty: true",
        ));
    let c = first(&p);
    let cfg = container_config(
        &p,
        c,
        &ContainerParams {
            attempt: 3,
            ..params()
        },
    )
    .unwrap();
    assert_eq!(
        cfg.metadata,
        Some(api::ContainerMetadata {
            name: "app".into(),
            attempt: 3
        })
    );
    let img = cfg.image.unwrap();
    assert_eq!(img.image, "sha256:deadbeef");
    assert_eq!(img.user_specified_image, "nginx:1.27");
    assert_eq!(cfg.log_path, "app/3.log");
    assert_eq!(cfg.working_dir, "/srv");
    assert!(cfg.stdin && cfg.tty && !cfg.stdin_once);
    assert_eq!(cfg.labels[CONTAINER_NAME_LABEL], "app");
    assert_eq!(cfg.labels[POD_NAME_LABEL], "web");
    assert_eq!(cfg.labels[POD_NAMESPACE_LABEL], "edge");
    assert_eq!(cfg.labels[POD_UID_LABEL], "1234-abcd");
    assert_eq!(cfg.labels.len(), 4);
    assert_eq!(
        cfg.annotations[CONTAINER_HASH_ANNOTATION],
        container_hash(c)
    );
    assert_eq!(cfg.annotations[CONTAINER_RESTART_COUNT_ANNOTATION], "3");
    assert_eq!(
        cfg.annotations[CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION],
        "/dev/termination-log"
    );
    assert_eq!(
        cfg.annotations[CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION],
        "File"
    );
    assert_eq!(
        cfg.annotations[POD_TERMINATION_GRACE_PERIOD_ANNOTATION],
        "30"
    );
    assert_eq!(
        cfg.annotations[CONTAINER_PORTS_ANNOTATION],
        r#"[{"name":"http","containerPort":80,"protocol":"TCP"}]"#
    );
}

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

const VOLUMES: &str = r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  volumes:
  - name: data
    hostPath: {path: /srv/data, type: DirectoryOrCreate}
  - name: scratch
    emptyDir: {}
  - name: defaulted
  - name: cfg
    configMap: {name: cm}
  containers:
  - name: app
    image: x
    terminationMessagePath: /dev/termination-log
    env: [{name: SUB, value: logs}]
    volumeMounts:
    - {name: data, mountPath: /data, readOnly: true}
    - {name: data, mountPath: /data-sub, subPath: a/b, mountPropagation: HostToContainer}
    - {name: scratch, mountPath: /scratch}
    - {name: scratch, mountPath: /logs, subPathExpr: "$(SUB)"}
"#;

fn volume_dir(name: &str) -> Option<PathBuf> {
    Some(PathBuf::from("/var/lib/picolet/pods/u/volumes/kubernetes.io~empty-dir").join(name))
}

#[test]
fn host_path_and_empty_dir_mounts_with_read_only_sub_path_and_propagation() {
    let p = pod(VOLUMES);
    let hosts = Path::new("/var/lib/picolet/pods/u/etc-hosts");
    let tlog = Path::new("/var/lib/picolet/pods/u/containers/app/abc123");
    let cp = ContainerParams {
        volume_dir: &volume_dir,
        etc_hosts: Some(hosts),
        termination_log_host_path: Some(tlog),
        ..params()
    };
    let cfg = container_config(&p, first(&p), &cp).unwrap();
    let got: Vec<(&str, &str, bool, i32)> = cfg
        .mounts
        .iter()
        .map(|m| {
            (
                m.container_path.as_str(),
                m.host_path.as_str(),
                m.readonly,
                m.propagation,
            )
        })
        .collect();
    let private = api::MountPropagation::PropagationPrivate as i32;
    let ed = "/var/lib/picolet/pods/u/volumes/kubernetes.io~empty-dir/scratch";
    assert_eq!(
        got,
        vec![
            ("/data", "/srv/data", true, private),
            (
                "/data-sub",
                "/srv/data/a/b",
                false,
                api::MountPropagation::PropagationHostToContainer as i32
            ),
            ("/scratch", ed, false, private),
            ("/logs", &format!("{ed}/logs") as &str, false, private),
            (
                "/etc/hosts",
                "/var/lib/picolet/pods/u/etc-hosts",
                false,
                private
            ),
            (
                "/dev/termination-log",
                "/var/lib/picolet/pods/u/containers/app/abc123",
                false,
                private
            ),
        ]
    );
    assert_eq!(empty_dir_volumes(&p), vec!["scratch", "defaulted"]);
    assert_eq!(
        host_path_volumes(&p),
        vec![(
            "/srv/data".to_string(),
            Some("DirectoryOrCreate".to_string())
        )]
    );
}

#[test]
fn sub_path_with_dot_dot_or_absolute_is_rejected_naming_the_mount() {
    for bad in ["../etc", "a/../../b", "/etc"] {
        let p = pod(&VOLUMES.replace("subPath: a/b", &format!("subPath: {bad:?}")));
        let cp = ContainerParams {
            volume_dir: &volume_dir,
            ..params()
        };
        let err = container_config(&p, first(&p), &cp).unwrap_err();
        assert_eq!(err.field, "volumeMount \"data\"", "{bad}");
        assert!(err.to_string().contains(bad), "{err}");
    }
}

#[test]
fn config_volumes_mount_read_only_and_unknown_volumes_are_rejected_naming_them() {
    let p = pod(&VOLUMES.replace(
        "    - {name: data, mountPath: /data, readOnly: true}",
        "    - {name: cfg, mountPath: /cfg}",
    ));
    let cp = ContainerParams {
        volume_dir: &volume_dir,
        ..params()
    };
    // A configMap volume is mounted read-only from the directory the
    // caller wrote, whatever the mount says.
    let config = container_config(&p, first(&p), &cp).unwrap();
    let cfg = config
        .mounts
        .iter()
        .find(|m| m.container_path == "/cfg")
        .unwrap();
    assert!(cfg.readonly);
    assert_eq!(cfg.host_path, volume_dir("cfg").unwrap().to_string_lossy());
    let p = pod(&VOLUMES.replace(
        "    - {name: data, mountPath: /data, readOnly: true}",
        "    - {name: nope, mountPath: /x}",
    ));
    let err = container_config(&p, first(&p), &cp).unwrap_err();
    assert!(err.to_string().contains("\"nope\" not found"), "{err}");
}

#[test]
fn container_mounting_etc_hosts_itself_does_not_get_the_managed_one() {
    let p = pod(&VOLUMES.replace("mountPath: /scratch}", "mountPath: /etc/hosts}"));
    let cp = ContainerParams {
        volume_dir: &volume_dir,
        etc_hosts: Some(Path::new("/h")),
        ..params()
    };
    let cfg = container_config(&p, first(&p), &cp).unwrap();
    assert_eq!(
        cfg.mounts
            .iter()
            .filter(|m| m.container_path == "/etc/hosts")
            .count(),
        1
    );
    assert!(cfg.mounts.iter().all(|m| m.host_path != "/h"));
}

fn resources_of(yaml_resources: &str) -> api::LinuxContainerResources {
    let p = pod(&format!(
            "metadata: {{name: p, namespace: n, uid: u}}\nspec:\n  containers:\n  - name: a\n    image: x\n    resources: {yaml_resources}\n"
        ));
    let cfg = container_config(
        &p,
        first(&p),
        &ContainerParams {
            oom_score_adj: 42,
            ..params()
        },
    )
    .unwrap();
    cfg.linux.unwrap().resources.unwrap()
}

#[test]
fn cpu_and_memory_map_to_shares_quota_and_memory_limit() {
    let r =
        resources_of("{requests: {cpu: 250m, memory: 64Mi}, limits: {cpu: \"0.5\", memory: 1G}}");
    assert_eq!(r.cpu_shares, 256);
    assert_eq!(r.cpu_period, 100_000);
    assert_eq!(r.cpu_quota, 50_000);
    assert_eq!(r.memory_limit_in_bytes, 1_000_000_000);
    assert_eq!(r.oom_score_adj, 42);
    assert!(r.unified.is_empty());

    // A limit without a request: shares follow the limit.
    let r = resources_of("{limits: {cpu: \"2\", memory: 1e3}}");
    assert_eq!(r.cpu_shares, 2048);
    assert_eq!(r.cpu_quota, 200_000);
    assert_eq!(r.memory_limit_in_bytes, 1000);

    // Tiny values hit the floors.
    let r = resources_of("{requests: {cpu: 1m}, limits: {cpu: 1m}}");
    assert_eq!(r.cpu_shares, 2);
    assert_eq!(r.cpu_quota, 1000);
}

#[test]
fn best_effort_container_gets_two_shares_and_no_limits() {
    let r = resources_of("{}");
    assert_eq!(r.cpu_shares, 2);
    assert_eq!(r.cpu_quota, 0);
    assert_eq!(r.memory_limit_in_bytes, 0);
}

#[test]
fn quantities_parse_exactly() {
    let m = |s: &str| millis(parse_resource(s).unwrap());
    let v = |s: &str| units(parse_resource(s).unwrap());
    assert_eq!(m("100m"), 100);
    assert_eq!(m("0.1"), 100);
    assert_eq!(m("2"), 2000);
    assert_eq!(m("1.0001"), 1001);
    assert_eq!(v("64Mi"), 64 << 20);
    assert_eq!(v("1G"), 1_000_000_000);
    assert_eq!(v("512"), 512);
    assert_eq!(v("1e3"), 1000);
    assert_eq!(v("1.5Ki"), 1536);
    assert_eq!(v("100m"), 1);
    assert!(parse_resource("-1").is_none());
    assert!(parse_resource("12x").is_none());
    assert!(
        parse_resource("1.2.3").is_none(),
        "the old parser panicked here"
    );
    assert!(parse_resource("").is_none());
}

#[test]
fn security_context_merges_pod_and_container_and_maps_capabilities() {
    let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  securityContext:
    runAsUser: 1000
    runAsGroup: 1000
    fsGroup: 2000
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: a
    image: x
    securityContext:
      runAsGroup: 3000
      readOnlyRootFilesystem: true
      allowPrivilegeEscalation: false
      capabilities: {add: [NET_ADMIN], drop: [ALL]}
"#);
    let sc = container_config(&p, first(&p), &params())
        .unwrap()
        .linux
        .unwrap()
        .security_context
        .unwrap();
    assert_eq!(sc.run_as_user, Some(api::Int64Value { value: 1000 }));
    assert_eq!(sc.run_as_group, Some(api::Int64Value { value: 3000 }));
    assert!(sc.readonly_rootfs);
    assert!(sc.no_new_privs);
    assert!(!sc.privileged);
    let caps = sc.capabilities.unwrap();
    assert_eq!(caps.add_capabilities, vec!["NET_ADMIN"]);
    assert_eq!(caps.drop_capabilities, vec!["ALL"]);
    assert_eq!(sc.supplemental_groups, vec![2000]);
    assert_eq!(
        sc.seccomp.unwrap().profile_type,
        api::security_profile::ProfileType::RuntimeDefault as i32
    );
    assert!(sc.masked_paths.contains(&"/proc/kcore".to_string()));
    assert!(sc.readonly_paths.contains(&"/proc/sys".to_string()));
}

#[test]
fn privileged_container_has_no_masked_paths_and_default_is_unconfined_without_no_new_privs() {
    let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  containers:
  - name: a
    image: x
    securityContext: {privileged: true}
"#);
    let sc = container_config(&p, first(&p), &params())
        .unwrap()
        .linux
        .unwrap()
        .security_context
        .unwrap();
    assert!(sc.privileged);
    assert!(!sc.no_new_privs);
    assert!(sc.masked_paths.is_empty() && sc.readonly_paths.is_empty());
    assert_eq!(
        sc.seccomp.unwrap().profile_type,
        api::security_profile::ProfileType::Unconfined as i32
    );
    assert!(sc.run_as_user.is_none());
}

#[test]
fn run_as_non_root_with_uid_zero_is_rejected() {
    let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  securityContext: {runAsNonRoot: true}
  containers:
  - {name: a, image: x, securityContext: {runAsUser: 0}}
"#);
    assert!(container_config(&p, first(&p), &params()).is_err());
}

#[test]
fn run_as_non_root_is_checked_against_run_as_user_then_the_images_user() {
    let p = pod(r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  securityContext: {runAsNonRoot: true}
  containers:
  - {name: a, image: x}
  - {name: b, image: x, securityContext: {runAsUser: 0}}
  - {name: c, image: x, securityContext: {runAsUser: 1000}}
  - {name: d, image: x, securityContext: {runAsNonRoot: false}}
"#);
    let user = ImageUser::of;
    let c = |i: usize| &p.spec.as_ref().unwrap().containers[i];
    let at = |name: &str| format!("(pod: \"p_n(u)\", container: {name})");
    let cases: Vec<(usize, ImageUser, Result<(), String>)> = vec![
        (
            0,
            user(Some(0), ""),
            Err(format!(
                "container has runAsNonRoot and image will run as root {}",
                at("a")
            )),
        ),
        (
            0,
            user(None, "nginx"),
            Err(format!(
                "container has runAsNonRoot and image has non-numeric user (nginx), cannot verify user is non-root {}",
                at("a")
            )),
        ),
        (0, user(Some(101), ""), Ok(())),
        (0, user(Some(101), "app"), Ok(())),
        // An image that names no user runs as root.
        (
            0,
            user(None, ""),
            Err(format!(
                "container has runAsNonRoot and image will run as root {}",
                at("a")
            )),
        ),
        (
            1,
            user(Some(1000), ""),
            Err(format!("container's runAsUser breaks non-root policy {}", at("b"))),
        ),
        (2, user(Some(0), ""), Ok(())),
        (2, user(None, "root"), Ok(())),
        (3, user(Some(0), ""), Ok(())),
    ];
    for (i, image, want) in cases {
        assert_eq!(
            verify_run_as_non_root(&p, c(i), &image),
            want,
            "container {i}, {image:?}"
        );
    }
    let no_policy = pod("metadata: {name: q}\nspec:\n  containers: [{name: a, image: x}]\n");
    assert_eq!(
        verify_run_as_non_root(&no_policy, first(&no_policy), &user(Some(0), "")),
        Ok(())
    );
}

#[test]
fn container_hash_is_stable_and_changes_when_the_spec_changes() {
    let p = pod(BASIC);
    let c = first(&p).clone();
    let h = container_hash(&c);
    assert!(
        (1..=8).contains(&h.len()) && h.chars().all(|ch| matches!(ch, '0'..='9' | 'a'..='f')),
        "kubelet's form: lowercase hex of a 32-bit FNV-1a, got {h:?}"
    );
    assert_eq!(legacy_container_hash(&c).len(), 32);
    assert_eq!(h, container_hash(&pod(BASIC).spec.unwrap().containers[0]));
    let mut c2 = c.clone();
    c2.image = Some("nginx:1.28".into());
    assert_ne!(h, container_hash(&c2));
    let mut c3 = c.clone();
    c3.args = Some(vec!["-g".into()]);
    assert_ne!(h, container_hash(&c3));
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

fn resources_with(yaml: &str, p: &ContainerParams) -> api::LinuxContainerResources {
    let p_ = pod(yaml);
    container_config(&p_, first(&p_), p)
        .unwrap()
        .linux
        .unwrap()
        .resources
        .unwrap()
}

#[test]
fn the_hash_is_fnv32a_of_the_spec_dump_and_the_legacy_form_is_md5() {
    // FNV-1a test vectors: "" and "a".
    let empty = Container::default();
    let json = serde_json::to_vec(&empty).unwrap();
    let want = json.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    });
    assert_eq!(container_hash(&empty), format!("{want:x}"));
    assert_eq!(
        legacy_container_hash(&empty),
        format!("{:x}", md5::compute(json))
    );
}

#[test]
fn default_masked_and_read_only_paths_are_kubelets_unless_proc_mount_is_unmasked() {
    let p = pod(BASIC);
    let sc = container_config(&p, first(&p), &params())
        .unwrap()
        .linux
        .unwrap()
        .security_context
        .unwrap();
    assert_eq!(sc.masked_paths, DEFAULT_MASKED_PATHS);
    assert!(sc.masked_paths.iter().any(|m| m == "/proc/interrupts"));
    assert_eq!(sc.readonly_paths, DEFAULT_READONLY_PATHS);
    let p = pod("metadata: {name: p, namespace: n, uid: u}\nspec:\n  hostUsers: false\n  containers:\n  - {name: a, image: x, securityContext: {procMount: Unmasked}}\n");
    let sc = container_config(&p, first(&p), &params())
        .unwrap()
        .linux
        .unwrap()
        .security_context
        .unwrap();
    assert!(sc.masked_paths.is_empty() && sc.readonly_paths.is_empty());
}

#[test]
fn apparmor_profiles_pass_through_from_the_field_the_annotation_or_the_pod() {
    use api::security_profile::ProfileType;
    let cases = [
        ("spec: {containers: [{name: a, securityContext: {appArmorProfile: {type: Localhost, localhostProfile: edge}}}]}", Some((ProfileType::Localhost, "edge")), "localhost/edge"),
        ("metadata: {annotations: {container.apparmor.security.beta.kubernetes.io/a: runtime/default}}\nspec: {containers: [{name: a}]}", Some((ProfileType::RuntimeDefault, "")), "runtime/default"),
        ("spec: {securityContext: {appArmorProfile: {type: Unconfined}}, containers: [{name: a}]}", Some((ProfileType::Unconfined, "")), "unconfined"),
        ("spec: {containers: [{name: a}]}", None, ""),
    ];
    for (yaml, want, old) in cases {
        let p = pod(yaml);
        let sc = container_config(&p, first(&p), &params())
            .unwrap()
            .linux
            .unwrap()
            .security_context
            .unwrap();
        let got = sc.apparmor.as_ref().map(|a| {
            (
                ProfileType::try_from(a.profile_type).unwrap(),
                a.localhost_ref.as_str(),
            )
        });
        assert_eq!(got, want, "{yaml}");
        #[allow(deprecated)]
        let deprecated = sc.apparmor_profile.as_str();
        assert_eq!(deprecated, old, "{yaml}");
    }
}

#[test]
fn every_hugepage_size_of_the_node_is_limited_to_zero_unless_requested() {
    let sizes = ["1GB".to_string(), "2MB".to_string()];
    let p = ContainerParams {
        hugepage_sizes: &sizes,
        ..params()
    };
    let r = resources_with("spec: {containers: [{name: a, image: x}]}", &p);
    let got: Vec<(&str, u64)> = r
        .hugepage_limits
        .iter()
        .map(|h| (h.page_size.as_str(), h.limit))
        .collect();
    assert_eq!(got, [("1GB", 0), ("2MB", 0)]);
    let r = resources_with(
        "spec: {containers: [{name: a, image: x, resources: {limits: {hugepages-2Mi: 100Mi, memory: 1Gi}}}]}",
        &p,
    );
    let got: Vec<(&str, u64)> = r
        .hugepage_limits
        .iter()
        .map(|h| (h.page_size.as_str(), h.limit))
        .collect();
    assert_eq!(got, [("1GB", 0), ("2MB", 100 << 20)]);
    assert_eq!(hugepage_unit_size(2 << 20).as_deref(), Some("2MB"));
    assert_eq!(hugepage_unit_size(1 << 30).as_deref(), Some("1GB"));
    assert_eq!(hugepage_unit_size(64 << 10).as_deref(), Some("64KB"));
    assert_eq!(hugepage_unit_size(3 << 20).as_deref(), Some("3MB"));
}

#[test]
fn swap_follows_kubelets_no_swap_and_limited_swap_rules() {
    const BURSTABLE: &str = "metadata: {name: p, namespace: n, uid: u, annotations: {kubernetes.io/config.source: api}}\nspec: {containers: [{name: a, image: x, resources: {requests: {memory: 100Mi}, limits: {memory: 200Mi}}}]}";
    const STATIC: &str = "metadata: {name: p, namespace: n, uid: u, annotations: {kubernetes.io/config.source: file}}\nspec: {containers: [{name: a, image: x, resources: {requests: {memory: 100Mi}, limits: {memory: 200Mi}}}]}";
    let with = |swap: Swap| ContainerParams { swap, ..params() };
    // cgroup v1: the swap limit is the memory limit.
    let r = resources_with(BURSTABLE, &with(Swap::CgroupV1));
    assert_eq!(r.memory_swap_limit_in_bytes, 200 << 20);
    assert!(r.unified.is_empty());
    // No swap controller: nothing.
    let r = resources_with(BURSTABLE, &with(Swap::Unavailable));
    assert_eq!(r.memory_swap_limit_in_bytes, 0);
    assert!(r.unified.is_empty());
    // cgroup v2, NoSwap: memory.swap.max = 0.
    let v2 = |limited| Swap::CgroupV2 {
        limited,
        node_memory_bytes: 1000 << 20,
        node_swap_bytes: 500 << 20,
    };
    let r = resources_with(BURSTABLE, &with(v2(false)));
    assert_eq!(
        r.unified.get(CGROUP2_SWAP_MAX).map(String::as_str),
        Some("0")
    );
    // LimitedSwap: the request's share of the swap (100Mi / 1000Mi of 500Mi).
    let r = resources_with(BURSTABLE, &with(v2(true)));
    assert_eq!(r.unified[CGROUP2_SWAP_MAX], (50u64 << 20).to_string());
    // ... but never for a static (critical) pod.
    let r = resources_with(STATIC, &with(v2(true)));
    assert_eq!(r.unified[CGROUP2_SWAP_MAX], "0");
}

#[test]
fn a_container_without_resources_gets_the_pod_level_limits() {
    let r = resources_with(
        "spec:\n  resources: {limits: {cpu: '1', memory: 200Mi}}\n  containers: [{name: a, image: x}]\n",
        &params(),
    );
    assert_eq!(
        (r.cpu_shares, r.cpu_quota, r.cpu_period),
        (1024, 100_000, 100_000)
    );
    assert_eq!(r.memory_limit_in_bytes, 209_715_200);
}
