//! The `castlog` binary: argument parsing, command dispatch, output and exit codes.
#![forbid(unsafe_code)]

mod args;
mod commands;
mod error;
mod output;
mod progress;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};

use args::{Cli, Command};
use error::CliError;

/// The default database file in the current directory.
const DEFAULT_DB: &str = "castlog.db";

fn main() -> ExitCode {
    let parsed = Cli::command().try_get_matches().and_then(|matches| {
        // `bench` writes only where --db says on its command line, never into the database
        // CASTLOG_DB names for the other commands.
        let db_on_line = matches.value_source("db") == Some(ValueSource::CommandLine);
        Cli::from_arg_matches(&matches).map(|cli| (cli, db_on_line))
    });
    let (cli, db_on_line) = match parsed {
        Ok(parsed) => parsed,
        Err(err) => {
            // `--help` and `--version` print and succeed; anything else is a usage error, the
            // user's to fix (exit 1, like every other bad input).
            let code = if err.use_stderr() { error::USER } else { 0 };
            // If the terminal is gone there is nobody left to tell.
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    let ran = run(cli, db_on_line);
    commands::bench_reads::report_peak_rss();
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            output::to_stderr(format_args!("{}", err.message));
            ExitCode::from(err.code)
        }
    }
}

fn run(cli: Cli, db_on_line: bool) -> Result<(), CliError> {
    progress::init_tracing();
    progress::set_quiet(cli.quiet);
    commands::cast::set_agent_format(cli.agent_format == "json");
    commands::cast::set_agent_timeout(cli.agent_timeout);
    commands::cast::set_fallback(cli.fallback.clone());
    let db = cli.db;
    match cli.command {
        Command::Casts(args) => commands::inspect::casts(&existing_db(db.as_deref())?, args.json),
        Command::Show(args) => commands::inspect::show(&existing_db(db.as_deref())?, &args),
        Command::Verify(args) => commands::verify::run(&existing_db(db.as_deref())?, &args),
        Command::Export(args) => commands::transfer::export(&existing_db(db.as_deref())?, &args),
        Command::Replay(args) => commands::projections::replay(&existing_db(db.as_deref())?, &args),
        Command::Import(args) => commands::transfer::import(&db_path(db.as_deref()), &args),
        Command::Bench(bench) => commands::bench::run(db.as_deref().filter(|_| db_on_line), bench),
        Command::Run(args) => commands::cast::run(&db_path(db.as_deref()), &args),
        Command::Refine(args) => commands::cast::refine(&existing_db(db.as_deref())?, &args),
        Command::Continue(args) => commands::cast::finalize(&existing_db(db.as_deref())?, &args),
        Command::Abort(args) => commands::cast::abort(&existing_db(db.as_deref())?, &args),
        Command::Revive(args) => commands::cast::revive(&existing_db(db.as_deref())?, &args),
        Command::Resume(args) => commands::cast::resume(&existing_db(db.as_deref())?, &args),
        Command::Steer(args) => commands::cast::steer(&existing_db(db.as_deref())?, &args),
        Command::State(args) => commands::cast::state(&existing_db(db.as_deref())?, &args),
        Command::Recast(args) => commands::fork::recast(&existing_db(db.as_deref())?, &args),
        Command::Diff(args) => commands::diff::diff(&existing_db(db.as_deref())?, &args),
        Command::Mark(args) => commands::fork::mark(&existing_db(db.as_deref())?, &args),
        Command::Prompt(args) => commands::prompts::prompt(&existing_db(db.as_deref())?, &args),
        Command::Audit(args) => commands::prompts::audit(&existing_db(db.as_deref())?, &args),
        Command::Claims(args) => commands::claims::run(&existing_db(db.as_deref())?, &args),
        Command::Engage(args) => commands::engage::run(&db_path(db.as_deref()), &args),
        Command::EngageScorecard(args) => commands::engage::scorecard(&args),
        Command::EngageSchedule(args) => commands::engage::schedule(&args),
    }
}

fn db_path(db: Option<&Path>) -> PathBuf {
    db.map_or_else(|| PathBuf::from(DEFAULT_DB), Path::to_path_buf)
}

/// The database for a command that only reads: it must exist already.
fn existing_db(db: Option<&Path>) -> Result<PathBuf, CliError> {
    let path = db_path(db);
    if path.exists() {
        Ok(path)
    } else {
        Err(CliError::user(format!(
            "no castlog database at {}: run a cast first, or point --db (or CASTLOG_DB) at one",
            path.display()
        )))
    }
}
