//! Reading the JUnit report that ginkgo writes (`--junit-report`) into one
//! outcome per test, for `make conformance`'s `PASS|FAIL|SKIP name` lines
//! and counts.
//!
//! Ginkgo lists every spec of the suite in the report, also the thousands
//! that the focus and skip filtered out; those are `skipped` with the bare
//! message `skipped`. They are left out here: a SKIP line is a spec that was
//! selected and skipped itself at run time (`e2eskipper`, whose message
//! says why). The suite-level nodes (`[SynchronizedBeforeSuite]`,
//! `[ReportAfterSuite]`, ...) are reported too when they fail, since a
//! failed BeforeSuite fails every spec.
//!
//! Only the `<testcase>` tags' `name` and `status` attributes and the
//! `message` of a `<skipped>` or `<failure>` child are read; no XML crate is
//! needed for that.

/// Ginkgo's suite-level nodes, which it reports like tests.
const SUITE_NODES: [&str; 6] = [
    "[BeforeSuite]",
    "[AfterSuite]",
    "[SynchronizedBeforeSuite]",
    "[SynchronizedAfterSuite]",
    "[ReportBeforeSuite]",
    "[ReportAfterSuite]",
];

/// What became of one test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    Skip,
}

/// One test of the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    pub name: String,
    pub outcome: Outcome,
    /// The first line of the failure or skip message.
    pub message: String,
}

/// The selected tests of a ginkgo JUnit report, in report order.
pub fn cases(xml: &str) -> Vec<Case> {
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(at) = rest.find("<testcase ") {
        rest = &rest[at..];
        let tag_end = rest.find('>').unwrap_or(rest.len());
        let tag = &rest[..tag_end];
        let self_closing = tag.ends_with('/');
        let body_end = if self_closing {
            tag_end
        } else {
            rest.find("</testcase>").unwrap_or(rest.len())
        };
        let body = &rest[tag_end.min(body_end)..body_end];
        let name = attr(tag, "name").unwrap_or_default();
        // Ginkgo names specs `[It] <text> [labels]`.
        let name = name.strip_prefix("[It] ").unwrap_or(&name).to_string();
        let status = attr(tag, "status").unwrap_or_default();
        let message = ["<failure ", "<skipped ", "<error "]
            .iter()
            .find_map(|child| body.find(child).map(|i| &body[i..]))
            .and_then(|child| attr(&child[..child.find('>').unwrap_or(child.len())], "message"))
            .unwrap_or_default();
        let message = message.lines().next().unwrap_or("").trim().to_string();
        rest = &rest[body_end..];
        let outcome = match status.as_str() {
            "passed" => Outcome::Pass,
            "skipped" | "pending" => Outcome::Skip,
            _ => Outcome::Fail,
        };
        let suite_node = SUITE_NODES.iter().any(|n| name.starts_with(n));
        let filtered_out = outcome == Outcome::Skip && (message == "skipped" || message.is_empty());
        if filtered_out || (suite_node && outcome != Outcome::Fail) {
            continue;
        }
        out.push(Case {
            name,
            outcome,
            message,
        });
    }
    out
}

/// How many of `cases` had `outcome`.
pub fn count(cases: &[Case], outcome: Outcome) -> usize {
    cases.iter().filter(|c| c.outcome == outcome).count()
}

/// The unescaped value of attribute `name` in the start tag `tag`.
fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let len = tag[start..].find('"')?;
    Some(unescape(&tag[start..start + len]))
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(end) = rest.find(';') else { break };
        let entity = &rest[1..end];
        let ch = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match ch {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" disabled="0" errors="0" failures="1" time="10">
  <testsuite name="Kubernetes e2e suite" package="/" tests="5">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1"></testcase>
    <testcase name="[ReportAfterSuite] Kubernetes e2e JUnit report" classname="Kubernetes e2e suite" status="passed" time="0"></testcase>
    <testcase name="[It] [sig-node] Pods should get a host IP [NodeConformance] [Conformance]" classname="Kubernetes e2e suite" status="passed" time="5"></testcase>
    <testcase name="[sig-node] Probing container with readiness probe &#39;x&#39; &amp; more [NodeConformance]" classname="Kubernetes e2e suite" status="failed" time="3">
      <failure message="Told to stop trying after 2s.&#xA;second line" type="failed">details</failure>
    </testcase>
    <testcase name="[sig-apps] Deployment should run" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[sig-node] Sysctls should reject [NodeConformance]" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped - Only supported for node OS distro [gci ubuntu] (not )"></skipped>
    </testcase>
  </testsuite>
</testsuites>"#;

    #[test]
    fn the_selected_tests_are_read_with_their_outcome_and_the_filtered_out_ones_are_left_out() {
        let cases = cases(REPORT);
        let got: Vec<(&str, Outcome)> =
            cases.iter().map(|c| (c.name.as_str(), c.outcome)).collect();
        assert_eq!(
            got,
            vec![
                (
                    "[sig-node] Pods should get a host IP [NodeConformance] [Conformance]",
                    Outcome::Pass
                ),
                (
                    "[sig-node] Probing container with readiness probe 'x' & more [NodeConformance]",
                    Outcome::Fail
                ),
                (
                    "[sig-node] Sysctls should reject [NodeConformance]",
                    Outcome::Skip
                ),
            ]
        );
        assert_eq!(cases[1].message, "Told to stop trying after 2s.");
        assert_eq!(count(&cases, Outcome::Pass), 1);
        assert_eq!(count(&cases, Outcome::Fail), 1);
        assert_eq!(count(&cases, Outcome::Skip), 1);
    }

    #[test]
    fn a_failed_suite_node_counts_as_a_failure() {
        let xml = r#"<testcase name="[SynchronizedBeforeSuite]" status="failed"><failure message="no nodes"></failure></testcase>"#;
        assert_eq!(
            cases(xml),
            vec![Case {
                name: "[SynchronizedBeforeSuite]".into(),
                outcome: Outcome::Fail,
                message: "no nodes".into()
            }]
        );
    }
}
