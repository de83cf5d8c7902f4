//! The placement audit of entries given as data (`castlog placement`): the lint of one
//! rendered prompt, why each entry landed where it did, and whether a turn kept the previous
//! turn's cached system prefix.
//!
//! The same rules as the lint of a recorded cast, on one prompt: an escalation folded into the
//! system prefix, an entry that changes during a run inside the cached prefix ([`PER_TURN`];
//! across turns, measured), stacked mandates, a reason's text rendered by two entries, text a
//! model, a tool or a person wrote folded into the system message, text posing as the runtime.

use castlog_core::event::{Destination, Placement};
use castlog_core::prompt::fence;
use castlog_core::prompt::given::Prompt;
use castlog_core::prompt::policy::ESCALATIONS;
use castlog_core::prompt::{ContextEntry, Policy, Rendered};
use serde::Serialize;

/// Source types whose text changes during a run (`remainingDelta` is recomputed each turn a
/// write lands; `clarificationAnswer` grows with each clarification).
pub const PER_TURN: [&str; 2] = ["remainingDelta", "clarificationAnswer"];

/// A lint finding about one prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule (`escalation-in-system-fold`, `mutable-in-cached-prefix`, `stacked-mandates`,
    /// `duplicated-reason`, `untrusted-in-system-fold`, `posing-as-runtime`, `dropped-entry`).
    pub rule: &'static str,
    /// Id of the context entry the rule flags (`rework-1`, `steeringNote-2`, ...).
    pub entry: String,
    /// What the rule found, as a sentence a person can act on.
    pub message: String,
}

fn finding(rule: &'static str, entry: &str, message: String) -> Finding {
    Finding {
        rule,
        entry: entry.to_owned(),
        message,
    }
}

/// Runs the lint over `prompt` as `rendered` (by the same policy) placed it.
pub fn lint(prompt: &Prompt, rendered: &Rendered) -> Vec<Finding> {
    let mut out = Vec::new();
    let entries = &prompt.entries;
    for (i, (e, p)) in entries.iter().zip(&rendered.placements).enumerate() {
        let folded = p.destination == Destination::SystemFold;
        let st = e.source_type.as_ref();
        if folded && ESCALATIONS.contains(&st) {
            out.push(finding(
                "escalation-in-system-fold",
                &e.id,
                format!(
                    "{} ({st}) is folded into the system prefix, above the whole transcript",
                    e.id
                ),
            ));
        }
        if folded && PER_TURN.contains(&st) {
            out.push(finding(
                "mutable-in-cached-prefix",
                &e.id,
                format!(
                    "{} ({st}) changes during a run and sits in the cached system prefix: each change invalidates it",
                    e.id
                ),
            ));
        }
        if folded && prompt.untrusted.get(i).copied().unwrap_or(false) {
            out.push(finding(
                "untrusted-in-system-fold",
                &e.id,
                format!(
                    "{} ({st}) carries text a model, a tool or a person wrote, folded into the system message where it speaks with the runtime's authority",
                    e.id
                ),
            ));
        }
        let slot = match p.destination {
            Destination::SystemFold => Some("system fold"),
            Destination::Trailing => Some("trailing mandate block"),
            _ => None,
        };
        if let Some(slot) = slot {
            let found = fence::posing(&e.text);
            if let Some(first) = found.first() {
                out.push(finding(
                    "posing-as-runtime",
                    &e.id,
                    format!(
                        "{} ({st}) places text posing as the runtime in the {slot}: `{}` ({}{})",
                        e.id,
                        first.excerpt,
                        first.kind,
                        if first.escaped { ", escaped" } else { "" }
                    ),
                ));
            }
        }
        if p.destination == Destination::Dropped {
            out.push(finding(
                "dropped-entry",
                &e.id,
                format!("{} ({st}) was not rendered", e.id),
            ));
        }
    }
    let mandates: Vec<&Placement> = rendered
        .placements
        .iter()
        .filter(|p| p.destination == Destination::Trailing && p.rule == "trailing:mandate")
        .collect();
    if mandates.len() > 1 {
        let mut ordered = mandates.clone();
        ordered.sort_by_key(|p| p.position);
        let names: Vec<&str> = ordered.iter().map(|m| m.source_type.as_str()).collect();
        out.push(finding(
            "stacked-mandates",
            &ordered[1].entry,
            format!(
                "{} mandates stacked in the trailing slot: {}; the channel stops being authoritative",
                mandates.len(),
                names.join(", ")
            ),
        ));
    }
    out.extend(duplicated(entries, &rendered.placements));
    out
}

/// Text collapsed to single spaces.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A paragraph (at least 20 characters) of an escalation entry rendered again by another
/// entry.
fn duplicated(entries: &[ContextEntry], placements: &[Placement]) -> Vec<Finding> {
    let shown = |i: usize| placements[i].destination != Destination::Dropped;
    let collapsed: Vec<String> = entries.iter().map(|e| collapse(&e.text)).collect();
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if !ESCALATIONS.contains(&e.source_type.as_ref()) || !shown(i) {
            continue;
        }
        for (j, other) in entries.iter().enumerate() {
            if j == i || !shown(j) {
                continue;
            }
            let repeated = e
                .text
                .split("\n\n")
                .map(collapse)
                .find(|p| p.chars().count() >= 20 && collapsed[j].contains(p.as_str()));
            // Each pair once: the later entry repeats the earlier one.
            if let Some(paragraph) = repeated
                && (j > i || !ESCALATIONS.contains(&other.source_type.as_ref()))
            {
                let excerpt: String = paragraph.chars().take(40).collect();
                let cut = if excerpt.len() < paragraph.len() {
                    "…"
                } else {
                    ""
                };
                out.push(finding(
                    "duplicated-reason",
                    &other.id,
                    format!(
                        "{} ({}) repeats the text of {} ({}): \"{excerpt}{cut}\"",
                        other.id, other.source_type, e.id, e.source_type
                    ),
                ));
            }
        }
    }
    out
}

/// Why `entry` landed where `placement` says under `policy`, as a sentence.
pub fn why(policy: &Policy, entry: &ContextEntry, placement: &Placement) -> String {
    let role = placement.role.as_str();
    let layer = placement.layer;
    let mut out = match placement.rule.as_str() {
        "inline:ordinal" => format!("inline as {role}, in ordinal order"),
        "inline:lower-mandate" => {
            "a mandate outranked by a stronger one: inline as user context, so the trailing slot keeps one block".to_owned()
        }
        "trailing:mandate" => match policy.mandate(&entry.source_type) {
            Some(m) if policy.consolidates() => format!(
                "the strongest mandate (rank {}): leads the trailing block under `{}`",
                m.rank, m.header
            ),
            _ => "a mandate: pulled out of the inline flow and emitted last as user, every match joined".to_owned(),
        },
        "trailing:appended-delta" => {
            "the completion signal: always appended to the trailing block, not a competing mandate"
                .to_owned()
        }
        "dropped" => "not rendered".to_owned(),
        rule if rule.starts_with("fold:") => {
            let because = if policy.fold.layers.contains(&layer) {
                format!("layer L{layer}")
            } else {
                format!("role {role}")
            };
            format!("{because}: folded into the leading system message (the cached prefix)")
        }
        rule => format!("placed by the rule {rule}"),
    };
    if (layer, role) != (entry.layer, entry.role.as_str()) {
        out.push_str(&format!(
            "; re-roled from L{}/{} to L{layer}/{role}",
            entry.layer,
            entry.role.as_str()
        ));
    }
    if placement.destination == Destination::SystemFold
        && policy.reminder_for(&entry.source_type).is_some()
    {
        out.push_str("; also re-emitted as a trailing user reminder");
    }
    out
}

/// Whether a folded entry of `policy` is re-emitted as a reminder.
pub fn reminded(policy: &Policy, placement: &Placement) -> bool {
    placement.destination == Destination::SystemFold
        && policy.reminder_for(&placement.source_type).is_some()
}

/// What changed the system prefix from `previous` to `current`: the folded entries (by id)
/// added, removed or with another body; empty when the prefix is byte-identical.
pub fn prefix_changes(previous: &Rendered, current: &Rendered) -> Vec<String> {
    if previous.system == current.system {
        return Vec::new();
    }
    let fold = |r: &Rendered| -> Vec<(String, castlog_core::id::Digest)> {
        r.placements
            .iter()
            .filter(|p| p.destination == Destination::SystemFold)
            .map(|p| (p.entry.clone(), p.body))
            .collect()
    };
    let (a, b) = (fold(previous), fold(current));
    let mut changed: Vec<String> = Vec::new();
    for (entry, _) in b.iter().filter(|x| !a.contains(x)) {
        changed.push(entry.clone());
    }
    for (entry, _) in a.iter().filter(|x| !b.contains(x)) {
        if !changed.contains(entry) {
            changed.push(entry.clone());
        }
    }
    if changed.is_empty() {
        // Same entries and bodies in another order.
        changed.push("(order)".into());
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use castlog_core::id::Digest;
    use castlog_core::prompt::given::Given;
    use castlog_core::prompt::render_given;

    fn zero(_: &[u8]) -> Digest {
        Digest::ZERO
    }

    fn prompt(json: &str) -> Prompt {
        match Given::parse(json).unwrap() {
            Given::Prompt(p) => p,
            Given::Turns(_) => unreachable!(),
        }
    }

    #[test]
    fn legacy_folds_escalations_and_untrusted_text_and_recommended_does_not() {
        let p = prompt(
            r#"{"entries": [
            {"sourceType": "recoveryTicket", "layer": "L1", "role": "system", "ordinal": 1, "text": "The patch to src/app.rs missed twice in a row."},
            {"sourceType": "clarificationAnswer", "layer": "L0", "role": "system", "ordinal": 2, "text": "use tabs"},
            {"sourceType": "retryFeedback", "layer": "L1", "role": "user", "ordinal": 3, "text": "Retry.\n\nThe patch to src/app.rs missed twice in a row."}
        ]}"#,
        );
        let rules = |policy: &Policy| -> Vec<&'static str> {
            lint(&p, &render_given(&p.entries, policy, zero))
                .iter()
                .map(|f| f.rule)
                .collect()
        };
        let legacy = rules(Policy::named("legacy").unwrap());
        for rule in [
            "escalation-in-system-fold",
            "mutable-in-cached-prefix",
            "untrusted-in-system-fold",
            "duplicated-reason",
        ] {
            assert!(legacy.contains(&rule), "{rule}: {legacy:?}");
        }
        let recommended = rules(Policy::recommended());
        assert!(!recommended.contains(&"escalation-in-system-fold"));
        assert!(recommended.contains(&"duplicated-reason"));
    }
}
