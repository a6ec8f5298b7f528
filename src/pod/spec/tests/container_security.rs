//! Container tests: the security context: capabilities, privileged,
//! runAsNonRoot, masked paths, AppArmor.

use super::*;

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
