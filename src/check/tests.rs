//! The verdicts of `picolet check`, fact by fact.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::config::EvictionThreshold;

const GI: u64 = 1 << 30;
/// Tue, 01 Dec 2026 10:04:55 +0000.
const NOW: i64 = 1_796_119_495;

fn threshold(signal: Signal, value: EvictionThreshold, hard: bool) -> Threshold {
    Threshold {
        signal,
        value,
        grace_period: Duration::ZERO,
        min_reclaim: None,
        hard,
    }
}

#[test]
fn old_kernels_fail_or_warn_and_cgroup_v2_wants_5_8() {
    assert_eq!(kernel("6.1.0-rpi7-rpi-v8", true).verdict, Verdict::Ok);
    assert_eq!(kernel("3.4.113-sun8i", false).verdict, Verdict::Fail);
    assert_eq!(kernel("4.14.98-v7+", false).verdict, Verdict::Warn);
    assert_eq!(kernel("5.4.0", false).verdict, Verdict::Ok);
    let l = kernel("5.4.0", true);
    assert_eq!(l.verdict, Verdict::Warn);
    assert!(l.detail.contains("5.8"), "{}", l.detail);
    assert_eq!(kernel("garbage", true).verdict, Verdict::Warn);
    assert_eq!(kernel_version("5.15.0-1034-raspi"), Some((5, 15)));
}

#[test]
fn cgroup_v1_warns_and_missing_controllers_fail_or_warn() {
    let all: Vec<String> = ["cpuset", "cpu", "io", "memory", "hugetlb", "pids"]
        .map(String::from)
        .to_vec();
    let l = cgroups(Some(true), &all);
    assert_eq!((l[0].verdict, l[1].verdict), (Verdict::Ok, Verdict::Ok));
    assert_eq!(cgroups(Some(false), &all)[0].verdict, Verdict::Warn);
    let no_memory: Vec<String> = ["cpu", "pids", "cpuset", "hugetlb"]
        .map(String::from)
        .to_vec();
    let l = cgroups(Some(true), &no_memory);
    assert_eq!(l[1].verdict, Verdict::Fail);
    assert!(l[1].detail.starts_with("missing memory"), "{}", l[1].detail);
    let no_extras: Vec<String> = ["cpu", "memory", "pids"].map(String::from).to_vec();
    let l = cgroups(Some(true), &no_extras);
    assert_eq!(l[1].verdict, Verdict::Warn);
    assert!(l[1].detail.contains("cpuset, hugetlb"), "{}", l[1].detail);
    assert_eq!(cgroups(None, &[])[0].verdict, Verdict::Fail);
}

#[test]
fn a_runtime_that_does_not_answer_fails_naming_the_endpoint() {
    let l = runtime(
        "unix:///run/containerd/containerd.sock",
        Ok(("containerd".into(), "v2.0.0".into(), "v1".into())),
    );
    assert_eq!(l.verdict, Verdict::Ok);
    let l = runtime("unix:///nope.sock", Err("connection refused".into()));
    assert_eq!(l.verdict, Verdict::Fail);
    assert_eq!(
        l.detail,
        "unix:///nope.sock does not answer CRI Version: connection refused"
    );
}

#[test]
fn disks_fail_under_a_hard_threshold_and_warn_under_a_soft_one() {
    let thresholds = [
        threshold(
            Signal::NodeFsAvailable,
            EvictionThreshold::Percentage(10.0),
            true,
        ),
        threshold(
            Signal::NodeFsAvailable,
            EvictionThreshold::Percentage(20.0),
            false,
        ),
        threshold(
            Signal::NodeFsInodesFree,
            EvictionThreshold::Percentage(5.0),
            true,
        ),
        threshold(
            Signal::ImageFsAvailable,
            EvictionThreshold::Quantity(GI),
            true,
        ),
    ];
    let fs = |available_bytes, inodes_free| FsStat {
        available_bytes,
        capacity_bytes: 10 * GI,
        inodes_free,
        inodes: 1000,
    };
    let l = filesystem(
        "nodefs",
        "/var/lib/kubelet",
        Ok(fs(5 * GI, 500)),
        &thresholds,
    );
    assert_eq!(l.verdict, Verdict::Ok);
    assert_eq!(
        l.detail,
        "/var/lib/kubelet: 5Gi free of 10Gi, 500 of 1000 inodes free"
    );
    let l = filesystem("nodefs", "/r", Ok(fs(GI + GI / 2, 500)), &thresholds);
    assert_eq!(l.verdict, Verdict::Warn);
    assert!(
        l.detail
            .contains("nodefs.available 1.5Gi is under the soft eviction threshold 20% (2Gi)"),
        "{}",
        l.detail
    );
    let l = filesystem("nodefs", "/r", Ok(fs(5 * GI, 10)), &thresholds);
    assert_eq!(l.verdict, Verdict::Fail);
    assert!(
        l.detail.contains("nodefs.inodesFree 10 inodes"),
        "{}",
        l.detail
    );
    let l = filesystem(
        "imagefs",
        "/var/lib/containerd",
        Ok(fs(GI / 2, 500)),
        &thresholds,
    );
    assert_eq!(l.verdict, Verdict::Fail, "imagefs has its own signals");
    let l = filesystem("nodefs", "/r", Err("permission denied".into()), &thresholds);
    assert_eq!(l.verdict, Verdict::Fail);
}

#[test]
fn a_clock_before_the_build_year_fails_and_an_unsynchronised_one_warns() {
    let built = NOW - 30 * 86_400;
    assert_eq!(clock(NOW, built, Some(true)).verdict, Verdict::Ok);
    assert_eq!(clock(NOW, built, None).verdict, Verdict::Ok);
    let l = clock(0, built, Some(true));
    assert_eq!(l.verdict, Verdict::Fail);
    assert!(
        l.detail
            .starts_with("Thu, 01 Jan 1970 00:00:00 +0000 is before this build (2026)"),
        "{}",
        l.detail
    );
    assert_eq!(clock(NOW, built, Some(false)).verdict, Verdict::Warn);
    assert_eq!(
        clock(built - 86_400, built, Some(true)).verdict,
        Verdict::Ok,
        "the build's own year is fine"
    );
}

/// What `run` makes of the manifest `text` at `path`.
fn outcome(path: &str, text: &str) -> (PathBuf, Outcome) {
    let path = PathBuf::from(path);
    let outcome = crate::source::file::parse_manifest_with_unknown_fields(text, &path, "edge-1")
        .map(|(_, unknown)| unknown);
    (path, outcome)
}

const VALID: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: nginx\n";

#[test]
fn an_unreadable_manifest_directory_fails_and_an_unset_one_is_fine() {
    let l = manifests(
        Some("/m"),
        Err("No such file or directory (os error 2)".into()),
    );
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].verdict, Verdict::Fail);
    assert_eq!(
        l[0].detail,
        "staticPodPath /m: No such file or directory (os error 2)"
    );
    assert_eq!(manifests(None, Ok(Vec::new()))[0].verdict, Verdict::Ok);
}

#[test]
fn each_manifest_run_would_skip_fails_naming_its_file_and_field() {
    let files = vec![
        outcome("/m/a.yaml", VALID),
        outcome("/m/b.yaml", &VALID.replace("    image: nginx\n", "")),
        outcome("/m/c.yaml", "kind: Pod\napiVersion: v1\nmetadata: [\n"),
        outcome(
            "/m/d.yaml",
            &VALID.replace("    image: nginx\n", "    image: nginx\n    comand: [sh]\n"),
        ),
    ];
    let l = manifests(Some("/m"), Ok(files));
    let shown: Vec<(Verdict, &str)> = l.iter().map(|l| (l.verdict, l.what)).collect();
    assert_eq!(
        shown,
        [
            (Verdict::Fail, "static pods"),
            (Verdict::Fail, "static pods"),
            (Verdict::Warn, "static pod field"),
            (Verdict::Ok, "static pods"),
        ]
    );
    assert!(
        l[0].detail
            .starts_with("manifest /m/b.yaml is invalid: spec.containers[0].image"),
        "{}",
        l[0].detail
    );
    assert!(
        l[1].detail.starts_with("cannot decode manifest /m/c.yaml"),
        "{}",
        l[1].detail
    );
    assert_eq!(
        l[2].detail,
        "manifest /m/d.yaml line 9: unknown field \"spec.containers[0].comand\" (typo?); ignoring it"
    );
    assert_eq!(l[3].detail, "/m: 2 of 4 manifests valid");
    assert!(failed(&l));
    let l = manifests(Some("/m"), Ok(vec![outcome("/m/e.yaml", "")]));
    assert_eq!(l.len(), 1, "no ok line when nothing is valid: {l:?}");
    assert_eq!(
        manifests(Some("/m"), Ok(Vec::new()))[0].detail,
        "/m: 0 of 0 manifests valid"
    );
}

fn unknown(field: &str, line: Option<usize>) -> UnknownField {
    UnknownField {
        origin: PathBuf::from("/etc/picolet/config.yaml"),
        field: field.into(),
        line,
    }
}

#[test]
fn a_typo_in_the_config_fails_with_the_field_it_likely_means_in_file_order() {
    let l = config_fields(
        "/etc/picolet/config.yaml",
        &[
            unknown("featureGates", Some(4)),
            unknown("nothingLikeAnyField", None),
            unknown("staticPodPth", Some(3)),
        ],
    );
    assert_eq!(l[0].verdict, Verdict::Fail);
    assert_eq!(
        l[0].detail,
        "/etc/picolet/config.yaml line 3: unknown field \"staticPodPth\"; did you mean \"staticPodPath\"?"
    );
    assert_eq!(l[1].verdict, Verdict::Warn, "{}", l[1].detail);
    assert_eq!(
        l[2].detail,
        "/etc/picolet/config.yaml: unknown field \"nothingLikeAnyField\""
    );
    let l = config_fields("/c.yaml", &[]);
    assert_eq!((l.len(), l[0].verdict), (1, Verdict::Ok));
}

#[test]
fn a_missing_cni_config_warns_for_containerd_and_cri_o_and_fails_for_another_runtime() {
    let some = |names: &[&str]| Ok(names.iter().map(|n| n.to_string()).collect());
    let l = cni(
        "/etc/cni/net.d",
        some(&["10-flannel.conflist", ".hidden.conf", "README"]),
        Some("containerd"),
    );
    assert_eq!(l.verdict, Verdict::Ok);
    assert_eq!(l.detail, "/etc/cni/net.d: 10-flannel.conflist");
    assert_eq!(
        cni("/d", some(&["README"]), Some("cri-o")).verdict,
        Verdict::Warn
    );
    assert_eq!(
        cni("/d", some(&[]), Some("containerd")).verdict,
        Verdict::Warn
    );
    assert_eq!(
        cni("/d", Err("No such file".into()), None).verdict,
        Verdict::Warn
    );
    assert_eq!(cni("/d", some(&[]), Some("other")).verdict, Verdict::Fail);
}

#[test]
fn the_api_server_line_names_the_reviewed_user_and_a_dead_server_fails() {
    let body = br#"{"kind":"SelfSubjectReview","status":{"userInfo":{"username":"system:node:edge-1","groups":["system:nodes","system:authenticated"]}}}"#;
    let (name, groups) = parse_review(body).unwrap();
    let l = api_server("https://10.0.0.1:6443", Review::User { name, groups });
    assert_eq!(l.verdict, Verdict::Ok);
    assert_eq!(
        l.detail,
        "https://10.0.0.1:6443: credentials accepted as system:node:edge-1 (groups system:nodes, system:authenticated)"
    );
    assert!(parse_review(b"{}").is_err());
    let l = api_server(
        "https://s",
        Review::Refused {
            code: 401,
            message: "Unauthorized".into(),
        },
    );
    assert_eq!(l.verdict, Verdict::Fail);
    assert!(l.detail.contains("credentials refused"), "{}", l.detail);
    let l = api_server(
        "https://s",
        Review::Unreachable("connection refused".into()),
    );
    assert_eq!(l.verdict, Verdict::Fail);
    assert_eq!(l.detail, "https://s: unreachable: connection refused");
}

#[test]
fn the_node_api_certificate_must_be_readable_or_bootstrapped_with_a_kubeconfig() {
    assert_eq!(serving_certificate(0, Serving::Off).verdict, Verdict::Ok);
    let files = Serving::Files(vec![
        ("/c.crt".into(), Ok(())),
        ("/c.key".into(), Err("Permission denied".into())),
    ]);
    let l = serving_certificate(10250, files);
    assert_eq!(l.verdict, Verdict::Fail);
    assert_eq!(l.detail, "port 10250: /c.key: Permission denied");
    let bootstrap = |kubeconfig| Serving::Bootstrap {
        kubeconfig,
        issued: None,
    };
    assert_eq!(
        serving_certificate(10250, bootstrap(true)).verdict,
        Verdict::Ok
    );
    assert_eq!(
        serving_certificate(10250, bootstrap(false)).verdict,
        Verdict::Fail
    );
    assert_eq!(
        serving_certificate(10250, Serving::SelfSigned("/p/kubelet.crt".into())).verdict,
        Verdict::Warn
    );
}
#[test]
fn swap_on_without_limited_swap_warns() {
    assert_eq!(swap(0, false).verdict, Verdict::Ok);
    assert_eq!(swap(GI, true).verdict, Verdict::Ok);
    let l = swap(GI, false);
    assert_eq!(l.verdict, Verdict::Warn);
    assert!(l.detail.contains("failSwapOn"), "{}", l.detail);
}

#[test]
fn an_expired_certificate_fails_and_one_expiring_this_week_warns() {
    let day = 86_400;
    assert_eq!(
        certificate("/k", Some(Ok(NOW + 300 * day)), NOW).verdict,
        Verdict::Ok
    );
    assert_eq!(
        certificate("/k", Some(Ok(NOW + 2 * day)), NOW).verdict,
        Verdict::Warn
    );
    let l = certificate("/k", Some(Ok(NOW - day)), NOW);
    assert_eq!(l.verdict, Verdict::Fail);
    assert_eq!(l.detail, "/k: expired Mon, 30 Nov 2026 10:04:55 +0000");
    assert_eq!(
        certificate("/k", Some(Err("bad PEM".into())), NOW).verdict,
        Verdict::Fail
    );
    assert_eq!(certificate("/k", None, NOW).verdict, Verdict::Ok);
}

#[test]
fn the_report_has_one_aligned_line_per_check_and_fails_if_any_fails() {
    let lines = vec![
        line("kernel", Verdict::Ok, "6.1.0"),
        line("container runtime", Verdict::Fail, "down"),
    ];
    assert_eq!(
        render(&lines, Style::PLAIN),
        "ok    kernel             6.1.0\nfail  container runtime  down\n"
    );
    assert!(failed(&lines));
    assert!(!failed(&lines[..1]));
    assert_eq!(exit_code(&lines), 1);
    assert_eq!(exit_code(&lines[..1]), 0);
    let warned = [line("swap", Verdict::Warn, "on")];
    assert_eq!(exit_code(&warned), 0, "a warning is not a failure");
    assert_eq!(bytes(1536), "1.5Ki");
    assert_eq!(bytes(100), "100");
}

#[test]
fn the_json_document_holds_the_same_lines_and_ok_false_when_one_fails() {
    let lines = vec![
        line("kernel", Verdict::Ok, "6.1.0"),
        line("config", Verdict::Fail, "unknown field"),
    ];
    assert_eq!(
        document(&lines),
        serde_json::json!({
            "ok": false,
            "checks": [
                {"check": "kernel", "verdict": "ok", "detail": "6.1.0"},
                {"check": "config", "verdict": "fail", "detail": "unknown field"},
            ]
        })
    );
    assert_eq!(document(&lines[..1])["ok"], true);
}
