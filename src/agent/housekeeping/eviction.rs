//! The eviction task: every 10 s (kubelet's monitoring interval) it reads
//! the node's numbers its thresholds observe from the kernel
//! ([`crate::node::stats`]; `picolet get node` reads them all), steps the
//! eviction manager ([`crate::node::eviction::Manager`]), publishes the
//! pressure conditions (for the Node status and admission), and when a
//! threshold must be relieved: reclaims at node level first (dead
//! containers through the GC pass), measures again, and evicts at most one
//! pod, the first of kubelet's ranking.
//!
//! Evicting asks the pod side ([`super::HousekeepingHost::evict`]) to move
//! the pod to [`crate::agent::lifecycle::Lifecycle::Evicted`]; its own
//! worker stops it with the eviction's grace period, and its status says
//! phase Failed, reason `Evicted`, with the message naming the signal. An
//! evicted static pod comes back when the pressure that evicted it is over
//! ([`super::HousekeepingHost::readmit_static_pods`]). This file decides
//! nothing itself: it reads, asks the pure manager and executes.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::memory_notify::{keeps, usage_threshold, EventsWatch, MemoryNotifier, PsiTrigger};
use super::{Housekeeping, HousekeepingHost};
use crate::agent::lifecycle::Evicted;
use crate::cri::RuntimeService;
use crate::node::eviction::{
    self, threshold, Condition, Manager, Observation, Observations, PressureCell, Threshold,
};
use crate::node::stats::{self, node::NodePaths, Buf};
use crate::pod::accessors;
use crate::qos;
use crate::rt;

/// kubelet's `evictionMonitoringPeriod`.
pub const MONITORING_PERIOD: Duration = Duration::from_secs(10);

/// kubelet's `podCleanupTimeout`: how long an evicted pod has to stop
/// before the next pass may evict another for the same pressure.
pub const POD_CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The least time between a pass a memory notification brought forward
/// and the next wait for one.
const EARLY_PASS_GAP: Duration = Duration::from_secs(1);

/// What the last pass saw, for `picolet get node`.
#[derive(Clone, Debug, Default)]
pub(super) struct EvictionView {
    pub observations: Observations,
    pub met: Vec<Threshold>,
    /// How long reading the node's stats and stepping the manager took
    /// (on the one agent thread this is its CPU cost plus the syscalls').
    pub measure_micros: u64,
    /// The longest such measurement since start.
    pub max_measure_micros: u64,
    /// Passes since start.
    pub passes: u64,
}

/// The eviction task's state.
pub(super) struct EvictionState {
    manager: RefCell<Manager>,
    /// What a pass reads: what the thresholds observe (kubelet's
    /// eviction manager reads nothing at all without thresholds; image GC
    /// still needs the filesystems here).
    reads: stats::node::Wanted,
    pub(super) paths: RefCell<NodePaths>,
    pub(super) buf: RefCell<Buf>,
    pub(super) pressure: PressureCell,
    view: RefCell<EvictionView>,
    /// A stats file that failed, logged once until it works again.
    failing: RefCell<Option<String>>,
    /// The Node's allocatable memory the last pass observed with (what
    /// `picolet get node` observes with when it reads every signal).
    allocatable_memory: std::cell::Cell<Option<u64>>,
    max_pod_grace: i64,
    /// The QoS cgroups' CPU shares last written (rewritten when they change).
    qos_shares: std::cell::Cell<Option<qos::allocatable::QosShares>>,
    /// Passes a memory notification brought forward (`picolet get node`).
    notified_passes: std::cell::Cell<u64>,
    /// The last pass found imagefs on its own filesystem (disk ranking).
    pub(super) separate_imagefs: std::cell::Cell<bool>,
    /// Node allocatable was written into `kubepods` (the Node's
    /// `NodeAllocatableEnforced` event).
    pub(super) allocatable_enforced: std::rc::Rc<std::cell::Cell<bool>>,
}

impl EvictionState {
    pub fn new(cfg: &crate::agent::AgentConfig) -> EvictionState {
        let version =
            crate::cgroups::detect(&cfg.cgroup_mount).unwrap_or(crate::cgroups::CgroupVersion::V1);
        let root = cfg.cgroup_root.trim_matches('/');
        let pods_cgroup = match (root.is_empty(), cfg.cgroups_per_qos) {
            (true, true) => "/kubepods".to_string(),
            (false, true) => format!("/{root}/kubepods"),
            (_, false) => format!("/{root}"),
        };
        EvictionState {
            reads: eviction::reads_for(cfg.eviction.thresholds.iter().map(|t| t.signal)),
            manager: RefCell::new(Manager::new(
                cfg.eviction.thresholds.clone(),
                cfg.eviction.pressure_transition_period,
            )),
            paths: RefCell::new(NodePaths {
                cgroup_mount: cfg.cgroup_mount.clone(),
                version,
                pods_cgroup,
                proc: PathBuf::from("/proc"),
                root_dir: cfg.root_dir.clone(),
                log_dir: cfg.pod_logs_dir.clone(),
                image_dir: cfg.eviction.image_dir.clone(),
            }),
            buf: RefCell::new(Buf::new()),
            pressure: PressureCell::default(),
            view: RefCell::new(EvictionView::default()),
            failing: RefCell::new(None),
            allocatable_memory: std::cell::Cell::new(None),
            max_pod_grace: cfg.eviction.max_pod_grace_period,
            qos_shares: std::cell::Cell::new(None),
            notified_passes: std::cell::Cell::new(0),
            separate_imagefs: std::cell::Cell::new(false),
            allocatable_enforced: Default::default(),
        }
    }
}

impl Housekeeping {
    /// The eviction task: a pass every [`MONITORING_PERIOD`], or sooner
    /// when a memory notification says so.
    pub(in crate::agent) async fn eviction_loop(&self, host: &impl HousekeepingHost) {
        if self.eviction.manager.borrow().thresholds().is_empty() {
            log::info!("eviction: no thresholds configured; node-pressure eviction is off");
        }
        self.find_image_fs(host.runtime()).await;
        self.enforce_node_allocatable(host);
        let mut notify_failed = false;
        let mut events = self.watch_memory_events();
        let mut psi = events.as_ref().and_then(|_| arm_psi_trigger());
        // The watch's own buffer: the pass's is borrowed across its awaits.
        let mut buf = Buf::new();
        let mut armed = None;
        loop {
            self.eviction_pass(host).await;
            if events.is_some() || psi.is_some() {
                self.wait_v2(&mut events, &mut psi, &mut buf).await;
                continue;
            }
            match self.arm_memory_notifier(armed.take()) {
                Ok(Some(n)) => {
                    if rt::timeout(MONITORING_PERIOD, n.crossed()).await.is_some() {
                        log::info!("eviction: memory usage crossed its threshold; measuring now");
                        self.eviction
                            .notified_passes
                            .set(self.eviction.notified_passes.get() + 1);
                    }
                    armed = Some(n);
                }
                Ok(None) => rt::sleep_on_grid(MONITORING_PERIOD).await,
                Err(e) => {
                    if !notify_failed {
                        log::warn!(
                            "eviction: memory threshold notification: {e}; 10 s passes only"
                        );
                        notify_failed = true;
                    }
                    rt::sleep_on_grid(MONITORING_PERIOD).await;
                }
            }
        }
    }

    /// Waits (cgroup v2) for the next pass: [`MONITORING_PERIOD`], or less
    /// when the `kubepods` memory events or the PSI trigger say so. A
    /// notification that fails is dropped (logged) for good.
    async fn wait_v2(
        &self,
        events: &mut Option<EventsWatch>,
        psi: &mut Option<PsiTrigger>,
        buf: &mut Buf,
    ) {
        enum Woke {
            Events(std::io::Result<&'static str>),
            Psi(std::io::Result<()>),
        }
        let woke = {
            let by_events = async {
                match events.as_mut() {
                    Some(w) => Woke::Events(w.limit_reached(buf).await),
                    None => smol::future::pending().await,
                }
            };
            let by_psi = async {
                match psi.as_ref() {
                    Some(p) => Woke::Psi(p.fired().await),
                    None => smol::future::pending().await,
                }
            };
            rt::timeout(MONITORING_PERIOD, smol::future::or(by_events, by_psi)).await
        };
        let file = || {
            events
                .as_ref()
                .map(|w| w.file().display().to_string())
                .unwrap_or_default()
        };
        match woke {
            None => return,
            Some(Woke::Events(Ok(key))) => log::info!(
                "eviction: the pods' memory reached node allocatable ({} {key}); measuring now",
                file()
            ),
            Some(Woke::Psi(Ok(()))) => {
                log::info!("eviction: memory pressure stalled tasks (PSI); measuring now")
            }
            Some(Woke::Events(Err(e))) => {
                log::warn!("eviction: watching {}: {e}; not any more", file());
                *events = None;
                return;
            }
            Some(Woke::Psi(Err(e))) => {
                log::warn!("eviction: the PSI trigger on {PSI_MEMORY}: {e}; not any more");
                *psi = None;
                return;
            }
        }
        self.eviction
            .notified_passes
            .set(self.eviction.notified_passes.get() + 1);
        // A cgroup that stays at its limit keeps the file changing, and a
        // stall keeps firing: at most one early pass a second.
        rt::sleep(EARLY_PASS_GAP).await;
    }

    /// On cgroup v2, the inotify watch on the `kubepods` cgroup's memory
    /// events; `None` on v1, without a `memory.available` threshold, or when
    /// it cannot be set up (logged).
    fn watch_memory_events(&self) -> Option<EventsWatch> {
        let paths = self.eviction.paths.borrow();
        let wanted = paths.version == crate::cgroups::CgroupVersion::V2
            && self
                .eviction
                .manager
                .borrow()
                .thresholds()
                .iter()
                .any(|t| t.signal == eviction::Signal::MemoryAvailable);
        if !wanted {
            return None;
        }
        let dir = stats::cgroup_dir(
            &paths.cgroup_mount,
            paths.version,
            "memory",
            &paths.pods_cgroup,
        );
        match EventsWatch::new(&dir, &mut self.eviction.buf.borrow_mut()) {
            Ok(w) => {
                log::info!("eviction: watching {} between passes", w.file().display());
                Some(w)
            }
            Err(e) => {
                log::warn!(
                    "eviction: cannot watch {}: {e}; 10 s passes only",
                    dir.display()
                );
                None
            }
        }
    }

    /// Arms the memcg notification for the highest `memory.available`
    /// threshold (the first one usage crosses), on cgroup v1, or keeps the
    /// `armed` one when it is close enough (see `memory_notify::keeps`);
    /// `None` without such a threshold or on v2.
    fn arm_memory_notifier(
        &self,
        armed: Option<MemoryNotifier>,
    ) -> std::io::Result<Option<MemoryNotifier>> {
        let paths = self.eviction.paths.borrow();
        if paths.version != crate::cgroups::CgroupVersion::V1 {
            return Ok(None);
        }
        let Some(capacity) = self
            .eviction
            .view
            .borrow()
            .observations
            .get(eviction::Signal::MemoryAvailable)
            .map(|o| o.capacity)
        else {
            return Ok(None);
        };
        let Some(threshold) = self
            .eviction
            .manager
            .borrow()
            .thresholds()
            .iter()
            .filter(|t| t.signal == eviction::Signal::MemoryAvailable)
            .map(|t| t.quantity(capacity))
            .max()
        else {
            return Ok(None);
        };
        let memcg = stats::cgroup_dir(&paths.cgroup_mount, paths.version, "memory", "/");
        let stat = self
            .eviction
            .buf
            .borrow_mut()
            .read(&memcg.join("memory.stat"))
            .map(|text| stats::keyed(text, "total_inactive_file").unwrap_or(0))
            .map_err(std::io::Error::other)?;
        let usage = usage_threshold(capacity, threshold, stat);
        if let Some(n) = armed.filter(|n| keeps(n.usage_bytes, usage, capacity)) {
            return Ok(Some(n));
        }
        MemoryNotifier::arm(&memcg, usage).map(Some)
    }

    /// Asks the runtime where its images live (CRI `ImageFsInfo`); imagefs
    /// is nodefs unless that is another filesystem.
    async fn find_image_fs(&self, runtime: &impl RuntimeService) {
        if self.eviction.paths.borrow().image_dir.is_some() {
            return;
        }
        match runtime
            .image_fs_info(crate::cri::api::ImageFsInfoRequest {})
            .await
        {
            Ok(info) => {
                if let Some(dir) = crate::cri::image_fs_mountpoints(&info).next() {
                    log::info!("eviction: imagefs is the filesystem of {}", dir.display());
                    self.eviction.paths.borrow_mut().image_dir = Some(dir);
                }
            }
            Err(e) => log::warn!("eviction: asking the runtime for its image filesystem: {e}"),
        }
    }

    /// The signals now.
    fn observe_node(&self, host: &impl HousekeepingHost) -> Observations {
        let mut first_error = None;
        let stats = stats::node::read(
            &self.eviction.paths.borrow(),
            self.eviction.reads,
            &mut self.eviction.buf.borrow_mut(),
            |e| {
                if first_error.is_none() {
                    first_error = Some(e.to_string());
                }
            },
        );
        let mut failing = self.eviction.failing.borrow_mut();
        if first_error != *failing {
            if let Some(e) = &first_error {
                log::warn!("eviction: {e}; signals from it are not observed");
            }
            *failing = first_error;
        }
        self.eviction.separate_imagefs.set(stats.imagefs.is_some());
        let allocatable = host.node_capacity().allocatable_memory_bytes;
        self.eviction.allocatable_memory.set(allocatable);
        eviction::observe(&stats, allocatable)
    }

    /// Every signal, for `picolet get node`: the last pass's observations
    /// when it reads them all, else a full read now (a pass reads only
    /// what its thresholds observe; an operator asking sees every signal).
    fn every_signal(&self, last: &Observations) -> Observations {
        if self.eviction.reads == stats::node::Wanted::ALL {
            return *last;
        }
        let stats = stats::node::read(
            &self.eviction.paths.borrow(),
            stats::node::Wanted::ALL,
            &mut self.eviction.buf.borrow_mut(),
            |e| log::debug!("get node: {e}"),
        );
        eviction::observe(&stats, self.eviction.allocatable_memory.get())
    }

    /// One pass: measure, decide, reclaim, evict at most one pod.
    async fn eviction_pass(&self, host: &impl HousekeepingHost) {
        let started = Instant::now();
        let obs = self.observe_node(host);
        let decision = self
            .eviction
            .manager
            .borrow_mut()
            .step(Instant::now(), &obs);
        let measure_micros = started.elapsed().as_micros() as u64;
        let before = self.eviction.pressure.replace(decision.conditions);
        for c in Condition::ALL {
            if before.get(c) != decision.conditions.get(c) {
                log::info!(
                    "eviction: node condition {} is now {}",
                    c.as_str(),
                    decision.conditions.get(c)
                );
            }
        }
        let (max_measure_micros, passes) = {
            let view = self.eviction.view.borrow();
            (view.max_measure_micros.max(measure_micros), view.passes + 1)
        };
        *self.eviction.view.borrow_mut() = EvictionView {
            observations: obs,
            met: decision.met.clone(),
            measure_micros,
            max_measure_micros,
            passes,
        };
        host.readmit_static_pods(decision.conditions);
        self.update_qos_shares(host);
        self.image_gc_if_due(host.runtime(), &obs).await;
        let Some((threshold, observed)) = decision.act else {
            return;
        };
        // kubelet's `waitForPodsCleanup`: a pod evicted before is given up
        // to POD_CLEANUP_TIMEOUT to stop and hand its memory back before
        // another is chosen; a notified pass a second after an eviction
        // sees the same pressure and must not take a second pod for it.
        let now_secs = crate::agent::now_unix_nanos() / 1_000_000_000;
        if host.evicted_pod_stopping(now_secs - POD_CLEANUP_TIMEOUT.as_secs() as i64) {
            log::info!(
                "eviction: {} still below its threshold; waiting for the evicted pod to stop first",
                threshold.signal.as_str()
            );
            return;
        }
        let mut observed = observed;
        if threshold.signal.reclaimable_by_gc() {
            log::info!(
                "eviction: {} below its threshold; removing dead containers and unused images first",
                threshold.signal.as_str()
            );
            self.collect_garbage(host).await;
            self.image_gc_pass(host.runtime(), Some(u64::MAX)).await;
            let obs = self.observe_node(host);
            if !self.eviction.manager.borrow().still_met(&threshold, &obs) {
                log::info!(
                    "eviction: node-level reclaim relieved {}",
                    threshold.signal.as_str()
                );
                return;
            }
            observed = obs.get(threshold.signal).unwrap_or(observed);
        }
        self.evict_one(host, &threshold, observed);
    }

    /// Marks the first pod of the ranking as evicted and wakes its worker.
    pub(in crate::agent) fn evict_one(
        &self,
        host: &impl HousekeepingHost,
        threshold: &Threshold,
        observed: Observation,
    ) {
        let candidates = host.eviction_candidates();
        let mut ranked = self.pod_usages(&candidates, threshold.signal);
        eviction::rank(threshold.signal, &mut ranked);
        let Some(victim) = ranked
            .first()
            .and_then(|v| candidates.iter().find(|c| c.uid == v.uid))
        else {
            log::warn!(
                "eviction: {} is below its threshold and no pod is left to evict",
                threshold.signal.as_str()
            );
            return;
        };
        let message = threshold::message(threshold, observed.capacity, observed.available);
        let grace = threshold::pod_grace_period(
            threshold,
            self.eviction.max_pod_grace,
            accessors::spec(&victim.pod).termination_grace_period_seconds,
        );
        log::warn!(
            "eviction: evicting pod {} (grace {grace}s): {message}",
            accessors::full_name(&victim.pod)
        );
        let eviction = Evicted {
            message,
            grace,
            condition: Some(threshold.signal.condition()),
            at_unix: crate::agent::now_unix_nanos() / 1_000_000_000,
        };
        host.evict(&victim.uid, eviction, threshold.signal);
    }

    /// Writes node allocatable (capacity minus `systemReserved` and
    /// `kubeReserved`) into the `kubepods` cgroup, once at start, as
    /// kubelet's container manager does with `enforceNodeAllocatable: [pods]`;
    /// without `pods` there, the capacity (kubelet still sizes the cgroup).
    fn enforce_node_allocatable(&self, host: &impl HousekeepingHost) {
        let Some(cg) = host.cgroups() else { return };
        let enforce = self.cfg.eviction.enforce_node_allocatable;
        let [system_cgroup, kube_cgroup] = &self.cfg.eviction.reserved_cgroups;
        for (on, key, cgroup) in [
            (enforce.system_reserved, "system-reserved", system_cgroup),
            (enforce.kube_reserved, "kube-reserved", kube_cgroup),
        ] {
            if on {
                log::warn!(
                    "enforceNodeAllocatable: {key:?} is not supported by picolet; {cgroup} is not limited"
                );
            }
        }
        let node = host.node_capacity();
        let capacity = qos::allocatable::Capacity {
            cpu_millis: node.cpu_millis.unwrap_or(0),
            memory_bytes: node.memory_bytes,
            pids: std::fs::read_to_string("/proc/sys/kernel/pid_max")
                .ok()
                .and_then(|s| s.trim().parse().ok()),
        };
        if capacity.cpu_millis == 0 || capacity.memory_bytes == 0 {
            log::warn!("node allocatable: capacity unknown ({capacity:?}); kubepods not limited");
            return;
        }
        let limits = qos::allocatable::kubepods_limits(
            capacity,
            self.cfg.eviction.system_reserved,
            self.cfg.eviction.kube_reserved,
            self.cfg.cgroups_per_qos && enforce.pods,
        );
        let what = if self.cfg.cgroups_per_qos && enforce.pods {
            "node allocatable"
        } else {
            "not enforcing node allocatable (enforceNodeAllocatable has no \"pods\"); capacity"
        };
        match cg.enforce_node_allocatable(limits) {
            Ok(()) => {
                log::info!(
                    "{what} on kubepods: memory {} bytes, cpu shares {}, pids {:?}",
                    limits.memory_bytes,
                    limits.cpu_shares,
                    limits.pids
                );
                self.eviction.allocatable_enforced.set(true);
            }
            Err(e) => log::warn!("node allocatable on kubepods: {e}"),
        }
    }

    /// Recomputes the Burstable and BestEffort cgroups' CPU shares from the
    /// pods' requests (kubelet's QoS container manager), writing on change.
    fn update_qos_shares(&self, host: &impl HousekeepingHost) {
        let Some(cg) = host.cgroups() else { return };
        let pods = host.requesting_pods();
        let shares = qos::allocatable::qos_shares(pods.iter().map(|p| accessors::spec(p)));
        if self.eviction.qos_shares.get() == Some(shares) {
            return;
        }
        match cg.update_qos_shares(shares) {
            Ok(()) => {
                log::debug!("QoS cgroups: burstable cpu shares {}", shares.burstable);
                self.eviction.qos_shares.set(Some(shares));
            }
            Err(e) => log::warn!("QoS cgroups' cpu shares: {e}"),
        }
    }

    /// The last pass's signals, thresholds and conditions as JSON (`picolet
    /// get node`).
    pub(in crate::agent) fn eviction_json(&self) -> serde_json::Value {
        let view = self.eviction.view.borrow();
        let manager = self.eviction.manager.borrow();
        let observations = self.every_signal(&view.observations);
        let signals: serde_json::Map<String, serde_json::Value> = observations
            .iter()
            .map(|(s, o)| {
                (
                    s.as_str().to_string(),
                    serde_json::json!({"available": o.available, "capacity": o.capacity}),
                )
            })
            .collect();
        let thresholds: Vec<serde_json::Value> = manager
            .thresholds()
            .iter()
            .map(|t| {
                let capacity = observations.get(t.signal).map(|o| o.capacity);
                serde_json::json!({
                    "signal": t.signal.as_str(),
                    "value": t.value.to_string(),
                    "quantity": capacity.map(|c| t.quantity(c)),
                    "hard": t.hard,
                    "gracePeriodSeconds": t.grace_period.as_secs(),
                    "minimumReclaim": t.min_reclaim.map(|m| m.to_string()),
                    "met": view.met.contains(t),
                })
            })
            .collect();
        let pressure = self.eviction.pressure.get();
        let conditions: serde_json::Map<String, serde_json::Value> = Condition::ALL
            .iter()
            .map(|c| (c.as_str().to_string(), pressure.get(*c).into()))
            .collect();
        serde_json::json!({
            "signals": signals,
            "thresholds": thresholds,
            "conditions": conditions,
            "lastPassMicros": view.measure_micros,
            "maxPassMicros": view.max_measure_micros,
            "passes": view.passes,
            "notifiedPasses": self.eviction.notified_passes.get(),
        })
    }
}

/// The node's memory pressure file.
const PSI_MEMORY: &str = "/proc/pressure/memory";

/// The PSI trigger: 100 ms of stall within a 1 s window (the kernel's
/// smallest window is 500 ms).
fn arm_psi_trigger() -> Option<PsiTrigger> {
    match PsiTrigger::arm(Path::new(PSI_MEMORY), 100_000, 1_000_000) {
        Ok(t) => {
            log::info!("eviction: PSI trigger armed on {PSI_MEMORY} (100 ms stalled in 1 s)");
            Some(t)
        }
        Err(e) => {
            log::info!("eviction: no PSI trigger on {PSI_MEMORY} ({e})");
            None
        }
    }
}
