//! `bench synth`: the LangGraph peer's workload (`../shared/peer/`) through the real machine,
//! driver and SQLite log, with an in-process agent that answers deterministically.
//!
//! Workload: a generator socket plans W work items; per item a build socket (text) and an eval
//! socket (json) run R times (eval is not satisfied R-1 times, then satisfied and advances the
//! cursor); every agent reply is about S bytes. Socket completions: 1 + 2·W·R, the steps.
//!
//! After the run the database is reopened and time travel is measured: the full timeline
//! projection (history), the state folded at the middle seq, and a recast at the middle driven
//! to the end.

use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use castlog_core::id::{CastId, Seq};
use castlog_core::loadout::load_config;
use castlog_core::machine::Status;
use castlog_core::machine::decide::started_event;
use castlog_events::chain::loadout_hash;
use castlog_events::{Database, Durability, EventLog, SqliteLog};
use castlog_projections::timeline::TimelineLine;
use castlog_replay::agent::{Agent, AgentTurn, TurnRequest};
use castlog_replay::clock::SystemClock;
use castlog_replay::driver::{Driver, fold_until};
use castlog_replay::recast::{Recast, decision_ends, recast};
use serde::Serialize;
use serde_json::json;

use crate::args::BenchSynthArgs;
use crate::error::CliError;
use crate::output;

use super::bench_ceiling::{Ceiling, ceilings, postgres_ceilings};
use super::bench_measure::{Scratch, database, db_bytes, durability, rate};
use super::bench_rows::Written;

/// The figures, in the order the issue names them.
#[derive(Debug, Serialize)]
struct SynthFigures {
    steps: u64,
    events: u64,
    wall_s: f64,
    steps_per_s: f64,
    ms_per_step_first10pct: f64,
    ms_per_step_last10pct: f64,
    db_bytes: u64,
    db_bytes_per_step: f64,
    history_list_s: f64,
    state_mid_s: f64,
    /// Null when no fork was measured.
    fork_s: Option<f64>,
    fork_steps: Option<u64>,
    peak_rss_mb: f64,
    durability: &'static str,
    /// What the replies were made of (`--text`): `words` or `random`.
    reply_text: &'static str,
    /// Whether the log packed its large values (zstd, see the README's "The log"); off with
    /// `--no-pack`, and on PostgreSQL, which stores values as given (its own TOAST
    /// compresses large ones).
    packed: bool,
    /// Whether the agent was asked while the last steps were held, committed and (with
    /// `--durability full`) fsynced; `--no-pipeline` turns it off.
    pipelined: bool,
    /// Write transactions the run committed (with `--no-pipeline` one per step, the commit
    /// before each agent call; pipelined, up to 16 steps share one). On PostgreSQL, the
    /// appends, each its own transaction.
    commits: u64,
    /// The median time of one fsync'd commit of a single small row in a scratch database
    /// beside the log, at the same durability: the disk's floor for one step.
    commit_floor_ms: Option<f64>,
    /// The disk's ceiling for this run, measured after it in scratch databases beside the log:
    /// the same bytes per step (`db_bytes_per_step`) written by plain rusqlite, 16 steps to a
    /// commit (as the pipelined writer batches them) and one commit per step. On PostgreSQL
    /// the same bytes by plain INSERTs through the same client into a scratch schema (the log
    /// appends one transaction per step there, so `of_ceiling_per_step` is its append/raw-insert
    /// ratio). Null when the scratch database or schema cannot be used.
    ceiling_batched: Option<Ceiling>,
    ceiling_per_step: Option<Ceiling>,
    /// `steps_per_s` as a fraction of each ceiling's: the pipelined run is held to the batched
    /// one, a `--no-pipeline` run to the one-commit-per-step one.
    of_ceiling_batched: Option<f64>,
    of_ceiling_per_step: Option<f64>,
    /// Where `db_bytes` went, per step: the stored payload bytes of each event kind, the
    /// chunks and whole blobs of the blob store, and the caches (snapshots, checkpoints), as
    /// stored (packed where they are), without SQLite's own pages and indexes. Of the whole
    /// SQLite file (the run's own with bench's temporary database); null on PostgreSQL.
    stored_bytes_per_step: Option<StoredBytes>,
}

/// Stored bytes of a SQLite log by what holds them, per step (see `stored_bytes_per_step`).
#[derive(Debug, Serialize)]
struct StoredBytes {
    payloads: std::collections::BTreeMap<String, f64>,
    chunks: f64,
    blobs: f64,
    caches: f64,
}

impl StoredBytes {
    /// Each figure divided by `steps`.
    fn per_step(mut self, steps: u64) -> Self {
        let steps = steps.max(1) as f64;
        for bytes in self.payloads.values_mut() {
            *bytes /= steps;
        }
        self.chunks /= steps;
        self.blobs /= steps;
        self.caches /= steps;
        self
    }
}

/// What the tables of the SQLite log at `path` hold, in bytes.
fn stored_bytes(path: &Path) -> Result<StoredBytes, CliError> {
    let sql = |e: rusqlite::Error| CliError::internal(format!("measuring {}: {e}", path.display()));
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(sql)?;
    let per_step = |bytes: i64| bytes as f64;
    let mut payloads = std::collections::BTreeMap::new();
    let mut stmt = conn
        .prepare("SELECT kind, sum(length(payload)) FROM events GROUP BY kind")
        .map_err(sql)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .map_err(sql)?;
    for row in rows {
        let (kind, bytes) = row.map_err(sql)?;
        payloads.insert(kind, per_step(bytes));
    }
    let total = |table: &str, column: &str| -> Result<f64, CliError> {
        conn.query_row(
            &format!("SELECT coalesce(sum(length({column})), 0) FROM {table}"),
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(per_step)
        .map_err(sql)
    };
    Ok(StoredBytes {
        payloads,
        chunks: total("chunks", "bytes")?,
        blobs: total("blobs", "bytes")?,
        caches: total("checkpoints", "bytes")?,
    })
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Folds the WAL into the database file and removes it, as closing the last connection does
/// (the peer measures its file after such a close), so the figure never counts WAL pages.
fn checkpoint(path: &Path) -> Result<(), CliError> {
    let sql =
        |e: rusqlite::Error| CliError::internal(format!("checkpointing {}: {e}", path.display()));
    let conn = rusqlite::Connection::open(path).map_err(sql)?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .map_err(sql)?;
    conn.close().map_err(|(_, e)| sql(e))
}

/// The median ms of one commit of one 100-byte row, in WAL mode at `durability`, in a scratch
/// database beside `path` (the same file system), removed afterwards. `None` if the scratch
/// database cannot be used.
fn commit_floor_ms(path: &Path, durability: Durability) -> Option<f64> {
    let mut name = path.file_name()?.to_owned();
    name.push(".commit-floor");
    let floor = path.with_file_name(name);
    let measure = || -> rusqlite::Result<f64> {
        let conn = rusqlite::Connection::open(&floor)?;
        let sync = durability.synchronous();
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
        conn.execute_batch(&format!(
            "PRAGMA synchronous = {sync}; CREATE TABLE IF NOT EXISTS floor (b BLOB);"
        ))?;
        let row = [0u8; 100];
        let mut times = Vec::with_capacity(200);
        for i in 0..220 {
            let t = Instant::now();
            conn.execute_batch("BEGIN IMMEDIATE")?;
            conn.execute("INSERT INTO floor (b) VALUES (?1)", [&row[..]])?;
            conn.execute_batch("COMMIT")?;
            // The first commits grow the WAL file; they are not counted.
            if i >= 20 {
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    };
    let result = measure().ok();
    for suffix in ["", "-wal", "-shm"] {
        let mut file = floor.clone().into_os_string();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
    result
}

/// Peak resident set size (VmHWM) in MB, 0 where /proc is not available.
fn peak_rss_mb() -> f64 {
    super::bench_measure::peak_rss_kb().map_or(0.0, |kb| kb as f64 / 1024.0)
}

/// Mean ms per step over the first and last 10% of steps (at least one step each), as the
/// peer computes them: deltas between consecutive completion stamps, the first from `t0`.
fn decile_means_ms(t0: Instant, stamps: &[Instant]) -> (f64, f64) {
    let mut prev = t0;
    let deltas: Vec<f64> = stamps
        .iter()
        .map(|t| {
            let d = t.duration_since(prev).as_secs_f64() * 1e3;
            prev = *t;
            d
        })
        .collect();
    if deltas.is_empty() {
        return (0.0, 0.0);
    }
    let k = (deltas.len() / 10).max(1);
    let first = deltas[..k].iter().sum::<f64>() / k as f64;
    let last = deltas[deltas.len() - k..].iter().sum::<f64>() / k as f64;
    (first, last)
}

/// The loadout, in pi-materia's config format: plan (generator) → loop { build → eval };
/// eval not satisfied → build (at most `rework` times per item), satisfied → advance the cursor
/// and build the next item; the loop leaves to `end` when the list is walked.
fn config_json(rework: u32) -> String {
    json!({
        "activeLoadout": "Synth",
        "limits": { "maxNoAdvanceCycles": 3 },
        "budget": { "maxTokens": 1_000_000_000_000u64, "warnAtPercent": 99 },
        "loadouts": {
            "Synth": {
                "entry": "Socket-1",
                "sockets": {
                    "Socket-1": { "materia": "Plan", "edges": [{ "when": "always", "to": "Socket-2" }] },
                    "Socket-2": {
                        "materia": "Build",
                        "parse": "text",
                        "edges": [{ "when": "always", "to": "Socket-3" }]
                    },
                    "Socket-3": {
                        "materia": "Eval",
                        "parse": "json",
                        "assign": { "lastFeedback": "$.context" },
                        "advance": { "cursor": "workItemIndex", "items": "state.workItems", "when": "satisfied" },
                        "edges": [
                            { "when": "not_satisfied", "to": "Socket-2", "maxTraversals": rework.max(1) },
                            { "when": "always", "to": "Socket-2" }
                        ]
                    }
                },
                "loops": {
                    "items": {
                        "sockets": ["Socket-2", "Socket-3"],
                        "consumes": { "from": "Socket-1", "output": "workItems" },
                        "exits": [{
                            "id": "exit:Socket-3:always",
                            "from": "Socket-3",
                            "condition": "always",
                            "targetSocketId": "end"
                        }]
                    }
                }
            }
        },
        "materia": {
            "Plan": {
                "type": "agent", "tools": "readOnly", "generator": true, "label": "Plan",
                "prompt": "[synth:plan] Plan the work items for: {{request}}"
            },
            "Build": {
                "type": "agent", "tools": "coding", "label": "Build",
                "prompt": "[synth:build] item={{item.title}} last={{state.lastFeedback}}"
            },
            "Eval": {
                "type": "agent", "tools": "readOnly", "label": "Eval",
                "prompt": "[synth:eval] item={{item.title}} last={{state.lastFeedback}}"
            }
        }
    })
    .to_string()
}

/// FNV-1a, to seed the text generator from a string.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Exactly `size` ASCII bytes derived from `seed` (splitmix64): words of the peer's
/// vocabulary, or with `random` letters and digits.
fn synth_text(seed: &str, size: usize, random: bool) -> String {
    const SYMBOLS: &[u8; 62] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const VOCAB: [&str; 64] = [
        "agent", "plan", "build", "eval", "item", "task", "code", "test", "patch", "diff", "fix",
        "rework", "review", "module", "function", "result", "error", "retry", "context", "tool",
        "call", "output", "input", "state", "graph", "node", "edge", "step", "check", "pass",
        "fail", "score", "note", "spec", "doc", "api", "type", "value", "field", "list", "map",
        "key", "log", "trace", "span", "event", "store", "load", "save", "fork", "replay", "time",
        "cost", "token", "model", "prompt", "reply", "reason", "draft", "final", "accept",
        "reject", "merge", "run",
    ];
    let mut state = fnv1a(seed);
    let mut out = String::with_capacity(size + 16);
    while out.len() < size {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        if random {
            for k in 0..8 {
                out.push(char::from(SYMBOLS[((z >> (k * 8)) & 0xff) as usize % 62]));
            }
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(VOCAB[(z & 63) as usize]);
    }
    out.truncate(size);
    out
}

/// `text` padded (or cut) with generated text ([`synth_text`]) to `size` bytes.
fn padded(head: &str, seed: &str, size: usize, random: bool) -> String {
    if head.len() >= size {
        return head.to_owned();
    }
    let mut out = head.to_owned();
    out.push(' ');
    let rest = size.saturating_sub(out.len());
    out.push_str(&synth_text(seed, rest, random));
    out
}

/// The synthetic agent: every answer is a function of the prompt alone, so a fork driven from
/// any point answers exactly as the first run did. It stamps the time of every call: a call
/// marks the end of the previous step (its events are committed and the next prompt recorded;
/// pipelined, the last steps may still wait for their fsync).
#[derive(Debug)]
pub(super) struct SynthAgent {
    items: u64,
    rework: u32,
    bytes: usize,
    /// Replies of random letters and digits instead of words.
    random: bool,
    local: bool,
    stamps: Vec<Instant>,
}

impl SynthAgent {
    fn new(args: &BenchSynthArgs) -> Self {
        Self {
            items: args.items,
            rework: args.rework,
            bytes: args.output_bytes,
            random: args.text == crate::args::ReplyTextArg::Random,
            local: !args.no_pipeline,
            stamps: Vec::new(),
        }
    }

    fn plan(&self) -> String {
        let work: Vec<serde_json::Value> = (1..=self.items)
            .map(|i| {
                json!({
                    "title": format!("item-{i:05}"),
                    "context": format!("Synthetic work item {i} of {}.", self.items),
                })
            })
            .collect();
        let frame = json!({ "workItems": work, "context": "" })
            .to_string()
            .len();
        let context = synth_text(
            &format!("plan|{}", self.items),
            self.bytes.saturating_sub(frame),
            self.random,
        );
        json!({ "workItems": work, "context": context }).to_string()
    }

    /// The item and the try (1-based) from `ITEM last=VERDICT…`: the last verdict names the
    /// item and its try when the item is being reworked.
    fn attempt(line: &str) -> (&str, u32) {
        let line = line.split('\n').next().unwrap_or(line);
        let (item, last) = line.split_once(" last=").unwrap_or((line, ""));
        let attempt = last
            .strip_prefix("verdict ")
            .and_then(|rest| rest.strip_prefix(item))
            .and_then(|rest| rest.strip_prefix(" try "))
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse::<u32>().ok())
            .map_or(1, |n| n + 1);
        (item, attempt)
    }

    fn build(&self, line: &str) -> String {
        let (item, attempt) = Self::attempt(line);
        padded(
            &format!("build {item} try {attempt}:"),
            &format!("build|{item}|{attempt}"),
            self.bytes,
            self.random,
        )
    }

    fn eval(&self, line: &str) -> String {
        let (item, attempt) = Self::attempt(line);
        let satisfied = attempt >= self.rework;
        let verdict = if satisfied { "accepted" } else { "rejected" };
        let head = format!("verdict {item} try {attempt} {verdict}:");
        let frame = json!({ "satisfied": satisfied, "context": "" })
            .to_string()
            .len();
        let context = padded(
            &head,
            &format!("eval|{item}|{attempt}"),
            self.bytes.saturating_sub(frame),
            self.random,
        );
        json!({ "satisfied": satisfied, "context": context }).to_string()
    }
}

impl Agent for SynthAgent {
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        self.stamps.push(Instant::now());
        if request.refinement {
            return AgentTurn::Exhausted("the synthetic agent does not refine".into());
        }
        // The materia instructions (in the first, system message) say everything: which
        // socket, which item, the last verdict. The rest of the prompt is not read.
        let Some(instructions) = request
            .messages
            .iter()
            .find_map(|m| m.content.find("[synth:").map(|at| &m.content[at..]))
        else {
            return AgentTurn::Exhausted("the synthetic agent got an unknown prompt".into());
        };
        let text = if let Some(rest) = instructions.strip_prefix("[synth:eval] item=") {
            self.eval(rest)
        } else if let Some(rest) = instructions.strip_prefix("[synth:build] item=") {
            self.build(rest)
        } else if instructions.starts_with("[synth:plan]") {
            self.plan()
        } else {
            return AgentTurn::Exhausted("the synthetic agent got an unknown prompt".into());
        };
        AgentTurn::Reply { text, usage: None }
    }

    /// A function of the prompt, like a script: asked while the last steps are fsynced,
    /// unless `--no-pipeline`.
    fn local(&self) -> bool {
        self.local
    }
}

pub(super) fn check(args: &BenchSynthArgs) -> Result<(), CliError> {
    if args.items == 0 || args.rework == 0 || args.output_bytes == 0 {
        return Err(CliError::user(
            "--items, --rework and --output-bytes must be at least 1",
        ));
    }
    Ok(())
}

/// Runs the synthetic workload to completion as a new cast of `log`; returns the cast, the
/// agent (with its call times) and when the drive started and ended.
pub(super) fn run_synth<L: EventLog + ?Sized>(
    log: &L,
    clock: &SystemClock,
    cwd: &Path,
    args: &BenchSynthArgs,
) -> Result<(CastId, SynthAgent, Instant, Instant), CliError> {
    let (items, rework, output_bytes) = (args.items, args.rework, args.output_bytes);
    let config = load_config(&config_json(rework))
        .map_err(|e| CliError::internal(format!("the synthetic loadout: {e}")))?;
    let loadout = config
        .resolve(None)
        .map_err(|e| CliError::internal(format!("the synthetic loadout: {e}")))?;
    let frozen = loadout_hash(&loadout.to_json());
    let cast = CastId::new(format!(
        "bench-synth-w{items}-r{rework}-s{output_bytes}-{}",
        now_nanos()
    ));
    let mut agent = SynthAgent::new(args);
    let started = started_event(
        cast.clone(),
        &loadout,
        frozen,
        format!("synthetic workload: {items} items, {rework} tries each"),
        "recommended".into(),
        None,
    );
    let t0 = Instant::now();
    let mut driver = Driver::start(log, clock, started, cwd)?;
    let stop = driver.drive(&mut agent)?;
    let end = Instant::now();
    if stop.status != Status::Completed {
        return Err(CliError::internal(format!(
            "the synthetic cast stopped {}: {}",
            stop.status.as_str(),
            stop.message.unwrap_or_default()
        )));
    }
    Ok((cast, agent, t0, end))
}

/// The time to fold `cast` to the middle of its `head` seqs (`state --at`), and the last
/// decision boundary at or before that middle (the first one if none is), where the benches
/// fork.
fn state_mid_and_fork_point(
    log: &Database,
    cast: &CastId,
    head: Seq,
) -> Result<(f64, Seq), CliError> {
    let mid = Seq(head.get() / 2);
    let timer = Instant::now();
    let (state, _) = fold_until(log, cast, mid)?;
    let state_mid_s = timer.elapsed().as_secs_f64();
    drop(state);
    let ends = decision_ends(log, cast)?;
    let at = ends
        .iter()
        .rev()
        .find(|s| **s <= mid)
        .or(ends.first())
        .copied()
        .ok_or_else(|| CliError::internal("the synthetic cast has no decision boundary"))?;
    Ok((state_mid_s, at))
}

/// `castlog bench synth`.
pub fn synth(db: Option<&Path>, args: &BenchSynthArgs) -> Result<(), CliError> {
    check(args)?;
    castlog_events::sqlite::set_packing(!args.no_pack);
    let (_scratch, path) = database(db)?;
    let durability = durability(args.durability);
    let expected = 1 + 2 * args.items * u64::from(args.rework);

    // The synthetic agent touches no files: its casts run in an empty directory outside git,
    // so no workspace is checkpointed (the peer's workload has none either).
    let workdir = Scratch::new()?;
    let cwd = workdir.dir().to_path_buf();
    let clock = SystemClock;
    // On PostgreSQL (`--db postgres://...`) every commit is flushed (`synchronous_commit =
    // on`); the SQLite file's commit floor and WAL checkpoint do not apply there.
    let postgres = castlog_events::database::is_postgres(&path);
    let commit_floor_ms = if postgres {
        None
    } else {
        commit_floor_ms(&path, durability)
    };
    let log = Database::open_with(&path, durability)?;
    log.prepare_for_steps();
    // A database named with --db may hold other casts: only what this run adds is counted.
    let bytes_before = match &log {
        Database::Postgres(pg) => pg.stored_bytes()?,
        Database::Sqlite(_) => 0,
    };
    let written = Written::new(&log);
    let (cast, agent, t0, end) = run_synth(&written, &clock, &cwd, args)?;
    let wall_s = end.duration_since(t0).as_secs_f64();
    let notes = written.into_notes();
    let commits = log.sqlite().map_or(notes.writes(), SqliteLog::commits);
    // A call marks the end of the step before it; the last step ends with the drive.
    let mut stamps: Vec<Instant> = agent.stamps.iter().skip(1).copied().collect();
    stamps.push(end);
    let (first_ms, last_ms) = decile_means_ms(t0, &stamps);
    // `stored` is measured where `bytes` is, before the time travel adds its fork.
    let (bytes, stored) = match &log {
        Database::Postgres(pg) => (pg.stored_bytes()?.saturating_sub(bytes_before), None),
        Database::Sqlite(_) => {
            drop(log);
            checkpoint(&path)?;
            (db_bytes(&path), Some(stored_bytes(&path)?))
        }
    };

    // Phase 2: time travel on a fresh connection.
    let log = Database::open_with(&path, durability)?;
    log.prepare_for_steps();
    let head = log
        .head(&cast)?
        .ok_or_else(|| CliError::internal("the synthetic cast vanished"))?;
    let timer = Instant::now();
    let mut history: Vec<TimelineLine> = Vec::new();
    let mut decoder = castlog_events::Decoder::new();
    log.scan(&cast, Seq::FIRST, &mut |record| {
        let decoded = decoder.event(&record);
        history.push(TimelineLine::of(&record, decoded.as_ref(), super::CONTEXTS));
        ControlFlow::Continue(())
    })?;
    let history_list_s = timer.elapsed().as_secs_f64();
    let steps = history
        .iter()
        .filter(|l| l.kind == "socket_completed")
        .count() as u64;
    drop(history);
    if steps != expected {
        return Err(CliError::internal(format!(
            "the synthetic cast completed {steps} sockets, expected {expected}"
        )));
    }

    // Fork: recast at the last decision boundary at or before the middle seq (chosen before the
    // clock starts, as the peer picks its checkpoint from the history list), then drive the
    // child to the end with the same agent.
    let (state_mid_s, at) = state_mid_and_fork_point(&log, &cast, head.seq)?;
    let plan = Recast {
        parent: cast.clone(),
        at,
        child: CastId::new(format!("{cast}-fork")),
        loadout: None,
        tools: None,
        keep: Vec::new(),
        workdir: None,
    };
    let mut fork_agent = SynthAgent::new(args);
    let timer = Instant::now();
    let mut child = recast(&log, &clock, &plan, &cwd)?;
    let fork_stop = child.drive(&mut fork_agent)?;
    let fork_s = timer.elapsed().as_secs_f64();
    drop(child);
    if fork_stop.status != Status::Completed {
        return Err(CliError::internal(format!(
            "the forked cast stopped {}: {}",
            fork_stop.status.as_str(),
            fork_stop.message.unwrap_or_default()
        )));
    }
    let mut fork_steps = 0u64;
    log.scan(&plan.child, Seq::FIRST, &mut |record| {
        fork_steps += u64::from(record.kind == "socket_completed");
        ControlFlow::Continue(())
    })?;
    // Measured before the baseline reads the run's rows back.
    let peak_rss_mb = peak_rss_mb();

    let steps_per_s = rate(steps, wall_s);
    let (ceiling_batched, ceiling_per_step) = if postgres {
        let rows = notes.steps(&log, &cast)?;
        drop(log);
        let url = path.to_str().unwrap_or_default();
        postgres_ceilings(url, &rows)
    } else {
        drop(log);
        ceilings(&path, durability, steps, bytes.div_ceil(steps.max(1)))
    };
    let of = |c: &Option<Ceiling>| {
        c.as_ref()
            .filter(|c| c.steps_per_s > 0.0)
            .map(|c| steps_per_s / c.steps_per_s)
    };
    output::json(&SynthFigures {
        steps,
        events: head.seq.get(),
        wall_s,
        steps_per_s,
        ms_per_step_first10pct: first_ms,
        ms_per_step_last10pct: last_ms,
        db_bytes: bytes,
        db_bytes_per_step: bytes as f64 / steps as f64,
        history_list_s,
        state_mid_s,
        fork_s: Some(fork_s),
        fork_steps: Some(fork_steps),
        peak_rss_mb,
        durability: durability.as_str(),
        reply_text: args.text.as_str(),
        packed: !args.no_pack && !postgres,
        pipelined: !args.no_pipeline,
        commits,
        commit_floor_ms,
        of_ceiling_batched: of(&ceiling_batched),
        of_ceiling_per_step: of(&ceiling_per_step),
        ceiling_batched,
        ceiling_per_step,
        stored_bytes_per_step: stored.map(|s| s.per_step(steps)),
    })
}

/// `castlog bench replay`: one long synthetic cast, then the read side measured on it.
pub fn replay(db: Option<&Path>, args: &BenchSynthArgs) -> Result<(), CliError> {
    check(args)?;
    castlog_events::sqlite::set_packing(!args.no_pack);
    let (_scratch, path) = database(db)?;
    // As for `bench synth`: no files, no workspace checkpoints.
    let workdir = Scratch::new()?;
    let cwd = workdir.dir().to_path_buf();
    let clock = SystemClock;
    let log = Database::Sqlite(SqliteLog::open_with(&path, durability(args.durability))?);
    log.prepare_for_steps();
    let (cast, _, _, _) = run_synth(&log, &clock, &cwd, args)?;
    let head = log
        .head(&cast)?
        .ok_or_else(|| CliError::internal("the synthetic cast vanished"))?;
    let events = head.seq.get();

    let timer = Instant::now();
    let (state, _) = castlog_replay::driver::fold(&log, &cast)?;
    let fold_s = timer.elapsed().as_secs_f64();
    drop(state);

    let timer = Instant::now();
    let verified = castlog_events::verify::verify_cast(&log, &head)?;
    let verify_s = timer.elapsed().as_secs_f64();
    if !verified.problems.is_empty() {
        return Err(CliError::integrity("the synthetic cast does not verify"));
    }
    let timer = Instant::now();
    let divergence = castlog_replay::redecide::redecide(&log, &cast)?;
    let redecide_s = timer.elapsed().as_secs_f64();
    if let Some(d) = divergence {
        return Err(CliError::integrity(format!(
            "the synthetic cast diverges at seq {}",
            d.seq
        )));
    }

    let (state_mid_s, at) = state_mid_and_fork_point(&log, &cast, head.seq)?;
    let child = CastId::new(format!("{cast}-fork"));
    let plan = Recast {
        parent: cast.clone(),
        at,
        child: child.clone(),
        loadout: None,
        tools: None,
        keep: Vec::new(),
        workdir: None,
    };
    let mut fork_agent = SynthAgent::new(args);
    let mut forked = recast(&log, &clock, &plan, &cwd)?;
    forked.drive(&mut fork_agent)?;
    drop(forked);
    let timer = Instant::now();
    let diff = super::diff::compute(&log, cast.as_str(), child.as_str())?;
    let diff_s = timer.elapsed().as_secs_f64();
    drop(log);

    output::json(&serde_json::json!({
        "events": events,
        "fold_s": fold_s,
        "fold_events_per_s": rate(events, fold_s),
        "verify_s": verify_s,
        "verify_events_per_s": rate(verified.events, verify_s),
        "redecide_s": redecide_s,
        "redecide_events_per_s": rate(events, redecide_s),
        "state_mid_s": state_mid_s,
        "diff_s": diff_s,
        "diff_steps": diff["steps"].as_array().map_or(0, Vec::len),
        "diff_common_prefix": diff["common_prefix"],
        "durability": durability(args.durability).as_str(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_have_the_asked_size_and_eval_counts_tries() {
        let agent = SynthAgent::new(&BenchSynthArgs {
            items: 3,
            rework: 3,
            output_bytes: 500,
            durability: crate::args::DurabilityArg::Full,
            no_pipeline: false,
            text: crate::args::ReplyTextArg::Words,
            no_pack: false,
            json: true,
        });
        assert_eq!(synth_text("x", 123, false).len(), 123);
        let random = synth_text("x", 123, true);
        assert_eq!(random.len(), 123);
        assert!(
            random.bytes().all(|b| b.is_ascii_alphanumeric()),
            "{random}"
        );
        assert_eq!(agent.build("item-00001 last=\nmore").len(), 500);
        let first = agent.eval("item-00002 last=verdict item-00001 try 3 accepted: x");
        assert!(first.contains("try 1 rejected"), "{first}");
        assert!((490..=510).contains(&first.len()), "{}", first.len());
        let third = agent.eval("item-00002 last=verdict item-00002 try 2 rejected: x\n");
        assert!(third.contains("\"satisfied\":true"), "{third}");
        assert!(load_config(&config_json(3)).is_ok());
    }
}
