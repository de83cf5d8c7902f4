//! The `EventLog` seam: an append-only store of per-cast hash chains plus content-addressed blobs.
//!
//! Implementations: [`crate::memory::InMemoryLog`] (the reference, for tests) and
//! [`crate::sqlite::SqliteLog`] (the default, durable). Both pass the same conformance suite.

use std::ops::ControlFlow;

use castlog_core::id::{CastId, Digest, Seq};
use serde::{Deserialize, Serialize};

use crate::record::{Pending, Recorded};
use crate::stream::StreamKind;

/// Where a fork (recast) attaches to its parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkPoint {
    /// Parent (the cast recast from).
    pub cast: CastId,
    /// The fork point: the last parent seq the child's state includes.
    pub seq: Seq,
    /// The parent's chain hash at `seq`.
    pub hash: Digest,
}

/// What the log knows about one cast without reading its events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CastHead {
    /// Stream id.
    pub cast: CastId,
    /// Seq of its last event; the next append takes `seq.next()`.
    pub seq: Seq,
    /// Chain hash of its last event: what the next append's `prev` must be.
    pub hash: Digest,
    /// The fork parent, for a recast.
    pub parent: Option<ForkPoint>,
    /// When its first event was recorded.
    pub created_ms: u64,
    /// What the stream is, recorded when it was created (see [`crate::stream`]); not part of
    /// the hash chain.
    pub kind: StreamKind,
}

impl CastHead {
    /// The `prev` of the cast's first event: the fork parent's hash, or zero.
    pub fn genesis_prev(&self) -> Digest {
        self.parent.as_ref().map_or(Digest::ZERO, |p| p.hash)
    }
}

/// A snapshot of a cast's state after the event at `seq`: a cache that is never trusted over
/// the log (whoever loads it checks `hash` against the log's chain hash at `seq`, and `version`
/// against the format it reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The format of `bytes`.
    pub version: u32,
    /// Seq of the last event folded into it.
    pub seq: Seq,
    /// That event's chain hash.
    pub hash: Digest,
    /// The state as encoded by `machine::snapshot` (format `version`).
    pub bytes: Vec<u8>,
}

/// One stored row of a chain as [`EventLog::scan_chain`] reads it: a record, or rows that
/// cannot be decoded (a column of another type or length than castlog writes, text that is
/// not UTF-8, a damaged page of the file), named by their seqs so verification can report
/// them there and go on with the rows after them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredRow {
    /// A row that decodes into a record (its hash and links are still to be checked).
    Record(Recorded),
    /// Rows `first..=last` that cannot be read.
    Unreadable {
        /// First seq of the run that cannot be read.
        first: Seq,
        /// The last one (equal to `first` for one row).
        last: Seq,
        /// The stored hash of the last of them, when that column is readable (the next row's
        /// `prev` is checked against it; otherwise the next link cannot be checked).
        hash: Option<Digest>,
        /// What is wrong, naming the column or the page.
        message: String,
    },
}

/// Everything that can go wrong at the log seam.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// Optimistic concurrency: another writer appended first.
    #[error(
        "conflict appending to cast {cast}: expected next seq {expected}, but the log's next seq is {found}"
    )]
    Conflict {
        /// Cast appended to.
        cast: CastId,
        /// Seq the writer expected to append next (its head plus one).
        expected: Seq,
        /// The seq the log would actually assign next.
        found: Seq,
    },
    /// An append under a lease ([`crate::queue::RunQueue::append_leased`]) whose lease was
    /// taken over: another worker holds the cast now, and nothing was appended.
    #[error(
        "conflict appending to cast {cast}: this worker's lease (epoch {epoch}) was taken over (the queue is at epoch {current}); nothing was appended"
    )]
    LeaseLost {
        /// The cast.
        cast: CastId,
        /// The epoch of the lease the append was made under.
        epoch: u64,
        /// The queue row's epoch.
        current: u64,
    },
    /// A submit of a cast that has a queue row already.
    #[error("cast {cast} is in the run queue already")]
    AlreadyQueued {
        /// The cast.
        cast: CastId,
    },
    /// No such cast.
    #[error("no cast named {cast}")]
    UnknownCast {
        /// Stream id asked for, as given.
        cast: CastId,
    },
    /// A cast with this id exists already.
    #[error("cast {cast} already exists")]
    CastExists {
        /// Id the new cast would have taken.
        cast: CastId,
    },
    /// A fork names a parent event that is not there or has another hash.
    #[error("cannot fork from {parent} at seq {seq}: {reason}")]
    BadForkPoint {
        /// Parent named by the fork.
        parent: CastId,
        /// Parent seq the fork names.
        seq: Seq,
        /// What does not match.
        reason: String,
    },
    /// Records handed to `import` do not form a valid chain.
    #[error("refusing to import cast {cast}: seq {seq}: {message}")]
    BrokenImport {
        /// Cast being imported.
        cast: CastId,
        /// First seq that does not chain.
        seq: Seq,
        /// What is wrong there.
        message: String,
    },
    /// An append with no events.
    #[error("nothing to append to cast {cast}")]
    EmptyAppend {
        /// Cast the empty append was for.
        cast: CastId,
    },
    /// The database file could not be opened or is not a castlog database.
    #[error("cannot open castlog database {path}: {source}")]
    Open {
        /// Database path as given (`--db`).
        path: String,
        /// Why: the file system's or SQLite's error, or the log's words for what it found.
        #[source]
        source: Cause,
    },
    /// A command that needs a log finds none: nothing is at the path, or an empty file, or a
    /// SQLite file without castlog's schema (which such a command never writes into it).
    #[error("no castlog database at {path}: {reason}")]
    NoDatabase {
        /// Database path as given (`--db`).
        path: String,
        /// What is there instead.
        reason: String,
    },
    /// A write to a database castlog can only read (the file, or its directory, is not
    /// writable); reads of it keep working.
    #[error(
        "cannot write while {context}: the database is read-only ({source}); make the file and its directory writable, or run only commands that read"
    )]
    ReadOnly {
        /// What the log was doing.
        context: String,
        /// The engine's error that says so (SQLite's, or PostgreSQL's in its words).
        #[source]
        source: Cause,
    },
    /// The database was written by a newer castlog.
    #[error(
        "database {path} has schema version {found}; this castlog understands up to {supported}: upgrade castlog"
    )]
    SchemaTooNew {
        /// Database path as given (`--db`).
        path: String,
        /// Its `user_version`.
        found: i64,
        /// Newest schema version this build writes.
        supported: i64,
    },
    /// The database file is damaged: a row or page does not read as castlog wrote it.
    #[error("the database is damaged ({context}): {message}")]
    Corrupt {
        /// What the log was doing.
        context: String,
        /// What is wrong, in castlog's words (or the engine's error said without its SQL).
        message: String,
        /// The engine's error, when the engine found the damage (a corrupt page, a column of
        /// another type, a missing table); `None` when a check of castlog's own did.
        #[source]
        source: Option<Cause>,
    },
    /// The storage engine (SQLite, PostgreSQL or the file system) failed.
    #[error("storage error while {context}: {source}")]
    Storage {
        /// What the log was doing.
        context: String,
        /// What failed: the engine's (or the file system's) error, or the log's own words
        /// when a thread of it failed and there is no error below.
        #[source]
        source: Cause,
    },
}

/// The error below a [`LogError::Storage`] or [`LogError::Open`], kept as it was (a
/// `rusqlite::Error`, an `io::Error`, an earlier `LogError`) so a caller can walk to it and
/// downcast it; shared, so an error that fails a whole group of appends reaches each of them.
///
/// It is deliberately not an `Error` itself: it derefs to the error it holds, so that error
/// (not a wrapper around it) is what `source()` returns.
#[derive(Debug, Clone)]
pub struct Cause(std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    /// The error (or the log's words, when nothing failed below).
    pub fn new(err: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Cause(std::sync::Arc::from(err.into()))
    }
}

impl std::ops::Deref for Cause {
    type Target = dyn std::error::Error + Send + Sync;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl LogError {
    /// The error opening the database at `path`: why, as an error (or the log's words).
    pub fn open(
        path: impl Into<String>,
        err: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        LogError::Open {
            path: path.into(),
            source: Cause::new(err),
        }
    }

    /// Wraps a storage engine error (or, when nothing failed below, the log's own words)
    /// with what the log was doing.
    pub fn storage(
        context: impl Into<String>,
        err: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        LogError::Storage {
            context: context.into(),
            source: Cause::new(err),
        }
    }
}

/// The casts `cast` was recast from, its fork parent first and the root last. Each cast is
/// listed once, so a fork loop in a damaged log ends the walk instead of spinning.
pub fn ancestors(log: &(impl EventLog + ?Sized), cast: &CastId) -> Result<Vec<CastId>, LogError> {
    let mut out: Vec<CastId> = Vec::new();
    let mut current = cast.clone();
    while let Some(parent) = log.head(&current)?.and_then(|h| h.parent) {
        if parent.cast == *cast || out.contains(&parent.cast) {
            break;
        }
        out.push(parent.cast.clone());
        current = parent.cast;
    }
    Ok(out)
}

/// [`EventLog::scan_kinds`] by scanning each cast whole: the default, and what a log falls
/// back to for kinds it keeps no index of.
pub fn scan_kinds_by_cast(
    log: &(impl EventLog + ?Sized),
    kinds: &[&str],
    cast: Option<&CastId>,
    visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
) -> Result<(), LogError> {
    let casts = match cast {
        Some(cast) => vec![cast.clone()],
        None => log.casts()?.into_iter().map(|head| head.cast).collect(),
    };
    let mut stopped = false;
    for cast in &casts {
        log.scan(cast, Seq::FIRST, &mut |record| {
            if !kinds.contains(&record.kind.as_str()) {
                return ControlFlow::Continue(());
            }
            let next = visit(record);
            stopped = next.is_break();
            next
        })?;
        if stopped {
            break;
        }
    }
    Ok(())
}

/// Records per page handed from the reading thread of [`with_events`].
const STREAM_PAGE: usize = 256;
/// Pages the reading thread of [`with_events`] may be ahead by.
const STREAM_PAGES: usize = 4;

/// Runs `consume` over the events of `cast` from `from` on, as [`EventLog::scan`] visits them,
/// read on a second thread a page at a time: a few pages are held, whatever the cast's
/// length (unlike [`EventLog::read`]), and `consume` pulls them at its own pace, may stop
/// early and may read the log meanwhile. If reading fails, the iterator ends early and the
/// error is returned instead of `consume`'s result.
pub fn with_events<T>(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    from: Seq,
    consume: impl FnOnce(&mut dyn Iterator<Item = Recorded>) -> T,
) -> Result<T, LogError> {
    std::thread::scope(|scope| {
        let (pages, received) = std::sync::mpsc::sync_channel::<Vec<Recorded>>(STREAM_PAGES);
        let reader = scope.spawn(move || {
            let mut page = Vec::with_capacity(STREAM_PAGE);
            let scanned = log.scan(cast, from, &mut |record| {
                page.push(record);
                if page.len() < STREAM_PAGE {
                    return ControlFlow::Continue(());
                }
                let full = std::mem::replace(&mut page, Vec::with_capacity(STREAM_PAGE));
                // A consumer that stopped has dropped its end: stop reading.
                match pages.send(full) {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(_) => ControlFlow::Break(()),
                }
            });
            if !page.is_empty() {
                let _ = pages.send(page);
            }
            scanned
        });
        let mut records = received.into_iter().flatten();
        let out = consume(&mut records);
        drop(records);
        let scanned = reader.join().unwrap_or_else(|_| {
            Err(LogError::storage(
                "reading events",
                "the reading thread panicked",
            ))
        });
        scanned.map(|()| out)
    })
}

/// An append [begun](EventLog::begin_append_with_blobs): accepted, and stored and durable once
/// [`Appending::wait`] returns `Ok`.
#[must_use = "an append is known to be durable only once `wait` returns Ok"]
pub struct Appending<'a> {
    records: Vec<Recorded>,
    wait: Option<Box<dyn FnOnce() -> Result<(), LogError> + 'a>>,
}

impl<'a> Appending<'a> {
    /// An append of `records` that is durable already.
    pub fn durable(records: Vec<Recorded>) -> Self {
        Self {
            records,
            wait: None,
        }
    }

    /// An append of `records` whose durability `wait` waits for.
    pub fn waiting(
        records: Vec<Recorded>,
        wait: impl FnOnce() -> Result<(), LogError> + 'a,
    ) -> Self {
        Self {
            records,
            wait: Some(Box::new(wait)),
        }
    }

    /// The records as sealed (what the log holds once the append is stored).
    pub fn records(&self) -> &[Recorded] {
        &self.records
    }

    /// Waits until the append is durable (as the log's durability says). An error is final:
    /// the append is not stored and never will be.
    pub fn wait(self) -> Result<(), LogError> {
        self.wait.map_or(Ok(()), |wait| wait())
    }
}

impl std::fmt::Debug for Appending<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Appending")
            .field("records", &self.records.len())
            .field("durable", &self.wait.is_none())
            .finish()
    }
}

/// An append-only store of per-cast hash chains and content-addressed blobs.
///
/// Invariants every implementation keeps:
/// - a stream's kind ([`CastHead::kind`]) is recorded when the stream is created and never
///   changes: [`StreamKind::opened_by`] the kind of its first event, or the imported head's;
/// - a cast's seqs are 1, 2, 3, ... with no gaps; an append names the seq it expects to write
///   first and fails with [`LogError::Conflict`] if the log is elsewhere, writing nothing;
/// - an append of several events is atomic: all of them or none;
/// - stored events are never changed or removed;
/// - once `append` returns `Ok`, the events survive a crash of the process (for the SQLite log,
///   with `Durability::Full`, also a power cut).
pub trait EventLog: Send + Sync {
    /// Appends `events` to `cast`, whose next seq must be `expected` (`Seq(1)` creates the cast).
    /// Returns the sealed records.
    fn append(
        &self,
        cast: &CastId,
        expected: Seq,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError>;

    /// Creates `cast` as a fork of `from`: its first event's `prev` is the parent's hash at the
    /// fork seq, which must match what the log holds.
    fn fork(
        &self,
        cast: &CastId,
        from: &ForkPoint,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError>;

    /// Stores already-sealed records of a cast that does not exist yet (import). The caller has
    /// verified the chain; the log checks the fork parent and that seqs start at 1. The stream
    /// gets the kind `head.kind` says (an [`append`](Self::append) at seq 1 or a
    /// [`fork`](Self::fork) gives it [`StreamKind::opened_by`] its first event).
    fn import(&self, head: &CastHead, events: &[Recorded]) -> Result<(), LogError>;

    /// Calls `visit` with each stored event of `cast` from `from` on, in seq order (rows with a
    /// duplicated seq, possible only in a damaged store, in storage order), until it breaks.
    fn scan(
        &self,
        cast: &CastId,
        from: Seq,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError>;

    /// Reads the head of `cast` and every stored row of its chain from one consistent state
    /// of the log: an append committed meanwhile is seen by both or by neither, so a writer
    /// appending while this runs can never make the chain look longer or shorter than its
    /// head. Rows are visited in seq order like [`scan`](Self::scan), but a row that does not
    /// decode is visited as [`StoredRow::Unreadable`] instead of ending the read. Returns the
    /// head (None when the log does not list the cast).
    ///
    /// The default takes the head first and visits the rows up to its seq only (rows past it
    /// are an append made after the head was read; a log that can read both at once should).
    fn scan_chain(
        &self,
        cast: &CastId,
        visit: &mut dyn FnMut(StoredRow) -> ControlFlow<()>,
    ) -> Result<Option<CastHead>, LogError> {
        let Some(head) = self.head(cast)? else {
            return Ok(None);
        };
        self.scan(cast, Seq::FIRST, &mut |record| {
            if record.seq > head.seq {
                return ControlFlow::Break(());
            }
            visit(StoredRow::Record(record))
        })?;
        Ok(Some(head))
    }

    /// Calls `visit` with each stored event whose kind is one of `kinds`, of `cast` or (for
    /// `None`) of every cast [`casts`](Self::casts) lists, cast by cast in that order and in
    /// seq order within a cast, until it breaks: what visiting [`scan`](Self::scan) of each
    /// cast and skipping the other kinds would visit (so a named cast the log does not list is
    /// [`LogError::UnknownCast`]). The default does exactly that; the SQLite log reads the
    /// claim kinds ([`castlog_core::claims::EVENT_KINDS`]) from an index of those rows only,
    /// so the cost follows the events asked for, not the size of the log.
    fn scan_kinds(
        &self,
        kinds: &[&str],
        cast: Option<&CastId>,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError> {
        scan_kinds_by_cast(self, kinds, cast, visit)
    }

    /// The head of every cast, ordered by creation.
    fn casts(&self) -> Result<Vec<CastHead>, LogError>;

    /// The head of one cast.
    fn head(&self, cast: &CastId) -> Result<Option<CastHead>, LogError>;

    /// Stores a blob and returns its content address (storing the same bytes twice is a no-op).
    fn put_blob(&self, bytes: &[u8]) -> Result<Digest, LogError>;

    /// Stores `blobs` and appends `events` as one unit: the blobs an event names are stored no
    /// later than the event (a crash never leaves an event naming a missing blob), and the SQLite
    /// log commits both in one transaction (one fsync per decision, not one per blob).
    fn append_with_blobs(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        for blob in blobs {
            self.put_blob(blob)?;
        }
        if events.is_empty() {
            return Ok(Vec::new());
        }
        self.append(cast, expected, events)
    }

    /// [`append_with_blobs`](Self::append_with_blobs), returning once the append is accepted
    /// (conflict-checked against the appends before it, its records sealed, all or nothing)
    /// but possibly before other readers see it and before it is durable: the SQLite log holds
    /// begun appends in memory (up to 16) and writes them in one commit, without an fsync of
    /// its own; with `Durability::Full` a syncer thread fsyncs the WAL, one fsync for every
    /// commit made meanwhile, while the caller goes on. [`Appending::wait`] returns once the
    /// append is stored and durable as the log's durability says; if another writer appended
    /// to the cast meanwhile, the held appends are not stored and `wait` says so. Nothing may
    /// act outside the process on these events (send their prompt to a model, run a utility,
    /// post, tell the user) before `wait` has returned `Ok`. A crash may lose begun appends
    /// not yet waited for (and, with them, every later one), never a part of one nor one
    /// before a kept one. The default appends durably at once.
    fn begin_append_with_blobs(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Appending<'_>, LogError> {
        let records = self.append_with_blobs(cast, expected, blobs, events)?;
        Ok(Appending::durable(records))
    }

    /// Fetches a blob.
    fn get_blob(&self, hash: &Digest) -> Result<Option<Vec<u8>>, LogError>;

    /// Keeps a snapshot of a cast's state (a cache for time travel, see [`Snapshot`]). A log
    /// may keep none: the default drops it.
    fn put_snapshot(&self, _cast: &CastId, _snapshot: Snapshot) -> Result<(), LogError> {
        Ok(())
    }

    /// [`put_snapshot`](Self::put_snapshot) of a state just [begun](Self::begin_append_with_blobs):
    /// the log may keep it with the begun appends and write it after them (with them, never
    /// before; dropped if they are not stored). The default puts it at once.
    fn begin_put_snapshot(&self, cast: &CastId, snapshot: Snapshot) -> Result<(), LogError> {
        self.put_snapshot(cast, snapshot)
    }

    /// The latest snapshot of `cast` taken at or before `at_most`, if the log keeps any.
    fn snapshot(&self, _cast: &CastId, _at_most: Seq) -> Result<Option<Snapshot>, LogError> {
        Ok(None)
    }

    /// Reads events `from..=to` (or to the end) of `cast`.
    fn read(&self, cast: &CastId, from: Seq, to: Option<Seq>) -> Result<Vec<Recorded>, LogError> {
        let mut out = Vec::new();
        self.scan(cast, from, &mut |record| {
            if to.is_some_and(|to| record.seq > to) {
                return ControlFlow::Break(());
            }
            out.push(record);
            ControlFlow::Continue(())
        })?;
        Ok(out)
    }
}

/// The expected-seq check every backend's append makes before it writes: a writer that meant
/// to create the cast (`expected` 1) finds it absent, any other finds its head just before
/// `expected`; else a `Conflict` naming the seq the log would take next.
pub(crate) fn expect_next(cast: &CastId, expected: Seq, head: Option<Seq>) -> Result<(), LogError> {
    let found = head.map_or(Seq::FIRST, Seq::next);
    if found == expected {
        Ok(())
    } else {
        Err(LogError::Conflict {
            cast: cast.clone(),
            expected,
            found,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::LogError;

    #[test]
    fn a_storage_error_keeps_the_engine_error_as_its_source() {
        let engine = rusqlite::Error::InvalidQuery;
        let shown = engine.to_string();
        let err = LogError::storage("appending an event", engine);
        assert_eq!(
            err.to_string(),
            format!("storage error while appending an event: {shown}")
        );
        let source = err.source().expect("the engine error is the source");
        assert!(
            source.downcast_ref::<rusqlite::Error>().is_some(),
            "{source:?}"
        );
    }

    #[test]
    fn an_error_that_fails_a_group_is_shared_by_each_append() {
        let first = LogError::storage("writing", "the transaction was rolled back");
        // As the writer does for every command of a failed group.
        let copies: Vec<LogError> = (0..2)
            .map(|_| LogError::storage("committing", first.clone()))
            .collect();
        for copy in &copies {
            assert_eq!(
                copy.to_string(),
                "storage error while committing: storage error while writing: the transaction was rolled back"
            );
            let below = copy.source().and_then(|s| s.downcast_ref::<LogError>());
            assert!(matches!(below, Some(LogError::Storage { .. })), "{below:?}");
        }
    }

    #[test]
    fn an_open_error_keeps_the_file_system_error() {
        let io = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let err = LogError::open("castlog.db", io);
        assert!(
            err.to_string()
                .starts_with("cannot open castlog database castlog.db: ")
        );
        let source = err
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(
            source.map(|e| e.kind()),
            Some(std::io::ErrorKind::PermissionDenied)
        );
    }
}
