//! The PostgreSQL schema and its upgrades: the scripts in `schema/v*.sql`, applied in order,
//! and the version applied, kept in `castlog_meta.schema_version`.
//!
//! An opener that finds the schema older than this build's takes a transaction-scoped
//! advisory lock, re-reads the version under it and applies the missing scripts in that one
//! transaction, so openers racing on a new database or schema apply each script once, and a
//! failed upgrade leaves the schema as it was. A schema newer than this build is refused.

use super::conn::Conn;
use super::error::map_err;
use crate::log::LogError;

/// The DDL of each version, in order; `SCRIPTS[i]` takes a schema from version `i` to `i + 1`.
/// The next version (a new column, say) is one more script here.
const SCRIPTS: &[&str] = &[include_str!("schema/v1.sql"), include_str!("schema/v2.sql")];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = SCRIPTS.len() as i32;

/// Serializes schema upgrades of every castlog schema in one database (a constant, so that
/// two openers of the same schema always take the same lock).
const UPGRADE_LOCK: i64 = 0x6361_7374_6c6f_6701;

/// The schema version applied in the connection's schema (0: no castlog tables there).
pub(crate) fn version(conn: &mut Conn, shown: &str) -> Result<i32, LogError> {
    let failed = |e: postgres::Error| {
        LogError::open(
            shown.to_owned(),
            super::error::Pg::doing("cannot read its schema version".into(), e),
        )
    };
    let exists: bool = conn
        .client()
        // A catalog query, not `to_regclass`: it reads the catalog through the statement's
        // own snapshot, so an opener that waited for the upgrade lock sees the tables the
        // opener before it committed.
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
                            WHERE schemaname = current_schema() AND tablename = 'castlog_meta')",
            &[],
        )
        .and_then(|row| row.try_get(0))
        .map_err(failed)?;
    if !exists {
        return Ok(0);
    }
    conn.client()
        .query_one("SELECT max(schema_version) FROM castlog_meta", &[])
        .and_then(|row| row.try_get::<_, Option<i32>>(0))
        .map(Option::unwrap_or_default)
        .map_err(failed)
}

/// Brings the schema up to [`SCHEMA_VERSION`] (see the module doc).
pub(crate) fn migrate(conn: &mut Conn, shown: &str) -> Result<(), LogError> {
    conn.transaction("BEGIN", |conn| {
        conn.client()
            .execute("SELECT pg_advisory_xact_lock($1)", &[&UPGRADE_LOCK])
            .map_err(|e| map_err("locking the schema for an upgrade", e))?;
        let found = version(conn, shown)?;
        if found > SCHEMA_VERSION {
            return Err(too_new(shown, found));
        }
        for (i, script) in SCRIPTS.iter().enumerate().skip(found.max(0) as usize) {
            let to = i as i32 + 1;
            conn.client().batch_execute(script).map_err(|e| {
                LogError::open(
                    shown.to_owned(),
                    super::error::Pg::doing(
                        format!("cannot upgrade its schema to version {to}"),
                        e,
                    ),
                )
            })?;
            conn.client()
                .execute("UPDATE castlog_meta SET schema_version = $1", &[&to])
                .map_err(|e| map_err("recording the schema version", e))?;
        }
        Ok(())
    })
}

/// The error for a schema written by a newer castlog.
pub(crate) fn too_new(shown: &str, found: i32) -> LogError {
    LogError::SchemaTooNew {
        path: shown.to_owned(),
        found: i64::from(found),
        supported: i64::from(SCHEMA_VERSION),
    }
}
