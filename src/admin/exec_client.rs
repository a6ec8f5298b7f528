//! `picolet exec`'s client: a WebSocket session on the admin socket's
//! `/exec/...`, which the agent relays to the runtime's streaming server.
//!
//! The session speaks kubelet's channel protocol, `v5.channel.k8s.io`
//! (offered first) or `v4.channel.k8s.io`: each binary message starts with
//! its channel (0 stdin, 1 stdout, 2 stderr, 3 the final status as a v1
//! `Status`, 4 terminal size); v5 adds `[255, channel]`, which closes one
//! channel (stdin at its end of file). With v4 (containerd 1.6's
//! streaming server) stdin cannot be closed: a command that reads to end
//! of file then waits until the user interrupts it.
//!
//! The framing ([`frame`], [`Frames`]) and the status ([`exit_code`]) are
//! pure. The session is the CLI's: it blocks, and copies stdin on a thread
//! of its own (stdin may be a file, which cannot be polled).

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::AdminError;
use crate::net::upgrade::{parse_head, HEAD_LIMIT};

/// The protocols offered, preferred first.
pub const PROTOCOLS: &str = "v5.channel.k8s.io, v4.channel.k8s.io";
/// The largest message accepted from the server.
const MESSAGE_LIMIT: usize = 16 << 20;

const OP_CONTINUATION: u8 = 0;
const OP_TEXT: u8 = 1;
const OP_BINARY: u8 = 2;
const OP_CLOSE: u8 = 8;
const OP_PING: u8 = 9;
const OP_PONG: u8 = 10;

/// One client frame (final, masked with `mask`) of `opcode` and `payload`.
pub fn frame(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 14);
    out.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n <= 0xffff => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

/// Reassembles the server's frames into messages.
#[derive(Default)]
pub struct Frames {
    buf: Vec<u8>,
    /// The message being reassembled from fragments: opcode and payload.
    partial: Option<(u8, Vec<u8>)>,
}

impl Frames {
    /// Adds bytes read from the connection.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole message (opcode, payload), `Ok(None)` until more
    /// bytes arrive, or why the stream is malformed.
    pub fn message(&mut self) -> Result<Option<(u8, Vec<u8>)>, String> {
        loop {
            let b = &self.buf;
            if b.len() < 2 {
                return Ok(None);
            }
            let (fin, opcode, masked) = (b[0] & 0x80 != 0, b[0] & 0x0f, b[1] & 0x80 != 0);
            let (len, mut at) = match b[1] & 0x7f {
                126 if b.len() >= 4 => (u16::from_be_bytes([b[2], b[3]]) as u64, 4),
                127 if b.len() >= 10 => (u64::from_be_bytes(b[2..10].try_into().unwrap()), 10),
                126 | 127 => return Ok(None),
                n => (n as u64, 2),
            };
            if len > MESSAGE_LIMIT as u64 {
                return Err(format!("a frame of {len} bytes"));
            }
            let mask = if masked {
                at += 4;
                b.get(at - 4..at).map(|m| [m[0], m[1], m[2], m[3]])
            } else {
                None
            };
            let end = at + len as usize;
            if b.len() < end {
                return Ok(None);
            }
            let mut payload = b[at..end].to_vec();
            if let Some(m) = mask {
                payload
                    .iter_mut()
                    .enumerate()
                    .for_each(|(i, x)| *x ^= m[i % 4]);
            }
            self.buf.drain(..end);
            let message = match (opcode, self.partial.take()) {
                (OP_CONTINUATION, Some((op, mut acc))) => {
                    acc.extend_from_slice(&payload);
                    if acc.len() > MESSAGE_LIMIT {
                        return Err("a message too large".into());
                    }
                    (op, acc)
                }
                (OP_CONTINUATION, None) => return Err("a continuation of nothing".into()),
                // Control frames may come between fragments.
                (op, partial) if op >= OP_CLOSE => {
                    self.partial = partial;
                    return Ok(Some((op, payload)));
                }
                (op, _) => (op, payload),
            };
            if fin {
                return Ok(Some(message));
            }
            self.partial = Some(message);
        }
    }
}

/// The command's exit code from the final status (channel 3): 0 on
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

/// `Sec-WebSocket-Key`: 16 random bytes, base64.
fn key(random: &[u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(24);
    for chunk in random.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (*b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A small xorshift over bytes from the kernel, for masks.
struct Masks(u64);

impl Masks {
    fn next(&mut self) -> [u8; 4] {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 as u32).to_le_bytes()
    }
}

/// What the session needs from the terminal side.
pub struct Session<'a> {
    pub socket: &'a Path,
    /// `/exec/{namespace}/{pod}/{container}?...`.
    pub uri: &'a str,
    /// Copy our stdin to the command's.
    pub stdin: bool,
    /// The terminal's size (columns, rows) with `-t`, sent first.
    pub size: Option<(u16, u16)>,
}

/// Runs an exec session; the command's exit code.
pub fn run(s: &Session<'_>, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32, AdminError> {
    let io_err = |source| AdminError::Io {
        path: s.socket.to_path_buf(),
        source,
    };
    let protocol = |what: String| AdminError::Protocol {
        path: s.socket.to_path_buf(),
        what,
    };
    let mut random = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut random))
        .map_err(io_err)?;
    let mut masks = Masks(u64::from_le_bytes(random[16..24].try_into().unwrap()) | 1);
    let mut conn = UnixStream::connect(s.socket).map_err(|source| AdminError::Connect {
        path: s.socket.to_path_buf(),
        source,
    })?;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {}\r\n\
         Sec-WebSocket-Protocol: {PROTOCOLS}\r\n\r\n",
        s.uri,
        key(random[..16].try_into().unwrap())
    );
    conn.write_all(request.as_bytes()).map_err(io_err)?;
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 32 * 1024];
    let (status, headers, len) = loop {
        let n = conn.read(&mut chunk).map_err(io_err)?;
        if n == 0 {
            return Err(protocol("closed before the answer".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(head) = parse_head(&buf).map_err(protocol)? {
            break head;
        }
        if buf.len() > HEAD_LIMIT {
            return Err(protocol("answer head too long".into()));
        }
    };
    if status != http::StatusCode::SWITCHING_PROTOCOLS {
        let mut body = buf.split_off(len);
        let _ = (&mut conn).take(64 * 1024).read_to_end(&mut body);
        return Err(protocol(format!(
            "HTTP {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(&body).trim_end()
        )));
    }
    let v5 = headers
        .get("sec-websocket-protocol")
        .is_some_and(|p| p == "v5.channel.k8s.io");
    let mut frames = Frames::default();
    frames.push(&buf[len..]);
    let writer = Arc::new(Mutex::new(conn.try_clone().map_err(io_err)?));
    let send = {
        let writer = writer.clone();
        move |masks: &mut Masks, opcode: u8, payload: &[u8]| -> io::Result<()> {
            let f = frame(opcode, payload, masks.next());
            writer.lock().map_or(Ok(()), |mut w| w.write_all(&f))
        }
    };
    if let Some((width, height)) = s.size {
        let size = format!(r#"{{"Width":{width},"Height":{height}}}"#);
        let mut payload = vec![4u8];
        payload.extend_from_slice(size.as_bytes());
        send(&mut masks, OP_BINARY, &payload).map_err(io_err)?;
    }
    if s.stdin {
        let send = send.clone();
        let mut masks = Masks(masks.0.rotate_left(29) | 1);
        std::thread::spawn(move || {
            let mut input = io::stdin().lock();
            let mut data = vec![0u8; 16 * 1024];
            loop {
                match input.read(&mut data[1..]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        data[0] = 0;
                        if send(&mut masks, OP_BINARY, &data[..=n]).is_err() {
                            return;
                        }
                    }
                }
            }
            if v5 {
                let _ = send(&mut masks, OP_BINARY, &[255, 0]);
            }
        });
    }
    let mut status: Option<Vec<u8>> = None;
    'read: loop {
        while let Some((opcode, payload)) = frames.message().map_err(protocol)? {
            match opcode {
                OP_BINARY | OP_TEXT => match payload.split_first() {
                    Some((1, data)) => {
                        let _ = out.write_all(data).and_then(|_| out.flush());
                    }
                    Some((2, data)) => {
                        let _ = err.write_all(data).and_then(|_| err.flush());
                    }
                    Some((3, data)) => status.get_or_insert_with(Vec::new).extend(data),
                    _ => {}
                },
                OP_PING => send(&mut masks, OP_PONG, &payload).map_err(io_err)?,
                OP_CLOSE => {
                    let _ = send(&mut masks, OP_CLOSE, &payload);
                    break 'read;
                }
                _ => {}
            }
        }
        match conn.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => frames.push(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(e)),
        }
    }
    let _ = conn.shutdown(std::net::Shutdown::Both);
    match status {
        // No status: the stream ended without one (an old server): done.
        None => Ok(0),
        Some(s) => exit_code(&s).map_err(protocol),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server frame (unmasked).
    fn server(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![(fin as u8) << 7 | opcode];
        match payload.len() {
            n if n < 126 => f.push(n as u8),
            n => {
                f.push(126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
        }
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn a_client_frame_is_masked_with_its_length_encoded() {
        let f = frame(OP_BINARY, b"\x00hi", [1, 2, 3, 4]);
        assert_eq!(f, [0x82, 0x83, 1, 2, 3, 4, 1, b'h' ^ 2, b'i' ^ 3]);
        let f = frame(OP_BINARY, &[7u8; 300], [0; 4]);
        assert_eq!(&f[..4], &[0x82, 0x80 | 126, 1, 44]);
        assert_eq!(f.len(), 4 + 4 + 300);
        let f = frame(OP_BINARY, &vec![0u8; 70_000], [0; 4]);
        assert_eq!(&f[..2], &[0x82, 0x80 | 127]);
        assert_eq!(u64::from_be_bytes(f[2..10].try_into().unwrap()), 70_000);
    }

    #[test]
    fn server_frames_come_out_as_messages_however_they_are_split() {
        let mut bytes = server(true, OP_BINARY, b"\x01hello");
        bytes.extend(server(false, OP_BINARY, b"\x02par"));
        bytes.extend(server(true, OP_PING, b"p"));
        bytes.extend(server(true, OP_CONTINUATION, b"tial"));
        bytes.extend(server(true, OP_BINARY, &[1u8; 200]));
        let mut frames = Frames::default();
        let mut got = Vec::new();
        for b in bytes.chunks(3) {
            frames.push(b);
            while let Some(m) = frames.message().unwrap() {
                got.push(m);
            }
        }
        assert_eq!(got[0], (OP_BINARY, b"\x01hello".to_vec()));
        assert_eq!(got[1], (OP_PING, b"p".to_vec()));
        assert_eq!(got[2], (OP_BINARY, b"\x02partial".to_vec()));
        assert_eq!(got[3], (OP_BINARY, vec![1u8; 200]));
        assert_eq!(got.len(), 4);
        let mut stray = Frames::default();
        stray.push(&server(true, OP_CONTINUATION, b"x"));
        assert!(stray.message().is_err());
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

    #[test]
    fn the_key_is_base64_of_sixteen_bytes() {
        assert_eq!(key(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA==");
        assert_eq!(key(b"the sample nonce"), "dGhlIHNhbXBsZSBub25jZQ==");
    }
}
