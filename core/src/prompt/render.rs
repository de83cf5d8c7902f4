//! The renderer: one set of rules, driven by a [`Policy`].
//!
//! 1. Each entry takes its layer and role from the policy's re-rolings (for castlog's own
//!    entries, after the producer re-rolings), else its own.
//! 2. The policy's *appended* source type (`remainingDelta` under `recommended`) goes to the
//!    trailing slot, after the mandate.
//! 3. A mandate goes to the trailing slot. Consolidated (`strongest`), only the strongest one
//!    does (by rank, then ordinal) and the others render inline as ordinary user context, so
//!    the slot carries ONE block under one `## ` header; `joined`, every mandate trails.
//! 4. Any other entry whose layer or role the policy's fold rule lists (layer 0 or role System
//!    for both built-in policies) folds into the single leading system message, ordered by
//!    (layer, ordinal). A folded entry of the reminder's source type (`steeringNote`) is
//!    re-emitted as a user reminder just before the trailing block.
//! 5. Everything else renders inline in ordinal order (layer breaks ties only when every
//!    ordinal is 0); consecutive inline entries of one role share a message.

use super::policy::Policy;
use super::{ContextEntry, Message, Rendered, Role};
use crate::event::{Destination, Placement};
use crate::id::Digest;

enum Slot {
    Fold,
    Inline(&'static str),
    Trailing(&'static str),
}

/// Renders castlog's own `entries` under `policy` (the producer re-rolings apply). `digest`
/// names each entry's body blob.
pub fn render(entries: &[ContextEntry], policy: &Policy, digest: fn(&[u8]) -> Digest) -> Rendered {
    render_entries(entries, policy, digest, true)
}

/// Renders entries given as data (`castlog placement`): each keeps the layer and role its
/// producer gave it, and only the policy's own re-rolings apply.
pub fn render_given(
    entries: &[ContextEntry],
    policy: &Policy,
    digest: fn(&[u8]) -> Digest,
) -> Rendered {
    render_entries(entries, policy, digest, false)
}

fn render_entries(
    entries: &[ContextEntry],
    policy: &Policy,
    digest: fn(&[u8]) -> Digest,
    castlog: bool,
) -> Rendered {
    let effective: Vec<(u8, Role)> = entries
        .iter()
        .map(|e| policy.effective(&e.source_type, e.layer, e.role, castlog))
        .collect();
    let strongest = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            policy
                .mandate(&e.source_type)
                .map(|m| (m.rank, e.ordinal, i))
        })
        .min()
        .map(|(_, _, i)| i);
    let fold_rule = policy.fold_rule();
    let slots: Vec<Slot> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let (layer, role) = effective[i];
            if policy.appends(&e.source_type) {
                Slot::Trailing("trailing:appended-delta")
            } else if policy.mandate(&e.source_type).is_some() {
                if !policy.consolidates() || strongest == Some(i) {
                    Slot::Trailing("trailing:mandate")
                } else {
                    Slot::Inline("inline:lower-mandate")
                }
            } else if policy.folds(layer, role) {
                Slot::Fold
            } else {
                Slot::Inline("inline:ordinal")
            }
        })
        .collect();

    let place = |i: usize, destination, position: usize, rule: &str| Placement {
        entry: entries[i].id.clone(),
        source_type: entries[i].source_type.to_string(),
        layer: effective[i].0,
        role: effective[i].1.as_str().to_owned(),
        destination,
        position: u32::try_from(position).unwrap_or(u32::MAX),
        rule: rule.to_owned(),
        body: digest(entries[i].text.as_bytes()),
    };
    let mut placements: Vec<Option<Placement>> = vec![None; entries.len()];
    let of = |want: fn(&Slot) -> bool| -> Vec<usize> {
        (0..entries.len()).filter(|&i| want(&slots[i])).collect()
    };

    let mut folded = of(|s| matches!(s, Slot::Fold));
    folded.sort_by_key(|&i| (effective[i].0, entries[i].ordinal, i));
    for (position, &i) in folded.iter().enumerate() {
        placements[i] = Some(place(i, Destination::SystemFold, position, &fold_rule));
    }
    let mut inline = of(|s| matches!(s, Slot::Inline(_)));
    if inline.iter().all(|&i| entries[i].ordinal == 0) {
        inline.sort_by_key(|&i| (effective[i].0, i));
    } else {
        inline.sort_by_key(|&i| (entries[i].ordinal, i));
    }
    for (position, &i) in inline.iter().enumerate() {
        let rule = match slots[i] {
            Slot::Inline(rule) => rule,
            _ => "inline:ordinal",
        };
        placements[i] = Some(place(i, Destination::Inline, position, rule));
    }
    let mut trailing = of(|s| matches!(s, Slot::Trailing(_)));
    trailing.sort_by_key(|&i| {
        let rank = policy
            .mandate(&entries[i].source_type)
            .map_or(u8::MAX, |m| m.rank);
        (rank, entries[i].ordinal, i)
    });
    for (position, &i) in trailing.iter().enumerate() {
        let rule = match slots[i] {
            Slot::Trailing(rule) => rule,
            _ => "trailing:mandate",
        };
        placements[i] = Some(place(i, Destination::Trailing, position, rule));
    }

    let placements: Vec<Placement> = placements
        .into_iter()
        .enumerate()
        .map(|(i, p)| p.unwrap_or_else(|| place(i, Destination::Dropped, 0, "dropped")))
        .collect();
    let texts: Vec<&str> = entries.iter().map(|e| e.text.as_str()).collect();
    // Every role here came from `Role::as_str`, so assembling cannot meet an unknown one.
    let (messages, system) = assemble(&placements, &texts, policy).unwrap_or_default();
    Rendered {
        messages,
        placements,
        system,
    }
}

/// A placement whose role is not one of castlog's four (a damaged or hand-made record).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("entry {entry:?} has the unknown role {role:?}")]
pub struct UnknownRole {
    /// Id of the recorded entry.
    pub entry: String,
    /// Role as the placement records it (not one of `system`, `user`, `assistant`, `tool`).
    pub role: String,
}

/// Builds the messages (and the system fold's text) from recorded placements and the entries'
/// texts (`texts[i]` is the body of `placements[i]`). [`render`] decides the placements and
/// then assembles through here, so a prompt rebuilt from a `prompt_dispatched` event and its
/// entry blobs is byte for byte the one that was sent:
/// - the system fold: its entries by position, joined by a blank line;
/// - inline entries by position, consecutive entries of one (non-system) role sharing a
///   message; a lower mandate moved inline speaks as the user;
/// - a folded entry of the reminder's source type (`steeringNote`) re-emitted as a user
///   reminder, in fold order;
/// - the trailing block: its entries by position, each under its mandate header when the
///   policy consolidates (a block with no mandate gets the appended signal's header,
///   `## Remaining work`).
pub fn assemble(
    placements: &[Placement],
    texts: &[&str],
    policy: &Policy,
) -> Result<(Vec<Message>, String), UnknownRole> {
    let text = |i: usize| texts.get(i).copied().unwrap_or("");
    let at = |destination: Destination| {
        let mut found: Vec<usize> = (0..placements.len())
            .filter(|&i| placements[i].destination == destination)
            .collect();
        found.sort_by_key(|&i| (placements[i].position, i));
        found
    };
    let folded = at(Destination::SystemFold);
    let system = folded
        .iter()
        .map(|&i| text(i))
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut messages = Vec::new();
    if !system.is_empty() {
        messages.push(Message {
            role: Role::System,
            content: system.clone(),
            tool_call: None,
        });
    }
    for i in at(Destination::Inline) {
        let p = &placements[i];
        let role = if p.rule == "inline:lower-mandate" {
            Role::User
        } else {
            Role::named(&p.role).ok_or_else(|| UnknownRole {
                entry: p.entry.clone(),
                role: p.role.clone(),
            })?
        };
        // An entry of a tool loop is a message of its own, never merged with a neighbour.
        let tool_call = super::tool_call_of(&p.source_type, &p.entry);
        match messages.last_mut() {
            Some(last)
                if last.role == role
                    && role != Role::System
                    && tool_call.is_none()
                    && last.tool_call.is_none() =>
            {
                last.content.push_str("\n\n");
                last.content.push_str(text(i));
            }
            _ => messages.push(Message {
                role,
                content: text(i).to_owned(),
                tool_call,
            }),
        }
    }
    for &i in &folded {
        if let Some(prefix) = policy.reminder_for(&placements[i].source_type) {
            messages.push(Message {
                role: Role::User,
                content: format!("{prefix}{}", text(i)),
                tool_call: None,
            });
        }
    }
    let trailing = at(Destination::Trailing);
    if !trailing.is_empty() {
        let mut parts: Vec<String> = trailing
            .iter()
            .map(|&i| match policy.mandate(&placements[i].source_type) {
                Some(m) if policy.consolidates() && !m.header.is_empty() => {
                    format!("{}\n{}", m.header, text(i))
                }
                _ => text(i).to_owned(),
            })
            .collect();
        let no_mandate = trailing
            .iter()
            .all(|&i| policy.mandate(&placements[i].source_type).is_none());
        if let Some(appended) = &policy.appended
            && policy.consolidates()
            && no_mandate
            && !appended.header.is_empty()
        {
            // Only the appended delta: it still gets the block's single header.
            parts.insert(0, appended.header.clone());
        }
        messages.push(Message {
            role: Role::User,
            content: parts.join("\n\n"),
            tool_call: None,
        });
    }
    Ok((messages, system))
}

#[cfg(test)]
mod tests {
    use super::super::policy::{LEGACY, RECOMMENDED};
    use super::*;
    use rstest::rstest;

    fn entry(source_type: &'static str, layer: u8, role: Role, ordinal: u32) -> ContextEntry {
        ContextEntry {
            id: source_type.into(),
            source_type: source_type.into(),
            layer,
            role,
            ordinal,
            text: format!("text of {source_type}"),
            locked: false,
        }
    }

    fn zero(_: &[u8]) -> Digest {
        Digest::ZERO
    }

    /// The audit's inventory: each source type with the layer/role its producer gives it, and
    /// where it lands under each policy, with the rule named.
    #[rstest]
    #[case(
        "materiaInstructions",
        0,
        Role::System,
        "fold:l0-or-system",
        "fold:l0-or-system"
    )]
    #[case(
        "outputContract",
        0,
        Role::System,
        "fold:l0-or-system",
        "fold:l0-or-system"
    )]
    #[case("initialIntent", 1, Role::User, "inline:ordinal", "inline:ordinal")]
    #[case("workItem", 1, Role::User, "inline:ordinal", "inline:ordinal")]
    #[case("handoffContext", 3, Role::User, "inline:ordinal", "inline:ordinal")]
    #[case("previousOutput", 3, Role::User, "inline:ordinal", "inline:ordinal")]
    #[case(
        "refinementDraft",
        2,
        Role::Assistant,
        "inline:ordinal",
        "inline:ordinal"
    )]
    #[case("userRefinement", 2, Role::User, "inline:ordinal", "inline:ordinal")]
    #[case("retryFeedback", 2, Role::User, "trailing:mandate", "trailing:mandate")]
    #[case(
        "recoveryTicket",
        2,
        Role::User,
        "fold:l0-or-system",
        "trailing:mandate"
    )]
    #[case(
        "reworkFeedback",
        2,
        Role::User,
        "fold:l0-or-system",
        "trailing:mandate"
    )]
    #[case(
        "groundingFeedback",
        2,
        Role::User,
        "fold:l0-or-system",
        "trailing:mandate"
    )]
    #[case(
        "rejectionFeedback",
        2,
        Role::User,
        "fold:l0-or-system",
        "trailing:mandate"
    )]
    #[case(
        "remainingDelta",
        2,
        Role::User,
        "fold:l0-or-system",
        "trailing:appended-delta"
    )]
    #[case(
        "steeringNote",
        0,
        Role::System,
        "fold:l0-or-system",
        "fold:l0-or-system"
    )]
    #[case("steeringNote", 2, Role::User, "inline:ordinal", "inline:ordinal")]
    fn the_inventory_lands_where_each_policy_says(
        #[case] source_type: &'static str,
        #[case] layer: u8,
        #[case] role: Role,
        #[case] legacy: &str,
        #[case] recommended: &str,
    ) {
        let entries = vec![
            entry("initialIntentAnchor", 1, Role::User, 1),
            entry(source_type, layer, role, 2),
        ];
        for (policy, rule) in [(&*LEGACY, legacy), (&*RECOMMENDED, recommended)] {
            let r = render(&entries, policy, zero);
            assert_eq!(
                r.placements[1].rule, rule,
                "{source_type} under {}",
                policy.name
            );
            let destination = match rule.split(':').next() {
                Some("fold") => Destination::SystemFold,
                Some("inline") => Destination::Inline,
                _ => Destination::Trailing,
            };
            assert_eq!(r.placements[1].destination, destination);
        }
    }

    #[test]
    fn recommended_consolidates_one_mandate_with_the_delta_appended() {
        let entries = vec![
            entry("materiaInstructions", 0, Role::System, 1),
            entry("initialIntent", 1, Role::User, 2),
            entry("reworkFeedback", 2, Role::User, 3),
            entry("retryFeedback", 2, Role::User, 4),
            entry("remainingDelta", 2, Role::User, 5),
            entry("recoveryTicket", 2, Role::User, 6),
        ];
        let r = render(&entries, &RECOMMENDED, zero);
        let last = &r.messages.last().unwrap().content;
        assert_eq!(last.matches("## ").count(), 1, "{last}");
        assert!(
            last.starts_with("## Recovery\ntext of recoveryTicket"),
            "{last}"
        );
        assert!(last.ends_with("text of remainingDelta"), "{last}");
        assert!(!last.contains("text of retryFeedback"));
        let inline: Vec<&str> = r
            .placements
            .iter()
            .filter(|p| p.rule == "inline:lower-mandate")
            .map(|p| p.source_type.as_str())
            .collect();
        assert_eq!(inline, ["reworkFeedback", "retryFeedback"]);
        assert!(!r.system.contains("remainingDelta"));
    }

    #[test]
    fn legacy_folds_escalations_and_joins_the_trailing_matches() {
        let entries = vec![
            entry("materiaInstructions", 0, Role::System, 1),
            entry("retryFeedback", 2, Role::User, 2),
            entry("remainingDelta", 2, Role::User, 3),
            entry("recoveryTicket", 2, Role::User, 4),
        ];
        let r = render(&entries, &LEGACY, zero);
        assert!(r.system.contains("text of remainingDelta"));
        assert!(r.system.contains("text of recoveryTicket"));
        assert_eq!(r.messages.last().unwrap().content, "text of retryFeedback");
    }

    #[test]
    fn a_locked_steering_note_gets_a_reminder() {
        let mut note = entry("steeringNote", 0, Role::System, 9);
        note.locked = true;
        let entries = vec![entry("initialIntent", 1, Role::User, 1), note];
        let r = render(&entries, &RECOMMENDED, zero);
        assert!(r.system.contains("text of steeringNote"));
        assert!(r.messages.last().unwrap().content.starts_with("Reminder"));
    }

    #[test]
    fn inline_order_uses_layers_only_when_ordinals_are_all_zero() {
        let entries = vec![
            entry("handoffContext", 3, Role::User, 0),
            entry("initialIntent", 1, Role::User, 0),
        ];
        let r = render(&entries, &RECOMMENDED, zero);
        assert_eq!(
            r.messages[0].content,
            "text of initialIntent\n\ntext of handoffContext"
        );
    }
}
