//! The cast machine: [`CastState`] folded from events with [`CastState::evolve`], and decisions
//! (`decide`, in [`decide`](mod@decide)) that turn inputs into new events.
//!
//! `evolve` is the only code that changes state, and it never fails: every event, once recorded,
//! is applied. Decisions run on a scratch copy of the state and apply each event they emit as
//! they go, so a decision sees exactly the state its own events produce and a replay of the log
//! reproduces it. [`next`] says, after any fold, which effect the cast waits for (the
//! driver performs it and feeds the result back). [`snapshot`] encodes a state (with its loadout) so time travel can start
//! from a recent one instead of the first event.

mod begin;
mod budget;
mod complete;
pub mod decide;
mod evolve;
mod lanes;
pub mod next;
mod post;
mod reasons;
pub mod snapshot;
mod tools;
mod turn;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::claims::Claim;
use crate::event::{Allowance, CastFailed, ReworkRouted, Usage};
use crate::id::{CastId, ClaimId, Digest, DispatchKey, ItemKey, Seq, SocketId, Turn, Visit};
use crate::loadout::Loadout;

pub use begin::StartError;
pub(crate) use complete::bounded;
pub use decide::{Decision, Rejection};
pub use next::{Inconsistent, Next};
use snapshot::empty_loadout;

/// Where a cast stands, as the CLI reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Between steps (a utility to run, a dispatch due).
    Running,
    /// A prompt is out and unanswered.
    AwaitingAgent,
    /// A multi-turn socket waits for `refine` or `continue`.
    AwaitingRefinement,
    /// Reached the end of the graph.
    Completed,
    /// Stopped on an error or an exhausted allowance.
    Failed,
    /// Aborted by a person.
    Aborted,
}

impl Status {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::AwaitingAgent => "awaiting_agent",
            Status::AwaitingRefinement => "awaiting_refinement",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Aborted => "aborted",
        }
    }

    /// Whether no further step happens without a person (completed, failed, aborted).
    pub fn is_stopped(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Aborted)
    }
}

/// What the current socket visit is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// A dispatch is scheduled and not yet due.
    AwaitingDispatch,
    /// A prompt is out; the agent has not answered.
    AwaitingReply,
    /// A multi-turn draft waits for the person.
    AwaitingRefinement,
    /// A utility must run.
    RunningUtility,
    /// A post socket waits for the driver to check the ledger and claim (`StartPost`).
    AwaitingPost,
    /// The tool calls of a reply are recorded and not all have an outcome: the first without
    /// one runs next (`Next::RunTool`).
    RunningTools,
    /// A post is claimed and its send outcome is not known: the sender is running, or it failed
    /// without saying, or the process stopped. Nothing resends it; a person resolves the claim.
    AwaitingPostOutcome,
    /// A parallel generator's lanes run (child casts); the visit waits for them all to be
    /// terminal (`Next::RunLanes`), then joins them.
    RunningLanes,
    /// The visit is complete (routing happened or the cast stopped).
    Done,
}

/// One line of a multi-turn transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptLine {
    /// `assistant` for drafts, `user` for refinements (serialized as those words).
    pub role: crate::prompt::Role,
    /// Draft or refinement, verbatim.
    pub text: String,
}

/// The socket visit in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Current {
    /// Socket the visit runs.
    pub socket: SocketId,
    /// Visit number of this socket in the cast (1-based).
    pub visit: Visit,
    /// Work item the visit runs for; `None` outside loops.
    pub item: Option<ItemKey>,
    /// The item's label.
    pub item_label: Option<String>,
    /// Attempt of this (socket, item).
    pub attempt: u32,
    /// The last dispatched turn (0 before the first).
    pub turn: Turn,
    /// What it waits for.
    pub phase: Phase,
    /// Hash of the last dispatched prompt's messages; `None` before the first dispatch.
    pub prompt: Option<Digest>,
    /// Its placements (the prompt is rebuilt from them and the entry blobs); shared, so a
    /// copy of the visit does not copy them.
    #[serde(default)]
    pub placements: Arc<Vec<crate::event::Placement>>,
    /// Multi-turn drafts and refinements, in order.
    pub transcript: Vec<TranscriptLine>,
    /// Same-socket repair turns used.
    pub repairs: u32,
    /// The issues the next repair turn must fix.
    pub repair_feedback: Option<String>,
    /// Whether the visit is finalizing a multi-turn refinement.
    pub finalizing: bool,
    /// A reply recorded but not yet committed (a budget stop happened in between).
    pub pending_reply: Option<String>,
    /// The seq of that reply when it is an event of this cast (not of a fork's parent): the
    /// visit's `socket_completed` names it instead of repeating the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_reply_at: Option<Seq>,
    /// Transient agent failures since the last dispatch.
    pub transient_failures: u32,
    /// The last agent failure was an interruption.
    pub interrupted: bool,
    /// The visit was revived or resumed: its next prompt carries a recovery note.
    pub recovering: bool,
    /// The prompt in flight was recorded but never sent (no agent was given).
    #[serde(default, skip_serializing_if = "crate::event::is_false")]
    pub held: bool,
    /// The claim a post socket's visit made (or waits on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimId>,
    /// The tool calls of this visit so far, in order, with their outcomes (bounded by
    /// `limits.maxToolCalls` and its revives).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallState>,
    /// Calls a recorded reply asked for and not yet recorded as `tool_called` (a stop came in
    /// between: the token budget or the tool-call allowance ran out; revive records them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requested_calls: Vec<crate::event::ToolRequest>,
}

/// One tool call of a visit, as the prompts show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallState {
    /// The call as the agent asked for it.
    pub request: crate::event::ToolRequest,
    /// The turn whose reply asked for it.
    pub turn: Turn,
    /// Its outcome, once recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ToolOutcome>,
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ToolOutcome {
    /// It ran (or was refused) and this is what the agent is shown.
    Finished {
        /// The result text.
        output: String,
        /// The result is an error.
        #[serde(default, skip_serializing_if = "crate::event::is_false")]
        error: bool,
    },
    /// It was cut off by a crash and not run again: its effect is unknown.
    Interrupted,
}

/// A revivable allowance's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowanceState {
    /// Limit from the loadout, before any revive.
    pub original: u64,
    /// The limit in force (grows by `original` per revive).
    pub effective: u64,
    /// How often it was extended.
    pub revives: u32,
}

/// The no-advance guard's tracker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoAdvance {
    /// Work item whose cycles are counted; `None` outside loops.
    pub item: Option<ItemKey>,
    /// Closed cycles counted.
    pub count: u32,
    /// Sockets visited since the last closed cycle.
    pub path: Vec<SocketId>,
}

/// The state of one cast: a fold of its events.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CastState {
    /// Id of the cast the events belong to.
    pub cast: CastId,
    /// The frozen loadout (not in the state's JSON; a snapshot carries it beside the state).
    #[serde(skip, default = "empty_loadout")]
    pub loadout: Arc<Loadout>,
    /// Hash of the frozen loadout (`cast_started`'s `loadout_hash`, or a recast's new one).
    pub loadout_hash: Digest,
    /// What the person asked the cast to do (`castlog run`'s request).
    pub request: String,
    /// The placement policy's name.
    pub policy: String,
    /// The placement policy itself when the cast runs one from a file (`cast_started`
    /// records its document); absent for a built-in policy, which `policy` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_document: Option<Arc<crate::prompt::Policy>>,
    /// The fence version of its prompts (`prompt::fence`; 0: unfenced, a cast recorded
    /// before fencing). A recast inherits it with the rest of the parent's state.
    #[serde(default)]
    pub fence: u32,
    /// Its handoff-context rule (`cast_started`'s `handoff`; 0: a cast recorded before the
    /// rule, or a legacy one). A recast inherits it with the rest of the parent's state.
    #[serde(default)]
    pub handoff: u32,
    /// Its pi-materia conformance rules (`cast_started`'s `conformance`, see [`CONFORMANCE`];
    /// 0: a cast recorded before them). A recast inherits them with the rest of the state.
    #[serde(default)]
    pub conformance: u32,
    /// The directory tool calls act in (`cast_started`'s `workdir`); absent: where the
    /// command that drives the cast runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// The execution scope a utility activated (`scope_activated`), in force for every later
    /// socket; absent: the cast's own working directory (its base scope). A recast inherits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<crate::event::ExecutionScope>,
    /// The tool scopes of its materia (`cast_started`'s `tools`); a recast inherits them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_scopes: BTreeMap<crate::id::MateriaName, Value>,
    /// Where it stands.
    pub status: Status,
    /// Visit in progress; `None` before the first and after the cast stopped.
    pub current: Option<Current>,
    /// `state.data`.
    pub data: Value,
    /// Loop cursors by name (`workItemIndex`), each the 0-based index of the current item.
    pub cursors: BTreeMap<String, u64>,
    /// Visits per socket.
    pub visits: BTreeMap<SocketId, u32>,
    /// Attempts per `socket@item`.
    pub attempts: BTreeMap<String, u32>,
    /// Traversals per scoped edge key `from->to@item`.
    pub traversals: BTreeMap<String, u32>,
    /// Allowances per key.
    pub allowances: BTreeMap<String, AllowanceState>,
    /// The no-advance guard.
    pub no_advance: NoAdvance,
    /// Whether the last edge taken had a traversal allowance (such re-entries are not counted
    /// by the no-advance guard).
    pub last_edge_budgeted: bool,
    /// Live rework entries.
    pub rework: Vec<ReworkRouted>,
    /// The reasons of rework entries cleared since, with their items, most recent last (under
    /// handoff rule 1 only): the handoff context may still hold them, and another item's
    /// prompt must not show them. Bounded by the paragraphs that context keeps, beyond which
    /// an older reason cannot be in it any more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settled_rework: Vec<ReworkRouted>,
    /// Refinement turns per `socket@item#visit`.
    pub refinement_turns: BTreeMap<String, u32>,
    /// Raw text of the last completed visit's output (template `lastOutput`).
    pub last_output: Option<String>,
    /// The last committed JSON.
    pub last_json: Option<Value>,
    /// The seq and socket of the completion that committed it, when that is an event of this
    /// cast (not of a fork's or a lane's parent): a rework reason that quotes it names that seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_json_at: Option<(Seq, SocketId)>,
    /// Tokens the agents reported over the whole cast (the budget is checked against it).
    pub usage: Usage,
    /// Whether the budget warning was given (`budget_warning`; a raise that brings the use
    /// back below the threshold clears it).
    #[serde(default, skip_serializing_if = "crate::event::is_false")]
    pub budget_warned: bool,
    /// What the priced replies cost so far, in millionths of a US dollar (`prices`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cost_micros: u64,
    /// Whether the cost warning was given (`budget_warning` with `cost`).
    #[serde(default, skip_serializing_if = "crate::event::is_false")]
    pub cost_warned: bool,
    /// Whether the agent's server refused structured output (`agent_failed` with
    /// `structured_off`, under `--structured auto`): the handoff contract is no longer sent as
    /// a response format for the rest of the cast.
    #[serde(default, skip_serializing_if = "crate::event::is_false")]
    pub structured_off: bool,
    /// Why it failed.
    pub failure: Option<CastFailed>,
    /// The most recent dispatch keys already dispatched (idempotency, in the log). Bounded: a
    /// due dispatch with an older key names a visit that is long over and is skipped as stale,
    /// so remembering every key would only make each step cost more than the last.
    pub dispatched: std::collections::VecDeque<DispatchKey>,
    /// Key of the dispatch scheduled and not yet due; `None` when none waits.
    pub scheduled: Option<DispatchKey>,
    /// The last completed visit `(socket, visit)`: the source of the next deferred dispatch.
    pub last_source: Option<(SocketId, Visit)>,
    /// The `satisfied` outcome of the last completion (routing input, kept for revive).
    pub last_satisfied: Option<bool>,
    /// Steering notes, in order.
    pub steering: Vec<(String, bool)>,
    /// Claims of this cast's post sockets (a recast inherits its parent's), by id. Their
    /// `claimed_ms` is 0: the time lives in the log's envelope, which the state never sees.
    pub claims: BTreeMap<ClaimId, Claim>,
    /// The lanes of the parallel generator this cast planned, while they run and once joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<LaneSet>,
    /// What lane of which parent this cast is, when it is a lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<LaneOf>,
    /// Seq of the last event folded in; the next append takes `head.next()`.
    pub head: Seq,
    /// Entry bodies this state's decisions already handed over for storage (see
    /// [`SentBodies`]).
    #[serde(skip)]
    pub sent_bodies: SentBodies,
}

/// A parent's lanes (`lanes_planned`, then `lanes_joined`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneSet {
    /// The parallel generator that planned them.
    pub socket: SocketId,
    /// The lanes in plan order.
    pub plan: Vec<crate::event::LanePlan>,
    /// Seq of the `lanes_planned` event: every lane forks from the parent there.
    pub planned_at: Seq,
    /// How many run at once.
    pub max_concurrency: u32,
    /// The parent was revived while its lanes were not all completed: failed and aborted
    /// lanes are revived when the lanes run next.
    #[serde(default, skip_serializing_if = "crate::event::is_false")]
    pub revive: bool,
    /// The outcomes of the last join, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joined: Option<Vec<crate::event::LaneOutcome>>,
}

/// The lane a lane cast is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneOf {
    /// The parent cast.
    pub parent: CastId,
    /// The lane's name in the plan.
    pub name: String,
    /// The parent's work item indexes it walks (its own items, in order).
    pub items: Vec<u64>,
}

/// The digests of the entry bodies earlier decisions of this state returned as blobs, so a
/// body placed in every prompt (the request, a role's prompt, an output that stays in the
/// transcript) is handed to the log once, not with every dispatch.
///
/// A cache, not state: it never changes an event, only which blobs a decision returns. It is
/// neither serialized nor folded, so a state rebuilt from the log or a snapshot starts empty
/// and hands each body over once more (the log stores a body once either way). It assumes what
/// the driver does: a decision whose append failed is not followed by another one on the same
/// state.
#[derive(Debug, Clone, Default)]
pub struct SentBodies(std::collections::HashSet<Digest>);

impl SentBodies {
    /// Whether the body with `digest` was handed over already.
    pub fn contains(&self, digest: &Digest) -> bool {
        self.0.contains(digest)
    }

    /// Notes that the body with `digest` was handed over.
    pub fn insert(&mut self, digest: Digest) {
        self.0.insert(digest);
    }
}

/// The pi-materia conformance rules new casts follow, recorded in `cast_started`
/// (`conformance`); a cast recorded with an older version keeps its behaviour, so it still
/// re-decides as recorded. Version 1:
/// - a utility that reports failure (`satisfied: false` with a `state.<ns>.ok: false`) fails
///   the cast with its own `context` as the reason, the socket named;
/// - an output's `event` side-channel is checked (a bad one is a repair turn for an agent, a
///   failure for a utility), recorded as `materia_event`s and taken out of the output before
///   validation and routing;
/// - an agent socket that reads `$` (an assignment from `$` or `$.…`, an advance condition with
///   `$.`) accepts extra top-level keys.
///
/// Version 2:
/// - the first reply that takes token use to `budget.warnAtPercent` of the budget appends one
///   `budget_warning` (again only after a raise brings the use back below the threshold).
///
/// Version 3:
/// - a JSON utility's `scopeTransition` is checked (a bad one fails the cast, naming the
///   socket and the field), recorded as `scope_activated` and taken out of the output before
///   validation and routing; later sockets act in the scope's directory.
pub const CONFORMANCE: u32 = 3;

/// How many recent dispatch keys a cast remembers.
pub const DISPATCH_MEMORY: usize = 64;

/// The key of a per-item counter: `socket@item` (or just `socket`).
pub fn item_key(base: &str, item: Option<&ItemKey>) -> String {
    match item {
        Some(item) => format!("{base}@{item}"),
        None => base.to_owned(),
    }
}

/// The allowance key of an [`Allowance`].
pub fn allowance_key(allowance: &Allowance) -> String {
    match allowance {
        Allowance::Edge { from, to, item } => {
            let to = match to {
                crate::event::Target::Socket(s) => s.to_string(),
                crate::event::Target::End => "end".into(),
            };
            item_key(&format!("edge:{from}->{to}"), item.as_ref())
        }
        Allowance::NoAdvance { item } => item_key("no_advance", item.as_ref()),
        Allowance::Tokens => "tokens".into(),
        Allowance::Cost => "cost".into(),
        Allowance::Repair {
            socket,
            item,
            visit,
        } => {
            let base = item_key(&format!("repair:{socket}"), item.as_ref());
            visit.map_or(base.clone(), |v| format!("{base}#{v}"))
        }
        Allowance::ToolCalls {
            socket,
            item,
            visit,
        } => format!(
            "{}#{visit}",
            item_key(&format!("tool_calls:{socket}"), item.as_ref())
        ),
    }
}

impl CastState {
    /// The loadout socket of the current visit.
    pub fn current_socket(&self) -> Option<&crate::loadout::Socket> {
        self.current
            .as_ref()
            .and_then(|c| self.loadout.socket(&c.socket))
    }

    /// The effective limit of an allowance, given its configured limit.
    pub fn limit(&self, allowance: &Allowance, configured: u64) -> u64 {
        self.allowances
            .get(&allowance_key(allowance))
            .map_or(configured, |a| a.effective)
    }
}

/// Whether a count is zero (kept out of the state's JSON, as before costs were counted).
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}
