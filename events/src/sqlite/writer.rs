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
//! A group made only of begun appends ([`Command::AppendWithBlobs`] with `deferred`) is not
//! committed at once: the transaction is left open and holds it, and the begun appends of the
//! next groups join it, each in a savepoint of its own, until it holds [`HELD_APPENDS`], a
//! waiter asks for one of them ([`Writer::wait`]), any other command arrives, or the log
//! closes. Then it is committed with `synchronous=NORMAL` and handed to the [`Syncer`] for its
//! fsync; every other group commits with the log's own setting. A begun append's appender is
//! answered once its writes are in the open transaction (its head checked, its records sealed),
//! before anyone else can read it. Holding them saves a commit per step: each commit writes
//! page 1, the cast's head row and the last pages of the events, blobs and chunks again, so
//! sixteen steps in one commit write about half the WAL frames (and one `BEGIN`/`COMMIT`).
//! What it costs: a crash of the process loses the steps held, which nothing outside the process
//! has seen (the driver tells of a step once it is durable), and other writers wait for the
//! lock while they are held (a few milliseconds: begun appends come from a local agent's steps,
//! which take well under a millisecond each). If their commit fails, they are lost: every
//! waiter for them is told, and begun appends after them are refused (they would only
//! conflict), while ordinary writes go on.

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

/// The most begun appends one transaction holds before it is committed.
pub(crate) const HELD_APPENDS: usize = 16;

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
    /// The number of the commit that carries every write answered so far.
    accepted: AtomicU64,
    /// Set once begun appends held for a commit were lost: every later waiter is told.
    lost: Mutex<Option<Lost>>,
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
    /// Begun appends stored in the open transaction, not yet committed (none: no transaction
    /// is open between groups).
    held: usize,
}

/// Begun appends held in one transaction that could not be committed.
#[derive(Debug)]
struct Lost {
    /// The number their commit would have had.
    commit: u64,
    why: String,
}

impl Writer {
    /// The writer of `conn`; `syncer` given when the durability is `Full`.
    pub(crate) fn new(conn: Connection, syncer: Option<Syncer>) -> Self {
        Self {
            leader: Mutex::new(Leader {
                conn,
                blobs: BlobStore::default(),
                deferring: false,
                held: 0,
            }),
            queue: Mutex::new(Vec::new()),
            commits: AtomicU64::new(0),
            syncer: syncer.map(Arc::new),
            accepted: AtomicU64::new(0),
            lost: Mutex::new(None),
        }
    }

    /// The syncer, when commits can be deferred.
    pub(crate) fn syncer(&self) -> Option<&Arc<Syncer>> {
        self.syncer.as_ref()
    }

    /// Commits the begun appends held, then stops the syncer thread once it has synced what
    /// was asked.
    pub(crate) fn close(&self) {
        let mut leader = self.leader.lock().unwrap_or_else(|p| p.into_inner());
        // Nobody waits for them any more (their `Appending`s borrowed the log).
        let _ = self.commit_held(&mut leader);
        drop(leader);
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
    /// each; a group of begun appends joins the transaction that holds earlier ones, committed
    /// once it holds [`HELD_APPENDS`]. A panic while running the group is contained here: the
    /// group's commands are dropped with it, so each of their appenders gets an error, and the
    /// writer stays usable (begun appends held before it are lost with it, and their waiters
    /// told).
    fn lead(&self, mut guard: MutexGuard<'_, Leader>) {
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
        let leader = &mut *guard;
        if !deferred {
            // Any other write commits the begun appends held first (a failure is their
            // waiters' answer), then runs with the log's own durability.
            let _ = self.commit_held(leader);
        } else if let Some(err) = self.lost_error(u64::MAX) {
            // Held steps were lost: a begun append after them would only find a conflict.
            for command in group {
                refuse(command, &err).send();
            }
            return;
        }
        if deferred != leader.deferring {
            // No transaction is open here: begun appends are held only in a deferred mode.
            let mode = if deferred { "NORMAL" } else { "FULL" };
            if let Err(err) = leader
                .conn
                .execute_batch(&format!("PRAGMA synchronous = {mode}"))
            {
                let err = map_err("setting the durability of a commit", &err);
                for command in group {
                    refuse(command, &err).send();
                }
                return;
            }
            leader.deferring = deferred;
        }
        let Leader { conn, blobs, .. } = &mut *leader;
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| run_group(conn, blobs, group)));
        let Ok(mut results) = ran else {
            // The group's results (and reply channels) are gone with the unwind; what the
            // transaction holds is not trusted.
            rollback(&leader.conn, &mut leader.blobs);
            if leader.held > 0 {
                leader.held = 0;
                self.lose("the writer panicked while holding them");
            }
            return;
        };
        if deferred {
            leader.held += results.iter().filter(|d| d.is_ok()).count();
            if leader.held == 0 {
                rollback(&leader.conn, &mut leader.blobs);
            } else {
                // Held: the commit that will carry them is the next one.
                self.accepted
                    .fetch_max(self.commits() + 1, Ordering::Relaxed);
                if leader.held >= HELD_APPENDS
                    && let Err(err) = self.commit_held(leader)
                {
                    results = results.into_iter().map(|d| d.fail(&err)).collect();
                }
            }
            for done in results {
                done.send();
            }
            return;
        }
        if results.iter().any(Done::is_ok) {
            match commit(&leader.conn, &mut leader.blobs) {
                Ok(()) => {
                    let number = self.commits.fetch_add(1, Ordering::Relaxed) + 1;
                    self.accepted.fetch_max(number, Ordering::Relaxed);
                }
                Err(err) => results = results.into_iter().map(|d| d.fail(&err)).collect(),
            }
        } else {
            rollback(&leader.conn, &mut leader.blobs);
        }
        // A FULL group is acknowledged as durable, and what it acknowledges may rest on a
        // deferred commit not yet synced (a blob it found already stored): the syncer's
        // outstanding work is waited for first (nothing when none is). Only the syncer marks a
        // deferred commit durable: a FULL commit after it may have written nothing (SQLite
        // then skips its fsync).
        if let Some(syncer) = &self.syncer
            && let Err(err) = syncer.wait_requested()
        {
            results = results.into_iter().map(|d| d.fail(&err)).collect();
        }
        for done in results {
            done.send();
        }
    }

    /// Commits the transaction holding begun appends, if one is open, and asks the syncer for
    /// its fsync. On failure they are lost: recorded for their waiters, and returned.
    fn commit_held(&self, leader: &mut Leader) -> Result<(), LogError> {
        if leader.held == 0 {
            return Ok(());
        }
        leader.held = 0;
        match commit(&leader.conn, &mut leader.blobs) {
            Ok(()) => {
                let number = self.commits.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(syncer) = &self.syncer {
                    syncer.request(number);
                }
                Ok(())
            }
            Err(err) => {
                self.lose(&err.to_string());
                Err(err)
            }
        }
    }

    /// Records that the begun appends of the next commit were lost, and why.
    fn lose(&self, why: &str) {
        let mut lost = self.lost.lock().unwrap_or_else(|p| p.into_inner());
        lost.get_or_insert(Lost {
            commit: self.commits() + 1,
            why: why.to_string(),
        });
    }

    /// The error of a waiter for commit `commit` if begun appends at or before it were lost.
    fn lost_error(&self, commit: u64) -> Option<LogError> {
        let lost = self.lost.lock().unwrap_or_else(|p| p.into_inner());
        lost.as_ref().filter(|l| l.commit <= commit).map(|l| {
            LogError::storage(
                "committing begun appends",
                format!(
                    "steps held for one commit were not stored ({}); nothing after them is \
                     accepted",
                    l.why
                ),
            )
        })
    }

    /// The number of the commit that carries every write answered so far (it may not be
    /// made yet: begun appends held in the open transaction).
    pub(crate) fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Waits until commit `commit` is durable: commits the begun appends held, if it is
    /// theirs, then waits for the syncer.
    pub(crate) fn wait(&self, commit: u64) -> Result<(), LogError> {
        if self.commits() < commit {
            let mut leader = self.leader.lock().unwrap_or_else(|p| p.into_inner());
            if self.commits() < commit {
                // An error is recorded as lost, and answered below.
                let _ = self.commit_held(&mut leader);
            }
        }
        if let Some(err) = self.lost_error(commit) {
            return Err(err);
        }
        match &self.syncer {
            Some(syncer) => syncer.wait(commit),
            None => Ok(()),
        }
    }

    fn queue(&self) -> MutexGuard<'_, Vec<Command>> {
        // Pushing and draining cannot leave the queue half-changed; take it back if poisoned.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Runs `group` in the open transaction, beginning one (`BEGIN IMMEDIATE`) if none is, and
/// leaves it open for the caller to commit or roll back. If no transaction can be begun every
/// command is refused.
fn run_group(conn: &mut Connection, blobs: &mut BlobStore, group: Vec<Command>) -> Vec<Done> {
    let fresh = conn.is_autocommit();
    if fresh {
        if let Err(err) = conn.execute_batch("BEGIN IMMEDIATE") {
            let err = map_err("starting a write transaction", &err);
            return group.into_iter().map(|c| refuse(c, &err)).collect();
        }
        if let Err(err) = blobs.begin(conn) {
            rollback(conn, blobs);
            return group.into_iter().map(|c| refuse(c, &err)).collect();
        }
    }
    if fresh && group.len() == 1 {
        // Alone in its transaction, a command needs no savepoint: on error the whole
        // transaction is rolled back (by the caller), which undoes exactly its partial writes.
        return group
            .into_iter()
            .map(|command| execute(conn, blobs, command))
            .collect();
    }
    group
        .into_iter()
        .map(|command| run_one(conn, blobs, command))
        .collect()
}

/// Commits the open transaction. Row ids learnt in it are trusted once it is committed (a
/// command whose savepoint was rolled back has forgotten its own already, see `run_one`); on
/// failure it is rolled back, and a rolled-back insert's id may be given to another row later.
fn commit(conn: &Connection, blobs: &mut BlobStore) -> Result<(), LogError> {
    blobs.before_commit(conn);
    match conn.execute_batch("COMMIT") {
        Ok(()) => {
            blobs.committed();
            Ok(())
        }
        Err(err) => {
            rollback(conn, blobs);
            Err(map_err("committing", &err))
        }
    }
}

/// Rolls back the open transaction, if one is, and forgets the rows it stored.
fn rollback(conn: &Connection, blobs: &mut BlobStore) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    blobs.rolled_back();
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

fn run_one(conn: &mut Connection, blobs: &mut BlobStore, command: Command) -> Done {
    // Each command runs in a savepoint: on error its partial writes are undone, the others stay.
    let savepoint = match conn.savepoint() {
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

    /// A writer with a syncer (full durability) on a fresh database, and that database's path.
    fn full_writer(dir: &tempfile::TempDir) -> (Writer, std::path::PathBuf) {
        let path = dir.path().join("castlog.db");
        drop(crate::SqliteLog::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        let mut wal = path.clone().into_os_string();
        wal.push("-wal");
        (Writer::new(conn, Some(Syncer::new(wal.into()))), path)
    }

    /// Begins an append of one event to `cast` at `seq`.
    fn begin(writer: &Writer, cast: &str, seq: u64) -> Result<Vec<Recorded>, LogError> {
        writer.submit(|reply| Command::AppendWithBlobs {
            cast: CastId::new(cast),
            expected: Seq(seq),
            blobs: vec![format!("body {cast} {seq}").into_bytes()],
            events: vec![aborted(seq)],
            deferred: true,
            reply,
        })
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

    /// Begun appends share a transaction: nobody else reads them until a waiter (or the
    /// limit, or any other write) commits them; a conflict among them is refused alone.
    #[test]
    fn begun_appends_are_held_in_one_transaction_until_a_wait_the_limit_or_another_write() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, path) = full_writer(&dir);
        for seq in 1..=5 {
            assert_eq!(begin(&writer, "held", seq).unwrap()[0].seq, Seq(seq));
        }
        assert!(matches!(
            begin(&writer, "held", 9),
            Err(LogError::Conflict { .. })
        ));
        assert_eq!(
            (writer.commits(), stored(&path)),
            (0, 0),
            "held, not committed"
        );
        writer.wait(writer.accepted()).unwrap();
        assert_eq!(
            (writer.commits(), stored(&path)),
            (1, 5),
            "the wait committed them"
        );
        writer.wait(1).unwrap();
        assert_eq!(
            writer.commits(),
            1,
            "a wait for a made commit commits nothing"
        );

        for seq in 6..6 + HELD_APPENDS as u64 {
            begin(&writer, "held", seq).unwrap();
        }
        assert_eq!(writer.commits(), 2, "the limit committed them");
        assert_eq!(stored(&path), 5 + HELD_APPENDS as i64);

        let next = 6 + HELD_APPENDS as u64;
        begin(&writer, "held", next).unwrap();
        append_new(&writer, "other");
        assert_eq!(
            writer.commits(),
            4,
            "the held append first, then the ordinary one"
        );
        assert_eq!(stored(&path), 7 + HELD_APPENDS as i64);
        writer.close();
    }

    /// A transaction of begun appends whose commit fails loses them: each waiter is told, and
    /// begun appends after them are refused (they could only conflict), while ordinary writes
    /// and waits for commits made before go on.
    #[test]
    fn held_appends_whose_commit_fails_are_each_waiters_error() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, path) = full_writer(&dir);
        begin(&writer, "kept", 1).unwrap();
        let kept = writer.accepted();
        writer.wait(kept).unwrap();
        {
            // A constraint checked at COMMIT: every event of cast "doomed" names a missing row.
            let leader = writer.leader.lock().unwrap();
            leader
                .conn
                .execute_batch(
                    "PRAGMA foreign_keys = ON;
                     CREATE TABLE trap (x TEXT REFERENCES casts(cast_id)
                                          DEFERRABLE INITIALLY DEFERRED);
                     CREATE TRIGGER doomed AFTER INSERT ON casts
                       WHEN new.cast_id = 'doomed'
                       BEGIN INSERT INTO trap VALUES ('nowhere'); END;",
                )
                .unwrap();
        }
        begin(&writer, "doomed", 1).unwrap();
        begin(&writer, "doomed", 2).unwrap();
        let doomed = writer.accepted();
        let err = writer.wait(doomed).unwrap_err().to_string();
        assert!(err.contains("were not stored"), "{err}");
        assert!(err.contains("FOREIGN KEY"), "{err}");
        let refused = begin(&writer, "later", 1).unwrap_err().to_string();
        assert!(refused.contains("were not stored"), "{refused}");
        writer.wait(kept).unwrap();
        append_new(&writer, "ordinary");
        assert_eq!(stored(&path), 2, "the kept and the ordinary append");
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
        assert_eq!(answer.try_recv().unwrap().unwrap().len(), 1);
        let writer = Arc::new(writer);
        let (waiter, commit) = (Arc::clone(&writer), writer.accepted());
        let (done, waited) = mpsc::channel();
        std::thread::spawn(move || done.send(waiter.wait(commit)));
        let waited = waited.recv_timeout(std::time::Duration::from_secs(30));
        assert!(
            matches!(waited, Ok(Ok(()))),
            "the wait did not end: {waited:?}"
        );
        writer.close();
    }
}
