//! The rows each write stores: a cast's events and head, a fork, an import, blobs, a named
//! checkpoint. Each runs inside one transaction on one connection and checks what it must
//! (the expected head under a row lock, the fork point) before it writes.
//!
//! A cast's head row is locked (`FOR UPDATE`) before its seq is checked, so concurrent
//! appenders of one cast take turns and the later one finds the head moved: a
//! [`LogError::Conflict`]. Two creators of one cast meet at the `UNIQUE` name of `casts`,
//! and any writer that gets past both meets the primary key `(cast_key, seq)` of `events`;
//! each of those is a `Conflict` too.

use castlog_core::id::{CastId, Digest, Seq};

use super::conn::Conn;
use super::error::{is_unique_violation, map_err};
use super::heads::KnownHead;
use crate::chain::blob_hash;
use crate::log::{CastHead, ForkPoint, LogError, Snapshot};
use crate::queue::Lease;
use crate::record::{Pending, Recorded, seal_batch};

/// `(key, head seq, head hash)` of a cast, its row locked for the transaction.
fn locked_head(conn: &mut Conn, cast: &CastId) -> Result<Option<(i64, Seq, Digest)>, LogError> {
    let stmt =
        conn.prepared("SELECT id, head_seq, head_hash FROM casts WHERE cast_id = $1 FOR UPDATE")?;
    let row = conn
        .client()
        .query_opt(&stmt, &[&cast.as_str()])
        .map_err(|e| map_err("reading a cast head", e))?;
    let Some(row) = row else { return Ok(None) };
    let read = |e: postgres::Error| map_err("reading a cast head", e);
    let key: i64 = row.try_get(0).map_err(read)?;
    let seq = Seq(row.try_get::<_, i64>(1).map_err(read)?.max(0) as u64);
    let hash: Vec<u8> = row.try_get(2).map_err(read)?;
    Ok(Some((
        key,
        seq,
        super::rows::digest(cast, seq, "head_hash", &hash)?,
    )))
}

/// One statement that appends to a cast whose head is known ($2 seq, $3 hash): it moves the
/// head to $4, $5 only if the row still holds $2 and $3 (the update takes the row lock, and a
/// writer that waited for it finds the moved head), and stores the blobs and the events only
/// if it did. Run on its own, it is one transaction with one commit.
const APPEND_AT: &str = "WITH moved AS (
         UPDATE casts SET head_seq = $4, head_hash = $5
         WHERE cast_id = $1 AND head_seq = $2 AND head_hash = $3
         RETURNING id),
     stored AS (
         INSERT INTO blobs (hash, bytes)
         SELECT b.hash, b.bytes FROM moved, unnest($6::bytea[], $7::bytea[]) AS b (hash, bytes)
         ON CONFLICT (hash) DO NOTHING)
     INSERT INTO events (cast_key, seq, at_ms, kind, v, payload, prev, hash)
     SELECT moved.id, e.* FROM moved,
         unnest($8::bigint[], $9::bigint[], $10::text[], $11::integer[],
                $12::bytea[], $13::bytea[], $14::bytea[]) AS e";

/// [`APPEND_AT`] for a leased append: the head moves only while the queue row is still the
/// lease's ($15 epoch, $16 holder, running), locked `FOR SHARE` as the long way locks it, so a
/// take-over waits for the append and an append after a take-over writes nothing.
const APPEND_AT_LEASED: &str = "WITH lease AS (
         SELECT 1 FROM castlog_queue
         WHERE cast_id = $1 AND epoch = $15 AND holder = $16 AND state = 'running'
         FOR SHARE),
     moved AS (
         UPDATE casts SET head_seq = $4, head_hash = $5
         WHERE cast_id = $1 AND head_seq = $2 AND head_hash = $3 AND EXISTS (SELECT 1 FROM lease)
         RETURNING id),
     stored AS (
         INSERT INTO blobs (hash, bytes)
         SELECT b.hash, b.bytes FROM moved, unnest($6::bytea[], $7::bytea[]) AS b (hash, bytes)
         ON CONFLICT (hash) DO NOTHING)
     INSERT INTO events (cast_key, seq, at_ms, kind, v, payload, prev, hash)
     SELECT moved.id, e.* FROM moved,
         unnest($8::bigint[], $9::bigint[], $10::text[], $11::integer[],
                $12::bytea[], $13::bytea[], $14::bytea[]) AS e";

/// Appends `events` (non-empty) and `blobs` to `cast` after `head`, in one statement outside
/// any transaction (see [`APPEND_AT`]), under `lease` if given. `None` when nothing was
/// written: the head is not `head` any more (or the lease is not the queue row's), and the
/// caller appends the long way, which says which.
pub(crate) fn append_at(
    conn: &mut Conn,
    cast: &CastId,
    head: KnownHead,
    lease: Option<&Lease>,
    blobs: &[Vec<u8>],
    events: &[Pending],
) -> Result<Option<Vec<Recorded>>, LogError> {
    let sealed = seal_batch(cast, head.seq, head.hash, events);
    let Some(last) = sealed.last() else {
        return Err(LogError::EmptyAppend { cast: cast.clone() });
    };
    let stmt = conn.prepared(if lease.is_some() {
        APPEND_AT_LEASED
    } else {
        APPEND_AT
    })?;
    let mut blob_hashes: Vec<Digest> = Vec::with_capacity(blobs.len());
    let mut blob_bytes: Vec<&[u8]> = Vec::with_capacity(blobs.len());
    for blob in blobs {
        let hash = blob_hash(blob);
        // The same bytes twice in one append are stored once.
        if !blob_hashes.contains(&hash) {
            blob_hashes.push(hash);
            blob_bytes.push(blob);
        }
    }
    let blob_hashes: Vec<&[u8]> = blob_hashes.iter().map(|h| h.0.as_slice()).collect();
    let columns = Columns::of(&sealed);
    let (from_seq, to_seq) = (seq_param(head.seq), seq_param(last.seq));
    let epoch = lease.map(|l| i64::try_from(l.epoch).unwrap_or(i64::MAX));
    let holder = lease.map(|l| l.holder.as_str());
    let (name, from_hash, to_hash) = (
        cast.as_str(),
        head.hash.0.as_slice(),
        last.hash.0.as_slice(),
    );
    let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![
        &name,
        &from_seq,
        &from_hash,
        &to_seq,
        &to_hash,
        &blob_hashes,
        &blob_bytes,
        &columns.seqs,
        &columns.ats,
        &columns.kinds,
        &columns.vs,
        &columns.payloads,
        &columns.prevs,
        &columns.hashes,
    ];
    if let (Some(epoch), Some(holder)) = (&epoch, &holder) {
        params.push(epoch);
        params.push(holder);
    }
    let written = conn
        .client()
        .execute(&stmt, &params)
        .map_err(|e| events_err(e, &sealed, "appending events"))?;
    Ok((written == sealed.len() as u64).then_some(sealed))
}

fn seq_param(seq: Seq) -> i64 {
    i64::try_from(seq.get()).unwrap_or(i64::MAX)
}

/// The columns of `events` rows, one array each, for `unnest`.
struct Columns<'a> {
    seqs: Vec<i64>,
    ats: Vec<i64>,
    kinds: Vec<&'a str>,
    vs: Vec<i32>,
    payloads: Vec<&'a [u8]>,
    prevs: Vec<&'a [u8]>,
    hashes: Vec<&'a [u8]>,
}

impl<'a> Columns<'a> {
    fn of(records: &'a [Recorded]) -> Self {
        Self {
            seqs: records.iter().map(|r| seq_param(r.seq)).collect(),
            ats: records.iter().map(|r| r.at_ms as i64).collect(),
            kinds: records.iter().map(|r| r.kind.as_str()).collect(),
            vs: records.iter().map(|r| i32::from(r.v)).collect(),
            payloads: records.iter().map(|r| r.payload.as_slice()).collect(),
            prevs: records.iter().map(|r| r.prev.0.as_slice()).collect(),
            hashes: records.iter().map(|r| r.hash.0.as_slice()).collect(),
        }
    }
}

/// An error inserting `records`: a taken `(cast, seq)` is a `Conflict`.
fn events_err(err: postgres::Error, records: &[Recorded], context: &str) -> LogError {
    match (is_unique_violation(&err), records.first()) {
        (true, Some(first)) => LogError::Conflict {
            cast: first.cast.clone(),
            expected: first.seq,
            found: first.seq.next(),
        },
        _ => map_err(context, err),
    }
}

/// Appends `events` to `cast` at `expected`, storing `blobs` first, in the caller's
/// transaction.
pub(crate) fn append(
    conn: &mut Conn,
    cast: &CastId,
    expected: Seq,
    blobs: &[Vec<u8>],
    events: &[Pending],
) -> Result<Vec<Recorded>, LogError> {
    for blob in blobs {
        put_blob(conn, blob)?;
    }
    if events.is_empty() {
        return Err(LogError::EmptyAppend { cast: cast.clone() });
    }
    let found = locked_head(conn, cast)?;
    crate::log::expect_next(cast, expected, found.as_ref().map(|(_, head, _)| *head))?;
    match found {
        None => create(conn, cast, None, events),
        Some((key, head, hash)) => {
            let sealed = seal_batch(cast, head, hash, events);
            insert_events(conn, key, &sealed)?;
            move_head(conn, key, sealed.last())?;
            Ok(sealed)
        }
    }
}

pub(crate) fn fork(
    conn: &mut Conn,
    cast: &CastId,
    from: &ForkPoint,
    events: &[Pending],
) -> Result<Vec<Recorded>, LogError> {
    if events.is_empty() {
        return Err(LogError::EmptyAppend { cast: cast.clone() });
    }
    check_fork_point(conn, from)?;
    if let Some((_, head, _)) = locked_head(conn, cast)? {
        return Err(LogError::Conflict {
            cast: cast.clone(),
            expected: Seq::FIRST,
            found: head.next(),
        });
    }
    create(conn, cast, Some(from), events)
}

fn check_fork_point(conn: &mut Conn, from: &ForkPoint) -> Result<(), LogError> {
    let bad = |reason: String| LogError::BadForkPoint {
        parent: from.cast.clone(),
        seq: from.seq,
        reason,
    };
    let stmt = conn.prepared(
        "SELECT e.hash FROM casts c JOIN events e ON e.cast_key = c.id
         WHERE c.cast_id = $1 AND e.seq = $2",
    )?;
    let seq = i64::try_from(from.seq.get()).unwrap_or(i64::MAX);
    let row = conn
        .client()
        .query_opt(&stmt, &[&from.cast.as_str(), &seq])
        .map_err(|e| map_err("reading a fork point", e))?;
    let Some(row) = row else {
        return Err(bad("no such event in the log".into()));
    };
    let stored: Vec<u8> = row
        .try_get(0)
        .map_err(|e| map_err("reading a fork point", e))?;
    if stored.as_slice() == from.hash.0.as_slice() {
        return Ok(());
    }
    let found = super::rows::digest(&from.cast, from.seq, "hash", &stored)?;
    Err(bad(format!(
        "the parent's hash there is {found}, not {}",
        from.hash
    )))
}

fn create(
    conn: &mut Conn,
    cast: &CastId,
    parent: Option<&ForkPoint>,
    events: &[Pending],
) -> Result<Vec<Recorded>, LogError> {
    let genesis = parent.map_or(Digest::ZERO, |p| p.hash);
    let sealed = seal_batch(cast, Seq(0), genesis, events);
    let created = events.first().map_or(0, |e| e.at_ms);
    let kind = match (parent, sealed.first()) {
        (None, Some(first)) => crate::StreamKind::opened_by(&first.kind),
        _ => crate::StreamKind::Cast,
    };
    let key = insert_cast(conn, cast, parent, kind, created, Seq::FIRST)?;
    insert_events(conn, key, &sealed)?;
    move_head(conn, key, sealed.last())?;
    Ok(sealed)
}

/// Inserts the head row of a new cast; another writer that created it first (committed or
/// not: the insert waits for it) makes this a `Conflict` for a writer that meant `expected`.
fn insert_cast(
    conn: &mut Conn,
    cast: &CastId,
    parent: Option<&ForkPoint>,
    kind: crate::StreamKind,
    created_ms: u64,
    expected: Seq,
) -> Result<i64, LogError> {
    let stmt = conn.prepared(
        "INSERT INTO casts (cast_id, head_seq, head_hash, parent_cast, parent_seq, parent_hash, created_ms, kind)
         VALUES ($1, 0, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (cast_id) DO NOTHING RETURNING id",
    )?;
    let row = conn
        .client()
        .query_opt(
            &stmt,
            &[
                &cast.as_str(),
                &Digest::ZERO.0.as_slice(),
                &parent.map(|p| p.cast.as_str()),
                &parent.map(|p| p.seq.get() as i64),
                &parent.map(|p| p.hash.0.as_slice()),
                &(created_ms as i64),
                &kind.as_str(),
            ],
        )
        .map_err(|e| map_err("creating a cast", e))?;
    match row {
        Some(row) => row.try_get(0).map_err(|e| map_err("creating a cast", e)),
        None => {
            // Created meanwhile by another writer, whose commit this insert waited for.
            let found = locked_head(conn, cast)?.map_or(Seq::FIRST, |(_, seq, _)| seq.next());
            Err(LogError::Conflict {
                cast: cast.clone(),
                expected,
                found,
            })
        }
    }
}

/// Inserts `records` in one statement (one round trip, whatever the batch's size).
fn insert_events(conn: &mut Conn, key: i64, records: &[Recorded]) -> Result<(), LogError> {
    let stmt = conn.prepared(
        "INSERT INTO events (cast_key, seq, at_ms, kind, v, payload, prev, hash)
         SELECT $1, * FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::integer[],
                                  $6::bytea[], $7::bytea[], $8::bytea[])",
    )?;
    let c = Columns::of(records);
    conn.client()
        .execute(
            &stmt,
            &[
                &key,
                &c.seqs,
                &c.ats,
                &c.kinds,
                &c.vs,
                &c.payloads,
                &c.prevs,
                &c.hashes,
            ],
        )
        .map_err(|e| events_err(e, records, "appending events"))?;
    Ok(())
}

fn move_head(conn: &mut Conn, key: i64, last: Option<&Recorded>) -> Result<(), LogError> {
    let Some(last) = last else { return Ok(()) };
    let stmt = conn.prepared("UPDATE casts SET head_seq = $2, head_hash = $3 WHERE id = $1")?;
    conn.client()
        .execute(
            &stmt,
            &[&key, &(last.seq.get() as i64), &last.hash.0.as_slice()],
        )
        .map_err(|e| map_err("moving a cast head", e))?;
    Ok(())
}

pub(crate) fn import(
    conn: &mut Conn,
    head: &CastHead,
    events: &[Recorded],
) -> Result<(), LogError> {
    if locked_head(conn, &head.cast)?.is_some() {
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
    let key = match insert_cast(
        conn,
        &head.cast,
        head.parent.as_ref(),
        head.kind,
        head.created_ms,
        Seq::FIRST,
    ) {
        Err(LogError::Conflict { .. }) => {
            return Err(LogError::CastExists {
                cast: head.cast.clone(),
            });
        }
        other => other?,
    };
    insert_events(conn, key, events)?;
    move_head(conn, key, events.last())
}

/// Stores a blob under its content address; the same bytes twice are stored once.
pub(crate) fn put_blob(conn: &mut Conn, bytes: &[u8]) -> Result<Digest, LogError> {
    let hash = blob_hash(bytes);
    let stmt = conn.prepared(
        "INSERT INTO blobs (hash, bytes) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING",
    )?;
    conn.client()
        .execute(&stmt, &[&hash.0.as_slice(), &bytes])
        .map_err(|e| map_err("storing a blob", e))?;
    Ok(hash)
}

pub(crate) fn put_checkpoint(
    conn: &mut Conn,
    cast: &CastId,
    name: &str,
    checkpoint: &Snapshot,
) -> Result<(), LogError> {
    let stmt = conn.prepared(
        "INSERT INTO checkpoints (cast_id, name, version, seq, hash, bytes)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (cast_id, name) DO UPDATE
         SET version = excluded.version, seq = excluded.seq, hash = excluded.hash,
             bytes = excluded.bytes",
    )?;
    let version = i32::try_from(checkpoint.version).unwrap_or(i32::MAX);
    let seq = i64::try_from(checkpoint.seq.get()).unwrap_or(i64::MAX);
    conn.client()
        .execute(
            &stmt,
            &[
                &cast.as_str(),
                &name,
                &version,
                &seq,
                &checkpoint.hash.0.as_slice(),
                &checkpoint.bytes,
            ],
        )
        .map_err(|e| map_err("storing a checkpoint", e))?;
    Ok(())
}
