//! What differs between two aligned steps: prompt text, placements, tool calls (aligned by
//! their place in the visit), output (unified text diffs from the `similar` crate), routing
//! and `state.data` writes.

use std::collections::BTreeSet;

use castlog_core::prompt::Policy;
use castlog_events::EventLog;
use serde::Serialize;
use serde_json::Value;
use similar::TextDiff;

use super::DiffError;
use super::step::{Step, ToolStep};
use crate::prompt;

/// One difference between two aligned steps.
///
/// Text fields (`prompt`, `placements`, `output`) carry a unified `diff`; `routing` carries
/// both sides' edge (`FROM -> TO (WHEN)`) in `a` and `b`; `data` carries the `state.` path in
/// `path` and both sides' values (absent on a side that did not write it); `tool_call` carries
/// the call's place in the visit in `call` (1-based), each side's call in `a` and `b` (`{id,
/// tool, arguments, status}`, absent on a side that made no such call) and, when both have a
/// result and the results differ, a unified `diff` of the results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// `prompt`, `placements`, `tool_call`, `output`, `routing` or `data`.
    pub field: &'static str,
    /// The place of a `tool_call` change's call in the visit (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<usize>,
    /// A unified diff of a text field (`--- a`, `+++ b`, two lines of context).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The `state.` path a `data` change wrote.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Cast A's side of a `routing` or `data` change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a: Option<Value>,
    /// Cast B's side of a `routing` or `data` change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b: Option<Value>,
}

impl Change {
    fn text(field: &'static str, a: &str, b: &str) -> Self {
        Change {
            field,
            call: None,
            diff: Some(text_diff(a, b)),
            path: None,
            a: None,
            b: None,
        }
    }
}

/// The text of a step's prompts, rebuilt from the log (`=== turn N` then each message).
fn prompt_text(
    log: &(impl EventLog + ?Sized),
    policy: &Policy,
    step: &Step,
) -> Result<String, DiffError> {
    let mut text = String::new();
    for (turn, hash, placements) in &step.prompts {
        text.push_str(&format!("=== turn {turn}\n"));
        for m in prompt::messages(log, policy, hash, placements)? {
            text.push_str(&format!("--- {}\n{}\n", m.role.as_str(), m.content));
        }
    }
    Ok(text)
}

/// `text` ending in a newline.
fn lines(text: &str) -> std::borrow::Cow<'_, str> {
    if text.is_empty() || text.ends_with('\n') {
        text.into()
    } else {
        format!("{text}\n").into()
    }
}

/// A unified line diff with two lines of context, headed `a` and `b`.
pub fn text_diff(a: &str, b: &str) -> String {
    TextDiff::from_lines(a, b)
        .unified_diff()
        .context_radius(2)
        .header("a", "b")
        .to_string()
}

/// The log both sides' prompts are rebuilt from, with each cast's placement policy.
pub(super) struct Sides<'a, L: EventLog + ?Sized> {
    pub(super) log: &'a L,
    pub(super) a: std::borrow::Cow<'static, Policy>,
    pub(super) b: std::borrow::Cow<'static, Policy>,
}

/// Every difference between two steps, in the order `prompt`, `placements`, `tool_call` by
/// place, `output`, `routing`, then `data` by path.
pub(super) fn compare<L: EventLog + ?Sized>(
    sides: &Sides<'_, L>,
    a: &Step,
    b: &Step,
) -> Result<Vec<Change>, DiffError> {
    let mut changes = Vec::new();
    let digests = |s: &Step| s.prompts.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>();
    if digests(a) != digests(b) {
        let (ta, tb) = (
            prompt_text(sides.log, &sides.a, a)?,
            prompt_text(sides.log, &sides.b, b)?,
        );
        changes.push(Change::text("prompt", &ta, &tb));
    }
    if a.placements != b.placements {
        changes.push(Change::text(
            "placements",
            &a.placements.join("\n"),
            &b.placements.join("\n"),
        ));
    }
    for n in 0..a.tools.len().max(b.tools.len()) {
        let (ta, tb) = (a.tools.get(n), b.tools.get(n));
        if let (Some(x), Some(y)) = (ta, tb)
            && x.alike(y)
        {
            continue;
        }
        let diff = match (ta.and_then(|t| t.result()), tb.and_then(|t| t.result())) {
            // Compared as lines: a result without a final newline gets one.
            (Some(ra), Some(rb)) if ra != rb => Some(text_diff(&lines(ra), &lines(rb))),
            _ => None,
        };
        let side = |t: Option<&ToolStep>| {
            t.map(|t| {
                serde_json::json!({
                    "id": t.id,
                    "tool": t.tool,
                    "arguments": t.arguments,
                    "status": t.status(),
                })
            })
        };
        changes.push(Change {
            field: "tool_call",
            call: Some(n + 1),
            diff,
            path: None,
            a: side(ta),
            b: side(tb),
        });
    }
    if a.output != b.output {
        changes.push(Change::text(
            "output",
            a.output.as_deref().unwrap_or(""),
            b.output.as_deref().unwrap_or(""),
        ));
    }
    if a.routing != b.routing {
        changes.push(Change {
            field: "routing",
            call: None,
            diff: None,
            path: None,
            a: a.routing.clone().map(Value::String),
            b: b.routing.clone().map(Value::String),
        });
    }
    let paths: BTreeSet<&String> = a.data.keys().chain(b.data.keys()).collect();
    for path in paths {
        let (va, vb) = (a.data.get(path), b.data.get(path));
        if va != vb {
            changes.push(Change {
                field: "data",
                call: None,
                diff: None,
                path: Some(format!("state.{path}")),
                a: va.cloned(),
                b: vb.cloned(),
            });
        }
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_diff_is_unified_with_two_lines_of_context() {
        let diff = text_diff("1\n2\n3\n4\n5\n6\n", "1\n2\n3\nfour\n5\n6\n");
        assert_eq!(
            diff,
            "--- a\n+++ b\n@@ -2,5 +2,5 @@\n 2\n 3\n-4\n+four\n 5\n 6\n"
        );
    }
}
