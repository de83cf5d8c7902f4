//! `bench tools`: recorded tool calls per second through the real machine, driver, tools and
//! log, and the bytes each call adds to the database.
//!
//! A fake model (local, like a script) answers every prompt of a one-socket `coding` cast
//! with one `read` call of a small file in a scratch working directory, until the visit has
//! made `--per-visit` calls (at most `limits.maxToolCalls`, which the bench's loadout sets to
//! it); then it answers with a summary and the cast completes. Casts follow one another until
//! `--calls` calls are recorded. Each call is three decisions' worth of events (the reply with
//! its `tool_called`, the `tool_finished` with the next prompt): the rate counts calls, durable
//! (`--durability full`: fsynced) before the next one runs. The calls are timed in slices of
//! 1,000, so a cost that grew with the database would show as a falling rate. A `read` call's
//! outcome is durable with the next step (one commit per call), as in every cast.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use castlog_core::event::ToolRequest;
use castlog_core::id::CastId;
use castlog_core::loadout::load_config;
use castlog_core::machine::Status;
use castlog_core::machine::decide::started_event;
use castlog_events::chain::loadout_hash;
use castlog_events::{Database, SqliteLog};
use castlog_replay::agent::{Agent, AgentTurn, TurnRequest};
use castlog_replay::clock::SystemClock;
use castlog_replay::driver::Driver;
use serde::Serialize;
use serde_json::json;

use crate::args::BenchToolsArgs;
use crate::error::CliError;
use crate::output;

use super::bench_measure::{Scratch, database, db_bytes, durability, rate};

/// Calls per timed slice.
const SLICE: u64 = 1000;

#[derive(Debug, Serialize)]
struct ToolsFigures {
    calls: u64,
    per_visit: u32,
    casts: u64,
    durability: &'static str,
    seconds: f64,
    tool_calls_per_s: f64,
    /// Database bytes (with its WAL) added per recorded call, the prompts around it included.
    bytes_per_call: f64,
    /// The rate of each slice of 1,000 calls, in order.
    slice_calls_per_s: Vec<f64>,
    /// The last slice's rate over the first's (1.0 = no slower).
    last_vs_first: f64,
}

/// Asks for `read` calls until the visit has made `per_visit`, then answers; counts calls.
struct ReadingModel {
    per_visit: u32,
    in_visit: u32,
    total: u64,
    /// When each slice began, and the rates of the slices done.
    slice_started: Instant,
    slices: Vec<f64>,
}

impl Agent for ReadingModel {
    fn turn(&mut self, _request: &TurnRequest<'_>) -> AgentTurn {
        if self.in_visit == self.per_visit {
            self.in_visit = 0;
            return AgentTurn::Reply {
                text: "Read the file.".into(),
                usage: None,
            };
        }
        if self.total > 0 && self.total.is_multiple_of(SLICE) {
            let secs = self.slice_started.elapsed().as_secs_f64();
            self.slices.push(rate(SLICE, secs));
            self.slice_started = Instant::now();
        }
        self.in_visit += 1;
        self.total += 1;
        AgentTurn::ToolCalls {
            text: String::new(),
            usage: None,
            calls: vec![ToolRequest {
                call: String::new(),
                tool: "read".into(),
                arguments: json!({ "path": "notes.txt" }),
            }],
        }
    }

    fn local(&self) -> bool {
        true
    }
}

fn config(per_visit: u32) -> String {
    json!({
        "activeLoadout": "Read",
        "limits": { "maxToolCalls": per_visit },
        "loadouts": { "Read": {
            "entry": "Socket-1",
            "sockets": { "Socket-1": { "materia": "Reader", "parse": "text",
                                       "edges": [{ "when": "always", "to": "end" }] } }
        }},
        "materia": { "Reader": { "type": "agent", "tools": "coding", "label": "Reader",
                                 "prompt": "Read notes.txt for: {{request}}" } }
    })
    .to_string()
}

/// `castlog bench tools`.
pub fn tools(db: Option<&Path>, args: &BenchToolsArgs) -> Result<(), CliError> {
    if args.calls == 0 || args.per_visit == 0 {
        return Err(CliError::user("--calls and --per-visit must be at least 1"));
    }
    let (_scratch, path) = database(db)?;
    // The working directory is a scratch directory of its own, removed at the end.
    let work = Scratch::new()?;
    std::fs::write(work.file("notes.txt"), "a line to read\n".repeat(8))
        .map_err(|e| CliError::internal(format!("cannot write the file to read: {e}")))?;
    let log = Database::Sqlite(SqliteLog::open_with(&path, durability(args.durability))?);
    log.prepare_for_steps();
    let before = db_bytes(&path);
    let loadout = load_config(&config(args.per_visit))
        .and_then(|c| c.resolve(None))
        .map_err(|e| CliError::internal(format!("the bench loadout: {e}")))?;
    let frozen = loadout_hash(&loadout.to_json());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let clock = SystemClock;
    let cwd: PathBuf = work.dir().to_path_buf();
    let mut model = ReadingModel {
        per_visit: args.per_visit,
        in_visit: 0,
        total: 0,
        slice_started: Instant::now(),
        slices: Vec::new(),
    };
    let timer = Instant::now();
    let mut casts = 0;
    while model.total < args.calls {
        // The last cast makes only the calls still wanted.
        let left = u32::try_from(args.calls - model.total).unwrap_or(u32::MAX);
        model.per_visit = args.per_visit.min(left);
        // The working directory is the driver's (not named in the event: a scratch directory
        // outside git, which the cast then does not try to checkpoint, quietly).
        let started = started_event(
            CastId::new(format!("bench-tools-{nanos}-{casts}")),
            &loadout,
            frozen,
            "the notes".into(),
            "recommended".into(),
            None,
        );
        let mut driver = Driver::start(&log, &clock, started, &cwd)?;
        let stop = driver.drive(&mut model)?;
        if stop.status != Status::Completed {
            return Err(CliError::internal(format!(
                "a bench cast stopped {}: {}",
                stop.status.as_str(),
                stop.message.unwrap_or_default()
            )));
        }
        casts += 1;
    }
    let seconds = timer.elapsed().as_secs_f64();
    // The last full slice ended with the last cast.
    if model.total.is_multiple_of(SLICE) {
        let secs = model.slice_started.elapsed().as_secs_f64();
        model.slices.push(rate(SLICE, secs));
    }
    let after = db_bytes(&path);
    let first = model.slices.first().copied().unwrap_or(0.0);
    let last = model.slices.last().copied().unwrap_or(0.0);
    output::json(&ToolsFigures {
        calls: model.total,
        per_visit: args.per_visit,
        casts,
        durability: durability(args.durability).as_str(),
        seconds,
        tool_calls_per_s: rate(model.total, seconds),
        bytes_per_call: after.saturating_sub(before) as f64 / model.total as f64,
        slice_calls_per_s: model.slices,
        last_vs_first: if first > 0.0 { last / first } else { 0.0 },
    })
}
