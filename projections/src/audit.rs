//! `PlacementAudit`: every prompt of a cast with the placement of every entry, and the lint.
//!
//! A pure fold over recorded events. Entry texts live in blobs; the lint asks for them through a
//! lookup function so the fold itself stays free of I/O. [`given`] audits entries given as
//! data by another orchestrator, one prompt (or one turn) at a time.

pub mod given;

use std::collections::{BTreeMap, BTreeSet};

use castlog_core::event::{Destination, Event, Placement, ReworkRouted};
use castlog_core::id::{Digest, ItemKey, SocketId, Turn, Visit};
use castlog_core::prompt::fence::{self, Posing};
use castlog_core::prompt::policy::ESCALATIONS;
use castlog_events::Recorded;
use serde::Serialize;

/// One dispatched prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromptRecord {
    /// The seq of its `prompt_dispatched`.
    pub seq: u64,
    /// Socket whose visit dispatched the prompt.
    pub socket: SocketId,
    /// Visit of that socket (1-based).
    pub visit: Visit,
    /// Turn within the visit (1 for the first prompt, repairs and refinements count on).
    pub turn: Turn,
    /// Work item the visit ran for; `None` outside loops.
    pub item: Option<ItemKey>,
    /// The rendered prompt's blob.
    pub hash: Digest,
    /// The system fold's blob.
    pub system_hash: Option<Digest>,
    /// Whether it repeated an unanswered prompt.
    pub redispatch: bool,
    /// Every entry's placement.
    pub placements: Vec<Placement>,
    /// Rework reasons live for this socket and item when it was rendered.
    #[serde(skip)]
    pub reasons: Vec<String>,
}

/// A lint finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule (`escalation-in-system-fold`, `mutable-in-cached-prefix`, `stacked-mandates`,
    /// `duplicated-reason`, `dropped-entry`, `posing-as-runtime`).
    pub rule: &'static str,
    /// Socket whose prompt the finding is about.
    pub socket: SocketId,
    /// Visit of that socket (1-based).
    pub visit: Visit,
    /// Id of the context entry the rule flags (`rework-1`, `steeringNote-2`, ...).
    pub entry: String,
    /// What the rule found, as a sentence a person can act on.
    pub message: String,
}

/// The prompts of one cast.
#[derive(Debug, Clone, Default)]
pub struct PlacementAudit {
    /// In seq order.
    pub prompts: Vec<PromptRecord>,
    items: BTreeMap<(SocketId, Visit), Option<ItemKey>>,
    rework: Vec<ReworkRouted>,
}

impl PlacementAudit {
    /// Folds a cast's records.
    pub fn fold<'a>(records: impl IntoIterator<Item = &'a Recorded>) -> Self {
        let mut audit = Self::default();
        // A rework reason may name the completion it quotes: read in order.
        let mut decoder = castlog_events::Decoder::new();
        for record in records {
            if let Ok(event) = decoder.event(record) {
                audit.apply(record.seq.get(), &event);
            }
        }
        audit
    }

    /// Applies one event.
    pub fn apply(&mut self, seq: u64, event: &Event) {
        match event {
            Event::SocketStarted(e) => {
                self.items
                    .insert((e.socket.clone(), e.visit), e.item.clone());
            }
            Event::ReworkRouted(e) => self.rework.push(e.clone()),
            Event::ReworkCleared(e) => self.rework.retain(|r| r.item != e.item),
            Event::PromptDispatched(e) => {
                let item = self
                    .items
                    .get(&(e.socket.clone(), e.visit))
                    .cloned()
                    .flatten();
                let reasons = self
                    .rework
                    .iter()
                    .filter(|r| r.target == e.socket && r.item == item)
                    .map(|r| r.reason.clone())
                    .collect();
                self.prompts.push(PromptRecord {
                    seq,
                    socket: e.socket.clone(),
                    visit: e.visit,
                    turn: e.turn,
                    item,
                    hash: e.prompt_hash,
                    system_hash: e.system_hash,
                    redispatch: e.redispatch,
                    placements: e.placements.clone(),
                    reasons,
                });
            }
            _ => {}
        }
    }

    /// Runs the lint. `text` returns an entry body by its blob digest.
    pub fn lint(&self, text: &dyn Fn(&Digest) -> Option<String>) -> Vec<Finding> {
        let mut findings = Vec::new();
        let finding = |p: &PromptRecord, rule, entry: &str, message: String| Finding {
            rule,
            socket: p.socket.clone(),
            visit: p.visit,
            entry: entry.to_owned(),
            message,
        };
        let mut previous: Option<&PromptRecord> = None;
        // Bodies already scanned for runtime markup, and the (socket, visit, entry, body)
        // already reported: a body repeated by every turn of a visit is named once.
        let mut scanned: BTreeMap<Digest, Vec<Posing>> = BTreeMap::new();
        let mut reported: BTreeSet<(&SocketId, Visit, &str, Digest)> = BTreeSet::new();
        for p in &self.prompts {
            for pl in &p.placements {
                let slot = match pl.destination {
                    Destination::SystemFold => Some("system fold"),
                    Destination::Trailing => Some("trailing mandate block"),
                    _ => None,
                };
                if let Some(slot) = slot
                    && reported.insert((&p.socket, p.visit, pl.entry.as_str(), pl.body))
                {
                    let found = scanned.entry(pl.body).or_insert_with(|| {
                        text(&pl.body).map_or_else(Vec::new, |body| fence::posing(&body))
                    });
                    if !found.is_empty() {
                        findings.push(finding(
                            p,
                            "posing-as-runtime",
                            &pl.entry,
                            format!(
                                "{} ({}) places text posing as the runtime in the {slot} at turn {}: {}",
                                pl.entry,
                                pl.source_type,
                                p.turn,
                                described(found)
                            ),
                        ));
                    }
                }
                if pl.destination == Destination::SystemFold
                    && ESCALATIONS.contains(&pl.source_type.as_str())
                {
                    findings.push(finding(
                        p,
                        "escalation-in-system-fold",
                        &pl.entry,
                        format!(
                            "{} ({}) is folded into the system prefix at turn {}, above the whole transcript",
                            pl.entry, pl.source_type, p.turn
                        ),
                    ));
                }
                if pl.destination == Destination::Dropped {
                    findings.push(finding(
                        p,
                        "dropped-entry",
                        &pl.entry,
                        format!(
                            "{} ({}) was not rendered at turn {}",
                            pl.entry, pl.source_type, p.turn
                        ),
                    ));
                }
            }
            let mandates: Vec<&Placement> = p
                .placements
                .iter()
                .filter(|pl| {
                    pl.destination == Destination::Trailing && pl.rule == "trailing:mandate"
                })
                .collect();
            if mandates.len() > 1 {
                let names: Vec<&str> = mandates.iter().map(|m| m.source_type.as_str()).collect();
                findings.push(finding(
                    p,
                    "stacked-mandates",
                    &mandates[1].entry,
                    format!(
                        "{} mandates stacked in the trailing slot at turn {}: {}",
                        mandates.len(),
                        p.turn,
                        names.join(", ")
                    ),
                ));
            }
            for reason in &p.reasons {
                let carriers: Vec<&Placement> = p
                    .placements
                    .iter()
                    .filter(|pl| text(&pl.body).is_some_and(|body| carries(&body, reason)))
                    .collect();
                if carriers.len() > 1 {
                    let names: Vec<&str> = carriers.iter().map(|c| c.entry.as_str()).collect();
                    findings.push(finding(
                        p,
                        "duplicated-reason",
                        &carriers[1].entry,
                        format!(
                            "the rework reason is rendered {} times at turn {}: {}",
                            carriers.len(),
                            p.turn,
                            names.join(", ")
                        ),
                    ));
                }
            }
            if let Some(prev) = previous
                && prev.socket == p.socket
                && prev.visit == p.visit
                && prev.system_hash != p.system_hash
            {
                let fold = |r: &PromptRecord| -> Vec<(String, Digest)> {
                    r.placements
                        .iter()
                        .filter(|pl| pl.destination == Destination::SystemFold)
                        .map(|pl| (pl.entry.clone(), pl.body))
                        .collect()
                };
                let (a, b) = (fold(prev), fold(p));
                let changed = b
                    .iter()
                    .find(|entry| !a.contains(entry))
                    .or_else(|| a.iter().find(|entry| !b.contains(entry)))
                    .map_or_else(|| "?".to_owned(), |(entry, _)| entry.clone());
                findings.push(finding(
                    p,
                    "mutable-in-cached-prefix",
                    &changed,
                    format!(
                        "the system fold changed between turn {} and turn {}: {changed} changed, invalidating the cached prefix",
                        prev.turn, p.turn
                    ),
                ));
            }
            previous = Some(p);
        }
        findings
    }
}

/// What [`fence::posing`] found, as a clause: each distinct piece (the first four), its kind
/// and whether it is inert.
fn described(found: &[Posing]) -> String {
    let mut distinct: Vec<&Posing> = Vec::new();
    for p in found {
        if !distinct.contains(&p) {
            distinct.push(p);
        }
    }
    let mut parts: Vec<String> = distinct
        .iter()
        .take(4)
        .map(|p| {
            let state = match (p.kind, p.escaped) {
                (_, true) => "escaped",
                ("role separator", false) => "escaped when sent to a cmd: agent",
                (_, false) => "not escaped: it reads as the runtime's own",
            };
            format!("`{}` ({}, {state})", p.excerpt, p.kind)
        })
        .collect();
    if distinct.len() > 4 {
        parts.push(format!("and {} more", distinct.len() - 4));
    }
    parts.join(", ")
}

/// Whether `body` carries `reason` (whitespace collapsed, a trailing cut mark ignored), as
/// the reason was recorded or as a fenced prompt renders it.
fn carries(body: &str, reason: &str) -> bool {
    carries_text(body, reason)
        || matches!(fence::fence(fence::VERSION, reason), std::borrow::Cow::Owned(fenced) if carries_text(body, &fenced))
}

fn carries_text(body: &str, reason: &str) -> bool {
    let collapse = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let reason = collapse(reason.trim_end_matches('…'));
    !reason.is_empty() && collapse(body).contains(&reason)
}

#[cfg(test)]
mod tests {
    use castlog_core::event::{
        PromptDispatched, ReworkRouted, SocketCompleted, SocketStarted, quoted_reason,
    };
    use castlog_core::id::{CastId, Digest, MateriaName, Seq, SocketId, Turn, Visit};
    use castlog_events::Pending;
    use castlog_events::record::seal_batch;

    use super::*;

    /// A rework reason that names the completion it quotes reaches the audit of the target's
    /// next prompt, as one written in full does.
    #[test]
    fn a_reason_named_by_its_completion_is_live_for_the_next_prompt() {
        let context = "greet() ignores the user's name";
        let events = [
            Event::from(SocketCompleted {
                socket: SocketId::new("Eval"),
                visit: Visit(1),
                item: None,
                output: format!(r#"{{"satisfied":false,"context":"{context}"}}"#),
                output_of: None,
                parsed: Some(serde_json::json!({"satisfied": false, "context": context})),
                satisfied: Some(false),
                finalized: false,
            }),
            Event::from(ReworkRouted {
                source: SocketId::new("Eval"),
                materia_label: "Eval".into(),
                target: SocketId::new("Build"),
                item: None,
                reason: quoted_reason(context),
                reason_of: Some(Seq(1)),
            }),
            Event::from(SocketStarted {
                socket: SocketId::new("Build"),
                materia: MateriaName::new("Build"),
                materia_label: "Build".into(),
                visit: Visit(2),
                item: None,
                item_label: None,
                attempt: 2,
            }),
            Event::from(PromptDispatched {
                socket: SocketId::new("Build"),
                visit: Visit(2),
                turn: Turn(1),
                prompt_hash: Digest::ZERO,
                system_hash: None,
                placements: Vec::new(),
                redispatch: false,
            }),
        ];
        let pending: Vec<Pending> = events.iter().map(|e| Pending::new(0, e)).collect();
        let records = seal_batch(&CastId::new("c"), Seq(0), Digest::ZERO, &pending);
        assert!(!String::from_utf8_lossy(&records[1].payload).contains("greet()"));
        let audit = PlacementAudit::fold(&records);
        assert_eq!(audit.prompts.len(), 1);
        assert_eq!(audit.prompts[0].reasons, [context]);
    }
}
