//! Reading stored rows into records, heads, blobs and checkpoints. Column types are the
//! server's to enforce, so what can be wrong with a row is its values: a digest of another
//! length than 32 bytes, a negative seq or time, a `v` out of range. A strict read turns
//! such a row into [`LogError::Corrupt`]; verification ([`scan_chain`]) names it at its seq
//! and reads on.

use std::ops::ControlFlow;

use castlog_core::claims::EVENT_KINDS;
use castlog_core::id::{CastId, Digest, Seq};
use postgres::Row;
use postgres::fallible_iterator::FallibleIterator;

use super::conn::Conn;
use super::error::map_err;
use crate::log::{CastHead, ForkPoint, LogError, Snapshot, StoredRow};
use crate::record::Recorded;
use crate::sqlite::{CastsAudit, DamagedCast};

/// A stored digest column, which must be exactly 32 bytes (the same check as SQLite's rows).
pub(crate) use crate::sqlite::digest_from_sql as digest;

/// An event row that does not decode: its seq, its stored hash when that is a digest, and
/// what is wrong.
struct BadEvent {
    seq: Seq,
    hash: Option<Digest>,
    message: String,
}

/// Decodes an event row selected as `seq, at_ms, kind, v, payload, prev, hash`.
fn event(row: &Row, cast: &CastId) -> Result<Recorded, BadEvent> {
    let mut faults: Vec<String> = Vec::new();
    let get_int = |i: usize, name: &str, faults: &mut Vec<String>| -> Option<i64> {
        match row.try_get::<_, i64>(i) {
            Ok(n) if n >= 0 => Some(n),
            Ok(n) => {
                faults.push(format!("column {name} holds {n}, below zero"));
                None
            }
            Err(e) => {
                faults.push(format!("column {name} cannot be read: {e}"));
                None
            }
        }
    };
    let seq = get_int(0, "seq", &mut faults);
    let at_ms = get_int(1, "at_ms", &mut faults);
    let kind = row
        .try_get::<_, String>(2)
        .map_err(|e| faults.push(format!("column kind cannot be read: {e}")))
        .ok();
    let v = match row.try_get::<_, i32>(3) {
        Ok(v) => u16::try_from(v)
            .map_err(|_| faults.push(format!("column v holds {v}, not a version")))
            .ok(),
        Err(e) => {
            faults.push(format!("column v cannot be read: {e}"));
            None
        }
    };
    let get_digest = |i: usize, name: &str, faults: &mut Vec<String>| -> Option<Digest> {
        match row.try_get::<_, &[u8]>(i) {
            Ok(bytes) => match <[u8; 32]>::try_from(bytes) {
                Ok(d) => Some(Digest(d)),
                Err(_) => {
                    faults.push(format!("column {name} holds {} bytes, not 32", bytes.len()));
                    None
                }
            },
            Err(e) => {
                faults.push(format!("column {name} cannot be read: {e}"));
                None
            }
        }
    };
    let prev = get_digest(5, "prev", &mut faults);
    let hash = get_digest(6, "hash", &mut faults);
    let payload = row
        .try_get::<_, Vec<u8>>(4)
        .map_err(|e| faults.push(format!("column payload cannot be read: {e}")))
        .ok();
    match (seq, at_ms, kind, v, payload, prev, hash) {
        (Some(seq), Some(at_ms), Some(kind), Some(v), Some(payload), Some(prev), Some(hash))
            if faults.is_empty() =>
        {
            Ok(Recorded {
                cast: cast.clone(),
                seq: Seq(seq as u64),
                at_ms: at_ms as u64,
                kind,
                v,
                payload,
                prev,
                hash,
            })
        }
        _ => Err(BadEvent {
            seq: Seq(seq.unwrap_or_default() as u64),
            hash,
            message: faults.join("; "),
        }),
    }
}

/// The key of `cast` in `casts`.
fn cast_key(conn: &mut Conn, cast: &CastId) -> Result<Option<i64>, LogError> {
    let stmt = conn.prepared("SELECT id FROM casts WHERE cast_id = $1")?;
    let row = conn
        .client()
        .query_opt(&stmt, &[&cast.as_str()])
        .map_err(|e| map_err("looking up a cast", e))?;
    row.map(|r| r.try_get(0))
        .transpose()
        .map_err(|e| map_err("looking up a cast", e))
}

/// A head row by cast name, and all of them in creation order ([`head`] decodes them).
const HEAD_BY_NAME: &str =
    "SELECT cast_id, head_seq, head_hash, parent_cast, parent_seq, parent_hash, created_ms, id, kind
     FROM casts WHERE cast_id = $1";
const HEADS: &str =
    "SELECT cast_id, head_seq, head_hash, parent_cast, parent_seq, parent_hash, created_ms, id, kind
     FROM casts ORDER BY id";

fn head(row: &Row) -> Result<(CastHead, i64), LogError> {
    let read = |e: postgres::Error| map_err("reading a cast head", e);
    let cast = CastId::new(row.try_get::<_, String>(0).map_err(read)?);
    let seq = Seq(row.try_get::<_, i64>(1).map_err(read)?.max(0) as u64);
    let hash = digest(
        &cast,
        seq,
        "head_hash",
        row.try_get::<_, &[u8]>(2).map_err(read)?,
    )?;
    let parent_cast: Option<String> = row.try_get(3).map_err(read)?;
    let parent_seq: Option<i64> = row.try_get(4).map_err(read)?;
    let parent_hash: Option<&[u8]> = row.try_get(5).map_err(read)?;
    let parent = match (parent_cast, parent_seq, parent_hash) {
        (Some(p), Some(s), Some(h)) => {
            let parent = CastId::new(p);
            let seq = Seq(s.max(0) as u64);
            let hash = digest(&parent, seq, "parent_hash", h)?;
            Some(ForkPoint {
                cast: parent,
                seq,
                hash,
            })
        }
        _ => None,
    };
    let created_ms = row.try_get::<_, i64>(6).map_err(read)?.max(0) as u64;
    let key = row.try_get::<_, i64>(7).map_err(read)?;
    let stored: &str = row.try_get(8).map_err(read)?;
    let kind = crate::StreamKind::parse(stored).ok_or_else(|| LogError::Corrupt {
        context: "reading a cast head".into(),
        message: format!("cast {cast} has the stream kind {stored:?}, which castlog does not know"),
        source: None,
    })?;
    Ok((
        CastHead {
            cast,
            seq,
            hash,
            parent,
            created_ms,
            kind,
        },
        key,
    ))
}

/// The head of `cast` and its key.
pub(crate) fn head_and_key(
    conn: &mut Conn,
    cast: &CastId,
) -> Result<Option<(CastHead, i64)>, LogError> {
    let stmt = conn.prepared(HEAD_BY_NAME)?;
    let row = conn
        .client()
        .query_opt(&stmt, &[&cast.as_str()])
        .map_err(|e| map_err("reading a cast head", e))?;
    row.as_ref().map(head).transpose()
}

/// Every head, in creation order.
pub(crate) fn casts(conn: &mut Conn) -> Result<Vec<CastHead>, LogError> {
    let stmt = conn.prepared(HEADS)?;
    let rows = conn
        .client()
        .query(&stmt, &[])
        .map_err(|e| map_err("listing casts", e))?;
    rows.iter().map(|row| head(row).map(|(h, _)| h)).collect()
}

/// Visits the events of `cast` from `from` on, streamed from the server as they come; a row
/// that does not decode ends the read with [`LogError::Corrupt`].
pub(crate) fn scan(
    conn: &mut Conn,
    cast: &CastId,
    from: Seq,
    visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
) -> Result<(), LogError> {
    let key = cast_key(conn, cast)?.ok_or_else(|| LogError::UnknownCast { cast: cast.clone() })?;
    visit_rows(conn, cast, key, from, &mut |row| match row {
        Ok(record) => Ok(visit(record)),
        Err(bad) => Err(LogError::Corrupt {
            context: format!("reading cast {cast} seq {}", bad.seq),
            message: bad.message,
            source: None,
        }),
    })
}

/// The head and the rows of `cast` in one repeatable-read transaction: one snapshot of the
/// database, so an append committed meanwhile is in neither.
pub(crate) fn scan_chain(
    conn: &mut Conn,
    cast: &CastId,
    visit: &mut dyn FnMut(StoredRow) -> ControlFlow<()>,
) -> Result<Option<CastHead>, LogError> {
    conn.transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", |conn| {
        let Some((head, key)) = head_and_key(conn, cast)? else {
            return Ok(None);
        };
        visit_rows(conn, cast, key, Seq::FIRST, &mut |row| {
            Ok(visit(match row {
                Ok(record) => StoredRow::Record(record),
                Err(bad) => StoredRow::Unreadable {
                    first: bad.seq,
                    last: bad.seq,
                    hash: bad.hash,
                    message: bad.message,
                },
            }))
        })?;
        Ok(Some(head))
    })
}

fn visit_rows(
    conn: &mut Conn,
    cast: &CastId,
    key: i64,
    from: Seq,
    visit: &mut dyn FnMut(Result<Recorded, BadEvent>) -> Result<ControlFlow<()>, LogError>,
) -> Result<(), LogError> {
    const SQL: &str = "SELECT seq, at_ms, kind, v, payload, prev, hash FROM events
                       WHERE cast_key = $1 AND seq >= $2 ORDER BY seq";
    let stmt = conn.prepared(SQL)?;
    let from = i64::try_from(from.get()).unwrap_or(i64::MAX);
    let params: [&(dyn postgres::types::ToSql + Sync); 2] = [&key, &from];
    let mut rows = conn
        .client()
        .query_raw(&stmt, params)
        .map_err(|e| map_err("reading events", e))?;
    while let Some(row) = rows.next().map_err(|e| map_err("reading events", e))? {
        if visit(event(&row, cast))?.is_break() {
            break;
        }
    }
    Ok(())
}

/// The condition of the partial index `events_claims` (`schema/v2.sql`), as the script
/// writes it.
fn claims_condition() -> String {
    let quoted: Vec<String> = EVENT_KINDS.iter().map(|k| format!("'{k}'")).collect();
    format!("e.kind IN ({})", quoted.join(", "))
}

/// [`crate::EventLog::scan_kinds`]: the claim kinds from the index of those rows, cast by
/// cast in the order of [`casts`] and in seq order (a row under a key no cast has is left out,
/// as a scan of the listed casts leaves it out); other kinds by scanning each cast.
pub(crate) fn scan_claim_kinds(
    conn: &mut Conn,
    kinds: &[&str],
    cast: Option<&CastId>,
    visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
) -> Result<(), LogError> {
    let key = match cast {
        Some(cast) => Some(
            cast_key(conn, cast)?.ok_or_else(|| LogError::UnknownCast { cast: cast.clone() })?,
        ),
        None => None,
    };
    let sql = format!(
        "SELECT e.seq, e.at_ms, e.kind, e.v, e.payload, e.prev, e.hash, c.cast_id
         FROM events e JOIN casts c ON c.id = e.cast_key
         WHERE {} AND e.kind = ANY($1) AND ($2::bigint IS NULL OR e.cast_key = $2)
         ORDER BY e.cast_key, e.seq",
        claims_condition()
    );
    let read = |e: postgres::Error| map_err("reading events by kind", e);
    let kinds: Vec<String> = kinds.iter().map(|k| (*k).to_owned()).collect();
    let params: [&(dyn postgres::types::ToSql + Sync); 2] = [&kinds, &key];
    let mut rows = conn.client().query_raw(&sql, params).map_err(read)?;
    while let Some(row) = rows.next().map_err(read)? {
        let cast = CastId::new(row.try_get::<_, String>(7).map_err(read)?);
        let record = event(&row, &cast).map_err(|bad| LogError::Corrupt {
            context: format!("reading cast {cast} seq {}", bad.seq),
            message: bad.message,
            source: None,
        })?;
        if visit(record).is_break() {
            break;
        }
    }
    Ok(())
}

/// Whether [`scan_claim_kinds`] answers for `kinds` (all of them claim kinds).
pub(crate) fn indexed(kinds: &[&str]) -> bool {
    kinds.iter().all(|k| EVENT_KINDS.contains(k))
}

/// A blob's bytes.
pub(crate) fn blob(conn: &mut Conn, hash: &Digest) -> Result<Option<Vec<u8>>, LogError> {
    let stmt = conn.prepared("SELECT bytes FROM blobs WHERE hash = $1")?;
    let row = conn
        .client()
        .query_opt(&stmt, &[&hash.0.as_slice()])
        .map_err(|e| map_err("reading a blob", e))?;
    row.map(|r| r.try_get(0))
        .transpose()
        .map_err(|e| map_err("reading a blob", e))
}

/// The checkpoint `name` of `cast`; a row that does not decode is none (its reader folds
/// from the start instead).
pub(crate) fn checkpoint(
    conn: &mut Conn,
    cast: &CastId,
    name: &str,
) -> Result<Option<Snapshot>, LogError> {
    let stmt = conn.prepared(
        "SELECT version, seq, hash, bytes FROM checkpoints WHERE cast_id = $1 AND name = $2",
    )?;
    let row = conn
        .client()
        .query_opt(&stmt, &[&cast.as_str(), &name])
        .map_err(|e| map_err("reading a checkpoint", e))?;
    Ok(row.as_ref().and_then(snapshot))
}

/// The latest snapshot of `cast` (named `state@<seq, 20 digits>`) at or before `at_most`.
pub(crate) fn latest_snapshot(
    conn: &mut Conn,
    cast: &CastId,
    name_at_most: &str,
    at_most: Seq,
) -> Result<Option<Snapshot>, LogError> {
    // A row whose seq disagrees with its name is not taken for a point it does not say it is
    // at or below.
    let stmt = conn.prepared(
        "SELECT version, seq, hash, bytes FROM checkpoints
         WHERE cast_id = $1 AND name >= 'state@' AND name <= $2 AND seq <= $3
         ORDER BY name DESC LIMIT 1",
    )?;
    let at_most = i64::try_from(at_most.get()).unwrap_or(i64::MAX);
    let row = conn
        .client()
        .query_opt(&stmt, &[&cast.as_str(), &name_at_most, &at_most])
        .map_err(|e| map_err("reading a snapshot", e))?;
    Ok(row.as_ref().and_then(snapshot))
}

fn snapshot(row: &Row) -> Option<Snapshot> {
    Some(Snapshot {
        version: u32::try_from(row.try_get::<_, i32>(0).ok()?).ok()?,
        seq: Seq(u64::try_from(row.try_get::<_, i64>(1).ok()?).ok()?),
        hash: Digest(<[u8; 32]>::try_from(row.try_get::<_, &[u8]>(2).ok()?).ok()?),
        bytes: row.try_get(3).ok()?,
    })
}

/// Every row of `casts`, read the way verification needs: the heads that decode, in creation
/// order, and for the rest what is wrong (see [`crate::sqlite::SqliteLog::audit_casts`]).
pub(crate) fn audit_casts(conn: &mut Conn) -> Result<CastsAudit, LogError> {
    let stmt = conn.prepared(HEADS)?;
    let rows = conn
        .client()
        .query(&stmt, &[])
        .map_err(|e| map_err("checking the casts table", e))?;
    let mut audit = CastsAudit::default();
    for row in &rows {
        match head(row) {
            Ok((head, _)) => audit.heads.push(head),
            Err(err) => audit.damaged.push(DamagedCast {
                key: row.try_get(7).ok(),
                cast: row.try_get::<_, String>(0).ok().map(CastId::new),
                message: err.to_string(),
            }),
        }
    }
    Ok(audit)
}

/// Events stored under a cast key no row of `casts` has (possible only once the trigger that
/// refuses deleting a cast is dropped), as `(key, first seq, events)` per key.
pub(crate) fn orphaned_events(conn: &mut Conn) -> Result<Vec<(i64, Seq, u64)>, LogError> {
    let failed = |e: postgres::Error| map_err("looking for events of no cast", e);
    let rows = conn
        .client()
        .query(
            "SELECT cast_key, min(seq), count(*) FROM events
             WHERE cast_key NOT IN (SELECT id FROM casts)
             GROUP BY cast_key ORDER BY cast_key",
            &[],
        )
        .map_err(failed)?;
    rows.iter()
        .map(|row| {
            let key: i64 = row.try_get(0).map_err(failed)?;
            let first: i64 = row.try_get(1).map_err(failed)?;
            let count: i64 = row.try_get(2).map_err(failed)?;
            Ok((key, Seq(first.max(0) as u64), count.max(0) as u64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claims_query_repeats_the_condition_of_the_index() {
        let script = include_str!("schema/v2.sql");
        let condition = claims_condition().replace("e.kind", "kind");
        assert!(
            script.contains(&format!("WHERE {condition};")),
            "{condition}"
        );
    }
}
