//! The timeline: one human line per recorded event.

use castlog_core::event::{Allowance, BudgetWarning, Contexts, DecodeError, Event, Target};
use castlog_core::syntax::json_name;
use castlog_events::Recorded;
use serde::{Deserialize, Serialize};

/// One line of a cast's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineLine {
    /// The event's seq.
    pub seq: u64,
    /// When it was recorded.
    pub at_ms: u64,
    /// Event kind as stored (`cast_started`, ...).
    pub kind: String,
    /// A short description.
    pub summary: String,
}

impl TimelineLine {
    /// The line for one record, given what it decodes to (read in its cast's order, see
    /// `castlog_events::Decoder`); an event of another context is described by its context
    /// (one of `contexts`), an undecodable payload is described, not hidden.
    pub fn of(
        record: &Recorded,
        decoded: Result<&Event, &DecodeError>,
        contexts: Contexts,
    ) -> Self {
        let summary = match decoded {
            Ok(event) => describe(event),
            Err(err @ DecodeError::UnknownKind { .. }) => {
                match contexts.describe(&record.kind, record.v, &record.payload) {
                    Some(Ok(summary)) => summary,
                    Some(Err(err)) => format!("<{err}>"),
                    None => format!("<{err}>"),
                }
            }
            Err(err) => format!("<{err}>"),
        };
        Self {
            seq: record.seq.get(),
            at_ms: record.at_ms,
            kind: record.kind.clone(),
            summary,
        }
    }
}

fn target(t: &Target) -> String {
    match t {
        Target::Socket(s) => s.to_string(),
        Target::End => "end".into(),
    }
}

fn allowance(a: &Allowance) -> String {
    match a {
        Allowance::Edge { from, to, item } => format!(
            "edge {from} -> {}{}",
            target(to),
            item.as_ref()
                .map(|i| format!(" for {i}"))
                .unwrap_or_default()
        ),
        Allowance::NoAdvance { item } => format!(
            "no-advance guard{}",
            item.as_ref()
                .map(|i| format!(" for {i}"))
                .unwrap_or_default()
        ),
        Allowance::Tokens => "token budget".into(),
        Allowance::Cost => "cost budget".into(),
        Allowance::Repair { socket, item, .. } => format!(
            "repairs of {socket}{}",
            item.as_ref()
                .map(|i| format!(" for {i}"))
                .unwrap_or_default()
        ),
        Allowance::ToolCalls { socket, item, .. } => format!(
            "tool calls of {socket}{}",
            item.as_ref()
                .map(|i| format!(" for {i}"))
                .unwrap_or_default()
        ),
    }
}

/// Cuts `text` to `max` characters on one line, marking the cut.
pub fn excerpt(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut chars = flat.chars();
    let head: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// A short human description of an event.
pub fn describe(event: &Event) -> String {
    match event {
        Event::CastStarted(e) => format!(
            "loadout {} ({}), policy {}: {}",
            e.loadout_name,
            e.loadout_hash.short(),
            e.policy,
            excerpt(&e.request, 60)
        ),
        Event::CastForked(e) => format!(
            "forked from {} at seq {} ({})",
            e.parent,
            e.parent_seq,
            e.parent_hash.short()
        ),
        Event::CastCompleted(e) => format!("completed, {} tokens", e.usage.total()),
        Event::CastFailed(e) => format!("failed: {}", excerpt(&e.reason, 80)),
        Event::CastAborted(e) => format!("aborted: {}", excerpt(&e.reason, 80)),
        Event::CastRevived(e) => format!(
            "revived at {}{}",
            e.socket,
            e.allowance
                .as_ref()
                .map(|a| format!(", extended {}", allowance(a)))
                .unwrap_or_default()
        ),
        Event::CastResumed(e) => {
            if e.after_fork {
                "forked with a prompt in flight, dispatching it again".into()
            } else if e.redispatch {
                "resumed, re-dispatching the unanswered prompt".into()
            } else {
                "resumed".into()
            }
        }
        Event::SocketStarted(e) => format!(
            "{} visit {} ({}){}",
            e.socket,
            e.visit,
            e.materia_label,
            e.item
                .as_ref()
                .map(|i| format!(" item {i}"))
                .unwrap_or_default()
        ),
        Event::PromptHeld(e) => format!(
            "{}:{} turn {} prompt held: not sent, no agent was given (`resume --agent` sends it)",
            e.socket, e.visit, e.turn
        ),
        Event::PromptDispatched(e) => format!(
            "{}:{} turn {} prompt {} ({} entries){}",
            e.socket,
            e.visit,
            e.turn,
            e.prompt_hash.short(),
            e.placements.len(),
            if e.redispatch { ", re-dispatch" } else { "" }
        ),
        Event::AgentReplied(e) if !e.tool_calls.is_empty() => format!(
            "{}:{} turn {}: {} tool call(s){}",
            e.socket,
            e.visit,
            e.turn,
            e.tool_calls.len(),
            if e.text.trim().is_empty() {
                String::new()
            } else {
                format!(": {}", excerpt(&e.text, 50))
            }
        ),
        Event::AgentReplied(e) => format!(
            "{}:{} turn {}: {}{}",
            e.socket,
            e.visit,
            e.turn,
            excerpt(&e.text, 60),
            e.cost
                .as_ref()
                .map(|c| format!(
                    " [{} at {}]",
                    castlog_core::event::dollars(c.micros),
                    c.model
                ))
                .unwrap_or_default()
        ),
        Event::ToolCalled(e) => format!(
            "{}:{} {} {} {}",
            e.socket,
            e.visit,
            e.call,
            e.tool,
            excerpt(&e.arguments.to_string(), 50)
        ),
        Event::ToolFinished(e) => format!(
            "{}{}{}{} in {} ms: {}",
            e.call,
            if e.error { " error" } else { " ok" },
            e.exit.map(|c| format!(", exit {c}")).unwrap_or_default(),
            if e.truncated { ", truncated" } else { "" },
            e.duration_ms,
            excerpt(&e.output, 50)
        ),
        Event::ToolInterrupted(e) => format!(
            "{} ({}) interrupted: outcome unknown, not run again",
            e.call, e.tool
        ),
        Event::LanesPlanned(e) => format!(
            "{} planned {} lanes ({} at a time): {}",
            e.socket,
            e.lanes.len(),
            e.max_concurrency,
            e.lanes
                .iter()
                .map(|l| format!(
                    "{} [{}]",
                    l.name,
                    l.items
                        .iter()
                        .map(|i| format!("WI-{}", i + 1))
                        .collect::<Vec<_>>()
                        .join(" ")
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Event::LaneStarted(e) => format!(
            "lane {} of {} (forked at seq {}), items {}",
            e.name,
            e.parent,
            e.parent_seq,
            e.items
                .iter()
                .map(|i| format!("WI-{}", i + 1))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Event::LanesJoined(e) => format!(
            "lanes joined: {}",
            e.lanes
                .iter()
                .map(|l| format!(
                    "{} {} at {} {}",
                    l.name,
                    l.status.as_str(),
                    l.head,
                    l.hash.to_hex().chars().take(12).collect::<String>()
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Event::WorkspaceCheckpointed(e) => format!(
            "{}:{} files {}checkpointed as tree {}",
            e.socket,
            e.visit,
            if e.start { "at the start " } else { "" },
            e.tree.chars().take(12).collect::<String>()
        ),
        Event::AgentFailed(e) => format!(
            "{}:{} {} failure: {}",
            e.socket,
            e.visit,
            json_name(&e.class),
            excerpt(&e.message, 60)
        ),
        Event::UtilityFinished(e) => format!(
            "{}:{} exit {}{}",
            e.socket,
            e.visit,
            e.code.map_or_else(|| "none".into(), |c| c.to_string()),
            if e.timed_out { " (timed out)" } else { "" }
        ),
        Event::ScopeActivated(e) => format!(
            "{}:{} scope {}{}",
            e.socket,
            e.visit,
            e.scope
                .as_ref()
                .map_or_else(|| "base".to_owned(), |s| format!("{} at {}", s.id, s.cwd)),
            e.previous
                .as_ref()
                .map(|p| format!(" (was {p})"))
                .unwrap_or_default()
        ),
        Event::MateriaEvent(e) => format!(
            "{}:{} {} {}{}",
            e.socket,
            e.visit,
            e.event["severity"].as_str().unwrap_or("info"),
            e.event["type"].as_str().unwrap_or_default(),
            e.event["message"]
                .as_str()
                .map(|m| format!(": {}", excerpt(m, 60)))
                .unwrap_or_default()
        ),
        Event::RefinementRecorded(e) => format!(
            "{}:{} draft {}: {}",
            e.socket,
            e.visit,
            e.turn,
            excerpt(&e.text, 50)
        ),
        Event::UserRefined(e) => format!("{}:{} user: {}", e.socket, e.visit, excerpt(&e.text, 60)),
        Event::FinalizeRequested(e) => format!("{}:{} finalize requested", e.socket, e.visit),
        Event::OutputRejected(e) => format!(
            "{}:{} output rejected ({}): {}",
            e.socket,
            e.visit,
            if e.repair {
                "repair turn follows"
            } else {
                "no repair left"
            },
            excerpt(&e.issues.join("; "), 60)
        ),
        Event::SocketCompleted(e) => format!(
            "{}:{} completed{}",
            e.socket,
            e.visit,
            match e.satisfied {
                Some(true) => ", satisfied",
                Some(false) => ", not satisfied",
                None => "",
            }
        ),
        Event::DataAssigned(e) => format!("{} = {}", e.path, excerpt(&e.value.to_string(), 60)),
        Event::CursorAdvanced(e) => format!("{}: {} -> {}", e.cursor, e.from, e.to),
        Event::EdgeTaken(e) => format!(
            "{} -> {} ({}, traversal {})",
            e.from,
            target(&e.to),
            json_name(&e.when),
            e.traversal
        ),
        Event::ReworkRouted(e) => format!(
            "rework {} -> {}: {}",
            e.source,
            e.target,
            excerpt(&e.reason, 60)
        ),
        Event::ReworkCleared(e) => format!("rework cleared by {}", e.by),
        Event::DispatchScheduled(e) => format!("{}:{} key {}", e.socket, e.visit, e.key),
        Event::DispatchSkipped(e) => {
            format!("key {} skipped ({})", e.key, json_name(&e.reason))
        }
        Event::AllowanceExhausted(e) if e.allowance == Allowance::Cost => format!(
            "cost budget exhausted ({}/{})",
            castlog_core::event::dollars(e.count),
            castlog_core::event::dollars(e.limit)
        ),
        Event::AllowanceExhausted(e) => format!(
            "{} exhausted ({}/{})",
            allowance(&e.allowance),
            e.count,
            e.limit
        ),
        Event::AllowanceExtended(e) if e.allowance == Allowance::Cost => format!(
            "cost budget extended to {}",
            castlog_core::event::dollars(e.limit)
        ),
        Event::AllowanceExtended(e) => {
            format!("{} extended to {}", allowance(&e.allowance), e.limit)
        }
        Event::BudgetWarning(BudgetWarning {
            cost: Some(cost),
            percent,
            threshold,
            ..
        }) => format!(
            "budget warning: {} of {} cost used ({percent}%, warned at {threshold}%)",
            castlog_core::event::dollars(cost.used_micros),
            castlog_core::event::dollars(cost.limit_micros),
        ),
        Event::BudgetWarning(e) => format!(
            "budget warning: {} of {} tokens used ({}%, warned at {}%)",
            e.used, e.limit, e.percent, e.threshold
        ),
        Event::BudgetRaised(e) => format!(
            "budget raised to {} tokens (was {}, {} used)",
            e.tokens, e.previous, e.used
        ),
        Event::SteeringNoted(e) => format!(
            "{}steering: {}",
            if e.locked { "locked " } else { "" },
            excerpt(&e.text, 60)
        ),
        Event::PostClaimed(e) => format!(
            "claim {} for {} ({}){}",
            e.claim,
            e.destination,
            e.day,
            if e.dry_run { ", dry run" } else { "" }
        ),
        Event::PostStaged(e) => format!("claim {} staged as {}", e.claim, e.message_id),
        Event::PostRefused(e) => format!("claim {} refused: {}", e.claim, e.reason),
        Event::PostResolved(e) => format!(
            "claim {} resolved: {}",
            e.claim,
            match &e.resolution {
                castlog_core::event::Resolution::Staged { message_id } => {
                    format!("staged as message {message_id}")
                }
                castlog_core::event::Resolution::Abandoned => "abandoned".to_owned(),
                castlog_core::event::Resolution::Approved => "approved".to_owned(),
                castlog_core::event::Resolution::Posted => "posted".to_owned(),
                castlog_core::event::Resolution::Declined => "declined".to_owned(),
            }
        ),
        Event::PostResponseRecorded(e) => {
            format!("claim {} was {}", e.claim, e.response.as_str())
        }
        Event::PostResolutionInherited(e) => format!(
            "inherited claim {} is {} in cast {}",
            e.claim, e.status, e.owner
        ),
        Event::WaypointMarked(e) => format!("waypoint {:?} at seq {}", e.name, e.at),
        Event::PostOutcomeUnknown(e) => {
            format!(
                "claim {} pending, outcome unknown: {}",
                e.claim,
                excerpt(&e.reason, 60)
            )
        }
        Event::DayClaimed(e) => {
            format!("{} on {} taken by claim {}", e.destination, e.day, e.claim)
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: conditions, failure classes and skip reasons were shown as Rust names.
    #[test]
    fn an_edge_names_its_condition_as_the_log_does() {
        use castlog_core::event::{EdgeTaken, When};
        use castlog_core::id::SocketId;
        let edge = Event::from(EdgeTaken {
            from: SocketId::new("Socket-4"),
            to: Target::End,
            when: When::NotSatisfied,
            item: None,
            traversal: 2,
        });
        assert_eq!(
            describe(&edge),
            "Socket-4 -> end (not_satisfied, traversal 2)"
        );
    }

    #[test]
    fn excerpt_cuts_and_flattens() {
        assert_eq!(excerpt("a\nb", 10), "a b");
        assert_eq!(excerpt("abcdef", 3), "abc…");
    }
}
