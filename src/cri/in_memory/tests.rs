//! The in-memory runtime's event streams: what a hollow node's PLEG is
//! woken by.

use super::*;

fn sandbox_config(uid: &str) -> api::PodSandboxConfig {
    api::PodSandboxConfig {
        metadata: Some(api::PodSandboxMetadata {
            name: "p".into(),
            uid: uid.into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        ..Default::default()
    }
}

/// Runs sandbox `uid` (ID returned).
async fn run_sandbox(rt: &MemoryRuntime, uid: &str) -> String {
    rt.run_pod_sandbox(api::RunPodSandboxRequest {
        config: Some(sandbox_config(uid)),
        ..Default::default()
    })
    .await
    .unwrap()
    .pod_sandbox_id
}

/// Creates a container of `image` in sandbox `sb` (ID returned).
async fn create_container(rt: &MemoryRuntime, sb: &str, image: &str) -> String {
    rt.create_container(api::CreateContainerRequest {
        pod_sandbox_id: sb.into(),
        config: Some(api::ContainerConfig {
            image: Some(api::ImageSpec {
                image: image.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap()
    .container_id
}

fn kinds(events: &mut ContainerEvents) -> Vec<(String, api::ContainerEventType)> {
    let mut seen = Vec::new();
    while let Some(Some(e)) =
        smol::future::block_on(smol::future::poll_once(events.next())).map(|r| r.unwrap())
    {
        seen.push((e.container_id.clone(), e.container_event_type()));
    }
    seen
}

#[test]
fn a_runtime_with_events_streams_each_step_of_a_containers_life() {
    use api::ContainerEventType::*;
    let rt = MemoryRuntime::with_events();
    rt.add_image("busybox");
    smol::block_on(async {
        let mut events = rt.get_container_events().await.unwrap();
        let mut seen = Vec::new();
        let sb = run_sandbox(&rt, "u1").await;
        seen.extend(kinds(&mut events));
        let ct = create_container(&rt, &sb, "sha256:busybox").await;
        rt.start_container(api::StartContainerRequest {
            container_id: ct.clone(),
        })
        .await
        .unwrap();
        seen.extend(kinds(&mut events));
        rt.exit(&ct, 0);
        // Exiting twice is one event: the state changed once.
        rt.exit(&ct, 0);
        rt.stop_pod_sandbox(api::StopPodSandboxRequest {
            pod_sandbox_id: sb.clone(),
        })
        .await
        .unwrap();
        seen.extend(kinds(&mut events));
        rt.remove_pod_sandbox(api::RemovePodSandboxRequest {
            pod_sandbox_id: sb.clone(),
        })
        .await
        .unwrap();
        seen.extend(kinds(&mut events));
        assert_eq!(
            seen,
            [
                (sb.clone(), ContainerCreatedEvent),
                (sb.clone(), ContainerStartedEvent),
                (ct.clone(), ContainerCreatedEvent),
                (ct.clone(), ContainerStartedEvent),
                (ct.clone(), ContainerStoppedEvent),
                (sb.clone(), ContainerStoppedEvent),
                (ct.clone(), ContainerDeletedEvent),
                (sb.clone(), ContainerDeletedEvent),
            ]
        );
    });
}

#[test]
fn a_restart_ends_the_event_streams_and_a_full_stream_misses_events() {
    let rt = MemoryRuntime::with_events();
    smol::block_on(async {
        let mut events = rt.get_container_events().await.unwrap();
        for i in 0..EVENT_BACKLOG + 5 {
            run_sandbox(&rt, &format!("u{i}")).await;
        }
        rt.restart();
        let mut n = 0;
        while events.next().await.unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, EVENT_BACKLOG, "the backlog, then the end of the stream");
    });
}

#[test]
fn a_runtime_without_events_answers_unimplemented_as_containerd_1_6() {
    let rt = MemoryRuntime::new();
    let e = smol::block_on(rt.get_container_events()).err().unwrap();
    assert_eq!(e.code(), tonic::Code::Unimplemented);
    assert!(smol::block_on(MemoryRuntime::hollow().get_container_events()).is_ok());
}

#[test]
fn the_relist_answer_is_encoded_again_only_when_a_container_changed() {
    let rt = MemoryRuntime::hollow();
    rt.add_image("busybox");
    smol::block_on(async {
        let sb = run_sandbox(&rt, "u1").await;
        let ct = create_container(&rt, &sb, "busybox").await;
        let states = |raw: &super::super::raw::RawContainers| -> Vec<(String, i32)> {
            let r = raw.decode().unwrap();
            r.containers.into_iter().map(|c| (c.id, c.state)).collect()
        };
        let first = rt.list_containers_raw().await.unwrap();
        let again = rt.list_containers_raw().await.unwrap();
        assert_eq!(
            first.0.as_ptr(),
            again.0.as_ptr(),
            "the same bytes, not encoded again"
        );
        let created = api::ContainerState::ContainerCreated as i32;
        assert_eq!(states(&again), [(ct.clone(), created)]);
        rt.start_container(api::StartContainerRequest {
            container_id: ct.clone(),
        })
        .await
        .unwrap();
        let running = api::ContainerState::ContainerRunning as i32;
        assert_eq!(
            states(&rt.list_containers_raw().await.unwrap()),
            [(ct.clone(), running)]
        );
        rt.exit(&ct, 1);
        let exited = api::ContainerState::ContainerExited as i32;
        assert_eq!(
            states(&rt.list_containers_raw().await.unwrap()),
            [(ct.clone(), exited)]
        );
        rt.remove_container(api::RemoveContainerRequest { container_id: ct })
            .await
            .unwrap();
        assert!(states(&rt.list_containers_raw().await.unwrap()).is_empty());
    });
}
