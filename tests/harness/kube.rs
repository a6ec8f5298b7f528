//! A real Kubernetes control plane for integration tests -- owned by the
//! test harness (tests/harness).
//!
//! [`ControlPlane::start`] runs a private etcd and kube-apiserver (and, when
//! asked, kube-controller-manager and kube-scheduler) on free localhost
//! ports, in a fresh temp dir, with a fresh PKI ([`pki`]). The API server
//! runs with `--authorization-mode=Node,RBAC` and
//! `--enable-admission-plugins=NodeRestriction`, as a real cluster does, so
//! a node credential (`system:node:<name>`, see
//! [`ControlPlane::node_kubeconfig`]) may do exactly what a kubelet may.
//! Nothing is mocked: the binaries are upstream's ([`assets`] finds them).
//!
//! Every process is started in its own process group and killed on drop,
//! even when the test panicked. A small reaper process (`sh`, watching a
//! pipe from the test process) kills whatever still runs from the temp dir
//! and removes it when the test process dies without dropping the control
//! plane: SIGKILL, or a [`ControlPlane::shared`] instance, which lives in a
//! static and is never dropped.
//!
//! It knows nothing of picolet: tests hand picolet the kubeconfig files it
//! writes. Environment knobs: `KUBE_ASSETS`, `KUBE_ASSETS_DOWNLOAD`,
//! `KUBE_ASSETS_CACHE` (see [`assets`]); `PICOLET_TEST_KEEP=1` keeps the
//! temp dir of a passing test.

pub mod assets;
pub mod pki;

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use self::pki::{base64, CertPair, Pki};

/// How long etcd gets to answer `/health`.
const ETCD_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long kube-apiserver gets to answer `/readyz` with `ok` (5-15 s on 2
/// idle cores; more when other tests run beside it).
const APISERVER_READY_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the controller manager gets to create the `default`
/// ServiceAccount, and the scheduler to answer `/healthz`.
const CONTROLLERS_READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a graceful stop of the API server may take before SIGKILL.
const APISERVER_STOP_GRACE: Duration = Duration::from_secs(30);
/// Upper bound for one kubectl invocation.
const KUBECTL_TIMEOUT: Duration = Duration::from_secs(120);
/// Attempts at starting a component whose free port was taken meanwhile.
const PORT_ATTEMPTS: usize = 5;

/// The service CIDR; its first address is the `kubernetes` Service's.
pub const SERVICE_CLUSTER_IP_RANGE: &str = "10.96.0.0/16";

/// Audit what nodes ask (cheap: nothing else is logged).
const AUDIT_POLICY: &str = "\
# Written by tests/harness/kube.rs
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: [\"system:nodes\"]
- level: None
";

/// One request seen in the audit log; [`ControlPlane::requests_by`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditedRequest {
    /// Kubernetes' verb: `get`, `list`, `watch`, `create`, `patch`, ...
    pub verb: String,
    /// Path and query, e.g. `/api/v1/pods?fieldSelector=...&watch=true`.
    pub uri: String,
    /// The HTTP status, once the server answered.
    pub code: Option<u16>,
    /// The last audit stage seen: `ResponseStarted` (a watch still open) or
    /// `ResponseComplete`, or `Panic`.
    pub stage: String,
    pub user_agent: String,
}

/// How a kubeconfig carries its credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credentials {
    /// `certificate-authority`, `client-certificate` and `client-key` as
    /// file paths.
    Files,
    /// The same as `-data` fields (base64 PEM), no files referenced.
    Inline,
    /// A bearer `token` (from the API server's static token file), with
    /// `certificate-authority-data`.
    Token,
    /// A `tokenFile`, with `certificate-authority` as a path.
    TokenFile,
}

/// Options of a control plane; [`ControlPlane::builder`].
#[derive(Clone, Debug, Default)]
pub struct ControlPlaneBuilder {
    controller_manager: bool,
    scheduler: bool,
    apiserver_args: Vec<String>,
    controller_manager_args: Vec<String>,
    node_tokens: Vec<String>,
}

impl ControlPlaneBuilder {
    /// Also run kube-controller-manager (service accounts, garbage
    /// collector, node lifecycle, CSR signing). Without it the harness
    /// creates the `default` ServiceAccount of `default` itself.
    pub fn with_controller_manager(mut self) -> Self {
        self.controller_manager = true;
        self
    }

    /// Also run kube-scheduler.
    pub fn with_scheduler(mut self) -> Self {
        self.scheduler = true;
        self
    }

    /// An extra kube-apiserver flag (`--name=value`); it wins over the
    /// harness's own, e.g. `--etcd-compaction-interval=10s`.
    pub fn apiserver_arg(mut self, arg: &str) -> Self {
        self.apiserver_args.push(arg.to_string());
        self
    }

    /// An extra kube-controller-manager flag, e.g.
    /// `--node-monitor-grace-period=20s`.
    pub fn controller_manager_arg(mut self, arg: &str) -> Self {
        self.controller_manager_args.push(arg.to_string());
        self
    }

    /// Registers a bearer token for node `name` before the API server
    /// starts, so [`Credentials::Token`] kubeconfigs for it need no restart.
    pub fn node_token(mut self, name: &str) -> Self {
        self.node_tokens.push(name.to_string());
        self
    }

    pub fn start(self) -> ControlPlane {
        ControlPlane::start_with(self)
    }
}

/// A running control plane; see the module doc. Dropping it kills every
/// process and removes the temp dir.
pub struct ControlPlane {
    dir: Option<TempDir>,
    path: PathBuf,
    pki: Pki,
    opts: ControlPlaneBuilder,
    etcd_client_port: AtomicU16,
    etcd_peer_port: AtomicU16,
    apiserver_port: AtomicU16,
    procs: Mutex<Procs>,
    /// Node name -> bearer token, as in the static token file.
    tokens: Mutex<HashMap<String, String>>,
    reaper: Mutex<Option<(Child, ChildStdin)>>,
    files: AtomicUsize,
    startup_time: Duration,
}

#[derive(Default)]
struct Procs {
    etcd: Option<Proc>,
    apiserver: Option<Proc>,
    controller_manager: Option<Proc>,
    scheduler: Option<Proc>,
}

/// A component's process, leader of its own process group.
struct Proc {
    child: Child,
}

impl Proc {
    fn signal_group(&self, sig: rustix::process::Signal) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process_group(pid, sig);
        }
    }

    /// SIGKILL to the whole group, and reap.
    fn kill(mut self) {
        self.signal_group(rustix::process::Signal::KILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, up to `grace` to exit, then SIGKILL.
    fn stop(mut self, grace: Duration) {
        self.signal_group(rustix::process::Signal::TERM);
        if super::wait_child(&mut self.child, grace).is_none() {
            self.kill();
        } else {
            // The group may hold children of the component; leave none.
            self.signal_group(rustix::process::Signal::KILL);
        }
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl ControlPlane {
    pub fn builder() -> ControlPlaneBuilder {
        ControlPlaneBuilder::default()
    }

    /// etcd and kube-apiserver, ready (`/readyz` answers `ok`).
    pub fn start() -> ControlPlane {
        Self::builder().start()
    }

    /// One control plane for the whole test process (etcd and API server
    /// only), started on first use. Tests sharing it must not stop its API
    /// server, and should use their own namespaces and node names. The
    /// reaper cleans it up when the process exits.
    pub fn shared() -> &'static ControlPlane {
        static SHARED: OnceLock<ControlPlane> = OnceLock::new();
        SHARED.get_or_init(ControlPlane::start)
    }

    fn start_with(opts: ControlPlaneBuilder) -> ControlPlane {
        let began = Instant::now();
        let binaries = ["etcd", "kube-apiserver", "kubectl"]
            .into_iter()
            .chain(opts.controller_manager.then_some("kube-controller-manager"))
            .chain(opts.scheduler.then_some("kube-scheduler"));
        for b in binaries {
            assets::binary(b);
        }
        let dir = tempfile::Builder::new()
            .prefix("picolet-kube.")
            .tempdir()
            .expect("temp dir for the control plane");
        let path = dir.path().to_path_buf();
        let reaper = spawn_reaper(&path);
        let pki = Pki::create(&path.join("pki"));
        for sub in ["logs", "etcd", "kubeconfigs", "manifests"] {
            fs::create_dir_all(path.join(sub)).expect("control plane dirs");
        }
        let tokens = opts
            .node_tokens
            .iter()
            .map(|n| (n.clone(), random_token()))
            .collect();
        let mut cp = ControlPlane {
            dir: Some(dir),
            path,
            pki,
            opts,
            etcd_client_port: AtomicU16::new(0),
            etcd_peer_port: AtomicU16::new(0),
            apiserver_port: AtomicU16::new(0),
            procs: Mutex::new(Procs::default()),
            tokens: Mutex::new(tokens),
            reaper: Mutex::new(Some(reaper)),
            files: AtomicUsize::new(0),
            startup_time: Duration::ZERO,
        };
        cp.write_token_file();
        fs::write(cp.audit_policy_file(), AUDIT_POLICY).expect("writing the audit policy");
        let admin = cp.pki.admin();
        cp.start_etcd();
        cp.start_apiserver_on_free_port();
        cp.write_kubeconfig(
            &cp.admin_kubeconfig(),
            &cp.apiserver_url(),
            "kubernetes-admin",
            Credentials::Files,
            Some(&admin),
            None,
        );
        cp.wait_apiserver_ready();
        if cp.opts.controller_manager {
            cp.start_controller_manager();
        } else {
            cp.ensure_service_account("default");
        }
        if cp.opts.scheduler {
            cp.start_scheduler();
        }
        cp.startup_time = began.elapsed();
        cp
    }

    // --- where things are ---------------------------------------------------

    /// The temp dir everything of this control plane lives in.
    pub fn dir(&self) -> &Path {
        &self.path
    }

    /// How long [`ControlPlane::start`] took, from asset lookup to ready.
    pub fn startup_time(&self) -> Duration {
        self.startup_time
    }

    /// `https://127.0.0.1:<port>`.
    pub fn apiserver_url(&self) -> String {
        format!("https://{}", self.apiserver_addr())
    }

    /// Where the API server listens, e.g. for a [`super::faultproxy::FaultProxy`].
    pub fn apiserver_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.apiserver_port.load(Ordering::SeqCst)))
    }

    /// etcd's client URL, `http://127.0.0.1:<port>`.
    pub fn etcd_url(&self) -> String {
        format!("http://{}", self.etcd_addr())
    }

    fn etcd_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.etcd_client_port.load(Ordering::SeqCst)))
    }

    /// The CA certificate (PEM) that signed the serving and client certs.
    pub fn ca_cert(&self) -> PathBuf {
        self.pki.ca().cert
    }

    /// The PKI: CA, admin and node certificates, service-account keys.
    pub fn pki(&self) -> &Pki {
        &self.pki
    }

    /// A kubeconfig of the cluster admin (O=system:masters), file form.
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.path.join("kubeconfigs/admin.kubeconfig")
    }

    /// A kubeconfig for node `name` (CN=system:node:<name>,
    /// O=system:nodes) with the CA and client certificate as files, for
    /// the API server directly.
    pub fn node_kubeconfig(&self, name: &str) -> PathBuf {
        self.node_kubeconfig_with(name, Credentials::Files, &self.apiserver_url())
    }

    /// A kubeconfig for node `name` in the given form, for `server` (the
    /// API server's URL, or a fault proxy's `https_url()`). A token form for
    /// a node not registered with [`ControlPlaneBuilder::node_token`]
    /// restarts the API server to load the new token (slow, but works).
    pub fn node_kubeconfig_with(&self, name: &str, creds: Credentials, server: &str) -> PathBuf {
        let n = self.files.fetch_add(1, Ordering::SeqCst);
        let style = format!("{creds:?}").to_lowercase();
        let file = self
            .path
            .join(format!("kubeconfigs/node-{name}.{style}.{n}.kubeconfig"));
        let user = format!("system:node:{name}");
        match creds {
            Credentials::Files | Credentials::Inline => {
                let pair = self.pki.node(name);
                self.write_kubeconfig(&file, server, &user, creds, Some(&pair), None);
            }
            Credentials::Token | Credentials::TokenFile => {
                let token = self.node_token(name);
                self.write_kubeconfig(&file, server, &user, creds, None, Some(&token));
            }
        }
        file
    }

    /// The bearer token of node `name`, registering it (and restarting the
    /// API server) if it is new.
    pub fn node_token(&self, name: &str) -> String {
        let (token, new) = {
            let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
            match tokens.get(name) {
                Some(t) => (t.clone(), false),
                None => {
                    let t = random_token();
                    tokens.insert(name.to_string(), t.clone());
                    (t, true)
                }
            }
        };
        if new {
            eprintln!("control plane: restarting kube-apiserver to load a token for node {name}");
            self.write_token_file();
            self.stop_apiserver();
            self.start_apiserver();
        }
        token
    }

    // --- kubectl ---------------------------------------------------------------

    /// Runs kubectl as the cluster admin. Panics if it hangs past
    /// [`KUBECTL_TIMEOUT`].
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_as(&self.admin_kubeconfig(), args)
    }

    /// Runs kubectl with another kubeconfig (e.g. a node's).
    pub fn kubectl_as(&self, kubeconfig: &Path, args: &[&str]) -> Output {
        let mut cmd = Command::new(assets::binary("kubectl"));
        cmd.arg("--kubeconfig").arg(kubeconfig).args(args);
        super::run_with_timeout(&mut cmd, KUBECTL_TIMEOUT)
            .unwrap_or_else(|| panic!("kubectl {args:?} still running after {KUBECTL_TIMEOUT:?}"))
    }

    /// Runs kubectl as the admin; panics with its stderr unless it
    /// succeeds. Returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        if !out.status.success() {
            panic!(
                "kubectl {} failed ({}):\n{}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl apply -f` of `yaml` (written to a file first), as the admin.
    pub fn apply(&self, yaml: &str) -> String {
        let n = self.files.fetch_add(1, Ordering::SeqCst);
        let file = self.path.join(format!("manifests/{n}.yaml"));
        fs::write(&file, yaml).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
        self.kubectl_ok(&["apply", "-f", file.to_str().expect("utf-8 path")])
    }

    /// Creates namespace `ns` if missing and, without a controller
    /// manager, its `default` ServiceAccount (pods need it to be admitted).
    pub fn ensure_namespace(&self, ns: &str) {
        let out = self.kubectl(&["create", "namespace", ns]);
        if !out.status.success() && !already_exists(&out) {
            panic!(
                "creating namespace {ns}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if !self.opts.controller_manager {
            self.ensure_service_account(ns);
        }
    }

    fn ensure_service_account(&self, ns: &str) {
        let out = self.kubectl(&["create", "serviceaccount", "default", "-n", ns]);
        if !out.status.success() && !already_exists(&out) {
            panic!(
                "creating ServiceAccount {ns}/default: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    // --- faults --------------------------------------------------------------------

    /// Stops kube-apiserver gracefully (SIGTERM; SIGKILL after 30 s). etcd
    /// keeps running; [`ControlPlane::start_apiserver`] brings it back on
    /// the same port.
    pub fn stop_apiserver(&self) {
        if let Some(p) = self.procs().apiserver.take() {
            p.stop(APISERVER_STOP_GRACE);
        }
    }

    /// SIGKILLs kube-apiserver (a crash: no graceful close of watches).
    pub fn kill_apiserver(&self) {
        if let Some(p) = self.procs().apiserver.take() {
            p.kill();
        }
    }

    /// Starts kube-apiserver again on the same port and waits until ready.
    pub fn start_apiserver(&self) {
        assert!(
            self.procs().apiserver.is_none(),
            "start_apiserver: it is already running"
        );
        let p = self.spawn_apiserver();
        self.procs().apiserver = Some(p);
        self.wait_apiserver_ready();
    }

    /// True while kube-apiserver's process runs.
    pub fn apiserver_running(&self) -> bool {
        self.procs()
            .apiserver
            .as_mut()
            .is_some_and(|p| p.exited().is_none())
    }

    /// etcd's current revision.
    pub fn etcd_revision(&self) -> i64 {
        let (status, body) = http(
            self.etcd_addr(),
            "POST",
            "/v3/kv/range",
            r#"{"key":"AA=="}"#,
        )
        .unwrap_or_else(|e| panic!("etcd range request: {e}"));
        assert_eq!(status, 200, "etcd range request answered {status}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("etcd range reply is not JSON ({e}): {body}"));
        let rev = &v["header"]["revision"];
        rev.as_str()
            .and_then(|s| s.parse().ok())
            .or_else(|| rev.as_i64())
            .unwrap_or_else(|| panic!("no header.revision in etcd's reply: {body}"))
    }

    /// Compacts etcd at its current revision (through the v3 gateway,
    /// `POST /v3/kv/compaction`), so every older resourceVersion is gone:
    /// after an API server restart, a watch from one of them gets 410 Gone.
    /// Returns the revision compacted at.
    pub fn compact_etcd(&self) -> i64 {
        let rev = self.etcd_revision();
        let body = format!(r#"{{"revision":"{rev}","physical":true}}"#);
        let (status, reply) = http(self.etcd_addr(), "POST", "/v3/kv/compaction", &body)
            .unwrap_or_else(|e| panic!("etcd compaction request: {e}"));
        assert_eq!(
            status, 200,
            "etcd compaction at {rev} answered {status}: {reply}"
        );
        rev
    }

    // --- what nodes asked ---------------------------------------------------------

    /// The API server's audit log (JSON lines): every request made with a
    /// node credential (group `system:nodes`), at level Metadata.
    pub fn audit_log_path(&self) -> PathBuf {
        self.path.join("logs/audit.log")
    }

    /// The requests `user` (e.g. `system:node:board-1`) made so far, in
    /// order, one per request (a watch's start and end are merged; `code`
    /// is the last one seen). Only node users are audited. For the bench
    /// and for tests that must tell a watch resume from a relist.
    pub fn requests_by(&self, user: &str) -> Vec<AuditedRequest> {
        let text = fs::read_to_string(self.audit_log_path()).unwrap_or_default();
        let mut order: Vec<String> = Vec::new();
        let mut by_id: HashMap<String, AuditedRequest> = HashMap::new();
        for line in text.lines() {
            let Ok(ev) = serde_json::from_str::<serde_json::Value>(line) else {
                continue; // a line being written right now
            };
            if ev["user"]["username"] != user {
                continue;
            }
            let id = ev["auditID"].as_str().unwrap_or_default().to_string();
            let code = ev["responseStatus"]["code"].as_u64().map(|c| c as u16);
            let stage = ev["stage"].as_str().unwrap_or_default().to_string();
            match by_id.get_mut(&id) {
                Some(r) => {
                    r.code = code.or(r.code);
                    r.stage = stage;
                }
                None => {
                    order.push(id.clone());
                    by_id.insert(
                        id,
                        AuditedRequest {
                            verb: ev["verb"].as_str().unwrap_or_default().to_string(),
                            uri: ev["requestURI"].as_str().unwrap_or_default().to_string(),
                            code,
                            stage,
                            user_agent: ev["userAgent"].as_str().unwrap_or_default().to_string(),
                        },
                    );
                }
            }
        }
        order
            .into_iter()
            .filter_map(|id| by_id.remove(&id))
            .collect()
    }

    // --- logs --------------------------------------------------------------------

    /// The log file of a component: `etcd`, `kube-apiserver`,
    /// `kube-controller-manager` or `kube-scheduler`.
    pub fn log_path(&self, component: &str) -> PathBuf {
        self.path.join("logs").join(format!("{component}.log"))
    }

    /// kube-apiserver's log so far (all runs).
    pub fn apiserver_log(&self) -> String {
        fs::read_to_string(self.log_path("kube-apiserver")).unwrap_or_default()
    }

    /// The last `lines` lines of every component's log, for a failure
    /// message.
    pub fn logs_tail(&self, lines: usize) -> String {
        let mut s = String::new();
        for c in assets::BINARIES.iter().filter(|b| **b != "kubectl") {
            let p = self.log_path(c);
            if p.exists() {
                s.push_str(&format!(
                    "--- {} ---\n{}\n",
                    p.display(),
                    super::tail(&p, lines)
                ));
            }
        }
        s
    }

    // --- internals -------------------------------------------------------------------

    fn procs(&self) -> MutexGuard<'_, Procs> {
        self.procs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn spawn(&self, component: &str, args: &[String]) -> Proc {
        let log_path = self.log_path(component);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap_or_else(|e| panic!("opening {}: {e}", log_path.display()));
        let _ = writeln!(
            &log,
            "=== harness: starting {component} {} ===",
            args.join(" ")
        );
        let bin = assets::binary(component);
        let child = Command::new(&bin)
            .args(args)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {}: {e}", bin.display()));
        Proc { child }
    }

    /// Starts etcd on free ports, retrying when a port was taken meanwhile.
    fn start_etcd(&self) {
        let data = self.path.join("etcd/data");
        for attempt in 1..=PORT_ATTEMPTS {
            let (client, peer) = (free_port(), free_port());
            self.etcd_client_port.store(client, Ordering::SeqCst);
            self.etcd_peer_port.store(peer, Ordering::SeqCst);
            let client_url = format!("http://127.0.0.1:{client}");
            let peer_url = format!("http://127.0.0.1:{peer}");
            let args = [
                "--name=picolet-test".to_string(),
                format!("--data-dir={}", data.display()),
                format!("--listen-client-urls={client_url}"),
                format!("--advertise-client-urls={client_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=picolet-test={peer_url}"),
                "--unsafe-no-fsync".to_string(),
                "--log-level=error".to_string(),
            ];
            let mut proc = self.spawn("etcd", &args);
            let start = Instant::now();
            let exited = loop {
                if let Some(status) = proc.exited() {
                    break Some(status);
                }
                if let Ok((200, body)) = http(self.etcd_addr(), "GET", "/health", "") {
                    if body.contains("true") {
                        break None;
                    }
                }
                if start.elapsed() > ETCD_READY_TIMEOUT {
                    proc.kill();
                    panic!(
                        "etcd not healthy at {client_url} within {ETCD_READY_TIMEOUT:?}\n{}",
                        self.logs_tail(40)
                    );
                }
                thread::sleep(Duration::from_millis(50));
            };
            match exited {
                None => {
                    self.procs().etcd = Some(proc);
                    return;
                }
                Some(status) if self.port_taken("etcd") && attempt < PORT_ATTEMPTS => {
                    eprintln!("control plane: etcd ({status}) lost a port race; retrying");
                    let _ = fs::remove_dir_all(&data);
                }
                Some(status) => panic!("etcd exited ({status})\n{}", self.logs_tail(40)),
            }
        }
    }

    fn apiserver_args(&self) -> Vec<String> {
        let p = &self.pki;
        let f = |p: &Path| p.display().to_string();
        let mut args = vec![
            "--bind-address=127.0.0.1".to_string(),
            format!(
                "--secure-port={}",
                self.apiserver_port.load(Ordering::SeqCst)
            ),
            format!("--etcd-servers={}", self.etcd_url()),
            format!("--client-ca-file={}", f(&p.ca().cert)),
            format!("--tls-cert-file={}", f(&p.apiserver().cert)),
            format!("--tls-private-key-file={}", f(&p.apiserver().key)),
            "--authorization-mode=Node,RBAC".to_string(),
            "--enable-admission-plugins=NodeRestriction".to_string(),
            format!("--service-account-key-file={}", f(&p.service_account_pub())),
            format!(
                "--service-account-signing-key-file={}",
                f(&p.service_account_key())
            ),
            "--service-account-issuer=https://kubernetes.default.svc".to_string(),
            format!("--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}"),
            format!(
                "--kubelet-client-certificate={}",
                f(&p.apiserver_kubelet_client().cert)
            ),
            format!(
                "--kubelet-client-key={}",
                f(&p.apiserver_kubelet_client().key)
            ),
            "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname".to_string(),
            format!("--token-auth-file={}", f(&self.token_file())),
            "--allow-privileged=true".to_string(),
            "--profiling=false".to_string(),
            format!("--audit-policy-file={}", f(&self.audit_policy_file())),
            format!("--audit-log-path={}", f(&self.audit_log_path())),
            "--audit-log-mode=blocking".to_string(),
            "--audit-log-format=json".to_string(),
        ];
        args.extend(self.opts.apiserver_args.iter().cloned());
        args
    }

    fn spawn_apiserver(&self) -> Proc {
        self.spawn("kube-apiserver", &self.apiserver_args())
    }

    /// Picks a free port and starts kube-apiserver on it, retrying when the
    /// port was taken meanwhile. Does not wait for readiness.
    fn start_apiserver_on_free_port(&self) {
        for attempt in 1..=PORT_ATTEMPTS {
            self.apiserver_port.store(free_port(), Ordering::SeqCst);
            let mut proc = self.spawn_apiserver();
            // It binds its port before it can be ready; wait for either.
            let start = Instant::now();
            let exited = loop {
                if let Some(s) = proc.exited() {
                    break Some(s);
                }
                if TcpStream::connect(self.apiserver_addr()).is_ok() {
                    break None;
                }
                if start.elapsed() > APISERVER_READY_TIMEOUT {
                    proc.kill();
                    panic!(
                        "kube-apiserver did not listen on {} within {APISERVER_READY_TIMEOUT:?}\n{}",
                        self.apiserver_addr(),
                        self.logs_tail(60)
                    );
                }
                thread::sleep(Duration::from_millis(50));
            };
            match exited {
                None => {
                    self.procs().apiserver = Some(proc);
                    return;
                }
                Some(s) if self.port_taken("kube-apiserver") && attempt < PORT_ATTEMPTS => {
                    eprintln!("control plane: kube-apiserver ({s}) lost a port race; retrying");
                }
                Some(s) => panic!("kube-apiserver exited ({s})\n{}", self.logs_tail(60)),
            }
        }
    }

    /// Waits until `GET /readyz` as the admin answers `ok`; panics with the
    /// logs if the API server exits or the time runs out.
    fn wait_apiserver_ready(&self) {
        let start = Instant::now();
        loop {
            if let Some(p) = self.procs().apiserver.as_mut() {
                if let Some(s) = p.exited() {
                    panic!("kube-apiserver exited ({s})\n{}", self.logs_tail(60));
                }
            }
            let out = self.kubectl(&["get", "--raw=/readyz", "--request-timeout=10s"]);
            let stdout = String::from_utf8_lossy(&out.stdout);
            if out.status.success() && stdout.trim() == "ok" {
                return;
            }
            if start.elapsed() > APISERVER_READY_TIMEOUT {
                let last = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
                panic!(
                    "kube-apiserver not ready within {APISERVER_READY_TIMEOUT:?}; /readyz: {last}\n{}",
                    self.logs_tail(60)
                );
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    fn start_controller_manager(&self) {
        let p = &self.pki;
        let f = |p: &Path| p.display().to_string();
        let mut args = vec![
            format!("--kubeconfig={}", f(&self.admin_kubeconfig())),
            format!(
                "--service-account-private-key-file={}",
                f(&p.service_account_key())
            ),
            format!("--root-ca-file={}", f(&p.ca().cert)),
            format!("--cluster-signing-cert-file={}", f(&p.ca().cert)),
            format!("--cluster-signing-key-file={}", f(&p.ca().key)),
            "--use-service-account-credentials=true".to_string(),
            "--leader-elect=false".to_string(),
            "--controllers=*,bootstrapsigner,tokencleaner".to_string(),
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={}", free_port()),
            format!("--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}"),
        ];
        args.extend(self.opts.controller_manager_args.iter().cloned());
        let proc = self.spawn("kube-controller-manager", &args);
        self.procs().controller_manager = Some(proc);
        // Its service account controller creating `default` proves it runs.
        self.wait_component("kube-controller-manager", || {
            let out = self.kubectl(&["get", "serviceaccount", "default", "-n", "default"]);
            if out.status.success() {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&out.stderr).into_owned())
            }
        });
    }

    fn start_scheduler(&self) {
        let port = free_port();
        let args = vec![
            format!("--kubeconfig={}", self.admin_kubeconfig().display()),
            "--leader-elect=false".to_string(),
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={port}"),
        ];
        let proc = self.spawn("kube-scheduler", &args);
        self.procs().scheduler = Some(proc);
        // Its own serving cert is self-signed: probe /healthz unverified.
        // (A client certificate only keeps kubectl from prompting for a
        // user; /healthz is open to anyone.)
        let probe = self.path.join("kubeconfigs/scheduler-probe.kubeconfig");
        let admin = self.pki.admin();
        fs::write(
            &probe,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: probe\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: admin\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: probe\n  context: {{cluster: probe, user: admin}}\ncurrent-context: probe\n",
                admin.cert.display(),
                admin.key.display()
            ),
        )
        .expect("writing the scheduler probe kubeconfig");
        self.wait_component("kube-scheduler", || {
            let out = self.kubectl_as(&probe, &["get", "--raw=/healthz", "--request-timeout=5s"]);
            let stdout = String::from_utf8_lossy(&out.stdout);
            if out.status.success() && stdout.trim() == "ok" {
                Ok(())
            } else {
                Err(format!(
                    "/healthz: {stdout}{}",
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
        });
    }

    /// Polls `ready` until Ok; panics with its last error and the logs if
    /// the component exits or the time runs out.
    fn wait_component(&self, component: &str, mut ready: impl FnMut() -> Result<(), String>) {
        let start = Instant::now();
        loop {
            {
                let mut procs = self.procs();
                let p = match component {
                    "kube-scheduler" => procs.scheduler.as_mut(),
                    _ => procs.controller_manager.as_mut(),
                };
                if let Some(s) = p.and_then(|p| p.exited()) {
                    drop(procs);
                    panic!("{component} exited ({s})\n{}", self.logs_tail(60));
                }
            }
            let err = match ready() {
                Ok(()) => return,
                Err(e) => e,
            };
            if start.elapsed() > CONTROLLERS_READY_TIMEOUT {
                panic!(
                    "{component} not ready within {CONTROLLERS_READY_TIMEOUT:?}: {err}\n{}",
                    self.logs_tail(60)
                );
            }
            thread::sleep(Duration::from_millis(250));
        }
    }

    /// True if the component's last run failed on a port in use.
    fn port_taken(&self, component: &str) -> bool {
        let log = fs::read_to_string(self.log_path(component)).unwrap_or_default();
        let last_run = log.rsplit("=== harness: starting").next().unwrap_or("");
        last_run.contains("address already in use")
    }

    fn audit_policy_file(&self) -> PathBuf {
        self.path.join("pki/audit-policy.yaml")
    }

    fn token_file(&self) -> PathBuf {
        self.path.join("pki/tokens.csv")
    }

    /// The static token file: `token,user,uid,"groups"` per line.
    fn write_token_file(&self) {
        let tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        let mut csv = String::new();
        for (name, token) in tokens.iter() {
            csv.push_str(&format!(
                "{token},system:node:{name},system:node:{name},\"system:nodes\"\n"
            ));
        }
        fs::write(self.token_file(), csv).expect("writing the static token file");
    }

    fn write_kubeconfig(
        &self,
        file: &Path,
        server: &str,
        user: &str,
        creds: Credentials,
        cert: Option<&CertPair>,
        token: Option<&str>,
    ) {
        let ca = self.ca_cert();
        let data = |p: &Path| {
            base64(&fs::read(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display())))
        };
        let (ca_line, user_lines) = match creds {
            Credentials::Files => {
                let c = cert.expect("a client certificate");
                (
                    format!("certificate-authority: {}", ca.display()),
                    format!(
                        "    client-certificate: {}\n    client-key: {}\n",
                        c.cert.display(),
                        c.key.display()
                    ),
                )
            }
            Credentials::Inline => {
                let c = cert.expect("a client certificate");
                (
                    format!("certificate-authority-data: {}", data(&ca)),
                    format!(
                        "    client-certificate-data: {}\n    client-key-data: {}\n",
                        data(&c.cert),
                        data(&c.key)
                    ),
                )
            }
            Credentials::Token => (
                format!("certificate-authority-data: {}", data(&ca)),
                format!("    token: {}\n", token.expect("a token")),
            ),
            Credentials::TokenFile => {
                let token_file = file.with_extension("token");
                fs::write(&token_file, token.expect("a token")).expect("writing the token file");
                (
                    format!("certificate-authority: {}", ca.display()),
                    format!("    tokenFile: {}\n", token_file.display()),
                )
            }
        };
        let yaml = format!(
            "# Written by tests/harness/kube.rs\n\
             apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: picolet-test\n  cluster:\n    server: {server}\n    {ca_line}\n\
             users:\n\
             - name: {user}\n  user:\n{user_lines}\
             contexts:\n\
             - name: picolet-test\n  context:\n    cluster: picolet-test\n    user: {user}\n\
             current-context: picolet-test\n"
        );
        fs::write(file, yaml).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let procs = std::mem::take(&mut *self.procs());
        for p in [
            procs.scheduler,
            procs.controller_manager,
            procs.apiserver,
            procs.etcd,
        ]
        .into_iter()
        .flatten()
        {
            p.kill();
        }
        if thread::panicking() {
            eprintln!(
                "--- control plane logs ({}) ---\n{}--- end of control plane logs ---",
                self.path.display(),
                self.logs_tail(30)
            );
        }
        let keep = std::env::var_os("PICOLET_TEST_KEEP").is_some() && !thread::panicking();
        if let Some((mut child, mut stdin)) =
            self.reaper.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            // Any line tells the reaper that we cleaned up ourselves.
            let _ = stdin.write_all(b"done\n");
            drop(stdin);
            let _ = child.wait();
        }
        if let Some(dir) = self.dir.take() {
            if keep {
                eprintln!("PICOLET_TEST_KEEP: kept {}", dir.keep().display());
            }
        }
    }
}

/// Starts the reaper: `sh` reading a line from a pipe whose other end only
/// this process holds. End of file (this process died without dropping the
/// control plane) makes it SIGKILL every process whose command line names
/// `dir` and remove `dir`; a line (a clean drop) makes it exit.
fn spawn_reaper(dir: &Path) -> (Child, ChildStdin) {
    const SCRIPT: &str = r#"
read line
[ -n "$line" ] && exit 0
d=$PICOLET_KUBE_DIR
case "$d" in /?*/picolet-kube.?*) ;; *) exit 0 ;; esac
for p in /proc/[0-9]*; do
    [ "$p" = "/proc/$$" ] && continue
    grep -aqF -- "$d/" "$p/cmdline" 2>/dev/null && kill -9 "${p#/proc/}" 2>/dev/null
done
rm -rf -- "$d"
"#;
    let mut child = Command::new("sh")
        .args(["-c", SCRIPT])
        .env("PICOLET_KUBE_DIR", dir)
        // Its own group: a Ctrl-C to the test run must not kill it first.
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning the control plane reaper (sh)");
    let stdin = child.stdin.take().expect("reaper stdin");
    (child, stdin)
}

/// A port that was free a moment ago (bound to :0, then released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("finding a free port")
}

fn random_token() -> String {
    let mut b = [0u8; 16];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .expect("reading /dev/urandom");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn already_exists(out: &Output) -> bool {
    String::from_utf8_lossy(&out.stderr).contains("AlreadyExists")
}

/// A plain HTTP/1.1 request with `Connection: close` (etcd's gateway).
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
    s.set_write_timeout(Some(Duration::from_secs(30))).ok();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
    super::parse_http_response(&raw)
}
