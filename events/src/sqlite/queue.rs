//! The run queue ([`crate::queue`]) in the SQLite file: tables `castlog_queue` and
//! `castlog_slots`, part of the schema since version 9 (`schema/v9.sql`; a read-only older
//! file without them reads as an empty queue).
//!
//! Queue changes run on a connection of their own (not the writer's), each in one
//! `BEGIN IMMEDIATE` transaction: SQLite's write lock serializes them with every other writer
//! of the file, in this process or another, so two workers never take one row. A leased append
//! is a writer command ([`super::writer::Command::AppendLeased`]) that reads the row's epoch
//! inside the append's transaction, so a take-over (which needs the same lock) is entirely
//! before or after it.

use std::sync::{Mutex, MutexGuard};

use castlog_core::id::{CastId, Seq};
use rusqlite::{Connection, OptionalExtension, params};

use super::{BUSY_TIMEOUT, SqliteLog, map_err, writer::Command};
use crate::log::LogError;
use crate::queue::memory::holds;
use crate::queue::{Lease, QueueEntry, QueueState, RunQueue, Slot, WorkerId};
use crate::record::{Pending, Recorded};

/// The queue's connection, opened when first used.
#[derive(Debug, Default)]
pub(crate) struct QueueConn(Mutex<Option<Connection>>);

impl QueueConn {
    pub(crate) fn close(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> MutexGuard<'_, Option<Connection>> {
        // The connection holds no invariant a panic could break (transactions roll back).
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn row_entry(row: &rusqlite::Row<'_>) -> rusqlite::Result<QueueEntry> {
    let state: String = row.get(2)?;
    Ok(QueueEntry {
        cast: CastId::new(row.get::<_, String>(0)?),
        agent: row.get(1)?,
        state: QueueState::parse(&state).unwrap_or(QueueState::Done),
        holder: row.get::<_, Option<String>>(3)?.map(WorkerId::new),
        epoch: row.get::<_, i64>(4)?.max(0) as u64,
        lease_until_ms: row.get::<_, i64>(5)?.max(0) as u64,
        submitted_ms: row.get::<_, i64>(6)?.max(0) as u64,
    })
}

const COLUMNS: &str = "cast_id, agent, state, holder, epoch, lease_until_ms, submitted_ms";

fn entry(conn: &Connection, cast: &CastId) -> rusqlite::Result<Option<QueueEntry>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM castlog_queue WHERE cast_id = ?1"
    ))?
    .query_row([cast.as_str()], row_entry)
    .optional()
}

/// Checks, inside the writer's transaction, that `lease` is still the row's.
pub(crate) fn check_lease(conn: &Connection, lease: &Lease) -> Result<(), LogError> {
    let found = entry(conn, &lease.cast).map_err(|e| map_err("checking a lease", e))?;
    match found {
        Some(row) if holds(&row, lease) => Ok(()),
        other => Err(LogError::LeaseLost {
            cast: lease.cast.clone(),
            epoch: lease.epoch,
            current: other.map_or(0, |r| r.epoch),
        }),
    }
}

fn ms(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl SqliteLog {
    /// Runs `work` in one `BEGIN IMMEDIATE` transaction on the queue's connection (the
    /// delivery record, `super::deliveries`, writes through it too).
    pub(super) fn queue_write<T>(
        &self,
        context: &str,
        work: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, LogError> {
        let mut guard = self.queue.lock();
        if guard.is_none() {
            let conn = Connection::open(&self.path)
                .and_then(|conn| {
                    conn.busy_timeout(BUSY_TIMEOUT)?;
                    conn.execute_batch("PRAGMA synchronous = FULL;")?;
                    Ok(conn)
                })
                .map_err(|e| map_err("opening the run queue", e))?;
            *guard = Some(conn);
        }
        let conn = guard.as_mut().expect("opened above");
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| map_err(context, e))?;
        let out = work(&tx).map_err(|e| map_err(context, e))?;
        tx.commit().map_err(|e| map_err(context, e))?;
        Ok(out)
    }
}

impl RunQueue for SqliteLog {
    fn submit(&self, cast: &CastId, agent: &str, now_ms: u64) -> Result<(), LogError> {
        let inserted = self.queue_write("queueing a cast", |tx| {
            tx.execute(
                "INSERT INTO castlog_queue (cast_id, agent, state, epoch, lease_until_ms, submitted_ms)
                 VALUES (?1, ?2, 'queued', 0, 0, ?3) ON CONFLICT (cast_id) DO NOTHING",
                params![cast.as_str(), agent, ms(now_ms)],
            )
        })?;
        if inserted == 0 {
            return Err(LogError::AlreadyQueued { cast: cast.clone() });
        }
        Ok(())
    }

    fn take(
        &self,
        worker: &WorkerId,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<Option<Lease>, LogError> {
        self.queue_write("taking a queued cast", |tx| {
            let found = tx
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM castlog_queue
                     WHERE state = 'queued' OR (state = 'running' AND lease_until_ms < ?1)
                     ORDER BY submitted_ms, cast_id LIMIT 1"
                ))?
                .query_row([ms(now_ms)], row_entry)
                .optional()?;
            let Some(row) = found else { return Ok(None) };
            let epoch = row.epoch + 1;
            tx.execute(
                "UPDATE castlog_queue SET state = 'running', holder = ?2, epoch = ?3,
                 lease_until_ms = ?4 WHERE cast_id = ?1",
                params![
                    row.cast.as_str(),
                    worker.as_str(),
                    ms(epoch),
                    ms(now_ms.saturating_add(lease_ms))
                ],
            )?;
            Ok(Some(Lease {
                taken_over: row.state == QueueState::Running,
                cast: row.cast,
                agent: row.agent,
                holder: worker.clone(),
                epoch,
            }))
        })
    }

    fn renew(&self, lease: &Lease, now_ms: u64, lease_ms: u64) -> Result<bool, LogError> {
        self.queue_write("renewing a lease", |tx| {
            tx.execute(
                "UPDATE castlog_queue SET lease_until_ms = ?4
                 WHERE cast_id = ?1 AND epoch = ?2 AND holder = ?3 AND state = 'running'",
                params![
                    lease.cast.as_str(),
                    ms(lease.epoch),
                    lease.holder.as_str(),
                    ms(now_ms.saturating_add(lease_ms))
                ],
            )
            .map(|n| n > 0)
        })
    }

    fn release(&self, lease: &Lease, to: QueueState) -> Result<bool, LogError> {
        self.queue_write("releasing a lease", |tx| {
            tx.execute(
                "UPDATE castlog_queue SET state = ?4, holder = NULL, lease_until_ms = 0
                 WHERE cast_id = ?1 AND epoch = ?2 AND holder = ?3 AND state = 'running'",
                params![
                    lease.cast.as_str(),
                    ms(lease.epoch),
                    lease.holder.as_str(),
                    to.as_str()
                ],
            )
            .map(|n| n > 0)
        })
    }

    fn wake(&self, cast: &CastId, _now_ms: u64) -> Result<bool, LogError> {
        if self.entries()?.iter().all(|e| e.cast != *cast) {
            // Nothing to wake: a cast that was never queued.
            return Ok(false);
        }
        self.queue_write("waking a paused cast", |tx| {
            tx.execute(
                "UPDATE castlog_queue SET state = 'queued' WHERE cast_id = ?1 AND state = 'paused'",
                [cast.as_str()],
            )
            .map(|n| n > 0)
        })
    }

    /// Read on a reader connection; a file without the queue's tables has no rows.
    fn entries(&self) -> Result<Vec<QueueEntry>, LogError> {
        self.read_with(|conn| {
            let read = |e| map_err("reading the run queue", e);
            let exists: bool = conn
                .query_row(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'castlog_queue'",
                    [],
                    |r| r.get::<_, i64>(0),
                )
                .map(|n| n > 0)
                .map_err(read)?;
            if !exists {
                return Ok(Vec::new());
            }
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM castlog_queue ORDER BY submitted_ms, cast_id"
                ))
                .map_err(read)?;
            let rows = stmt
                .query_map([], row_entry)
                .map_err(read)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(read)?;
            Ok(rows)
        })
    }

    fn append_leased(
        &self,
        lease: &Lease,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        self.send(|reply| Command::AppendLeased {
            lease: lease.clone(),
            expected,
            blobs: blobs.to_vec(),
            events: events.to_vec(),
            reply,
        })
    }

    fn take_slot(
        &self,
        endpoint: &str,
        limit: u32,
        worker: &WorkerId,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<Option<Slot>, LogError> {
        self.queue_write("taking an endpoint slot", |tx| {
            for slot in 0..limit {
                let until: Option<i64> = tx
                    .query_row(
                        "SELECT lease_until_ms FROM castlog_slots WHERE endpoint = ?1 AND slot = ?2",
                        params![endpoint, slot],
                        |r| r.get(0),
                    )
                    .optional()?;
                if until.is_some_and(|until| until >= ms(now_ms)) {
                    continue;
                }
                tx.execute(
                    "INSERT INTO castlog_slots (endpoint, slot, holder, lease_until_ms)
                     VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (endpoint, slot) DO UPDATE
                     SET holder = excluded.holder, lease_until_ms = excluded.lease_until_ms",
                    params![
                        endpoint,
                        slot,
                        worker.as_str(),
                        ms(now_ms.saturating_add(lease_ms))
                    ],
                )?;
                return Ok(Some(Slot {
                    endpoint: endpoint.to_owned(),
                    slot,
                    holder: worker.clone(),
                }));
            }
            Ok(None)
        })
    }

    fn renew_slot(&self, slot: &Slot, now_ms: u64, lease_ms: u64) -> Result<(), LogError> {
        self.queue_write("renewing an endpoint slot", |tx| {
            tx.execute(
                "UPDATE castlog_slots SET lease_until_ms = ?4
                 WHERE endpoint = ?1 AND slot = ?2 AND holder = ?3",
                params![
                    slot.endpoint,
                    slot.slot,
                    slot.holder.as_str(),
                    ms(now_ms.saturating_add(lease_ms))
                ],
            )
            .map(drop)
        })
    }

    fn release_slot(&self, slot: &Slot) -> Result<(), LogError> {
        self.queue_write("releasing an endpoint slot", |tx| {
            tx.execute(
                "DELETE FROM castlog_slots WHERE endpoint = ?1 AND slot = ?2 AND holder = ?3",
                params![slot.endpoint, slot.slot, slot.holder.as_str()],
            )
            .map(drop)
        })
    }
}
