//! `bench lanes`: what parallel lanes buy when the model is slow. The lanes fixture's loadout
//! runs with a `cmd:` agent (`fixtures/scripts/lane-agent.sh`) that sleeps per call and plans 8
//! work items in 4 lanes, once with 4 lanes at a time and once with 1, through the real
//! machine, driver, lanes and log; the figure is each run's wall time and their ratio.

use std::path::Path;
use std::time::{Duration, Instant};

use castlog_core::id::CastId;
use castlog_core::loadout::load_config;
use castlog_core::machine::Status;
use castlog_core::machine::decide::started_event;
use castlog_events::chain::loadout_hash;
use castlog_events::{Database, SqliteLog};
use castlog_replay::agent::{Agent, CommandAgent};
use castlog_replay::clock::SystemClock;
use castlog_replay::driver::{DriveError, Driver};
use serde::Serialize;

use crate::args::BenchLanesArgs;
use crate::error::CliError;
use crate::output;

use super::bench_measure::{Scratch, database};

/// The loadout of the fixture (`fixtures/loadouts/lanes.json`).
const CONFIG: &str = include_str!("../../../fixtures/loadouts/lanes.json");
/// The agent of the fixture (`fixtures/scripts/lane-agent.sh`).
const AGENT: &str = include_str!("../../../fixtures/scripts/lane-agent.sh");

#[derive(Debug, Serialize)]
struct LanesFigures {
    work_items: u32,
    lanes: u32,
    sleep_ms: u64,
    /// Agent calls of each run (the plan, per item a build and a check, the narrator).
    agent_calls: u32,
    parallel_wall_s: f64,
    serial_wall_s: f64,
    /// The parallel run's wall time over the serial one's.
    parallel_vs_serial: f64,
}

/// `castlog bench lanes`.
pub fn lanes(db: Option<&Path>, args: &BenchLanesArgs) -> Result<(), CliError> {
    let (_scratch, path) = database(db)?;
    let work = Scratch::new()?;
    let script = work.file("lane-agent.sh");
    std::fs::write(&script, AGENT)
        .map_err(|e| CliError::internal(format!("cannot write the bench agent: {e}")))?;
    let log = Database::Sqlite(SqliteLog::open(&path)?);
    log.prepare_for_steps();
    let parallel = run(&log, &script, work.dir(), 4, args.sleep_ms)?;
    let serial = run(&log, &script, work.dir(), 1, args.sleep_ms)?;
    let figures = LanesFigures {
        work_items: 8,
        lanes: 4,
        sleep_ms: args.sleep_ms,
        agent_calls: 1 + 8 * 2 + 1,
        parallel_wall_s: parallel,
        serial_wall_s: serial,
        parallel_vs_serial: if serial > 0.0 { parallel / serial } else { 0.0 },
    };
    output::json(&figures)
}

/// One cast of the fixture with `concurrency` lanes at a time; its wall time in seconds.
fn run(
    log: &Database,
    script: &Path,
    cwd: &Path,
    concurrency: u32,
    sleep_ms: u64,
) -> Result<f64, CliError> {
    let text = CONFIG.replace(
        "\"maxConcurrency\": 2",
        &format!("\"maxConcurrency\": {concurrency}"),
    );
    let loadout = load_config(&text)
        .and_then(|c| c.resolve(None))
        .map_err(|e| CliError::internal(format!("the bench loadout: {e}")))?;
    let stamp = castlog_core::env::Clock::now_ms(&SystemClock);
    let cast = CastId::new(format!("bench-lanes-{concurrency}-{stamp}"));
    let started = started_event(
        cast,
        &loadout,
        loadout_hash(&loadout.to_json()),
        "a tool in eight parts".into(),
        "recommended".into(),
        None,
    );
    let sleep = format!("{:.3}", Duration::from_millis(sleep_ms).as_secs_f64());
    let agent = move |lane: Option<(&str, &str)>| {
        let mut agent = CommandAgent::new(
            vec!["sh".into(), script.display().to_string()],
            cwd.to_path_buf(),
            Duration::from_secs(600),
        )
        .with_env("LANE_AGENT_SLEEP", &sleep);
        if let Some((name, cast)) = lane {
            agent = agent
                .with_env("CASTLOG_LANE", name)
                .with_env("CASTLOG_CAST", cast);
        }
        agent
    };
    let clock = SystemClock;
    let timer = Instant::now();
    let mut driver = Driver::start(log, &clock, started, cwd)?;
    driver.lanes_with(Box::new(|lane, _| {
        Ok::<Box<dyn Agent>, DriveError>(Box::new(agent(Some((&lane.name, lane.cast.as_str())))))
    }));
    let mut parent = agent(None);
    let stop = driver.drive(&mut parent)?;
    let wall = timer.elapsed().as_secs_f64();
    if stop.status != Status::Completed {
        return Err(CliError::internal(format!(
            "the bench cast ended {}: {}",
            stop.status.as_str(),
            stop.message.unwrap_or_default()
        )));
    }
    Ok(wall)
}
