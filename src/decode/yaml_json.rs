//! YAML → JSON text, the way kubelet reads a static pod manifest: kubelet
//! turns the YAML into JSON (`yaml.YAMLToJSON`, with no target type) and
//! decodes the JSON, so a plain `8080` is a number and `true` a bool
//! whatever field they land in. picolet does the same, for the same result
//! and for size: the JSON decoder of every Kubernetes type is already in the
//! binary for the API server, and decoding a `Pod` straight from YAML built
//! a second one (measured: ~270 KiB of aarch64 code, serde_yaml_ng's
//! deserializer instantiated for every k8s-openapi type).
//!
//! The conversion keeps what a direct YAML decode had: errors point into the
//! YAML. Every node is written on a line of its own, and [`JsonDocument`]
//! remembers where each JSON line came from, so serde_json's "line 40" of
//! the JSON becomes the YAML line and column of the node it choked on.
//!
//! Plain scalars are resolved as kubelet's YAML library does (go-yaml v2,
//! YAML 1.1 with Go's number syntax), not by YAML 1.2's core schema, so a
//! manifest means the same to picolet as to kubelet:
//! - `null`/`~`/empty are null; `true`/`yes`/`on`/`y` and
//!   `false`/`no`/`off`/`n` (each also capitalised and upper-case) are bools;
//! - integers are Go's `ParseInt(text, 0, 64)` after removing `_`: a leading
//!   `0` is octal (`defaultMode: 0644` is 420, the common case this is
//!   for), `0o`, `0x` and `0b` prefixes, an optional sign; then
//!   `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` is a float (`08`
//!   and `1e3` are 8 and 1000), written as Go's JSON writes it (no `.0`).
//! - anything quoted, or tagged `!!str`, is a string. `.inf` and `.nan`
//!   have no JSON form and stay strings (kubelet refuses the manifest).
//!
//! A key is written as a string: its text, or the decimal or `true`/`false`
//! a number or bool key resolves to (`0644:` is the key `"420"`, as Go
//! stringifies it).
//! Aliases are replayed from the anchored node's JSON (the caller has already
//! bounded their expansion with [`super::check_yaml`]).
//!
//! What it must NOT know: what the document means. A syntax error is
//! reported as [`YamlToJsonError::Syntax`] without detail: libyaml's message
//! is not reachable from here, so the caller asks serde_yaml_ng to parse the
//! text, which reports it with its location.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{Anchor, Event, Parser, Position};

/// One YAML document as JSON text, with the YAML position of every line.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonDocument {
    pub json: String,
    /// `lines[i]`: where JSON line `i + 1` came from.
    lines: Vec<Position>,
}

impl JsonDocument {
    /// An empty document, or an explicit `null`.
    pub fn is_null(&self) -> bool {
        self.json.trim() == "null"
    }

    /// The YAML position of a 1-based JSON line (serde_json's
    /// `Error::line`), if the line exists.
    pub fn position(&self, json_line: usize) -> Option<Position> {
        self.lines.get(json_line.checked_sub(1)?).copied()
    }

    /// serde_json's error message, its JSON location replaced by the YAML
    /// one: `(message, Some(position))`.
    pub fn locate(&self, e: &serde_json::Error) -> (String, Option<Position>) {
        let message = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let bare = message.strip_suffix(&suffix).unwrap_or(&message);
        match self.position(e.line()) {
            Some(at) => (format!("{bare} at {at}"), Some(at)),
            None => (bare.to_string(), None),
        }
    }
}

/// Why a YAML stream could not be turned into JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YamlToJsonError {
    /// libyaml refused the text; parse it with serde_yaml_ng for the message.
    #[error("is not valid YAML")]
    Syntax,
    #[error("has a mapping key that is not a scalar (at {at})")]
    ComplexKey { at: Position },
    #[error("refers to an undefined anchor (at {at})")]
    UnknownAlias { at: Position },
    #[error("has a node tagged {tag}, which Kubernetes objects do not use (at {at})")]
    UnsupportedTag { tag: String, at: Position },
}

/// Converts every document of a YAML stream to JSON text.
pub fn yaml_to_json(text: &str) -> Result<Vec<JsonDocument>, YamlToJsonError> {
    let mut parser = Parser::new(text.as_bytes()).ok_or(YamlToJsonError::Syntax)?;
    let mut docs = Vec::new();
    let mut w = Writer::default();
    loop {
        let Some((event, at)) = parser.next() else {
            return Err(YamlToJsonError::Syntax);
        };
        match event {
            Event::StreamEnd => return Ok(docs),
            Event::DocumentStart => w = Writer::starting_at(at),
            Event::DocumentEnd => {
                let w = std::mem::take(&mut w);
                let mut json = w.out;
                if json.trim().is_empty() {
                    json.push_str("null");
                }
                docs.push(JsonDocument {
                    json,
                    lines: w.lines,
                });
            }
            Event::Scalar {
                anchor,
                value,
                plain,
                tag,
            } => {
                let token = scalar(&value, plain, tag.as_deref()).ok_or_else(|| {
                    YamlToJsonError::UnsupportedTag {
                        tag: String::from_utf8_lossy(tag.as_deref().unwrap_or_default())
                            .into_owned(),
                        at,
                    }
                })?;
                if w.node(at, false)? {
                    // A key is written as a string whatever it resolves to.
                    w.out.push_str(&key(&token, &value));
                    w.out.push(':');
                } else {
                    w.out.push_str(&token);
                }
                if let Anchor::Named(name) = anchor {
                    w.anchors.insert(name, Fragment::Scalar(token));
                }
            }
            Event::Alias(name) => {
                let fragment = w
                    .anchors
                    .get(&name)
                    .cloned()
                    .ok_or(YamlToJsonError::UnknownAlias { at })?;
                match fragment {
                    Fragment::Scalar(token) => {
                        if w.node(at, false)? {
                            if token.starts_with('"') {
                                w.out.push_str(&token);
                            } else {
                                w.out.push_str(&string(&token));
                            }
                            w.out.push(':');
                        } else {
                            w.out.push_str(&token);
                        }
                    }
                    Fragment::Collection(json) => {
                        w.node(at, true)?;
                        for _ in json.matches('\n') {
                            w.lines.push(at);
                        }
                        w.out.push_str(&json);
                        w.key_pending = w.open.last().is_some_and(|o| o.mapping);
                    }
                }
            }
            Event::CollectionStart { anchor, mapping } => {
                w.node(at, true)?;
                let start = w.out.len();
                w.out.push(if mapping { '{' } else { '[' });
                w.open.push(Open {
                    mapping,
                    first: true,
                    anchor: match anchor {
                        Anchor::Named(name) => Some((name, start)),
                        Anchor::None => None,
                    },
                });
                w.key_pending = mapping;
            }
            Event::CollectionEnd => {
                let Some(open) = w.open.pop() else {
                    return Err(YamlToJsonError::Syntax);
                };
                w.newline(at);
                w.out.push(if open.mapping { '}' } else { ']' });
                if let Some((name, start)) = open.anchor {
                    let json = w.out[start..].to_string();
                    w.anchors.insert(name, Fragment::Collection(json));
                }
                w.key_pending = w.open.last().is_some_and(|o| o.mapping);
            }
            Event::Other => {}
        }
    }
}

/// An anchored node's JSON, for its aliases.
#[derive(Clone)]
enum Fragment {
    /// A scalar's JSON token (it can also serve as a key).
    Scalar(String),
    /// A collection's JSON text, from its opening bracket.
    Collection(String),
}

/// An open mapping or sequence.
struct Open {
    mapping: bool,
    /// No entry written yet (no separator needed).
    first: bool,
    /// Its anchor and where its JSON starts in the output.
    anchor: Option<(Vec<u8>, usize)>,
}

/// The JSON of one document being written.
#[derive(Default)]
struct Writer {
    out: String,
    lines: Vec<Position>,
    open: Vec<Open>,
    /// The next node in the innermost (mapping) collection is a key.
    key_pending: bool,
    anchors: HashMap<Vec<u8>, Fragment>,
}

impl Writer {
    fn starting_at(at: Position) -> Self {
        Writer {
            lines: vec![at],
            ..Writer::default()
        }
    }

    fn newline(&mut self, at: Position) {
        self.out.push('\n');
        self.lines.push(at);
    }

    /// Starts a node on a new line, with the separator its place needs,
    /// and says whether it is a mapping key (which the caller then writes as
    /// one). Leaves `key_pending` right for the node after a scalar; a
    /// collection sets it when it opens and when it closes.
    fn node(&mut self, at: Position, collection: bool) -> Result<bool, YamlToJsonError> {
        let is_key = self.key_pending;
        if is_key && collection {
            return Err(YamlToJsonError::ComplexKey { at });
        }
        self.newline(at);
        if let Some(open) = self.open.last_mut() {
            // A mapping's value follows its key with no separator.
            let is_entry = !open.mapping || is_key;
            if is_entry && !open.first {
                self.out.push(',');
            }
            if is_entry {
                open.first = false;
            }
            // In a mapping, keys and values alternate.
            self.key_pending = open.mapping && !is_key;
        }
        Ok(is_key)
    }
}

/// The JSON token for a scalar; `None` for a tag outside YAML's own
/// (`!custom`), which kubelet's conversion refuses too.
fn scalar(value: &[u8], plain: bool, tag: Option<&[u8]>) -> Option<String> {
    let text = String::from_utf8_lossy(value);
    let as_string = match tag {
        Some(b"tag:yaml.org,2002:str") | Some(b"!") => true,
        Some(t) if t.starts_with(b"tag:yaml.org,2002:") => false,
        Some(_) => return None,
        None => !plain,
    };
    if as_string {
        return Some(string(&text));
    }
    Some(resolve(&text).unwrap_or_else(|| string(&text)))
}

/// A mapping key's JSON string: a string scalar's own token, a number's or
/// bool's JSON text quoted, and the scalar's text for a null (Go refuses a
/// null key; picolet keeps the text).
fn key(token: &str, value: &[u8]) -> String {
    if token.starts_with('"') {
        token.to_string()
    } else if token == "null" {
        string(&String::from_utf8_lossy(value))
    } else {
        string(token)
    }
}

/// go-yaml v2's resolution of a plain scalar (see the module docs): its JSON
/// token when it is null, a bool or a number with a JSON form.
fn resolve(text: &str) -> Option<String> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Some("null".into()),
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y" => {
            return Some("true".into())
        }
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n" | "N" => {
            return Some("false".into())
        }
        _ => {}
    }
    if text.starts_with('.') {
        // go-yaml hands these to ParseFloat directly (`.5`).
        let f: f64 = text.parse().ok()?;
        return f.is_finite().then(|| format!("{f}"));
    }
    if !text.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+') {
        return None;
    }
    let plain = text.replace('_', "");
    if let Some(n) = integer(&plain) {
        return Some(n);
    }
    if is_float(&plain) {
        let f: f64 = plain.parse().ok()?;
        return f.is_finite().then(|| format!("{f}"));
    }
    None
}

/// Go's `ParseInt(text, 0, 64)`, or `ParseUint` beyond it, in decimal: an
/// optional sign, then `0x`/`0o`/`0b` (either case) or a leading `0`
/// (octal), or decimal digits.
fn integer(text: &str) -> Option<String> {
    let (negative, body) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let lower = body.get(..2).map(str::to_ascii_lowercase);
    let (digits, radix) = match lower.as_deref() {
        Some("0x") => (&body[2..], 16),
        Some("0o") => (&body[2..], 8),
        Some("0b") => (&body[2..], 2),
        _ if body.len() > 1 && body.starts_with('0') => (&body[1..], 8),
        _ => (body, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let n = u128::from_str_radix(digits, radix).ok()?;
    match (negative, n) {
        (_, 0) => Some("0".into()),
        (true, n) if n <= 1 << 63 => Some(format!("-{n}")),
        (false, n) if n <= u128::from(u64::MAX) => Some(n.to_string()),
        _ => None,
    }
}

/// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
fn is_float(text: &str) -> bool {
    let b = text.trim_start_matches(['-', '+']).as_bytes();
    if text.len() - b.len() > 1 {
        return false;
    }
    let digits = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
    let int = digits(b);
    let mut i = int;
    let mut frac = 0;
    if b.get(i) == Some(&b'.') {
        frac = digits(&b[i + 1..]);
        i += 1 + frac;
    }
    if int == 0 && frac == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        let exp = digits(&b[i..]);
        if exp == 0 {
            return false;
        }
        i += exp;
    }
    i == b.len()
}

/// A JSON string literal.
fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(yaml: &str) -> serde_json::Value {
        let docs = yaml_to_json(yaml).unwrap();
        assert_eq!(docs.len(), 1, "{docs:?}");
        serde_json::from_str(&docs[0].json).unwrap_or_else(|e| panic!("{e}: {}", docs[0].json))
    }

    #[test]
    fn scalars_resolve_as_kubelets_yaml_1_1_library_does() {
        let v = json(
            "a: 8080\nb: \"8080\"\nc: true\nd: ~\ne:\nf: 1.5\ng: 0x1F\nh: 0o17\ni: +007\n\
             j: .inf\nk: yes\nl: !!str 12\nm: 1e3\nnn: '1e3'\no: -0\np: 1_000\n\
             q: 0644\nr: 08\ns: Off\nt: 0b101\nu: -0x10\nv: .5\nw: 18446744073709551615\n\
             x: 2001-12-14\nyy: 1.2.3\nz: '0644'\n",
        );
        assert_eq!(
            v,
            serde_json::json!({
                "a": 8080, "b": "8080", "c": true, "d": null, "e": null, "f": 1.5,
                "g": 31, "h": 15, "i": 7, "j": ".inf", "k": true, "l": "12",
                "m": 1000, "nn": "1e3", "o": 0, "p": 1000, "q": 420, "r": 8, "s": false,
                "t": 5, "u": -16, "v": 0.5, "w": u64::MAX, "x": "2001-12-14",
                "yy": "1.2.3", "z": "0644"
            })
        );
    }

    #[test]
    fn a_number_or_bool_key_is_the_string_go_makes_of_it() {
        let v = json("0644: a\non: b\n3: c\nname: d\n");
        assert_eq!(
            v,
            serde_json::json!({"420": "a", "true": "b", "3": "c", "name": "d"})
        );
    }

    #[test]
    fn nesting_flow_style_and_keys_that_are_not_strings_convert() {
        let v = json("m:\n  - {x: [1, 2], 3: y}\n  - []\n  - {}\n  - - a\n    - b\nz: 1\n");
        assert_eq!(
            v,
            // `y` is YAML 1.1's true.
            serde_json::json!({"m": [{"x": [1, 2], "3": true}, [], {}, ["a", "b"]], "z": 1})
        );
    }

    #[test]
    fn strings_are_escaped() {
        let v = json("s: \"quote \\\" backslash \\\\ tab \\t bell \\a é\"\nt: |\n  two\n  lines\n");
        assert_eq!(
            v,
            serde_json::json!({"s": "quote \" backslash \\ tab \t bell \u{7} é", "t": "two\nlines\n"})
        );
    }

    #[test]
    fn aliases_replay_the_anchored_node() {
        let v = json("a: &x {k: [1, &y two]}\nb: *x\nc: *y\n*y : key\n");
        assert_eq!(
            v,
            serde_json::json!({"a": {"k": [1, "two"]}, "b": {"k": [1, "two"]}, "c": "two", "two": "key"})
        );
    }

    #[test]
    fn every_document_of_a_stream_is_converted_and_empty_ones_are_null() {
        let docs = yaml_to_json("---\n---\na: 1\n---\n# only a comment\n").unwrap();
        let nulls: Vec<bool> = docs.iter().map(JsonDocument::is_null).collect();
        assert_eq!(nulls, [true, false, true]);
        assert!(yaml_to_json("").unwrap().is_empty());
    }

    #[test]
    fn a_json_error_is_located_in_the_yaml() {
        let yaml = "kind: Pod\nspec:\n  containers:\n    nope\n";
        let docs = yaml_to_json(yaml).unwrap();
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct S {
            spec: Spec,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Spec {
            containers: Vec<u8>,
        }
        let e = serde_json::from_str::<S>(&docs[0].json).unwrap_err();
        let (message, at) = docs[0].locate(&e);
        assert_eq!(at, Some(Position { line: 4, column: 5 }), "{message}");
        assert!(message.ends_with("at line 4 column 5"), "{message}");
    }

    #[test]
    fn a_syntax_error_and_a_complex_key_are_refused() {
        assert_eq!(
            yaml_to_json("a: b\n c: d\n").unwrap_err(),
            YamlToJsonError::Syntax
        );
        assert!(matches!(
            yaml_to_json("? [a]\n: b\n").unwrap_err(),
            YamlToJsonError::ComplexKey { .. }
        ));
        assert!(matches!(
            yaml_to_json("kind: !custom Pod\n").unwrap_err(),
            YamlToJsonError::UnsupportedTag { .. }
        ));
    }
}
