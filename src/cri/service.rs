//! [`RuntimeService`]: the CRI calls the agent makes, as a trait, so that
//! the agent's sync logic runs against the real client ([`super::Runtime`])
//! in the binary and against an in-memory runtime ([`super::in_memory`]) in
//! unit tests and, later, in hollow-node mode.
//!
//! Narrow on purpose: only what pod sync, PLEG, GC, image pulls and log
//! rotation call. Requests and answers are the generated `runtime.v1`
//! messages, so an implementation speaks CRI exactly and the agent's code
//! is the same for both. Single-threaded: no `Send` bound anywhere.
//!
//! This module knows CRI messages only; it must not know pods, the agent or
//! the executor.

use super::{api, CriError, RawContainers, Runtime};

/// The stream of a `GetContainerEvents` call.
pub struct ContainerEvents(Source);

/// Where a [`ContainerEvents`] stream's events come from.
enum Source {
    /// A runtime's gRPC stream.
    Grpc(Box<tonic::Streaming<api::ContainerEventResponse>>),
    /// The in-memory runtime's own events (tests, hollow nodes).
    #[cfg(any(test, feature = "hollow"))]
    Local(smol::channel::Receiver<api::ContainerEventResponse>),
    /// A stream that ended.
    Ended,
}

impl ContainerEvents {
    pub(super) fn new(s: tonic::Streaming<api::ContainerEventResponse>) -> Self {
        ContainerEvents(Source::Grpc(Box::new(s)))
    }

    /// The events sent on `rx`, ending when every sender is gone.
    #[cfg(any(test, feature = "hollow"))]
    pub(super) fn local(rx: smol::channel::Receiver<api::ContainerEventResponse>) -> Self {
        ContainerEvents(Source::Local(rx))
    }

    /// A stream that ends at once (a runtime with nothing to say).
    pub fn ended() -> Self {
        ContainerEvents(Source::Ended)
    }

    /// The next event; `Ok(None)` when the runtime ended the stream.
    pub async fn next(&mut self) -> Result<Option<api::ContainerEventResponse>, CriError> {
        match &mut self.0 {
            Source::Grpc(s) => s.message().await.map_err(|status| CriError::Status {
                op: "ContainerEventResponse",
                status,
            }),
            #[cfg(any(test, feature = "hollow"))]
            Source::Local(rx) => Ok(rx.recv().await.ok()),
            Source::Ended => Ok(None),
        }
    }
}

/// The CRI runtime and image service calls the agent uses.
// `async fn` in a public trait: callers cannot add a `Send` bound to the
// futures, which picolet never needs (one thread, `LocalExecutor`).
#[allow(async_fn_in_trait)]
pub trait RuntimeService: 'static {
    async fn version(&self, req: api::VersionRequest) -> Result<api::VersionResponse, CriError>;
    async fn run_pod_sandbox(
        &self,
        req: api::RunPodSandboxRequest,
    ) -> Result<api::RunPodSandboxResponse, CriError>;
    async fn stop_pod_sandbox(
        &self,
        req: api::StopPodSandboxRequest,
    ) -> Result<api::StopPodSandboxResponse, CriError>;
    async fn remove_pod_sandbox(
        &self,
        req: api::RemovePodSandboxRequest,
    ) -> Result<api::RemovePodSandboxResponse, CriError>;
    async fn pod_sandbox_status(
        &self,
        req: api::PodSandboxStatusRequest,
    ) -> Result<api::PodSandboxStatusResponse, CriError>;
    async fn list_pod_sandbox(
        &self,
        req: api::ListPodSandboxRequest,
    ) -> Result<api::ListPodSandboxResponse, CriError>;
    async fn create_container(
        &self,
        req: api::CreateContainerRequest,
    ) -> Result<api::CreateContainerResponse, CriError>;
    async fn start_container(
        &self,
        req: api::StartContainerRequest,
    ) -> Result<api::StartContainerResponse, CriError>;
    async fn stop_container(
        &self,
        req: api::StopContainerRequest,
    ) -> Result<api::StopContainerResponse, CriError>;
    async fn remove_container(
        &self,
        req: api::RemoveContainerRequest,
    ) -> Result<api::RemoveContainerResponse, CriError>;
    async fn list_containers(
        &self,
        req: api::ListContainersRequest,
    ) -> Result<api::ListContainersResponse, CriError>;
    async fn container_status(
        &self,
        req: api::ContainerStatusRequest,
    ) -> Result<api::ContainerStatusResponse, CriError>;
    async fn reopen_container_log(
        &self,
        req: api::ReopenContainerLogRequest,
    ) -> Result<api::ReopenContainerLogResponse, CriError>;
    async fn image_status(
        &self,
        req: api::ImageStatusRequest,
    ) -> Result<api::ImageStatusResponse, CriError>;
    async fn pull_image(
        &self,
        req: api::PullImageRequest,
    ) -> Result<api::PullImageResponse, CriError>;
    /// Image GC: the images present.
    async fn list_images(
        &self,
        req: api::ListImagesRequest,
    ) -> Result<api::ListImagesResponse, CriError>;
    /// Image GC: removes one image.
    async fn remove_image(
        &self,
        req: api::RemoveImageRequest,
    ) -> Result<api::RemoveImageResponse, CriError>;
    /// Where the runtime keeps its images (imagefs).
    async fn image_fs_info(
        &self,
        req: api::ImageFsInfoRequest,
    ) -> Result<api::ImageFsInfoResponse, CriError>;

    /// ListContainers with no filter, undecoded (the PLEG decodes only
    /// when the fingerprint changed). By default: the decoded answer,
    /// encoded again.
    async fn list_containers_raw(&self) -> Result<RawContainers, CriError> {
        let r = self
            .list_containers(api::ListContainersRequest::default())
            .await?;
        Ok(RawContainers::from_response(&r))
    }

    /// GetContainerEvents. By default the runtime does not have it
    /// (Unimplemented), as containerd 1.6.
    async fn get_container_events(&self) -> Result<ContainerEvents, CriError> {
        Err(CriError::Status {
            op: "GetEventsRequest",
            status: tonic::Status::unimplemented("GetContainerEvents"),
        })
    }

    /// How many times the connection to the runtime was (re)established; a
    /// change means the runtime restarted and every pod is resynced.
    fn connects(&self) -> u64;

    /// The real CRI client, for what still takes it directly (the probe
    /// and hook runners' ExecSync). `None` for a simulated runtime: exec
    /// probes and hooks then report `Unknown`. Goes away once the probe
    /// runners take a `RuntimeService`.
    fn cri(&self) -> Option<&Runtime> {
        None
    }

    /// Whether every probe and hook succeeds without being run: a hollow
    /// node's simulated runtime (`picolet-hollow`), whose containers have
    /// no processes to probe.
    fn handlers_succeed(&self) -> bool {
        false
    }
}

macro_rules! forward {
    ($($name:ident($req:ident) -> $resp:ident;)*) => {
        $(
            async fn $name(&self, req: api::$req) -> Result<api::$resp, CriError> {
                Runtime::$name(self, req).await
            }
        )*
    };
}

impl RuntimeService for Runtime {
    forward! {
        version(VersionRequest) -> VersionResponse;
        run_pod_sandbox(RunPodSandboxRequest) -> RunPodSandboxResponse;
        stop_pod_sandbox(StopPodSandboxRequest) -> StopPodSandboxResponse;
        remove_pod_sandbox(RemovePodSandboxRequest) -> RemovePodSandboxResponse;
        pod_sandbox_status(PodSandboxStatusRequest) -> PodSandboxStatusResponse;
        list_pod_sandbox(ListPodSandboxRequest) -> ListPodSandboxResponse;
        create_container(CreateContainerRequest) -> CreateContainerResponse;
        start_container(StartContainerRequest) -> StartContainerResponse;
        stop_container(StopContainerRequest) -> StopContainerResponse;
        remove_container(RemoveContainerRequest) -> RemoveContainerResponse;
        list_containers(ListContainersRequest) -> ListContainersResponse;
        container_status(ContainerStatusRequest) -> ContainerStatusResponse;
        reopen_container_log(ReopenContainerLogRequest) -> ReopenContainerLogResponse;
        image_status(ImageStatusRequest) -> ImageStatusResponse;
        pull_image(PullImageRequest) -> PullImageResponse;
        list_images(ListImagesRequest) -> ListImagesResponse;
        remove_image(RemoveImageRequest) -> RemoveImageResponse;
        image_fs_info(ImageFsInfoRequest) -> ImageFsInfoResponse;
    }

    async fn list_containers_raw(&self) -> Result<RawContainers, CriError> {
        Runtime::list_containers_raw(self).await
    }

    async fn get_container_events(&self) -> Result<ContainerEvents, CriError> {
        Runtime::get_container_events(self).await
    }

    fn connects(&self) -> u64 {
        self.channel().connects()
    }

    fn cri(&self) -> Option<&Runtime> {
        Some(self)
    }
}
