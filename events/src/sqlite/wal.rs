//! The WAL file: grown to its working size before a run of many commits.

use std::path::Path;

use rusqlite::Connection;

use super::{BUSY_TIMEOUT, Durability, SqliteLog};

impl SqliteLog {
    /// Prepares for a run of many commits (a cast being driven): with an fsync per commit,
    /// a WAL file shorter than its working size is grown to it once (about 4 MB, 10–20 ms),
    /// since SQLite removes the WAL when the last connection closes and every process would
    /// otherwise start by growing it again. Nothing is written to the database.
    pub fn prepare_for_steps(&self) {
        if self.durability != Durability::Full {
            return;
        }
        let mut wal = self.path.as_os_str().to_owned();
        wal.push("-wal");
        let grown = std::fs::metadata(&wal).is_ok_and(|m| m.len() >= WAL_PREGROW_BYTES);
        if grown {
            return;
        }
        if let Ok(conn) = Connection::open(&self.path)
            && conn.busy_timeout(BUSY_TIMEOUT).is_ok()
        {
            grow_wal(&conn, Path::new(&wal));
        }
    }
}

/// Grows the WAL file to its working size: a transaction writes [`WAL_PREGROW_PAGES`] pages
/// with a tiny page cache (so SQLite spills them into the WAL) and is rolled back, which leaves
/// the file that long and the database untouched, and the file is synced. Commits then
/// overwrite allocated blocks instead of growing the file, whose fsync would also have to
/// write its new size (measured on ext4: about a third less time per step for the first
/// thousand pages). Best effort: any failure leaves a working log.
fn grow_wal(conn: &Connection, wal: &Path) {
    let grow = || -> rusqlite::Result<()> {
        conn.execute_batch(
            "PRAGMA cache_size = 8; BEGIN IMMEDIATE; CREATE TABLE castlog_wal_pregrow (b BLOB);",
        )?;
        let page = vec![0u8; 4000];
        let mut insert = conn.prepare("INSERT INTO castlog_wal_pregrow (b) VALUES (?1)")?;
        for _ in 0..WAL_PREGROW_PAGES {
            insert.execute([&page])?;
        }
        Ok(())
    };
    let _ = grow();
    // The connection is dropped after this, so its tiny page cache is not restored.
    let _ = conn.execute_batch("ROLLBACK");
    // The spilled pages are written once now, not by the first commit's fsync.
    if let Ok(file) = std::fs::OpenOptions::new().write(true).open(wal) {
        let _ = file.sync_all();
    }
}

/// Pages the WAL is grown to (SQLite checkpoints it at 1,000 pages by default).
const WAL_PREGROW_PAGES: usize = 1000;

/// The WAL length below which [`SqliteLog::prepare_for_steps`] grows it (most of the above).
const WAL_PREGROW_BYTES: u64 = 3_000_000;
