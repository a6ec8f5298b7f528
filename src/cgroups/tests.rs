//! The cgroup module's tests: [`PodCgroups`] and the file helpers against
//! temp trees laid out as v1 and v2 hierarchies (`testutil`).

use super::testutil::TempTree;
use super::*;
use crate::qos::allocatable::{KubepodsLimits, QosShares};
use crate::qos::{PodResources, QosClass, MIN_SHARES};

const UID: &str = "0f3c2a9e-1111-2222-3333-444455556666";
const V1_ALL: &[&str] = &[
    "cpu", "cpuacct", "cpuset", "memory", "pids", "freezer", "devices",
];

fn burstable() -> PodResources {
    PodResources {
        cpu_request_millis: 250,
        cpu_limit_millis: Some(500),
        memory_limit_bytes: Some(64 << 20),
        memory_request_bytes: 32 << 20,
    }
}

#[test]
fn a_root_with_cgroup_controllers_is_detected_as_v2() {
    let t = TempTree::v2("detect2", "cpu memory");
    assert_eq!(detect(t.path()).unwrap(), CgroupVersion::V2);
}

#[test]
fn per_controller_directories_and_a_unified_subdir_are_detected_as_v1() {
    let t = TempTree::v1("detect1", &["cpu", "memory"]);
    t.put("unified/cgroup.controllers", "");
    assert_eq!(detect(t.path()).unwrap(), CgroupVersion::V1);
}

#[test]
fn a_missing_mount_root_is_an_error() {
    assert!(detect(Path::new("/nonexistent/picolet/cgroup")).is_err());
}

#[test]
fn cgroup_parent_follows_the_kubelet_cgroupfs_naming() {
    let t = TempTree::v1("parent", &["cpu"]);
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    assert_eq!(
        cg.pod_cgroup_parent("u1", QosClass::Burstable),
        "/kubepods/burstable/podu1"
    );
    assert_eq!(
        cg.pod_cgroup_parent("u1", QosClass::BestEffort),
        "/kubepods/besteffort/podu1"
    );
    assert_eq!(
        cg.pod_cgroup_parent("u1", QosClass::Guaranteed),
        "/kubepods/podu1"
    );
    let cg = PodCgroups::new(t.path(), "/picolet-test-1/", true).unwrap();
    assert_eq!(
        cg.pod_cgroup_parent("u1", QosClass::Burstable),
        "/picolet-test-1/kubepods/burstable/podu1"
    );
    let cg = PodCgroups::new(t.path(), "/picolet-test-1", false).unwrap();
    assert_eq!(
        cg.pod_cgroup_parent("u1", QosClass::Burstable),
        "/picolet-test-1"
    );
    let cg = PodCgroups::new(t.path(), "", false).unwrap();
    assert_eq!(cg.pod_cgroup_parent("u1", QosClass::Guaranteed), "/");
}

#[test]
fn a_cgroup_root_with_dot_dot_is_rejected() {
    let t = TempTree::v1("dotdot", &["cpu"]);
    assert!(PodCgroups::new(t.path(), "/a/../b", true).is_err());
}

#[test]
fn a_uid_with_a_slash_is_rejected_before_touching_the_filesystem() {
    let t = TempTree::v1("baduid", &["cpu"]);
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    assert!(matches!(
        cg.ensure_pod("../x", QosClass::Burstable, &burstable(), None),
        Err(CgroupError::InvalidName(_))
    ));
    assert!(matches!(
        cg.remove_pod("", QosClass::Burstable),
        Err(CgroupError::InvalidName(_))
    ));
}

#[test]
fn v1_qos_hierarchy_is_created_in_each_controller_with_cpusets_copied() {
    let t = TempTree::v1("v1qos", V1_ALL);
    let cg = PodCgroups::new(t.path(), "/picolet-test-1", true).unwrap();
    cg.ensure_qos_hierarchy().unwrap();
    for c in ["cpu", "cpuacct", "cpuset", "memory", "pids"] {
        for d in ["kubepods", "kubepods/burstable", "kubepods/besteffort"] {
            assert!(t.exists(&format!("{c}/picolet-test-1/{d}")), "{c}/{d}");
        }
    }
    assert!(
        !t.exists("freezer/picolet-test-1"),
        "freezer is left to runc"
    );
    assert_eq!(t.get("cpuset/picolet-test-1/cpuset.cpus"), "0-3");
    assert_eq!(
        t.get("cpuset/picolet-test-1/kubepods/besteffort/cpuset.cpus"),
        "0-3"
    );
    assert_eq!(
        t.get("cpuset/picolet-test-1/kubepods/burstable/cpuset.mems"),
        "0"
    );
    assert_eq!(
        t.get("cpu/picolet-test-1/kubepods/besteffort/cpu.shares"),
        "2"
    );
    // idempotent
    cg.ensure_qos_hierarchy().unwrap();
}

#[test]
fn v1_missing_controllers_are_skipped_without_error() {
    let t = TempTree::v1("v1missing", &["memory"]);
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    cg.ensure_qos_hierarchy().unwrap();
    cg.ensure_pod(UID, QosClass::Burstable, &burstable(), Some(100))
        .unwrap();
    assert_eq!(
        t.get(&format!(
            "memory/kubepods/burstable/pod{UID}/memory.limit_in_bytes"
        )),
        "67108864"
    );
    assert!(!t.exists("cpu"));
}

#[test]
fn v1_burstable_pod_gets_shares_quota_memory_and_pids_limits() {
    let t = TempTree::v1("v1pod", V1_ALL);
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    cg.ensure_qos_hierarchy().unwrap();
    cg.ensure_pod(UID, QosClass::Burstable, &burstable(), Some(1024))
        .unwrap();
    let pod = format!("kubepods/burstable/pod{UID}");
    assert_eq!(t.get(&format!("cpu/{pod}/cpu.shares")), "256");
    assert_eq!(t.get(&format!("cpu/{pod}/cpu.cfs_period_us")), "100000");
    assert_eq!(t.get(&format!("cpu/{pod}/cpu.cfs_quota_us")), "50000");
    assert_eq!(
        t.get(&format!("memory/{pod}/memory.limit_in_bytes")),
        "67108864"
    );
    assert_eq!(t.get(&format!("pids/{pod}/pids.max")), "1024");
    assert_eq!(t.get(&format!("cpuset/{pod}/cpuset.cpus")), "0-3");
    assert!(t.exists(&format!("cpuacct/{pod}")));
}

#[test]
fn v1_pod_without_limits_is_written_as_unlimited() {
    let t = TempTree::v1("v1nolimit", V1_ALL);
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    let res = PodResources {
        cpu_request_millis: 100,
        ..Default::default()
    };
    cg.ensure_pod(UID, QosClass::Burstable, &res, None).unwrap();
    let pod = format!("kubepods/burstable/pod{UID}");
    assert_eq!(t.get(&format!("cpu/{pod}/cpu.shares")), "102");
    assert_eq!(t.get(&format!("cpu/{pod}/cpu.cfs_quota_us")), "-1");
    assert_eq!(t.get(&format!("memory/{pod}/memory.limit_in_bytes")), "-1");
    assert_eq!(t.get(&format!("pids/{pod}/pids.max")), "max");
}

#[test]
fn best_effort_pods_get_minimum_shares_and_no_limits() {
    let t = TempTree::v1("v1be", V1_ALL);
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    cg.ensure_pod(UID, QosClass::BestEffort, &burstable(), None)
        .unwrap();
    let pod = format!("kubepods/besteffort/pod{UID}");
    assert_eq!(t.get(&format!("cpu/{pod}/cpu.shares")), "2");
    assert_eq!(t.get(&format!("memory/{pod}/memory.limit_in_bytes")), "-1");
}

#[test]
fn disabling_cfs_quota_leaves_cpu_limits_unenforced() {
    let t = TempTree::v1("v1nocfs", V1_ALL);
    let cg = PodCgroups::new(t.path(), "/", true)
        .unwrap()
        .with_cpu_cfs_quota(false, 50_000);
    cg.ensure_pod(UID, QosClass::Guaranteed, &burstable(), None)
        .unwrap();
    assert_eq!(
        t.get(&format!("cpu/kubepods/pod{UID}/cpu.cfs_quota_us")),
        "-1"
    );
    assert_eq!(
        t.get(&format!("cpu/kubepods/pod{UID}/cpu.cfs_period_us")),
        "50000"
    );
}

#[test]
fn v2_hierarchy_enables_available_controllers_at_every_level() {
    let t = TempTree::v2("v2qos", "cpuset cpu io memory hugetlb pids rdma misc");
    let cg = PodCgroups::new(t.path(), "/picolet-test-1", true).unwrap();
    cg.ensure_qos_hierarchy().unwrap();
    let want = "+cpuset +cpu +io +memory +hugetlb +pids";
    assert_eq!(t.get("cgroup.subtree_control"), want);
    assert_eq!(t.get("picolet-test-1/cgroup.subtree_control"), want);
    assert_eq!(
        t.get("picolet-test-1/kubepods/cgroup.subtree_control"),
        want
    );
    assert_eq!(
        t.get("picolet-test-1/kubepods/burstable/cgroup.subtree_control"),
        want
    );
    assert_eq!(t.get("picolet-test-1/kubepods/besteffort/cpu.weight"), "1");
}

#[test]
fn v2_only_enables_what_the_parent_offers() {
    let t = TempTree::v2("v2partial", "memory pids");
    t.put("cgroup.subtree_control", "memory\n");
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    cg.ensure_qos_hierarchy().unwrap();
    assert_eq!(t.get("cgroup.subtree_control"), "+pids");
    assert_eq!(t.get("kubepods/cgroup.subtree_control"), "+memory +pids");
    assert!(
        !t.exists("kubepods/besteffort/cpu.weight"),
        "cpu is not available"
    );
}

#[test]
fn v2_pod_gets_weight_cpu_max_memory_max_and_pids_max() {
    let t = TempTree::v2("v2pod", "cpuset cpu io memory pids");
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    cg.ensure_qos_hierarchy().unwrap();
    cg.ensure_pod(UID, QosClass::Burstable, &burstable(), Some(64))
        .unwrap();
    let pod = format!("kubepods/burstable/pod{UID}");
    assert_eq!(t.get(&format!("{pod}/cpu.weight")), "10");
    assert_eq!(t.get(&format!("{pod}/cpu.max")), "50000 100000");
    assert_eq!(t.get(&format!("{pod}/memory.max")), "67108864");
    assert_eq!(t.get(&format!("{pod}/pids.max")), "64");
    let res = PodResources {
        cpu_request_millis: 100,
        ..Default::default()
    };
    cg.ensure_pod(UID, QosClass::Burstable, &res, None).unwrap();
    assert_eq!(t.get(&format!("{pod}/cpu.max")), "max 100000");
    assert_eq!(t.get(&format!("{pod}/memory.max")), "max");
    assert_eq!(t.get(&format!("{pod}/pids.max")), "max");
}

#[test]
fn removing_a_pod_removes_leftover_container_cgroups_in_every_hierarchy() {
    let t = TempTree::v1("v1rm", V1_ALL);
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    cg.ensure_pod(UID, QosClass::Guaranteed, &burstable(), None)
        .unwrap();
    let pod = format!("kubepods/pod{UID}");
    // what runc would leave behind: container dirs, also in freezer
    t.put(&format!("memory/{pod}/ctr1/memory.limit_in_bytes"), "1");
    t.put(&format!("freezer/{pod}/ctr1/freezer.state"), "THAWED");
    cg.remove_pod(UID, QosClass::Guaranteed).unwrap();
    for c in V1_ALL {
        assert!(!t.exists(&format!("{c}/{pod}")), "{c}");
    }
    assert!(t.exists("memory/kubepods"));
    // removing again is fine
    cg.remove_pod(UID, QosClass::Guaranteed).unwrap();
}

#[test]
fn removing_a_v2_pod_and_everything_leaves_no_directories() {
    let t = TempTree::v2("v2rm", "cpu memory pids");
    let cg = PodCgroups::new(t.path(), "/picolet-test-2", true).unwrap();
    cg.ensure_qos_hierarchy().unwrap();
    cg.ensure_pod(UID, QosClass::BestEffort, &PodResources::default(), None)
        .unwrap();
    cg.remove_pod(UID, QosClass::BestEffort).unwrap();
    assert!(!t.exists(&format!("picolet-test-2/kubepods/besteffort/pod{UID}")));
    cg.remove_all().unwrap();
    assert!(!t.exists("picolet-test-2"));
    assert!(t.exists("cgroup.controllers"));
}

#[test]
fn listing_finds_pod_directories_under_each_qos_level_once() {
    let t = TempTree::v1("v1list", V1_ALL);
    let cg = PodCgroups::new(t.path(), "/r", true).unwrap();
    cg.ensure_qos_hierarchy().unwrap();
    cg.ensure_pod("aaa", QosClass::Guaranteed, &burstable(), None)
        .unwrap();
    cg.ensure_pod("bbb", QosClass::Burstable, &burstable(), None)
        .unwrap();
    cg.ensure_pod("ccc", QosClass::BestEffort, &burstable(), None)
        .unwrap();
    t.put("memory/r/kubepods/burstable/notapod/x", "");
    t.put("memory/r/kubepods/burstable/podfile", "");
    let pods = cg.list_pods().unwrap();
    assert_eq!(
        pods,
        vec![
            (QosClass::Guaranteed, "aaa".to_string()),
            (QosClass::Burstable, "bbb".to_string()),
            (QosClass::BestEffort, "ccc".to_string()),
        ]
    );
}

#[test]
fn without_per_qos_nothing_is_created_for_pods() {
    let t = TempTree::v1("noqos", V1_ALL);
    let cg = PodCgroups::new(t.path(), "/picolet", false).unwrap();
    cg.ensure_qos_hierarchy().unwrap();
    cg.ensure_pod(UID, QosClass::Burstable, &burstable(), None)
        .unwrap();
    assert!(t.exists("memory/picolet"));
    assert!(!t.exists("memory/picolet/kubepods"));
    assert!(cg.list_pods().unwrap().is_empty());
    cg.remove_pod(UID, QosClass::Burstable).unwrap();
}

#[test]
fn qos_shares_are_written_as_shares_on_v1_and_weight_on_v2() {
    let shares = |burstable| QosShares {
        burstable,
        besteffort: MIN_SHARES,
    };
    let t = TempTree::v1("v1shares", V1_ALL);
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    cg.ensure_qos_hierarchy().unwrap();
    cg.update_qos_shares(shares(1536)).unwrap();
    assert_eq!(t.get("cpu/kubepods/burstable/cpu.shares"), "1536");
    cg.update_qos_shares(shares(2)).unwrap();
    assert_eq!(t.get("cpu/kubepods/burstable/cpu.shares"), "2");
    assert_eq!(t.get("cpu/kubepods/besteffort/cpu.shares"), "2");
    let t = TempTree::v2("v2shares", "cpu");
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    cg.ensure_qos_hierarchy().unwrap();
    cg.update_qos_shares(shares(1024)).unwrap();
    assert_eq!(t.get("kubepods/burstable/cpu.weight"), "39");
}

#[test]
fn node_allocatable_lands_on_the_kubepods_cgroup() {
    let limits = KubepodsLimits {
        cpu_shares: 3328,
        memory_bytes: 874 << 20,
        pids: Some(31768),
    };
    let t = TempTree::v1("v1alloc", V1_ALL);
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    cg.ensure_qos_hierarchy().unwrap();
    cg.enforce_node_allocatable(limits).unwrap();
    assert_eq!(t.get("cpu/kubepods/cpu.shares"), "3328");
    assert_eq!(
        t.get("memory/kubepods/memory.limit_in_bytes"),
        (874u64 << 20).to_string()
    );
    assert_eq!(t.get("pids/kubepods/pids.max"), "31768");
    let t = TempTree::v2("v2alloc", "cpu memory pids");
    let cg = PodCgroups::new(t.path(), "/picolet", true).unwrap();
    cg.ensure_qos_hierarchy().unwrap();
    cg.enforce_node_allocatable(KubepodsLimits {
        pids: None,
        ..limits
    })
    .unwrap();
    assert_eq!(t.get("picolet/kubepods/cpu.weight"), "127");
    assert_eq!(
        t.get("picolet/kubepods/memory.max"),
        (874u64 << 20).to_string()
    );
    assert!(!t.exists("picolet/kubepods/pids.max"));
}

#[test]
fn v1_stats_are_read_from_the_pod_cgroup() {
    let t = TempTree::v1("v1stats", V1_ALL);
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    let parent = cg.pod_cgroup_parent(UID, QosClass::Burstable);
    let pod = format!("kubepods/burstable/pod{UID}");
    t.put(&format!("memory/{pod}/memory.usage_in_bytes"), "1000000\n");
    t.put(
        &format!("memory/{pod}/memory.limit_in_bytes"),
        "9223372036854771712\n",
    );
    t.put(
        &format!("memory/{pod}/memory.stat"),
        "cache 10\ninactive_file 5\ntotal_inactive_file 400000\n",
    );
    t.put(&format!("pids/{pod}/pids.current"), "7\n");
    t.put(&format!("pids/{pod}/cgroup.procs"), "10\n11\n");
    t.put(&format!("pids/{pod}/ctr/cgroup.procs"), "12\n");
    t.put(
        &format!("cpu/{pod}/cpu.stat"),
        "nr_periods 10\nnr_throttled 2\nthrottled_time 5000000\n",
    );
    t.put(&format!("cpuacct/{pod}/cpuacct.usage"), "3000000\n");
    assert_eq!(cg.read_memory_usage(&parent).unwrap(), 1_000_000);
    assert_eq!(cg.read_memory_limit(&parent).unwrap(), None);
    assert_eq!(cg.read_memory_working_set(&parent).unwrap(), 600_000);
    assert_eq!(cg.read_pids_current(&parent).unwrap(), 7);
    assert_eq!(cg.read_procs(&parent).unwrap(), vec![10, 11, 12]);
    let cpu = cg.read_cpu_stat(&parent).unwrap();
    assert_eq!(
        (
            cpu.usage_usec,
            cpu.nr_periods,
            cpu.nr_throttled,
            cpu.throttled_usec
        ),
        (Some(3000), 10, 2, 5000)
    );
}

#[test]
fn v2_stats_are_read_from_the_pod_cgroup() {
    let t = TempTree::v2("v2stats", "cpu memory pids");
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    let parent = cg.pod_cgroup_parent(UID, QosClass::Guaranteed);
    let pod = format!("kubepods/pod{UID}");
    t.put(&format!("{pod}/memory.current"), "2048\n");
    t.put(&format!("{pod}/memory.max"), "4096\n");
    t.put(
        &format!("{pod}/memory.stat"),
        "anon 1024\ninactive_file 1000\n",
    );
    t.put(&format!("{pod}/pids.current"), "3\n");
    t.put(
        &format!("{pod}/cpu.stat"),
        "usage_usec 77\nuser_usec 70\nsystem_usec 7\n",
    );
    assert_eq!(cg.read_memory_usage(&parent).unwrap(), 2048);
    assert_eq!(cg.read_memory_limit(&parent).unwrap(), Some(4096));
    assert_eq!(cg.read_memory_working_set(&parent).unwrap(), 1048);
    assert_eq!(cg.read_pids_current(&parent).unwrap(), 3);
    assert_eq!(cg.read_cpu_stat(&parent).unwrap().usage_usec, Some(77));
}

#[test]
fn unreadable_stats_name_the_file_in_the_error() {
    let t = TempTree::v2("v2err", "memory");
    let cg = PodCgroups::new(t.path(), "/", true).unwrap();
    t.put("kubepods/memory.current", "lots\n");
    let e = cg.read_memory_usage("/kubepods").unwrap_err();
    assert!(matches!(e, CgroupError::Parse { .. }));
    assert!(e.to_string().contains("kubepods/memory.current"), "{e}");
    let e = cg.read_pids_current("/kubepods").unwrap_err();
    assert!(e.to_string().contains("kubepods/pids.current"), "{e}");
    assert!(matches!(
        cg.read_memory_usage("/../etc"),
        Err(CgroupError::InvalidName(_))
    ));
}

#[test]
fn max_and_integer_values_parse() {
    assert_eq!(parse_max("max\n"), Some(None));
    assert_eq!(parse_max("42\n"), Some(Some(42)));
    assert_eq!(parse_max("-1"), None);
    assert_eq!(parse_u64(" 5 \n"), Some(5));
    assert_eq!(parse_u64("x"), None);
}

/// The one test that touches the real kernel: skips itself unless root
/// with a writable /sys/fs/cgroup.
#[test]
fn a_real_pod_cgroup_gets_its_memory_limit_and_is_removed_again() {
    let root = Path::new("/sys/fs/cgroup");
    if !rustix::process::geteuid().is_root() {
        println!("skipped: not root");
        return;
    }
    let Ok(version) = detect(root) else {
        println!("skipped: no cgroup filesystem at {}", root.display());
        return;
    };
    let probe = match version {
        CgroupVersion::V1 => root.join("memory"),
        CgroupVersion::V2 => root.to_path_buf(),
    };
    if !is_cgroupfs(&probe) || rustix::fs::access(&probe, rustix::fs::Access::WRITE_OK).is_err() {
        println!(
            "skipped: {} is not a writable cgroup filesystem",
            probe.display()
        );
        return;
    }
    let cgroup_root = format!("/picolet-unit-{}", std::process::id());
    let cg = PodCgroups::new(root, &cgroup_root, true).unwrap();
    // Kills the helper process and removes everything even if an
    // assertion fails half-way.
    struct Cleanup<'a>(&'a PodCgroups, Option<std::process::Child>);
    impl Drop for Cleanup<'_> {
        fn drop(&mut self) {
            if let Some(mut child) = self.1.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
            let _ = self.0.remove_all();
        }
    }
    let mut cleanup = Cleanup(&cg, None);

    cg.ensure_qos_hierarchy().unwrap();
    cg.ensure_pod(UID, QosClass::Burstable, &burstable(), Some(64))
        .unwrap();
    let parent = cg.pod_cgroup_parent(UID, QosClass::Burstable);
    assert_eq!(cg.read_memory_limit(&parent).unwrap(), Some(64 << 20));
    assert_eq!(cg.read_memory_usage(&parent).unwrap(), 0);
    assert!(cg.read_procs(&parent).unwrap().is_empty());
    if root.join("pids").is_dir() || version == CgroupVersion::V2 {
        assert_eq!(cg.read_pids_current(&parent).unwrap(), 0);
    }
    assert_eq!(
        cg.list_pods().unwrap(),
        vec![(QosClass::Burstable, UID.to_string())]
    );
    let rel = format!("{}/kubepods/burstable/pod{UID}", &cgroup_root[1..]);
    if version == CgroupVersion::V1 {
        assert_eq!(
            read(&root.join("cpu").join(&rel).join("cpu.cfs_quota_us"))
                .unwrap()
                .trim(),
            "50000"
        );
        assert_eq!(
            read(&root.join("cpu").join(&rel).join("cpu.shares"))
                .unwrap()
                .trim(),
            "256"
        );
        let parent_cpus = read(&root.join("cpuset/cpuset.cpus")).unwrap();
        assert_eq!(
            read(&root.join("cpuset").join(&rel).join("cpuset.cpus")).unwrap(),
            parent_cpus
        );
    }

    // A process in a container cgroup below the pod (as runc would
    // leave it) makes removal report Busy until it is gone.
    let child = std::process::Command::new("sleep").arg("30").spawn();
    if let Ok(child) = child {
        let pid = child.id();
        cleanup.1 = Some(child);
        let hierarchies: Vec<PathBuf> = match version {
            CgroupVersion::V1 => ["memory", "pids"]
                .iter()
                .map(|c| root.join(c))
                .filter(|h| h.is_dir())
                .collect(),
            CgroupVersion::V2 => vec![root.to_path_buf()],
        };
        for h in &hierarchies {
            let ctr = h.join(&rel).join("ctr");
            mkdir(&ctr).unwrap();
            write(&ctr.join("cgroup.procs"), &pid.to_string()).unwrap();
        }
        assert_eq!(cg.read_procs(&parent).unwrap(), vec![pid as i32]);
        assert!(matches!(
            cg.remove_pod(UID, QosClass::Burstable),
            Err(CgroupError::Busy { .. })
        ));
        let mut child = cleanup.1.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    } else {
        println!("note: no `sleep` binary, Busy path not exercised");
    }

    cg.remove_pod(UID, QosClass::Burstable).unwrap();
    assert!(cg.list_pods().unwrap().is_empty());
    cg.remove_all().unwrap();
    assert!(!probe.join(&cgroup_root[1..]).exists());
}
