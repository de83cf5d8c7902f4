//! The syncer: fsyncs the WAL for commits made without an fsync of their own.
//!
//! With [`Durability::Full`](super::Durability::Full) a commit is normally fsynced inside
//! SQLite's `COMMIT` (`synchronous=FULL`), and nothing else can happen on the writer meanwhile.
//! [Begun](crate::EventLog::begin_append_with_blobs) appends are committed (held together, see
//! the writer) with `synchronous=NORMAL` instead (SQLite writes their WAL frames and returns),
//! and the commit asks the syncer for an fsync of the WAL file. The syncer thread runs one
//! `fdatasync` at a time, each covering every commit made before it started, so while it waits
//! for the disk the writer goes on with the next steps. A commit counts as durable once a sync that began after it has returned. Commits
//! are numbered by the writer in commit order; a waiter asks for the number it waits for (a
//! begun append may have been committed in a group with its own fsync, which asked for
//! nothing), and a group with its own fsync is acknowledged only once what the syncer was asked
//! for is durable (it may rest on it: a blob it found already stored, a head it read).
//!
//! The file synced is the WAL of the file SQLite opened (`sqlite3_db_filename` plus `-wal`, a
//! symlinked database resolved as SQLite resolves it); fsync works on the file, not on the
//! handle, so syncing it through a handle of its own flushes what the writer's connection
//! wrote. The file stays the same while the log is open: the writer's connection holds a shared
//! lock on the database, so no other connection can delete the WAL or leave WAL mode, and a
//! `wal_checkpoint(TRUNCATE)` keeps the file.
//!
//! Why this is sound: SQLite's recovery reads the WAL's frames in order and stops at the first
//! whose salt or checksum (chained over every frame before it) does not match, and keeps only
//! whole transactions, so after a power cut the log holds a prefix of the commits made, whatever
//! part of the unsynced frames reached the disk. A checkpoint syncs the WAL before copying it
//! into the database (also with `synchronous=NORMAL`), so the database never holds a page whose
//! WAL frame was not yet durable. What differs from `synchronous=FULL` is when other
//! connections (other threads, other processes) can read a commit: as soon as it is made, for
//! as long as its fsync takes, before it is durable. The driver acts on nothing before (see
//! [`Appending`](crate::log::Appending)).
//!
//! A failed fsync leaves the durability of everything unsynced in doubt (the kernel may have
//! dropped the pages), so every waiter from then on gets the error and the thread syncs no more.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::log::LogError;

#[derive(Debug, Default)]
struct State {
    /// The highest commit number asked to be made durable.
    requested: u64,
    /// Every commit up to this number is durable.
    synced: u64,
    /// Why a sync failed, if one did.
    failed: Option<crate::log::Cause>,
    /// Set when the log closes: the thread syncs what is asked and ends.
    stopping: bool,
    /// The thread runs (if not, a waiter syncs on its own thread).
    running: bool,
    /// The thread waits to be asked (a request while it syncs needs no wake-up: it looks
    /// again when its sync returns).
    idle: bool,
}

impl State {
    /// Nothing for the thread to do now.
    fn settled(&self) -> bool {
        self.requested <= self.synced || self.failed.is_some()
    }
}

/// Syncs between two WAL checkpoints the thread runs (see [`Syncer::checkpoint`]).
const CHECKPOINT_EVERY: u64 = 2;

/// The WAL syncer of one log.
#[derive(Debug)]
pub(crate) struct Syncer {
    /// The database file SQLite opened.
    db: PathBuf,
    /// Whether it fsyncs (`Durability::Full`) or only checkpoints (`Normal`).
    fsync: bool,
    wal: PathBuf,
    state: Mutex<State>,
    /// Wakes the thread: a sync is asked for, or it is to stop.
    asked: Condvar,
    /// Wakes waiters: `synced` moved or a sync failed.
    synced: Condvar,
    /// The thread. Lock order: `thread`, then `state`.
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The WAL file, opened by the first sync.
    file: Mutex<Option<File>>,
}

impl Syncer {
    /// A syncer of the WAL file of database file `db` (its thread starts with the first
    /// request); with `fsync` false (`Durability::Normal`) it only checkpoints: a commit
    /// asked for counts as synced at once.
    pub(crate) fn new(db: PathBuf, fsync: bool) -> Self {
        let mut wal = db.clone().into_os_string();
        wal.push("-wal");
        Self {
            db,
            fsync,
            wal: wal.into(),
            state: Mutex::new(State::default()),
            asked: Condvar::new(),
            synced: Condvar::new(),
            thread: Mutex::new(None),
            file: Mutex::new(None),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state's fields are each updated in one step; take it back if poisoned.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks for commit `commit` (made without an fsync) to be made durable. (If the thread
    /// cannot be started, [`Syncer::wait`] syncs on the waiter's thread.)
    pub(crate) fn request(self: &Arc<Self>, commit: u64) {
        self.start();
        self.ask(&mut self.state(), commit);
    }

    /// Raises what the thread is asked to sync to `commit`, waking it if it waits.
    fn ask(&self, state: &mut State, commit: u64) {
        if commit > state.requested {
            state.requested = commit;
            if state.idle {
                self.asked.notify_one();
            }
        }
    }

    /// Waits until commit `commit` is durable (asking for it first: a commit made as part of
    /// a group with its own fsync is numbered but was never asked for).
    pub(crate) fn wait(&self, commit: u64) -> Result<(), LogError> {
        let mut state = self.state();
        self.ask(&mut state, commit);
        loop {
            if let Some(failed) = &state.failed {
                return Err(LogError::Storage {
                    context: "making the WAL durable (fsync)".into(),
                    source: failed.clone(),
                });
            }
            if state.synced >= commit {
                return Ok(());
            }
            if !state.running {
                // No thread (it could not be started, or the log is closing): sync here.
                drop(state);
                self.sync_once();
                state = self.state();
                continue;
            }
            state = self.synced.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Waits until every commit asked for so far is durable.
    pub(crate) fn wait_requested(&self) -> Result<(), LogError> {
        let requested = self.state().requested;
        self.wait(requested)
    }

    /// Starts the thread unless it runs or the syncer is stopped.
    fn start(self: &Arc<Self>) {
        let mut slot = self.thread.lock().unwrap_or_else(|p| p.into_inner());
        {
            let mut state = self.state();
            if slot.is_some() || state.stopping {
                return;
            }
            // Marked before the thread exists, so a thread that ends at once (a stop racing
            // this start) always leaves it false behind it.
            state.running = true;
        }
        let syncer = Arc::clone(self);
        *slot = std::thread::Builder::new()
            .name("castlog-sync".into())
            .spawn(move || syncer.run())
            .ok();
        if slot.is_none() {
            self.state().running = false;
        }
    }

    fn run(&self) {
        // The thread's own connection, for checkpoints; closed before the writer's.
        let mut checkpointer = None;
        let mut syncs = 0u64;
        loop {
            {
                let mut state = self.state();
                while state.settled() && !state.stopping {
                    state.idle = true;
                    state = self.asked.wait(state).unwrap_or_else(|p| p.into_inner());
                    state.idle = false;
                }
                if state.settled() {
                    state.running = false;
                    drop(state);
                    // A waiter that saw the thread running syncs on its own from now on.
                    self.synced.notify_all();
                    return;
                }
            }
            self.sync_once();
            syncs += 1;
            if syncs.is_multiple_of(CHECKPOINT_EVERY) {
                self.checkpoint(&mut checkpointer);
            }
        }
    }

    /// Copies the WAL's committed frames into the database (`wal_checkpoint(PASSIVE)`, on a
    /// connection of this thread's own), so the writer rarely has to: SQLite checkpoints on
    /// the committing thread once the WAL holds 1,000 pages (a few milliseconds every ~150
    /// steps of a cast), while here it runs beside the next steps. Once every frame is copied
    /// the writer's next transaction starts the WAL over, so it stays short. A passive
    /// checkpoint waits for no lock and copies what no reader still needs; it syncs the WAL
    /// before copying and the database after, so nothing not yet durable reaches the
    /// database. Best effort: the writer's own checkpoints remain if this one cannot run.
    fn checkpoint(&self, conn: &mut Option<rusqlite::Connection>) {
        if conn.is_none() {
            // The file exists (the writer has it open); never create one.
            let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
                | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
            *conn = rusqlite::Connection::open_with_flags(&self.db, flags).ok();
        }
        if let Some(conn) = conn {
            let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        }
    }

    /// Whether it fsyncs the WAL (`Durability::Full`), not only checkpoints it.
    pub(crate) fn fsyncs(&self) -> bool {
        self.fsync
    }

    /// One fsync covering every commit requested before it starts (none when it does not
    /// fsync: what is asked is then synced as far as `Durability::Normal` asks).
    fn sync_once(&self) {
        let target = self.state().requested;
        if !self.fsync {
            let mut state = self.state();
            state.synced = state.synced.max(target);
            drop(state);
            self.synced.notify_all();
            return;
        }
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if file.is_none() {
            *file = File::open(&self.wal).ok();
        }
        let result: Result<(), crate::log::Cause> = match &*file {
            Some(f) => f.sync_data().map_err(crate::log::Cause::new),
            None => Err(crate::log::Cause::new(format!(
                "{} cannot be opened",
                self.wal.display()
            ))),
        };
        drop(file);
        let mut state = self.state();
        match result {
            Ok(()) => state.synced = state.synced.max(target),
            Err(err) => state.failed = Some(err),
        }
        drop(state);
        self.synced.notify_all();
    }

    /// Syncs what is asked, stops the thread and waits for it.
    pub(crate) fn stop(&self) {
        self.state().stopping = true;
        self.asked.notify_all();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
        // What was asked after the thread ended (or with no thread at all).
        if !self.state().settled() {
            self.sync_once();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_that_fails_is_the_answer_of_every_waiter_and_stopping_ends() {
        let dir = tempfile::tempdir().unwrap();
        let syncer = Arc::new(Syncer::new(dir.path().join("missing.db"), true));
        syncer.request(1);
        let err = syncer.wait(1).unwrap_err().to_string();
        assert!(err.contains("missing.db-wal cannot be opened"), "{err}");
        // A later commit is in doubt too: the failed sync may have lost pages before it.
        syncer.request(2);
        assert!(syncer.wait(2).is_err());
        // The thread does not retry for ever: it waits, and ends when told.
        syncer.stop();
        assert!(!syncer.state().running);
    }

    #[test]
    fn commits_are_durable_once_a_sync_after_them_returns() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.db-wal"), b"frames").unwrap();
        let syncer = Arc::new(Syncer::new(dir.path().join("x.db"), true));
        for commit in 1..=5 {
            syncer.request(commit);
        }
        syncer.wait(5).unwrap();
        syncer.wait(3).unwrap();
        assert!(syncer.state().synced >= 5);
        syncer.stop();
        // Stopped: a commit asked later is synced by its waiter, or by the next stop.
        syncer.request(6);
        syncer.wait(6).unwrap();
        syncer.request(7);
        syncer.stop();
        assert_eq!(syncer.state().synced, 7);
    }
}
