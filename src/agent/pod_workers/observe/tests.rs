//! Tests of the pure half of observation: CRI sandboxes and containers
//! become an observed pod, a relist becomes the PLEG snapshot and GC input.

use super::*;

fn sandbox(id: &str, uid: &str, ready: bool, source: Option<&str>) -> api::PodSandbox {
    api::PodSandbox {
        id: id.into(),
        metadata: Some(api::PodSandboxMetadata {
            name: "web".into(),
            uid: uid.into(),
            namespace: "edge".into(),
            attempt: 1,
        }),
        state: if ready {
            api::PodSandboxState::SandboxReady
        } else {
            api::PodSandboxState::SandboxNotready
        } as i32,
        created_at: 5,
        labels: HashMap::from([(POD_UID_LABEL.to_string(), uid.to_string())]),
        annotations: source
            .map(|s| HashMap::from([(CONFIG_SOURCE_ANNOTATION.to_string(), s.to_string())]))
            .unwrap_or_default(),
        runtime_handler: String::new(),
    }
}

fn container(id: &str, uid: Option<&str>, state: api::ContainerState) -> api::Container {
    api::Container {
        id: id.into(),
        pod_sandbox_id: "s1".into(),
        metadata: Some(api::ContainerMetadata {
            name: "app".into(),
            attempt: 2,
        }),
        state: state as i32,
        labels: uid
            .map(|u| HashMap::from([(POD_UID_LABEL.to_string(), u.to_string())]))
            .unwrap_or_default(),
        annotations: HashMap::from([
            (CONTAINER_HASH_ANNOTATION.to_string(), "h1".to_string()),
            (
                POD_TERMINATION_GRACE_PERIOD_ANNOTATION.to_string(),
                "7".to_string(),
            ),
        ]),
        ..Default::default()
    }
}

#[test]
fn a_relist_names_pods_sources_and_grace_periods_and_skips_foreign_containers() {
    let (snap, rl) = relist_of(
        &[sandbox("s1", "u1", true, Some("file"))],
        &[
            container("c1", Some("u1"), api::ContainerState::ContainerRunning),
            container("x", None, api::ContainerState::ContainerRunning),
        ],
    );
    assert_eq!(snap.len(), 2, "the unlabeled container is not ours");
    assert_eq!(rl.names["u1"], ("edge".to_string(), "web".to_string()));
    assert_eq!(rl.sources["u1"], PodSource::File);
    assert_eq!(rl.grace["u1"], 7);
    assert!(rl.is_active("u1"));
    assert!(!rl.is_active("u2"));
}

#[test]
fn a_pod_whose_sandbox_stopped_and_containers_exited_is_not_active() {
    let (_, rl) = relist_of(
        &[sandbox("s1", "u1", false, None)],
        &[container(
            "c1",
            Some("u1"),
            api::ContainerState::ContainerExited,
        )],
    );
    assert!(!rl.is_active("u1"));
    assert!(rl.sources.is_empty(), "no annotation: unknown source");
}

#[test]
fn a_container_status_refines_the_listed_container() {
    let listed = container("c1", Some("u1"), api::ContainerState::ContainerRunning);
    let oc = observed_container(&listed, None);
    assert_eq!(
        (oc.state, oc.hash.as_str(), oc.attempt),
        (State::Running, "h1", 2)
    );
    let st = api::ContainerStatus {
        state: api::ContainerState::ContainerExited as i32,
        exit_code: 3,
        finished_at: 9,
        reason: "Error".into(),
        image_ref: "sha256:abc".into(),
        image: Some(api::ImageSpec {
            image: "docker.io/library/busybox:latest".into(),
            user_specified_image: "busybox".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let oc = observed_container(&listed, Some(st));
    assert_eq!(
        (oc.state, oc.exit_code, oc.finished_at),
        (State::Exited, 3, 9)
    );
    assert_eq!(oc.image_ref, "sha256:abc");
    assert_eq!(oc.image, "docker.io/library/busybox:latest");
}

#[test]
fn a_sandbox_carries_its_attempt_readiness_and_ips() {
    let st = api::PodSandboxStatusResponse {
        status: Some(api::PodSandboxStatus {
            network: Some(api::PodSandboxNetworkStatus {
                ip: "10.0.0.2".into(),
                additional_ips: vec![api::PodIp {
                    ip: "fd00::2".into(),
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let s = observed_sandbox(&sandbox("s1", "u1", true, None), sandbox_ips(st));
    assert_eq!((s.attempt, s.ready), (1, true));
    assert_eq!(
        (s.ip.as_str(), s.additional_ips.as_slice()),
        ("10.0.0.2", &["fd00::2".to_string()][..])
    );
}
