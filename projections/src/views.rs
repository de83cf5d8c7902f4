//! `CastView`, `Usage` and `Timeline`: small read models of a cast.

use std::collections::BTreeMap;

use castlog_core::event::Event;
use castlog_events::Recorded;
use serde::{Deserialize, Serialize};

use crate::projection::Projection;

/// Where a cast stands, from its events alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CastView {
    /// `running`, `awaiting_agent`, `awaiting_refinement`, `completed`, `failed`, `aborted`.
    pub status: String,
    /// The socket of the visit in progress.
    pub socket: Option<String>,
    /// Work item of the visit in progress; `None` outside loops or between visits.
    pub item: Option<String>,
    /// Visits per socket.
    pub visits: BTreeMap<String, u32>,
    /// Events folded.
    pub events: u64,
    /// Prompts dispatched.
    pub prompts: u64,
    /// Replies received.
    pub replies: u64,
    /// Socket completions.
    pub completions: u64,
    /// Repair turns.
    pub repairs: u64,
    /// Rework edges taken.
    pub reworks: u64,
}

impl Projection for CastView {
    const NAME: &'static str = "cast_view";
    // 2: checkpoints are sealed.
    const VERSION: u32 = 2;

    fn apply(&mut self, _: &Recorded, event: Option<&Event>) {
        self.events += 1;
        let Some(event) = event else { return };
        match event {
            Event::CastStarted(_) | Event::CastForked(_) | Event::CastRevived(_) => {
                self.status = "running".into();
            }
            Event::SocketStarted(e) => {
                self.socket = Some(e.socket.to_string());
                self.item = e.item.as_ref().map(|i| i.to_string());
                self.visits.insert(e.socket.to_string(), e.visit.get());
                self.status = "running".into();
            }
            Event::PromptDispatched(_) => {
                self.prompts += 1;
                self.status = "awaiting_agent".into();
            }
            Event::AgentReplied(_) => {
                self.replies += 1;
                self.status = "running".into();
            }
            Event::RefinementRecorded(_) => self.status = "awaiting_refinement".into(),
            Event::OutputRejected(e) if e.repair => self.repairs += 1,
            Event::SocketCompleted(_) => self.completions += 1,
            Event::ReworkRouted(_) => self.reworks += 1,
            Event::CastCompleted(_) => self.status = "completed".into(),
            Event::CastFailed(_) => self.status = "failed".into(),
            Event::CastAborted(_) => self.status = "aborted".into(),
            _ => {}
        }
    }
}

/// Tokens by socket, materia and item.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input and output tokens of the whole cast.
    pub total: (u64, u64),
    /// Input and output tokens per socket id.
    pub by_socket: BTreeMap<String, (u64, u64)>,
    /// Input and output tokens per materia name.
    pub by_materia: BTreeMap<String, (u64, u64)>,
    /// Per work item.
    pub by_item: BTreeMap<String, (u64, u64)>,
    #[serde(default)]
    current: Option<(String, String, Option<String>)>,
}

impl Projection for Usage {
    const NAME: &'static str = "usage";
    // 2: checkpoints are sealed.
    const VERSION: u32 = 2;

    fn apply(&mut self, _: &Recorded, event: Option<&Event>) {
        let Some(event) = event else { return };
        match event {
            Event::SocketStarted(e) => {
                self.current = Some((
                    e.socket.to_string(),
                    e.materia.to_string(),
                    e.item.as_ref().map(|i| i.to_string()),
                ));
            }
            Event::AgentReplied(e) => {
                let Some(u) = e.usage else { return };
                let add = |slot: &mut (u64, u64)| {
                    slot.0 = slot.0.saturating_add(u.input);
                    slot.1 = slot.1.saturating_add(u.output);
                };
                add(&mut self.total);
                if let Some((socket, materia, item)) = &self.current {
                    add(self.by_socket.entry(socket.clone()).or_default());
                    add(self.by_materia.entry(materia.clone()).or_default());
                    if let Some(item) = item {
                        add(self.by_item.entry(item.clone()).or_default());
                    }
                }
            }
            _ => {}
        }
    }
}

/// The timeline's length: one line per event. The lines themselves are made as they are
/// printed (`show`, [`crate::timeline::TimelineLine::of`]), never kept: a summary needs only
/// how many there are, and a line kept per event grew with the cast (and was saved whole as
/// its checkpoint).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    /// How many lines the timeline has.
    pub lines: u64,
}

impl Projection for Timeline {
    const NAME: &'static str = "timeline";
    // 2: checkpoints are sealed. 3: held prompts, fork re-dispatches and resolutions worded.
    // 4: an undecodable payload's reason, failure classes, edge conditions and skip reasons
    // in words. 5: the line count only, not the lines.
    const VERSION: u32 = 5;

    fn apply(&mut self, _: &Recorded, _: Option<&Event>) {
        self.lines += 1;
    }
}
