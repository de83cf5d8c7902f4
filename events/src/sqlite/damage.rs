//! How SQLite's errors and stored values become [`LogError`]s: a damaged file (corrupt pages,
//! a value of another type than castlog writes, a table or an index entry gone) is told apart
//! from a read-only file and from other failures, so a reader can say which it is.

use castlog_core::id::{CastId, Digest, Seq};
use rusqlite::Connection;

use crate::log::LogError;

/// A SQLite error without the SQL text it may quote: for a schema script that is the whole
/// script, which buries the message.
pub(super) fn without_sql(err: &rusqlite::Error) -> String {
    match err {
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        other => other.to_string(),
    }
}

/// Maps a SQLite error, telling a damaged file apart from other failures. Damage is: SQLite
/// finding the file corrupt, a column holding a value of another type than castlog writes
/// (text where a digest belongs, bytes that are not UTF-8, ...), or a table castlog created
/// being gone.
pub(crate) fn map_err(context: &str, err: rusqlite::Error) -> LogError {
    if err.sqlite_error_code() == Some(rusqlite::ErrorCode::ReadOnly) {
        LogError::ReadOnly {
            context: context.to_owned(),
            source: crate::log::Cause::new(err),
        }
    } else if is_damage(&err) {
        LogError::Corrupt {
            context: context.to_owned(),
            message: err.to_string(),
            source: Some(crate::log::Cause::new(err)),
        }
    } else {
        LogError::storage(context, err)
    }
}

/// Whether `err` says the file is damaged (see [`map_err`]).
pub(super) fn is_damage(err: &rusqlite::Error) -> bool {
    use rusqlite::Error as E;
    let wrong_value_or_table = match err {
        E::InvalidColumnType(..)
        | E::FromSqlConversionFailure(..)
        | E::IntegralValueOutOfRange(..)
        | E::Utf8Error(..) => true,
        E::SqliteFailure(_, Some(message)) | E::SqlInputError { msg: message, .. } => {
            message.starts_with("no such table") || message.starts_with("no such column")
        }
        _ => false,
    };
    wrong_value_or_table
        || matches!(
            err.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
        )
}

/// Called when looking `cast` up by name finds nothing: an error if the table holds it all
/// the same (read without the index of names), as a damaged index would have it; a cast
/// that looks unknown there is damage, not a user's typo.
pub(super) fn unindexed(conn: &Connection, cast: &CastId) -> Result<(), LogError> {
    let listed: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM casts NOT INDEXED WHERE cast_id = ?1)")
        .and_then(|mut stmt| stmt.query_row([cast.as_str()], |r| r.get(0)))
        .map_err(|e| map_err("looking up a cast without the index of cast names", e))?;
    if listed {
        return Err(LogError::Corrupt {
            context: format!("looking up cast {cast}"),
            message: "the casts table holds it but its index of cast names does not: the index is damaged".into(),
            source: None,
        });
    }
    Ok(())
}

/// A stored digest column, which must be exactly 32 bytes.
pub(crate) fn digest_from_sql(
    cast: &CastId,
    seq: Seq,
    column: &str,
    bytes: &[u8],
) -> Result<Digest, LogError> {
    <[u8; 32]>::try_from(bytes)
        .map(Digest)
        .map_err(|_| LogError::Corrupt {
            context: format!("reading cast {cast} seq {seq}"),
            message: format!("column {column} holds {} bytes, not 32", bytes.len()),
            source: None,
        })
}
