//! `castlog submit`: a cast recorded and queued for a worker, and the queue's side of the
//! commands that make a paused cast runnable again.

use std::path::Path;

use castlog_core::env::Clock;
use castlog_core::id::CastId;
use castlog_core::machine::Status;
use castlog_core::machine::decide::started_event;
use castlog_events::chain::loadout_hash;
use castlog_events::{Database, RunQueue};
use castlog_replay::clock::SystemClock;
use castlog_replay::driver::Driver;
use serde_json::json;

use crate::args::SubmitArgs;
use crate::error::CliError;
use crate::output;

/// `castlog submit`: records the cast's start (its first prompt held, sent by the worker
/// that takes it) and its queue row, and returns.
pub fn run(
    db: &Path,
    args: &SubmitArgs,
    globals: &crate::globals::Globals,
) -> Result<(), CliError> {
    if args.agent.starts_with("recorded:") {
        return Err(CliError::user(
            "submit takes a live agent (scripted:, cmd:, openai:); recorded:CAST answers only with run, resume or recast",
        ));
    }
    // A mistyped SPEC or a bad config is refused here, before the database is opened (a
    // worker checks the SPEC again on its own machine).
    super::cast::agent(&args.agent, 0, None, None, globals)?;
    let here = super::cast::cwd();
    let config = super::config::load(super::config::Source::of(
        args.config.as_deref(),
        args.layer.as_deref(),
        &here,
    ))?;
    let mut loadout = config.resolve(args.loadout.as_deref())?;
    castlog_replay::utility::check_programs(&loadout)?;
    // The worker runs the script this machine's install has (it checks the hash).
    let named = format!("loadout {:?}", loadout.name);
    castlog_replay::utility::shipped::resolve(&mut loadout, &globals.launcher)
        .map_err(|e| CliError::from(e).context(named))?;
    let log = super::open_or_create(db)?;
    let cast = match &args.cast {
        Some(id) => super::chosen_cast(&log, id)?,
        None => super::cast::new_cast_id(&log, &SystemClock)?,
    };
    let status = queue_cast(
        &log,
        &config,
        args.loadout.as_deref(),
        &args.task,
        &args.agent,
        &cast,
    )?;
    if args.json {
        return output::json(&json!({
            "cast": cast,
            "state": "queued",
            "status": status.as_str(),
            "agent": args.agent,
        }));
    }
    crate::say!("{cast}");
    Ok(())
}

/// Records the start of `cast` (a new id) of the config's loadout, its first prompt held,
/// and queues it for `agent`; returns the cast's status.
pub(crate) fn queue_cast(
    log: &Database,
    config: &super::config::Loaded,
    loadout: Option<&str>,
    task: &str,
    agent: &str,
    cast: &CastId,
) -> Result<Status, CliError> {
    let (loadout, policy) = (config.resolve(loadout)?, config.policy());
    let clock = SystemClock;
    let started = started_event(
        cast.clone(),
        &loadout,
        loadout_hash(&loadout.to_json()),
        task.to_owned(),
        policy,
        Some(config.recorded.clone()),
    );
    let status = {
        let mut driver = Driver::start(log, &clock, started, &super::cast::cwd())
            .map_err(|e| CliError::from(e).context(format!("cast {cast}")))?;
        driver.hold_unsent()?;
        driver.state.status
    };
    log.submit(cast, agent, clock.now_ms())?;
    Ok(status)
}

/// Queues `cast` again if it waits in the run queue as paused and its status is one a
/// worker can drive on (a person's input made it runnable). Returns whether it did.
pub(crate) fn wake(log: &Database, cast: &CastId, runnable: bool) -> Result<bool, CliError> {
    if !runnable {
        return Ok(false);
    }
    Ok(log.wake(cast, SystemClock.now_ms())?)
}
