//! Hostile static pod manifests on a real containerd (issue #12): while a
//! good pod runs, files a new user or an attacker with write access to the
//! manifest directory might drop there are dropped in all at once. picolet
//! must refuse each with a log line naming the file (and the field, for a
//! pod the API server would refuse), keep answering `picolet get pods`,
//! keep its memory small, and leave the good pod alone (same container, no
//! restart). Timing is measured and printed, never asserted beyond a
//! generous deadline.

mod harness;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use harness::{wait_until, Containerd, Picolet};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);
/// `picolet get pods` must answer within this, every time (generous: the
/// issue's target is one second; a shared CI machine is slower).
const ANSWER_DEADLINE: Duration = Duration::from_secs(10);
/// The memory budget for the whole agent, for an optimised build
/// (the static release build idles at ~3.5 MiB).
const RSS_BUDGET_KIB: u64 = 8 * 1024;
/// A debug build idles near 15 MiB on its own, so for it the budget is its
/// RSS before the hostile files plus the headroom an optimised build has.
const RSS_HEADROOM_KIB: u64 = 4 * 1024;

/// What picolet's RSS must stay under, given where it started.
fn rss_budget_kib(start: u64) -> u64 {
    // `make bench` points PICOLET_BIN at the static release build.
    let optimised = !cfg!(debug_assertions) || std::env::var_os("PICOLET_BIN").is_some();
    if optimised {
        RSS_BUDGET_KIB
    } else {
        start + RSS_HEADROOM_KIB
    }
}

fn sleeper(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"100000\"]\n"
    )
}

/// A valid-looking pod whose one container has `container_extra` (YAML,
/// indented for a container's fields) and whose spec has `spec_extra`.
fn pod_with(name: &str, container_extra: &str, spec_extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{spec_extra}  containers:\n  - name: main\n    image: busybox\n    command: [\"sleep\", \"100000\"]\n{container_extra}"
    )
}

fn container_status(pod: &Value) -> &Value {
    &pod["status"]["containerStatuses"][0]
}

fn wait_running(p: &Picolet, name: &str) -> Value {
    wait_until(&format!("pod {name} running"), LONG, || {
        let pod = p.find_pod(name)?;
        (pod["status"]["phase"] == "Running"
            && container_status(&pod)["state"]["running"].is_object())
        .then_some(pod)
    })
}

/// `VmRSS` of a process, in KiB.
fn vm_rss_kib(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/<pid>/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

/// Runs `picolet get pods` against `p`; panics unless it succeeds within
/// [`ANSWER_DEADLINE`]. Returns how long it took and what it printed.
fn get_pods(p: &Picolet) -> (Duration, String) {
    let start = Instant::now();
    let mut child = Command::new(harness::picolet_bin())
        .args(["get", "pods", "--admin-socket"])
        .arg(p.admin_socket())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning picolet get pods");
    loop {
        if let Some(status) = child.try_wait().expect("waiting for picolet get pods") {
            let out = child.wait_with_output().expect("picolet get pods output");
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                status.success(),
                "picolet get pods failed ({status}): {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            return (start.elapsed(), stdout);
        }
        if start.elapsed() > ANSWER_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("picolet get pods did not answer within {ANSWER_DEADLINE:?}");
        }
        thread::sleep(Duration::from_millis(5));
    }
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
}

/// Each hostile file: its name, and the log fragments (after the file's
/// path) that say it was refused for the right reason.
fn hostile_files(dir: &Path) -> Vec<(&'static str, Vec<&'static str>)> {
    let write = |name: &str, content: &[u8]| {
        // Written aside and renamed in, as an editor or `cp` + `mv` would.
        let staged = dir.parent().unwrap().join("staging").join(name);
        fs::write(&staged, content).expect("staging a hostile file");
        fs::rename(&staged, dir.join(name)).expect("moving a hostile file in");
    };
    let nested =
        |open: &str, close: &str, n: usize| format!("a: {}{}\n", open.repeat(n), close.repeat(n));

    // The three that used to freeze, loop or pass.
    write("deep.yaml", nested("[", "]", 100_000).as_bytes());
    write(
        "negative-memory.yaml",
        pod_with(
            "negmem",
            "    resources:\n      limits: {memory: -1Gi}\n",
            "",
        )
        .as_bytes(),
    );
    write(
        "absurd-cpu.yaml",
        pod_with("bigcpu", "    resources:\n      limits: {cpu: 1e400}\n", "").as_bytes(),
    );
    write(
        "negative-grace.yaml",
        pod_with("neggrace", "", "  terminationGracePeriodSeconds: -5\n").as_bytes(),
    );
    write(
        "pids-limit.yaml",
        pod_with("pids", "    resources:\n      limits: {pids: 10}\n", "").as_bytes(),
    );
    // The ones the issue found handled, kept honest.
    let staging = dir.parent().unwrap().join("staging");
    mkfifo(&staging.join("fifo.yaml"));
    fs::rename(staging.join("fifo.yaml"), dir.join("fifo.yaml")).expect("moving the FIFO in");
    let huge = fs::File::create(staging.join("huge.yaml")).expect("huge file");
    huge.set_len(200 << 20).expect("a sparse 200 MiB file");
    fs::rename(staging.join("huge.yaml"), dir.join("huge.yaml")).expect("moving the huge file in");
    let garbage: Vec<u8> = (0..64 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    write("garbage.yaml", &garbage);
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for (n, prev) in ["b", "c", "d", "e", "f", "g", "h", "i"]
        .iter()
        .zip(["a", "b", "c", "d", "e", "f", "g", "h"])
    {
        bomb.push_str(&format!(
            "{n}: &{n} [{}]\n",
            vec![format!("*{prev}"); 10].join(", ")
        ));
    }
    write("alias-bomb.yaml", bomb.as_bytes());
    write(
        "nul-name.yaml",
        pod_with("nul", "", "")
            .replace("- name: main", "- name: \"ma\\0in\"")
            .as_bytes(),
    );
    write(
        "subpath.yaml",
        pod_with(
            "subpath",
            "    volumeMounts: [{name: data, mountPath: /data, subPath: ../../etc}]\n",
            "  volumes: [{name: data, emptyDir: {}}]\n",
        )
        .as_bytes(),
    );
    // Others: JSON and block nesting, width, document count, a device.
    write(
        "deep.json",
        format!("{{\"a\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000)).as_bytes(),
    );
    write(
        "deep-block.yaml",
        format!("a:\n{}x\n", "- ".repeat(50_000)).as_bytes(),
    );
    write(
        "wide.yaml",
        format!("a: [{}1]\n", "1, ".repeat(60_000)).as_bytes(),
    );
    write("many-documents.yaml", "---\n".repeat(20_000).as_bytes());
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.yaml")).expect("symlink to /dev/zero");
    write(
        "no-handler-probe.yaml",
        pod_with("probe", "    livenessProbe: {periodSeconds: 5}\n", "").as_bytes(),
    );
    write(
        "bad-hostpath.yaml",
        pod_with(
            "hostpath",
            "    volumeMounts: [{name: h, mountPath: /h}]\n",
            "  volumes: [{name: h, hostPath: {path: /var/../etc, type: Pipe}}]\n",
        )
        .as_bytes(),
    );

    // A second manifest for the running pod's name, sorting before its
    // file: the established pod stays, the newcomer is refused.
    write(
        "0-good-twin.yaml",
        sleeper("good").replace("100000", "200000").as_bytes(),
    );

    vec![
        (
            "0-good-twin.yaml",
            vec!["both define pod default/good", "good.yaml and ignoring"],
        ),
        ("deep.yaml", vec!["nests deeper than 64 levels"]),
        (
            "negative-memory.yaml",
            vec!["spec.containers[0].resources.limits[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0"],
        ),
        (
            "absurd-cpu.yaml",
            vec!["spec.containers[0].resources.limits[cpu]: Invalid value: \"1e400\""],
        ),
        (
            "negative-grace.yaml",
            vec!["spec.terminationGracePeriodSeconds: Invalid value: -5: must be greater than or equal to 0"],
        ),
        (
            "pids-limit.yaml",
            vec!["spec.containers[0].resources.limits[pids]: Invalid value: pids: must be a standard resource"],
        ),
        ("fifo.yaml", vec!["is not a regular file"]),
        ("huge.yaml", vec!["is 209715200 bytes, over the 262144-byte limit"]),
        ("garbage.yaml", vec!["is not UTF-8 text"]),
        ("alias-bomb.yaml", vec!["expands aliases to more than 5000 nodes"]),
        (
            "nul-name.yaml",
            vec!["spec.containers[0].name: Invalid value: \"ma\\x00in\""],
        ),
        (
            "subpath.yaml",
            vec!["spec.containers[0].volumeMounts.subPath: Invalid value: \"../../etc\": must not contain '..'"],
        ),
        ("deep.json", vec!["nests deeper than 64 levels"]),
        ("deep-block.yaml", vec!["nests deeper than 64 levels"]),
        ("wide.yaml", vec!["has more than 5000 nodes"]),
        ("many-documents.yaml", vec!["has more than 5000 nodes"]),
        ("zero.yaml", vec!["is not a regular file"]),
        (
            "no-handler-probe.yaml",
            vec!["spec.containers[0].livenessProbe: Required value: must specify a handler type"],
        ),
        (
            "bad-hostpath.yaml",
            vec![
                "spec.volumes[0].hostPath.path: Invalid value: \"/var/../etc\": must not contain '..'",
                "spec.volumes[0].hostPath.type: Unsupported value: \"Pipe\"",
            ],
        ),
    ]
}

#[test]
fn hostile_manifests_are_refused_while_the_agent_keeps_answering_and_the_good_pod_keeps_running() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    p.write_manifest("good", &sleeper("good"));
    let before = wait_running(&p, "good");
    let good_id = container_status(&before)["containerID"].clone();
    assert_eq!(container_status(&before)["restartCount"], 0);
    let pid = p.pid().expect("picolet runs");
    let rss_start = vm_rss_kib(pid);
    let rss_budget = rss_budget_kib(rss_start);

    let expected = hostile_files(&p.manifests_dir());
    let mut slowest = Duration::ZERO;
    let mut answers = 0;
    let mut rss_max = rss_start;
    wait_until("a log line for every hostile file", LONG, || {
        let (took, out) = get_pods(&p);
        slowest = slowest.max(took);
        answers += 1;
        assert!(out.contains("good-"), "get pods lost the good pod: {out}");
        rss_max = rss_max.max(vm_rss_kib(pid));
        assert!(
            rss_max < rss_budget,
            "picolet's RSS reached {rss_max} KiB (budget {rss_budget} KiB, {rss_start} KiB at the start)"
        );
        let log = p.log();
        expected
            .iter()
            .all(|(file, fragments)| {
                let path = p.manifests_dir().join(file).display().to_string();
                log.lines()
                    .any(|line| line.contains(&path) && fragments.iter().all(|f| line.contains(f)))
            })
            .then_some(())
    });
    println!(
        "picolet get pods answered {answers} times while the hostile files were read; \
         slowest {slowest:?}; RSS {rss_start} KiB at the start, at most {rss_max} KiB"
    );

    // Each file was refused once, not at every rescan.
    let log = p.log();
    for (file, _) in &expected {
        let path = p.manifests_dir().join(file).display().to_string();
        let lines = log.lines().filter(|l| l.contains(&path)).count();
        assert_eq!(lines, 1, "{file} was reported {lines} times:\n{log}");
    }
    // Nothing hostile became a pod; the good one kept its container.
    let pods = p.pods();
    let names: Vec<&str> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, [format!("good-{}", p.hostname())], "{pods}");
    let after = p.find_pod("good").expect("the good pod");
    assert_eq!(container_status(&after)["containerID"], good_id);
    assert_eq!(container_status(&after)["restartCount"], 0);
    assert!(container_status(&after)["state"]["running"].is_object());

    // And the agent still does its job: a new good pod starts.
    p.write_manifest("after", &sleeper("after"));
    wait_running(&p, "after");
    let (took, _) = get_pods(&p);
    println!(
        "picolet get pods after the storm: {took:?}; RSS {} KiB",
        vm_rss_kib(pid)
    );
}
