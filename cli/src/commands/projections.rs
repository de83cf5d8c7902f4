//! `replay` and `export --artifacts`: read models rebuilt from the log.

use std::path::Path;

use castlog_core::id::{CastId, Seq};

use castlog_events::{Database, EventLog};
use castlog_projections::manifest::{Content, Manifest, prompt_of, text_of};
use castlog_projections::projection::{CatchUp, Projection, catch_up};
use castlog_projections::prompt;
use castlog_projections::views::{CastView, Timeline, Usage};
use serde_json::json;

use crate::args::ReplayArgs;
use crate::error::CliError;
use crate::output;

fn caught<P: Projection>(log: &Database, cast: &CastId) -> Result<(P, CatchUp), CliError> {
    let (p, report) = catch_up::<P>(log, log, cast)?;
    if let Some(warning) = &report.warning {
        crate::output::to_stderr(format_args!("warning: {warning}"));
    }
    Ok((p, report))
}

/// `castlog replay CAST`.
pub fn replay(db: &Path, args: &ReplayArgs) -> Result<(), CliError> {
    let log = super::open(db)?;
    let cast = super::inspect::head_of(&log, &args.cast)?.cast;
    let (view, v) = caught::<CastView>(&log, &cast)?;
    let (usage, u) = caught::<Usage>(&log, &cast)?;
    // Only the manifest's size is printed: it is dropped once counted. The timeline keeps its
    // length only.
    let (timeline_lines, t) = caught::<Timeline>(&log, &cast).map(|(p, c)| (p.lines, c))?;
    let (manifest_entries, m) =
        caught::<Manifest>(&log, &cast).map(|(p, c)| (p.entries.len(), c))?;
    let folds = |c: &CatchUp| json!({ "from": c.from, "folded": c.folded, "warning": c.warning });
    let summary = json!({
        "cast": cast,
        "events": view.events,
        "status": view.status,
        "socket": view.socket,
        "item": view.item,
        "visits": view.visits,
        "prompts": view.prompts,
        "replies": view.replies,
        "completions": view.completions,
        "repairs": view.repairs,
        "reworks": view.reworks,
        "usage": { "input": usage.total.0, "output": usage.total.1, "by_socket": usage.by_socket },
        "timeline_lines": timeline_lines,
        "manifest_entries": manifest_entries,
        "projections": {
            "cast_view": folds(&v), "usage": folds(&u), "timeline": folds(&t), "manifest": folds(&m),
        },
    });
    if args.json {
        return output::json(&summary);
    }
    crate::say!(
        "cast {cast}: {} after {} events; {} prompts, {} replies, {} completions, {} repairs, {} reworks; {} + {} tokens; {} artifacts",
        view.status,
        view.events,
        view.prompts,
        view.replies,
        view.completions,
        view.repairs,
        view.reworks,
        usage.total.0,
        usage.total.1,
        manifest_entries
    );
    Ok(())
}

/// What an artifact's `content` names in the event at `seq` (`of` picks it out), read from
/// the log.
fn named<T>(
    log: &Database,
    cast: &CastId,
    seq: u64,
    path: &str,
    of: impl FnOnce(castlog_core::event::Event) -> Option<T>,
) -> Result<T, CliError> {
    let records = log.read(cast, Seq(seq), Some(Seq(seq)))?;
    // A completion names the reply its output is, which the decoder reads from the log.
    records
        .first()
        .and_then(|r| castlog_events::Decoder::new().event_in(log, r).ok())
        .and_then(of)
        .ok_or_else(|| {
            CliError::integrity(format!(
                "the artifact {path} names seq {seq} of cast {cast}, which does not hold its content: run `castlog verify {cast}`"
            ))
        })
}

/// A tool call's artifact: the call as the agent asked for it (`tool_called` at `seq`) and its
/// outcome (`tool_finished` or `tool_interrupted` at `outcome`), as one pretty JSON document.
/// A call with no outcome recorded (cut off by a crash) says so.
fn tool_call_file(
    log: &Database,
    cast: &CastId,
    seq: u64,
    outcome: Option<u64>,
    path: &str,
) -> Result<String, CliError> {
    use castlog_core::event::Event;
    let called = named(log, cast, seq, path, |event| match event {
        Event::ToolCalled(e) => Some(e),
        _ => None,
    })?;
    let mut doc = json!({
        "call": called.call,
        "tool": called.tool,
        "socket": called.socket,
        "visit": called.visit,
        "turn": called.turn,
        "arguments": called.arguments,
    });
    let ended = match outcome {
        Some(at) => Some(named(log, cast, at, path, |event| match event {
            Event::ToolFinished(e) => Some(Ok(e)),
            Event::ToolInterrupted(e) => Some(Err(e)),
            _ => None,
        })?),
        None => None,
    };
    match ended {
        Some(Ok(f)) => {
            doc["outcome"] = json!(if f.error { "error" } else { "ok" });
            doc["result"] = json!(f.output);
            doc["exit"] = json!(f.exit);
            doc["truncated"] = json!(f.truncated);
            doc["duration_ms"] = json!(f.duration_ms);
        }
        Some(Err(_)) => doc["outcome"] = json!("interrupted"),
        None => doc["outcome"] = json!("unknown"),
    }
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    Ok(text)
}

/// The text an artifact's `content` names, read from the event at `seq`.
fn text(
    log: &Database,
    cast: &CastId,
    content: &Content,
    seq: u64,
    path: &str,
) -> Result<String, CliError> {
    named(log, cast, seq, path, |event| text_of(content, &event))
}

/// `castlog export CAST --artifacts DIR`: the manifest's files, the same bytes on every run.
pub fn artifacts(db: &Path, cast: &str, dir: &Path, json_out: bool) -> Result<(), CliError> {
    let log = super::open(db)?;
    let cast = super::inspect::head_of(&log, cast)?.cast;
    let mut files = write_artifacts(&log, &cast, dir)?;
    // A parent's lanes: one folder each, `lanes/NAME/`, laid out like the parent's.
    let lanes = castlog_replay::driver::fold(&log, &cast)
        .ok()
        .and_then(|(state, _)| state.lanes)
        .map(|l| l.plan)
        .unwrap_or_default();
    for lane in &lanes {
        if log.head(&lane.cast)?.is_some() {
            files += write_artifacts(&log, &lane.cast, &dir.join("lanes").join(&lane.name))?;
        }
    }
    if json_out {
        return output::json(
            &json!({ "cast": cast, "dir": dir.display().to_string(), "files": files }),
        );
    }
    crate::say!("wrote {files} files for cast {cast} into {}", dir.display());
    Ok(())
}

/// Writes the artifacts of one cast (its manifest's entries and `manifest.json`) into `dir`;
/// returns the number of files written.
fn write_artifacts(
    log: &castlog_events::Database,
    cast: &castlog_core::id::CastId,
    dir: &Path,
) -> Result<usize, CliError> {
    let (log, cast) = (log, cast.clone());
    let (manifest, _) = caught::<Manifest>(log, &cast)?;
    // The tool calls' files beside the manifest's, in seq order.
    let mut entries = manifest.entries;
    let mut calls = castlog_projections::manifest::ToolCallEntries::default();
    // Read as it goes: one event at a time.
    log.scan(&cast, Seq::FIRST, &mut |record| {
        calls.push(&record);
        std::ops::ControlFlow::Continue(())
    })?;
    entries.extend(calls.entries);
    entries.sort_by_key(|e| e.seq);
    let policy = prompt::policy_of(log, &cast)?;
    let write = |path: &Path, bytes: &[u8]| -> Result<(), CliError> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| CliError::user(format!("cannot create {}: {e}", parent.display())))?;
        }
        std::fs::write(path, bytes)
            .map_err(|e| CliError::user(format!("cannot write {}: {e}", path.display())))
    };
    for entry in &entries {
        let bytes = match &entry.content {
            Content::Text { seq } => {
                text(log, &cast, &entry.content, *seq, &entry.path)?.into_bytes()
            }
            Content::Json { seq } => {
                let text = text(log, &cast, &entry.content, *seq, &entry.path)?;
                let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
                text.push('\n');
                text.into_bytes()
            }
            Content::Prompt { seq } => {
                let (hash, placements) = named(log, &cast, *seq, &entry.path, |event| {
                    prompt_of(&entry.content, event)
                })?;
                let messages = prompt::messages(log, &policy, &hash, &placements).map_err(|e| {
                    CliError::from(e).context(format!("the prompt of seq {}", entry.seq))
                })?;
                let mut text = format!(
                    "# {} visit {} turn {}\n",
                    entry.socket,
                    entry.visit,
                    entry.turn.unwrap_or(0)
                );
                for m in messages {
                    text.push_str(&format!("\n## {}\n\n{}\n", m.role.as_str(), m.content));
                }
                text.into_bytes()
            }
            Content::ToolCall { seq, outcome } => {
                tool_call_file(log, &cast, *seq, *outcome, &entry.path)?.into_bytes()
            }
        };
        write(&dir.join(&entry.path), &bytes)?;
    }
    let listing: Vec<_> = entries
        .iter()
        .map(|e| json!({ "kind": e.kind, "socket": e.socket, "visit": e.visit, "item": e.item, "turn": e.turn, "path": e.path, "seq": e.seq }))
        .collect();
    let mut text = serde_json::to_string_pretty(&json!({ "cast": cast, "entries": listing }))
        .unwrap_or_default();
    text.push('\n');
    write(&dir.join("manifest.json"), text.as_bytes())?;
    Ok(entries.len() + 1)
}
