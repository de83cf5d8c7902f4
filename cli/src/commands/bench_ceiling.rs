//! The disk's ceiling for a workload, measured in the same run: the same bytes per step
//! written by plain rusqlite (one row of that many bytes per step, WAL, the same
//! `synchronous`), in a scratch database beside the log, either batched as the writer batches
//! held steps ([`HELD_STEPS`] to a commit) or one commit per step. Nothing of castlog runs in
//! it: no hashing, no serialization, no blob store, no chain; what is left is SQLite and the
//! fsyncs, which is as fast as the same bytes can be made durable on this disk.
//!
//! On PostgreSQL the raw inserts write the very rows the run's log stored (see
//! [`super::bench_rows`]): each step's event rows and blob rows, byte for byte, through the same
//! client the log uses (the `postgres` crate, `synchronous_commit = on`), into tables of the
//! same columns and keys in a scratch schema of the log's database (dropped afterwards), with
//! none of the log's work: no head row, no checks, no triggers. Each transaction is one
//! statement (both tables' rows by `unnest`, committed on its own): one round trip and one
//! commit per step, or per [`HELD_STEPS`] steps batched. The log writes a step in one
//! transaction there (one statement, see the PostgreSQL log's appends), so its figure to hold
//! against is the one-transaction-per-step one.

use std::path::Path;
use std::time::Instant;

use castlog_events::Durability;
use castlog_events::postgres::Locator;
use rusqlite::Connection;
use serde::Serialize;

use super::bench_measure::rate;
use super::bench_rows::StepRows;
use castlog_events::chain::blob_hash;

/// Steps the pipelined writer commits together at most (the log's held appends).
pub(super) const HELD_STEPS: u64 = 16;

/// One ceiling run.
#[derive(Debug, Serialize)]
pub(super) struct Ceiling {
    steps: u64,
    bytes_per_step: u64,
    /// Rows each step wrote (event rows and blob rows), where the rows are the run's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    rows_per_step: Option<f64>,
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

/// Both ceilings on the PostgreSQL database `url` names, as [`ceilings`] does for SQLite, by
/// raw inserts of `steps`, the rows the run stored: (batched by [`HELD_STEPS`], one
/// transaction per step). `None` where the scratch schema cannot be used.
pub(super) fn postgres_ceilings(
    url: &str,
    steps: &[StepRows],
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
         CREATE TABLE events (cast_key bigint NOT NULL, seq bigint NOT NULL, at_ms bigint NOT NULL,
             kind text NOT NULL, v integer NOT NULL, payload bytea NOT NULL, prev bytea NOT NULL,
             hash bytea NOT NULL, PRIMARY KEY (cast_key, seq));
         CREATE TABLE blobs (hash bytea PRIMARY KEY, bytes bytea NOT NULL);"
    );
    let result = client.batch_execute(&setup).ok().map(|()| {
        let batched = run_postgres(&mut client, steps, HELD_STEPS).ok();
        let per_step = run_postgres(&mut client, steps, 1).ok();
        (batched, per_step)
    });
    // Best effort: a leftover scratch schema is harmless (and named as one).
    let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
    result.unwrap_or((None, None))
}

/// Writes `steps`' rows into empty tables, `per_commit` steps to a statement (and so to a
/// transaction).
fn run_postgres(
    client: &mut postgres::Client,
    steps: &[StepRows],
    per_commit: u64,
) -> Result<Ceiling, postgres::Error> {
    client.batch_execute("TRUNCATE events, blobs")?;
    let key = 1i64;
    let insert = client.prepare(
        "WITH stored AS (
             INSERT INTO blobs (hash, bytes) SELECT * FROM unnest($1::bytea[], $2::bytea[])
             ON CONFLICT (hash) DO NOTHING)
         INSERT INTO events (cast_key, seq, at_ms, kind, v, payload, prev, hash)
         SELECT $3, * FROM unnest($4::bigint[], $5::bigint[], $6::text[], $7::integer[],
                                  $8::bytea[], $9::bytea[], $10::bytea[])",
    )?;
    let per_commit = usize::try_from(per_commit.max(1)).unwrap_or(usize::MAX);
    // The blobs' digests are taken before the clock starts (the log hashes them; so does
    // the baseline, beforehand, which only makes it faster).
    let groups: Vec<(Vec<Vec<u8>>, Vec<&StepRows>)> = steps
        .chunks(per_commit)
        .map(|group| {
            let hashes = group
                .iter()
                .flat_map(|s| &s.blobs)
                .map(|b| blob_hash(b).0.to_vec())
                .collect();
            (hashes, group.iter().collect())
        })
        .collect();
    let (mut commits, mut bytes) = (0u64, 0u64);
    let timer = Instant::now();
    for (hashes, group) in &groups {
        let blobs: Vec<&[u8]> = group
            .iter()
            .flat_map(|s| &s.blobs)
            .map(Vec::as_slice)
            .collect();
        let records: Vec<&castlog_events::Recorded> =
            group.iter().flat_map(|s| &s.events).collect();
        let seqs: Vec<i64> = records.iter().map(|r| r.seq.get() as i64).collect();
        let ats: Vec<i64> = records.iter().map(|r| r.at_ms as i64).collect();
        let kinds: Vec<&str> = records.iter().map(|r| r.kind.as_str()).collect();
        let vs: Vec<i32> = records.iter().map(|r| i32::from(r.v)).collect();
        let payloads: Vec<&[u8]> = records.iter().map(|r| r.payload.as_slice()).collect();
        let prevs: Vec<&[u8]> = records.iter().map(|r| r.prev.0.as_slice()).collect();
        let digests: Vec<&[u8]> = records.iter().map(|r| r.hash.0.as_slice()).collect();
        client.execute(
            &insert,
            &[
                hashes, &blobs, &key, &seqs, &ats, &kinds, &vs, &payloads, &prevs, &digests,
            ],
        )?;
        commits += 1;
        bytes += group.iter().map(|s| s.bytes()).sum::<u64>();
    }
    let wall_s = timer.elapsed().as_secs_f64();
    let count = steps.len() as u64;
    let rows: u64 = steps.iter().map(StepRows::rows).sum();
    Ok(Ceiling {
        steps: count,
        bytes_per_step: bytes.div_ceil(count.max(1)),
        rows_per_step: Some(rows as f64 / count.max(1) as f64),
        steps_per_commit: per_commit as u64,
        commits,
        wall_s,
        steps_per_s: rate(count, wall_s),
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
    // In pages of the size of a log castlog creates.
    castlog_events::sqlite::new_file_pages(&conn)?;
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
        rows_per_step: None,
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
