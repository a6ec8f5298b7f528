//! The kubeconfig file: which API server to talk to and how to prove who we
//! are.
//!
//! Only what a node needs is read: `current-context` selects a context,
//! whose cluster gives `server`, `certificate-authority` (or `-data`),
//! `insecure-skip-tls-verify` and `tls-server-name`, and whose user gives
//! `client-certificate` / `client-key` (or their `-data` forms), `token` and
//! `tokenFile`. Relative file paths are resolved against the kubeconfig's
//! own directory, as client-go does. Other fields are ignored; credential
//! plugins (`exec`, `auth-provider`), basic auth and `proxy-url` are refused
//! with an error naming the field rather than silently ignored.
//!
//! [`parse`] is pure (text in, [`Kubeconfig`] out); file contents referenced
//! by the kubeconfig are read later, by [`Material::read`], so that a
//! rotated certificate file is picked up on the next connection.
//!
//! Errors name the kubeconfig file and the field, in the file's own terms
//! (`users[0].user.client-key-data`). Key and token contents are never
//! logged nor printed by `Debug`.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use base64::Engine;

/// Errors loading a kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("reading kubeconfig {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("kubeconfig {path}: {source}")]
    Yaml {
        path: PathBuf,
        source: serde_yaml_ng::Error,
    },
    #[error("kubeconfig {path}: {field}: {message}")]
    Field {
        path: PathBuf,
        field: String,
        message: String,
    },
    #[error("kubeconfig {path}: {field}: reading {file}: {source}")]
    File {
        path: PathBuf,
        field: String,
        file: PathBuf,
        source: io::Error,
    },
}

/// Where the API server is: `https://host[:port][/prefix]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    /// Host name or IP address, without the brackets of an IPv6 literal.
    pub host: String,
    pub port: u16,
    /// A path prefix ("" or "/prefix", never ending in '/').
    pub base_path: String,
}

impl Server {
    /// `host:port`, with brackets around an IPv6 literal.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// `https://host:port`.
    pub fn origin(&self) -> String {
        format!("https://{}", self.authority())
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.origin(), self.base_path)
    }
}

/// Where a certificate, key or token comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum Source {
    /// A file (already resolved against the kubeconfig's directory).
    File(PathBuf),
    /// Inline bytes (a `-data` field, base64-decoded, or a `token`).
    Data(Vec<u8>),
}

/// One piece of credential material and the field it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct Material {
    /// The kubeconfig field, e.g. `users[0].user.client-key-data`.
    pub field: String,
    pub source: Source,
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(p) => write!(f, "file {}", p.display()),
            Source::Data(d) => write!(f, "{} bytes, not shown", d.len()),
        }
    }
}

impl fmt::Debug for Material {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:?})", self.field, self.source)
    }
}

impl Material {
    /// The bytes: read from the file each time (a rotated certificate is
    /// picked up), or the inline data. `kubeconfig` names the file for the
    /// error.
    pub fn read(&self, kubeconfig: &Path) -> Result<Vec<u8>, KubeconfigError> {
        match &self.source {
            Source::Data(d) => Ok(d.clone()),
            Source::File(p) => std::fs::read(p).map_err(|source| KubeconfigError::File {
                path: kubeconfig.to_path_buf(),
                field: self.field.clone(),
                file: p.clone(),
                source,
            }),
        }
    }
}

/// A resolved kubeconfig: the current context's cluster and user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kubeconfig {
    /// The kubeconfig file, for messages.
    pub path: PathBuf,
    /// The context in use (`current-context`).
    pub context: String,
    pub server: Server,
    /// `tls-server-name`: the name the server certificate is checked
    /// against (and sent as SNI) instead of the server's host.
    pub tls_server_name: Option<String>,
    /// `certificate-authority` or `certificate-authority-data` (PEM).
    pub certificate_authority: Option<Material>,
    /// `insecure-skip-tls-verify`; only ever true when the caller allowed it.
    pub insecure_skip_tls_verify: bool,
    /// `client-certificate` or `client-certificate-data` (PEM).
    pub client_certificate: Option<Material>,
    /// `client-key` or `client-key-data` (PEM).
    pub client_key: Option<Material>,
    /// `tokenFile` (re-read periodically) or `token`. As in client-go, a
    /// token file takes precedence over an inline token.
    pub token: Option<Material>,
}

// --- the file format ------------------------------------------------------------
//
// Read through `serde_yaml_ng::Value` (which the static pod source already
// links) rather than derived structs: no second YAML deserializer in the
// binary, and a type error names the field.

use serde_yaml_ng::Value;

#[derive(Default)]
struct RawConfig {
    clusters: Vec<RawNamed<RawCluster>>,
    users: Vec<RawNamed<RawUser>>,
    contexts: Vec<RawNamed<RawContext>>,
    current_context: Option<String>,
}

struct RawNamed<T> {
    name: String,
    item: T,
}

#[derive(Default)]
struct RawCluster {
    server: Option<String>,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    insecure_skip_tls_verify: Option<bool>,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
}

#[derive(Default)]
struct RawUser {
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    token: Option<String>,
    token_file: Option<String>,
    username: Option<String>,
    exec: bool,
    auth_provider: bool,
}

#[derive(Default)]
struct RawContext {
    cluster: String,
    user: String,
}

/// (field, message) of a type error.
type FieldError = (String, String);

fn string(v: &Value, key: &str, at: &str) -> Result<Option<String>, FieldError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err((join(at, key), "must be a string".into())),
    }
}

fn boolean(v: &Value, key: &str, at: &str) -> Result<Option<bool>, FieldError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err((join(at, key), "must be true or false".into())),
    }
}

fn present(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(|x| !x.is_null())
}

fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    }
}

/// The entries of a named list (`clusters`, `users`, `contexts`), each
/// `{name, <item>: {...}}`.
fn named<T>(
    root: &Value,
    list: &str,
    item: &str,
    parse: impl Fn(&Value, &str) -> Result<T, FieldError>,
) -> Result<Vec<RawNamed<T>>, FieldError> {
    let entries = match root.get(list) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Sequence(s)) => s,
        Some(_) => return Err((list.to_string(), "must be a list".into())),
    };
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let at = format!("{list}[{i}]");
        let name = string(e, "name", &at)?.unwrap_or_default();
        let at = join(&at, item);
        let inner = match e.get(item) {
            None | Some(Value::Null) => &Value::Null,
            Some(v @ Value::Mapping(_)) => v,
            Some(_) => return Err((at, "must be a mapping".into())),
        };
        out.push(RawNamed {
            name,
            item: parse(inner, &at)?,
        });
    }
    Ok(out)
}

fn raw_config(root: &Value) -> Result<RawConfig, FieldError> {
    if !matches!(root, Value::Mapping(_) | Value::Null) {
        return Err((String::new(), "the document is not a mapping".into()));
    }
    Ok(RawConfig {
        clusters: named(root, "clusters", "cluster", |v, at| {
            Ok(RawCluster {
                server: string(v, "server", at)?,
                certificate_authority: string(v, "certificate-authority", at)?,
                certificate_authority_data: string(v, "certificate-authority-data", at)?,
                insecure_skip_tls_verify: boolean(v, "insecure-skip-tls-verify", at)?,
                tls_server_name: string(v, "tls-server-name", at)?,
                proxy_url: string(v, "proxy-url", at)?,
            })
        })?,
        users: named(root, "users", "user", |v, at| {
            Ok(RawUser {
                client_certificate: string(v, "client-certificate", at)?,
                client_certificate_data: string(v, "client-certificate-data", at)?,
                client_key: string(v, "client-key", at)?,
                client_key_data: string(v, "client-key-data", at)?,
                token: string(v, "token", at)?,
                token_file: string(v, "tokenFile", at)?,
                username: string(v, "username", at)?,
                exec: present(v, "exec"),
                auth_provider: present(v, "auth-provider"),
            })
        })?,
        contexts: named(root, "contexts", "context", |v, at| {
            Ok(RawContext {
                cluster: string(v, "cluster", at)?.unwrap_or_default(),
                user: string(v, "user", at)?.unwrap_or_default(),
            })
        })?,
        current_context: string(root, "current-context", "")?,
    })
}

/// Reads and parses the kubeconfig at `path`. See [`parse`].
pub fn load(path: &Path, allow_insecure: bool) -> Result<Kubeconfig, KubeconfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| KubeconfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path, allow_insecure)
}

/// Parses kubeconfig `text` read from `path` (relative paths in it resolve
/// against `path`'s directory). `insecure-skip-tls-verify: true` is an
/// error unless `allow_insecure`; when allowed it is logged as a warning.
pub fn parse(text: &str, path: &Path, allow_insecure: bool) -> Result<Kubeconfig, KubeconfigError> {
    let err = |field: &str, message: &str| KubeconfigError::Field {
        path: path.to_path_buf(),
        field: field.to_string(),
        message: message.to_string(),
    };
    // Bounded like every outside document: size, depth, nodes, aliases
    // (inline certificates make a kubeconfig a few KiB; the config bounds
    // leave ample room).
    if let Err(e) = crate::decode::check_yaml(text, &crate::decode::Limits::CONFIG) {
        return Err(err("document", &e.to_string()));
    }
    let root: Value = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_yaml_ng::from_str(text).map_err(|source| KubeconfigError::Yaml {
            path: path.to_path_buf(),
            source,
        })?
    };
    let raw = raw_config(&root).map_err(|(f, m)| err(&f, &m))?;
    let dir = path.parent().unwrap_or(Path::new("."));

    let context = match raw.current_context.as_deref() {
        Some(c) if !c.is_empty() => c.to_string(),
        _ => return Err(err("current-context", "not set")),
    };
    let contexts = raw.contexts;
    let (ci, ctx) = contexts
        .iter()
        .enumerate()
        .find(|(_, c)| c.name == context)
        .ok_or_else(|| err("current-context", &format!("no context named {context:?}")))?;
    let ctx = &ctx.item;

    let clusters = raw.clusters;
    let (cli, cluster) = clusters
        .iter()
        .enumerate()
        .find(|(_, c)| c.name == ctx.cluster)
        .ok_or_else(|| {
            err(
                &format!("contexts[{ci}].context.cluster"),
                &format!("no cluster named {:?}", ctx.cluster),
            )
        })?;
    let cf = |name: &str| format!("clusters[{cli}].cluster.{name}");
    let cluster = &cluster.item;

    let cluster =
        cluster_part(cluster, &cf, dir, allow_insecure, path).map_err(|(f, m)| err(&f, &m))?;
    let ClusterPart {
        server,
        certificate_authority,
        insecure,
        tls_server_name,
    } = cluster;

    let users = raw.users;
    let (ui, user) = users
        .iter()
        .enumerate()
        .find(|(_, u)| u.name == ctx.user)
        .ok_or_else(|| {
            err(
                &format!("contexts[{ci}].context.user"),
                &format!("no user named {:?}", ctx.user),
            )
        })?;
    let user = &user.item;
    let UserPart {
        client_certificate,
        client_key,
        token,
    } = user_part(user, ui, dir).map_err(|(f, m)| err(&f, &m))?;

    Ok(Kubeconfig {
        path: path.to_path_buf(),
        context,
        server,
        tls_server_name,
        certificate_authority,
        insecure_skip_tls_verify: insecure,
        client_certificate,
        client_key,
        token,
    })
}

/// The parts of a kubeconfig's cluster picolet uses, checked.
struct ClusterPart {
    server: Server,
    certificate_authority: Option<Material>,
    insecure: bool,
    tls_server_name: Option<String>,
}

/// The current context's cluster: its server, CA and TLS settings.
/// `cf` names a field of it; `path` is the kubeconfig's, for the warning.
fn cluster_part(
    cluster: &RawCluster,
    cf: &dyn Fn(&str) -> String,
    dir: &Path,
    allow_insecure: bool,
    path: &Path,
) -> Result<ClusterPart, FieldError> {
    let fail = |field: String, message: &str| -> FieldError { (field, message.to_string()) };
    let server = match cluster.server.as_deref() {
        Some(s) if !s.is_empty() => parse_server(s).map_err(|m| fail(cf("server"), &m))?,
        _ => return Err(fail(cf("server"), "not set")),
    };
    if cluster.proxy_url.as_deref().is_some_and(|p| !p.is_empty()) {
        return Err(fail(cf("proxy-url"), "proxies are not supported"));
    }
    let certificate_authority = material(
        &cf("certificate-authority"),
        cluster.certificate_authority.as_deref(),
        &cf("certificate-authority-data"),
        cluster.certificate_authority_data.as_deref(),
        dir,
    )?;
    let insecure = cluster.insecure_skip_tls_verify.unwrap_or(false);
    if insecure {
        if certificate_authority.is_some() {
            return Err(fail(
                cf("insecure-skip-tls-verify"),
                "specifying a root certificates file with the insecure flag is not allowed",
            ));
        }
        if !allow_insecure {
            return Err(fail(
                cf("insecure-skip-tls-verify"),
                "is true: the API server's certificate would not be verified, so anyone on the \
                 path could impersonate it; refusing unless explicitly allowed",
            ));
        }
        log::warn!(
            "kubeconfig {}: {}: the API server's certificate is NOT VERIFIED; anyone on the \
             path to {server} can impersonate it and read this node's credentials",
            path.display(),
            cf("insecure-skip-tls-verify"),
        );
    } else if certificate_authority.is_none() {
        return Err(fail(
            cf("certificate-authority-data"),
            "no certificate-authority or certificate-authority-data: picolet ships no system \
             roots, the cluster's CA is required",
        ));
    }
    let tls_server_name = cluster.tls_server_name.clone().filter(|s| !s.is_empty());
    Ok(ClusterPart {
        server,
        certificate_authority,
        insecure,
        tls_server_name,
    })
}

/// The credentials of a kubeconfig's user, checked.
struct UserPart {
    client_certificate: Option<Material>,
    client_key: Option<Material>,
    token: Option<Material>,
}

/// The current context's user: a client certificate and key, a token, or
/// both; what picolet does not support is refused by field.
fn user_part(user: &RawUser, ui: usize, dir: &Path) -> Result<UserPart, FieldError> {
    let fail = |field: String, message: &str| -> FieldError { (field, message.to_string()) };
    let uf = |name: &str| format!("users[{ui}].user.{name}");
    if user.exec {
        return Err(fail(uf("exec"), "credential plugins are not supported"));
    }
    if user.auth_provider {
        return Err(fail(
            uf("auth-provider"),
            "auth providers are not supported",
        ));
    }
    if user.username.as_deref().is_some_and(|u| !u.is_empty()) {
        return Err(fail(
            uf("username"),
            "basic authentication is not supported",
        ));
    }
    let client_certificate = material(
        &uf("client-certificate"),
        user.client_certificate.as_deref(),
        &uf("client-certificate-data"),
        user.client_certificate_data.as_deref(),
        dir,
    )?;
    let client_key = material(
        &uf("client-key"),
        user.client_key.as_deref(),
        &uf("client-key-data"),
        user.client_key_data.as_deref(),
        dir,
    )?;
    match (&client_certificate, &client_key) {
        (Some(_), None) => {
            return Err(fail(
                uf("client-key-data"),
                "client-key-data or client-key must be specified to use the clientCert \
                 authentication method",
            ))
        }
        (None, Some(_)) => {
            return Err(fail(
                uf("client-certificate-data"),
                "client-certificate-data or client-certificate must be specified to use the \
                 clientCert authentication method",
            ))
        }
        _ => {}
    }
    let token = match (user.token_file.as_deref(), user.token.as_deref()) {
        (Some(f), _) if !f.is_empty() => Some(Material {
            field: uf("tokenFile"),
            source: Source::File(dir.join(f)),
        }),
        (_, Some(t)) if !t.is_empty() => Some(Material {
            field: uf("token"),
            source: Source::Data(t.trim().as_bytes().to_vec()),
        }),
        _ => None,
    };
    if client_certificate.is_none() && token.is_none() {
        return Err(fail(
            format!("users[{ui}].user"),
            "no credentials: a client certificate and key, a token or a tokenFile is required",
        ));
    }

    Ok(UserPart {
        client_certificate,
        client_key,
        token,
    })
}

/// A file field and its `-data` twin: at most one may be set.
fn material(
    file_field: &str,
    file: Option<&str>,
    data_field: &str,
    data: Option<&str>,
    dir: &Path,
) -> Result<Option<Material>, (String, String)> {
    let file = file.filter(|s| !s.is_empty());
    let data = data.filter(|s| !s.is_empty());
    match (file, data) {
        (Some(_), Some(_)) => Err((
            data_field.to_string(),
            format!("both {data_field} and {file_field} are set; set one"),
        )),
        (Some(f), None) => Ok(Some(Material {
            field: file_field.to_string(),
            source: Source::File(dir.join(f)),
        })),
        (None, Some(d)) => {
            let compact: String = d.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(compact.as_bytes())
                .map_err(|e| (data_field.to_string(), format!("not valid base64: {e}")))?;
            Ok(Some(Material {
                field: data_field.to_string(),
                source: Source::Data(bytes),
            }))
        }
        (None, None) => Ok(None),
    }
}

/// Parses `https://host[:port][/prefix]`.
fn parse_server(s: &str) -> Result<Server, String> {
    let rest = s
        .strip_prefix("https://")
        .ok_or_else(|| format!("{s:?}: only https:// servers are supported"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(format!(
            "{s:?}: user information in the URL is not supported"
        ));
    }
    if path.contains('?') || path.contains('#') {
        return Err(format!("{s:?}: a query or fragment is not allowed"));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("{s:?}: unterminated IPv6 address"))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("{s:?}: bad port"))?,
            ),
        };
        (h, port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(format!("{s:?}: no host"));
    }
    let port = match port {
        None => 443,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("{s:?}: bad port {p:?}"))?,
    };
    Ok(Server {
        host: host.to_string(),
        port,
        base_path: path.trim_end_matches('/').to_string(),
    })
}

#[cfg(test)]
mod tests;
