//! The SPDY/3.1 framing `picolet exec` needs to be a stream client of a
//! CRI streaming server: what kubectl and the API server speak to kubelet
//! for exec, and what every runtime's streaming server answers.
//!
//! Why SPDY and not WebSocket: only SPDY can close one stream and keep
//! the others open, in every channel protocol version. containerd 1.6's
//! streaming server speaks `v4.channel.k8s.io`, whose WebSocket form has
//! no way to say "end of stdin"; over SPDY that is a `FIN` on the stdin
//! stream, so `cat`, `sh -s` or `tar x` see their end of file.
//!
//! The subset: a client that opens streams (`SYN_STREAM`), sends and
//! receives `DATA`, answers `PING`, and reads `SYN_REPLY`, `RST_STREAM`
//! and `GOAWAY` (others are skipped). Header blocks are compressed as the
//! protocol demands, with zlib and SPDY's dictionary, but written as
//! *stored* deflate blocks: a conforming reader takes them, and no
//! compressor is linked in. The server's header blocks are never read
//! (nothing in them matters to an exec client), so no inflater either.
//! Servers of this protocol do not enforce flow control; neither does
//! this client.
//!
//! Everything here is pure: bytes in, bytes or frames out.

/// `SYN_STREAM`'s control frame type.
const SYN_STREAM: u16 = 1;
pub const SYN_REPLY: u16 = 2;
pub const RST_STREAM: u16 = 3;
pub const PING: u16 = 6;
pub const GOAWAY: u16 = 7;
/// The `FIN` flag, on `DATA` and `SYN_*` frames: the sender's last frame
/// on the stream.
pub const FLAG_FIN: u8 = 0x01;
/// The largest frame accepted from the server (the field allows 16 MiB).
const FRAME_LIMIT: usize = 1 << 20;

/// The zlib stream's header for SPDY/3 header blocks: deflate with a
/// preset dictionary (`0x78 0xf9`), then the Adler-32 of SPDY/3's
/// header dictionary, as every SPDY/3 endpoint writes them.
const ZLIB_HEADER: [u8; 6] = [0x78, 0xf9, 0xe3, 0xc6, 0xa7, 0xc2];

/// One frame read from the server.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    Data {
        stream: u32,
        fin: bool,
        data: &'a [u8],
    },
    Control {
        kind: u16,
        flags: u8,
        body: &'a [u8],
    },
}

/// The stream a `SYN_REPLY` or `RST_STREAM` names: its body's first word,
/// without the reserved top bit.
pub fn stream_id(body: &[u8]) -> Option<u32> {
    ping_id(body).map(|w| w & 0x7fff_ffff)
}

/// A `PING`'s id: its body's whole first word (echoed as it came).
pub fn ping_id(body: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(body.get(..4)?.try_into().ok()?))
}

/// The next whole frame in `buf` and its length; `Ok(None)` until it is
/// all there.
pub fn parse(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, String> {
    if buf.len() < 8 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([0, buf[5], buf[6], buf[7]]) as usize;
    if len > FRAME_LIMIT {
        return Err(format!("a SPDY frame of {len} bytes"));
    }
    if buf.len() < 8 + len {
        return Ok(None);
    }
    let body = &buf[8..8 + len];
    let flags = buf[4];
    let frame = if buf[0] & 0x80 != 0 {
        let version = u16::from_be_bytes([buf[0] & 0x7f, buf[1]]);
        if version != 3 {
            return Err(format!("SPDY version {version}, not 3"));
        }
        Frame::Control {
            kind: u16::from_be_bytes([buf[2], buf[3]]),
            flags,
            body,
        }
    } else {
        Frame::Data {
            stream: u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]),
            fin: flags & FLAG_FIN != 0,
            data: body,
        }
    };
    Ok(Some((frame, 8 + len)))
}

fn control(kind: u16, flags: u8, body: &[u8]) -> Vec<u8> {
    let len = (body.len() as u32).to_be_bytes();
    let mut out = vec![
        0x80,
        3,
        (kind >> 8) as u8,
        kind as u8,
        flags,
        len[1],
        len[2],
        len[3],
    ];
    out.extend_from_slice(body);
    out
}

/// A `DATA` frame on `stream` (at most 16 MiB of `data`).
pub fn data(stream: u32, fin: bool, data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u32).to_be_bytes();
    let mut out = Vec::with_capacity(8 + data.len());
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(&[if fin { FLAG_FIN } else { 0 }, len[1], len[2], len[3]]);
    out.extend_from_slice(data);
    out
}

/// The answer to the server's `PING` with `id`.
pub fn ping(id: u32) -> Vec<u8> {
    control(PING, 0, &id.to_be_bytes())
}

/// Header blocks for one connection's `SYN_STREAM`s: one zlib stream
/// across all of them, as SPDY requires.
#[derive(Default)]
pub struct Headers {
    started: bool,
}

impl Headers {
    /// `pairs` (lowercase names) as the next compressed header block.
    pub fn block(&mut self, pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut plain = Vec::new();
        plain.extend_from_slice(&(pairs.len() as u32).to_be_bytes());
        for (name, value) in pairs {
            for s in [name, value] {
                plain.extend_from_slice(&(s.len() as u32).to_be_bytes());
                plain.extend_from_slice(s.as_bytes());
            }
        }
        let mut out = Vec::with_capacity(plain.len() + 16);
        if !std::mem::replace(&mut self.started, true) {
            out.extend_from_slice(&ZLIB_HEADER);
        }
        // Stored deflate blocks, not final: BFINAL 0, BTYPE 00, padded to
        // the byte, then LEN and its complement, little-endian.
        for chunk in plain.chunks(0xffff) {
            let len = chunk.len() as u16;
            out.push(0);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&(!len).to_le_bytes());
            out.extend_from_slice(chunk);
        }
        // Then an empty stored block, as a zlib sync flush ends: a reader
        // hands the block's bytes on at that boundary without reading past
        // this frame (Go's would otherwise hit the frame's end looking for
        // the next block, and fail every later header block).
        out.extend_from_slice(&[0, 0, 0, 0xff, 0xff]);
        out
    }

    /// A `SYN_STREAM` opening `stream` (odd: the client's) with `pairs`.
    pub fn syn_stream(&mut self, stream: u32, pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
        body.extend_from_slice(&0u32.to_be_bytes()); // associated-to: none
        body.extend_from_slice(&[0, 0]); // priority 0, slot 0
        body.extend_from_slice(&self.block(pairs));
        control(SYN_STREAM, 0, &body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inflates stored blocks only: enough to read back [`Headers`].
    fn stored(mut b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        while !b.is_empty() {
            assert_eq!(b[0], 0, "a stored, non-final block");
            let len = u16::from_le_bytes([b[1], b[2]]);
            assert_eq!(!len, u16::from_le_bytes([b[3], b[4]]));
            out.extend_from_slice(&b[5..5 + len as usize]);
            b = &b[5 + len as usize..];
        }
        out
    }

    #[test]
    fn the_first_header_block_opens_the_zlib_stream_with_spdys_dictionary() {
        let mut h = Headers::default();
        let first = h.block(&[("streamtype", "error")]);
        assert_eq!(first[..2], [0x78, 0xf9]);
        assert_eq!((0x78u32 * 256 + 0xf9) % 31, 0, "a valid zlib header check");
        let plain = stored(&first[6..]);
        let mut want = 1u32.to_be_bytes().to_vec();
        want.extend_from_slice(&10u32.to_be_bytes());
        want.extend_from_slice(b"streamtype");
        want.extend_from_slice(&5u32.to_be_bytes());
        want.extend_from_slice(b"error");
        assert_eq!(plain, want);
        assert_eq!(
            first[first.len() - 5..],
            [0, 0, 0, 0xff, 0xff],
            "a sync flush ends it"
        );
        let second = h.block(&[("streamtype", "stdout")]);
        assert_ne!(second[..2], [0x78, 0xf9], "one zlib stream per connection");
        assert_eq!(&stored(&second)[4..18], b"\0\0\0\x0astreamtype");
    }

    #[test]
    fn a_syn_stream_names_its_stream_and_carries_the_block() {
        let mut h = Headers::default();
        let f = h.syn_stream(3, &[("streamtype", "stdin")]);
        assert_eq!(f[..4], [0x80, 3, 0, 1]);
        let len = u32::from_be_bytes([0, f[5], f[6], f[7]]) as usize;
        assert_eq!(len, f.len() - 8);
        assert_eq!(f[8..12], 3u32.to_be_bytes());
        assert_eq!(f[12..18], [0, 0, 0, 0, 0, 0]);
        assert_eq!(f[18..20], [0x78, 0xf9]);
    }

    #[test]
    fn frames_are_parsed_once_whole_and_data_keeps_its_fin() {
        let mut buf = data(5, false, b"web\n");
        buf.extend(data(5, true, b""));
        buf.extend(ping(2));
        assert_eq!(parse(&buf[..6]).unwrap(), None);
        let (f, n) = parse(&buf).unwrap().unwrap();
        assert_eq!(
            f,
            Frame::Data {
                stream: 5,
                fin: false,
                data: b"web\n"
            }
        );
        let rest = &buf[n..];
        let (f, n) = parse(rest).unwrap().unwrap();
        assert!(matches!(f, Frame::Data { stream: 5, fin: true, data } if data.is_empty()));
        let (f, _) = parse(&rest[n..]).unwrap().unwrap();
        let Frame::Control { kind, body, .. } = f else {
            panic!("{f:?}")
        };
        assert_eq!((kind, ping_id(body)), (PING, Some(2)));
        let high = 0x8000_0002u32.to_be_bytes();
        assert_eq!(
            ping_id(&high),
            Some(0x8000_0002),
            "a PING id is echoed whole"
        );
        assert_eq!(stream_id(&high), Some(2), "a stream id has no top bit");
    }

    #[test]
    fn a_frame_of_another_version_or_an_absurd_length_is_an_error() {
        assert!(parse(&[0x80, 2, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1]).is_err());
        assert!(parse(&[0, 0, 0, 1, 0, 0x7f, 0xff, 0xff]).is_err());
    }
}
