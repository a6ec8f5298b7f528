//! What the API server's audit log says nodes asked -- owned by the test
//! harness (tests/harness/kube).
//!
//! The control plane audits every request made with a node credential (group
//! `system:nodes`) at level Metadata: verb, URI, status, user agent. Tests
//! and the bench read it to tell a watch resume from a relist, or to count
//! the requests a node needed to resync after an outage.

use std::collections::HashMap;

/// Audit what nodes ask (cheap: nothing else is logged).
pub const AUDIT_POLICY: &str = "\
# Written by tests/harness/kube/audit.rs
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: [\"system:nodes\"]
- level: None
";

/// One request seen in the audit log; [`super::ControlPlane::requests_by`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditedRequest {
    /// Kubernetes' verb: `get`, `list`, `watch`, `create`, `patch`, ...
    pub verb: String,
    /// Path and query, e.g. `/api/v1/pods?fieldSelector=...&watch=true`.
    pub uri: String,
    /// The HTTP status, once the server answered.
    pub code: Option<u16>,
    /// The last audit stage seen: `ResponseStarted` (a watch still open) or
    /// `ResponseComplete`, or `Panic`.
    pub stage: String,
    pub user_agent: String,
}

/// The requests `user` made, in order, one per audit ID, from the audit
/// log's JSON lines; a line that does not parse (being written) is skipped.
pub fn requests_by(log: &str, user: &str) -> Vec<AuditedRequest> {
    let mut order: Vec<String> = Vec::new();
    let mut by_id: HashMap<String, AuditedRequest> = HashMap::new();
    for line in log.lines() {
        let Ok(ev) = serde_json::from_str::<serde_json::Value>(line) else {
            continue; // a line being written right now
        };
        if ev["user"]["username"] != user {
            continue;
        }
        let id = ev["auditID"].as_str().unwrap_or_default().to_string();
        let code = ev["responseStatus"]["code"].as_u64().map(|c| c as u16);
        let stage = ev["stage"].as_str().unwrap_or_default().to_string();
        match by_id.get_mut(&id) {
            Some(r) => {
                r.code = code.or(r.code);
                r.stage = stage;
            }
            None => {
                order.push(id.clone());
                by_id.insert(
                    id,
                    AuditedRequest {
                        verb: ev["verb"].as_str().unwrap_or_default().to_string(),
                        uri: ev["requestURI"].as_str().unwrap_or_default().to_string(),
                        code,
                        stage,
                        user_agent: ev["userAgent"].as_str().unwrap_or_default().to_string(),
                    },
                );
            }
        }
    }
    order
        .into_iter()
        .filter_map(|id| by_id.remove(&id))
        .collect()
}
