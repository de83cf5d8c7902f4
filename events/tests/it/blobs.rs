//! Blobs in SQLite files: content-defined chunks shared between blobs, damage named by
//! blob, rolled-back chunks, the address index written in batches.

use castlog_core::id::Seq;
use castlog_events::{EventLog, LogError};
use rusqlite::Connection;

use super::backend::{count, open_sqlite, scratch};
use super::sample;

/// Large blobs are stored as content-defined chunks: a run shared by two blobs is stored once,
/// and a damaged chunk list or a missing chunk is reported as damage naming the blob.
#[test]
fn large_blobs_share_chunks_and_damage_is_named() {
    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    let shared: Vec<u8> = (0..60_000u32)
        .map(|i| b"abcdefgh ij\n"[(i * i % 12) as usize])
        .collect();
    let shared: Vec<u8> = shared
        .iter()
        .enumerate()
        .map(|(i, b)| b.wrapping_add(((i * 2_654_435_761) >> 20) as u8 % 3))
        .collect();
    let a = [b"Previous output:\n".as_slice(), &shared].concat();
    let b = [
        b"Handoff context (12 earlier entries)\n".as_slice(),
        &shared,
        b"\nend",
    ]
    .concat();
    let ha = log.put_blob(&a).unwrap();
    log.put_blob(&b).unwrap();
    let conn = Connection::open(&path).unwrap();
    let stored: i64 = conn
        .query_row("SELECT sum(length(bytes)) FROM chunks", [], |r| r.get(0))
        .unwrap();
    assert!(
        (stored as usize) < a.len() + b.len() / 4,
        "{stored} bytes of chunks for {} + {}",
        a.len(),
        b.len()
    );
    let chunked: i64 = conn
        .query_row("SELECT count(*) FROM blobs WHERE chunked = 2", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(chunked, 2);

    conn.execute("DELETE FROM chunks WHERE id = 2", []).unwrap();
    match log.get_blob(&ha).unwrap_err() {
        LogError::Corrupt {
            context, message, ..
        } => {
            assert!(context.contains(&ha.short()), "{context}");
            assert!(message.contains("chunk 1 (row 2) is missing"), "{message}");
        }
        other => panic!("{other}"),
    }
    conn.execute(
        "UPDATE blobs SET bytes = x'80' WHERE hash = ?1",
        [ha.0.as_slice()],
    )
    .unwrap();
    let err = log.get_blob(&ha).unwrap_err();
    assert!(err.to_string().contains("ends inside a number"), "{err}");
    // The list form of files before schema v11 (chunked = 1) is read, and checked, too.
    conn.execute(
        "UPDATE blobs SET bytes = x'00', chunked = 1 WHERE hash = ?1",
        [ha.0.as_slice()],
    )
    .unwrap();
    let err = log.get_blob(&ha).unwrap_err();
    assert!(err.to_string().contains("not a multiple of 8"), "{err}");
}

/// A transaction that fails after storing chunks is rolled back, and the writer forgets the
/// chunk rows it learnt there (their row ids are handed out again): storing the same blob
/// later still reads back byte for byte.
#[test]
fn chunks_of_a_rolled_back_append_are_not_reused() {
    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    let (first, second) = (sample::text(1, 20_000), sample::text(2, 20_000));
    let cast = sample::cast("rolled-back");
    let refused = log.append_with_blobs(
        &cast,
        Seq(7),
        std::slice::from_ref(&first),
        &sample::batch(0, 1),
    );
    assert!(
        matches!(refused, Err(LogError::Conflict { .. })),
        "{refused:?}"
    );
    let hash = castlog_events::chain::blob_hash(&first);
    assert_eq!(log.get_blob(&hash).unwrap(), None);
    log.put_blob(&second).unwrap();
    assert_eq!(log.put_blob(&first).unwrap(), hash);
    assert_eq!(log.get_blob(&hash).unwrap(), Some(first));
}

/// In a group commit, a command that fails after storing chunks is rolled back to its
/// savepoint; a later command of the same group must not reuse the row ids of those chunks
/// (they are gone, and handed out again): its blob reads back byte for byte.
#[test]
fn a_failed_command_in_a_group_leaves_no_chunk_ids_behind() {
    use std::time::Duration;
    let (_dir, path) = scratch();
    let log = open_sqlite(&path);
    let text = sample::text;
    let first = sample::cast("first");
    log.append(&first, Seq(1), &sample::batch(0, 1)).unwrap();
    for round in 0..6u64 {
        let shared = text(round + 100, 3000);
        let later = [shared.clone(), text(round + 10_000, 3000)].concat();
        // A long command keeps the writer busy, so the two after it are one group.
        let heavy: Vec<Vec<u8>> = (0..60)
            .map(|k| text(round * 1000 + k + 50_000, 20_000))
            .collect();
        let (failed, stored) = std::thread::scope(|s| {
            let log = &log;
            let first = &first;
            s.spawn(move || {
                let cast = sample::cast(&format!("heavy{round}"));
                log.append_with_blobs(&cast, Seq(1), &heavy, &sample::batch(0, 1))
                    .unwrap();
            });
            std::thread::sleep(Duration::from_millis(5));
            let shared = &shared;
            let failing = s.spawn(move || {
                log.append_with_blobs(
                    first,
                    Seq(99),
                    std::slice::from_ref(shared),
                    &sample::batch(1, 1),
                )
            });
            std::thread::sleep(Duration::from_millis(5));
            let later = &later;
            let storing = s.spawn(move || {
                let cast = sample::cast(&format!("later{round}"));
                log.append_with_blobs(
                    &cast,
                    Seq(1),
                    std::slice::from_ref(later),
                    &sample::batch(0, 1),
                )
            });
            (failing.join().unwrap(), storing.join().unwrap())
        });
        assert!(
            matches!(failed, Err(LogError::Conflict { .. })),
            "{failed:?}"
        );
        stored.unwrap();
        let hash = castlog_events::chain::blob_hash(&later);
        assert_eq!(log.get_blob(&hash).unwrap(), Some(later), "round {round}");
    }
}

/// Blob addresses are indexed in batches: rows pile up above `blob_index_upto.upto`
/// unindexed, then one commit indexes all of them. Every blob reads back on either side of
/// that line, before and after a reopen, and storing a blob again (indexed or not) adds no
/// row.
#[test]
fn blob_addresses_are_indexed_in_batches_and_every_blob_reads_back() {
    let (_dir, path) = scratch();
    let blobs: Vec<Vec<u8>> = (0..700u64)
        .map(|k| sample::text(k + 7, 40 + (k as usize % 3) * 600))
        .collect();
    let log = open_sqlite(&path);
    let hashes: Vec<_> = blobs.iter().map(|b| log.put_blob(b).unwrap()).collect();
    let indexed = count(&path, "SELECT count(*) FROM blob_index");
    assert!(indexed > 0 && indexed < 700, "{indexed} of 700 indexed");
    let upto = count(&path, "SELECT upto FROM blob_index_upto");
    assert_eq!(
        upto,
        count(
            &path,
            "SELECT max(id) FROM blobs WHERE hash IN (SELECT hash FROM blob_index)"
        )
    );
    for round in 0..2 {
        let log = if round == 0 {
            &log
        } else {
            &open_sqlite(&path)
        };
        for (blob, hash) in blobs.iter().zip(&hashes) {
            assert_eq!(log.get_blob(hash).unwrap().as_ref(), Some(blob));
            assert_eq!(&log.put_blob(blob).unwrap(), hash);
        }
        assert_eq!(
            count(&path, "SELECT count(*) FROM blobs"),
            700,
            "round {round}"
        );
    }
}

/// Two logs writing one file store a content once: each writer reads the unindexed rows
/// again when the other has committed.
#[test]
fn two_logs_on_one_file_store_a_blob_once() {
    let (_dir, path) = scratch();
    let (a, b) = (open_sqlite(&path), open_sqlite(&path));
    let (x, y) = (sample::text(1, 300), sample::text(2, 5000));
    for (first, second, blob) in [(&a, &b, &x), (&b, &a, &y), (&a, &b, &y), (&b, &a, &x)] {
        let hash = first.put_blob(blob).unwrap();
        assert_eq!(second.put_blob(blob).unwrap(), hash);
        assert_eq!(second.get_blob(&hash).unwrap().as_ref(), Some(blob));
    }
    assert_eq!(count(&path, "SELECT count(*) FROM blobs"), 2);
}
