//! Inputs: what arrives from outside the machine.
//!
//! An input is a request or a fact (a model's reply, a person's message, a utility's exit). The
//! machine turns an input into events with `decide`; only events become state. Inputs that carry
//! nondeterministic content (replies, messages, process output) are recorded verbatim in the
//! events they produce, so replay never needs the outside world again.

use serde::{Deserialize, Serialize};

use crate::claims::ClaimStatus;
use crate::event::{FailureClass, Resolution, Response, ToolRequest, Usage};
use crate::id::{ClaimId, DispatchKey, SocketId, Visit};

/// One input to a cast.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "input", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Input {
    /// Every lane of the plan is terminal (`Next::RunLanes`): their outcomes, in plan order.
    JoinLanes {
        /// One outcome per lane, in plan order.
        lanes: Vec<crate::event::LaneOutcome>,
    },
    /// The agent answered the prompt in flight.
    AgentReplied {
        /// What the agent replied, verbatim.
        text: String,
        /// Reported token usage.
        #[serde(default)]
        usage: Option<Usage>,
    },
    /// The agent answered the prompt in flight with tool calls (and perhaps some text): the
    /// calls run before it is asked again.
    AgentCalledTools {
        /// The reply text that came with the calls (often empty).
        text: String,
        /// Reported token usage.
        #[serde(default)]
        usage: Option<Usage>,
        /// The calls, in the order given.
        calls: Vec<ToolRequest>,
    },
    /// A tool call the machine asked for (`Next::RunTool`) ended.
    ToolFinished {
        /// The call's id.
        call: String,
        /// The result text the agent is shown.
        output: String,
        /// A process's exit status (`bash`).
        #[serde(default)]
        exit: Option<i32>,
        /// The result is an error (refused, bad arguments, failed).
        #[serde(default)]
        error: bool,
        /// The text was cut at its cap.
        #[serde(default)]
        truncated: bool,
        /// How long it took, in milliseconds.
        duration_ms: u64,
    },
    /// The driver recorded the working directory as a git tree after a socket completed (an
    /// effect of the driver's, like a tool's: re-decide takes it from the log).
    CheckpointWorkspace {
        /// The socket that completed.
        socket: SocketId,
        /// Its visit.
        visit: Visit,
        /// The files before any socket ran (the cast's start).
        #[serde(default)]
        start: bool,
        /// The git tree object's id.
        tree: String,
    },
    /// The agent could not answer the prompt in flight.
    AgentFailed {
        /// Transient or interruption.
        class: FailureClass,
        /// What went wrong.
        message: String,
    },
    /// The agent's server refused the handoff contract sent as a response format
    /// (`--structured auto`): structured output is off for the rest of the cast, and the
    /// prompt in flight is asked again without it.
    StructuredOutputRefused {
        /// What the server answered.
        message: String,
    },
    /// A utility process ended.
    UtilityFinished {
        /// Exit code, if it exited.
        code: Option<i32>,
        /// Whether it was killed at its timeout.
        timed_out: bool,
        /// Captured stdout (capped; `truncated` says when it was cut).
        stdout: String,
        /// Captured stderr (capped; `truncated` says when it was cut).
        stderr: String,
        /// Whether output was cut at the cap.
        truncated: bool,
    },
    /// A person's message to a paused multi-turn socket.
    UserRefined {
        /// The message (even the word "continue" is a refinement).
        text: String,
        /// Where it came from when not typed by a person (`script`, or `cast:seq` in a recast).
        #[serde(default)]
        origin: Option<String>,
    },
    /// The explicit `continue` command: finalize the multi-turn socket.
    Continue {
        /// Where it came from when not typed by a person.
        #[serde(default)]
        origin: Option<String>,
    },
    /// Stop the cast.
    Abort {
        /// What the person gave as the reason; recorded in `cast_aborted`.
        reason: String,
    },
    /// Restart a failed or aborted cast, extending the exhausted allowance.
    Revive,
    /// A person raises the cast's token budget to `tokens` (`castlog budget`).
    RaiseBudget {
        /// The new budget; more than the one in force.
        tokens: u64,
    },
    /// A driver picks the cast up again.
    Resume,
    /// The prompt just recorded is not sent now (no agent was given): a later `resume` sends
    /// it as it is, without a recovery note.
    HoldPrompt,
    /// A recast forked while a prompt was in flight sends that prompt again for the child. It
    /// is recorded as a re-dispatch, but nothing was cut off: the prompt carries no recovery
    /// note (unless the parent had stopped), so it is the parent's prompt when nothing changed.
    ForkRedispatch,
    /// A scheduled dispatch is due.
    DispatchDue {
        /// Key the `dispatch_scheduled` event gave; a stale or repeated key is skipped.
        key: DispatchKey,
    },
    /// An operator steering note.
    Steer {
        /// The note as the operator wrote it.
        text: String,
        /// Whether it is locked into the system prefix.
        locked: bool,
        /// Where it came from when re-applied by a recast (`cast:seq`).
        #[serde(default)]
        origin: Option<String>,
    },
    /// A person names a point of the cast (a waypoint); allowed in every status.
    Mark {
        /// Waypoint name, usable as `--at NAME` afterwards.
        name: String,
        /// Seq of the cast the name stands for.
        at: crate::id::Seq,
    },
    /// A person resolves a pending claim.
    ResolveClaim {
        /// Pending claim of this cast.
        claim: ClaimId,
        /// The sender's message id if it was sent, `None` to abandon.
        message_id: Option<String>,
    },
    /// A person moves a claim on (any step of the claim state machine: staged, abandoned,
    /// approved, posted, declined).
    ResolveClaimAs {
        /// Claim of this cast to move on.
        claim: ClaimId,
        /// The step asked for; the claim's current status must allow it.
        resolution: Resolution,
    },
    /// A person records how a sent post was received (the claim's status does not change).
    RecordResponse {
        /// Claim whose post went out.
        claim: ClaimId,
        /// Answered or ignored.
        response: Response,
    },
    /// The claims ledger shows a pending claim this cast inherited (from the cast it was
    /// recast from) resolved in its owner's log: adopt that.
    InheritedClaimResolved {
        /// Claim inherited from the parent, pending in this cast.
        claim: ClaimId,
        /// Its status in the owner's log.
        status: ClaimStatus,
        /// Message id the owner's log holds for it, if the post went out.
        #[serde(default)]
        message_id: Option<String>,
    },
    /// The driver checked the claims ledger for a waiting post socket: claim (or refuse) now.
    StartPost {
        /// True unless the run was started with `--post`; a dry run calls no sender.
        dry_run: bool,
        /// Claims of other steps that hold a day of this socket's destination.
        #[serde(default)]
        held: Vec<HeldDay>,
        /// A claim of this same step and destination that went out (or may have) in a cast
        /// this one was recast from, after the fork point: the step is not sent again.
        #[serde(default)]
        sent_before: Option<ClaimId>,
    },
    /// What the sender said about a claimed post.
    PostOutcome {
        /// Claim the sender was called for (the visit's pending claim).
        claim: ClaimId,
        /// Staged, refused or unknown.
        outcome: SendOutcome,
    },
}

/// A claim holding a destination's day, as the ledger reports it to a post socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldDay {
    /// Claim of another step holding the day.
    pub claim: ClaimId,
    /// Local day it holds (`YYYY-MM-DD`).
    pub day: String,
}

/// A sender's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SendOutcome {
    /// It was accepted; here is the message id.
    Staged {
        /// Message id the destination gave the post.
        message_id: String,
    },
    /// A definite refusal: nothing was sent (a lost race for the day, the destination said no).
    Refused {
        /// What the destination said; recorded in `post_refused`.
        reason: String,
    },
    /// Unknown: no id, a failure, a timeout. The post may have gone out.
    Unknown {
        /// What the sender said, or that it said nothing in time.
        reason: String,
    },
}
