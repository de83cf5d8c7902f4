//! PostgreSQL errors turned into [`LogError`]s: the one place that reads SQLSTATE codes, so
//! the log's error enum can change its shape without touching the queries.

use postgres::error::SqlState;

use crate::log::{Cause, LogError};

/// Maps a PostgreSQL error met while doing `context`, telling apart a read-only database or
/// role, a schema castlog wrote that is gone or changed (damage), and other failures.
pub(crate) fn map_err(context: &str, err: postgres::Error) -> LogError {
    let code = err.code();
    if code == Some(&SqlState::READ_ONLY_SQL_TRANSACTION)
        || code == Some(&SqlState::INSUFFICIENT_PRIVILEGE)
    {
        LogError::ReadOnly {
            context: context.to_owned(),
            source: Cause::new(Pg::new(err)),
        }
    } else if code == Some(&SqlState::UNDEFINED_TABLE)
        || code == Some(&SqlState::UNDEFINED_COLUMN)
        || code == Some(&SqlState::DATA_CORRUPTED)
        || code == Some(&SqlState::INDEX_CORRUPTED)
    {
        LogError::Corrupt {
            context: context.to_owned(),
            message: message(&err),
            source: Some(Cause::new(Pg::new(err))),
        }
    } else {
        LogError::storage(context, Pg::new(err))
    }
}

/// A PostgreSQL error kept as the source beneath a [`LogError`], said as [`message`] says it,
/// after what castlog was doing when it says so.
#[derive(Debug, thiserror::Error)]
#[error("{}{}", .doing.as_ref().map(|d| format!("{d}: ")).unwrap_or_default(), message(.source))]
pub(crate) struct Pg {
    /// What was being done, when the message names it (`cannot create schema "x"`).
    pub doing: Option<String>,
    /// The client's or the server's error.
    #[source]
    pub source: postgres::Error,
}

impl Pg {
    /// `err` with nothing said before it.
    pub(crate) fn new(source: postgres::Error) -> Self {
        Pg {
            doing: None,
            source,
        }
    }

    /// `err` after `doing` (`doing: message`).
    pub(crate) fn doing(doing: String, source: postgres::Error) -> Self {
        Pg {
            doing: Some(doing),
            source,
        }
    }
}

/// Whether `err` is a unique or primary key violation (another writer took the row first).
pub(crate) fn is_unique_violation(err: &postgres::Error) -> bool {
    err.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

/// The server's message (with its detail, when it gives one), or the client's.
fn message(err: &postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{} ({detail})", db.message()),
            None => db.message().to_owned(),
        },
        None => {
            // The client's own errors name the cause in their source ("error connecting to
            // server: Connection refused").
            let mut text = err.to_string();
            let mut source = std::error::Error::source(err);
            while let Some(cause) = source {
                let cause = cause.to_string();
                if !text.contains(&cause) {
                    text.push_str(": ");
                    text.push_str(&cause);
                }
                source = cause_source(source);
            }
            text
        }
    }
}

fn cause_source<'a>(
    err: Option<&'a (dyn std::error::Error + 'static)>,
) -> Option<&'a (dyn std::error::Error + 'static)> {
    err.and_then(std::error::Error::source)
}
