//! `picolet check`'s I/O: reads the host's facts (the configuration's
//! unknown keys, kernel, cgroups, the runtime's answer, the CNI config,
//! filesystems, clock, static pod manifests, swap, the kubeconfig's
//! certificate and the API server's `SelfSubjectReview`, the node API's
//! certificate) and hands each to its verdict in [`super`].
//!
//! Every read is bounded: the runtime gets [`RUNTIME_DEADLINE`] per call,
//! the API server [`API_DEADLINE`], and nothing else blocks.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{FsStat, Line, Serving};
use crate::config::{KubeletConfig, LoadedConfig, SwapBehavior};
use crate::cri::{api, Runtime};

/// How long the runtime may take to answer one call.
pub const RUNTIME_DEADLINE: Duration = Duration::from_secs(5);

/// How long the API server may take to answer the `SelfSubjectReview`,
/// connection included.
pub const API_DEADLINE: Duration = Duration::from_secs(10);

/// The CNI config directory containerd and CRI-O read unless configured
/// otherwise (picolet has no setting for it: the runtime owns it).
pub const CNI_CONF_DIR: &str = "/etc/cni/net.d";

/// When this binary was built (unix seconds; `SOURCE_DATE_EPOCH` when the
/// build set it), the clock's lower bound.
pub const BUILT: &str = env!("PICOLET_BUILD_UNIX");

/// Every check, in the order printed; `origin` names the configuration
/// read (its file, or the defaults).
pub fn run(loaded: &LoadedConfig, origin: &str) -> Vec<Line> {
    let cfg = &loaded.config;
    let mut lines = super::config_fields(origin, &loaded.unknown_fields);
    let v2 = cgroup_v2();
    let release = rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned();
    lines.push(super::kernel(&release, v2 == Some(true)));
    lines.extend(super::cgroups(v2, &controllers(v2)));

    let endpoint = &cfg.container_runtime_endpoint;
    let agent_cfg = crate::agent::AgentConfig::new(cfg);
    let (answer, image_dir) = match &agent_cfg {
        Ok(a) => ask_runtime(&a.runtime_socket),
        Err(e) => (Err(e.to_string()), None),
    };
    let runtime_up = answer.is_ok();
    let runtime_name = answer.as_ref().ok().map(|(name, _, _)| name.clone());
    lines.push(super::runtime(endpoint, answer));
    lines.push(super::cni(
        CNI_CONF_DIR,
        list_names(Path::new(CNI_CONF_DIR)),
        runtime_name.as_deref(),
    ));

    let thresholds = agent_cfg
        .as_ref()
        .map(|a| a.eviction.thresholds.clone())
        .unwrap_or_default();
    let root = existing(&cfg.root_dir);
    lines.push(super::filesystem(
        "nodefs",
        &cfg.root_dir.display().to_string(),
        stat(&root),
        &thresholds,
    ));
    // The runtime's answer, else its usual store when it is down.
    let image_dir = image_dir.or_else(|| {
        (!runtime_up)
            .then(|| {
                ["/var/lib/containerd", "/var/lib/containers/storage"]
                    .iter()
                    .map(PathBuf::from)
                    .find(|p| p.is_dir())
            })
            .flatten()
    });
    if let Some(dir) = image_dir {
        lines.push(super::filesystem(
            "imagefs",
            &dir.display().to_string(),
            stat(&dir),
            &thresholds,
        ));
    }

    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    lines.push(super::clock(
        now,
        BUILT.parse().unwrap_or(0),
        ntp_synchronised(),
    ));

    let manifests = cfg
        .static_pod_path
        .as_ref()
        .map(|p| p.display().to_string());
    let read = match &cfg.static_pod_path {
        Some(p) => crate::source::ManifestDir::new(p, cfg.node_name())
            .check()
            .map_err(|e| e.to_string()),
        None => Ok(Vec::new()),
    };
    lines.extend(super::manifests(manifests.as_deref(), read));

    lines.push(super::swap(
        swap_total(),
        cfg.memory_swap_behavior == SwapBehavior::LimitedSwap,
    ));

    #[cfg(feature = "apiserver")]
    if let Some(path) = &cfg.kubeconfig {
        lines.push(super::certificate(
            &path.display().to_string(),
            client_certificate_not_after(path, cfg.allow_insecure_kubeconfig),
            now,
        ));
    }
    #[cfg(feature = "apiserver")]
    if let Some((server, review)) = review(cfg) {
        lines.push(super::api_server(&server, review));
    }
    lines.push(super::serving_certificate(cfg.port, serving(cfg)));
    lines
}

/// The names in `dir`, or why it cannot be listed.
fn list_names(dir: &Path) -> Result<Vec<String>, String> {
    std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .map(|e| {
            e.map(|e| e.file_name().to_string_lossy().into_owned())
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// A build without the node API serves none.
#[cfg(not(feature = "node-api"))]
fn serving(_: &KubeletConfig) -> Serving {
    Serving::Off
}

/// Where the node API's certificate comes from, and whether its files
/// can be read.
#[cfg(feature = "node-api")]
fn serving(cfg: &KubeletConfig) -> Serving {
    if cfg.port == 0 {
        return Serving::Off;
    }
    if let Some(cert) = &cfg.tls_cert_file {
        let files = [Some(cert), cfg.tls_private_key_file.as_ref()]
            .into_iter()
            .flatten()
            .map(|p| {
                let readable = std::fs::File::open(p).map(drop).map_err(|e| e.to_string());
                (p.display().to_string(), readable)
            })
            .collect();
        return Serving::Files(files);
    }
    let pki = cfg.root_dir.join("pki");
    if cfg.server_tls_bootstrap {
        let issued = pki.join(crate::nodeapi::serving::SERVER_CURRENT_PEM);
        return Serving::Bootstrap {
            kubeconfig: cfg.kubeconfig.is_some(),
            issued: issued.exists().then(|| issued.display().to_string()),
        };
    }
    Serving::SelfSigned(pki.join("kubelet.crt").display().to_string())
}

/// The kubeconfig's server (or, before the join, the bootstrap
/// kubeconfig's) and its answer to a `SelfSubjectReview`; `None` without
/// a kubeconfig.
#[cfg(feature = "apiserver")]
fn review(cfg: &KubeletConfig) -> Option<(String, super::Review)> {
    use super::Review;
    use crate::apiserver::client::kubeconfig;
    use crate::apiserver::client::transport::{Body, Client, Options};

    const PATH: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    const BODY: &str = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
    let path = match (&cfg.kubeconfig, &cfg.bootstrap_kubeconfig) {
        (Some(k), Some(b)) if !k.exists() => b,
        (Some(k), _) => k,
        (None, _) => return None,
    };
    let kc = match kubeconfig::load(path, cfg.allow_insecure_kubeconfig) {
        Ok(kc) => kc,
        Err(e) => {
            return Some((
                path.display().to_string(),
                Review::Unreachable(e.to_string()),
            ))
        }
    };
    let server = kc.server.origin();
    let options = Options {
        connect_timeout: API_DEADLINE,
        ..Options::default()
    };
    let client = match Client::new(&kc, options) {
        Ok(c) => c,
        Err(e) => return Some((server, Review::Unreachable(e.to_string()))),
    };
    let body = Body {
        content_type: "application/json",
        bytes: BODY.as_bytes().to_vec(),
    };
    let answer = crate::rt::block_on(client.request(
        http::Method::POST,
        PATH,
        Some(body),
        64 << 10,
        API_DEADLINE,
    ));
    let review = match answer {
        Err(e) => Review::Unreachable(e.to_string()),
        Ok(r) if r.status.as_u16() == 201 || r.status.as_u16() == 200 => {
            match super::parse_review(&r.body) {
                Ok((name, groups)) => Review::User { name, groups },
                Err(message) => Review::Refused {
                    code: r.status.as_u16(),
                    message,
                },
            }
        }
        Ok(r) => {
            let e =
                crate::apiserver::client::request::ApiError::from_reply(r.status.as_u16(), &r.body);
            Review::Refused {
                code: e.code,
                message: e.message,
            }
        }
    };
    Some((server, review))
}

/// `Some(true)` on cgroup v2, `Some(false)` on v1, `None` without cgroups
/// ([`crate::cgroups::detect`], as `run` detects them; a v1 root without a
/// `memory` or `cpu` hierarchy mounted is no cgroup filesystem at all).
fn cgroup_v2() -> Option<bool> {
    let root = Path::new("/sys/fs/cgroup");
    match crate::cgroups::detect(root).ok()? {
        crate::cgroups::CgroupVersion::V2 => Some(true),
        crate::cgroups::CgroupVersion::V1 => {
            (root.join("memory").is_dir() || root.join("cpu").is_dir()).then_some(false)
        }
    }
}

/// The controllers available: the root's `cgroup.controllers` on v2, the
/// enabled ones of `/proc/cgroups` on v1.
fn controllers(v2: Option<bool>) -> Vec<String> {
    match v2 {
        Some(true) => std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect(),
        Some(false) => std::fs::read_to_string("/proc/cgroups")
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() >= 4 && f[3] == "1").then(|| f[0].to_string())
            })
            .collect(),
        None => Vec::new(),
    }
}

/// CRI `Version` (name, version, CRI version), and where the runtime keeps
/// its images (CRI `ImageFsInfo`), each within [`RUNTIME_DEADLINE`].
/// The runtime's (name, version, CRI version), or why it did not answer.
type Answer = Result<(String, String, String), String>;

fn ask_runtime(socket: &Path) -> (Answer, Option<PathBuf>) {
    let runtime = Runtime::new(socket.to_path_buf(), RUNTIME_DEADLINE);
    crate::rt::block_on(async {
        let version = runtime
            .version(api::VersionRequest {
                version: "v1".into(),
            })
            .await;
        let v = match version {
            Ok(v) => (v.runtime_name, v.runtime_version, v.runtime_api_version),
            Err(e) => return (Err(format!("{e}")), None),
        };
        let dir = runtime
            .image_fs_info(api::ImageFsInfoRequest {})
            .await
            .ok()
            .and_then(|info| crate::cri::image_fs_mountpoints(&info).next());
        (Ok(v), dir)
    })
}

/// `path`, or its nearest existing ancestor (rootDir before the first run).
fn existing(path: &Path) -> PathBuf {
    path.ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"))
        .to_path_buf()
}

fn stat(dir: &Path) -> Result<FsStat, String> {
    crate::node::stats::fs::read(dir)
        .map(|s| FsStat {
            available_bytes: s.available_bytes,
            capacity_bytes: s.capacity_bytes,
            inodes_free: s.inodes_free,
            inodes: s.inodes,
        })
        .map_err(|e| e.to_string())
}

/// The kernel's NTP state (`adjtimex` with no changes): synchronised
/// unless it answers `TIME_ERROR` or `STA_UNSYNC` is set.
fn ntp_synchronised() -> Option<bool> {
    // SAFETY: adjtimex with `modes == 0` only reads the kernel's clock
    // state into the zeroed struct we own.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return None;
    }
    Some(state != libc::TIME_ERROR && tx.status & libc::STA_UNSYNC == 0)
}

/// `SwapTotal` of `/proc/meminfo`, in bytes.
fn swap_total() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("SwapTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .unwrap_or(0)
}

/// The kubeconfig's client certificate's `notAfter`; `None` when it has
/// none (a token).
#[cfg(feature = "apiserver")]
fn client_certificate_not_after(path: &Path, allow_insecure: bool) -> Option<Result<i64, String>> {
    use crate::apiserver::client::kubeconfig;
    use crate::pki::csr;
    let kc = match kubeconfig::load(path, allow_insecure) {
        Ok(kc) => kc,
        Err(e) => return Some(Err(e.to_string())),
    };
    let material = kc.client_certificate?;
    Some(
        material
            .read(path)
            .map_err(|e| e.to_string())
            .and_then(|pem| csr::first_certificate_der(&pem).map_err(|e| e.to_string()))
            .and_then(|der| csr::Validity::of_certificate(&der).map_err(|e| e.to_string()))
            .map(|v| v.not_after),
    )
}
