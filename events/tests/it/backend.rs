//! The backends under test, each opened fresh and empty.

use std::ops::Deref;
use std::path::{Path, PathBuf};

use castlog_events::{Durability, EventLog, InMemoryLog, PostgresLog, SqliteLog};
use tempfile::TempDir;

pub use super::scratch_schema::{ScratchSchema, scratch_schema};

/// Which `EventLog` implementation a test body runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `InMemoryLog`, the reference.
    Memory,
    /// `SqliteLog` on a file in a fresh temporary directory.
    Sqlite,
    /// `SqliteLog` with full durability, where begun appends are held and fsynced by the
    /// syncer (the other tests use `Normal`, to spare the fsyncs).
    SqliteFull,
    /// `PostgresLog` in a fresh schema of the test server (see [`scratch_schema`]), dropped
    /// once the test is done.
    Postgres,
}

impl Backend {
    /// Opens an empty log of this kind.
    pub fn open(self) -> Subject {
        match self {
            Backend::Memory => Subject {
                log: Box::new(InMemoryLog::new()),
                _dir: None,
                _schema: None,
            },
            Backend::Sqlite | Backend::SqliteFull => {
                let (dir, path) = scratch();
                let log = if self == Backend::Sqlite {
                    open_sqlite(&path)
                } else {
                    SqliteLog::open_with(&path, Durability::Full).unwrap()
                };
                Subject {
                    log: Box::new(log),
                    _dir: Some(dir),
                    _schema: None,
                }
            }
            Backend::Postgres => {
                let schema = scratch_schema();
                let log = PostgresLog::open(&schema.url()).unwrap();
                Subject {
                    log: Box::new(log),
                    _dir: None,
                    _schema: Some(schema),
                }
            }
        }
    }
}

/// A log under test, with the directory its file lives in or the schema its tables are in
/// (if any).
pub struct Subject {
    // Declared first: fields drop in order, so the log closes its file (or its connections)
    // before the directory (or the schema) is removed.
    log: Box<dyn EventLog>,
    _dir: Option<TempDir>,
    _schema: Option<ScratchSchema>,
}

impl Deref for Subject {
    type Target = dyn EventLog;

    fn deref(&self) -> &Self::Target {
        &*self.log
    }
}

/// A fresh temporary directory and the path of a database file inside it (not yet created).
pub fn scratch() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("castlog.db");
    (dir, path)
}

/// Opens a SQLite log; tests do not need fsync on every commit, so durability is `Normal`.
pub fn open_sqlite(path: &Path) -> SqliteLog {
    SqliteLog::open_with(path, Durability::Normal).unwrap()
}

/// The one integer `sql` selects from the SQLite file at `path`.
pub fn count(path: &Path, sql: &str) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}
