//! `-o yaml`: a YAML emitter for the JSON documents the admin socket
//! serves (a `serde_json::Value`), in kubectl's layout: two-space indents,
//! list items at their key's indentation, keys sorted (as kubectl's are).
//!
//! Why not serde_yaml_ng's serializer: it is in the dependency tree, but
//! only its deserializer is linked; its serializer and libyaml's emitter
//! would cost more of the 4 MiB binary than this file. Strings that YAML
//! would read as something else (`true`, `10`, `1e3`, `null`, a leading
//! `-` or `*`, a `: ` inside, a timestamp, several lines) are written in
//! double quotes, JSON's escaping being valid YAML; everything else plain.
//! Pure.

use std::fmt::Write as _;

use serde_json::Value;

/// The YAML text of `v`, ending in a newline.
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    match v {
        Value::Object(m) if !m.is_empty() => mapping(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => sequence(&mut out, a, 0),
        scalar => {
            inline(&mut out, scalar);
            out.push('\n');
        }
    }
    out
}

/// A scalar, or an empty collection, on the current line.
fn inline(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => string(out, s),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

fn is_block(v: &Value) -> bool {
    match v {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    }
}

fn mapping(out: &mut String, m: &serde_json::Map<String, Value>, indent: usize) {
    for (i, (k, v)) in m.iter().enumerate() {
        // The first key of a list item follows its "- ".
        if i > 0 || out.is_empty() || out.ends_with('\n') {
            pad(out, indent);
        }
        string(out, k);
        out.push(':');
        match v {
            Value::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                mapping(out, inner, indent + 2);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                sequence(out, items, indent);
            }
            scalar => {
                out.push(' ');
                inline(out, scalar);
                out.push('\n');
            }
        }
    }
}

fn sequence(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        pad(out, indent);
        out.push_str("- ");
        match item {
            Value::Object(m) if is_block(item) => mapping(out, m, indent + 2),
            Value::Array(a) if is_block(item) => {
                out.push('\n');
                sequence(out, a, indent + 2);
            }
            scalar => {
                inline(out, scalar);
                out.push('\n');
            }
        }
    }
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// A string, plain when YAML reads it back as this same string.
fn string(out: &mut String, s: &str) {
    if plain(s) {
        out.push_str(s);
    } else {
        out.push_str(&Value::String(s.to_string()).to_string());
    }
}

fn plain(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if "-?:,[]{}#&*!|>'\"%@` ".contains(first)
        || s.ends_with(' ')
        || s.ends_with(':')
        || s.contains(": ")
        || s.contains(" #")
        || s.chars().any(|c| c.is_control())
    {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n" | "null" | "~"
    ) || lower.starts_with(".inf")
        || lower.starts_with(".nan")
    {
        return false;
    }
    // Numbers, and what YAML 1.1 readers take for numbers or timestamps
    // (10, 1e3, 0x1f, 0o17, 1_000, 2026-12-01T10:00:00Z, 1:20): anything
    // that starts like a number and has no letter beyond hex digits and
    // those markers.
    if first.is_ascii_digit() || first == '.' || first == '+' {
        let numeric_letters = "abcdefABCDEFxXoOTZ_";
        return s
            .chars()
            .any(|c| c.is_alphabetic() && !numeric_letters.contains(c));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_documents_are_written_in_kubectls_layout() {
        let v = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web"}, "annotations": {}},
            "spec": {"containers": [
                {"name": "app", "image": "nginx:1.27", "args": ["-c", "echo hi"], "ports": []},
                {"name": "side", "image": "busybox"},
            ]},
            "status": {"phase": "Running", "restartCount": 0, "ready": true, "ip": null},
        });
        // serde_json's maps are sorted by key.
        let want = "\
apiVersion: v1
kind: Pod
metadata:
  annotations: {}
  labels:
    app: web
  name: web
spec:
  containers:
  - args:
    - \"-c\"
    - echo hi
    image: nginx:1.27
    name: app
    ports: []
  - image: busybox
    name: side
status:
  ip: null
  phase: Running
  ready: true
  restartCount: 0
";
        assert_eq!(to_yaml(&v), want);
    }

    #[test]
    fn strings_yaml_would_misread_are_quoted() {
        for s in [
            "true",
            "No",
            "null",
            "~",
            "10",
            "1e3",
            "0x1f",
            "1_000",
            ".5",
            "",
            "- item",
            "*ref",
            "a: b",
            "a #c",
            "two\nlines",
            " lead",
            "trail ",
            "2026-12-01T10:00:00Z",
            "10:20",
            "key:",
            "@x",
            "'q'",
        ] {
            let out = to_yaml(&json!({ "k": s }));
            assert!(out.starts_with("k: \""), "{s:?} -> {out}");
        }
        for s in [
            "nginx:1.27",
            "3500m",
            "1048576Ki",
            "Running",
            "a-b",
            "x y",
            "/var/log",
        ] {
            assert_eq!(to_yaml(&json!({ "k": s })), format!("k: {s}\n"), "{s:?}");
        }
    }

    #[test]
    fn the_output_reads_back_as_the_same_document() {
        let v = json!({
            "items": [
                {"a": [1, 2.5, -3], "b": {"c": [[], {}, [true, "false"]]}},
                [["x"], "y"],
                "weird: \"quotes\" and \\ backslash",
                null,
            ],
            "1": "one",
            "empty": "",
            "time": "2026-12-01T10:04:55Z",
        });
        let back: Value = serde_yaml_ng::from_str(&to_yaml(&v)).unwrap();
        assert_eq!(back, v);
        assert_eq!(to_yaml(&json!([])), "[]\n");
        assert_eq!(to_yaml(&json!("x")), "x\n");
    }
}
