//! Packed values in SQLite files: large payloads, chunks and caches are stored compressed,
//! read back as given and hashed as given (the same chain as the reference log's); a damaged
//! packed payload is named at its seq, by strict reads and by `verify`.

use castlog_core::event::{Event, SteeringNoted};
use castlog_core::id::Seq;
use castlog_events::verify::{ProblemKind, verify_cast};
use castlog_events::{EventLog, InMemoryLog, LogError, Pending, Snapshot};
use rusqlite::{Connection, params};

use super::backend::{open_sqlite, scratch};
use super::sample;

/// The first bytes of a zstd frame, which a packed payload starts with.
const FRAME: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Four notes of about 3 kB of word-like text each (large enough to pack) and one short one.
fn notes() -> Vec<Pending> {
    let long = String::from_utf8(sample::text(7, 3000)).unwrap();
    (0..5u64)
        .map(|i| {
            let text = if i == 4 {
                "short".to_owned()
            } else {
                format!("{i}: {long}")
            };
            let event = Event::from(SteeringNoted {
                text,
                locked: false,
                origin: None,
            });
            Pending::new(sample::AT + i * 1000, &event)
        })
        .collect()
}

/// Every stored payload of the file's only cast, as its row holds it.
fn stored_payloads(conn: &Connection) -> Vec<Vec<u8>> {
    let mut stmt = conn
        .prepare("SELECT payload FROM events ORDER BY id")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn large_values_are_stored_packed_and_read_back_as_given() {
    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    let reference = InMemoryLog::new();
    let cast = sample::cast("packed");
    let stored = log.append(&cast, Seq::FIRST, &notes()).unwrap();
    let expected = reference.append(&cast, Seq::FIRST, &notes()).unwrap();
    // The same hashes as the reference: packing is storage only.
    assert_eq!(stored, expected);
    assert_eq!(log.read(&cast, Seq::FIRST, None).unwrap(), expected);

    let conn = Connection::open(&path).unwrap();
    let rows = stored_payloads(&conn);
    for (row, record) in rows.iter().zip(&expected).take(4) {
        assert!(row.starts_with(&FRAME), "seq {} is not packed", record.seq);
        assert!(
            row.len() * 10 < record.payload.len() * 7,
            "seq {}: {} packed bytes for {}",
            record.seq,
            row.len(),
            record.payload.len()
        );
    }
    assert_eq!(
        rows[4], expected[4].payload,
        "a short payload is kept as it is"
    );
    assert!(
        verify_cast(&log, &log.head(&cast).unwrap().unwrap())
            .unwrap()
            .problems
            .is_empty()
    );

    // A large blob's chunks and a cache are packed too, in their rows' packed column.
    let blob = sample::text(9, 40_000);
    let address = log.put_blob(&blob).unwrap();
    let snapshot = Snapshot {
        version: 1,
        seq: Seq(5),
        hash: expected[4].hash,
        bytes: sample::text(11, 20_000),
    };
    log.put_snapshot(&cast, snapshot.clone()).unwrap();
    let (packed_chunks, chunk_bytes): (i64, i64) = conn
        .query_row(
            "SELECT sum(packed), sum(length(bytes)) FROM chunks",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(packed_chunks > 0 && (chunk_bytes as usize) < blob.len() * 7 / 10);
    let cache: (i64, i64) = conn
        .query_row("SELECT packed, length(bytes) FROM checkpoints", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(cache.0, 1);
    assert!((cache.1 as usize) < snapshot.bytes.len());
    drop(log);

    let log = open_sqlite(&path);
    assert_eq!(log.get_blob(&address).unwrap(), Some(blob));
    assert_eq!(log.snapshot(&cast, Seq(5)).unwrap(), Some(snapshot));
}

#[test]
fn a_damaged_packed_payload_is_named_at_its_seq() {
    let (_dir, path) = scratch();
    let cast = sample::cast("packed");
    open_sqlite(&path)
        .append(&cast, Seq::FIRST, &notes())
        .unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("DROP TRIGGER events_no_update").unwrap();
    let payload = &stored_payloads(&conn)[1];
    let cut = &payload[..payload.len() / 2];
    conn.execute("UPDATE events SET payload = ?1 WHERE seq = 2", params![cut])
        .unwrap();
    drop(conn);

    let log = open_sqlite(&path);
    match log.read(&cast, Seq::FIRST, None).unwrap_err() {
        LogError::Corrupt {
            context, message, ..
        } => {
            assert!(context.contains("seq 2"), "{context}");
            assert!(
                message.contains("column payload is packed, but"),
                "{message}"
            );
        }
        other => panic!("{other}"),
    }
    let report = verify_cast(&log, &log.head(&cast).unwrap().unwrap()).unwrap();
    let found: Vec<(u64, ProblemKind)> = report
        .problems
        .iter()
        .map(|p| (p.seq.get(), p.kind))
        .collect();
    assert_eq!(found, vec![(2, ProblemKind::Unreadable)]);
}

#[test]
fn a_damaged_packed_chunk_is_named_by_its_blob() {
    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    let blob = sample::text(9, 40_000);
    let address = log.put_blob(&blob).unwrap();
    drop(log);
    let conn = Connection::open(&path).unwrap();
    let (id, frame): (i64, Vec<u8>) = conn
        .query_row(
            "SELECT id, bytes FROM chunks WHERE packed = 1 ORDER BY id LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    conn.execute(
        "UPDATE chunks SET bytes = ?1 WHERE id = ?2",
        params![&frame[..frame.len() / 2], id],
    )
    .unwrap();
    drop(conn);
    match open_sqlite(&path).get_blob(&address).unwrap_err() {
        LogError::Corrupt {
            context, message, ..
        } => {
            assert!(context.contains(&address.short()), "{context}");
            assert!(
                message.contains(&format!("(row {id}): its packed bytes")),
                "{message}"
            );
        }
        other => panic!("{other}"),
    }
}
