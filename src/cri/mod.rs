//! The CRI client: the generated `runtime.v1` types and [`Runtime`], a thin
//! client that puts a deadline on every call and classifies errors, and
//! [`RuntimeService`], the trait the agent calls the runtime through
//! (`service.rs`; `Runtime` implements it, and so does the in-memory
//! runtime of `in_memory.rs`, built only for tests and the `hollow` feature).
//!
//! This module knows CRI only: it must not know pods, the agent or policy.
//!
//! The `.proto` in `proto/runtime/v1/` is our own subset of cri-api (only the
//! messages picolet uses; field numbers are the public ones). tonic generates
//! the client stubs only; the transport is [`channel::Channel`].
//!
//! Deadlines follow kubelet: every call gets `runtimeRequestTimeout`;
//! `StopContainer` gets the grace period on top, `ExecSync` the command's
//! timeout on top, and `PullImage` a long fixed ceiling.

pub mod channel;
#[cfg(any(test, feature = "hollow"))]
pub mod in_memory;
pub mod raw;
mod service;

#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod api {
    tonic::include_proto!("runtime.v1");
}

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use api::image_service_client::ImageServiceClient;
use api::runtime_service_client::RuntimeServiceClient;
pub use channel::Channel;
pub use raw::{Fingerprint, RawContainers};
pub use service::{ContainerEvents, RuntimeService};

/// How long an image pull may take before it is abandoned.
pub const PULL_DEADLINE: Duration = Duration::from_secs(15 * 60);

/// A failed CRI call, naming the operation.
#[derive(Debug, thiserror::Error)]
pub enum CriError {
    #[error("CRI {op}: deadline of {after:?} exceeded")]
    DeadlineExceeded { op: &'static str, after: Duration },
    #[error("CRI {op}: {}: {}", .status.code(), .status.message())]
    Status {
        op: &'static str,
        status: tonic::Status,
    },
}

impl CriError {
    /// The gRPC code (DeadlineExceeded for our own deadline).
    pub fn code(&self) -> tonic::Code {
        match self {
            CriError::DeadlineExceeded { .. } => tonic::Code::DeadlineExceeded,
            CriError::Status { status, .. } => status.code(),
        }
    }

    /// NotFound: for stop/remove this means "already done" (containerd
    /// answers NotFound, CRI-O answers OK).
    pub fn is_not_found(&self) -> bool {
        self.code() == tonic::Code::NotFound
    }

    /// The runtime could not be reached at all (socket gone, restarting).
    pub fn is_unavailable(&self) -> bool {
        match self {
            CriError::DeadlineExceeded { .. } => false,
            CriError::Status { status, .. } => {
                status.code() == tonic::Code::Unavailable
                    || std::error::Error::source(status)
                        .map(|s| {
                            s.is::<channel::ChannelError>() || s.to_string().contains("connect")
                        })
                        .unwrap_or(false)
            }
        }
    }

    /// The message the runtime gave (for container status reasons).
    pub fn message(&self) -> String {
        match self {
            CriError::DeadlineExceeded { after, .. } => format!("deadline of {after:?} exceeded"),
            CriError::Status { status, .. } => status.message().to_string(),
        }
    }
}

/// True when a runtime's error says a container could not join its pod
/// sandbox's namespaces because the sandbox's process is gone: runc's
/// `namespace path: lstat /proc/<pid>/ns/ipc: no such file or directory`,
/// crun's `cannot open '/proc/<pid>/ns/net': No such file or directory`.
/// The sandbox is dead whatever the runtime's sandbox state says (a
/// runtime that missed its pause's exit keeps it ready), so no container
/// will ever start in it.
pub fn sandbox_namespaces_gone(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("no such file or directory")
        && lower.split("/proc/").skip(1).any(|rest| {
            let pid_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            pid_len > 0 && rest[pid_len..].starts_with("/ns/")
        })
}

/// The directories an `ImageFsInfo` answer names as the image
/// filesystems' mountpoints, in its order; a name that is not an absolute
/// path names no place on this host and is skipped.
pub fn image_fs_mountpoints(info: &api::ImageFsInfoResponse) -> impl Iterator<Item = PathBuf> + '_ {
    info.image_filesystems
        .iter()
        .filter_map(|f| f.fs_id.as_ref())
        .map(|id| PathBuf::from(&id.mountpoint))
        .filter(|p| p.is_absolute())
}

/// Parses a `containerRuntimeEndpoint` (`unix:///path` or a bare path).
pub fn socket_path(endpoint: &str) -> Option<PathBuf> {
    if let Some(p) = endpoint.strip_prefix("unix://") {
        return (p.starts_with('/')).then(|| PathBuf::from(p));
    }
    endpoint.starts_with('/').then(|| PathBuf::from(endpoint))
}

fn origin() -> http::Uri {
    http::Uri::from_static("http://localhost")
}

/// A CRI client for both the runtime and the image service.
#[derive(Clone)]
pub struct Runtime {
    channel: Channel,
    timeout: Duration,
    /// Calls made, per [`OPERATIONS`] entry (shared by every clone).
    calls: std::rc::Rc<[std::cell::Cell<u64>; OPERATIONS.len()]>,
}

/// Each CRI request picolet sends and kubelet's name for it in
/// `kubelet_runtime_operations_total{operation_type}`.
pub const OPERATIONS: [(&str, &str); 24] = [
    ("VersionRequest", "version"),
    ("StatusRequest", "status"),
    ("RunPodSandboxRequest", "run_podsandbox"),
    ("StopPodSandboxRequest", "stop_podsandbox"),
    ("RemovePodSandboxRequest", "remove_podsandbox"),
    ("PodSandboxStatusRequest", "podsandbox_status"),
    ("ListPodSandboxRequest", "list_podsandbox"),
    ("CreateContainerRequest", "create_container"),
    ("StartContainerRequest", "start_container"),
    ("StopContainerRequest", "stop_container"),
    ("RemoveContainerRequest", "remove_container"),
    ("ListContainersRequest", "list_containers"),
    ("ContainerStatusRequest", "container_status"),
    ("ReopenContainerLogRequest", "reopen_container_log"),
    ("ListContainerStatsRequest", "list_container_stats"),
    ("ExecSyncRequest", "exec_sync"),
    ("ExecRequest", "exec"),
    ("AttachRequest", "attach"),
    ("PortForwardRequest", "port_forward"),
    ("ListImagesRequest", "list_images"),
    ("ImageStatusRequest", "image_status"),
    ("PullImageRequest", "pull_image"),
    ("RemoveImageRequest", "remove_image"),
    ("ImageFsInfoRequest", "image_fs_info"),
];

macro_rules! rpc {
    ($(#[$doc:meta])* $name:ident, $client:ident, $req:ident, $resp:ident) => {
        $(#[$doc])*
        pub async fn $name(&self, req: api::$req) -> Result<api::$resp, CriError> {
            self.call(stringify!($req), self.timeout, |ch| async move {
                $client::with_origin(ch, origin()).$name(req).await
            })
            .await
        }
    };
}

impl Runtime {
    /// A client for the runtime at `socket`, with `timeout` per call.
    pub fn new(socket: PathBuf, timeout: Duration) -> Self {
        Runtime {
            channel: Channel::new(socket),
            timeout,
            calls: Default::default(),
        }
    }

    /// The calls made so far by kubelet's operation name, in
    /// [`OPERATIONS`] order.
    pub fn operations(&self) -> Vec<(&'static str, u64)> {
        OPERATIONS
            .iter()
            .zip(self.calls.iter())
            .map(|((_, name), n)| (*name, n.get()))
            .collect()
    }

    /// The underlying channel (for reconnect statistics).
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    async fn call<F, Fut, R>(
        &self,
        op: &'static str,
        deadline: Duration,
        f: F,
    ) -> Result<R, CriError>
    where
        F: FnOnce(Channel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        if let Some(i) = OPERATIONS.iter().position(|(req, _)| *req == op) {
            self.calls[i].set(self.calls[i].get() + 1);
        }
        let began = std::time::Instant::now();
        let out = crate::rt::timeout(deadline, f(self.channel.clone())).await;
        // The per-call profile of issue #13 (`-v=6`): where a pod start's
        // time goes, call by call.
        log::trace!("CRI {op}: {} us", began.elapsed().as_micros());
        match out {
            None => Err(CriError::DeadlineExceeded {
                op,
                after: deadline,
            }),
            Some(Ok(r)) => Ok(r.into_inner()),
            Some(Err(status)) => Err(CriError::Status { op, status }),
        }
    }

    rpc!(
        version,
        RuntimeServiceClient,
        VersionRequest,
        VersionResponse
    );
    rpc!(status, RuntimeServiceClient, StatusRequest, StatusResponse);
    rpc!(
        run_pod_sandbox,
        RuntimeServiceClient,
        RunPodSandboxRequest,
        RunPodSandboxResponse
    );
    rpc!(
        stop_pod_sandbox,
        RuntimeServiceClient,
        StopPodSandboxRequest,
        StopPodSandboxResponse
    );
    rpc!(
        remove_pod_sandbox,
        RuntimeServiceClient,
        RemovePodSandboxRequest,
        RemovePodSandboxResponse
    );
    rpc!(
        pod_sandbox_status,
        RuntimeServiceClient,
        PodSandboxStatusRequest,
        PodSandboxStatusResponse
    );
    rpc!(
        list_pod_sandbox,
        RuntimeServiceClient,
        ListPodSandboxRequest,
        ListPodSandboxResponse
    );
    rpc!(
        create_container,
        RuntimeServiceClient,
        CreateContainerRequest,
        CreateContainerResponse
    );
    rpc!(
        start_container,
        RuntimeServiceClient,
        StartContainerRequest,
        StartContainerResponse
    );
    rpc!(
        remove_container,
        RuntimeServiceClient,
        RemoveContainerRequest,
        RemoveContainerResponse
    );
    rpc!(
        list_containers,
        RuntimeServiceClient,
        ListContainersRequest,
        ListContainersResponse
    );
    rpc!(
        container_status,
        RuntimeServiceClient,
        ContainerStatusRequest,
        ContainerStatusResponse
    );
    rpc!(
        reopen_container_log,
        RuntimeServiceClient,
        ReopenContainerLogRequest,
        ReopenContainerLogResponse
    );
    rpc!(
        list_container_stats,
        RuntimeServiceClient,
        ListContainerStatsRequest,
        ListContainerStatsResponse
    );
    rpc!(
        /// Exec: the streaming URL of an exec session.
        exec,
        RuntimeServiceClient,
        ExecRequest,
        ExecResponse
    );
    rpc!(
        /// Attach: the streaming URL of an attach session.
        attach,
        RuntimeServiceClient,
        AttachRequest,
        AttachResponse
    );
    rpc!(
        /// PortForward: the streaming URL of a port-forward session.
        port_forward,
        RuntimeServiceClient,
        PortForwardRequest,
        PortForwardResponse
    );
    rpc!(
        list_images,
        ImageServiceClient,
        ListImagesRequest,
        ListImagesResponse
    );
    rpc!(
        image_status,
        ImageServiceClient,
        ImageStatusRequest,
        ImageStatusResponse
    );
    rpc!(
        remove_image,
        ImageServiceClient,
        RemoveImageRequest,
        RemoveImageResponse
    );
    rpc!(
        image_fs_info,
        ImageServiceClient,
        ImageFsInfoRequest,
        ImageFsInfoResponse
    );

    /// ListContainers with no filter, answered as undecoded bytes (the
    /// PLEG's cheap relist, [`raw`]).
    pub async fn list_containers_raw(&self) -> Result<RawContainers, CriError> {
        self.call("ListContainersRequest", self.timeout, |ch| async move {
            let mut grpc = tonic::client::Grpc::with_origin(ch, origin());
            let path =
                http::uri::PathAndQuery::from_static("/runtime.v1.RuntimeService/ListContainers");
            let req = tonic::Request::new(api::ListContainersRequest::default());
            grpc.unary(req, path, raw::RawCodec).await
        })
        .await
        .map(RawContainers)
    }

    /// GetContainerEvents: the stream of container lifecycle events, which
    /// lasts until either side ends it. No deadline: a runtime written
    /// with grpc-go sends the answer's headers with the first event, which
    /// may come hours later, so this returns only then. Runtimes without it
    /// (containerd 1.6) answer Unimplemented at once.
    pub async fn get_container_events(&self) -> Result<ContainerEvents, CriError> {
        RuntimeServiceClient::with_origin(self.channel.clone(), origin())
            .get_container_events(api::GetEventsRequest {})
            .await
            .map(|r| ContainerEvents::new(r.into_inner()))
            .map_err(|status| CriError::Status {
                op: "GetEventsRequest",
                status,
            })
    }

    /// StopContainer; the deadline is the grace period plus the call timeout.
    pub async fn stop_container(
        &self,
        req: api::StopContainerRequest,
    ) -> Result<api::StopContainerResponse, CriError> {
        let deadline = self.timeout + Duration::from_secs(req.timeout.max(0) as u64);
        self.call("StopContainerRequest", deadline, |ch| async move {
            RuntimeServiceClient::with_origin(ch, origin())
                .stop_container(req)
                .await
        })
        .await
    }

    /// ExecSync; the deadline is the command's timeout plus the call timeout.
    pub async fn exec_sync(
        &self,
        req: api::ExecSyncRequest,
    ) -> Result<api::ExecSyncResponse, CriError> {
        let deadline = self.timeout + Duration::from_secs(req.timeout.max(0) as u64);
        self.call("ExecSyncRequest", deadline, |ch| async move {
            RuntimeServiceClient::with_origin(ch, origin())
                .exec_sync(req)
                .await
        })
        .await
    }

    /// PullImage, with [`PULL_DEADLINE`].
    pub async fn pull_image(
        &self,
        req: api::PullImageRequest,
    ) -> Result<api::PullImageResponse, CriError> {
        self.call(
            "PullImageRequest",
            PULL_DEADLINE.max(self.timeout),
            |ch| async move {
                ImageServiceClient::with_origin(ch, origin())
                    .pull_image(req)
                    .await
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_fs_mountpoints_are_the_absolute_ones_in_order() {
        let fs = |m: &str| api::FilesystemUsage {
            fs_id: Some(api::FilesystemIdentifier {
                mountpoint: m.into(),
            }),
            ..Default::default()
        };
        let info = api::ImageFsInfoResponse {
            image_filesystems: vec![
                fs("/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"),
                fs(""),
                fs("relative/dir"),
                api::FilesystemUsage::default(),
                fs("/mnt/images"),
            ],
            ..Default::default()
        };
        let dirs: Vec<PathBuf> = image_fs_mountpoints(&info).collect();
        assert_eq!(
            dirs,
            [
                PathBuf::from("/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"),
                PathBuf::from("/mnt/images"),
            ]
        );
    }

    #[test]
    fn a_missing_sandbox_namespace_is_told_from_other_start_errors() {
        let gone = [
            "failed to create containerd task: failed to create shim task: OCI runtime \
             create failed: runc create failed: unable to start container process: error \
             during container init: namespace path: lstat /proc/4242/ns/ipc: no such file \
             or directory: unknown",
            "container create failed: cannot open `/proc/77/ns/net`: No such file or directory",
        ];
        for m in gone {
            assert!(sandbox_namespaces_gone(m), "{m}");
        }
        let other = [
            "failed to create containerd task: exec: \"nope\": executable file not found in $PATH",
            "open /proc/self/fd/3: no such file or directory",
            "lstat /proc/4242/ns/ipc: permission denied",
            "context deadline exceeded",
        ];
        for m in other {
            assert!(!sandbox_namespaces_gone(m), "{m}");
        }
    }

    #[test]
    fn unix_endpoints_and_bare_paths_give_a_socket_path() {
        assert_eq!(
            socket_path("unix:///run/containerd/containerd.sock"),
            Some(PathBuf::from("/run/containerd/containerd.sock"))
        );
        assert_eq!(
            socket_path("/run/crio/crio.sock"),
            Some(PathBuf::from("/run/crio/crio.sock"))
        );
        assert_eq!(socket_path("tcp://1.2.3.4:5"), None);
        assert_eq!(socket_path("unix://relative"), None);
    }

    #[test]
    fn a_call_to_a_missing_socket_fails_as_unavailable_and_then_backs_off() {
        let rt = Runtime::new(
            PathBuf::from("/nonexistent/picolet-test.sock"),
            Duration::from_secs(2),
        );
        let e = crate::rt::block_on(rt.version(api::VersionRequest::default())).unwrap_err();
        assert!(e.is_unavailable(), "{e}");
        let e2 = crate::rt::block_on(rt.version(api::VersionRequest::default())).unwrap_err();
        assert!(e2.is_unavailable(), "{e2}");
        assert!(format!(
            "{:?}",
            std::error::Error::source(match &e2 {
                CriError::Status { status, .. } => status,
                _ => unreachable!(),
            })
        )
        .contains("BackingOff"));
    }
}
