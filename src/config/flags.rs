//! kubelet's command-line flags, in ONE table: [`FLAGS`] says, for each flag
//! picolet takes, how it is written, which field of [`KubeletConfig`] it
//! sets and what `picolet help` says about it.
//!
//! The command line only collects raw strings into [`Flags`] (see
//! `src/cli.rs`). [`KubeletConfig::apply_flags`] turns each flag into the
//! JSON value its field takes, as if it were one more layer on top of the
//! files, and sets it with the field's own validator: a bad value gets the
//! same message whichever way it came, prefixed with the flag instead of
//! the file.

use serde_json::{Map, Value};

use super::fields::{field, KubeletConfig};
use super::ConfigError;

/// One flag: kubelet's name for it and the field it sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag {
    /// The long name without dashes (`max-pods`); `v` is also `-v`.
    pub name: &'static str,
    /// How it is written and how its value becomes the field's.
    pub kind: FlagKind,
    /// The field it sets: a KubeletConfiguration key (`maxPods`,
    /// `logging.verbosity`) or a flag-only setting (`rootDir`).
    pub field: &'static str,
    /// The value's placeholder in the help text (`DUR`, `N`; empty for
    /// booleans).
    pub arg: &'static str,
    /// The help text; a `\n` continues it on an indented line.
    pub help: &'static str,
}

/// How a flag is written on the command line and turned into its field's
/// value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// `--flag VALUE`; the last occurrence wins.
    Str,
    /// `--flag N`; the last occurrence wins.
    Int,
    /// `--flag` (true) or `--flag=BOOL` in Go's `strconv.ParseBool`
    /// spellings; the last occurrence wins.
    Bool,
    /// `--flag A,B`, repeatable: the occurrences add up.
    List,
    /// `--flag SIGNAL<VALUE,...`, repeatable: kubelet's `<`-separated map
    /// (`--eviction-hard`); later pairs override earlier ones.
    Thresholds,
}

impl FlagKind {
    /// False for booleans, which stand alone (`--cgroups-per-qos`) and take
    /// a value only attached (`--cgroups-per-qos=false`).
    pub fn needs_value(self) -> bool {
        self != FlagKind::Bool
    }

    /// The JSON value for the field from every occurrence of the flag, in
    /// order. A value of the wrong shape is passed on as a string, so the
    /// field's validator names it ("expected a positive integer, got ...").
    fn to_json(self, given: &[&str]) -> Result<Value, String> {
        let last = given.last().copied().unwrap_or_default();
        let items = || {
            given
                .iter()
                .flat_map(|s| s.split(','))
                .map(str::trim)
                .filter(|s| !s.is_empty())
        };
        Ok(match self {
            FlagKind::Str => Value::from(last),
            FlagKind::Int => match last.trim().parse::<i64>() {
                Ok(n) => Value::from(n),
                Err(_) => Value::from(last),
            },
            FlagKind::Bool => parse_go_bool(last).map_or_else(|| Value::from(last), Value::Bool),
            FlagKind::List => Value::Array(items().map(Value::from).collect()),
            FlagKind::Thresholds => {
                let mut map = Map::new();
                for pair in items() {
                    let (k, v) = pair
                        .split_once('<')
                        .or_else(|| pair.split_once('='))
                        .ok_or_else(|| {
                            format!(
                                "expected SIGNAL<VALUE pairs such as \
                                 \"memory.available<100Mi\", got {pair:?}"
                            )
                        })?;
                    map.insert(k.trim().to_string(), Value::from(v.trim()));
                }
                Value::Object(map)
            }
        })
    }
}

/// Go's `strconv.ParseBool`, which kubelet's boolean flags use.
fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

const fn row(
    name: &'static str,
    kind: FlagKind,
    field: &'static str,
    arg: &'static str,
    help: &'static str,
) -> Flag {
    Flag {
        name,
        kind,
        field,
        arg,
        help,
    }
}

use FlagKind::{Bool, Int, List, Str, Thresholds};

/// Every flag of `picolet run` besides `--config`, in help-text order:
/// `row(name, kind, field, arg, help)`.
#[rustfmt::skip]
pub const FLAGS: &[Flag] = &[
    row("root-dir",                     Str,        "rootDir",                   "DIR",           "state directory [/var/lib/picolet]"),
    row("hostname-override",            Str,        "hostnameOverride",          "NAME",          "node name [machine hostname]"),
    row("admin-socket",                 Str,        "adminSocket",               "PATH",          "admin socket [/run/picolet/picolet.sock]"),
    row("board",                        Str,        "board",                     "NAME",          "start from a board profile (rpi4, rpi3, ...)"),
    row("pod-manifest-path",            Str,        "staticPodPath",             "DIR",           "static pod directory [/etc/kubernetes/manifests];\nempty disables static pods"),
    row("container-runtime-endpoint",   Str,        "containerRuntimeEndpoint",  "EP",            "CRI socket [unix:///run/containerd/containerd.sock]"),
    row("cgroup-driver",                Str,        "cgroupDriver",              "cgroupfs",      "only cgroupfs is supported"),
    row("cgroup-root",                  Str,        "cgroupRoot",                "PATH",          "[/]"),
    row("cgroups-per-qos",              Bool,       "cgroupsPerQOS",             "",              "[true]"),
    row("file-check-frequency",         Str,        "fileCheckFrequency",        "DUR",           "static pod rescan period [20s]"),
    row("sync-frequency",               Str,        "syncFrequency",             "DUR",           "pod resync period [1m0s]"),
    row("max-pods",                     Int,        "maxPods",                   "N",             "[110]"),
    row("runtime-request-timeout",      Str,        "runtimeRequestTimeout",     "DUR",           "[2m0s]"),
    row("container-log-max-size",       Str,        "containerLogMaxSize",       "SIZE",          "[10Mi]"),
    row("container-log-max-files",      Int,        "containerLogMaxFiles",      "N",             "[5]"),
    row("serialize-image-pulls",        Bool,       "serializeImagePulls",       "",              "[true]"),
    row("cluster-dns",                  List,       "clusterDNS",                "IP[,IP...]",    "repeatable"),
    row("cluster-domain",               Str,        "clusterDomain",             "DOMAIN",        ""),
    row("pod-pids-limit",               Int,        "podPidsLimit",              "N",             "[-1 = unlimited]"),
    row("eviction-hard",                Thresholds, "evictionHard",              "SIG<VAL[,...]", "e.g. memory.available<100Mi,nodefs.available<10%"),
    row("eviction-soft",                Thresholds, "evictionSoft",              "SIG<VAL[,...]", "e.g. memory.available<200Mi (needs a grace period)"),
    row("eviction-soft-grace-period",   Thresholds, "evictionSoftGracePeriod",   "SIG=DUR[,...]", "e.g. memory.available=1m30s"),
    row("eviction-minimum-reclaim",     Thresholds, "evictionMinimumReclaim",    "SIG=VAL[,...]", "e.g. nodefs.available=100Mi"),
    row("eviction-pressure-transition-period", Str, "evictionPressureTransitionPeriod", "DUR",   "[5m0s]"),
    row("eviction-max-pod-grace-period", Int,       "evictionMaxPodGracePeriod", "SECONDS",       "grace of pods evicted for a soft threshold [0]"),
    row("image-gc-high-threshold",      Int,        "imageGCHighThresholdPercent", "PERCENT",     "[85]"),
    row("image-gc-low-threshold",       Int,        "imageGCLowThresholdPercent", "PERCENT",      "[80]"),
    row("minimum-image-ttl-duration",   Str,        "imageMinimumGCAge",         "DUR",           "[2m0s]"),
    row("node-status-update-frequency", Str,        "nodeStatusUpdateFrequency", "DUR",           "[10s]"),
    row("kubeconfig",                   Str,        "kubeconfig",                "PATH",          "join a cluster: the API server and this node's credentials"),
    row("bootstrap-kubeconfig",         Str,        "bootstrapKubeconfig",       "PATH",          "TLS bootstrap: credential to get --kubeconfig's certificate"),
    row("rotate-certificates",          Bool,       "rotateCertificates",        "",              "renew the client certificate before it expires [false]"),
    row("node-ip",                      List,       "nodeIP",                    "IP[,IP]",       "the node's address [the default route's]"),
    row("node-labels",                  List,       "nodeLabels",                "K=V[,K=V...]",  "labels of the Node (registration, nodeSelector, affinity)"),
    row("register-with-taints",         List,       "registerWithTaints",        "K=V:EFFECT,..", "taints to register the Node with"),
    row("register-node",                Bool,       "registerNode",              "",              "[true]"),
    row("node-status-report-frequency", Str,        "nodeStatusReportFrequency", "DUR",           "[5m0s]"),
    row("allow-insecure-kubeconfig",    Bool,       "allowInsecureKubeconfig",   "",              "accept insecure-skip-tls-verify [false]"),
    row("offline-image-fallback",       Bool,       "offlineImageFallback",      "",              "run a present image when a pull fails offline [true]"),
    row("event-qps",                    Int,        "eventRecordQPS",            "N",             "event writes per second, 0 = no limit [50]"),
    row("event-burst",                  Int,        "eventBurst",                "N",             "event writes in a burst [100]"),
    row("v",                            Int,        "logging.verbosity",         "LEVEL",         "log verbosity 0..10 [0]"),
];

impl Flag {
    /// The flag called `name` (long name, no dashes), if picolet has one.
    pub fn named(name: &str) -> Option<&'static Flag> {
        FLAGS.iter().find(|f| f.name == name)
    }
}

/// The flags given to `picolet run`, as raw strings in command-line order
/// (the CLI does no validation; [`resolve`](super::resolve) does). A
/// boolean flag given bare is `"true"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    given: Vec<(&'static str, String)>,
}

impl Flags {
    /// Records one occurrence of flag `name` (long name, no dashes). Returns
    /// false if picolet has no such flag.
    pub fn set(&mut self, name: &str, value: String) -> bool {
        match Flag::named(name) {
            Some(flag) => {
                self.given.push((flag.name, value));
                true
            }
            None => false,
        }
    }

    /// The last value given for `name`: the one that counts for a
    /// non-repeatable flag.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.all(name).pop()
    }

    /// Every value given for `name`, in order.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.given
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

impl KubeletConfig {
    /// Applies command-line flags on top of this configuration (flags win
    /// over the files, as with kubelet). List and map flags
    /// (`--cluster-dns`, `--eviction-hard`) replace the file's value
    /// entirely. Relative paths in flags are kept as given (relative to the
    /// working directory), except where an absolute path is required.
    pub(super) fn apply_flags(&mut self, flags: &Flags) -> Result<(), ConfigError> {
        for flag in FLAGS {
            let given = flags.all(flag.name);
            if given.is_empty() {
                continue;
            }
            let flag_error = |message: String| ConfigError::Flag {
                flag: format!("--{}", flag.name),
                message,
            };
            let value = flag.kind.to_json(&given).map_err(flag_error)?;
            let field = field(flag.field).unwrap_or_else(|| {
                unreachable!("flag --{} names no field {:?}", flag.name, flag.field)
            });
            field.set(self, &value).map_err(flag_error)?;
        }
        self.check_consistency()
            .map_err(|(field, message)| ConfigError::Flag {
                flag: "(combined with the config file)".to_string(),
                message: format!("{field} {message}"),
            })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;
    use crate::config::{file, EvictionThreshold};

    fn flags(pairs: &[(&str, &str)]) -> Flags {
        let mut f = Flags::default();
        for (name, value) in pairs {
            assert!(f.set(name, value.to_string()), "no flag --{name}");
        }
        f
    }

    fn flags_err(pairs: &[(&str, &str)]) -> String {
        KubeletConfig::default()
            .apply_flags(&flags(pairs))
            .expect_err("expected an error")
            .to_string()
    }

    fn from_file(body: &str) -> KubeletConfig {
        let text = format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n{body}"
        );
        file::from_layers(&[(&text, std::path::Path::new("/etc/picolet/config.yaml"))])
            .unwrap_or_else(|e| panic!("{e}"))
            .config
    }

    #[test]
    fn flags_override_the_file() {
        let mut c = from_file(
            "maxPods: 16\nsyncFrequency: 30s\nclusterDNS: [10.0.0.10]\nevictionHard:\n  memory.available: 1Mi\n",
        );
        let flags = flags(&[
            ("pod-manifest-path", "/srv/pods"),
            ("container-runtime-endpoint", "/run/crio.sock"),
            ("cgroup-driver", "cgroupfs"),
            ("cgroup-root", "/edge"),
            ("cgroups-per-qos", "false"),
            ("file-check-frequency", "1s"),
            ("sync-frequency", "2m"),
            ("max-pods", "32"),
            ("runtime-request-timeout", "15s"),
            ("container-log-max-size", "5M"),
            ("container-log-max-files", "3"),
            ("serialize-image-pulls", "f"),
            ("cluster-dns", "10.0.0.53,10.0.0.54"),
            ("cluster-dns", "fd00::53"),
            ("cluster-domain", "edge.local"),
            ("pod-pids-limit", "256"),
            (
                "eviction-hard",
                "memory.available<200Mi,nodefs.available<5%",
            ),
            ("eviction-hard", "pid.available<10"),
            ("node-status-update-frequency", "1m"),
            ("v", "3"),
            ("root-dir", "/data/picolet"),
            ("hostname-override", "Edge-01"),
            ("admin-socket", "/tmp/p.sock"),
            ("board", "rpi4"),
        ]);
        c.apply_flags(&flags).unwrap();
        assert_eq!(c.static_pod_path, Some(PathBuf::from("/srv/pods")));
        assert_eq!(c.container_runtime_endpoint, "/run/crio.sock");
        assert_eq!(c.runtime_socket_path(), PathBuf::from("/run/crio.sock"));
        assert_eq!(c.cgroup_root, "/edge");
        assert!(!c.cgroups_per_qos);
        assert_eq!(c.file_check_frequency, Duration::from_secs(1));
        assert_eq!(c.sync_frequency, Duration::from_secs(120));
        assert_eq!(c.max_pods, 32);
        assert_eq!(c.runtime_request_timeout, Duration::from_secs(15));
        assert_eq!(c.container_log_max_size, 5_000_000);
        assert_eq!(c.container_log_max_files, 3);
        assert!(!c.serialize_image_pulls);
        assert_eq!(c.cluster_dns.len(), 3);
        assert_eq!(c.cluster_domain, "edge.local");
        assert_eq!(c.pod_pids_limit, 256);
        assert_eq!(
            c.eviction_hard,
            BTreeMap::from([
                (
                    "memory.available".to_string(),
                    EvictionThreshold::Quantity(200 * 1024 * 1024)
                ),
                (
                    "nodefs.available".to_string(),
                    EvictionThreshold::Percentage(5.0)
                ),
                ("pid.available".to_string(), EvictionThreshold::Quantity(10)),
            ])
        );
        assert_eq!(c.node_status_update_frequency, Duration::from_secs(60));
        assert_eq!(c.verbosity, 3);
        assert_eq!(c.root_dir, PathBuf::from("/data/picolet"));
        assert_eq!(c.hostname_override.as_deref(), Some("edge-01"));
        assert_eq!(c.node_name(), "edge-01");
        assert_eq!(c.admin_socket, PathBuf::from("/tmp/p.sock"));
        assert_eq!(c.board.as_deref(), Some("rpi4"));
    }

    #[test]
    fn no_flags_leave_the_configuration_unchanged() {
        let mut c = from_file("maxPods: 16\n");
        let before = c.clone();
        c.apply_flags(&Flags::default()).unwrap();
        assert_eq!(c, before);
    }

    #[test]
    fn an_empty_pod_manifest_path_flag_disables_static_pods() {
        let mut c = KubeletConfig::default();
        c.apply_flags(&flags(&[("pod-manifest-path", "")])).unwrap();
        assert_eq!(c.static_pod_path, None);
    }

    #[test]
    fn a_flag_with_a_bad_value_names_the_flag() {
        assert_eq!(
            flags_err(&[("max-pods", "abc")]),
            r#"flag --max-pods: expected a positive integer, got "abc""#
        );
        assert!(flags_err(&[("cgroups-per-qos", "maybe")])
            .starts_with("flag --cgroups-per-qos: expected true or false"));
        assert!(flags_err(&[("cluster-dns", "8.8.8.8,dns")])
            .starts_with("flag --cluster-dns: expected an IP address, got \"dns\""));
        assert!(flags_err(&[("eviction-hard", "memory.available")])
            .starts_with("flag --eviction-hard: expected SIGNAL<VALUE"));
        assert!(flags_err(&[("v", "11")]).starts_with("flag --v: "));
        assert!(flags_err(&[("sync-frequency", "1x")])
            .starts_with("flag --sync-frequency: invalid duration"));
        assert!(flags_err(&[("root-dir", "state")])
            .starts_with("flag --root-dir: expected an absolute path"));
        assert!(flags_err(&[("hostname-override", "bad_name")])
            .starts_with("flag --hostname-override: "));
        assert!(flags_err(&[("board", "")]).starts_with("flag --board: "));
        assert!(flags_err(&[("cgroup-driver", "systemd")]).contains("not supported yet"));
    }

    #[test]
    fn a_string_flag_that_looks_like_a_number_stays_a_string() {
        // `--cluster-domain=123` must not become a JSON number and fail as "expected a string".
        let mut c = KubeletConfig::default();
        c.apply_flags(&flags(&[("cluster-domain", "123")])).unwrap();
        assert_eq!(c.cluster_domain, "123");
    }

    #[test]
    fn a_flag_combined_with_the_file_is_checked_across_fields() {
        let mut c = from_file("imageGCHighThresholdPercent: 90\nimageGCLowThresholdPercent: 85\n");
        let e = c.apply_flags(&flags(&[("v", "1")])).map(|_| ());
        assert!(e.is_ok(), "{e:?}");
        c.image_gc_high_threshold_percent = 80;
        let e = c.apply_flags(&Flags::default()).unwrap_err().to_string();
        assert!(
            e.starts_with("flag (combined with the config file): imageGCLowThresholdPercent"),
            "{e}"
        );
    }

    #[test]
    fn every_flag_in_the_table_sets_a_field_and_is_recorded_by_flags() {
        for flag in FLAGS {
            assert!(
                field(flag.field).is_some(),
                "--{} names no field {:?}",
                flag.name,
                flag.field
            );
            let mut f = Flags::default();
            assert!(f.set(flag.name, "x".into()), "{}", flag.name);
            assert_ne!(f, Flags::default(), "{}", flag.name);
            assert_eq!(f.get(flag.name), Some("x"));
        }
        assert!(!Flags::default().set("cert-dir", "x".into()));
        assert_eq!(
            Flag::named("cgroups-per-qos").map(|f| f.kind),
            Some(FlagKind::Bool)
        );
        assert_eq!(
            Flag::named("cluster-dns").map(|f| f.kind),
            Some(FlagKind::List)
        );
        assert_eq!(Flag::named("nope"), None);
    }

    #[test]
    fn flag_names_are_unique() {
        for (i, f) in FLAGS.iter().enumerate() {
            assert!(FLAGS[..i].iter().all(|g| g.name != f.name), "--{}", f.name);
        }
    }

    #[test]
    fn a_repeated_flag_keeps_the_last_value_and_a_list_flag_keeps_all() {
        let f = flags(&[
            ("max-pods", "1"),
            ("cluster-dns", "1.1.1.1"),
            ("max-pods", "2"),
            ("cluster-dns", "8.8.8.8"),
        ]);
        assert_eq!(f.get("max-pods"), Some("2"));
        assert_eq!(f.all("cluster-dns"), ["1.1.1.1", "8.8.8.8"]);
        assert_eq!(f.get("root-dir"), None);
    }
}
