//! One CRI log line, and the answer built from many.
//!
//! The runtime writes `<RFC3339Nano time> <stdout|stderr> <tag> <text>`
//! per line; the tag is `F` (full) or `P` (partial: the runtime split a
//! long line, and the rest follows in the next `P`/`F` line of the same
//! stream), optionally followed by `:`-separated extras. [`Assembler`]
//! joins the pieces of one line back together (each stream on its own),
//! drops the lines before `since`, and prefixes the timestamp of the
//! line's first piece when `timestamps` is asked. [`Output`] applies
//! `tailLines` to the lines read before following and `limitBytes` to
//! everything answered.
//!
//! Where kubelet differs, on purpose: kubelet writes each partial piece as
//! it comes (with its own timestamp when `timestamps=true`) and counts
//! pieces as lines for `tailLines`; here a joined line is one line, with
//! one timestamp. Timestamps are printed as kubelet prints them (Go's
//! RFC3339Nano in UTC: `Z`, trailing zeros of the fraction dropped),
//! whatever offset the runtime wrote (CRI-O writes `+00:00`).

use std::collections::VecDeque;

use k8s_openapi::jiff::Timestamp;

use super::options::{LogOptions, LogsError};

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One parsed CRI log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriLine<'a> {
    /// The timestamp as written (RFC 3339 with nanoseconds).
    pub time: &'a str,
    pub stream: Stream,
    /// `P`: more of this line follows in the next piece.
    pub partial: bool,
    /// The text, without the line's newline.
    pub text: &'a [u8],
}

/// Parses one line of a CRI log file (without its trailing `\n`).
pub fn parse_line(raw: &[u8]) -> Result<CriLine<'_>, LogsError> {
    let mut rest = raw;
    let mut field = |what| {
        let end = rest
            .iter()
            .position(|b| *b == b' ')
            .ok_or(LogsError::Malformed(what))?;
        let f = &rest[..end];
        rest = &rest[end + 1..];
        Ok::<_, LogsError>(f)
    };
    let time = field("no timestamp")?;
    let stream = match field("no stream")? {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        _ => return Err(LogsError::Malformed("unknown stream")),
    };
    // The tag is the last field; a line with empty text may end right
    // after it.
    let (tag, text) = match rest.iter().position(|b| *b == b' ') {
        Some(end) => (&rest[..end], &rest[end + 1..]),
        None => (rest, &b""[..]),
    };
    let partial = match tag.split(|b| *b == b':').next() {
        Some(b"P") => true,
        Some(b"F") => false,
        _ => return Err(LogsError::Malformed("unknown tag")),
    };
    let time = std::str::from_utf8(time).map_err(|_| LogsError::Malformed("bad timestamp"))?;
    Ok(CriLine {
        time,
        stream,
        partial,
        text,
    })
}

/// The nanoseconds since the Unix epoch of an RFC 3339 timestamp.
pub fn unix_nanos(time: &str) -> Option<i128> {
    time.parse::<Timestamp>().ok().map(|t| t.as_nanosecond())
}

/// A line being joined from partial pieces.
#[derive(Debug, Default)]
struct Pending {
    /// The output so far (timestamp prefix included), empty when idle.
    bytes: Vec<u8>,
    /// False when the line's first piece was before `since`.
    keep: bool,
    started: bool,
}

/// Turns raw file lines into the lines of the answer (see the module docs).
#[derive(Debug)]
pub struct Assembler {
    since_nanos: Option<i128>,
    timestamps: bool,
    streams: [Pending; 2],
}

impl Assembler {
    pub fn new(opts: &LogOptions) -> Assembler {
        Assembler {
            since_nanos: opts.since_nanos,
            timestamps: opts.timestamps,
            streams: Default::default(),
        }
    }

    /// Feeds one raw line (without its `\n`). Returns a completed line of
    /// the answer, newline included, when this piece ended one that is
    /// kept. A malformed line is skipped (kubelet skips it too).
    pub fn push(&mut self, raw: &[u8]) -> Option<Vec<u8>> {
        let line = parse_line(raw).ok()?;
        let p = &mut self.streams[line.stream as usize];
        if !p.started {
            p.started = true;
            p.keep = match self.since_nanos {
                None => true,
                Some(since) => unix_nanos(line.time).is_some_and(|t| t >= since),
            };
            if p.keep && self.timestamps {
                match line.time.parse::<Timestamp>() {
                    Ok(t) => p.bytes.extend_from_slice(t.to_string().as_bytes()),
                    Err(_) => p.bytes.extend_from_slice(line.time.as_bytes()),
                }
                p.bytes.push(b' ');
            }
        }
        if p.keep {
            p.bytes.extend_from_slice(line.text);
        }
        if line.partial {
            return None;
        }
        p.started = false;
        if !p.keep {
            return None;
        }
        p.bytes.push(b'\n');
        Some(std::mem::take(&mut p.bytes))
    }

    /// The pieces of lines never completed (the container ended in the
    /// middle of one), as they are, without a newline.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        for p in &mut self.streams {
            if p.started && p.keep {
                out.append(&mut p.bytes);
            }
            *p = Pending::default();
        }
        out
    }
}

/// `tailLines` over the lines read before following, and `limitBytes`
/// over the whole answer.
#[derive(Debug)]
pub struct Output {
    /// The last `tailLines` lines of the backlog, while it is read.
    tail: Option<(usize, VecDeque<Vec<u8>>)>,
    /// Bytes still allowed (`limitBytes`).
    left: Option<u64>,
}

impl Output {
    pub fn new(opts: &LogOptions) -> Output {
        Output {
            tail: opts.tail_lines.map(|n| (n as usize, VecDeque::new())),
            left: opts.limit_bytes,
        }
    }

    /// A line of the answer: kept for the tail while the backlog is read,
    /// else written to `out`.
    pub fn line(&mut self, line: Vec<u8>, out: &mut Vec<u8>) {
        match &mut self.tail {
            Some((n, kept)) => {
                if *n == 0 {
                    return;
                }
                if kept.len() == *n {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
            None => self.write(&line, out),
        }
    }

    /// The backlog is read: writes the tail's lines; lines from now on go
    /// straight to the answer.
    pub fn end_backlog(&mut self, out: &mut Vec<u8>) {
        if let Some((_, kept)) = self.tail.take() {
            for line in kept {
                self.write(&line, out);
            }
        }
    }

    /// Writes bytes as far as `limitBytes` allows.
    pub fn write(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        let n = match self.left {
            None => bytes.len(),
            Some(left) => (left.min(bytes.len() as u64)) as usize,
        };
        out.extend_from_slice(&bytes[..n]);
        if let Some(left) = &mut self.left {
            *left -= n as u64;
        }
    }

    /// `limitBytes` is reached: nothing more will be written.
    pub fn full(&self) -> bool {
        self.left == Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(q: &str) -> LogOptions {
        LogOptions::from_query(q, 0).unwrap()
    }

    /// The answer for `lines` (a whole backlog, not followed).
    fn answer(q: &str, lines: &[&str]) -> String {
        let o = opts(q);
        let mut asm = Assembler::new(&o);
        let mut output = Output::new(&o);
        let mut out = Vec::new();
        for l in lines {
            if let Some(line) = asm.push(l.as_bytes()) {
                output.line(line, &mut out);
            }
        }
        output.end_backlog(&mut out);
        output.write(&asm.finish(), &mut out);
        String::from_utf8(out).unwrap()
    }

    const T1: &str = "2026-12-01T05:00:01.000000001Z";
    const T2: &str = "2026-12-01T05:00:02.5Z";

    #[test]
    fn cri_lines_parse_into_time_stream_tag_and_text() {
        type Parsed<'a> = Result<(&'a str, Stream, bool, &'a str), LogsError>;
        let table: &[(&str, Parsed)] = &[
            (
                "2026-12-01T05:00:01.1Z stdout F hello world",
                Ok((
                    "2026-12-01T05:00:01.1Z",
                    Stream::Stdout,
                    false,
                    "hello world",
                )),
            ),
            ("t stderr P part", Ok(("t", Stream::Stderr, true, "part"))),
            ("t stdout F", Ok(("t", Stream::Stdout, false, ""))),
            ("t stdout F ", Ok(("t", Stream::Stdout, false, ""))),
            (
                "t stdout F:x  two  spaces",
                Ok(("t", Stream::Stdout, false, " two  spaces")),
            ),
            ("t stdout", Err(LogsError::Malformed("no stream"))),
            ("t stdin F x", Err(LogsError::Malformed("unknown stream"))),
            ("t stdout Q x", Err(LogsError::Malformed("unknown tag"))),
            ("nospaces", Err(LogsError::Malformed("no timestamp"))),
        ];
        for (raw, want) in table {
            let got = parse_line(raw.as_bytes()).map(|l| {
                (
                    l.time,
                    l.stream,
                    l.partial,
                    std::str::from_utf8(l.text).unwrap(),
                )
            });
            assert_eq!(&got, want, "{raw:?}");
        }
    }

    #[test]
    fn partial_pieces_are_joined_per_stream_into_one_line() {
        let lines = [
            "2026-12-01T05:00:01Z stdout P hel",
            "2026-12-01T05:00:01Z stderr F oops",
            "2026-12-01T05:00:02Z stdout P lo ",
            "2026-12-01T05:00:03Z stdout F world",
            "garbage",
        ];
        assert_eq!(answer("", &lines), "oops\nhello world\n");
        assert_eq!(
            answer("timestamps=true", &lines),
            "2026-12-01T05:00:01Z oops\n2026-12-01T05:00:01Z hello world\n"
        );
        let crio = ["2026-12-01T05:00:01.250000000+00:00 stdout F hi"];
        assert_eq!(
            answer("timestamps=true", &crio),
            "2026-12-01T05:00:01.25Z hi\n"
        );
        let unfinished = ["2026-12-01T05:00:01Z stdout P no end"];
        assert_eq!(answer("", &unfinished), "no end");
    }

    #[test]
    fn tail_lines_keeps_the_last_lines_and_limit_bytes_cuts_the_answer() {
        let lines: Vec<String> = (1..=5).map(|i| format!("{T1} stdout F line {i}")).collect();
        let lines: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
        let table = [
            ("", "line 1\nline 2\nline 3\nline 4\nline 5\n"),
            ("tailLines=2", "line 4\nline 5\n"),
            ("tailLines=0", ""),
            ("tailLines=9", "line 1\nline 2\nline 3\nline 4\nline 5\n"),
            ("limitBytes=10", "line 1\nlin"),
            ("tailLines=2&limitBytes=8", "line 4\nl"),
        ];
        for (q, want) in table {
            assert_eq!(answer(q, &lines), want, "{q}");
        }
    }

    #[test]
    fn since_time_drops_lines_before_it_by_their_first_piece() {
        let lines = [
            format!("{T1} stdout P old "),
            format!("{T2} stdout F tail"),
            format!("{T2} stdout F new"),
        ];
        let lines: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            answer("sinceTime=2026-12-01T05:00:02Z", &lines),
            "new\n",
            "a line whose first piece is older is dropped whole"
        );
        assert_eq!(
            answer("sinceTime=2026-12-01T05:00:01Z", &lines),
            "old tail\nnew\n"
        );
        assert_eq!(unix_nanos(T1), Some(1_796_101_201_000_000_001));
        assert_eq!(unix_nanos("yesterday"), None);
    }

    #[test]
    fn lines_after_the_backlog_go_straight_out_under_the_byte_limit() {
        let o = opts("tailLines=1&limitBytes=12");
        let mut output = Output::new(&o);
        let mut out = Vec::new();
        output.line(b"a\n".to_vec(), &mut out);
        output.line(b"b\n".to_vec(), &mut out);
        assert!(out.is_empty(), "the tail waits for the end of the backlog");
        output.end_backlog(&mut out);
        assert_eq!(out, b"b\n");
        output.line(b"followed\n".to_vec(), &mut out);
        assert!(!output.full());
        output.line(b"more\n".to_vec(), &mut out);
        assert_eq!(out, b"b\nfollowed\nm");
        assert!(output.full());
    }
}
