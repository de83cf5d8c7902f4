//! The syncer: fsyncs the WAL for commits made without an fsync of their own.
//!
//! With [`Durability::Full`](super::Durability::Full) a commit is normally fsynced inside
//! SQLite's `COMMIT` (`synchronous=FULL`), and nothing else can happen on the writer meanwhile.
//! A [begun](crate::EventLog::begin_append_with_blobs) append is committed with
//! `synchronous=NORMAL` instead (SQLite writes its WAL frames and returns), and asks the syncer
//! for an fsync of the WAL file. The syncer thread runs one `fdatasync` at a time, each covering
//! every commit made before it started, so while it waits for the disk the writer commits the
//! next step. A commit counts as durable once a sync that began after it has returned, or once
//! a later `synchronous=FULL` commit has (SQLite's fsync of the WAL covers every frame before
//! it). Commits are numbered by the writer in commit order.
//!
//! Why this is sound: the WAL is one file written front to back between checkpoints, so the
//! frames that survive a power cut are a prefix of the ones written, and SQLite's recovery
//! keeps only whole transactions whose frames check out (salted, checksummed). A checkpoint
//! syncs the WAL before copying it into the database (also with `synchronous=NORMAL`), so the
//! database never holds a page whose WAL frame was not yet durable. What differs from
//! `synchronous=FULL` is only when other connections see a commit: as soon as it is made,
//! before it is durable; nothing in this process acts on it before (see
//! [`Appending`](crate::log::Appending)).
//!
//! A failed fsync leaves the durability of everything unsynced in doubt (the kernel may have
//! dropped the pages), so every waiter from then on gets the error.

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
    /// Why the last sync failed, if one did.
    failed: Option<String>,
    /// Set when the log closes: the thread syncs what is asked and ends.
    stopping: bool,
    /// The thread waits to be asked (a request while it syncs needs no wake-up: it looks
    /// again when its sync returns).
    idle: bool,
}

/// The WAL syncer of one log.
#[derive(Debug)]
pub(crate) struct Syncer {
    wal: PathBuf,
    state: Mutex<State>,
    /// Wakes the thread: a sync is asked for, or it is to stop.
    asked: Condvar,
    /// Wakes waiters: `synced` moved or a sync failed.
    synced: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Syncer {
    /// A syncer of the WAL file `wal` (its thread starts with the first request).
    pub(crate) fn new(wal: PathBuf) -> Self {
        Self {
            wal,
            state: Mutex::new(State::default()),
            asked: Condvar::new(),
            synced: Condvar::new(),
            thread: Mutex::new(None),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state's fields are each updated in one step; take it back if poisoned.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks for commit `commit` (made without an fsync) to be made durable. (If the thread
    /// cannot be started, [`Syncer::wait`] syncs on the waiter's thread.)
    pub(crate) fn request(self: &Arc<Self>, commit: u64) {
        let idle = {
            let mut state = self.state();
            state.requested = state.requested.max(commit);
            state.idle
        };
        self.start();
        if idle {
            self.asked.notify_one();
        }
    }

    /// Records that every commit up to `commit` is durable (a `synchronous=FULL` commit).
    pub(crate) fn covered(&self, commit: u64) {
        let mut state = self.state();
        if commit > state.synced {
            state.synced = commit;
            drop(state);
            self.synced.notify_all();
        }
    }

    /// Waits until commit `commit` is durable.
    pub(crate) fn wait(&self, commit: u64) -> Result<(), LogError> {
        let mut state = self.state();
        loop {
            if let Some(failed) = &state.failed {
                return Err(LogError::storage("making the WAL durable (fsync)", failed));
            }
            if state.synced >= commit {
                return Ok(());
            }
            if self
                .thread
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_none()
            {
                // No thread (it could not be started): sync here.
                drop(state);
                self.sync_once(&mut None);
                state = self.state();
                continue;
            }
            state = self.synced.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Starts the thread unless it runs or the syncer is stopped.
    fn start(self: &Arc<Self>) {
        let mut slot = self.thread.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() || self.state().stopping {
            return;
        }
        let syncer = Arc::clone(self);
        *slot = std::thread::Builder::new()
            .name("castlog-sync".into())
            .spawn(move || syncer.run())
            .ok();
    }

    fn run(&self) {
        let mut file = None;
        loop {
            {
                let mut state = self.state();
                while state.requested <= state.synced && !state.stopping {
                    state.idle = true;
                    state = self.asked.wait(state).unwrap_or_else(|p| p.into_inner());
                    state.idle = false;
                }
                if state.requested <= state.synced {
                    return;
                }
            }
            self.sync_once(&mut file);
        }
    }

    /// One fsync covering every commit requested so far.
    fn sync_once(&self, file: &mut Option<File>) {
        let target = self.state().requested;
        // The WAL lives as long as the writer's connection, which outlives this syncer's use.
        if file.is_none() {
            *file = File::open(&self.wal).ok();
        }
        let result = match file {
            Some(f) => f.sync_data().map_err(|e| e.to_string()),
            None => Err(format!("{} cannot be opened", self.wal.display())),
        };
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_that_fails_is_the_answer_of_every_waiter_from_then_on() {
        let dir = tempfile::tempdir().unwrap();
        let syncer = Arc::new(Syncer::new(dir.path().join("missing.db-wal")));
        syncer.request(1);
        let err = syncer.wait(1).unwrap_err().to_string();
        assert!(err.contains("missing.db-wal cannot be opened"), "{err}");
        // A later commit covered by a full commit is still in doubt: the failed sync may have
        // lost pages before it.
        syncer.covered(2);
        assert!(syncer.wait(2).is_err());
        syncer.stop();
    }

    #[test]
    fn commits_are_durable_once_a_sync_after_them_returns() {
        let dir = tempfile::tempdir().unwrap();
        let wal = dir.path().join("x.db-wal");
        std::fs::write(&wal, b"frames").unwrap();
        let syncer = Arc::new(Syncer::new(wal));
        for commit in 1..=5 {
            syncer.request(commit);
        }
        syncer.wait(5).unwrap();
        syncer.wait(3).unwrap();
        assert!(syncer.state().synced >= 5);
        syncer.covered(9);
        syncer.wait(9).unwrap();
        syncer.stop();
        // Stopped: a waiter for a commit asked later syncs on its own thread.
        syncer.request(10);
        syncer.wait(10).unwrap();
    }
}
