//! The agent's health machinery: probe tasks and lifecycle hooks.
//!
//! One small task per (container, probe type) ticks on the probe's period,
//! asks the pure [`probe::Worker`] whether a probe is due and allowed, runs
//! it through [`prober`] (exec via CRI ExecSync, httpGet, tcpSocket, grpc)
//! and publishes the worker's result changes:
//! - readiness → the `ready` flag of the container (Ready/ContainersReady);
//! - startup → the `started` flag; a failure kills the container;
//! - liveness → a failure kills the container, which then restarts per
//!   `restartPolicy` through the normal pod sync.
//!
//! A change is acted on at once, as kubelet's sync loop does
//! ([`Change::follow_up`]): a startup result or a kill wakes the pod's
//! worker (its sync starts a sidecar's followers and writes the status), a
//! readiness result writes the pod's status. After every sync the
//! readiness task of each started, running, not yet ready container is
//! asked to probe at once ([`PodWorkers::trigger_readiness`], kubelet's manual
//! trigger), so Ready follows a startupProbe's success within a second or
//! two instead of at the next periodic resync (`syncFrequency`, 1 min).
//!
//! The in-flight probe future is boxed, so an idle task costs only its
//! small loop state; 300 probes are 300 such tasks on the one executor.
//! Start times are spread over the period by a hash of the probe's
//! identity, so probes do not fire in lockstep.
//!
//! Hooks: `postStart` runs right after StartContainer (a failure kills the
//! container, reason `PostStartHookError`); `preStop` runs before
//! StopContainer within the termination grace period.

use std::rc::Rc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod, Probe};

use super::{now_unix_nanos, PodWorkers};
use crate::cri::RuntimeService;
use crate::pleg::State;
use crate::pod::plan::KillReason;
use crate::pod::{accessors, facts};
use crate::probe as prober;
use crate::probe::{
    wants_readiness_now, Change, ContainerView, FollowUp, Outcome, Params, ProbeType, Step, Worker,
};

/// kubelet never gives a container less than this after its preStop hook.
const MIN_GRACE_AFTER_PRESTOP: i64 = 2;

/// How many of the latest probes the scheduling-lag quantiles cover.
const LAG_SAMPLES: usize = 1024;

/// Counters and the scheduling-lag sample behind `/metrics`.
#[derive(Default)]
pub struct ProbeMetrics {
    /// prober_probe_total by (probe_type, result).
    totals: std::collections::BTreeMap<(&'static str, &'static str), u64>,
    /// The latest delays from due time to probe start, in microseconds.
    /// 1024 (4 KiB) keeps ten samples above the 99th percentile; 4096 was
    /// 16 KiB per node, a twelfth of a hollow node's budget.
    lag_us: heapless::HistoryBuf<u32, LAG_SAMPLES>,
}

impl ProbeMetrics {
    fn record(&mut self, kind: ProbeType, outcome: Outcome, lag: Duration) {
        let result = match outcome {
            Outcome::Success => "successful",
            Outcome::Failure => "failed",
            Outcome::Unknown => "unknown",
        };
        *self.totals.entry((kind.as_str(), result)).or_default() += 1;
        self.lag_us
            .write(lag.as_micros().min(u32::MAX as u128) as u32);
    }

    /// The q-quantile (0..=1) of the recorded lags.
    pub fn lag_quantile(&self, q: f64) -> Option<Duration> {
        let mut v: Vec<u32> = self.lag_us.oldest_ordered().copied().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let i = ((v.len() - 1) as f64 * q).round() as usize;
        Some(Duration::from_micros(v[i] as u64))
    }

    /// Prometheus text, with kubelet's metric name for the counters.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        out.push_str("# HELP prober_probe_total Cumulative number of a liveness, readiness or startup probe for a container by result.\n");
        out.push_str("# TYPE prober_probe_total counter\n");
        for ((kind, result), n) in &self.totals {
            let _ = writeln!(
                out,
                "prober_probe_total{{probe_type=\"{kind}\",result=\"{result}\"}} {n}"
            );
        }
        out.push_str("# HELP picolet_probe_schedule_lag_seconds Delay from a probe's due time to its start, over the latest 1024 probes.\n");
        out.push_str("# TYPE picolet_probe_schedule_lag_seconds summary\n");
        for q in [0.5, 0.9, 0.99] {
            if let Some(d) = self.lag_quantile(q) {
                let _ = writeln!(
                    out,
                    "picolet_probe_schedule_lag_seconds{{quantile=\"{q}\"}} {:.6}",
                    d.as_secs_f64()
                );
            }
        }
    }
}

/// A stable offset in `[0, period)` for this probe.
fn spread(uid: &str, container: &str, kind: ProbeType, period: Duration) -> Duration {
    let digest = md5::compute(format!("{uid}/{container}/{}", kind.as_str()));
    let n = u64::from_le_bytes(digest.0[..8].try_into().expect("8 bytes"));
    let period_ms = period.as_millis().max(1) as u64;
    Duration::from_millis(n % period_ms)
}

fn probes_of(c: &Container) -> impl Iterator<Item = (ProbeType, &Probe)> {
    [
        (ProbeType::Startup, c.startup_probe.as_ref()),
        (ProbeType::Liveness, c.liveness_probe.as_ref()),
        (ProbeType::Readiness, c.readiness_probe.as_ref()),
    ]
    .into_iter()
    .filter_map(|(k, p)| p.map(|p| (k, p)))
}

fn params(kind: ProbeType, p: &Probe) -> Params {
    Params::from_api(
        kind,
        p.initial_delay_seconds,
        p.period_seconds,
        p.timeout_seconds,
        p.success_threshold,
        p.failure_threshold,
    )
}

impl<R: RuntimeService> PodWorkers<R> {
    /// Spawns the probe tasks of a pod (app containers and sidecars, as
    /// kubelet) and seeds the ready/started flags of probed containers.
    pub(super) fn start_probes(self: &Rc<Self>, uid: &str, pod: &Pod) -> Vec<smol::Task<()>> {
        let mut tasks = Vec::new();
        let mut pods = self.pods.borrow_mut();
        let entry = pods.get_mut(uid);
        let mut seeds = Vec::new();
        let mut triggers = Vec::new();
        for (c, init) in accessors::all_containers(pod) {
            if init && !crate::qos::is_sidecar(c) {
                continue;
            }
            for (kind, _) in probes_of(c) {
                let mut trigger = None;
                match kind {
                    ProbeType::Readiness => {
                        seeds.push((c.name.clone(), true, false));
                        let (tx, rx) = smol::channel::bounded(1);
                        triggers.push((c.name.clone(), tx));
                        trigger = Some(rx);
                    }
                    ProbeType::Startup => seeds.push((c.name.clone(), false, false)),
                    ProbeType::Liveness => {}
                }
                let me = self.clone();
                let (uid, name) = (uid.to_string(), c.name.clone());
                tasks.push(crate::rt::spawn(async move {
                    me.probe_loop(uid, name, kind, trigger).await
                }));
            }
        }
        if let Some(e) = entry {
            for (name, readiness, value) in seeds {
                let c = e.container(&name);
                if readiness {
                    c.ready = Some(value);
                } else {
                    c.started = Some(value);
                }
            }
            for c in e.containers.values_mut() {
                c.readiness_trigger = None;
            }
            for (name, tx) in triggers {
                e.container(&name).readiness_trigger = Some(tx);
            }
        }
        tasks
    }

    /// What the probe worker sees of its container now: whether it runs,
    /// when it started, whether it passed its startup probe. Its ID and
    /// the pod's IP are written into `id` and `pod_ip`, which keep their
    /// text (and allocate nothing) while it stays the same: this runs at
    /// every tick of every probe.
    fn container_view(
        &self,
        uid: &str,
        name: &str,
        now: Instant,
        id: &mut String,
        pod_ip: &mut String,
    ) -> Option<(bool, Instant, bool)> {
        let pods = self.pods.borrow();
        let e = pods.get(uid)?;
        if e.lifecycle.is_deleted() {
            return None;
        }
        let c = e.observed.latest(name)?;
        let ago = Duration::from_nanos((now_unix_nanos() - c.started_at).max(0) as u64);
        let started_at = now.checked_sub(ago).unwrap_or(now);
        let started = e
            .containers
            .get(name)
            .and_then(|c| c.started)
            .unwrap_or(true);
        let sandbox = e.observed.latest_sandbox().filter(|s| s.ready);
        let ip = facts::first_pod_ip(&e.pod, sandbox, &self.host.host_ips);
        for (have, now) in [(&mut *id, c.id.as_str()), (&mut *pod_ip, ip)] {
            if have != now {
                have.clear();
                have.push_str(now);
            }
        }
        Some((c.state == State::Running, started_at, started))
    }

    /// Asks the readiness task of every started, running, not yet ready
    /// container of the pod to probe at once (kubelet's prober manager does
    /// so at every status it generates). Never waits: a request already
    /// pending is enough.
    pub(super) fn trigger_readiness(&self, uid: &str) {
        let pods = self.pods.borrow();
        let Some(e) = pods.get(uid).filter(|e| e.lifecycle.is_wanted()) else {
            return;
        };
        for (name, c) in e.containers.iter() {
            let Some(tx) = &c.readiness_trigger else {
                continue;
            };
            let running = e
                .observed
                .latest(name)
                .is_some_and(|o| o.state == State::Running);
            if wants_readiness_now(c.ready, c.started, running) {
                let _ = tx.try_send(());
            }
        }
    }

    async fn probe_loop(
        self: Rc<Self>,
        uid: String,
        name: String,
        kind: ProbeType,
        mut trigger: Option<smol::channel::Receiver<()>>,
    ) {
        // The pod is shared, not copied: a k8s Container is kilobytes, and
        // there may be hundreds of these tasks. A changed pod gets new tasks.
        let Some(pod) = self.pods.borrow().get(&uid).map(|e| e.pod.clone()) else {
            return;
        };
        let Some(container) = accessors::container(&pod, &name) else {
            return;
        };
        let Some(spec) = probes_of(container)
            .find(|(k, _)| *k == kind)
            .map(|(_, p)| p)
        else {
            return;
        };
        let params = params(kind, spec);
        let first = Instant::now() + spread(&uid, &name, kind, params.period);
        let mut worker = Worker::new(kind, params, first);
        let (mut id, mut pod_ip) = (String::new(), String::new());
        // The handler, built for the pod IP it names (the IP changes only
        // with a new sandbox).
        let mut handler: Option<(String, Result<prober::Handler, String>)> = None;
        loop {
            let now = Instant::now();
            let due = worker.next_due();
            let view = self.container_view(&uid, &name, now, &mut id, &mut pod_ip);
            let cv = view.map(|(running, started_at, started)| ContainerView {
                id: &id,
                running,
                started_at,
                started,
            });
            let (step, change) = worker.step(cv.as_ref(), now);
            if let Some(change) = change {
                self.apply_probe_change(&uid, &name, kind, spec, change, "");
            }
            match step {
                Step::Wait { next } => {
                    // Some(true): asked to probe now; Some(false): nobody
                    // can ask any more (the sender went); None: the tick.
                    let asked = match &trigger {
                        Some(rx) => {
                            smol::future::or(async { Some(rx.recv().await.is_ok()) }, async {
                                crate::rt::sleep_until_on_grid(next).await;
                                None
                            })
                            .await
                        }
                        None => {
                            crate::rt::sleep_until_on_grid(next).await;
                            None
                        }
                    };
                    match asked {
                        Some(true) => worker.trigger(),
                        Some(false) => trigger = None,
                        None => {}
                    }
                }
                Step::Probe { timeout } => {
                    if view.is_none() {
                        continue;
                    }
                    let lag = now.saturating_duration_since(due);
                    if handler.as_ref().is_some_and(|(ip, _)| *ip != pod_ip) {
                        handler = None;
                    }
                    let (_, built) = handler.get_or_insert_with(|| {
                        let built = prober::probe_handler(spec, &pod_ip, container)
                            .map_err(|e| e.to_string());
                        (pod_ip.clone(), built)
                    });
                    let result = match built {
                        Ok(h) => Box::pin(self.run_handler(&id, h, timeout)).await,
                        Err(e) => prober::ProbeResult::failure(e.clone()),
                    };
                    self.probe_metrics
                        .borrow_mut()
                        .record(kind, result.outcome, lag);
                    if result.outcome != Outcome::Success {
                        log::debug!(
                            "{} probe of {name} in pod {uid}: {:?}: {}",
                            kind.as_str(),
                            result.outcome,
                            result.message
                        );
                    }
                    if result.outcome == Outcome::Failure {
                        self.probe_failed_event(&uid, &name, kind, &result.message);
                    }
                    if result.warning {
                        self.probe_warning_event(&uid, &name, kind, &result.message);
                    }
                    if let Some(change) = worker.record(result.outcome) {
                        self.apply_probe_change(&uid, &name, kind, spec, change, &result.message);
                    }
                }
            }
        }
    }

    /// kubelet's `Unhealthy` event for one failed probe.
    fn probe_failed_event(&self, uid: &str, name: &str, kind: ProbeType, message: &str) {
        let pod = self.pods.borrow().get(uid).map(|e| e.pod.clone());
        if let Some(pod) = pod {
            let text = format!("{} probe failed: {message}", kind.as_str());
            self.event(&pod, Some(name), true, "Unhealthy", text.trim_end());
        }
    }

    /// kubelet's `ProbeWarning` event: a probe that passed with a warning.
    fn probe_warning_event(&self, uid: &str, name: &str, kind: ProbeType, message: &str) {
        let pod = self.pods.borrow().get(uid).map(|e| e.pod.clone());
        if let Some(pod) = pod {
            let text = format!("{} probe warning: {message}", kind.as_str());
            self.event(&pod, Some(name), true, "ProbeWarning", &text);
        }
    }

    fn apply_probe_change(
        &self,
        uid: &str,
        name: &str,
        kind: ProbeType,
        spec: &Probe,
        change: Change,
        message: &str,
    ) {
        let follow_up = self.note_probe_change(uid, name, kind, spec, change, message);
        match follow_up {
            Some(FollowUp::SyncPod) => self.wake(uid),
            Some(FollowUp::WriteStatus) => self.report_status(uid),
            None => {}
        }
    }

    /// Records a change in the pod's entry; returns what it calls for.
    fn note_probe_change(
        &self,
        uid: &str,
        name: &str,
        kind: ProbeType,
        spec: &Probe,
        change: Change,
        message: &str,
    ) -> Option<FollowUp> {
        let mut pods = self.pods.borrow_mut();
        let e = pods.get_mut(uid)?;
        let pod = crate::pod::full_name(&e.pod);
        match kind {
            ProbeType::Readiness => {
                let ready = change.result == Outcome::Success;
                if e.container(name).ready.replace(ready) != Some(ready) {
                    if ready {
                        log::info!("container {name} of pod {pod} is ready");
                    } else if !message.is_empty() {
                        log::warn!("Unhealthy: Readiness probe of container {name} in pod {pod} failed: {message}");
                    }
                }
            }
            ProbeType::Startup => {
                e.container(name).started = Some(change.result == Outcome::Success);
                if change.result == Outcome::Success {
                    log::info!(
                        "container {name} of pod {pod} has started (startup probe succeeded)"
                    );
                }
            }
            ProbeType::Liveness => {}
        }
        if change.kill {
            let (reason, what) = match kind {
                ProbeType::Startup => (KillReason::StartupProbeFailed, "startup"),
                _ => (KillReason::Unhealthy, "liveness"),
            };
            log::warn!(
                "Unhealthy: {} probe of container {name} in pod {pod} failed: {message}",
                kind.as_str()
            );
            log::info!("container {name} of pod {pod} failed {what} probe, will be restarted");
            let c = e.container(name);
            c.unhealthy = Some(reason);
            if let Some(g) = spec.termination_grace_period_seconds {
                c.kill_grace = Some(g);
            }
            c.kill_message = Some(format!(
                "Container {name} failed {what} probe, will be restarted"
            ));
        }
        change.follow_up(kind)
    }

    /// Runs a container's postStart hook; on failure the caller kills it.
    pub(super) async fn run_post_start(
        &self,
        pod: &Pod,
        c: &Container,
        container_id: &str,
        pod_ip: &str,
    ) -> Result<(), String> {
        let Some(h) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) else {
            return Ok(());
        };
        let handler = prober::lifecycle_handler(h, pod_ip, c).map_err(|e| e.to_string())?;
        let timeout = Duration::from_secs(facts::grace_period(pod).max(1) as u64);
        let r = self.run_handler(container_id, &handler, timeout).await;
        match r.outcome {
            Outcome::Success => Ok(()),
            _ => Err(r.message),
        }
    }

    /// Stops one container the way kubelet does: its preStop hook first,
    /// within the grace period, then StopContainer with what is left of it.
    pub(super) async fn kill_container(
        &self,
        pod: &Pod,
        name: &str,
        container_id: &str,
        grace: i64,
    ) -> Result<(), crate::cri::CriError> {
        let mut grace = grace.max(0);
        self.event(
            pod,
            Some(name),
            false,
            "Killing",
            &format!("Stopping container {name}"),
        );
        let spec = accessors::container(pod, name).cloned();
        if let Some(c) = spec {
            if let Some(h) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) {
                let pod_ip = {
                    let pods = self.pods.borrow();
                    let sandbox = pods
                        .get(crate::pod::uid(pod))
                        .and_then(|e| e.observed.latest_sandbox());
                    facts::pod_ip(pod, sandbox, &self.host.host_ips)
                };
                let started = Instant::now();
                match prober::lifecycle_handler(h, &pod_ip, &c) {
                    Ok(handler) => {
                        let budget = Duration::from_secs(grace as u64);
                        let r = crate::rt::timeout(
                            budget,
                            self.run_handler(container_id, &handler, budget),
                        )
                        .await;
                        match r {
                            Some(r) if r.outcome == Outcome::Success => {
                                log::info!("preStop hook of container {name} in pod {} ran", crate::pod::full_name(pod))
                            }
                            Some(r) => log::warn!("preStop hook of container {name} in pod {} failed: {}", crate::pod::full_name(pod), r.message),
                            None => log::warn!("preStop hook of container {name} in pod {} did not finish within {grace}s", crate::pod::full_name(pod)),
                        }
                    }
                    Err(e) => log::warn!(
                        "preStop hook of container {name} in pod {}: {e}",
                        crate::pod::full_name(pod)
                    ),
                }
                grace = (grace - started.elapsed().as_secs() as i64).max(MIN_GRACE_AFTER_PRESTOP);
            }
        }
        self.stop_container(container_id, grace).await
    }

    /// Runs a probe or hook handler. ExecSync needs the CRI client; a
    /// simulated runtime has none, and its handlers report Unknown, but a
    /// hollow node's succeed.
    async fn run_handler(
        &self,
        container_id: &str,
        handler: &prober::Handler,
        timeout: Duration,
    ) -> prober::ProbeResult {
        if self.runtime.handlers_succeed() {
            return prober::ProbeResult::success("a hollow node's probes and hooks succeed");
        }
        match self.runtime.cri() {
            Some(rt) => prober::run_handler(rt, container_id, handler, timeout).await,
            None => prober::ProbeResult::unknown("this runtime runs no probes or hooks"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_start_offsets_are_spread_and_stable() {
        let p = Duration::from_secs(1);
        let a = spread("u1", "c", ProbeType::Liveness, p);
        assert_eq!(a, spread("u1", "c", ProbeType::Liveness, p));
        let offsets: std::collections::HashSet<_> = (0..50)
            .map(|i| spread(&format!("u{i}"), "c", ProbeType::Readiness, p).as_millis() / 100)
            .collect();
        assert!(offsets.len() >= 8, "spread over the period: {offsets:?}");
        assert!(a < p);
    }

    /// Counts the statuses it is told.
    #[derive(Default)]
    struct Statuses(std::cell::Cell<usize>);

    impl crate::agent::StatusSink for Statuses {
        fn status(&self, _: &Pod, _: &k8s_openapi::api::core::v1::PodStatus) {
            self.0.set(self.0.get() + 1);
        }
        fn terminated(&self, _: &Pod, _: &k8s_openapi::api::core::v1::PodStatus) {}
    }

    const PROBED: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: probed}
spec:
  containers:
  - name: app
    image: "busybox:1.36"
    startupProbe: {exec: {command: ["true"]}}
    readinessProbe: {exec: {command: ["true"]}}
"#;

    #[test]
    fn a_started_container_syncs_its_pod_and_a_readiness_change_writes_the_status_at_once() {
        use crate::agent::pod_workers::tests::{apply, file_set, static_pod, sync, Node};
        let node = Node::new();
        let agent = node.agent();
        let sink = Rc::new(Statuses::default());
        agent.set_status_sink(sink.clone());
        let pod = static_pod(PROBED);
        let uid = crate::pod::uid(&pod).to_string();
        apply(&agent, file_set(vec![pod.clone()]));
        sync(&agent, &pod);
        let (wake, woken) = smol::channel::bounded(1);
        let (trigger, asked) = smol::channel::bounded(1);
        {
            let mut pods = agent.pods.borrow_mut();
            let e = pods.get_mut(&uid).unwrap();
            e.wake = wake;
            let c = e.container("app");
            assert_eq!((c.started, c.ready), (Some(false), Some(false)), "seeded");
            c.readiness_trigger = Some(trigger);
        }
        let spec = pod.spec.as_ref().unwrap().containers[0].clone();
        let startup = spec.startup_probe.as_ref().unwrap();
        let readiness = spec.readiness_probe.as_ref().unwrap();
        let success = Change {
            result: Outcome::Success,
            kill: false,
        };

        // Not started: the readiness probe is not asked for.
        agent.trigger_readiness(&uid);
        assert!(asked.try_recv().is_err());

        // The startup probe succeeds: the pod syncs now, not at its resync.
        agent.apply_probe_change(&uid, "app", ProbeType::Startup, startup, success, "");
        assert!(woken.try_recv().is_ok(), "the pod worker is woken");
        assert_eq!(sink.0.get(), 0);
        // That sync's status asks the readiness probe to run at once.
        agent.trigger_readiness(&uid);
        assert!(asked.try_recv().is_ok(), "readiness is probed at once");

        // Readiness succeeds: the status is written at once.
        agent.apply_probe_change(&uid, "app", ProbeType::Readiness, readiness, success, "");
        assert_eq!(sink.0.get(), 1, "the status is written at once");
        assert!(woken.try_recv().is_err(), "no sync is needed for that");
        agent.trigger_readiness(&uid);
        assert!(asked.try_recv().is_err(), "ready: nothing to ask");
    }

    #[test]
    fn a_label_change_keeps_a_ready_container_ready_and_a_probe_change_starts_over() {
        use crate::agent::pod_workers::tests::{apply, file_set, static_pod, sync, Node};
        let node = Node::new();
        let agent = node.agent();
        let pod = static_pod(PROBED);
        let uid = crate::pod::uid(&pod).to_string();
        apply(&agent, file_set(vec![pod.clone()]));
        sync(&agent, &pod);
        let spec = pod.spec.as_ref().unwrap().containers[0].clone();
        let success = Change {
            result: Outcome::Success,
            kill: false,
        };
        let startup = spec.startup_probe.as_ref().unwrap();
        let readiness = spec.readiness_probe.as_ref().unwrap();
        agent.apply_probe_change(&uid, "app", ProbeType::Startup, startup, success, "");
        agent.apply_probe_change(&uid, "app", ProbeType::Readiness, readiness, success, "");
        let probed = |agent: &Rc<PodWorkers<_>>| {
            let mut pods = agent.pods.borrow_mut();
            let c = pods.get_mut(&uid).unwrap().container("app");
            (c.started, c.ready)
        };
        assert_eq!(probed(&agent), (Some(true), Some(true)));

        // A label and an annotation: the same probes, still started and ready.
        let mut labelled = pod.clone();
        labelled
            .metadata
            .labels
            .get_or_insert_default()
            .insert("tier".into(), "web".into());
        labelled
            .metadata
            .annotations
            .get_or_insert_default()
            .insert("note".into(), "x".into());
        apply(&agent, file_set(vec![labelled.clone()]));
        assert_eq!(
            probed(&agent),
            (Some(true), Some(true)),
            "a label reset the probes"
        );

        // A changed readiness probe: its results start over.
        let mut reprobed = labelled;
        reprobed.spec.as_mut().unwrap().containers[0]
            .readiness_probe
            .as_mut()
            .unwrap()
            .period_seconds = Some(7);
        apply(&agent, file_set(vec![reprobed]));
        assert_eq!(probed(&agent), (Some(false), Some(false)));
    }

    #[test]
    fn lag_quantiles_come_from_the_recorded_sample() {
        let mut m = ProbeMetrics::default();
        for ms in 1..=100 {
            m.record(
                ProbeType::Readiness,
                Outcome::Success,
                Duration::from_millis(ms),
            );
        }
        assert_eq!(m.lag_quantile(0.5), Some(Duration::from_millis(51)));
        assert_eq!(m.lag_quantile(0.99), Some(Duration::from_millis(99)));
        let mut s = String::new();
        m.render(&mut s);
        assert!(
            s.contains("prober_probe_total{probe_type=\"Readiness\",result=\"successful\"} 100"),
            "{s}"
        );
    }
}
