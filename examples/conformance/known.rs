//! The conformance tests known to fail here, with why
//! (examples/conformance/known-failures.txt), so that `make conformance`
//! fails only on a failure nobody has explained yet, and says when a known
//! one passes again.
//!
//! One entry a line: `harness | <test name> | <cause>` for a test that
//! fails with upstream kubelet as the node too (a limit of this harness:
//! no kube-proxy, no cluster DNS, ...), or `picolet | <test name> |
//! <cause>` for one that fails only with picolet (ours to fix). The test
//! name is matched as a prefix of the reported name (which ends in ginkgo's
//! labels). `#` starts a comment line.

use crate::node::NodeKind;

/// One known failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Known {
    /// Fails with kubelet too.
    pub harness: bool,
    pub name: String,
    pub cause: String,
}

/// The entries of `text`; a malformed line is an error naming it.
pub fn parse(text: &str) -> Result<Vec<Known>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.splitn(3, '|').map(str::trim);
        let (kind, name, cause) = (fields.next(), fields.next(), fields.next());
        let harness = match kind {
            Some("harness") => true,
            Some("picolet") => false,
            _ => {
                return Err(format!(
                    "line {}: expected `harness|picolet | name | cause`: {line}",
                    i + 1
                ))
            }
        };
        match (name, cause) {
            (Some(name), Some(cause)) if !name.is_empty() && !cause.is_empty() => out.push(Known {
                harness,
                name: name.to_string(),
                cause: cause.to_string(),
            }),
            _ => {
                return Err(format!(
                    "line {}: expected `harness|picolet | name | cause`: {line}",
                    i + 1
                ))
            }
        }
    }
    Ok(out)
}

/// The entry that explains a failure of `test` with `node` as the node.
pub fn explain<'a>(known: &'a [Known], node: NodeKind, test: &str) -> Option<&'a Known> {
    known
        .iter()
        .find(|k| (k.harness || node == NodeKind::Picolet) && test.starts_with(&k.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_picolet_entry_explains_a_failure_only_on_picolet_and_a_harness_entry_on_both() {
        let known = parse(
            "# comment\n\
             harness | [sig-network] Networking should | no kube-proxy\n\
             picolet | [sig-node] Pods should support logs over websockets | not implemented\n",
        )
        .unwrap();
        let ws =
            "[sig-node] Pods should support logs over websockets [NodeConformance] [Conformance]";
        let net = "[sig-network] Networking should work [NodeConformance]";
        assert!(explain(&known, NodeKind::Picolet, ws).is_some());
        assert!(explain(&known, NodeKind::Kubelet, ws).is_none());
        assert_eq!(
            explain(&known, NodeKind::Kubelet, net).unwrap().cause,
            "no kube-proxy"
        );
        assert!(explain(&known, NodeKind::Picolet, "[sig-node] other").is_none());
    }

    #[test]
    fn a_line_without_a_cause_is_refused() {
        assert!(parse("picolet | [sig-node] Pods x\n").is_err());
        assert!(parse("maybe | x | y\n").is_err());
    }
}
