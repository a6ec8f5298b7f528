//! [`Host`]: everything the admin socket and the node API show of the
//! node and its pods, as one narrow trait, the way kubelet's server sees
//! its `HostInterface`. The agent's wiring implements it; the servers
//! know nothing else of the agent. Every method reads: none changes a
//! pod (the streaming sessions only relay to the runtime's streaming
//! server).
//!
//! [`Handlers::from_host`] turns a host into the admin routes.

use std::rc::Rc;

use http::request::Parts;
use http::Response;
use serde_json::Value;

use super::router::{Reply, UpgradeFn};
use super::server::Handlers;

/// What the servers ask of the node.
pub trait Host {
    /// `GET /pods`: every pod with its status, a v1 PodList.
    fn pods(&self) -> Value;
    /// `GET /metrics`: Prometheus text.
    fn metrics(&self) -> String;
    /// `GET /node`: capacity, allocatable, the eviction view.
    fn node(&self) -> Value;
    /// `GET /containerLogs/{namespace}/{pod}/{container}`.
    fn container_logs(&self, req: &Parts) -> Response<Reply>;
    /// `GET /stats/summary`: kubelet's Summary, as JSON text.
    fn summary(&self) -> String;
    /// `GET /metrics/resource`.
    fn resource_metrics(&self) -> String;
    /// `GET /runningpods/`: the pods the runtime runs, a v1 PodList.
    fn running_pods(&self) -> Value;
    /// `GET /events`: the last few events per pod, a v1 EventList.
    fn events(&self) -> Value;
    /// `GET /metrics/probes`: the prober's metrics.
    fn probe_metrics(&self) -> String;
    /// `/exec/...`, `/attach/...`, `/portForward/...`: the handler, with
    /// its own session count.
    fn streaming(&self) -> UpgradeFn;
}

impl Handlers {
    /// Every admin route, answered by `host`.
    pub fn from_host<H: Host + 'static>(host: Rc<H>) -> Handlers {
        let (h, h2, h3) = (host.clone(), host.clone(), host.clone());
        let (h4, h5, h6) = (host.clone(), host.clone(), host.clone());
        let (h7, h8, h9) = (host.clone(), host.clone(), host.clone());
        Handlers {
            pods: Rc::new(move || h.pods()),
            metrics: Some(Rc::new(move || h2.metrics())),
            node: Some(Rc::new(move || h3.node())),
            logs: Some(Rc::new(move |req| h4.container_logs(req))),
            summary: Some(Rc::new(move || h5.summary())),
            resource_metrics: Some(Rc::new(move || h6.resource_metrics())),
            running_pods: Some(Rc::new(move || h7.running_pods())),
            events: Some(Rc::new(move || h8.events())),
            probe_metrics: Some(Rc::new(move || h9.probe_metrics())),
            streaming: Some(host.streaming()),
        }
    }
}
