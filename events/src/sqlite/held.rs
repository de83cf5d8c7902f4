//! Begun appends the writer holds before it writes them (see the writer's module doc): each
//! is checked against its cast's head and sealed when it is accepted, and written with the
//! others in one transaction later, if the head is still the one it was sealed on.

use std::collections::HashMap;

use castlog_core::id::{CastId, Digest, Seq};
use rusqlite::Connection;

use crate::log::LogError;
use crate::record::{Pending, Recorded, seal_owned};
use crate::sqlite::StoredCheckpoint;
use crate::sqlite::blobs::BlobStore;
use crate::sqlite::blobs::{PreparedBlob, prepare};
use crate::sqlite::map_err;
use crate::sqlite::pack::{Packer, Packing};
use crate::sqlite::payload::{PreparedPayloads, prepare_all};
use crate::sqlite::transaction::{begin, commit, rollback};
use crate::sqlite::writes::{append_sealed, head_of, put_checkpoint};

/// The most begun appends held before they are written and committed together.
pub(crate) const HELD_APPENDS: usize = 16;

/// One begun append, sealed on the head it was accepted on.
#[derive(Debug)]
struct HeldAppend {
    cast: CastId,
    /// The cast's head when it was accepted (`None`: it creates the cast).
    on: Option<(Seq, Digest)>,
    blobs: Vec<Vec<u8>>,
    records: Vec<Recorded>,
    /// Their payloads' stored forms and their blobs' chunks, worked out meanwhile on the
    /// packer's thread.
    packing: Packing<Prepared>,
}

/// What the packer works out for one held append.
#[derive(Debug)]
struct Prepared {
    payloads: PreparedPayloads,
    blobs: Vec<PreparedBlob>,
}

/// A state snapshot (a cache) to write after the held appends.
#[derive(Debug)]
struct HeldCheckpoint {
    cast: CastId,
    name: String,
    checkpoint: StoredCheckpoint,
}

/// Begun appends accepted and not yet written, in order, and snapshots to write with them.
#[derive(Debug, Default)]
pub(crate) struct Held {
    appends: Vec<HeldAppend>,
    checkpoints: Vec<HeldCheckpoint>,
    /// The head each cast with held appends has once they are written.
    heads: HashMap<CastId, (Seq, Digest)>,
    packer: Packer,
}

impl Held {
    pub(crate) fn len(&self) -> usize {
        self.appends.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.appends.is_empty() && self.checkpoints.is_empty()
    }

    /// Holds a snapshot, written after the appends held (dropped if its cast's are not).
    pub(crate) fn hold_checkpoint(
        &mut self,
        cast: CastId,
        name: String,
        checkpoint: StoredCheckpoint,
    ) {
        self.checkpoints.push(HeldCheckpoint {
            cast,
            name,
            checkpoint,
        });
    }

    /// The casts held appends go to (blob-only ones included).
    pub(crate) fn casts(&self) -> Vec<CastId> {
        let mut casts: Vec<CastId> = Vec::new();
        for append in &self.appends {
            if !casts.contains(&append.cast) {
                casts.push(append.cast.clone());
            }
        }
        casts
    }

    /// Checks `expected` against the head of `cast` (after its held appends, else as stored,
    /// read on `conn`), seals `events` on it and holds them with `blobs`. Without events, only
    /// the blobs are held (and nothing is checked), as an ordinary append with blobs does.
    pub(crate) fn accept(
        &mut self,
        conn: &Connection,
        cast: &CastId,
        expected: Seq,
        blobs: Vec<Vec<u8>>,
        events: Vec<Pending>,
    ) -> Result<Vec<Recorded>, LogError> {
        let head = match self.heads.get(cast) {
            Some(head) => Some(*head),
            None => head_of(conn, cast)?.map(|(_, seq, hash)| (seq, hash)),
        };
        let found = head.map_or(Seq::FIRST, |(seq, _)| seq.next());
        if !events.is_empty() && expected != found {
            return Err(LogError::Conflict {
                cast: cast.clone(),
                expected,
                found,
            });
        }
        let (seq, prev) = head.unwrap_or((Seq(0), Digest::ZERO));
        let records = seal_owned(cast, seq, prev, events);
        if let Some(last) = records.last() {
            self.heads.insert(cast.clone(), (last.seq, last.hash));
        }
        let payloads: Vec<Vec<u8>> = records.iter().map(|r| r.payload.clone()).collect();
        let cast_id = cast.clone();
        let copies = blobs.clone();
        let packing = self.packer.submit(move || Prepared {
            payloads: prepare_all(&payloads, cast_id.as_str()),
            blobs: copies.iter().map(|blob| prepare(blob)).collect(),
        });
        self.appends.push(HeldAppend {
            cast: cast.clone(),
            on: head,
            blobs,
            records: records.clone(),
            packing,
        });
        Ok(records)
    }

    /// Writes every held append in one transaction and commits it; nothing is held after,
    /// unless the transaction could not even begin. An append that cannot be written (its
    /// cast's head moved: another writer) is undone alone, with every later one of its cast;
    /// the casts so refused are returned with the place of the first refused and why.
    pub(crate) fn write(
        &mut self,
        conn: &Connection,
        store: &mut BlobStore,
    ) -> Result<Vec<(CastId, usize, String)>, WriteFailure> {
        begin(conn, store).map_err(WriteFailure::NotStarted)?;
        let appends = std::mem::take(&mut self.appends);
        let checkpoints = std::mem::take(&mut self.checkpoints);
        self.heads.clear();
        let mut refused: Vec<(CastId, usize, String)> = Vec::new();
        let mut written = Ok(());
        for (slot, append) in appends.iter().enumerate() {
            if refused.iter().any(|(cast, _, _)| *cast == append.cast) {
                continue;
            }
            match write_one(conn, store, append) {
                Ok(()) => {}
                Err(WriteError::Refused(err)) => {
                    refused.push((append.cast.clone(), slot, err.to_string()));
                }
                Err(WriteError::Failed(err)) => {
                    written = Err(err);
                    break;
                }
            }
        }
        if written.is_ok() {
            // Caches: one that cannot be written is left out, and so is a snapshot of a cast
            // whose appends were refused (it could name a state the log does not have).
            for held in &checkpoints {
                if refused.iter().any(|(cast, _, _)| *cast == held.cast) {
                    continue;
                }
                if let Err(WriteError::Failed(err)) = write_checkpoint(conn, store, held) {
                    written = Err(err);
                    break;
                }
            }
        }
        match written.and_then(|()| commit(conn, store)) {
            Ok(()) => Ok(refused),
            Err(err) => {
                rollback(conn, store);
                Err(WriteFailure::Lost(err))
            }
        }
    }

    /// Forgets every held append and snapshot (a write that panicked).
    pub(crate) fn clear(&mut self) {
        self.truncate(0);
        self.checkpoints.clear();
    }

    /// Forgets the held appends after the first `len` (one whose acceptance panicked).
    pub(crate) fn truncate(&mut self, len: usize) {
        self.appends.truncate(len);
        self.heads.clear();
        for append in &self.appends {
            if let Some(last) = append.records.last() {
                self.heads
                    .insert(append.cast.clone(), (last.seq, last.hash));
            }
        }
    }
}

/// Why held appends were not written.
#[derive(Debug)]
pub(crate) enum WriteFailure {
    /// The transaction could not begin: nothing was written, they are still held.
    NotStarted(LogError),
    /// Nothing of them is stored, and nothing is held any more.
    Lost(LogError),
}

/// Why one held append was not written.
enum WriteError {
    /// It alone is undone; the others go on.
    Refused(LogError),
    /// The transaction cannot go on.
    Failed(LogError),
}

/// Writes one held append in a savepoint of its own, undone if it fails.
fn write_one(
    conn: &Connection,
    store: &mut BlobStore,
    append: &HeldAppend,
) -> Result<(), WriteError> {
    let prepared = append.packing.wait();
    let (payloads, blobs) = match prepared {
        Some(Prepared { payloads, blobs }) => (Some(payloads), blobs),
        None => (None, Vec::new()),
    };
    in_savepoint(conn, store, |store| {
        for (i, blob) in append.blobs.iter().enumerate() {
            store.put_prepared(conn, blob, blobs.get(i))?;
        }
        if append.records.is_empty() {
            return Ok(());
        }
        append_sealed(
            conn,
            store,
            &append.cast,
            append.on,
            &append.records,
            payloads,
        )
    })
}

/// Writes one held snapshot in a savepoint of its own, undone if it fails.
fn write_checkpoint(
    conn: &Connection,
    store: &mut BlobStore,
    held: &HeldCheckpoint,
) -> Result<(), WriteError> {
    in_savepoint(conn, store, |_| {
        put_checkpoint(conn, &held.cast, &held.name, &held.checkpoint)
    })
}

/// Runs `write` in a savepoint: kept if it succeeds, undone (with the rows the blob store
/// learnt in it) if it fails, which refuses it alone, unless SQLite rolled the whole
/// transaction back (a full disk, an I/O error).
fn in_savepoint(
    conn: &Connection,
    store: &mut BlobStore,
    write: impl FnOnce(&mut BlobStore) -> Result<(), LogError>,
) -> Result<(), WriteError> {
    let failed = |e: rusqlite::Error| WriteError::Failed(map_err("writing held appends", e));
    conn.execute_batch("SAVEPOINT held").map_err(failed)?;
    let mark = store.mark();
    match write(store) {
        Ok(()) => conn.execute_batch("RELEASE held").map_err(failed),
        Err(err) => {
            store.forget_since(mark);
            if conn.is_autocommit() {
                return Err(WriteError::Failed(err));
            }
            conn.execute_batch("ROLLBACK TO held; RELEASE held")
                .map_err(failed)?;
            Err(WriteError::Refused(err))
        }
    }
}
