//! The rows each write command stores: a cast's events and head, a fork, an import, a named
//! checkpoint. Each function runs inside the writer's transaction (or a savepoint in it) and
//! checks what it must (the expected head, the fork point) before it writes.

use castlog_core::id::{CastId, Digest, Seq};
use rusqlite::{Connection, OptionalExtension, params};

use crate::log::{CastHead, ForkPoint, LogError};
use crate::record::{Pending, Recorded, seal_batch, seal_owned};
use crate::sqlite::address::{MAX_SEQ, event_row_id};
use crate::sqlite::blobs::BlobStore;
use crate::sqlite::payload::{self, PreparedPayloads};
use crate::sqlite::rows;
use crate::sqlite::{digest_from_sql, map_err};
use crate::stream::StreamKind;

/// `(key, head seq, head hash)` of a cast.
pub(crate) fn head_of(
    conn: &Connection,
    cast: &CastId,
) -> Result<Option<(i64, Seq, Digest)>, LogError> {
    let row = conn
        .prepare_cached("SELECT id, head_seq, head_hash FROM casts WHERE cast_id = ?1")
        .and_then(|mut stmt| {
            stmt.query_row([cast.as_str()], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, Vec<u8>>(2)?,
                ))
            })
            .optional()
        })
        .map_err(|e| map_err("reading a cast head", e))?;
    match row {
        None => Ok(None),
        Some((key, seq, hash)) => {
            let hash = digest_from_sql(cast, Seq(seq as u64), "head_hash", &hash)?;
            Ok(Some((key, Seq(seq as u64), hash)))
        }
    }
}

pub(crate) fn append(
    conn: &Connection,
    store: &mut BlobStore,
    cast: &CastId,
    expected: Seq,
    events: Vec<Pending>,
) -> Result<Vec<Recorded>, LogError> {
    if events.is_empty() {
        return Err(LogError::EmptyAppend { cast: cast.clone() });
    }
    let found = head_of(conn, cast)?;
    crate::log::expect_next(cast, expected, found.as_ref().map(|(_, head, _)| *head))?;
    match found {
        None => create(conn, store, cast, None, &events),
        Some((key, head, hash)) => {
            let sealed = seal_owned(cast, head, hash, events);
            insert_events(conn, store, key, &sealed, None)?;
            move_head(conn, key, sealed.last())?;
            Ok(sealed)
        }
    }
}

pub(crate) fn fork(
    conn: &Connection,
    store: &mut BlobStore,
    cast: &CastId,
    from: &ForkPoint,
    events: &[Pending],
) -> Result<Vec<Recorded>, LogError> {
    if events.is_empty() {
        return Err(LogError::EmptyAppend { cast: cast.clone() });
    }
    check_fork_point(conn, from)?;
    if let Some((_, head, _)) = head_of(conn, cast)? {
        return Err(LogError::Conflict {
            cast: cast.clone(),
            expected: Seq::FIRST,
            found: head.next(),
        });
    }
    create(conn, store, cast, Some(from), events)
}

fn check_fork_point(conn: &Connection, from: &ForkPoint) -> Result<(), LogError> {
    let bad = |reason: String| LogError::BadForkPoint {
        parent: from.cast.clone(),
        seq: from.seq,
        reason,
    };
    let Some((key, _, _)) = head_of(conn, &from.cast)? else {
        return Err(bad("no such cast in the log".into()));
    };
    let Some(id) = event_row_id(key, from.seq) else {
        return Err(bad("no such event in the log".into()));
    };
    let stored = rows::stored_hash(conn, id).map_err(|e| map_err("reading a fork point", e))?;
    match stored {
        None => Err(bad("no such event in the log".into())),
        Some(bytes) if bytes.as_slice() == from.hash.0.as_slice() => Ok(()),
        Some(bytes) => {
            let found = digest_from_sql(&from.cast, from.seq, "hash", &bytes)?;
            Err(bad(format!(
                "the parent's hash there is {found}, not {}",
                from.hash
            )))
        }
    }
}

/// Writes `records`, sealed on `on` (the cast's head then; `None`: they create the cast), if
/// the cast's stored head is still that; a [`LogError::Conflict`] otherwise.
pub(crate) fn append_sealed(
    conn: &Connection,
    store: &mut BlobStore,
    cast: &CastId,
    on: Option<(Seq, Digest)>,
    records: &[Recorded],
    payloads: Option<PreparedPayloads>,
) -> Result<(), LogError> {
    let stored = head_of(conn, cast)?;
    let key = match (stored, on) {
        (None, None) => {
            let first = records.first();
            let kind = first.map_or(StreamKind::Cast, |r| StreamKind::opened_by(&r.kind));
            insert_cast(conn, cast, None, first.map_or(0, |r| r.at_ms), kind)?
        }
        (Some((key, seq, hash)), Some(on)) if (seq, hash) == on => key,
        (stored, _) => {
            return Err(LogError::Conflict {
                cast: cast.clone(),
                expected: records.first().map_or(Seq::FIRST, |r| r.seq),
                found: stored.map_or(Seq::FIRST, |(_, seq, _)| seq.next()),
            });
        }
    };
    insert_events(conn, store, key, records, payloads)?;
    move_head(conn, key, records.last())
}

fn create(
    conn: &Connection,
    store: &mut BlobStore,
    cast: &CastId,
    parent: Option<&ForkPoint>,
    events: &[Pending],
) -> Result<Vec<Recorded>, LogError> {
    let genesis = parent.map_or(Digest::ZERO, |p| p.hash);
    let sealed = seal_batch(cast, Seq(0), genesis, events);
    let created = events.first().map_or(0, |e| e.at_ms);
    let kind = events
        .first()
        .map_or(StreamKind::Cast, |e| StreamKind::opened_by(e.kind));
    let key = insert_cast(conn, cast, parent, created, kind)?;
    insert_events(conn, store, key, &sealed, None)?;
    move_head(conn, key, sealed.last())?;
    Ok(sealed)
}

fn insert_cast(
    conn: &Connection,
    cast: &CastId,
    parent: Option<&ForkPoint>,
    created_ms: u64,
    kind: StreamKind,
) -> Result<i64, LogError> {
    conn.prepare_cached(
        "INSERT INTO casts (cast_id, head_seq, head_hash, parent_cast, parent_seq, parent_hash, created_ms, kind)
         VALUES (?1, 0, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            cast.as_str(),
            Digest::ZERO.0.as_slice(),
            parent.map(|p| p.cast.as_str()),
            parent.map(|p| p.seq.get() as i64),
            parent.map(|p| p.hash.0.to_vec()),
            created_ms as i64,
            kind.as_str(),
        ])
    })
    .map_err(|e| map_err("creating a cast", e))?;
    Ok(conn.last_insert_rowid())
}

/// Inserts `records` of the cast keyed `key`, their payloads in the stored forms `stored`
/// when given (by the packer, see [`super::pack::Packer`]), else worked out here.
fn insert_events(
    conn: &Connection,
    store: &mut BlobStore,
    key: i64,
    records: &[Recorded],
    stored: Option<PreparedPayloads>,
) -> Result<(), LogError> {
    let mut stored = stored
        .filter(|s| s.len() == records.len())
        .map(Vec::into_iter);
    let mut before = match records.first() {
        Some(first) if first.seq > Seq::FIRST => hash_before(conn, key, Seq(first.seq.get() - 1))?,
        _ => None,
    };
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO events (id, cast_id, seq, at_ms, kind, v, payload, prev, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .map_err(|e| map_err("preparing an append", e))?;
    for r in records {
        let prepared = match stored.as_mut().and_then(Iterator::next) {
            Some(prepared) => prepared,
            None => payload::prepare(&r.payload, r.cast.as_str()),
        };
        let payload = payload::to_row(conn, store, &r.payload, prepared)?;
        let Some(id) = event_row_id(key, r.seq) else {
            let message = if r.seq.get() > MAX_SEQ {
                format!(
                    "cast {} cannot grow past seq {MAX_SEQ} (this one would be seq {})",
                    r.cast, r.seq
                )
            } else {
                format!(
                    "cast {} has key {key}, which no event address can hold",
                    r.cast
                )
            };
            return Err(LogError::storage("appending an event", message));
        };
        // The link is the row before's hash: stored empty when it is (see schema v11).
        let prev: &[u8] = if r.seq > Seq::FIRST && before == Some(r.prev) {
            &[]
        } else {
            r.prev.0.as_slice()
        };
        before = Some(r.hash);
        stmt.execute(params![
            id,
            key,
            r.seq.get() as i64,
            r.at_ms as i64,
            r.kind,
            i64::from(r.v),
            payload.as_ref(),
            prev,
            r.hash.0.as_slice(),
        ])
        .map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::ConstraintViolation) => LogError::Conflict {
                cast: r.cast.clone(),
                expected: r.seq,
                found: r.seq.next(),
            },
            _ => map_err("appending an event", e),
        })?;
    }
    Ok(())
}

/// The hash stored in the row of seq `seq` of the cast keyed `key`, when that row exists and
/// holds a digest.
fn hash_before(conn: &Connection, key: i64, seq: Seq) -> Result<Option<Digest>, LogError> {
    let Some(id) = event_row_id(key, seq) else {
        return Ok(None);
    };
    let stored = rows::stored_hash(conn, id)
        .map_err(|e| map_err("reading the event before an append", e))?;
    Ok(stored.and_then(|bytes| <[u8; 32]>::try_from(bytes.as_slice()).ok().map(Digest)))
}

fn move_head(conn: &Connection, key: i64, last: Option<&Recorded>) -> Result<(), LogError> {
    let Some(last) = last else { return Ok(()) };
    conn.prepare_cached("UPDATE casts SET head_seq = ?2, head_hash = ?3 WHERE id = ?1")
        .and_then(|mut stmt| {
            stmt.execute(params![key, last.seq.get() as i64, last.hash.0.as_slice()])
        })
        .map_err(|e| map_err("moving a cast head", e))?;
    Ok(())
}

pub(crate) fn import(
    conn: &Connection,
    store: &mut BlobStore,
    head: &CastHead,
    events: &[Recorded],
) -> Result<(), LogError> {
    if head_of(conn, &head.cast)?.is_some() {
        return Err(LogError::CastExists {
            cast: head.cast.clone(),
        });
    }
    if let Some(parent) = &head.parent {
        check_fork_point(conn, parent)?;
    }
    for (i, record) in events.iter().enumerate() {
        if record.seq != Seq(i as u64 + 1) || record.cast != head.cast {
            return Err(LogError::BrokenImport {
                cast: head.cast.clone(),
                seq: record.seq,
                message: "records are not numbered 1, 2, 3, ... for this cast".into(),
            });
        }
    }
    let key = insert_cast(
        conn,
        &head.cast,
        head.parent.as_ref(),
        head.created_ms,
        head.kind,
    )?;
    insert_events(conn, store, key, events, None)?;
    move_head(conn, key, events.last())
}

pub(crate) fn put_checkpoint(
    conn: &Connection,
    cast: &CastId,
    name: &str,
    checkpoint: &super::StoredCheckpoint,
) -> Result<(), LogError> {
    let super::StoredCheckpoint {
        version,
        seq,
        hash,
        bytes,
    } = checkpoint;
    let (stored, packed) = super::pack::value_to_store(bytes);
    conn.prepare_cached(
        "INSERT OR REPLACE INTO checkpoints (cast_id, name, version, seq, hash, bytes, packed)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            cast.as_str(),
            name,
            i64::from(*version),
            seq.get() as i64,
            hash.0.as_slice(),
            stored.as_ref(),
            packed
        ])
    })
    .map_err(|e| map_err("storing a checkpoint", e))?;
    Ok(())
}
