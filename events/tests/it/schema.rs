//! SQLite files: what `SqliteLog::open` accepts and refuses, the append-only triggers, and
//! records surviving a reopen.

use std::path::PathBuf;
use std::sync::Barrier;
use std::thread;

use castlog_core::id::Seq;
use castlog_events::sqlite::{PAGE_SIZE, Place, SCHEMA_VERSION};
use castlog_events::verify::verify_cast;
use castlog_events::{EventLog, LogError, SqliteLog};
use rstest::rstest;
use rusqlite::Connection;
use tempfile::TempDir;

use super::backend::{count, open_sqlite, scratch};
use super::sample;

fn user_version(conn: &Connection) -> i64 {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

/// Prepares a new file with `sql` and returns it with the error `SqliteLog::open` gives on it.
fn refused_after(sql: &str) -> (TempDir, PathBuf, LogError) {
    let (dir, path) = scratch();
    Connection::open(&path).unwrap().execute_batch(sql).unwrap();
    let err = SqliteLog::open(&path).unwrap_err();
    (dir, path, err)
}

#[test]
fn a_new_file_gets_the_current_schema() {
    let (_dir, path) = scratch();
    drop(SqliteLog::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    assert_eq!(user_version(&conn), SCHEMA_VERSION);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

fn page_size(path: &std::path::Path) -> u32 {
    Connection::open(path)
        .unwrap()
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap()
}

/// A new file (missing or empty) is made in castlog's page size; a file made in another keeps
/// it, and its events read as they were written.
#[test]
fn a_new_file_gets_large_pages_and_an_older_file_keeps_its_own() {
    let (_dir, path) = scratch();
    drop(SqliteLog::open(&path).unwrap());
    assert_eq!(page_size(&path), PAGE_SIZE);
    let (_dir, empty) = scratch();
    std::fs::write(&empty, b"").unwrap();
    drop(SqliteLog::open(&empty).unwrap());
    assert_eq!(page_size(&empty), PAGE_SIZE);

    let (_dir, older) = scratch();
    Connection::open(&older)
        .unwrap()
        .execute_batch("PRAGMA page_size = 4096; PRAGMA journal_mode = WAL;")
        .unwrap();
    let log = SqliteLog::open(&older).unwrap();
    let cast = sample::cast("c");
    let written = sample::seed(&log, &cast, 40);
    drop(log);
    assert_eq!(page_size(&older), 4096);
    let log = SqliteLog::open(&older).unwrap();
    assert_eq!(log.read(&cast, Seq::FIRST, None).unwrap(), written);
    let head = log.head(&cast).unwrap().unwrap();
    assert_eq!(verify_cast(&log, &head).unwrap().problems, vec![]);
}

// Regression: several processes opening a database that does not exist yet each read
// `user_version` 0 and applied `v1.sql`; all but one failed with "table casts already exists".
// A few rounds, since one round may happen not to interleave.
#[test]
fn a_new_file_opened_by_many_at_once_gets_the_schema_once() {
    const OPENERS: usize = 8;
    for round in 0..5 {
        let (_dir, path) = scratch();
        let start = Barrier::new(OPENERS);
        let opened: Vec<Result<SqliteLog, LogError>> = thread::scope(|s| {
            let openers: Vec<_> = (0..OPENERS)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        SqliteLog::open(&path)
                    })
                })
                .collect();
            openers.into_iter().map(|t| t.join().unwrap()).collect()
        });
        for (i, log) in opened.iter().enumerate() {
            if let Err(err) = log {
                panic!("round {round}, opener {i}: {err}");
            }
        }
        // Every opener can use the log it got.
        for (i, log) in opened.iter().flatten().enumerate() {
            sample::seed(log, &sample::cast(&format!("c{i}")), 1);
        }
        drop(opened);
        let conn = Connection::open(&path).unwrap();
        assert_eq!(user_version(&conn), SCHEMA_VERSION, "round {round}");
    }
}

// A schema script that fails is named by its version; the error does not carry the script.
#[test]
fn a_failing_schema_script_is_named_without_its_sql() {
    let (_dir, path, err) = refused_after("CREATE TABLE checkpoints (x); PRAGMA user_version = 1;");
    let LogError::Open { source, .. } = &err else {
        panic!("expected an open error, got {err:?}");
    };
    let message = source.to_string();
    assert!(
        message.starts_with("applying schema version 2: table checkpoints already exists"),
        "{message}"
    );
    assert!(!message.contains("CREATE"), "{message}");
    assert!(message.len() < 200, "{message}");
    // Nothing of the failed upgrade stays behind.
    assert_eq!(user_version(&Connection::open(&path).unwrap()), 1);
}

#[test]
fn an_empty_file_is_opened_as_a_new_log() {
    let (_dir, path) = scratch();
    std::fs::write(&path, b"").unwrap();
    let log = SqliteLog::open(&path).unwrap();
    assert!(log.casts().unwrap().is_empty());
    sample::seed(&log, &sample::cast("c"), 2);
    drop(log);
    assert_eq!(
        user_version(&Connection::open(&path).unwrap()),
        SCHEMA_VERSION
    );
}

/// `open_existing` (what commands that need a log use) never makes a log: an empty file, a
/// SQLite file without castlog's schema and a missing path are refused and left as they were.
#[rstest]
#[case::missing(None)]
#[case::empty(Some(""))]
#[case::blank_sqlite(Some("VACUUM"))]
fn opening_an_existing_log_where_there_is_none_writes_nothing(#[case] made: Option<&str>) {
    let (dir, path) = scratch();
    match made {
        Some("") => std::fs::write(&path, b"").unwrap(),
        Some(sql) => Connection::open(&path).unwrap().execute_batch(sql).unwrap(),
        None => {}
    }
    let before = std::fs::read(&path).ok();
    let err = SqliteLog::open_existing(&path).unwrap_err();
    assert!(matches!(err, LogError::NoDatabase { .. }), "{err}");
    assert_eq!(std::fs::read(&path).ok(), before);
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(files, usize::from(before.is_some()));
    // A log there opens.
    drop(SqliteLog::open(&path).unwrap());
    assert!(
        SqliteLog::open_existing(&path)
            .unwrap()
            .casts()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_text_file_is_refused_as_an_open_error() {
    let (_dir, path) = scratch();
    let text = b"this is a shopping list, not a database\n- eggs\n- milk\n";
    std::fs::write(&path, text).unwrap();
    let err = SqliteLog::open(&path).unwrap_err();
    match &err {
        LogError::Open {
            path: shown,
            source,
        } => {
            let message = source.to_string();
            assert_eq!(shown, &path.display().to_string());
            assert!(message.contains("not a SQLite database"), "{message}");
        }
        other => panic!("expected an open error, got {other:?}"),
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        text,
        "the refused file was changed"
    );
}

#[test]
fn a_foreign_sqlite_file_is_refused_as_an_open_error() {
    let (_dir, path) = scratch();
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('soup');",
        )
        .unwrap();
        assert_eq!(user_version(&conn), 0);
    }
    let err = SqliteLog::open(&path).unwrap_err();
    match &err {
        LogError::Open {
            path: shown,
            source,
        } => {
            let message = source.to_string();
            assert_eq!(shown, &path.display().to_string());
            assert!(message.contains("not a castlog database"), "{message}");
        }
        other => panic!("expected an open error, got {other:?}"),
    }
    let conn = Connection::open(&path).unwrap();
    assert_eq!(user_version(&conn), 0);
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tables, 1, "the refused file got castlog tables");
    // Regression: the refusal happens before WAL mode (a persistent change) is switched on.
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete", "the refused file was switched to WAL");
}

#[test]
fn a_file_from_a_newer_castlog_is_refused() {
    let (_dir, path, err) = refused_after("PRAGMA user_version = 99;");
    match err {
        LogError::SchemaTooNew {
            path: shown,
            found,
            supported,
        } => {
            assert_eq!(shown, path.display().to_string());
            assert_eq!((found, supported), (99, SCHEMA_VERSION));
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
}

#[rstest]
#[case::update_a_payload("UPDATE events SET payload = x'7b7d' WHERE seq = 2")]
#[case::update_every_seq("UPDATE events SET seq = seq + 100")]
#[case::delete_one_row("DELETE FROM events WHERE seq = 2")]
#[case::delete_every_row("DELETE FROM events")]
fn stored_events_cannot_be_changed_through_sql(#[case] sql: &str) {
    let (_dir, path) = scratch();
    let cast = sample::cast("c");
    let records = {
        let log = open_sqlite(&path);
        sample::seed(&log, &cast, 3)
    };
    let conn = Connection::open(&path).unwrap();
    let err = conn.execute(sql, []).unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
    drop(conn);
    let log = open_sqlite(&path);
    assert_eq!(log.read(&cast, Seq::FIRST, None).unwrap(), records);
    let head = log.head(&cast).unwrap().unwrap();
    assert_eq!(verify_cast(&log, &head).unwrap().problems, vec![]);
}

#[test]
fn everything_survives_a_reopen() {
    let (_dir, path) = scratch();
    let (written, heads, origin, recast) = {
        let log = SqliteLog::open(&path).unwrap();
        let written = sample::populate(&log);
        let origin = log.read(&written.origin, Seq::FIRST, None).unwrap();
        let recast = log.read(&written.recast, Seq::FIRST, None).unwrap();
        (written, log.casts().unwrap(), origin, recast)
    };
    let log = SqliteLog::open(&path).unwrap();
    assert_eq!(log.casts().unwrap(), heads);
    assert_eq!(log.read(&written.origin, Seq::FIRST, None).unwrap(), origin);
    assert_eq!(log.read(&written.recast, Seq::FIRST, None).unwrap(), recast);
    for blob in &written.blobs {
        assert!(log.get_blob(blob).unwrap().is_some());
    }
    // The reopened log continues the chain where it stopped.
    let more = log
        .append(&written.origin, Seq(7), &sample::batch(50, 1))
        .unwrap();
    assert_eq!(more[0].prev, origin[5].hash);
}

/// An event row's id is its address (`cast key * 2^32 + seq`, schema v6): every row of two
/// casts appended in turns sits at its address and reads back in order. A cast whose head is
/// at the last seq the format has refuses the next append by name, and stores nothing.
#[test]
fn events_are_addressed_by_cast_and_seq_and_a_cast_stops_at_the_last_seq() {
    let (_dir, path) = scratch();
    let (a, b) = (sample::cast("a"), sample::cast("b"));
    {
        let log = open_sqlite(&path);
        for round in 0..3u64 {
            for cast in [&a, &b] {
                log.append(cast, Seq(round * 2 + 1), &sample::batch(round * 2, 2))
                    .unwrap();
            }
        }
        for cast in [&a, &b] {
            let seqs: Vec<u64> = log
                .read(cast, Seq::FIRST, None)
                .unwrap()
                .iter()
                .map(|r| r.seq.get())
                .collect();
            assert_eq!(seqs, (1..=6).collect::<Vec<_>>());
            let tail: Vec<u64> = log
                .read(cast, Seq(5), None)
                .unwrap()
                .iter()
                .map(|r| r.seq.get())
                .collect();
            assert_eq!(tail, vec![5, 6]);
        }
    }
    let misplaced = "SELECT count(*) FROM events WHERE id != cast_id * 4294967296 + seq";
    assert_eq!(count(&path, misplaced), 0);
    assert_eq!(count(&path, "SELECT count(*) FROM events"), 12);

    Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE casts SET head_seq = ?1 WHERE cast_id = 'a'",
            [castlog_events::sqlite::MAX_SEQ as i64],
        )
        .unwrap();
    let log = open_sqlite(&path);
    let err = log
        .append(
            &a,
            Seq(castlog_events::sqlite::MAX_SEQ + 1),
            &sample::batch(6, 1),
        )
        .unwrap_err();
    assert!(
        matches!(&err, LogError::Storage { .. }) && err.to_string().contains("past seq 4294967295"),
        "{err}"
    );
    drop(log);
    assert_eq!(count(&path, "SELECT count(*) FROM events"), 12);
}

/// The v6 upgrade of a file whose events table was damaged under version 5 (rebuilt without
/// its UNIQUE index, NOT NULLs and column types, then a second copy of a seq, seqs and cast keys no event can have, a
/// key stored as text, a NULL, a row id of 0) keeps every row with its values: the cast reads
/// back whole, the rows that cannot be placed are copied verbatim into `events_apart` and
/// listed by `misplaced_events`, and the CHECK that ties an id to its cast and seq refuses an
/// insert that does not set the id (what a castlog older than v6 would write).
#[test]
fn upgrading_damaged_events_keeps_every_row_and_lists_the_misplaced() {
    let (_dir, path) = scratch();
    let cast = sample::cast("c");
    let records = {
        let log = open_sqlite(&path);
        sample::seed(&log, &cast, 6)
    };
    let copy = |cast_id: &str, seq: &str, payload: &str, of: u64| {
        format!(
            "INSERT INTO events SELECT {cast_id}, {seq}, at_ms, kind, v, {payload}, prev, hash
                 FROM events WHERE seq = {of} LIMIT 1;"
        )
    };
    let damage = [
        copy("cast_id", "seq", "payload", 4),
        copy("cast_id", "-1", "payload", 2),
        copy("cast_id", "2.5", "payload", 2),
        copy("2147483648", "1", "payload", 1),
        copy("'1'", "3", "payload", 3),
        copy("cast_id", "seq", "NULL", 5),
        "INSERT INTO events (rowid, cast_id, seq, at_ms, kind, v, payload, prev, hash)
             SELECT 0, cast_id, -5, at_ms, kind, v, payload, prev, hash FROM events
                 WHERE seq = 1 LIMIT 1;"
            .to_owned(),
    ]
    .concat();
    Connection::open(&path)
        .unwrap()
        .execute_batch(&format!(
            "DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete;
             DROP TRIGGER casts_no_delete; DROP TABLE events_apart;
             CREATE TABLE events_v5 (cast_id, seq, at_ms, kind, v, payload, prev, hash);
             INSERT INTO events_v5 SELECT cast_id, seq, at_ms, kind, v, payload, prev, hash
                 FROM events ORDER BY id;
             DROP TABLE events;
             ALTER TABLE events_v5 RENAME TO events;
             {damage}
             PRAGMA user_version = 5;"
        ))
        .unwrap();

    let log = open_sqlite(&path);
    assert_eq!(log.read(&cast, Seq::FIRST, None).unwrap(), records);
    assert_eq!(count(&path, "SELECT count(*) FROM events"), 6);
    assert_eq!(count(&path, "SELECT count(*) FROM events_apart"), 7);
    assert_eq!(
        count(
            &path,
            "SELECT count(*) FROM events_apart WHERE typeof(cast_id) = 'text'"
        ),
        1,
        "a key stored as text stays text"
    );
    let found: Vec<(i64, Option<u64>, String, String, bool)> = log
        .misplaced_events(None)
        .unwrap()
        .into_iter()
        .map(|m| match m.place {
            Place::Apart { old_row, shadowed } => {
                (old_row, m.seq.map(Seq::get), m.key, m.seq_shown, shadowed)
            }
            Place::InPlace { .. } => panic!("nothing was changed in place: {m:?}"),
        })
        .collect();
    let row = |old: i64, seq: Option<u64>, key: &str, shown: &str, shadowed: bool| {
        (old, seq, key.to_owned(), shown.to_owned(), shadowed)
    };
    assert_eq!(
        found,
        vec![
            row(0, None, "1", "-5", false),
            row(7, Some(4), "1", "4", true),
            row(8, None, "1", "-1", false),
            row(9, None, "1", "2.5", false),
            row(10, None, "2147483648", "1", false),
            row(11, None, "'1'", "3", false),
            row(12, Some(5), "1", "5", true),
        ]
    );
    // Only the rows of the casts asked about; healthy files list nothing.
    let other = sample::cast("other");
    assert_eq!(log.misplaced_events(Some(&[other])).unwrap(), vec![]);
    assert_eq!(
        log.misplaced_events(Some(std::slice::from_ref(&cast)))
            .unwrap()
            .len(),
        6
    );
    let (_other, healthy) = scratch();
    let fresh = open_sqlite(&healthy);
    sample::seed(&fresh, &cast, 3);
    assert_eq!(fresh.misplaced_events(None).unwrap(), vec![]);

    let old_writer = Connection::open(&path).unwrap().execute(
        "INSERT INTO events (cast_id, seq, at_ms, kind, v, payload, prev, hash)
         VALUES (1, 3, 0, 'k', 1, x'7b7d', x'00', x'00')",
        [],
    );
    let err = old_writer.unwrap_err().to_string();
    assert!(err.contains("CHECK constraint failed"), "{err}");
    assert_eq!(count(&path, "SELECT count(*) FROM events"), 6);
}

/// A file written at schema version 8 (before the run queue's tables were in the schema)
/// opens, gets the tables, and reads and verifies as it did; one whose queue a command had
/// made already keeps its rows.
#[rstest]
#[case::without_the_queue(true)]
#[case::with_the_queue_made_by_a_command(false)]
fn a_version_8_file_gets_the_queue_tables(#[case] without_queue: bool) {
    use castlog_events::queue::RunQueue;

    let (_dir, path) = scratch();
    let cast = sample::cast("c");
    let records = {
        let log = open_sqlite(&path);
        log.submit(&cast, "cmd:true", 7).unwrap();
        sample::seed(&log, &cast, 4)
    };
    let downgrade = if without_queue {
        "DROP TABLE castlog_queue; DROP TABLE castlog_slots; PRAGMA user_version = 8;"
    } else {
        "PRAGMA user_version = 8;"
    };
    Connection::open(&path)
        .unwrap()
        .execute_batch(downgrade)
        .unwrap();

    let log = open_sqlite(&path);
    assert_eq!(count(&path, "PRAGMA user_version"), SCHEMA_VERSION);
    let tables = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('castlog_queue', 'castlog_slots')";
    assert_eq!(count(&path, tables), 2);
    let queued: Vec<_> = log.entries().unwrap().into_iter().map(|e| e.cast).collect();
    assert_eq!(
        queued,
        if without_queue {
            vec![]
        } else {
            vec![cast.clone()]
        }
    );
    assert_eq!(log.read(&cast, Seq::FIRST, None).unwrap(), records);
    let head = log.head(&cast).unwrap().unwrap();
    assert_eq!(verify_cast(&log, &head).unwrap().problems, vec![]);
}

/// A file written at schema version 6 (before the index of claim events) opens, gets the
/// index, and reads and verifies as it did; its claim events are all in the index.
#[test]
fn a_version_6_file_gets_the_index_of_claim_events() {
    use castlog_core::claims::EVENT_KINDS;
    use castlog_core::event::{Event, PostStaged};
    use castlog_core::id::ClaimId;
    use std::ops::ControlFlow;

    let (_dir, path) = scratch();
    let cast = sample::cast("c");
    let records = {
        let log = open_sqlite(&path);
        let mut records = sample::seed(&log, &cast, 4);
        let staged = Event::from(PostStaged {
            claim: ClaimId::new("k"),
            message_id: "m".into(),
        });
        records.extend(
            log.append(&cast, Seq(5), &[castlog_events::Pending::new(9, &staged)])
                .unwrap(),
        );
        records
    };
    Connection::open(&path)
        .unwrap()
        .execute_batch("DROP INDEX events_claims; PRAGMA user_version = 6;")
        .unwrap();
    let index = "SELECT count(*) FROM sqlite_master WHERE name = 'events_claims'";
    assert_eq!(count(&path, index), 0);

    let log = open_sqlite(&path);
    assert_eq!(count(&path, "PRAGMA user_version"), SCHEMA_VERSION);
    assert_eq!(count(&path, index), 1);
    assert_eq!(
        count(
            &path,
            "SELECT count(*) FROM events INDEXED BY events_claims WHERE kind IN ('post_claimed', 'post_staged', 'post_refused', 'post_outcome_unknown', 'post_resolved', 'post_response_recorded')"
        ),
        1
    );
    assert_eq!(log.read(&cast, Seq::FIRST, None).unwrap(), records);
    let head = log.head(&cast).unwrap().unwrap();
    assert_eq!(verify_cast(&log, &head).unwrap().problems, vec![]);
    let mut claims = Vec::new();
    log.scan_kinds(&EVENT_KINDS, None, &mut |r| {
        claims.push(r);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(claims, records[4..]);
    drop(log);
    // Without the index (a file it was dropped from) the same rows are read from the table.
    Connection::open(&path)
        .unwrap()
        .execute_batch("DROP INDEX events_claims")
        .unwrap();
    let log = open_sqlite(&path);
    let mut unindexed = Vec::new();
    log.scan_kinds(&EVENT_KINDS, None, &mut |r| {
        unindexed.push(r);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(unindexed, claims);
}
