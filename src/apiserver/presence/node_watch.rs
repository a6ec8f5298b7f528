//! The watch of this node's own Node object, so an admin's
//! `kubectl label node` or `kubectl taint node` reaches admission without
//! polling.
//!
//! One [`Informer`] of `/api/v1/nodes?fieldSelector=metadata.name=<node>`
//! (what the Node authorizer lets a `system:node:<name>` credential list and
//! watch) over the shared [`Client`], watched in protobuf ([`node_proto`]:
//! the whole Node comes back after each status report, and a bookmark each
//! minute, whose JSON spells out an empty Node's every field; together
//! about 0.7 KB a minute less on the wire, docs/fleet.md), with its own crash-safe [`Cache`]
//! under the root dir: after a reboot with the link down, admission still
//! knows the labels and taints the cluster last gave the node. Every change
//! that admission would see differently ([`WatchedNode::admission_differs`]),
//! and a cordon or uncordon, which `picolet get node` shows
//! ([`WatchedNode::differs`]), is logged and handed to the consumer;
//! heartbeats (status-only writes) are not.
//!
//! The heartbeat reads the Node as last delivered too ([`LatestNode`]):
//! the node lifecycle controller's `Unknown` after a long outage is only
//! seen there, and only a new status post turns it back.
//!
//! The decisions are the reflector's (what to request, what changed) and
//! `node::WatchedNode`'s (what admission takes from the object); this loop
//! only moves them. It must not know the agent: the consumer is a closure.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::node_object::{NodeView, WatchedNode};
use super::node_proto;
use crate::apiserver::client::request::{collection_path, Selectors};
use crate::apiserver::client::transport::Client;
use crate::apiserver::listwatch::disk_cache::Cache;
use crate::apiserver::listwatch::informer::Informer;

/// The cache directory of the Node (under `--root-dir`).
pub fn cache_dir(root_dir: &Path) -> PathBuf {
    root_dir.join("apiserver").join("node")
}

/// The field selector of the node's own Node object.
pub fn selectors(node_name: &str) -> Selectors {
    Selectors::fields(format!("metadata.name={node_name}"))
}

/// The Node as the watch last delivered it, shared with the heartbeat:
/// the count of deliveries so far (the cached object is the first), and
/// the facts of the last one; [`LatestNode::delivered`] wakes the
/// heartbeat's status loop, so a Node the node lifecycle controller marked
/// `Unknown` during an outage is answered as soon as the watch is back,
/// not at the loop's next 10 s tick.
#[derive(Clone)]
pub struct LatestNode {
    state: Rc<RefCell<(u64, Option<WatchedNode>)>>,
    wake: (smol::channel::Sender<()>, smol::channel::Receiver<()>),
}

impl Default for LatestNode {
    fn default() -> Self {
        LatestNode {
            state: Rc::default(),
            wake: smol::channel::bounded(1),
        }
    }
}

impl LatestNode {
    /// (deliveries so far, the last delivered Node).
    pub fn get(&self) -> (u64, Option<WatchedNode>) {
        self.state.borrow().clone()
    }

    /// Returns after the next delivery (at once if one came since the
    /// last call).
    pub async fn delivered(&self) {
        let _ = self.wake.1.recv().await;
    }

    fn set(&self, node: Option<WatchedNode>) {
        let mut l = self.state.borrow_mut();
        l.0 += 1;
        l.1 = node;
        let _ = self.wake.0.try_send(());
    }
}

/// Watches the Node `node_name` and calls `on_change` with what admission
/// should use whenever that changes (first with the cached object, if any).
pub struct NodeWatch {
    node_name: String,
    informer: Informer<NodeView>,
    last: Option<WatchedNode>,
    latest: LatestNode,
}

impl NodeWatch {
    /// A watch of `node_name`, its cache under `root_dir`. A cache that
    /// cannot be opened is logged, and the watch runs without one.
    pub fn new(client: Client, node_name: &str, root_dir: &Path) -> Self {
        let dir = cache_dir(root_dir);
        let cache = match Cache::open(&dir, 0o700) {
            Ok((cache, loaded)) => {
                if loaded.discarded > 0 {
                    log::warn!(
                        "node cache {}: {} corrupt entries discarded; the Node is fetched again",
                        dir.display(),
                        loaded.discarded
                    );
                }
                Some((cache, loaded))
            }
            Err(e) => {
                log::error!("node cache: {e}; running without it");
                None
            }
        };
        let informer = Informer::new(
            client,
            collection_path::<NodeView>(None),
            selectors(node_name),
            cache,
        )
        .with_protobuf_watch(node_proto::decode);
        NodeWatch {
            node_name: node_name.to_string(),
            informer,
            last: None,
            latest: LatestNode::default(),
        }
    }

    /// The Node as delivered from now on, for the heartbeat.
    pub fn latest(&self) -> LatestNode {
        self.latest.clone()
    }

    /// What the store holds now (the cache's copy until the first sync).
    /// The caller hands the cached copy to admission before any pod source
    /// runs, so that pods restored from the cache after a reboot are
    /// admitted against the labels and taints the cluster last gave the
    /// node, not against the configured ones.
    pub fn current(&self) -> Option<WatchedNode> {
        self.informer
            .store()
            .values()
            .find(|n| n.metadata.name.as_deref() == Some(self.node_name.as_str()))
            .map(|n| WatchedNode::of(n))
    }

    /// Runs forever, calling `on_change` on every change admission or
    /// `picolet get node` sees.
    /// A Node deleted in the API keeps its last labels and taints here: the
    /// heartbeat registers it again.
    pub async fn run(mut self, on_change: impl Fn(&WatchedNode)) {
        if let Some(now) = self.current() {
            log::info!("node {}: from the cache, {}", self.node_name, now.summary());
            on_change(&now);
            self.latest.set(Some(now.clone()));
            self.last = Some(now);
        }
        loop {
            self.informer.next().await;
            let now = self.current();
            self.latest.set(now.clone());
            let Some(now) = now else {
                continue;
            };
            if now.differs(self.last.as_ref()) {
                log::info!(
                    "node {}: the API server says {} (resourceVersion {})",
                    self.node_name,
                    now.summary(),
                    now.resource_version.as_deref().unwrap_or("")
                );
                on_change(&now);
            }
            self.last = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_is_watched_by_name_and_cached_beside_the_pods() {
        let s = selectors("pi-1");
        assert_eq!(s.field_selector.as_deref(), Some("metadata.name=pi-1"));
        assert_eq!(collection_path::<NodeView>(None), "/api/v1/nodes");
        let root = Path::new("/var/lib/picolet");
        assert_eq!(
            cache_dir(root),
            Path::new("/var/lib/picolet/apiserver/node")
        );
        assert_ne!(
            cache_dir(root),
            crate::apiserver::pods::source::cache_dir(root)
        );
    }
}
