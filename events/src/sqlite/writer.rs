//! The writer: the only connection that writes, shared by the appenders.
//!
//! An appender queues a [`Command`] (with a reply channel). If the writer's lock is free it
//! takes it and leads: it takes every command queued so far (up to [`GROUP_LIMIT`]), runs them
//! all in one `BEGIN IMMEDIATE` transaction, each inside its own savepoint so that one
//! command's conflict does not undo another's work, and replies to each after `COMMIT`
//! returns: an acknowledged append is durable (a begun one is only accepted, see below). If the
//! commit fails every command in the group gets the error and nothing of the group is stored.
//! While another appender leads, it waits for its reply and looks again whether the writer is
//! free. This is group commit: appends queued while a leader waits for its fsync are committed
//! together by the next leader, with one fsync. A lone appender (a driven cast) writes on its
//! own thread, with no hand-over to another one.
//!
//! A group made only of begun appends ([`Command::AppendWithBlobs`] with `deferred`) is not
//! written at once: each is checked against its cast's head, sealed and held in memory
//! ([`Held`]), and answered with the number of the commit that will carry it. The held appends
//! are written and committed together, in one transaction with `synchronous=NORMAL` handed to
//! the [`Syncer`] for its fsync (with `Durability::Normal` there is none to wait for), as soon
//! as [`HELD_APPENDS`] are held, when a waiter asks for
//! one of them ([`Writer::wait`]), before any other command, and when the log closes. Every
//! other group commits with the log's own setting. Holding them saves a commit per step: each
//! commit writes page 1, the cast's head row and the last pages of the events, blobs and chunks
//! again, so sixteen steps in one commit write about half the WAL frames (and one
//! `BEGIN`/`COMMIT`). No transaction is open while they are held, so other writers (other
//! processes) get the lock between commits as before. What it costs: a crash of the process
//! loses the steps held, which nobody else has read and nothing outside the process has acted
//! on (the driver tells of a step once it is durable).
//!
//! Commit numbers are given out under the leader's lock, to every commit and to every write of
//! held appends that fails, and published (`numbered`) only once the outcome is known: a
//! waiter whose number is not published takes the lock, so it never sees a write half done.
//! A held append that cannot be written (another writer moved its cast's head meanwhile) is
//! undone alone, with the later ones of its cast; if the whole write fails (an I/O error),
//! every held append is. A write that cannot even begin (the lock busy past the timeout)
//! leaves them held while nobody waits for them (a command that would overtake them is
//! refused); a waiter then gives them up, so its error is final. Their waiters are told, and
//! begun appends to their casts are refused from then on (they could only conflict), while
//! other casts and ordinary writes go on.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use castlog_core::id::{CastId, Digest, Seq};
use rusqlite::Connection;

use crate::log::{CastHead, ForkPoint, LogError};
use crate::record::{Pending, Recorded};
use crate::sqlite::blobs::BlobStore;
pub(crate) use crate::sqlite::held::HELD_APPENDS;
use crate::sqlite::held::{Held, WriteFailure};
use crate::sqlite::map_err;
use crate::sqlite::syncer::Syncer;
use crate::sqlite::transaction::{begin, commit, rollback};
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
        /// Held and committed without its own fsync, made durable by the syncer.
        deferred: bool,
        /// Answered with where it is (the commit that carries it).
        reply: Reply<(Vec<Recorded>, Ticket)>,
    },
    /// An append under a worker's lease: the queue row's epoch is checked in the same
    /// transaction (see [`crate::queue`]); never held.
    AppendLeased {
        lease: crate::queue::Lease,
        expected: Seq,
        blobs: Vec<Vec<u8>>,
        events: Vec<Pending>,
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
        /// A cache (a state snapshot): held with the begun appends, written with them.
        deferred: bool,
        reply: Reply<()>,
    },
}

/// Where a write is: the number of the commit that carries it and, for a held append, its
/// place among the appends that commit writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    pub(crate) commit: u64,
    pub(crate) slot: usize,
}

impl Ticket {
    /// A write carried by an ordinary commit.
    fn of(commit: u64) -> Self {
        Self { commit, slot: 0 }
    }
}

/// A finished command waiting for the commit before its reply is sent.
enum Done {
    Records(Reply<Vec<Recorded>>, Result<Vec<Recorded>, LogError>),
    /// Records, answered with where they are.
    Numbered(
        Reply<(Vec<Recorded>, Ticket)>,
        Result<Vec<Recorded>, LogError>,
    ),
    Unit(Reply<()>, Result<(), LogError>),
    Blob(Reply<Digest>, Result<Digest, LogError>),
}

impl Done {
    fn is_ok(&self) -> bool {
        match self {
            Done::Records(_, r) | Done::Numbered(_, r) => r.is_ok(),
            Done::Unit(_, r) => r.is_ok(),
            Done::Blob(_, r) => r.is_ok(),
        }
    }

    fn fail(self, err: &LogError) -> Done {
        let copy = || LogError::storage("committing", err.clone());
        match self {
            Done::Records(reply, Ok(_)) => Done::Records(reply, Err(copy())),
            Done::Numbered(reply, Ok(_)) => Done::Numbered(reply, Err(copy())),
            Done::Unit(reply, Ok(())) => Done::Unit(reply, Err(copy())),
            Done::Blob(reply, Ok(_)) => Done::Blob(reply, Err(copy())),
            other => other,
        }
    }

    /// Answers the appender; `ticket` says where the write is.
    fn send(self, ticket: Ticket) {
        // A caller that stopped waiting is not an error of the log.
        match self {
            Done::Records(reply, result) => drop(reply.send(result)),
            Done::Numbered(reply, result) => drop(reply.send(result.map(|r| (r, ticket)))),
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
    /// Transactions committed.
    commits: AtomicU64,
    /// The number of the last write whose outcome is known, in commit order: numbers go to
    /// every commit and to each write of held appends that failed, and are given out (under
    /// the leader's lock) before the write and published here once it is done, its loss
    /// recorded and its fsync asked for. Held appends carry the next number.
    numbered: AtomicU64,
    /// Fsyncs deferred commits (with `Durability::Full`) and checkpoints the WAL beside the
    /// writer (see [`Syncer`]).
    syncer: Option<Arc<Syncer>>,
    /// Held appends whose write failed.
    lost: Mutex<Vec<Lost>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

struct Leader {
    conn: Connection,
    blobs: BlobStore,
    /// The connection is at `synchronous=NORMAL` (for deferred groups and held appends).
    deferring: bool,
    /// Begun appends accepted and not yet written.
    held: Held,
}

/// Held appends to one cast that were not stored.
#[derive(Debug)]
struct Lost {
    /// The number of the write that was to carry them.
    commit: u64,
    cast: CastId,
    /// The first of them among that write's appends (every later one of the cast is lost).
    slot: usize,
    why: String,
}

impl Writer {
    /// The writer of `conn`, with the log's `syncer` (none in some tests).
    pub(crate) fn new(conn: Connection, syncer: Option<Syncer>) -> Self {
        Self {
            leader: Mutex::new(Leader {
                conn,
                blobs: BlobStore::default(),
                deferring: false,
                held: Held::default(),
            }),
            queue: Mutex::new(Vec::new()),
            commits: AtomicU64::new(0),
            numbered: AtomicU64::new(0),
            syncer: syncer.map(Arc::new),
            lost: Mutex::new(Vec::new()),
        }
    }

    /// Writes the begun appends held, then stops the syncer thread once it has synced what
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
    /// each; a group of begun appends is held instead (see the module doc). A panic while
    /// running the group is contained here: the group's commands are dropped with it, so each
    /// of their appenders gets an error, and the writer stays usable.
    fn lead(&self, mut guard: MutexGuard<'_, Leader>) {
        let group: Vec<Command> = {
            let mut queue = self.queue();
            let take = queue.len().min(GROUP_LIMIT);
            queue.drain(..take).collect()
        };
        if group.is_empty() {
            return;
        }
        let deferred = group.iter().all(|c| {
            matches!(
                c,
                Command::AppendWithBlobs { deferred: true, .. }
                    | Command::PutCheckpoint { deferred: true, .. }
            )
        });
        let leader = &mut *guard;
        if !deferred
            && let Err(err) = self.commit_held(leader)
            && !leader.held.is_empty()
        {
            // Held appends go first; if they could not be written (they stay held), nothing
            // may overtake them.
            for command in group {
                refuse(command, &err).send(Ticket::of(0));
            }
            return;
        }
        if deferred {
            self.hold(leader, group);
            return;
        }
        // A begun append to a cast whose held appends were lost could only conflict (`hold`
        // looks at each of its own).
        let mut refused = Vec::new();
        let group: Vec<Command> = group
            .into_iter()
            .filter_map(|command| match self.lost_for_begun(&command) {
                Some(err) => {
                    refused.push(refuse(command, &err));
                    None
                }
                None => Some(command),
            })
            .collect();
        refused
            .into_iter()
            .for_each(|done| done.send(Ticket::of(0)));
        if group.is_empty() {
            return;
        }
        if let Err(err) = self.set_deferring(leader, false) {
            for command in group {
                refuse(command, &err).send(Ticket::of(0));
            }
            return;
        }
        let number = self.numbered() + 1;
        let Leader { conn, blobs, .. } = &mut *leader;
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| run_group(conn, blobs, group)));
        let Ok((mut results, committed)) = ran else {
            // The group's results (and reply channels) are gone with the unwind; the rows it
            // staged are not trusted.
            rollback(&leader.conn, &mut leader.blobs);
            return;
        };
        if committed {
            self.commits.fetch_add(1, Ordering::Relaxed);
            self.numbered.store(number, Ordering::Release);
        }
        // A FULL group is acknowledged as durable, and what it acknowledges may rest on a
        // deferred commit not yet synced (a blob it found already stored): the syncer's
        // outstanding work is waited for first (nothing when none is). Only the syncer marks a
        // deferred commit durable: a FULL commit after it may have written nothing (SQLite
        // then skips its fsync).
        if let Some(syncer) = self.fsyncing()
            && let Err(err) = syncer.wait_requested()
        {
            results = results.into_iter().map(|d| d.fail(&err)).collect();
        }
        for done in results {
            done.send(Ticket::of(number));
        }
    }

    /// Holds a group of begun appends, one by one, and answers each with the number of the
    /// commit that will carry it; writes what is held whenever there are [`HELD_APPENDS`].
    fn hold(&self, leader: &mut Leader, group: Vec<Command>) {
        let mut answers: Vec<(Done, Ticket)> = Vec::with_capacity(group.len());
        let mut lost: Vec<(u64, LogError)> = Vec::new();
        for command in group {
            // An earlier command of this group may have lost its cast's held appends.
            if let Some(err) = self.lost_for_begun(&command) {
                answers.push((refuse(command, &err), Ticket::of(0)));
                continue;
            }
            let number = self.numbered() + 1;
            let before = leader.held.len();
            let ticket = Ticket {
                commit: number,
                slot: before,
            };
            let Leader { conn, held, .. } = &mut *leader;
            let accepted = std::panic::catch_unwind(AssertUnwindSafe(|| match command {
                Command::AppendWithBlobs {
                    cast,
                    expected,
                    blobs,
                    events,
                    reply,
                    ..
                } => Done::Numbered(reply, held.accept(conn, &cast, expected, blobs, events)),
                Command::PutCheckpoint {
                    cast,
                    name,
                    checkpoint,
                    reply,
                    ..
                } => {
                    held.hold_checkpoint(cast, name, checkpoint);
                    Done::Unit(reply, Ok(()))
                }
                other => refuse(
                    other,
                    &LogError::storage("holding a write", "only begun appends are held"),
                ),
            }));
            let Ok(done) = accepted else {
                // Its reply channel is gone with the unwind (its appender is told nothing
                // was stored): it must not be written later.
                leader.held.truncate(before);
                continue;
            };
            answers.push((done, ticket));
            if leader.held.len() >= HELD_APPENDS
                && let Err(err) = self.commit_held(leader)
                && leader.held.is_empty()
            {
                lost.push((number, err));
            }
        }
        for (done, ticket) in answers {
            // Answers carried by a write that was lost are its error.
            match lost.iter().find(|(n, _)| *n == ticket.commit) {
                Some((_, err)) => done.fail(err).send(Ticket::of(0)),
                None => done.send(ticket),
            }
        }
    }

    /// Sets `synchronous` for a deferred write (NORMAL) or not (FULL), if it is not so already;
    /// nothing to set with `Durability::Normal` (no syncer), where every commit is NORMAL. No
    /// transaction is open between groups.
    fn set_deferring(&self, leader: &mut Leader, deferred: bool) -> Result<(), LogError> {
        if self.fsyncing().is_none() || leader.deferring == deferred {
            return Ok(());
        }
        let mode = if deferred { "NORMAL" } else { "FULL" };
        leader
            .conn
            .execute_batch(&format!("PRAGMA synchronous = {mode}"))
            .map_err(|e| map_err("setting the durability of a commit", e))?;
        leader.deferring = deferred;
        Ok(())
    }

    /// The syncer if it fsyncs (`Durability::Full`): with `Normal` it only checkpoints.
    fn fsyncing(&self) -> Option<&Arc<Syncer>> {
        self.syncer.as_ref().filter(|s| s.fsyncs())
    }

    /// The number of the last write whose outcome is known.
    fn numbered(&self) -> u64 {
        self.numbered.load(Ordering::Acquire)
    }

    /// Writes and commits the begun appends held, if any, and asks the syncer for the fsync.
    /// If their write fails they are lost: recorded for their waiters, and returned. If the
    /// connection's mode cannot be set they stay held (an error is returned too).
    fn commit_held(&self, leader: &mut Leader) -> Result<(), LogError> {
        if leader.held.is_empty() {
            return Ok(());
        }
        self.set_deferring(leader, true)?;
        let number = self.numbered() + 1;
        let casts = leader.held.casts();
        let Leader {
            conn, blobs, held, ..
        } = &mut *leader;
        let written = std::panic::catch_unwind(AssertUnwindSafe(|| held.write(conn, blobs)));
        let failed = match written {
            Ok(Ok(refused)) => {
                self.commits.fetch_add(1, Ordering::Relaxed);
                if let Some(syncer) = &self.syncer {
                    syncer.request(number);
                }
                self.lost()
                    .extend(refused.into_iter().map(|(cast, slot, why)| Lost {
                        commit: number,
                        cast,
                        slot,
                        why,
                    }));
                self.numbered.store(number, Ordering::Release);
                return Ok(());
            }
            Ok(Err(WriteFailure::NotStarted(err))) => {
                // Nothing was written and nothing numbered: they stay held.
                return Err(LogError::storage(
                    "writing begun appends",
                    NotWrittenYet(err),
                ));
            }
            Ok(Err(WriteFailure::Lost(err))) => err.to_string(),
            Err(_) => {
                rollback(conn, blobs);
                held.clear();
                "the writer panicked while writing them".to_string()
            }
        };
        Err(self.lose(number, casts, &failed))
    }

    /// Gives up the held appends (their write could not begin): the next number is theirs.
    fn give_up_held(&self, leader: &mut Leader, why: &str) -> LogError {
        let casts = leader.held.casts();
        leader.held.clear();
        self.lose(self.numbered() + 1, casts, why)
    }

    /// Records every append to `casts` carried by write `number` as lost, publishes the
    /// number, and returns the error their waiters get.
    fn lose(&self, number: u64, casts: Vec<CastId>, why: &str) -> LogError {
        self.lost().extend(casts.into_iter().map(|cast| Lost {
            commit: number,
            cast,
            slot: 0,
            why: why.to_string(),
        }));
        self.numbered.store(number, Ordering::Release);
        LogError::storage(
            "writing begun appends",
            format!("steps held for commit {number} were not stored ({why})"),
        )
    }

    fn lost(&self) -> MutexGuard<'_, Vec<Lost>> {
        // Pushes only; take it back if poisoned.
        self.lost.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The error of a waiter for an append to `cast` at `ticket`, if it was not stored.
    fn lost_for(&self, ticket: Ticket, cast: &CastId) -> Option<LogError> {
        self.lost()
            .iter()
            .find(|l| l.commit == ticket.commit && l.cast == *cast && ticket.slot >= l.slot)
            .map(Lost::error)
    }

    /// The error of `command` if it is a begun append (or a held snapshot) to a cast whose held
    /// appends were lost.
    fn lost_for_begun(&self, command: &Command) -> Option<LogError> {
        // A held snapshot of such a cast could name a step the log does not have.
        let (Command::AppendWithBlobs {
            cast,
            deferred: true,
            ..
        }
        | Command::PutCheckpoint {
            cast,
            deferred: true,
            ..
        }) = command
        else {
            return None;
        };
        self.lost()
            .iter()
            .find(|l| l.cast == *cast)
            .map(Lost::error)
    }

    /// Waits until commit `commit` (the number a begun append was answered with) is durable:
    /// writes the begun appends held, if it is theirs, then waits for the syncer. A number is
    /// published only once its write is done, so below it the leader's lock is taken, and the
    /// outcome is known when it is released.
    pub(crate) fn wait(&self, ticket: Ticket, cast: &CastId) -> Result<(), LogError> {
        let commit = ticket.commit;
        if self.numbered() < commit {
            let mut leader = self.leader.lock().unwrap_or_else(|p| p.into_inner());
            if self.numbered() < commit
                && let Err(err) = self.commit_held(&mut leader)
                && self.numbered() < commit
            {
                // Their write could not begin (a busy lock past the timeout, a mode not set):
                // they are still held. This waiter's answer is final, so they are given up
                // rather than written later behind its back.
                return Err(self.give_up_held(&mut leader, &err.to_string()));
            }
        }
        if let Some(err) = self.lost_for(ticket, cast) {
            return Err(err);
        }
        if self.numbered() < commit {
            return Err(LogError::storage(
                "waiting for a commit",
                format!(
                    "commit {commit} was never made (the writer has made {})",
                    self.numbered()
                ),
            ));
        }
        match self.fsyncing() {
            Some(syncer) => syncer.wait(commit),
            None => Ok(()),
        }
    }

    fn queue(&self) -> MutexGuard<'_, Vec<Command>> {
        // Pushing and draining cannot leave the queue half-changed; take it back if poisoned.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Held steps whose transaction could not begin: nothing of them is written, they stay held.
#[derive(Debug, thiserror::Error)]
#[error("the held steps could not be written yet: {0}")]
struct NotWrittenYet(#[source] LogError);

impl Lost {
    fn error(&self) -> LogError {
        LogError::storage(
            "writing begun appends",
            format!(
                "steps of cast {} held for commit {} were not stored ({}); begun appends to it \
                 are refused",
                self.cast, self.commit, self.why
            ),
        )
    }
}

/// Runs `group` in one transaction and commits it if any command succeeded; returns the
/// results and whether it was committed. A failed commit turns every result into an error.
fn run_group(
    conn: &mut Connection,
    blobs: &mut BlobStore,
    group: Vec<Command>,
) -> (Vec<Done>, bool) {
    if let Err(err) = begin(conn, blobs) {
        return (group.into_iter().map(|c| refuse(c, &err)).collect(), false);
    }
    let mut done = Vec::with_capacity(group.len());
    if group.len() == 1 {
        // Alone in its transaction, a command needs no savepoint: on error the whole
        // transaction is rolled back (below), which undoes exactly its partial writes.
        done.extend(
            group
                .into_iter()
                .map(|command| execute(conn, blobs, command)),
        );
    } else {
        let mut commands = group.into_iter();
        for command in commands.by_ref() {
            done.push(run_one(conn, blobs, command));
            if conn.is_autocommit() {
                // SQLite rolled the whole transaction back on an error (a full disk, an I/O
                // error): nothing of the group is stored.
                let err = LogError::storage("writing", "the transaction was rolled back");
                done = done.into_iter().map(|d| d.fail(&err)).collect();
                done.extend(commands.map(|c| refuse(c, &err)));
                rollback(conn, blobs);
                return (done, false);
            }
        }
    }
    if !done.iter().any(Done::is_ok) {
        rollback(conn, blobs);
        return (done, false);
    }
    match commit(conn, blobs) {
        Ok(()) => (done, true),
        Err(err) => (done.into_iter().map(|d| d.fail(&err)).collect(), false),
    }
}

fn refuse(command: Command, err: &LogError) -> Done {
    let copy = || LogError::storage("starting a write transaction", err.clone());
    match command {
        Command::Append { reply, .. }
        | Command::Fork { reply, .. }
        | Command::AppendLeased { reply, .. } => Done::Records(reply, Err(copy())),
        Command::AppendWithBlobs { reply, .. } => Done::Numbered(reply, Err(copy())),
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
        Err(err) => return refuse(command, &map_err("opening a savepoint", err)),
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
            done.fail(&map_err("closing a savepoint", err))
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
        } => Done::Records(reply, append(conn, store, &cast, expected, events)),
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
                    append(conn, store, &cast, expected, events)
                }
            });
            Done::Numbered(reply, result)
        }
        Command::AppendLeased {
            lease,
            expected,
            blobs,
            events,
            reply,
        } => {
            let result = crate::sqlite::queue::check_lease(conn, &lease)
                .and_then(|()| blobs.iter().try_for_each(|b| store.put(conn, b).map(drop)))
                .and_then(|()| append(conn, store, &lease.cast, expected, events));
            Done::Records(reply, result)
        }
        Command::Fork {
            cast,
            from,
            events,
            reply,
        } => Done::Records(reply, fork(conn, store, &cast, &from, &events)),
        Command::Import {
            head,
            events,
            reply,
        } => Done::Unit(reply, import(conn, store, &head, &events)),
        Command::PutBlob { bytes, reply } => Done::Blob(reply, store.put(conn, &bytes)),
        Command::PutCheckpoint {
            cast,
            name,
            checkpoint,
            deferred: _,
            reply,
        } => Done::Unit(reply, put_checkpoint(conn, &cast, &name, &checkpoint)),
    }
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
