//! Decoding stored rows, column by column, into records and heads, or into what is wrong
//! with them: strict reads turn a bad row into [`LogError::Corrupt`]; verification
//! ([`EventLog::scan_chain`](crate::EventLog::scan_chain), [`SqliteLog::audit_casts`]) names
//! it and reads on.
//!
//! A value is taken only in the storage class castlog writes (an integer, UTF-8 text, bytes,
//! a 32-byte digest): a payload stored as text is not the bytes that were hashed, whatever it
//! spells.

use std::ops::ControlFlow;
use std::sync::LazyLock;

use castlog_core::id::{CastId, Digest, Seq};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::address::{MAX_SEQ, event_row_id};
use super::{SqliteLog, digest_from_sql, is_damage, map_err, payload};
use crate::log::{CastHead, ForkPoint, LogError, StoredRow};
use crate::record::Recorded;
use crate::stream::StreamKind;

/// The columns [`event`] decodes, in its order, of the events table `table` names in the
/// query.
pub(super) fn event_columns(table: &str) -> String {
    ["id", "seq", "at_ms", "kind", "v", "payload", "prev", "hash"]
        .map(|column| format!("{table}.{column}"))
        .join(", ")
}

/// How many columns [`event_columns`] selects.
pub(super) const EVENT_COLUMN_COUNT: usize = 8;

/// [`event_columns`] of a query that reads the events table by its own name.
pub(super) static EVENT_COLUMNS: LazyLock<String> = LazyLock::new(|| event_columns("events"));

/// The links of the rows a read decodes: a row whose `prev` is empty (written so from schema
/// v11 on) is linked to the hash of the row before it in the cast, which is the last row the
/// read decoded when it reads in order, and is looked up otherwise.
#[derive(Default)]
pub(super) struct Links {
    /// The address and stored hash of the last row decoded.
    last: Option<(i64, Option<Digest>)>,
}

impl Links {
    /// The link of the row at `address` whose `prev` is empty, or why it cannot be known (the
    /// row before is missing, or its hash is unreadable, so this event's own hash cannot be
    /// checked either).
    fn before(&self, conn: &Connection, address: i64) -> Result<Digest, String> {
        let hash = match self.last {
            Some((last, hash)) if last == address - 1 => Ok(hash),
            _ => stored_hash(conn, address - 1)
                .map_err(|e| format!("cannot be read: {e}"))
                .and_then(|found| found.ok_or_else(|| "is missing".to_owned()))
                .map(|bytes| <[u8; 32]>::try_from(bytes.as_slice()).ok().map(Digest)),
        };
        let why = match hash {
            Ok(Some(hash)) => return Ok(hash),
            Ok(None) => "has an unreadable hash".to_owned(),
            Err(why) => why,
        };
        Err(format!(
            "its link is stored as the hash of the event before it, and that event {why}"
        ))
    }
}

/// The `hash` column of the event row at address `id`, as stored (`None`: no such row).
pub(super) fn stored_hash(conn: &Connection, id: i64) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT hash FROM events WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()
}

/// What is wrong with one row: each column that does not hold what castlog writes.
#[derive(Default)]
struct Faults(Vec<String>);

impl Faults {
    fn value<'r>(&mut self, row: &'r Row<'_>, i: usize, name: &str) -> Option<ValueRef<'r>> {
        match row.get_ref(i) {
            Ok(value) => Some(value),
            Err(e) => {
                self.0.push(format!("column {name} cannot be read: {e}"));
                None
            }
        }
    }

    fn wrong(&mut self, name: &str, value: ValueRef<'_>, wanted: &str) {
        let held = match value {
            ValueRef::Null => "NULL",
            ValueRef::Integer(_) => "an integer",
            ValueRef::Real(_) => "a real number",
            ValueRef::Text(_) => "text",
            ValueRef::Blob(_) => "bytes",
        };
        self.0
            .push(format!("column {name} holds {held}, not {wanted}"));
    }

    fn int(&mut self, row: &Row<'_>, i: usize, name: &str) -> Option<i64> {
        match self.value(row, i, name)? {
            ValueRef::Integer(n) => Some(n),
            other => {
                self.wrong(name, other, "an integer");
                None
            }
        }
    }

    fn text(&mut self, row: &Row<'_>, i: usize, name: &str) -> Option<String> {
        match self.value(row, i, name)? {
            ValueRef::Text(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => Some(text.to_owned()),
                Err(_) => {
                    self.0
                        .push(format!("column {name} holds text that is not UTF-8"));
                    None
                }
            },
            other => {
                self.wrong(name, other, "text");
                None
            }
        }
    }

    fn bytes(&mut self, row: &Row<'_>, i: usize, name: &str) -> Option<Vec<u8>> {
        match self.value(row, i, name)? {
            ValueRef::Blob(bytes) => Some(bytes.to_vec()),
            other => {
                self.wrong(name, other, "bytes");
                None
            }
        }
    }

    /// An event payload, rebuilt from its stored form (see [`super::payload`]).
    fn payload(
        &mut self,
        conn: &Connection,
        row: &Row<'_>,
        i: usize,
        cast: &CastId,
    ) -> Option<Vec<u8>> {
        match self.value(row, i, "payload")? {
            ValueRef::Blob(bytes) => match payload::from_row(conn, bytes, cast.as_str()) {
                Ok(payload) => Some(payload),
                Err(why) => {
                    self.0.push(format!("column payload {why}"));
                    None
                }
            },
            other => {
                self.wrong("payload", other, "bytes");
                None
            }
        }
    }

    fn digest(&mut self, row: &Row<'_>, i: usize, name: &str) -> Option<Digest> {
        let bytes = self.bytes(row, i, name)?;
        match <[u8; 32]>::try_from(bytes.as_slice()) {
            Ok(digest) => Some(Digest(digest)),
            Err(_) => {
                let n = bytes.len();
                self.0
                    .push(format!("column {name} holds {n} bytes, not 32"));
                None
            }
        }
    }

    fn message(&self) -> String {
        self.0.join("; ")
    }
}

/// An event row that does not decode.
pub(super) struct BadEvent {
    /// Its seq column, or the seq of its address when that column is unreadable.
    pub seq: Seq,
    /// Its stored hash, when that column is readable.
    pub hash: Option<Digest>,
    pub message: String,
}

impl BadEvent {
    pub(super) fn into_error(self, cast: &CastId) -> LogError {
        LogError::Corrupt {
            context: format!("reading cast {cast} seq {}", self.seq),
            message: self.message,
            source: None,
        }
    }
}

/// Decodes an event row of `cast` selected as [`EVENT_COLUMNS`], its link through `links`.
pub(super) fn event(
    conn: &Connection,
    row: &Row<'_>,
    cast: &CastId,
    links: &mut Links,
) -> Result<Recorded, BadEvent> {
    let mut faults = Faults::default();
    let address = faults.int(row, 0, "id").unwrap_or_default();
    let hash = faults.digest(row, 7, "hash");
    let linked = matches!(row.get_ref(6), Ok(ValueRef::Blob(b)) if b.is_empty());
    let prev = if linked {
        links
            .before(conn, address)
            .map_err(|why| faults.0.push(why))
            .ok()
    } else {
        faults.digest(row, 6, "prev")
    };
    links.last = Some((address, hash));
    let seq = faults.int(row, 1, "seq");
    let at_ms = faults.int(row, 2, "at_ms");
    let kind = faults.text(row, 3, "kind");
    let v = faults.int(row, 4, "v");
    let payload = faults.payload(conn, row, 5, cast);
    match (seq, at_ms, kind, v, payload, prev, hash) {
        (Some(seq), Some(at_ms), Some(kind), Some(v), Some(payload), Some(prev), Some(hash))
            if faults.0.is_empty() =>
        {
            Ok(Recorded {
                cast: cast.clone(),
                seq: Seq(seq.max(0) as u64),
                at_ms: at_ms.max(0) as u64,
                kind,
                v: u16::try_from(v).unwrap_or(u16::MAX),
                payload,
                prev,
                hash,
            })
        }
        _ => Err(BadEvent {
            seq: Seq(seq.unwrap_or(address & MAX_SEQ as i64).max(0) as u64),
            hash,
            message: faults.message(),
        }),
    }
}

/// Visits every row of the cast keyed `key` as a [`StoredRow`], in address order, up to the
/// end of its range. A row whose page SQLite finds damaged ends a query; the read starts again
/// at the next address, so the rows such a page hides are visited as one unreadable span and
/// the rows after it are still checked. Addresses past `head` are not probed that way (a
/// damaged page there hides nothing the head says is stored).
pub(super) fn scan_chain_rows(
    conn: &Connection,
    cast: &CastId,
    key: i64,
    head: Seq,
    visit: &mut dyn FnMut(StoredRow) -> ControlFlow<()>,
) -> Result<(), LogError> {
    let (Some(first), Some(end)) = (
        event_row_id(key, Seq::FIRST),
        event_row_id(key, Seq(MAX_SEQ)),
    ) else {
        return Ok(());
    };
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {} FROM events WHERE id BETWEEN ?1 AND ?2 ORDER BY id",
            *EVENT_COLUMNS
        ))
        .map_err(|e| map_err("reading events", e))?;
    // Seqs hidden by a damaged page so far: (first, last, SQLite's message).
    let mut hidden: Option<Hidden> = None;
    let mut links = Links::default();
    let mut from = first;
    let mut probes = 0u64;
    'query: while from <= end {
        let mut rows = stmt
            .query(params![from, end])
            .map_err(|e| map_err("reading events", e))?;
        loop {
            match rows.next() {
                Ok(Some(row)) => {
                    let stored = match event(conn, row, cast, &mut links) {
                        Ok(record) => StoredRow::Record(record),
                        Err(bad) => StoredRow::Unreadable {
                            first: bad.seq,
                            last: bad.seq,
                            hash: bad.hash,
                            message: bad.message,
                        },
                    };
                    let address: i64 = row.get(0).unwrap_or(end);
                    if flush(&mut hidden, visit).is_break() || visit(stored).is_break() {
                        return Ok(());
                    }
                    from = address.saturating_add(1);
                }
                Ok(None) => break 'query,
                Err(e) if is_damage(&e) => {
                    let seq = Seq((from & MAX_SEQ as i64) as u64);
                    hidden = Some(match hidden.take() {
                        Some((first, _, message)) => (first, seq, message),
                        None => (seq, seq, e.to_string()),
                    });
                    probes += 1;
                    if seq >= head {
                        break 'query;
                    }
                    if probes >= MAX_PROBES {
                        if let Some(span) = hidden.as_mut() {
                            span.2.push_str(" (no row past these was looked for)");
                        }
                        break 'query;
                    }
                    from += 1;
                    continue 'query;
                }
                Err(e) => return Err(map_err("reading events", e)),
            }
        }
    }
    let _ = flush(&mut hidden, visit);
    Ok(())
}

/// Addresses a read of one cast probes past damaged pages at most (each probe is one query
/// that fails at once): a head seq far past the rows, itself damage, must not turn one
/// damaged page into billions of probes.
const MAX_PROBES: u64 = 1 << 16;

/// Seqs a damaged page hides: the first, the last, and SQLite's message.
type Hidden = (Seq, Seq, String);

fn flush(
    hidden: &mut Option<Hidden>,
    visit: &mut dyn FnMut(StoredRow) -> ControlFlow<()>,
) -> ControlFlow<()> {
    match hidden.take() {
        Some((first, last, message)) => visit(StoredRow::Unreadable {
            first,
            last,
            hash: None,
            message: format!("the file is damaged there: {message}"),
        }),
        None => ControlFlow::Continue(()),
    }
}

/// A row of `casts` that does not decode, or damage of the table or its index of names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedCast {
    /// The row's key (its row id), when the damage is one row.
    pub key: Option<i64>,
    /// Its cast id, when that column is readable.
    pub cast: Option<CastId>,
    /// What is wrong, naming the column, the page or the index.
    pub message: String,
}

/// What [`SqliteLog::audit_casts`] finds: the heads that decode, in creation order, and the
/// damage found beside them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CastsAudit {
    /// The heads that decode.
    pub heads: Vec<CastHead>,
    /// Rows that do not, and damage of the table's pages or of its index.
    pub damaged: Vec<DamagedCast>,
}

fn cast_row(row: &Row<'_>) -> Result<(i64, CastHead), DamagedCast> {
    let mut faults = Faults::default();
    let key = faults.int(row, 0, "id");
    let cast = faults.text(row, 1, "cast_id").map(CastId::new);
    let seq = faults.int(row, 2, "head_seq");
    let hash = faults.digest(row, 3, "head_hash");
    let created = faults.int(row, 7, "created_ms");
    let kind = faults.text(row, 8, "kind").and_then(|name| {
        let kind = StreamKind::parse(&name);
        if kind.is_none() {
            faults.0.push(format!(
                "column kind holds {name:?}, not one of cast, claims_ledger, engagement"
            ));
        }
        kind
    });
    let parent = match faults.value(row, 4, "parent_cast") {
        Some(ValueRef::Null) => None,
        Some(_) => {
            let parent = faults.text(row, 4, "parent_cast").map(CastId::new);
            let seq = faults.int(row, 5, "parent_seq");
            let hash = faults.digest(row, 6, "parent_hash");
            match (parent, seq, hash) {
                (Some(cast), Some(seq), Some(hash)) => Some(ForkPoint {
                    cast,
                    seq: Seq(seq.max(0) as u64),
                    hash,
                }),
                _ => None,
            }
        }
        None => None,
    };
    match (key, cast.clone(), seq, hash, created, kind) {
        (Some(key), Some(cast), Some(seq), Some(hash), Some(created), Some(kind))
            if faults.0.is_empty() =>
        {
            let head = CastHead {
                cast,
                seq: Seq(seq.max(0) as u64),
                hash,
                parent,
                created_ms: created.max(0) as u64,
                kind,
            };
            Ok((key, head))
        }
        _ => Err(DamagedCast {
            key,
            cast,
            message: faults.message(),
        }),
    }
}

impl SqliteLog {
    /// Every row of `casts`, read the way verification needs: the heads that decode, and for
    /// the rest what is wrong, together with what SQLite's `integrity_check` of the table and
    /// its index of cast names finds (a damaged page, a name the index lacks, which would
    /// make a cast look unknown). One read transaction, so a cast created meanwhile is seen
    /// whole or not at all. Only a failure that is not damage is an error.
    pub fn audit_casts(&self) -> Result<CastsAudit, LogError> {
        self.read_with(|conn| {
            let failed = |e: rusqlite::Error| map_err("checking the casts table", e);
            let tx = conn.unchecked_transaction().map_err(failed)?;
            let mut audit = CastsAudit::default();
            let table = |message: String| DamagedCast {
                key: None,
                cast: None,
                message,
            };
            match integrity_lines(&tx) {
                Ok(lines) => audit.damaged.extend(lines.into_iter().map(table)),
                Err(e) if is_damage(&e) => audit.damaged.push(table(format!(
                    "the casts table and its index of cast names cannot be checked: {e}"
                ))),
                Err(e) => return Err(failed(e)),
            }
            let mut stmt = tx
                .prepare(&format!(
                    "SELECT id, cast_id, head_seq, head_hash, parent_cast, parent_seq,
                            parent_hash, created_ms, {}
                     FROM casts ORDER BY id",
                    self.kind_sql
                ))
                .map_err(failed)?;
            let mut rows = stmt.query([]).map_err(failed)?;
            loop {
                match rows.next() {
                    Ok(Some(row)) => match cast_row(row) {
                        Ok((_, head)) => audit.heads.push(head),
                        Err(damaged) => audit.damaged.push(damaged),
                    },
                    Ok(None) => break,
                    // A table the check could not read is reported once.
                    Err(e) if is_damage(&e) && audit.damaged.iter().any(|d| d.key.is_none()) => {
                        break;
                    }
                    Err(e) if is_damage(&e) => {
                        let listed = audit.heads.len();
                        audit.damaged.push(table(format!(
                            "the casts table cannot be read past its first {listed} rows: {e}"
                        )));
                        break;
                    }
                    Err(e) => return Err(failed(e)),
                }
            }
            Ok(audit)
        })
    }
}

/// What `PRAGMA integrity_check` says about `casts` and its indexes, without its "ok".
fn integrity_lines(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("PRAGMA integrity_check(casts)")?;
    let lines = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(lines
        .into_iter()
        .filter(|line| line != "ok")
        .map(|line| format!("the casts table or its index of cast names is damaged: {line}"))
        .collect())
}

// Heads as the log's reads take them (the audit above reads them column by column).

/// The columns of a head, in [`HeadRow`]'s order; the stream kind follows them.
pub(super) const HEAD_COLUMNS: &str =
    "cast_id, head_seq, head_hash, parent_cast, parent_seq, parent_hash, created_ms";

pub(super) fn list_casts(conn: &Connection, kind_sql: &str) -> Result<Vec<CastHead>, LogError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {HEAD_COLUMNS}, {kind_sql} FROM casts ORDER BY id"
        ))
        .map_err(|e| map_err("listing casts", e))?;
    let rows = stmt
        .query_map([], head_row)
        .map_err(|e| map_err("listing casts", e))?;
    let mut out = Vec::new();
    for row in rows {
        out.push(head_from_row(
            row.map_err(|e| map_err("listing casts", e))?,
        )?);
    }
    Ok(out)
}

pub(super) type HeadRow = (
    String,
    i64,
    Vec<u8>,
    Option<String>,
    Option<i64>,
    Option<Vec<u8>>,
    i64,
    String,
);

pub(super) fn head_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<HeadRow> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
    ))
}

pub(super) fn head_from_row(row: HeadRow) -> Result<CastHead, LogError> {
    let (cast, seq, hash, parent_cast, parent_seq, parent_hash, created, kind) = row;
    let cast = CastId::new(cast);
    let kind = stream_kind_from_sql(&cast, &kind)?;
    let seq = Seq(seq.max(0) as u64);
    let hash = digest_from_sql(&cast, seq, "head_hash", &hash)?;
    let parent = match (parent_cast, parent_seq, parent_hash) {
        (Some(p), Some(s), Some(h)) => {
            let parent = CastId::new(p);
            let seq = Seq(s.max(0) as u64);
            let hash = digest_from_sql(&parent, seq, "parent_hash", &h)?;
            Some(ForkPoint {
                cast: parent,
                seq,
                hash,
            })
        }
        _ => None,
    };
    Ok(CastHead {
        cast,
        seq,
        hash,
        parent,
        created_ms: created.max(0) as u64,
        kind,
    })
}

/// The stream kind a `casts` row holds, or [`LogError::Corrupt`] naming the cast.
fn stream_kind_from_sql(cast: &CastId, kind: &str) -> Result<StreamKind, LogError> {
    StreamKind::parse(kind).ok_or_else(|| LogError::Corrupt {
        context: format!("reading the head of {cast}"),
        message: format!("its stream kind is {kind:?}, not one of cast, claims_ledger, engagement"),
        source: None,
    })
}
