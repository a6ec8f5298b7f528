//! The KubeletConfiguration file format: a `kubelet.config.k8s.io/v1beta1`
//! document in YAML (or JSON when it starts with `{`), its type meta, the
//! layers a configuration is built from, and the report of the fields
//! picolet ignores.
//!
//! Layers, lowest first: the board profile (`--board`), the user's file
//! (`--config`), then the flags. Each file layer is checked on its own, so an
//! error names the right file and position; the layers are then merged key
//! by key (nested mappings merge; a field's value, maps such as
//! `evictionHard` included, is replaced whole) and the fields are read from
//! the result. Flags come last, through the same field validators (see
//! `flags.rs`).
//!
//! A key picolet does not implement is not an error: it is reported as an
//! [`UnknownField`], which tells a real kubelet field (`featureGates`) from
//! a likely typo (`maxPodz`) by kubelet's upstream field list.
//!
//! Every layer is outside input: its size, nesting depth and node count
//! (aliases expanded) are bounded before serde parses it
//! ([`crate::decode`], [`Limits::CONFIG`]); a layer over a limit is a
//! syntax error naming the file and position.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::fields::{KubeletConfig, CHECKED_ONLY, FIELDS};
use super::values::show;
use super::{board, ConfigError, Flags};
use crate::decode::{self, LimitError, Limits};

/// The only `apiVersion` picolet accepts.
pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
/// The only `kind` picolet accepts.
pub const KIND: &str = "KubeletConfiguration";

/// Fields whose relative paths are resolved against the directory of the
/// file that sets them, as kubelet does for its `KubeletConfigurationPathRefs`.
const RELATIVE_PATH_FIELDS: &[&str] = &["staticPodPath"];

/// Nested kubelet fields picolet accepts without a warning and without
/// acting on them: kubeadm writes them into every config, and picolet
/// serves no kubelet API they could configure.
const ACCEPTED_UNUSED: &[&str] = &[
    "authentication.webhook.enabled",
    "authentication.webhook.cacheTTL",
    "authentication.x509.clientCAFile",
    "authorization.mode",
    "authorization.webhook.cacheAuthorizedTTL",
    "authorization.webhook.cacheUnauthorizedTTL",
];

/// A validated configuration and what was ignored on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    pub config: KubeletConfig,
    /// Keys picolet ignored, in layer order and, within a layer, in
    /// key order. Warn about each one.
    pub unknown_fields: Vec<UnknownField>,
}

/// A key of a configuration layer that picolet does not implement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    /// The file (or `board:NAME`) that set it.
    pub origin: PathBuf,
    /// Dotted for nested keys: `authentication.foo`.
    pub field: String,
    /// 1-based line of the key in the file, when found (none for a
    /// board profile).
    pub line: Option<usize>,
}

impl UnknownField {
    /// Is this a real kubelet v1beta1 field (judged by its top-level name)
    /// rather than a typo?
    pub fn is_upstream(&self) -> bool {
        is_upstream_field(&self.field)
    }
}

impl UnknownField {
    /// The known key this one most likely misspells (`staticPodPth` →
    /// `staticPodPath`), for a typo; `None` for a real kubelet field or
    /// when no known key is close.
    pub fn did_you_mean(&self) -> Option<&'static str> {
        if self.is_upstream() {
            return None;
        }
        did_you_mean(&self.field)
    }
}

/// The key (or mapping of keys, `authentication.webhook`) picolet knows
/// that is nearest `field` by edit distance, ignoring case, when it is
/// close enough to be a slip: at most one edit in four characters, and at
/// most three.
pub fn did_you_mean(field: &str) -> Option<&'static str> {
    let wanted = field.to_ascii_lowercase();
    let allowed = (field.len() / 4).clamp(1, 3);
    let mut best: Option<(usize, &'static str)> = None;
    let candidates = known_keys().flat_map(|k| {
        k.match_indices('.')
            .map(move |(i, _)| &k[..i])
            .chain(std::iter::once(k))
    });
    for candidate in candidates {
        let d = edit_distance(&wanted, &candidate.to_ascii_lowercase());
        if d <= allowed && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, candidate));
        }
    }
    best.map(|(_, k)| k)
}

/// Edits (insert, delete, substitute, swap two neighbours) from `a` to
/// `b`, by character.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the table: two back (for swaps), one back, this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        std::mem::swap(&mut before, &mut last);
        std::mem::swap(&mut last, &mut row);
    }
    last[b.len()]
}

/// The warning to log, naming the file and the field.
impl fmt::Display for UnknownField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (origin, field) = (self.origin.display(), &self.field);
        let origin = match self.line {
            Some(line) => format!("{origin} line {line}"),
            None => origin.to_string(),
        };
        if self.is_upstream() {
            write!(
                f,
                "{origin}: kubelet field {field:?} is not implemented by picolet; ignoring it"
            )
        } else {
            write!(f, "{origin}: unknown field {field:?} (typo?); ignoring it")
        }
    }
}

/// The configuration `picolet run` starts with: the board profile named by
/// `--board`, then `file` (its path and text, as the caller read it), then
/// the flags. With neither a board nor a file, kubelet's defaults plus the
/// flags.
pub fn resolve(file: Option<(&Path, &str)>, flags: &Flags) -> Result<LoadedConfig, ConfigError> {
    let board_origin;
    let mut layers: Vec<(&str, &Path)> = Vec::with_capacity(2);
    if let Some(name) = flags.get("board") {
        let text = board::profile(name).ok_or_else(|| ConfigError::Flag {
            flag: "--board".to_string(),
            message: board::unknown(name),
        })?;
        board_origin = PathBuf::from(format!("board:{name}"));
        layers.push((text, &board_origin));
    }
    if let Some((path, text)) = file {
        layers.push((text, path));
    }
    let mut loaded = from_layers(&layers)?;
    loaded.config.apply_flags(flags)?;
    Ok(loaded)
}

/// Parses KubeletConfiguration documents, each `(text, origin)` overriding
/// the ones before. `origin` names the layer in errors and warnings.
pub(super) fn from_layers(layers: &[(&str, &Path)]) -> Result<LoadedConfig, ConfigError> {
    let mut merged = Map::new();
    let mut unknown_fields = Vec::new();
    for (text, origin) in layers {
        let layer = read_layer(text, origin, &mut unknown_fields)?;
        merge(&mut merged, layer, "");
    }
    let mut config = KubeletConfig::default();
    if let Some((_, last)) = layers.last() {
        // Every value was validated in its own layer; only the cross-field
        // rules can fail here, and the last layer is the one to fix.
        set_fields(&mut config, &merged, last)?;
        config
            .check_consistency()
            .map_err(|(field, message)| field_error(last, field, message))?;
    }
    Ok(LoadedConfig {
        config,
        unknown_fields,
    })
}

/// One layer: parsed, its type meta checked and removed, its unknown keys
/// recorded, relative paths resolved, and every field validated.
fn read_layer(
    text: &str,
    origin: &Path,
    unknown: &mut Vec<UnknownField>,
) -> Result<Map<String, Value>, ConfigError> {
    let document_error = |message: String| ConfigError::Document {
        path: origin.to_path_buf(),
        message,
    };
    let mut map = match parse_document(text, origin)? {
        Value::Object(map) => map,
        Value::Null => {
            return Err(document_error(format!(
                "the file is empty; expected a {KIND} (apiVersion: {API_VERSION})"
            )))
        }
        other => {
            return Err(document_error(format!(
                "expected a {KIND} mapping at the top level, got {}",
                json_type(&other)
            )))
        }
    };
    check_type_meta(
        &map,
        "kind",
        KIND,
        " (is this a KubeletConfiguration file?)",
    )
    .map_err(|m| field_error(origin, "kind", m))?;
    check_type_meta(&map, "apiVersion", API_VERSION, "")
        .map_err(|m| field_error(origin, "apiVersion", m))?;
    map.remove("kind");
    map.remove("apiVersion");

    let first = unknown.len();
    walk(&map, "", origin, unknown)?;
    // Each unknown key's line, found as a static manifest's are.
    let fields: Vec<String> = unknown[first..].iter().map(|u| u.field.clone()).collect();
    if !fields.is_empty() && !origin.to_string_lossy().starts_with("board:") {
        let lines = decode::unknown::lines_in_text(text, &fields);
        for (u, line) in unknown[first..].iter_mut().zip(lines) {
            u.line = line;
        }
    }
    resolve_relative_paths(&mut map, origin);
    set_fields(&mut KubeletConfig::default(), &map, origin)?;
    Ok(map)
}

/// Reads every file field present (and not null) in `map` into `cfg`.
fn set_fields(
    cfg: &mut KubeletConfig,
    map: &Map<String, Value>,
    origin: &Path,
) -> Result<(), ConfigError> {
    for field in FIELDS.iter().filter(|f| f.in_file) {
        if let Some(v) = lookup(map, field.key) {
            field
                .set(cfg, v)
                .map_err(|m| field_error(origin, field.key, m))?;
        }
    }
    for (key, check) in CHECKED_ONLY {
        if let Some(v) = lookup(map, key) {
            check(v).map_err(|m| field_error(origin, key, m))?;
        }
    }
    Ok(())
}

fn field_error(origin: &Path, field: &str, message: String) -> ConfigError {
    ConfigError::Field {
        path: origin.to_path_buf(),
        field: field.to_string(),
        message,
    }
}

/// The non-null value at a dotted key.
fn lookup<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    let (first, rest) = key.split_once('.').unwrap_or((key, ""));
    let v = map.get(first)?;
    if rest.is_empty() {
        return Some(v).filter(|v| !v.is_null());
    }
    lookup(v.as_object()?, rest)
}

/// Every key a file may set that picolet reads, checks or knowingly
/// accepts, dotted when nested.
fn known_keys() -> impl Iterator<Item = &'static str> {
    FIELDS
        .iter()
        .filter(|f| f.in_file)
        .map(|f| f.key)
        .chain(CHECKED_ONLY.iter().map(|(k, _)| *k))
        .chain(ACCEPTED_UNUSED.iter().copied())
}

/// A known key (`logging.verbosity`, `evictionHard`): its value is the
/// field's, not looked into.
fn is_known_leaf(path: &str) -> bool {
    known_keys().any(|k| k == path)
}

/// A mapping that holds known keys (`logging`, `authentication.webhook`).
fn is_known_branch(path: &str) -> bool {
    known_keys().any(|k| {
        k.strip_prefix(path)
            .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// Records the keys of `map` (at `prefix`) that picolet does not know, and
/// rejects a known mapping given as something else.
fn walk(
    map: &Map<String, Value>,
    prefix: &str,
    origin: &Path,
    unknown: &mut Vec<UnknownField>,
) -> Result<(), ConfigError> {
    for (key, value) in map {
        let path = join(prefix, key);
        if is_known_leaf(&path) {
            continue;
        }
        if !is_known_branch(&path) {
            unknown.push(UnknownField {
                origin: origin.to_path_buf(),
                field: path,
                line: None,
            });
            continue;
        }
        match value {
            Value::Null => {}
            Value::Object(inner) => walk(inner, &path, origin, unknown)?,
            other => {
                return Err(field_error(
                    origin,
                    &path,
                    format!("expected a mapping, got {}", show(other)),
                ))
            }
        }
    }
    Ok(())
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Makes the relative paths of [`RELATIVE_PATH_FIELDS`] absolute against the
/// layer's directory (none for `board:NAME`).
fn resolve_relative_paths(map: &mut Map<String, Value>, origin: &Path) {
    let Some(base) = origin.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return;
    };
    for key in RELATIVE_PATH_FIELDS {
        if let Some(Value::String(s)) = map.get_mut(*key) {
            if !s.is_empty() && Path::new(s.as_str()).is_relative() {
                *s = base.join(s.as_str()).to_string_lossy().into_owned();
            }
        }
    }
}

/// Merges the layer `over` into `base`: mappings key by key, except a known
/// field's value, which is replaced whole (a map such as `evictionHard` on a
/// higher layer replaces the lower one's, as in kubelet).
fn merge(base: &mut Map<String, Value>, over: Map<String, Value>, prefix: &str) {
    for (key, value) in over {
        let path = join(prefix, &key);
        if let (Some(Value::Object(b)), Value::Object(_)) = (base.get_mut(&key), &value) {
            if !is_known_leaf(&path) {
                let Value::Object(o) = value else {
                    unreachable!("matched as an object above")
                };
                merge(b, o, &path);
                continue;
            }
        }
        base.insert(key, value);
    }
}

/// A layer's text as a JSON value, within [`Limits::CONFIG`]: the size,
/// nesting and node count are checked before serde builds anything (see
/// [`crate::decode`]), so a hostile config fails fast with a clear error
/// instead of stalling the start.
fn parse_document(text: &str, origin: &Path) -> Result<Value, ConfigError> {
    let json = text.trim_start().starts_with('{');
    let format = if json { "JSON" } else { "YAML" };
    let checked = if json {
        decode::check_json(text.as_bytes(), &Limits::CONFIG)
    } else {
        decode::check_yaml(text, &Limits::CONFIG)
    };
    checked.map_err(|e| {
        let at = match &e {
            LimitError::TooDeep { at, .. }
            | LimitError::TooManyNodes { at, .. }
            | LimitError::AliasExpansion { at, .. } => Some(*at),
            LimitError::TooLarge { .. } => None,
        };
        ConfigError::Syntax {
            path: origin.to_path_buf(),
            format,
            line: at.map(|a| a.line),
            column: at.map(|a| a.column),
            message: format!("the document {}", strip_position(&e.to_string())),
        }
    })?;
    if json {
        return serde_json::from_str(text).map_err(|e| {
            let (line, column) = (e.line(), e.column());
            let message = e.to_string();
            let suffix = format!(" at line {line} column {column}");
            ConfigError::Syntax {
                path: origin.to_path_buf(),
                format: "JSON",
                line: (line > 0).then_some(line),
                column: (line > 0).then_some(column),
                message: message
                    .strip_suffix(&suffix)
                    .unwrap_or(&message)
                    .to_string(),
            }
        });
    }
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_yaml_ng::from_str(text).map_err(|e| {
        let loc = e.location().map(|l| (l.line(), l.column()));
        let message = e.to_string();
        let message = match loc {
            Some((l, c)) => {
                let suffix = format!(" at line {l} column {c}");
                message
                    .strip_suffix(&suffix)
                    .unwrap_or(&message)
                    .to_string()
            }
            None => message,
        };
        ConfigError::Syntax {
            path: origin.to_path_buf(),
            format: "YAML",
            line: loc.map(|(l, _)| l),
            column: loc.map(|(_, c)| c),
            message,
        }
    })
}

/// A [`LimitError`] message without its `(at line L column C)`: the
/// position goes in the error's own fields.
fn strip_position(message: &str) -> &str {
    match message.rfind(" (at line ") {
        Some(i) => &message[..i],
        None => message,
    }
}

fn check_type_meta(
    map: &Map<String, Value>,
    key: &str,
    want: &str,
    hint: &str,
) -> Result<(), String> {
    match map.get(key) {
        None | Some(Value::Null) => Err(format!("missing; expected {want:?}{hint}")),
        Some(Value::String(s)) if s == want => Ok(()),
        Some(other) => Err(format!("expected {want:?}, got {}{hint}", show(other))),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Is `name` (a top-level field name, or the first segment of a dotted path)
/// a real kubelet v1beta1 KubeletConfiguration field? Lets the warning say
/// "not implemented by picolet" instead of "unknown field (typo?)".
pub(super) fn is_upstream_field(name: &str) -> bool {
    let top = name.split('.').next().unwrap_or(name);
    UPSTREAM_FIELDS.contains(&top)
}

/// The top-level fields of kubelet's v1beta1 `KubeletConfiguration`.
const UPSTREAM_FIELDS: &[&str] = &[
    "enableServer",
    "staticPodPath",
    "podLogsDir",
    "syncFrequency",
    "fileCheckFrequency",
    "httpCheckFrequency",
    "staticPodURL",
    "staticPodURLHeader",
    "address",
    "port",
    "readOnlyPort",
    "tlsCertFile",
    "tlsPrivateKeyFile",
    "tlsCipherSuites",
    "tlsMinVersion",
    "rotateCertificates",
    "serverTLSBootstrap",
    "authentication",
    "authorization",
    "registryPullQPS",
    "registryBurst",
    "imagePullCredentialsVerificationPolicy",
    "preloadedImagesVerificationAllowlist",
    "eventRecordQPS",
    "eventBurst",
    "enableDebuggingHandlers",
    "enableContentionProfiling",
    "healthzPort",
    "healthzBindAddress",
    "oomScoreAdj",
    "clusterDomain",
    "clusterDNS",
    "streamingConnectionIdleTimeout",
    "nodeStatusUpdateFrequency",
    "nodeStatusReportFrequency",
    "nodeLeaseDurationSeconds",
    "imageMinimumGCAge",
    "imageMaximumGCAge",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "volumeStatsAggPeriod",
    "kubeletCgroups",
    "systemCgroups",
    "cgroupRoot",
    "cgroupsPerQOS",
    "cgroupDriver",
    "cpuManagerPolicy",
    "singleProcessOOMKill",
    "cpuManagerPolicyOptions",
    "cpuManagerReconcilePeriod",
    "memoryManagerPolicy",
    "topologyManagerPolicy",
    "topologyManagerScope",
    "topologyManagerPolicyOptions",
    "qosReserved",
    "runtimeRequestTimeout",
    "hairpinMode",
    "maxPods",
    "podCIDR",
    "podPidsLimit",
    "resolvConf",
    "runOnce",
    "cpuCFSQuota",
    "cpuCFSQuotaPeriod",
    "nodeStatusMaxImages",
    "maxOpenFiles",
    "contentType",
    "kubeAPIQPS",
    "kubeAPIBurst",
    "serializeImagePulls",
    "maxParallelImagePulls",
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionPressureTransitionPeriod",
    "evictionMaxPodGracePeriod",
    "evictionMinimumReclaim",
    "mergeDefaultEvictionSettings",
    "podsPerCore",
    "enableControllerAttachDetach",
    "protectKernelDefaults",
    "makeIPTablesUtilChains",
    "iptablesMasqueradeBit",
    "iptablesDropBit",
    "featureGates",
    "failSwapOn",
    "memorySwap",
    "containerLogMaxSize",
    "containerLogMaxFiles",
    "containerLogMaxWorkers",
    "containerLogMonitorInterval",
    "configMapAndSecretChangeDetectionStrategy",
    "systemReserved",
    "kubeReserved",
    "reservedSystemCPUs",
    "showHiddenMetricsForVersion",
    "systemReservedCgroup",
    "kubeReservedCgroup",
    "enforceNodeAllocatable",
    "allowedUnsafeSysctls",
    "volumePluginDir",
    "providerID",
    "kernelMemcgNotification",
    "logging",
    "enableSystemLogHandler",
    "enableSystemLogQuery",
    "shutdownGracePeriod",
    "shutdownGracePeriodCriticalPods",
    "shutdownGracePeriodByPodPriority",
    "crashLoopBackOff",
    "reservedMemory",
    "enableProfilingHandler",
    "enableDebugFlagsHandler",
    "seccompDefault",
    "memoryThrottlingFactor",
    "registerWithTaints",
    "registerNode",
    "tracing",
    "localStorageCapacityIsolation",
    "containerRuntimeEndpoint",
    "imageServiceEndpoint",
    "failCgroupV1",
    "userNamespaces",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<LoadedConfig, ConfigError> {
        from_layers(&[(text, Path::new("/etc/picolet/config.yaml"))])
    }

    #[test]
    fn a_deeply_nested_config_is_refused_with_the_file_and_position() {
        let text = format!(
            "apiVersion: {API_VERSION}\nkind: {KIND}\nfeatureGates: {}{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let err = load(&text).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Syntax {
                    format: "YAML",
                    line: Some(3),
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(
            err.to_string().starts_with("/etc/picolet/config.yaml:3:"),
            "{err}"
        );
        assert!(
            err.to_string()
                .ends_with("invalid YAML: the document nests deeper than 64 levels"),
            "{err}"
        );
        let json = format!("{{\"a\": {}{}}}", "[".repeat(1000), "]".repeat(1000));
        let err = load(&json).unwrap_err();
        assert!(
            matches!(err, ConfigError::Syntax { format: "JSON", .. }),
            "{err:?}"
        );
    }

    #[test]
    fn an_alias_bomb_and_an_oversized_config_are_refused() {
        let mut bomb = format!(
            "apiVersion: {API_VERSION}\nkind: {KIND}\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
        );
        for (n, prev) in ["b", "c", "d", "e", "f", "g"]
            .iter()
            .zip(["a", "b", "c", "d", "e", "f"])
        {
            bomb.push_str(&format!(
                "{n}: &{n} [{}]\n",
                vec![format!("*{prev}"); 10].join(", ")
            ));
        }
        let err = load(&bomb).unwrap_err().to_string();
        assert!(
            err.contains("the document expands aliases to more than"),
            "{err}"
        );
        let huge = format!("# {}\n", "x".repeat(Limits::CONFIG.max_bytes));
        let err = load(&huge).unwrap_err().to_string();
        assert!(err.contains("over the 262144-byte limit"), "{err}");
    }
}
