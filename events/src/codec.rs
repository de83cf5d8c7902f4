//! Export and import of one cast, and the compact binary codec.
//!
//! This module (with `codec/compact.rs`, the compact codec and the bincode export's layout) is
//! the only one that touches bincode (pinned `=2.0.1`), so it can be swapped here.
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
//! # Writing
//! [`write_export`] writes a cast straight from the log, one event or blob at a time, so its
//! memory does not grow with the cast (it keeps the set of referenced blob addresses).
//! bincode puts each list's length before it: that format reads the events twice, once to
//! count them and collect their blob references and once to write them, and fetches each
//! blob twice, to count those the log holds and to write them. [`encode`] writes an export
//! held in memory with the same encoder, so both give the same bytes.
//!
//! # Import
//! Import re-verifies everything before it stores anything: every chain link and hash, the head,
//! each blob against its address. A tampered file is refused naming the first bad seq.

use std::collections::BTreeSet;
use std::io::Write;
use std::ops::ControlFlow;

use castlog_core::event::Contexts;
use castlog_core::id::{CastId, Digest, Seq};
use castlog_core::syntax::{column, json_error};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::chain::blob_hash;
use crate::log::{CastHead, EventLog, ForkPoint, LogError};
use crate::record::Recorded;
use crate::stream::StreamKind;
use crate::verify::first_problem_in;

mod compact;

use compact::{BinEvent, BinExport, BinHead};
pub use compact::{CompactError, from_compact, is_compact_of, to_compact};

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
        /// What is wrong with the header, in castlog's words.
        message: String,
        /// The decoder's error, when a header that does not decode is why.
        #[source]
        source: Option<serde_json::Error>,
    },
    /// A line or field of a JSONL export is malformed.
    #[error("malformed export at line {line}: {message}")]
    Malformed {
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
        /// The decoder's error, when a line that does not decode is what is wrong.
        #[source]
        source: Option<serde_json::Error>,
    },
    /// A bincode export does not decode.
    #[error(
        "malformed bincode export: {source}; the file is damaged or was not written by castlog export"
    )]
    Undecodable {
        /// What is wrong.
        #[source]
        source: CompactError,
    },
    /// The content does not verify.
    #[error("refusing to import cast {cast}: seq {seq}: {message}")]
    Tampered {
        /// Cast being imported.
        cast: CastId,
        /// First seq whose record does not verify.
        seq: Seq,
        /// What is wrong.
        message: String,
    },
    /// A blob the export carries, but no event references, does not match its address.
    #[error(
        "refusing to import cast {cast}: blob {hash} does not match its content (no event references it)"
    )]
    BlobMismatch {
        /// Cast being imported.
        cast: CastId,
        /// The blob's address as carried.
        hash: Digest,
    },
    /// The log refused the import (a conflict, an existing cast, storage).
    #[error(transparent)]
    Log(#[from] LogError),
    /// Writing the export out failed.
    #[error("cannot write the export: {source}")]
    Write {
        /// The writer's error.
        #[source]
        source: std::io::Error,
    },
}

impl From<std::io::Error> for CodecError {
    fn from(source: std::io::Error) -> Self {
        CodecError::Write { source }
    }
}

/// One cast with its referenced blobs, as exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CastExport {
    /// The cast's head and fork parent.
    pub head: CastHead,
    /// Every event, in seq order.
    pub events: Vec<Recorded>,
    /// Blobs the events reference, by address, each once.
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

/// What [`write_export`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// Events written (the cast's whole chain, in seq order).
    pub events: u64,
    /// Blobs written (the ones the events reference).
    pub blobs: u64,
    /// Bytes of the export written, headers included.
    pub bytes: u64,
}

/// Writes `cast` of `log` and the blobs its events reference to `out` as an export in
/// `format`, reading one event or blob at a time (see the module docs). The bytes are those
/// [`encode`] gives for [`collect`]'s export of the same cast.
pub fn write_export(
    log: &dyn EventLog,
    cast: &CastId,
    format: Format,
    out: &mut dyn Write,
) -> Result<Written, CodecError> {
    let head = log
        .head(cast)?
        .ok_or_else(|| LogError::UnknownCast { cast: cast.clone() })?;
    let mut encoder = Encoder::new(out, format);
    encoder.header(&head)?;
    let mut refs = BTreeSet::new();
    let mut events = u64::MAX;
    if format == Format::Bincode {
        let mut counted = 0;
        log.scan(cast, Seq::FIRST, &mut |record| {
            refs.extend(blob_refs(&record));
            counted += 1;
            ControlFlow::Continue(())
        })?;
        events = counted;
        encoder.count(events)?;
    }
    // The events counted, and no more: the cast may grow between the two reads.
    let mut failed = None;
    log.scan(cast, Seq::FIRST, &mut |record| {
        if encoder.events == events {
            return ControlFlow::Break(());
        }
        if format == Format::Jsonl {
            refs.extend(blob_refs(&record));
        }
        match encoder.event(&record) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                failed = Some(e);
                ControlFlow::Break(())
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    if format == Format::Bincode {
        let mut held = 0;
        for hash in &refs {
            held += u64::from(log.get_blob(hash)?.is_some());
        }
        encoder.count(held)?;
    }
    // A blob the log does not hold is left out, as `collect` leaves it out.
    for hash in &refs {
        if let Some(bytes) = log.get_blob(hash)? {
            encoder.blob(hash, &bytes)?;
        }
    }
    // Blobs are never removed: one counted a moment ago and missing now is damage.
    if format == Format::Bincode && encoder.blobs != encoder.counted {
        return Err(LogError::Corrupt {
            context: "exporting a cast".into(),
            message: format!(
                "{} of the blobs cast {cast} references could be read once but not again",
                encoder.counted.saturating_sub(encoder.blobs)
            ),
            source: None,
        }
        .into());
    }
    Ok(encoder.written())
}

/// The blobs a record's event references (none if it does not decode).
fn blob_refs(record: &Recorded) -> Vec<Digest> {
    record.event().map(|e| e.blob_refs()).unwrap_or_default()
}

/// Encodes an export held in memory.
pub fn encode(export: &CastExport, format: Format) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = Encoder::new(&mut out, format);
    // Writing to a Vec cannot fail.
    let _ = (|| -> std::io::Result<()> {
        encoder.header(&export.head)?;
        encoder.count(export.events.len() as u64)?;
        for record in &export.events {
            encoder.event(record)?;
        }
        encoder.count(export.blobs.len() as u64)?;
        for (hash, bytes) in &export.blobs {
            encoder.blob(hash, bytes)?;
        }
        Ok(())
    })();
    out
}

/// Writes an export's parts in order: the header, the events (in bincode after their
/// count), then the blobs (likewise). Counts bytes, events and blobs written.
struct Encoder<'w> {
    out: &'w mut dyn Write,
    format: Format,
    bytes: u64,
    events: u64,
    blobs: u64,
    /// The last count written (bincode): the number of blobs announced.
    counted: u64,
}

impl<'w> Encoder<'w> {
    fn new(out: &'w mut dyn Write, format: Format) -> Self {
        Self {
            out,
            format,
            bytes: 0,
            events: 0,
            blobs: 0,
            counted: 0,
        }
    }

    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes)?;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    fn header(&mut self, head: &CastHead) -> std::io::Result<()> {
        match self.format {
            Format::Jsonl => self.put(&json_line(&Header {
                castlog_export: EXPORT_VERSION,
                cast: head.cast.clone(),
                head_seq: head.seq,
                head_hash: head.hash,
                created_ms: head.created_ms,
                parent: head.parent.clone(),
            })),
            Format::Bincode => {
                self.put(BIN_MAGIC)?;
                self.put(&to_compact(&BinHead::from(head)))
            }
        }
    }

    /// The length of the list that follows (bincode writes it as the list's prefix, as it
    /// does inside [`BinExport`]; JSONL has none).
    fn count(&mut self, count: u64) -> std::io::Result<()> {
        self.counted = count;
        match self.format {
            Format::Jsonl => Ok(()),
            Format::Bincode => self.put(&to_compact(&count)),
        }
    }

    fn event(&mut self, record: &Recorded) -> std::io::Result<()> {
        self.events += 1;
        match self.format {
            Format::Jsonl => self.put(&jsonl_event(record)),
            Format::Bincode => self.put(&to_compact(&BinEvent::from(record))),
        }
    }

    fn blob(&mut self, hash: &Digest, bytes: &[u8]) -> std::io::Result<()> {
        self.blobs += 1;
        match self.format {
            Format::Jsonl => {
                let line = match std::str::from_utf8(bytes) {
                    Ok(text) => serde_json::json!({ "blob": hash, "text": text }),
                    Err(_) => serde_json::json!({ "blob": hash, "hex": to_hex(bytes) }),
                };
                self.put(&json_line(&line))
            }
            Format::Bincode => self.put(&to_compact(&(hash.0, bytes))),
        }
    }

    fn written(&self) -> Written {
        Written {
            events: self.events,
            blobs: self.blobs,
            bytes: self.bytes,
        }
    }
}

/// One event's JSONL line, its stored payload verbatim where it can be.
fn jsonl_event(record: &Recorded) -> Vec<u8> {
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
    line
}

fn json_line(value: &impl Serialize) -> Vec<u8> {
    let mut out = serde_json::to_vec(value).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Decodes an export in either format (detected from its first bytes).
pub fn decode(bytes: &[u8]) -> Result<CastExport, CodecError> {
    if let Some(rest) = bytes.strip_prefix(BIN_MAGIC.as_slice()) {
        let bin: BinExport =
            from_compact(rest).map_err(|source| CodecError::Undecodable { source })?;
        return bin.into_export();
    }
    let text = std::str::from_utf8(bytes).map_err(|_| CodecError::NotAnExport {
        message: "neither the bincode magic nor UTF-8 JSON lines".into(),
        source: None,
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
            source: None,
        });
    };
    let header: Header = serde_json::from_str(first).map_err(|e| CodecError::NotAnExport {
        message: format!(
            "the first line is not an export header: {}{}",
            json_error(&e),
            column(&e)
        ),
        source: Some(e),
    })?;
    if header.castlog_export != EXPORT_VERSION {
        return Err(CodecError::NotAnExport {
            message: format!("export version {} is not supported", header.castlog_export),
            source: None,
        });
    }
    // The export carries no stream kind: the events give it once they are read.
    let mut head = CastHead {
        cast: header.cast,
        seq: header.head_seq,
        hash: header.head_hash,
        parent: header.parent,
        created_ms: header.created_ms,
        kind: StreamKind::Cast,
    };
    let mut events = Vec::new();
    let mut blobs = Vec::new();
    for (index, raw) in lines {
        let line_no = index + 1;
        let malformed = |message: String| CodecError::Malformed {
            line: line_no,
            message,
            source: None,
        };
        let line: Line<'_> = serde_json::from_str(raw).map_err(|e| CodecError::Malformed {
            line: line_no,
            message: format!("{}{}", json_error(&e), column(&e)),
            source: Some(e),
        })?;
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
    head.kind = StreamKind::of_records(&events);
    Ok(CastExport {
        head,
        events,
        blobs,
    })
}

/// Verifies an export completely, then stores it. Nothing is stored if anything is wrong.
pub fn import(log: &dyn EventLog, export: &CastExport) -> Result<(), CodecError> {
    import_in(log, export, Contexts::MACHINE)
}

/// [`import`] of a cast whose events may be of other `contexts` than the machine's.
pub fn import_in(
    log: &dyn EventLog,
    export: &CastExport,
    contexts: Contexts,
) -> Result<(), CodecError> {
    if let Some(problem) = first_problem_in(&export.head, &export.events, contexts) {
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
