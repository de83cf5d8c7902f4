//! Damage made in code through a raw SQLite connection, after the log is closed. `verify` must
//! name the damaged cast and the exact seq, and leave the other cast alone.

use std::path::{Path, PathBuf};

use castlog_core::id::Seq;
use castlog_events::EventLog;
use castlog_events::verify::{ProblemKind, verify_cast};
use rstest::rstest;
use rusqlite::{Connection, params};
use tempfile::TempDir;

use super::backend::{open_sqlite, scratch};
use super::sample;

/// Events in the damaged cast.
const EVENTS: i64 = 6;
/// The damaged cast's row key in `events.cast_id`.
const VICTIM: &str = "(SELECT id FROM casts WHERE cast_id = 'victim')";

/// A closed log file holding `victim` (6 events) and `bystander` (4 events), their rows
/// interleaved in storage.
fn closed_log() -> (TempDir, PathBuf) {
    let (dir, path) = scratch();
    let log = open_sqlite(&path);
    let (victim, bystander) = (sample::cast("victim"), sample::cast("bystander"));
    sample::seed(&log, &bystander, 2);
    sample::seed(&log, &victim, 3);
    log.append(&bystander, Seq(3), &sample::batch(2, 2))
        .unwrap();
    log.append(&victim, Seq(4), &sample::batch(3, 3)).unwrap();
    (dir, path)
}

fn damage(path: &Path, sql: &str) {
    Connection::open(path).unwrap().execute_batch(sql).unwrap();
}

/// Every problem `verify` reports in the file, as (cast, seq, kind), cast by cast.
fn problems(path: &Path) -> Vec<(String, u64, ProblemKind)> {
    let log = open_sqlite(path);
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
fn an_undamaged_file_verifies() {
    let (_dir, path) = closed_log();
    assert_eq!(problems(&path), vec![]);
}

#[rstest]
#[case::first(1)]
#[case::middle(3)]
#[case::last(6)]
fn a_flipped_payload_byte_is_a_hash_mismatch_at_its_seq(#[case] seq: i64) {
    let (_dir, path) = closed_log();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("DROP TRIGGER events_no_update").unwrap();
    let select = format!("SELECT payload FROM events WHERE cast_id = {VICTIM} AND seq = ?1");
    let mut payload: Vec<u8> = conn.query_row(&select, [seq], |r| r.get(0)).unwrap();
    let middle = payload.len() / 2;
    payload[middle] ^= 0x01;
    let update = format!("UPDATE events SET payload = ?1 WHERE cast_id = {VICTIM} AND seq = ?2");
    assert_eq!(conn.execute(&update, params![payload, seq]).unwrap(), 1);
    drop(conn);
    assert_eq!(problems(&path), victim(seq, ProblemKind::HashMismatch));
}

#[rstest]
#[case::first(1)]
#[case::middle(3)]
#[case::second_to_last(5)]
fn a_deleted_row_is_missing_at_its_seq(#[case] seq: i64) {
    let (_dir, path) = closed_log();
    damage(
        &path,
        &format!(
            "DROP TRIGGER events_no_delete;
             DELETE FROM events WHERE cast_id = {VICTIM} AND seq = {seq};"
        ),
    );
    // The next event keeps its link as the deleted one's hash (schema v11), so its own hash
    // cannot be checked: it is named too.
    let mut expected = victim(seq, ProblemKind::Missing);
    expected.extend(victim(seq + 1, ProblemKind::Unreadable));
    assert_eq!(problems(&path), expected);
}

#[rstest]
#[case::adjacent(1, 2)]
#[case::apart(2, 5)]
#[case::at_the_tail(5, 6)]
fn swapped_rows_are_reported_from_the_first_swapped_seq(#[case] first: i64, #[case] second: i64) {
    let (_dir, path) = closed_log();
    // The seq columns are swapped (through a temporary seq); the rows keep their addresses,
    // which a CHECK ties to the seq, so the tampering turns checks off.
    damage(
        &path,
        &format!(
            "PRAGMA ignore_check_constraints = ON;
             DROP TRIGGER events_no_update;
             UPDATE events SET seq = -1 WHERE cast_id = {VICTIM} AND seq = {first};
             UPDATE events SET seq = {first} WHERE cast_id = {VICTIM} AND seq = {second};
             UPDATE events SET seq = {second} WHERE cast_id = {VICTIM} AND seq = -1;"
        ),
    );
    let found = problems(&path);
    assert!(!found.is_empty());
    assert_eq!((found[0].0.as_str(), found[0].1), ("victim", first as u64));
    for (cast, seq, _) in &found {
        assert_eq!(cast, "victim");
        assert!(
            (first as u64..=second as u64 + 1).contains(seq),
            "problem outside the swapped span: {found:?}"
        );
    }
}

#[rstest]
#[case::last_row(1)]
#[case::two_rows(2)]
#[case::all_but_one(5)]
fn a_truncated_tail_is_missing_from_the_first_deleted_seq(#[case] deleted: i64) {
    let (_dir, path) = closed_log();
    // The casts table still records the old head, which is how the truncation shows.
    damage(
        &path,
        &format!(
            "DROP TRIGGER events_no_delete;
             DELETE FROM events WHERE cast_id = {VICTIM} AND seq > {};",
            EVENTS - deleted
        ),
    );
    let first_deleted = EVENTS - deleted + 1;
    assert_eq!(problems(&path), victim(first_deleted, ProblemKind::Missing));
}

#[rstest]
#[case::first(1)]
#[case::middle(3)]
#[case::last(6)]
fn a_duplicated_seq_is_reported_at_that_seq(#[case] seq: i64) {
    let (_dir, path) = closed_log();
    // An event's address (its row id) is unique by the table's definition, so rebuild the
    // table with the address as a plain column (keeping rowids, hence storage order), then
    // store a copy of one row, address and all.
    damage(
        &path,
        &format!(
            "CREATE TABLE events_loose (
                 id INTEGER NOT NULL,
                 cast_id INTEGER NOT NULL, seq INTEGER NOT NULL, at_ms INTEGER NOT NULL,
                 kind TEXT NOT NULL, v INTEGER NOT NULL, payload BLOB NOT NULL,
                 prev BLOB NOT NULL, hash BLOB NOT NULL
             );
             INSERT INTO events_loose (rowid, id, cast_id, seq, at_ms, kind, v, payload, prev, hash)
                 SELECT rowid, id, cast_id, seq, at_ms, kind, v, payload, prev, hash FROM events;
             DROP TABLE events;
             ALTER TABLE events_loose RENAME TO events;
             INSERT INTO events (id, cast_id, seq, at_ms, kind, v, payload, prev, hash)
                 SELECT id, cast_id, seq, at_ms, kind, v, payload, prev, hash FROM events
                 WHERE cast_id = {VICTIM} AND seq = {seq};"
        ),
    );
    assert_eq!(problems(&path), victim(seq, ProblemKind::Duplicate));
}

#[rstest]
#[case::a_short_hash_first("hash", 1)]
#[case::a_short_hash_in_the_middle("hash", 4)]
#[case::a_short_prev_last("prev", 6)]
fn an_unreadable_digest_is_reported_at_its_seq(#[case] column: &str, #[case] seq: i64) {
    let (_dir, path) = closed_log();
    damage(
        &path,
        &format!(
            "DROP TRIGGER events_no_update;
             UPDATE events SET {column} = x'010203' WHERE cast_id = {VICTIM} AND seq = {seq};"
        ),
    );
    let mut expected = victim(seq, ProblemKind::Unreadable);
    if column == "hash" {
        // The next event's link is this hash (schema v11 stores it once).
        expected.extend(victim(seq + 1, ProblemKind::Unreadable));
    }
    assert_eq!(problems(&path), expected);
}

// Regression: a row that did not decode ended the read of its cast, so nothing after it was
// checked (and `verify --json` printed nothing).
#[rstest]
#[case::kind_not_utf8("kind = CAST(x'ff' AS TEXT)", 2)]
#[case::payload_as_text("payload = CAST(payload AS TEXT)", 3)]
#[case::payload_as_integer("payload = 7", 1)]
#[case::hash_as_text("hash = 'abc'", 4)]
fn a_row_that_does_not_decode_is_unreadable_at_its_seq_and_the_rows_after_it_are_checked(
    #[case] set: &str,
    #[case] seq: i64,
) {
    let (_dir, path) = closed_log();
    damage(
        &path,
        &format!(
            "DROP TRIGGER events_no_update;
             UPDATE events SET {set} WHERE cast_id = {VICTIM} AND seq = {seq};
             UPDATE events SET at_ms = at_ms + 1 WHERE cast_id = {VICTIM} AND seq = 6;"
        ),
    );
    let mut expected = victim(seq, ProblemKind::Unreadable);
    if set.starts_with("hash") {
        // The next event's link is this hash (schema v11 stores it once).
        expected.extend(victim(seq + 1, ProblemKind::Unreadable));
    }
    expected.extend(victim(6, ProblemKind::HashMismatch));
    assert_eq!(problems(&path), expected);
}

/// The leaf pages of the events table in key order, each with its number of rows.
fn event_leaves(path: &Path) -> Vec<(i64, u64)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT pageno, ncell FROM dbstat
             WHERE name = 'events' AND pagetype = 'leaf' ORDER BY path",
        )
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn smash_page(path: &Path, page: i64) {
    let size: i64 = Connection::open(path)
        .unwrap()
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    let start = ((page - 1) * size) as usize;
    bytes[start..start + 8].fill(0x42);
    std::fs::write(path, bytes).unwrap();
}

// Regression: a page SQLite finds damaged ended the read of its cast. Its rows are one
// unreadable span and the rows after it are checked; at the end of a cast whose (damaged)
// head names a seq far past its rows, the read past the page is bounded.
#[rstest]
#[case::in_the_middle(2, None)]
#[case::last_under_a_head_far_past_it(usize::MAX, Some(u32::MAX as i64))]
fn a_damaged_page_is_one_unreadable_span(#[case] leaf: usize, #[case] head: Option<i64>) {
    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    let cast = sample::cast("victim");
    // Enough rows for more than three leaf pages.
    sample::seed(&log, &cast, 1200);
    drop(log);
    let leaves = event_leaves(&path);
    assert!(leaves.len() > 3, "{leaves:?}");
    let leaf = leaf.min(leaves.len() - 1);
    let first = leaves[..leaf].iter().map(|l| l.1).sum::<u64>() + 1;
    if let Some(seq) = head {
        damage(&path, &format!("UPDATE casts SET head_seq = {seq}"));
    }
    smash_page(&path, leaves[leaf].0);
    let found = problems(&path);
    assert_eq!(
        found[0],
        ("victim".to_owned(), first, ProblemKind::Unreadable)
    );
    match head {
        // The row after the page keeps its link as the hash of the page's last row (schema
        // v11 stores it once): it is named too.
        None => assert_eq!(
            found[1..],
            [(
                "victim".to_owned(),
                first + leaves[leaf].1,
                ProblemKind::Unreadable
            )],
            "{found:?}"
        ),
        Some(_) => {
            assert_eq!(found.len(), 2, "{found:?}");
            assert_eq!(found[1].2, ProblemKind::Missing);
        }
    }
}
