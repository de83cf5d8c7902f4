//! Assembling the current turn's context entries.

use serde_json::Value;

use super::{CastState, Phase};
use crate::handoff;
use crate::loadout::{Parse, SocketKind};
use crate::prompt::{ContextEntry, Role, fence};
use crate::template;

/// A rework reason, prepared once per prompt for [`Reason::overlaps`]. It borrows the reason
/// and collapses it only when the key-word check cannot rule a text out: a prompt checks its
/// paragraphs against every other item's reason (rule 1), so most reasons never need it.
struct Reason<'a> {
    /// The reason, the trailing cut mark dropped.
    raw: &'a str,
    /// Its longest early word (see [`key_word`]); the raw and the collapsed reason have the
    /// same words.
    key: &'a str,
    /// `raw` with whitespace collapsed, made on first need.
    collapsed: std::cell::OnceCell<std::borrow::Cow<'a, str>>,
}

/// `text` with every run of whitespace made one space and the ends trimmed; borrowed when it
/// is already so (plain ASCII with single spaces, the common case).
pub(super) fn collapse(text: &str) -> std::borrow::Cow<'_, str> {
    let bytes = text.as_bytes();
    let plain = text.is_ascii()
        && !bytes.first().is_some_and(u8::is_ascii_whitespace)
        && !bytes.last().is_some_and(u8::is_ascii_whitespace)
        && !bytes
            .iter()
            .any(|b| b.is_ascii_whitespace() && *b != b' ' || *b == 0x0b)
        && !text.contains("  ");
    if plain {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(text.split_whitespace().collect::<Vec<_>>().join(" "))
    }
}

/// The longest of the first eight words of `text` (the first such on a tie). If a text
/// contains another once whitespace is collapsed, each word of the contained one appears in
/// the raw container, so a missing key word rules a containment out without collapsing.
fn key_word(text: &str) -> &str {
    text.split_whitespace()
        .take(8)
        .fold("", |best, w| if w.len() > best.len() { w } else { best })
}

impl<'a> Reason<'a> {
    fn new(reason: &'a str) -> Self {
        let raw = reason.trim_end_matches('…');
        Self {
            raw,
            key: key_word(raw),
            collapsed: std::cell::OnceCell::new(),
        }
    }

    /// Whether `text` carries this reason: one contains the other once whitespace is
    /// collapsed and a trailing cut mark is ignored (reasons are stored collapsed and
    /// bounded); texts under 20 bytes must be equal. A word (no whitespace) is in the
    /// collapsed reason exactly when it is in the raw one, so the key-word check reads `raw`.
    #[cfg(test)]
    fn overlaps(&self, text: &str) -> bool {
        self.carried_by(&Text::new(text))
    }

    /// [`Reason::overlaps`] of a text prepared once for all the reasons it is checked against.
    fn carried_by(&self, text: &Text<'_>) -> bool {
        if !text.raw.contains(self.key) && !self.raw.contains(text.key) {
            return false;
        }
        let text: &str = text.collapsed.get_or_init(|| collapse(text.raw));
        let reason: &str = self.collapsed.get_or_init(|| collapse(self.raw));
        if text.len() < 20 || reason.len() < 20 {
            return text == reason;
        }
        text.contains(reason) || reason.contains(text)
    }
}

/// A text checked against rework reasons: its key word found once, collapsed on first need.
struct Text<'a> {
    raw: &'a str,
    key: &'a str,
    collapsed: std::cell::OnceCell<std::borrow::Cow<'a, str>>,
}

impl<'a> Text<'a> {
    fn new(raw: &'a str) -> Self {
        Self {
            raw,
            key: key_word(raw),
            collapsed: std::cell::OnceCell::new(),
        }
    }
}

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
        // The rework reasons this prompt renders in its follow-up block; no other entry repeats
        // them (the same reason twice in one prompt reads as two complaints).
        let reasons: Vec<Reason> = self
            .rework
            .iter()
            .filter(|r| r.target == current.socket && r.item == current.item)
            .map(|r| Reason::new(&r.reason))
            .collect();
        // Other items' rejections (rule 1): reasons for another item, live or settled.
        let foreign: Vec<Reason> = if self.handoff >= 1 {
            self.rework
                .iter()
                .chain(&self.settled_rework)
                .filter(|r| r.item != current.item)
                .map(|r| Reason::new(&r.reason))
                .collect()
        } else {
            Vec::new()
        };
        if let Some(Value::String(context)) = self.data.get("context") {
            // Bounded: the most recent paragraphs only, so a prompt does not grow with the
            // length of the cast (the reference renders the whole history every turn).
            let all: Vec<&str> = paragraphs(context).collect();
            let skipped = all.len().saturating_sub(CONTEXT_PARAGRAPHS);
            let kept: Vec<&str> = all[skipped..]
                .iter()
                .copied()
                .filter(|paragraph| {
                    let text = Text::new(paragraph);
                    !reasons.iter().chain(&foreign).any(|r| r.carried_by(&text))
                })
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
            .filter(|p| {
                let text = Text::new(p);
                !reasons.iter().any(|r| r.carried_by(&text))
            })
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

    /// The reference behaviour both fast paths must keep.
    fn overlaps_slowly(text: &str, reason: &str) -> bool {
        let slow = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        let text = slow(text);
        let reason = slow(reason.trim_end_matches('…'));
        if text.len() < 20 || reason.len() < 20 {
            return text == reason;
        }
        text.contains(&reason) || reason.contains(&text)
    }

    #[test]
    fn collapse_borrows_only_text_that_is_already_collapsed() {
        for text in [
            "",
            " ",
            "plain words here",
            " lead",
            "trail ",
            "two  spaces",
            "tab\there",
            "new\nline",
            "vertical\u{b}tab",
            "non\u{a0}breaking",
            "é accents é",
        ] {
            let slow = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let fast = collapse(text);
            assert_eq!(fast, slow, "{text:?}");
            assert_eq!(
                matches!(fast, std::borrow::Cow::Borrowed(_)),
                slow == text && text.is_ascii(),
                "{text:?}"
            );
        }
    }

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

    #[test]
    fn the_key_word_check_never_changes_the_answer() {
        let reason = "verdict item-00011 try 1 rejected: the tests\nfail on  empty input …";
        let texts = [
            "[Socket-3 Eval] verdict item-00011 try 1 rejected: the tests fail on empty input and more",
            "[Socket-3 Eval] verdict item-00012 try 1 rejected: the tests fail on empty input",
            "verdict item-00011",
            "short",
            "try 1 rejected: the tests fail",
            "",
            "verdict item-00011 try 1 rejected: the tests fail on empty input …",
            "verdict\titem-00011  try 1\u{a0}rejected:\nthe tests fail on empty input",
            "tests\nfail on  empty",
            "  verdict item-00011 try 1 rejected: the tests\nfail on  empty input  ",
        ];
        for text in texts {
            for r in [
                reason,
                "short",
                "",
                "try 1 rejected: the tests fail",
                "  the tests\tfail on empty input and more words here …",
                "…",
            ] {
                assert_eq!(
                    Reason::new(r).overlaps(text),
                    overlaps_slowly(text, r),
                    "{text:?} / {r:?}"
                );
            }
        }
    }
}
