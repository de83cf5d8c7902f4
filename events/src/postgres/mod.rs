//! `PostgresLog`: the [`EventLog`] on a PostgreSQL database, for a log shared by many
//! machines. The same chains, bytes and hashes as [`crate::sqlite::SqliteLog`]: a cast copied
//! between the two keeps its head hash.
//!
//! # Layout
//! - [`locator`]: the `postgres://` URL and castlog's `schema=` parameter.
//! - `conn`: a connection with its prepared statements, and the pool of them.
//! - `schema`: the DDL (`schema/v*.sql`) and its versioned upgrades.
//! - `writes`: appends, forks, imports, blobs and checkpoints, one transaction each.
//! - `heads`: the heads this process last committed, so an append can be one statement.
//! - `rows`: reads of events, heads, blobs and checkpoints.
//! - `error`: PostgreSQL errors as [`LogError`]s.
//! - `queue`: the run queue's rows and leased appends ([`crate::queue`]).
//!
//! # Concurrency and durability
//! Every write is one transaction on a connection of its own, committed before it returns;
//! the session runs with `synchronous_commit = on`, so an acknowledged append is on the
//! server's disk. Writers of one cast take turns on its head row (`SELECT ... FOR UPDATE`),
//! so a stale writer finds the head moved and gets [`LogError::Conflict`], writing nothing;
//! the primary key `(cast_key, seq)` backs that up. An append after a head this process
//! committed (the usual case: a driver appending step after step) is one statement, its own
//! transaction, that moves the head only from that seq and hash (an `UPDATE ... WHERE`, which
//! takes the same row lock) and stores the blobs and events only if it did; one that finds the
//! head elsewhere wrote nothing and is made again the long way, which names the conflict. Triggers refuse UPDATE, DELETE and
//! TRUNCATE of events and DELETE of a cast (a role can be denied them too, see the README).

pub mod locator;

mod conn;
mod deliveries;
mod error;
mod heads;
mod queue;
mod rows;
mod schema;
mod writes;

use std::ops::ControlFlow;

use castlog_core::id::{CastId, Digest, Seq};

use crate::log::{CastHead, EventLog, ForkPoint, LogError, Snapshot, StoredRow};
use crate::record::{Pending, Recorded};
use crate::sqlite::CastsAudit;
use conn::{Conn, Pool};
pub use locator::{Locator, is_postgres_url};
pub use queue::AppendListener;
pub use schema::SCHEMA_VERSION;

/// A hash-chained event log in a PostgreSQL database (or one schema of it).
pub struct PostgresLog {
    pool: Pool,
    heads: heads::Heads,
}

impl std::fmt::Debug for PostgresLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresLog")
            .field("db", &self.pool.locator().shown)
            .finish()
    }
}

impl PostgresLog {
    /// Opens the log at `url`, creating its schema (and the named `schema=`, if missing)
    /// when the database holds none yet, and upgrading an older one.
    pub fn open(url: &str) -> Result<Self, LogError> {
        let locator = Locator::parse(url)?;
        let mut conn = Conn::connect(&locator)?;
        if let (Some(name), Some(schema)) = (&locator.schema, locator.quoted_schema()) {
            // Looked for first: a role that may not create schemas (one that may only append,
            // see the README) still opens one that exists.
            let failed = |e: postgres::Error| {
                LogError::open(
                    locator.shown.clone(),
                    error::Pg::doing(format!("cannot create schema {schema}"), e),
                )
            };
            let exists: bool = conn
                .client()
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)",
                    &[name],
                )
                .and_then(|row| row.try_get(0))
                .map_err(failed)?;
            if !exists {
                conn.client()
                    .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                    .map_err(failed)?;
            }
        }
        Self::with_schema(locator, conn, false)
    }

    /// Opens the log at `url` for a command that needs one there already: a database (or
    /// schema) without castlog's tables is [`LogError::NoDatabase`], and nothing is created.
    /// An older schema is upgraded, as the SQLite log does.
    pub fn open_existing(url: &str) -> Result<Self, LogError> {
        let locator = Locator::parse(url)?;
        let conn = Conn::connect(&locator)?;
        Self::with_schema(locator, conn, true)
    }

    fn with_schema(locator: Locator, mut conn: Conn, existing: bool) -> Result<Self, LogError> {
        let shown = locator.shown.clone();
        let version = schema::version(&mut conn, &shown)?;
        if existing && version == 0 {
            return Err(LogError::NoDatabase {
                path: shown,
                reason: match &locator.schema {
                    Some(schema) => format!("schema {schema} holds no castlog tables"),
                    None => "the database holds no castlog tables".into(),
                },
            });
        }
        if version > SCHEMA_VERSION {
            return Err(schema::too_new(&shown, version));
        }
        if version < SCHEMA_VERSION {
            schema::migrate(&mut conn, &shown)?;
        }
        Ok(Self {
            pool: Pool::new(locator, conn),
            heads: heads::Heads::default(),
        })
    }

    /// Where the log is, as shown in messages (without a password).
    pub fn shown(&self) -> &str {
        &self.pool.locator().shown
    }

    /// Appends `blobs` and `events` (non-empty) to `cast` at `expected`, under `lease` if
    /// given: one statement when this process committed the head it follows (see the module
    /// notes), else, or when that head moved meanwhile, in a transaction that reads the head
    /// under its row lock (and the lease's queue row `FOR SHARE`) and says what is wrong.
    fn append_events(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
        lease: Option<&crate::queue::Lease>,
    ) -> Result<Vec<Recorded>, LogError> {
        if let Some(head) = self.heads.before(cast, expected) {
            let fast = self
                .pool
                .with(|conn| writes::append_at(conn, cast, head, lease, blobs, events));
            match fast {
                Ok(Some(records)) => {
                    self.heads.moved(cast, &records);
                    return Ok(records);
                }
                Ok(None) => self.heads.forget(cast),
                Err(err) => {
                    self.heads.forget(cast);
                    return Err(err);
                }
            }
        }
        let appended = self.write(|conn| {
            if let Some(lease) = lease {
                queue::check_lease(conn, lease)?;
            }
            writes::append(conn, cast, expected, blobs, events)
        });
        match &appended {
            Ok(records) => self.heads.moved(cast, records),
            Err(_) => self.heads.forget(cast),
        }
        appended
    }

    /// Runs `work` in one read-write transaction on a pooled connection.
    fn write<T>(&self, work: impl FnOnce(&mut Conn) -> Result<T, LogError>) -> Result<T, LogError> {
        self.pool.with(|conn| conn.transaction("BEGIN", work))
    }

    /// The checkpoint of projection `name` for `cast`, if one is stored and readable.
    pub fn checkpoint(&self, cast: &CastId, name: &str) -> Result<Option<Snapshot>, LogError> {
        self.pool.with(|conn| rows::checkpoint(conn, cast, name))
    }

    /// Replaces the checkpoint of projection `name` for `cast`.
    pub fn put_checkpoint(
        &self,
        cast: &CastId,
        name: &str,
        checkpoint: &Snapshot,
    ) -> Result<(), LogError> {
        self.pool
            .with(|conn| writes::put_checkpoint(conn, cast, name, checkpoint))
    }
}

impl PostgresLog {
    /// Every row of `casts` as verification reads it: the heads that decode and the rows
    /// that do not.
    pub fn audit_casts(&self) -> Result<CastsAudit, LogError> {
        self.pool.with(rows::audit_casts)
    }

    /// The bytes the log's tables take on the server (with their indexes and out-of-line
    /// values), for benchmarks.
    pub fn stored_bytes(&self) -> Result<u64, LogError> {
        self.pool.with(|conn| {
            let row = conn
                .client()
                .query_one(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
                     FROM pg_catalog.pg_class c
                     WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'",
                    &[],
                )
                .map_err(|e| error::map_err("measuring the log", e))?;
            let bytes: i64 = row
                .try_get(0)
                .map_err(|e| error::map_err("measuring the log", e))?;
            Ok(bytes.max(0) as u64)
        })
    }

    /// Events under a cast key no cast has, as `(key, first seq, events)` per key.
    pub fn orphaned_events(&self) -> Result<Vec<(i64, Seq, u64)>, LogError> {
        self.pool.with(rows::orphaned_events)
    }
}

/// The checkpoint name a state snapshot at `seq` is kept under (as in the SQLite log).
fn snapshot_name(seq: Seq) -> String {
    format!("state@{:020}", seq.get())
}

impl EventLog for PostgresLog {
    fn append(
        &self,
        cast: &CastId,
        expected: Seq,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        if events.is_empty() {
            return Err(LogError::EmptyAppend { cast: cast.clone() });
        }
        self.append_events(cast, expected, &[], events, None)
    }

    fn fork(
        &self,
        cast: &CastId,
        from: &ForkPoint,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        let records = self.write(|conn| writes::fork(conn, cast, from, events))?;
        self.heads.moved(cast, &records);
        Ok(records)
    }

    fn import(&self, head: &CastHead, events: &[Recorded]) -> Result<(), LogError> {
        self.write(|conn| writes::import(conn, head, events))?;
        self.heads.moved(&head.cast, events);
        Ok(())
    }

    fn scan(
        &self,
        cast: &CastId,
        from: Seq,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError> {
        self.pool.with(|conn| rows::scan(conn, cast, from, visit))
    }

    fn scan_kinds(
        &self,
        kinds: &[&str],
        cast: Option<&CastId>,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError> {
        if !rows::indexed(kinds) {
            return crate::log::scan_kinds_by_cast(self, kinds, cast, visit);
        }
        self.pool
            .with(|conn| rows::scan_claim_kinds(conn, kinds, cast, visit))
    }

    fn scan_chain(
        &self,
        cast: &CastId,
        visit: &mut dyn FnMut(StoredRow) -> ControlFlow<()>,
    ) -> Result<Option<CastHead>, LogError> {
        self.pool.with(|conn| rows::scan_chain(conn, cast, visit))
    }

    fn casts(&self) -> Result<Vec<CastHead>, LogError> {
        self.pool.with(rows::casts)
    }

    fn head(&self, cast: &CastId) -> Result<Option<CastHead>, LogError> {
        self.pool
            .with(|conn| Ok(rows::head_and_key(conn, cast)?.map(|(head, _)| head)))
    }

    fn put_blob(&self, bytes: &[u8]) -> Result<Digest, LogError> {
        self.pool.with(|conn| writes::put_blob(conn, bytes))
    }

    /// The blobs and the events in one transaction: one commit (and one flush) per decision.
    fn append_with_blobs(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        if events.is_empty() {
            self.write(|conn| {
                for blob in blobs {
                    writes::put_blob(conn, blob)?;
                }
                Ok(Vec::new())
            })
        } else {
            self.append_events(cast, expected, blobs, events, None)
        }
    }

    fn get_blob(&self, hash: &Digest) -> Result<Option<Vec<u8>>, LogError> {
        self.pool.with(|conn| rows::blob(conn, hash))
    }

    /// Kept in the checkpoints table as `state@<seq, 20 digits>`, so names sort as seqs.
    fn put_snapshot(&self, cast: &CastId, snapshot: Snapshot) -> Result<(), LogError> {
        let name = snapshot_name(snapshot.seq);
        self.put_checkpoint(cast, &name, &snapshot)
    }

    fn snapshot(&self, cast: &CastId, at_most: Seq) -> Result<Option<Snapshot>, LogError> {
        let name = snapshot_name(at_most);
        self.pool
            .with(|conn| rows::latest_snapshot(conn, cast, &name, at_most))
    }
}
