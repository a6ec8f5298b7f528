//! Smoke tests of the integration test harness -- owned by the test harness.
//!
//! These check the harness itself, not picolet: that a private runtime
//! (containerd or CRI-O, `PICOLET_TEST_RUNTIME`) comes up healthy with both
//! test images, that our pause image behaves as a sandbox's PID 1 must,
//! that restarts keep state, that the admin-socket HTTP client copes with
//! both body framings, that a test image which cannot be built is an error
//! naming what to install, and that CRI-O's binaries, when missing, are an
//! error naming what to set.
//! When one of these fails, every picolet integration test would fail with
//! it; fix the harness (or the machine: `make deps`) first.

mod harness;

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use picolet::cri::api;
use picolet::rt::block_on;

use harness::{
    wait_until, ContainerRuntime, RuntimeKind, BUSYBOX_IMAGE, K8S_NAMESPACE, PAUSE_IMAGE,
};

const LONG: Duration = Duration::from_secs(60);

/// True if `ctr plugins ls` lists TYPE ID with status ok.
fn plugin_ok(plugins: &str, kind: &str, id: &str) -> bool {
    plugins.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 3 && f[0] == kind && f[1] == id && f.last() == Some(&"ok")
    })
}

#[test]
fn the_runtime_starts_in_a_private_directory_and_has_the_test_images() {
    let rt = ContainerRuntime::start();

    assert!(
        rt.socket().starts_with(rt.dir()),
        "socket {:?} outside {:?}",
        rt.socket(),
        rt.dir()
    );
    assert_eq!(rt.endpoint(), format!("unix://{}", rt.socket().display()));
    for image in [PAUSE_IMAGE, BUSYBOX_IMAGE] {
        assert!(rt.has_image(image), "{image} not imported");
    }

    let log = rt.log();
    match rt.kind() {
        RuntimeKind::Containerd => {
            let plugins = rt.ctr_ok(&["plugins", "ls"]);
            assert!(
                plugin_ok(&plugins, "io.containerd.grpc.v1", "cri"),
                "CRI plugin not ok:\n{plugins}"
            );
            assert!(
                plugin_ok(&plugins, "io.containerd.snapshotter.v1", rt.snapshotter()),
                "snapshotter {} not ok:\n{plugins}",
                rt.snapshotter()
            );
            for bad in [
                "failed to load plugin io.containerd.grpc.v1.cri",
                "failed to load cni",
                "cni config load failed",
            ] {
                assert!(!log.contains(bad), "containerd log has {bad:?}:\n{log}");
            }
        }
        RuntimeKind::Crio => {
            // CRI-O logs the CNI network it picked, by name (the conflist's
            // "name", picolet-test-<slot>), and its errors at level=error.
            let network = format!("Found CNI network picolet-test-{}", &rt.bridge()[3..]);
            assert!(
                log.contains(&network),
                "CRI-O did not load our CNI network:\n{log}"
            );
            for bad in ["level=error", "level=fatal"] {
                assert!(!log.contains(bad), "CRI-O log has {bad:?}:\n{log}");
            }
        }
    }
}

#[test]
fn pause_image_runs_as_pid_1_reaps_orphans_and_exits_zero_on_sigterm() {
    let rt = ContainerRuntime::start();
    match rt.kind() {
        RuntimeKind::Containerd => pause_run_by_ctr(&rt),
        // tonic's futures are large in debug builds: more than the 2 MiB a
        // test thread gets.
        RuntimeKind::Crio => std::thread::scope(|s| {
            std::thread::Builder::new()
                .stack_size(16 << 20)
                .spawn_scoped(s, || pause_as_crio_infra_container(&rt))
                .expect("spawning a thread")
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e))
        }),
    }
}

/// containerd: the pause image run alone with `ctr run`, which exits with
/// its exit code.
fn pause_run_by_ctr(cd: &ContainerRuntime) {
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
    // containerd lists the task RUNNING once runc started it; until its
    // init has exec'd, the process is still `runc:[2:INIT]` (seen on a
    // loaded CI machine).
    wait_until("the pause task's pid 1 to be pause", LONG, || {
        let comm = std::fs::read_to_string(format!("/proc/{pause_pid}/comm")).unwrap_or_default();
        (comm.trim() == "pause").then_some(())
    });

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

/// CRI-O: it runs the pause image only as a pod's infra container, and,
/// with its default `drop_infra_ctr = true` (crio.conf(5)), only for a pod
/// that shares one PID namespace; no client runs an image outside a pod. So
/// this is such a pod, driven through the CRI, with a busybox container in
/// it to make the orphan. conmon writes the infra container's exit code to
/// `exit` in its persist dir, the container's `userdata` in CRI-O's root.
fn pause_as_crio_infra_container(rt: &ContainerRuntime) {
    let cri = picolet::cri::Runtime::new(rt.socket(), LONG);
    let pid = std::process::id();
    let cgroup = format!("/picolet-test-{pid}-smoke");
    rt.adopt_cgroup_root(&cgroup);
    let logs = rt.dir().join("smoke-pods");
    std::fs::create_dir_all(logs.join("busybox")).unwrap();
    let shared_pid = api::NamespaceOption {
        network: api::NamespaceMode::Pod as i32,
        pid: api::NamespaceMode::Pod as i32,
        ipc: api::NamespaceMode::Pod as i32,
        ..Default::default()
    };
    let config = api::PodSandboxConfig {
        metadata: Some(api::PodSandboxMetadata {
            name: "smoke-pause".into(),
            uid: format!("smoke-pause-{pid}"),
            namespace: "default".into(),
            attempt: 0,
        }),
        hostname: "smoke-pause".into(),
        log_directory: logs.display().to_string(),
        linux: Some(api::LinuxPodSandboxConfig {
            cgroup_parent: format!("{cgroup}/pod"),
            security_context: Some(api::LinuxSandboxSecurityContext {
                namespace_options: Some(shared_pid.clone()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let sandbox = block_on(cri.run_pod_sandbox(api::RunPodSandboxRequest {
        config: Some(config.clone()),
        ..Default::default()
    }))
    .expect("RunPodSandbox")
    .pod_sandbox_id;
    let pause_pid = runc_pid(rt, &sandbox);
    // containerd lists the task RUNNING once runc started it; until its
    // init has exec'd, the process is still `runc:[2:INIT]` (seen on a
    // loaded CI machine).
    wait_until("the pause task's pid 1 to be pause", LONG, || {
        let comm = std::fs::read_to_string(format!("/proc/{pause_pid}/comm")).unwrap_or_default();
        (comm.trim() == "pause").then_some(())
    });

    let container = block_on(cri.create_container(api::CreateContainerRequest {
        pod_sandbox_id: sandbox.clone(),
        config: Some(api::ContainerConfig {
            metadata: Some(api::ContainerMetadata {
                name: "busybox".into(),
                attempt: 0,
            }),
            image: Some(api::ImageSpec {
                image: BUSYBOX_IMAGE.into(),
                user_specified_image: BUSYBOX_IMAGE.into(),
                ..Default::default()
            }),
            command: vec!["sleep".into(), "600".into()],
            log_path: "busybox/0.log".into(),
            linux: Some(api::LinuxContainerConfig {
                security_context: Some(api::LinuxContainerSecurityContext {
                    namespace_options: Some(shared_pid),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        sandbox_config: Some(config),
    }))
    .expect("CreateContainer")
    .container_id;
    block_on(cri.start_container(api::StartContainerRequest {
        container_id: container.clone(),
    }))
    .expect("StartContainer");

    // Make an orphan: its parent shell exits at once, so the kernel hands it
    // to the PID namespace's init, our pause.
    let exec = block_on(
        cri.exec_sync(api::ExecSyncRequest {
            container_id: container,
            cmd: ["sh", "-c", "sleep 600 & exit 0"]
                .map(String::from)
                .to_vec(),
            timeout: 30,
        }),
    )
    .expect("ExecSync");
    assert_eq!(
        exec.exit_code,
        0,
        "{}",
        String::from_utf8_lossy(&exec.stderr)
    );
    let orphan = wait_until("the orphan to be re-parented to pause", LONG, || {
        children_of(pause_pid).into_iter().next()
    });
    let killed = Command::new("sh")
        .args(["-c", "kill -s KILL \"$0\"", &orphan.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success(), "could not kill the orphan {orphan}");
    wait_until("pause to reap its dead child", LONG, || {
        (!std::path::Path::new(&format!("/proc/{orphan}")).exists()).then_some(())
    });

    // StopPodSandbox stops the infra container with its stop signal,
    // SIGTERM (SIGKILL only after a timeout: exit code 137).
    block_on(cri.stop_pod_sandbox(api::StopPodSandboxRequest {
        pod_sandbox_id: sandbox.clone(),
    }))
    .expect("StopPodSandbox");
    let exit_file = rt
        .dir()
        .join("root/overlay-containers")
        .join(&sandbox)
        .join("userdata/exit");
    let code = wait_until("conmon to record pause's exit code", LONG, || {
        std::fs::read_to_string(&exit_file)
            .ok()
            .filter(|s| !s.trim().is_empty())
    });
    assert_eq!(code.trim(), "0", "pause did not exit 0 on SIGTERM");
    block_on(cri.remove_pod_sandbox(api::RemovePodSandboxRequest {
        pod_sandbox_id: sandbox,
    }))
    .expect("RemovePodSandbox");
}

/// The host pid of a running container, from `runc state` in the runtime's
/// runc root.
fn runc_pid(rt: &ContainerRuntime, id: &str) -> u32 {
    let out = Command::new("runc")
        .arg("--root")
        .arg(rt.runc_root())
        .args(["state", id])
        .output()
        .expect("runc state");
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "runc state {id}: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    state["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("runc state {id} has no pid: {state}")) as u32
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
fn the_runtime_restart_keeps_socket_and_images() {
    let mut rt = ContainerRuntime::start();
    let socket = rt.socket();
    rt.restart();
    assert_eq!(rt.socket(), socket);
    assert!(rt.is_running());
    for image in [PAUSE_IMAGE, BUSYBOX_IMAGE] {
        assert!(rt.has_image(image), "{image} lost on restart");
    }
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

#[test]
fn crio_binaries_that_cannot_be_found_fail_naming_what_to_set() {
    let nowhere = std::path::Path::new("/nonexistent/cri-o");
    let Err(err) = harness::crio::locate(None, nowhere, false) else {
        panic!("found crio in {}", nowhere.display());
    };
    for want in [
        "CRIO_ASSETS",
        "../shared/cri-o",
        "CRIO_ASSETS_DOWNLOAD=1",
        "no such folder",
    ] {
        assert!(err.contains(want), "names {want:?}: {err}");
    }
    let Err(err) = harness::crio::locate(Some(nowhere), nowhere, false) else {
        panic!("found crio in {}", nowhere.display());
    };
    assert!(err.starts_with("CRIO_ASSETS=/nonexistent/cri-o"), "{err}");
}
