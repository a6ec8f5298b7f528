//! Every input `make fuzz` ever saved, replayed on every `cargo test`: the
//! crashers in `tests/fuzz/crashers/<target>/` (each once made a target
//! panic, or take over 100 ms) and the seed corpus in
//! `tests/fuzz/corpus/<target>/`. A crasher that panics again fails here,
//! naming its file; one that became slow again shows as a slow test (no
//! timing is asserted).

#[path = "fuzz/targets.rs"]
mod targets;

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn files(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz")
        .join(kind)
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Runs every saved input of `kind` through its target; panics listing
/// each file that made its target panic.
fn replay(kind: &str) -> usize {
    let mut failures = Vec::new();
    let mut count = 0;
    for (target, run) in targets::TARGETS {
        for file in files(kind, target) {
            let input = std::fs::read(&file).expect("reading a saved input");
            count += 1;
            if let Err(e) = panic::catch_unwind(AssertUnwindSafe(|| run(&input))) {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{target}: {}: {msg}", file.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    count
}

#[test]
fn every_saved_crasher_runs_to_completion() {
    replay("crashers");
}

#[test]
fn the_seed_corpus_runs_to_completion() {
    assert!(replay("corpus") > 0, "the seed corpus is not empty");
}

#[test]
fn every_target_has_a_seed_corpus() {
    for (target, _) in targets::TARGETS {
        assert!(
            !files("corpus", target).is_empty(),
            "tests/fuzz/corpus/{target}/ has no seed inputs"
        );
        assert!(targets::target(target).is_some());
    }
}
