//! Config tests: the document: kind and apiVersion, empty files, YAML and
//! JSON and their syntax errors.

use super::*;

#[test]
fn a_wrong_kind_or_api_version_is_a_clear_error() {
    let e = parse("apiVersion: v1\nkind: Pod\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        r#"/etc/picolet/config.yaml: field "kind": expected "KubeletConfiguration", got "Pod" (is this a KubeletConfiguration file?)"#
    );
    let e = parse("apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains(r#"field "apiVersion": expected "kubelet.config.k8s.io/v1beta1", got "kubelet.config.k8s.io/v1""#), "{e}");
    let e = parse("kind: KubeletConfiguration\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains(r#"field "apiVersion": missing"#), "{e}");
}

#[test]
fn an_empty_file_or_a_non_mapping_is_rejected() {
    assert!(parse("")
        .unwrap_err()
        .to_string()
        .contains("the file is empty"));
    assert!(parse("- a\n- b\n")
        .unwrap_err()
        .to_string()
        .contains("got a list"));
}

#[test]
fn yaml_syntax_errors_carry_the_file_line_and_column() {
    let err = parse(&doc("maxPods: 3\n  bad: [\n")).unwrap_err();
    match &err {
        ConfigError::Syntax {
            path,
            format,
            line,
            column,
            ..
        } => {
            assert_eq!(path, Path::new(ORIGIN));
            assert_eq!(*format, "YAML");
            assert_eq!(*line, Some(4));
            assert!(column.is_some());
        }
        other => panic!("unexpected error {other:?}"),
    }
    let text = err.to_string();
    assert!(text.starts_with("/etc/picolet/config.yaml:4:"), "{text}");
    assert!(text.contains("invalid YAML"), "{text}");
}

#[test]
fn a_json_file_is_parsed() {
    let text = r#"{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                   "maxPods": 7, "evictionHard": {"memory.available": "1Gi"}, "bogus": 1}"#;
    let loaded = from_str(text, Path::new("/etc/picolet/config.json")).unwrap();
    assert_eq!(loaded.config.max_pods, 7);
    assert_eq!(
        loaded.config.eviction_hard["memory.available"],
        EvictionThreshold::Quantity(1 << 30)
    );
    assert_eq!(unknown_names(&loaded), vec!["bogus"]);
}

#[test]
fn json_syntax_errors_carry_the_file_line_and_column() {
    let err = from_str("{\n  \"maxPods\": 3,\n  oops\n}", Path::new("/c.json")).unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("/c.json:3:"), "{text}");
    assert!(text.contains("invalid JSON"), "{text}");
    assert!(!text.contains("at line"), "position given twice: {text}");
}
