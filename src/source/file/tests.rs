//! Tests of static pod manifest parsing and of the manifest directory:
//! the kubelet's static pod rules, hostile files, the scan budget.

use super::*;

const NODE: &str = "edge-1";

const NGINX: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: nginx
    image: nginx:1.27
";

fn parse(text: &str) -> Result<Pod, ManifestError> {
    parse_manifest(text, Path::new("/etc/picolet/manifests/web.yaml"), NODE)
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap()
}

#[test]
fn a_static_pod_is_renamed_bound_and_annotated_like_the_kubelet_does() {
    let pod = parse(NGINX).unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("web-edge-1"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(NODE));
    let a = pod.metadata.annotations.as_ref().unwrap();
    assert_eq!(a[CONFIG_SOURCE_ANNOTATION], "file");
    assert_eq!(a[CONFIG_HASH_ANNOTATION], uid(&pod));
    assert_eq!(uid(&pod).len(), 32, "hex md5");
    assert_eq!(
        pod.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );
}

#[test]
fn a_static_pod_tolerates_every_no_execute_taint_once() {
    let pod = parse(NGINX).unwrap();
    let tolerations = pod.spec.unwrap().tolerations.unwrap();
    assert_eq!(tolerations.len(), 1);
    assert_eq!(tolerations[0].operator.as_deref(), Some("Exists"));
    assert_eq!(tolerations[0].effect.as_deref(), Some("NoExecute"));
    assert_eq!(tolerations[0].key, None);

    let with_same = format!(
            "{NGINX}  tolerations:\n  - operator: Exists\n    effect: NoExecute\n    tolerationSeconds: 5\n"
        );
    let tolerations = parse(&with_same)
        .unwrap()
        .spec
        .unwrap()
        .tolerations
        .unwrap();
    assert_eq!(tolerations.len(), 1, "an identical toleration is replaced");
    assert_eq!(tolerations[0].toleration_seconds, None);
}

#[test]
fn api_defaults_are_applied() {
    let pod = parse(NGINX).unwrap();
    let spec = pod.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(
        spec.containers[0].image_pull_policy.as_deref(),
        Some("IfNotPresent")
    );
}

#[test]
fn an_explicit_namespace_and_uid_are_kept() {
    let text = NGINX.replace(
        "  name: web\n",
        "  name: web\n  namespace: kube-system\n  uid: 1234-abcd\n",
    );
    let pod = parse(&text).unwrap();
    assert_eq!(pod.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(uid(&pod), "1234-abcd");
    assert_eq!(
        pod.metadata.annotations.unwrap()[CONFIG_HASH_ANNOTATION],
        "1234-abcd"
    );
}

#[test]
fn the_same_manifest_gives_the_same_uid_every_time() {
    assert_eq!(uid(&parse(NGINX).unwrap()), uid(&parse(NGINX).unwrap()));
    // Formatting and comments are not content.
    let reformatted = format!(
        "# the web server\n{}",
        NGINX.replace("kind: Pod", "kind:   Pod")
    );
    assert_eq!(
        uid(&parse(NGINX).unwrap()),
        uid(&parse(&reformatted).unwrap())
    );
}

#[test]
fn editing_a_manifest_changes_the_pod_uid() {
    let edited = NGINX.replace("nginx:1.27", "nginx:1.28");
    assert_ne!(uid(&parse(NGINX).unwrap()), uid(&parse(&edited).unwrap()));
}

#[test]
fn the_uid_depends_on_the_node_and_the_file() {
    let here = parse(NGINX).unwrap();
    let other_node = parse_manifest(NGINX, Path::new("/etc/picolet/manifests/web.yaml"), "n2");
    let other_file = parse_manifest(NGINX, Path::new("/etc/picolet/manifests/w.yaml"), NODE);
    assert_ne!(uid(&here), uid(&other_node.unwrap()));
    assert_ne!(uid(&here), uid(&other_file.unwrap()));
}

#[test]
fn json_manifests_are_accepted_and_hash_like_the_same_yaml() {
    let json = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}"#;
    let pod = parse(json).unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("web-edge-1"));
    assert_eq!(uid(&pod), uid(&parse(NGINX).unwrap()));
}

#[test]
fn a_yaml_flow_mapping_is_not_mistaken_for_json() {
    let flow = "{apiVersion: v1, kind: Pod, metadata: {name: web},
            spec: {containers: [{name: nginx, image: 'nginx:1.27'}]}}";
    assert_eq!(uid(&parse(flow).unwrap()), uid(&parse(NGINX).unwrap()));
}

#[test]
fn a_multi_document_file_is_rejected_with_its_name() {
    let text = format!("{NGINX}---\n{}", NGINX.replace("web", "db"));
    let err = parse(&text).unwrap_err();
    assert!(
        matches!(err, ManifestError::MultipleDocuments { count: 2, .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("/etc/picolet/manifests/web.yaml"), "{msg}");
    assert!(msg.contains("2 YAML documents"), "{msg}");
}

#[test]
fn empty_documents_around_the_pod_are_ignored() {
    let text = format!("---\n{NGINX}---\n");
    assert!(parse(&text).is_ok());
}

#[test]
fn an_empty_file_is_rejected() {
    assert!(matches!(
        parse("# nothing\n").unwrap_err(),
        ManifestError::Empty { .. }
    ));
    assert!(matches!(
        parse("").unwrap_err(),
        ManifestError::Empty { .. }
    ));
}

#[test]
fn a_yaml_syntax_error_reports_line_and_column() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n   labels: {a: b}\n";
    let err = parse(text).unwrap_err();
    assert!(
        matches!(err, ManifestError::Decode { format: "YAML", .. }),
        "{err:?}"
    );
    let (line, _column) = err.location().expect("a location");
    assert_eq!(line, 5, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("web.yaml"), "{msg}");
    assert!(msg.contains("line 5"), "{msg}");
}

#[test]
fn a_type_error_reports_line_and_column() {
    let text = NGINX.replace("  - name: nginx\n    image: nginx:1.27\n", "    nope\n");
    let err = parse(&text).unwrap_err();
    let (line, column) = err.location().expect("a location");
    assert_eq!((line, column), (7, 5), "{err}");
    assert!(err.to_string().contains("web.yaml"));
}

#[test]
fn a_json_syntax_error_reports_line_and_column() {
    let err = parse("{\"apiVersion\": \"v1\",\n  \"kind\": }").unwrap_err();
    assert!(
        matches!(err, ManifestError::Decode { format: "JSON", .. }),
        "{err:?}"
    );
    assert_eq!(err.location().map(|(l, _)| l), Some(2), "{err}");
}

#[test]
fn only_v1_pods_are_accepted() {
    let deployment = NGINX.replace("kind: Pod", "kind: Deployment");
    let err = parse(&deployment).unwrap_err();
    assert!(matches!(err, ManifestError::NotAPod { .. }), "{err:?}");
    assert!(err.to_string().contains("\"Deployment\""), "{err}");
    let v2 = NGINX.replace("apiVersion: v1", "apiVersion: v2");
    assert!(matches!(
        parse(&v2).unwrap_err(),
        ManifestError::NotAPod { .. }
    ));
    let no_kind = NGINX.replace("kind: Pod\n", "");
    assert!(matches!(
        parse(&no_kind).unwrap_err(),
        ManifestError::NotAPod { .. }
    ));
}

#[test]
fn a_pod_needs_a_valid_name() {
    let unnamed = NGINX.replace("  name: web\n", "  labels: {a: b}\n");
    let err = parse(&unnamed).unwrap_err();
    assert_eq!(
            err.to_string(),
            "manifest /etc/picolet/manifests/web.yaml is invalid: metadata.name: Required value: name or generateName is required"
        );
    let bad = NGINX.replace("name: web", "name: Web_Server");
    let err = parse(&bad).unwrap_err();
    assert!(matches!(err, ManifestError::Validation { .. }), "{err:?}");
    assert!(
        err.to_string().contains(
            "metadata.name: Invalid value: \"Web_Server-edge-1\": a lowercase RFC 1123 subdomain"
        ),
        "{err}"
    );
    let dotted = NGINX.replace("name: web", "name: web.edge");
    assert!(parse(&dotted).is_ok(), "a DNS subdomain may contain dots");
}

#[test]
fn a_pod_needs_containers_with_images() {
    let none = NGINX.replace("  - name: nginx\n    image: nginx:1.27\n", "  []\n");
    let none = none.replace("  containers:\n  []", "  containers: []");
    assert!(parse(&none)
        .unwrap_err()
        .to_string()
        .ends_with("is invalid: spec.containers: Required value"));
    let no_image = NGINX.replace("    image: nginx:1.27\n", "");
    assert!(parse(&no_image)
        .unwrap_err()
        .to_string()
        .ends_with("is invalid: spec.containers[0].image: Required value"));
}

#[test]
fn a_static_pod_with_ephemeral_containers_is_refused_as_kubelet_refuses_it() {
    let text = NGINX.to_string() + "  ephemeralContainers:\n  - {name: debugger, image: busybox}\n";
    assert_eq!(
        parse(&text).unwrap_err().to_string(),
        "manifest /etc/picolet/manifests/web.yaml is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create"
    );
}

#[test]
fn a_pod_the_api_server_would_refuse_is_refused_with_every_field_named() {
    let text = NGINX.replace(
            "    image: nginx:1.27\n",
            "    image: nginx:1.27\n    resources:\n      limits: {memory: -1Gi, cpu: 1e400, pids: 10}\n",
        ) + "  terminationGracePeriodSeconds: -5\n";
    let err = parse(&text).unwrap_err();
    let ManifestError::Validation { errors, .. } = &err else {
        panic!("{err:?}");
    };
    let msg = err.to_string();
    assert!(
        msg.starts_with("manifest /etc/picolet/manifests/web.yaml is invalid: "),
        "{msg}"
    );
    for want in [
            "spec.terminationGracePeriodSeconds: Invalid value: -5: must be greater than or equal to 0",
            "spec.containers[0].resources.limits[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0",
            "spec.containers[0].resources.limits[cpu]: Invalid value: \"1e400\": must be less than or equal to 9223372036854775807m",
            "spec.containers[0].resources.limits[pids]: Invalid value: pids: must be a standard resource for containers",
        ] {
            assert!(errors.iter().any(|e| e.to_string() == want), "{want}\n{msg}");
        }
}

#[test]
fn a_deeply_nested_manifest_is_refused_before_it_is_parsed() {
    let deep = format!("{NGINX}a: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    assert!(deep.len() < MAX_MANIFEST_BYTES as usize);
    let err = parse(&deep).unwrap_err();
    assert!(
        matches!(
            &err,
            ManifestError::Limit {
                source: LimitError::TooDeep { .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.location().map(|(l, _)| l), Some(9));
    assert!(
            err.to_string()
                .starts_with("manifest /etc/picolet/manifests/web.yaml nests deeper than 64 levels (at line 9 column"),
            "{err}"
        );
    // Looking like JSON does not help, nor does falling back to YAML.
    let json = format!("{{\"a\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(matches!(
        parse(&json).unwrap_err(),
        ManifestError::Limit { .. }
    ));
    let flow = format!("{{a: {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(matches!(
        parse(&flow).unwrap_err(),
        ManifestError::Decode { .. } | ManifestError::Limit { .. }
    ));
}

#[test]
fn an_alias_bomb_is_refused_by_arithmetic() {
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
    let text = format!("{NGINX}{bomb}");
    let err = parse(&text).unwrap_err();
    assert!(
        err.to_string().contains("expands aliases to more than"),
        "{err}"
    );
}

#[test]
fn odd_documents_get_clear_errors() {
    for (text, want) in [
        ("- a\n- b\n", "the document is not a mapping"),
        ("just a string\n", "the document is not a mapping"),
        ("[1, 2]", "the document is not a mapping"),
        ("{\"kind\": 5, \"apiVersion\": \"v1\"}", "found kind \"\""),
        ("!!binary aGVsbG8=\n", "the document is not a mapping"),
        (
            "kind: !custom Pod\napiVersion: v1\n",
            "has a node tagged !custom, which Kubernetes objects do not use (at line 1 column 7)",
        ),
        (
            "? [a, b]\n: c\nkind: Pod\n",
            "has a mapping key that is not a scalar (at line 1 column 3)",
        ),
    ] {
        let err = parse(text).unwrap_err().to_string();
        assert!(err.contains(want), "{text:?}: {err}");
    }
}

#[test]
fn an_oversized_manifest_is_rejected() {
    let huge = format!("{NGINX}#{}\n", "x".repeat(MAX_MANIFEST_BYTES as usize));
    let err = parse(&huge).unwrap_err();
    assert!(matches!(err, ManifestError::TooLarge { .. }), "{err:?}");
    assert!(err.to_string().contains("web.yaml"));
}

#[test]
fn editor_and_hidden_files_are_ignored() {
    for name in [
        ".web.yaml",
        "web.yaml~",
        ".web.yaml.swp",
        "web.yaml.swp",
        "web.tmp",
    ] {
        assert!(is_ignored_file_name(name), "{name}");
    }
    assert!(!is_ignored_file_name("web.yaml"));
    assert!(!is_ignored_file_name("web.json"));
}

// --- ManifestDir ---------------------------------------------------------

/// A fresh directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("picolet-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    pub(crate) fn write(&self, name: &str, text: &str) {
        fs::write(self.0.join(name), text).unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn names(update: &SourceUpdate) -> Vec<String> {
    update
        .pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect()
}

fn pod_yaml(name: &str) -> String {
    NGINX.replace("name: web", &format!("name: {name}"))
}

#[test]
fn a_directory_becomes_the_set_of_its_pods_in_file_name_order() {
    let dir = TempDir::new("set");
    dir.write("b.yaml", &pod_yaml("bravo"));
    dir.write("a.yaml", &pod_yaml("alpha"));
    dir.write(".hidden.yaml", &pod_yaml("hidden"));
    dir.write("a.yaml.swp", "binary junk");
    dir.write("a.yaml~", &pod_yaml("backup"));
    fs::create_dir(dir.0.join("sub")).unwrap();
    let mut md = ManifestDir::new(&dir.0, NODE);
    let update = md.scan();
    assert_eq!(update.source, PodSource::File);
    assert_eq!(names(&update), ["alpha-edge-1", "bravo-edge-1"]);
    assert_eq!(
        md.scan(),
        update,
        "rescanning an unchanged directory gives the same set"
    );
}

#[test]
fn a_broken_manifest_does_not_hide_the_others() {
    let dir = TempDir::new("broken");
    dir.write("a.yaml", &pod_yaml("alpha"));
    dir.write("b.yaml", "apiVersion: v1\nkind: Pod\nmetadata: [\n");
    dir.write("c.json", "{\"kind\": \"Pod\"");
    dir.write("d.yaml", &pod_yaml("delta"));
    let mut md = ManifestDir::new(&dir.0, NODE);
    assert_eq!(names(&md.scan()), ["alpha-edge-1", "delta-edge-1"]);
}

#[test]
fn a_broken_manifest_is_logged_once() {
    let dir = TempDir::new("logonce");
    dir.write("broken-once.yaml", "kind: Pod\nmetadata: {name: x\n");
    let mut md = ManifestDir::new(&dir.0, NODE);
    md.scan();
    md.scan();
    md.scan();
    assert_eq!(md.reported, 1);
    let msg = &md.messages[0];
    assert!(
        msg.contains("broken-once.yaml") && msg.contains("line 3"),
        "{msg}"
    );
    // Different broken content is a new problem, logged again.
    dir.write("broken-once.yaml", "kind: Pod\nmetadata: {name: y\n");
    md.scan();
    md.scan();
    assert_eq!(md.reported, 2);
    // Fixed, then broken the same way again: logged again.
    dir.write("broken-once.yaml", &pod_yaml("fixed"));
    md.scan();
    dir.write("broken-once.yaml", "kind: Pod\nmetadata: {name: y\n");
    md.scan();
    assert_eq!(md.reported, 3);
}

#[test]
fn a_missing_directory_is_an_empty_set_with_one_warning() {
    let dir = TempDir::new("missing");
    let missing = dir.0.join("not-there");
    let mut md = ManifestDir::new(&missing, NODE);
    assert!(md.scan().pods.is_empty());
    assert!(md.scan().pods.is_empty());
    assert_eq!(md.reported, 1);
    fs::create_dir(&missing).unwrap();
    fs::write(missing.join("a.yaml"), pod_yaml("alpha")).unwrap();
    assert_eq!(
        names(&md.scan()),
        ["alpha-edge-1"],
        "the directory appearing is noticed"
    );
}

#[test]
fn the_first_file_wins_when_two_define_the_same_pod() {
    let dir = TempDir::new("dupe");
    dir.write("10-web.yaml", &pod_yaml("web"));
    dir.write(
        "20-web.yaml",
        &pod_yaml("web").replace("nginx:1.27", "nginx:1.28"),
    );
    let mut md = ManifestDir::new(&dir.0, NODE);
    let update = md.scan();
    assert_eq!(names(&update), ["web-edge-1"]);
    let image = update.pods[0].spec.as_ref().unwrap().containers[0]
        .image
        .clone();
    assert_eq!(image.as_deref(), Some("nginx:1.27"));
    md.scan();
    assert_eq!(md.reported, 1, "reported once");
    let (first, second) = (dir.0.join("10-web.yaml"), dir.0.join("20-web.yaml"));
    let msg = &md.messages[0];
    assert!(msg.contains(&first.display().to_string()), "{msg}");
    assert!(msg.contains(&second.display().to_string()), "{msg}");
}

#[test]
fn an_oversized_file_is_skipped_without_being_read() {
    let dir = TempDir::new("huge");
    dir.write("a.yaml", &pod_yaml("alpha"));
    let f = fs::File::create(dir.0.join("core")).unwrap();
    f.set_len(MAX_MANIFEST_BYTES + 1).unwrap();
    let mut md = ManifestDir::new(&dir.0, NODE);
    assert_eq!(names(&md.scan()), ["alpha-edge-1"]);
}

#[test]
fn a_single_file_path_is_a_one_pod_source() {
    let dir = TempDir::new("single");
    dir.write("only.yaml", &pod_yaml("only"));
    let mut md = ManifestDir::new(dir.0.join("only.yaml"), NODE);
    assert_eq!(names(&md.scan()), ["only-edge-1"]);
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

#[test]
fn a_fifo_is_refused_without_blocking_even_behind_a_symlink() {
    let dir = TempDir::new("fifo");
    let fifo = dir.0.join("pipe.yaml");
    mkfifo(&fifo);
    // Nobody writes to it: a blocking open would hang this test.
    let err = read_limited(&fifo).unwrap_err();
    assert!(matches!(err, ManifestError::NotAFile { .. }), "{err:?}");
    assert!(err.to_string().ends_with("pipe.yaml is not a regular file"));
    std::os::unix::fs::symlink(&fifo, dir.0.join("link.yaml")).unwrap();
    assert!(matches!(
        read_limited(&dir.0.join("link.yaml")),
        Err(ManifestError::NotAFile { .. })
    ));
    dir.write("a.yaml", &pod_yaml("alpha"));
    std::os::unix::fs::symlink("/dev/null", dir.0.join("null.yaml")).unwrap();
    let mut md = ManifestDir::new(&dir.0, NODE);
    assert_eq!(names(&md.scan()), ["alpha-edge-1"]);
    md.scan();
    let special: Vec<&String> = md
        .messages
        .iter()
        .filter(|m| m.contains("is not a regular file; skipping it"))
        .collect();
    assert_eq!(
        special.len(),
        3,
        "the FIFO and both links, once each: {:?}",
        md.messages
    );
}

#[test]
fn binary_garbage_is_not_text() {
    let dir = TempDir::new("garbage");
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    fs::write(dir.0.join("garbage.yaml"), garbage).unwrap();
    dir.write("a.yaml", &pod_yaml("alpha"));
    let mut md = ManifestDir::new(&dir.0, NODE);
    assert_eq!(names(&md.scan()), ["alpha-edge-1"]);
    assert!(
        md.messages[0].ends_with("garbage.yaml is not UTF-8 text; skipping it"),
        "{:?}",
        md.messages
    );
}

#[test]
fn one_scan_parses_a_bounded_amount_and_leaves_the_rest_for_the_next() {
    let dir = TempDir::new("budget");
    // Five valid pods of ~100 KiB each (a big annotation).
    let big = |name: &str| {
        pod_yaml(name).replace(
            "  name: ",
            &format!(
                "  annotations:\n    note: \"{}\"\n  name: ",
                "x".repeat(100 * 1024)
            ),
        )
    };
    for n in ["a", "b", "c", "d", "e"] {
        dir.write(&format!("{n}.yaml"), &big(n));
    }
    let mut md = ManifestDir::new(&dir.0, NODE);
    let first = md.scan();
    assert_eq!(names(&first), ["a-edge-1", "b-edge-1"]);
    assert!(md.has_deferred());
    md.scan();
    let third = md.scan();
    assert_eq!(
        names(&third),
        ["a-edge-1", "b-edge-1", "c-edge-1", "d-edge-1", "e-edge-1"]
    );
    assert!(!md.has_deferred());
    // A changed file waiting for its turn keeps its previous pod.
    for n in ["a", "b", "c"] {
        dir.write(
            &format!("{n}.yaml"),
            &big(n).replace("nginx:1.27", "nginx:1.28"),
        );
    }
    let update = md.scan();
    assert!(md.has_deferred());
    assert_eq!(update.pods.len(), 5);
    let image = |u: &SourceUpdate, i: usize| {
        u.pods[i].spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap()
    };
    assert_eq!(image(&update, 0), "nginx:1.28");
    assert_eq!(
        image(&update, 2),
        "nginx:1.27",
        "c waits, still defined by its old content"
    );
    let update = md.scan();
    assert_eq!(image(&update, 2), "nginx:1.28");
    assert!(
        md.messages.is_empty(),
        "deferring is not a problem: {:?}",
        md.messages
    );
}

#[test]
fn a_new_manifest_with_a_running_pods_name_never_displaces_it() {
    let dir = TempDir::new("samename");
    dir.write("m.yaml", &pod_yaml("web"));
    let mut md = ManifestDir::new(&dir.0, NODE);
    let first = md.scan();
    let established = uid(&first.pods[0]);
    // A newcomer that sorts first, with the same pod name and other content.
    dir.write(
        "a.yaml",
        &pod_yaml("web").replace("image: nginx:1.27", "image: nginx:1.28"),
    );
    let update = md.scan();
    assert_eq!(update.pods.len(), 1);
    assert_eq!(uid(&update.pods[0]), established, "the running pod stays");
    let msg = md.messages.last().expect("the clash is logged");
    assert!(
        msg.contains("a.yaml")
            && msg.contains("m.yaml")
            && msg.contains("ignoring")
            && msg.ends_with("a.yaml"),
        "{msg}"
    );
    // Between two newcomers (a fresh start), the first file by name wins.
    let mut fresh = ManifestDir::new(&dir.0, NODE);
    let update = fresh.scan();
    assert_ne!(uid(&update.pods[0]), established);
}

#[test]
fn each_unknown_field_of_a_manifest_is_warned_once_with_its_line_and_the_pod_still_runs() {
    let dir = TempDir::new("unknown");
    dir.write(
        "web.yaml",
        "apiVersion: v1\n\
         kind: Pod\n\
         metadata:\n  \
           name: web\n  \
           creationTimestamp: null\n\
         spec:\n  \
           containers:\n  \
           - name: nginx\n    \
             image: nginx:1.27\n    \
             comand: [sh]\n    \
             securityContext: {runAsUsr: 1}\n  \
           restartPolcy: Never\n",
    );
    let mut md = ManifestDir::new(&dir.0, NODE);
    assert_eq!(names(&md.scan()), ["web-edge-1"]);
    md.scan();
    let file = dir.0.join("web.yaml");
    let file = file.display();
    assert_eq!(
        md.messages,
        [
            format!("manifest {file} line 10: unknown field \"spec.containers[0].comand\" (typo?); ignoring it"),
            format!("manifest {file} line 11: unknown field \"spec.containers[0].securityContext.runAsUsr\" (typo?); ignoring it"),
            format!("manifest {file} line 12: unknown field \"spec.restartPolcy\" (typo?); ignoring it"),
        ]
    );

    // JSON: the same fields, on the JSON file's lines.
    let json = "{\"apiVersion\": \"v1\", \"kind\": \"Pod\",\n\
                \"metadata\": {\"name\": \"web\"},\n\
                \"spec\": {\"containers\": [{\"name\": \"a\", \"image\": \"i\",\n\
                \"comand\": [\"sh\"]}]}}";
    let (pod, unknown) =
        parse_manifest_with_unknown_fields(json, Path::new("/m/web.json"), NODE).unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("web-edge-1"));
    let found: Vec<_> = unknown.iter().map(|u| (u.line, u.field.as_str())).collect();
    assert_eq!(found, [(Some(4), "spec.containers[0].comand")]);
    // A manifest without unknown fields has none.
    let (_, unknown) =
        parse_manifest_with_unknown_fields(NGINX, Path::new("/m/a.yaml"), NODE).unwrap();
    assert!(unknown.is_empty(), "{unknown:?}");
}
