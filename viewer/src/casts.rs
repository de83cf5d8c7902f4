//! The casts list `serve` opens on: every cast with its status and loadout, filtered by both.

use std::ops::ControlFlow;

use castlog_core::event::Event;
use castlog_core::id::Seq;
use castlog_events::{CastHead, EventLog, StreamKind};
use castlog_projections::projection::Projection;
use castlog_projections::views::CastView;
use maud::html;

use crate::error::ViewError;

/// One row of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CastRow {
    /// The cast.
    pub cast: String,
    /// Its status (`CastView` over its own chain).
    pub status: String,
    /// Its loadout's name (a recast's is its root's).
    pub loadout: String,
    /// Events in its own chain.
    pub events: u64,
    /// When it was created, ms since the epoch.
    pub created_ms: u64,
    /// `cast@seq` of a recast's parent.
    pub parent: Option<String>,
}

/// What the list keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only casts with this status.
    pub status: Option<String>,
    /// Only casts of this loadout.
    pub loadout: Option<String>,
}

impl Filter {
    fn keeps(&self, row: &CastRow) -> bool {
        self.status
            .as_deref()
            .is_none_or(|s| s.is_empty() || s == row.status)
            && self
                .loadout
                .as_deref()
                .is_none_or(|l| l.is_empty() || l == row.loadout)
    }
}

fn loadout_of<L: EventLog + ?Sized>(log: &L, head: &CastHead) -> Result<String, ViewError> {
    let mut root = head.cast.clone();
    if let Some(last) = castlog_events::log::ancestors(log, &head.cast)?.pop() {
        root = last;
    }
    let first = log.read(&root, Seq::FIRST, Some(Seq::FIRST))?;
    Ok(match first.first().map(castlog_events::Recorded::event) {
        Some(Ok(Event::CastStarted(s))) => s.loadout_name,
        _ => String::new(),
    })
}

/// The casts of `log` (newest first) that `filter` keeps.
pub fn rows<L: EventLog + ?Sized>(log: &L, filter: &Filter) -> Result<Vec<CastRow>, ViewError> {
    let mut rows = Vec::new();
    for head in log.casts()? {
        if head.kind != StreamKind::Cast {
            continue;
        }
        let mut view = CastView::default();
        log.scan(&head.cast, Seq::FIRST, &mut |record| {
            view.apply(&record);
            ControlFlow::Continue(())
        })?;
        let row = CastRow {
            cast: head.cast.to_string(),
            status: view.status,
            loadout: loadout_of(log, &head)?,
            events: head.seq.get(),
            created_ms: head.created_ms,
            parent: head
                .parent
                .as_ref()
                .map(|p| format!("{}@{}", p.cast, p.seq)),
        };
        if filter.keeps(&row) {
            rows.push(row);
        }
    }
    rows.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(a.cast.cmp(&b.cast)));
    Ok(rows)
}

/// The list page. `href` makes a cast's link.
pub fn page(rows: &[CastRow], filter: &Filter, href: &dyn Fn(&str) -> String) -> String {
    let statuses = [
        "running",
        "awaiting_agent",
        "awaiting_refinement",
        "completed",
        "failed",
        "aborted",
    ];
    let body = html! {
        form.filter method="get" action="" {
            label { "Status "
                select name="status" {
                    option value="" { "(any)" }
                    @for s in statuses {
                        option value=(s) selected[filter.status.as_deref() == Some(s)] { (s) }
                    }
                }
            }
            label { "Loadout " input type="text" name="loadout" value=(filter.loadout.clone().unwrap_or_default()); }
            button type="submit" { "Filter" }
        }
        p #count { (rows.len()) " casts" }
        table #casts {
            thead { tr { th { "Cast" } th { "Status" } th { "Loadout" } th { "Events" } th { "Recast of" } } }
            tbody {
                @for r in rows {
                    tr data-cast=(r.cast) data-status=(r.status) {
                        td { a href=(href(&r.cast)) { (r.cast) } }
                        td { span.tag { (r.status) } }
                        td { (r.loadout) }
                        td { (r.events) }
                        td.mono { (r.parent.as_deref().unwrap_or("")) }
                    }
                }
            }
        }
    };
    crate::page::page("castlog casts", &[], None, &body).into_string()
}
