//! The event vocabulary: everything that can happen in a cast, in the past tense.
//!
//! Each kind is one struct; [`Event`] is the closed set of kinds. In the log an event is stored
//! as three things: its `kind` string (snake case, e.g. `socket_started`), its schema version `v`
//! and its payload, the compact JSON of the kind's struct (no `kind` tag inside). The mapping is
//! fixed by the table in the `events!` invocation below; a kind's name and its fields never
//! change meaning. A field added later is optional (`#[serde(default)]`) or comes with a version
//! bump and an upcast in [`Event::decode`], so a log written by an older castlog stays readable.
//! History is never rewritten.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::id::{CastId, Digest, DispatchKey, ItemKey, MateriaName, Seq, SocketId, Turn, Visit};

/// Why a payload could not be turned into an [`Event`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The kind string is not part of the vocabulary.
    #[error("unknown event kind {kind:?}")]
    UnknownKind {
        /// The stored kind.
        kind: String,
    },
    /// The stored schema version is newer than this castlog understands.
    #[error("event kind {kind:?} has schema version {v}, this castlog reads up to {max}")]
    FutureVersion {
        /// The stored kind.
        kind: String,
        /// The stored version.
        v: u16,
        /// The newest version known here.
        max: u16,
    },
    /// The payload names an earlier event of its cast for its text (see `event/completion.rs`
    /// and `event/derived.rs`) that the reader was not given.
    #[error(
        "payload of {kind:?} names the event at seq {seq} for its text, and that event was not \
         read with it"
    )]
    Unresolved {
        /// The stored kind.
        kind: String,
        /// The seq the payload refers to.
        seq: Seq,
    },
    /// The payload is not valid JSON for the kind.
    #[error("payload of {kind:?} does not decode: {source}")]
    Payload {
        /// The stored kind.
        kind: String,
        /// The decoder's error (said in words by its `Display`).
        #[source]
        source: PayloadCause,
    },
}

macro_rules! events {
    ($( $(#[$doc:meta])* $variant:ident($body:ident) = $kind:literal, v $v:literal; )*) => {
        /// One event of a cast. See the module documentation for the storage rules.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        #[non_exhaustive]
        pub enum Event {
            $( $(#[$doc])* $variant($body), )*
        }

        impl Event {
            /// Every kind with its current schema version, in vocabulary order.
            pub const KINDS: &'static [(&'static str, u16)] = &[ $( ($kind, $v), )* ];

            /// The stored kind string.
            pub fn kind(&self) -> &'static str {
                match self { $( Event::$variant(_) => $kind, )* }
            }

            /// The schema version this castlog writes for the event's kind.
            pub fn version(&self) -> u16 {
                match self { $( Event::$variant(_) => $v, )* }
            }

            /// The payload bytes: compact JSON of the kind's struct, in the kind's current version.
            pub fn encode(&self) -> Vec<u8> {
                // The two kinds whose stored layout is not their struct's own serialization
                // come first; the table's arms for them are never reached.
                #[allow(unreachable_patterns)]
                let result = match self {
                    Event::DataAssigned(body) => {
                        serde_json::to_vec(&derived::Layout::Assignment(body, self.version()))
                    }
                    Event::ReworkRouted(body) => {
                        serde_json::to_vec(&derived::Layout::Rework(body, self.version()))
                    }
                    $( Event::$variant(body) => serde_json::to_vec(body), )*
                };
                // Serializing plain structs of strings, numbers and `Value`s cannot fail.
                result.unwrap_or_default()
            }

            /// Decodes stored bytes, upcasting older schema versions. A payload that refers to
            /// an earlier event of its cast does not decode here: see [`Event::decode_with`].
            pub fn decode(kind: &str, v: u16, payload: &[u8]) -> Result<Event, DecodeError> {
                Self::decode_with(kind, v, payload, &mut |_| None)
            }

            /// [`Event::decode`], asking `earlier` for the event at a seq when the payload
            /// names one instead of repeating its text (`socket_completed` version 3 names a
            /// reply, `data_assigned` and `rework_routed` version 2 a completion).
            pub fn decode_with(
                kind: &str,
                v: u16,
                payload: &[u8],
                earlier: &mut dyn FnMut(Seq) -> Option<Earlier>,
            ) -> Result<Event, DecodeError> {
                // The kinds whose payload may name an earlier event of its cast.
                match (kind, v) {
                    ("socket_completed", 3) => {
                        return completion::decode(payload, earlier).map(Event::SocketCompleted);
                    }
                    ("data_assigned", 1..=2) => {
                        return derived::decode_assignment(v, payload, earlier)
                            .map(Event::DataAssigned);
                    }
                    ("rework_routed", 1..=2) => {
                        return derived::decode_rework(v, payload, earlier).map(Event::ReworkRouted);
                    }
                    _ => {}
                }
                match kind {
                    $( $kind => {
                        if v > $v {
                            return Err(DecodeError::FutureVersion { kind: kind.to_owned(), v, max: $v });
                        }
                        serde_json::from_slice::<$body>(payload)
                            .map(Event::$variant)
                            .map_err(|e| DecodeError::Payload {
                                kind: kind.to_owned(),
                                source: PayloadCause::new(e),
                            })
                    } )*
                    _ => Err(DecodeError::UnknownKind { kind: kind.to_owned() }),
                }
            }
        }

        $( impl From<$body> for Event {
            fn from(body: $body) -> Event { Event::$variant(body) }
        } )*
    };
}

events! {
    // ----- cast lifecycle -----
    /// A cast began with a frozen, resolved loadout.
    CastStarted(CastStarted) = "cast_started", v 1;
    /// A cast began as a fork (recast) of another cast's prefix.
    CastForked(CastForked) = "cast_forked", v 1;
    /// The cast reached the end of its graph.
    CastCompleted(CastCompleted) = "cast_completed", v 1;
    /// The cast stopped on an error or an exhausted allowance.
    CastFailed(CastFailed) = "cast_failed", v 1;
    /// A person (or Ctrl-C) aborted the cast.
    CastAborted(CastAborted) = "cast_aborted", v 1;
    /// A failed or aborted cast was revived.
    CastRevived(CastRevived) = "cast_revived", v 1;
    /// A driver picked the cast up again (after a crash or a pause).
    CastResumed(CastResumed) = "cast_resumed", v 1;
    // ----- socket lifecycle -----
    /// A socket visit began.
    SocketStarted(SocketStarted) = "socket_started", v 1;
    /// A prompt was handed to the agent.
    PromptDispatched(PromptDispatched) = "prompt_dispatched", v 1;
    /// The prompt just recorded was not sent: the command that recorded it had no agent.
    PromptHeld(PromptHeld) = "prompt_held", v 1;
    /// The agent answered a dispatched prompt.
    AgentReplied(AgentReplied) = "agent_replied", v 1;
    /// The agent could not answer.
    AgentFailed(AgentFailed) = "agent_failed", v 1;
    /// A utility process finished (or was killed).
    UtilityFinished(UtilityFinished) = "utility_finished", v 1;
    /// A multi-turn socket's reply was kept as a draft awaiting refinement.
    RefinementRecorded(RefinementRecorded) = "refinement_recorded", v 1;
    /// A person sent a refinement message to a paused multi-turn socket.
    UserRefined(UserRefined) = "user_refined", v 1;
    /// A person asked a multi-turn socket to finalize.
    FinalizeRequested(FinalizeRequested) = "finalize_requested", v 1;
    /// The output broke the handoff contract.
    OutputRejected(OutputRejected) = "output_rejected", v 1;
    /// The socket visit produced its final output.
    SocketCompleted(SocketCompleted) = "socket_completed", v 3;
    /// The agent asked for a tool call; recorded before the tool runs.
    ToolCalled(ToolCalled) = "tool_called", v 1;
    /// A tool call ended with a result.
    ToolFinished(ToolFinished) = "tool_finished", v 1;
    /// A tool call with an effect was cut off; its outcome is unknown and it is not run again.
    ToolInterrupted(ToolInterrupted) = "tool_interrupted", v 1;
    /// The working directory's files were recorded as a git tree after a socket completed.
    WorkspaceCheckpointed(WorkspaceCheckpointed) = "workspace_checkpointed", v 1;
    /// A socket's output reported an event of its own (pi-materia's `event` side-channel).
    MateriaEvent(MateriaEvent) = "materia_event", v 1;
    /// A utility's `scopeTransition` changed the directory the cast's later sockets act in.
    ScopeActivated(ScopeActivated) = "scope_activated", v 1;
    // ----- parallel lanes -----
    /// A parallel generator's work items were placed in lanes.
    LanesPlanned(LanesPlanned) = "lanes_planned", v 1;
    /// A lane began: the first event of a lane cast, committing to its parent's plan.
    LaneStarted(LaneStarted) = "lane_started", v 1;
    /// Every lane was terminal: the barrier, each lane's head in plan order.
    LanesJoined(LanesJoined) = "lanes_joined", v 1;
    // ----- routing and data -----
    /// A value was written into `state.data` (or the cast's item).
    DataAssigned(DataAssigned) = "data_assigned", v 2;
    /// A loop cursor moved.
    CursorAdvanced(CursorAdvanced) = "cursor_advanced", v 1;
    /// An edge of the graph was followed.
    EdgeTaken(EdgeTaken) = "edge_taken", v 1;
    /// A `not_satisfied` edge carried rework context to its target.
    ReworkRouted(ReworkRouted) = "rework_routed", v 2;
    /// Live rework entries for an item were cleared because the item was satisfied.
    ReworkCleared(ReworkCleared) = "rework_cleared", v 1;
    /// A prompt dispatch was scheduled under an idempotency key.
    DispatchScheduled(DispatchScheduled) = "dispatch_scheduled", v 1;
    /// A scheduled dispatch was skipped (duplicate or stale).
    DispatchSkipped(DispatchSkipped) = "dispatch_skipped", v 1;
    /// An allowance (edge traversals, no-advance cycles, tokens, repairs) ran out.
    AllowanceExhausted(AllowanceExhausted) = "allowance_exhausted", v 1;
    /// An allowance was extended (by revive).
    AllowanceExtended(AllowanceExtended) = "allowance_extended", v 1;
    /// Token use crossed `budget.warnAtPercent` of the budget.
    BudgetWarning(BudgetWarning) = "budget_warning", v 1;
    /// A person raised the cast's token budget.
    BudgetRaised(BudgetRaised) = "budget_raised", v 1;
    /// An operator steering note was added.
    SteeringNoted(SteeringNoted) = "steering_noted", v 1;
    /// A named waypoint was set on the cast.
    WaypointMarked(WaypointMarked) = "waypoint_marked", v 1;
    // ----- outward effects -----
    /// A post was claimed, durably, before any sender was called.
    PostClaimed(PostClaimed) = "post_claimed", v 1;
    /// The sender accepted the post and returned a message id.
    PostStaged(PostStaged) = "post_staged", v 1;
    /// The post was refused (by a gate or by the sender).
    PostRefused(PostRefused) = "post_refused", v 1;
    /// A person resolved a claim.
    PostResolved(PostResolved) = "post_resolved", v 1;
    /// The sender's result was unknown (no id, a failure, a timeout): the claim stays pending.
    PostOutcomeUnknown(PostOutcomeUnknown) = "post_outcome_unknown", v 1;
    /// A claim took its destination's day (the destination ledger's compare-and-set).
    DayClaimed(DayClaimed) = "day_claimed", v 1;
    /// A person recorded whether a sent post was answered or ignored.
    PostResponseRecorded(PostResponseRecorded) = "post_response_recorded", v 1;
    /// A recast adopted the resolution of a pending claim it inherited.
    PostResolutionInherited(PostResolutionInherited) = "post_resolution_inherited", v 1;
}

mod budget;
mod cause;
mod completion;
mod derived;
mod dispatch;
mod earlier;
mod lanes;
mod materia;
mod named;
mod posting;
mod routing;
mod scope;
mod tools;
mod vocabulary;
mod workspace;

pub use budget::{BudgetRaised, BudgetWarning, CostUse, ReplyCost, dollars};
pub use cause::PayloadCause;
pub(crate) use derived::is_output_source;
pub use derived::{REASON_CHARS, quoted_reason};
pub use dispatch::{
    AgentFailed, AgentReplied, Destination, FailureClass, Placement, PromptDispatched, PromptHeld,
};
pub use earlier::{Earlier, EarlierReply};
pub use lanes::{LaneOutcome, LanePlan, LaneStarted, LaneStatus, LanesJoined, LanesPlanned};
pub use materia::MateriaEvent;
pub use posting::{
    ClaimStatus, DayClaimed, PostClaimed, PostOutcomeUnknown, PostRefused, PostResolutionInherited,
    PostResolved, PostResponseRecorded, PostStaged, Resolution, Response,
};
pub use routing::{
    CursorAdvanced, DataAssigned, EdgeTaken, ReworkCleared, ReworkRouted, Target, ValueFrom, When,
};
pub use scope::{ExecutionScope, ScopeActivated};
pub use tools::{
    READ_ONLY_TOOLS, ToolCalled, ToolFinished, ToolInterrupted, ToolRequest, is_read_only,
};
pub use vocabulary::{Contexts, Vocabulary};
pub use workspace::WorkspaceCheckpointed;

impl Event {
    /// The payload bytes as version `v` of the event's kind wrote them, for a re-decision of a
    /// cast recorded by an older castlog; `None` for a version this castlog cannot write (a
    /// future one, or one no kind had). Only `socket_completed` has had two versions.
    pub fn encode_at(&self, v: u16) -> Option<Vec<u8>> {
        if v == self.version() {
            return Some(self.encode());
        }
        match (self, v) {
            (Event::SocketCompleted(body), 1 | 2) => {
                serde_json::to_vec(&completion::EarlierVersion(body, v)).ok()
            }
            (Event::DataAssigned(body), 1) => {
                serde_json::to_vec(&derived::Layout::Assignment(body, 1)).ok()
            }
            (Event::ReworkRouted(body), 1) => {
                serde_json::to_vec(&derived::Layout::Rework(body, 1)).ok()
            }
            _ => None,
        }
    }

    /// The blobs this event refers to (prompt texts, entry bodies, post bodies), so an export
    /// can carry them along.
    pub fn blob_refs(&self) -> Vec<Digest> {
        match self {
            // The rendered prompt is rebuilt from its entries (`prompt::assemble`).
            Event::PromptDispatched(p) => p.placements.iter().map(|pl| pl.body).collect(),
            Event::PostClaimed(p) => vec![p.body],
            Event::ToolFinished(t) => vec![t.result],
            _ => Vec::new(),
        }
    }
}

/// For `skip_serializing_if`: a false flag is left out, so records and states written before
/// the flag existed read (and re-encode) the same.
pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}

/// Token counts reported by an agent for one reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt (input) tokens.
    #[serde(default)]
    pub input: u64,
    /// Completion (output) tokens.
    #[serde(default)]
    pub output: u64,
}

impl Usage {
    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input.saturating_add(self.output)
    }
}

/// The cast's starting point: loadout and request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CastStarted {
    /// The cast's id, as chosen by the caller.
    pub cast: CastId,
    /// The loadout's name in its config.
    pub loadout_name: String,
    /// The frozen, resolved loadout (sockets with embedded materia).
    pub loadout: Value,
    /// The loadout's content hash, so an edit shows up in `diff`.
    pub loadout_hash: Digest,
    /// The user's request (`--task`).
    pub request: String,
    /// The prompt placement policy's name (`recommended`, `legacy`, or a policy file's).
    pub policy: String,
    /// The document of a policy from a file (`prompt::policy`), so the cast re-renders
    /// without the file; absent when `policy` names a built-in policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_document: Option<Value>,
    /// Where the config came from (a path), for humans only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_source: Option<String>,
    /// The fence version of the cast's prompts (`prompt::fence`); absent in a cast recorded
    /// before fencing, whose prompts render unfenced (version 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u32>,
    /// The working directory tools resolve paths in; absent in a cast recorded before tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// The handoff-context rule of the cast's prompts (`machine::turn`, `HANDOFF_RULE`): 1,
    /// a paragraph carrying another work item's rework reason stays out of a prompt's handoff
    /// context. Absent in a cast recorded before the rule and in a `legacy` cast (the audited
    /// behaviour): every kept paragraph is shown, so those casts still reproduce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<u32>,
    /// The pi-materia conformance rules the cast follows (`machine::CONFORMANCE`, which lists
    /// them). Absent in a cast recorded before them, which keeps the behaviour it was recorded
    /// with (version 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conformance: Option<u32>,
    /// The tool scope of each agent materia that has one (`readOnly`, `coding`,
    /// `{type: custom, tools}`), by materia id; absent when none has, and in casts recorded
    /// before tools ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<std::collections::BTreeMap<MateriaName, Value>>,
}

/// A recast: the new cast commits to its parent's prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CastForked {
    /// Id of the child, the cast this event begins.
    pub cast: CastId,
    /// Cast whose state at `parent_seq` the child starts from.
    pub parent: CastId,
    /// The fork point: the last parent seq whose events the child's state includes.
    pub parent_seq: Seq,
    /// The parent's chain hash at `parent_seq` (also the child's first `prev`).
    pub parent_hash: Digest,
    /// The loadout hash the child runs with (differs from the parent's after `--config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loadout_hash: Option<Digest>,
    /// The tool scopes of the child's loadout by materia, when it runs another loadout (as
    /// `cast_started`'s `tools`); absent: the parent's scopes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<std::collections::BTreeMap<MateriaName, Value>>,
    /// The frozen loadout the child runs with, when it differs from the parent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loadout: Option<Value>,
    /// The directory the child's tools act in, when it is not the parent's (`recast
    /// --workdir`, filled from the checkpoint at the fork point).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
}

/// The cast reached `end` in its graph: the success counterpart of `CastFailed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CastCompleted {
    /// Total tokens used by the cast.
    #[serde(default)]
    pub usage: Usage,
}

/// A named class of failure, so `revive` knows what to extend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "allowance", rename_all = "snake_case")]
pub enum Allowance {
    /// `maxTraversals` of one edge for one item.
    Edge {
        /// Socket the edge leaves.
        from: SocketId,
        /// Socket (or `end`) the edge leads to.
        to: Target,
        /// Work item the count is kept for; `None` outside loops.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<ItemKey>,
    },
    /// The no-advance cycle guard of one item.
    NoAdvance {
        /// Work item that went around without advancing; `None` outside loops.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<ItemKey>,
    },
    /// The cast's token budget.
    Tokens,
    /// The cast's cost budget (`budget.maxCostUsd`), in millionths of a US dollar.
    Cost,
    /// Same-socket repair attempts of one visit.
    Repair {
        /// Socket whose repair turns ran out.
        socket: SocketId,
        /// Work item of that visit; `None` outside loops.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<ItemKey>,
        /// Visit whose repairs ran out; absent in casts recorded before it was kept.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        visit: Option<Visit>,
    },
    /// Tool calls of one visit (`limits.maxToolCalls`).
    ToolCalls {
        /// The socket whose agent calls tools.
        socket: SocketId,
        /// The item of the visit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<ItemKey>,
        /// The visit.
        visit: Visit,
    },
}

/// The cast stopped on an error or an exhausted allowance; `revive` can restart it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CastFailed {
    /// A human sentence: what failed and what to do.
    pub reason: String,
    /// Socket whose visit was running, when the failure happened inside one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<SocketId>,
    /// The exhausted allowance, when that is why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowance: Option<Allowance>,
}

/// A person (or Ctrl-C) stopped the cast; `revive` can restart it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CastAborted {
    /// Why (free text from the person, or `interrupted`).
    pub reason: String,
}

/// A failed or aborted cast was restarted, its exhausted allowance extended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CastRevived {
    /// Socket whose visit starts again (the one that was running when it stopped).
    pub socket: SocketId,
    /// The allowance that was extended, if the failure was an exhaustion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowance: Option<Allowance>,
}

/// A driver took the cast up again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CastResumed {
    /// Whether an unanswered prompt will be dispatched again.
    #[serde(default, skip_serializing_if = "is_false")]
    pub redispatch: bool,
    /// The prompt is sent again because the cast was forked while it was in flight, not
    /// because work was cut off (no recovery note).
    #[serde(default, skip_serializing_if = "is_false")]
    pub after_fork: bool,
}

/// A socket visit began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketStarted {
    /// Socket the visit runs (a key of the loadout's `sockets`).
    pub socket: SocketId,
    /// Materia the socket places (its config name).
    pub materia: MateriaName,
    /// The materia's display label.
    pub materia_label: String,
    /// The 1-based visit of this socket in the cast.
    pub visit: Visit,
    /// The work item, in a loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<ItemKey>,
    /// The item's label (title).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_label: Option<String>,
    /// The attempt of this (socket, item) pair.
    pub attempt: u32,
}

/// A utility process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UtilityFinished {
    /// Utility socket whose program ended.
    pub socket: SocketId,
    /// Visit of that socket (1-based).
    pub visit: Visit,
    /// The exit code, if the process exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// Whether it was killed for running past its timeout.
    #[serde(default, skip_serializing_if = "is_false")]
    pub timed_out: bool,
    /// Captured stdout (capped).
    pub stdout: String,
    /// Captured stderr (capped).
    pub stderr: String,
    /// Whether either stream was cut at the cap.
    #[serde(default, skip_serializing_if = "is_false")]
    pub truncated: bool,
}

/// A multi-turn draft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefinementRecorded {
    /// Multi-turn socket whose visit the draft belongs to.
    pub socket: SocketId,
    /// Visit of that socket (1-based).
    pub visit: Visit,
    /// The refinement turn (1-based).
    pub turn: Turn,
    /// The agent's draft, verbatim; it waits for a refinement or `continue`.
    pub text: String,
}

/// A person's refinement message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRefined {
    /// Multi-turn socket the message was for.
    pub socket: SocketId,
    /// Visit of that socket (1-based).
    pub visit: Visit,
    /// What the person wrote, verbatim (fenced only where a prompt shows it).
    pub text: String,
    /// Where the input came from when re-applied by a recast (`cast:seq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// `castlog continue` on a multi-turn socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalizeRequested {
    /// Multi-turn socket asked to finalize.
    pub socket: SocketId,
    /// Visit of that socket (1-based).
    pub visit: Visit,
    /// Where the input came from when re-applied by a recast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// The reply broke the handoff contract; a repair turn follows or the cast fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputRejected {
    /// Socket whose reply was rejected.
    pub socket: SocketId,
    /// Visit of that socket (1-based).
    pub visit: Visit,
    /// The turn whose output was rejected.
    pub turn: Turn,
    /// Each problem found, as a sentence.
    pub issues: Vec<String>,
    /// Whether a same-socket repair turn follows (otherwise the cast fails).
    pub repair: bool,
}

/// A socket visit's final output. Stored in version 3 (`event/completion.rs` has every
/// version's layout): `parsed` is left out when it is what `output` parses to, and `output`
/// when it is the reply at `output_of`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "completion::Stored")]
pub struct SocketCompleted {
    /// Socket whose visit ends with this output.
    pub socket: SocketId,
    /// Visit of that socket (1-based).
    pub visit: Visit,
    /// Work item the visit ran for; `None` outside loops.
    pub item: Option<ItemKey>,
    /// The accepted reply (or utility stdout) verbatim, before parsing.
    pub output: String,
    /// The seq of the `agent_replied` of this cast whose text `output` is, when it is one: the
    /// payload then names that seq instead of repeating the text (version 3).
    pub output_of: Option<Seq>,
    /// The parsed JSON for json sockets.
    pub parsed: Option<Value>,
    /// The canonical `satisfied` outcome, if the output had one.
    pub satisfied: Option<bool>,
    /// Whether this output finalized a multi-turn refinement.
    pub finalized: bool,
}

/// A deferred dispatch was scheduled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchScheduled {
    /// Key `DispatchDue` must carry; a key dispatched before is skipped.
    pub key: DispatchKey,
    /// Socket whose next visit will be dispatched.
    pub socket: SocketId,
    /// Visit of that socket the dispatch belongs to (1-based).
    pub visit: Visit,
}

/// Why a dispatch was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The key was dispatched already (a repeated `DispatchDue`).
    Duplicate,
    /// The cast moved on since it was scheduled (another key or phase, or it stopped).
    Stale,
}

/// A scheduled dispatch was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchSkipped {
    /// Key of the scheduled dispatch that did not run.
    pub key: DispatchKey,
    /// Duplicate or stale.
    pub reason: SkipReason,
}

/// An allowance ran out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowanceExhausted {
    /// Which allowance.
    #[serde(flatten)]
    pub allowance: Allowance,
    /// Value of the counter when it ran out (traversals, cycles, tokens or repairs).
    pub count: u64,
    /// Limit in force then (the configured one, plus any revive extensions).
    pub limit: u64,
}

/// An allowance was extended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowanceExtended {
    /// Which allowance.
    #[serde(flatten)]
    pub allowance: Allowance,
    /// Limit in force from now on (the old one plus the configured original).
    pub limit: u64,
}

/// An operator's steering note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SteeringNoted {
    /// What the operator wrote, verbatim; it is shown in every later prompt.
    pub text: String,
    /// Locked notes fold into the system prefix and get a trailing reminder.
    #[serde(default, skip_serializing_if = "is_false")]
    pub locked: bool,
    /// Where the input came from when re-applied by a recast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// A named point in a cast, usable wherever a seq is (`state --at NAME`, `recast --at NAME`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaypointMarked {
    /// Waypoint name, usable as `--at NAME`; a later mark of the same name wins.
    pub name: String,
    /// Seq of the cast the name stands for.
    pub at: Seq,
}

#[cfg(test)]
mod tests;
