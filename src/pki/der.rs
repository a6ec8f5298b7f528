//! A tiny ASN.1 DER writer and reader: just enough to write a PKCS#10
//! certificate request and to read an X.509 certificate's validity.
//!
//! Why our own: the TLS bootstrap needs one CSR shape and one field of the
//! issued certificate; a general ASN.1 crate would cost binary bytes the
//! board budget does not have. Pure: bytes in, bytes out, no I/O.

use thiserror::Error;

/// Universal tags used by the CSR and the certificate's validity.
pub mod tag {
    pub const INTEGER: u8 = 0x02;
    pub const BIT_STRING: u8 = 0x03;
    pub const NULL: u8 = 0x05;
    pub const OID: u8 = 0x06;
    pub const UTF8_STRING: u8 = 0x0c;
    pub const UTC_TIME: u8 = 0x17;
    pub const GENERALIZED_TIME: u8 = 0x18;
    pub const SEQUENCE: u8 = 0x30;
    pub const SET: u8 = 0x31;
    /// `[0]` constructed, context-specific (EXPLICIT version, IMPLICIT attributes).
    pub const CONTEXT_0: u8 = 0xa0;
}

/// One TLV with `content` as its value.
pub fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 6);
    out.push(tag);
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes = n.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

/// A SEQUENCE of already-encoded elements.
pub fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    tlv(tag::SEQUENCE, &parts.concat())
}

/// A non-negative INTEGER that fits in a byte (versions).
pub fn small_uint(v: u8) -> Vec<u8> {
    if v & 0x80 != 0 {
        tlv(tag::INTEGER, &[0, v])
    } else {
        tlv(tag::INTEGER, &[v])
    }
}

/// A BIT STRING with no unused bits.
pub fn bit_string(bytes: &[u8]) -> Vec<u8> {
    let mut content = Vec::with_capacity(bytes.len() + 1);
    content.push(0);
    content.extend_from_slice(bytes);
    tlv(tag::BIT_STRING, &content)
}

/// An OBJECT IDENTIFIER from its arcs (`[1, 2, 840, 10045, 2, 1]`).
pub fn oid(arcs: &[u64]) -> Vec<u8> {
    let mut content = Vec::new();
    let mut push = |mut v: u64| {
        let mut tmp = [0u8; 10];
        let mut i = tmp.len();
        loop {
            i -= 1;
            tmp[i] = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                break;
            }
        }
        let last = tmp.len() - 1;
        for (j, b) in tmp.iter().enumerate().skip(i) {
            content.push(if j == last { *b } else { *b | 0x80 });
        }
    };
    push(arcs[0] * 40 + arcs[1]);
    for a in &arcs[2..] {
        push(*a);
    }
    tlv(tag::OID, &content)
}

/// Why DER input could not be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DerError {
    #[error("DER: truncated at byte {0}")]
    Truncated(usize),
    #[error("DER: expected tag {expected:#04x} at byte {at}, found {found:#04x}")]
    UnexpectedTag { expected: u8, found: u8, at: usize },
    #[error("DER: length at byte {0} is not supported")]
    BadLength(usize),
    #[error("DER: time {0:?} is not a valid UTCTime/GeneralizedTime")]
    BadTime(String),
}

/// A cursor over DER bytes, reading one TLV at a time.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    data: &'a [u8],
    /// Offset of `data` in the outermost input, for error messages.
    base: usize,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, base: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next element's tag, without consuming it.
    pub fn peek_tag(&self) -> Option<u8> {
        self.data.first().copied()
    }

    /// Reads the next TLV: its tag and a reader over its content.
    pub fn any(&mut self) -> Result<(u8, Reader<'a>), DerError> {
        let d = self.data;
        let at = self.base;
        if d.len() < 2 {
            return Err(DerError::Truncated(at));
        }
        let t = d[0];
        let (len, hdr) = match d[1] {
            n if n < 0x80 => (n as usize, 2),
            0x81..=0x84 => {
                let k = (d[1] & 0x7f) as usize;
                if d.len() < 2 + k {
                    return Err(DerError::Truncated(at));
                }
                let len = d[2..2 + k]
                    .iter()
                    .fold(0usize, |acc, b| (acc << 8) | *b as usize);
                (len, 2 + k)
            }
            _ => return Err(DerError::BadLength(at + 1)),
        };
        let end = hdr.checked_add(len).ok_or(DerError::BadLength(at + 1))?;
        if d.len() < end {
            return Err(DerError::Truncated(at));
        }
        self.data = &d[end..];
        self.base = at + end;
        Ok((
            t,
            Reader {
                data: &d[hdr..end],
                base: at + hdr,
            },
        ))
    }

    /// Reads the next TLV, which must have tag `expected`.
    pub fn expect(&mut self, expected: u8) -> Result<Reader<'a>, DerError> {
        let at = self.base;
        let (t, r) = self.any()?;
        if t != expected {
            return Err(DerError::UnexpectedTag {
                expected,
                found: t,
                at,
            });
        }
        Ok(r)
    }

    /// The remaining bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.data
    }
}

/// Seconds since the Unix epoch of a UTCTime (`YYMMDDHHMMSSZ`, years
/// 1950-2049 as RFC 5280 says) or GeneralizedTime (`YYYYMMDDHHMMSSZ`).
pub fn time_to_unix(tag_: u8, content: &[u8]) -> Result<i64, DerError> {
    let bad = || DerError::BadTime(String::from_utf8_lossy(content).into_owned());
    let s = std::str::from_utf8(content).map_err(|_| bad())?;
    let digits = s.strip_suffix('Z').ok_or_else(bad)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, DerError> {
        digits.get(r).ok_or_else(bad)?.parse().map_err(|_| bad())
    };
    let (year, rest) = match (tag_, digits.len()) {
        (tag::UTC_TIME, 12) => {
            let yy = num(0..2)?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, 2)
        }
        (tag::GENERALIZED_TIME, 14) => (num(0..4)?, 4),
        _ => return Err(bad()),
    };
    let month = num(rest..rest + 2)?;
    let day = num(rest + 2..rest + 4)?;
    let hour = num(rest + 4..rest + 6)?;
    let min = num(rest + 6..rest + 8)?;
    let sec = num(rest + 8..rest + 10)?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return Err(bad());
    }
    Ok(days_from_civil(year, month, day) * 86_400 + hour * 3600 + min * 60 + sec)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// well-known algorithm, written from its description).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_content_gets_a_long_form_length() {
        let t = tlv(tag::SEQUENCE, &[0u8; 300]);
        assert_eq!(&t[..4], &[0x30, 0x82, 0x01, 0x2c]);
        let mut r = Reader::new(&t);
        let inner = r.expect(tag::SEQUENCE).unwrap();
        assert_eq!(inner.bytes().len(), 300);
        assert!(r.is_empty());
    }

    #[test]
    fn the_ec_public_key_oid_encodes_as_openssl_does() {
        assert_eq!(
            oid(&[1, 2, 840, 10045, 2, 1]),
            [0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]
        );
    }

    #[test]
    fn a_small_integer_with_the_high_bit_gets_a_leading_zero() {
        assert_eq!(small_uint(0), [0x02, 0x01, 0x00]);
        assert_eq!(small_uint(0x80), [0x02, 0x02, 0x00, 0x80]);
    }

    #[test]
    fn a_truncated_element_is_an_error_with_its_offset() {
        let mut r = Reader::new(&[0x30, 0x05, 0x01]);
        assert_eq!(r.any().unwrap_err(), DerError::Truncated(0));
    }

    #[test]
    fn an_unexpected_tag_is_named() {
        let mut r = Reader::new(&[0x02, 0x01, 0x00]);
        assert!(matches!(
            r.expect(tag::SEQUENCE),
            Err(DerError::UnexpectedTag { found: 0x02, .. })
        ));
    }

    #[test]
    fn utc_and_generalized_times_read_as_unix_seconds() {
        assert_eq!(time_to_unix(tag::UTC_TIME, b"700101000000Z").unwrap(), 0);
        assert_eq!(
            time_to_unix(tag::UTC_TIME, b"261201034700Z").unwrap(),
            1_796_096_820
        );
        assert_eq!(
            time_to_unix(tag::GENERALIZED_TIME, b"20500101000000Z").unwrap(),
            2_524_608_000
        );
        assert_eq!(
            time_to_unix(tag::UTC_TIME, b"491231235959Z").unwrap(),
            2_524_607_999
        );
    }

    #[test]
    fn a_time_without_z_is_refused() {
        assert!(time_to_unix(tag::UTC_TIME, b"700101000000").is_err());
    }
}
