//! `diff --files`: the file changes each step of a cast made, from its workspace checkpoints
//! (`workspace_checkpointed`): each checkpoint against the one before it, through git (`git
//! diff --name-status` and `--stat` between the two trees) in the repository that holds them.

use castlog_core::event::Event;
use castlog_core::id::CastId;
use castlog_events::Database;
use castlog_replay::workspace::Workspace;
use castlog_viewer::files::{CastFiles, StepFiles};
use serde_json::{Value, json};

use crate::error::CliError;

/// One checkpoint of a cast's history.
struct Checkpoint {
    socket: String,
    visit: u32,
    start: bool,
    tree: String,
}

fn checkpoints(log: &Database, cast: &CastId) -> Result<Vec<Checkpoint>, CliError> {
    let mut out = Vec::new();
    castlog_replay::recast::with_history(log, cast, &mut |records| {
        for record in records {
            if record.kind == "workspace_checkpointed"
                && let Ok(Event::WorkspaceCheckpointed(c)) = record.event()
            {
                out.push(Checkpoint {
                    socket: c.socket.to_string(),
                    visit: c.visit.get(),
                    start: c.start,
                    tree: c.tree,
                });
            }
        }
    })?;
    Ok(out)
}

/// The repository holding a cast's checkpoints: its working directory's, or an ancestor's
/// (a recast's `--workdir` is a plain directory filled from the parent's).
fn workspace(log: &Database, cast: &CastId) -> Option<Workspace> {
    let mut chain = vec![cast.clone()];
    chain.extend(castlog_events::log::ancestors(log, cast).unwrap_or_default());
    chain
        .iter()
        .find_map(|c| Workspace::find(&super::cast::cast_cwd(log, c)))
}

/// The checkpoints of one cast, each with the changes since the one before it (the first, the
/// cast's start, has none).
pub fn steps(log: &Database, name: &str) -> Result<CastFiles, CliError> {
    let cast = super::inspect::head_of(log, name)?.cast;
    let points = checkpoints(log, &cast)?;
    if points.is_empty() {
        return Err(CliError::user(format!(
            "cast {cast} has no workspace checkpoints (they are recorded when a cast's working directory is in a git repository)"
        )));
    }
    let Some(ws) = workspace(log, &cast) else {
        return Err(CliError::user(format!(
            "cast {cast}'s working directory is no longer in a git repository, which holds its checkpoints"
        )));
    };
    let git = |e: castlog_replay::workspace::WorkspaceError| CliError::user(e.to_string());
    let mut steps = Vec::new();
    let mut before: Option<&str> = None;
    for point in &points {
        let (changes, stat) = match before {
            Some(prev) => (
                ws.changes(prev, &point.tree).map_err(git)?,
                ws.stat(prev, &point.tree).map_err(git)?,
            ),
            None => (Vec::new(), String::new()),
        };
        steps.push(StepFiles {
            socket: point.socket.clone(),
            visit: point.visit,
            start: point.start,
            tree: point.tree.clone(),
            changes,
            stat,
        });
        before = Some(&point.tree);
    }
    Ok(CastFiles {
        cast: cast.to_string(),
        steps,
    })
}

/// The `--files` document of one cast ([`steps`] as JSON).
pub fn cast_files(log: &Database, name: &str) -> Result<Value, CliError> {
    let files = steps(log, name)?;
    let steps: Vec<Value> = files
        .steps
        .iter()
        .map(|s| {
            json!({
                "socket": s.socket,
                "visit": s.visit,
                "start": s.start,
                "tree": s.tree,
                "changes": s.changes
                    .iter()
                    .map(|(status, path)| json!({"status": status, "path": path}))
                    .collect::<Vec<_>>(),
                "stat": s.stat,
            })
        })
        .collect();
    Ok(json!({ "cast": files.cast, "steps": steps }))
}

/// Prints one cast's `--files` document.
pub fn print(report: &Value) {
    crate::say!("cast {}", report["cast"].as_str().unwrap_or(""));
    for step in report["steps"].as_array().into_iter().flatten() {
        let tree: String = step["tree"]
            .as_str()
            .unwrap_or("")
            .chars()
            .take(12)
            .collect();
        let at = format!(
            "{}:{}",
            step["socket"].as_str().unwrap_or(""),
            step["visit"]
        );
        if step["start"] == true {
            crate::say!("  start    {at} tree {tree}");
            continue;
        }
        let changes = step["changes"].as_array().cloned().unwrap_or_default();
        let files = if changes.len() == 1 { "file" } else { "files" };
        crate::say!("  {at:<12} tree {tree}: {} {files} changed", changes.len());
        for c in &changes {
            crate::say!(
                "    {} {}",
                c["status"].as_str().unwrap_or(""),
                c["path"].as_str().unwrap_or("")
            );
        }
    }
}
