//! The run queue: casts submitted to be driven by workers, each taken under a lease.
//!
//! A cast is submitted with its first events already in the log (`cast_started`, the first
//! dispatch, its prompt held) and a queue row beside it naming the agent that answers it. A
//! worker takes a row that is `queued`, or `running` under a lease that has expired, and
//! drives the cast through the ordinary driver; it renews its lease while it works and
//! releases it when the cast pauses (`paused`, awaiting a person) or ends (`done`). A paused
//! cast is not taken again until a person's input (`refine`, `continue`) makes it runnable
//! ([`RunQueue::wake`]).
//!
//! # Leases and their epoch
//! Every take bumps the row's `epoch` and gives the taker a [`Lease`] carrying it. Appends made
//! under a lease go through [`RunQueue::append_leased`], which checks in the append's own
//! transaction that the row is still at the lease's epoch and refuses with
//! [`LogError::LeaseLost`] (writing nothing) when it is not. A worker that stalled past its
//! lease (a pause, a lost network) and whose cast another worker took over therefore cannot
//! append to it, even if the chain's head has not moved yet: the epoch moved at the take-over.
//!
//! What a lease does not do: it does not stop the stalled worker's agent or utility that is
//! already running, and lease times are read from each worker's clock (the clocks of the
//! machines must agree to well within a lease).
//!
//! # Implementations
//! - [`memory::InMemoryQueue`]: the reference, over any [`EventLog`], with its checks under one
//!   mutex.
//! - [`crate::Database`]: the queue in the log's own database, tables `castlog_queue` and
//!   `castlog_slots` (created when first used, `sqlite/queue.rs`, `postgres/queue.rs`).
//!   SQLite takes a row in a `BEGIN IMMEDIATE` transaction; PostgreSQL with `FOR UPDATE SKIP
//!   LOCKED`, and its leased append holds the row `FOR SHARE` so a take-over waits for it.
//!
//! # Shared limits
//! [`RunQueue::take_slot`] takes one of `limit` slots of an endpoint (a model server) under a
//! lease of its own, so workers on many machines never have more than `limit` requests in
//! flight to it; a slot whose holder died is free again when its lease expires.

pub mod memory;

use std::ops::ControlFlow;

use castlog_core::id::{CastId, Digest, Seq};
use serde::{Deserialize, Serialize};

use crate::log::{Appending, CastHead, EventLog, ForkPoint, LogError, Snapshot, StoredRow};
use crate::record::{Pending, Recorded};

/// Who holds a lease: a worker process, named `worker-PID@HOST` by the CLI.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WorkerId(String);

impl WorkerId {
    /// The worker named `id`.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for WorkerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a queued cast is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueState {
    /// Waiting for a worker.
    Queued,
    /// Held by a worker (whose lease may have expired: then any worker may take it).
    Running,
    /// Released at a pause: waits for a person's input.
    Paused,
    /// Released at the end; never taken again.
    Done,
}

impl QueueState {
    /// The name stored in the database and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Done => "done",
        }
    }

    /// The state a stored name names.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "queued" => Self::Queued,
            "running" => Self::Running,
            "paused" => Self::Paused,
            "done" => Self::Done,
            _ => return None,
        })
    }
}

/// One row of the queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// The cast.
    pub cast: CastId,
    /// The agent SPEC that answers it.
    pub agent: String,
    /// Where it is.
    pub state: QueueState,
    /// The worker holding it (while `running`).
    pub holder: Option<WorkerId>,
    /// Bumped by every take.
    pub epoch: u64,
    /// When the holder's lease ends (while `running`).
    pub lease_until_ms: u64,
    /// When it was submitted.
    pub submitted_ms: u64,
}

impl QueueEntry {
    /// Whether a worker may take it at `now_ms`.
    pub fn takeable(&self, now_ms: u64) -> bool {
        match self.state {
            QueueState::Queued => true,
            QueueState::Running => self.lease_until_ms < now_ms,
            QueueState::Paused | QueueState::Done => false,
        }
    }
}

/// A cast taken by a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The cast.
    pub cast: CastId,
    /// The agent SPEC that answers it.
    pub agent: String,
    /// The taker.
    pub holder: WorkerId,
    /// The row's epoch after the take; appends are fenced by it.
    pub epoch: u64,
    /// Whether it was taken from a holder whose lease expired (the cast may have a prompt in
    /// flight that nobody answers: the worker re-dispatches it).
    pub taken_over: bool,
}

/// A slot of an endpoint's concurrency limit, held by a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The endpoint (an agent SPEC).
    pub endpoint: String,
    /// Which of its slots, from 0.
    pub slot: u32,
    /// The holder.
    pub holder: WorkerId,
}

/// The queue seam (see the [module](self) doc). Times are the caller's clock, in ms.
pub trait RunQueue: Send + Sync {
    /// Queues `cast` (whose first events are in the log) to be answered by `agent`;
    /// [`LogError::AlreadyQueued`] if it has a row.
    fn submit(&self, cast: &CastId, agent: &str, now_ms: u64) -> Result<(), LogError>;

    /// Takes the oldest takeable cast for `worker`, under a lease ending `lease_ms` from now.
    fn take(
        &self,
        worker: &WorkerId,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<Option<Lease>, LogError>;

    /// Extends `lease`; false when it was lost (taken over, or the row moved on).
    fn renew(&self, lease: &Lease, now_ms: u64, lease_ms: u64) -> Result<bool, LogError>;

    /// Gives the cast up at a pause (`Paused`) or the end (`Done`); false when the lease was
    /// lost meanwhile (nothing changes then).
    fn release(&self, lease: &Lease, to: QueueState) -> Result<bool, LogError>;

    /// Makes a paused cast runnable again (after a person's input); false when it is not
    /// paused (or not queued at all).
    fn wake(&self, cast: &CastId, now_ms: u64) -> Result<bool, LogError>;

    /// Every row, oldest first.
    fn entries(&self) -> Result<Vec<QueueEntry>, LogError>;

    /// Stores `blobs` and appends `events` to the leased cast, in one transaction that first
    /// checks the lease's epoch is still the row's ([`LogError::LeaseLost`] otherwise).
    fn append_leased(
        &self,
        lease: &Lease,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError>;

    /// Takes a free slot of `endpoint` (at most `limit` are held at once), under a lease of
    /// `lease_ms`; `None` when all are held.
    fn take_slot(
        &self,
        endpoint: &str,
        limit: u32,
        worker: &WorkerId,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<Option<Slot>, LogError>;

    /// Extends a slot's lease (a long request).
    fn renew_slot(&self, slot: &Slot, now_ms: u64, lease_ms: u64) -> Result<(), LogError>;

    /// Frees a slot.
    fn release_slot(&self, slot: &Slot) -> Result<(), LogError>;
}

/// The log as a leased worker sees it: reads go to the log, appends to the leased cast are
/// fenced by the lease ([`RunQueue::append_leased`]), so a driver that holds it cannot write
/// to its cast once its lease is lost. Appends to other streams (a destination's claims
/// ledger, whose day is taken by a compare-and-set of its own) go to the log as they are:
/// a stalled worker may still take a ledger's day, but the cast's `post_claimed` that would
/// use it is refused, so nothing is posted.
pub struct LeasedLog<'a> {
    log: &'a dyn EventLog,
    queue: &'a dyn RunQueue,
    lease: Lease,
}

impl std::fmt::Debug for LeasedLog<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeasedLog")
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl<'a> LeasedLog<'a> {
    /// Appends to `lease`'s cast through `queue`, reads from `log`.
    pub fn new(log: &'a dyn EventLog, queue: &'a dyn RunQueue, lease: Lease) -> Self {
        Self { log, queue, lease }
    }

    /// The lease appends are fenced by.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }
}

impl EventLog for LeasedLog<'_> {
    fn append(
        &self,
        cast: &CastId,
        expected: Seq,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        self.append_with_blobs(cast, expected, &[], events)
    }

    fn fork(
        &self,
        cast: &CastId,
        from: &ForkPoint,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        self.log.fork(cast, from, events)
    }

    fn import(&self, head: &CastHead, events: &[Recorded]) -> Result<(), LogError> {
        self.log.import(head, events)
    }

    fn scan(
        &self,
        cast: &CastId,
        from: Seq,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError> {
        self.log.scan(cast, from, visit)
    }

    fn scan_chain(
        &self,
        cast: &CastId,
        visit: &mut dyn FnMut(StoredRow) -> ControlFlow<()>,
    ) -> Result<Option<CastHead>, LogError> {
        self.log.scan_chain(cast, visit)
    }

    fn scan_kinds(
        &self,
        kinds: &[&str],
        cast: Option<&CastId>,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError> {
        self.log.scan_kinds(kinds, cast, visit)
    }

    fn casts(&self) -> Result<Vec<CastHead>, LogError> {
        self.log.casts()
    }

    fn head(&self, cast: &CastId) -> Result<Option<CastHead>, LogError> {
        self.log.head(cast)
    }

    fn put_blob(&self, bytes: &[u8]) -> Result<Digest, LogError> {
        self.log.put_blob(bytes)
    }

    fn append_with_blobs(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        if *cast != self.lease.cast {
            return self.log.append_with_blobs(cast, expected, blobs, events);
        }
        self.queue
            .append_leased(&self.lease, expected, blobs, events)
    }

    /// A leased append is durable when it returns: the check of the epoch and the write are
    /// one transaction, which a held (begun) append would split.
    fn begin_append_with_blobs(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Appending<'_>, LogError> {
        if *cast != self.lease.cast {
            return self
                .log
                .begin_append_with_blobs(cast, expected, blobs, events);
        }
        self.append_with_blobs(cast, expected, blobs, events)
            .map(Appending::durable)
    }

    fn get_blob(&self, hash: &Digest) -> Result<Option<Vec<u8>>, LogError> {
        self.log.get_blob(hash)
    }

    fn put_snapshot(&self, cast: &CastId, snapshot: Snapshot) -> Result<(), LogError> {
        self.log.put_snapshot(cast, snapshot)
    }

    fn snapshot(&self, cast: &CastId, at_most: Seq) -> Result<Option<Snapshot>, LogError> {
        self.log.snapshot(cast, at_most)
    }

    fn read(&self, cast: &CastId, from: Seq, to: Option<Seq>) -> Result<Vec<Recorded>, LogError> {
        self.log.read(cast, from, to)
    }
}
