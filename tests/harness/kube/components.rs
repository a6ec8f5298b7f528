//! Starting the control plane's components -- owned by the test harness
//! (tests/harness/kube).
//!
//! etcd, kube-apiserver, kube-controller-manager and kube-scheduler: their
//! flags (those `shared/kube/README.md` lists as working here), free ports
//! with a retry when one was taken meanwhile, and waiting until each is
//! ready, with the logs in the panic when it is not.

use std::fs;
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use super::process::{free_port, http, Proc};
use super::{
    ControlPlane, APISERVER_READY_TIMEOUT, CONTROLLERS_READY_TIMEOUT, ETCD_READY_TIMEOUT,
    PORT_ATTEMPTS, SERVICE_CLUSTER_IP_RANGE,
};

impl ControlPlane {
    /// Starts etcd on free ports, retrying when a port was taken meanwhile.
    pub(super) fn start_etcd(&self) {
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

    pub(super) fn apiserver_args(&self) -> Vec<String> {
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
        args.extend(
            self.restart_args
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned(),
        );
        args
    }

    pub(super) fn spawn_apiserver(&self) -> Proc {
        self.spawn("kube-apiserver", &self.apiserver_args())
    }

    /// Picks a free port and starts kube-apiserver on it, retrying when the
    /// port was taken meanwhile. Does not wait for readiness.
    pub(super) fn start_apiserver_on_free_port(&self) {
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
    pub(super) fn wait_apiserver_ready(&self) {
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

    pub(super) fn start_controller_manager(&self) {
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

    pub(super) fn start_scheduler(&self) {
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
    pub(super) fn wait_component(
        &self,
        component: &str,
        mut ready: impl FnMut() -> Result<(), String>,
    ) {
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
    pub(super) fn port_taken(&self, component: &str) -> bool {
        let log = fs::read_to_string(self.log_path(component)).unwrap_or_default();
        let last_run = log.rsplit("=== harness: starting").next().unwrap_or("");
        last_run.contains("address already in use")
    }
}
