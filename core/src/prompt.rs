//! Prompts as data: context entries and the placement policy that renders them.
//!
//! Every turn's prompt is a list of [`ContextEntry`]s. A policy renders them into chat messages
//! with three destinations: the single leading system message (the *system fold*, the cacheable
//! prefix), the inline transcript, and the trailing repair-mandate slot. Every entry's placement
//! is returned with the rule that put it there, so the dispatch event can record it.
//!
//! Rules of the `recommended` policy:
//! - an entry with layer L0 or role System folds into the system message, ordered by
//!   (layer, ordinal);
//! - mandates (recoveryTicket, retryFeedback, reworkFeedback, groundingFeedback,
//!   rejectionFeedback, remainingDelta) leave the inline flow and form ONE final user message
//!   under a `## ` header: the highest-precedence mandate (recoveryTicket > retryFeedback >
//!   groundingFeedback = reworkFeedback > rejectionFeedback), with remainingDelta always
//!   appended; lower mandates are kept below it so nothing is dropped;
//! - a System-folded steeringNote is re-emitted as a trailing user reminder;
//! - everything else renders inline in ordinal order, consecutive entries of one role joined.

use serde::{Deserialize, Serialize};

use crate::event::{Destination, Placement};
use crate::id::Digest;

/// The role of an entry (and of a rendered message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// System instructions.
    System,
    /// The user side.
    User,
    /// The model side.
    Assistant,
    /// Tool output.
    Tool,
}

impl Role {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One piece of context for one turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextEntry {
    /// Stable id within the turn (`materiaInstructions`, `rework-1`, ...).
    pub id: String,
    /// What produced it (`materiaInstructions`, `castRequest`, `retryFeedback`, ...).
    pub source_type: &'static str,
    /// Layer 0..=3 (0 = invariant instructions, 3 = reference material).
    pub layer: u8,
    /// Role.
    pub role: Role,
    /// Ordering within the prompt.
    pub ordinal: u32,
    /// The text.
    pub text: String,
    /// A locked steering note.
    pub locked: bool,
}

/// One rendered chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: Role,
    /// The text.
    pub content: String,
}

/// A rendered prompt with its placements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The messages, system fold first.
    pub messages: Vec<Message>,
    /// One placement per entry, in entry order.
    pub placements: Vec<Placement>,
    /// The text of the system fold.
    pub system: String,
}

/// Mandate source types and their precedence (lower is stronger).
fn mandate_rank(source_type: &str) -> Option<u8> {
    match source_type {
        "recoveryTicket" => Some(0),
        "retryFeedback" => Some(1),
        "groundingFeedback" | "reworkFeedback" => Some(2),
        "rejectionFeedback" => Some(3),
        "remainingDelta" => Some(4),
        _ => None,
    }
}

/// Renders entries with the recommended policy. `digest` names each entry's body blob.
pub fn render(entries: &[ContextEntry], digest: fn(&[u8]) -> Digest) -> Rendered {
    let mut placements: Vec<Option<Placement>> = vec![None; entries.len()];
    let place = |entry: &ContextEntry, destination, position: usize, rule: &str| Placement {
        entry: entry.id.clone(),
        source_type: entry.source_type.to_owned(),
        layer: entry.layer,
        role: entry.role.as_str().to_owned(),
        destination,
        position: position as u32,
        rule: rule.to_owned(),
        body: digest(entry.text.as_bytes()),
    };

    // System fold.
    let mut folded: Vec<usize> = (0..entries.len())
        .filter(|&i| mandate_rank(entries[i].source_type).is_none())
        .filter(|&i| entries[i].layer == 0 || entries[i].role == Role::System)
        .collect();
    folded.sort_by_key(|&i| (entries[i].layer, entries[i].ordinal, i));
    let mut system_parts = Vec::new();
    for (position, &i) in folded.iter().enumerate() {
        system_parts.push(entries[i].text.as_str());
        placements[i] = Some(place(
            &entries[i],
            Destination::SystemFold,
            position,
            "fold:l0-or-system",
        ));
    }
    let system = system_parts.join("\n\n");

    // Inline flow.
    let mut inline: Vec<usize> = (0..entries.len())
        .filter(|&i| placements[i].is_none() && mandate_rank(entries[i].source_type).is_none())
        .collect();
    let all_zero = inline.iter().all(|&i| entries[i].ordinal == 0);
    if all_zero {
        inline.sort_by_key(|&i| (entries[i].layer, i));
    } else {
        inline.sort_by_key(|&i| (entries[i].ordinal, i));
    }
    let mut messages = vec![];
    if !system.is_empty() {
        messages.push(Message {
            role: Role::System,
            content: system.clone(),
        });
    }
    for (position, &i) in inline.iter().enumerate() {
        let entry = &entries[i];
        match messages.last_mut() {
            Some(last) if last.role == entry.role && last.role != Role::System => {
                last.content.push_str("\n\n");
                last.content.push_str(&entry.text);
            }
            _ => messages.push(Message {
                role: entry.role,
                content: entry.text.clone(),
            }),
        }
        placements[i] = Some(place(
            entry,
            Destination::Inline,
            position,
            "inline:ordinal",
        ));
    }

    // Trailing mandate slot: one consolidated block.
    let mut mandates: Vec<usize> = (0..entries.len())
        .filter(|&i| mandate_rank(entries[i].source_type).is_some())
        .collect();
    mandates.sort_by_key(|&i| (mandate_rank(entries[i].source_type), entries[i].ordinal, i));
    let reminders: Vec<usize> = folded
        .iter()
        .copied()
        .filter(|&i| entries[i].source_type == "steeringNote")
        .collect();
    if !mandates.is_empty() || !reminders.is_empty() {
        let mut block = Vec::new();
        for (position, &i) in mandates.iter().enumerate() {
            let entry = &entries[i];
            let header = match entry.source_type {
                "recoveryTicket" => "## Recovery",
                "retryFeedback" => "## Repair required",
                "groundingFeedback" => "## Grounding required",
                "reworkFeedback" => "## Rework required",
                "rejectionFeedback" => "## Rejected",
                _ => "## Remaining work items",
            };
            block.push(format!("{header}\n{}", entry.text));
            let rule = if position == 0 {
                "trailing:highest-mandate"
            } else if entry.source_type == "remainingDelta" {
                "trailing:remaining-delta"
            } else {
                "trailing:lower-mandate"
            };
            placements[i] = Some(place(entry, Destination::Trailing, position, rule));
        }
        for &i in &reminders {
            block.push(format!("## Operator note (reminder)\n{}", entries[i].text));
        }
        messages.push(Message {
            role: Role::User,
            content: block.join("\n\n"),
        });
    }

    let placements = placements
        .into_iter()
        .zip(entries)
        .map(|(p, e)| p.unwrap_or_else(|| place(e, Destination::Dropped, 0, "dropped")))
        .collect();
    Rendered {
        messages,
        placements,
        system,
    }
}

/// The stored form of a rendered prompt: compact JSON `[{"role", "content"}, ...]`.
pub fn messages_json(messages: &[Message]) -> Vec<u8> {
    serde_json::to_vec(messages).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(
        id: &str,
        source_type: &'static str,
        layer: u8,
        role: Role,
        ordinal: u32,
    ) -> ContextEntry {
        ContextEntry {
            id: id.into(),
            source_type,
            layer,
            role,
            ordinal,
            text: format!("text of {id}"),
            locked: false,
        }
    }

    #[test]
    fn destinations_follow_the_rules() {
        let entries = vec![
            entry("instr", "materiaInstructions", 0, Role::System, 0),
            entry("req", "castRequest", 1, Role::User, 1),
            entry("ctx", "handoffContext", 3, Role::User, 2),
            entry("retry", "retryFeedback", 2, Role::User, 3),
            entry("rework", "reworkFeedback", 2, Role::User, 4),
            entry("delta", "remainingDelta", 2, Role::User, 5),
        ];
        let r = render(&entries, |_| Digest::ZERO);
        assert_eq!(r.messages.len(), 3);
        assert_eq!(r.messages[0].role, Role::System);
        assert_eq!(r.messages[1].content, "text of req\n\ntext of ctx");
        let last = &r.messages[2].content;
        assert!(last.starts_with("## Repair required"), "{last}");
        assert!(last.find("Rework").unwrap() < last.find("Remaining").unwrap());
        let rules: Vec<&str> = r.placements.iter().map(|p| p.rule.as_str()).collect();
        assert_eq!(
            rules,
            [
                "fold:l0-or-system",
                "inline:ordinal",
                "inline:ordinal",
                "trailing:highest-mandate",
                "trailing:lower-mandate",
                "trailing:remaining-delta"
            ]
        );
    }

    #[test]
    fn a_locked_steering_note_gets_a_trailing_reminder() {
        let mut note = entry("steer", "steeringNote", 0, Role::System, 9);
        note.locked = true;
        let entries = vec![entry("req", "castRequest", 1, Role::User, 1), note];
        let r = render(&entries, |_| Digest::ZERO);
        assert!(r.system.contains("text of steer"));
        assert!(r.messages.last().unwrap().content.contains("reminder"));
    }
}
