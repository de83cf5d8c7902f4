//! `bench`: figures printed as JSON, never asserted by tests.

use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use castlog_core::event::{Event, SteeringNoted};
use castlog_core::id::{CastId, Digest, Seq};
use castlog_events::record::seal_batch;
use castlog_events::verify::verify_cast;
use castlog_events::{Durability, EventLog, Pending, Recorded, SqliteLog};
use rusqlite::params;
use serde::Serialize;

use crate::args::{BenchAppendArgs, BenchCommand};
use crate::error::CliError;
use crate::output;

use super::bench_measure::{Scratch, database, db_bytes, durability, rate};

/// `castlog bench WORKLOAD`.
pub fn run(db: Option<&Path>, command: BenchCommand) -> Result<(), CliError> {
    match command {
        BenchCommand::Append(args) => append(db, &args),
        BenchCommand::Synth(args) => super::bench_synth::synth(db, &args),
        BenchCommand::Replay(args) => super::bench_synth::replay(db, &args),
        BenchCommand::Reads(args) => super::bench_reads::reads(db, &args),
        BenchCommand::Report(args) => super::bench_report::report(db, &args),
        BenchCommand::Posts(args) => super::bench_posts::posts(db, &args),
        BenchCommand::Workers(args) => super::bench_workers::workers(db, &args),
        BenchCommand::Tools(args) => super::bench_tools::tools(db, &args),
        BenchCommand::Lanes(args) => super::bench_lanes::lanes(db, &args),
    }
}

#[derive(Serialize)]
struct AppendFigures {
    events: u64,
    batch: u64,
    payload_bytes: usize,
    durability: &'static str,
    wall_s: f64,
    events_per_s: f64,
    db_bytes: u64,
    verify_s: f64,
    verify_events_per_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    baseline: Option<Box<AppendFigures>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    append_vs_baseline: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verify_vs_baseline: Option<f64>,
}

/// Events `first..first + count` of the benchmark: steering notes whose payload is exactly
/// `bytes` long (at least the JSON frame), with deterministic text. Made one batch at a time so
/// a long run holds one batch in memory.
fn pending(first: u64, count: u64, bytes: usize, start_ms: u64) -> Vec<Pending> {
    const FRAME: usize = r#"{"text":""}"#.len();
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789 ";
    (first..first + count)
        .map(|i| {
            let len = bytes.saturating_sub(FRAME);
            let text: String = (0..len)
                .map(|j| alphabet[(j + i as usize) % alphabet.len()] as char)
                .collect();
            let event = Event::from(SteeringNoted {
                text,
                locked: false,
                origin: None,
            });
            Pending::new(start_ms + i, &event)
        })
        .collect()
}

/// The batches of the run: (index of the first event, events in the batch).
fn batches(events: u64, batch: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..events)
        .step_by(batch as usize)
        .map(move |first| (first, batch.min(events - first)))
}

fn append(db: Option<&Path>, args: &BenchAppendArgs) -> Result<(), CliError> {
    if args.batch == 0 || args.events == 0 {
        return Err(CliError::user("--batch and --events must be at least 1"));
    }
    let (_scratch, path) = database(db)?;
    let durability = durability(args.durability);
    let start_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let cast = CastId::new(args.cast.as_str());

    let log = SqliteLog::open_with(&path, durability)?;
    let mut next = log.head(&cast)?.map_or(Seq::FIRST, |h| h.seq.next());
    // Continuing a bench cast is how a killed run is picked up; anything else would be
    // damaged by raw events (a workflow cast would no longer re-decide).
    if next != Seq::FIRST {
        let first = log.read(&cast, Seq::FIRST, Some(Seq::FIRST))?;
        if first.first().is_some_and(|r| r.kind != "steering_noted") {
            return Err(CliError::user(format!(
                "cast {cast} is not a bench cast: bench append only continues casts of its own \
                 events; pick another --cast"
            )));
        }
    }
    let started = Instant::now();
    for (index, count) in batches(args.events, args.batch) {
        let chunk = pending(index, count, args.payload_bytes, start_ms);
        let sealed = log.append(&cast, next, &chunk)?;
        next = Seq(next.get() + count);
        if args.acks
            && let Some(last) = sealed.last()
        {
            use std::io::Write;
            // A reader that went away is not the benchmark's problem.
            let _ = writeln!(std::io::stderr(), "acked {}", last.seq);
        }
    }
    let wall_s = started.elapsed().as_secs_f64();
    let head = log
        .head(&cast)?
        .ok_or_else(|| CliError::internal("bench cast vanished"))?;
    let started = Instant::now();
    let verified = verify_cast(&log, &head)?;
    let verify_s = started.elapsed().as_secs_f64();
    if !verified.problems.is_empty() {
        return Err(CliError::integrity(format!(
            "the benchmark chain does not verify: {:?}",
            verified.problems[0]
        )));
    }
    drop(log);

    let mut figures = AppendFigures {
        events: args.events,
        batch: args.batch,
        payload_bytes: args.payload_bytes,
        durability: durability.as_str(),
        wall_s,
        events_per_s: rate(args.events, wall_s),
        db_bytes: db_bytes(&path),
        verify_s,
        verify_events_per_s: rate(verified.events, verify_s),
        baseline: None,
        append_vs_baseline: None,
        verify_vs_baseline: None,
    };
    if args.baseline.is_some() {
        let raw_scratch = Scratch::new()?;
        let raw = raw_baseline(
            &raw_scratch.file("raw.db"),
            &cast,
            start_ms,
            args,
            durability,
        )?;
        figures.append_vs_baseline =
            Some(figures.events_per_s / raw.events_per_s.max(f64::MIN_POSITIVE));
        figures.verify_vs_baseline =
            Some(figures.verify_events_per_s / raw.verify_events_per_s.max(f64::MIN_POSITIVE));
        figures.baseline = Some(Box::new(raw));
    }
    output::json(&figures)
}

/// Plain rusqlite: the same rows, the same transactions, the same pragmas, nothing else.
fn raw_baseline(
    path: &Path,
    cast: &CastId,
    start_ms: u64,
    args: &BenchAppendArgs,
    durability: Durability,
) -> Result<AppendFigures, CliError> {
    let sql = |e: rusqlite::Error| CliError::internal(format!("raw baseline: {e}"));
    let mut conn = rusqlite::Connection::open(path).map_err(sql)?;
    let sync = durability.synchronous();
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {sync};
         CREATE TABLE events (id INTEGER PRIMARY KEY, cast_id INTEGER NOT NULL,
           seq INTEGER NOT NULL, at_ms INTEGER NOT NULL, kind TEXT NOT NULL, v INTEGER NOT NULL,
           payload BLOB NOT NULL, prev BLOB NOT NULL, hash BLOB NOT NULL);"
    ))
    .map_err(sql)?;
    // The same sealed bytes castlog stores, made before the clock starts.
    let mut sealed: Vec<Vec<Recorded>> = Vec::new();
    let (mut head, mut prev) = (Seq(0), Digest::ZERO);
    for (index, count) in batches(args.events, args.batch) {
        let chunk = pending(index, count, args.payload_bytes, start_ms);
        let chunk = seal_batch(cast, head, prev, &chunk);
        if let Some(last) = chunk.last() {
            (head, prev) = (last.seq, last.hash);
        }
        sealed.push(chunk);
    }
    let started = Instant::now();
    for chunk in &sealed {
        let tx = conn.transaction().map_err(sql)?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO events (id, cast_id, seq, at_ms, kind, v, payload, prev, hash)
                     VALUES ((1 << 32) + ?1, 1, ?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(sql)?;
            for r in chunk.iter() {
                stmt.execute(params![
                    r.seq.get() as i64,
                    r.at_ms as i64,
                    r.kind,
                    i64::from(r.v),
                    r.payload,
                    r.prev.0.as_slice(),
                    r.hash.0.as_slice()
                ])
                .map_err(sql)?;
            }
        }
        tx.commit().map_err(sql)?;
    }
    let wall_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut scanned = 0u64;
    let mut touched = 0usize;
    {
        let mut stmt = conn
            .prepare(
                "SELECT seq, at_ms, kind, v, payload, prev, hash FROM events
                 WHERE id BETWEEN (1 << 32) + 1 AND (2 << 32) - 1 ORDER BY id",
            )
            .map_err(sql)?;
        let mut rows = stmt.query([]).map_err(sql)?;
        while let Some(row) = rows.next().map_err(sql)? {
            // Fetch every column, as verification does, and keep nothing.
            let seq: i64 = row.get(0).map_err(sql)?;
            let at_ms: i64 = row.get(1).map_err(sql)?;
            let kind: String = row.get(2).map_err(sql)?;
            let v: i64 = row.get(3).map_err(sql)?;
            let payload: Vec<u8> = row.get(4).map_err(sql)?;
            let prev: Vec<u8> = row.get(5).map_err(sql)?;
            let hash: Vec<u8> = row.get(6).map_err(sql)?;
            touched +=
                (seq + at_ms + v) as usize + kind.len() + payload.len() + prev.len() + hash.len();
            scanned += 1;
        }
    }
    let verify_s = started.elapsed().as_secs_f64();
    std::hint::black_box(touched);
    drop(conn);
    Ok(AppendFigures {
        events: args.events,
        batch: args.batch,
        payload_bytes: args.payload_bytes,
        durability: durability.as_str(),
        wall_s,
        events_per_s: rate(args.events, wall_s),
        db_bytes: db_bytes(path),
        verify_s,
        verify_events_per_s: rate(scanned, verify_s),
        baseline: None,
        append_vs_baseline: None,
        verify_vs_baseline: None,
    })
}
