//! The Service variables (kubelet's `envvars.FromServices` and
//! `getServiceEnvVarMap`), alone and merged into a container's env.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use super::*;
use crate::pod::config_objects::Lookup;

fn port(name: &str, port: i32, protocol: &str) -> ServicePortInfo {
    ServicePortInfo {
        name: name.into(),
        port,
        protocol: protocol.into(),
    }
}

fn svc(ns: &str, name: &str, ip: &str, ports: Vec<ServicePortInfo>) -> ServiceInfo {
    ServiceInfo {
        namespace: ns.into(),
        name: name.into(),
        cluster_ip: ip.into(),
        ports,
    }
}

fn master() -> ServiceInfo {
    svc(
        "default",
        "kubernetes",
        "10.96.0.1",
        vec![port("https", 443, "TCP")],
    )
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const MASTER_VARS: [(&str, &str); 8] = [
    ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
    ("KUBERNETES_SERVICE_PORT", "443"),
    ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
    ("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
    ("KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"),
    ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
    ("KUBERNETES_PORT_443_TCP_PORT", "443"),
    ("KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"),
];

#[test]
fn the_master_service_gives_the_eight_kubernetes_variables() {
    assert_eq!(from_services([&master()]), pairs(&MASTER_VARS));
}

#[test]
fn names_are_upper_cased_with_dashes_as_underscores_and_every_port_gets_link_variables() {
    let s = svc(
        "edge",
        "abc-123",
        "5.6.7.8",
        vec![port("u-d-p", 8081, "UDP"), port("t-c-p", 8082, "TCP")],
    );
    assert_eq!(
        from_services([&s]),
        pairs(&[
            ("ABC_123_SERVICE_HOST", "5.6.7.8"),
            ("ABC_123_SERVICE_PORT", "8081"),
            ("ABC_123_SERVICE_PORT_U_D_P", "8081"),
            ("ABC_123_SERVICE_PORT_T_C_P", "8082"),
            ("ABC_123_PORT", "udp://5.6.7.8:8081"),
            ("ABC_123_PORT_8081_UDP", "udp://5.6.7.8:8081"),
            ("ABC_123_PORT_8081_UDP_PROTO", "udp"),
            ("ABC_123_PORT_8081_UDP_PORT", "8081"),
            ("ABC_123_PORT_8081_UDP_ADDR", "5.6.7.8"),
            ("ABC_123_PORT_8082_TCP", "tcp://5.6.7.8:8082"),
            ("ABC_123_PORT_8082_TCP_PROTO", "tcp"),
            ("ABC_123_PORT_8082_TCP_PORT", "8082"),
            ("ABC_123_PORT_8082_TCP_ADDR", "5.6.7.8"),
        ])
    );
}

#[test]
fn an_unnamed_first_port_has_no_named_variable_and_an_unset_protocol_is_tcp() {
    let s = svc(
        "edge",
        "q-u-u-x",
        "9.8.7.6",
        vec![port("", 8082, ""), port("8083", 8083, "TCP")],
    );
    let env: BTreeMap<String, String> = from_services([&s]).into_iter().collect();
    assert_eq!(env["Q_U_U_X_SERVICE_PORT"], "8082");
    assert_eq!(env["Q_U_U_X_SERVICE_PORT_8083"], "8083");
    assert_eq!(env["Q_U_U_X_PORT"], "tcp://9.8.7.6:8082");
    assert_eq!(env["Q_U_U_X_PORT_8082_TCP_PROTO"], "tcp");
    assert_eq!(env["Q_U_U_X_PORT_8083_TCP"], "tcp://9.8.7.6:8083");
    assert_eq!(env.len(), 3 + 1 + 4 + 4);
}

#[test]
fn a_headless_or_external_name_service_gives_no_variables() {
    let headless = svc("edge", "db", "None", vec![port("", 5432, "TCP")]);
    let external = svc("edge", "ext", "", vec![port("", 80, "TCP")]);
    assert!(from_services([&headless, &external]).is_empty());
    assert!(service_env([&headless, &external], "edge", true).is_empty());
}

#[test]
fn an_ipv6_cluster_ip_is_bracketed_in_urls() {
    let s = svc("edge", "web", "fd00::10", vec![port("", 80, "TCP")]);
    let env: BTreeMap<String, String> = from_services([&s]).into_iter().collect();
    assert_eq!(env["WEB_SERVICE_HOST"], "fd00::10");
    assert_eq!(env["WEB_PORT"], "tcp://[fd00::10]:80");
    assert_eq!(env["WEB_PORT_80_TCP_ADDR"], "fd00::10");
}

#[test]
fn a_pod_sees_the_master_service_and_its_own_namespaces_services_only() {
    let all = [
        master(),
        svc("default", "other", "10.96.0.9", vec![port("", 80, "TCP")]),
        svc("edge", "web", "10.96.0.20", vec![port("http", 80, "TCP")]),
        svc("elsewhere", "db", "10.96.0.30", vec![port("", 5432, "TCP")]),
    ];
    let env: BTreeMap<String, String> = service_env(&all, "edge", true).into_iter().collect();
    assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
    assert_eq!(env["WEB_SERVICE_HOST"], "10.96.0.20");
    assert_eq!(env["WEB_SERVICE_PORT_HTTP"], "80");
    assert!(!env.contains_key("OTHER_SERVICE_HOST"), "default's others");
    assert!(!env.contains_key("DB_SERVICE_HOST"), "other namespaces'");

    // A pod in default sees default's Services.
    let env: BTreeMap<String, String> = service_env(&all, "default", true).into_iter().collect();
    assert_eq!(env["OTHER_SERVICE_HOST"], "10.96.0.9");
    assert!(!env.contains_key("WEB_SERVICE_HOST"));
}

#[test]
fn with_service_links_disabled_only_the_master_services_variables_remain() {
    let all = [
        master(),
        svc("edge", "web", "10.96.0.20", vec![port("", 80, "TCP")]),
    ];
    assert_eq!(service_env(&all, "edge", false), pairs(&MASTER_VARS));
    let in_default = [
        master(),
        svc("default", "web", "10.96.0.20", vec![port("", 80, "TCP")]),
    ];
    assert_eq!(
        service_env(&in_default, "default", false),
        pairs(&MASTER_VARS)
    );
}

#[test]
fn a_service_named_kubernetes_in_the_pods_namespace_wins_over_the_master_one() {
    let own = svc(
        "edge",
        "kubernetes",
        "10.96.7.7",
        vec![port("", 8443, "TCP")],
    );
    for order in [[master(), own.clone()], [own.clone(), master()]] {
        let env: BTreeMap<String, String> = service_env(&order, "edge", true).into_iter().collect();
        assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.96.7.7");
        assert_eq!(env["KUBERNETES_SERVICE_PORT"], "8443");
        // With links disabled the namespace's own is not seen.
        let env: BTreeMap<String, String> =
            service_env(&order, "edge", false).into_iter().collect();
        assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
    }
}

#[test]
fn the_namespaces_needed_are_default_and_those_of_pods_with_links() {
    let a = pod("metadata: {name: a, namespace: edge}\nspec: {containers: [{name: c, image: i}]}");
    let b = pod("metadata: {name: b, namespace: quiet}\nspec: {enableServiceLinks: false, containers: [{name: c, image: i}]}");
    let want: std::collections::BTreeSet<String> = ["default".into(), "edge".into()].into();
    assert_eq!(namespaces_needed([&a, &b]), want);
    assert_eq!(namespaces_needed([]), ["default".to_string()].into());
}

/// Services by namespace; a namespace absent is not read yet.
#[derive(Default)]
struct Table {
    by_ns: RefCell<BTreeMap<String, Rc<[ServiceInfo]>>>,
}

impl Table {
    fn with(self, ns: &str, list: Vec<ServiceInfo>) -> Self {
        self.by_ns.borrow_mut().insert(ns.into(), list.into());
        self
    }
}

impl Services for Table {
    fn services(&self, namespace: &str) -> Lookup<[ServiceInfo]> {
        match self.by_ns.borrow().get(namespace) {
            Some(l) => Lookup::Found(l.clone()),
            None => Lookup::NotYetKnown,
        }
    }
}

const APP: &str = r#"
metadata: {name: app, namespace: edge, uid: u1}
spec:
  containers:
  - name: app
    image: busybox
    env:
    - {name: WEB_SERVICE_HOST, value: mine}
    - {name: API, value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"}
    command: ["echo", "$(WEB_SERVICE_PORT)"]
"#;

#[test]
fn the_pods_own_env_wins_and_dollar_expansion_sees_service_variables() {
    let table = Table::default().with("default", vec![master()]).with(
        "edge",
        vec![svc("edge", "web", "10.96.0.20", vec![port("", 80, "TCP")])],
    );
    let p = pod(APP);
    let params = ContainerParams {
        services: Some(ServiceSource {
            services: &table,
            wait_for_sync: true,
        }),
        ..params()
    };
    let cfg = container_config(&p, first(&p), &params).unwrap();
    assert_eq!(env_of(&cfg, "WEB_SERVICE_HOST").as_deref(), Some("mine"));
    assert_eq!(
        cfg.envs
            .iter()
            .filter(|kv| kv.key == "WEB_SERVICE_HOST")
            .count(),
        1,
        "no duplicate"
    );
    assert_eq!(
        env_of(&cfg, "API").as_deref(),
        Some("https://10.96.0.1:443")
    );
    assert_eq!(env_of(&cfg, "WEB_SERVICE_PORT").as_deref(), Some("80"));
    assert_eq!(
        env_of(&cfg, "KUBERNETES_PORT_443_TCP_ADDR").as_deref(),
        Some("10.96.0.1")
    );
    assert_eq!(cfg.command, vec!["echo", "80"]);
    // The pod's own come first, in declaration order.
    assert_eq!(cfg.envs[0].key, "WEB_SERVICE_HOST");
    assert_eq!(cfg.envs[1].key, "API");
}

#[test]
fn an_api_pod_waits_for_services_not_read_yet_and_a_static_pod_goes_without() {
    // default is known, the pod's namespace is not.
    let table = Table::default().with("default", vec![master()]);
    let p = pod(APP);
    let api = ContainerParams {
        services: Some(ServiceSource {
            services: &table,
            wait_for_sync: true,
        }),
        ..params()
    };
    let err = container_config(&p, first(&p), &api).unwrap_err();
    assert_eq!(err.kind, SpecErrorKind::NotYetKnown);
    assert_eq!(
        err.to_string(),
        "services have not yet been read at least once, cannot construct envvars"
    );

    let static_pod = ContainerParams {
        services: Some(ServiceSource {
            services: &table,
            wait_for_sync: false,
        }),
        ..params()
    };
    let cfg = container_config(&p, first(&p), &static_pod).unwrap();
    assert_eq!(
        env_of(&cfg, "KUBERNETES_SERVICE_HOST").as_deref(),
        Some("10.96.0.1")
    );
    assert_eq!(env_of(&cfg, "WEB_SERVICE_PORT"), None);
    assert_eq!(
        env_of(&cfg, "API").as_deref(),
        Some("https://10.96.0.1:443")
    );

    // No API server at all: no Service variables, `$(VAR)` left as written.
    let cfg = container_config(&p, first(&p), &params()).unwrap();
    assert_eq!(env_of(&cfg, "KUBERNETES_SERVICE_HOST"), None);
    assert_eq!(
        env_of(&cfg, "API").as_deref(),
        Some("https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)")
    );
}

#[test]
fn with_links_disabled_an_api_pod_needs_only_default() {
    let table = Table::default().with("default", vec![master()]);
    let p = pod(&APP.replace("spec:\n", "spec:\n  enableServiceLinks: false\n"));
    let params = ContainerParams {
        services: Some(ServiceSource {
            services: &table,
            wait_for_sync: true,
        }),
        ..params()
    };
    let cfg = container_config(&p, first(&p), &params).unwrap();
    let service_keys: Vec<&str> = cfg.envs.iter().skip(2).map(|kv| kv.key.as_str()).collect();
    let want: Vec<&str> = MASTER_VARS.iter().map(|(k, _)| *k).collect();
    assert_eq!(service_keys, want);
}
