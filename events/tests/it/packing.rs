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

/// The first bytes of a payload in shorthand and packed (schema v11): the form's byte, then a
/// zstd frame.
const PACKED: [u8; 5] = [0x04, 0x28, 0xb5, 0x2f, 0xfd];

/// Four notes of about 3 kB of word-like text each (large enough to pack; kept in a field
/// other than `text`, which would be split instead, see `long_texts_...` below) and one short
/// one.
fn notes() -> Vec<Pending> {
    let long = String::from_utf8(sample::text(7, 3000)).unwrap();
    (0..5u64)
        .map(|i| {
            let origin = (i != 4).then(|| format!("{i}: {long}"));
            note(sample::AT + i * 1000, &format!("note {i}"), origin)
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
        assert!(row.starts_with(&PACKED), "seq {} is not packed", record.seq);
        assert!(
            row.len() * 10 < record.payload.len() * 7,
            "seq {}: {} packed bytes for {}",
            record.seq,
            row.len(),
            record.payload.len()
        );
    }
    assert_eq!(
        rows[4][0], 0x03,
        "a short payload is in shorthand, not packed"
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

// Schema v11: an event's link is stored once, as the hash of the row before it; a link that
// is not that hash (a fork's first event names its parent's) is stored in full.
#[test]
fn links_are_stored_once_and_read_back_as_appended() {
    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    let reference = InMemoryLog::new();
    let origin = sample::cast("origin");
    let stored = sample::seed(&log, &origin, 4);
    assert_eq!(stored, sample::seed(&reference, &origin, 4));
    let more = log.append(&origin, Seq(5), &sample::batch(4, 3)).unwrap();
    let point = castlog_events::ForkPoint {
        cast: origin.clone(),
        seq: Seq(3),
        hash: stored[2].hash,
    };
    let fork = sample::cast("fork");
    let forked = log.fork(&fork, &point, &sample::batch(10, 2)).unwrap();
    drop(log);

    let conn = Connection::open(&path).unwrap();
    let links: Vec<(String, i64, usize)> = conn
        .prepare(
            "SELECT c.cast_id, e.seq, length(e.prev) FROM events e
             JOIN casts c ON c.id = e.cast_id ORDER BY e.id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let expected: Vec<(String, i64, usize)> = (1..=7)
        .map(|seq| ("origin".to_owned(), seq, if seq == 1 { 32 } else { 0 }))
        .chain((1..=2).map(|seq| ("fork".to_owned(), seq, if seq == 1 { 32 } else { 0 })))
        .collect();
    assert_eq!(links, expected);
    drop(conn);

    let log = open_sqlite(&path);
    let read = log.read(&origin, Seq::FIRST, None).unwrap();
    assert_eq!(read, [stored, more].concat());
    // A read from the middle takes the link from a row it does not return.
    assert_eq!(log.read(&origin, Seq(5), None).unwrap(), read[4..]);
    assert_eq!(log.read(&fork, Seq::FIRST, None).unwrap(), forked);
    assert_eq!(forked[0].prev, point.hash);
    for cast in [&origin, &fork] {
        let head = log.head(cast).unwrap().unwrap();
        assert!(verify_cast(&log, &head).unwrap().problems.is_empty());
    }
}

#[test]
fn an_event_whose_link_row_is_gone_is_named_for_it() {
    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    let cast = sample::cast("gap");
    sample::seed(&log, &cast, 5);
    drop(log);
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "DROP TRIGGER events_no_delete;
             DELETE FROM events WHERE seq = 3;",
        )
        .unwrap();
    let log = open_sqlite(&path);
    let head = log.head(&cast).unwrap().unwrap();
    let problems = verify_cast(&log, &head).unwrap().problems;
    let named: Vec<(u64, ProblemKind)> = problems.iter().map(|p| (p.seq.get(), p.kind)).collect();
    assert_eq!(
        named,
        [(3, ProblemKind::Missing), (4, ProblemKind::Unreadable)]
    );
    assert!(
        problems[1].message.contains(
            "its link is stored as the hash of the event before it, and that event is missing"
        ),
        "{}",
        problems[1].message
    );
    match log.read(&cast, Seq(4), None).unwrap_err() {
        LogError::Corrupt { context, .. } => assert!(context.contains("seq 4"), "{context}"),
        other => panic!("{other}"),
    }
}

/// A note of `text` at `at`.
fn note(at: u64, text: &str, origin: Option<String>) -> Pending {
    let event = Event::from(SteeringNoted {
        text: text.to_owned(),
        locked: false,
        origin,
    });
    Pending::new(at, &event)
}

// Schema v11: a long top-level text is kept in the chunk store, where the entry bodies that
// quote it share its chunks; the row holds the rest of the payload and the chunk list.
#[test]
fn long_texts_are_kept_in_the_chunk_store_and_read_back_as_appended() {
    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    let reference = InMemoryLog::new();
    let cast = sample::cast("split");
    let text = format!(
        "a \"quoted\" reply\twith\nlines \\ {}",
        String::from_utf8(sample::text(3, 6000)).unwrap()
    );
    let events = [
        note(sample::AT, &text, None),
        note(sample::AT, "short", None),
    ];
    let stored = log.append(&cast, Seq::FIRST, &events).unwrap();
    assert_eq!(
        stored,
        reference.append(&cast, Seq::FIRST, &events).unwrap()
    );
    let conn = Connection::open(&path).unwrap();
    let rows = stored_payloads(&conn);
    assert_eq!(rows[0][0], 0x01, "the long text's payload is split");
    assert!(rows[0].len() < 100, "{} bytes in the row", rows[0].len());
    assert_eq!(rows[1][0], 0x03, "a short one is in shorthand");
    let chunks = |conn: &Connection| -> i64 {
        conn.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))
            .unwrap()
    };
    let before = chunks(&conn);
    assert!(before >= 4, "{before} chunks");
    // An entry body quoting the text shares its chunks: only its first ones are new.
    let body = format!("Previous output:\n{text}");
    let address = log.put_blob(body.as_bytes()).unwrap();
    assert!(
        chunks(&conn) - before <= 2,
        "{} new chunks",
        chunks(&conn) - before
    );
    drop(log);

    let log = open_sqlite(&path);
    assert_eq!(log.read(&cast, Seq::FIRST, None).unwrap(), stored);
    assert_eq!(log.get_blob(&address).unwrap(), Some(body.into_bytes()));
    let head = log.head(&cast).unwrap().unwrap();
    assert!(verify_cast(&log, &head).unwrap().problems.is_empty());

    // A chunk of the text gone: the read names the event, verify names it unreadable.
    conn.execute("DELETE FROM chunks WHERE id = 2", []).unwrap();
    match log.read(&cast, Seq::FIRST, None).unwrap_err() {
        LogError::Corrupt {
            context, message, ..
        } => {
            assert!(context.contains("seq 1"), "{context}");
            assert!(
                message
                    .contains("column payload is split, but its text's chunk 1 (row 2) is missing"),
                "{message}"
            );
        }
        other => panic!("{other}"),
    }
    let found: Vec<(u64, ProblemKind)> = verify_cast(&log, &head)
        .unwrap()
        .problems
        .iter()
        .map(|p| (p.seq.get(), p.kind))
        .collect();
    assert_eq!(found, vec![(1, ProblemKind::Unreadable)]);
}

// Schema v11: a payload's digests and its cast's own id are written shorter before it is
// packed (first byte 03), and read back as appended.
#[test]
fn digests_and_the_casts_own_id_are_stored_in_shorthand() {
    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    let reference = InMemoryLog::new();
    let cast = sample::cast("shorthand-cast");
    let digest = "5a".repeat(32);
    let events: Vec<Pending> = (0..3u64)
        .map(|i| {
            note(
                sample::AT + i,
                &format!("prompt {digest} of shorthand-cast:Socket-{i}:1"),
                Some(format!("\"{digest}\"")),
            )
        })
        .collect();
    let stored = log.append(&cast, Seq::FIRST, &events).unwrap();
    assert_eq!(
        stored,
        reference.append(&cast, Seq::FIRST, &events).unwrap()
    );
    let rows = stored_payloads(&Connection::open(&path).unwrap());
    assert!(rows.iter().all(|row| row[0] == 0x03), "{rows:?}");
    drop(log);
    let log = open_sqlite(&path);
    assert_eq!(log.read(&cast, Seq::FIRST, None).unwrap(), stored);
    let head = log.head(&cast).unwrap().unwrap();
    assert!(verify_cast(&log, &head).unwrap().problems.is_empty());
}
