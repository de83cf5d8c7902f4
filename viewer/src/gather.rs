//! What a report shows, read from the log: a cast's full history (a recast's inherited
//! prefix first) folded once into the summary, the graph's traversal counts, the timeline by
//! visit and every prompt with its placements, lint findings and reply.
//!
//! Everything here comes from the projections (`CastView`, `Usage`, `TimelineLine`,
//! `PlacementAudit`, `prompt::messages`) and the chain check of `castlog_events::verify`;
//! nothing is read from outside the log.

use std::collections::BTreeMap;

use castlog_core::event::{Contexts, Event, Placement, Target};
use castlog_core::id::{CastId, Digest};
use castlog_core::loadout::Loadout;
use castlog_core::prompt::Message;
use castlog_events::{Decoder, EventLog, Recorded};
use castlog_projections::audit::{Finding, PlacementAudit};
use castlog_projections::history::with_history;
use castlog_projections::projection::Projection;
use castlog_projections::prompt;
use castlog_projections::timeline::TimelineLine;
use castlog_projections::views::{CastView, Usage};

use crate::error::ViewError;

/// One timeline line, with the tag that says what kind of moment it is (shown as a label, so
/// colour is never the only signal).
#[derive(Debug, Clone)]
pub struct Line {
    /// The line itself.
    pub line: TimelineLine,
    /// `repair`, `rework`, `revive`, ... or none for an ordinary event.
    pub tag: Option<&'static str>,
    /// The cast holding the event when it is an ancestor's (a recast's inherited prefix).
    pub inherited_from: Option<String>,
}

/// A visit of a socket and every event until the next visit starts (its edge, rework and
/// assignments belong to it), or the events before the first visit.
#[derive(Debug, Clone, Default)]
pub struct VisitGroup {
    /// The socket, none for the cast's own events before any visit.
    pub socket: Option<String>,
    /// The visit number.
    pub visit: u32,
    /// The work item, when the visit has one.
    pub item: Option<String>,
    /// The item's title, when recorded.
    pub item_label: Option<String>,
    /// The materia's label.
    pub materia: String,
    /// Its events.
    pub lines: Vec<Line>,
    /// Repair turns the visit took.
    pub repairs: u32,
    /// Rework reasons routed from this visit (to the socket named).
    pub reworks: Vec<(String, String)>,
    /// How the visit completed (`satisfied`), if it completed with a verdict.
    pub satisfied: Option<bool>,
}

impl VisitGroup {
    /// `Socket-4 WI-1 #1` (`Socket-1 - #1` outside loops), the key `diff` aligns steps by.
    pub fn key(&self) -> String {
        match &self.socket {
            None => "cast".to_owned(),
            Some(s) => format!(
                "{s} {} #{}",
                self.item.as_deref().unwrap_or("-"),
                self.visit
            ),
        }
    }
}

/// One dispatched prompt as the report shows it.
#[derive(Debug, Clone)]
pub struct PromptView {
    /// The seq of its `prompt_dispatched`.
    pub seq: u64,
    /// Socket, visit and turn.
    pub socket: String,
    /// The visit.
    pub visit: u32,
    /// The turn.
    pub turn: u32,
    /// The work item.
    pub item: Option<String>,
    /// The prompt's digest.
    pub hash: Digest,
    /// Whether it repeated an unanswered prompt.
    pub redispatch: bool,
    /// The messages as sent, or why they could not be rebuilt.
    pub messages: Result<Vec<Message>, String>,
    /// Every entry's placement.
    pub placements: Vec<Placement>,
    /// Lint findings by entry id.
    pub findings: BTreeMap<String, Vec<Finding>>,
    /// The reply to this turn, when one was recorded.
    pub reply: Option<String>,
}

/// An edge drawn in the loadout graph with how often the cast took it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphEdge {
    /// The source socket.
    pub from: String,
    /// The target socket, or `end`.
    pub to: String,
    /// Its condition (`always`, `satisfied`, `not_satisfied`, or `exit` for a loop exit).
    pub when: String,
    /// How often it was taken.
    pub taken: u32,
    /// Whether the loadout configures it (a loop exit is routed without an edge).
    pub configured: bool,
}

/// The loadout graph: sockets in layout order and edges.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Socket ids, entry first, then in the order they are reached.
    pub sockets: Vec<String>,
    /// Per socket, its materia label and the visits the cast made to it.
    pub labels: BTreeMap<String, (String, u32)>,
    /// Per socket, the work items whose path visits it.
    pub items: BTreeMap<String, Vec<String>>,
    /// The edges.
    pub edges: Vec<GraphEdge>,
}

/// The summary block.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The cast.
    pub cast: String,
    /// Its status (`CastView`).
    pub status: String,
    /// The loadout's name.
    pub loadout: String,
    /// The loadout hash (of the loadout the cast runs with last).
    pub loadout_hash: String,
    /// The task.
    pub request: String,
    /// The placement policy.
    pub policy: String,
    /// The working directory, when recorded.
    pub workdir: Option<String>,
    /// Who answered: the log records replies, not the agent's spec.
    pub replies: u64,
    /// Input and output tokens.
    pub tokens: (u64, u64),
    /// What the priced replies cost, in millionths of a US dollar (`None`: no reply was
    /// priced).
    pub cost_micros: Option<u64>,
    /// A parent's lanes, in plan order: name, lane cast, and how it was joined (`planned`
    /// until the barrier).
    pub lanes: Vec<(String, String, String)>,
    /// From the first to the last event, in ms.
    pub duration_ms: u64,
    /// Events of the whole history, and of the cast's own chain.
    pub events: (u64, u64),
    /// The head seq and hash.
    pub head: (u64, String),
    /// The fork parent, `cast@seq`.
    pub parent: Option<String>,
    /// The chain check: problems found (empty when the chain holds).
    pub verify: Vec<String>,
    /// Repairs and reworks (`CastView`).
    pub repairs: u64,
    /// Rework edges taken.
    pub reworks: u64,
}

/// Everything a report of one cast shows.
#[derive(Debug, Clone, Default)]
pub struct CastReport {
    /// The summary.
    pub summary: Summary,
    /// The graph.
    pub graph: Graph,
    /// The timeline by visit.
    pub visits: Vec<VisitGroup>,
    /// Every prompt.
    pub prompts: Vec<PromptView>,
}

fn tag_of(event: &Event) -> Option<&'static str> {
    Some(match event {
        Event::OutputRejected(e) if e.repair => "repair",
        Event::OutputRejected(_) => "rejected",
        Event::ReworkRouted(_) => "rework",
        Event::ReworkCleared(_) => "rework cleared",
        Event::CastRevived(_) => "revive",
        Event::AllowanceExtended(_) => "allowance",
        Event::AllowanceExhausted(_) => "exhausted",
        Event::CastAborted(_) => "abort",
        Event::CastResumed(_) => "resume",
        Event::CastForked(_) => "fork",
        Event::CastFailed(_) => "failed",
        Event::CastCompleted(_) => "completed",
        Event::PostClaimed(_) | Event::DayClaimed(_) => "claim",
        Event::PostStaged(_)
        | Event::PostRefused(_)
        | Event::PostResolved(_)
        | Event::PostOutcomeUnknown(_)
        | Event::PostResponseRecorded(_)
        | Event::PostResolutionInherited(_) => "post",
        Event::UserRefined(_) | Event::RefinementRecorded(_) | Event::FinalizeRequested(_) => {
            "turn"
        }
        Event::SteeringNoted(_) => "steer",
        Event::EdgeTaken(_) => "edge",
        Event::LanesPlanned(_) | Event::LaneStarted(_) | Event::LanesJoined(_) => "lanes",
        Event::ScopeActivated(_) => "scope",
        Event::WorkspaceCheckpointed(_) => "checkpoint",
        Event::BudgetWarning(_) | Event::BudgetRaised(_) => "budget",
        _ if event.kind().starts_with("tool_") => "tool",
        _ => return None,
    })
}

fn target(t: &Target) -> String {
    match t {
        Target::Socket(s) => s.to_string(),
        Target::End => "end".into(),
    }
}

/// Folds the history of one cast into its report. `contexts` decode other contexts' events.
struct Folder {
    cast: CastId,
    contexts: Contexts,
    view: CastView,
    usage: Usage,
    audit: PlacementAudit,
    loadout: Option<Loadout>,
    summary: Summary,
    visits: Vec<VisitGroup>,
    taken: BTreeMap<(String, String, String), u32>,
    replies: BTreeMap<(String, u32, u32), String>,
    first_ms: Option<u64>,
    last_ms: u64,
    /// Reads the history in order: a completion names the reply its output is.
    decoder: Decoder,
}

impl Folder {
    fn apply(&mut self, record: &Recorded) {
        let decoded = self.decoder.event(record);
        let event = decoded.as_ref().ok();
        self.view.apply(record, event);
        self.usage.apply(record, event);
        self.first_ms.get_or_insert(record.at_ms);
        self.last_ms = self.last_ms.max(record.at_ms);
        if self.visits.is_empty() {
            self.visits.push(VisitGroup::default());
        }
        if let Some(event) = event {
            self.audit.apply(record.seq.get(), event);
            self.note(event);
        }
        let line = Line {
            line: TimelineLine::of(record, decoded.as_ref(), self.contexts),
            tag: event.and_then(tag_of),
            inherited_from: (record.cast != self.cast).then(|| record.cast.to_string()),
        };
        if let Some(group) = self.visits.last_mut() {
            group.lines.push(line);
        }
    }

    fn note(&mut self, event: &Event) {
        match event {
            Event::CastStarted(e) => {
                self.summary.loadout = e.loadout_name.clone();
                self.summary.loadout_hash = e.loadout_hash.to_hex();
                self.summary.request = e.request.clone();
                self.summary.policy = e.policy.clone();
                self.summary.workdir = e.workdir.clone();
                self.loadout = Loadout::from_json(&e.loadout).ok();
            }
            Event::CastForked(e) => {
                if let Some(hash) = e.loadout_hash {
                    self.summary.loadout_hash = hash.to_hex();
                }
                if let Some(l) = e.loadout.as_ref().and_then(|l| Loadout::from_json(l).ok()) {
                    self.loadout = Some(l);
                }
            }
            Event::LanesPlanned(e) => {
                self.summary.lanes = e
                    .lanes
                    .iter()
                    .map(|l| (l.name.clone(), l.cast.to_string(), "planned".to_owned()))
                    .collect();
            }
            Event::LanesJoined(e) => {
                for (lane, out) in self.summary.lanes.iter_mut().zip(&e.lanes) {
                    lane.2 = out.status.as_str().to_owned();
                }
            }
            Event::SocketStarted(e) => self.visits.push(VisitGroup {
                socket: Some(e.socket.to_string()),
                visit: e.visit.get(),
                item: e.item.as_ref().map(ToString::to_string),
                item_label: e.item_label.clone(),
                materia: e.materia_label.clone(),
                ..VisitGroup::default()
            }),
            Event::OutputRejected(e) if e.repair => {
                if let Some(g) = self.visits.last_mut() {
                    g.repairs += 1;
                }
            }
            Event::SocketCompleted(e) => {
                if let Some(g) = self.visits.last_mut() {
                    g.satisfied = e.satisfied;
                }
            }
            Event::ReworkRouted(e) => {
                if let Some(g) = self.visits.last_mut() {
                    g.reworks.push((e.target.to_string(), e.reason.clone()));
                }
            }
            Event::EdgeTaken(e) => {
                let when = castlog_core::syntax::json_name(&e.when);
                *self
                    .taken
                    .entry((e.from.to_string(), target(&e.to), when))
                    .or_default() += 1;
            }
            Event::AgentReplied(e) => {
                if let Some(cost) = &e.cost {
                    let sum = self.summary.cost_micros.get_or_insert(0);
                    *sum = sum.saturating_add(cost.micros);
                }
                self.replies.insert(
                    (e.socket.to_string(), e.visit.get(), e.turn.get()),
                    e.text.clone(),
                );
            }
            _ => {}
        }
    }
}

impl CastReport {
    /// Reads the report of `cast` from `log`.
    pub fn gather<L: EventLog>(
        log: &L,
        cast: &CastId,
        contexts: Contexts,
    ) -> Result<CastReport, ViewError> {
        let head = log
            .head(cast)?
            .ok_or_else(|| ViewError::UnknownCast { cast: cast.clone() })?;
        let mut folder = Folder {
            cast: cast.clone(),
            contexts,
            view: CastView::default(),
            usage: Usage::default(),
            audit: PlacementAudit::default(),
            loadout: None,
            summary: Summary::default(),
            visits: Vec::new(),
            taken: BTreeMap::new(),
            replies: BTreeMap::new(),
            first_ms: None,
            last_ms: 0,
            decoder: Decoder::new(),
        };
        with_history(log, cast, &mut |history| {
            for record in history {
                folder.apply(&record);
            }
        })?;
        let verified = castlog_events::verify::verify_cast_in(log, &head, contexts)?;
        let prompts = prompts(log, cast, &folder)?;
        let graph = graph(&folder);
        let mut summary = folder.summary;
        summary.cast = cast.to_string();
        summary.status = folder.view.status.clone();
        summary.replies = folder.view.replies;
        summary.repairs = folder.view.repairs;
        summary.reworks = folder.view.reworks;
        summary.tokens = folder.usage.total;
        summary.duration_ms = folder.last_ms.saturating_sub(folder.first_ms.unwrap_or(0));
        summary.events = (folder.view.events, head.seq.get());
        summary.head = (head.seq.get(), head.hash.to_hex());
        summary.parent = head
            .parent
            .as_ref()
            .map(|p| format!("{}@{}", p.cast, p.seq));
        summary.verify = verified
            .problems
            .iter()
            .map(|p| format!("seq {}: {}", p.seq, p.message))
            .collect();
        Ok(CastReport {
            summary,
            graph,
            visits: folder.visits,
            prompts,
        })
    }

    /// The visit groups of a socket visit, `(socket, item, visit)` as `diff` keys them.
    pub fn visit(&self, key: &str) -> Option<&VisitGroup> {
        self.visits.iter().find(|g| g.key() == key)
    }
}

fn prompts<L: EventLog + ?Sized>(
    log: &L,
    cast: &CastId,
    folder: &Folder,
) -> Result<Vec<PromptView>, ViewError> {
    let text = |digest: &Digest| {
        log.get_blob(digest)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let mut findings: BTreeMap<(String, u32, String), Vec<Finding>> = BTreeMap::new();
    for f in folder.audit.lint(&text) {
        findings
            .entry((f.socket.to_string(), f.visit.get(), f.entry.clone()))
            .or_default()
            .push(f);
    }
    let policy = prompt::policy_of(log, cast).map_err(ViewError::Prompt)?;
    let mut views = Vec::with_capacity(folder.audit.prompts.len());
    for p in &folder.audit.prompts {
        let socket = p.socket.to_string();
        let messages = prompt::messages(log, &policy, &p.hash, &p.placements)
            .map_err(|e| format!("the prompt of seq {} could not be rebuilt: {e}", p.seq));
        let of_prompt = p
            .placements
            .iter()
            .filter_map(|pl| {
                findings
                    .get(&(socket.clone(), p.visit.get(), pl.entry.clone()))
                    .map(|f| (pl.entry.clone(), f.clone()))
            })
            .collect();
        views.push(PromptView {
            seq: p.seq,
            socket: socket.clone(),
            visit: p.visit.get(),
            turn: p.turn.get(),
            item: p.item.as_ref().map(ToString::to_string),
            hash: p.hash,
            redispatch: p.redispatch,
            messages,
            placements: p.placements.clone(),
            findings: of_prompt,
            reply: folder
                .replies
                .get(&(socket, p.visit.get(), p.turn.get()))
                .cloned(),
        });
    }
    Ok(views)
}

fn graph(folder: &Folder) -> Graph {
    let mut graph = Graph::default();
    let mut edges: Vec<GraphEdge> = Vec::new();
    if let Some(loadout) = &folder.loadout {
        // Entry first, then breadth first along the configured edges, then the rest by id.
        let mut order = vec![loadout.entry.to_string()];
        let mut at = 0;
        while at < order.len() {
            if let Some(socket) = loadout
                .sockets
                .get(&castlog_core::id::SocketId::new(order[at].as_str()))
            {
                for edge in &socket.edges {
                    if let castlog_core::loadout::EdgeTarget::Socket(to) = &edge.to
                        && !order.contains(&to.to_string())
                    {
                        order.push(to.to_string());
                    }
                }
            }
            at += 1;
        }
        for id in loadout.sockets.keys() {
            if !order.contains(&id.to_string()) {
                order.push(id.to_string());
            }
        }
        for (id, socket) in &loadout.sockets {
            graph
                .labels
                .insert(id.to_string(), (socket.label.clone(), 0));
            for edge in &socket.edges {
                let to = match &edge.to {
                    castlog_core::loadout::EdgeTarget::Socket(s) => s.to_string(),
                    castlog_core::loadout::EdgeTarget::End => "end".to_owned(),
                };
                let when = castlog_core::syntax::json_name(&edge.when);
                edges.push(GraphEdge {
                    taken: folder
                        .taken
                        .get(&(id.to_string(), to.clone(), when.clone()))
                        .copied()
                        .unwrap_or(0),
                    from: id.to_string(),
                    to,
                    when,
                    configured: true,
                });
            }
        }
        graph.sockets = order;
    }
    // Routes the cast took that no edge configures (a loop's exit) are drawn too.
    for ((from, to, when), count) in &folder.taken {
        if !edges
            .iter()
            .any(|e| &e.from == from && &e.to == to && &e.when == when)
        {
            edges.push(GraphEdge {
                from: from.clone(),
                to: to.clone(),
                when: when.clone(),
                taken: *count,
                configured: false,
            });
        }
    }
    for group in &folder.visits {
        let Some(socket) = &group.socket else {
            continue;
        };
        if !graph.sockets.contains(socket) {
            graph.sockets.push(socket.clone());
        }
        let label = graph
            .labels
            .entry(socket.clone())
            .or_insert_with(|| (group.materia.clone(), 0));
        label.1 = label.1.max(group.visit);
        if let Some(item) = &group.item {
            let items = graph.items.entry(socket.clone()).or_default();
            if !items.contains(item) {
                items.push(item.clone());
            }
        }
    }
    graph.edges = edges;
    graph
}
