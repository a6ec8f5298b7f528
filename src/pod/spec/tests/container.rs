//! Container tests: labels, annotations, the log path and the image; the
//! container hash. Env, mounts, resources and the security context have
//! files of their own beside this one.

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
