//! Two casts side by side: the steps aligned by (socket, item, visit) as
//! `projections::diff::compare` aligns them, each with its status written out, the first step
//! that differs marked, and the text diffs of prompts and outputs with routing and state
//! changes.

use castlog_projections::diff::{CastDiff, StepDiff, StepStatus};
use maud::{Markup, html};

use crate::gather::{CastReport, VisitGroup};

/// Same steps shown one by one before they are folded into a list opened on demand.
const SAME_RUN_SHOWN: usize = 3;

fn status_label(status: StepStatus) -> &'static str {
    match status {
        StepStatus::Same => "= same",
        StepStatus::Changed => "≠ changed",
        StepStatus::OnlyA => "only in a",
        StepStatus::OnlyB => "only in b",
    }
}

fn text_diff(diff: &str) -> Markup {
    html! {
        pre.text-diff {
            @for l in diff.lines() {
                @if l.starts_with('+') { span.diff-add { (l) } }
                @else if l.starts_with('-') { span.diff-del { (l) } }
                @else { span.diff-ctx { (l) } }
            }
        }
    }
}

fn side(group: Option<&VisitGroup>) -> Markup {
    html! {
        @match group {
            Some(g) => {
                div.side {
                    (g.materia)
                    @match g.satisfied {
                        Some(true) => { " · " span.ok { "✓ satisfied" } }
                        Some(false) => { " · " span.bad { "✗ not satisfied" } }
                        None => {}
                    }
                    @if g.repairs > 0 { " · " span.tag.tag-repair { (g.repairs) " repair" } }
                    @for (to, reason) in &g.reworks {
                        p.reason { strong { "Rework to " (to) ": " } (reason) }
                    }
                }
            }
            None => { div.side { em { "no such step" } } }
        }
    }
}

fn step(s: &StepDiff, a: &CastReport, b: &CastReport, first: bool) -> Markup {
    let status = s.status.as_str();
    html! {
        section.step.first-divergence[first] id=[first.then_some("first-divergence")]
            data-key=(s.key) data-status=(status) {
            h3 {
                @if first { span.marker { "▶ first divergence: " } }
                (s.key) " " span class=(format!("status-{status}")) { "[" (status_label(s.status)) "]" }
            }
            div.sides {
                div { strong { "a: " (a.summary.cast) } (side(a.visit(&s.key))) }
                div { strong { "b: " (b.summary.cast) } (side(b.visit(&s.key))) }
            }
            @for c in &s.changes {
                div.change data-field=(c.field) {
                    h4 { (c.field) @if let Some(n) = c.call { " " code { "call " (n) } } @if let Some(p) = &c.path { " " code { (p) } } }
                    @if let Some(d) = &c.diff { (text_diff(d)) }
                    @if c.a.is_some() || c.b.is_some() {
                        div.sides {
                            div { "a: " code { (c.a.as_ref().map(ToString::to_string).unwrap_or_else(|| "none".into())) } }
                            div { "b: " code { (c.b.as_ref().map(ToString::to_string).unwrap_or_else(|| "none".into())) } }
                        }
                    }
                }
            }
        }
    }
}

/// The diff section of `diff` between the casts `a` and `b` report.
pub fn diff(diff: &CastDiff, a: &CastReport, b: &CastReport) -> Markup {
    let first = diff.steps.iter().position(|s| s.status != StepStatus::Same);
    // Runs of same steps longer than a few are folded, so a long diff stays quick to open.
    let mut blocks: Vec<(bool, Vec<(usize, &StepDiff)>)> = Vec::new();
    for (i, s) in diff.steps.iter().enumerate() {
        let same = s.status == StepStatus::Same;
        match blocks.last_mut() {
            Some((was_same, run)) if *was_same == same => run.push((i, s)),
            _ => blocks.push((same, vec![(i, s)])),
        }
    }
    html! {
        section #diff {
            h2 { "Diff: " (diff.a) " (a) vs " (diff.b) " (b)" }
            p #diff-summary { (diff.summary(&a.summary.status, &b.summary.status)) }
            p { "Common prefix: " (diff.common_prefix) " events." }
            @if let Some(d) = &diff.first_divergence {
                p #divergence-event {
                    span.marker { "First differing event at position " (d.position) ": " }
                    "a " (d.a.as_ref().map(|e| format!("{} {}", e.kind, e.summary)).unwrap_or_else(|| "(ended)".into()))
                    " / b " (d.b.as_ref().map(|e| format!("{} {}", e.kind, e.summary)).unwrap_or_else(|| "(ended)".into()))
                }
            }
            @if let Some(l) = &diff.loadouts {
                p.reason {
                    "Loadouts differ: a " (l.a.name) " " code { (l.a.hash.short()) }
                    " / b " (l.b.name) " " code { (l.b.hash.short()) }
                    "; sockets changed: " (if l.sockets_changed.is_empty() { "none".to_owned() } else { l.sockets_changed.join(", ") })
                    "; settings changed: " (if l.settings_changed.is_empty() { "none".to_owned() } else { l.settings_changed.join(", ") })
                }
            }
            @for (same, run) in &blocks {
                @if *same && run.len() > SAME_RUN_SHOWN {
                    details.same-run {
                        summary { (run.len()) " steps the same: " (run[0].1.key) " … " (run[run.len() - 1].1.key) }
                        @for (i, s) in run { (step(s, a, b, Some(*i) == first)) }
                    }
                } @else {
                    @for (i, s) in run { (step(s, a, b, Some(*i) == first)) }
                }
            }
        }
    }
}
