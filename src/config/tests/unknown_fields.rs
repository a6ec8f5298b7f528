//! Config tests: unknown, unimplemented and nested unknown fields, reported
//! rather than rejected.

use super::*;

#[test]
fn unknown_and_unimplemented_fields_are_reported_not_rejected() {
    let loaded = parse_ok("tlsMinVersion: VersionTLS12\nfeatureGates: {Foo: true}\nmaxPodz: 3\n");
    assert_eq!(
        unknown_names(&loaded),
        vec!["featureGates", "maxPodz", "tlsMinVersion"]
    );
    assert_eq!(loaded.config, KubeletConfig::default());
}

#[test]
fn the_node_api_fields_are_read() {
    let c = parse_ok(
        "address: 192.168.1.20\nport: 0\nhealthzPort: 0\nhealthzBindAddress: \"::1\"\n\
         tlsCertFile: /etc/p/tls.crt\ntlsPrivateKeyFile: /etc/p/tls.key\n\
         authentication:\n  x509:\n    clientCAFile: /etc/p/ca.crt\n  webhook:\n    enabled: false\n    cacheTTL: 10s\n\
         authorization:\n  mode: AlwaysAllow\n  webhook:\n    cacheAuthorizedTTL: 1m\n    cacheUnauthorizedTTL: 0s\n",
    )
    .config;
    assert_eq!(c.address.to_string(), "192.168.1.20");
    assert_eq!((c.port, c.healthz_port), (0, 0));
    assert_eq!(c.healthz_bind_address.to_string(), "::1");
    assert_eq!(c.tls_cert_file, Some(PathBuf::from("/etc/p/tls.crt")));
    assert_eq!(
        c.tls_private_key_file,
        Some(PathBuf::from("/etc/p/tls.key"))
    );
    assert_eq!(c.client_ca_file, Some(PathBuf::from("/etc/p/ca.crt")));
    assert!(!c.authentication_webhook_enabled);
    assert_eq!(c.authentication_webhook_cache_ttl, Duration::from_secs(10));
    assert_eq!(
        c.authorization_mode,
        crate::config::AuthorizationMode::AlwaysAllow
    );
    assert_eq!(
        c.authorization_webhook_cache_authorized_ttl,
        Duration::from_secs(60)
    );
    assert_eq!(
        c.authorization_webhook_cache_unauthorized_ttl,
        Duration::ZERO
    );
    let d = KubeletConfig::default();
    assert_eq!(
        (d.address.to_string(), d.port),
        ("0.0.0.0".to_string(), 10250)
    );
    assert_eq!(
        (d.healthz_bind_address.to_string(), d.healthz_port),
        ("127.0.0.1".to_string(), 10248)
    );
    assert_eq!(
        d.authorization_mode,
        crate::config::AuthorizationMode::Webhook
    );
    let e = parse_err("authorization:\n  mode: RBAC\n");
    assert!(e.contains("expected Webhook or AlwaysAllow"), "{e}");
    assert!(!d.server_tls_bootstrap);
    assert!(
        parse_ok("serverTLSBootstrap: true\n")
            .config
            .server_tls_bootstrap
    );
}

#[test]
fn unknown_nested_fields_are_reported_with_a_dotted_path() {
    let loaded = parse_ok(
        "authentication:\n  foo: 1\n  webhook:\n    bar: true\nauthorization:\n  baz: x\nlogging:\n  format: json\n  verbosity: 2\n",
    );
    assert_eq!(
        unknown_names(&loaded),
        vec![
            "authentication.foo",
            "authentication.webhook.bar",
            "authorization.baz",
            "logging.format"
        ]
    );
    assert_eq!(loaded.config.verbosity, 2);
}

#[test]
fn upstream_kubelet_fields_are_told_apart_from_typos() {
    assert!(is_upstream_field("featureGates"));
    assert!(is_upstream_field("address"));
    assert!(is_upstream_field("logging.format"));
    assert!(!is_upstream_field("maxPodz"));
    assert!(!is_upstream_field("authentication2.foo"));
}
