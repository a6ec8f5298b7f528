//! Unknown fields of outside input: the keys a document sets that its type
//! does not have, named as the API server names them in its warnings
//! (`spec.containers[0].comand`), and the line each one is on.
//!
//! serde drops an unknown key without a word; kubelet does too, while the
//! API server warns (`kubectl apply` prints `unknown field
//! "spec.containers[0].comand"`). To say the same without a second decoder
//! per type, the caller decodes the document as usual and encodes the
//! result again: a key of the document that the encoded form lacks is one
//! the type does not have ([`unknown_fields`]). [`key_lines`] then finds
//! those keys in the JSON text; `yaml_json::JsonDocument::position` maps a
//! JSON line back to the YAML one.
//!
//! Pure: no I/O, no logging. What it must NOT know: any Kubernetes type.

use serde_json::Value;

/// The paths of the keys in `written` (the document as parsed) that `kept`
/// (the same document decoded into its type and encoded again) lacks.
///
/// A key whose value is null is not reported: an absent optional field is
/// not encoded again, so a null could not be told from an unknown key, and
/// it sets nothing either way. Maps (labels, annotations) keep every key,
/// so only fields the type lacks are reported. Paths are in key order
/// within each object.
pub fn unknown_fields(written: &Value, kept: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(written, kept, &mut String::new(), &mut out);
    out
}

fn walk(written: &Value, kept: &Value, path: &mut String, out: &mut Vec<String>) {
    match (written, kept) {
        (Value::Object(written), Value::Object(kept)) => {
            for (key, value) in written {
                let len = path.len();
                push_key(path, key);
                match kept.get(key) {
                    Some(kept) => walk(value, kept, path, out),
                    None if !value.is_null() => out.push(path.clone()),
                    None => {}
                }
                path.truncate(len);
            }
        }
        (Value::Array(written), Value::Array(kept)) => {
            for (i, (value, kept)) in written.iter().zip(kept).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(value, kept, path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

/// The 1-based line of the key at each of `paths` (spelled as
/// [`unknown_fields`] spells them) in the JSON `text`; `None` for a path
/// the text does not have. The text is assumed to be valid JSON (it was
/// decoded already); a key whose name has escapes is matched by its
/// decoded name.
pub fn key_lines(text: &str, paths: &[String]) -> Vec<Option<usize>> {
    let mut found = vec![None; paths.len()];
    if paths.is_empty() {
        return found;
    }
    let mut stack: Vec<Frame> = Vec::new();
    let mut line = 1;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => line += 1,
            b'{' => stack.push(Frame::Object {
                key: String::new(),
                expect_key: true,
            }),
            b'[' => stack.push(Frame::Array { index: 0 }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Object { expect_key, .. }) => *expect_key = true,
                Some(Frame::Array { index }) => *index += 1,
                None => {}
            },
            b':' => {
                if let Some(Frame::Object { expect_key, .. }) = stack.last_mut() {
                    *expect_key = false;
                }
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                let raw = text.get(start..=i.min(bytes.len() - 1)).unwrap_or("");
                if let Some(Frame::Object {
                    key,
                    expect_key: true,
                }) = stack.last_mut()
                {
                    *key = serde_json::from_str(raw).unwrap_or_default();
                    let path = path_of(&stack);
                    for (slot, wanted) in found.iter_mut().zip(paths) {
                        if slot.is_none() && *wanted == path {
                            *slot = Some(line);
                        }
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The line of the key at each of `paths` in `text`, a JSON or YAML
/// document (the first document of a YAML stream): [`key_lines`] on the
/// JSON, or on the YAML's JSON form mapped back to the YAML's lines.
/// `None` where it cannot be told.
pub fn lines_in_text(text: &str, paths: &[String]) -> Vec<Option<usize>> {
    if text.trim_start().starts_with('{') {
        return key_lines(text, paths);
    }
    let Some(doc) = super::yaml_to_json(text)
        .ok()
        .and_then(|docs| docs.into_iter().next())
    else {
        return vec![None; paths.len()];
    };
    key_lines(&doc.json, paths)
        .into_iter()
        .map(|line| doc.position(line?).map(|at| at.line))
        .collect()
}

/// One open object (its current key, and whether a key comes next) or
/// array (its current index) of [`key_lines`]' scan.
enum Frame {
    Object { key: String, expect_key: bool },
    Array { index: usize },
}

/// The path of the innermost object's current key.
fn path_of(stack: &[Frame]) -> String {
    let mut path = String::new();
    for frame in stack {
        match frame {
            Frame::Object { key, .. } => push_key(&mut path, key),
            Frame::Array { index } => path.push_str(&format!("[{index}]")),
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_the_type_dropped_are_named_as_the_api_server_names_them() {
        let written = json!({
            "apiVersion": "v1",
            "metadata": {"name": "web", "labels": {"app": "web"}, "creationTimestamp": null, "nmae": "x"},
            "spec": {"containers": [
                {"name": "a", "image": "i"},
                {"name": "b", "comand": ["sh"], "resources": {}, "env": []}
            ], "volumes": [{"name": "v", "emptyDir": {"medum": "Memory"}}]},
            "extra": {"deep": 1}
        });
        let kept = json!({
            "apiVersion": "v1",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"containers": [
                {"name": "a", "image": "i"},
                {"name": "b", "resources": {}, "env": []}
            ], "volumes": [{"name": "v", "emptyDir": {}}]}
        });
        assert_eq!(
            unknown_fields(&written, &kept),
            [
                "extra",
                "metadata.nmae",
                "spec.containers[1].comand",
                "spec.volumes[0].emptyDir.medum"
            ]
        );
        assert!(unknown_fields(&kept, &kept).is_empty());
    }

    #[test]
    fn each_unknown_key_is_found_on_its_line() {
        let text = r#"{
  "kind": "Pod",
  "metadata": {"name": "a\"b", "nmae": "x"},
  "spec": {
    "containers": [
      {"name": "a", "comand": ["x", {"comand": 1}]},
      {
        "name": "b",
        "comand": []
      }
    ]
  },
  "comand": null
}"#;
        let paths: Vec<String> = [
            "metadata.nmae",
            "spec.containers[0].comand",
            "spec.containers[1].comand",
            "spec.containers[0].comand[1].comand",
            "comand",
            "spec.nothing",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            key_lines(text, &paths),
            [Some(3), Some(6), Some(9), Some(6), Some(13), None]
        );
    }

    #[test]
    fn a_yaml_or_json_text_gives_each_keys_own_line() {
        let paths = ["b.c".to_string(), "d".to_string()];
        let yaml = "a: 1\nb:\n  x: 2\n  c: 3\nd: [1]\n";
        assert_eq!(lines_in_text(yaml, &paths), [Some(4), Some(5)]);
        let json = "{\"a\": 1,\n \"b\": {\"c\": 3},\n \"d\": [1]}";
        assert_eq!(lines_in_text(json, &paths), [Some(2), Some(3)]);
        assert_eq!(lines_in_text("a: [", &paths), [None, None]);
    }

    #[test]
    fn a_value_that_looks_like_a_key_is_not_one() {
        let text = "{\"a\": \"comand\",\n\"b\": [\"comand\"],\n\"comand\": 1}";
        assert_eq!(key_lines(text, &["comand".to_string()]), [Some(3)]);
    }
}
