//! The run queue ([`crate::queue`]) in the PostgreSQL database: tables `castlog_queue` and
//! `castlog_slots`, part of the versioned schema since version 2 (`schema/v2.sql`).
//!
//! A take is one statement: the oldest takeable row, locked `FOR UPDATE SKIP LOCKED` (a row
//! another worker is taking, or whose leased append is in flight, is passed over), updated to
//! the taker with its epoch bumped. A leased append locks its row `FOR SHARE` and checks the
//! epoch in the append's transaction: a take-over of that row waits for the append to commit,
//! and an append after a take-over finds the new epoch.

use std::time::Duration;

use castlog_core::id::{CastId, Seq};

use super::PostgresLog;
use super::conn::Conn;
use super::error::map_err;
use crate::log::LogError;
use crate::queue::memory::holds;
use crate::queue::{Lease, QueueEntry, QueueState, RunQueue, Slot, WorkerId};
use crate::record::{Pending, Recorded};

/// The advisory lock key the endpoint slots are taken under (it once serialized the creation
/// of the queue's tables, before they were part of the schema).
const QUEUE_DDL_LOCK: i64 = 0x6361_7374_6c6f_6702;

fn ms(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn entry(row: &postgres::Row) -> Result<QueueEntry, LogError> {
    let read = |e: postgres::Error| map_err("reading the run queue", e);
    let state: String = row.try_get(2).map_err(read)?;
    Ok(QueueEntry {
        cast: CastId::new(row.try_get::<_, String>(0).map_err(read)?),
        agent: row.try_get(1).map_err(read)?,
        state: QueueState::parse(&state).unwrap_or(QueueState::Done),
        holder: row
            .try_get::<_, Option<String>>(3)
            .map_err(read)?
            .map(WorkerId::new),
        epoch: row.try_get::<_, i64>(4).map_err(read)?.max(0) as u64,
        lease_until_ms: row.try_get::<_, i64>(5).map_err(read)?.max(0) as u64,
        submitted_ms: row.try_get::<_, i64>(6).map_err(read)?.max(0) as u64,
    })
}

impl PostgresLog {
    /// Runs `work` in one transaction (the queue's tables came with the schema).
    fn queue_write<T>(
        &self,
        work: impl FnOnce(&mut Conn) -> Result<T, LogError>,
    ) -> Result<T, LogError> {
        self.write(work)
    }

    /// Whether the queue's table is in the log's schema (always, once it is at version 2).
    fn has_queue(conn: &mut Conn) -> Result<bool, LogError> {
        conn.client()
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
                                WHERE schemaname = current_schema() AND tablename = 'castlog_queue')",
                &[],
            )
            .and_then(|row| row.try_get(0))
            .map_err(|e| map_err("reading the run queue", e))
    }
}

/// A session that listens for the appends to one log's events (see `schema/v2.sql`).
pub struct AppendListener {
    client: postgres::Client,
}

impl std::fmt::Debug for AppendListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppendListener").finish_non_exhaustive()
    }
}

impl AppendListener {
    /// Waits until an append is announced or `timeout` passes; true when one was.
    pub fn wait(&mut self, timeout: Duration) -> Result<bool, LogError> {
        use postgres::fallible_iterator::FallibleIterator;
        let mut notices = self.client.notifications();
        let heard = notices
            .timeout_iter(timeout)
            .next()
            .map_err(|e| map_err("waiting for appends", e))?
            .is_some();
        // Everything announced meanwhile is one wake-up.
        while notices
            .iter()
            .next()
            .map_err(|e| map_err("waiting for appends", e))?
            .is_some()
        {}
        Ok(heard)
    }
}

impl PostgresLog {
    /// A listener for appends to this log, when its schema announces them (the run queue's
    /// tables, `schema/v2.sql`, came with the trigger); `None` otherwise (a follower polls).
    pub fn listen_appends(&self) -> Result<Option<AppendListener>, LogError> {
        if !self.pool.with(Self::has_queue)? {
            return Ok(None);
        }
        let mut conn = Conn::connect(self.pool.locator())?;
        let channel: String = conn
            .client()
            .query_one("SELECT 'castlog_' || left(md5(current_schema()), 16)", &[])
            .and_then(|row| row.try_get(0))
            .map_err(|e| map_err("listening for appends", e))?;
        conn.client()
            .batch_execute(&format!("LISTEN \"{channel}\""))
            .map_err(|e| map_err("listening for appends", e))?;
        Ok(Some(AppendListener {
            client: conn.into_client(),
        }))
    }
}

/// Checks, in the caller's transaction, that `lease` is still its queue row's, locking the row
/// `FOR SHARE` until the transaction ends (a take-over waits for it); else `LeaseLost`.
pub(super) fn check_lease(conn: &mut Conn, lease: &Lease) -> Result<(), LogError> {
    let row = conn
        .client()
        .query_opt(
            "SELECT cast_id, agent, state, holder, epoch, lease_until_ms, submitted_ms
             FROM castlog_queue WHERE cast_id = $1 FOR SHARE",
            &[&lease.cast.as_str()],
        )
        .map_err(|e| map_err("checking a lease", e))?;
    match row.as_ref().map(entry).transpose()? {
        Some(row) if holds(&row, lease) => Ok(()),
        other => Err(LogError::LeaseLost {
            cast: lease.cast.clone(),
            epoch: lease.epoch,
            current: other.map_or(0, |r| r.epoch),
        }),
    }
}

impl RunQueue for PostgresLog {
    fn submit(&self, cast: &CastId, agent: &str, now_ms: u64) -> Result<(), LogError> {
        let inserted = self.queue_write(|conn| {
            conn.client()
                .execute(
                    "INSERT INTO castlog_queue (cast_id, agent, state, epoch, lease_until_ms, submitted_ms)
                     VALUES ($1, $2, 'queued', 0, 0, $3) ON CONFLICT (cast_id) DO NOTHING",
                    &[&cast.as_str(), &agent, &ms(now_ms)],
                )
                .map_err(|e| map_err("queueing a cast", e))
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
        self.queue_write(|conn| {
            let row = conn
                .client()
                .query_opt(
                    "WITH chosen AS (
                         SELECT cast_id, state AS was FROM castlog_queue
                         WHERE state = 'queued' OR (state = 'running' AND lease_until_ms < $1)
                         ORDER BY submitted_ms, cast_id LIMIT 1
                         FOR UPDATE SKIP LOCKED)
                     UPDATE castlog_queue q SET state = 'running', holder = $2,
                         epoch = q.epoch + 1, lease_until_ms = $3
                     FROM chosen WHERE q.cast_id = chosen.cast_id
                     RETURNING q.cast_id, q.agent, q.epoch, chosen.was",
                    &[
                        &ms(now_ms),
                        &worker.as_str(),
                        &ms(now_ms.saturating_add(lease_ms)),
                    ],
                )
                .map_err(|e| map_err("taking a queued cast", e))?;
            let Some(row) = row else { return Ok(None) };
            let read = |e: postgres::Error| map_err("taking a queued cast", e);
            let was: String = row.try_get(3).map_err(read)?;
            Ok(Some(Lease {
                cast: CastId::new(row.try_get::<_, String>(0).map_err(read)?),
                agent: row.try_get(1).map_err(read)?,
                holder: worker.clone(),
                epoch: row.try_get::<_, i64>(2).map_err(read)?.max(0) as u64,
                taken_over: was == "running",
            }))
        })
    }

    fn renew(&self, lease: &Lease, now_ms: u64, lease_ms: u64) -> Result<bool, LogError> {
        self.queue_write(|conn| {
            conn.client()
                .execute(
                    "UPDATE castlog_queue SET lease_until_ms = $4
                     WHERE cast_id = $1 AND epoch = $2 AND holder = $3 AND state = 'running'",
                    &[
                        &lease.cast.as_str(),
                        &ms(lease.epoch),
                        &lease.holder.as_str(),
                        &ms(now_ms.saturating_add(lease_ms)),
                    ],
                )
                .map(|n| n > 0)
                .map_err(|e| map_err("renewing a lease", e))
        })
    }

    fn release(&self, lease: &Lease, to: QueueState) -> Result<bool, LogError> {
        self.queue_write(|conn| {
            conn.client()
                .execute(
                    "UPDATE castlog_queue SET state = $4, holder = NULL, lease_until_ms = 0
                     WHERE cast_id = $1 AND epoch = $2 AND holder = $3 AND state = 'running'",
                    &[
                        &lease.cast.as_str(),
                        &ms(lease.epoch),
                        &lease.holder.as_str(),
                        &to.as_str(),
                    ],
                )
                .map(|n| n > 0)
                .map_err(|e| map_err("releasing a lease", e))
        })
    }

    fn wake(&self, cast: &CastId, _now_ms: u64) -> Result<bool, LogError> {
        if !self.pool.with(Self::has_queue)? {
            return Ok(false);
        }
        self.queue_write(|conn| {
            conn.client()
                .execute(
                    "UPDATE castlog_queue SET state = 'queued' WHERE cast_id = $1 AND state = 'paused'",
                    &[&cast.as_str()],
                )
                .map(|n| n > 0)
                .map_err(|e| map_err("waking a paused cast", e))
        })
    }

    fn entries(&self) -> Result<Vec<QueueEntry>, LogError> {
        self.pool.with(|conn| {
            if !Self::has_queue(conn)? {
                return Ok(Vec::new());
            }
            let rows = conn
                .client()
                .query(
                    "SELECT cast_id, agent, state, holder, epoch, lease_until_ms, submitted_ms
                     FROM castlog_queue ORDER BY submitted_ms, cast_id",
                    &[],
                )
                .map_err(|e| map_err("reading the run queue", e))?;
            rows.iter().map(entry).collect()
        })
    }

    fn append_leased(
        &self,
        lease: &Lease,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        if events.is_empty() {
            return self.write(|conn| {
                check_lease(conn, lease)?;
                super::writes::append(conn, &lease.cast, expected, blobs, events)
            });
        }
        self.append_events(&lease.cast, expected, blobs, events, Some(lease))
    }

    fn take_slot(
        &self,
        endpoint: &str,
        limit: u32,
        worker: &WorkerId,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<Option<Slot>, LogError> {
        self.queue_write(|conn| {
            // One taker of an endpoint's slots at a time (the rows may not exist yet).
            conn.client()
                .execute(
                    "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                    &[&(QUEUE_DDL_LOCK as i32), &endpoint],
                )
                .map_err(|e| map_err("locking an endpoint's slots", e))?;
            for slot in 0..limit as i32 {
                let until: Option<i64> = conn
                    .client()
                    .query_opt(
                        "SELECT lease_until_ms FROM castlog_slots WHERE endpoint = $1 AND slot = $2",
                        &[&endpoint, &slot],
                    )
                    .and_then(|row| row.map(|r| r.try_get(0)).transpose())
                    .map_err(|e| map_err("taking an endpoint slot", e))?;
                if until.is_some_and(|until| until >= ms(now_ms)) {
                    continue;
                }
                conn.client()
                    .execute(
                        "INSERT INTO castlog_slots (endpoint, slot, holder, lease_until_ms)
                         VALUES ($1, $2, $3, $4)
                         ON CONFLICT (endpoint, slot) DO UPDATE
                         SET holder = excluded.holder, lease_until_ms = excluded.lease_until_ms",
                        &[
                            &endpoint,
                            &slot,
                            &worker.as_str(),
                            &ms(now_ms.saturating_add(lease_ms)),
                        ],
                    )
                    .map_err(|e| map_err("taking an endpoint slot", e))?;
                return Ok(Some(Slot {
                    endpoint: endpoint.to_owned(),
                    slot: slot as u32,
                    holder: worker.clone(),
                }));
            }
            Ok(None)
        })
    }

    fn renew_slot(&self, slot: &Slot, now_ms: u64, lease_ms: u64) -> Result<(), LogError> {
        self.queue_write(|conn| {
            conn.client()
                .execute(
                    "UPDATE castlog_slots SET lease_until_ms = $4
                     WHERE endpoint = $1 AND slot = $2 AND holder = $3",
                    &[
                        &slot.endpoint,
                        &(slot.slot as i32),
                        &slot.holder.as_str(),
                        &ms(now_ms.saturating_add(lease_ms)),
                    ],
                )
                .map(drop)
                .map_err(|e| map_err("renewing an endpoint slot", e))
        })
    }

    fn release_slot(&self, slot: &Slot) -> Result<(), LogError> {
        self.queue_write(|conn| {
            conn.client()
                .execute(
                    "DELETE FROM castlog_slots WHERE endpoint = $1 AND slot = $2 AND holder = $3",
                    &[&slot.endpoint, &(slot.slot as i32), &slot.holder.as_str()],
                )
                .map(drop)
                .map_err(|e| map_err("releasing an endpoint slot", e))
        })
    }
}
