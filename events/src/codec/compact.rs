//! The compact binary codec (bincode, pinned `=2.0.1`, standard config): any serde value (state
//! snapshots, checkpoints) and the bincode export's layout. The one place bincode is used.

use std::borrow::Cow;
use std::io::Write;

use castlog_core::id::{CastId, Digest, Seq};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{COMPACT_LIMIT, CastExport, CodecError, EXPORT_VERSION};
use crate::log::{CastHead, ForkPoint};
use crate::record::Recorded;
use crate::stream::StreamKind;

/// Encodes any serde value compactly (bincode, standard config). Used for snapshots too.
pub fn to_compact<T: Serialize>(value: &T) -> Vec<u8> {
    bincode::serde::encode_to_vec(value, bincode::config::standard()).unwrap_or_default()
}

/// Why bytes are not a value written by [`to_compact`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompactError {
    /// The bytes do not decode (the decoder's error, in words).
    #[error("{}", decode_error(.0))]
    Decode(#[source] bincode::error::DecodeError),
    /// A value decodes and this many bytes follow it.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

/// Decodes a value written by [`to_compact`]; trailing bytes are an error.
pub fn from_compact<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CompactError> {
    let config = bincode::config::standard().with_limit::<COMPACT_LIMIT>();
    let (value, used) =
        bincode::serde::decode_from_slice(bytes, config).map_err(CompactError::Decode)?;
    if used != bytes.len() {
        return Err(CompactError::Trailing(bytes.len() - used));
    }
    Ok(value)
}

/// A bincode decoding error in words (bincode's own `Display` is its `Debug`, such as
/// `UnexpectedEnd { additional: 1 }`).
fn decode_error(err: &bincode::error::DecodeError) -> String {
    use bincode::error::DecodeError as E;
    match err {
        E::UnexpectedEnd { .. } | E::Io { .. } => "the data ends in the middle of a value".into(),
        E::LimitExceeded => {
            format!("a length in the data is larger than the {COMPACT_LIMIT} bytes castlog reads")
        }
        E::InvalidIntegerType { .. } | E::OutsideUsizeRange(_) => {
            "an integer in the data is out of range".into()
        }
        E::UnexpectedVariant { found, .. } => format!("an unknown variant tag {found}"),
        E::Utf8 { .. } => "a text in the data is not valid UTF-8".into(),
        E::InvalidBooleanValue(byte) => format!("a boolean in the data is the byte {byte}"),
        E::OtherString(message) => message.clone(),
        E::Other(message) => (*message).to_owned(),
        _ => "a value in the data is not encoded the way castlog writes it".into(),
    }
}

/// Whether `value` encodes (as [`to_compact`]) to exactly `bytes`, found without making the
/// encoding: it is compared as it is written, and the comparison stops at the first
/// difference.
pub fn is_compact_of<T: Serialize>(value: &T, bytes: &[u8]) -> bool {
    /// The bytes not yet matched; a write that does not match them fails.
    struct Matching<'a>(&'a [u8]);
    impl Write for Matching<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            match self.0.strip_prefix(buf) {
                Some(rest) => {
                    self.0 = rest;
                    Ok(buf.len())
                }
                None => Err(std::io::ErrorKind::InvalidData.into()),
            }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut matching = Matching(bytes);
    bincode::serde::encode_into_std_write(value, &mut matching, bincode::config::standard()).is_ok()
        && matching.0.is_empty()
}

/// The bincode export's fields before its lists (encoded alone, they are the first bytes of
/// [`BinExport`]'s encoding: bincode writes a struct as its fields one after another).
#[derive(Serialize)]
pub(super) struct BinHead<'a> {
    version: u32,
    cast: &'a str,
    head_seq: u64,
    head_hash: [u8; 32],
    created_ms: u64,
    parent: Option<(&'a str, u64, [u8; 32])>,
}

impl<'a> From<&'a CastHead> for BinHead<'a> {
    fn from(head: &'a CastHead) -> Self {
        BinHead {
            version: EXPORT_VERSION,
            cast: head.cast.as_str(),
            head_seq: head.seq.get(),
            head_hash: head.hash.0,
            created_ms: head.created_ms,
            parent: head
                .parent
                .as_ref()
                .map(|p| (p.cast.as_str(), p.seq.get(), p.hash.0)),
        }
    }
}

/// One event in the bincode export: borrowed when written, owned when read.
#[derive(Serialize, Deserialize)]
pub(super) struct BinEvent<'a> {
    seq: u64,
    at_ms: u64,
    kind: Cow<'a, str>,
    v: u16,
    payload: Cow<'a, [u8]>,
    prev: [u8; 32],
    hash: [u8; 32],
}

impl<'a> From<&'a Recorded> for BinEvent<'a> {
    fn from(r: &'a Recorded) -> Self {
        BinEvent {
            seq: r.seq.get(),
            at_ms: r.at_ms,
            kind: Cow::Borrowed(&r.kind),
            v: r.v,
            payload: Cow::Borrowed(&r.payload),
            prev: r.prev.0,
            hash: r.hash.0,
        }
    }
}

/// The whole bincode export, as it is read (it is written part by part by [`Encoder`]).
#[derive(Deserialize)]
pub(super) struct BinExport {
    version: u32,
    cast: String,
    head_seq: u64,
    head_hash: [u8; 32],
    created_ms: u64,
    parent: Option<(String, u64, [u8; 32])>,
    events: Vec<BinEvent<'static>>,
    blobs: Vec<([u8; 32], Vec<u8>)>,
}

impl BinExport {
    pub(super) fn into_export(self) -> Result<CastExport, CodecError> {
        if self.version != EXPORT_VERSION {
            return Err(CodecError::NotAnExport {
                message: format!("export version {} is not supported", self.version),
                source: None,
            });
        }
        let cast = CastId::new(self.cast);
        let events: Vec<Recorded> = self
            .events
            .into_iter()
            .map(|e| Recorded {
                cast: cast.clone(),
                seq: Seq(e.seq),
                at_ms: e.at_ms,
                kind: e.kind.into_owned(),
                v: e.v,
                payload: e.payload.into_owned(),
                prev: Digest(e.prev),
                hash: Digest(e.hash),
            })
            .collect();
        Ok(CastExport {
            head: CastHead {
                cast,
                seq: Seq(self.head_seq),
                hash: Digest(self.head_hash),
                parent: self.parent.map(|(c, s, h)| ForkPoint {
                    cast: CastId::new(c),
                    seq: Seq(s),
                    hash: Digest(h),
                }),
                created_ms: self.created_ms,
                kind: StreamKind::of_records(&events),
            },
            events,
            blobs: self
                .blobs
                .into_iter()
                .map(|(h, b)| (Digest(h), b))
                .collect(),
        })
    }
}
