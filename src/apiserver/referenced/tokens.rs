//! Pure: the service-account token manager, deciding when each projected
//! `serviceAccountToken` is requested and refreshed through the
//! TokenRequest API, and what the TokenRequest looks like on the wire.
//!
//! - [`TokenKey`]: one token a pod needs: its service account, the
//!   audience and expiry asked for, and the pod it is bound to (the Node
//!   authorizer lets a node create tokens only for its own pods' service
//!   accounts, with the pod as bound object).
//! - [`keys_of`]: the keys a pod's projected volumes need (service
//!   account `default` when unset, expiry 3600 s when unset, no audience
//!   meaning the API server's default ones).
//! - [`Manager`]: per key, the last token and when to ask again. A token
//!   is refreshed at 80 % of its lifetime or 24 h after it was requested,
//!   whichever comes first (kubelet's token manager rule); the lifetime is
//!   the one the API server returned (`status.expirationTimestamp`), which
//!   may differ from the one asked for. After a failure the request is
//!   retried with a doubling back-off (1 s .. 5 min). The last token stays
//!   usable until it expires: offline, the volume keeps it.
//! - [`request_path`], [`request_body`], [`decode_reply`]: the POST to
//!   `/api/v1/namespaces/<ns>/serviceaccounts/<sa>/token`, written with
//!   `serde_json::json!` and decoded through a two-field struct (no
//!   authentication.k8s.io serde in the binary).
//!
//! No I/O, no clock, no logging: time comes in as a [`Timestamp`]
//! argument (wall-clock, as a token's expiry is). A token's value is
//! never formatted ([`Token`] has no `Debug`).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, ServiceAccountTokenProjection};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// The expiry asked for when the projection gives none (kubelet's default).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// A token is refreshed at the latest this long after it was requested.
pub const MAX_TOKEN_AGE: Duration = Duration::from_secs(24 * 3600);
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// One token a pod needs (one per distinct projection). Serialized as the
/// token cache's key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenKey {
    pub namespace: String,
    pub service_account: String,
    /// `None`: the API server's default audiences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    pub expiration_seconds: i64,
    pub pod_name: String,
    pub pod_uid: String,
}

/// A token the API server issued. Its value is never formatted.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub value: Rc<str>,
    /// When it was asked for (the start of its lifetime for the 80 % rule).
    pub requested_at: Timestamp,
    /// `status.expirationTimestamp` of the reply.
    pub expires_at: Timestamp,
}

impl std::fmt::Display for TokenKey {
    /// For log lines: whose token, never the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "token of pod {}/{} (serviceaccount {}, audience {}, {} s)",
            self.namespace,
            self.pod_name,
            self.service_account,
            self.audience.as_deref().unwrap_or("default"),
            self.expiration_seconds
        )
    }
}

impl std::fmt::Debug for Token {
    /// Times only: the value must not reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("requested_at", &self.requested_at)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

impl Token {
    /// kubelet's rule: refresh at 80 % of the lifetime, or after 24 h.
    pub fn refresh_at(&self) -> Timestamp {
        let life = self.expires_at.duration_since(self.requested_at);
        let life = if life.is_negative() {
            SignedDuration::ZERO
        } else {
            life
        };
        let eighty = life.mul_f64(0.8);
        let cap = SignedDuration::try_from(MAX_TOKEN_AGE).expect("24 h fits");
        let wait = if eighty < cap { eighty } else { cap };
        self.requested_at
            .saturating_add(wait)
            .expect("a signed duration adds")
    }

    pub fn is_expired(&self, now: Timestamp) -> bool {
        now >= self.expires_at
    }
}

/// What is known of one key's token, for the payload code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenLookup {
    Found(Token),
    /// Never obtained, or the last one has expired: the container waits.
    NotYetKnown,
}

#[derive(Default)]
struct Entry {
    token: Option<Token>,
    /// A request is in flight since then.
    in_flight: bool,
    failures: u32,
    retry_at: Option<Timestamp>,
}

/// The token manager's state over every tracked key.
#[derive(Default)]
pub struct Manager {
    entries: BTreeMap<TokenKey, Entry>,
}

impl Manager {
    pub fn new() -> Self {
        Self::default()
    }

    /// The keys wanted now (from the node's pods): new keys are added,
    /// keys no longer wanted are dropped with their tokens. Returns the
    /// dropped keys (their cached copies should go too).
    pub fn track(&mut self, wanted: impl IntoIterator<Item = TokenKey>) -> Vec<TokenKey> {
        let wanted: std::collections::BTreeSet<TokenKey> = wanted.into_iter().collect();
        let gone: Vec<TokenKey> = self
            .entries
            .keys()
            .filter(|k| !wanted.contains(*k))
            .cloned()
            .collect();
        for k in &gone {
            self.entries.remove(k);
        }
        for k in wanted {
            self.entries.entry(k).or_default();
        }
        gone
    }

    /// A token restored from the cache (after a reboot). Kept only if the
    /// key is tracked, the token still valid and newer than what is known.
    pub fn restore(&mut self, key: &TokenKey, token: Token, now: Timestamp) {
        if token.is_expired(now) {
            return;
        }
        if let Some(e) = self.entries.get_mut(key) {
            let newer = e
                .token
                .as_ref()
                .is_none_or(|t| t.expires_at < token.expires_at);
            if newer {
                e.token = Some(token);
            }
        }
    }

    pub fn lookup(&self, key: &TokenKey, now: Timestamp) -> TokenLookup {
        match self.entries.get(key).and_then(|e| e.token.as_ref()) {
            Some(t) if !t.is_expired(now) => TokenLookup::Found(t.clone()),
            _ => TokenLookup::NotYetKnown,
        }
    }

    /// The tokens held, by key (for the token cache).
    pub fn tokens(&self) -> impl Iterator<Item = (&TokenKey, &Token)> {
        self.entries
            .iter()
            .filter_map(|(k, e)| e.token.as_ref().map(|t| (k, t)))
    }

    /// When `key` is due for a (re)quest, if it is tracked and idle.
    fn due_at(e: &Entry) -> Option<Timestamp> {
        if e.in_flight {
            return None;
        }
        let by_token = e.token.as_ref().map(Token::refresh_at);
        match (by_token, e.retry_at) {
            (None, None) => Some(Timestamp::MIN),
            (Some(t), None) => Some(t),
            // A failure happens only once due, so the back-off is later
            // than the token's refresh point: it rules.
            (_, Some(r)) => Some(r),
        }
    }

    /// The keys to request now; each is marked in flight until
    /// [`Manager::succeeded`] or [`Manager::failed`].
    pub fn take_due(&mut self, now: Timestamp) -> Vec<TokenKey> {
        let mut out = Vec::new();
        for (k, e) in self.entries.iter_mut() {
            if Self::due_at(e).is_some_and(|at| at <= now) {
                e.in_flight = true;
                out.push(k.clone());
            }
        }
        out
    }

    /// The earliest time something becomes due (for the task's timer).
    pub fn next_due(&self) -> Option<Timestamp> {
        self.entries.values().filter_map(Self::due_at).min()
    }

    /// The API server answered with a token. Returns false if the key was
    /// dropped meanwhile (the token is then thrown away).
    pub fn succeeded(&mut self, key: &TokenKey, token: Token) -> bool {
        match self.entries.get_mut(key) {
            Some(e) => {
                e.in_flight = false;
                e.failures = 0;
                e.retry_at = None;
                e.token = Some(token);
                true
            }
            None => false,
        }
    }

    /// The request failed (offline, refused): retry after a doubling
    /// back-off. The last token stays usable until it expires.
    pub fn failed(&mut self, key: &TokenKey, now: Timestamp) {
        if let Some(e) = self.entries.get_mut(key) {
            e.in_flight = false;
            let shift = e.failures.min(16);
            let wait = FIRST_BACKOFF.saturating_mul(1u32 << shift).min(MAX_BACKOFF);
            e.failures = e.failures.saturating_add(1);
            let wait = SignedDuration::try_from(wait).expect("back-off fits");
            e.retry_at = Some(now.saturating_add(wait).expect("a signed duration adds"));
        }
    }
}

/// The service account a pod runs as (`default` when unset).
pub fn service_account_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.service_account_name.as_deref())
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
}

/// The key of one projected `serviceAccountToken` source of `pod`.
pub fn key_for(pod: &Pod, src: &ServiceAccountTokenProjection) -> Option<TokenKey> {
    let meta = &pod.metadata;
    Some(TokenKey {
        namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
        service_account: service_account_of(pod).to_string(),
        audience: src.audience.clone().filter(|a| !a.is_empty()),
        expiration_seconds: src.expiration_seconds.unwrap_or(DEFAULT_EXPIRATION_SECONDS),
        pod_name: meta.name.clone()?,
        pod_uid: meta.uid.clone()?,
    })
}

/// Every token `pod`'s projected volumes need (what [`Manager::track`]
/// is fed with). A pod without name or uid (not from the API) has none.
pub fn keys_of(pod: &Pod) -> Vec<TokenKey> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref());
    let mut out: Vec<TokenKey> = volumes
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.projected.as_ref())
        .flat_map(|p| p.sources.iter().flatten())
        .filter_map(|s| s.service_account_token.as_ref())
        .filter_map(|s| key_for(pod, s))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The TokenRequest's path (`serviceaccounts/<sa>/token` subresource).
pub fn request_path(key: &TokenKey) -> String {
    format!(
        "/api/v1/namespaces/{}/serviceaccounts/{}/token",
        key.namespace, key.service_account
    )
}

/// The authentication.k8s.io/v1 TokenRequest body, bound to the pod.
pub fn request_body(key: &TokenKey) -> serde_json::Value {
    let audiences: Vec<&str> = key.audience.as_deref().into_iter().collect();
    serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": audiences,
            "expirationSeconds": key.expiration_seconds,
            "boundObjectRef": {
                "kind": "Pod",
                "apiVersion": "v1",
                "name": key.pod_name,
                "uid": key.pod_uid,
            },
        },
    })
}

/// A TokenRequest reply that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenReplyError {
    #[error("TokenRequest reply: not a TokenRequest with status.token and status.expirationTimestamp: {0}")]
    Decode(#[source] serde_json::Error),
    #[error("TokenRequest reply: status.token is empty")]
    Empty,
}

#[derive(Deserialize)]
struct Reply {
    status: ReplyStatus,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReplyStatus {
    token: String,
    expiration_timestamp: Timestamp,
}

/// The token and its expiry from a TokenRequest reply.
pub fn decode_reply(body: &[u8], requested_at: Timestamp) -> Result<Token, TokenReplyError> {
    let r: Reply = serde_json::from_slice(body).map_err(|e| {
        // serde_json's message names positions and types, never the value.
        TokenReplyError::Decode(e)
    })?;
    if r.status.token.is_empty() {
        return Err(TokenReplyError::Empty);
    }
    Ok(Token {
        value: r.status.token.into(),
        requested_at,
        expires_at: r.status.expiration_timestamp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn key(name: &str) -> TokenKey {
        TokenKey {
            namespace: "default".into(),
            service_account: "default".into(),
            audience: None,
            expiration_seconds: DEFAULT_EXPIRATION_SECONDS,
            pod_name: name.into(),
            pod_uid: format!("uid-{name}"),
        }
    }

    fn token(requested: i64, expires: i64) -> Token {
        Token {
            value: "header.payload.sig".into(),
            requested_at: t(requested),
            expires_at: t(expires),
        }
    }

    #[test]
    fn a_token_is_refreshed_at_eighty_percent_of_its_lifetime_or_after_a_day() {
        // (requested, expires, refresh at)
        let table = [
            (0, 3600, 2880),
            (100, 700, 580),
            (0, 48 * 3600, 24 * 3600),
            (0, 30 * 3600, 24 * 3600),
            (0, 20 * 3600, 16 * 3600),
            // An expiry before the request (clock skew): refresh at once.
            (50, 10, 50),
        ];
        for (req, exp, want) in table {
            assert_eq!(token(req, exp).refresh_at(), t(want), "{req} {exp}");
        }
    }

    #[test]
    fn a_new_key_is_requested_at_once_and_not_twice_while_in_flight() {
        let mut m = Manager::new();
        m.track([key("a")]);
        assert_eq!(m.lookup(&key("a"), t(0)), TokenLookup::NotYetKnown);
        assert_eq!(m.take_due(t(0)), vec![key("a")]);
        assert!(m.take_due(t(1)).is_empty());
        assert_eq!(m.next_due(), None);
    }

    #[test]
    fn the_api_servers_expiry_decides_the_refresh_not_the_one_asked_for() {
        let mut m = Manager::new();
        m.track([key("a")]);
        m.take_due(t(0));
        // Asked for 3600 s, the server gave 7200 s.
        assert!(m.succeeded(&key("a"), token(0, 7200)));
        assert!(matches!(m.lookup(&key("a"), t(10)), TokenLookup::Found(_)));
        assert_eq!(m.next_due(), Some(t(5760)));
        assert!(m.take_due(t(5759)).is_empty());
        assert_eq!(m.take_due(t(5760)), vec![key("a")]);
    }

    #[test]
    fn failures_back_off_doubling_up_to_five_minutes_and_the_old_token_stays_until_it_expires() {
        let mut m = Manager::new();
        m.track([key("a")]);
        m.take_due(t(0));
        m.succeeded(&key("a"), token(0, 1000));
        assert_eq!(m.take_due(t(800)), vec![key("a")]);
        let mut now = 800;
        let mut waits = Vec::new();
        for _ in 0..10 {
            m.failed(&key("a"), t(now));
            let next = m.next_due().unwrap();
            let wait = next.as_second() - t(now).as_second();
            waits.push(wait);
            now += wait;
            assert_eq!(m.take_due(t(now)), vec![key("a")]);
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);
        // Offline past the expiry: the token is no longer handed out.
        assert!(matches!(m.lookup(&key("a"), t(999)), TokenLookup::Found(_)));
        assert_eq!(m.lookup(&key("a"), t(1000)), TokenLookup::NotYetKnown);
        // Success resets the back-off.
        m.succeeded(&key("a"), token(now, now + 1000));
        assert_eq!(m.next_due(), Some(t(now + 800)));
    }

    #[test]
    fn untracked_keys_are_dropped_and_late_replies_for_them_thrown_away() {
        let mut m = Manager::new();
        m.track([key("a"), key("b")]);
        m.take_due(t(0));
        assert_eq!(m.track([key("b")]), vec![key("a")]);
        assert!(!m.succeeded(&key("a"), token(0, 3600)));
        assert_eq!(m.lookup(&key("a"), t(1)), TokenLookup::NotYetKnown);
        assert!(m.succeeded(&key("b"), token(0, 3600)));
    }

    #[test]
    fn a_cached_token_is_restored_only_while_valid() {
        let mut m = Manager::new();
        m.track([key("a"), key("b")]);
        m.restore(&key("a"), token(-3000, 600), t(0));
        m.restore(&key("b"), token(-3600, 0), t(0));
        assert!(matches!(m.lookup(&key("a"), t(0)), TokenLookup::Found(_)));
        assert_eq!(m.lookup(&key("b"), t(0)), TokenLookup::NotYetKnown);
        // The restored token is already past 80 %: due at once.
        let due = m.take_due(t(0));
        assert_eq!(due, vec![key("a"), key("b")]);
    }

    #[test]
    fn the_keys_of_a_pod_come_from_its_projections_with_kubelets_defaults() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "apps", "uid": "u1"},
            "spec": {
                "serviceAccountName": "builder",
                "containers": [],
                "volumes": [
                    {"name": "kube-api-access-x", "projected": {"sources": [
                        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                        {"configMap": {"name": "kube-root-ca.crt"}}
                    ]}},
                    {"name": "vault", "projected": {"sources": [
                        {"serviceAccountToken": {"path": "t", "audience": "vault"}},
                        {"serviceAccountToken": {"path": "t2", "audience": "vault"}}
                    ]}}
                ]
            }
        }))
        .unwrap();
        let keys = keys_of(&pod);
        assert_eq!(keys.len(), 2, "{keys:?}");
        assert_eq!(keys[0].audience, None);
        assert_eq!(keys[0].expiration_seconds, 3607);
        assert_eq!(keys[0].service_account, "builder");
        assert_eq!(keys[0].namespace, "apps");
        assert_eq!(keys[1].audience.as_deref(), Some("vault"));
        assert_eq!(keys[1].expiration_seconds, DEFAULT_EXPIRATION_SECONDS);
        assert_eq!((&*keys[1].pod_name, &*keys[1].pod_uid), ("web", "u1"));
        let mut anonymous = pod.clone();
        anonymous.metadata.uid = None;
        assert!(keys_of(&anonymous).is_empty());
        anonymous.spec.as_mut().unwrap().service_account_name = None;
        assert_eq!(service_account_of(&anonymous), "default");
    }

    #[test]
    fn the_token_request_is_bound_to_the_pod_with_the_audience_asked_for() {
        let mut k = key("web");
        assert_eq!(
            request_path(&k),
            "/api/v1/namespaces/default/serviceaccounts/default/token"
        );
        let b = request_body(&k);
        assert_eq!(b["kind"], "TokenRequest");
        assert_eq!(b["spec"]["audiences"], serde_json::json!([]));
        assert_eq!(b["spec"]["expirationSeconds"], 3600);
        assert_eq!(b["spec"]["boundObjectRef"]["kind"], "Pod");
        assert_eq!(b["spec"]["boundObjectRef"]["name"], "web");
        assert_eq!(b["spec"]["boundObjectRef"]["uid"], "uid-web");
        k.audience = Some("vault".into());
        assert_eq!(
            request_body(&k)["spec"]["audiences"],
            serde_json::json!(["vault"])
        );
    }

    #[test]
    fn a_reply_gives_the_token_and_the_servers_expiry() {
        let body = br#"{"kind":"TokenRequest","spec":{"audiences":["x"]},
            "status":{"token":"a.b.c","expirationTimestamp":"2027-01-15T08:00:00Z"}}"#;
        let tok = decode_reply(body, t(0)).unwrap();
        assert_eq!(&*tok.value, "a.b.c");
        assert_eq!(tok.expires_at, "2027-01-15T08:00:00Z".parse().unwrap());
        assert!(matches!(
            decode_reply(b"{}", t(0)),
            Err(TokenReplyError::Decode(_))
        ));
        let empty = br#"{"status":{"token":"","expirationTimestamp":"2027-01-15T08:00:00Z"}}"#;
        assert!(matches!(
            decode_reply(empty, t(0)),
            Err(TokenReplyError::Empty)
        ));
    }
}
