//! Export and import of one cast, and the compact binary codec.
//!
//! This is the only module that touches bincode (pinned `=2.0.1`), so it can be swapped here.
//!
//! # JSONL export (readable)
//! One JSON object per line:
//! 1. a header: `{"castlog_export":1,"cast":…,"head_seq":…,"head_hash":…,"created_ms":…,
//!    "parent":null|{"cast":…,"seq":…,"hash":…}}`;
//! 2. one line per event, in seq order: `{"seq":…,"at_ms":…,"kind":…,"v":…,"prev":…,"hash":…,
//!    "payload":…}` where `payload` is the stored payload bytes written verbatim (they are compact
//!    JSON), so import recovers the exact bytes that were hashed; a payload that is not
//!    single-line JSON is written as `"payload_hex"` instead;
//! 3. one line per blob the events reference: `{"blob":…,"text":…}` (UTF-8) or `{"blob":…,"hex":…}`.
//!
//! # Bincode export (compact)
//! The 12 bytes `CASTLOG\0BIN1`, then the bincode (standard config) encoding of the same data.
//!
//! # Import
//! Import re-verifies everything before it stores anything: every chain link and hash, the head,
//! each blob against its address. A tampered file is refused naming the first bad seq.

use std::ops::ControlFlow;

use castlog_core::id::{CastId, Digest, Seq};
use castlog_core::syntax::{column, json_error};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::chain::blob_hash;
use crate::log::{CastHead, EventLog, ForkPoint, LogError};
use crate::record::Recorded;
use crate::verify::first_problem;

/// The version written in export headers.
pub const EXPORT_VERSION: u32 = 1;
const BIN_MAGIC: &[u8; 12] = b"CASTLOG\0BIN1";
/// Inputs larger than this are refused by the compact decoder instead of exhausting memory.
const COMPACT_LIMIT: usize = 1 << 30;

/// Export file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line.
    Jsonl,
    /// bincode, compact.
    Bincode,
}

/// Everything that can go wrong reading or writing an export.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The file is not an export this castlog understands.
    #[error("not a castlog export: {message}")]
    NotAnExport {
        /// Why.
        message: String,
    },
    /// A line or field of a JSONL export is malformed.
    #[error("malformed export at line {line}: {message}")]
    Malformed {
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A bincode export does not decode.
    #[error(
        "malformed bincode export: {message}; the file is damaged or was not written by castlog export"
    )]
    Undecodable {
        /// What is wrong, in words.
        message: String,
    },
    /// The content does not verify.
    #[error("refusing to import cast {cast}: seq {seq}: {message}")]
    Tampered {
        /// The cast.
        cast: CastId,
        /// The first bad seq.
        seq: Seq,
        /// What is wrong.
        message: String,
    },
    /// A blob the export carries, but no event references, does not match its address.
    #[error(
        "refusing to import cast {cast}: blob {hash} does not match its content (no event references it)"
    )]
    BlobMismatch {
        /// The cast.
        cast: CastId,
        /// The blob's address as carried.
        hash: Digest,
    },
    /// The log refused.
    #[error(transparent)]
    Log(#[from] LogError),
}

/// One cast with its referenced blobs, as exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CastExport {
    /// The cast's head and fork parent.
    pub head: CastHead,
    /// Every event, in seq order.
    pub events: Vec<Recorded>,
    /// The blobs the events reference.
    pub blobs: Vec<(Digest, Vec<u8>)>,
}

/// Reads a cast and the blobs it references out of a log.
pub fn collect(log: &dyn EventLog, cast: &CastId) -> Result<CastExport, LogError> {
    let head = log
        .head(cast)?
        .ok_or_else(|| LogError::UnknownCast { cast: cast.clone() })?;
    let mut events = Vec::new();
    let mut refs = Vec::new();
    log.scan(cast, Seq::FIRST, &mut |record| {
        if let Ok(event) = record.event() {
            refs.extend(event.blob_refs());
        }
        events.push(record);
        ControlFlow::Continue(())
    })?;
    refs.sort();
    refs.dedup();
    let mut blobs = Vec::with_capacity(refs.len());
    for hash in refs {
        if let Some(bytes) = log.get_blob(&hash)? {
            blobs.push((hash, bytes));
        }
    }
    Ok(CastExport {
        head,
        events,
        blobs,
    })
}

#[derive(Serialize, Deserialize)]
struct Header {
    castlog_export: u32,
    cast: CastId,
    head_seq: Seq,
    head_hash: Digest,
    created_ms: u64,
    parent: Option<ForkPoint>,
}

#[derive(Serialize)]
struct EventHead<'a> {
    seq: Seq,
    at_ms: u64,
    kind: &'a str,
    v: u16,
    prev: Digest,
    hash: Digest,
}

/// Any line after the header; which fields are present says what it is.
#[derive(Deserialize)]
struct Line<'a> {
    seq: Option<Seq>,
    at_ms: Option<u64>,
    kind: Option<String>,
    v: Option<u16>,
    prev: Option<Digest>,
    hash: Option<Digest>,
    #[serde(borrow)]
    payload: Option<&'a RawValue>,
    payload_hex: Option<String>,
    blob: Option<Digest>,
    text: Option<String>,
    hex: Option<String>,
}

/// Encodes an export.
pub fn encode(export: &CastExport, format: Format) -> Vec<u8> {
    match format {
        Format::Jsonl => encode_jsonl(export),
        Format::Bincode => {
            let mut out = BIN_MAGIC.to_vec();
            out.extend(to_compact(&BinExport::from(export)));
            out
        }
    }
}

fn encode_jsonl(export: &CastExport) -> Vec<u8> {
    let mut out = Vec::new();
    let header = Header {
        castlog_export: EXPORT_VERSION,
        cast: export.head.cast.clone(),
        head_seq: export.head.seq,
        head_hash: export.head.hash,
        created_ms: export.head.created_ms,
        parent: export.head.parent.clone(),
    };
    push_json_line(&mut out, &header);
    for record in &export.events {
        let head = EventHead {
            seq: record.seq,
            at_ms: record.at_ms,
            kind: &record.kind,
            v: record.v,
            prev: record.prev,
            hash: record.hash,
        };
        let mut line = serde_json::to_vec(&head).unwrap_or_default();
        line.pop(); // the closing brace; the payload goes last
        // Verbatim only when the payload is exactly one JSON value with no surrounding
        // whitespace (which a JSON reader would drop) and no newline (which ends the line).
        let verbatim = !record.payload.contains(&b'\n')
            && serde_json::from_slice::<&RawValue>(&record.payload)
                .is_ok_and(|raw| raw.get().len() == record.payload.len());
        if verbatim {
            line.extend_from_slice(b",\"payload\":");
            line.extend_from_slice(&record.payload);
        } else {
            line.extend_from_slice(b",\"payload_hex\":\"");
            line.extend_from_slice(to_hex(&record.payload).as_bytes());
            line.push(b'"');
        }
        line.extend_from_slice(b"}\n");
        out.extend(line);
    }
    for (hash, bytes) in &export.blobs {
        let line = match std::str::from_utf8(bytes) {
            Ok(text) => serde_json::json!({ "blob": hash, "text": text }),
            Err(_) => serde_json::json!({ "blob": hash, "hex": to_hex(bytes) }),
        };
        push_json_line(&mut out, &line);
    }
    out
}

fn push_json_line(out: &mut Vec<u8>, value: &impl Serialize) {
    out.extend(serde_json::to_vec(value).unwrap_or_default());
    out.push(b'\n');
}

/// Decodes an export in either format (detected from its first bytes).
pub fn decode(bytes: &[u8]) -> Result<CastExport, CodecError> {
    if let Some(rest) = bytes.strip_prefix(BIN_MAGIC.as_slice()) {
        let bin: BinExport =
            from_compact(rest).map_err(|message| CodecError::Undecodable { message })?;
        return bin.into_export();
    }
    let text = std::str::from_utf8(bytes).map_err(|_| CodecError::NotAnExport {
        message: "neither the bincode magic nor UTF-8 JSON lines".into(),
    })?;
    decode_jsonl(text)
}

fn decode_jsonl(text: &str) -> Result<CastExport, CodecError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, first)) = lines.next() else {
        return Err(CodecError::NotAnExport {
            message: "the file is empty".into(),
        });
    };
    let header: Header = serde_json::from_str(first).map_err(|e| CodecError::NotAnExport {
        message: format!(
            "the first line is not an export header: {}{}",
            json_error(&e),
            column(&e)
        ),
    })?;
    if header.castlog_export != EXPORT_VERSION {
        return Err(CodecError::NotAnExport {
            message: format!("export version {} is not supported", header.castlog_export),
        });
    }
    let head = CastHead {
        cast: header.cast,
        seq: header.head_seq,
        hash: header.head_hash,
        parent: header.parent,
        created_ms: header.created_ms,
    };
    let mut events = Vec::new();
    let mut blobs = Vec::new();
    for (index, raw) in lines {
        let line_no = index + 1;
        let malformed = |message: String| CodecError::Malformed {
            line: line_no,
            message,
        };
        let line: Line<'_> = serde_json::from_str(raw)
            .map_err(|e| malformed(format!("{}{}", json_error(&e), column(&e))))?;
        if let Some(hash) = line.blob {
            let bytes = match (line.text, line.hex) {
                (Some(text), _) => text.into_bytes(),
                (None, Some(hex)) => {
                    from_hex(&hex).ok_or_else(|| malformed("bad blob hex".into()))?
                }
                (None, None) => return Err(malformed("blob line without text or hex".into())),
            };
            blobs.push((hash, bytes));
            continue;
        }
        let (Some(seq), Some(at_ms), Some(kind), Some(v), Some(prev), Some(hash)) = (
            line.seq, line.at_ms, line.kind, line.v, line.prev, line.hash,
        ) else {
            return Err(malformed(
                "an event line needs seq, at_ms, kind, v, prev and hash".into(),
            ));
        };
        let payload = match (line.payload, line.payload_hex) {
            (Some(raw), _) => raw.get().as_bytes().to_vec(),
            (None, Some(hex)) => {
                from_hex(&hex).ok_or_else(|| malformed("bad payload hex".into()))?
            }
            (None, None) => return Err(malformed("an event line needs a payload".into())),
        };
        events.push(Recorded {
            cast: head.cast.clone(),
            seq,
            at_ms,
            kind,
            v,
            payload,
            prev,
            hash,
        });
    }
    Ok(CastExport {
        head,
        events,
        blobs,
    })
}

/// Verifies an export completely, then stores it. Nothing is stored if anything is wrong.
pub fn import(log: &dyn EventLog, export: &CastExport) -> Result<(), CodecError> {
    if let Some(problem) = first_problem(&export.head, &export.events) {
        return Err(CodecError::Tampered {
            cast: problem.cast,
            seq: problem.seq,
            message: problem.message,
        });
    }
    // Every blob an event references must come with the export (matching its address) or
    // already be in the log: a cast imported without its texts could never be verified, and
    // importing it again would be refused as a cast that exists.
    // Each carried blob, and whether its content matches its address (hashed once).
    let carried: std::collections::HashMap<&Digest, bool> = export
        .blobs
        .iter()
        .map(|(hash, bytes)| (hash, blob_hash(bytes) == *hash))
        .collect();
    let tampered = |seq: Seq, message: String| CodecError::Tampered {
        cast: export.head.cast.clone(),
        seq,
        message,
    };
    for record in &export.events {
        let Ok(event) = record.event() else { continue };
        for hash in event.blob_refs() {
            match carried.get(&hash) {
                Some(false) => {
                    return Err(tampered(
                        record.seq,
                        format!("blob {hash} does not match its content"),
                    ));
                }
                Some(true) => {}
                None if log.get_blob(&hash)?.is_some() => {}
                None => {
                    return Err(tampered(
                        record.seq,
                        format!(
                            "it references blob {hash}, which neither the export nor this database holds"
                        ),
                    ));
                }
            }
        }
    }
    if let Some((hash, _)) = export.blobs.iter().find(|(hash, _)| !carried[hash]) {
        return Err(CodecError::BlobMismatch {
            cast: export.head.cast.clone(),
            hash: *hash,
        });
    }
    // Refuse what the log would refuse before storing any blob, so a refused import leaves
    // nothing behind.
    if log.head(&export.head.cast)?.is_some() {
        return Err(LogError::CastExists {
            cast: export.head.cast.clone(),
        }
        .into());
    }
    if let Some(parent) = &export.head.parent {
        let found = match log.read(&parent.cast, parent.seq, Some(parent.seq)) {
            Ok(records) => records.first().map(|r| r.hash),
            Err(LogError::UnknownCast { .. }) => None,
            Err(err) => return Err(err.into()),
        };
        if found != Some(parent.hash) {
            return Err(LogError::BadForkPoint {
                parent: parent.cast.clone(),
                seq: parent.seq,
                reason:
                    "the fork parent is not in this log with that hash: import the parent first"
                        .into(),
            }
            .into());
        }
    }
    for (_, bytes) in &export.blobs {
        log.put_blob(bytes)?;
    }
    log.import(&export.head, &export.events)?;
    Ok(())
}

/// Encodes any serde value compactly (bincode, standard config). Used for snapshots too.
pub fn to_compact<T: Serialize>(value: &T) -> Vec<u8> {
    bincode::serde::encode_to_vec(value, bincode::config::standard()).unwrap_or_default()
}

/// Decodes a value written by [`to_compact`]; trailing bytes are an error, and so is what
/// the error says, in words.
pub fn from_compact<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let config = bincode::config::standard().with_limit::<COMPACT_LIMIT>();
    let (value, used) =
        bincode::serde::decode_from_slice(bytes, config).map_err(|e| decode_error(&e))?;
    if used != bytes.len() {
        return Err(format!("{} trailing bytes", bytes.len() - used));
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

#[derive(Serialize, Deserialize)]
struct BinEvent {
    seq: u64,
    at_ms: u64,
    kind: String,
    v: u16,
    payload: Vec<u8>,
    prev: [u8; 32],
    hash: [u8; 32],
}

#[derive(Serialize, Deserialize)]
struct BinExport {
    version: u32,
    cast: String,
    head_seq: u64,
    head_hash: [u8; 32],
    created_ms: u64,
    parent: Option<(String, u64, [u8; 32])>,
    events: Vec<BinEvent>,
    blobs: Vec<([u8; 32], Vec<u8>)>,
}

impl From<&CastExport> for BinExport {
    fn from(export: &CastExport) -> Self {
        BinExport {
            version: EXPORT_VERSION,
            cast: export.head.cast.to_string(),
            head_seq: export.head.seq.get(),
            head_hash: export.head.hash.0,
            created_ms: export.head.created_ms,
            parent: export
                .head
                .parent
                .as_ref()
                .map(|p| (p.cast.to_string(), p.seq.get(), p.hash.0)),
            events: export
                .events
                .iter()
                .map(|r| BinEvent {
                    seq: r.seq.get(),
                    at_ms: r.at_ms,
                    kind: r.kind.clone(),
                    v: r.v,
                    payload: r.payload.clone(),
                    prev: r.prev.0,
                    hash: r.hash.0,
                })
                .collect(),
            blobs: export.blobs.iter().map(|(h, b)| (h.0, b.clone())).collect(),
        }
    }
}

impl BinExport {
    fn into_export(self) -> Result<CastExport, CodecError> {
        if self.version != EXPORT_VERSION {
            return Err(CodecError::NotAnExport {
                message: format!("export version {} is not supported", self.version),
            });
        }
        let cast = CastId::new(self.cast);
        Ok(CastExport {
            head: CastHead {
                cast: cast.clone(),
                seq: Seq(self.head_seq),
                hash: Digest(self.head_hash),
                parent: self.parent.map(|(c, s, h)| ForkPoint {
                    cast: CastId::new(c),
                    seq: Seq(s),
                    hash: Digest(h),
                }),
                created_ms: self.created_ms,
            },
            events: self
                .events
                .into_iter()
                .map(|e| Recorded {
                    cast: cast.clone(),
                    seq: Seq(e.seq),
                    at_ms: e.at_ms,
                    kind: e.kind,
                    v: e.v,
                    payload: e.payload,
                    prev: Digest(e.prev),
                    hash: Digest(e.hash),
                })
                .collect(),
            blobs: self
                .blobs
                .into_iter()
                .map(|(h, b)| (Digest(h), b))
                .collect(),
        })
    }
}

fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(out, "{b:02x}");
    }
    out
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
