//! `Database`: the log a `--db` value names, a SQLite file or a PostgreSQL database
//! (`postgres://USER@HOST/DB`), behind one type, so a command works the same on either.
//!
//! It is an [`EventLog`] that hands every call to its backend, plus what only some backends
//! have: projection checkpoints, the audits `verify` makes beside the chains, and the SQLite
//! file's WAL preparation (`sqlite()` gives the SQLite log itself).

use std::ops::ControlFlow;
use std::path::Path;

use castlog_core::id::{CastId, Digest, Seq};

use crate::log::{Appending, CastHead, EventLog, ForkPoint, LogError, Snapshot, StoredRow};
use crate::postgres::{PostgresLog, is_postgres_url};
use crate::queue::{Lease, QueueEntry, QueueState, RunQueue, Slot, WorkerId};
use crate::record::{Pending, Recorded};
use crate::sqlite::{CastsAudit, Durability, MisplacedEvent, PinnedReads, SqliteLog};

/// A castlog log on one of the durable backends.
// A command opens one log and keeps it to the end: the SQLite variant's size costs nothing,
// and boxing it would put every call of the hot append path behind one more pointer.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Database {
    /// A SQLite file.
    Sqlite(SqliteLog),
    /// A PostgreSQL database (or one schema of it).
    Postgres(PostgresLog),
}

/// Whether `db` (a `--db` value) names a PostgreSQL database rather than a SQLite file.
pub fn is_postgres(db: &Path) -> bool {
    db.to_str().is_some_and(is_postgres_url)
}

impl Database {
    /// Opens (creating if missing) the log `db` names, with full durability.
    pub fn open(db: &Path) -> Result<Self, LogError> {
        Self::open_with(db, Durability::Full)
    }

    /// Opens (creating if missing) the log `db` names. `durability` is the SQLite file's; a
    /// PostgreSQL commit is always flushed before it is acknowledged.
    pub fn open_with(db: &Path, durability: Durability) -> Result<Self, LogError> {
        match db.to_str().filter(|s| is_postgres_url(s)) {
            Some(url) => PostgresLog::open(url).map(Self::Postgres),
            None => SqliteLog::open_with(db, durability).map(Self::Sqlite),
        }
    }

    /// Opens the log `db` names for a command that needs one there already (see
    /// [`SqliteLog::open_existing`] and [`PostgresLog::open_existing`]).
    pub fn open_existing(db: &Path) -> Result<Self, LogError> {
        match db.to_str().filter(|s| is_postgres_url(s)) {
            Some(url) => PostgresLog::open_existing(url).map(Self::Postgres),
            None => SqliteLog::open_existing(db).map(Self::Sqlite),
        }
    }

    /// A listener woken by appends from any machine (PostgreSQL, once the run queue's tables
    /// are there); `None` where a follower can only poll.
    pub fn listen_appends(&self) -> Result<Option<crate::postgres::AppendListener>, LogError> {
        match self {
            Self::Sqlite(_) => Ok(None),
            Self::Postgres(log) => log.listen_appends(),
        }
    }

    /// Pins blob reads to one read transaction until the result is dropped (SQLite; see
    /// [`SqliteLog::pin_blob_reads`]). `None` where each read costs no lock of its own.
    pub fn pin_blob_reads(&self) -> Result<Option<PinnedReads<'_>>, LogError> {
        match self {
            Self::Sqlite(log) => log.pin_blob_reads().map(Some),
            Self::Postgres(_) => Ok(None),
        }
    }

    /// The SQLite log, when this is one.
    pub fn sqlite(&self) -> Option<&SqliteLog> {
        match self {
            Self::Sqlite(log) => Some(log),
            Self::Postgres(_) => None,
        }
    }

    fn log(&self) -> &dyn EventLog {
        match self {
            Self::Sqlite(log) => log,
            Self::Postgres(log) => log,
        }
    }

    /// See [`SqliteLog::prepare_for_steps`]; nothing to prepare on PostgreSQL.
    pub fn prepare_for_steps(&self) {
        if let Self::Sqlite(log) = self {
            log.prepare_for_steps();
        }
    }

    /// Every row of `casts` as verification reads it (see [`SqliteLog::audit_casts`]).
    pub fn audit_casts(&self) -> Result<CastsAudit, LogError> {
        match self {
            Self::Sqlite(log) => log.audit_casts(),
            Self::Postgres(log) => log.audit_casts(),
        }
    }

    /// Events under a cast key no cast has (see [`SqliteLog::orphaned_events`]).
    pub fn orphaned_events(&self) -> Result<Vec<(i64, Seq, u64)>, LogError> {
        match self {
            Self::Sqlite(log) => log.orphaned_events(),
            Self::Postgres(log) => log.orphaned_events(),
        }
    }

    /// Event rows stored where no read of their cast sees them (see
    /// [`SqliteLog::misplaced_events`]). PostgreSQL keys a row by its `(cast_key, seq)`
    /// columns themselves, so no row can be elsewhere than its fields say: none there.
    pub fn misplaced_events(
        &self,
        casts: Option<&[CastId]>,
    ) -> Result<Vec<MisplacedEvent>, LogError> {
        match self {
            Self::Sqlite(log) => log.misplaced_events(casts),
            Self::Postgres(_) => Ok(Vec::new()),
        }
    }

    /// The checkpoint of projection `name` for `cast`, if one is stored and readable.
    pub fn checkpoint(&self, cast: &CastId, name: &str) -> Result<Option<Snapshot>, LogError> {
        match self {
            Self::Sqlite(log) => log.checkpoint(cast, name),
            Self::Postgres(log) => log.checkpoint(cast, name),
        }
    }

    /// Replaces the checkpoint of projection `name` for `cast`.
    pub fn put_checkpoint(
        &self,
        cast: &CastId,
        name: &str,
        checkpoint: Snapshot,
    ) -> Result<(), LogError> {
        match self {
            Self::Sqlite(log) => log.put_checkpoint(cast, name, checkpoint),
            Self::Postgres(log) => log.put_checkpoint(cast, name, &checkpoint),
        }
    }
}

impl EventLog for Database {
    fn append(
        &self,
        cast: &CastId,
        expected: Seq,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        self.log().append(cast, expected, events)
    }

    fn fork(
        &self,
        cast: &CastId,
        from: &ForkPoint,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        self.log().fork(cast, from, events)
    }

    fn import(&self, head: &CastHead, events: &[Recorded]) -> Result<(), LogError> {
        self.log().import(head, events)
    }

    fn scan(
        &self,
        cast: &CastId,
        from: Seq,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError> {
        self.log().scan(cast, from, visit)
    }

    fn scan_chain(
        &self,
        cast: &CastId,
        visit: &mut dyn FnMut(StoredRow) -> ControlFlow<()>,
    ) -> Result<Option<CastHead>, LogError> {
        self.log().scan_chain(cast, visit)
    }

    fn scan_kinds(
        &self,
        kinds: &[&str],
        cast: Option<&CastId>,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError> {
        self.log().scan_kinds(kinds, cast, visit)
    }

    fn casts(&self) -> Result<Vec<CastHead>, LogError> {
        self.log().casts()
    }

    fn head(&self, cast: &CastId) -> Result<Option<CastHead>, LogError> {
        self.log().head(cast)
    }

    fn put_blob(&self, bytes: &[u8]) -> Result<Digest, LogError> {
        self.log().put_blob(bytes)
    }

    fn append_with_blobs(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        self.log().append_with_blobs(cast, expected, blobs, events)
    }

    fn begin_append_with_blobs(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Appending<'_>, LogError> {
        self.log()
            .begin_append_with_blobs(cast, expected, blobs, events)
    }

    fn get_blob(&self, hash: &Digest) -> Result<Option<Vec<u8>>, LogError> {
        self.log().get_blob(hash)
    }

    fn put_snapshot(&self, cast: &CastId, snapshot: Snapshot) -> Result<(), LogError> {
        self.log().put_snapshot(cast, snapshot)
    }

    fn begin_put_snapshot(&self, cast: &CastId, snapshot: Snapshot) -> Result<(), LogError> {
        self.log().begin_put_snapshot(cast, snapshot)
    }

    fn snapshot(&self, cast: &CastId, at_most: Seq) -> Result<Option<Snapshot>, LogError> {
        self.log().snapshot(cast, at_most)
    }

    fn read(&self, cast: &CastId, from: Seq, to: Option<Seq>) -> Result<Vec<Recorded>, LogError> {
        self.log().read(cast, from, to)
    }
}

impl Database {
    fn queue(&self) -> &dyn RunQueue {
        match self {
            Self::Sqlite(log) => log,
            Self::Postgres(log) => log,
        }
    }
}

/// The run queue in the log's own database (see [`crate::queue`]).
impl RunQueue for Database {
    fn submit(&self, cast: &CastId, agent: &str, now_ms: u64) -> Result<(), LogError> {
        self.queue().submit(cast, agent, now_ms)
    }

    fn take(
        &self,
        worker: &WorkerId,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<Option<Lease>, LogError> {
        self.queue().take(worker, now_ms, lease_ms)
    }

    fn renew(&self, lease: &Lease, now_ms: u64, lease_ms: u64) -> Result<bool, LogError> {
        self.queue().renew(lease, now_ms, lease_ms)
    }

    fn release(&self, lease: &Lease, to: QueueState) -> Result<bool, LogError> {
        self.queue().release(lease, to)
    }

    fn wake(&self, cast: &CastId, now_ms: u64) -> Result<bool, LogError> {
        self.queue().wake(cast, now_ms)
    }

    fn entries(&self) -> Result<Vec<QueueEntry>, LogError> {
        self.queue().entries()
    }

    fn append_leased(
        &self,
        lease: &Lease,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        self.queue().append_leased(lease, expected, blobs, events)
    }

    fn take_slot(
        &self,
        endpoint: &str,
        limit: u32,
        worker: &WorkerId,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<Option<Slot>, LogError> {
        self.queue()
            .take_slot(endpoint, limit, worker, now_ms, lease_ms)
    }

    fn renew_slot(&self, slot: &Slot, now_ms: u64, lease_ms: u64) -> Result<(), LogError> {
        self.queue().renew_slot(slot, now_ms, lease_ms)
    }

    fn release_slot(&self, slot: &Slot) -> Result<(), LogError> {
        self.queue().release_slot(slot)
    }
}

/// The delivery record in the log's own database (see [`crate::deliveries`]).
impl crate::deliveries::DeliveryLog for Database {
    fn record_delivery(&self, delivery: &crate::deliveries::Delivery) -> Result<(), LogError> {
        match self {
            Self::Sqlite(log) => log.record_delivery(delivery),
            Self::Postgres(log) => log.record_delivery(delivery),
        }
    }

    fn deliveries(&self, cast: &CastId) -> Result<Vec<crate::deliveries::Delivery>, LogError> {
        match self {
            Self::Sqlite(log) => log.deliveries(cast),
            Self::Postgres(log) => log.deliveries(cast),
        }
    }
}
