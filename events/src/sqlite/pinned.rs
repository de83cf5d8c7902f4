//! Blob reads pinned to one read transaction.
//!
//! A blob read on its own is one statement in autocommit mode: SQLite takes the WAL read lock
//! (several `fcntl` calls on the `-shm` index) and releases it for every blob. A pass that
//! reads thousands of blobs (`verify` checking every reference and rebuilding every prompt)
//! spends a third of its time there. [`SqliteLog::pin_blob_reads`] takes one reader connection
//! out of the pool and opens a read transaction on it; until the returned [`PinnedReads`] is
//! dropped, every [`EventLog::get_blob`](crate::log::EventLog::get_blob) of the log is read
//! through it, from one snapshot of the file.
//!
//! Blobs are only ever added, so a snapshot taken after the events that reference them were
//! read holds every one of them; pin after reading the events, not before.

use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;

use crate::log::LogError;
use crate::sqlite::{SqliteLog, map_err, open_reader};

/// The connection blob reads are pinned to, while one is.
#[derive(Debug, Default)]
pub(crate) struct Pin(Mutex<Option<Connection>>);

impl Pin {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<Connection>> {
        // Holds no invariant a panic could break.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Blob reads of a log share one read transaction until this is dropped.
#[derive(Debug)]
pub struct PinnedReads<'a> {
    log: &'a SqliteLog,
    /// False when reads were pinned already (by an outer pin, which ends them).
    owner: bool,
}

impl SqliteLog {
    /// Pins this log's blob reads to one read transaction (see the module's text).
    pub fn pin_blob_reads(&self) -> Result<PinnedReads<'_>, LogError> {
        let mut pin = self.pin.lock();
        if pin.is_some() {
            return Ok(PinnedReads {
                log: self,
                owner: false,
            });
        }
        let idle = self.pool().pop();
        let conn = match idle {
            Some(conn) => conn,
            None => open_reader(&self.path, self.immutable)
                .map_err(|e| map_err("opening a reader", e))?,
        };
        conn.execute_batch("BEGIN DEFERRED")
            .map_err(|e| map_err("starting a read", e))?;
        *pin = Some(conn);
        Ok(PinnedReads {
            log: self,
            owner: true,
        })
    }
}

impl Drop for PinnedReads<'_> {
    fn drop(&mut self) {
        if !self.owner {
            return;
        }
        let Some(conn) = self.log.pin.lock().take() else {
            return;
        };
        // A read transaction has nothing to keep; a connection that cannot end it is closed.
        if conn.execute_batch("COMMIT").is_ok() {
            let mut pool = self.log.pool();
            if pool.len() < super::READER_POOL {
                pool.push(conn);
            }
        }
    }
}
