//! Assembling the current turn's context entries.

use serde_json::Value;

use super::reasons::{Among, Reasons};
use super::{CastState, Phase};
use crate::handoff;
use crate::loadout::{Parse, SocketKind};
use crate::prompt::{ContextEntry, Role, fence};
use crate::template;

/// The paragraphs of `text` (split at each blank line, `"\n\n"`, leftmost first), found with
/// a byte search for the newline rather than a substring search over the whole text.
pub(super) fn paragraphs(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        let bytes = current.as_bytes();
        let mut from = 0;
        while let Some(at) = current[from..].find('\n').map(|i| i + from) {
            if bytes.get(at + 1) == Some(&b'\n') {
                rest = Some(&current[at + 2..]);
                return Some(&current[..at]);
            }
            from = at + 1;
        }
        rest = None;
        Some(current)
    })
}

/// How many of the most recent handoff-context paragraphs a prompt shows.
const CONTEXT_PARAGRAPHS: usize = 6;

/// The newest handoff-context rule (recorded in `cast_started`): 1, a paragraph that carries
/// the rework reason of another work item (live, or cleared since) is left out of a prompt's
/// handoff context, so an earlier item's rejection does not reach a later item's prompt. A
/// cast recorded without the rule (0) shows every kept paragraph.
pub const HANDOFF_RULE: u32 = 1;

/// The loop-break gate: the ticket for the first failing call of the visit made `after` times
/// or more (`limits.loopBreakAfter`, else
/// [`DEFAULT_LOOP_BREAK_AFTER`](crate::loadout::DEFAULT_LOOP_BREAK_AFTER)), if any.
fn loop_break(calls: &[super::ToolCallState], after: u32) -> Option<String> {
    let after = usize::try_from(after).unwrap_or(usize::MAX);
    let failures: Vec<(&str, &Value, &str)> = calls
        .iter()
        .filter_map(|t| match &t.outcome {
            Some(super::ToolOutcome::Finished {
                output,
                error: true,
            }) => Some((
                t.request.tool.as_str(),
                &t.request.arguments,
                output.as_str(),
            )),
            _ => None,
        })
        .collect();
    let (tool, arguments, error) = failures
        .iter()
        .find(|f| failures.iter().filter(|g| g == f).count() >= after)?;
    let times = failures
        .iter()
        .filter(|g| (g.0, g.1, g.2) == (*tool, *arguments, *error))
        .count();
    Some(format!(
        "The same tool call failed {times} times: {tool} with {arguments}, each time with: {error}\nDo not make this call again. Change its arguments, use another tool, or answer with what you have."
    ))
}

/// How many upcoming work items the remaining delta names.
const DELTA_TITLES: usize = 5;

/// The rework follow-up block is cut to this many characters.
const REWORK_LIMIT: usize = 2400;

impl CastState {
    /// `text` (a model's or a person's) fenced as this cast's prompts fence it.
    fn fenced<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        fence::fence(self.fence, text)
    }

    /// The context entries of the current visit's next prompt. Every piece of text a model or
    /// a person supplied is fenced where it is substituted (see `prompt::fence`); the
    /// runtime's own text around it is not.
    pub fn entries(&self) -> Vec<ContextEntry> {
        let Some(current) = &self.current else {
            return Vec::new();
        };
        let Some(socket) = self.loadout.socket(&current.socket) else {
            return Vec::new();
        };
        let SocketKind::Agent(agent) = &socket.kind else {
            return Vec::new();
        };
        let mut entries = Vec::new();
        let mut ordinal = 0;
        let mut push = |id: String,
                        source_type: &'static str,
                        layer: u8,
                        role: Role,
                        text: String,
                        locked: bool| {
            if text.trim().is_empty() {
                return;
            }
            ordinal += 1;
            entries.push(ContextEntry {
                id,
                source_type: source_type.into(),
                layer,
                role,
                ordinal,
                text,
                locked,
            });
        };
        let scope = self.template_scope();
        let instructions = template::render_with(&agent.prompt, &scope, |value| {
            self.fenced(&value).into_owned()
        });
        push(
            "materiaInstructions".into(),
            "materiaInstructions",
            0,
            Role::System,
            format!(
                "{}\n{instructions}\n{}",
                fence::INSTRUCTIONS_OPEN,
                fence::INSTRUCTIONS_CLOSE
            ),
            false,
        );
        let refining = socket.is_multi_turn() && !current.finalizing;
        push(
            "outputContract".into(),
            "outputContract",
            0,
            Role::System,
            self.contract_text(refining),
            false,
        );
        push(
            "initialIntent".into(),
            "initialIntent",
            1,
            Role::User,
            format!("Cast request:\n{}", self.fenced(&self.request)),
            false,
        );
        if let Some(item) = self.data.get("item").filter(|_| current.item.is_some()) {
            let title = item
                .get("title")
                .and_then(Value::as_str)
                .unwrap_or("(untitled)");
            let context = item.get("context").and_then(Value::as_str).unwrap_or("");
            push(
                "workItem".into(),
                "workItem",
                1,
                Role::User,
                format!(
                    "Current workItem:\nTitle: {}\nContext:\n{}",
                    self.fenced(title),
                    self.fenced(context)
                ),
                false,
            );
        }
        if socket.parse == Parse::Text {
            let guidance = self
                .data
                .get("guidance")
                .cloned()
                .unwrap_or(Value::Object(Default::default()));
            push(
                "guidance".into(),
                "guidance",
                3,
                Role::User,
                format!(
                    "Global guidance JSON:\n{}",
                    self.fenced(&serde_json::to_string_pretty(&guidance).unwrap_or_default())
                ),
                false,
            );
        }
        // The rework reasons this prompt renders in its follow-up block (its own: no other entry
        // repeats them, the same reason twice in one prompt reads as two complaints), and other
        // items' rejections (rule 1): reasons for another item, live or settled.
        let reasons = Reasons::new(
            self.rework
                .iter()
                .filter(|r| r.target == current.socket && r.item == current.item)
                .map(|r| r.reason.as_str()),
            self.rework
                .iter()
                .chain(&self.settled_rework)
                .filter(|r| self.handoff >= 1 && r.item != current.item)
                .map(|r| r.reason.as_str()),
        );
        if let Some(Value::String(context)) = self.data.get("context") {
            // Bounded: the most recent paragraphs only, so a prompt does not grow with the
            // length of the cast (the reference renders the whole history every turn).
            let all: Vec<&str> = paragraphs(context).collect();
            let skipped = all.len().saturating_sub(CONTEXT_PARAGRAPHS);
            let kept: Vec<&str> = all[skipped..]
                .iter()
                .copied()
                .filter(|paragraph| !reasons.carried_by(paragraph, Among::All))
                .collect();
            if !kept.is_empty() {
                let earlier = if skipped > 0 {
                    format!("({skipped} earlier entries are in the cast's state.)\n")
                } else {
                    String::new()
                };
                push(
                    "handoffContext".into(),
                    "handoffContext",
                    3,
                    Role::User,
                    format!(
                        "Handoff context from earlier sockets (reference material):\n{earlier}{}",
                        self.fenced(&kept.join("\n\n"))
                    ),
                    false,
                );
            }
        }
        if socket.generator
            && !refining
            && let Some(Value::Array(items)) = self.data.get("workItems")
        {
            push(
                "upstreamWorkItems".into(),
                "upstreamWorkItems",
                3,
                Role::User,
                format!(
                    "Upstream generated workItems JSON:\n{}",
                    self.fenced(&serde_json::to_string_pretty(items).unwrap_or_default())
                ),
                false,
            );
        }
        // The previous agent's output; a utility's output already reached `state.data`.
        let after_agent = self
            .last_source
            .as_ref()
            .and_then(|(s, _)| self.loadout.socket(s))
            .is_some_and(|s| s.is_agent());
        if let Some(previous) = self
            .last_output
            .as_ref()
            .filter(|_| after_agent)
            .filter(|p| !reasons.carried_by(p, Among::Own))
        {
            push(
                "previousOutput".into(),
                "previousOutput",
                3,
                Role::User,
                format!("Previous output:\n{}", self.fenced(previous)),
                false,
            );
        }
        for (i, line) in current.transcript.iter().enumerate() {
            let (source_type, role) = if line.role == Role::Assistant {
                ("refinementDraft", line.role)
            } else {
                ("userRefinement", Role::User)
            };
            push(
                format!("{source_type}-{}", i + 1),
                source_type,
                2,
                role,
                self.fenced(&line.text).into_owned(),
                false,
            );
        }
        // The visit's tool calls and their results, inline and in order; a failed call's
        // result stays where it happened (it is not lifted to the mandate slot).
        for t in &current.tool_calls {
            let call = &t.request;
            let shown = serde_json::json!({
                "id": call.call,
                "name": call.tool,
                "arguments": call.arguments,
            });
            push(
                format!("assistantToolCall:{}", call.call),
                "assistantToolCall",
                2,
                Role::Assistant,
                self.fenced(&shown.to_string()).into_owned(),
                false,
            );
            if let Some(outcome) = &t.outcome {
                push(
                    format!("toolResult:{}", call.call),
                    "toolResult",
                    2,
                    Role::Tool,
                    self.fenced(&outcome.shown(&call.call, &call.tool))
                        .into_owned(),
                    false,
                );
            }
        }
        let after = self
            .loadout
            .loop_break_after
            .unwrap_or(crate::loadout::DEFAULT_LOOP_BREAK_AFTER);
        if let Some(ticket) = loop_break(&current.tool_calls, after) {
            push(
                "recoveryTicket:toolLoop".into(),
                "recoveryTicket",
                2,
                Role::User,
                self.fenced(&ticket).into_owned(),
                false,
            );
        }
        for (i, (text, locked)) in self.steering.iter().enumerate() {
            let (layer, role) = if *locked {
                (0, Role::System)
            } else {
                (2, Role::User)
            };
            push(
                format!("steeringNote-{}", i + 1),
                "steeringNote",
                layer,
                role,
                format!("Operator steering note:\n{}", self.fenced(text)),
                *locked,
            );
        }
        let rework: Vec<String> = self
            .rework
            .iter()
            .filter(|r| r.target == current.socket && r.item == current.item)
            .map(|r| {
                let item = current.item_label.as_deref().unwrap_or("this cast");
                format!(
                    "- From {} {} for {}: {}",
                    r.source,
                    r.materia_label,
                    self.fenced(item),
                    self.fenced(&r.reason)
                )
            })
            .collect();
        if !rework.is_empty() {
            let mut text = format!(
                "Runtime follow-up context:\nThis socket was reached again because a later socket was not satisfied. Treat this turn as follow-up work on the current item and address these reasons, even if the work item title is vague.\n{}",
                rework.join("\n")
            );
            if text.chars().count() > REWORK_LIMIT {
                text = text.chars().take(REWORK_LIMIT).collect::<String>() + "…";
            }
            push(
                "reworkFeedback".into(),
                "reworkFeedback",
                2,
                Role::User,
                text,
                false,
            );
        }
        if let Some(feedback) = &current.repair_feedback {
            push(
                "retryFeedback".into(),
                "retryFeedback",
                2,
                Role::User,
                // The runtime's part of the repair text carries no markup, so fencing all of
                // it fences exactly the quoted output and the issues (which name its fields).
                self.fenced(feedback).into_owned(),
                false,
            );
        }
        if current.recovering {
            push(
                "recoveryTicket".into(),
                "recoveryTicket",
                2,
                Role::User,
                "This cast was stopped and has been resumed at this socket. Earlier work of this visit may be incomplete: check the current state before continuing, then answer in the required format.".into(),
                false,
            );
        }
        if let Some(source) = self.iterator_of(&current.socket) {
            let index = self.cursors.get(&source.cursor).copied().unwrap_or(0);
            let items = self.items_of(&source);
            let ahead = items.len().saturating_sub(
                usize::try_from(index)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1),
            );
            let mut remaining: Vec<String> = items
                .iter()
                .skip(items.len() - ahead)
                .take(DELTA_TITLES)
                .map(|item| {
                    let title = item
                        .get("title")
                        .and_then(Value::as_str)
                        .unwrap_or("(untitled)");
                    format!("- {}", self.fenced(title))
                })
                .collect();
            if ahead > DELTA_TITLES {
                remaining.push(format!("- … and {} more", ahead - DELTA_TITLES));
            }
            if !remaining.is_empty() {
                push(
                    "remainingDelta".into(),
                    "remainingDelta",
                    2,
                    Role::User,
                    format!(
                        "Work items still ahead in this loop (do not start them now):\n{}",
                        remaining.join("\n")
                    ),
                    false,
                );
            }
        }
        let _ = current.phase == Phase::Done;
        entries
    }

    /// The output-format instruction of the current socket.
    fn contract_text(&self, refining: bool) -> String {
        let Some(socket) = self.current_socket() else {
            return String::new();
        };
        if refining {
            return "This is a refinement conversation. Reply in prose: propose, ask, and revise with the user. Do not produce the final output until the user runs `castlog continue`.".into();
        }
        let finalizing = self.current.as_ref().is_some_and(|c| c.finalizing);
        let lead = if finalizing {
            "The user ran `castlog continue`: produce the final output now, from the whole conversation.\n"
        } else {
            ""
        };
        if socket.parse == Parse::Text {
            return format!("{lead}Return a concise implementation summary in plain text.");
        }
        let fields = if socket.parallel {
            "workItems, satisfied, context, parallelSchedule"
        } else {
            "workItems, satisfied, context"
        };
        let mut lines = vec![format!(
            "{lead}Return exactly one JSON object and nothing else (no code fences). Allowed top-level fields: {fields}."
        )];
        let mut required = Vec::new();
        if handoff::needs_satisfied(socket) {
            required.push(
                "\"satisfied\" at $.satisfied: boolean, whether the work is accepted".to_owned(),
            );
        }
        if handoff::needs_work_items(socket) {
            required.push(
                "\"workItems\" at $.workItems: array of {\"title\", \"context\"} objects, both non-empty strings, nothing else"
                    .to_owned(),
            );
        }
        if socket.parallel {
            required.push(
                "\"parallelSchedule\" at $.parallelSchedule: {\"version\": 1, \"streams\": [{\"name\", \"workItemIndexes\"}]}, each work item's 0-based index in exactly one stream; each stream runs as a lane of its own, alongside the others, so put items that touch the same files in the same stream"
                    .to_owned(),
            );
        }
        for (_, source) in &socket.assign {
            if let Some(path) = source.trim().strip_prefix("$.")
                && path != "workItems"
            {
                required.push(format!("$.{path}: read by this socket's assignments"));
            }
        }
        if !required.is_empty() {
            lines.push(format!(
                "Required payload fields:\n- {}",
                required.join("\n- ")
            ));
        }
        lines.push(
            "Put explanations in \"context\" (a string); do not emit a \"text\" field.".into(),
        );
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_split_like_str_split_on_a_blank_line() {
        for text in [
            "",
            "one",
            "a\n\nb",
            "a\n\n\nb",
            "a\n\n\n\nb\n",
            "\n\na\nb\n\n",
            "x\ny\n\nz\n\n",
            "é\n\nü\n",
        ] {
            let want: Vec<&str> = text.split("\n\n").collect();
            assert_eq!(paragraphs(text).collect::<Vec<_>>(), want, "{text:?}");
        }
    }
}
