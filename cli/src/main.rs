//! The `castlog` binary: argument parsing, command dispatch, output and exit codes.
#![forbid(unsafe_code)]

mod args;
mod commands;
mod error;
mod globals;
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
        let json = wants_json(&matches);
        Cli::from_arg_matches(&matches).map(|cli| (cli, db_on_line, json))
    });
    let (cli, db_on_line, json) = match parsed {
        Ok(parsed) => parsed,
        Err(err) => {
            // `--help` and `--version` print and succeed; anything else is a usage error, the
            // user's to fix (exit 1, like every other bad input).
            let code = if err.use_stderr() { error::USER } else { 0 };
            if code != 0 && std::env::args_os().any(|a| a == "--json") {
                // The first line of clap's own text, without its `error: ` and styling.
                let rendered = err.render().to_string();
                let first = rendered.lines().next().unwrap_or_default();
                let message = first.strip_prefix("error: ").unwrap_or(first);
                output::error_json(&CliError::user(format!("{message}; see `castlog --help`")));
            }
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
            // A command that printed its JSON document before failing (a `verify` report
            // with problems) has said it all on stdout; any other gets one error document.
            if json && !output::printed_json() {
                output::error_json(&err);
            }
            output::to_stderr(format_args!("{}", err.message));
            ExitCode::from(err.code)
        }
    }
}

/// Whether the command line asks for JSON output (`--json` on the command that runs).
fn wants_json(matches: &clap::ArgMatches) -> bool {
    let mut matches = matches;
    while let Some((_, sub)) = matches.subcommand() {
        matches = sub;
    }
    matches
        .try_get_one::<bool>("json")
        .ok()
        .flatten()
        .copied()
        .unwrap_or(false)
}

fn run(cli: Cli, db_on_line: bool) -> Result<(), CliError> {
    progress::init_tracing();
    progress::set_quiet(cli.quiet);
    // The options of a command that drives casts, given before or after its name.
    let drive = cli.drive.clone().with(cli.command.drive_options());
    for name in &drive.agent.pass_env {
        if !castlog_replay::secrets::DENY_LIST.contains(&name.as_str()) {
            // Most likely a misspelt key name, which would stay withheld.
            output::to_stderr(format_args!(
                "note: --pass-env {name}: {name} is not on the deny list, so programs get it anyway (the README lists the deny list)"
            ));
        }
    }
    // A relative install is taken from the directory castlog was started in.
    let pi_materia = drive
        .pi_materia
        .as_ref()
        .map(|dir| std::env::current_dir().unwrap_or_default().join(dir));
    let globals = globals::Globals {
        launcher: castlog_replay::process::Launcher::new(&drive.agent.pass_env)
            .with_shipped_scripts(pi_materia.as_deref()),
        agent_json: drive.agent.agent_format.as_deref() == Some("json"),
        agent_timeout: drive
            .agent
            .agent_timeout
            .map(std::time::Duration::from_secs),
        fallback: drive.agent.fallback.clone(),
        structured: drive
            .agent
            .structured
            .as_deref()
            .and_then(|s| s.parse().ok())
            .unwrap_or_default(),
        exit_status: drive.exit_status,
        otel_content: drive.trace.otel_content,
        otlp_endpoint: drive.trace.otlp_endpoint.clone(),
        streamed: commands::otlp::Streamed::default(),
        retry: retry_policy(&drive.agent),
        retry_seed: castlog_core::env::Clock::now_ms(&castlog_replay::clock::SystemClock),
    };
    let db = cli.db;
    let anchor = cli.anchor;
    let keeps_anchor = anchor.as_ref().filter(|_| writes(&cli.command));
    if let Some(file) = keeps_anchor {
        commands::anchor::check_before_writing(&db_path(db.as_deref()), file)?;
    }
    // Import writes casts but drives none: it sends no trace.
    let traced = drive
        .trace
        .otlp_endpoint
        .as_deref()
        .filter(|_| writes(&cli.command) && !matches!(cli.command, Command::Import(_)))
        .map(|endpoint| {
            (
                endpoint,
                commands::otlp::heads_before(&db_path(db.as_deref())),
            )
        });
    let result = dispatch(
        cli.command,
        db.as_deref(),
        anchor.as_deref(),
        &globals,
        db_on_line,
    );
    if let Some((endpoint, before)) = &traced {
        // Whatever the command's outcome: a cast that stopped on an error is recorded (and
        // worth tracing) up to there.
        let options = castlog_projections::otlp::TraceOptions {
            content: globals.otel_content,
        };
        commands::otlp::send_moved(
            &db_path(db.as_deref()),
            before,
            endpoint,
            options,
            &globals.streamed,
        );
    }
    if let Some(file) = keeps_anchor {
        // A command that failed half way may still have written (a cast that stopped on an
        // error is recorded up to there): its events are anchored either way.
        let moved = commands::anchor::advance_after_writing(&db_path(db.as_deref()), file);
        result?;
        return moved;
    }
    result
}

/// Whether `command` appends to the log (it then keeps the anchor, when one is given).
fn writes(command: &Command) -> bool {
    match command {
        Command::Run(_)
        | Command::Submit(_)
        | Command::Worker(_)
        | Command::Refine(_)
        | Command::Continue(_)
        | Command::Abort(_)
        | Command::Revive(_)
        | Command::Resume(_)
        | Command::Steer(_)
        | Command::Budget(_)
        | Command::Recast(_)
        | Command::Mark(_)
        | Command::Engage(_)
        | Command::Import(_) => true,
        Command::Claims(args) => args.action.is_some(),
        _ => false,
    }
}

fn dispatch(
    command: Command,
    db: Option<&Path>,
    anchor: Option<&Path>,
    globals: &globals::Globals,
    db_on_line: bool,
) -> Result<(), CliError> {
    match command {
        Command::Casts(args) => commands::inspect::casts(&existing_db(db)?, &args),
        Command::Show(args) => commands::inspect::show(&existing_db(db)?, &args),
        Command::Verify(args) => commands::verify::run(&existing_db(db)?, &args, anchor),
        Command::Anchor(args) => commands::anchor::run(&existing_db(db)?, &args, anchor),
        Command::Export(args) => commands::transfer::export(&existing_db(db)?, &args, globals),
        Command::Replay(args) => commands::projections::replay(&existing_db(db)?, &args),
        Command::Import(args) => commands::transfer::import(&db_path(db), &args),
        Command::Copy(args) => commands::copy::run(&args),
        Command::Bench(bench) => commands::bench::run(db.filter(|_| db_on_line), bench),
        Command::Run(args) => commands::cast::run(&db_path(db), &args, globals),
        Command::Submit(args) => commands::submit::run(&db_path(db), &args, globals),
        Command::Worker(args) => commands::worker::run(&db_path(db), &args, globals),
        Command::Refine(args) => commands::cast::refine(&existing_db(db)?, &args, globals),
        Command::Continue(args) => commands::cast::finalize(&existing_db(db)?, &args, globals),
        Command::Abort(args) => commands::cast::abort(&existing_db(db)?, &args, globals),
        Command::Revive(args) => commands::cast::revive(&existing_db(db)?, &args, globals),
        Command::Resume(args) => commands::cast::resume(&existing_db(db)?, &args, globals),
        Command::Steer(args) => commands::cast::steer(&existing_db(db)?, &args, globals),
        Command::Budget(args) => commands::budget::run(&existing_db(db)?, &args, globals),
        Command::Config(args) => match &args.action {
            args::ConfigAction::Show(show) => commands::config::show(show, &globals.launcher),
        },
        Command::Deliver(args) => commands::eventing::deliver(&existing_db(db)?, &args),
        Command::State(args) => commands::cast::state(&existing_db(db)?, &args),
        Command::Recast(args) => commands::fork::recast(&existing_db(db)?, &args, globals),
        Command::Diff(args) => commands::diff::diff(&existing_db(db)?, &args),
        Command::Mark(args) => commands::fork::mark(&existing_db(db)?, &args),
        Command::Prompt(args) => commands::prompts::prompt(&existing_db(db)?, &args),
        Command::Audit(args) => commands::prompts::audit(&existing_db(db)?, &args),
        Command::Placement(args) => commands::placement::run(&args),
        Command::Claims(args) => commands::claims::run(&existing_db(db)?, &args),
        Command::Engage(args) => commands::engage::run(&db_path(db), &args, globals),
        Command::EngageScorecard(args) => commands::engage::scorecard(&args, globals),
        Command::EngageSchedule(args) => commands::engage::schedule(&args),
        Command::Report(args) => commands::report::run(&existing_db(db)?, &args),
        Command::Serve(args) => commands::serve::run(&existing_db(db)?, &args, globals),
    }
}

fn db_path(db: Option<&Path>) -> PathBuf {
    db.map_or_else(|| PathBuf::from(DEFAULT_DB), Path::to_path_buf)
}

/// The database for a command that only reads: it must exist already (a PostgreSQL
/// database's tables are looked for when it is opened).
fn existing_db(db: Option<&Path>) -> Result<PathBuf, CliError> {
    let path = db_path(db);
    if castlog_events::database::is_postgres(&path) || path.exists() {
        Ok(path)
    } else {
        Err(CliError::user(format!(
            "no castlog database at {}: run a cast first, or point --db (or CASTLOG_DB) at one",
            path.display()
        )))
    }
}

/// The retry policy the agent options give, the defaults where they are silent.
fn retry_policy(cli: &args::AgentOptions) -> castlog_replay::retry::RetryPolicy {
    let default = castlog_replay::retry::RetryPolicy::default();
    let (base, max) = cli.backoff.unwrap_or((default.base, default.max));
    castlog_replay::retry::RetryPolicy {
        attempts: cli.retries.map_or(default.attempts, |r| r + 1),
        base,
        max,
        jitter: cli.jitter.unwrap_or(default.jitter),
    }
}
