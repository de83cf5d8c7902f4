//! The file changes each step of a cast made, from its workspace checkpoints: what the diff
//! page shows of each cast beside the aligned steps. The changes are read through git by the
//! caller (`castlog diff --files` reads them the same way); this module only lays them out.

use maud::{Markup, html};

/// One checkpoint of a cast and the changes since the one before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepFiles {
    /// The socket whose completion (or start) was checkpointed.
    pub socket: String,
    /// Its visit.
    pub visit: u32,
    /// Whether this is the cast's first checkpoint (its start), which has no changes.
    pub start: bool,
    /// The checkpoint's tree.
    pub tree: String,
    /// `(status, path)` of each file changed since the previous checkpoint (`A`, `M`, `D`, ...).
    pub changes: Vec<(String, String)>,
    /// `git diff --stat` between the two trees.
    pub stat: String,
}

/// A cast's checkpoints in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CastFiles {
    /// The cast.
    pub cast: String,
    /// Its checkpoints.
    pub steps: Vec<StepFiles>,
}

fn status_word(status: &str) -> &'static str {
    match status.chars().next() {
        Some('A') => "added",
        Some('M') => "modified",
        Some('D') => "deleted",
        Some('R') => "renamed",
        Some('C') => "copied",
        Some('T') => "type changed",
        _ => "changed",
    }
}

/// The section of the file changes of each cast, step by step.
pub fn section(casts: &[CastFiles]) -> Markup {
    html! {
        section #files {
            h2 { "File changes by step" }
            p { "From the workspace checkpoints: each step's files against the checkpoint before it." }
            @for c in casts {
                div.cast-files data-cast=(c.cast) {
                    h3 { (c.cast) }
                    ol.lines {
                        @for s in &c.steps {
                            li data-step=(format!("{}:{}", s.socket, s.visit)) {
                                span.mono { (s.socket) ":" (s.visit) } " "
                                @if s.start {
                                    "start, tree " code { (s.tree.get(..12).unwrap_or(&s.tree)) }
                                } @else if s.changes.is_empty() {
                                    "no file changed"
                                } @else {
                                    (s.changes.len()) @if s.changes.len() == 1 { " file changed" } @else { " files changed" }
                                    ul {
                                        @for (status, path) in &s.changes {
                                            li data-status=(status) {
                                                span.tag { (status) " " (status_word(status)) } " " code { (path) }
                                            }
                                        }
                                    }
                                    @if !s.stat.is_empty() { pre.stat { (s.stat) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
