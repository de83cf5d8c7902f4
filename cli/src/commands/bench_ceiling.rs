//! The disk's ceiling for a workload, measured in the same run: the same bytes per step
//! written by plain rusqlite (one row of that many bytes per step, WAL, the same
//! `synchronous`), in a scratch database beside the log, either batched as the writer batches
//! held steps ([`HELD_STEPS`] to a commit) or one commit per step. Nothing of castlog runs in
//! it: no hashing, no serialization, no blob store, no chain; what is left is SQLite and the
//! fsyncs, which is as fast as the same bytes can be made durable on this disk.
//!
//! On PostgreSQL the same is measured through the same client the log uses (the `postgres`
//! crate, `synchronous_commit = on`): plain INSERTs of one `bytea` row of that many bytes per
//! step into a table in a scratch schema of the log's database (dropped afterwards), batched
//! or one transaction per step. The log itself appends one transaction per step there, so
//! its figure to hold against is the one-transaction-per-step one.

use std::path::Path;
use std::time::Instant;

use castlog_events::Durability;
use castlog_events::postgres::Locator;
use rusqlite::Connection;
use serde::Serialize;

use super::bench_measure::rate;

/// Steps the pipelined writer commits together at most (the log's held appends).
pub(super) const HELD_STEPS: u64 = 16;

/// One ceiling run.
#[derive(Debug, Serialize)]
pub(super) struct Ceiling {
    steps: u64,
    bytes_per_step: u64,
    steps_per_commit: u64,
    commits: u64,
    wall_s: f64,
    pub(super) steps_per_s: f64,
}

/// Both ceilings of a run that wrote `steps` steps of `bytes_per_step` bytes each, measured in
/// scratch databases beside `path`: (batched by [`HELD_STEPS`], one commit per step). `None`
/// where the scratch database cannot be used (the figure is then missing, never wrong).
pub(super) fn ceilings(
    path: &Path,
    durability: Durability,
    steps: u64,
    bytes_per_step: u64,
) -> (Option<Ceiling>, Option<Ceiling>) {
    let batched = measure(path, durability, steps, bytes_per_step, HELD_STEPS);
    let per_step = measure(path, durability, steps, bytes_per_step, 1);
    (batched, per_step)
}

/// Both ceilings on the PostgreSQL database `url` names, as [`ceilings`] does for SQLite:
/// plain INSERTs through the `postgres` client into a scratch schema, dropped afterwards.
pub(super) fn postgres_ceilings(
    url: &str,
    steps: u64,
    bytes_per_step: u64,
) -> (Option<Ceiling>, Option<Ceiling>) {
    let Some(mut client) = Locator::parse(url)
        .ok()
        .and_then(|loc| postgres::Client::connect(loc.client_url(), postgres::NoTls).ok())
    else {
        return (None, None);
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let schema = format!("castlog_ceiling_{}_{nanos}", std::process::id());
    let setup = format!(
        "SET synchronous_commit = on; CREATE SCHEMA \"{schema}\"; SET search_path TO \"{schema}\";
         CREATE TABLE steps (id BIGSERIAL PRIMARY KEY, b BYTEA NOT NULL);"
    );
    let result = client.batch_execute(&setup).ok().map(|()| {
        let batched = run_postgres(&mut client, steps, bytes_per_step, HELD_STEPS).ok();
        let per_step = run_postgres(&mut client, steps, bytes_per_step, 1).ok();
        (batched, per_step)
    });
    // Best effort: a leftover scratch schema is harmless (and named as one).
    let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
    result.unwrap_or((None, None))
}

fn run_postgres(
    client: &mut postgres::Client,
    steps: u64,
    bytes_per_step: u64,
    per_commit: u64,
) -> Result<Ceiling, postgres::Error> {
    client.batch_execute("TRUNCATE steps")?;
    let row: Vec<u8> = (0..bytes_per_step).map(|i| (i * 131 % 251) as u8).collect();
    let insert = client.prepare("INSERT INTO steps (b) VALUES ($1)")?;
    let (mut written, mut commits) = (0u64, 0u64);
    let timer = Instant::now();
    while written < steps {
        let mut tx = client.transaction()?;
        for _ in 0..per_commit.min(steps - written) {
            tx.execute(&insert, &[&row])?;
            written += 1;
        }
        tx.commit()?;
        commits += 1;
    }
    let wall_s = timer.elapsed().as_secs_f64();
    Ok(Ceiling {
        steps,
        bytes_per_step,
        steps_per_commit: per_commit,
        commits,
        wall_s,
        steps_per_s: rate(steps, wall_s),
    })
}

fn measure(
    path: &Path,
    durability: Durability,
    steps: u64,
    bytes_per_step: u64,
    per_commit: u64,
) -> Option<Ceiling> {
    let mut name = path.file_name()?.to_owned();
    name.push(format!(".ceiling-{per_commit}"));
    let scratch = path.with_file_name(name);
    let result = run(&scratch, durability, steps, bytes_per_step, per_commit).ok();
    for suffix in ["", "-wal", "-shm"] {
        let mut file = scratch.clone().into_os_string();
        file.push(suffix);
        // Best effort: a leftover scratch file is harmless.
        let _ = std::fs::remove_file(file);
    }
    result
}

fn run(
    scratch: &Path,
    durability: Durability,
    steps: u64,
    bytes_per_step: u64,
    per_commit: u64,
) -> rusqlite::Result<Ceiling> {
    let conn = Connection::open(scratch)?;
    conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; CREATE TABLE IF NOT EXISTS steps (id INTEGER PRIMARY KEY, b BLOB NOT NULL);",
        durability.synchronous()
    ))?;
    // Incompressible and distinct per step is not needed: SQLite stores the bytes as given.
    let row: Vec<u8> = (0..bytes_per_step).map(|i| (i * 131 % 251) as u8).collect();
    let mut insert = conn.prepare("INSERT INTO steps (b) VALUES (?1)")?;
    let mut begin = conn.prepare("BEGIN IMMEDIATE")?;
    let mut commit = conn.prepare("COMMIT")?;
    let (mut written, mut commits) = (0u64, 0u64);
    let timer = Instant::now();
    while written < steps {
        begin.execute([])?;
        for _ in 0..per_commit.min(steps - written) {
            insert.execute([&row[..]])?;
            written += 1;
        }
        commit.execute([])?;
        commits += 1;
    }
    let wall_s = timer.elapsed().as_secs_f64();
    Ok(Ceiling {
        steps,
        bytes_per_step,
        steps_per_commit: per_commit,
        commits,
        wall_s,
        steps_per_s: rate(steps, wall_s),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ceilings_write_every_step_and_leave_no_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log.db");
        let (batched, per_step) = ceilings(&path, Durability::Normal, 40, 1000);
        let (batched, per_step) = (batched.expect("batched"), per_step.expect("per step"));
        assert_eq!((batched.steps, batched.commits), (40, 3));
        assert_eq!((per_step.steps, per_step.commits), (40, 40));
        assert!(batched.steps_per_s > 0.0);
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
    }
}
