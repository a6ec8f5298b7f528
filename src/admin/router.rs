//! A small HTTP router: method and path to a handler, with the 404 and 405
//! answers in one place. The admin socket uses it today; the node API (the
//! kubelet's `:10250` endpoints) is meant to register its routes on the
//! same type.
//!
//! A pattern is an exact path (`/healthz`) or a prefix ending in `/*`
//! (`/containerLogs/*` matches `/containerLogs/ns/pod/c`). Routes are tried
//! in the order they were added. A path no route matches is 404; a path
//! some route matches, but not with this method, is 405 with an `Allow`
//! header listing the methods that would work.
//!
//! Handlers see the request head only (method, URI, headers), not the
//! body, and answer synchronously from state they hold: nothing here
//! awaits, so a route can never hold a connection open by itself.

use std::rc::Rc;

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Method, Response, StatusCode};
use http_body_util::Full;

/// A response body: the whole answer in memory.
pub type Body = Full<Bytes>;

/// Answers one request from its head.
pub type Handler = Rc<dyn Fn(&Parts) -> Response<Body>>;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Pattern {
    Exact(String),
    /// Everything under this prefix (which ends with `/`).
    Prefix(String),
}

impl Pattern {
    fn parse(pattern: &str) -> Pattern {
        match pattern.strip_suffix('*') {
            Some(prefix) if prefix.ends_with('/') => Pattern::Prefix(prefix.to_string()),
            _ => Pattern::Exact(pattern.to_string()),
        }
    }

    fn matches(&self, path: &str) -> bool {
        match self {
            Pattern::Exact(p) => p == path,
            Pattern::Prefix(p) => path.starts_with(p.as_str()),
        }
    }
}

#[derive(Clone)]
struct Route {
    method: Method,
    pattern: Pattern,
    handler: Handler,
}

/// Routes, tried in order.
#[derive(Clone, Default)]
pub struct Router {
    routes: Vec<Route>,
}

impl Router {
    /// A router with no routes: everything is 404.
    pub fn new() -> Router {
        Router::default()
    }

    /// Adds a route for `method` on `pattern` (see the module docs).
    pub fn route(
        mut self,
        method: Method,
        pattern: &str,
        handler: impl Fn(&Parts) -> Response<Body> + 'static,
    ) -> Router {
        self.routes.push(Route {
            method,
            pattern: Pattern::parse(pattern),
            handler: Rc::new(handler),
        });
        self
    }

    /// Adds a `GET` route.
    pub fn get(
        self,
        pattern: &str,
        handler: impl Fn(&Parts) -> Response<Body> + 'static,
    ) -> Router {
        self.route(Method::GET, pattern, handler)
    }

    /// Answers a request: the first route matching its method and path,
    /// else 405 (the path is known) or 404.
    pub fn handle(&self, req: &Parts) -> Response<Body> {
        let path = req.uri.path();
        let mut allowed: Vec<&str> = Vec::new();
        for r in self.routes.iter().filter(|r| r.pattern.matches(path)) {
            if r.method == req.method {
                return (r.handler)(req);
            }
            if !allowed.contains(&r.method.as_str()) {
                allowed.push(r.method.as_str());
            }
        }
        if allowed.is_empty() {
            return text(StatusCode::NOT_FOUND, "not found\n");
        }
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        if let Ok(allow) = HeaderValue::from_str(&allowed.join(", ")) {
            r.headers_mut().insert(header::ALLOW, allow);
        }
        r
    }
}

/// A `text/plain` answer.
pub fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = typed(
        Bytes::from_static(body.as_bytes()),
        "text/plain; charset=utf-8",
    );
    *r.status_mut() = status;
    r
}

/// A 200 answer with this body and `Content-Type`.
pub fn typed(body: impl Into<Bytes>, content_type: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;
    use http_body_util::BodyExt;

    fn head(method: Method, uri: &str) -> Parts {
        Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .unwrap()
            .into_parts()
            .0
    }

    fn body(r: Response<Body>) -> String {
        let bytes = crate::rt::block_on(r.into_body().collect())
            .unwrap()
            .to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn router() -> Router {
        Router::new()
            .get("/healthz", |_| text(StatusCode::OK, "ok"))
            .route(Method::POST, "/healthz", |_| {
                text(StatusCode::ACCEPTED, "posted")
            })
            .get("/logs/*", |req| {
                typed(req.uri.path().to_string(), "text/plain")
            })
    }

    #[test]
    fn a_request_goes_to_the_route_of_its_method_and_path() {
        let r = router().handle(&head(Method::GET, "/healthz?verbose=1"));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(body(r), "ok");
        let r = router().handle(&head(Method::POST, "/healthz"));
        assert_eq!(r.status(), StatusCode::ACCEPTED);
        let r = router().handle(&head(Method::GET, "/logs/ns/pod"));
        assert_eq!(r.headers()[header::CONTENT_TYPE], "text/plain");
        assert_eq!(body(r), "/logs/ns/pod");
    }

    #[test]
    fn an_unknown_path_is_404_and_a_wrong_method_is_405_with_allow() {
        let r = router().handle(&head(Method::GET, "/nope"));
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let r = router().handle(&head(Method::GET, "/logs"));
        assert_eq!(
            r.status(),
            StatusCode::NOT_FOUND,
            "a prefix needs its slash"
        );
        let r = router().handle(&head(Method::DELETE, "/healthz"));
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.headers()[header::ALLOW], "GET, POST");
        let r = Router::new().handle(&head(Method::GET, "/"));
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
    }
}
