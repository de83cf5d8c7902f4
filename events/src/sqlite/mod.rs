//! `SqliteLog`: the durable [`EventLog`] on one SQLite file (bundled SQLite, WAL).
//!
//! # Connections
//! - One writer connection ([`writer`]), used by one appender at a time. Every write (append,
//!   fork, import, blob) is a command in a queue; the appender holding the writer's lock runs
//!   every queued command in one `BEGIN IMMEDIATE` transaction (group commit) and answers each
//!   after `COMMIT`. A lone appender writes on its own thread.
//! - Reader connections in a small pool: a read takes an idle one (or opens one), uses it and
//!   puts it back, so a scan visitor may itself read from the log without deadlock. WAL lets
//!   readers see the last committed state while the writer writes.
//!
//! - [`SqliteLog::open`] creates a missing file and writes the schema into an empty one;
//!   [`SqliteLog::open_existing`] never does (nothing is created or written before the file
//!   is known to hold a castlog schema) and opens a file it cannot write read-only. Neither
//!   opens what is not a regular file (a FIFO would block the first read).
//! - A verification read ([`EventLog::scan_chain`]) is one read transaction: the head and the
//!   rows are one snapshot of the WAL, whatever another connection commits meanwhile.
//!
//! Several `SqliteLog`s (in one process or many) may open the same file: `BEGIN IMMEDIATE`
//! serializes their writers, the event row id (unique per cast and seq, see [`event_row_id`])
//! and the head check turn a stale writer into a
//! [`LogError::Conflict`], and the busy timeout makes them wait for each other instead of failing.
//!
//! # Schema
//! DDL lives in `schema/v*.sql`; `PRAGMA user_version` records the version applied. A fresh
//! file gets every script in order, in one `BEGIN IMMEDIATE` transaction that re-reads the
//! version under the write lock, so openers racing on a new file apply each script once; a
//! file with a newer version is refused.
//!
//! # Durability
//! [`Durability::Full`] (the default) sets `synchronous=FULL`: a commit is fsynced before the
//! append returns, so acknowledged events survive a power cut. A
//! [begun](EventLog::begin_append_with_blobs) append is the exception its caller asks for: the
//! writer checks and seals it, holds it in memory with the begun appends after it (up to
//! [`writer::HELD_APPENDS`]), writes and commits them together without an fsync of their own,
//! and the [`syncer`] thread's next fsync of the WAL makes them durable (an `Appending::wait`
//! has what is held written if it must, and returns then); the driver uses it only for steps
//! nothing outside the process has acted on, and that `resume` can ask again.
//! [`Durability::Normal`] sets `synchronous=NORMAL`: acknowledged events survive a crash of the
//! process, but the last commits may be lost if the machine loses power; begun appends are held
//! and written together the same way, and waiting for one only has it written. With either, the
//! syncer's thread also checkpoints the WAL beside the writer.

mod address;
mod blobs;
mod chunk_list;
mod damage;
mod deliveries;
mod held;
mod kinds;
mod open;
pub mod pack;
mod payload;
mod phrases;
mod pinned;
mod queue;
mod rows;
mod scan;
mod shorthand;
mod split;
mod syncer;
mod transaction;
mod varint;
mod wal;
mod writer;
mod writes;

pub(crate) use damage::{digest_from_sql, map_err};
use damage::{is_damage, unindexed, without_sql};

use address::event_row_id;
pub use address::{MAX_SEQ, MisplacedEvent, Place};
pub use pinned::PinnedReads;
pub use rows::{CastsAudit, DamagedCast};
use rows::{HEAD_COLUMNS, head_from_row, head_row, list_casts};

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use castlog_core::id::{CastId, Digest, Seq};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::log::{Appending, CastHead, EventLog, ForkPoint, LogError, Snapshot, StoredRow};
use crate::record::{Pending, Recorded};
pub use open::{PAGE_SIZE, SCHEMA_VERSION, new_file_pages};
use open::{check_magic, configure, migrate, schema_version};
pub use pack::{set_packing, stored_payload_json};
use writer::Command;

/// How hard a commit holds on to its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// fsync on every commit (`synchronous=FULL`; a begun append's by the syncer before its
    /// wait returns): survives a power cut.
    #[default]
    Full,
    /// `synchronous=NORMAL` in WAL mode: survives a process crash, not a power cut.
    Normal,
}

impl Durability {
    /// The value of SQLite's `PRAGMA synchronous` that gives this durability in WAL mode.
    pub fn synchronous(self) -> &'static str {
        match self {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        }
    }

    /// The name used on the command line and in bench output.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Full => "full",
            Durability::Normal => "normal",
        }
    }
}

/// A hash-chained event log in one SQLite file.
#[derive(Debug)]
pub struct SqliteLog {
    path: PathBuf,
    /// The one connection that writes (see [`writer`]).
    writer: writer::Writer,
    /// Idle read-only connections. A connection is used by one read at a time (taken out of the
    /// pool for the duration), so its statement cache is never shared.
    readers: Mutex<Vec<Connection>>,
    /// How hard commits hold on to their bytes.
    durability: Durability,
    /// Readers open the file as immutable (a read-only log in a directory castlog cannot
    /// write, see [`SqliteLog::open_read_only`]).
    immutable: bool,
    /// How a `casts` row's stream kind is read: its column, or for a read-only file older than
    /// schema v8 the expression that version's upgrade fills it with ([`open::kind_column`]).
    kind_sql: &'static str,
    /// How a chunk's or cache's `packed` column is read: the column, or for a read-only file
    /// older than schema v10 the constant 0 ([`pack::packed_column`]).
    packed_sql: &'static str,
    /// The run queue's own connection, opened when first used (see [`queue`]).
    queue: queue::QueueConn,
    /// The connection blob reads are pinned to, while they are (see [`pinned`]).
    pin: pinned::Pin,
    /// Blobs read lately, by address (see [`blobs::ReadBlobs`]).
    read_blobs: Mutex<blobs::ReadBlobs>,
}

impl SqliteLog {
    /// Opens (creating if missing) the log at `path` with full durability.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, LogError> {
        Self::open_with(path, Durability::Full)
    }

    /// Opens the log at `path` with the given durability.
    pub fn open_with(path: impl AsRef<Path>, durability: Durability) -> Result<Self, LogError> {
        Self::open_as(path.as_ref().to_path_buf(), durability, false)
    }

    /// Opens the log at `path` for a command that needs one there already: a missing file, an
    /// empty one or a SQLite file without castlog's schema is [`LogError::NoDatabase`], and
    /// nothing is created or written into it. A log in a file or directory castlog cannot
    /// write is opened read-only: its reads work, and a write fails with
    /// [`LogError::ReadOnly`].
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Self, LogError> {
        let path = path.as_ref().to_path_buf();
        if !path.exists() {
            return Err(LogError::NoDatabase {
                path: path.display().to_string(),
                reason: "nothing is there".into(),
            });
        }
        match Self::open_as(path.clone(), Durability::Full, true) {
            Err(LogError::ReadOnly { .. }) => Self::open_read_only(path),
            other => other,
        }
    }

    /// `existing`: refuse a file without castlog's schema instead of writing it there.
    fn open_as(path: PathBuf, durability: Durability, existing: bool) -> Result<Self, LogError> {
        let shown = path.display().to_string();
        // Before anything opens it: opening a FIFO blocks until someone writes to it.
        open::regular_file(&path).map_err(|e| LogError::open(&shown, e))?;
        check_magic(&path).map_err(|e| LogError::open(&shown, e))?;
        let flags = if existing {
            OpenFlags::default() - OpenFlags::SQLITE_OPEN_CREATE
        } else {
            OpenFlags::default()
        };
        let mut writer_conn =
            Connection::open_with_flags(&path, flags).map_err(|e| open::failed(&shown, e))?;
        // Look before touching: a foreign file is refused before WAL mode (a persistent change)
        // is switched on.
        let version = schema_version(&writer_conn, &shown)?;
        if existing && version == 0 {
            return Err(open::no_schema(&path));
        }
        if version == 0 {
            open::new_file_pages(&writer_conn).map_err(|e| open::failed(&shown, e))?;
        }
        configure(&writer_conn, durability).map_err(|e| open::failed(&shown, e))?;
        // Versions only grow, so a file seen at the current one needs no lock to stay there.
        if version < SCHEMA_VERSION {
            migrate(&mut writer_conn, &shown)?;
        }
        let reader = open_reader(&path, false).map_err(|e| LogError::open(&shown, e))?;
        // The file SQLite opened (it resolves a symlinked path; the path given may name
        // another directory's `-wal`). A name SQLite reports is UTF-8 or not reported: then
        // the path is resolved here the same way.
        let syncer = {
            let db = writer_conn
                .path()
                .filter(|p| !p.is_empty())
                .map(std::ffi::OsString::from)
                .or_else(|| {
                    std::fs::canonicalize(&path)
                        .ok()
                        .map(PathBuf::into_os_string)
                })
                .unwrap_or_else(|| path.as_os_str().to_owned());
            Some(syncer::Syncer::new(
                db.into(),
                durability == Durability::Full,
            ))
        };
        Ok(Self {
            path,
            writer: writer::Writer::new(writer_conn, syncer),
            readers: Mutex::new(vec![reader]),
            durability,
            immutable: false,
            kind_sql: open::kind_column(SCHEMA_VERSION),
            packed_sql: pack::packed_column(SCHEMA_VERSION),
            queue: Default::default(),
            pin: Default::default(),
            read_blobs: Default::default(),
        })
    }

    /// A log castlog can only read. Its writer's connection is read-only too, so every write
    /// fails with [`LogError::ReadOnly`]; there is no syncer (nothing to sync).
    ///
    /// A WAL file is read through its `-shm` index, which SQLite creates beside it. Where it
    /// cannot (a directory castlog cannot write) and no `-wal` is there either, every commit
    /// is in the main file and no castlog can add one (it would need that directory), so the
    /// file is read as immutable: without the index and without locks.
    fn open_read_only(path: PathBuf) -> Result<Self, LogError> {
        let shown = path.display().to_string();
        let unreadable = |e: rusqlite::Error| {
            LogError::open(
                &shown,
                open::Sql {
                    doing: "it cannot be written, nor read".into(),
                    source: e,
                },
            )
        };
        let probe = |immutable: bool| {
            let conn = open_reader(&path, immutable)?;
            conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
                r.get::<_, i64>(0)
            })?;
            Ok::<_, rusqlite::Error>(conn)
        };
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let (conn, immutable) = match probe(false) {
            Ok(conn) => (conn, false),
            Err(_) if !Path::new(&wal).exists() => (probe(true).map_err(unreadable)?, true),
            Err(e) => return Err(unreadable(e)),
        };
        let version = schema_version(&conn, &shown)?;
        if version == 0 {
            return Err(open::no_schema(&path));
        }
        if version < open::READS_WITHOUT_UPGRADE {
            return Err(LogError::open(
                shown,
                format!(
                    "it has schema version {version}, which this castlog reads only after upgrading it to {SCHEMA_VERSION}, and it is read-only; make it writable once"
                ),
            ));
        }
        let reader = open_reader(&path, immutable).map_err(unreadable)?;
        Ok(Self {
            path,
            writer: writer::Writer::new(conn, None),
            readers: Mutex::new(vec![reader]),
            durability: Durability::Full,
            immutable,
            kind_sql: open::kind_column(version),
            packed_sql: pack::packed_column(version),
            queue: Default::default(),
            pin: Default::default(),
            read_blobs: Default::default(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many write transactions this log has committed. Under concurrent appends it is
    /// smaller than the number of appends: each transaction carries every append that queued
    /// while the one before it was being committed (group commit).
    pub fn commits(&self) -> u64 {
        self.writer.commits()
    }

    fn send<T>(&self, make: impl FnOnce(writer::Reply<T>) -> Command) -> Result<T, LogError> {
        self.writer.submit(make)
    }

    /// Stores `blobs` and appends `events` in one command; `deferred`: held and committed
    /// without an fsync of its own (see [`writer`]). Returns the records and the number of
    /// the commit that carries them.
    fn append_blobs(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
        deferred: bool,
    ) -> Result<(Vec<Recorded>, writer::Ticket), LogError> {
        self.send(|reply| Command::AppendWithBlobs {
            cast: cast.clone(),
            expected,
            blobs: blobs.to_vec(),
            events: events.to_vec(),
            deferred,
            reply,
        })
    }

    fn pool(&self) -> MutexGuard<'_, Vec<Connection>> {
        // The pool holds no invariant a panic could break; take it back if poisoned.
        self.readers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `read` on an idle reader connection (opening one if none is idle).
    fn read_with<T>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, LogError>,
    ) -> Result<T, LogError> {
        let idle = self.pool().pop();
        let conn = match idle {
            Some(conn) => conn,
            None => open_reader(&self.path, self.immutable)
                .map_err(|e| map_err("opening a reader", e))?,
        };
        let result = read(&conn);
        let mut pool = self.pool();
        if pool.len() < READER_POOL {
            pool.push(conn);
        }
        result
    }

    fn cast_key(conn: &Connection, cast: &CastId) -> Result<Option<i64>, LogError> {
        let key = conn
            .prepare_cached("SELECT id FROM casts WHERE cast_id = ?1")
            .and_then(|mut stmt| stmt.query_row([cast.as_str()], |r| r.get(0)).optional())
            .map_err(|e| map_err("looking up a cast", e))?;
        if key.is_none() {
            unindexed(conn, cast)?;
        }
        Ok(key)
    }

    /// The head of `cast` and its key.
    fn head_and_key(
        &self,
        conn: &Connection,
        cast: &CastId,
    ) -> Result<Option<(CastHead, i64)>, LogError> {
        let row = conn
            .prepare_cached(&format!(
                "SELECT {HEAD_COLUMNS}, {}, id FROM casts WHERE cast_id = ?1",
                self.kind_sql
            ))
            .and_then(|mut stmt| {
                stmt.query_row([cast.as_str()], |r| Ok((head_row(r)?, r.get::<_, i64>(8)?)))
                    .optional()
            })
            .map_err(|e| map_err("reading a cast head", e))?;
        match row {
            Some((row, key)) => Ok(Some((head_from_row(row)?, key))),
            None => unindexed(conn, cast).map(|()| None),
        }
    }
}

/// A stored projection checkpoint: the same four fields as a state [`Snapshot`] (a format
/// version, the seq and chain hash it covers, and its bytes), in the same table.
pub type StoredCheckpoint = Snapshot;

impl SqliteLog {
    /// The checkpoint of projection `name` for `cast`, if one is stored and readable.
    pub fn checkpoint(
        &self,
        cast: &CastId,
        name: &str,
    ) -> Result<Option<StoredCheckpoint>, LogError> {
        let sql = format!(
            "SELECT version, seq, hash, bytes, {} FROM checkpoints WHERE cast_id = ?1 AND name = ?2",
            self.packed_sql
        );
        self.read_with(|conn| {
            checkpoint_row(
                conn,
                &sql,
                params![cast.as_str(), name],
                "reading a checkpoint",
            )
        })
    }

    /// Replaces the checkpoint of projection `name` for `cast`.
    pub fn put_checkpoint(
        &self,
        cast: &CastId,
        name: &str,
        checkpoint: StoredCheckpoint,
    ) -> Result<(), LogError> {
        self.send(|reply| Command::PutCheckpoint {
            cast: cast.clone(),
            name: name.to_owned(),
            checkpoint,
            deferred: false,
            reply,
        })
    }
}

impl Drop for SqliteLog {
    fn drop(&mut self) {
        // Readers close first, so the writer's connection is the last one: SQLite then
        // checkpoints the WAL into the main file and removes it.
        // Every acknowledged write is committed already; what begun appends asked the syncer
        // for is synced before it stops (unless a sync failed: their waiters were told). The
        // writer's connection closes when the fields are dropped, after this.
        self.pin.lock().take();
        self.pool().clear();
        self.queue.close();
        self.writer.close();
    }
}

/// Idle reader connections kept open.
const READER_POOL: usize = 4;

/// How long a connection waits for another one's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

fn open_reader(path: &Path, immutable: bool) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = if immutable {
        let uri = open::immutable_uri(path)
            .ok_or_else(|| rusqlite::Error::InvalidPath(path.to_path_buf()))?;
        Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)?
    } else {
        Connection::open_with_flags(path, flags)?
    };
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

impl EventLog for SqliteLog {
    fn append(
        &self,
        cast: &CastId,
        expected: Seq,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        self.send(|reply| Command::Append {
            cast: cast.clone(),
            expected,
            events: events.to_vec(),
            reply,
        })
    }

    fn fork(
        &self,
        cast: &CastId,
        from: &ForkPoint,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        self.send(|reply| Command::Fork {
            cast: cast.clone(),
            from: from.clone(),
            events: events.to_vec(),
            reply,
        })
    }

    fn import(&self, head: &CastHead, events: &[Recorded]) -> Result<(), LogError> {
        self.send(|reply| Command::Import {
            head: head.clone(),
            events: events.to_vec(),
            reply,
        })
    }

    fn scan(
        &self,
        cast: &CastId,
        from: Seq,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError> {
        self.read_with(|conn| {
            let key = Self::cast_key(conn, cast)?
                .ok_or_else(|| LogError::UnknownCast { cast: cast.clone() })?;
            scan_rows(conn, cast, key, from, visit)
        })
    }

    fn casts(&self) -> Result<Vec<CastHead>, LogError> {
        self.read_with(|conn| list_casts(conn, self.kind_sql))
    }

    /// The claim kinds from their index (`schema/v7.sql`, see [`kinds`]); other kinds by
    /// scanning each cast.
    fn scan_kinds(
        &self,
        kinds: &[&str],
        cast: Option<&CastId>,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError> {
        self.scan_indexed_kinds(kinds, cast, visit)
    }

    fn head(&self, cast: &CastId) -> Result<Option<CastHead>, LogError> {
        self.read_with(|conn| Ok(self.head_and_key(conn, cast)?.map(|(head, _)| head)))
    }

    /// The head and the rows in one read transaction: WAL gives it one snapshot of the file
    /// from its first read to its end, so an append another connection commits meanwhile is
    /// in neither.
    fn scan_chain(
        &self,
        cast: &CastId,
        visit: &mut dyn FnMut(StoredRow) -> ControlFlow<()>,
    ) -> Result<Option<CastHead>, LogError> {
        self.read_with(|conn| {
            let tx = conn
                .unchecked_transaction()
                .map_err(|e| map_err("starting a read", e))?;
            let Some((head, key)) = self.head_and_key(&tx, cast)? else {
                return Ok(None);
            };
            rows::scan_chain_rows(&tx, cast, key, head.seq, visit)?;
            Ok(Some(head))
        })
    }

    fn append_with_blobs(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        self.append_blobs(cast, expected, blobs, events, false)
            .map(|(records, _)| records)
    }

    fn begin_append_with_blobs(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Appending<'_>, LogError> {
        let (records, ticket) = self.append_blobs(cast, expected, blobs, events, true)?;
        let (writer, cast) = (&self.writer, cast.clone());
        Ok(Appending::waiting(records, move || {
            writer.wait(ticket, &cast)
        }))
    }

    fn put_blob(&self, bytes: &[u8]) -> Result<Digest, LogError> {
        self.send(|reply| Command::PutBlob {
            bytes: bytes.to_vec(),
            reply,
        })
    }

    fn get_blob(&self, hash: &Digest) -> Result<Option<Vec<u8>>, LogError> {
        let recall = |cache: &Mutex<blobs::ReadBlobs>| {
            cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(hash)
        };
        if let Some(bytes) = recall(&self.read_blobs) {
            return Ok(Some(bytes));
        }
        let read = match self.pin.lock().as_ref() {
            Some(conn) => blobs::read_blob(conn, hash, self.packed_sql),
            None => self.read_with(|conn| blobs::read_blob(conn, hash, self.packed_sql)),
        }?;
        if let Some(bytes) = &read {
            self.read_blobs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .keep(*hash, bytes);
        }
        Ok(read)
    }

    /// Kept in the checkpoints table as `state@<seq, 20 digits>`, so names sort as seqs.
    fn put_snapshot(&self, cast: &CastId, snapshot: Snapshot) -> Result<(), LogError> {
        let name = snapshot_name(snapshot.seq);
        self.put_checkpoint(cast, &name, snapshot)
    }

    /// Held with the begun appends and written with them, after them in the same transaction,
    /// never on a commit and fsync of its own (a cache); dropped if its cast's held appends are
    /// not stored.
    fn begin_put_snapshot(&self, cast: &CastId, snapshot: Snapshot) -> Result<(), LogError> {
        self.send(|reply| Command::PutCheckpoint {
            cast: cast.clone(),
            name: snapshot_name(snapshot.seq),
            checkpoint: snapshot,
            deferred: true,
            reply,
        })
    }

    fn snapshot(&self, cast: &CastId, at_most: Seq) -> Result<Option<Snapshot>, LogError> {
        // A row whose seq disagrees with its name (a damaged file) is not taken for a point
        // it does not say it is at or below.
        let sql = format!(
            "SELECT version, seq, hash, bytes, {} FROM checkpoints
             WHERE cast_id = ?1 AND name >= 'state@' AND name <= ?2 AND seq <= ?3
             ORDER BY name DESC LIMIT 1",
            self.packed_sql
        );
        let row = self.read_with(|conn| {
            checkpoint_row(
                conn,
                &sql,
                params![
                    cast.as_str(),
                    snapshot_name(at_most),
                    i64::try_from(at_most.get()).unwrap_or(i64::MAX)
                ],
                "reading a snapshot",
            )
        })?;
        Ok(row)
    }
}

/// The `version, seq, hash, bytes, packed` row `sql` selects from the checkpoints table, if
/// any, its bytes unpacked; a row that does not decode is none (its reader folds from the
/// start instead).
fn checkpoint_row(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    context: &str,
) -> Result<Option<StoredCheckpoint>, LogError> {
    let row = conn
        .prepare_cached(sql)
        .and_then(|mut stmt| {
            stmt.query_row(params, |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                    r.get::<_, Vec<u8>>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            })
            .optional()
        })
        .map_err(|e| map_err(context, e))?;
    Ok(row.and_then(|(version, seq, hash, bytes, packed)| {
        // Bytes that do not unpack are given as they are stored: their seal does not match
        // them, so the damage is named where the seal is checked.
        let bytes = match packed {
            0 => bytes,
            packed => match pack::value_from_store(&bytes, packed) {
                Ok(unpacked) => unpacked.into_owned(),
                Err(_) => bytes,
            },
        };
        Some(Snapshot {
            version: u32::try_from(version).ok()?,
            seq: Seq(u64::try_from(seq).ok()?),
            hash: Digest(<[u8; 32]>::try_from(hash.as_slice()).ok()?),
            bytes,
        })
    }))
}

fn snapshot_name(seq: Seq) -> String {
    format!("state@{:020}", seq.get())
}

/// Visits the rows of one cast from `from` on, in address order (see [`address`]), each with
/// the seq its column holds: a row whose seq column was changed shows up where it is stored,
/// and a table rebuilt without its primary key may show a seq twice. A row that does not
/// decode ends the read with [`LogError::Corrupt`].
fn scan_rows(
    conn: &Connection,
    cast: &CastId,
    key: i64,
    from: Seq,
    visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
) -> Result<(), LogError> {
    let from = from.max(Seq::FIRST);
    let (Some(first), Some(last)) = (event_row_id(key, from), event_row_id(key, Seq(MAX_SEQ)))
    else {
        // Past the last seq a cast can have (or a key no cast has): there is nothing there.
        return Ok(());
    };
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {} FROM events WHERE id BETWEEN ?1 AND ?2 ORDER BY id",
            *rows::EVENT_COLUMNS
        ))
        .map_err(|e| map_err("reading events", e))?;
    let mut rows = stmt
        .query(params![first, last])
        .map_err(|e| map_err("reading events", e))?;
    let mut links = rows::Links::default();
    while let Some(row) = rows.next().map_err(|e| map_err("reading events", e))? {
        let record =
            rows::event(conn, row, cast, &mut links).map_err(|bad| bad.into_error(cast))?;
        if visit(record).is_break() {
            break;
        }
    }
    Ok(())
}
