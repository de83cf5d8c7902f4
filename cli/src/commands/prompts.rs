//! `prompt` and `audit`: what was sent, and where every entry went.

use std::ops::ControlFlow;
use std::path::Path;

use castlog_core::id::{CastId, Seq};
use castlog_core::prompt::Message;
use castlog_events::{Database, EventLog};
use castlog_projections::audit::{PlacementAudit, PromptRecord};
use castlog_projections::prompt;
use serde_json::json;

use crate::args::{AuditArgs, PromptArgs};
use crate::error::CliError;
use crate::output;

/// The audit of `cast`, folded as its events are read (they are not kept).
fn audit_of(log: &Database, cast: &str) -> Result<PlacementAudit, CliError> {
    let head = super::inspect::head_of(log, cast)?;
    let mut audit = PlacementAudit::default();
    // A rework reason may name the completion it quotes: read in order.
    let mut decoder = castlog_events::Decoder::new();
    log.scan(&head.cast, Seq::FIRST, &mut |record| {
        if let Ok(event) = decoder.event_in(log, &record) {
            audit.apply(record.seq.get(), &event);
        }
        ControlFlow::Continue(())
    })?;
    Ok(audit)
}

fn messages(log: &Database, cast: &str, record: &PromptRecord) -> Result<Vec<Message>, CliError> {
    let policy = prompt::policy_of(log, &CastId::new(cast))?;
    prompt::messages(log, &policy, &record.hash, &record.placements)
        .map_err(|e| CliError::from(e).context(format!("the prompt of seq {}", record.seq)))
}

/// `castlog prompt CAST SOCKET[:VISIT] [--turn N]`.
pub fn prompt(db: &Path, args: &PromptArgs) -> Result<(), CliError> {
    let log = super::open(db)?;
    let audit = audit_of(&log, &args.cast)?;
    let (socket, visit) = match args.at.split_once(':') {
        Some((s, v)) => {
            let visit: u32 = v.parse().map_err(|_| {
                CliError::user(format!(
                    "{:?} is not SOCKET:VISIT with a numeric visit",
                    args.at
                ))
            })?;
            (s.to_owned(), Some(visit))
        }
        None => (args.at.clone(), None),
    };
    let of_socket: Vec<&PromptRecord> = audit
        .prompts
        .iter()
        .filter(|p| p.socket.as_str() == socket)
        .collect();
    if of_socket.is_empty() {
        return Err(CliError::user(format!(
            "cast {} dispatched no prompt at {socket} (see `castlog audit {}`)",
            args.cast, args.cast
        )));
    }
    let visit = visit.unwrap_or_else(|| of_socket.iter().map(|p| p.visit.get()).max().unwrap_or(1));
    let of_visit: Vec<&&PromptRecord> = of_socket
        .iter()
        .filter(|p| p.visit.get() == visit)
        .collect();
    let record = match args.turn {
        Some(turn) => of_visit.iter().rev().find(|p| p.turn.get() == turn),
        None => of_visit.last(),
    }
    .ok_or_else(|| {
        let turns: Vec<String> = of_visit.iter().map(|p| p.turn.to_string()).collect();
        CliError::user(format!(
            "{socket} visit {visit} has no such prompt; turns recorded: {}",
            if turns.is_empty() {
                "none".to_owned()
            } else {
                turns.join(", ")
            }
        ))
    })?;
    let messages = messages(&log, &args.cast, record)?;
    if args.json {
        return output::json(&json!({
            "messages": messages,
            "placements": record.placements,
            "hash": record.hash,
            "system_hash": record.system_hash,
        }));
    }
    crate::say!(
        "{socket} visit {visit} turn {} (seq {}), prompt {}",
        record.turn,
        record.seq,
        record.hash.short()
    );
    for m in &messages {
        crate::say!("\n── {} ──\n{}", m.role.as_str(), m.content);
    }
    Ok(())
}

/// `castlog audit CAST`.
pub fn audit(db: &Path, args: &AuditArgs) -> Result<(), CliError> {
    let log = super::open(db)?;
    let audit = audit_of(&log, &args.cast)?;
    let findings = if args.lint {
        let text = |digest: &castlog_core::id::Digest| {
            log.get_blob(digest)
                .ok()
                .flatten()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
        };
        audit.lint(&text)
    } else {
        Vec::new()
    };
    // A filter that matches nothing in the cast is a mistyped name, not an empty answer.
    if let Some(socket) = &args.socket
        && !audit.prompts.iter().any(|p| p.socket.as_str() == socket)
    {
        return Err(CliError::user(format!(
            "cast {} has no prompt of socket {socket:?} (see `castlog audit {}`)",
            args.cast, args.cast
        )));
    }
    if let Some(source) = &args.source_type
        && !audit
            .prompts
            .iter()
            .any(|p| p.placements.iter().any(|pl| pl.source_type == *source))
    {
        return Err(CliError::user(format!(
            "no prompt of cast {} places an entry of source type {source:?}",
            args.cast
        )));
    }
    let keep_socket = |s: &str| args.socket.as_deref().is_none_or(|want| want == s);
    let findings: Vec<_> = findings
        .into_iter()
        .filter(|f| keep_socket(f.socket.as_str()))
        .collect();
    // Each prompt's JSON is made as it is printed, never the whole list at once.
    let prompts = || {
        audit
            .prompts
            .iter()
            .filter(|p| keep_socket(p.socket.as_str()))
            .map(|p| {
                let placements: Vec<_> = p
                    .placements
                    .iter()
                    .filter(|pl| {
                        args.source_type
                            .as_deref()
                            .is_none_or(|t| t == pl.source_type)
                    })
                    .collect();
                json!({
                    "seq": p.seq,
                    "socket": p.socket,
                    "visit": p.visit,
                    "turn": p.turn,
                    "hash": p.hash,
                    "system_hash": p.system_hash,
                    "placements": placements,
                })
            })
    };
    if args.json {
        let listed = output::Items::new(prompts());
        return output::json(&output::WithField::new(
            json!({ "findings": findings }),
            "prompts",
            &listed,
        ));
    }
    for p in prompts() {
        crate::say!(
            "{}:{} turn {} (seq {})",
            p["socket"].as_str().unwrap_or(""),
            p["visit"],
            p["turn"],
            p["seq"]
        );
        for pl in p["placements"].as_array().into_iter().flatten() {
            crate::say!(
                "  {:<22} {:<20} L{} {:<9} {:<11} #{:<2} {}",
                pl["entry"].as_str().unwrap_or(""),
                pl["source_type"].as_str().unwrap_or(""),
                pl["layer"],
                pl["role"].as_str().unwrap_or(""),
                pl["destination"].as_str().unwrap_or(""),
                pl["position"],
                pl["rule"].as_str().unwrap_or("")
            );
        }
    }
    for f in &findings {
        crate::say!(
            "{} {}:{} {}: {}",
            f.rule,
            f.socket,
            f.visit,
            f.entry,
            f.message
        );
    }
    if args.lint {
        crate::say!("{} findings", findings.len());
    }
    Ok(())
}
