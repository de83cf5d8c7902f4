//! What differs between two aligned steps: prompt text, placements, output (unified text
//! diffs from the `similar` crate), routing and `state.data` writes.

use std::collections::BTreeSet;

use castlog_core::prompt::Policy;
use castlog_events::EventLog;
use serde::Serialize;
use serde_json::Value;
use similar::TextDiff;

use super::DiffError;
use super::step::Step;
use crate::prompt;

/// One difference between two aligned steps.
///
/// Text fields (`prompt`, `placements`, `output`) carry a unified `diff`; `routing` carries
/// both sides' edge (`FROM -> TO (WHEN)`) in `a` and `b`; `data` carries the `state.` path in
/// `path` and both sides' values (absent on a side that did not write it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// `prompt`, `placements`, `output`, `routing` or `data`.
    pub field: &'static str,
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

/// Every difference between two steps, in the order `prompt`, `placements`, `output`,
/// `routing`, then `data` by path.
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
