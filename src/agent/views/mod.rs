//! The read-only views: what the admin socket and the node API show of
//! the node and its pods (`/pods`, `/metrics`, `/node`, `/stats/summary`,
//! `/metrics/resource`, `/runningpods/`, recent events, `/containerLogs`,
//! the streaming routes). [`Views`] owns what only they keep (the CPU
//! readings between scrapes, the API server link's metrics and state) and
//! asks the pod workers the rest through their answers
//! (`pod_workers/queries.rs`, `pod_workers/status_report.rs`), never through
//! the registry: nothing here changes a pod. Housekeeping's part (the
//! eviction view, where the node's stats are read) comes in from the
//! wiring as arguments, so the views do not know housekeeping either.
//!
//! - `stats_summary.rs`: `/stats/summary` and `/metrics/resource` (kernel stats
//!   per node, pod and container; CPU rates between scrapes);
//! - `container_logs.rs`: `/containerLogs/...`: which instance, kubelet's
//!   refusals, the streaming task;
//! - `streaming.rs`: `/exec`, `/attach`, `/portForward`.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::Value;

use super::node_view::{node_allocatable, resources, Amounts};
use super::pod_workers::PodWorkers;
use super::{ApiServerView, MoreMetrics};
use crate::cri::RuntimeService;

mod container_logs;
mod stats_summary;
mod streaming;

/// The views' own state, and the pod workers they read.
pub(super) struct Views<R: RuntimeService> {
    workers: Rc<PodWorkers<R>>,
    /// CPU readings between `/stats/summary` scrapes.
    summary: stats_summary::SummaryState,
    /// More of `/metrics` from elsewhere (the API server link's), appended
    /// to what the agent renders.
    more_metrics: RefCell<Option<MoreMetrics>>,
    /// The API server's state for `GET /node` (`None`: standalone).
    api_server_view: RefCell<Option<ApiServerView>>,
}

impl<R: RuntimeService> Views<R> {
    pub(super) fn new(workers: Rc<PodWorkers<R>>) -> Rc<Self> {
        Rc::new(Views {
            workers,
            summary: stats_summary::SummaryState::default(),
            more_metrics: RefCell::new(None),
            api_server_view: RefCell::new(None),
        })
    }

    /// Appends `more` to every `/metrics` answer from now on.
    pub(super) fn set_more_metrics(&self, more: MoreMetrics) {
        *self.more_metrics.borrow_mut() = Some(more);
    }

    /// Adds the API server's state to every `GET /node` answer from now on.
    pub(super) fn set_api_server_view(&self, view: ApiServerView) {
        *self.api_server_view.borrow_mut() = Some(view);
    }

    /// Every pod with its status, as a v1 PodList.
    pub(super) fn pod_list(&self) -> Value {
        self.workers.pod_list()
    }

    /// `/metrics/probes`: the prober's counters.
    pub(super) fn probe_metrics_text(&self) -> String {
        self.workers.probe_metrics_text()
    }

    /// `GET /runningpods/`.
    pub(super) fn running_pods_json(&self) -> Value {
        self.workers.running_pods_json()
    }

    /// The recent events (`picolet describe`).
    pub(super) fn event_list(&self) -> Value {
        self.workers.event_list()
    }

    /// `/metrics`.
    pub(super) fn metrics(&self) -> String {
        let mut out = String::new();
        self.workers.render_probe_metrics(&mut out);
        let (longest, _) = crate::rt::longest_poll();
        out.push_str(
            "# HELP picolet_executor_longest_poll_seconds The longest time one poll of one task held the executor thread.\n\
             # TYPE picolet_executor_longest_poll_seconds gauge\n",
        );
        out.push_str(&format!(
            "picolet_executor_longest_poll_seconds {:.6}\n",
            longest.as_secs_f64()
        ));
        self.workers.render_kubelet_metrics(&mut out);
        if let Some(more) = self.more_metrics.borrow().as_ref() {
            more(&mut out);
        }
        out
    }

    /// `GET /node`: capacity, allocatable, then `eviction` (housekeeping's
    /// eviction view).
    pub(super) fn node_json(&self, eviction: Value) -> Value {
        let cfg = self.workers.cfg();
        let m = crate::node::info::read(&cfg.root_dir);
        let capacity = Amounts {
            cpu_millis: m.cpus * 1000,
            memory_bytes: m.memory_bytes,
            ephemeral_storage_bytes: m.root_fs_bytes,
            pods: cfg.max_pods as u64,
        };
        let alloc = node_allocatable(capacity, &cfg.eviction);
        let mut v = eviction;
        v["name"] = Value::String(cfg.node_name.clone());
        v["capacity"] = resources(capacity);
        v["allocatable"] = resources(alloc);
        if let Some(view) = self.api_server_view.borrow().as_ref() {
            v["apiServer"] = view();
            // null until the Node was read (from the API or its cache).
            v["unschedulable"] = self.workers.api_unschedulable().into();
        }
        v
    }
}
