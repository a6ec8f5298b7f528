//! The I/O of a log answer: which files hold a container instance's log,
//! reading them oldest first, and following the current one.
//!
//! The runtime writes instance `N` of a container to `N.log` in the
//! container's log directory; rotation (`agent/housekeeping/logs.rs`) renames it to
//! `N.log.<YYYYMMDD-hhmmss>` and has the runtime reopen `N.log`. So the
//! whole log is the rotated files by stamp, then `N.log`.
//!
//! [`stream`] sends the answer in chunks on a bounded channel: memory stays
//! at a chunk or two whatever the log's size, a slow client slows the
//! reading, and a client that went away (the receiver dropped) ends it.
//! With `tailLines`, [`tail_start`] finds the tail from the end of the
//! newest files, so a short tail of a long log reads little of it.
//! Following polls the current file every [`POLL`] (a rotation is seen as
//! a new inode under the name: the rest of the old file is read first) and
//! ends, after a last read, once the container no longer runs.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use smol::channel::Sender;

use super::line::{parse_line, Assembler, Output};
use super::LogOptions;
use crate::rt;

/// How often a followed log is read for new lines.
pub const POLL: Duration = Duration::from_secs(1);

/// The size of a read and of a chunk sent.
const CHUNK: usize = 32 * 1024;

/// The names of instance `attempt`'s log files among `names` (a log
/// directory's entries), oldest first.
pub fn in_order(names: impl IntoIterator<Item = String>, attempt: u32) -> Vec<String> {
    let current = format!("{attempt}.log");
    let prefix = format!("{current}.");
    let mut rotated: Vec<String> = names
        .into_iter()
        .filter(|n| n.starts_with(&prefix) && !n.ends_with(".tmp"))
        .collect();
    rotated.sort();
    rotated.push(current);
    rotated
}

/// The log files of instance `attempt` in the container log directory
/// `dir`, oldest first; the last is the current one (it may not exist).
pub fn log_files(dir: &Path, attempt: u32) -> Vec<PathBuf> {
    let names = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok());
    in_order(names, attempt)
        .into_iter()
        .map(|n| dir.join(n))
        .collect()
}

/// Where the last `n` complete log lines of `f` (`len` bytes) start, found
/// by reading backwards (a line is complete at its `F` piece; a trailing
/// piece without its newline does not count): `(offset, n)` when the file
/// holds that many, else `(0, how many it holds)`. With `tailLines`, only
/// that end of the newest files is read, not the whole log.
pub fn tail_start(f: &File, len: u64, n: u64) -> (u64, u64) {
    let complete = |line: &[u8]| parse_line(line).is_ok_and(|l| !l.partial);
    let mut pos = len;
    // The bytes from `pos` to the end of the line being found.
    let mut tail: Vec<u8> = Vec::new();
    let mut after_last_newline = true;
    let mut found = 0;
    while pos > 0 {
        let start = pos.saturating_sub(CHUNK as u64);
        let mut block = vec![0; (pos - start) as usize];
        if f.read_exact_at(&mut block, start).is_err() {
            return (0, found);
        }
        block.extend_from_slice(&tail);
        tail = block;
        pos = start;
        while let Some(i) = tail.iter().rposition(|b| *b == b'\n') {
            let line = &tail[i + 1..];
            if !std::mem::take(&mut after_last_newline) && complete(line) {
                found += 1;
                if found > n {
                    return (pos + (i + 1 + line.len() + 1) as u64, n);
                }
            }
            tail.truncate(i);
        }
    }
    // The file's first line.
    if !after_last_newline && complete(&tail) {
        found += 1;
        if found > n {
            return (tail.len() as u64 + 1, n);
        }
    }
    (0, found)
}

/// Splits bytes read in chunks into lines, keeping an unfinished one.
#[derive(Default)]
struct Lines {
    carry: Vec<u8>,
}

impl Lines {
    /// Reads what `f` has now, handing each complete line (without `\n`)
    /// to `line`. Returns false at the end of the file.
    fn read_chunk(&mut self, f: &mut File, line: &mut impl FnMut(&[u8])) -> bool {
        let start = self.carry.len();
        self.carry.resize(start + CHUNK, 0);
        let n = match f.read(&mut self.carry[start..]) {
            Ok(n) => n,
            Err(e) => {
                log::debug!("reading a container log: {e}");
                0
            }
        };
        self.carry.truncate(start + n);
        let mut from = 0;
        while let Some(end) = self.carry[from..].iter().position(|b| *b == b'\n') {
            line(&self.carry[from..from + end]);
            from += end + 1;
        }
        self.carry.drain(..from);
        n > 0
    }
}

/// The answer being built: lines through the assembler and the output
/// rules, sent in chunks.
struct Answer {
    asm: Assembler,
    output: Output,
    out: Vec<u8>,
    tx: Sender<Bytes>,
}

impl Answer {
    /// Reads `f` to its current end. False when the client went away.
    async fn read(&mut self, f: &mut File, lines: &mut Lines) -> bool {
        loop {
            let (asm, output, out) = (&mut self.asm, &mut self.output, &mut self.out);
            let more = lines.read_chunk(f, &mut |raw| {
                if let Some(l) = asm.push(raw) {
                    output.line(l, out);
                }
            });
            if self.out.len() >= CHUNK && !self.send().await {
                return false;
            }
            if !more || self.output.full() {
                return true;
            }
            // Let the agent's other tasks run between chunks of a big log.
            smol::future::yield_now().await;
        }
    }

    /// Sends what is ready. False when the client went away.
    async fn send(&mut self) -> bool {
        if self.out.is_empty() {
            return !self.tx.is_closed();
        }
        let chunk = Bytes::from(std::mem::take(&mut self.out));
        self.tx.send(chunk).await.is_ok()
    }
}

fn inode(f: &File) -> Option<(u64, u64)> {
    f.metadata().ok().map(|m| (m.dev(), m.ino()))
}

fn inode_of(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Sends the log in `files` (oldest first, the last the current file) as
/// `opts` asks, on `tx`; with `follow`, keeps reading the current file
/// every `poll` while `running()` says the container runs.
pub async fn stream(
    files: Vec<PathBuf>,
    opts: LogOptions,
    poll: Duration,
    running: impl Fn() -> bool,
    tx: Sender<Bytes>,
) {
    let mut a = Answer {
        asm: Assembler::new(&opts),
        output: Output::new(&opts),
        out: Vec::new(),
        tx,
    };
    let Some(current) = files.last().cloned() else {
        return;
    };
    // With tailLines (and no time filter), skip what the tail cannot hold:
    // the older files, and the start of the oldest one read.
    let mut starts = vec![0u64; files.len()];
    if let (Some(mut n), None) = (opts.tail_lines, opts.since_nanos) {
        let mut first = files.len();
        for (i, path) in files.iter().enumerate().rev() {
            let Ok(f) = File::open(path) else { continue };
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            first = i;
            let (start, found) = tail_start(&f, len, n);
            starts[i] = start;
            n -= found;
            if n == 0 {
                break;
            }
        }
        starts.iter_mut().take(first).for_each(|s| *s = u64::MAX);
    }
    let mut open: Option<File> = None;
    for (path, start) in files.iter().zip(starts) {
        if start == u64::MAX {
            continue;
        }
        let Ok(mut f) = File::open(path) else {
            continue;
        };
        if start > 0 && f.seek(SeekFrom::Start(start)).is_err() {
            continue;
        }
        let mut lines = Lines::default();
        if !a.read(&mut f, &mut lines).await {
            return;
        }
        if *path == current {
            open = Some(f);
        }
    }
    a.output.end_backlog(&mut a.out);
    let mut lines = Lines::default();
    while opts.follow && !a.output.full() {
        if !a.send().await {
            return;
        }
        let was_running = running();
        if was_running {
            rt::sleep(poll).await;
        }
        if let Some(f) = &mut open {
            if !a.read(f, &mut lines).await {
                return;
            }
        }
        // Rotated: the name is another file now. The runtime made it when
        // it reopened the log, so the old file is complete only now: what
        // it wrote there after the read above is read before switching,
        // or `-f` would lose the lines at the rotation point.
        let now = inode_of(&current);
        if now.is_some() && now != open.as_ref().and_then(inode) {
            if let Some(f) = &mut open {
                if !a.read(f, &mut lines).await {
                    return;
                }
            }
            open = File::open(&current).ok();
            lines = Lines::default();
            if let Some(f) = &mut open {
                if !a.read(f, &mut lines).await {
                    return;
                }
            }
        }
        if !was_running {
            break;
        }
    }
    let rest = a.asm.finish();
    a.output.write(&rest, &mut a.out);
    a.send().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn rotated_files_come_first_by_stamp_then_the_current_one() {
        let names = [
            "1.log",
            "0.log.20261201-050000",
            "0.log",
            "0.log.20261130-230000",
            "0.log.20261201-060000.tmp",
            "10.log",
        ]
        .map(String::from);
        assert_eq!(
            in_order(names.clone(), 0),
            ["0.log.20261130-230000", "0.log.20261201-050000", "0.log"]
        );
        assert_eq!(in_order(names, 1), ["1.log"]);
    }

    fn collect(files: Vec<PathBuf>, q: &str, running: impl Fn() -> bool) -> String {
        let opts = LogOptions::from_query(q, 0).unwrap();
        let (tx, rx) = smol::channel::bounded::<Bytes>(2);
        let read = async move {
            let mut all = Vec::new();
            while let Ok(chunk) = rx.recv().await {
                all.extend_from_slice(&chunk);
            }
            String::from_utf8(all).unwrap()
        };
        let write = stream(files, opts, Duration::ZERO, running, tx);
        rt::block_on(smol::future::zip(write, read)).1
    }

    #[test]
    fn a_log_is_read_across_its_rotated_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("0.log.20261201-050000"),
            "t stdout F one\nt stdout P tw\n",
        )
        .unwrap();
        std::fs::write(d.join("0.log"), "t stdout F o\nt stdout F three\n").unwrap();
        std::fs::write(d.join("1.log"), "t stdout F other instance\n").unwrap();
        let files = log_files(d, 0);
        assert_eq!(collect(files.clone(), "", || false), "one\ntwo\nthree\n");
        assert_eq!(collect(files, "tailLines=1", || false), "three\n");
        assert_eq!(collect(log_files(d, 7), "", || false), "");
    }

    #[test]
    fn the_tail_is_found_from_the_end_counting_complete_lines_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        let text =
            "t stdout F a\nt stdout P b1\nt stdout F b2\nt stdout F c\nt stdout P unfinished";
        std::fs::write(&path, text).unwrap();
        let f = File::open(&path).unwrap();
        let len = text.len() as u64;
        let at = |s: &str| text.find(s).unwrap() as u64;
        assert_eq!(tail_start(&f, len, 1), (at("t stdout F c"), 1));
        assert_eq!(tail_start(&f, len, 2), (at("t stdout P b1"), 2));
        assert_eq!(tail_start(&f, len, 3), (0, 3));
        assert_eq!(tail_start(&f, len, 9), (0, 3));
        assert_eq!(tail_start(&f, len, 0), (at("t stdout P unfinished"), 0));
        assert_eq!(tail_start(&f, 0, 2), (0, 0));
    }

    #[test]
    fn a_tail_reads_only_the_newest_files_it_needs() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // The oldest file is never opened (the tail would trim its lines
        // anyway; `tail_start`'s test shows where reading starts).
        std::fs::write(d.join("0.log.20261201-040000"), "garbage\n").unwrap();
        std::fs::write(
            d.join("0.log.20261201-050000"),
            "t stdout F one\nt stdout F two\n",
        )
        .unwrap();
        std::fs::write(d.join("0.log"), "t stdout F three\n").unwrap();
        assert_eq!(
            collect(log_files(d, 0), "tailLines=2", || false),
            "two\nthree\n"
        );
        assert_eq!(collect(log_files(d, 0), "tailLines=1", || false), "three\n");
        assert_eq!(collect(log_files(d, 0), "tailLines=0", || false), "");
    }

    #[test]
    fn following_reads_new_lines_and_a_rotation_until_the_container_stops() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        let current = d.join("0.log");
        std::fs::write(&current, "t stdout F before\n").unwrap();
        // The "container" writes a line, rotates, writes again, then stops:
        // each step happens on one call of `running`, so the test needs no
        // clock.
        let step = std::cell::Cell::new(0);
        let running = move || {
            let append = |path: &Path, text: &str| {
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap();
                f.write_all(text.as_bytes()).unwrap();
            };
            step.set(step.get() + 1);
            match step.get() {
                1 => append(&current, "t stdout F after\n"),
                2 => {
                    append(&current, "t stdout F last of old\n");
                    std::fs::rename(&current, d.join("0.log.20261201-050000")).unwrap();
                    append(&current, "t stdout F new file\n");
                }
                3 => append(&current, "t stdout F at exit\n"),
                _ => return false,
            }
            step.get() < 3
        };
        let files = log_files(dir.path(), 0);
        assert_eq!(
            collect(files, "follow=true&tailLines=1", running),
            "before\nafter\nlast of old\nnew file\nat exit\n"
        );
    }
}
