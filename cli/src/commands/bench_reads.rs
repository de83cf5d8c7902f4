//! `bench reads`: the peak memory of every read command on one long cast.
//!
//! Each command runs as a child process of this binary against the cast. The child reports
//! its own peak resident set size (VmHWM) when it exits, into the file the hidden variable
//! [`PEAK_RSS_FILE`] names: reading `/proc/PID/status` from the parent races the child's
//! exit, and waiting for its resource usage would need code the workspace forbids.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use castlog_core::event::Event;
use castlog_core::id::{CastId, Seq};
use castlog_events::{CastHead, Database, EventLog, SqliteLog};
use serde::Serialize;

use crate::args::{BenchReadsArgs, BenchSynthArgs};
use crate::error::CliError;
use crate::output;

use super::bench_measure::{Scratch, database, durability, peak_rss_kb, rate};

/// A file to write the process's peak RSS (kB, one number) into when it exits. Not part of
/// the interface: `bench reads` sets it for its children.
pub const PEAK_RSS_FILE: &str = "CASTLOG_BENCH_PEAK_RSS_FILE";

/// Writes the peak RSS where [`PEAK_RSS_FILE`] says, if it says.
pub fn report_peak_rss() {
    if let Some(path) = std::env::var_os(PEAK_RSS_FILE) {
        // A figure that cannot be written is missing from the bench, which says so.
        let _ = std::fs::write(path, peak_rss_kb().unwrap_or(0).to_string());
    }
}

#[derive(Debug, Serialize)]
struct Read {
    /// The command line after `castlog --db DB`, the cast written `CAST`.
    command: String,
    exit: i32,
    peak_rss_mb: f64,
    wall_s: f64,
}

#[derive(Debug, Serialize)]
struct ReadsFigures {
    cast: String,
    events: u64,
    /// Whether the bench made the cast (else `--cast` named it).
    built: bool,
    reads: Vec<Read>,
    /// The largest `peak_rss_mb` of `reads`, and its command.
    max_peak_rss_mb: f64,
    max_command: String,
    /// The events `verify` checked per second of its wall time, end to end (the process, the
    /// chain, the blobs, every prompt rebuilt, the snapshots and a re-decision).
    verify_events_per_s: f64,
}

/// `castlog bench reads`.
pub fn reads(db: Option<&Path>, args: &BenchReadsArgs) -> Result<(), CliError> {
    if args.cast.is_some() && db.is_none() {
        return Err(CliError::user(
            "--cast names a cast of the database --db names: give --db on the command line",
        ));
    }
    let (scratch, path) = database(db)?;
    let files = Scratch::new()?;
    let (cast, built) = match &args.cast {
        Some(cast) => {
            let log = SqliteLog::open(&path)?;
            (super::inspect::head_of(&log, cast)?.cast, false)
        }
        None => (build(&path, args)?, true),
    };
    let log = SqliteLog::open(&path)?;
    let head = super::inspect::head_of(&log, cast.as_str())?;
    let prompt = last_prompt(&log, &cast)?;
    let verified_events = verified_events(&log, &head, built)?;
    drop(log);

    let c = cast.as_str();
    let mid = (head.seq.get() / 2).max(1).to_string();
    let jsonl = files.file("export.jsonl");
    let bincode = files.file("export.bincode");
    let (jsonl, bincode) = (jsonl.to_string_lossy(), bincode.to_string_lossy());
    // `verify --all` when every cast of the database is the bench's; else the cast and its
    // ancestors.
    let verify: &[&str] = if built {
        &["verify", "--all", "--json"]
    } else {
        &["verify", c, "--json"]
    };
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["casts", "--json"],
        vec!["show", c, "--json"],
        vec!["show", c],
        vec!["export", c, "--format", "jsonl", "-o", &jsonl, "--json"],
        vec!["export", c, "--format", "bincode", "-o", &bincode, "--json"],
        vec!["state", c, "--json"],
        vec!["state", c, "--at", &mid, "--json"],
        vec!["replay", c, "--json"],
        verify.to_vec(),
        vec!["diff", c, c, "--json"],
        vec!["audit", c, "--json"],
        vec!["audit", c, "--lint", "--json"],
    ];
    if let Some(at) = &prompt {
        commands.push(vec!["prompt", c, at, "--json"]);
    }
    let exe = std::env::current_exe()
        .map_err(|e| CliError::internal(format!("cannot find the castlog executable: {e}")))?;
    let mut reads = Vec::new();
    for argv in &commands {
        reads.push(measure(&exe, &path, &files, argv, c)?);
    }
    drop(scratch);
    let verify_events_per_s = reads
        .iter()
        .find(|r| r.command.starts_with("verify"))
        .map_or(0.0, |r| rate(verified_events, r.wall_s));
    let (max_peak_rss_mb, max_command) = reads
        .iter()
        .max_by(|a, b| a.peak_rss_mb.total_cmp(&b.peak_rss_mb))
        .map_or((0.0, String::new()), |r| (r.peak_rss_mb, r.command.clone()));
    output::json(&ReadsFigures {
        cast: cast.to_string(),
        events: head.seq.get(),
        built,
        reads,
        max_peak_rss_mb,
        max_command,
        verify_events_per_s,
    })
}

/// The synthetic cast of `bench synth`, made in `path`.
fn build(path: &Path, args: &BenchReadsArgs) -> Result<CastId, CliError> {
    let synth = BenchSynthArgs {
        items: args.items,
        rework: args.rework,
        output_bytes: args.output_bytes,
        durability: args.durability,
        no_pipeline: false,
        text: crate::args::ReplyTextArg::Words,
        no_pack: false,
        json: true,
    };
    super::bench_synth::check(&synth)?;
    let log = Database::Sqlite(SqliteLog::open_with(path, durability(args.durability))?);
    log.prepare_for_steps();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let (cast, ..) =
        super::bench_synth::run_synth(&log, &castlog_replay::clock::SystemClock, &cwd, &synth)?;
    Ok(cast)
}

/// The events `verify` reads: every cast's with `--all` (`built`), else the cast's and its
/// ancestors'.
fn verified_events(log: &SqliteLog, head: &CastHead, built: bool) -> Result<u64, CliError> {
    let heads = if built {
        log.audit_casts()?.heads
    } else {
        let mut heads = vec![head.clone()];
        for ancestor in castlog_events::log::ancestors(log, &head.cast)? {
            heads.extend(log.head(&ancestor)?);
        }
        heads
    };
    Ok(heads.iter().map(|h| h.seq.get()).sum())
}

/// `SOCKET:VISIT` of the cast's last dispatched prompt, for `prompt`.
fn last_prompt(log: &SqliteLog, cast: &CastId) -> Result<Option<String>, CliError> {
    let mut last = None;
    log.scan(cast, Seq::FIRST, &mut |record| {
        if let Ok(Event::PromptDispatched(e)) = record.event() {
            last = Some(format!("{}:{}", e.socket, e.visit));
        }
        ControlFlow::Continue(())
    })?;
    Ok(last)
}

/// Runs `castlog --db DB ARGV` with its output thrown away and reads the peak RSS it reports.
fn measure(
    exe: &Path,
    db: &Path,
    files: &Scratch,
    argv: &[&str],
    cast: &str,
) -> Result<Read, CliError> {
    let report = files.file("peak-rss");
    // A figure left from the command before must not pass for this one's.
    let _ = std::fs::remove_file(&report);
    let timer = Instant::now();
    let run = Command::new(exe)
        .arg("--db")
        .arg(db)
        .args(argv)
        .env(PEAK_RSS_FILE, &report)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| CliError::internal(format!("cannot run {}: {e}", exe.display())))?;
    let wall_s = timer.elapsed().as_secs_f64();
    let command = argv
        .iter()
        .map(|a| match *a {
            a if a == cast => "CAST".to_owned(),
            a if Path::new(a).starts_with(files.dir()) => "FILE".to_owned(),
            a => a.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ");
    let kb = std::fs::read_to_string(&report)
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            CliError::internal(format!(
                "`{command}` reported no peak memory: {}",
                String::from_utf8_lossy(&run.stderr).trim()
            ))
        })?;
    Ok(Read {
        command,
        exit: run.status.code().unwrap_or(-1),
        peak_rss_mb: kb as f64 / 1024.0,
        wall_s,
    })
}
