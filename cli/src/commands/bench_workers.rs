//! `bench workers`: casts per second through the run queue as worker processes are added.
//!
//! The agent is a `cmd:` program that sleeps a fixed time per call and answers, so a cast's
//! cost is mostly waiting, as with a model: with the queue not in the way, W workers should
//! finish casts W times as fast as one.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use castlog_core::id::CastId;
use serde::Serialize;

use crate::args::BenchWorkersArgs;
use crate::error::CliError;
use crate::output;

use super::bench_measure::{database, rate};

/// One socket, one call per cast.
const ONE_SOCKET: &str = r#"{
  "activeLoadout": "Bench",
  "loadouts": {
    "Bench": { "entry": "Socket-1", "sockets": { "Socket-1": { "materia": "Answer", "parse": "text" } } }
  },
  "materia": {
    "Answer": { "type": "agent", "tools": "none", "label": "Answer", "prompt": "Answer: {{request}}" }
  }
}"#;

#[derive(Serialize)]
struct Round {
    workers: u32,
    casts: u64,
    wall_s: f64,
    casts_per_s: f64,
    /// `casts_per_s` over `workers` times one worker's (1.0: linear).
    scaling: Option<f64>,
}

#[derive(Serialize)]
struct WorkersFigures {
    agent_sleep_ms: u64,
    backend: &'static str,
    rounds: Vec<Round>,
}

fn written(path: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(path, text)
        .map_err(|e| CliError::user(format!("cannot write {}: {e}", path.display())))
}

/// `castlog bench workers`.
pub fn workers(db: Option<&Path>, args: &BenchWorkersArgs) -> Result<(), CliError> {
    if args.workers.is_empty() || args.workers.contains(&0) || args.casts == 0 {
        return Err(CliError::user(
            "bench workers needs --workers counts of at least 1 and --casts of at least 1",
        ));
    }
    let (scratch, path) = database(db)?;
    let files = super::bench_measure::Scratch::new()?;
    let config = files.file("bench.json");
    written(&config, ONE_SOCKET)?;
    let agent_path = files.file("agent.sh");
    written(
        &agent_path,
        &format!(
            "#!/bin/sh\ncat >/dev/null\nsleep {}\necho ok\n",
            args.sleep_ms as f64 / 1000.0
        ),
    )?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent_path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| CliError::user(format!("cannot make the bench agent runnable: {e}")))?;
    }
    let agent = format!("cmd:{}", agent_path.display());
    let exe = std::env::current_exe()
        .map_err(|e| CliError::internal(format!("cannot find the castlog binary: {e}")))?;
    let log = super::open_or_create(&path)?;
    let loaded = super::config::load(super::config::Source::File(&config))?;
    let stamp = castlog_core::env::Clock::now_ms(&castlog_replay::clock::SystemClock);
    let mut rounds: Vec<Round> = Vec::new();
    for &count in &args.workers {
        for i in 0..args.casts {
            let cast = CastId::new(format!("bench-{stamp}-w{count}-{i}"));
            super::submit::queue_cast(&log, &loaded, None, "bench", &agent, &cast)?;
        }
        let started = Instant::now();
        let children = (0..count)
            .map(|n| {
                Command::new(&exe)
                    .arg("--db")
                    .arg(&path)
                    .args([
                        "worker",
                        "--until-idle",
                        "--poll",
                        "50ms",
                        "--id",
                        &format!("bench-{count}-{n}"),
                    ])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| CliError::internal(format!("cannot start a worker: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        for mut child in children {
            let status = child
                .wait()
                .map_err(|e| CliError::internal(format!("a worker was lost: {e}")))?;
            if !status.success() {
                return Err(CliError::internal(format!(
                    "a bench worker failed ({status})"
                )));
            }
        }
        let wall_s = started.elapsed().as_secs_f64();
        let casts_per_s = rate(args.casts, wall_s);
        let one = if count == 1 {
            Some(casts_per_s)
        } else {
            rounds
                .iter()
                .find(|r| r.workers == 1)
                .map(|r| r.casts_per_s)
        };
        rounds.push(Round {
            workers: count,
            casts: args.casts,
            wall_s,
            casts_per_s,
            scaling: one
                .filter(|one| *one > 0.0)
                .map(|one| casts_per_s / (one * f64::from(count))),
        });
    }
    drop(log);
    drop(scratch);
    output::json(&WorkersFigures {
        agent_sleep_ms: args.sleep_ms,
        backend: if castlog_events::database::is_postgres(&path) {
            "postgres"
        } else {
            "sqlite"
        },
        rounds,
    })
}
