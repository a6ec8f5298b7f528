//! Node-pressure eviction on a real container runtime (containerd or
//! CRI-O, as `PICOLET_TEST_RUNTIME` says) and this machine's kernel: the
//! signals come from the real cgroup files, `/proc` and statfs, and the pods
//! really run and really allocate.
//!
//! Disk pressure comes from a tmpfs of the test's own, so its margin is
//! the test's and no other work on the machine moves it. Memory pressure
//! is tested on `allocatableMemory.available`, the pods' allocatable minus
//! the pods cgroup's working set: `kubeReserved` leaves the pods 256 MiB of
//! the machine, so the pressure is entirely the test's own pods. The
//! host's `memory.available` is not tested here (CI's builds beside the
//! suite move it by gigabytes); it is tested where the memory is the
//! test's own, in a 256 MiB qemu guest (`make image-test-eviction`,
//! cross/scenarios/eviction/). Waits are polls on what picolet reports
//! (`GET /pods`, `GET /node`); nothing asserts on timing.

mod harness;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use harness::{wait_until, ContainerRuntime, Picolet};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(180);
const MI: i64 = 1 << 20;

fn pod_manifest(name: &str, resources: &str, command: &str, volumes: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {command:?}]\n{resources}{volumes}"
    )
}

const SLEEP: &str = "exec sleep 100000";
const GUARANTEED: &str =
    "    resources: {requests: {memory: 32Mi, cpu: 50m}, limits: {memory: 32Mi, cpu: 50m}}\n";

fn phase(pod: &Value) -> &str {
    pod["status"]["phase"].as_str().unwrap_or("")
}

fn running_id(pod: &Value) -> Option<String> {
    let c = &pod["status"]["containerStatuses"][0];
    c["state"]["running"]
        .is_object()
        .then(|| c["containerID"].as_str().unwrap_or_default().to_string())
}

fn wait_running(p: &Picolet, name: &str) -> String {
    wait_until(&format!("pod {name} running"), LONG, || {
        let pod = p.find_pod(name)?;
        (phase(&pod) == "Running")
            .then(|| running_id(&pod))
            .flatten()
    })
}

fn node(p: &Picolet) -> Value {
    let (status, body) = p.get("/node");
    assert_eq!(status, 200, "GET /node: {body}");
    serde_json::from_str(&body).expect("GET /node is JSON")
}

fn pressure(p: &Picolet, condition: &str) -> bool {
    node(p)["conditions"][condition] == true
}

/// The pods that survive must not have been touched: same container, still
/// running, never evicted. A picolet that has just started reports an
/// adopted pod as Pending until its first sync, so this waits for Running
/// first; a restarted container would then show another ID.
fn assert_untouched(p: &Picolet, name: &str, id: &str) {
    wait_running(p, name);
    let pod = p
        .find_pod(name)
        .unwrap_or_else(|| panic!("pod {name} gone"));
    assert_eq!(phase(&pod), "Running", "{pod}");
    if running_id(&pod).as_deref() != Some(id) {
        let log = p.log();
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(name) || l.contains("eviction") || l.contains("kill"))
            .collect();
        panic!(
            "{name} restarted (was {id}): {pod}\npicolet's log about it:\n{}",
            lines.join("\n")
        );
    }
    assert_ne!(pod["status"]["reason"], "Evicted", "{pod}");
}

/// tmpfs mounts made for one test, unmounted when it ends (after picolet,
/// which is declared later and so dropped first).
#[derive(Default)]
struct Mounts(RefCell<Vec<PathBuf>>);

impl Mounts {
    fn tmpfs(&self, dir: &Path, size: &str) {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount")
            .success();
        assert!(ok, "mounting a tmpfs on {}", dir.display());
        self.0.borrow_mut().push(dir.to_path_buf());
    }
}

impl Drop for Mounts {
    fn drop(&mut self) {
        for dir in self.0.borrow().iter().rev() {
            let _ = Command::new("umount").arg("-l").arg(dir).status();
        }
    }
}

#[test]
fn under_disk_pressure_the_emptydir_writer_is_evicted_and_the_space_comes_back() {
    let runtime = ContainerRuntime::start();
    let mounts = Mounts::default();
    // The root dir on a small filesystem: nodefs is 64 MiB, and pressure
    // starts below 24 MiB available.
    let mut p = Picolet::start_with_args(
        &runtime,
        "evictionHard:\n  nodefs.available: 24Mi\nevictionPressureTransitionPeriod: 10s\n",
        |p| {
            mounts.tmpfs(&p.root_dir(), "64m");
            Vec::new()
        },
    );
    p.write_manifest("quiet", &pod_manifest("quiet", GUARANTEED, SLEEP, ""));
    let quiet = wait_running(&p, "quiet");
    assert!(!pressure(&p, "DiskPressure"), "{}", node(&p));

    let writer = "dd if=/dev/zero of=/scratch/fill bs=1048576 count=48; exec sleep 100000";
    let volumes = "    volumeMounts: [{name: scratch, mountPath: /scratch}]\n  volumes:\n  - name: scratch\n    emptyDir: {}\n";
    p.write_manifest("writer", &pod_manifest("writer", "", writer, volumes));

    let seen_pressure = RefCell::new(false);
    let evicted = wait_until("pod writer evicted", LONG, || {
        if pressure(&p, "DiskPressure") {
            *seen_pressure.borrow_mut() = true;
        }
        let pod = p.find_pod("writer")?;
        (pod["status"]["reason"] == "Evicted").then_some(pod)
    });
    let message = evicted["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("ephemeral-storage"), "{message}");
    assert!(message.contains("nodefs.available"), "{message}");
    assert!(*seen_pressure.borrow() || pressure(&p, "DiskPressure"));
    assert_untouched(&p, "quiet", &quiet);

    // The evicted pod's emptyDir is torn down: the pressure ends. The
    // writer is a static pod, so it comes back and writes again; by then
    // the test has seen what it needed.
    p.remove_manifest("writer");
    wait_until("DiskPressure cleared", LONG, || {
        (!pressure(&p, "DiskPressure")).then_some(())
    });
    assert_untouched(&p, "quiet", &quiet);
    p.stop();
    drop(p);
    drop(mounts);
}

fn image_tags(runtime: &ContainerRuntime) -> Vec<String> {
    let socket = picolet::cri::socket_path(&runtime.endpoint()).expect("unix endpoint");
    let cri = picolet::cri::Runtime::new(socket, Duration::from_secs(30));
    picolet::rt::block_on(cri.list_images(picolet::cri::api::ListImagesRequest::default()))
        .expect("ListImages")
        .images
        .into_iter()
        .flat_map(|i| i.repo_tags)
        .collect()
}

#[test]
fn image_gc_removes_unused_images_and_keeps_the_one_in_use_and_the_sandbox_image() {
    let runtime = ContainerRuntime::start();
    runtime.import_test_image("grpc-health");
    let has = |tags: &[String], name: &str| tags.iter().any(|t| t.contains(name));
    assert!(has(&image_tags(&runtime), "picolet/grpc-health"));
    // Past the high threshold on any disk that holds anything; an image
    // must be known for 20 s before it may go, by which time busybox is in
    // use.
    let p = Picolet::start_with(
        &runtime,
        "imageGCHighThresholdPercent: 1\nimageGCLowThresholdPercent: 0\nimageMinimumGCAge: 20s\n",
    );
    p.write_manifest("user", &pod_manifest("user", "", SLEEP, ""));
    let user = wait_running(&p, "user");
    let tags = wait_until("the unused image removed", LONG, || {
        let tags = image_tags(&runtime);
        (!has(&tags, "picolet/grpc-health")).then_some(tags)
    });
    assert!(has(&tags, "busybox"), "the image in use stays: {tags:?}");
    assert!(has(&tags, "pause"), "the sandbox image stays: {tags:?}");
    assert_untouched(&p, "user", &user);
    // The runtime's removal is seen before picolet logs it: wait for the line.
    wait_until("image GC logs the removal", LONG, || {
        p.log().contains("image GC: removed image").then_some(())
    });
}

/// A file of the instance's cgroup `rel` (under its cgroupRoot), in the
/// controller's hierarchy on v1 or the unified one on v2.
fn cgroup_file(p: &Picolet, controller: &str, rel: &str, v1: &str, v2: &str) -> PathBuf {
    let mount = Path::new("/sys/fs/cgroup");
    let root = p.cgroup_root().trim_start_matches('/');
    match picolet::cgroups::detect(mount).expect("cgroup mount") {
        picolet::cgroups::CgroupVersion::V1 => mount.join(controller).join(root).join(rel).join(v1),
        picolet::cgroups::CgroupVersion::V2 => mount.join(root).join(rel).join(v2),
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

#[test]
fn the_kubepods_cgroup_gets_capacity_minus_reservations_and_burstable_shares_follow_requests() {
    let runtime = ContainerRuntime::start();
    let p = Picolet::start_with(
        &runtime,
        "systemReserved: {cpu: 200m, memory: 100Mi, pid: \"1000\"}\nkubeReserved: {memory: 50Mi}\n",
    );
    // What kubelet would write: MemTotal minus both reservations (the hard
    // eviction threshold stays inside), shares of the CPUs left, pid_max
    // minus the pids reserved.
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
    let mem_total = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("MemTotal")
        * 1024;
    let cpus: u64 = String::from_utf8(Command::new("nproc").output().expect("nproc").stdout)
        .expect("nproc output")
        .trim()
        .parse()
        .expect("nproc number");
    let pid_max: u64 = read_trimmed(Path::new("/proc/sys/kernel/pid_max"))
        .and_then(|s| s.parse().ok())
        .expect("pid_max");
    let shares = picolet::qos::milli_cpu_to_shares(cpus * 1000 - 200);
    let want_memory = (mem_total - 150 * MI as u64).to_string();
    let memory = cgroup_file(
        &p,
        "memory",
        "kubepods",
        "memory.limit_in_bytes",
        "memory.max",
    );
    wait_until("kubepods memory limit set", LONG, || {
        (read_trimmed(&memory)? == want_memory).then_some(())
    });
    let cpu = cgroup_file(&p, "cpu", "kubepods", "cpu.shares", "cpu.weight");
    let want_cpu = if cpu.ends_with("cpu.weight") {
        picolet::qos::shares_to_weight(shares)
    } else {
        shares
    };
    assert_eq!(
        read_trimmed(&cpu),
        Some(want_cpu.to_string()),
        "{}",
        cpu.display()
    );
    let pids = cgroup_file(&p, "pids", "kubepods", "pids.max", "pids.max");
    assert_eq!(read_trimmed(&pids), Some((pid_max - 1000).to_string()));

    // A Burstable pod's CPU request moves the Burstable cgroup's shares.
    p.write_manifest(
        "burstable",
        &pod_manifest(
            "burstable",
            "    resources: {requests: {cpu: 300m}}\n",
            SLEEP,
            "",
        ),
    );
    wait_running(&p, "burstable");
    let burstable = cgroup_file(&p, "cpu", "kubepods/burstable", "cpu.shares", "cpu.weight");
    let want = picolet::qos::milli_cpu_to_shares(300);
    let want = if burstable.ends_with("cpu.weight") {
        picolet::qos::shares_to_weight(want)
    } else {
        want
    };
    wait_until("burstable shares follow the pod's request", LONG, || {
        (read_trimmed(&burstable)? == want.to_string()).then_some(())
    });
}

/// `MemTotal` in bytes.
fn mem_total() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("MemTotal")
        * 1024
}

/// `allocatableMemory.available` as picolet's last eviction pass saw it.
fn allocatable_available(p: &Picolet) -> Option<i64> {
    node(p)["signals"]["allocatableMemory.available"]["available"].as_i64()
}

fn eviction_passes(p: &Picolet) -> u64 {
    node(p)["passes"].as_u64().unwrap_or(0)
}

#[test]
fn started_under_memory_pressure_picolet_evicts_the_besteffort_hog_and_keeps_the_guaranteed_pod() {
    let runtime = ContainerRuntime::start();
    // The pods' allocatable is 256 MiB whatever the machine has; the
    // threshold is crossed once the pods' working set passes 56 MiB, which
    // the hog's 96 MiB does on its own.
    let reserved = mem_total() - 256 * MI as u64;
    let threshold = 200 * MI;
    let before = "evictionHard: {nodefs.available: 1Mi}\n";
    let after = "evictionHard: {allocatableMemory.available: 200Mi}\n";
    let mut p = Picolet::start_with(
        &runtime,
        &format!(
            "kubeReserved: {{memory: \"{reserved}\"}}\n{before}evictionPressureTransitionPeriod: 10s\n"
        ),
    );
    p.write_manifest(
        "guaranteed",
        &pod_manifest("guaranteed", GUARANTEED, SLEEP, ""),
    );
    // Grows a shell variable to 96 MiB of its own heap, then holds it.
    let hog = "a=$(head -c 1048576 /dev/zero | tr '\\000' x); s=; i=0; \
               while [ $i -lt 96 ]; do s=\"$s$a\"; i=$((i+1)); done; \
               while :; do sleep 1000; done";
    p.write_manifest("hog", &pod_manifest("hog", "", hog, ""));
    let guaranteed = wait_running(&p, "guaranteed");
    wait_running(&p, "hog");
    // The pressure is there before the threshold is: `GET /node` reads
    // every signal when asked, thresholds on it or not.
    wait_until("the pods' working set past the threshold", LONG, || {
        (allocatable_available(&p)? < threshold).then_some(())
    });
    assert!(!pressure(&p, "MemoryPressure"), "{}", node(&p));

    // Stopped, picolet leaves the containers running; it starts again
    // with the threshold already crossed.
    p.stop();
    let config = std::fs::read_to_string(p.config_path()).expect("config");
    assert!(config.contains(before), "{config}");
    std::fs::write(p.config_path(), config.replace(before, after)).expect("config");
    p.restart();

    let evicted = wait_until("pod hog evicted", LONG, || {
        let pod = p.find_pod("hog")?;
        (pod["status"]["reason"] == "Evicted").then_some(pod)
    });
    let message = evicted["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("allocatableMemory.available"), "{message}");
    assert_untouched(&p, "guaranteed", &guaranteed);
    // Passes after the eviction (the hog is static: it comes back once the
    // pressure is over, grows, and goes again) never choose the
    // Guaranteed pod, which uses less than it requests.
    let seen = eviction_passes(&p);
    wait_until("three more eviction passes", LONG, || {
        (eviction_passes(&p) >= seen + 3).then_some(())
    });
    assert_untouched(&p, "guaranteed", &guaranteed);
    let log = p.log();
    assert!(
        !log.lines()
            .any(|l| l.contains("evicting pod") && l.contains("guaranteed")),
        "{log}"
    );
}
