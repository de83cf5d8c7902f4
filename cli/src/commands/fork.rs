//! `recast` and `mark`: forking a cast, and naming points of it.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use castlog_core::id::{CastId, Seq};
use castlog_core::input::Input;
use castlog_core::loadout::load_config;
use castlog_events::{Database, EventLog};
use castlog_replay::clock::SystemClock;
use castlog_replay::driver::{Driver, Stop};
use castlog_replay::recast::{Recast, recast as fork, resolve_boundary};
use castlog_replay::workspace::Workspace;
use serde_json::json;

use crate::args::{MarkArgs, RecastArgs};
use crate::error::CliError;
use crate::output;
use crate::progress::Tail;

/// `castlog recast`.
pub fn recast(
    db: &Path,
    args: &RecastArgs,
    globals: &crate::globals::Globals,
) -> Result<(), CliError> {
    let log = super::open(db)?;
    log.prepare_for_steps();
    let parent = super::inspect::head_of(&log, &args.cast)?.cast;
    let at = resolve_boundary(&log, &parent, &args.at)?;
    let loadout = match &args.config {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                CliError::user(format!("cannot read config {}: {e}", path.display()))
            })?;
            let config =
                load_config(&text).map_err(|e| CliError::from(e).context(path.display()))?;
            let (state, _) = castlog_replay::driver::fold_until(&log, &parent, at)?;
            let mut resolved = config
                .resolve(Some(&state.loadout.name))
                .map_err(|e| CliError::from(e).context(path.display()))?;
            // The child goes on from the socket in flight at the fork point: it must exist.
            if let Some(current) = &state.current
                && resolved.socket(&current.socket).is_none()
            {
                return Err(CliError::user(format!(
                    "{}: loadout {} has no socket {}, which cast {parent} is at by seq {at}; fork before that socket started, or keep it in the config",
                    path.display(),
                    state.loadout.name,
                    current.socket
                )));
            }
            castlog_replay::utility::check_programs(&resolved)
                .map_err(|e| CliError::from(e).context(path.display()))?;
            castlog_replay::utility::shipped::resolve(&mut resolved, &globals.launcher)
                .map_err(|e| CliError::from(e).context(path.display()))?;
            Some(resolved)
        }
    };
    let tools = loadout
        .as_ref()
        .and_then(castlog_core::machine::decide::tool_scopes);
    let loadout = loadout.map(|l| l.to_json());
    let child = match &args.child {
        Some(id) => super::chosen_cast(&log, id)?,
        None => {
            let mut n = 1;
            loop {
                let id = CastId::new(format!("{parent}-recast-{n}"));
                if log.head(&id)?.is_none() {
                    break id;
                }
                n += 1;
            }
        }
    };
    // Kept refinements and continues are applied when the child pauses for a person, which
    // it only reaches when driven (steering notes are applied at once).
    if args.agent.is_none() {
        for seq in &args.keep_inputs {
            let kept = log.read(&parent, Seq(*seq), Some(Seq(*seq)))?;
            if kept
                .first()
                .is_some_and(|r| matches!(r.kind.as_str(), "user_refined" | "finalize_requested"))
            {
                return Err(CliError::user(format!(
                    "--keep-inputs {seq} is a refinement or continue, applied as the new cast is driven: give --agent SPEC too"
                )));
            }
        }
    }
    let workdir = match &args.workdir {
        Some(dir) => Some(materialize(&log, &parent, at, dir)?),
        None => None,
    };
    let sender = super::cast::sender(&args.posting, globals)?;
    // Check the agent before anything is recorded; it is built again for the child below.
    let agent = match &args.agent {
        Some(spec) => Some(super::cast::agent(spec, 0, Some(&log), None, globals)?),
        None => None,
    };
    let clock = SystemClock;
    let plan = Recast {
        parent: parent.clone(),
        at,
        child: child.clone(),
        loadout,
        tools,
        keep: args.keep_inputs.iter().map(|s| Seq(*s)).collect(),
        workdir: workdir.as_ref().map(|d| d.display().to_string()),
    };
    globals.launcher.record_under(db, &child);
    let cwd = workdir.unwrap_or_else(super::cast::cwd);
    let mut driver: Driver<'_, Database> = fork(&log, &clock, &plan, &cwd)?;
    driver.launch_with(globals.launcher.clone());
    if let Some(sender) = sender {
        driver.post_with(sender);
    }
    // A recorded agent must skip what the child already holds (the parent's prefix).
    let mut agent = match (&args.agent, agent) {
        (Some(spec), Some(_)) => Some(super::cast::agent_for(
            spec,
            0,
            &log,
            &driver.state,
            globals,
        )?),
        _ => None,
    };
    let tail = Rc::new(Tail::new(&log, &child, Seq::FIRST));
    let hooks = super::eventing::Hooks::of(db, &log, &child, None);
    let stop = match agent.as_mut() {
        Some(agent) => {
            let live = (!args.json).then(|| Rc::clone(&tail));
            let stream = super::otlp::Stream::of(db, &child, globals);
            let waker = hooks.as_ref().map(super::eventing::Hooks::waker);
            crate::progress::watch(&mut driver, agent.as_mut(), args.json, live, stream, waker);
            let stop = driver.drive(agent.as_mut())?;
            drop(driver);
            stop
        }
        None => {
            driver.hold_unsent()?;
            Stop {
                status: driver.state.status,
                message: Some(format!(
                    "forked from {parent} at seq {at}; `castlog resume {child} --agent SPEC` drives it on"
                )),
            }
        }
    };
    drop(hooks);
    super::cast::report(&log, &tail, &child, &stop, args.json, globals)
}

/// The kinds that record something having run that may have changed files.
const CHANGES_FILES: [&str; 6] = [
    "agent_replied",
    "agent_failed",
    "tool_called",
    "tool_finished",
    "utility_finished",
    "cast_resumed",
];

/// The tree of the files as they were at `at` of `parent`'s history: the last workspace
/// checkpoint at or before it, or the next one when nothing that may change files ran between
/// `at` and it (the driver checkpoints just after the step that completed a socket, so a fork
/// at `SOCKET:VISIT` of the next socket sees the files the completed one left).
fn checkpoint_at(log: &Database, parent: &CastId, at: Seq) -> Result<Option<String>, CliError> {
    let mut tree = None;
    castlog_replay::recast::with_history(log, parent, &mut |records| {
        for record in records {
            let after = record.cast == *parent && record.seq > at;
            let checkpoint = match record.event() {
                Ok(castlog_core::event::Event::WorkspaceCheckpointed(c)) => Some(c.tree),
                _ => None,
            };
            match (after, checkpoint) {
                (false, Some(t)) => tree = Some(t),
                (true, Some(t)) => {
                    tree = Some(t);
                    break;
                }
                // Files change only through what an agent, a tool or a utility did.
                (true, None) if CHANGES_FILES.contains(&record.kind.as_str()) => break,
                (_, None) => {}
            }
        }
    })?;
    Ok(tree)
}

/// Writes the files of the checkpoint at `at` into `dir` (new or empty) and returns it,
/// absolute.
fn materialize(log: &Database, parent: &CastId, at: Seq, dir: &Path) -> Result<PathBuf, CliError> {
    let Some(tree) = checkpoint_at(log, parent, at)? else {
        return Err(CliError::user(format!(
            "--workdir: cast {parent} has no workspace checkpoint at or before seq {at} (checkpoints are recorded when a cast in a git working directory starts and at each socket completion)"
        )));
    };
    let from = super::cast::cast_cwd(log, parent);
    let Some(ws) = Workspace::find(&from) else {
        return Err(CliError::user(format!(
            "--workdir: {} (cast {parent}'s working directory) is no longer in a git repository, which holds its checkpoints",
            from.display()
        )));
    };
    ws.materialize(&tree, dir)
        .map_err(|e| CliError::user(format!("--workdir: {e}")))?;
    dir.canonicalize()
        .map_err(|e| CliError::user(format!("--workdir {}: {e}", dir.display())))
}

/// `castlog mark`.
pub fn mark(db: &Path, args: &MarkArgs) -> Result<(), CliError> {
    let log = super::open(db)?;
    let head = super::inspect::head_of(&log, &args.cast)?;
    let at = args.at.map_or(head.seq, Seq);
    let clock = SystemClock;
    let mut driver = Driver::open(
        &log,
        &clock,
        &head.cast,
        &super::cast::cast_cwd(&log, &head.cast),
    )?;
    driver.apply(&Input::Mark {
        name: args.name.clone(),
        at,
    })?;
    if args.json {
        return output::json(&json!({ "cast": head.cast, "name": args.name, "at": at }));
    }
    crate::say!(
        "cast {}: waypoint {:?} names seq {at}",
        head.cast,
        args.name
    );
    Ok(())
}
