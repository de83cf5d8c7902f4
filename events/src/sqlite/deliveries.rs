//! The delivery record ([`crate::deliveries`]) in the SQLite file: table
//! `castlog_deliveries`, created by the first write with triggers that refuse UPDATE and
//! DELETE. It is written on the run queue's connection (not the writer's: a delivery never
//! waits behind, or holds up, a cast's appends) and read on a reader; a file without the
//! table has no rows.

use castlog_core::id::{BusEventId, CastId, SinkId};
use rusqlite::params;

use super::{SqliteLog, map_err};
use crate::deliveries::{COLUMNS, Delivery, DeliveryLog, DeliveryStatus};
use crate::log::LogError;

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS castlog_deliveries (
    cast_id TEXT NOT NULL,
    sink TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    event_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    status TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    status_code INTEGER,
    reason TEXT,
    at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS castlog_deliveries_cast ON castlog_deliveries (cast_id, sink, sequence);
CREATE TRIGGER IF NOT EXISTS castlog_deliveries_no_update BEFORE UPDATE ON castlog_deliveries
BEGIN SELECT RAISE(ABORT, 'the delivery record is append-only'); END;
CREATE TRIGGER IF NOT EXISTS castlog_deliveries_no_delete BEFORE DELETE ON castlog_deliveries
BEGIN SELECT RAISE(ABORT, 'the delivery record is append-only'); END;
";

fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl DeliveryLog for SqliteLog {
    fn record_delivery(&self, d: &Delivery) -> Result<(), LogError> {
        self.queue_write("recording a delivery", |tx| {
            tx.execute_batch(CREATE)?;
            tx.execute(
                &format!("INSERT INTO castlog_deliveries ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
                params![
                    d.cast.as_str(),
                    d.sink.as_str(),
                    int(d.sequence),
                    d.event_id.as_str(),
                    d.event_type,
                    d.status.as_str(),
                    d.attempt,
                    d.status_code,
                    d.reason,
                    int(d.at_ms),
                ],
            )?;
            Ok(())
        })
    }

    fn deliveries(&self, cast: &CastId) -> Result<Vec<Delivery>, LogError> {
        self.read_with(|conn| {
            let read = |e| map_err("reading the delivery record", e);
            let exists: bool = conn
                .query_row(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'castlog_deliveries'",
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
                    "SELECT {COLUMNS} FROM castlog_deliveries WHERE cast_id = ?1 ORDER BY rowid"
                ))
                .map_err(read)?;
            stmt.query_map([cast.as_str()], |row| {
                let status: String = row.get(5)?;
                Ok(Delivery {
                    cast: CastId::new(row.get::<_, String>(0)?),
                    sink: SinkId::new(row.get::<_, String>(1)?),
                    sequence: row.get::<_, i64>(2)?.max(0) as u64,
                    event_id: BusEventId::new(row.get::<_, String>(3)?),
                    event_type: row.get(4)?,
                    status: DeliveryStatus::parse(&status).unwrap_or(DeliveryStatus::Failed),
                    attempt: row.get(6)?,
                    status_code: row.get(7)?,
                    reason: row.get(8)?,
                    at_ms: row.get::<_, i64>(9)?.max(0) as u64,
                })
            })
            .map_err(read)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(read)
        })
    }
}
