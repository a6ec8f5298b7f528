//! Authorization of node API requests: kubelet's mapping of a request to
//! the attributes the API server's authorizer checks, and the
//! SubjectAccessReview that asks it.
//!
//! kubelet checks every request against the resource `nodes` named after
//! the node, with the verb from the HTTP method and the subresource from
//! the path: `/stats/*` is `stats`, `/metrics*` `metrics`, `/logs/*` `log`,
//! `/spec/*` `spec`, and everything else (`/pods`, `/exec`,
//! `/containerLogs`, `/run`, `/attach`, `/portForward`, `/healthz`, ...)
//! `proxy`. A WebSocket upgrade of `/exec`, `/attach` or `/portForward` is
//! a `create`, as its SPDY `POST` would be. As kubelet v1.36's fine-grained
//! authorization (`KubeletFineGrainedAuthz`, GA and locked on), `/pods` and
//! `/runningpods/` are first asked as `pods`, `/healthz` as `healthz` and
//! `/configz` as `configz`, then as `proxy`: either allows
//! ([`attributes_to_try`]), and a refusal names both.
//!
//! Pure: no I/O; the review is sent by `server.rs`.

use http::Method;
use serde::Deserialize;

use super::authn::User;

/// What a request asks to do to the node, in the authorizer's words.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Attributes {
    pub verb: &'static str,
    pub subresource: &'static str,
}

/// Whether `path` is `base` or below it (kubelet's `isSubpath`: the
/// trailing slash of `base` is optional, a longer segment is not below).
fn is_subpath(path: &str, base: &str) -> bool {
    let base = base.trim_end_matches('/');
    path == base || (path.starts_with(base) && path.as_bytes().get(base.len()) == Some(&b'/'))
}

/// The attributes of a request with `method` on `path`; `upgrade` when it
/// asks for a protocol upgrade (WebSocket).
pub fn attributes(method: &Method, path: &str, upgrade: bool) -> Attributes {
    let streaming = ["/exec", "/attach", "/portForward"]
        .iter()
        .any(|p| is_subpath(path, p));
    let verb = match *method {
        Method::GET if upgrade && streaming => "create",
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    };
    let subresource = if is_subpath(path, "/stats/") {
        "stats"
    } else if is_subpath(path, "/metrics") {
        "metrics"
    } else if is_subpath(path, "/logs/") {
        "log"
    } else if is_subpath(path, "/spec/") {
        "spec"
    } else {
        "proxy"
    };
    Attributes { verb, subresource }
}

/// Every set of attributes that allows a request, in the order kubelet
/// asks them: the fine-grained subresource first where the path has one,
/// then [`attributes`]'s.
pub fn attributes_to_try(method: &Method, path: &str, upgrade: bool) -> Vec<Attributes> {
    let coarse = attributes(method, path, upgrade);
    let fine = if is_subpath(path, "/pods") || is_subpath(path, "/runningpods/") {
        Some("pods")
    } else if is_subpath(path, "/healthz") {
        Some("healthz")
    } else if is_subpath(path, "/configz") {
        Some("configz")
    } else {
        None
    };
    fine.map(|subresource| Attributes {
        verb: coarse.verb,
        subresource,
    })
    .into_iter()
    .chain(std::iter::once(coarse))
    .collect()
}

/// The body of a SubjectAccessReview asking whether `user` may do `attrs`
/// to node `node`.
pub fn review_body(user: &User, attrs: &Attributes, node: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user.name,
            "uid": user.uid,
            "groups": user.groups,
            "resourceAttributes": {
                "verb": attrs.verb,
                "version": "v1",
                "resource": "nodes",
                "subresource": attrs.subresource,
                "name": node,
            },
        },
    })
}

/// The API server's answer: allowed or not.
pub fn decode_review(body: &[u8]) -> Result<bool, serde_json::Error> {
    #[derive(Deserialize)]
    struct Review {
        #[serde(default)]
        status: Status,
    }
    #[derive(Deserialize, Default)]
    struct Status {
        #[serde(default)]
        allowed: bool,
        #[serde(default)]
        denied: bool,
    }
    let r: Review = serde_json::from_slice(body)?;
    Ok(r.status.allowed && !r.status.denied)
}

/// kubelet's 403 text for a request `tried` with each of these
/// attributes (they differ only by subresource).
pub fn forbidden_text(user: &User, tried: &[Attributes]) -> String {
    let verb = tried.first().map_or("", |a| a.verb);
    let subresources: Vec<&str> = tried.iter().map(|a| a.subresource).collect();
    format!(
        "Forbidden (user={}, verb={verb}, resource=nodes, subresource(s)=[{}])\n",
        user.name,
        subresources.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verb_comes_from_the_method_and_the_subresource_from_the_path() {
        let table: &[(Method, &str, bool, &str, &str)] = &[
            (Method::GET, "/pods", false, "get", "proxy"),
            (Method::GET, "/healthz", false, "get", "proxy"),
            (Method::GET, "/runningpods/", false, "get", "proxy"),
            (Method::GET, "/stats/summary", false, "get", "stats"),
            (Method::GET, "/stats", false, "get", "stats"),
            (Method::GET, "/statsfoo", false, "get", "proxy"),
            (Method::GET, "/metrics", false, "get", "metrics"),
            (Method::GET, "/metrics/resource", false, "get", "metrics"),
            (Method::GET, "/metrics/probes", false, "get", "metrics"),
            (Method::GET, "/metricsx", false, "get", "proxy"),
            (Method::GET, "/logs/syslog", false, "get", "log"),
            (Method::GET, "/logs", false, "get", "log"),
            (Method::GET, "/spec/", false, "get", "spec"),
            (
                Method::GET,
                "/containerLogs/ns/pod/c",
                false,
                "get",
                "proxy",
            ),
            (Method::POST, "/exec/ns/pod/c", false, "create", "proxy"),
            (Method::GET, "/exec/ns/pod/c", true, "create", "proxy"),
            (Method::GET, "/attach/ns/pod/c", true, "create", "proxy"),
            (Method::GET, "/portForward/ns/pod", true, "create", "proxy"),
            (Method::GET, "/exec/ns/pod/c", false, "get", "proxy"),
            (Method::GET, "/pods", true, "get", "proxy"),
            (Method::POST, "/run/ns/pod/c", false, "create", "proxy"),
            (Method::PUT, "/pods", false, "update", "proxy"),
            (Method::PATCH, "/pods", false, "patch", "proxy"),
            (Method::DELETE, "/pods", false, "delete", "proxy"),
            (Method::HEAD, "/healthz", false, "get", "proxy"),
            (Method::OPTIONS, "/healthz", false, "", "proxy"),
        ];
        for (method, path, upgrade, verb, sub) in table {
            let a = attributes(method, path, *upgrade);
            assert_eq!(
                (a.verb, a.subresource),
                (*verb, *sub),
                "{method} {path} upgrade={upgrade}"
            );
        }
    }

    #[test]
    fn pods_healthz_and_configz_are_asked_fine_grained_first_then_as_proxy() {
        let table: &[(&str, &[&str])] = &[
            ("/pods", &["pods", "proxy"]),
            ("/pods/", &["pods", "proxy"]),
            ("/runningpods/", &["pods", "proxy"]),
            ("/healthz", &["healthz", "proxy"]),
            ("/configz", &["configz", "proxy"]),
            ("/podsx", &["proxy"]),
            ("/stats/summary", &["stats"]),
            ("/metrics", &["metrics"]),
            ("/exec/ns/pod/c", &["proxy"]),
        ];
        for (path, want) in table {
            let got: Vec<&str> = attributes_to_try(&Method::GET, path, false)
                .iter()
                .map(|a| a.subresource)
                .collect();
            assert_eq!(&got, want, "{path}");
        }
        let tried = attributes_to_try(&Method::POST, "/pods", false);
        assert!(tried.iter().all(|a| a.verb == "create"));
    }

    #[test]
    fn a_review_names_the_user_the_node_and_the_attributes() {
        let user = User {
            name: "alice".into(),
            uid: "u1".into(),
            groups: vec!["devs".into()],
        };
        let attrs = attributes(&Method::GET, "/stats/summary", false);
        let body = review_body(&user, &attrs, "edge-1");
        assert_eq!(body["kind"], "SubjectAccessReview");
        assert_eq!(body["spec"]["user"], "alice");
        assert_eq!(body["spec"]["groups"][0], "devs");
        let ra = &body["spec"]["resourceAttributes"];
        assert_eq!(ra["verb"], "get");
        assert_eq!(ra["resource"], "nodes");
        assert_eq!(ra["subresource"], "stats");
        assert_eq!(ra["name"], "edge-1");
        assert_eq!(
            forbidden_text(&user, &[attrs]),
            "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[stats])\n"
        );
        let tried = attributes_to_try(&Method::GET, "/configz", false);
        assert_eq!(
            forbidden_text(&user, &tried),
            "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[configz proxy])\n"
        );
    }

    #[test]
    fn only_an_allowed_and_not_denied_answer_allows() {
        assert!(decode_review(br#"{"status":{"allowed":true}}"#).unwrap());
        assert!(!decode_review(br#"{"status":{"allowed":false,"reason":"no"}}"#).unwrap());
        assert!(!decode_review(br#"{"status":{"allowed":true,"denied":true}}"#).unwrap());
        assert!(!decode_review(br#"{"kind":"SubjectAccessReview"}"#).unwrap());
        assert!(decode_review(b"not json").is_err());
    }
}
