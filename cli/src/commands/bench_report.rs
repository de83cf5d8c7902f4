//! `bench report`: the time to write the HTML report of one long synthetic cast (the
//! `bench synth` workload, about 43 events per work item), split into reading the log
//! (`CastReport::gather`), rendering and writing the file, and (when Chromium is installed)
//! the time a headless Chromium takes to open it: start, load (the whole file parsed, its
//! scripts run) and paint a screenshot of the first screen (`chromium_open_s`), beside its start
//! and screenshot of an empty page (`chromium_start_s`) and the time to load the report and
//! hand back its whole DOM as text (`chromium_dump_dom_s`, which also serializes every packed
//! list to stdout: the cost of the dump, not of opening).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use castlog_events::{Database, SqliteLog};
use castlog_viewer::gather::CastReport;
use serde::Serialize;

use crate::args::{BenchReportArgs, BenchSynthArgs};
use crate::error::CliError;
use crate::output;

use super::bench_measure::{Scratch, database, durability};

#[derive(Debug, Serialize)]
struct ReportFigures {
    cast: String,
    events: u64,
    visits: usize,
    prompts: usize,
    gather_s: f64,
    render_s: f64,
    write_s: f64,
    /// Gather, render and write: what `castlog report` spends.
    report_s: f64,
    html_bytes: usize,
    /// A headless Chromium's start, load and screenshot of the report's first screen; null
    /// without Chromium.
    chromium_open_s: Option<f64>,
    /// The same for an empty page: Chromium's own share of `chromium_open_s`.
    chromium_start_s: Option<f64>,
    /// A headless Chromium's start, load and DOM dump of the report (every packed list's text
    /// written to stdout).
    chromium_dump_dom_s: Option<f64>,
}

/// Seconds a headless Chromium takes to open `file` and do `what` (`--screenshot=...`,
/// `--dump-dom`), run in `dir`; `None` when it fails (or writes no screenshot it was asked for).
fn time_chromium(program: &Path, dir: &Path, what: &str, file: &Path) -> Option<f64> {
    let t = Instant::now();
    let status = Command::new(program)
        .current_dir(dir)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--window-size=1280,800",
            what,
        ])
        .arg(format!("file://{}", file.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    let seconds = t.elapsed().as_secs_f64();
    let shot = what.strip_prefix("--screenshot=").map(Path::new);
    (status.success() && shot.is_none_or(Path::is_file)).then_some(seconds)
}

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| [dir.join("chromium"), dir.join("chromium-browser")])
        .find(|p| p.is_file())
}

/// `castlog bench report`.
pub fn report(db: Option<&Path>, args: &BenchReportArgs) -> Result<(), CliError> {
    if args.cast.is_some() && db.is_none() {
        return Err(CliError::user(
            "--cast names a cast of the database --db names: give --db on the command line",
        ));
    }
    let (_scratch, path) = database(db)?;
    let files = Scratch::new()?;
    let log = Database::Sqlite(SqliteLog::open_with(&path, durability(args.durability))?);
    let cast = match &args.cast {
        Some(cast) => super::inspect::head_of(&log, cast)?.cast,
        None => {
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
            log.prepare_for_steps();
            let cwd = super::cast::cwd();
            let clock = castlog_replay::clock::SystemClock;
            super::bench_synth::run_synth(&log, &clock, &cwd, &synth)?.0
        }
    };
    let head = super::inspect::head_of(&log, cast.as_str())?;
    let t0 = Instant::now();
    let gathered = CastReport::gather(&log, &cast, super::CONTEXTS)?;
    let gather_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let html = castlog_viewer::report::report(&gathered, None, &Default::default());
    let render_s = t1.elapsed().as_secs_f64();
    let file = files.file("report.html");
    let t2 = Instant::now();
    std::fs::write(&file, &html)
        .map_err(|e| CliError::user(format!("cannot write {}: {e}", file.display())))?;
    let write_s = t2.elapsed().as_secs_f64();
    let program = chromium();
    let empty = files.file("empty.html");
    std::fs::write(&empty, "<!doctype html><title>empty</title>")
        .map_err(|e| CliError::user(format!("cannot write {}: {e}", empty.display())))?;
    let open = |what: &str, page: &Path| {
        program
            .as_deref()
            .and_then(|p| time_chromium(p, files.dir(), what, page))
    };
    let shot = files.file("report.png");
    let chromium_start_s = open(
        &format!("--screenshot={}", files.file("empty.png").display()),
        &empty,
    );
    let chromium_open_s = open(&format!("--screenshot={}", shot.display()), &file);
    let chromium_dump_dom_s = open("--dump-dom", &file);
    output::json(&ReportFigures {
        cast: cast.to_string(),
        events: head.seq.get(),
        visits: gathered.visits.len(),
        prompts: gathered.prompts.len(),
        gather_s,
        render_s,
        write_s,
        report_s: gather_s + render_s + write_s,
        html_bytes: html.len(),
        chromium_open_s,
        chromium_start_s,
        chromium_dump_dom_s,
    })
}
