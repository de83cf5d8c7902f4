//! One module per group of commands.

pub mod bench;
pub mod bench_synth;
pub mod cast;
pub mod claims;
pub mod diff;
pub mod engage;
pub mod fork;
pub mod inspect;
pub mod projections;
pub mod prompts;
pub mod transfer;
pub mod verify;

use std::path::Path;

use castlog_events::SqliteLog;

use crate::error::CliError;

/// Opens the database at `path`.
pub fn open(path: &Path) -> Result<SqliteLog, CliError> {
    Ok(SqliteLog::open(path)?)
}
