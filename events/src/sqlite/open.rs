//! Opening a file: the header check, WAL mode and durability, and the schema: its version and
//! the upgrade to the version this build writes.

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, TransactionBehavior};

use super::{BUSY_TIMEOUT, Durability, address, is_damage, without_sql};
use crate::log::{Cause, LogError};

/// Schema scripts, in order; script `i` takes `user_version` from `i` to `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    include_str!("schema/v1.sql"),
    include_str!("schema/v2.sql"),
    include_str!("schema/v3.sql"),
    include_str!("schema/v4.sql"),
    include_str!("schema/v5.sql"),
    include_str!("schema/v6.sql"),
    include_str!("schema/v7.sql"),
    include_str!("schema/v8.sql"),
    include_str!("schema/v9.sql"),
    include_str!("schema/v10.sql"),
    include_str!("schema/v11.sql"),
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The oldest schema version a read-only file may have: the versions after it only add an
/// index whose queries give the same rows without it (v7's index of claim events) and a
/// column a read can compute instead (v8's `casts.kind`, see [`LEGACY_KIND`]) and the run
/// queue's tables, whose absence reads as an empty queue (v9), so such a file reads correctly
/// as it is; an older one needs its upgrade first.
pub(super) const READS_WITHOUT_UPGRADE: i64 = 6;

/// The first version with `casts.kind`.
const KIND_COLUMN_SINCE: i64 = 8;

/// A stream's kind, as `casts.kind` holds it from v8 on, computed for a row of an older file
/// the way `schema/v8.sql` fills the column (a test pins the two to the same kinds).
pub(super) const LEGACY_KIND: &str = "CASE \
    WHEN substr(casts.cast_id, 1, 7) = 'claims:' THEN 'claims_ledger' \
    WHEN (SELECT e.kind FROM events e WHERE e.id = casts.id * 4294967296 + 1) \
         = 'engagement_started' THEN 'engagement' \
    ELSE 'cast' END";

/// Whether `table` has a column named `column`.
fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
        [table, column],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// The SQL that reads a stream's kind from a `casts` row of a file at schema `version`.
pub(super) fn kind_column(version: i64) -> &'static str {
    if version >= KIND_COLUMN_SINCE {
        "casts.kind"
    } else {
        LEGACY_KIND
    }
}

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Refuses what is at `path` unless it is a regular file (or nothing, for a log to create):
/// a FIFO would block the first read until someone writes to it, and a device, socket or
/// directory is no castlog database either. A symlink is judged by what it points to.
pub(super) fn regular_file(path: &Path) -> Result<(), Refused> {
    let kind = match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => return Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(Refused::Unreadable(err)),
        Ok(meta) if meta.is_dir() => "a directory",
        Ok(meta) => {
            use std::os::unix::fs::FileTypeExt;
            let kind = meta.file_type();
            if kind.is_fifo() {
                "a FIFO"
            } else if kind.is_socket() {
                "a socket"
            } else if kind.is_char_device() || kind.is_block_device() {
                "a device"
            } else {
                "not a regular file"
            }
        }
    };
    Err(Refused::NotAFile(kind))
}

/// Why a path is refused before SQLite opens it.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refused {
    /// What is there cannot be looked at or read.
    #[error(transparent)]
    Unreadable(std::io::Error),
    /// What is there is not a regular file (a directory, a FIFO, ...).
    #[error("it is {0}, not a database file; point --db at a castlog database or a new path")]
    NotAFile(&'static str),
    /// The file does not start with SQLite's header.
    #[error(
        "not a SQLite database (bad file header); point --db at a castlog database or a new path"
    )]
    NotSqlite,
}

/// A SQLite error met while doing something, shown without the SQL it may quote.
#[derive(Debug, thiserror::Error)]
#[error("{doing}: {}", without_sql(.source))]
pub(super) struct Sql {
    /// What was being done.
    pub doing: String,
    /// SQLite's error.
    #[source]
    pub source: rusqlite::Error,
}

/// The error for a file an opener that needs a log finds without castlog's schema.
pub(super) fn no_schema(path: &Path) -> LogError {
    let empty = std::fs::metadata(path).is_ok_and(|m| m.len() == 0);
    LogError::NoDatabase {
        path: path.display().to_string(),
        reason: if empty {
            "the file is empty".into()
        } else {
            "the SQLite file holds no castlog schema".into()
        },
    }
}

/// An error opening the file: [`LogError::ReadOnly`] when the file or its directory cannot
/// be written (SQLite then cannot open it for writing, or cannot make its `-shm` index).
pub(super) fn failed(shown: &str, err: rusqlite::Error) -> LogError {
    use rusqlite::ErrorCode as C;
    match err.sqlite_error_code() {
        Some(C::ReadOnly | C::CannotOpen | C::PermissionDenied) if Path::new(shown).exists() => {
            LogError::ReadOnly {
                context: format!("opening {shown}"),
                source: Cause::new(err),
            }
        }
        _ => LogError::open(shown, err),
    }
}

/// `path` as a SQLite URI that opens it immutable (read without locks or `-shm`), if it is
/// UTF-8. `%`, `?` and `#` are escaped; the rest of a path is a valid URI path as it is.
pub(super) fn immutable_uri(path: &Path) -> Option<String> {
    let text = path.to_str()?;
    let mut uri = String::from("file:");
    for c in text.chars() {
        match c {
            '%' => uri.push_str("%25"),
            '?' => uri.push_str("%3f"),
            '#' => uri.push_str("%23"),
            c => uri.push(c),
        }
    }
    uri.push_str("?immutable=1");
    Some(uri)
}

pub(super) fn check_magic(path: &Path) -> Result<(), Refused> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(Refused::Unreadable(err)),
    };
    let mut header = [0u8; 16];
    let mut read = 0;
    while read < header.len() {
        match file.read(&mut header[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(err) => return Err(Refused::Unreadable(err)),
        }
    }
    if read == 0 || &header == SQLITE_MAGIC {
        Ok(())
    } else {
        Err(Refused::NotSqlite)
    }
}

/// Bytes in a page of a file castlog creates.
///
/// Most event rows of a cast with long replies are 1-3 kB (a reply, its completion, a prompt's
/// placements): in SQLite's default 4 kB pages two rows of just over 2 kB cannot share one, so
/// each takes a page alone and nearly half the events table was empty space. In 16 kB pages
/// seven such rows share one. A file's page size is fixed when its first table is written;
/// files made before keep theirs.
pub const PAGE_SIZE: u32 = 16_384;

/// Sets [`PAGE_SIZE`] on a file nothing has been written into yet (before WAL mode, which
/// writes the file's header); a no-op on a file that has tables already.
pub fn new_file_pages(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!("PRAGMA page_size = {PAGE_SIZE};"))
}

pub(super) fn configure(conn: &Connection, durability: Durability) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    switch_to_wal(conn)?;
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {};",
        durability.synchronous()
    ))?;
    Ok(())
}

/// Puts the file in WAL mode (a no-op when it already is).
///
/// The first switch of a new file needs it to itself for a moment: while another opener reads
/// it, the switch fails at once with SQLITE_BUSY, without calling the busy handler, so it is
/// tried again until [`BUSY_TIMEOUT`].
fn switch_to_wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(_) => return Err(rusqlite::Error::ExecuteReturnedResults),
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The file's schema version, refusing files that are not (or not yet) castlog databases.
pub(super) fn schema_version(conn: &Connection, shown: &str) -> Result<i64, LogError> {
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| LogError::open(shown, e))?;
    // One statement, so the version and the table count come from one snapshot: read apart,
    // another opener's schema could commit between them and look like a foreign file.
    let (version, tables): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version), \
                    (SELECT count(*) FROM sqlite_master)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|e| failed(shown, e))?;
    if version > SCHEMA_VERSION {
        return Err(LogError::SchemaTooNew {
            path: shown.to_owned(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if version == 0 && tables > 0 {
        return Err(LogError::open(
            shown,
            "this SQLite file has tables but no castlog schema version; it is not a castlog database",
        ));
    }
    Ok(version)
}

/// Brings the file to [`SCHEMA_VERSION`] in one write transaction.
///
/// Openers of a new file race: each read `user_version` 0 before holding any lock. `BEGIN
/// IMMEDIATE` takes the write lock (the busy timeout makes the other openers wait for it), and
/// the version is read again under that lock, so the first opener applies every missing script
/// and the ones after it find nothing to do. The scripts and the new `user_version` commit
/// together, so no opener ever sees tables without their version; a failed script rolls the
/// whole upgrade back when the transaction drops.
pub(super) fn migrate(conn: &mut Connection, shown: &str) -> Result<(), LogError> {
    let open_err =
        |doing: String, source: rusqlite::Error| LogError::open(shown, Sql { doing, source });
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| open_err("taking the write lock to apply the schema".into(), e))?;
    let version = schema_version(&tx, shown)?;
    for (i, script) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let next = i as i64 + 1;
        // The upgrade rolls back on any error, so a refused file is left as it was.
        let damaged = |message: String, source: Option<Cause>| LogError::Corrupt {
            context: format!("upgrading {shown} to schema version {next}"),
            message: format!("{message} (the file is left as it was)"),
            source,
        };
        let failed = |e: rusqlite::Error| {
            // A table the upgrade reads is missing, damaged, or holds rows it cannot copy: the
            // file is damaged. Anything else (a full disk, a lock) is not.
            let refused = e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation);
            if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ReadOnly) {
                // A file castlog cannot write: `open_existing` reads it as it is, if it can.
                // A read-only failure quotes no SQL: the error says it as it is.
                LogError::ReadOnly {
                    context: format!("upgrading {shown} to schema version {next}"),
                    source: Cause::new(e),
                }
            } else if is_damage(&e) || refused {
                damaged(without_sql(&e), Some(Cause::new(e)))
            } else {
                open_err(format!("applying schema version {next}"), e)
            }
        };
        let stopped = |e: address::GuardError| match e {
            address::GuardError::Sql(e) => failed(e),
            address::GuardError::Refused(message) => damaged(message, None),
        };
        let guard = match next {
            6 => Some(address::UpgradeGuard::before(&tx).map_err(stopped)?),
            _ => None,
        };
        // A file that has the kind column already was at v8 once (its version was set back,
        // as tests of older files do): its kinds are kept as they were written. So with v10's
        // packed columns: such a file may hold packed rows, which stay as they are.
        let done = match next {
            KIND_COLUMN_SINCE => has_column(&tx, "casts", "kind").map_err(failed)?,
            super::pack::PACKED_SINCE => has_column(&tx, "chunks", "packed").map_err(failed)?,
            _ => false,
        };
        let script = if done { "" } else { script };
        tx.execute_batch(script)
            .and_then(|()| tx.pragma_update(None, "user_version", next))
            .map_err(failed)?;
        if let Some(guard) = guard {
            guard.after(&tx).map_err(stopped)?;
        }
    }
    tx.commit()
        .map_err(|e| open_err("committing the schema".into(), e))
}
