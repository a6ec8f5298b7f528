//! An in-memory container runtime: [`RuntimeService`] over a few maps, no
//! processes. The agent's sync logic is unit-tested against it, and the
//! future hollow-node mode (many simulated nodes against one API server)
//! will run the agent on it. Compiled only for tests and the `hollow`
//! feature, so the shipped binary does not carry it.
//!
//! It behaves like containerd where the agent can tell: IDs are opaque and
//! never reused, ListPodSandbox/ListContainers honour the ID, sandbox and
//! label filters, stop/remove of an unknown ID answers NotFound, a
//! container needs a ready sandbox and a present image, stopping a sandbox
//! stops its containers and removing it removes them. Timestamps are
//! wall-clock nanoseconds, strictly increasing.
//!
//! What a test does to the "processes" goes through the inherent methods:
//! [`MemoryRuntime::exit`] (a container exits with a code),
//! [`MemoryRuntime::add_image`], [`MemoryRuntime::fail_pulls`],
//! [`MemoryRuntime::restart`] (the runtime came back), and
//! [`MemoryRuntime::calls`] to see which CRI calls the agent made.
//! [`MemoryRuntime::hollow`] is a hollow node's (`picolet-hollow`).
//!
//! `GetContainerEvents` is answered only by a runtime made with
//! [`MemoryRuntime::with_events`] (a hollow node's is): a stream of the
//! created, started, stopped and deleted events of containers and
//! sandboxes, as containerd 2 sends them, so the agent's PLEG is evented
//! there and relists at the evented backstop. Otherwise it is
//! Unimplemented, as containerd 1.6's, and the PLEG relists every second.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{api, ContainerEvents, CriError, RuntimeService};

#[derive(Clone, Debug)]
struct Sandbox {
    config: api::PodSandboxConfig,
    ready: bool,
    /// Its process is gone but the runtime missed it: still listed ready,
    /// and no container starts in it (see [`MemoryRuntime::lose_sandbox_process`]).
    process_lost: bool,
    created_at: i64,
    ip: String,
}

/// One simulated container, as [`MemoryRuntime::containers`] shows it.
#[derive(Clone, Debug)]
pub struct MemoryContainer {
    pub id: String,
    pub sandbox_id: String,
    pub config: api::ContainerConfig,
    pub state: api::ContainerState,
    pub created_at: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub exit_code: i32,
}

impl MemoryContainer {
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.config
            .metadata
            .as_ref()
            .map(|m| m.name.as_str())
            .unwrap_or("")
    }

    /// `metadata.attempt`.
    pub fn attempt(&self) -> u32 {
        self.config
            .metadata
            .as_ref()
            .map(|m| m.attempt)
            .unwrap_or(0)
    }

    /// A label of the container (`io.kubernetes.pod.uid`, ...).
    pub fn label(&self, key: &str) -> &str {
        self.config
            .labels
            .get(key)
            .map(String::as_str)
            .unwrap_or("")
    }
}

#[derive(Default)]
struct State {
    next_id: u64,
    last_stamp: i64,
    sandboxes: BTreeMap<String, Sandbox>,
    containers: BTreeMap<String, MemoryContainer>,
    images: BTreeSet<String>,
    failing_pulls: BTreeSet<String>,
    calls: Vec<&'static str>,
    /// A hollow node's runtime: it keeps no call record (it would grow for
    /// as long as the node runs), and every probe and hook succeeds.
    hollow: bool,
    connects: u64,
    /// The image filesystem `ImageFsInfo` names (none by default).
    image_fs: Option<String>,
    /// Whether `GetContainerEvents` is answered.
    events: bool,
    /// The open event streams.
    subscribers: Vec<smol::channel::Sender<api::ContainerEventResponse>>,
    /// The last unfiltered ListContainers answer, encoded, and the
    /// [`State::listing_key`] it was made at: the PLEG's relist asks for
    /// it again and again while nothing changes.
    listing: Option<(u64, super::raw::RawContainers)>,
}

impl State {
    /// What an unfiltered ListContainers answer depends on: which
    /// containers exist and their states (IDs are never reused, and the
    /// rest of a listed container never changes).
    fn listing_key(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        for c in self.containers.values() {
            c.id.hash(&mut h);
            (c.state as i32).hash(&mut h);
        }
        h.finish()
    }

    fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{:06}", self.next_id)
    }

    fn stamp(&mut self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        self.last_stamp = now.max(self.last_stamp + 1);
        self.last_stamp
    }

    fn stop(&mut self, id: &str, exit_code: i32) {
        let at = self.stamp();
        let mut stopped = false;
        if let Some(c) = self.containers.get_mut(id) {
            if c.state == api::ContainerState::ContainerRunning {
                c.state = api::ContainerState::ContainerExited;
                c.finished_at = at;
                c.exit_code = exit_code;
                stopped = true;
            } else if c.state == api::ContainerState::ContainerCreated {
                c.state = api::ContainerState::ContainerExited;
                c.finished_at = at;
                stopped = true;
            }
        }
        if stopped {
            self.emit(id, api::ContainerEventType::ContainerStoppedEvent);
        }
    }

    /// The IDs of the containers of sandbox `sandbox_id`.
    fn container_ids_in(&self, sandbox_id: &str) -> Vec<String> {
        self.containers
            .values()
            .filter(|c| c.sandbox_id == sandbox_id)
            .map(|c| c.id.clone())
            .collect()
    }

    /// Sends an event to every open stream. A stream that is full misses
    /// it, as a slow reader of a real runtime's does; the PLEG's backstop
    /// relist covers that.
    fn emit(&mut self, id: &str, kind: api::ContainerEventType) {
        if self.subscribers.is_empty() {
            return;
        }
        let created_at = self.stamp();
        let event = api::ContainerEventResponse {
            container_id: id.to_string(),
            container_event_type: kind as i32,
            created_at,
            ..Default::default()
        };
        self.subscribers
            .retain(|tx| !matches!(tx.try_send(event.clone()), Err(e) if e.is_closed()));
    }
}

/// How many events an event stream holds before it misses some. The
/// agent takes an event as a reason to relist, so a few are enough, and
/// the slots are allocated up front (an event is some 400 bytes; 64 slots
/// were 25 KiB of every hollow node's memory).
const EVENT_BACKLOG: usize = 4;

/// The in-memory runtime. Single-threaded, like the agent. Clones share
/// the same state: two agents on one runtime are one node restarting.
#[derive(Clone, Default)]
pub struct MemoryRuntime {
    state: Rc<RefCell<State>>,
}

fn not_found(op: &'static str, what: &str) -> CriError {
    CriError::Status {
        op,
        status: tonic::Status::not_found(format!("{what}: not found")),
    }
}

fn failed(op: &'static str, message: String) -> CriError {
    CriError::Status {
        op,
        status: tonic::Status::failed_precondition(message),
    }
}

fn labels_match(selector: &HashMap<String, String>, labels: &HashMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

impl MemoryRuntime {
    /// An empty runtime with no images.
    pub fn new() -> Self {
        Self::default()
    }

    /// A hollow node's runtime: every pull succeeds (images are present
    /// at once), containers run until stopped, every probe and hook
    /// succeeds, and no call is recorded.
    pub fn hollow() -> Self {
        let runtime = Self::with_events();
        runtime.state.borrow_mut().hollow = true;
        runtime
    }

    /// An empty runtime that answers `GetContainerEvents`.
    pub fn with_events() -> Self {
        let runtime = Self::default();
        runtime.state.borrow_mut().events = true;
        runtime
    }

    /// Makes an image present (as if pulled earlier).
    pub fn add_image(&self, image: &str) {
        self.state.borrow_mut().images.insert(image.to_string());
    }

    /// The sandbox's process dies and the runtime does not notice: the
    /// sandbox stays ready in every answer, and StartContainer in it fails
    /// as runc does when the namespaces to join are gone. Stopping the
    /// sandbox makes it not ready, as a real runtime's stop does.
    pub fn lose_sandbox_process(&self, id: &str) {
        if let Some(sb) = self.state.borrow_mut().sandboxes.get_mut(id) {
            sb.process_lost = true;
        }
    }

    /// Makes every pull of `image` fail until [`Self::allow_pulls`].
    pub fn fail_pulls(&self, image: &str) {
        self.state
            .borrow_mut()
            .failing_pulls
            .insert(image.to_string());
    }

    /// Lets pulls of `image` succeed again.
    pub fn allow_pulls(&self, image: &str) {
        self.state.borrow_mut().failing_pulls.remove(image);
    }

    /// `ImageFsInfo` names `dir` as the image filesystem's mountpoint.
    pub fn set_image_fs(&self, dir: &str) {
        self.state.borrow_mut().image_fs = Some(dir.to_string());
    }

    /// The running container `id` exits with `code`.
    pub fn exit(&self, id: &str, code: i32) {
        self.state.borrow_mut().stop(id, code);
    }

    /// Sets an annotation of container `id`, as if it had been created
    /// with it (e.g. by an earlier picolet).
    pub fn annotate(&self, id: &str, key: &str, value: &str) {
        if let Some(c) = self.state.borrow_mut().containers.get_mut(id) {
            c.config.annotations.insert(key.into(), value.into());
        }
    }

    /// The runtime restarted: the connection count changes, and its event
    /// streams end.
    pub fn restart(&self) {
        let mut s = self.state.borrow_mut();
        s.connects += 1;
        s.subscribers.clear();
    }

    /// Every container, oldest first.
    pub fn containers(&self) -> Vec<MemoryContainer> {
        let mut v: Vec<_> = self.state.borrow().containers.values().cloned().collect();
        v.sort_by_key(|c| c.created_at);
        v
    }

    /// The IDs of every sandbox, ready or not.
    pub fn sandbox_ids(&self) -> Vec<String> {
        self.state.borrow().sandboxes.keys().cloned().collect()
    }

    /// The CRI calls made so far, by request name (`CreateContainer`, ...).
    pub fn calls(&self) -> Vec<&'static str> {
        self.state.borrow().calls.clone()
    }

    /// Forgets the recorded calls.
    pub fn clear_calls(&self) {
        self.state.borrow_mut().calls.clear();
    }

    fn record(&self, op: &'static str) -> std::cell::RefMut<'_, State> {
        let mut s = self.state.borrow_mut();
        if !s.hollow {
            s.calls.push(op);
        }
        s
    }

    fn container_of(s: &State, c: &MemoryContainer) -> api::Container {
        let _ = s;
        api::Container {
            id: c.id.clone(),
            pod_sandbox_id: c.sandbox_id.clone(),
            metadata: c.config.metadata.clone(),
            image: c.config.image.clone(),
            image_ref: c
                .config
                .image
                .as_ref()
                .map(|i| i.image.clone())
                .unwrap_or_default(),
            state: c.state as i32,
            created_at: c.created_at,
            labels: c.config.labels.clone(),
            annotations: c.config.annotations.clone(),
            image_id: String::new(),
        }
    }
}

impl RuntimeService for MemoryRuntime {
    async fn version(&self, _req: api::VersionRequest) -> Result<api::VersionResponse, CriError> {
        self.record("Version");
        Ok(api::VersionResponse {
            version: "0.1.0".into(),
            runtime_name: "memory".into(),
            runtime_version: "0".into(),
            runtime_api_version: "v1".into(),
        })
    }

    async fn run_pod_sandbox(
        &self,
        req: api::RunPodSandboxRequest,
    ) -> Result<api::RunPodSandboxResponse, CriError> {
        let mut s = self.record("RunPodSandbox");
        let id = s.id("sb");
        let created_at = s.stamp();
        let ip = format!("10.88.0.{}", s.next_id % 250 + 2);
        s.sandboxes.insert(
            id.clone(),
            Sandbox {
                config: req.config.unwrap_or_default(),
                ready: true,
                process_lost: false,
                created_at,
                ip,
            },
        );
        s.emit(&id, api::ContainerEventType::ContainerCreatedEvent);
        s.emit(&id, api::ContainerEventType::ContainerStartedEvent);
        Ok(api::RunPodSandboxResponse { pod_sandbox_id: id })
    }

    async fn stop_pod_sandbox(
        &self,
        req: api::StopPodSandboxRequest,
    ) -> Result<api::StopPodSandboxResponse, CriError> {
        let mut s = self.record("StopPodSandbox");
        let Some(sb) = s.sandboxes.get_mut(&req.pod_sandbox_id) else {
            return Err(not_found("StopPodSandbox", &req.pod_sandbox_id));
        };
        let was_ready = std::mem::replace(&mut sb.ready, false);
        if was_ready {
            s.emit(
                &req.pod_sandbox_id,
                api::ContainerEventType::ContainerStoppedEvent,
            );
        }
        let ids = s.container_ids_in(&req.pod_sandbox_id);
        for id in ids {
            s.stop(&id, 137);
        }
        Ok(api::StopPodSandboxResponse {})
    }

    async fn remove_pod_sandbox(
        &self,
        req: api::RemovePodSandboxRequest,
    ) -> Result<api::RemovePodSandboxResponse, CriError> {
        let mut s = self.record("RemovePodSandbox");
        if s.sandboxes.remove(&req.pod_sandbox_id).is_none() {
            return Err(not_found("RemovePodSandbox", &req.pod_sandbox_id));
        }
        let gone = s.container_ids_in(&req.pod_sandbox_id);
        for id in gone.iter().chain([&req.pod_sandbox_id]) {
            s.containers.remove(id);
            s.emit(id, api::ContainerEventType::ContainerDeletedEvent);
        }
        Ok(api::RemovePodSandboxResponse {})
    }

    async fn pod_sandbox_status(
        &self,
        req: api::PodSandboxStatusRequest,
    ) -> Result<api::PodSandboxStatusResponse, CriError> {
        let s = self.record("PodSandboxStatus");
        let Some(sb) = s.sandboxes.get(&req.pod_sandbox_id) else {
            return Err(not_found("PodSandboxStatus", &req.pod_sandbox_id));
        };
        Ok(api::PodSandboxStatusResponse {
            status: Some(api::PodSandboxStatus {
                id: req.pod_sandbox_id.clone(),
                metadata: sb.config.metadata.clone(),
                state: if sb.ready {
                    api::PodSandboxState::SandboxReady
                } else {
                    api::PodSandboxState::SandboxNotready
                } as i32,
                created_at: sb.created_at,
                network: Some(api::PodSandboxNetworkStatus {
                    ip: sb.ip.clone(),
                    additional_ips: Vec::new(),
                }),
                labels: sb.config.labels.clone(),
                annotations: sb.config.annotations.clone(),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    async fn list_pod_sandbox(
        &self,
        req: api::ListPodSandboxRequest,
    ) -> Result<api::ListPodSandboxResponse, CriError> {
        let s = self.record("ListPodSandbox");
        let filter = req.filter.unwrap_or_default();
        let items = s
            .sandboxes
            .iter()
            .filter(|(id, _)| filter.id.is_empty() || **id == filter.id)
            .filter(|(_, sb)| labels_match(&filter.label_selector, &sb.config.labels))
            .map(|(id, sb)| api::PodSandbox {
                id: id.clone(),
                metadata: sb.config.metadata.clone(),
                state: if sb.ready {
                    api::PodSandboxState::SandboxReady
                } else {
                    api::PodSandboxState::SandboxNotready
                } as i32,
                created_at: sb.created_at,
                labels: sb.config.labels.clone(),
                annotations: sb.config.annotations.clone(),
                runtime_handler: String::new(),
            })
            .collect();
        Ok(api::ListPodSandboxResponse { items })
    }

    async fn create_container(
        &self,
        req: api::CreateContainerRequest,
    ) -> Result<api::CreateContainerResponse, CriError> {
        let mut s = self.record("CreateContainer");
        let op = "CreateContainer";
        match s.sandboxes.get(&req.pod_sandbox_id) {
            None => return Err(not_found(op, &req.pod_sandbox_id)),
            Some(sb) if !sb.ready => {
                return Err(failed(
                    op,
                    format!("sandbox {} is not ready", req.pod_sandbox_id),
                ))
            }
            Some(_) => {}
        }
        let config = req.config.unwrap_or_default();
        let image = config
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .unwrap_or_default();
        // The agent creates from the image ID (`sha256:<name>` here).
        let name = image.strip_prefix("sha256:").unwrap_or(&image);
        if !s.images.contains(name) {
            return Err(not_found(op, &format!("image {image}")));
        }
        let id = s.id("ct");
        let created_at = s.stamp();
        s.containers.insert(
            id.clone(),
            MemoryContainer {
                id: id.clone(),
                sandbox_id: req.pod_sandbox_id,
                config,
                state: api::ContainerState::ContainerCreated,
                created_at,
                started_at: 0,
                finished_at: 0,
                exit_code: 0,
            },
        );
        s.emit(&id, api::ContainerEventType::ContainerCreatedEvent);
        Ok(api::CreateContainerResponse { container_id: id })
    }

    async fn start_container(
        &self,
        req: api::StartContainerRequest,
    ) -> Result<api::StartContainerResponse, CriError> {
        let mut s = self.record("StartContainer");
        let at = s.stamp();
        let Some(c) = s.containers.get_mut(&req.container_id) else {
            return Err(not_found("StartContainer", &req.container_id));
        };
        if c.state != api::ContainerState::ContainerCreated {
            return Err(failed(
                "StartContainer",
                format!("container {} is not created", req.container_id),
            ));
        }
        let sandbox_id = c.sandbox_id.clone();
        if s.sandboxes
            .get(&sandbox_id)
            .is_some_and(|sb| sb.process_lost)
        {
            return Err(failed(
                "StartContainer",
                format!(
                    "failed to create containerd task: OCI runtime create failed: runc create \
                     failed: unable to start container process: error during container init: \
                     namespace path: lstat /proc/4242/ns/ipc: no such file or directory \
                     (sandbox {sandbox_id})"
                ),
            ));
        }
        let Some(c) = s.containers.get_mut(&req.container_id) else {
            return Err(not_found("StartContainer", &req.container_id));
        };
        c.state = api::ContainerState::ContainerRunning;
        c.started_at = at;
        s.emit(
            &req.container_id,
            api::ContainerEventType::ContainerStartedEvent,
        );
        Ok(api::StartContainerResponse {})
    }

    async fn stop_container(
        &self,
        req: api::StopContainerRequest,
    ) -> Result<api::StopContainerResponse, CriError> {
        let mut s = self.record("StopContainer");
        if !s.containers.contains_key(&req.container_id) {
            return Err(not_found("StopContainer", &req.container_id));
        }
        s.stop(&req.container_id, 137);
        Ok(api::StopContainerResponse {})
    }

    async fn remove_container(
        &self,
        req: api::RemoveContainerRequest,
    ) -> Result<api::RemoveContainerResponse, CriError> {
        let mut s = self.record("RemoveContainer");
        match s.containers.remove(&req.container_id) {
            Some(_) => {
                s.emit(
                    &req.container_id,
                    api::ContainerEventType::ContainerDeletedEvent,
                );
                Ok(api::RemoveContainerResponse {})
            }
            None => Err(not_found("RemoveContainer", &req.container_id)),
        }
    }

    async fn list_containers(
        &self,
        req: api::ListContainersRequest,
    ) -> Result<api::ListContainersResponse, CriError> {
        let s = self.record("ListContainers");
        let f = req.filter.unwrap_or_default();
        let containers = s
            .containers
            .values()
            .filter(|c| f.id.is_empty() || c.id == f.id)
            .filter(|c| f.pod_sandbox_id.is_empty() || c.sandbox_id == f.pod_sandbox_id)
            .filter(|c| labels_match(&f.label_selector, &c.config.labels))
            .map(|c| Self::container_of(&s, c))
            .collect();
        Ok(api::ListContainersResponse { containers })
    }

    /// The encoded answer of the last call, while nothing listed changed.
    async fn list_containers_raw(&self) -> Result<super::raw::RawContainers, CriError> {
        let mut s = self.record("ListContainers");
        let key = s.listing_key();
        if let Some((k, raw)) = &s.listing {
            if *k == key {
                return Ok(raw.clone());
            }
        }
        let containers = s
            .containers
            .values()
            .map(|c| Self::container_of(&s, c))
            .collect();
        let raw =
            super::raw::RawContainers::from_response(&api::ListContainersResponse { containers });
        s.listing = Some((key, raw.clone()));
        Ok(raw)
    }

    async fn container_status(
        &self,
        req: api::ContainerStatusRequest,
    ) -> Result<api::ContainerStatusResponse, CriError> {
        let s = self.record("ContainerStatus");
        let Some(c) = s.containers.get(&req.container_id) else {
            return Err(not_found("ContainerStatus", &req.container_id));
        };
        let listed = Self::container_of(&s, c);
        Ok(api::ContainerStatusResponse {
            status: Some(api::ContainerStatus {
                id: c.id.clone(),
                metadata: c.config.metadata.clone(),
                state: c.state as i32,
                created_at: c.created_at,
                started_at: c.started_at,
                finished_at: c.finished_at,
                exit_code: c.exit_code,
                image: listed.image,
                image_ref: listed.image_ref,
                reason: if c.state == api::ContainerState::ContainerExited {
                    if c.exit_code == 0 {
                        "Completed"
                    } else {
                        "Error"
                    }
                    .to_string()
                } else {
                    String::new()
                },
                labels: c.config.labels.clone(),
                annotations: c.config.annotations.clone(),
                ..Default::default()
            }),
            info: HashMap::new(),
        })
    }

    async fn reopen_container_log(
        &self,
        req: api::ReopenContainerLogRequest,
    ) -> Result<api::ReopenContainerLogResponse, CriError> {
        let s = self.record("ReopenContainerLog");
        match s.containers.get(&req.container_id) {
            Some(_) => Ok(api::ReopenContainerLogResponse {}),
            None => Err(not_found("ReopenContainerLog", &req.container_id)),
        }
    }

    async fn image_status(
        &self,
        req: api::ImageStatusRequest,
    ) -> Result<api::ImageStatusResponse, CriError> {
        let s = self.record("ImageStatus");
        let name = req.image.map(|i| i.image).unwrap_or_default();
        Ok(api::ImageStatusResponse {
            image: s.images.contains(&name).then(|| api::Image {
                id: format!("sha256:{name}"),
                repo_tags: vec![name.clone()],
                ..Default::default()
            }),
            info: HashMap::new(),
        })
    }

    async fn pull_image(
        &self,
        req: api::PullImageRequest,
    ) -> Result<api::PullImageResponse, CriError> {
        let mut s = self.record("PullImage");
        let name = req.image.map(|i| i.image).unwrap_or_default();
        if s.failing_pulls.contains(&name) {
            return Err(CriError::Status {
                op: "PullImage",
                status: tonic::Status::unknown(format!("failed to resolve reference {name:?}")),
            });
        }
        s.images.insert(name.clone());
        Ok(api::PullImageResponse {
            image_ref: format!("sha256:{name}"),
        })
    }

    async fn list_images(
        &self,
        _req: api::ListImagesRequest,
    ) -> Result<api::ListImagesResponse, CriError> {
        let s = self.record("ListImages");
        Ok(api::ListImagesResponse {
            images: s
                .images
                .iter()
                .map(|name| api::Image {
                    id: format!("sha256:{name}"),
                    repo_tags: vec![name.clone()],
                    size: 1 << 20,
                    ..Default::default()
                })
                .collect(),
        })
    }

    async fn remove_image(
        &self,
        req: api::RemoveImageRequest,
    ) -> Result<api::RemoveImageResponse, CriError> {
        let mut s = self.record("RemoveImage");
        let name = req.image.map(|i| i.image).unwrap_or_default();
        let name = name.strip_prefix("sha256:").unwrap_or(&name).to_string();
        s.images.remove(&name);
        Ok(api::RemoveImageResponse {})
    }

    async fn image_fs_info(
        &self,
        _req: api::ImageFsInfoRequest,
    ) -> Result<api::ImageFsInfoResponse, CriError> {
        let s = self.record("ImageFsInfo");
        let image_filesystems = s
            .image_fs
            .iter()
            .map(|dir| api::FilesystemUsage {
                fs_id: Some(api::FilesystemIdentifier {
                    mountpoint: dir.clone(),
                }),
                ..Default::default()
            })
            .collect();
        Ok(api::ImageFsInfoResponse {
            image_filesystems,
            ..Default::default()
        })
    }

    async fn get_container_events(&self) -> Result<ContainerEvents, CriError> {
        let mut s = self.record("GetContainerEvents");
        if !s.events {
            return Err(CriError::Status {
                op: "GetEventsRequest",
                status: tonic::Status::unimplemented("GetContainerEvents"),
            });
        }
        let (tx, rx) = smol::channel::bounded(EVENT_BACKLOG);
        s.subscribers.push(tx);
        Ok(ContainerEvents::local(rx))
    }

    fn connects(&self) -> u64 {
        self.state.borrow().connects
    }

    fn handlers_succeed(&self) -> bool {
        self.state.borrow().hollow
    }
}

#[cfg(test)]
mod tests;
