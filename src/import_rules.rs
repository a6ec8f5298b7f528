//! The layering of `src/ARCHITECTURE.md`, checked: its "Layers" table says
//! which modules of ours and which crates each layer may never use (and,
//! for the pure core, the only modules of ours it may use); this test reads
//! the table and every source file of the layer's modules and fails on a
//! violation, naming the file, the line and the rule. The table is the one
//! source of the rules: the test has none of its own.
//!
//! It reads what the compiler reads, cut down: comments, string and char
//! literals and `#[cfg(test)]` items (and test-only files: a `tests.rs`,
//! anything under a `tests/` folder) are dropped; every path
//! left is collected, both `use` trees (expanded, `super::`/`self::`
//! resolved against the file's module) and paths written inline
//! (`crate::cri::client::X`, `std::fs::read`). A name brought in by `use`
//! and then used alone is covered by its `use`.
//!
//! Only this test knows it: the crate itself never reads its sources.

use std::fs;
use std::path::{Path, PathBuf};

/// One row of the table.
#[derive(Debug, PartialEq)]
struct Rule {
    layer: String,
    /// Module paths (`pod`, `node::eviction`) the row is about.
    modules: Vec<String>,
    /// When set, the only modules of ours a file of the layer may use
    /// (the layer's own modules are always allowed).
    only_ours: Option<Vec<String>>,
    /// Paths (`smol`, `std::fs`, `crate::agent`) it may never use.
    never: Vec<String>,
}

/// The backticked words of a table cell.
fn ticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The rows of the table under `## Layers` (columns: layer, modules, may
/// use of ours, never). "may use of ours" is a list of modules, or a
/// sentence with no backticks for "no limit".
fn parse_rules(architecture: &str) -> Result<Vec<Rule>, String> {
    let section = architecture
        .split("\n## Layers")
        .nth(1)
        .ok_or("src/ARCHITECTURE.md has no \"## Layers\" section")?;
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut rules = Vec::new();
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
        if cells.len() != 4 || cells[0].trim() == "layer" || cells[0].contains("---") {
            continue;
        }
        let allowed = ticked(cells[2]);
        rules.push(Rule {
            layer: cells[0].trim().to_string(),
            modules: ticked(cells[1]),
            only_ours: (!allowed.is_empty()).then_some(allowed),
            never: ticked(cells[3]),
        });
    }
    if rules.is_empty() {
        return Err("the \"## Layers\" table of src/ARCHITECTURE.md has no rows".into());
    }
    Ok(rules)
}

/// `text` with comments, string and char literals blanked (newlines kept,
/// so line numbers stay right).
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, s: &[u8]| {
        for &c in s {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        let end = if rest.starts_with(b"//") {
            rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len())
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            let mut j = 0;
            loop {
                if j + 1 >= rest.len() {
                    break rest.len();
                }
                if rest[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break j;
                    }
                } else {
                    j += 1;
                }
            }
        } else if let Some(n) = (i == 0 || !is_ident(b[i - 1]))
            .then(|| raw_string_len(rest))
            .flatten()
        {
            n
        } else if rest[0] == b'"' || rest.starts_with(b"b\"") && (i == 0 || !is_ident(b[i - 1])) {
            let start = usize::from(rest[0] == b'b');
            let mut j = start + 1;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(rest.len())
        } else if rest[0] == b'\'' {
            char_literal_len(rest).unwrap_or(0)
        } else {
            0
        };
        if end == 0 {
            // Non-ASCII outside literals and comments is never a path.
            out.push(if b[i].is_ascii() { b[i] as char } else { ' ' });
            i += 1;
        } else {
            blank(&mut out, &rest[..end]);
            i += end;
        }
    }
    out
}

/// The length of a raw string literal (`r"…"`, `r#"…"#`, `br#"…"#`) at the
/// start of `s`.
fn raw_string_len(s: &[u8]) -> Option<usize> {
    let start = if s.starts_with(b"br") {
        2
    } else if s.starts_with(b"r") {
        1
    } else {
        return None;
    };
    let hashes = s[start..].iter().take_while(|&&c| c == b'#').count();
    if s.get(start + hashes) != Some(&b'"') {
        return None;
    }
    let mut close = vec![b'"'];
    close.extend(std::iter::repeat_n(b'#', hashes));
    let body = start + hashes + 1;
    s[body..]
        .windows(close.len())
        .position(|w| w == close.as_slice())
        .map(|p| body + p + close.len())
}

/// The length of a char literal at the start of `s` (`'x'`, `'\n'`,
/// `'\u{1F600}'`, `'é'`); `None` for a lifetime.
fn char_literal_len(s: &[u8]) -> Option<usize> {
    match s.get(1)? {
        b'\\' => s.get(3..)?.iter().position(|&c| c == b'\'').map(|p| p + 4),
        &first => {
            let len = match first {
                0..0x80 => 1,
                0xe0..0xf0 => 3,
                0xf0.. => 4,
                _ => 2,
            };
            (s.get(1 + len) == Some(&b'\'')).then_some(len + 2)
        }
    }
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `stripped` without the items under `#[cfg(test)]` (a `mod x;` line or
/// a braced item), blanked so that line numbers stay right.
fn drop_test_items(stripped: &str) -> String {
    let mut b = stripped.as_bytes().to_vec();
    let mut from = 0;
    while let Some(p) = find(&b[from..], b"#[cfg(test)]") {
        let start = from + p;
        let mut j = start + b"#[cfg(test)]".len();
        // The item ends at a `;` before any brace, or at its closing brace.
        let mut depth = 0usize;
        while j < b.len() {
            match b[j] {
                b';' if depth == 0 => break,
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        let end = (j + 1).min(b.len());
        for c in &mut b[start..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    String::from_utf8(b).unwrap_or_default()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A path the file uses, at a line.
#[derive(Debug, PartialEq)]
struct Used {
    path: String,
    line: usize,
}

/// Every path in `code` (already stripped): `use` trees expanded, and
/// paths of two or more segments written inline. `module` is the file's
/// module path (`pod::spec::env`), for `super::` and `self::`.
fn used_paths(code: &str, module: &str) -> Vec<Used> {
    let line_of = |pos: usize| code[..pos].bytes().filter(|&c| c == b'\n').count() + 1;
    let mut out = Vec::new();
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if !(b[i].is_ascii_alphabetic() || b[i] == b'_')
            || (i > 0 && (is_ident(b[i - 1]) || b[i - 1] == b':'))
        {
            i += 1;
            continue;
        }
        let word_end = i + b[i..].iter().take_while(|&&c| is_ident(c)).count();
        let word = &code[i..word_end];
        if word == "use" {
            let end = word_end
                + b[word_end..]
                    .iter()
                    .position(|&c| c == b';')
                    .unwrap_or(b.len() - word_end);
            for path in expand_use(&code[word_end..end]) {
                out.push(Used {
                    path: resolve(&path, module),
                    line: line_of(i),
                });
            }
            i = end;
            continue;
        }
        // An inline path: ident(::ident)*.
        let mut j = word_end;
        let mut segments = 1;
        while b[j..].starts_with(b"::") {
            let k = j + 2;
            let n = b[k..].iter().take_while(|&&c| is_ident(c)).count();
            if n == 0 {
                break;
            }
            j = k + n;
            segments += 1;
        }
        if segments >= 2 {
            out.push(Used {
                path: resolve(&code[i..j], module),
                line: line_of(i),
            });
        }
        i = j.max(word_end);
    }
    out
}

/// A `use` tree (the text between `use` and `;`) as full paths:
/// `crate::{a::b, c::{self, d as e}}` → `crate::a::b`, `crate::c`,
/// `crate::c::d`.
fn expand_use(tree: &str) -> Vec<String> {
    fn walk(prefix: &str, tree: &str, out: &mut Vec<String>) {
        let tree = tree.trim();
        if let Some(open) = tree.find('{') {
            let head = tree[..open].trim().trim_end_matches("::");
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let prefix = join(prefix, head);
            let mut depth = 0;
            let mut start = 0;
            for (k, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        walk(&prefix, &inner[start..k], out);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            walk(&prefix, &inner[start..], out);
        } else {
            let item = tree.split(" as ").next().unwrap_or(tree).trim();
            match item {
                "" | "*" => out.push(prefix.to_string()),
                "self" => out.push(prefix.to_string()),
                _ => out.push(join(prefix, item)),
            }
        }
    }
    fn join(a: &str, b: &str) -> String {
        match (a.is_empty(), b.is_empty()) {
            (true, _) => b.to_string(),
            (_, true) => a.to_string(),
            _ => format!("{a}::{b}"),
        }
    }
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    walk("", tree.trim_start_matches("::"), &mut out);
    out.retain(|p| !p.is_empty());
    out
}

/// `path` with a leading `self::`/`super::` made absolute (`crate::…`)
/// for a file of module `module` (`super` of `pod::spec::env`, whether
/// that is `pod/spec/env.rs` or `pod/spec/env/mod.rs`, is `pod::spec`).
fn resolve(path: &str, module: &str) -> String {
    let mut segments: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
    let mut rest = path;
    let mut relative = false;
    loop {
        if let Some(r) = rest.strip_prefix("self::") {
            rest = r;
        } else if let Some(r) = rest.strip_prefix("super::") {
            segments.pop();
            rest = r;
        } else {
            break;
        }
        relative = true;
    }
    if !relative {
        return path.to_string();
    }
    let mut full = String::from("crate");
    for s in segments {
        full.push_str("::");
        full.push_str(s);
    }
    format!("{full}::{rest}")
}

/// The module path of a file under `src/` (`pod/spec/env.rs` →
/// `pod::spec::env`, `pod/mod.rs` → `pod`).
fn module_of(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts.join("::")
}

/// Test-only files (a module's `tests` submodule in its own file): `tests.rs`
/// and anything under `tests/`.
fn is_test_file(rel: &Path) -> bool {
    let name = rel
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    name == "tests.rs" || rel.iter().any(|p| p == "tests")
}

/// Does module path `module` (of a file) belong to `owner` (`pod` owns
/// `pod::spec::env`)?
fn within(module: &str, owner: &str) -> bool {
    module == owner || module.starts_with(&format!("{owner}::"))
}

/// Does `path` name `rule_path` or something under it (`std::fs` matches
/// `std::fs::read`, not `std::fsx`)?
fn names(path: &str, rule_path: &str) -> bool {
    path == rule_path || path.starts_with(&format!("{rule_path}::"))
}

/// The violations of `rules` in one file, as "file:line: …" lines.
fn check_file(rules: &[Rule], rel: &Path, text: &str) -> Vec<String> {
    let module = module_of(rel);
    let code = drop_test_items(&strip(text));
    let used = used_paths(&code, &module);
    let mut out = Vec::new();
    for rule in rules
        .iter()
        .filter(|r| r.modules.iter().any(|m| within(&module, m)))
    {
        for u in &used {
            if let Some(bad) = rule
                .never
                .iter()
                .find(|n| names(&u.path, n) || names(&u.path, &format!("crate::{n}")))
            {
                out.push(format!(
                    "src/{}:{}: uses {} ({} may never use `{bad}`)",
                    rel.display(),
                    u.line,
                    u.path,
                    rule.layer
                ));
                continue;
            }
            if let (Some(only), Some(ours)) = (&rule.only_ours, u.path.strip_prefix("crate::")) {
                let fine = rule.modules.iter().chain(only).any(|m| within(ours, m));
                if !fine {
                    out.push(format!(
                        "src/{}:{}: uses crate::{ours} ({} may use only itself and {})",
                        rel.display(),
                        u.line,
                        rule.layer,
                        only.join(", ")
                    ));
                }
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_layer_uses_only_what_the_architecture_table_allows() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let table = fs::read_to_string(src.join("ARCHITECTURE.md")).expect("src/ARCHITECTURE.md");
    let rules = parse_rules(&table).unwrap_or_else(|e| panic!("{e}"));
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut violations = Vec::new();
    let mut checked = 0;
    for path in &files {
        let rel = path.strip_prefix(&src).expect("under src");
        if is_test_file(rel) {
            continue;
        }
        let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        checked += 1;
        violations.extend(check_file(&rules, rel, &text));
    }
    for rule in &rules {
        for m in &rule.modules {
            assert!(
                files
                    .iter()
                    .any(|f| within(&module_of(f.strip_prefix(&src).unwrap()), m)),
                "src/ARCHITECTURE.md's Layers table names module `{m}` ({}), which has no file",
                rule.layer
            );
        }
    }
    assert!(
        checked > 50,
        "only {checked} source files found under {}",
        src.display()
    );
    assert!(
        violations.is_empty(),
        "{} import(s) break src/ARCHITECTURE.md's Layers table:\n{}",
        violations.len(),
        violations.join("\n")
    );
}

const TABLE: &str = "# A\n\n## Layers\n\n| layer | modules | may use of ours | never |\n|---|---|---|---|\n| pure core | `pod` `node::eviction` | `config` | `smol` `std::fs` `crate::agent` |\n| servers | `admin` | anything | `agent` |\n\n## Next\n| x | y | z | w |\n";

#[test]
fn the_table_gives_each_layer_its_modules_and_its_rules() {
    let rules = parse_rules(TABLE).expect("parses");
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[0].modules, ["pod", "node::eviction"]);
    assert_eq!(
        rules[0].only_ours.as_deref(),
        Some(&["config".to_string()][..])
    );
    assert_eq!(rules[0].never, ["smol", "std::fs", "crate::agent"]);
    assert_eq!(rules[1].only_ours, None);
    assert_eq!(rules[1].never, ["agent"]);
}

#[test]
fn a_pure_module_that_imports_smol_is_named_with_its_line() {
    let rules = parse_rules(TABLE).expect("parses");
    let text = "//! pure\n\nuse std::collections::BTreeMap;\nuse smol::Timer;\n";
    let v = check_file(&rules, Path::new("pod/plan.rs"), text);
    assert_eq!(
        v,
        ["src/pod/plan.rs:4: uses smol::Timer (pure core may never use `smol`)"]
    );
}

#[test]
fn grouped_nested_and_relative_imports_are_all_seen() {
    let rules = parse_rules(TABLE).expect("parses");
    let text = "use std::{collections::HashMap, fs};\nuse super::super::super::agent::Agent;\nuse crate::{config::X, cgroups::{self, PodCgroups as P}};\n";
    let v = check_file(&rules, Path::new("pod/spec/env.rs"), text);
    assert_eq!(
        v,
        [
            "src/pod/spec/env.rs:1: uses std::fs (pure core may never use `std::fs`)",
            "src/pod/spec/env.rs:2: uses crate::agent::Agent (pure core may never use `crate::agent`)",
            "src/pod/spec/env.rs:3: uses crate::cgroups (pure core may use only itself and config)",
            "src/pod/spec/env.rs:3: uses crate::cgroups::PodCgroups (pure core may use only itself and config)",
        ]
    );
}

#[test]
fn inline_paths_count_and_comments_strings_and_test_items_do_not() {
    let rules = parse_rules(TABLE).expect("parses");
    let text = "//! see crate::agent and smol::spawn\nfn f() -> u8 {\n    let s = \"smol::x crate::agent\";\n    let c = '\"';\n    let _ = std::fs::read(\"x\");\n    0\n}\n/* smol::y */\n#[cfg(test)]\nmod tests {\n    use smol::block_on;\n    fn g() { let _ = crate::agent::Agent::new(); }\n}\n#[cfg(test)]\nmod more_tests;\n";
    let v = check_file(&rules, Path::new("node/eviction/rank.rs"), text);
    assert_eq!(
        v,
        ["src/node/eviction/rank.rs:5: uses std::fs::read (pure core may never use `std::fs`)"]
    );
}

#[test]
fn a_module_of_another_layer_is_not_held_to_the_pure_rules() {
    let rules = parse_rules(TABLE).expect("parses");
    assert!(check_file(
        &rules,
        Path::new("agent/sync.rs"),
        "use smol::Timer;\nuse std::fs;\n"
    )
    .is_empty());
    assert_eq!(
        check_file(
            &rules,
            Path::new("admin/router.rs"),
            "use crate::agent::Agent;\n"
        ),
        ["src/admin/router.rs:1: uses crate::agent::Agent (servers may never use `agent`)"]
    );
}
