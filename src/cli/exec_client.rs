//! `picolet exec`'s client: a SPDY/3.1 session on the admin socket's
//! `/exec/...`, which the agent relays byte for byte to the runtime's
//! streaming server, as kubectl's session is relayed through the API
//! server and kubelet.
//!
//! The session speaks kubelet's stream protocol `v4.channel.k8s.io`, which
//! every runtime's streaming server answers: one SPDY stream per purpose,
//! named by its `streamType` header and opened in kubectl's order (`error`,
//! then `stdin`, `stdout`, `stderr`, or `resize` with a TTY). The `error`
//! stream carries the final status, a v1 `Status` ([`exit_code`]). At the
//! end of our stdin the stdin stream is closed (`FIN`) and the others stay
//! open, so a command that reads to end of file finishes. (WebSocket was
//! used before; its v4 form cannot close stdin, which stranded `cat` on
//! containerd 1.6.)
//!
//! The framing is [`super::spdy`]'s and [`exit_code`] is pure. The session
//! is the CLI's: it blocks, and copies stdin on a thread of its own (stdin
//! may be a file, which cannot be polled).

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::client::ClientError;
use super::spdy::{self, Frame};
use crate::net::upgrade::{parse_head, HEAD_LIMIT};

/// The stream protocol asked for.
pub const PROTOCOL: &str = "v4.channel.k8s.io";

/// The streams of one session, by the ids we gave them (client ids are
/// odd, in the order opened).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streams {
    pub error: u32,
    pub stdin: Option<u32>,
    pub stdout: u32,
    pub stderr: Option<u32>,
    pub resize: Option<u32>,
}

impl Streams {
    /// The streams kubelet's v4 server expects for these options, with
    /// their `streamType`s, in kubectl's order.
    pub fn plan(stdin: bool, tty: bool) -> (Streams, Vec<(u32, &'static str)>) {
        let mut next = 1;
        let mut open = Vec::new();
        let mut take = |kind: &'static str| {
            let id = next;
            next += 2;
            open.push((id, kind));
            id
        };
        let error = take("error");
        let stdin = stdin.then(|| take("stdin"));
        let stdout = take("stdout");
        let stderr = (!tty).then(|| take("stderr"));
        let resize = tty.then(|| take("resize"));
        (
            Streams {
                error,
                stdin,
                stdout,
                stderr,
                resize,
            },
            open,
        )
    }
}

/// The command's exit code from the final status (the error stream): 0 on
/// `Success`, the `ExitCode` cause of `NonZeroExitCode`, else the
/// status's message as the error.
pub fn exit_code(status: &[u8]) -> Result<i32, String> {
    let v: serde_json::Value =
        serde_json::from_slice(status).map_err(|e| format!("the exec status: {e}"))?;
    if v["status"] == "Success" {
        return Ok(0);
    }
    if v["reason"] == "NonZeroExitCode" {
        let causes = v["details"]["causes"].as_array().map(Vec::as_slice);
        if let Some(code) = causes
            .unwrap_or(&[])
            .iter()
            .find(|c| c["reason"] == "ExitCode")
            .and_then(|c| c["message"].as_str()?.parse().ok())
        {
            return Ok(code);
        }
    }
    Err(v["message"]
        .as_str()
        .unwrap_or("the command failed")
        .to_string())
}

/// What the session needs from the terminal side.
pub struct Session<'a> {
    pub socket: &'a Path,
    /// `/exec/{namespace}/{pod}/{container}?...`.
    pub uri: &'a str,
    /// Copy our stdin to the command's.
    pub stdin: bool,
    /// The URI asks for a TTY (`tty=1`).
    pub tty: bool,
    /// The terminal's size (columns, rows) with `-t`, sent first.
    pub size: Option<(u16, u16)>,
}

/// Runs an exec session; the command's exit code.
pub fn run(s: &Session<'_>, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32, ClientError> {
    let mut conn = UnixStream::connect(s.socket).map_err(|source| ClientError::Connect {
        path: s.socket.to_path_buf(),
        source,
    })?;
    let mut chunk = vec![0u8; 32 * 1024];
    let pending = upgrade(s, &mut conn, &mut chunk)?;
    let streams = open_streams(s, &mut conn)?;
    let sender = Sender(Arc::new(Mutex::new(
        conn.try_clone().map_err(io_error(s.socket))?,
    )));
    if let Some(id) = streams.stdin {
        copy_stdin(sender.clone(), id);
    }
    let mut outputs = Outputs::new(streams, out, err);
    read_frames(
        &mut conn,
        pending,
        &mut chunk,
        &mut outputs,
        &sender,
        s.socket,
    )?;
    let _ = conn.shutdown(std::net::Shutdown::Both);
    match outputs.status {
        // No status: the stream ended without one (an old server): done.
        None => Ok(0),
        Some(s) => exit_code(&s).map_err(ClientError::Refused),
    }
}

fn io_error(socket: &Path) -> impl Fn(io::Error) -> ClientError + '_ {
    move |source| ClientError::Io {
        path: socket.to_path_buf(),
        source,
    }
}

fn protocol_error(socket: &Path) -> impl Fn(String) -> ClientError + '_ {
    move |what| ClientError::Protocol {
        path: socket.to_path_buf(),
        what,
    }
}

/// Asks the admin socket to upgrade the connection to SPDY/3.1; the bytes
/// read past the answer's head (the first frames). Any answer but `101`
/// is a refusal, its body the error's text.
fn upgrade(
    s: &Session<'_>,
    conn: &mut UnixStream,
    chunk: &mut [u8],
) -> Result<Vec<u8>, ClientError> {
    let (io_err, protocol) = (io_error(s.socket), protocol_error(s.socket));
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\
         Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: {PROTOCOL}\r\n\r\n",
        s.uri,
    );
    conn.write_all(request.as_bytes()).map_err(&io_err)?;
    let mut buf = Vec::new();
    let (status, _, len) = loop {
        let n = conn.read(chunk).map_err(&io_err)?;
        if n == 0 {
            return Err(protocol("closed before the answer".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(head) = parse_head(&buf).map_err(&protocol)? {
            break head;
        }
        if buf.len() > HEAD_LIMIT {
            return Err(protocol("answer head too long".into()));
        }
    };
    if status != http::StatusCode::SWITCHING_PROTOCOLS {
        let mut body = buf.split_off(len);
        let _ = conn.take(64 * 1024).read_to_end(&mut body);
        let text = String::from_utf8_lossy(&body).trim_end().to_string();
        return Err(ClientError::Refused(if text.is_empty() {
            format!("the admin socket answered HTTP {}", status.as_u16())
        } else {
            text
        }));
    }
    Ok(buf.split_off(len))
}

/// Opens the session's streams ([`Streams::plan`]) and, with a TTY, sends
/// the terminal's size first.
fn open_streams(s: &Session<'_>, conn: &mut UnixStream) -> Result<Streams, ClientError> {
    let (streams, open) = Streams::plan(s.stdin, s.tty);
    let mut headers = spdy::Headers::default();
    let mut opening = Vec::new();
    for (id, kind) in &open {
        opening.extend(headers.syn_stream(*id, &[("streamtype", kind)]));
    }
    if let (Some(id), Some((width, height))) = (streams.resize, s.size) {
        let size = format!(r#"{{"Width":{width},"Height":{height}}}"#);
        opening.extend(spdy::data(id, false, size.as_bytes()));
    }
    conn.write_all(&opening).map_err(io_error(s.socket))?;
    Ok(streams)
}

/// The session's writing side, shared with the stdin thread. Frames are
/// written whole under the lock: the stdin thread's and ours never
/// interleave.
#[derive(Clone)]
struct Sender(Arc<Mutex<UnixStream>>);

impl Sender {
    fn send(&self, frame: &[u8]) -> io::Result<()> {
        self.0.lock().map_or(Ok(()), |mut w| w.write_all(frame))
    }
}

/// Copies our stdin to stream `id` on a thread of its own, then closes
/// the stream (`FIN`) at its end.
fn copy_stdin(sender: Sender, id: u32) {
    std::thread::spawn(move || {
        let mut input = io::stdin().lock();
        let mut data = vec![0u8; 16 * 1024];
        loop {
            match input.read(&mut data) {
                Ok(0) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
                Ok(n) => {
                    if sender.send(&spdy::data(id, false, &data[..n])).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = sender.send(&spdy::data(id, true, b""));
    });
}

/// The reading side of a session: where the outputs go, the final status
/// as it arrives, the streams still open.
struct Outputs<'a> {
    streams: Streams,
    out: &'a mut dyn Write,
    err: &'a mut dyn Write,
    /// The error stream's bytes.
    status: Option<Vec<u8>>,
    /// The streams the server has not finished: error and the outputs.
    open: Vec<u32>,
}

impl<'a> Outputs<'a> {
    fn new(streams: Streams, out: &'a mut dyn Write, err: &'a mut dyn Write) -> Self {
        let open = [Some(streams.error), Some(streams.stdout), streams.stderr]
            .into_iter()
            .flatten()
            .collect();
        Outputs {
            streams,
            out,
            err,
            status: None,
            open,
        }
    }

    /// Takes one frame of the server's: output copied out, a PING
    /// answered, a finished stream noted; false at `GOAWAY`.
    fn take(&mut self, frame: Frame<'_>, sender: &Sender) -> io::Result<bool> {
        match frame {
            Frame::Data { stream, fin, data } => {
                if stream == self.streams.stdout {
                    let _ = self.out.write_all(data).and_then(|_| self.out.flush());
                } else if Some(stream) == self.streams.stderr {
                    let _ = self.err.write_all(data).and_then(|_| self.err.flush());
                } else if stream == self.streams.error {
                    self.status
                        .get_or_insert_with(Vec::new)
                        .extend_from_slice(data);
                }
                if fin {
                    self.open.retain(|id| *id != stream);
                }
            }
            Frame::Control { kind, flags, body } => match kind {
                spdy::PING => {
                    if let Some(id) = spdy::ping_id(body) {
                        sender.send(&spdy::ping(id))?;
                    }
                }
                // The server's side of a stream ends with it.
                spdy::RST_STREAM | spdy::SYN_REPLY
                    if kind == spdy::RST_STREAM || flags & spdy::FLAG_FIN != 0 =>
                {
                    let id = spdy::stream_id(body);
                    self.open.retain(|s| Some(*s) != id);
                }
                spdy::GOAWAY => return Ok(false),
                _ => {}
            },
        }
        Ok(true)
    }
}

/// Reads the server's frames, `pending` first, until every stream of
/// [`Outputs`] is finished, the server says `GOAWAY` or the connection
/// closes.
fn read_frames(
    conn: &mut UnixStream,
    mut pending: Vec<u8>,
    chunk: &mut [u8],
    outputs: &mut Outputs<'_>,
    sender: &Sender,
    socket: &Path,
) -> Result<(), ClientError> {
    let (io_err, protocol) = (io_error(socket), protocol_error(socket));
    loop {
        let mut used = 0;
        while let Some((frame, n)) = spdy::parse(&pending[used..]).map_err(&protocol)? {
            used += n;
            if !outputs.take(frame, sender).map_err(&io_err)? {
                return Ok(());
            }
        }
        pending.drain(..used);
        if outputs.open.is_empty() {
            return Ok(());
        }
        match conn.read(chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_streams_are_opened_in_kubectls_order_for_each_mode() {
        let (s, open) = Streams::plan(false, false);
        assert_eq!(open, [(1, "error"), (3, "stdout"), (5, "stderr")]);
        assert_eq!((s.stdin, s.resize), (None, None));
        let (s, open) = Streams::plan(true, false);
        assert_eq!(
            open,
            [(1, "error"), (3, "stdin"), (5, "stdout"), (7, "stderr")]
        );
        assert_eq!(s.stdin, Some(3));
        let (s, open) = Streams::plan(true, true);
        assert_eq!(
            open,
            [(1, "error"), (3, "stdin"), (5, "stdout"), (7, "resize")]
        );
        assert_eq!((s.stderr, s.resize), (None, Some(7)), "a TTY has no stderr");
    }

    #[test]
    fn the_exit_code_comes_from_the_final_status() {
        assert_eq!(exit_code(br#"{"metadata":{},"status":"Success"}"#), Ok(0));
        let failed = br#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
        assert_eq!(exit_code(failed), Ok(3));
        let other = br#"{"status":"Failure","message":"executable file not found","reason":"InternalError"}"#;
        assert_eq!(exit_code(other), Err("executable file not found".into()));
        assert!(exit_code(b"nope").is_err());
    }
}
