//! `make fuzz`: a small random-input engine of our own, on the stable
//! toolchain, for the parsers of outside input (see `fuzz/targets.rs`):
//! the manifest parser and validator, the KubeletConfiguration loader,
//! quantities, Go durations, and pod → CRI translation.
//!
//! Returns at once unless `PICOLET_FUZZ_SECONDS` is set (a plain
//! `cargo test` runs it as a no-op). Settings, all environment variables:
//!
//! - `PICOLET_FUZZ_SECONDS`: how long to fuzz each target;
//! - `PICOLET_FUZZ_TARGET`: comma-separated targets (default: all);
//! - `PICOLET_FUZZ_SEED`: the PRNG seed (default fixed, so a run is
//!   reproducible given the same corpus; the seed is printed);
//! - `PICOLET_FUZZ_GROW_CORPUS=1`: also write inputs that reached a new
//!   outcome into `tests/fuzz/corpus/<target>/`.
//!
//! How it works: start from the files in `tests/fuzz/corpus/<target>/`,
//! mutate a random one (bytes, YAML-ish tokens, lines, numbers, splices,
//! nesting runs), run the target under `catch_unwind`, and keep the input if
//! its outcome signature is new. A panic, or an input that takes more than
//! 100 ms three times in a row, is a crasher: it is saved in
//! `tests/fuzz/crashers/<target>/` and `tests/fuzz_regressions.rs` replays it
//! in every `cargo test` from then on. An input that makes no progress for
//! 10 s is saved as a hang and the run stops.
//!
//! Build it optimised with overflow checks (`--profile fuzz`, see
//! Cargo.toml): debug is too slow for the 100 ms bound to mean anything.
//! CI's short smoke run builds it in the dev profile instead (the same
//! checks, and the test build's dependencies, already compiled), where the
//! bound is `PICOLET_FUZZ_SLOW_MS` (the Makefile sets 1000 for
//! `FUZZ_PROFILE=dev`).

#[path = "fuzz/targets.rs"]
mod targets;

use std::collections::HashSet;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// An input slower than this, three times running, is a crasher (100 ms
/// optimised; `PICOLET_FUZZ_SLOW_MS` for an unoptimised build).
fn slow_bound() -> Duration {
    static BOUND: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *BOUND.get_or_init(|| {
        let ms = std::env::var("PICOLET_FUZZ_SLOW_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100);
        Duration::from_millis(ms)
    })
}
/// No progress for this long is a hang.
const HANG: Duration = Duration::from_secs(10);
/// Mutated inputs are capped here (the limits themselves are unit-tested).
const MAX_INPUT: usize = 64 * 1024;
/// The in-memory corpus is capped here; past it, a new input replaces a
/// random one.
const MAX_CORPUS: usize = 4096;
/// Outcome signatures remembered, at most.
const MAX_OUTCOMES: usize = 1 << 20;

fn main() {
    let Some(seconds) = std::env::var("PICOLET_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        println!("fuzz: set PICOLET_FUZZ_SECONDS (or run `make fuzz`) to fuzz");
        return;
    };
    let only: Option<Vec<String>> = std::env::var("PICOLET_FUZZ_TARGET")
        .ok()
        .map(|s| s.split(',').map(|t| t.trim().to_string()).collect());
    for name in only.iter().flatten() {
        if targets::target(name).is_none() {
            let all: Vec<&str> = targets::TARGETS.iter().map(|(n, _)| *n).collect();
            eprintln!("fuzz: unknown target {name:?}; targets: {}", all.join(", "));
            std::process::exit(2);
        }
    }
    let seed = std::env::var("PICOLET_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0x5EED_F00D);
    let grow = std::env::var_os("PICOLET_FUZZ_GROW_CORPUS").is_some();
    // Keep panics quiet: each is reported once, as a crasher.
    panic::set_hook(Box::new(|info| {
        LAST_PANIC.with(|p| *p.borrow_mut() = Some(info.to_string()));
    }));
    let mut crashers = 0;
    for (name, run) in targets::TARGETS {
        if only.as_ref().is_some_and(|o| !o.iter().any(|t| t == name)) {
            continue;
        }
        crashers += fuzz(name, *run, Duration::from_secs(seconds), seed, grow);
    }
    if crashers > 0 {
        println!("fuzz: {crashers} crasher(s) saved; fix them, then `cargo test --test fuzz_regressions`");
        std::process::exit(1);
    }
}

thread_local! {
    static LAST_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz")
}

/// Fuzzes one target for `time`; returns how many crashers it saved.
fn fuzz(name: &str, run: fn(&[u8]) -> String, time: Duration, seed: u64, grow: bool) -> usize {
    let corpus_dir = fuzz_dir().join("corpus").join(name);
    let crash_dir = fuzz_dir().join("crashers").join(name);
    let corpus = read_dir(&corpus_dir);
    println!(
        "fuzz {name}: {} corpus inputs, seed {seed:#x}, {}s",
        corpus.len(),
        time.as_secs()
    );
    let current = Arc::new(Mutex::new(Vec::new()));
    let execs = Arc::new(AtomicU64::new(0));
    let worker = {
        let (current, execs) = (current.clone(), execs.clone());
        let name = name.to_string();
        thread::spawn(move || {
            let mut w = Worker {
                name,
                run,
                rng: Rng(seed ^ 0x9E37_79B9_7F4A_7C15),
                corpus: if corpus.is_empty() {
                    vec![Vec::new()]
                } else {
                    corpus
                },
                seen: HashSet::new(),
                crash_kinds: HashSet::new(),
                crashers: 0,
                corpus_dir,
                crash_dir,
                grow,
            };
            for input in w.corpus.clone() {
                w.try_input(input, &current, &execs);
            }
            let deadline = Instant::now() + time;
            while Instant::now() < deadline {
                let input = w.mutate();
                w.try_input(input, &current, &execs);
            }
            (w.crashers, w.corpus.len(), w.seen.len())
        })
    };
    let start = Instant::now();
    let (mut last, mut last_change) = (0, Instant::now());
    while !worker.is_finished() {
        thread::sleep(Duration::from_millis(200));
        let n = execs.load(Ordering::Relaxed);
        if n != last {
            (last, last_change) = (n, Instant::now());
        } else if last_change.elapsed() > HANG {
            let input = current.lock().unwrap().clone();
            let path = save(&fuzz_dir().join("crashers").join(name), "hang", &input);
            println!(
                "fuzz {name}: HANG (no progress for {HANG:?}) on {}",
                path.display()
            );
            std::process::exit(1);
        }
    }
    let (crashers, corpus, outcomes) = worker.join().expect("the fuzz worker does not panic");
    let n = execs.load(Ordering::Relaxed);
    println!(
        "fuzz {name}: {n} execs ({:.0}/s), {corpus} inputs kept, {outcomes} distinct outcomes, {crashers} crasher(s)",
        n as f64 / start.elapsed().as_secs_f64()
    );
    crashers
}

struct Worker {
    name: String,
    run: fn(&[u8]) -> String,
    rng: Rng,
    corpus: Vec<Vec<u8>>,
    /// Hashes of the outcome signatures seen so far.
    seen: HashSet<u64>,
    /// Panic messages (and "slow") already saved, so one bug is one file.
    crash_kinds: HashSet<String>,
    crashers: usize,
    corpus_dir: PathBuf,
    crash_dir: PathBuf,
    grow: bool,
}

impl Worker {
    fn try_input(&mut self, input: Vec<u8>, current: &Mutex<Vec<u8>>, execs: &AtomicU64) {
        current.lock().unwrap().clone_from(&input);
        let outcome = self.exec(&input);
        execs.fetch_add(1, Ordering::Relaxed);
        match outcome {
            Ok((sig, elapsed)) if elapsed > slow_bound() => {
                // Three slow runs in a row: not a scheduling hiccup.
                let slowest = (0..2)
                    .map(|_| self.exec(&input).map(|(_, t)| t).unwrap_or(elapsed))
                    .min()
                    .unwrap_or(elapsed);
                if slowest > slow_bound() && self.crash_kinds.insert(format!("slow:{sig}")) {
                    let path = save(&self.crash_dir, "slow", &input);
                    println!(
                        "fuzz {}: SLOW ({slowest:?}) on {}",
                        self.name,
                        path.display()
                    );
                    self.crashers += 1;
                }
            }
            Ok((sig, _)) => {
                if self.seen.len() >= MAX_OUTCOMES {
                    // A long run: forget, rather than grow without bound.
                    self.seen.clear();
                }
                if self.seen.insert(hash(&sig)) {
                    if self.grow {
                        save(&self.corpus_dir, "grown", &input);
                    }
                    if self.corpus.len() < MAX_CORPUS {
                        self.corpus.push(input);
                    } else {
                        let i = self.rng.below(MAX_CORPUS);
                        self.corpus[i] = input;
                    }
                }
            }
            Err(message) => {
                let kind = message.lines().next().unwrap_or("").to_string();
                if self.crash_kinds.insert(kind) {
                    let path = save(&self.crash_dir, "panic", &input);
                    println!(
                        "fuzz {}: PANIC on {}\n  {message}",
                        self.name,
                        path.display()
                    );
                    self.crashers += 1;
                }
            }
        }
    }

    /// Runs the target once: its outcome signature and time, or the panic.
    fn exec(&self, input: &[u8]) -> Result<(String, Duration), String> {
        let run = self.run;
        let start = Instant::now();
        match panic::catch_unwind(AssertUnwindSafe(|| run(input))) {
            Ok(sig) => Ok((sig, start.elapsed())),
            Err(_) => Err(LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| "panic".to_string())),
        }
    }

    /// A corpus input with one to four mutations.
    fn mutate(&mut self) -> Vec<u8> {
        let i = self.rng.below(self.corpus.len());
        let mut input = self.corpus[i].clone();
        for _ in 0..1 + self.rng.below(4) {
            self.mutate_once(&mut input);
        }
        input.truncate(MAX_INPUT);
        input
    }

    fn mutate_once(&mut self, b: &mut Vec<u8>) {
        let r = &mut self.rng;
        let pos = |r: &mut Rng, b: &Vec<u8>| r.below(b.len() + 1);
        match r.below(12) {
            // Bytes.
            0 if !b.is_empty() => {
                let i = r.below(b.len());
                b[i] ^= 1 << r.below(8);
            }
            1 if !b.is_empty() => {
                let i = r.below(b.len());
                b[i] = *r.pick(INTERESTING_BYTES);
            }
            2 if !b.is_empty() => {
                let i = r.below(b.len());
                let n = (1 + r.below(16)).min(b.len() - i);
                b.drain(i..i + n);
            }
            3 if !b.is_empty() => {
                let i = r.below(b.len());
                let n = (1 + r.below(64)).min(b.len() - i);
                let chunk = b[i..i + n].to_vec();
                let at = pos(r, b);
                b.splice(at..at, chunk);
            }
            // Tokens and values.
            4..=6 => {
                let token = r.pick(TOKENS).as_bytes().to_vec();
                let at = pos(r, b);
                b.splice(at..at, token);
            }
            7 => replace_value(r, b),
            8 => replace_number(r, b),
            // Lines.
            9 => mutate_lines(r, b),
            // Nesting runs: the shapes that are expensive to parse.
            10 => {
                let run = r.pick(RUNS).repeat(1 + r.below(200));
                let at = pos(r, b);
                b.splice(at..at, run.into_bytes());
            }
            // Splice with another input.
            _ => {
                let other = &self.corpus[self.rng.below(self.corpus.len())];
                let (cut, from) = (self.rng.below(b.len() + 1), self.rng.below(other.len() + 1));
                b.truncate(cut);
                b.extend_from_slice(&other[from..]);
            }
        }
    }
}

/// After a `: `, replace the rest of the line with a dictionary value.
fn replace_value(r: &mut Rng, b: &mut Vec<u8>) {
    let colons: Vec<usize> = b
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w == b": ")
        .map(|(i, _)| i + 2)
        .collect();
    if colons.is_empty() {
        return;
    }
    let start = *r.pick(&colons);
    let end = b[start..]
        .iter()
        .position(|c| *c == b'\n')
        .map_or(b.len(), |n| start + n);
    b.splice(start..end, r.pick(VALUES).bytes());
}

/// Replace a run of digits with an interesting number.
fn replace_number(r: &mut Rng, b: &mut Vec<u8>) {
    let digits: Vec<usize> = (0..b.len()).filter(|i| b[*i].is_ascii_digit()).collect();
    if digits.is_empty() {
        return;
    }
    let start = *r.pick(&digits);
    let end = b[start..]
        .iter()
        .position(|c| !c.is_ascii_digit())
        .map_or(b.len(), |n| start + n);
    b.splice(start..end, r.pick(NUMBERS).bytes());
}

/// Duplicate, drop, swap or re-indent a line.
fn mutate_lines(r: &mut Rng, b: &mut Vec<u8>) {
    let mut lines: Vec<Vec<u8>> = b.split(|c| *c == b'\n').map(<[u8]>::to_vec).collect();
    let i = r.below(lines.len());
    match r.below(4) {
        0 => {
            let line = lines[i].clone();
            lines.insert(i, line);
        }
        1 if lines.len() > 1 => {
            lines.remove(i);
        }
        2 => {
            let j = r.below(lines.len());
            lines.swap(i, j);
        }
        _ => {
            if r.below(2) == 0 {
                lines[i].splice(0..0, *b"  ");
            } else if lines[i].starts_with(b" ") {
                lines[i].remove(0);
            }
        }
    }
    *b = lines.join(&b'\n');
}

fn hash(s: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// Saves `input` as `<dir>/<kind>-<md5>`; returns the path.
fn save(dir: &Path, kind: &str, input: &[u8]) -> PathBuf {
    std::fs::create_dir_all(dir).expect("crasher directory");
    let path = dir.join(format!("{kind}-{:x}", md5::compute(input)));
    std::fs::write(&path, input).expect("saving an input");
    path
}

fn read_dir(dir: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

/// xorshift64*: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const INTERESTING_BYTES: &[u8] = b"\0\xff\x7f\x80\n\r\t \"':-[]{},&*!|>#%@`\\?~.0159aZ";

/// YAML syntax and Kubernetes words, inserted anywhere.
const TOKENS: &[&str] = &[
    "\n",
    ": ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ", ",
    "&a ",
    "*a",
    "&b ",
    "*b",
    "<<: *a\n",
    "!!str ",
    "!!binary ",
    "!!map ",
    "!!seq ",
    "!custom ",
    "---\n",
    "...\n",
    "\"",
    "'",
    "|\n  ",
    ">-\n  ",
    "? ",
    "# c\n",
    "\t",
    "~",
    "null",
    "true",
    "0x1F",
    ".inf",
    "-.nan",
    "%YAML 1.2\n",
    "\\u0000",
    "\u{0}",
    "\u{feff}",
    "\u{85}",
    "\r\n",
    "\u{2028}",
    "\"\\x41\\U0001F600\"",
    "apiVersion: v1\n",
    "kind: Pod\n",
    "metadata:\n  name: x\n",
    "spec:\n",
    "  containers:\n",
    "  - name: c\n    image: i\n",
    "resources: {limits: {cpu: 1e400, memory: -1Gi}}",
    "resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}",
    "limits: {pids: 10}",
    "hugepages-2Mi",
    "example.com/gpu",
    "terminationGracePeriodSeconds: -5\n",
    "volumes: [{name: v, hostPath: {path: /x, type: Socket}}]\n",
    "volumeMounts: [{name: v, mountPath: /x, subPath: ../x}]\n",
    "livenessProbe: {httpGet: {port: 0}, periodSeconds: -1}\n",
    "env: [{name: A, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]\n",
    "ports: [{containerPort: 80, hostPort: 80, protocol: SCTP}]\n",
    "hostNetwork: true\n",
    "securityContext: {runAsUser: -1, procMount: Unmasked}\n",
    "initContainers: []\n",
    "restartPolicy: Always\n",
    "dnsPolicy: None\n",
    "uid: 1\n",
    "namespace: Kube\n",
    "kind: KubeletConfiguration\n",
    "apiVersion: kubelet.config.k8s.io/v1beta1\n",
    "staticPodPath: ",
    "syncFrequency: ",
    "evictionHard: {memory.available: 100Mi}\n",
    "featureGates: {A: true}\n",
    "cgroupDriver: systemd\n",
    "maxPods: -1\n",
    "systemReserved: {cpu: 1e400}\n",
    "logging: {verbosity: 99}\n",
];

/// Values put after a `: `.
const VALUES: &[&str] = &[
    "",
    "~",
    "null",
    "[]",
    "{}",
    "[[[]]]",
    "-1",
    "0",
    "1e400",
    "-1Gi",
    "1Ei",
    "16Ei",
    "100m",
    "0.5",
    "\"\"",
    "''",
    "!!binary AAA=",
    "*a",
    "&a x",
    "true",
    "1h2m3.5s",
    "-0",
    "2562048h",
    "1.5µs",
    ".5m",
    "9223372036854775807",
    "../..",
    "/etc",
    "a\u{0}b",
    "Always",
    "Never",
    "Localhost",
    "Bidirectional",
    "\"\\t\"",
    "|\n  text",
    ">\n  folded",
];

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "-0",
    "7",
    "63",
    "64",
    "65",
    "253",
    "254",
    "1000",
    "1023",
    "1024",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "1e3",
    "1e400",
    "1e-9999",
    "0.000000001",
    "00",
    "1.",
    ".1",
    "1e+3",
    "0x10",
];

/// Runs that nest or alias: repeated, they probe the parser's limits.
const RUNS: &[&str] = &[
    "[", "{", "{a: ", "- ", "  ", "&x [*x, ", "? ", "!!map {", "\"\\\"", "'''",
];
