//! The delivery record of the event bus (`castlog_deliveries`): rows in, the same rows out in
//! the order they went in, per cast, on SQLite and PostgreSQL; a database that never recorded
//! one reads as empty; SQLite refuses to change a row.

use castlog_core::id::{BusEventId, CastId, SinkId};
use castlog_events::PostgresLog;
use castlog_events::deliveries::{Delivery, DeliveryLog, DeliveryStatus, settled_through};

use super::backend::{open_sqlite, scratch, scratch_schema};

fn row(cast: &str, sequence: u64, status: DeliveryStatus, code: Option<u16>) -> Delivery {
    Delivery {
        cast: CastId::new(cast),
        sink: SinkId::new("ops"),
        sequence,
        event_id: BusEventId::new(format!("id-{cast}-{sequence}")),
        event_type: "lifecycle.cast.started".into(),
        status,
        attempt: u32::from(status != DeliveryStatus::Skipped),
        status_code: code,
        reason: (status == DeliveryStatus::Failed).then(|| "http_error: answered HTTP 500".into()),
        at_ms: 1_700_000_000_000 + sequence,
    }
}

fn contract(log: &dyn DeliveryLog) {
    let a = CastId::new("a");
    assert_eq!(log.deliveries(&a).unwrap(), [], "nothing recorded yet");
    let rows = [
        row("a", 1, DeliveryStatus::Failed, Some(500)),
        row("b", 1, DeliveryStatus::Delivered, Some(200)),
        row("a", 1, DeliveryStatus::Delivered, Some(200)),
        row("a", 2, DeliveryStatus::Skipped, None),
        row("a", 3, DeliveryStatus::Failed, None),
    ];
    for r in &rows {
        log.record_delivery(r).unwrap();
    }
    let read = log.deliveries(&a).unwrap();
    let expected: Vec<Delivery> = rows.iter().filter(|r| r.cast == a).cloned().collect();
    assert_eq!(read, expected);
    assert_eq!(settled_through(&read, &SinkId::new("ops")), 2);
    assert_eq!(log.deliveries(&CastId::new("b")).unwrap().len(), 1);
}

#[test]
fn the_sqlite_delivery_record_keeps_its_rows_in_order() {
    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    contract(&log);
    let conn = rusqlite::Connection::open(&path).unwrap();
    for change in [
        "UPDATE castlog_deliveries SET status = 'delivered'",
        "DELETE FROM castlog_deliveries",
    ] {
        let refused = conn.execute(change, []).unwrap_err().to_string();
        assert!(refused.contains("append-only"), "{refused}");
    }
}

#[test]
fn the_postgres_delivery_record_keeps_its_rows_in_order() {
    let schema = scratch_schema();
    let log = PostgresLog::open(&schema.url()).unwrap();
    contract(&log);
}
