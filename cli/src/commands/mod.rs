//! One module per group of commands.

pub mod anchor;
pub mod bench;
mod bench_ceiling;
pub mod bench_lanes;
mod bench_measure;
pub mod bench_posts;
pub mod bench_reads;
pub mod bench_report;
mod bench_rows;
pub mod bench_synth;
pub mod bench_tools;
pub mod bench_workers;
pub mod budget;
pub mod cast;
pub mod claims;
pub mod config;
pub mod copy;
pub mod diff;
pub mod diff_files;
pub mod engage;
pub mod eventing;
mod fleet;
mod follow;
pub mod fork;
pub mod inspect;
pub mod otlp;
pub mod placement;
pub mod projections;
pub mod prompts;
pub mod report;
pub mod serve;
pub mod submit;
pub mod transfer;
pub mod verify;
pub mod worker;

use std::path::Path;

use castlog_core::event::Contexts;
use castlog_core::id::CastId;
use castlog_events::{Database, EventLog};

use crate::error::CliError;

/// The bounded contexts whose streams share the log with the cast machine's casts: readers of
/// every event (`show`, `export`, `import`, `verify`, `diff`) decode and describe their events
/// through these vocabularies. A new context is one more entry here.
pub const CONTEXTS: Contexts = Contexts::with(&[&castlog_engage::event::VOCABULARY]);

/// Opens the database at `path`, which must be a castlog database already: a command that
/// reads (or adds to a cast) never creates a file or writes a schema into an empty one. A
/// database castlog cannot write is opened for reading.
pub fn open(path: &Path) -> Result<Database, CliError> {
    Ok(Database::open_existing(path)?)
}

/// Opens the database at `path`, creating it if nothing is there (`run`, `engage`, `import`,
/// `submit`, `worker`).
pub fn open_or_create(path: &Path) -> Result<Database, CliError> {
    Ok(Database::open(path)?)
}

/// A cast id a person chose with `--cast`: not empty, not a destination ledger's (`claims:`),
/// and not taken.
pub fn chosen_cast(log: &Database, id: &str) -> Result<CastId, CliError> {
    if id.trim().is_empty() {
        return Err(CliError::user("--cast must not be empty"));
    }
    let cast = CastId::new(id);
    if castlog_replay::ledger::is_ledger_id(&cast) {
        return Err(CliError::user(format!(
            "cast ids starting with `claims:` name the destinations' claim ledgers; pick another --cast than {id:?}"
        )));
    }
    if log.head(&cast)?.is_some() {
        return Err(CliError::user(format!(
            "cast {id} already exists; pick another --cast"
        )));
    }
    Ok(cast)
}
