//! Durability in SQLite files: the WAL grown before a drive, begun appends held and made
//! durable by the syncer, a conflict with another writer, checkpoints, a symlinked file.

use castlog_core::id::Seq;
use castlog_events::verify::verify_cast;
use castlog_events::{EventLog, SqliteLog};
use rstest::rstest;
use rusqlite::Connection;

use super::backend::{open_sqlite, scratch};
use super::sample;

/// `prepare_for_steps` grows the WAL file to its working size (fsync per commit only) without
/// writing anything into the database; the log works as before and survives a reopen.
#[test]
fn preparing_for_steps_grows_the_wal_and_writes_nothing() {
    let (_dir, path) = scratch();
    let wal = path.with_file_name("castlog.db-wal");
    let log = SqliteLog::open(&path).unwrap();
    log.prepare_for_steps();
    assert!(std::fs::metadata(&wal).unwrap().len() >= 3_000_000);
    let cast = sample::cast("after");
    sample::seed(&log, &cast, 5);
    drop(log);
    let conn = Connection::open(&path).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        tables,
        [
            "blob_index",
            "blob_index_upto",
            "blobs",
            "castlog_queue",
            "castlog_slots",
            "casts",
            "checkpoints",
            "chunks",
            "events",
            "events_apart"
        ]
    );
    drop(conn);
    let log = SqliteLog::open(&path).unwrap();
    assert_eq!(log.head(&cast).unwrap().unwrap().seq, Seq(5));
    assert!(
        verify_cast(&log, &log.head(&cast).unwrap().unwrap())
            .unwrap()
            .problems
            .is_empty()
    );
    drop(log);

    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    log.prepare_for_steps();
    let wal = path.with_file_name("castlog.db-wal");
    assert!(
        std::fs::metadata(&wal).map_or(0, |m| m.len()) < 1_000_000,
        "normal durability: no growth"
    );
}

/// With full durability begun appends are held in one transaction, committed without an fsync
/// of its own when one of them is waited for, and made durable by the syncer: nobody reads
/// them before, all of them are there for the next opener, and a later append with its own
/// fsync covers what was begun before it.
#[test]
fn begun_appends_with_full_durability_are_held_then_made_durable_by_the_syncer() {
    let (_dir, path) = scratch();
    let cast = sample::cast("piped");
    {
        let log = SqliteLog::open_with(&path, castlog_events::Durability::Full).unwrap();
        let before = log.commits();
        let mut begun = Vec::new();
        for i in 0..6u64 {
            let body = sample::text(i, 5_000);
            begun.push(
                log.begin_append_with_blobs(
                    &cast,
                    Seq(1 + 2 * i),
                    std::slice::from_ref(&body),
                    &sample::batch(2 * i, 2),
                )
                .unwrap(),
            );
        }
        assert_eq!(log.commits(), before, "held in one open transaction");
        let other = SqliteLog::open(&path).unwrap();
        assert_eq!(
            other.head(&cast).unwrap(),
            None,
            "not readable before a wait"
        );
        for appending in begun.drain(..3) {
            appending.wait().unwrap();
        }
        assert_eq!(log.commits() - before, 1, "one commit for the six");
        assert_eq!(other.head(&cast).unwrap().unwrap().seq, Seq(12));
        drop(other);
        // An ordinary append (its own fsync) after three that were not waited for.
        log.append(&cast, Seq(13), &sample::batch(12, 1)).unwrap();
        for appending in begun {
            appending.wait().unwrap();
        }
    }
    let log = SqliteLog::open(&path).unwrap();
    let events = log.read(&cast, Seq::FIRST, None).unwrap();
    assert_eq!(events.len(), 13);
    for i in 0..6u64 {
        let body = sample::text(i, 5_000);
        assert_eq!(
            log.get_blob(&castlog_events::chain::blob_hash(&body))
                .unwrap(),
            Some(body)
        );
    }
    let head = log.head(&cast).unwrap().unwrap();
    assert!(verify_cast(&log, &head).unwrap().problems.is_empty());
}

/// Begun appends are held without a lock: another writer may move the cast's head meanwhile.
/// Then the held ones are not stored, their waiter is told of the conflict, the other
/// writer's events stay, and the cast verifies.
#[test]
fn held_appends_that_another_writer_overtook_are_refused_as_a_conflict() {
    let (_dir, path) = scratch();
    let cast = sample::cast("raced");
    let log = SqliteLog::open_with(&path, castlog_events::Durability::Full).unwrap();
    log.append(&cast, Seq(1), &sample::batch(0, 1)).unwrap();
    let first = log
        .begin_append_with_blobs(&cast, Seq(2), &[], &sample::batch(1, 2))
        .unwrap();
    let second = log
        .begin_append_with_blobs(&cast, Seq(4), &[], &sample::batch(3, 1))
        .unwrap();
    let rival = SqliteLog::open(&path).unwrap();
    rival.append(&cast, Seq(2), &sample::batch(10, 1)).unwrap();
    let err = first.wait().unwrap_err().to_string();
    assert!(err.contains("were not stored"), "{err}");
    assert!(
        err.contains("conflict") || err.contains("Conflict"),
        "{err}"
    );
    assert!(second.wait().is_err());
    let refused = log.begin_append_with_blobs(&cast, Seq(3), &[], &sample::batch(4, 1));
    assert!(refused.is_err(), "a begun append after the loss");
    let events = rival.read(&cast, Seq::FIRST, None).unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].payload, sample::batch(10, 1)[0].payload);
    let head = rival.head(&cast).unwrap().unwrap();
    assert!(verify_cast(&rival, &head).unwrap().problems.is_empty());
}

/// The syncer's thread copies the WAL into the database as begun appends are made durable
/// (with either durability); the writer alone would first do so at 1,000 WAL pages (about
/// 4 MB), on the committing thread.
#[rstest]
fn the_syncer_checkpoints_the_wal_while_begun_appends_are_made_durable(
    #[values(castlog_events::Durability::Full, castlog_events::Durability::Normal)]
    durability: castlog_events::Durability,
) {
    let (_dir, path) = scratch();
    let cast = sample::cast("copied");
    let log = SqliteLog::open_with(&path, durability).unwrap();
    log.append(&cast, Seq(1), &sample::batch(0, 1)).unwrap();
    let before = std::fs::metadata(&path).unwrap().len();
    for i in 1..=40u64 {
        let body = sample::text(i, 20_000);
        log.begin_append_with_blobs(&cast, Seq(1 + i), &[body], &sample::batch(i, 1))
            .unwrap()
            .wait()
            .unwrap();
    }
    let after = std::fs::metadata(&path).unwrap().len();
    assert!(
        after >= before + 400_000,
        "the database grew from {before} to {after} bytes"
    );
    drop(log);
    let log = SqliteLog::open(&path).unwrap();
    assert_eq!(log.read(&cast, Seq::FIRST, None).unwrap().len(), 41);
}

/// The syncer fsyncs the WAL SQLite writes: opened through a symlink, the database's WAL sits
/// beside the file the link names, not beside the link.
#[cfg(unix)]
#[test]
fn begun_appends_through_a_symlinked_database_are_made_durable() {
    let (dir, path) = scratch();
    SqliteLog::open(&path).unwrap();
    let link = dir.path().join("elsewhere").join("link.db");
    std::fs::create_dir(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let cast = sample::cast("linked");
    {
        let log = SqliteLog::open_with(&link, castlog_events::Durability::Full).unwrap();
        log.begin_append_with_blobs(&cast, Seq(1), &[], &sample::batch(0, 3))
            .unwrap()
            .wait()
            .unwrap();
    }
    assert!(!link.with_file_name("link.db-wal").exists());
    let log = SqliteLog::open(&path).unwrap();
    assert_eq!(log.read(&cast, Seq::FIRST, None).unwrap().len(), 3);
}
