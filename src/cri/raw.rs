//! The once-a-second relist, kept cheap: `ListContainers` answered as the
//! undecoded protobuf bytes ([`RawContainers`]), and a fingerprint of the
//! (container ID, state) pairs in them, read straight from the wire format
//! without decoding or allocating ([`RawContainers::fingerprint`]).
//!
//! The PLEG compares fingerprints and decodes (with prost, from the same
//! bytes) only when something changed. The fingerprint is a sum of one
//! hash per container, so it does not depend on the order the runtime
//! lists them in (containerd's order changes from call to call).
//!
//! This module knows the CRI wire format only: field 1 of
//! `ListContainersResponse` is `repeated Container containers`, and in
//! `Container`, field 1 is `id` and field 6 is `state` (cri-api v1).

use bytes::{Buf, Bytes};
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder};

use super::api;

/// A `ListContainersResponse` as it came off the wire.
#[derive(Clone, Debug, Default)]
pub struct RawContainers(pub Bytes);

/// What the PLEG compares between two relists: how many containers, and
/// an order-independent hash of their (ID, state) pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    pub containers: u32,
    pub hash: u64,
}

impl RawContainers {
    /// Encodes a decoded answer (what a runtime that has no wire, the
    /// in-memory one, gives).
    pub fn from_response(r: &api::ListContainersResponse) -> Self {
        RawContainers(Bytes::from(r.encode_to_vec()))
    }

    /// Decodes the whole answer.
    pub fn decode(&self) -> Result<api::ListContainersResponse, prost::DecodeError> {
        api::ListContainersResponse::decode(self.0.clone())
    }

    /// The (ID, state) fingerprint, or `None` when the bytes are not a
    /// well-formed answer (the caller then decodes, and reports the error).
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        let mut fp = Fingerprint {
            containers: 0,
            hash: 0,
        };
        let mut outer = Wire(&self.0[..]);
        while let Some((field, value)) = outer.next_field()? {
            if let (1, Value::Bytes(container)) = (field, value) {
                let (mut id, mut state) = (&[][..], 0u64);
                let mut inner = Wire(container);
                while let Some((field, value)) = inner.next_field()? {
                    match (field, value) {
                        (1, Value::Bytes(b)) => id = b,
                        (6, Value::Varint(v)) => state = v,
                        _ => {}
                    }
                }
                fp.containers += 1;
                fp.hash = fp.hash.wrapping_add(entry_hash(id, state));
            }
        }
        Some(fp)
    }
}

/// FNV-1a of the ID, then the state, finished with a 64-bit mix so that
/// the sum over containers does not cancel out.
fn entry_hash(id: &[u8], state: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in id.iter().chain(state.to_le_bytes().iter()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// One protobuf field's value, as far as the fingerprint cares.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// A cursor over protobuf wire-format fields.
struct Wire<'a>(&'a [u8]);

impl<'a> Wire<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.0.split_first()?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    /// `Some(None)` at the end; `None` on malformed input.
    fn next_field(&mut self) -> Option<Option<(u64, Value<'a>)>> {
        if self.0.is_empty() {
            return Some(None);
        }
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => self.take(8).map(|_| Value::Fixed)?,
            2 => {
                let n = usize::try_from(self.varint()?).ok()?;
                Value::Bytes(self.take(n)?)
            }
            5 => self.take(4).map(|_| Value::Fixed)?,
            _ => return None, // groups are not used by CRI
        };
        Some(Some((key >> 3, value)))
    }
}

/// The codec of the raw call: the request is encoded by prost, the answer
/// is kept as bytes.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RawCodec;

pub(super) struct RawDecoder;

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, tonic::Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

impl Codec for RawCodec {
    type Encode = api::ListContainersRequest;
    type Decode = Bytes;
    type Encoder = tonic_prost::ProstEncoder<api::ListContainersRequest>;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        tonic_prost::ProstEncoder::default()
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawDecoder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(id: &str, state: api::ContainerState) -> api::Container {
        api::Container {
            id: id.into(),
            pod_sandbox_id: "s1".into(),
            state: state as i32,
            labels: [("io.kubernetes.pod.uid".to_string(), "u1".to_string())].into(),
            metadata: Some(api::ContainerMetadata {
                name: "app".into(),
                attempt: 3,
            }),
            created_at: 1_700_000_000_000_000_000,
            ..Default::default()
        }
    }

    fn raw(cs: Vec<api::Container>) -> RawContainers {
        RawContainers::from_response(&api::ListContainersResponse { containers: cs })
    }

    #[test]
    fn the_fingerprint_does_not_depend_on_the_listing_order() {
        let a = container("a", api::ContainerState::ContainerRunning);
        let b = container("b", api::ContainerState::ContainerExited);
        let one = raw(vec![a.clone(), b.clone()]).fingerprint();
        let two = raw(vec![b, a]).fingerprint();
        assert_eq!(one, two);
        assert_eq!(one.map(|f| f.containers), Some(2));
    }

    #[test]
    fn a_state_change_changes_the_fingerprint() {
        let running = raw(vec![container("a", api::ContainerState::ContainerRunning)]);
        let exited = raw(vec![container("a", api::ContainerState::ContainerExited)]);
        assert_ne!(running.fingerprint(), exited.fingerprint());
    }

    #[test]
    fn a_replaced_container_changes_the_fingerprint() {
        let a = raw(vec![container("a", api::ContainerState::ContainerRunning)]);
        let b = raw(vec![container("b", api::ContainerState::ContainerRunning)]);
        assert_ne!(a.fingerprint(), b.fingerprint());
    }

    #[test]
    fn an_empty_list_has_an_empty_fingerprint() {
        assert_eq!(
            raw(vec![]).fingerprint(),
            Some(Fingerprint {
                containers: 0,
                hash: 0
            })
        );
    }

    #[test]
    fn the_raw_answer_decodes_to_what_was_listed() {
        let a = container("a", api::ContainerState::ContainerCreated);
        let r = raw(vec![a.clone()]);
        assert_eq!(r.decode().expect("decodes").containers, vec![a]);
    }

    #[test]
    fn truncated_bytes_have_no_fingerprint() {
        let r = raw(vec![container("a", api::ContainerState::ContainerRunning)]);
        let cut = RawContainers(r.0.slice(..r.0.len() - 3));
        assert_eq!(cut.fingerprint(), None);
    }
}
