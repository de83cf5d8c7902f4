//! `bench report`: the time to write the HTML report of one long synthetic cast (the
//! `bench synth` workload, about 43 events per work item), split into reading the log
//! (`CastReport::gather`), rendering and writing the file, and (when Chromium is installed)
//! the time a headless Chromium takes to load the file and hand back its DOM.

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
    /// A headless Chromium's start, load and DOM dump of the file; null without Chromium.
    chromium_open_s: Option<f64>,
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
    let chromium_open_s = chromium().and_then(|program| {
        let t = Instant::now();
        let status = Command::new(program)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--dump-dom",
            ])
            .arg(format!("file://{}", file.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        status.success().then(|| t.elapsed().as_secs_f64())
    });
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
    })
}
