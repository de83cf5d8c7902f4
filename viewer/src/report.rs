//! The report of one cast: summary, graph, timeline by visit, every prompt, and (with a second
//! cast) the diff.

use castlog_core::syntax::json_name;
use castlog_projections::diff::CastDiff;
use maud::{Markup, html};

use crate::gather::{CastReport, Line, PromptView, VisitGroup};
use crate::packed::packed;

/// Visits (or prompts) shown in one list before the list is cut into lists of this many, kept
/// packed until opened (`packed`).
const VISITS_PER_LIST: usize = 100;

/// What a page served live adds to the report.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// The URL of the cast's server-sent events.
    pub live: Option<String>,
    /// Where the refinement form posts, when the cast waits for a person and input is allowed.
    pub input: Option<String>,
    /// The link back to the casts list.
    pub back: Option<String>,
    /// The file changes each step of the casts made, for those that have checkpoints.
    pub files: Vec<crate::files::CastFiles>,
}

/// The whole report page of `report`, with the diff against `other` when given.
pub fn report(
    report: &CastReport,
    diff: Option<(&CastDiff, &CastReport)>,
    extras: &Extras,
) -> String {
    let s = &report.summary;
    let title = match diff {
        Some((d, _)) => format!("castlog diff: {} vs {}", d.a, d.b),
        None => format!("castlog report: {}", s.cast),
    };
    let mut nav = Vec::new();
    if let Some(back) = &extras.back {
        nav.push(("All casts", back.clone()));
    }
    if diff.is_some() {
        nav.push(("Diff", "#diff".to_owned()));
    }
    if !extras.files.is_empty() {
        nav.push(("Files", "#files".to_owned()));
    }
    nav.extend([
        ("Summary", "#summary".to_owned()),
        ("Graph", "#graph".to_owned()),
        ("Timeline", "#timeline".to_owned()),
        ("Prompts", "#prompts".to_owned()),
    ]);
    let body = html! {
        @if let Some((d, other)) = diff {
            (crate::diffview::diff(d, report, other))
        }
        @if !extras.files.is_empty() {
            (crate::files::section(&extras.files))
        }
        @if extras.live.is_some() {
            section #live aria-live="polite" {
                h2 { "Live" }
                p #live-state { "watching for new events" }
                ol #live-events .lines {}
            }
        }
        @if let Some(action) = &extras.input {
            (input_form(action))
        }
        (summary(report))
        section #graph {
            h2 { "Loadout graph" }
            (crate::graph::graph(&report.graph))
        }
        (timeline(&report.visits))
        (prompts(&report.prompts))
    };
    crate::page::page(&title, &nav, extras.live.as_deref(), &body).into_string()
}

fn input_form(action: &str) -> Markup {
    html! {
        section #input {
            h2 { "Answer the paused socket" }
            form.input method="post" action=(action) {
                p {
                    label for="refine-text" { "Refinement (every message refines; only Continue finalizes)" }
                    textarea #refine-text name="text" {}
                }
                p {
                    button type="submit" name="action" value="refine" { "Send refinement" }
                    " "
                    button type="submit" name="action" value="continue" { "Continue (finalize)" }
                }
            }
        }
    }
}

fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 120_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

fn summary(report: &CastReport) -> Markup {
    let s = &report.summary;
    html! {
        section #summary {
            h2 { "Summary" }
            dl.summary {
                dt { "Cast" } dd.mono #cast-id { (s.cast) }
                dt { "Status" } dd #status { span.tag { (s.status) } }
                dt { "Loadout" } dd { (s.loadout) " " code title="loadout hash" { (s.loadout_hash) } }
                dt { "Task" } dd { (s.request) }
                dt { "Agent" } dd { (s.replies) " replies recorded (the log keeps replies, not the agent's spec)" }
                dt { "Policy" } dd { (s.policy) }
                dt { "Working directory" } dd.mono { (s.workdir.as_deref().unwrap_or("not recorded")) }
                dt { "Tokens" } dd { (s.tokens.0 + s.tokens.1) " (" (s.tokens.0) " in, " (s.tokens.1) " out)" }
                dt { "Cost" } dd #cost {
                    @match s.cost_micros {
                        Some(micros) => { (castlog_core::event::dollars(micros)) }
                        None => { "not priced (no `prices` entry for its models)" }
                    }
                }
                @if !s.lanes.is_empty() {
                    dt { "Lanes" }
                    dd #lanes {
                        ul { @for (name, cast, status) in &s.lanes {
                            li data-lane=(name) { "lane " (name) " " code { (cast) } " " span.tag { (status) } }
                        } }
                    }
                }
                dt { "Duration" } dd { (duration(s.duration_ms)) }
                dt { "Events" } dd { (s.events.0) " in its history, " (s.events.1) " in its own chain" }
                dt { "Head" } dd.mono { (s.head.0) " " (s.head.1) }
                @if let Some(parent) = &s.parent {
                    dt { "Recast of" } dd.mono { (parent) }
                }
                dt { "Repairs / reworks" } dd { (s.repairs) " repairs, " (s.reworks) " reworks" }
                dt { "Verify" }
                dd #verify {
                    @if s.verify.is_empty() {
                        span.ok { "✓ chain ok" }
                    } @else {
                        span.bad { "✗ " (s.verify.len()) " problems" }
                        ul { @for p in &s.verify { li { (p) } } }
                    }
                }
            }
        }
    }
}

fn line(l: &Line) -> Markup {
    html! {
        li data-kind=(l.line.kind) .inherited[l.inherited_from.is_some()] {
            span.seq { (l.line.seq) }
            @if let Some(tag) = l.tag { span class=(format!("tag tag-{}", tag.replace(' ', "-"))) { (tag) } }
            span.kind.mono { (l.line.kind) }
            " " (l.line.summary)
            @if let Some(from) = &l.inherited_from { " (inherited from " (from) ")" }
        }
    }
}

fn visit(g: &VisitGroup) -> Markup {
    let key = g.key();
    html! {
        section.visit data-key=(key) data-socket=[g.socket.as_deref()] {
            h3 {
                @match &g.socket {
                    Some(_) => { (key) " · " (g.materia) }
                    None => { "Cast events before the first socket" }
                }
                @if let Some(label) = &g.item_label { " · " em { (label) } }
                @if g.repairs > 0 { " " span.tag.tag-repair { (g.repairs) " repair" } }
                @if !g.reworks.is_empty() { " " span.tag.tag-rework { "rework" } }
                @match g.satisfied {
                    Some(true) => { " " span.ok { "✓ satisfied" } }
                    Some(false) => { " " span.bad { "✗ not satisfied" } }
                    None => {}
                }
            }
            @for (to, reason) in &g.reworks {
                p.reason { strong { "Rework to " (to) ": " } span.rework-reason { (reason) } }
            }
            details {
                summary { (g.lines.len()) " events" }
                ol.lines { @for l in &g.lines { (line(l)) } }
            }
        }
    }
}

fn timeline(visits: &[VisitGroup]) -> Markup {
    html! {
        section #timeline {
            h2 { "Timeline" }
            p { (visits.iter().filter(|g| g.socket.is_some()).count()) " socket visits, by item and visit. "
                "Tags name repairs, reworks, revives, aborts, resumes, posts, claims and tool calls." }
            @if visits.len() <= VISITS_PER_LIST {
                @for g in visits { (visit(g)) }
            } @else {
                @for (n, chunk) in visits.chunks(VISITS_PER_LIST).enumerate() {
                    @let inner = html! { @for g in chunk { (visit(g)) } };
                    details.chunk data-z=(packed(&inner.into_string())) {
                        summary { "Visits " (n * VISITS_PER_LIST + 1) "–" (n * VISITS_PER_LIST + chunk.len())
                            ": " (chunk.first().map(VisitGroup::key).unwrap_or_default()) " … "
                            (chunk.last().map(VisitGroup::key).unwrap_or_default()) }
                    }
                }
            }
        }
    }
}

/// A destination in words.
pub fn destination(name: &str) -> &str {
    match name {
        "system_fold" => "system fold",
        "inline" => "inline",
        "trailing" => "trailing mandate",
        "dropped" => "dropped",
        other => other,
    }
}

fn prompt(p: &PromptView) -> Markup {
    let found: usize = p.findings.values().map(Vec::len).sum();
    html! {
        details.prompt-view #(format!("prompt-{}", p.seq)) data-socket=(p.socket) data-visit=(p.visit) data-turn=(p.turn) {
            summary {
                (p.socket) " #" (p.visit) " turn " (p.turn)
                @if let Some(item) = &p.item { " (" (item) ")" }
                " · seq " (p.seq) " · " (p.placements.len()) " entries"
                @if found > 0 { " · " span.tag.tag-rework { (found) " lint findings" } }
                @if p.redispatch { " · " span.tag { "re-dispatch" } }
            }
            div.prompt {
                div {
                    h4 { "Messages as sent " code { (p.hash.short()) } }
                    @match &p.messages {
                        Ok(messages) => {
                            @for m in messages {
                                div.message {
                                    span.msg-role { (m.role.as_str()) }
                                    pre { (m.content) }
                                }
                            }
                        }
                        Err(why) => { p.bad { (why) } }
                    }
                    h4 { "Entries" }
                    @for pl in &p.placements {
                        @let dest = json_name(&pl.destination);
                        div class=(format!("entry dest-{dest}")) data-entry=(pl.entry) data-destination=(dest) {
                            span.tag.destination { (destination(&dest)) " #" (pl.position) }
                            code { (pl.entry) }
                            " · rule " code.rule { (pl.rule) }
                            " · " (pl.source_type) " · layer L" (pl.layer) " · " (pl.role)
                            @for f in p.findings.get(&pl.entry).into_iter().flatten() {
                                div.finding { span.tag { "lint " (f.rule) } " " (f.message) }
                            }
                        }
                    }
                }
                div {
                    h4 { "Reply" }
                    @match &p.reply {
                        Some(reply) => { pre.reply { (reply) } }
                        None => { p { em { "no reply recorded" } } }
                    }
                }
            }
        }
    }
}

fn prompts(prompts: &[PromptView]) -> Markup {
    html! {
        section #prompts {
            h2 { "Prompts" }
            p { (prompts.len()) " prompts. Each entry is marked by its destination (system fold, inline, trailing mandate) "
                "and the rule that put it there, with its source type and layer; lint findings sit beside the entry they name." }
            @if prompts.len() <= VISITS_PER_LIST {
                @for p in prompts { (prompt(p)) }
            } @else {
                @for (n, chunk) in prompts.chunks(VISITS_PER_LIST).enumerate() {
                    @let inner = html! { @for p in chunk { (prompt(p)) } };
                    details.chunk data-z=(packed(&inner.into_string())) {
                        summary { "Prompts " (n * VISITS_PER_LIST + 1) "–" (n * VISITS_PER_LIST + chunk.len())
                            ": " (chunk.first().map(|p| format!("{} #{}", p.socket, p.visit)).unwrap_or_default()) " … "
                            (chunk.last().map(|p| format!("{} #{}", p.socket, p.visit)).unwrap_or_default()) }
                    }
                }
            }
        }
    }
}
