//! The delivery record ([`crate::deliveries`]) in the PostgreSQL database: table
//! `castlog_deliveries` of the log's schema, created by the first write (under an advisory
//! lock, so two first writers do not race to create it); a schema without it has no rows.

use castlog_core::id::{BusEventId, CastId, SinkId};

use super::PostgresLog;
use super::error::map_err;
use crate::deliveries::{COLUMNS, Delivery, DeliveryLog, DeliveryStatus};
use crate::log::LogError;

/// The advisory lock the table is created under.
const DELIVERIES_DDL_LOCK: i64 = 0x6361_7374_6c6f_6703;

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS castlog_deliveries (
    cast_id TEXT NOT NULL,
    sink TEXT NOT NULL,
    sequence BIGINT NOT NULL,
    event_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    status TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    status_code INTEGER,
    reason TEXT,
    at_ms BIGINT NOT NULL,
    row_id BIGSERIAL PRIMARY KEY
);
CREATE INDEX IF NOT EXISTS castlog_deliveries_cast ON castlog_deliveries (cast_id, sink, sequence);
";

fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl DeliveryLog for PostgresLog {
    fn record_delivery(&self, d: &Delivery) -> Result<(), LogError> {
        let write = |e| map_err("recording a delivery", e);
        self.write(|conn| {
            let client = conn.client();
            client
                .execute("SELECT pg_advisory_xact_lock($1)", &[&DELIVERIES_DDL_LOCK])
                .map_err(write)?;
            client.batch_execute(CREATE).map_err(write)?;
            client
                .execute(
                    &format!("INSERT INTO castlog_deliveries ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"),
                    &[
                        &d.cast.as_str(),
                        &d.sink.as_str(),
                        &int(d.sequence),
                        &d.event_id.as_str(),
                        &d.event_type,
                        &d.status.as_str(),
                        &i64::from(d.attempt),
                        &d.status_code.map(i32::from),
                        &d.reason,
                        &int(d.at_ms),
                    ],
                )
                .map_err(write)?;
            Ok(())
        })
    }

    fn deliveries(&self, cast: &CastId) -> Result<Vec<Delivery>, LogError> {
        let read = |e| map_err("reading the delivery record", e);
        self.pool.with(|conn| {
            let client = conn.client();
            let exists: bool = client
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
                                    WHERE schemaname = current_schema() AND tablename = 'castlog_deliveries')",
                    &[],
                )
                .and_then(|row| row.try_get(0))
                .map_err(read)?;
            if !exists {
                return Ok(Vec::new());
            }
            let rows = client
                .query(
                    &format!(
                        "SELECT {COLUMNS} FROM castlog_deliveries WHERE cast_id = $1 ORDER BY row_id"
                    ),
                    &[&cast.as_str()],
                )
                .map_err(read)?;
            rows.iter()
                .map(|row| {
                    let status: String = row.try_get(5).map_err(read)?;
                    Ok(Delivery {
                        cast: CastId::new(row.try_get::<_, String>(0).map_err(read)?),
                        sink: SinkId::new(row.try_get::<_, String>(1).map_err(read)?),
                        sequence: row.try_get::<_, i64>(2).map_err(read)?.max(0) as u64,
                        event_id: BusEventId::new(row.try_get::<_, String>(3).map_err(read)?),
                        event_type: row.try_get(4).map_err(read)?,
                        status: DeliveryStatus::parse(&status).unwrap_or(DeliveryStatus::Failed),
                        attempt: u32::try_from(row.try_get::<_, i64>(6).map_err(read)?)
                            .unwrap_or(0),
                        status_code: row
                            .try_get::<_, Option<i32>>(7)
                            .map_err(read)?
                            .and_then(|c| u16::try_from(c).ok()),
                        reason: row.try_get(8).map_err(read)?,
                        at_ms: row.try_get::<_, i64>(9).map_err(read)?.max(0) as u64,
                    })
                })
                .collect()
        })
    }
}
