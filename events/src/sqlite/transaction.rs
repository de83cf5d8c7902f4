//! The writer's transaction: `BEGIN IMMEDIATE`, `COMMIT` and `ROLLBACK` on the writer's
//! connection together with the blob store's part of each (the addresses it learnt are
//! trusted only once committed). The writer and the held appends both write through it.

use rusqlite::Connection;

use crate::log::LogError;
use crate::sqlite::blobs::BlobStore;
use crate::sqlite::map_err;

/// Begins a write transaction (`BEGIN IMMEDIATE`) and the blob store's part of it.
pub(crate) fn begin(conn: &Connection, blobs: &mut BlobStore) -> Result<(), LogError> {
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(|e| map_err("starting a write transaction", e))?;
    if let Err(err) = blobs.begin(conn) {
        rollback(conn, blobs);
        return Err(err);
    }
    Ok(())
}

/// Commits the open transaction. Row ids learnt in it are trusted once it is committed (a
/// command whose savepoint was rolled back has forgotten its own already, see `writer::run_one`); on
/// failure it is rolled back, and a rolled-back insert's id may be given to another row later.
pub(crate) fn commit(conn: &Connection, blobs: &mut BlobStore) -> Result<(), LogError> {
    blobs.before_commit(conn);
    match conn.execute_batch("COMMIT") {
        Ok(()) => {
            blobs.committed();
            Ok(())
        }
        Err(err) => {
            rollback(conn, blobs);
            Err(map_err("committing", err))
        }
    }
}

/// Rolls back the open transaction, if one is, and forgets the rows it stored.
pub(crate) fn rollback(conn: &Connection, blobs: &mut BlobStore) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    blobs.rolled_back();
}
