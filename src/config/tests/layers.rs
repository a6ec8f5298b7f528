//! Config tests: resolving the layers (board, file, flags) and the rules
//! across them.

use super::*;

#[test]
fn resolve_layers_the_board_then_the_file_then_the_flags() {
    let file = doc("maxPods: 20\ncontainerLogMaxFiles: 4\n");
    let loaded = resolve(
        Some((Path::new(ORIGIN), &file)),
        &flags(&[("board", "rpi4"), ("container-log-max-files", "3")]),
    )
    .unwrap();
    let c = loaded.config;
    assert_eq!(c.board.as_deref(), Some("rpi4"));
    assert_eq!(c.container_log_max_size, 2 * 1024 * 1024, "from the board");
    assert_eq!(c.max_pods, 20, "the file over the board");
    assert_eq!(c.container_log_max_files, 3, "the flag over the file");
    assert!(loaded.unknown_fields.is_empty());
}

#[test]
fn resolve_without_a_board_or_a_file_is_the_defaults_plus_the_flags() {
    let loaded = resolve(
        None,
        &flags(&[("max-pods", "12"), ("sync-frequency", "30s")]),
    )
    .unwrap();
    assert_eq!(loaded.config.max_pods, 12);
    assert_eq!(loaded.config.sync_frequency, Duration::from_secs(30));
    assert_eq!(
        KubeletConfig {
            max_pods: 110,
            sync_frequency: Duration::from_secs(60),
            ..loaded.config
        },
        KubeletConfig::default()
    );
}

#[test]
fn an_unknown_board_is_an_error_listing_the_known_ones() {
    let e = resolve(None, &flags(&[("board", "rpi9")]))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(r#"flag --board: unknown board "rpi9"; known boards: rpi4, "#),
        "{e}"
    );
}

#[test]
fn cross_field_rules_apply_to_the_merged_layers_not_to_each_layer() {
    let board = doc("imageGCHighThresholdPercent: 70\nimageGCLowThresholdPercent: 60\n");
    let file = doc("imageGCHighThresholdPercent: 90\n");
    let c = from_layers(&[(&board, Path::new("board:x")), (&file, Path::new(ORIGIN))])
        .unwrap()
        .config;
    assert_eq!(
        (
            c.image_gc_low_threshold_percent,
            c.image_gc_high_threshold_percent
        ),
        (60, 90)
    );
}

#[test]
fn unknown_fields_name_the_layer_that_set_them_and_read_as_warnings() {
    let board = doc("featureGates: {A: true}\n");
    let file = doc("maxPodz: 3\n");
    let loaded =
        from_layers(&[(&board, Path::new("board:x")), (&file, Path::new(ORIGIN))]).unwrap();
    let warnings: Vec<String> = loaded
        .unknown_fields
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        warnings,
        [
            r#"board:x: kubelet field "featureGates" is not implemented by picolet; ignoring it"#,
            r#"/etc/picolet/config.yaml line 3: unknown field "maxPodz" (typo?); ignoring it"#,
        ]
    );
}

#[test]
fn flag_only_settings_are_unknown_fields_in_a_file() {
    let loaded = parse_ok("rootDir: /x\nadminSocket: /y\n");
    assert_eq!(unknown_names(&loaded), ["adminSocket", "rootDir"]);
    assert_eq!(loaded.config, KubeletConfig::default());
}

#[test]
fn a_known_mapping_given_as_something_else_names_the_nested_field() {
    let e = parse_err("authentication:\n  webhook: 3\n");
    assert!(
        e.contains(r#"field "authentication.webhook": expected a mapping, got 3"#),
        "{e}"
    );
    let e = parse_err("logging: on\n");
    assert!(e.contains(r#"field "logging": expected a mapping"#), "{e}");
}

#[test]
fn every_file_field_picolet_reads_is_a_kubelet_field() {
    for f in super::fields::FIELDS.iter().filter(|f| f.in_file) {
        assert!(is_upstream_field(f.key), "{}", f.key);
    }
}
