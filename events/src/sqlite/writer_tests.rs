//! The writer's own tests: grouping, holding begun appends, and their failures.

use super::*;
use castlog_core::event::{CastAborted, Event};

fn aborted(i: u64) -> Pending {
    Pending::new(
        1_700_000_000_000 + i,
        &Event::CastAborted(CastAborted {
            reason: format!("sample {i}"),
        }),
    )
}

/// Commands queued while the writer is busy are committed by the next leader in one
/// transaction, each answered with its own records.
#[test]
fn queued_commands_are_committed_by_one_leader_in_one_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("castlog.db");
    drop(crate::SqliteLog::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    let writer = Writer::new(conn, None);
    let mut answers = Vec::new();
    for k in 0..5u64 {
        let (reply, answer) = mpsc::channel();
        writer.queue().push(Command::Append {
            cast: CastId::new(format!("queued-{k}")),
            expected: Seq::FIRST,
            events: vec![aborted(k)],
            reply,
        });
        answers.push(answer);
    }
    let own = writer.submit(|reply| Command::Append {
        cast: CastId::new("leader"),
        expected: Seq::FIRST,
        events: vec![aborted(9), aborted(10)],
        reply,
    });
    assert_eq!(own.unwrap().len(), 2);
    assert_eq!(writer.commits(), 1, "one transaction for six appends");
    for (k, answer) in answers.into_iter().enumerate() {
        let records = answer.try_recv().unwrap().unwrap();
        assert_eq!(records[0].cast.as_str(), format!("queued-{k}"));
    }
}

/// A writer with a syncer (full durability) on a fresh database, and that database's path.
fn full_writer(dir: &tempfile::TempDir) -> (Writer, std::path::PathBuf) {
    let path = dir.path().join("castlog.db");
    drop(crate::SqliteLog::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    (
        Writer::new(conn, Some(Syncer::new(path.clone(), true))),
        path,
    )
}

/// Begins an append of one event to `cast` at `seq`; its records and where it is.
fn begin(writer: &Writer, cast: &str, seq: u64) -> Result<(Vec<Recorded>, Ticket), LogError> {
    writer.submit(|reply| Command::AppendWithBlobs {
        cast: CastId::new(cast),
        expected: Seq(seq),
        blobs: vec![format!("body {cast} {seq}").into_bytes()],
        events: vec![aborted(seq)],
        deferred: true,
        reply,
    })
}

/// Waits for an append to `cast` at `ticket`.
fn wait(writer: &Writer, ticket: Ticket, cast: &str) -> Result<(), LogError> {
    writer.wait(ticket, &CastId::new(cast))
}

/// Appends one event to a new cast `cast`, with the log's own durability.
fn append_new(writer: &Writer, cast: &str) {
    writer
        .submit(|reply| Command::Append {
            cast: CastId::new(cast),
            expected: Seq::FIRST,
            events: vec![aborted(0)],
            reply,
        })
        .unwrap();
}

/// Events another connection can read.
fn stored(path: &std::path::Path) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
        .unwrap()
}

/// Begun appends are held and written together: nobody else reads them until a waiter
/// (or the limit, or any other write) has them committed; a conflict among them is refused
/// alone; and while they are held the file is not locked.
#[test]
fn begun_appends_are_held_until_a_wait_the_limit_or_another_write() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = full_writer(&dir);
    let mut tickets = Vec::new();
    for seq in 1..=5 {
        let (records, ticket) = begin(&writer, "held", seq).unwrap();
        assert_eq!(records[0].seq, Seq(seq));
        let slot = seq as usize - 1;
        assert_eq!(ticket, Ticket { commit: 1, slot });
        tickets.push(ticket);
    }
    assert!(matches!(
        begin(&writer, "held", 9),
        Err(LogError::Conflict { .. })
    ));
    assert_eq!(
        (writer.commits(), stored(&path)),
        (0, 0),
        "held, not written"
    );
    // Another connection writes at once: holding takes no lock.
    let other = Connection::open(&path).unwrap();
    other.busy_timeout(std::time::Duration::ZERO).unwrap();
    other
        .execute_batch("BEGIN IMMEDIATE; DELETE FROM casts WHERE 0; COMMIT")
        .unwrap();
    wait(&writer, tickets[2], "held").unwrap();
    assert_eq!(
        (writer.commits(), stored(&path)),
        (1, 5),
        "the wait wrote them"
    );
    wait(&writer, tickets[0], "held").unwrap();
    assert_eq!(
        writer.commits(),
        1,
        "a wait for a made commit commits nothing"
    );

    for seq in 6..6 + HELD_APPENDS as u64 {
        assert_eq!(begin(&writer, "held", seq).unwrap().1.commit, 2);
    }
    assert_eq!(writer.commits(), 2, "the limit wrote them");
    assert_eq!(stored(&path), 5 + HELD_APPENDS as i64);

    let next = 6 + HELD_APPENDS as u64;
    assert_eq!(begin(&writer, "held", next).unwrap().1.commit, 3);
    append_new(&writer, "other");
    assert_eq!(
        writer.commits(),
        4,
        "the held append first, then the ordinary one"
    );
    assert_eq!(stored(&path), 7 + HELD_APPENDS as i64);
    writer.close();
}

/// Makes writes that create cast `doomed` fail: at COMMIT (`at_commit`, a deferred foreign
/// key: the whole transaction fails) or at once (a trigger: that append alone fails).
fn doom(writer: &Writer, at_commit: bool) {
    let trap = if at_commit {
        "PRAGMA foreign_keys = ON;
         CREATE TABLE trap (x TEXT REFERENCES casts(cast_id) DEFERRABLE INITIALLY DEFERRED);
         CREATE TRIGGER doomed AFTER INSERT ON casts WHEN new.cast_id = 'doomed'
           BEGIN INSERT INTO trap VALUES ('nowhere'); END;"
    } else {
        "CREATE TRIGGER doomed BEFORE INSERT ON casts WHEN new.cast_id = 'doomed'
           BEGIN SELECT RAISE(ABORT, 'cast doomed refused'); END;"
    };
    let leader = writer.leader.lock().unwrap();
    leader.conn.execute_batch(trap).unwrap();
}

/// Held appends whose write fails are lost: each waiter is told why, and begun appends to
/// their cast after them are refused (they could only conflict), also in a group with an
/// ordinary write; other casts, ordinary writes and waits for commits made before go on, and
/// a lost write's number is not given again.
#[test]
fn held_appends_whose_write_fails_are_each_waiters_error() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = full_writer(&dir);
    let (_, kept) = begin(&writer, "kept", 1).unwrap();
    wait(&writer, kept, "kept").unwrap();
    doom(&writer, true);
    let (_, doomed) = begin(&writer, "doomed", 1).unwrap();
    assert_eq!(begin(&writer, "doomed", 2).unwrap().1.commit, doomed.commit);
    let err = wait(&writer, doomed, "doomed").unwrap_err().to_string();
    assert!(err.contains("were not stored"), "{err}");
    assert!(err.contains("FOREIGN KEY"), "{err}");
    let refused = begin(&writer, "doomed", 3).unwrap_err().to_string();
    assert!(refused.contains("were not stored"), "{refused}");
    // In a group with an ordinary append, too.
    let (reply, answer) = mpsc::channel();
    writer.queue().push(Command::AppendWithBlobs {
        cast: CastId::new("doomed"),
        expected: Seq(3),
        blobs: Vec::new(),
        events: vec![aborted(3)],
        deferred: true,
        reply,
    });
    append_new(&writer, "ordinary");
    let refused = answer.try_recv().unwrap().unwrap_err().to_string();
    assert!(refused.contains("were not stored"), "{refused}");
    // The ordinary append was committed under the next number, not the lost one's.
    assert!(wait(&writer, doomed, "doomed").is_err());
    wait(&writer, kept, "kept").unwrap();
    let (_, later) = begin(&writer, "later", 1).unwrap();
    assert_eq!(
        later.commit,
        doomed.commit + 2,
        "after the lost write and the ordinary one"
    );
    wait(&writer, later, "later").unwrap();
    assert_eq!(stored(&path), 3, "kept, ordinary and later");
    writer.close();
}

/// One held append that cannot be written is undone alone: the others in its write are
/// stored and their waiters answered Ok.
#[test]
fn a_held_append_that_fails_alone_loses_only_its_cast() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = full_writer(&dir);
    doom(&writer, false);
    let (_, a1) = begin(&writer, "a", 1).unwrap();
    let (_, doomed) = begin(&writer, "doomed", 1).unwrap();
    let (_, b1) = begin(&writer, "b", 1).unwrap();
    let (_, a2) = begin(&writer, "a", 2).unwrap();
    let err = wait(&writer, doomed, "doomed").unwrap_err().to_string();
    assert!(err.contains("cast doomed refused"), "{err}");
    for (ticket, cast) in [(a1, "a"), (b1, "b"), (a2, "a")] {
        assert_eq!(ticket.commit, doomed.commit, "one write");
        wait(&writer, ticket, cast).unwrap();
    }
    assert_eq!(stored(&path), 3);
    assert!(begin(&writer, "doomed", 1).is_err());
    writer.close();
}

/// A held append after one of its own cast that was written stays refused alone: the first
/// is stored and its waiter answered Ok, the second and later ones of the cast are not.
#[test]
fn a_held_append_refused_after_one_of_its_cast_leaves_that_one_stored() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = full_writer(&dir);
    {
        let leader = writer.leader.lock().unwrap();
        leader
            .conn
            .execute_batch(
                "CREATE TRIGGER second BEFORE INSERT ON events WHEN new.seq = 2
                   BEGIN SELECT RAISE(ABORT, 'seq 2 refused'); END;",
            )
            .unwrap();
    }
    let (_, first) = begin(&writer, "x", 1).unwrap();
    let (_, second) = begin(&writer, "x", 2).unwrap();
    let (_, third) = begin(&writer, "x", 3).unwrap();
    let err = wait(&writer, second, "x").unwrap_err().to_string();
    assert!(err.contains("were not stored"), "{err}");
    assert!(wait(&writer, third, "x").is_err());
    wait(&writer, first, "x").unwrap();
    assert_eq!(stored(&path), 1);
    writer.close();
}

/// Held appends whose write cannot even begin (another connection holds the write lock past
/// the busy timeout) stay held while nobody waits for them (an ordinary write is refused, not
/// let past them); a waiter's error is final: they are given up, never written later.
#[test]
fn held_appends_whose_write_cannot_begin_are_given_up_by_their_waiter() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = full_writer(&dir);
    writer
        .leader
        .lock()
        .unwrap()
        .conn
        .busy_timeout(std::time::Duration::ZERO)
        .unwrap();
    let (_, ticket) = begin(&writer, "x", 1).unwrap();
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let refused = writer.submit(|reply| Command::Append {
        cast: CastId::new("ordinary"),
        expected: Seq::FIRST,
        events: vec![aborted(0)],
        reply,
    });
    let refused = refused.unwrap_err().to_string();
    assert!(refused.contains("could not be written yet"), "{refused}");
    let err = wait(&writer, ticket, "x").unwrap_err().to_string();
    assert!(err.contains("were not stored"), "{err}");
    other.execute_batch("ROLLBACK").unwrap();
    assert!(wait(&writer, ticket, "x").is_err(), "the answer stays");
    append_new(&writer, "ordinary");
    writer.close();
    assert_eq!(
        stored(&path),
        1,
        "only the ordinary append, after the lock was freed"
    );
}

/// A held snapshot of `cast` after its record `last`.
fn held_snapshot(cast: &str, last: &Recorded, reply: Reply<()>) -> Command {
    Command::PutCheckpoint {
        cast: CastId::new(cast),
        name: format!("state@{}", last.seq),
        checkpoint: crate::Snapshot {
            version: 1,
            seq: last.seq,
            hash: last.hash,
            bytes: b"state".to_vec(),
        },
        deferred: true,
        reply,
    }
}

/// A snapshot put with begun appends is held and written after them, in their transaction;
/// one of a cast whose held appends are refused is dropped with them.
#[test]
fn a_held_snapshot_is_written_with_its_casts_appends_or_dropped_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = full_writer(&dir);
    doom(&writer, false);
    let (records, ticket) = begin(&writer, "a", 1).unwrap();
    let (doomed, _) = begin(&writer, "doomed", 1).unwrap();
    for (cast, last) in [("a", &records[0]), ("doomed", &doomed[0])] {
        writer
            .submit(|reply| held_snapshot(cast, last, reply))
            .unwrap();
    }
    let kept = || -> Vec<String> {
        let conn = Connection::open(&path).unwrap();
        let mut stmt = conn.prepare("SELECT cast_id FROM checkpoints").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(kept(), Vec::<String>::new(), "held");
    wait(&writer, ticket, "a").unwrap();
    assert_eq!(kept(), vec!["a".to_string()]);
    assert_eq!(writer.commits(), 1, "with the appends, in one transaction");
    // A snapshot put after its cast's steps were lost is refused, not held.
    let refused = writer.submit(|reply| held_snapshot("doomed", &doomed[0], reply));
    assert!(refused.is_err());
    writer.close();
    assert_eq!(kept(), vec!["a".to_string()]);
}

/// A held snapshot queued with an ordinary write that loses its cast's held steps (the write
/// of held appends goes first and fails) is refused, not stored on its own.
#[test]
fn a_held_snapshot_in_a_group_that_loses_its_cast_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = full_writer(&dir);
    doom(&writer, true);
    let (doomed, _) = begin(&writer, "doomed", 1).unwrap();
    let (reply, answer) = mpsc::channel();
    writer
        .queue()
        .push(held_snapshot("doomed", &doomed[0], reply));
    append_new(&writer, "ordinary");
    assert!(answer.try_recv().unwrap().is_err());
    writer.close();
    let snapshots: i64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT count(*) FROM checkpoints", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        (snapshots, stored(&path)),
        (0, 1),
        "only the ordinary append"
    );
}

/// Appenders on several threads share the writer, each waiting for its own begun appends:
/// every answer is about the appender's own append (a failure reaches its cast's appender
/// only), and everything answered Ok is stored.
#[test]
fn begun_appends_from_several_threads_each_get_their_own_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = full_writer(&dir);
    doom(&writer, false);
    let writer = Arc::new(writer);
    let appenders: Vec<_> = ["a", "b", "doomed", "c"]
        .into_iter()
        .map(|cast| {
            let writer = Arc::clone(&writer);
            std::thread::spawn(move || {
                let mut stored = 0;
                for seq in 1..=60 {
                    let Ok((_, commit)) = begin(&writer, cast, seq) else {
                        break;
                    };
                    if seq % 3 == 0 || seq == 60 {
                        if wait(&writer, commit, cast).is_err() {
                            break;
                        }
                        stored = seq;
                    }
                }
                (cast, stored)
            })
        })
        .collect();
    for appender in appenders {
        let (cast, stored) = appender.join().unwrap();
        let expected = if cast == "doomed" { 0 } else { 60 };
        assert_eq!(stored, expected, "cast {cast}");
    }
    assert_eq!(stored(&path), 180);
    writer.close();
}

/// A begun append that lands in a group with an ordinary append is committed with the
/// group's own fsync, under a number nobody asked the syncer for: its waiter asks for it,
/// and does not wait for ever.
#[test]
fn a_begun_append_committed_in_a_full_group_is_waited_for_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, _) = full_writer(&dir);
    let (reply, answer) = mpsc::channel();
    writer.queue().push(Command::AppendWithBlobs {
        cast: CastId::new("begun"),
        expected: Seq::FIRST,
        blobs: Vec::new(),
        events: vec![aborted(1)],
        deferred: true,
        reply,
    });
    writer
        .submit(|reply| Command::Append {
            cast: CastId::new("full"),
            expected: Seq::FIRST,
            events: vec![aborted(2)],
            reply,
        })
        .unwrap();
    assert_eq!(writer.commits(), 1, "one group, with its own fsync");
    let (records, commit) = answer.try_recv().unwrap().unwrap();
    assert_eq!((records.len(), commit), (1, Ticket::of(1)));
    let writer = Arc::new(writer);
    let waiter = Arc::clone(&writer);
    let (done, waited) = mpsc::channel();
    std::thread::spawn(move || done.send(wait(&waiter, commit, "begun")));
    let waited = waited.recv_timeout(std::time::Duration::from_secs(30));
    assert!(
        matches!(waited, Ok(Ok(()))),
        "the wait did not end: {waited:?}"
    );
    writer.close();
}
