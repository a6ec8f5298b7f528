//! The service-account tokens of the node's pods: the task sending
//! TokenRequests as the pure [`Manager`] decides, the 0600 token cache, and
//! the agent's lookup of a projected `serviceAccountToken` source.
//!
//! - [`TokenSync::track`] is told every pod set the API source hands the
//!   agent ([`WithTokens`] wraps the source, so tokens are tracked before
//!   the agent sees the pods): new keys are requested at once, keys of
//!   pods gone are forgotten with their cached copies.
//! - [`TokenSync::run`] POSTs `serviceaccounts/<sa>/token` (audience,
//!   expiry, bound to the pod) when a key is due: at once, then at 80 % of
//!   the lifetime the API server granted or after 24 h, with back-off on
//!   failure. While the API server is unreachable, the first failure of a
//!   round backs off the whole round (a board offline does not wait a
//!   deadline per pod). Each new token wakes its pod, whose next sync
//!   rewrites the volume with the atomic writer (no restart).
//! - The cache: `<root>/apiserver/tokens/` (0700), one 0600 file per pod
//!   UID with that pod's tokens, written atomically. At start the cached
//!   tokens still valid are handed to the manager as their pods are
//!   tracked, so a reboot offline restores the volumes until the tokens
//!   expire; expired ones are dropped, and files of pods no longer on the
//!   node are removed once the pod set is authoritative.
//! - [`ApiObjects`]: the agent's [`ConfigObjects`]: ConfigMaps and Secrets
//!   from [`ConfigWatches`], tokens from here.
//!
//! A token's value is never logged, not even at the highest verbosity:
//! log lines name the pod, service account and audience only.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use http::Method;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccountTokenProjection};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use smol::channel::{Receiver, Sender};

use super::configs::ConfigWatches;
use super::tokens::{self, Manager, Token, TokenKey, TokenLookup, TokenReplyError};
use crate::apiserver::client::request::ApiError;
use crate::apiserver::client::transport::{Body, Client, TransportError};
use crate::pod::config_objects::{ConfigObjects, Lookup};
use crate::rt;
use crate::source::{PodSource, Source, SourceUpdate};

/// A TokenRequest reply is a few KiB; error replies are cut at this.
const REPLY_LIMIT: usize = 64 * 1024;
const REQUEST_DEADLINE: Duration = Duration::from_secs(30);
/// The longest the task sleeps without looking at the clock again (the
/// wall clock may jump on a board without RTC).
const MAX_SLEEP: Duration = Duration::from_secs(600);
/// A pod's cache file is at most this big (a handful of tokens).
const CACHE_FILE_LIMIT: u64 = 256 * 1024;

/// Why a TokenRequest gave no token.
#[derive(Debug, thiserror::Error)]
pub enum TokenRequestError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("POST {path}: {source}")]
    Api { path: String, source: ApiError },
    #[error("POST {path}: {source}")]
    Reply {
        path: String,
        source: TokenReplyError,
    },
}

/// The directory of the token cache (under `--root-dir`).
pub fn cache_dir(root_dir: &Path) -> PathBuf {
    root_dir.join("apiserver").join("tokens")
}

/// One cached token. No `Debug`: it holds the token.
#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Cached {
    key: TokenKey,
    token: String,
    /// Unix seconds.
    requested_at: i64,
    expires_at: i64,
}

/// Called with a pod's UID when one of its tokens changed.
pub type OnTokenChange = Rc<dyn Fn(&str)>;

/// The service-account tokens of the node's pods and their task.
pub struct TokenSync {
    client: Client,
    dir: PathBuf,
    manager: RefCell<Manager>,
    /// Valid tokens read from the cache, until their keys are tracked.
    cached: RefCell<BTreeMap<TokenKey, Token>>,
    /// Pod UIDs with tracked keys (their cache files are kept).
    uids: RefCell<BTreeSet<String>>,
    /// Cache files of pods not on the node were removed once.
    swept: Cell<bool>,
    wake_tx: Sender<()>,
    wake_rx: Receiver<()>,
    on_change: RefCell<Option<OnTokenChange>>,
    /// The last error logged per key (logged again only when it changes).
    errors: RefCell<BTreeMap<TokenKey, String>>,
}

impl TokenSync {
    /// The tokens for the pods of this node, with the cache under
    /// `root_dir` read now (expired tokens dropped).
    pub fn new(client: Client, root_dir: &Path) -> Rc<TokenSync> {
        let dir = cache_dir(root_dir);
        let cached = read_cache(&dir, wall_clock());
        if !cached.is_empty() {
            log::info!(
                "token cache {}: {} valid tokens",
                dir.display(),
                cached.len()
            );
        }
        let (wake_tx, wake_rx) = smol::channel::bounded(1);
        Rc::new(TokenSync {
            client,
            dir,
            manager: RefCell::new(Manager::new()),
            cached: RefCell::new(cached),
            uids: RefCell::new(BTreeSet::new()),
            swept: Cell::new(false),
            wake_tx,
            wake_rx,
            on_change: RefCell::new(None),
            errors: RefCell::new(BTreeMap::new()),
        })
    }

    /// Calls `f` with a pod's UID whenever one of its tokens changes.
    pub fn set_on_change(&self, f: OnTokenChange) {
        *self.on_change.borrow_mut() = Some(f);
    }

    /// The tokens `pods` need from now on: new ones are requested, those
    /// of pods gone are forgotten (memory and cache). An `authoritative`
    /// set also removes the cache files of pods that went while picolet
    /// was down.
    pub fn track(&self, pods: &[impl std::borrow::Borrow<Pod>], authoritative: bool) {
        let wanted: Vec<TokenKey> = pods
            .iter()
            .flat_map(|p| tokens::keys_of(p.borrow()))
            .collect();
        let now_uids: BTreeSet<String> = wanted.iter().map(|k| k.pod_uid.clone()).collect();
        let now = wall_clock();
        {
            let mut m = self.manager.borrow_mut();
            m.track(wanted.iter().cloned());
            let mut cached = self.cached.borrow_mut();
            for k in &wanted {
                if let Some(t) = cached.remove(k) {
                    m.restore(k, t, now);
                }
            }
        }
        let gone: Vec<String> = self.uids.borrow().difference(&now_uids).cloned().collect();
        for uid in &gone {
            self.errors.borrow_mut().retain(|k, _| &k.pod_uid != uid);
            remove_file(&self.dir.join(uid));
        }
        *self.uids.borrow_mut() = now_uids;
        if authoritative && !self.swept.replace(true) {
            self.cached.borrow_mut().clear();
            self.sweep();
        }
        let _ = self.wake_tx.try_send(());
    }

    /// Removes the cache files of pods without tracked keys.
    fn sweep(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let uids = self.uids.borrow();
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !uids.contains(&name) {
                remove_file(&e.path());
            }
        }
    }

    /// The token of one projected source of `pod`, if one is valid now.
    pub fn lookup(&self, pod: &Pod, src: &ServiceAccountTokenProjection) -> Lookup<str> {
        let Some(key) = tokens::key_for(pod, src) else {
            return Lookup::NotYetKnown;
        };
        match self.manager.borrow().lookup(&key, wall_clock()) {
            TokenLookup::Found(t) => Lookup::Found(t.value),
            TokenLookup::NotYetKnown => Lookup::NotYetKnown,
        }
    }

    /// Requests the tokens that are due, forever.
    pub async fn run(self: Rc<Self>) {
        loop {
            let now = wall_clock();
            let due = self.manager.borrow_mut().take_due(now);
            let mut unreachable = false;
            for key in due {
                if unreachable {
                    self.manager.borrow_mut().failed(&key, now);
                    continue;
                }
                let requested_at = wall_clock();
                match self.request(&key, requested_at).await {
                    Ok(token) => self.succeeded(&key, token),
                    Err(e) => {
                        unreachable = matches!(e, TokenRequestError::Transport(_));
                        self.manager.borrow_mut().failed(&key, wall_clock());
                        self.failed(&key, &e);
                    }
                }
            }
            let next = self.manager.borrow().next_due();
            let wait = next.map(|at| {
                let d = at.duration_since(wall_clock());
                Duration::try_from(d)
                    .unwrap_or(Duration::ZERO)
                    .min(MAX_SLEEP)
            });
            match wait {
                Some(d) if d.is_zero() => {}
                Some(d) => {
                    smol::future::or(rt::sleep(d), async {
                        let _ = self.wake_rx.recv().await;
                    })
                    .await
                }
                None => {
                    let _ = self.wake_rx.recv().await;
                }
            }
        }
    }

    /// One TokenRequest.
    async fn request(
        &self,
        key: &TokenKey,
        requested_at: Timestamp,
    ) -> Result<Token, TokenRequestError> {
        let path = tokens::request_path(key);
        let body = Body {
            content_type: "application/json",
            bytes: serde_json::to_vec(&tokens::request_body(key)).unwrap_or_default(),
        };
        let r = self
            .client
            .request(
                Method::POST,
                &path,
                Some(body),
                REPLY_LIMIT,
                REQUEST_DEADLINE,
            )
            .await?;
        if !r.status.is_success() {
            return Err(TokenRequestError::Api {
                source: ApiError::from_reply(r.status.as_u16(), &r.body),
                path,
            });
        }
        tokens::decode_reply(&r.body, requested_at)
            .map_err(|source| TokenRequestError::Reply { path, source })
    }

    fn succeeded(&self, key: &TokenKey, token: Token) {
        let expires = token.expires_at;
        if !self.manager.borrow_mut().succeeded(key, token) {
            return; // The pod went meanwhile.
        }
        if self.errors.borrow_mut().remove(key).is_some() {
            log::info!("{key}: issued again");
        }
        log::debug!("{key}: issued, valid until {expires}");
        if let Err(e) = self.save(&key.pod_uid) {
            log::warn!("token cache: {e}; the token is kept in memory only");
        }
        let f = self.on_change.borrow().clone();
        if let Some(f) = f {
            f(&key.pod_uid);
        }
    }

    /// Logs a failure when it is new, and not while the link is down (the
    /// transport reports that outage once).
    fn failed(&self, key: &TokenKey, e: &TokenRequestError) {
        if self.client.link().is_down() {
            return;
        }
        let text = e.to_string();
        let mut errors = self.errors.borrow_mut();
        if errors.get(key) != Some(&text) {
            log::warn!("{key}: failed to fetch token: {text}; retrying with back-off");
            errors.insert(key.clone(), text);
        }
    }

    /// Writes the pod's tokens to its 0600 cache file (atomically).
    fn save(&self, uid: &str) -> Result<(), String> {
        if !safe_file_name(uid) {
            return Ok(());
        }
        let entries: Vec<Cached> = self
            .manager
            .borrow()
            .tokens()
            .filter(|(k, _)| k.pod_uid == uid)
            .map(|(k, t)| Cached {
                key: k.clone(),
                token: t.value.to_string(),
                requested_at: t.requested_at.as_second(),
                expires_at: t.expires_at.as_second(),
            })
            .collect();
        let bytes = serde_json::to_vec(&entries).map_err(|e| e.to_string())?;
        private_dir(&self.dir)?;
        write_private(&self.dir.join(uid), &bytes)
    }
}

/// The agent's lookup of API pods' objects: ConfigMaps and Secrets from
/// their watches, tokens from the [`TokenSync`].
pub struct ApiObjects {
    pub configs: Rc<ConfigWatches>,
    pub tokens: Rc<TokenSync>,
}

impl ConfigObjects for ApiObjects {
    fn config_map(&self, namespace: &str, name: &str) -> Lookup<ConfigMap> {
        self.configs.config_map(namespace, name)
    }

    fn secret(&self, namespace: &str, name: &str) -> Lookup<Secret> {
        self.configs.secret(namespace, name)
    }

    fn service_account_token(&self, pod: &Pod, src: &ServiceAccountTokenProjection) -> Lookup<str> {
        self.tokens.lookup(pod, src)
    }
}

/// A pod source whose every set is tracked for tokens before the agent
/// sees it.
pub struct WithTokens<S> {
    pub source: S,
    pub tokens: Rc<TokenSync>,
}

impl<S: Source> Source for WithTokens<S> {
    fn kind(&self) -> PodSource {
        self.source.kind()
    }

    async fn next(&mut self) -> SourceUpdate {
        let update = self.source.next().await;
        self.tokens.track(&update.pods, update.authoritative);
        update
    }
}

/// The wall clock as API time.
fn wall_clock() -> Timestamp {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp::new(d.as_secs() as i64, d.subsec_nanos() as i32).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A pod UID as a file name: letters, digits and `-` only.
fn safe_file_name(uid: &str) -> bool {
    !uid.is_empty()
        && uid.len() <= 64
        && uid.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The valid tokens of every cache file; files that hold none (all
/// expired, unreadable) are removed. Never formats a file's content.
fn read_cache(dir: &Path, now: Timestamp) -> BTreeMap<TokenKey, Token> {
    let mut out = BTreeMap::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let path = e.path();
        let uid = e.file_name().to_string_lossy().into_owned();
        let entries = if safe_file_name(&uid) {
            read_file(&path)
        } else {
            None
        };
        let Some(entries) = entries else {
            log::warn!("token cache {}: unreadable; removed", path.display());
            remove_file(&path);
            continue;
        };
        let mut kept = 0;
        for c in entries.into_iter().filter(|c| c.key.pod_uid == uid) {
            let (Ok(requested_at), Ok(expires_at)) = (
                Timestamp::from_second(c.requested_at),
                Timestamp::from_second(c.expires_at),
            ) else {
                continue;
            };
            let t = Token {
                value: c.token.into(),
                requested_at,
                expires_at,
            };
            if !t.is_expired(now) && !t.value.is_empty() {
                out.insert(c.key, t);
                kept += 1;
            }
        }
        if kept == 0 {
            remove_file(&path);
        }
    }
    out
}

fn read_file(path: &Path) -> Option<Vec<Cached>> {
    let meta = fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > CACHE_FILE_LIMIT {
        return None;
    }
    let text = fs::read_to_string(path).ok()?;
    // The error is dropped: its message may quote the file's content.
    serde_json::from_str(&text).ok()
}

/// Creates `dir` (and parents) with `dir` itself 0700.
fn private_dir(dir: &Path) -> Result<(), String> {
    crate::apiserver::listwatch::disk_cache::private_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// Writes `path` with mode 0600, atomically (see
/// [`write_atomically`](crate::apiserver::listwatch::disk_cache::write_atomically)).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    crate::apiserver::listwatch::disk_cache::write_atomically(path, &tmp, bytes, 0o600)
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn remove_file(path: &Path) {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log::warn!("removing {}: {e}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn pod(name: &str, uid: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "team", "uid": uid},
            "spec": {"containers": [], "volumes": [
                {"name": "kube-api-access-x", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}
                ]}}
            ]}
        }))
        .unwrap()
    }

    fn src() -> ServiceAccountTokenProjection {
        ServiceAccountTokenProjection {
            path: "token".into(),
            expiration_seconds: Some(3607),
            audience: None,
        }
    }

    fn key(name: &str, uid: &str) -> TokenKey {
        tokens::key_for(&pod(name, uid), &src()).unwrap()
    }

    fn token(value: &str, expires_in: i64) -> Token {
        let now = wall_clock();
        Token {
            value: value.into(),
            requested_at: now,
            expires_at: Timestamp::from_second(now.as_second() + expires_in).unwrap(),
        }
    }

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_token_is_cached_root_only_and_restored_after_a_restart_while_valid() {
        let tmp = tempfile::tempdir().unwrap();
        let a = pod("a", "uid-a");
        let t = TokenSync::new(Client::unreachable(), tmp.path());
        t.track(std::slice::from_ref(&a), true);
        assert!(matches!(t.lookup(&a, &src()), Lookup::NotYetKnown));
        t.manager.borrow_mut().take_due(wall_clock());
        t.succeeded(&key("a", "uid-a"), token("secret-jwt-a", 600));
        assert!(matches!(t.lookup(&a, &src()), Lookup::Found(v) if &*v == "secret-jwt-a"));
        let dir = cache_dir(tmp.path());
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("uid-a")), 0o600);

        // A restart: the cached token is back as soon as its pod is tracked.
        let again = TokenSync::new(Client::unreachable(), tmp.path());
        assert!(matches!(again.lookup(&a, &src()), Lookup::NotYetKnown));
        again.track(std::slice::from_ref(&a), false);
        assert!(matches!(again.lookup(&a, &src()), Lookup::Found(v) if &*v == "secret-jwt-a"));
    }

    #[test]
    fn a_new_token_wakes_its_pod_and_a_late_one_for_a_pod_gone_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let t = TokenSync::new(Client::unreachable(), tmp.path());
        let woken = Rc::new(RefCell::new(Vec::<String>::new()));
        t.set_on_change({
            let woken = woken.clone();
            Rc::new(move |uid| woken.borrow_mut().push(uid.to_string()))
        });
        t.track(&[pod("a", "uid-a"), pod("b", "uid-b")], true);
        t.manager.borrow_mut().take_due(wall_clock());
        t.succeeded(&key("a", "uid-a"), token("jwt-a", 600));
        t.track(&[pod("a", "uid-a")], true);
        t.succeeded(&key("b", "uid-b"), token("jwt-b", 600));
        assert_eq!(*woken.borrow(), ["uid-a"]);
        assert!(!cache_dir(tmp.path()).join("uid-b").exists());
    }

    #[test]
    fn an_expired_cached_token_is_dropped_with_its_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = cache_dir(tmp.path());
        private_dir(&dir).unwrap();
        let k = key("a", "uid-a");
        let stale = Cached {
            key: k.clone(),
            token: "old-jwt".into(),
            requested_at: wall_clock().as_second() - 4000,
            expires_at: wall_clock().as_second() - 10,
        };
        write_private(&dir.join("uid-a"), &serde_json::to_vec(&[stale]).unwrap()).unwrap();
        fs::write(dir.join("not a uid"), b"junk").unwrap();
        let t = TokenSync::new(Client::unreachable(), tmp.path());
        assert!(t.cached.borrow().is_empty());
        assert!(!dir.join("uid-a").exists());
        assert!(!dir.join("not a uid").exists());
    }

    #[test]
    fn a_deleted_pods_tokens_are_forgotten_in_memory_and_on_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (pod("a", "uid-a"), pod("b", "uid-b"));
        let t = TokenSync::new(Client::unreachable(), tmp.path());
        t.track(&[a.clone(), b.clone()], true);
        t.manager.borrow_mut().take_due(wall_clock());
        t.succeeded(&key("a", "uid-a"), token("jwt-a", 600));
        t.succeeded(&key("b", "uid-b"), token("jwt-b", 600));
        let dir = cache_dir(tmp.path());
        assert!(dir.join("uid-a").exists() && dir.join("uid-b").exists());
        t.track(std::slice::from_ref(&b), true);
        assert!(matches!(t.lookup(&a, &src()), Lookup::NotYetKnown));
        assert!(!dir.join("uid-a").exists());
        assert!(matches!(t.lookup(&b, &src()), Lookup::Found(_)));
        // The cache holds b's token; a's value is nowhere.
        let text = fs::read_to_string(dir.join("uid-b")).unwrap();
        assert!(text.contains("jwt-b") && !text.contains("jwt-a"));
    }

    #[test]
    fn the_first_authoritative_set_removes_caches_of_pods_that_went_while_down() {
        let tmp = tempfile::tempdir().unwrap();
        let a = pod("a", "uid-a");
        let first = TokenSync::new(Client::unreachable(), tmp.path());
        first.track(std::slice::from_ref(&a), true);
        first.manager.borrow_mut().take_due(wall_clock());
        first.succeeded(&key("a", "uid-a"), token("jwt-a", 600));
        let dir = cache_dir(tmp.path());
        let t = TokenSync::new(Client::unreachable(), tmp.path());
        // The cached (non-authoritative) set is empty: nothing removed yet.
        t.track(&[] as &[Pod], false);
        assert!(dir.join("uid-a").exists());
        t.track(&[] as &[Pod], true);
        assert!(!dir.join("uid-a").exists());
    }

    #[test]
    fn a_failed_request_is_logged_by_pod_and_account_never_with_a_token() {
        let k = key("a", "uid-a");
        let e = TokenRequestError::Api {
            path: tokens::request_path(&k),
            source: ApiError::from_reply(
                403,
                b"{\"kind\":\"Status\",\"reason\":\"Forbidden\",\"message\":\"no\"}",
            ),
        };
        let line = format!("{k}: failed to fetch token: {e}");
        assert_eq!(
            line,
            "token of pod team/a (serviceaccount default, audience default, 3607 s): failed to fetch token: POST /api/v1/namespaces/team/serviceaccounts/default/token: 403 Forbidden: no"
        );
    }
}
