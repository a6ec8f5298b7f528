//! The label and annotation keys picolet reads and writes, in one place.
//!
//! Two families, both with kubelet's exact spelling:
//! - the CRI labels and annotations kubelet puts on sandboxes and
//!   containers (`io.kubernetes.*`, kubelet's `types/labels.go` and
//!   `kuberuntime/labels.go`): [`crate::pod::spec`] writes them, the agent
//!   reads them back from ListPodSandbox/ListContainers to find a pod's
//!   containers after a restart;
//! - the API annotations a pod source sets on a pod (`kubernetes.io/config.*`).
//!
//! Constants only; no logic, no imports.

/// Label carrying the pod name on sandboxes and containers.
pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
/// Label carrying the pod namespace on sandboxes and containers.
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
/// Label carrying the pod UID on sandboxes and containers: how the agent
/// finds a pod's sandboxes and containers, also after a restart.
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
/// Label carrying the container name on containers.
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
/// Annotation: [`crate::pod::spec::container_hash`] of the spec the container
/// was created from.
pub const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";
/// Annotation: the restart count (= CRI attempt) the container was created with.
pub const CONTAINER_RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
/// Annotation: the container's terminationMessagePath.
pub const CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePath";
/// Annotation: the container's terminationMessagePolicy.
pub const CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePolicy";
/// Annotation: JSON of the container's preStop handler, when it has one.
pub const CONTAINER_PRE_STOP_HANDLER_ANNOTATION: &str = "io.kubernetes.container.preStopHandler";
/// Annotation: JSON of the container's ports, when it has any.
pub const CONTAINER_PORTS_ANNOTATION: &str = "io.kubernetes.container.ports";
/// Annotation: the pod's terminationGracePeriodSeconds. The agent reads it
/// back to stop an orphan (a pod no source wants) with its own grace period.
pub const POD_TERMINATION_GRACE_PERIOD_ANNOTATION: &str =
    "io.kubernetes.pod.terminationGracePeriod";
/// Annotation: the pod's deletionGracePeriodSeconds, when set.
pub const POD_DELETION_GRACE_PERIOD_ANNOTATION: &str = "io.kubernetes.pod.deletionGracePeriod";

/// Pod annotation naming the source a pod came from (`"file"` or `"api"`).
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
/// Pod annotation holding the pod's content hash (for file pods: its UID).
pub const CONFIG_HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
