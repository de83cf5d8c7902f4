//! `bench posts`: post steps per second with few and with many casts in the database.
//!
//! A post step reads the claims ledger of the whole database (every claim of every cast, for
//! the days its destination holds) and takes the day on the destination's chain; what it must
//! not read is the rest of the other casts. Per size N the bench fills a fresh database with
//! N casts of the `bench synth` workflow (one work item, two tries: no post, so no claim;
//! one cast is driven, the others are copies of its events), then drives P casts of a post
//! workflow (draft → post, a dry run → confirm) through the real driver and times each post
//! step: from the draft's reply to the confirm prompt, which holds the post step (the
//! ledger read, the claim and its routing) and the commits around it. Each measured cast adds
//! one dry-run claim, the same P in every database.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use castlog_core::id::{CastId, Seq};
use castlog_core::loadout::load_config;
use castlog_core::machine::Status;
use castlog_core::machine::decide::started_event;
use castlog_events::chain::loadout_hash;
use castlog_events::{Database, EventLog, Pending, SqliteLog};
use castlog_replay::agent::{Agent, AgentTurn, TurnRequest};
use castlog_replay::clock::SystemClock;
use castlog_replay::driver::Driver;
use serde::Serialize;
use serde_json::json;

use crate::args::{BenchPostsArgs, BenchSynthArgs};
use crate::error::CliError;
use crate::output;

use super::bench_measure::{Scratch, durability, rate};

#[derive(Debug, Serialize)]
struct PostsFigures {
    /// Post casts driven per database.
    posts: u64,
    /// Events of each background cast.
    background_cast_events: u64,
    durability: &'static str,
    runs: Vec<PostsRun>,
    /// `post_steps_per_s` of the last size over the first's (1.0 = no slower).
    last_vs_first: f64,
}

#[derive(Debug, Serialize)]
struct PostsRun {
    /// Casts in the database before the post casts ran.
    casts: u64,
    /// Events in the database before the post casts ran.
    events: u64,
    fill_s: f64,
    /// One over the median post step (steady against the odd slow step).
    post_steps_per_s: f64,
    post_step_ms_median: f64,
    post_step_ms_mean: f64,
    /// Whole post casts (three steps each) per second.
    post_casts_per_s: f64,
}

/// The post workflow: `fixtures/loadouts/post.json` with prompts the bench's agent knows.
fn post_config() -> String {
    json!({
        "activeLoadout": "Announce",
        "loadouts": { "Announce": {
            "entry": "Socket-1",
            "sockets": {
                "Socket-1": {
                    "materia": "Draft", "parse": "text",
                    "assign": { "announcement": "$" },
                    "edges": [{ "when": "always", "to": "Socket-2" }]
                },
                "Socket-2": {
                    "materia": "Announce",
                    "edges": [
                        { "when": "satisfied", "to": "Socket-3" },
                        { "when": "not_satisfied", "to": "end" }
                    ]
                },
                "Socket-3": {
                    "materia": "Confirm", "parse": "json",
                    "edges": [{ "when": "always", "to": "end" }]
                }
            }
        }},
        "materia": {
            "Draft": {
                "type": "agent", "tools": "none", "label": "Draft",
                "prompt": "[posts:draft] Write a one-line announcement for: {{request}}"
            },
            "Announce": {
                "type": "post", "label": "Announce", "destination": "staging",
                "body": "Announcement: {{state.announcement}}"
            },
            "Confirm": {
                "type": "agent", "tools": "readOnly", "label": "Confirm",
                "prompt": "[posts:confirm] Is the announcement right? Say satisfied."
            }
        }
    })
    .to_string()
}

/// Answers the draft and the confirm prompts, and times the post step between them.
#[derive(Debug, Default)]
struct PostAgent {
    /// When the draft's reply was handed back.
    drafted: Option<Instant>,
    /// Seconds of each post step.
    steps: Vec<f64>,
}

impl Agent for PostAgent {
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        let asks = |tag: &str| request.messages.iter().any(|m| m.content.contains(tag));
        if asks("[posts:confirm]") {
            if let Some(at) = self.drafted.take() {
                self.steps.push(at.elapsed().as_secs_f64());
            }
            let text = json!({ "satisfied": true, "context": "reads well" }).to_string();
            return AgentTurn::Reply { text, usage: None };
        }
        if asks("[posts:draft]") {
            self.drafted = Some(Instant::now());
            return AgentTurn::Reply {
                text: "Release 1.2 is out: faster builds.".into(),
                usage: None,
            };
        }
        AgentTurn::Exhausted("the post bench's agent got an unknown prompt".into())
    }
}

/// `castlog bench posts`.
pub fn posts(db: Option<&Path>, args: &BenchPostsArgs) -> Result<(), CliError> {
    if args.posts == 0 || args.casts.is_empty() || args.casts.contains(&0) {
        return Err(CliError::user(
            "--posts and every --casts size must be at least 1",
        ));
    }
    let scratch = Scratch::new()?;
    let mut runs = Vec::new();
    let mut background_cast_events = 0;
    for (i, &casts) in args.casts.iter().enumerate() {
        // A named database is the stem of the kept ones, each made anew.
        let path = match db {
            Some(db) => {
                let mut name = db.as_os_str().to_owned();
                name.push(format!(".casts-{casts}"));
                PathBuf::from(name)
            }
            None => scratch.file(&format!("posts-{i}.db")),
        };
        if path.exists() {
            return Err(CliError::user(format!(
                "{} exists: bench posts makes each database anew; remove it or name another --db",
                path.display()
            )));
        }
        let (run, events) = run_size(&path, casts, args)?;
        background_cast_events = events;
        runs.push(run);
    }
    let first = runs.first().map_or(0.0, |r| r.post_steps_per_s);
    let last = runs.last().map_or(0.0, |r| r.post_steps_per_s);
    output::json(&PostsFigures {
        posts: args.posts,
        background_cast_events,
        durability: durability(args.durability).as_str(),
        runs,
        last_vs_first: if first > 0.0 { last / first } else { 0.0 },
    })
}

/// Fills `path` with `casts` background casts, then drives the post casts; returns the
/// figures and the events of one background cast.
fn run_size(path: &Path, casts: u64, args: &BenchPostsArgs) -> Result<(PostsRun, u64), CliError> {
    let log = Database::Sqlite(SqliteLog::open_with(path, durability(args.durability))?);
    log.prepare_for_steps();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let clock = SystemClock;
    let fill = Instant::now();
    let synth = BenchSynthArgs {
        items: 1,
        rework: 2,
        output_bytes: 200,
        durability: args.durability,
        no_pipeline: false,
        text: crate::args::ReplyTextArg::Words,
        no_pack: false,
        json: true,
    };
    let (template, ..) = super::bench_synth::run_synth(&log, &clock, &cwd, &synth)?;
    let mut decoder = castlog_events::Decoder::new();
    let copies: Vec<Pending> = log
        .read(&template, Seq::FIRST, None)?
        .iter()
        .map(|r| decoder.event(r).map(|e| Pending::new(r.at_ms, &e)))
        .collect::<Result<_, _>>()
        .map_err(|e| CliError::internal(format!("the background cast does not decode: {e}")))?;
    for n in 1..casts {
        log.append(
            &CastId::new(format!("{template}-copy-{n}")),
            Seq::FIRST,
            &copies,
        )?;
    }
    let fill_s = fill.elapsed().as_secs_f64();
    let events = casts * copies.len() as u64;

    let config = load_config(&post_config())
        .map_err(|e| CliError::internal(format!("the post loadout: {e}")))?;
    let loadout = config
        .resolve(None)
        .map_err(|e| CliError::internal(format!("the post loadout: {e}")))?;
    let frozen = loadout_hash(&loadout.to_json());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut agent = PostAgent::default();
    let timer = Instant::now();
    for p in 0..args.posts {
        let cast = CastId::new(format!("bench-post-{nanos}-{p}"));
        let started = started_event(
            cast,
            &loadout,
            frozen,
            "release 1.2".into(),
            "recommended".into(),
            None,
        );
        let mut driver = Driver::start(&log, &clock, started, &cwd)?;
        let stop = driver.drive(&mut agent)?;
        if stop.status != Status::Completed {
            return Err(CliError::internal(format!(
                "a post cast stopped {}: {}",
                stop.status.as_str(),
                stop.message.unwrap_or_default()
            )));
        }
    }
    let wall_s = timer.elapsed().as_secs_f64();
    let mut steps = agent.steps;
    steps.sort_by(f64::total_cmp);
    let total: f64 = steps.iter().sum();
    let median = steps.get(steps.len() / 2).copied().unwrap_or(0.0);
    let run = PostsRun {
        casts,
        events,
        fill_s,
        post_steps_per_s: rate(1, median),
        post_step_ms_median: median * 1e3,
        post_step_ms_mean: total / steps.len().max(1) as f64 * 1e3,
        post_casts_per_s: rate(args.posts, wall_s),
    };
    Ok((run, copies.len() as u64))
}
