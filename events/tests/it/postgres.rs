//! The PostgreSQL log's own guarantees, on a fresh schema per test: damage made in code
//! through a plain client (triggers dropped first) is named by `verify` at the exact cast
//! and seq, as on SQLite; the triggers refuse changes; the schema is versioned; a stale
//! writer on another connection gets a `Conflict`.

use std::sync::Barrier;

use castlog_core::id::Seq;
use castlog_events::verify::{ProblemKind, verify_cast};
use castlog_events::{EventLog, LogError, PostgresLog};
use rstest::rstest;

use super::backend::{ScratchSchema, scratch_schema};
use super::sample;

/// The damaged cast's key in `events.cast_key`.
const VICTIM: &str = "(SELECT id FROM casts WHERE cast_id = 'victim')";

/// A schema holding `victim` (6 events) and `bystander` (4 events), the log closed.
fn closed_log() -> ScratchSchema {
    let schema = scratch_schema();
    let log = PostgresLog::open(&schema.url()).unwrap();
    let (victim, bystander) = (sample::cast("victim"), sample::cast("bystander"));
    sample::seed(&log, &bystander, 2);
    sample::seed(&log, &victim, 3);
    log.append(&bystander, Seq(3), &sample::batch(2, 2))
        .unwrap();
    log.append(&victim, Seq(4), &sample::batch(3, 3)).unwrap();
    schema
}

fn damage(schema: &ScratchSchema, sql: &str) {
    schema.client().batch_execute(sql).unwrap();
}

/// Every problem `verify` reports, as (cast, seq, kind), cast by cast.
fn problems(schema: &ScratchSchema) -> Vec<(String, u64, ProblemKind)> {
    let log = PostgresLog::open_existing(&schema.url()).unwrap();
    let mut out = Vec::new();
    for head in log.casts().unwrap() {
        for problem in verify_cast(&log, &head).unwrap().problems {
            assert_eq!(problem.cast, head.cast);
            assert!(!problem.message.is_empty());
            out.push((problem.cast.to_string(), problem.seq.get(), problem.kind));
        }
    }
    out
}

fn victim(seq: i64, kind: ProblemKind) -> Vec<(String, u64, ProblemKind)> {
    vec![("victim".to_owned(), seq as u64, kind)]
}

#[test]
fn an_undamaged_schema_verifies() {
    let schema = closed_log();
    assert_eq!(problems(&schema), vec![]);
}

#[rstest]
#[case::first(1)]
#[case::middle(3)]
#[case::last(6)]
fn a_flipped_payload_byte_is_a_hash_mismatch_at_its_seq(#[case] seq: i64) {
    let schema = closed_log();
    // set_byte counts from 0; flip the low bit of the middle byte.
    damage(
        &schema,
        &format!(
            "DROP TRIGGER events_no_update ON events;
             UPDATE events SET payload = set_byte(payload, length(payload) / 2,
                                                  get_byte(payload, length(payload) / 2) # 1)
             WHERE cast_key = {VICTIM} AND seq = {seq};"
        ),
    );
    assert_eq!(problems(&schema), victim(seq, ProblemKind::HashMismatch));
}

#[rstest]
#[case::first(1)]
#[case::middle(3)]
#[case::last(6)]
fn a_flipped_hash_byte_is_named_at_its_seq(#[case] seq: i64) {
    let schema = closed_log();
    damage(
        &schema,
        &format!(
            "DROP TRIGGER events_no_update ON events;
             UPDATE events SET hash = set_byte(hash, 0, get_byte(hash, 0) # 128)
             WHERE cast_key = {VICTIM} AND seq = {seq};"
        ),
    );
    let found = problems(&schema);
    assert_eq!(
        found.first(),
        victim(seq, ProblemKind::HashMismatch).first(),
        "{found:?}"
    );
}

#[rstest]
#[case::first(1)]
#[case::middle(3)]
#[case::second_to_last(5)]
fn a_deleted_row_is_missing_at_its_seq(#[case] seq: i64) {
    let schema = closed_log();
    damage(
        &schema,
        &format!(
            "DROP TRIGGER events_no_delete ON events;
             DELETE FROM events WHERE cast_key = {VICTIM} AND seq = {seq};"
        ),
    );
    assert_eq!(problems(&schema), victim(seq, ProblemKind::Missing));
}

#[rstest]
#[case::one(1)]
#[case::three(3)]
fn a_truncated_tail_is_missing_from_the_first_deleted_seq(#[case] deleted: i64) {
    let schema = closed_log();
    damage(
        &schema,
        &format!(
            "DROP TRIGGER events_no_delete ON events;
             DELETE FROM events WHERE cast_key = {VICTIM} AND seq > 6 - {deleted};"
        ),
    );
    assert_eq!(problems(&schema), victim(7 - deleted, ProblemKind::Missing));
}

#[rstest]
#[case::a_short_hash_first("hash", 1)]
#[case::a_short_hash_in_the_middle("hash", 4)]
#[case::a_short_prev_last("prev", 6)]
fn an_unreadable_digest_is_reported_at_its_seq(#[case] column: &str, #[case] seq: i64) {
    let schema = closed_log();
    damage(
        &schema,
        &format!(
            "DROP TRIGGER events_no_update ON events;
             UPDATE events SET {column} = '\\x010203' WHERE cast_key = {VICTIM} AND seq = {seq};"
        ),
    );
    assert_eq!(problems(&schema), victim(seq, ProblemKind::Unreadable));
}

#[rstest]
#[case::update("UPDATE events SET at_ms = at_ms + 1", "UPDATE refused")]
#[case::delete("DELETE FROM events", "DELETE refused")]
#[case::truncate("TRUNCATE events", "TRUNCATE refused")]
#[case::delete_a_cast("DELETE FROM casts", "DELETE refused")]
fn the_triggers_refuse_changing_history(#[case] sql: &str, #[case] said: &str) {
    let schema = closed_log();
    let err = schema.client().batch_execute(sql).unwrap_err();
    let message = err
        .as_db_error()
        .map(|e| e.message().to_owned())
        .unwrap_or_default();
    assert!(message.contains(said), "{message}");
    assert_eq!(problems(&schema), vec![]);
}

#[test]
fn the_schema_version_is_recorded_and_a_newer_one_is_refused() {
    let schema = closed_log();
    let version: i32 = schema
        .client()
        .query_one("SELECT schema_version FROM castlog_meta", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, castlog_events::postgres::SCHEMA_VERSION);
    // Reopening an up-to-date schema applies nothing again.
    drop(PostgresLog::open(&schema.url()).unwrap());
    let casts: i64 = schema
        .client()
        .query_one("SELECT count(*) FROM casts", &[])
        .unwrap()
        .get(0);
    assert_eq!(casts, 2);
    damage(
        &schema,
        "UPDATE castlog_meta SET schema_version = schema_version + 1",
    );
    match PostgresLog::open_existing(&schema.url()).unwrap_err() {
        LogError::SchemaTooNew {
            found, supported, ..
        } => {
            assert_eq!(
                (found, supported),
                (i64::from(version) + 1, i64::from(version))
            );
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
}

/// A version-1 schema (the queue's tables absent, or created the way commands created them
/// before version 2) is upgraded by the next open: the queue's tables are there, the casts'
/// heads are as they were and verify clean.
#[rstest]
#[case::without_the_queue(true)]
#[case::with_the_queue_made_by_a_command(false)]
fn a_version_1_schema_is_upgraded_to_hold_the_queue(#[case] without_queue: bool) {
    let schema = closed_log();
    let before: Vec<_> = PostgresLog::open_existing(&schema.url())
        .unwrap()
        .casts()
        .unwrap();
    if without_queue {
        damage(
            &schema,
            "DROP TABLE castlog_queue; DROP TABLE castlog_slots;
             DROP TRIGGER events_announce ON events; DROP FUNCTION castlog_announce_append();
             DROP INDEX events_claims;",
        );
    }
    damage(&schema, "UPDATE castlog_meta SET schema_version = 1");
    let log = PostgresLog::open_existing(&schema.url()).unwrap();
    let version: i32 = schema
        .client()
        .query_one("SELECT schema_version FROM castlog_meta", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, 2);
    let queue: i64 = schema
        .client()
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema()
             AND tablename IN ('castlog_queue', 'castlog_slots')",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(queue, 2);
    let index: i64 = schema
        .client()
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_indexes WHERE schemaname = current_schema()
             AND indexname = 'events_claims'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(index, 1);
    assert!(log.listen_appends().unwrap().is_some());
    assert_eq!(log.casts().unwrap(), before);
    drop(log);
    assert_eq!(problems(&schema), vec![]);
}

#[test]
fn a_schema_without_castlog_tables_is_no_database_and_is_left_empty() {
    let schema = scratch_schema();
    match PostgresLog::open_existing(&schema.url()).unwrap_err() {
        LogError::NoDatabase { reason, .. } => assert!(reason.contains(schema.name()), "{reason}"),
        other => panic!("expected NoDatabase, got {other:?}"),
    }
    let tables: i64 = schema
        .client()
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 0);
}

#[test]
fn openers_racing_on_a_new_schema_apply_it_once() {
    let schema = scratch_schema();
    let url = schema.url();
    let barrier = Barrier::new(4);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                barrier.wait();
                PostgresLog::open(&url).unwrap();
            });
        }
    });
    let rows: i64 = schema
        .client()
        .query_one("SELECT count(*) FROM castlog_meta", &[])
        .unwrap()
        .get(0);
    assert_eq!(rows, 1);
}

#[test]
fn a_stale_writer_on_another_log_gets_a_conflict_and_writes_nothing() {
    let schema = scratch_schema();
    let (a, b) = (
        PostgresLog::open(&schema.url()).unwrap(),
        PostgresLog::open(&schema.url()).unwrap(),
    );
    let cast = sample::cast("shared");
    sample::seed(&a, &cast, 3);
    // Both believe seq 4 is next; the first to commit takes it.
    a.append(&cast, Seq(4), &sample::batch(3, 1)).unwrap();
    match b.append(&cast, Seq(4), &sample::batch(10, 2)).unwrap_err() {
        LogError::Conflict {
            cast: c,
            expected,
            found,
        } => assert_eq!((c, expected, found), (cast.clone(), Seq(4), Seq(5))),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let head = b.head(&cast).unwrap().unwrap();
    assert_eq!(head.seq, Seq(4));
    assert!(verify_cast(&b, &head).unwrap().problems.is_empty());
}

/// An append after a head the log committed itself is one statement that moves the head only
/// from that head: when another log moved it meanwhile, it writes nothing (not even its
/// blobs) and the stale writer gets the same `Conflict` as one that read the head.
#[test]
fn a_writer_whose_own_last_head_moved_gets_a_conflict_and_writes_nothing() {
    let schema = scratch_schema();
    let (a, b) = (
        PostgresLog::open(&schema.url()).unwrap(),
        PostgresLog::open(&schema.url()).unwrap(),
    );
    let cast = sample::cast("shared");
    sample::seed(&a, &cast, 3);
    b.append(&cast, Seq(4), &sample::batch(3, 1)).unwrap();
    // a last committed seq 3 and believes seq 4 is next.
    let blob = b"a blob only the stale append names".to_vec();
    let stale = a.append_with_blobs(
        &cast,
        Seq(4),
        std::slice::from_ref(&blob),
        &sample::batch(10, 2),
    );
    match stale.unwrap_err() {
        LogError::Conflict {
            cast: c,
            expected,
            found,
        } => assert_eq!((c, expected, found), (cast.clone(), Seq(4), Seq(5))),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(
        a.get_blob(&castlog_events::chain::blob_hash(&blob))
            .unwrap(),
        None
    );
    // b goes on from the head it committed; a, told where the head is, goes on after it.
    b.append(&cast, Seq(5), &sample::batch(4, 1)).unwrap();
    a.append(&cast, Seq(6), &sample::batch(5, 2)).unwrap();
    a.append(&cast, Seq(8), &sample::batch(7, 1)).unwrap();
    let head = b.head(&cast).unwrap().unwrap();
    assert_eq!(head.seq, Seq(8));
    assert!(verify_cast(&b, &head).unwrap().problems.is_empty());
    let stored = b.read(&cast, Seq::FIRST, None).unwrap();
    let expected: Vec<_> = (0..8).map(sample::event).collect();
    let found: Vec<_> = stored.iter().map(|r| r.event().unwrap()).collect();
    assert_eq!(found, expected);
}

/// Four logs appending to one cast as fast as they can, each from the head it last saw:
/// every append lands exactly once, in one unbroken chain.
#[test]
fn writers_racing_on_one_cast_take_turns_and_leave_one_chain() {
    let schema = scratch_schema();
    let url = schema.url();
    let cast = sample::cast("contended");
    let logs: Vec<PostgresLog> = (0..4).map(|_| PostgresLog::open(&url).unwrap()).collect();
    sample::seed(&logs[0], &cast, 1);
    let barrier = Barrier::new(4);
    let (writers, appends) = (4u64, 15u64);
    let conflicts: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = logs
            .iter()
            .enumerate()
            .map(|(i, log)| {
                let (cast, barrier) = (&cast, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let (mut done, mut conflicts) = (0, 0);
                    let mut next = log.head(cast).unwrap().unwrap().seq.next();
                    while done < appends {
                        let event = sample::batch(100 * i as u64 + done, 1);
                        match log.append(cast, next, &event) {
                            Ok(records) => {
                                done += 1;
                                next = records[0].seq.next();
                            }
                            Err(LogError::Conflict { found, .. }) => {
                                conflicts += 1;
                                next = found;
                            }
                            Err(other) => panic!("{other:?}"),
                        }
                    }
                    conflicts
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let log = PostgresLog::open_existing(&url).unwrap();
    let head = log.head(&cast).unwrap().unwrap();
    assert_eq!(
        head.seq,
        Seq(1 + writers * appends),
        "{conflicts} conflicts"
    );
    assert!(verify_cast(&log, &head).unwrap().problems.is_empty());
}

#[test]
fn writers_racing_to_create_one_cast_leave_one_chain() {
    let schema = scratch_schema();
    let url = schema.url();
    let cast = sample::cast("born");
    let logs: Vec<PostgresLog> = (0..4).map(|_| PostgresLog::open(&url).unwrap()).collect();
    let barrier = Barrier::new(4);
    let results: Vec<Result<(), LogError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4u64)
            .zip(&logs)
            .map(|(i, log)| {
                let (cast, barrier) = (&cast, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    log.append(cast, Seq::FIRST, &sample::batch(i * 10, 2))
                        .map(|_| ())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    for err in results.into_iter().filter_map(Result::err) {
        assert!(
            matches!(
                err,
                LogError::Conflict {
                    expected: Seq(1),
                    found: Seq(3),
                    ..
                }
            ),
            "{err:?}"
        );
    }
    let log = PostgresLog::open_existing(&url).unwrap();
    let head = log.head(&cast).unwrap().unwrap();
    assert_eq!(head.seq, Seq(2));
    assert!(verify_cast(&log, &head).unwrap().problems.is_empty());
}

#[test]
fn an_unreachable_server_is_an_open_error_naming_it_without_its_password() {
    let err = PostgresLog::open("postgres://castlog:secret@127.0.0.1:1/none").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LogError::Open { .. }), "{err:?}");
    assert!(
        text.contains("127.0.0.1:1") && !text.contains("secret"),
        "{text}"
    );
}
