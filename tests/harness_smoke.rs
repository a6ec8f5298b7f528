//! Smoke tests of the integration test harness -- owned by the test harness.
//!
//! These check the harness itself, not picolet: that a private containerd
//! comes up with a healthy CRI plugin and both test images, that our pause
//! image behaves as a sandbox's PID 1 must, that restarts keep state, and
//! that the admin-socket HTTP client copes with both body framings, and that
//! a test image which cannot be built is an error naming what to install.
//! When one of these fails, every picolet integration test would fail with
//! it; fix the harness (or the machine: `make deps`) first.

mod harness;

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use harness::{wait_until, Containerd, BUSYBOX_IMAGE, K8S_NAMESPACE, PAUSE_IMAGE};

const LONG: Duration = Duration::from_secs(60);

fn has_line(text: &str, want: &str) -> bool {
    text.lines().any(|l| l.trim() == want)
}

/// True if `ctr plugins ls` lists TYPE ID with status ok.
fn plugin_ok(plugins: &str, kind: &str, id: &str) -> bool {
    plugins.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 3 && f[0] == kind && f[1] == id && f.last() == Some(&"ok")
    })
}

#[test]
fn containerd_starts_in_a_private_directory_and_has_the_test_images() {
    let cd = Containerd::start();

    assert!(
        cd.socket().starts_with(cd.dir()),
        "socket {:?} outside {:?}",
        cd.socket(),
        cd.dir()
    );
    assert_eq!(cd.endpoint(), format!("unix://{}", cd.socket().display()));

    let images = cd.ctr_ok(&["images", "ls", "-q"]);
    assert!(
        has_line(&images, PAUSE_IMAGE),
        "{PAUSE_IMAGE} not imported:\n{images}"
    );
    assert!(
        has_line(&images, BUSYBOX_IMAGE),
        "{BUSYBOX_IMAGE} not imported:\n{images}"
    );

    let plugins = cd.ctr_ok(&["plugins", "ls"]);
    assert!(
        plugin_ok(&plugins, "io.containerd.grpc.v1", "cri"),
        "CRI plugin not ok:\n{plugins}"
    );
    assert!(
        plugin_ok(&plugins, "io.containerd.snapshotter.v1", cd.snapshotter()),
        "snapshotter {} not ok:\n{plugins}",
        cd.snapshotter()
    );

    let log = cd.log();
    for bad in [
        "failed to load plugin io.containerd.grpc.v1.cri",
        "failed to load cni",
        "cni config load failed",
    ] {
        assert!(!log.contains(bad), "containerd log has {bad:?}:\n{log}");
    }
}

#[test]
fn pause_image_runs_as_pid_1_reaps_orphans_and_exits_zero_on_sigterm() {
    let cd = Containerd::start();
    let id = format!("smoke-pause-{}", std::process::id());
    let cgroup = format!("/picolet-test-{}-smoke", std::process::id());
    cd.adopt_cgroup_root(&cgroup);

    // Run the pause image in the foreground: ctr exits with its exit code.
    // Busybox is bind-mounted in only to make an orphan from inside.
    let mut run = Command::new("ctr")
        .arg("--address")
        .arg(cd.socket())
        .args([
            "-n",
            K8S_NAMESPACE,
            "run",
            "--rm",
            "--snapshotter",
            cd.snapshotter(),
        ])
        .arg("--runc-root")
        .arg(cd.runc_root())
        .args(["--cgroup", &format!("{cgroup}/pause")])
        .args([
            "--mount",
            "type=bind,src=/bin/busybox,dst=/busybox,options=rbind:ro",
        ])
        .args([PAUSE_IMAGE, &id])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning ctr run");

    let pause_pid: u32 = wait_until("the pause task to run", LONG, || {
        let tasks = cd.ctr_ok(&["tasks", "ls"]);
        tasks.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[0] == id && f[2] == "RUNNING")
                .then(|| f[1].parse().ok())
                .flatten()
        })
    });
    let comm = std::fs::read_to_string(format!("/proc/{pause_pid}/comm")).unwrap_or_default();
    assert_eq!(comm.trim(), "pause");

    // Make an orphan: its parent shell exits at once, so the kernel hands it
    // to the namespace's init, our pause.
    let out = cd.ctr(&[
        "tasks",
        "exec",
        "--exec-id",
        "orphan-maker",
        &id,
        "/busybox",
        "sh",
        "-c",
        "/busybox sleep 600 & exit 0",
    ]);
    assert!(
        out.status.success(),
        "exec failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let orphan = wait_until("the orphan to be re-parented to pause", LONG, || {
        children_of(pause_pid).into_iter().next()
    });

    // Kill it: pause must reap it, so it leaves /proc instead of lingering as a zombie.
    let killed = Command::new("sh")
        .args(["-c", "kill -s KILL \"$0\"", &orphan.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success(), "could not kill the orphan {orphan}");
    wait_until("pause to reap its dead child", LONG, || {
        (!std::path::Path::new(&format!("/proc/{orphan}")).exists()).then_some(())
    });

    cd.ctr_ok(&["tasks", "kill", "--signal", "SIGTERM", &id]);
    let status = wait_until("ctr run to return", LONG, || {
        run.try_wait().expect("try_wait")
    });
    let mut stderr = String::new();
    run.stderr.take().unwrap().read_to_string(&mut stderr).ok();
    assert!(
        status.success(),
        "pause did not exit 0 on SIGTERM: {status}\n{stderr}"
    );
}

/// Host pids whose parent is `ppid`.
fn children_of(ppid: u32) -> Vec<u32> {
    let mut kids = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // Fields after the ")" closing comm: state ppid ...
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        if rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok())
            == Some(ppid)
        {
            kids.push(pid);
        }
    }
    kids
}

#[test]
fn containerd_restart_keeps_socket_and_images() {
    let mut cd = Containerd::start();
    let socket = cd.socket();
    cd.restart();
    assert_eq!(cd.socket(), socket);
    assert!(cd.is_running());
    let images = cd.ctr_ok(&["images", "ls", "-q"]);
    assert!(
        has_line(&images, PAUSE_IMAGE) && has_line(&images, BUSYBOX_IMAGE),
        "images lost on restart:\n{images}"
    );
}

#[test]
fn admin_socket_client_reads_content_length_and_chunked_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("admin.sock");
    let listener = UnixListener::bind(&sock).unwrap();
    let server = std::thread::spawn(move || {
        let replies = [
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"pods\":[]}",
            "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nno s\r\n6;x=y\r\nuch pa\r\n2\r\nth\r\n0\r\n\r\n",
        ];
        for reply in replies {
            let (mut conn, _) = listener.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).unwrap();
                assert!(n > 0, "request ended early");
                req.extend_from_slice(&buf[..n]);
            }
            let req = String::from_utf8_lossy(&req);
            assert!(req.starts_with("GET /"), "{req}");
            assert!(
                req.to_ascii_lowercase().contains("connection: close"),
                "{req}"
            );
            conn.write_all(reply.as_bytes()).unwrap();
        }
    });
    assert_eq!(
        harness::http_get(&sock, "/pods").unwrap(),
        (200, "{\"pods\":[]}".to_string())
    );
    assert_eq!(
        harness::http_get(&sock, "/nope").unwrap(),
        (404, "no such path".to_string())
    );
    server.join().unwrap();
}

/// Runs tests/images/build-images.sh into a fresh directory with `env` set;
/// returns (success, stderr).
fn build_images_with(env: &[(&str, &str)], images: &[&str]) -> (bool, String) {
    let out_dir = tempfile::tempdir().unwrap();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/images/build-images.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(out_dir.path())
        .args(images)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("running build-images.sh");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_test_image_that_cannot_be_built_fails_naming_what_to_install() {
    let (ok, err) = build_images_with(&[("CARGO", "/nonexistent/cargo")], &["grpc-health"]);
    assert!(!ok, "built grpc-health without cargo: {err}");
    assert!(
        err.contains("cargo not found") && err.contains("rustup"),
        "{err}"
    );

    let (ok, err) = build_images_with(&[("BUSYBOX", "/nonexistent/busybox")], &["busybox"]);
    assert!(!ok, "built busybox without busybox: {err}");
    assert!(err.contains("busybox-static"), "{err}");

    let (ok, err) = build_images_with(&[], &["no-such-image"]);
    assert!(!ok, "built an unknown image: {err}");
    assert!(err.contains("grpc-health"), "names the known images: {err}");
}
