//! Commands that start or feed a cast: run, refine, continue, abort, revive, resume, steer, and
//! `state` to look at one.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use castlog_core::env::Clock;
use castlog_core::id::{CastId, Seq};
use castlog_core::input::Input;
use castlog_core::machine::CastState;
use castlog_core::machine::decide::started_event;
use castlog_events::chain::loadout_hash;
use castlog_events::{Database, EventLog};
use castlog_replay::agent::{Agent, CommandAgent, ScriptedAgent, command_argv};
use castlog_replay::clock::SystemClock;
use castlog_replay::driver::{Driver, Stop};
use castlog_replay::openai::{self, OpenAiAgent};
use castlog_replay::recorded::RecordedAgent;
use castlog_replay::retry::Retrier;
use serde_json::json;

use crate::args::{AbortArgs, CastAgentArgs, PostArgs, RefineArgs, RunArgs, StateArgs, SteerArgs};
use crate::error::CliError;
use crate::output;
use crate::progress::Tail;

/// How long a `cmd:` agent may take for one turn unless `--agent-timeout` says.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(600);

/// How long an `openai:` agent may take for one request unless `--agent-timeout` says.
const OPENAI_TIMEOUT: Duration = Duration::from_secs(120);

pub(crate) fn cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

/// The directory a cast's utilities run in: the working directory its `cast_started` records
/// (`run --workdir`), or the nearest recast's own (`recast --workdir`), else the current
/// directory. The built-in Ignore-Artifacts edits the ignore file there and nowhere else.
pub(crate) fn cast_cwd(log: &(impl EventLog + ?Sized), cast: &CastId) -> PathBuf {
    let mut chain = vec![cast.clone()];
    chain.extend(castlog_events::log::ancestors(log, cast).unwrap_or_default());
    for link in &chain {
        let first = log
            .read(link, Seq::FIRST, Some(Seq::FIRST))
            .ok()
            .and_then(|first| first.first().and_then(|r| r.event().ok()));
        match first {
            Some(castlog_core::event::Event::CastForked(forked)) => {
                if let Some(dir) = forked.workdir {
                    return PathBuf::from(dir);
                }
            }
            Some(castlog_core::event::Event::CastStarted(started)) => {
                return started.workdir.map_or_else(cwd, PathBuf::from);
            }
            _ => break,
        }
    }
    cwd()
}

/// Builds the agent a SPEC names; `used` answers of a script are skipped. `log` holds the
/// casts `recorded:CAST` answers from (only that agent needs it); `cast` is the cast about to be
/// driven on, when it already exists (a recorded agent skips the answers it holds). `globals`
/// say how agents run (the launcher starts a `cmd:` agent's program and scrubs what an agent
/// answers).
pub(crate) fn agent(
    spec: &str,
    used: usize,
    log: Option<&Database>,
    cast: Option<&CastId>,
    globals: &crate::globals::Globals,
) -> Result<Box<dyn Agent>, CliError> {
    if !spec.starts_with("recorded:") && globals.fallback.is_some() {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            crate::output::to_stderr(format_args!(
                "note: --fallback is used only by recorded:CAST agents; {spec} answers by itself"
            ));
        });
    }
    agent_spec(spec, used, log, cast, globals)
}

fn agent_spec(
    spec: &str,
    used: usize,
    log: Option<&Database>,
    cast: Option<&CastId>,
    globals: &crate::globals::Globals,
) -> Result<Box<dyn Agent>, CliError> {
    if let Some(file) = spec.strip_prefix("scripted:") {
        let agent = ScriptedAgent::open(Path::new(file), used)
            .map_err(|e| CliError::user(e.to_string()))?;
        // A cast under way goes on only with the script that answered it so far.
        if let (Some(log), Some(cast)) = (log, cast) {
            agent
                .check_answered(log, cast)
                .map_err(|e| CliError::user(e.to_string()))?;
        }
        return Ok(Box::new(agent.with_attempts(globals.retry.attempts)));
    }
    if let Some(rest) = spec.strip_prefix("cmd:") {
        let argv = command_argv(rest);
        if argv.is_empty() {
            return Err(CliError::user(
                "cmd: needs a program, e.g. cmd:ollama run llama3",
            ));
        }
        castlog_replay::process::locate(&argv[0], &cwd()).map_err(|e| {
            CliError::user(format!(
                "cmd: cannot run the agent: {e}; give an installed program, e.g. cmd:ollama run llama3"
            ))
        })?;
        let timeout = globals.agent_timeout_or(COMMAND_TIMEOUT);
        let agent = CommandAgent::new(argv, cwd(), timeout).with_launcher(globals.launcher.clone());
        return Ok(Box::new(if globals.agent_json {
            agent.with_json_messages()
        } else {
            agent
        }));
    }
    if let Some(rest) = spec.strip_prefix("openai:") {
        let (base, model) = openai::parse_spec(rest)?;
        let agent = OpenAiAgent::new(
            &base,
            &model,
            openai::api_key_from_env(),
            globals.agent_timeout_or(OPENAI_TIMEOUT),
        )?
        .with_redactor(globals.launcher.redactor().clone())
        .with_retries(Retrier::new(globals.retry.clone(), globals.retry_seed))
        .with_structured(globals.structured);
        return Ok(Box::new(agent));
    }
    if let Some(source) = spec.strip_prefix("recorded:") {
        if source.trim().is_empty() {
            return Err(CliError::user(
                "recorded: needs the cast to answer from, e.g. recorded:cast-2025-01-01T10-00-00",
            ));
        }
        let log = log.ok_or_else(|| CliError::user(
            "recorded: answers from a cast in the database; this command has none to read (use it with run, resume, refine, recast)",
        ))?;
        let source = super::inspect::head_of(log, source.trim())?.cast;
        let mut agent = RecordedAgent::from_log(log, &source)?;
        if let Some(cast) = cast {
            agent.skip_answered(log, cast)?;
        }
        let fallback = globals.fallback.clone();
        if let Some(fallback) = fallback {
            if fallback.starts_with("recorded:") {
                return Err(CliError::user(
                    "--fallback must be a live agent, not recorded:",
                ));
            }
            let live = agent_spec(&fallback, 0, Some(log), cast, globals)?;
            return Ok(Box::new(agent.with_fallback(live)));
        }
        return Ok(Box::new(agent));
    }
    Err(CliError::user(format!(
        "unknown agent spec {spec:?}: use scripted:FILE, cmd:PROGRAM ARGS..., openai:BASE_URL#MODEL or recorded:CAST"
    )))
}

/// The agents of a parallel cast's lanes: each lane gets a fresh agent from the same SPEC.
/// A script answers a lane from its lines that name it (`"lane": NAME`); a `cmd:` program
/// is told the lane in `CASTLOG_LANE` and the lane's cast in `CASTLOG_CAST`.
pub(crate) fn lane_agents<'a>(
    spec: &'a str,
    globals: &'a crate::globals::Globals,
) -> castlog_replay::driver::LaneAgents<'a> {
    Box::new(move |lane, used| {
        let failed = |message: String| castlog_replay::driver::DriveError::LaneAgent {
            lane: lane.cast.clone(),
            message,
        };
        if let Some(file) = spec.strip_prefix("scripted:") {
            let agent = ScriptedAgent::open_lane(Path::new(file), &lane.name, used)
                .map_err(|e| failed(e.to_string()))?;
            return Ok(Box::new(agent.with_attempts(globals.retry.attempts)) as Box<dyn Agent>);
        }
        if let Some(rest) = spec.strip_prefix("cmd:") {
            let timeout = globals.agent_timeout_or(COMMAND_TIMEOUT);
            let agent = CommandAgent::new(command_argv(rest), cwd(), timeout)
                .with_launcher(globals.launcher.clone())
                .with_env("CASTLOG_LANE", &lane.name)
                .with_env("CASTLOG_CAST", lane.cast.as_str());
            return Ok(Box::new(if globals.agent_json {
                agent.with_json_messages()
            } else {
                agent
            }) as Box<dyn Agent>);
        }
        if spec.starts_with("recorded:") {
            return Err(failed(
                "a recorded: agent does not answer parallel lanes; use scripted:, cmd: or openai:"
                    .into(),
            ));
        }
        agent_spec(spec, used, None, None, globals).map_err(|e| failed(e.message))
    })
}

/// The agent for driving `state`'s cast: for a lane (driven on its own by `resume`, `revive`
/// or a recast of it), the lane's agent as its parent's drive would make it; else [`agent`].
pub(crate) fn agent_for(
    spec: &str,
    used: usize,
    log: &Database,
    state: &CastState,
    globals: &crate::globals::Globals,
) -> Result<Box<dyn Agent>, CliError> {
    match &state.lane {
        Some(lane) if !spec.starts_with("recorded:") => {
            let plan = castlog_core::event::LanePlan {
                name: lane.name.clone(),
                cast: state.cast.clone(),
                items: lane.items.clone(),
            };
            lane_agents(spec, globals)(&plan, used).map_err(CliError::from)
        }
        _ => agent(spec, used, Some(log), Some(&state.cast), globals),
    }
}

pub(crate) fn new_cast_id(log: &Database, clock: &SystemClock) -> Result<CastId, CliError> {
    let stamp = output::timestamp(clock.now_ms())
        .replace([':', '.'], "-")
        .trim_end_matches('Z')
        .to_owned();
    let base = format!("cast-{stamp}");
    let mut candidate = CastId::new(base.as_str());
    let mut n = 1;
    while log.head(&candidate)?.is_some() {
        n += 1;
        candidate = CastId::new(format!("{base}-{n}"));
    }
    Ok(candidate)
}

/// Prints what happened from `from` on and the final status; with `--exit-status`, a cast
/// that ended failed or waits is told by the exit code too.
pub(crate) fn report(
    log: &Database,
    tail: &Tail<'_>,
    cast: &CastId,
    stop: &Stop,
    json: bool,
    globals: &crate::globals::Globals,
) -> Result<(), CliError> {
    printed(log, tail, cast, stop, json)?;
    if globals.exit_status {
        return crate::error::exit_status(cast, stop.status);
    }
    Ok(())
}

fn printed(
    log: &Database,
    tail: &Tail<'_>,
    cast: &CastId,
    stop: &Stop,
    json: bool,
) -> Result<(), CliError> {
    let head = log
        .head(cast)?
        .ok_or_else(|| CliError::internal("the cast vanished"))?;
    if json {
        return output::json(&json!({
            "cast": cast,
            "status": stop.status.as_str(),
            "events": head.seq.get(),
            "head": head.hash,
            "message": stop.message,
        }));
    }
    tail.finish()?;
    crate::say!("cast {cast}: {}", stop.status.as_str());
    if let Some(message) = &stop.message {
        crate::say!("{message}");
    }
    Ok(())
}

/// `castlog run`.
pub fn run(db: &Path, args: &RunArgs, globals: &crate::globals::Globals) -> Result<(), CliError> {
    let here = cwd();
    let project = args.workdir.as_deref().unwrap_or(&here);
    let config = super::config::load(super::config::Source::of(
        args.config.as_deref(),
        args.layer.as_deref(),
        project,
    ))?;
    let mut loadout = config.resolve(args.loadout.as_deref())?;
    // A built-in utility's program (jj, git) and a shipped script (with its hash, which the
    // frozen loadout keeps) must be at hand before anything is recorded.
    castlog_replay::utility::check_programs(&loadout).map_err(CliError::from)?;
    let named = format!("loadout {:?}", loadout.name);
    castlog_replay::utility::shipped::resolve(&mut loadout, &globals.launcher)
        .map_err(|e| CliError::from(e).context(named))?;
    let sender = sender(&args.posting, globals)?;
    // A policy file is read and checked before anything is recorded.
    let (policy, policy_document) = match &args.policy {
        Some(arg) => super::placement::recorded_policy(arg)?,
        None => (config.policy(), None),
    };
    // Check the agent before anything is recorded; only `recorded:` reads the database.
    let early = if args.agent.starts_with("recorded:") {
        None
    } else {
        Some(agent(&args.agent, 0, None, None, globals)?)
    };
    let log = super::open_or_create(db)?;
    log.prepare_for_steps();
    let mut agent = match early {
        Some(agent) => agent,
        None => agent(&args.agent, 0, Some(&log), None, globals)?,
    };
    let clock = SystemClock;
    let cast = match &args.cast {
        Some(id) => super::chosen_cast(&log, id)?,
        None => new_cast_id(&log, &clock)?,
    };
    let mut started = started_event(
        cast.clone(),
        &loadout,
        loadout_hash(&loadout.to_json()),
        args.task.clone(),
        policy,
        Some(config.recorded),
    );
    started.policy_document = policy_document;
    let mut utilities_in = cwd();
    if let Some(dir) = &args.workdir {
        let workdir =
            castlog_replay::tools::Workdir::open(dir).map_err(|e| CliError::user(e.to_string()))?;
        started.workdir = Some(workdir.root().display().to_string());
        utilities_in = workdir.root().to_path_buf();
    }
    globals.launcher.record_under(db, &cast);
    let tail = Rc::new(Tail::new(&log, &cast, Seq::FIRST));
    let hooks;
    let stop = {
        let mut driver = Driver::start(&log, &clock, started, &utilities_in)?;
        driver.launch_with(globals.launcher.clone());
        driver.lanes_with(lane_agents(&args.agent, globals));
        crate::progress::watch_lanes(&mut driver, args.json);
        if let Some(sender) = sender {
            driver.post_with(sender);
        }
        let live = (!args.json).then(|| Rc::clone(&tail));
        let stream = super::otlp::Stream::of(db, &cast, globals);
        // The cast exists now (`cast_started` is recorded): its sinks are told from here on.
        hooks = super::eventing::Hooks::of(db, &log, &cast, Some(config.config.eventing));
        let waker = hooks.as_ref().map(super::eventing::Hooks::waker);
        crate::progress::watch(&mut driver, agent.as_mut(), args.json, live, stream, waker);
        // The cast exists from here on: an error names it (its id may have been generated).
        driver
            .drive(agent.as_mut())
            .map_err(|e| CliError::from(e).context(format!("cast {cast}")))?
    };
    drop(hooks);
    report(&log, &tail, &cast, &stop, args.json, globals)
}

/// The sender `--post --sender SPEC` names; `None` is a dry run. Checked before anything is
/// recorded. No config value can turn posting on: only `--post` does.
pub(crate) fn sender(
    posting: &PostArgs,
    globals: &crate::globals::Globals,
) -> Result<Option<Box<dyn castlog_replay::sender::Sender>>, CliError> {
    match (&posting.sender, posting.post) {
        (None, true) => Err(CliError::user(
            "--post needs --sender SPEC: cmd:PROGRAM ARGS..., file:DIR or webhook:URL",
        )),
        (Some(spec), true) => Ok(Some(castlog_replay::sender::from_spec(
            spec,
            &cwd(),
            &globals.launcher,
        )?)),
        // Without --post nothing reaches a sender, whatever --sender says: say so.
        (Some(spec), false) => {
            crate::output::to_stderr(format_args!(
                "note: dry run: --sender {spec} is used only with --post"
            ));
            Ok(None)
        }
        (None, false) => Ok(None),
    }
}

/// Opens a cast, applies `input`, and drives on when an agent is given (`serve` records a
/// page's refinement or continue through this too).
pub(crate) fn feed(
    db: &Path,
    cast: &str,
    input: &Input,
    spec: Option<&str>,
    posting: &PostArgs,
    json: bool,
    globals: &crate::globals::Globals,
) -> Result<(), CliError> {
    let sender = sender(posting, globals)?;
    let log = super::open(db)?;
    log.prepare_for_steps();
    let clock = SystemClock;
    let cast = CastId::new(cast);
    globals.launcher.record_under(db, &cast);
    let mut driver = Driver::open(&log, &clock, &cast, &cast_cwd(&log, &cast))?;
    driver.launch_with(globals.launcher.clone());
    if let Some(sender) = sender {
        driver.post_with(sender);
    }
    // What the cast's sinks have not taken yet goes now, and whatever this command records.
    let hooks = super::eventing::Hooks::of(db, &log, &cast, None);
    let tail = Rc::new(Tail::new(&log, &cast, driver.state.head.next()));
    // The agent is checked before the input is recorded: a mistyped SPEC must not leave the
    // cast moved on with nobody to answer it. Recording the input adds no answer, so the
    // answers already used are the same before and after.
    let agent = spec
        .map(|spec| agent_for(spec, driver.answers_used, &log, &driver.state, globals))
        .transpose()?;
    driver.apply(input)?;
    let stop = match agent {
        Some(mut agent) => {
            if let Some(spec) = spec {
                driver.lanes_with(lane_agents(spec, globals));
                crate::progress::watch_lanes(&mut driver, json);
            }
            let live = (!json).then(|| Rc::clone(&tail));
            let stream = super::otlp::Stream::of(db, &cast, globals);
            let waker = hooks.as_ref().map(super::eventing::Hooks::waker);
            crate::progress::watch(&mut driver, agent.as_mut(), json, live, stream, waker);
            let stop = driver.drive(agent.as_mut())?;
            drop(driver);
            stop
        }
        None => {
            driver.hold_unsent()?;
            // A cast paused in the run queue is a worker's to drive on once it is runnable.
            let runnable = matches!(
                driver.state.status,
                castlog_core::machine::Status::Running
                    | castlog_core::machine::Status::AwaitingAgent
            );
            let queued = super::submit::wake(&log, &cast, runnable)?;
            Stop {
                status: driver.state.status,
                message: if queued {
                    Some("queued again: a worker drives it on".to_owned())
                } else {
                    (driver.state.status == castlog_core::machine::Status::AwaitingAgent).then(|| {
                format!(
                    "the next prompt is recorded; `castlog resume {cast} --agent SPEC` sends it to an agent"
                )
            })
                },
            }
        }
    };
    drop(hooks);
    report(&log, &tail, &cast, &stop, json, globals)
}

/// A person's message must say something: an empty one is a slip of the shell, not a turn.
fn said(what: &str, text: &str) -> Result<(), CliError> {
    if text.trim().is_empty() {
        return Err(CliError::user(format!(
            "the {what} is empty: say what the next prompt should take into account"
        )));
    }
    Ok(())
}

/// `castlog refine`.
pub fn refine(
    db: &Path,
    args: &RefineArgs,
    globals: &crate::globals::Globals,
) -> Result<(), CliError> {
    said("refinement", &args.text)?;
    let input = Input::UserRefined {
        text: args.text.clone(),
        origin: None,
    };
    feed(
        db,
        &args.cast,
        &input,
        args.agent.as_deref(),
        &PostArgs::default(),
        args.json,
        globals,
    )
}

/// `castlog continue`.
pub fn finalize(
    db: &Path,
    args: &CastAgentArgs,
    globals: &crate::globals::Globals,
) -> Result<(), CliError> {
    feed(
        db,
        &args.cast,
        &Input::Continue { origin: None },
        args.agent.as_deref(),
        &args.posting,
        args.json,
        globals,
    )
}

/// `castlog abort`.
pub fn abort(
    db: &Path,
    args: &AbortArgs,
    globals: &crate::globals::Globals,
) -> Result<(), CliError> {
    let input = Input::Abort {
        reason: args.reason.clone(),
    };
    feed(
        db,
        &args.cast,
        &input,
        None,
        &PostArgs::default(),
        args.json,
        globals,
    )?;
    // A parent's lanes stop with it.
    let log = super::open(db)?;
    let cast = CastId::new(args.cast.as_str());
    let aborted = castlog_replay::driver::abort_lanes(
        &log,
        &SystemClock,
        &cast,
        &args.reason,
        &cast_cwd(&log, &cast),
    )?;
    if !aborted.is_empty() && !args.json {
        crate::say!(
            "aborted its lanes: {}",
            aborted
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// `castlog revive`.
pub fn revive(
    db: &Path,
    args: &CastAgentArgs,
    globals: &crate::globals::Globals,
) -> Result<(), CliError> {
    feed(
        db,
        &args.cast,
        &Input::Revive,
        args.agent.as_deref(),
        &args.posting,
        args.json,
        globals,
    )
}

/// `castlog resume`.
pub fn resume(
    db: &Path,
    args: &CastAgentArgs,
    globals: &crate::globals::Globals,
) -> Result<(), CliError> {
    if args.agent.is_none() {
        // Resuming records a re-dispatch of the unanswered prompt; without an agent it would
        // be recorded as sent when nothing was.
        return Err(CliError::user(format!(
            "resume sends the unanswered prompt again and needs an agent: `castlog resume {} --agent SPEC` (scripted:FILE, cmd:PROGRAM ..., openai:BASE_URL#MODEL or recorded:CAST)",
            args.cast
        )));
    }
    // A program still at work for this cast (another castlog drives it, or one killed a moment
    // ago has not been cleaned up yet) would be asked the same prompt a second time.
    let running = castlog_replay::process::running_children(db, &CastId::new(args.cast.as_str()));
    if let Some(first) = running.first() {
        return Err(CliError::user(format!(
            "cast {} is still at work: its agent or utility `{}` (pid {}) is running; wait for it to end, or stop the castlog that runs it (or that process), then resume",
            args.cast, first.program, first.pid
        )));
    }
    feed(
        db,
        &args.cast,
        &Input::Resume,
        args.agent.as_deref(),
        &args.posting,
        args.json,
        globals,
    )
}

/// `castlog steer`.
pub fn steer(
    db: &Path,
    args: &SteerArgs,
    globals: &crate::globals::Globals,
) -> Result<(), CliError> {
    said("steering note", &args.text)?;
    let input = Input::Steer {
        text: args.text.clone(),
        locked: args.locked,
        origin: None,
    };
    feed(
        db,
        &args.cast,
        &input,
        None,
        &PostArgs::default(),
        args.json,
        globals,
    )
}

/// The JSON form of a cast's state.
pub fn state_json(state: &CastState) -> serde_json::Value {
    let current = state.current.as_ref();
    let mut value = state_fields(state, current);
    // Only a cast with a price table has a cost (and only it shows one).
    if !state.loadout.prices.is_empty() {
        let usd = |micros: u64| micros as f64 / 1_000_000.0;
        value["cost"] = json!({
            "usd": usd(state.cost_micros),
            "max_usd": state.cost_budget().map(usd),
            "warned": state.cost_warned,
        });
    }
    value
}

fn state_fields(
    state: &CastState,
    current: Option<&castlog_core::machine::Current>,
) -> serde_json::Value {
    json!({
        "cast": state.cast,
        "status": state.status.as_str(),
        "loadout": state.loadout.name,
        "socket": current.map(|c| c.socket.to_string()),
        "visit": current.map(|c| c.visit),
        "item": current.and_then(|c| c.item.as_ref().map(ToString::to_string)),
        "item_label": current.and_then(|c| c.item_label.clone()),
        "phase": current.map(|c| c.phase),
        "data": state.data,
        "cursors": state.cursors,
        "visits": state.visits,
        "attempts": state.attempts,
        "traversals": state.traversals,
        "allowances": state.allowances,
        "rework": state.rework,
        "refinement_turns": state.refinement_turns,
        "usage": state.usage,
        "failure": state.failure,
        "claims": state.claims.values().collect::<Vec<_>>(),
        "scope": state.scope,
        "lanes": state.lanes,
        "lane": state.lane,
        "head": state.head,
    })
}

/// `castlog state`.
pub fn state(db: &Path, args: &StateArgs) -> Result<(), CliError> {
    let log = super::open(db)?;
    let cast = CastId::new(args.cast.as_str());
    let state = match &args.at {
        None => castlog_replay::driver::fold(&log, &cast)?.0,
        Some(at) => {
            let seq = super::inspect::point(&log, &cast, at)?;
            castlog_replay::driver::fold_until(&log, &cast, seq)?.0
        }
    };
    let value = state_json(&state);
    if args.json {
        return output::json(&value);
    }
    crate::say!(
        "cast {} ({}) at seq {}: {}",
        state.cast,
        state.loadout.name,
        state.head,
        state.status.as_str()
    );
    if let Some(c) = &state.current {
        crate::say!(
            "socket {} visit {}{} phase {:?}",
            c.socket,
            c.visit,
            c.item_label
                .as_ref()
                .map(|l| format!(" item {l:?}"))
                .unwrap_or_default(),
            c.phase
        );
    }
    if let Some(f) = &state.failure {
        crate::say!("failed: {}", f.reason);
    }
    if let Some(scope) = &state.scope {
        crate::say!("scope {} at {}", scope.id, scope.cwd);
    }
    crate::say!(
        "tokens {} of {}{}",
        state.usage.total(),
        state.token_budget(),
        if state.budget_warned { " (warned)" } else { "" }
    );
    if !state.loadout.prices.is_empty() {
        crate::say!(
            "cost {}{}{}",
            castlog_core::event::dollars(state.cost_micros),
            state
                .cost_budget()
                .map(|limit| format!(" of {}", castlog_core::event::dollars(limit)))
                .unwrap_or_default(),
            if state.cost_warned { " (warned)" } else { "" }
        );
    }
    if let Some(lane) = &state.lane {
        crate::say!(
            "lane {} of {}, items {}",
            lane.name,
            lane.parent,
            lane.items
                .iter()
                .map(|i| format!("WI-{}", i + 1))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    if let Some(lanes) = &state.lanes {
        for plan in &lanes.plan {
            let joined = lanes
                .joined
                .as_ref()
                .and_then(|j| j.iter().find(|o| o.cast == plan.cast))
                .map_or_else(
                    || "not joined".to_owned(),
                    |o| format!("{} at {}", o.status.as_str(), o.head),
                );
            crate::say!("lane {} ({}): {joined}", plan.name, plan.cast);
        }
    }
    crate::say!(
        "cursors {}",
        serde_json::to_string(&state.cursors).unwrap_or_default()
    );
    crate::say!(
        "visits {}",
        serde_json::to_string(&state.visits).unwrap_or_default()
    );
    for r in &state.rework {
        crate::say!(
            "rework {} -> {} ({}): {}",
            r.source,
            r.target,
            r.item.as_ref().map(ToString::to_string).unwrap_or_default(),
            r.reason
        );
    }
    crate::say!(
        "data {}",
        serde_json::to_string_pretty(&state.data).unwrap_or_default()
    );
    Ok(())
}
