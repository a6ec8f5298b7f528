//! Smoke tests of the control plane harness and the fault proxy -- owned by
//! the test harness (tests/harness/kube.rs, tests/harness/faultproxy.rs).
//!
//! They check the harness itself, not picolet: that a private etcd and
//! kube-apiserver come up, that Node,RBAC authorization and NodeRestriction
//! treat a node credential as they treat a kubelet, that every kubeconfig
//! form works, that an etcd compaction plus an API server restart yields
//! 410 Gone, and that the fault proxy forwards, refuses, blackholes,
//! resets, truncates, delays and throttles. When one of these fails, every
//! API-server integration test would fail with it; fix the harness (or the
//! machine: `make deps`, `KUBE_ASSETS`) first.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test control_plane --
//! --test-threads=1`.

mod harness;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use harness::faultproxy::FaultProxy;
use harness::kube::{assets, ControlPlane, Credentials};
use harness::wait_until;

const LONG: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------
// An echo server for the proxy's own tests
// ---------------------------------------------------------------------------

/// Echoes every connection; counts the bytes it received.
struct Echo {
    addr: SocketAddr,
    received: Arc<AtomicU64>,
}

impl Echo {
    fn start() -> Echo {
        let l = TcpListener::bind("127.0.0.1:0").expect("echo listener");
        let addr = l.local_addr().unwrap();
        let received = Arc::new(AtomicU64::new(0));
        let r = received.clone();
        thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut c) = conn else { continue };
                let r = r.clone();
                thread::spawn(move || {
                    let mut buf = [0u8; 8192];
                    loop {
                        match c.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                r.fetch_add(n as u64, Ordering::SeqCst);
                                if c.write_all(&buf[..n]).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        Echo { addr, received }
    }

    fn received(&self) -> u64 {
        self.received.load(Ordering::SeqCst)
    }
}

fn connect(proxy: &FaultProxy) -> TcpStream {
    let s = TcpStream::connect(proxy.addr()).expect("connecting to the fault proxy");
    s.set_read_timeout(Some(LONG)).unwrap();
    s
}

/// Writes `msg` and reads back as many bytes.
fn round_trip(s: &mut TcpStream, msg: &[u8]) -> Vec<u8> {
    s.write_all(msg).expect("write through the proxy");
    let mut got = vec![0u8; msg.len()];
    s.read_exact(&mut got).expect("read through the proxy");
    got
}

#[test]
fn the_fault_proxy_forwards_both_ways_and_counts_bytes() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.addr);
    let mut c = connect(&proxy);
    assert_eq!(round_trip(&mut c, b"hello"), b"hello");
    assert_eq!(round_trip(&mut c, b" world"), b" world");
    let st = proxy.stats();
    assert_eq!(st.accepted, 1);
    assert_eq!(st.live, 1);
    assert_eq!((st.bytes_up, st.bytes_down), (11, 11));
    assert_eq!(echo.received(), 11);

    // An orderly close passes through and the connection goes away.
    drop(c);
    wait_until("the proxied connection to close", LONG, || {
        (proxy.stats().live == 0).then_some(())
    });
    proxy.reset_stats();
    assert_eq!(proxy.stats().bytes_up, 0);
}

#[test]
fn drop_new_refuses_new_connections_and_keeps_live_ones() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.addr);
    let mut live = connect(&proxy);
    assert_eq!(round_trip(&mut live, b"a"), b"a");

    proxy.drop_new();
    let err = TcpStream::connect(proxy.addr()).expect_err("a new connection was accepted");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
    assert_eq!(round_trip(&mut live, b"b"), b"b");

    proxy.pass();
    let mut again = connect(&proxy);
    assert_eq!(round_trip(&mut again, b"c"), b"c");
    assert_eq!(proxy.stats().accepted, 2);
}

#[test]
fn a_blackhole_holds_data_both_ways_until_the_proxy_passes_again() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.addr);
    let mut old = connect(&proxy);
    assert_eq!(round_trip(&mut old, b"1"), b"1");

    proxy.blackhole();
    old.write_all(b"held").unwrap();
    // A new connection is accepted, but goes nowhere either.
    let mut new = connect(&proxy);
    new.write_all(b"new").unwrap();
    proxy.wait_live(2, LONG);
    let st = proxy.stats();
    assert_eq!(st.bytes_up, 1, "bytes went upstream through a blackhole");
    assert_eq!(st.bytes_down, 1);
    assert_eq!(echo.received(), 1);

    // Once it passes again, what was sent arrives, in order.
    proxy.pass();
    let mut got = [0u8; 4];
    old.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"held");
    let mut got = [0u8; 3];
    new.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"new");
    assert_eq!(echo.received(), 8);
}

#[test]
fn reset_all_resets_live_connections_mid_stream() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.addr);
    let mut a = connect(&proxy);
    let mut b = connect(&proxy);
    assert_eq!(round_trip(&mut a, b"x"), b"x");
    assert_eq!(round_trip(&mut b, b"y"), b"y");

    assert_eq!(proxy.reset_all(), 2);
    for s in [&mut a, &mut b] {
        let mut buf = [0u8; 1];
        let err = s
            .read(&mut buf)
            .expect_err("a reset connection read cleanly");
        assert_eq!(err.kind(), ErrorKind::ConnectionReset, "{err}");
    }
    let st = proxy.stats();
    assert_eq!((st.live, st.resets), (0, 2));

    // New connections work as before.
    let mut c = connect(&proxy);
    assert_eq!(round_trip(&mut c, b"z"), b"z");
}

#[test]
fn truncate_after_ends_the_next_reply_after_that_many_bytes() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.addr);
    proxy.truncate_after(5);
    let mut cut = connect(&proxy);
    cut.write_all(b"hello world").unwrap();
    let mut got = Vec::new();
    cut.read_to_end(&mut got).expect("an orderly end of stream");
    assert_eq!(got, b"hello");

    // Only that one connection is cut.
    let mut whole = connect(&proxy);
    assert_eq!(round_trip(&mut whole, b"hello world"), b"hello world");
}

#[test]
fn delay_and_throttle_still_deliver_every_byte_in_order() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.addr);
    proxy.delay(Duration::from_millis(20));
    proxy.throttle(256 * 1024);
    let mut c = connect(&proxy);
    let msg: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
    // Write from a thread: the echo's replies must be read meanwhile.
    let mut w = c.try_clone().unwrap();
    let sent = msg.clone();
    let writer = thread::spawn(move || w.write_all(&sent).unwrap());
    let mut got = vec![0u8; msg.len()];
    c.read_exact(&mut got).unwrap();
    writer.join().unwrap();
    assert!(got == msg, "bytes changed through delay and throttle");
    let st = proxy.stats();
    assert_eq!((st.bytes_up, st.bytes_down), (65536, 65536));
}

// ---------------------------------------------------------------------------
// Assets
// ---------------------------------------------------------------------------

#[test]
fn an_empty_kube_assets_folder_fails_with_what_to_set() {
    let empty = tempfile::tempdir().unwrap();
    let err = assets::locate_in("kube-apiserver", Some(empty.path()), empty.path(), false)
        .expect_err("found a binary in an empty folder");
    assert!(err.contains("KUBE_ASSETS="), "{err}");
    assert!(err.contains("Set KUBE_ASSETS"), "{err}");

    let err = assets::locate_in("etcd", None, &empty.path().join("nope"), false)
        .expect_err("found a binary nowhere");
    assert!(err.contains("KUBE_ASSETS_DOWNLOAD=1"), "{err}");
}

// ---------------------------------------------------------------------------
// The control plane
// ---------------------------------------------------------------------------

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_control_plane_starts_and_kubectl_lists_the_default_namespace() {
    let cp = ControlPlane::start();
    eprintln!(
        "control plane (etcd + kube-apiserver) ready in {:.1?}",
        cp.startup_time()
    );
    let ns = cp.kubectl_ok(&["get", "ns", "-o", "name"]);
    assert!(
        ns.lines().any(|l| l == "namespace/default"),
        "no default namespace in:\n{ns}"
    );
    // Without a controller manager the harness made `default`'s SA.
    cp.kubectl_ok(&["get", "serviceaccount", "default", "-n", "default"]);
    assert!(cp.apiserver_url().starts_with("https://127.0.0.1:"));
    assert!(cp.ca_cert().is_file());
}

#[test]
fn a_node_credential_can_create_its_own_node_and_is_forbidden_from_listing_secrets() {
    let node = "board-1";
    let cp = ControlPlane::builder().node_token(node).start();
    let kc = cp.node_kubeconfig(node);

    // Every kubeconfig form authenticates as the node.
    for creds in [
        Credentials::Files,
        Credentials::Inline,
        Credentials::Token,
        Credentials::TokenFile,
    ] {
        let file = cp.node_kubeconfig_with(node, creds, &cp.apiserver_url());
        let out = cp.kubectl_as(
            &file,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}",
            ],
        );
        assert!(out.status.success(), "{creds:?}: {}", stderr(&out));
        assert_eq!(stdout(&out), format!("system:node:{node}"), "{creds:?}");
    }

    let node_yaml = |name: &str| {
        format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    kubernetes.io/hostname: {name}\n")
    };
    let manifest = cp.dir().join("own-node.yaml");
    std::fs::write(&manifest, node_yaml(node)).unwrap();
    let out = cp.kubectl_as(&kc, &["create", "-f", manifest.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "creating its own Node: {}",
        stderr(&out)
    );
    let name = cp.kubectl_ok(&["get", "node", node, "-o", "name"]);
    assert_eq!(name.trim(), format!("node/{node}"));

    // Node authorizer / RBAC: a node may not list Secrets.
    let out = cp.kubectl_as(&kc, &["get", "secrets", "-A"]);
    assert!(!out.status.success(), "a node listed Secrets");
    assert!(stderr(&out).contains("Forbidden"), "{}", stderr(&out));

    // NodeRestriction: a node may not create another node's object.
    let other = cp.dir().join("other-node.yaml");
    std::fs::write(&other, node_yaml("board-2")).unwrap();
    let out = cp.kubectl_as(&kc, &["create", "-f", other.to_str().unwrap()]);
    assert!(!out.status.success(), "a node created another Node");
    assert!(stderr(&out).contains("forbidden"), "{}", stderr(&out));

    // The audit log tells what the node asked, and what it got.
    let user = format!("system:node:{node}");
    let seen = |verb: &str, path: &str, code: u16| {
        cp.requests_by(&user)
            .iter()
            .any(|r| r.verb == verb && r.uri.starts_with(path) && r.code == Some(code))
    };
    wait_until("the node's requests in the audit log", LONG, || {
        (seen("create", "/api/v1/nodes", 201) && seen("list", "/api/v1/secrets", 403)).then_some(())
    });
}

#[test]
fn the_proxy_forwards_refuses_blackholes_and_resets_api_traffic() {
    let cp = ControlPlane::start();
    let proxy = FaultProxy::start(cp.apiserver_addr());
    let server = format!("--server={}", proxy.https_url());
    let get_ns = |timeout: &str| {
        cp.kubectl(&[
            &server,
            &format!("--request-timeout={timeout}"),
            "get",
            "ns",
            "default",
            "-o",
            "name",
        ])
    };

    // Forwards (TLS passes through; the cert's SANs include 127.0.0.1).
    let out = get_ns("30s");
    assert!(out.status.success(), "through the proxy: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "namespace/default");
    assert!(proxy.stats().bytes_down > 0);

    // Refuses.
    proxy.drop_new();
    let out = get_ns("30s");
    assert!(!out.status.success(), "got through a closed port");
    assert!(stderr(&out).contains("refused"), "{}", stderr(&out));

    // Blackholes: kubectl gives up on its own deadline.
    proxy.blackhole();
    let out = get_ns("3s");
    assert!(!out.status.success(), "got through a blackhole");
    proxy.pass();
    assert!(get_ns("30s").status.success());

    // Resets a watch mid-stream.
    let mut watch = Command::new(assets::binary("kubectl"))
        .arg("--kubeconfig")
        .arg(cp.admin_kubeconfig())
        .arg(&server)
        .args(["get", "--raw", "/api/v1/namespaces?watch=true"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut events = BufReader::new(watch.stdout.take().unwrap());
    let mut first = String::new();
    events.read_line(&mut first).unwrap();
    assert!(first.contains("\"ADDED\""), "first watch event: {first}");
    assert!(proxy.reset_all() >= 1);
    let status = wait_until("kubectl's watch to end after the reset", LONG, || {
        watch.try_wait().unwrap()
    });
    let mut err = String::new();
    watch
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        !status.success() || err.contains("reset"),
        "the watch ended cleanly: {status} {err}"
    );
}

#[test]
fn a_watch_from_before_an_etcd_compaction_gets_410_gone_after_an_apiserver_restart() {
    let cp = ControlPlane::start();
    let list: serde_json::Value =
        serde_json::from_str(&cp.kubectl_ok(&["get", "--raw", "/api/v1/namespaces"])).unwrap();
    let old_rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    cp.kubectl_ok(&["create", "configmap", "bump", "-n", "default"]);
    let compacted = cp.compact_etcd();
    assert!(compacted > old_rv.parse::<i64>().unwrap());

    cp.stop_apiserver();
    assert!(!cp.apiserver_running());
    cp.start_apiserver();

    let out = cp.kubectl(&[
        "get",
        "--raw",
        &format!("/api/v1/namespaces?watch=true&resourceVersion={old_rv}"),
        "--request-timeout=30s",
    ]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains("\"code\":410") || text.contains("too old resource version"),
        "a watch from {old_rv} after compaction at {compacted}:\n{text}"
    );
}

#[test]
fn the_controller_manager_creates_service_accounts_and_the_scheduler_is_healthy() {
    // start() waits for the scheduler's /healthz and for the controller
    // manager to create `default/default`.
    let cp = ControlPlane::builder()
        .with_controller_manager()
        .with_scheduler()
        .start();
    eprintln!(
        "control plane with controller manager and scheduler ready in {:.1?}",
        cp.startup_time()
    );
    cp.ensure_namespace("smoke");
    wait_until(
        "the default ServiceAccount of a new namespace",
        LONG,
        || {
            cp.kubectl(&["get", "serviceaccount", "default", "-n", "smoke"])
                .status
                .success()
                .then_some(())
        },
    );
}
