//! The casts list `serve` opens on: every cast with its status and loadout, filtered by
//! either and by the (UTC) day it was created.

use std::ops::ControlFlow;

use castlog_core::calendar::Date;
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
    /// Only casts created on this UTC day or later.
    pub from: Option<Date>,
    /// Only casts created on this UTC day or earlier.
    pub to: Option<Date>,
}

const DAY_MS: i64 = 86_400_000;

impl Filter {
    /// Reads a `from` or `to` day (`2026-12-01`); empty is no bound.
    pub fn day(text: Option<&str>, which: &str) -> Result<Option<Date>, String> {
        match text.map(str::trim).filter(|t| !t.is_empty()) {
            None => Ok(None),
            Some(t) => Date::parse(t)
                .map(Some)
                .map_err(|e| format!("{which}={t:?}: {e}; give a day as YYYY-MM-DD (UTC)")),
        }
    }

    fn keeps(&self, row: &CastRow) -> bool {
        let created = i64::try_from(row.created_ms).unwrap_or(i64::MAX);
        self.from.is_none_or(|d| created >= d.days() * DAY_MS)
            && self.to.is_none_or(|d| created < (d.days() + 1) * DAY_MS)
            && self
                .status
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
        let mut decoder = castlog_events::Decoder::new();
        log.scan(&head.cast, Seq::FIRST, &mut |record| {
            let event = decoder.event(&record);
            view.apply(&record, event.as_ref().ok());
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

/// `2026-12-01 17:03` (UTC) of a creation time.
fn created(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    let day = Date::from_days(ms.div_euclid(DAY_MS));
    let minutes = ms.rem_euclid(DAY_MS) / 60_000;
    format!("{day} {:02}:{:02}", minutes / 60, minutes % 60)
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
            label { "Created from " input type="date" name="from" value=(filter.from.map(|d| d.to_string()).unwrap_or_default()); }
            label { " to " input type="date" name="to" value=(filter.to.map(|d| d.to_string()).unwrap_or_default()); }
            button type="submit" { "Filter" }
        }
        p #count { (rows.len()) " casts" }
        table #casts {
            thead { tr { th { "Cast" } th { "Status" } th { "Loadout" } th { "Created (UTC)" } th { "Events" } th { "Recast of" } } }
            tbody {
                @for r in rows {
                    tr data-cast=(r.cast) data-status=(r.status) {
                        td { a href=(href(&r.cast)) { (r.cast) } }
                        td { span.tag { (r.status) } }
                        td { (r.loadout) }
                        td.mono { (created(r.created_ms)) }
                        td { (r.events) }
                        td.mono { (r.parent.as_deref().unwrap_or("")) }
                    }
                }
            }
        }
    };
    crate::page::page("castlog casts", &[], None, &body).into_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(created_ms: u64) -> CastRow {
        CastRow {
            cast: "c".into(),
            status: "completed".into(),
            loadout: "L".into(),
            events: 1,
            created_ms,
            parent: None,
        }
    }

    #[test]
    fn a_day_range_keeps_both_ends_whole() {
        let day = |t| Filter::day(Some(t), "from").unwrap();
        let filter = Filter {
            from: day("2026-12-01"),
            to: day("2026-12-02"),
            ..Filter::default()
        };
        let midnight = 20_788 * 86_400_000; // 2026-12-01T00:00Z
        assert!(!filter.keeps(&row(midnight - 1)));
        assert!(filter.keeps(&row(midnight)));
        assert!(filter.keeps(&row(midnight + 2 * 86_400_000 - 1)));
        assert!(!filter.keeps(&row(midnight + 2 * 86_400_000)));
        assert_eq!(created(midnight + 61 * 60_000), "2026-12-01 01:01");
        assert!(
            Filter::day(Some("12/01"), "from")
                .unwrap_err()
                .contains("YYYY-MM-DD")
        );
        assert_eq!(Filter::day(Some(""), "to"), Ok(None));
    }
}
