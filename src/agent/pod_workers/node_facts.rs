//! The node as admission and the container configs see it: its labels
//! (`kubernetes.io/{hostname,os,arch}` plus `--node-labels`, or, once the
//! watch of its Node object said, the labels and taints in the API), its
//! allocatable, and what the host and the runtime support: AppArmor, the
//! hugepage sizes, the swap controller, the supplemental groups policy and
//! user namespaces. The host is read once at start, the runtime once it
//! answers. This room reads and remembers; the rules that use the facts
//! are `pod::admission`, `pod::host_support` and `pod::spec`.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use k8s_openapi::api::core::v1::{Pod, Taint};

use super::PodWorkers;
use crate::config::SwapBehavior;
use crate::cri::{api, RuntimeService};
use crate::pod::accessors::{spec, uid};
use crate::pod::admission::NodeView;
use crate::pod::host_support::HostSupport;
use crate::pod::spec::{hugepage_unit_size, Swap, UserNsMapping};

/// Which cgroup version holds a swap controller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum SwapCgroup {
    /// None: the runtime gets no swap settings.
    #[default]
    None,
    V1,
    V2,
}

/// IDs per pod user namespace, and where the first block starts (kubelet's
/// defaults without a `kubelet` entry in /etc/subuid).
const USER_NS_LENGTH: u32 = 1 << 16;

/// What picolet knows of the node besides the configuration.
#[derive(Debug, Clone, Default)]
pub(super) struct NodeFacts {
    /// AppArmor is enabled on the host.
    pub apparmor: bool,
    /// Hugepage sizes in kubelet's spelling (`2MB`), sorted by file name.
    pub hugepage_sizes: Vec<String>,
    pub swap_cgroup: SwapCgroup,
    /// `SwapTotal` in bytes.
    pub swap_total_bytes: u64,
    /// CPUs this process may use, in millicores (`None`: unknown).
    pub cpu_millis: Option<u64>,
    /// The runtime reports the supplemental groups policy feature.
    pub supplemental_groups_policy: bool,
    /// The runtime's default handler reports user-namespace support.
    pub user_namespaces: bool,
    /// The user-namespace block of each pod given one, by pod UID (block
    /// n maps host IDs from `(n + 1) * 65536`).
    pub user_ns_blocks: Vec<(String, u32)>,
    /// The labels and taints of the node's Node object, as its watch last
    /// said (`None` standalone, or before the API server or the cache said
    /// anything: then the node's own labels only, and no taints).
    pub api_node: Option<(BTreeMap<String, String>, Vec<Taint>)>,
    /// The Node's `spec.unschedulable` (cordoned), as its watch last said;
    /// only shown (`picolet get node`): admission does not read it, as
    /// kubelet's does not (the scheduler keeps pods away).
    pub api_unschedulable: Option<bool>,
}

impl NodeFacts {
    /// Reads the host's facts (the runtime's come later).
    pub fn detect() -> NodeFacts {
        let (swap_cgroup, swap_total_bytes) = detect_swap();
        let facts = NodeFacts {
            apparmor: apparmor_enabled(),
            // Limits only where the hugetlb controller exists: runc refuses
            // a container with hugepage limits it cannot set (kubelet, too,
            // leaves them out without the controller).
            hugepage_sizes: if hugetlb_controller(Path::new("/sys/fs/cgroup")) {
                hugepage_sizes(Path::new("/sys/kernel/mm/hugepages"))
            } else {
                Vec::new()
            },
            swap_cgroup,
            swap_total_bytes,
            // The CPUs we may run on (std's available_parallelism also
            // reads cgroup quotas, at a few KiB of binary).
            cpu_millis: rustix::thread::sched_getaffinity(None)
                .ok()
                .map(|set| u64::from(set.count()) * 1000)
                .filter(|m| *m > 0),
            ..Default::default()
        };
        log::info!(
            "host: AppArmor {}, hugepage sizes [{}], swap controller {:?} ({} bytes of swap)",
            if facts.apparmor {
                "enabled"
            } else {
                "not enabled"
            },
            facts.hugepage_sizes.join(" "),
            facts.swap_cgroup,
            facts.swap_total_bytes
        );
        facts
    }
}

/// libcontainer's `apparmor.IsEnabled`: securityfs has it and the module
/// parameter says `Y`.
fn apparmor_enabled() -> bool {
    Path::new("/sys/kernel/security/apparmor").exists()
        && fs::read_to_string("/sys/module/apparmor/parameters/enabled")
            .is_ok_and(|s| s.starts_with('Y'))
}

/// Whether the hugetlb cgroup controller is there: its own hierarchy on
/// cgroup v1, or listed in the root's `cgroup.controllers` on v2.
fn hugetlb_controller(cgroup_mount: &Path) -> bool {
    match fs::read_to_string(cgroup_mount.join("cgroup.controllers")) {
        Ok(list) => list.split_whitespace().any(|c| c == "hugetlb"),
        Err(_) => cgroup_mount.join("hugetlb").is_dir(),
    }
}

/// The sizes under `/sys/kernel/mm/hugepages` (`hugepages-2048kB` is `2MB`).
fn hugepage_sizes(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
        .iter()
        .filter_map(|n| {
            let kb: u64 = n
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            hugepage_unit_size(kb * 1024)
        })
        .collect()
}

/// kubelet's `swapControllerAvailable`: v1 has `memory.memsw.limit_in_bytes`
/// in the memory hierarchy; v2 has `memory.swap.max` in our own cgroup.
fn detect_swap() -> (SwapCgroup, u64) {
    let total = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("SwapTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024;
    let root = Path::new("/sys/fs/cgroup");
    let cgroup = if root.join("cgroup.controllers").exists() {
        let own = fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("0::")
                        .map(|p| p.trim_start_matches('/').to_string())
                })
            })
            .unwrap_or_default();
        if root.join(own).join("memory.swap.max").exists() {
            SwapCgroup::V2
        } else {
            SwapCgroup::None
        }
    } else if root.join("memory/memory.memsw.limit_in_bytes").exists() {
        SwapCgroup::V1
    } else {
        SwapCgroup::None
    };
    (cgroup, total)
}

/// A standalone node's labels: the well-known ones kubelet sets, then
/// `--node-labels` (which may not override them).
pub(super) fn node_labels(
    node_name: &str,
    extra: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut labels = extra.clone();
    labels.insert("kubernetes.io/hostname".into(), node_name.into());
    labels.insert("kubernetes.io/os".into(), "linux".into());
    labels.insert(
        "kubernetes.io/arch".into(),
        crate::node::info::go_arch().into(),
    );
    labels
}

impl<R: RuntimeService> PodWorkers<R> {
    /// Asks the runtime what it supports (CRI `Status`: `features` and the
    /// default handler's features). A runtime that says nothing (containerd
    /// 1.6) supports neither.
    pub(in crate::agent) async fn read_runtime_features(&self) {
        let Some(cri) = self.runtime.cri() else {
            return;
        };
        match cri.status(api::StatusRequest { verbose: false }).await {
            Ok(s) => {
                let sgp = s.features.is_some_and(|f| f.supplemental_groups_policy);
                let userns = s
                    .runtime_handlers
                    .iter()
                    .find(|h| h.name.is_empty())
                    .and_then(|h| h.features)
                    .is_some_and(|f| f.user_namespaces);
                log::info!(
                    "container runtime features: supplementalGroupsPolicy={sgp}, user namespaces={userns}"
                );
                let mut node = self.node.borrow_mut();
                node.supplemental_groups_policy = sgp;
                node.user_namespaces = userns;
            }
            Err(e) => log::warn!("asking the container runtime for its features: {e}"),
        }
    }

    /// The labels and taints of the node's Node object in the API (from
    /// its watch): admission of new pods uses them from now on.
    pub fn set_node_object(&self, labels: BTreeMap<String, String>, taints: Vec<Taint>) {
        self.node.borrow_mut().api_node = Some((labels, taints));
    }

    /// Whether the Node in the API is cordoned (`spec.unschedulable`), as
    /// its watch last said: `picolet get node` shows it.
    pub fn set_node_unschedulable(&self, unschedulable: bool) {
        self.node.borrow_mut().api_unschedulable = Some(unschedulable);
    }

    /// The node as [`crate::pod::admission`] sees it.
    pub(super) fn node_view(&self) -> NodeView {
        let node = self.node.borrow();
        // The node's own labels (which registration writes to the API, and
        // kubelet reconciles) under those in the API: a Node read before
        // registration patched it never refuses a pod for them.
        let mut labels = node_labels(&self.cfg.node_name, &self.cfg.node_labels);
        let mut taints = Vec::new();
        if let Some((api_labels, api_taints)) = &node.api_node {
            labels.extend(api_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
            taints = api_taints.clone();
        }
        NodeView {
            name: self.cfg.node_name.clone(),
            labels,
            taints,
            cpu_millis: node.cpu_millis,
            memory_bytes: Some(self.host.node_memory).filter(|m| *m > 0),
            max_pods: self.cfg.max_pods,
            pressure: self.pressure.get(),
            sysctls: self.host.sysctls.clone(),
        }
    }

    /// What the host and the runtime support, for admission.
    pub(super) fn host_support(&self) -> HostSupport {
        let node = self.node.borrow();
        HostSupport {
            apparmor: node.apparmor,
            supplemental_groups_policy: node.supplemental_groups_policy,
            user_namespaces: node.user_namespaces,
        }
    }

    /// The swap setup for container configs.
    pub(super) fn swap(&self) -> Swap {
        let node = self.node.borrow();
        match node.swap_cgroup {
            SwapCgroup::None => Swap::Unavailable,
            SwapCgroup::V1 => Swap::CgroupV1,
            SwapCgroup::V2 => Swap::CgroupV2 {
                limited: self.cfg.memory_swap_behavior == SwapBehavior::LimitedSwap,
                node_memory_bytes: self.host.node_memory,
                node_swap_bytes: node.swap_total_bytes,
            },
        }
    }

    /// The pod's user-namespace mapping: none unless it asks for
    /// `hostUsers: false` and the runtime supports it; then the pod's
    /// block, allocated on first use (the lowest free one).
    pub(super) fn user_ns(&self, pod: &Pod) -> Option<UserNsMapping> {
        if spec(pod).host_users != Some(false) {
            return None;
        }
        let mut node = self.node.borrow_mut();
        if !node.user_namespaces {
            return None;
        }
        let blocks = &mut node.user_ns_blocks;
        let block = match blocks.iter().find(|(u, _)| u == uid(pod)) {
            Some((_, b)) => *b,
            None => {
                let free = (0..)
                    .find(|b| !blocks.iter().any(|(_, used)| used == b))
                    .unwrap_or(0);
                blocks.push((uid(pod).to_string(), free));
                free
            }
        };
        Some(UserNsMapping {
            host_id: (block + 1).saturating_mul(USER_NS_LENGTH),
            length: USER_NS_LENGTH,
        })
    }

    /// Frees a terminated pod's user-namespace block.
    pub(super) fn release_user_ns(&self, pod_uid: &str) {
        self.node
            .borrow_mut()
            .user_ns_blocks
            .retain(|(u, _)| u != pod_uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hugetlb_controller_is_found_on_either_cgroup_version() {
        let v2 = tempfile::tempdir().unwrap();
        fs::write(
            v2.path().join("cgroup.controllers"),
            "cpu memory hugetlb pids\n",
        )
        .unwrap();
        assert!(hugetlb_controller(v2.path()));
        fs::write(v2.path().join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        assert!(!hugetlb_controller(v2.path()));
        let v1 = tempfile::tempdir().unwrap();
        fs::create_dir(v1.path().join("memory")).unwrap();
        assert!(!hugetlb_controller(v1.path()));
        fs::create_dir(v1.path().join("hugetlb")).unwrap();
        assert!(hugetlb_controller(v1.path()));
    }

    #[test]
    fn hugepage_directories_become_kubelets_page_size_names() {
        let dir = tempfile::tempdir().expect("temp dir");
        for n in [
            "hugepages-2048kB",
            "hugepages-1048576kB",
            "hugepages-64kB",
            "other",
        ] {
            fs::create_dir(dir.path().join(n)).expect("mkdir");
        }
        assert_eq!(hugepage_sizes(dir.path()), ["1GB", "2MB", "64KB"]);
        assert!(hugepage_sizes(&dir.path().join("missing")).is_empty());
    }

    #[test]
    fn a_standalone_node_is_labelled_with_its_name_os_and_arch() {
        let extra = BTreeMap::from([
            ("zone".to_string(), "shed".to_string()),
            ("kubernetes.io/os".to_string(), "plan9".to_string()),
        ]);
        let l = node_labels("pi-1", &extra);
        assert_eq!(l["kubernetes.io/hostname"], "pi-1");
        assert_eq!(l["kubernetes.io/os"], "linux");
        assert_eq!(l["kubernetes.io/arch"], crate::node::info::go_arch());
        assert_eq!(l["zone"], "shed");
        assert!(
            ["amd64", "arm64", "arm", "riscv64"].contains(&crate::node::info::go_arch())
                || !crate::node::info::go_arch().is_empty()
        );
    }
}
