//! The writer: the only connection that writes, shared by the appenders.
//!
//! An appender queues a [`Command`] (with a reply channel). If the writer's lock is free it
//! takes it and leads: it takes every command queued so far (up to [`GROUP_LIMIT`]), runs them
//! all in one `BEGIN IMMEDIATE` transaction, each inside its own savepoint so that one command's
//! conflict does not undo another's work, and replies to each after `COMMIT` returns: an
//! acknowledged append is durable (a begun one is committed, see below). If the commit fails
//! every command in the group gets the error and nothing of the group is stored. While another appender leads, it waits for its
//! reply and looks again whether the writer is free. This is group commit: appends queued while
//! a leader waits for its fsync are committed together by the next leader, with one fsync. A
//! lone appender (a driven cast) writes on its own thread, with no hand-over to another one.
//!
//! A group made only of begun appends ([`Command::AppendWithBlobs`] with `deferred`) is
//! committed with `synchronous=NORMAL` and handed to the [`Syncer`] for its fsync; every other
//! group with the log's own setting. A begun append's appender is answered once the group is
//! committed, before it is durable (its `Appending::wait` waits for the syncer).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use castlog_core::id::{CastId, Digest, Seq};
use rusqlite::Connection;

use crate::log::{CastHead, ForkPoint, LogError};
use crate::record::{Pending, Recorded};
use crate::sqlite::blobs::BlobStore;
use crate::sqlite::map_err;
use crate::sqlite::syncer::Syncer;
use crate::sqlite::writes::{append, fork, import, put_checkpoint};

/// How long an appender waits for its answer before it looks whether the writer is free.
const WAIT_FOR_LEADER: std::time::Duration = std::time::Duration::from_micros(200);

/// The most commands one transaction takes.
pub(crate) const GROUP_LIMIT: usize = 256;

pub(crate) type Reply<T> = Sender<Result<T, LogError>>;

/// One write request.
pub(crate) enum Command {
    Append {
        cast: CastId,
        expected: Seq,
        events: Vec<Pending>,
        reply: Reply<Vec<Recorded>>,
    },
    AppendWithBlobs {
        cast: CastId,
        expected: Seq,
        blobs: Vec<Vec<u8>>,
        events: Vec<Pending>,
        /// Committed without its own fsync, made durable by the syncer.
        deferred: bool,
        reply: Reply<Vec<Recorded>>,
    },
    Fork {
        cast: CastId,
        from: ForkPoint,
        events: Vec<Pending>,
        reply: Reply<Vec<Recorded>>,
    },
    Import {
        head: CastHead,
        events: Vec<Recorded>,
        reply: Reply<()>,
    },
    PutBlob {
        bytes: Vec<u8>,
        reply: Reply<Digest>,
    },
    PutCheckpoint {
        cast: CastId,
        name: String,
        checkpoint: super::StoredCheckpoint,
        reply: Reply<()>,
    },
}

/// A finished command waiting for the commit before its reply is sent.
enum Done {
    Records(Reply<Vec<Recorded>>, Result<Vec<Recorded>, LogError>),
    Unit(Reply<()>, Result<(), LogError>),
    Blob(Reply<Digest>, Result<Digest, LogError>),
}

impl Done {
    fn is_ok(&self) -> bool {
        match self {
            Done::Records(_, r) => r.is_ok(),
            Done::Unit(_, r) => r.is_ok(),
            Done::Blob(_, r) => r.is_ok(),
        }
    }

    fn fail(self, err: &LogError) -> Done {
        let copy = || LogError::storage("committing", err);
        match self {
            Done::Records(reply, Ok(_)) => Done::Records(reply, Err(copy())),
            Done::Unit(reply, Ok(())) => Done::Unit(reply, Err(copy())),
            Done::Blob(reply, Ok(_)) => Done::Blob(reply, Err(copy())),
            other => other,
        }
    }

    fn send(self) {
        // A caller that stopped waiting is not an error of the log.
        match self {
            Done::Records(reply, result) => drop(reply.send(result)),
            Done::Unit(reply, result) => drop(reply.send(result)),
            Done::Blob(reply, result) => drop(reply.send(result)),
        }
    }
}

/// The writer connection and the commands waiting for it.
pub(crate) struct Writer {
    /// Held by the leader for the whole of a group.
    leader: Mutex<Leader>,
    /// Commands queued and not yet taken by a leader.
    queue: Mutex<Vec<Command>>,
    /// Transactions committed (the number of the last one).
    commits: AtomicU64,
    /// Fsyncs deferred commits; `None` unless the log's durability is `Full`.
    syncer: Option<Arc<Syncer>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

struct Leader {
    conn: Connection,
    blobs: BlobStore,
    /// The connection is at `synchronous=NORMAL` for deferred groups.
    deferring: bool,
}

impl Writer {
    /// The writer of `conn`; `syncer` given when the durability is `Full`.
    pub(crate) fn new(conn: Connection, syncer: Option<Syncer>) -> Self {
        Self {
            leader: Mutex::new(Leader {
                conn,
                blobs: BlobStore::default(),
                deferring: false,
            }),
            queue: Mutex::new(Vec::new()),
            commits: AtomicU64::new(0),
            syncer: syncer.map(Arc::new),
        }
    }

    /// The syncer, when commits can be deferred.
    pub(crate) fn syncer(&self) -> Option<&Arc<Syncer>> {
        self.syncer.as_ref()
    }

    /// Stops the syncer thread once it has synced what was asked.
    pub(crate) fn close(&self) {
        if let Some(syncer) = &self.syncer {
            syncer.stop();
        }
    }

    /// Transactions committed so far.
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Queues the command `make` builds and returns its reply once it is committed (or
    /// refused). The appender leads groups while the writer is free and its command is not
    /// answered; while another appender leads, it waits for its answer.
    pub(crate) fn submit<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, LogError> {
        let (reply, answer) = mpsc::channel();
        self.queue().push(make(reply));
        let lost = || {
            LogError::storage(
                "writing",
                "the write was dropped by a writer that panicked (nothing of its group is stored)",
            )
        };
        loop {
            match answer.try_recv() {
                Ok(result) => return result,
                Err(TryRecvError::Disconnected) => return Err(lost()),
                Err(TryRecvError::Empty) => {}
            }
            let leader = match self.leader.try_lock() {
                Ok(leader) => leader,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    // The leader answers this command if it took it; if it had taken the queue
                    // before this command arrived, the writer is free again shortly.
                    match answer.recv_timeout(WAIT_FOR_LEADER) {
                        Ok(result) => return result,
                        Err(RecvTimeoutError::Disconnected) => return Err(lost()),
                        Err(RecvTimeoutError::Timeout) => continue,
                    }
                }
            };
            self.lead(leader);
        }
    }

    /// Commits the oldest queued commands (up to [`GROUP_LIMIT`]) as one group and answers
    /// each. A panic while running the group is contained here: the group's commands are
    /// dropped with it, so each of their appenders gets an error, and the writer stays usable.
    fn lead(&self, mut leader: MutexGuard<'_, Leader>) {
        let group: Vec<Command> = {
            let mut queue = self.queue();
            let take = queue.len().min(GROUP_LIMIT);
            queue.drain(..take).collect()
        };
        if group.is_empty() {
            return;
        }
        let deferred = self.syncer.is_some()
            && group
                .iter()
                .all(|c| matches!(c, Command::AppendWithBlobs { deferred: true, .. }));
        let Leader {
            conn,
            blobs,
            deferring,
        } = &mut *leader;
        if deferred != *deferring {
            let mode = if deferred { "NORMAL" } else { "FULL" };
            if let Err(err) = conn.execute_batch(&format!("PRAGMA synchronous = {mode}")) {
                let err = map_err("setting the durability of a commit", &err);
                for command in group {
                    refuse(command, &err).send();
                }
                return;
            }
            *deferring = deferred;
        }
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| run_group(conn, blobs, group)));
        match ran {
            Ok(results) => {
                // A failed commit turns every result into an error, so any success was committed.
                if results.iter().any(Done::is_ok) {
                    let number = self.commits.fetch_add(1, Ordering::Relaxed) + 1;
                    // Only the syncer marks a deferred commit durable: a FULL commit after it
                    // may have written nothing (SQLite then skips its fsync).
                    if deferred && let Some(syncer) = &self.syncer {
                        syncer.request(number);
                    }
                }
                // A FULL group is acknowledged as durable, and what it acknowledges may rest
                // on a deferred commit not yet synced (a blob it found already stored): the
                // syncer's outstanding work is waited for first (nothing when none is).
                if !deferred
                    && let Some(syncer) = &self.syncer
                    && let Err(err) = syncer.wait_requested()
                {
                    for done in results {
                        done.fail(&err).send();
                    }
                    return;
                }
                for done in results {
                    done.send();
                }
            }
            Err(_) => {
                // The transaction guard rolled back on unwind; make sure, and never trust the
                // row ids the group staged (their rows are gone).
                if !conn.is_autocommit() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
                blobs.rolled_back();
            }
        }
    }

    fn queue(&self) -> MutexGuard<'_, Vec<Command>> {
        // Pushing and draining cannot leave the queue half-changed; take it back if poisoned.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Runs `group` in one transaction.
fn run_group(conn: &mut Connection, blobs: &mut BlobStore, group: Vec<Command>) -> Vec<Done> {
    let tx = match conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(err) => {
            let err = map_err("starting a write transaction", &err);
            return group.into_iter().map(|c| refuse(c, &err)).collect();
        }
    };
    if let Err(err) = blobs.begin(&tx) {
        return group.into_iter().map(|c| refuse(c, &err)).collect();
    }
    let mut done = Vec::with_capacity(group.len());
    let mut tx = tx;
    if group.len() == 1 {
        // Alone in its transaction, a command needs no savepoint: on error the whole
        // transaction is rolled back (below), which undoes exactly its partial writes.
        done.extend(
            group
                .into_iter()
                .map(|command| execute(&tx, blobs, command)),
        );
    } else {
        for command in group {
            done.push(run_one(&mut tx, blobs, command));
        }
    }
    let any_ok = done.iter().any(Done::is_ok);
    if any_ok {
        blobs.before_commit(&mut tx);
    }
    let committed = if any_ok { tx.commit() } else { tx.rollback() };
    // Row ids learnt in this transaction are trusted once it is committed (a command whose
    // savepoint was rolled back has forgotten its own already, see `run_one`); a rolled-back
    // insert's id may be given to another row later.
    if any_ok && committed.is_ok() {
        blobs.committed();
    } else {
        blobs.rolled_back();
    }
    match committed {
        Ok(()) => done,
        Err(err) => {
            let err = map_err("committing", &err);
            done.into_iter().map(|d| d.fail(&err)).collect()
        }
    }
}

fn refuse(command: Command, err: &LogError) -> Done {
    let copy = || LogError::storage("starting a write transaction", err);
    match command {
        Command::Append { reply, .. }
        | Command::AppendWithBlobs { reply, .. }
        | Command::Fork { reply, .. } => Done::Records(reply, Err(copy())),
        Command::Import { reply, .. } | Command::PutCheckpoint { reply, .. } => {
            Done::Unit(reply, Err(copy()))
        }
        Command::PutBlob { reply, .. } => Done::Blob(reply, Err(copy())),
    }
}

fn run_one(tx: &mut rusqlite::Transaction<'_>, blobs: &mut BlobStore, command: Command) -> Done {
    // Each command runs in a savepoint: on error its partial writes are undone, the others stay.
    let savepoint = match tx.savepoint() {
        Ok(sp) => sp,
        Err(err) => return refuse(command, &map_err("opening a savepoint", &err)),
    };
    let mark = blobs.mark();
    let done = execute(&savepoint, blobs, command);
    if !done.is_ok() {
        // Dropping a savepoint rolls back to it and releases it; the rows it inserted are
        // gone, so their ids must not be reused by the commands after it.
        drop(savepoint);
        blobs.forget_since(mark);
        return done;
    }
    match savepoint.commit() {
        Ok(()) => done,
        Err(err) => {
            blobs.forget_since(mark);
            done.fail(&map_err("closing a savepoint", &err))
        }
    }
}

/// Runs one command's writes on `conn` (the transaction or a savepoint in it).
fn execute(conn: &Connection, store: &mut BlobStore, command: Command) -> Done {
    match command {
        Command::Append {
            cast,
            expected,
            events,
            reply,
        } => Done::Records(reply, append(conn, &cast, expected, &events)),
        Command::AppendWithBlobs {
            cast,
            expected,
            blobs,
            events,
            deferred: _,
            reply,
        } => {
            let stored = blobs.iter().try_for_each(|b| store.put(conn, b).map(drop));
            let result = stored.and_then(|()| {
                if events.is_empty() {
                    Ok(Vec::new())
                } else {
                    append(conn, &cast, expected, &events)
                }
            });
            Done::Records(reply, result)
        }
        Command::Fork {
            cast,
            from,
            events,
            reply,
        } => Done::Records(reply, fork(conn, &cast, &from, &events)),
        Command::Import {
            head,
            events,
            reply,
        } => Done::Unit(reply, import(conn, &head, &events)),
        Command::PutBlob { bytes, reply } => Done::Blob(reply, store.put(conn, &bytes)),
        Command::PutCheckpoint {
            cast,
            name,
            checkpoint,
            reply,
        } => Done::Unit(reply, put_checkpoint(conn, &cast, &name, &checkpoint)),
    }
}

#[cfg(test)]
mod tests {
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

    /// A begun append that lands in a group with an ordinary append is committed with the
    /// group's own fsync, under a number nobody asked the syncer for: its waiter asks for it,
    /// and does not wait for ever.
    #[test]
    fn a_begun_append_committed_in_a_full_group_is_waited_for_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("castlog.db");
        drop(crate::SqliteLog::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        let mut wal = path.into_os_string();
        wal.push("-wal");
        let writer = Writer::new(conn, Some(Syncer::new(wal.into())));
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
        assert_eq!(answer.try_recv().unwrap().unwrap().len(), 1);
        let (syncer, commit) = (Arc::clone(writer.syncer().unwrap()), writer.commits());
        let (done, waited) = mpsc::channel();
        std::thread::spawn(move || done.send(syncer.wait(commit)));
        let waited = waited.recv_timeout(std::time::Duration::from_secs(30));
        assert!(
            matches!(waited, Ok(Ok(()))),
            "the wait did not end: {waited:?}"
        );
        writer.close();
    }
}
