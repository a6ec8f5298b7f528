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
//!
//! Files: [`assets`] (finding and unpacking the binaries), [`pki`]
//! (openssl), [`kubeconfig`] (the credential forms), [`audit`] (what nodes
//! asked), `components` (each component's flags and readiness), `process`
//! (process groups, the reaper, free ports).

pub mod assets;
pub mod audit;
mod components;
pub mod kubeconfig;
pub mod pki;
mod process;

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

pub use self::audit::AuditedRequest;
use self::kubeconfig::random_token;
pub use self::kubeconfig::Credentials;
use self::pki::Pki;
#[allow(unused_imports)] // not every test binary takes it
pub use self::process::free_port;
use self::process::{http, spawn_reaper, Proc};

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
    /// Flags added by [`ControlPlane::restart_apiserver_with`], after the
    /// builder's.
    restart_args: Mutex<Vec<String>>,
}

#[derive(Default)]
struct Procs {
    etcd: Option<Proc>,
    apiserver: Option<Proc>,
    controller_manager: Option<Proc>,
    scheduler: Option<Proc>,
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
            restart_args: Mutex::new(Vec::new()),
        };
        cp.write_token_file();
        fs::write(cp.audit_policy_file(), audit::AUDIT_POLICY).expect("writing the audit policy");
        let admin = cp.pki.admin();
        cp.start_etcd();
        cp.start_apiserver_on_free_port();
        kubeconfig::write(
            &cp.ca_cert(),
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

    /// A picolet config serving the node API as a cluster's kubelet does:
    /// on `ip:port`, clients checked against this cluster's CA, each request
    /// authorized by the API server (Webhook). `healthz_port` 0 turns the
    /// healthz listener off; `extra` is more config lines, each ending in
    /// a newline.
    pub fn node_api_config(
        &self,
        ip: impl std::fmt::Display,
        port: u16,
        healthz_port: u16,
        extra: &str,
    ) -> String {
        format!(
            "address: {ip}\nport: {port}\nhealthzPort: {healthz_port}\n{extra}\
             authentication:\n  x509:\n    clientCAFile: {ca}\n  webhook:\n    enabled: true\n\
             authorization:\n  mode: Webhook\n",
            ca = self.ca_cert().display()
        )
    }

    /// The flags that join node `name` to this cluster with its own
    /// certificate, reachable by the API server at `node_ip`.
    pub fn join_args(&self, name: &str, node_ip: impl std::fmt::Display) -> Vec<String> {
        vec![
            "--kubeconfig".to_string(),
            self.node_kubeconfig(name).display().to_string(),
            format!("--node-ip={node_ip}"),
        ]
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
                kubeconfig::write(
                    &self.ca_cert(),
                    &file,
                    server,
                    &user,
                    creds,
                    Some(&pair),
                    None,
                );
            }
            Credentials::Token | Credentials::TokenFile => {
                let token = self.node_token(name);
                kubeconfig::write(
                    &self.ca_cert(),
                    &file,
                    server,
                    &user,
                    creds,
                    None,
                    Some(&token),
                );
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

    /// `kubectl get <args> -o json` as the admin; `None` when kubectl fails
    /// (not found, the API server down) or prints no JSON.
    pub fn get_json(&self, args: &[&str]) -> Option<serde_json::Value> {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        let out = self.kubectl(&all);
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// Runs kubectl with another kubeconfig (e.g. a node's).
    pub fn kubectl_as(&self, kubeconfig: &Path, args: &[&str]) -> Output {
        self.kubectl_within(kubeconfig, args, KUBECTL_TIMEOUT)
    }

    /// Runs kubectl as the admin, for a command that waits by itself
    /// longer than [`KUBECTL_TIMEOUT`] (`rollout status --timeout=...`).
    pub fn kubectl_waiting(&self, args: &[&str], bound: Duration) -> Output {
        self.kubectl_within(&self.admin_kubeconfig(), args, bound)
    }

    fn kubectl_within(&self, kubeconfig: &Path, args: &[&str], bound: Duration) -> Output {
        let mut cmd = Command::new(assets::binary("kubectl"));
        cmd.arg("--kubeconfig").arg(kubeconfig).args(args);
        super::run_with_timeout(&mut cmd, bound)
            .unwrap_or_else(|| panic!("kubectl {args:?} still running after {bound:?}"))
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

    /// Stops kube-apiserver gracefully and starts it again on the same
    /// port with `args` added to its flags (they win over the others, and
    /// stay for later restarts), e.g. `--feature-gates=WatchList=false`.
    pub fn restart_apiserver_with(&self, args: &[&str]) {
        self.stop_apiserver();
        self.restart_args
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(args.iter().map(|a| a.to_string()));
        self.start_apiserver();
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
        audit::requests_by(
            &fs::read_to_string(self.audit_log_path()).unwrap_or_default(),
            user,
        )
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

fn already_exists(out: &Output) -> bool {
    String::from_utf8_lossy(&out.stderr).contains("AlreadyExists")
}

/// The address of the default route: the API server refuses to proxy to
/// loopback addresses, so a node whose API it must reach is given this one.
pub fn host_ip() -> std::net::IpAddr {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    s.connect("192.0.2.1:9").expect("a default route");
    s.local_addr().unwrap().ip()
}
