//! Joining the cluster: from `--kubeconfig` to the running pieces.
//!
//! [`join`] reads the kubeconfig (errors name the file and the field),
//! builds the one [`Client`] every request and watch shares, and starts:
//! - the pod source ([`ApiPodSource`]) through the agent's source seam,
//!   so its readiness is tracked on its own, with the watches of the
//!   ConfigMaps and Secrets its pods reference ([`ConfigWatches`]), which
//!   the agent reads and which wake the pods that reference a changed one,
//!   and the service-account tokens of its pods ([`TokenSync`]);
//! - the watches of the Services in `default` and in the namespaces of
//!   the node's pods ([`ServiceWatches`]), for their environment;
//! - the status sync ([`StatusSync`]) as the agent's status sink;
//! - the event recorder ([`EventSync`]) as the agent's event sink, and the
//!   heartbeat's for the Node's events;
//! - the heartbeat ([`Heartbeat`]): Node registration, status and Lease;
//! - the watch of the node's own Node object ([`NodeWatch`]), whose labels
//!   and taints admission uses from then on;
//! - with `rotateCertificates`, the renewal of the client certificate
//!   ([`rotate_client_certificates`]), which swaps the shared client's
//!   credential in place.
//!
//! With `--bootstrap-kubeconfig` and no `--kubeconfig` file (or one whose
//! client certificate has expired), the node first
//! gets its client certificate ([`bootstrap_client_certificate`]), and
//! waits for it as kubelet does. After that, nothing here waits for the
//! API server: every piece retries on its own,
//! and the node runs its cached and static pods meanwhile.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use crate::agent::Agent;
use crate::apiserver::client::client_tls::TlsError;
use crate::apiserver::client::kubeconfig::{self, KubeconfigError};
use crate::apiserver::client::transport::{Client, Options};
use crate::apiserver::credentials::bootstrap_join::{
    bootstrap_client_certificate, needs_bootstrap, rotate_client_certificates, BootstrapJoinError,
};
use crate::apiserver::pods::event_sync::EventSync;
use crate::apiserver::pods::source::{ApiPodSource, MirrorPods};
use crate::apiserver::pods::status_sync::StatusSync;
use crate::apiserver::presence::heartbeat::{Heartbeat, HeartbeatConfig};
use crate::apiserver::presence::node_object::{validate_node_labels, NodeLabelError};
use crate::apiserver::presence::node_watch::NodeWatch;
use crate::apiserver::referenced::configs::ConfigWatches;
use crate::apiserver::referenced::services::ServiceWatches;
use crate::apiserver::referenced::token_sync::{ApiObjects, TokenSync, WithTokens};
use crate::config::KubeletConfig;
use crate::cri::RuntimeService;
use crate::rt;

/// Why picolet cannot join the cluster as configured.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Bootstrap(#[from] BootstrapJoinError),
    #[error(transparent)]
    NodeLabels(#[from] NodeLabelError),
}

/// The tasks of a joined node (dropping them stops them) and its status
/// sync, for metrics.
pub struct Joined {
    pub tasks: Vec<smol::Task<()>>,
    pub status: Rc<StatusSync>,
    /// The API-server client, for the node API's reviews.
    pub client: Client,
}

/// Starts the API-server side of `agent` with `cfg.kubeconfig`. Call it
/// before [`Agent::run`], so that the API source is tracked from the start.
pub fn join<R: RuntimeService>(
    cfg: &KubeletConfig,
    node_name: &str,
    agent: &Rc<Agent<R>>,
) -> Result<Option<Joined>, JoinError> {
    let Some(path) = &cfg.kubeconfig else {
        return Ok(None);
    };
    validate_node_labels(&cfg.node_labels)?;
    ensure_client_certificate(cfg, path, node_name)?;
    let kc = kubeconfig::load(path, cfg.allow_insecure_kubeconfig)?;
    log::info!(
        "joining the cluster at {} as node {node_name} (kubeconfig {})",
        kc.server.origin(),
        path.display()
    );
    let client = Client::new(&kc, Options::default())?;
    let node_uid = Rc::new(RefCell::new(None));
    let mirrors = MirrorPods::default();
    // One status per pod: maxPods of them, plus room for static pods.
    let capacity = cfg.max_pods as usize + 32;
    let status = StatusSync::new(
        client.clone(),
        node_name,
        node_uid.clone(),
        mirrors.clone(),
        capacity,
    );
    agent.set_status_sink(status.clone());
    status.set_on_disagreement({
        let agent = Rc::downgrade(agent);
        Rc::new(move |uid| {
            if let Some(agent) = agent.upgrade() {
                agent.pod_objects_changed(uid);
            }
        })
    });
    show_link(agent, &client);
    let events = EventSync::new(
        client.clone(),
        node_name,
        cfg.event_record_qps,
        cfg.event_burst,
    );
    agent.set_event_sink(events.clone());
    let (configs, tokens) = watch_referenced(cfg, agent, &client);
    let source = ApiPodSource::new(client.clone(), node_name, &cfg.root_dir, mirrors)
        .with_configs(configs)
        .with_observer({
            let status = Rc::downgrade(&status);
            Rc::new(move |pod| {
                if let Some(status) = status.upgrade() {
                    status.observed(pod);
                }
            })
        });
    // The Node's cached labels and taints reach admission before the pod
    // source delivers its cached pods.
    let node_watch = NodeWatch::new(client.clone(), node_name, &cfg.root_dir);
    if let Some(n) = node_watch.current() {
        agent.set_node_unschedulable(n.unschedulable);
        agent.set_node_object(n.labels, n.taints);
    }
    let rotation = cfg.rotate_certificates.then(|| {
        rt::spawn(rotate_client_certificates(
            client.clone(),
            path.clone(),
            cfg.root_dir.clone(),
            node_name.to_string(),
            cfg.allow_insecure_kubeconfig,
        ))
    });
    let heartbeat = Rc::new(
        Heartbeat::new(
            client.clone(),
            HeartbeatConfig::new(cfg, node_name)
                .with_pressure(agent.pressure())
                .with_allocatable_enforced(agent.allocatable_enforced()),
            agent.clone(),
            node_uid,
        )
        .with_events(events.clone())
        .with_api_node(node_watch.latest()),
    );
    let source = WithTokens {
        source,
        tokens: tokens.clone(),
    };
    let mut tasks = vec![
        agent.spawn_source(source),
        rt::spawn(tokens.run()),
        rt::spawn(status.clone().run()),
        rt::spawn(heartbeat.run()),
        rt::spawn(events.run()),
        rt::spawn({
            let agent = agent.clone();
            node_watch.run(move |n| {
                agent.set_node_unschedulable(n.unschedulable);
                agent.set_node_object(n.labels.clone(), n.taints.clone())
            })
        }),
    ];
    tasks.extend(rotation);
    Ok(Some(Joined {
        tasks,
        status,
        client,
    }))
}

/// With `--bootstrap-kubeconfig`, gets the node's client certificate when
/// `--kubeconfig` has none (or an expired one), waiting for it.
fn ensure_client_certificate(
    cfg: &KubeletConfig,
    path: &Path,
    node_name: &str,
) -> Result<(), JoinError> {
    let now_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    if let Some(bootstrap) = cfg
        .bootstrap_kubeconfig
        .as_ref()
        .filter(|_| needs_bootstrap(path, cfg.allow_insecure_kubeconfig, now_unix))
    {
        // kubelet blocks here too: without a certificate there is no node.
        rt::block_on(bootstrap_client_certificate(
            bootstrap,
            path,
            &cfg.root_dir,
            node_name,
            cfg.allow_insecure_kubeconfig,
        ))?;
    }
    Ok(())
}

/// The link to the API server as the agent shows it: its `/metrics`
/// families and the `apiServer` of `GET /node`.
fn show_link<R: RuntimeService>(agent: &Agent<R>, client: &Client) {
    agent.set_more_metrics({
        let client = client.clone();
        Rc::new(move |out| client.link().metrics(std::time::Instant::now()).render(out))
    });
    agent.set_api_server_view({
        let client = client.clone();
        Rc::new(move || {
            let now_unix = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            client.link().state_json(
                &client.server().to_string(),
                std::time::Instant::now(),
                now_unix,
            )
        })
    });
}

/// The objects the pods reference, each watched or requested by name: the
/// ConfigMaps and Secrets (returned for the pod source, which tells them
/// its pods before the agent sees them), the service-account tokens
/// (returned for the source's pods and their task), and the Services
/// (handed to the agent, which tells them its pods' namespaces). Each
/// wakes the agent's pods that a change concerns.
fn watch_referenced<R: RuntimeService>(
    cfg: &KubeletConfig,
    agent: &Rc<Agent<R>>,
    client: &Client,
) -> (Rc<ConfigWatches>, Rc<TokenSync>) {
    // The ConfigMaps and Secrets of the API pods, watched one by one
    // before the agent sees the pods that reference them.
    let configs = ConfigWatches::new(client.clone(), &cfg.root_dir);
    let tokens = TokenSync::new(client.clone(), &cfg.root_dir);
    agent.set_config_objects(Rc::new(ApiObjects {
        configs: configs.clone(),
        tokens: tokens.clone(),
    }));
    tokens.set_on_change({
        let agent = Rc::downgrade(agent);
        Rc::new(move |uid| {
            if let Some(agent) = agent.upgrade() {
                agent.pod_objects_changed(uid);
            }
        })
    });
    configs.set_on_change({
        let agent = Rc::downgrade(agent);
        Rc::new(move |r| {
            if let Some(agent) = agent.upgrade() {
                agent.config_object_changed(r);
            }
        })
    });
    // The Services of default and of the namespaces the node's pods are
    // in, for their environment; the agent tells it its pods.
    let services = ServiceWatches::new(client.clone(), &cfg.root_dir);
    services.set_on_synced({
        let agent = Rc::downgrade(agent);
        Rc::new(move |ns| {
            if let Some(agent) = agent.upgrade() {
                agent.services_synced(ns);
            }
        })
    });
    agent.set_services(services);
    (configs, tokens)
}
