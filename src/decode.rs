//! Bounded decoding of YAML and JSON that comes from outside: static pod
//! manifests, the config file, and (later) kubeconfig and API-server replies.
//!
//! Why it exists: picolet runs every loop on one thread, so a parse that takes
//! a second stops probes, PLEG, the admin socket and every pod's sync for that
//! second. libyaml, under serde_yaml_ng, is quadratic in flow nesting depth
//! (each token rescans the possible simple keys of every open `[` / `{`):
//! 1,000 levels cost ~45 ms, 10,000 levels ~1.7 s, the 200 KB
//! `a: [[[[...]]]]` of 100,000 levels never finished. serde_yaml_ng also
//! loads a whole document's events into memory before deserializing anything
//! (~60 bytes each), so a 1 MiB file of `[1,1,1,...]` costs ~16 MiB of RSS.
//!
//! So before a document is handed to serde, [`check_yaml`] (or [`check_json`])
//! walks it as a stream and refuses it as soon as it exceeds a [`Limits`]:
//!
//! - **size** in bytes, checked first;
//! - **depth**: open collections, flow (`[`, `{`) and block (indentation,
//!   `- - -`) alike, exactly as the parser sees them;
//! - **nodes**: scalars, collections and documents, with every alias counted
//!   as the size of the node it repeats, so a billion-laughs document is
//!   refused by arithmetic, before anything is expanded.
//!
//! The YAML walk is libyaml's own event parser (the one serde_yaml_ng uses,
//! reached through `unsafe_libyaml`, so it costs no binary size), not an
//! imitation of it: what it calls depth is what libyaml will nest. It stops
//! at the first limit, so the 100,000-level file is refused after 65 events
//! and libyaml's ~1,000-character simple-key lookahead (~4 ms on a desktop
//! core, whatever the file's length, instead of never finishing), and the
//! cost of any document up to a limit is bounded by `max_nodes × max_depth`
//! simple-key checks plus a pass over its bytes. A syntax error is not this
//! module's business: the walk stops there and returns the shape so far; the
//! real decoder then reports the error with its own line and column, after
//! the same bounded amount of work.
//!
//! JSON through serde_json already has a recursion limit (128 levels, an
//! error rather than a stack overflow) and its parse is linear, but a 1 MiB
//! array of numbers still becomes ~16 MiB of `serde_json::Value`;
//! [`check_json`] bounds that with the same [`Limits`], using a small exact
//! lexer (JSON has only strings to skip).
//!
//! What it must NOT know: which document it reads (callers add the file or
//! source to the error) or what the document means.

use std::collections::HashMap;
use std::ffi::CStr;
use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

pub mod unknown;
mod yaml_json;
pub use yaml_json::{yaml_to_json, JsonDocument, YamlToJsonError};

/// How much of a document picolet is willing to parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest document, in bytes.
    pub max_bytes: usize,
    /// Deepest nesting of collections (the document's top-level mapping is
    /// depth 1).
    pub max_depth: usize,
    /// Most nodes (scalars, collections, documents), aliases counted as the
    /// node they repeat.
    pub max_nodes: usize,
}

impl Limits {
    /// Static pod manifests. A real pod manifest is a few KiB and a few
    /// hundred nodes, nested about a dozen deep (`spec.affinity...values`).
    /// 256 KiB, 64 levels and 5,000 nodes (a pod with ~1,000 env vars) leave
    /// room for big ones while bounding a manifest's whole decode (this
    /// check, then serde twice) to ~10 ms on a desktop core and its events
    /// to ~0.5 MiB of memory.
    pub const MANIFEST: Limits = Limits {
        max_bytes: 256 * 1024,
        max_depth: 64,
        max_nodes: 5_000,
    };

    /// The KubeletConfiguration file (and board profiles): the same bounds
    /// as a manifest; a real one is a few dozen lines.
    pub const CONFIG: Limits = Limits::MANIFEST;
}

/// What a document that passed the check looked like.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    /// Nodes, aliases expanded (see [`Limits::max_nodes`]).
    pub nodes: usize,
    /// Deepest nesting seen.
    pub depth: usize,
    /// Documents in the stream (JSON: 1).
    pub documents: usize,
}

/// Where in the text a limit was crossed: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {} column {}", self.line, self.column)
    }
}

/// Which limit a document crossed. The messages complete a sentence that
/// starts with the document's name: `manifest /x.yaml nests deeper than 64
/// levels (at line 1 column 68)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("is {size} bytes, over the {limit}-byte limit")]
    TooLarge { size: usize, limit: usize },
    #[error("nests deeper than {limit} levels (at {at})")]
    TooDeep { limit: usize, at: Position },
    #[error("has more than {limit} nodes (at {at})")]
    TooManyNodes { limit: usize, at: Position },
    #[error("expands aliases to more than {limit} nodes (at {at})")]
    AliasExpansion { limit: usize, at: Position },
}

/// Walks a YAML stream (JSON included) with libyaml's event parser and
/// refuses it as soon as it crosses `limits`. A syntax error ends the walk
/// without an error: see the module docs.
pub fn check_yaml(text: &str, limits: &Limits) -> Result<Shape, LimitError> {
    check_size(text.len(), limits)?;
    let mut walk = Walk::new(limits);
    let Some(mut parser) = Parser::new(text.as_bytes()) else {
        // libyaml could not allocate its parser; the real decoder will fail
        // the same way and say so.
        return Ok(walk.shape);
    };
    while let Some((event, at)) = parser.next() {
        walk.at = at;
        match event {
            Event::StreamEnd => break,
            Event::DocumentStart => {
                walk.shape.documents += 1;
                walk.add(1, Anchor::None)?;
            }
            Event::Scalar { anchor, .. } => walk.add(1, anchor)?,
            Event::Alias(name) => {
                let size = walk.anchors.get(&name).copied().unwrap_or(1);
                walk.alias(size)?;
            }
            Event::CollectionStart { anchor, .. } => walk.open(anchor)?,
            Event::CollectionEnd => walk.close(),
            Event::DocumentEnd | Event::Other => {}
        }
    }
    Ok(walk.shape)
}

/// Lexes a JSON document and refuses it as soon as it crosses `limits`. Not a
/// validator: malformed JSON is left to serde_json, which reports it.
pub fn check_json(bytes: &[u8], limits: &Limits) -> Result<Shape, LimitError> {
    check_size(bytes.len(), limits)?;
    let mut shape = Shape {
        documents: 1,
        ..Shape::default()
    };
    let mut depth = 0usize;
    let (mut line, mut line_start) = (1usize, 0usize);
    let mut in_value = false; // inside a number or literal
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let at = Position {
            line,
            column: i - line_start + 1,
        };
        let starts_value = match b {
            b'"' => {
                // Skip the string; an escape skips the next byte.
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    } else if bytes[i] == b'\n' {
                        (line, line_start) = (line + 1, i + 1);
                    }
                    i += 1;
                }
                true
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > limits.max_depth {
                    return Err(LimitError::TooDeep {
                        limit: limits.max_depth,
                        at,
                    });
                }
                shape.depth = shape.depth.max(depth);
                true
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                false
            }
            b'\n' => {
                (line, line_start) = (line + 1, i + 1);
                false
            }
            b',' | b':' | b' ' | b'\t' | b'\r' => false,
            // A number or a literal: one node, however long.
            _ => !in_value,
        };
        in_value = !matches!(b, b'"' | b'[' | b'{' | b']' | b'}' | b',' | b':')
            && !b.is_ascii_whitespace();
        if starts_value {
            shape.nodes += 1;
            if shape.nodes > limits.max_nodes {
                return Err(LimitError::TooManyNodes {
                    limit: limits.max_nodes,
                    at,
                });
            }
        }
        i += 1;
    }
    Ok(shape)
}

fn check_size(size: usize, limits: &Limits) -> Result<(), LimitError> {
    if size > limits.max_bytes {
        return Err(LimitError::TooLarge {
            size,
            limit: limits.max_bytes,
        });
    }
    Ok(())
}

/// The bookkeeping of [`check_yaml`]: depth, the running node count with
/// aliases expanded, and the expanded size of every anchored node.
struct Walk<'l> {
    limits: &'l Limits,
    shape: Shape,
    /// Open collections: the node count when each opened, and its anchor.
    open: Vec<(usize, Anchor)>,
    /// Expanded size of each anchored node seen so far.
    anchors: HashMap<Vec<u8>, usize>,
    /// Where the parser is, for errors.
    at: Position,
}

impl<'l> Walk<'l> {
    fn new(limits: &'l Limits) -> Self {
        Walk {
            limits,
            shape: Shape::default(),
            open: Vec::new(),
            anchors: HashMap::new(),
            at: Position { line: 1, column: 1 },
        }
    }

    fn add(&mut self, n: usize, anchor: Anchor) -> Result<(), LimitError> {
        self.count(n, false)?;
        if let Anchor::Named(name) = anchor {
            self.anchors.insert(name, n);
        }
        Ok(())
    }

    fn alias(&mut self, size: usize) -> Result<(), LimitError> {
        self.count(size, true)
    }

    fn count(&mut self, n: usize, alias: bool) -> Result<(), LimitError> {
        self.shape.nodes = self.shape.nodes.saturating_add(n);
        if self.shape.nodes > self.limits.max_nodes {
            let (limit, at) = (self.limits.max_nodes, self.at);
            return Err(if alias {
                LimitError::AliasExpansion { limit, at }
            } else {
                LimitError::TooManyNodes { limit, at }
            });
        }
        Ok(())
    }

    fn open(&mut self, anchor: Anchor) -> Result<(), LimitError> {
        let before = self.shape.nodes;
        self.count(1, false)?;
        self.open.push((before, anchor));
        if self.open.len() > self.limits.max_depth {
            return Err(LimitError::TooDeep {
                limit: self.limits.max_depth,
                at: self.at,
            });
        }
        self.shape.depth = self.shape.depth.max(self.open.len());
        Ok(())
    }

    fn close(&mut self) {
        if let Some((before, Anchor::Named(name))) = self.open.pop() {
            self.anchors.insert(name, self.shape.nodes - before);
        }
    }
}

/// The anchor (`&name`) on a node, if any.
enum Anchor {
    None,
    Named(Vec<u8>),
}

/// The events [`check_yaml`] and [`yaml_json`] care about.
enum Event {
    StreamEnd,
    DocumentStart,
    DocumentEnd,
    Scalar {
        anchor: Anchor,
        value: Vec<u8>,
        /// Written without quotes or block indicators, so its type is
        /// resolved from its text.
        plain: bool,
        /// The explicit tag, if any (`!!str` arrives as
        /// `tag:yaml.org,2002:str`).
        tag: Option<Vec<u8>>,
    },
    Alias(Vec<u8>),
    CollectionStart {
        anchor: Anchor,
        mapping: bool,
    },
    CollectionEnd,
    Other,
}

/// libyaml's event parser over a borrowed input. All `unsafe` of the module
/// is here: the parser lives in a `Box` (libyaml keeps pointers into it, so
/// it must not move), is initialised once, reads only `input` (which it
/// borrows for `'a`) and is deleted on drop; every event is deleted after
/// its fields are copied out.
struct Parser<'a> {
    raw: Box<MaybeUninit<unsafe_libyaml::yaml_parser_t>>,
    done: bool,
    input: PhantomData<&'a [u8]>,
}

impl<'a> Parser<'a> {
    fn new(input: &'a [u8]) -> Option<Parser<'a>> {
        let mut raw = Box::new(MaybeUninit::<unsafe_libyaml::yaml_parser_t>::uninit());
        // SAFETY: `raw` is a valid, heap-pinned allocation for a parser;
        // initialize fills it in, and on failure we never touch it again
        // (libyaml frees what it allocated before failing).
        unsafe {
            if unsafe_libyaml::yaml_parser_initialize(raw.as_mut_ptr()).fail {
                return None;
            }
            unsafe_libyaml::yaml_parser_set_encoding(
                raw.as_mut_ptr(),
                unsafe_libyaml::YAML_UTF8_ENCODING,
            );
            unsafe_libyaml::yaml_parser_set_input_string(
                raw.as_mut_ptr(),
                input.as_ptr(),
                input.len() as _,
            );
        }
        Some(Parser {
            raw,
            done: false,
            input: PhantomData,
        })
    }

    /// The next event and where it starts; `None` after the stream ends or
    /// at a syntax error.
    fn next(&mut self) -> Option<(Event, Position)> {
        if self.done {
            return None;
        }
        let mut event = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
        // SAFETY: the parser was initialised in `new` and its input outlives
        // it ('a). After a successful parse the event is initialised; we copy
        // what we need (anchors and tags are NUL-terminated strings, values
        // `length` bytes, all owned by the
        // event) before deleting it.
        unsafe {
            let parser = self.raw.as_mut_ptr();
            if unsafe_libyaml::yaml_parser_parse(parser, event.as_mut_ptr()).fail {
                self.done = true;
                return None;
            }
            let e = event.as_mut_ptr();
            let anchor = |p: *const u8| {
                if p.is_null() {
                    Anchor::None
                } else {
                    Anchor::Named(CStr::from_ptr(p.cast()).to_bytes().to_vec())
                }
            };
            let out = match (*e).type_ {
                unsafe_libyaml::YAML_STREAM_END_EVENT => Event::StreamEnd,
                unsafe_libyaml::YAML_DOCUMENT_START_EVENT => Event::DocumentStart,
                unsafe_libyaml::YAML_DOCUMENT_END_EVENT => Event::DocumentEnd,
                unsafe_libyaml::YAML_SCALAR_EVENT => {
                    let d = &(*e).data.scalar;
                    let value = if d.value.is_null() {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(d.value, d.length as usize).to_vec()
                    };
                    let tag = (!d.tag.is_null())
                        .then(|| CStr::from_ptr(d.tag.cast()).to_bytes().to_vec());
                    Event::Scalar {
                        anchor: anchor(d.anchor),
                        value,
                        plain: d.style == unsafe_libyaml::YAML_PLAIN_SCALAR_STYLE,
                        tag,
                    }
                }
                unsafe_libyaml::YAML_ALIAS_EVENT => match anchor((*e).data.alias.anchor) {
                    Anchor::Named(name) => Event::Alias(name),
                    Anchor::None => Event::Alias(Vec::new()),
                },
                unsafe_libyaml::YAML_SEQUENCE_START_EVENT => Event::CollectionStart {
                    anchor: anchor((*e).data.sequence_start.anchor),
                    mapping: false,
                },
                unsafe_libyaml::YAML_MAPPING_START_EVENT => Event::CollectionStart {
                    anchor: anchor((*e).data.mapping_start.anchor),
                    mapping: true,
                },
                unsafe_libyaml::YAML_SEQUENCE_END_EVENT
                | unsafe_libyaml::YAML_MAPPING_END_EVENT => Event::CollectionEnd,
                _ => Event::Other,
            };
            if matches!(out, Event::StreamEnd) {
                self.done = true;
            }
            let mark = (*e).start_mark;
            unsafe_libyaml::yaml_event_delete(e);
            let at = Position {
                line: mark.line as usize + 1,
                column: mark.column as usize + 1,
            };
            Some((out, at))
        }
    }
}

impl Drop for Parser<'_> {
    fn drop(&mut self) {
        // SAFETY: initialised in `new` (a failed init never builds a Parser).
        unsafe { unsafe_libyaml::yaml_parser_delete(self.raw.as_mut_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limits = Limits {
        max_bytes: 4096,
        max_depth: 8,
        max_nodes: 100,
    };

    fn nested(n: usize) -> String {
        format!("a: {}{}\n", "[".repeat(n), "]".repeat(n))
    }

    #[test]
    fn an_ordinary_document_passes_and_reports_its_shape() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: a\n    image: b\n";
        let shape = check_yaml(text, &Limits::MANIFEST).unwrap();
        assert_eq!(shape.documents, 1);
        assert_eq!(shape.depth, 4, "top, spec, containers, container");
        // 1 document + 5 collections + 13 scalars.
        assert_eq!(shape.nodes, 19);
    }

    #[test]
    fn the_hundred_thousand_level_flow_sequence_is_refused_at_the_limit() {
        let text = nested(100_000);
        assert_eq!(text.len(), 200_004);
        let err = check_yaml(&text, &Limits::MANIFEST).unwrap_err();
        assert!(
            matches!(err, LimitError::TooDeep { limit: 64, at } if at.line == 1),
            "{err:?}"
        );
        assert!(err
            .to_string()
            .starts_with("nests deeper than 64 levels (at line 1 column"));
    }

    #[test]
    fn flow_mappings_and_block_indentation_count_as_depth_too() {
        let braces = format!("a: {}1{}\n", "{a: ".repeat(20), "}".repeat(20));
        assert!(matches!(
            check_yaml(&braces, &SMALL),
            Err(LimitError::TooDeep { limit: 8, .. })
        ));
        let mut block = String::new();
        for level in 0..20 {
            block.push_str(&" ".repeat(level));
            block.push_str("k:\n");
        }
        assert!(matches!(
            check_yaml(&block, &SMALL),
            Err(LimitError::TooDeep { .. })
        ));
        let dashes = format!("a:\n{}x\n", "- ".repeat(20));
        assert!(matches!(
            check_yaml(&dashes, &SMALL),
            Err(LimitError::TooDeep { .. })
        ));
        assert!(
            check_yaml(&nested(7), &SMALL).is_ok(),
            "7 + the document mapping = 8"
        );
        assert!(check_yaml(&nested(8), &SMALL).is_err());
    }

    #[test]
    fn a_billion_laughs_is_refused_without_expanding_it() {
        let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for (name, prev) in ["b", "c", "d", "e", "f", "g", "h", "i"]
            .iter()
            .zip(["a", "b", "c", "d", "e", "f", "g", "h"])
        {
            let refs = vec![format!("*{prev}"); 10].join(", ");
            text.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        let err = check_yaml(&text, &Limits::MANIFEST).unwrap_err();
        assert!(
            matches!(err, LimitError::AliasExpansion { limit: 5_000, .. }),
            "{err:?}"
        );
        // A few honest aliases are fine.
        let ok = "base: &env [{name: A, value: '1'}]\nx: *env\ny: *env\n";
        let shape = check_yaml(ok, &Limits::MANIFEST).unwrap();
        // document, top mapping, 3 keys, the anchored sequence (6 nodes),
        // and each alias counts those 6 again.
        assert_eq!(shape.nodes, 1 + 1 + 3 + 6 + 2 * 6);
    }

    #[test]
    fn too_many_nodes_are_refused_even_when_flat() {
        let text = format!("a: [{}1]\n", "1,".repeat(200));
        assert!(matches!(
            check_yaml(&text, &SMALL),
            Err(LimitError::TooManyNodes { limit: 100, .. })
        ));
        let docs = "---\n".repeat(200);
        assert!(matches!(
            check_yaml(&docs, &SMALL),
            Err(LimitError::TooManyNodes { .. })
        ));
    }

    #[test]
    fn the_size_is_checked_before_anything_is_parsed() {
        let text = "#".repeat(5000);
        assert_eq!(
            check_yaml(&text, &SMALL),
            Err(LimitError::TooLarge {
                size: 5000,
                limit: 4096
            })
        );
        assert!(matches!(
            check_json(text.as_bytes(), &SMALL),
            Err(LimitError::TooLarge { .. })
        ));
    }

    #[test]
    fn a_syntax_error_is_left_to_the_decoder() {
        let shape = check_yaml("a: [1, 2\nb: {", &Limits::MANIFEST).unwrap();
        assert!(shape.nodes >= 3, "{shape:?}");
        assert!(check_yaml("\0\u{1}binary", &Limits::MANIFEST).is_ok());
    }

    #[test]
    fn json_depth_and_nodes_are_counted_exactly() {
        let json = br#"{"a": [1, "x", {"b": null}], "c": "[[[[{{{{"}"#;
        let shape = check_json(json, &SMALL).unwrap();
        assert_eq!(shape.depth, 3);
        // a, [, 1, "x", {, b, null, c, "[[[[{{{{", plus the outer {.
        assert_eq!(shape.nodes, 10);
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        let err = check_json(deep.as_bytes(), &Limits::MANIFEST).unwrap_err();
        assert!(
            matches!(err, LimitError::TooDeep { limit: 64, at } if at == Position { line: 1, column: 70 }),
            "{err:?}"
        );
        let wide = format!("[{}1]", "1,".repeat(200));
        assert!(matches!(
            check_json(wide.as_bytes(), &SMALL),
            Err(LimitError::TooManyNodes { .. })
        ));
        let escaped = br#"{"a": "\"]]]]]]]]]", "b": [[[[[[[[[[]]]]]]]]]]}"#;
        assert!(matches!(
            check_json(escaped, &SMALL),
            Err(LimitError::TooDeep { .. })
        ));
    }

    #[test]
    fn the_deep_file_is_refused_without_growing_memory_or_stalling() {
        // Not a timing assertion: this runs the refusal many times; if the
        // check were as slow as the parse it guards (minutes), this test
        // would never finish.
        let text = nested(100_000);
        for _ in 0..50 {
            assert!(check_yaml(&text, &Limits::MANIFEST).is_err());
        }
    }
}
