//! Tests of [`super`] (kubeconfig.rs).

use super::*;

const PATH: &str = "/etc/picolet/kubelet.conf";

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn config(cluster: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: node\n\
         contexts:\n- name: other\n  context: {{cluster: nope, user: nope}}\n\
         - name: node\n  context: {{cluster: local, user: system:node:pi}}\n\
         clusters:\n- name: local\n  cluster:\n{cluster}\
         users:\n- name: someone\n  user: {{token: abc}}\n- name: system:node:pi\n  user:\n{user}"
    )
}

fn parse_ok(text: &str) -> Kubeconfig {
    parse(text, Path::new(PATH), false).unwrap()
}

fn parse_err(text: &str, allow_insecure: bool) -> String {
    parse(text, Path::new(PATH), allow_insecure)
        .unwrap_err()
        .to_string()
}

#[test]
fn a_kubeadm_style_kubeconfig_resolves_the_current_context() {
    let text = config(
        &format!(
            "    server: https://10.0.0.1:6443\n    certificate-authority-data: {}\n",
            b64("CA PEM")
        ),
        &format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64("CERT"),
            b64("KEY")
        ),
    );
    let k = parse_ok(&text);
    assert_eq!(k.context, "node");
    assert_eq!(k.server.host, "10.0.0.1");
    assert_eq!(k.server.port, 6443);
    assert_eq!(k.server.base_path, "");
    assert_eq!(
        k.certificate_authority.unwrap().source,
        Source::Data(b"CA PEM".to_vec())
    );
    let cert = k.client_certificate.unwrap();
    assert_eq!(cert.field, "users[1].user.client-certificate-data");
    assert_eq!(cert.source, Source::Data(b"CERT".to_vec()));
    assert_eq!(k.client_key.unwrap().source, Source::Data(b"KEY".to_vec()));
    assert!(k.token.is_none());
    assert!(!k.insecure_skip_tls_verify);
}

#[test]
fn relative_files_resolve_against_the_kubeconfig_directory() {
    let text = config(
        "    server: https://api.example:443/prefix/\n    certificate-authority: pki/ca.crt\n",
        "    client-certificate: /var/lib/picolet/pki/client.pem\n    client-key: key.pem\n    tokenFile: tok\n",
    );
    let k = parse_ok(&text);
    assert_eq!(k.server.base_path, "/prefix");
    assert_eq!(
        k.certificate_authority.unwrap().source,
        Source::File(PathBuf::from("/etc/picolet/pki/ca.crt"))
    );
    assert_eq!(
        k.client_certificate.unwrap().source,
        Source::File(PathBuf::from("/var/lib/picolet/pki/client.pem"))
    );
    assert_eq!(
        k.client_key.unwrap().source,
        Source::File(PathBuf::from("/etc/picolet/key.pem"))
    );
    let t = k.token.unwrap();
    assert_eq!(t.field, "users[1].user.tokenFile");
    assert_eq!(t.source, Source::File(PathBuf::from("/etc/picolet/tok")));
}

#[test]
fn a_token_file_takes_precedence_over_an_inline_token() {
    let text = config(
        "    server: https://h\n    certificate-authority: ca\n",
        "    token: inline\n    tokenFile: /run/token\n",
    );
    let k = parse_ok(&text);
    assert_eq!(
        k.token.unwrap().source,
        Source::File(PathBuf::from("/run/token"))
    );
    let text = config(
        "    server: https://h\n    certificate-authority: ca\n",
        "    token: inline\n",
    );
    assert_eq!(
        parse_ok(&text).token.unwrap().source,
        Source::Data(b"inline".to_vec())
    );
}

#[test]
fn server_urls_parse_hosts_ports_and_ipv6_literals() {
    let table = [
        ("https://h", "h", 443, ""),
        ("https://h:6443", "h", 6443, ""),
        ("https://[::1]:6443/", "::1", 6443, ""),
        ("https://[fd00::1]", "fd00::1", 443, ""),
        ("https://h/a/b/", "h", 443, "/a/b"),
    ];
    for (url, host, port, path) in table {
        let s = parse_server(url).unwrap();
        assert_eq!(
            (s.host.as_str(), s.port, s.base_path.as_str()),
            (host, port, path),
            "{url}"
        );
    }
    assert_eq!(
        parse_server("https://[::1]:6443").unwrap().authority(),
        "[::1]:6443"
    );
    for bad in [
        "http://h",
        "h:6443",
        "https://",
        "https://h:0",
        "https://h:99999",
        "https://u@h",
        "https://[::1",
        "https://h/?x=1",
    ] {
        assert!(parse_server(bad).is_err(), "{bad}");
    }
}

#[test]
fn insecure_skip_tls_verify_is_refused_unless_allowed() {
    let text = config(
        "    server: https://h\n    insecure-skip-tls-verify: true\n",
        "    token: t\n",
    );
    let e = parse_err(&text, false);
    assert!(
        e.contains("clusters[0].cluster.insecure-skip-tls-verify"),
        "{e}"
    );
    assert!(e.contains(PATH), "{e}");
    let k = parse(&text, Path::new(PATH), true).unwrap();
    assert!(k.insecure_skip_tls_verify);
}

#[test]
fn insecure_with_a_ca_is_refused_like_client_go_does() {
    let text = config(
        "    server: https://h\n    insecure-skip-tls-verify: true\n    certificate-authority: ca\n",
        "    token: t\n",
    );
    let e = parse_err(&text, true);
    assert!(e.contains("with the insecure flag is not allowed"), "{e}");
}

#[test]
fn errors_name_the_file_and_the_field() {
    let ca = "    server: https://h\n    certificate-authority: ca\n";
    let table: Vec<(String, &str)> =
        vec![
        (
            config(ca, &format!("    client-certificate-data: {}\n", b64("C"))),
            "users[1].user.client-key-data: client-key-data or client-key must be specified",
        ),
        (
            config(ca, "    client-key-data: '%%%'\n    client-certificate: c\n"),
            "users[1].user.client-key-data: not valid base64",
        ),
        (
            config(ca, "    client-key-data: QQ==\n    client-key: k\n    client-certificate: c\n"),
            "users[1].user.client-key-data: both",
        ),
        (
            config("    server: https://h\n", "    token: t\n"),
            "clusters[0].cluster.certificate-authority-data: no certificate-authority",
        ),
        (
            config("    certificate-authority: ca\n", "    token: t\n"),
            "clusters[0].cluster.server: not set",
        ),
        (
            config("    server: http://h\n    certificate-authority: ca\n", "    token: t\n"),
            "clusters[0].cluster.server: \"http://h\": only https://",
        ),
        (
            config(ca, "    exec: {command: aws}\n"),
            "users[1].user.exec: credential plugins are not supported",
        ),
        (
            config(ca, "    username: admin\n    password: x\n"),
            "users[1].user.username: basic authentication",
        ),
        (config(ca, "    {}\n"), "users[1].user: no credentials"),
        (
            config(
                "    server: https://h\n    certificate-authority: ca\n    proxy-url: http://p\n",
                "    token: t\n",
            ),
            "clusters[0].cluster.proxy-url",
        ),
    ];
    for (text, want) in table {
        let e = parse_err(&text, false);
        assert!(e.contains(want), "got {e:?}, want {want:?}");
        assert!(e.starts_with(&format!("kubeconfig {PATH}: ")), "{e}");
    }
}

#[test]
fn a_missing_context_cluster_or_user_is_named() {
    let e = parse_err("current-context: x\n", false);
    assert!(e.contains("current-context: no context named \"x\""), "{e}");
    let e = parse_err("contexts: []\n", false);
    assert!(e.contains("current-context: not set"), "{e}");
    let e = parse_err("", false);
    assert!(e.contains("current-context: not set"), "{e}");
    let e = parse_err(
        "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n",
        false,
    );
    assert!(
        e.contains("contexts[0].context.cluster: no cluster named \"k\""),
        "{e}"
    );
    let e = parse_err(
        "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n\
         clusters:\n- name: k\n  cluster: {server: 'https://h', certificate-authority: ca}\n",
        false,
    );
    assert!(
        e.contains("contexts[0].context.user: no user named \"u\""),
        "{e}"
    );
}

#[test]
fn malformed_yaml_is_an_error_naming_the_file() {
    let e = parse_err("clusters: [\n", false);
    assert!(e.starts_with(&format!("kubeconfig {PATH}: ")), "{e}");
}

#[test]
fn a_field_of_the_wrong_type_is_named() {
    let table = [
        ("clusters: {}\n", "clusters: must be a list"),
        (
            "clusters:\n- name: a\n  cluster: [1]\n",
            "clusters[0].cluster: must be a mapping",
        ),
        (
            "clusters:\n- name: a\n  cluster: {insecure-skip-tls-verify: yes please}\n",
            "clusters[0].cluster.insecure-skip-tls-verify: must be true or false",
        ),
        (
            "users:\n- name: u\n  user: {token: [1]}\n",
            "users[0].user.token: must be a string",
        ),
        (
            "current-context: [x]\n",
            "current-context: must be a string",
        ),
        ("- a\n", "the document is not a mapping"),
    ];
    for (text, want) in table {
        let e = parse_err(text, false);
        assert!(e.contains(want), "got {e:?}, want {want:?}");
    }
}

#[test]
fn debug_output_never_shows_key_or_token_contents() {
    let text = config(
        "    server: https://h\n    certificate-authority: ca\n",
        &format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n    token: sekrit-token\n",
            b64("CERT"),
            b64("SEKRIT-KEY")
        ),
    );
    let k = parse_ok(&text);
    let shown = format!("{k:?}");
    assert!(!shown.contains("SEKRIT"), "{shown}");
    assert!(!shown.contains("sekrit"), "{shown}");
    assert!(shown.contains("users[1].user.client-key-data"), "{shown}");
}

#[test]
fn a_missing_credential_file_is_named_when_read() {
    let m = Material {
        field: "users[0].user.client-key".into(),
        source: Source::File(PathBuf::from("/nonexistent/picolet/key.pem")),
    };
    let e = m.read(Path::new(PATH)).unwrap_err().to_string();
    assert!(e.contains("users[0].user.client-key"), "{e}");
    assert!(e.contains("/nonexistent/picolet/key.pem"), "{e}");
}

#[test]
fn a_deeply_nested_kubeconfig_is_refused_before_it_is_parsed() {
    let deep = format!("a: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let e = parse(&deep, Path::new("/etc/picolet/kubelet.conf"), false).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("/etc/picolet/kubelet.conf"), "{text}");
    assert!(text.contains("nests deeper than"), "{text}");
}
