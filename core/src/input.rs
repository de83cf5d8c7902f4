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
    /// The agent answered the prompt in flight.
    AgentReplied {
        /// The reply text.
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
    /// A utility process ended.
    UtilityFinished {
        /// Exit code, if it exited.
        code: Option<i32>,
        /// Whether it was killed at its timeout.
        timed_out: bool,
        /// Captured stdout.
        stdout: String,
        /// Captured stderr.
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
        /// Why.
        reason: String,
    },
    /// Restart a failed or aborted cast, extending the exhausted allowance.
    Revive,
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
        /// Its idempotency key.
        key: DispatchKey,
    },
    /// An operator steering note.
    Steer {
        /// The note.
        text: String,
        /// Whether it is locked into the system prefix.
        locked: bool,
        /// Where it came from when re-applied by a recast (`cast:seq`).
        #[serde(default)]
        origin: Option<String>,
    },
    /// A person names a point of the cast (a waypoint); allowed in every status.
    Mark {
        /// The name.
        name: String,
        /// The seq it names.
        at: crate::id::Seq,
    },
    /// A person resolves a pending claim.
    ResolveClaim {
        /// The claim.
        claim: ClaimId,
        /// The sender's message id if it was sent, `None` to abandon.
        message_id: Option<String>,
    },
    /// A person moves a claim on (any step of the claim state machine: staged, abandoned,
    /// approved, posted, declined).
    ResolveClaimAs {
        /// The claim.
        claim: ClaimId,
        /// The resolution.
        resolution: Resolution,
    },
    /// A person records how a sent post was received (the claim's status does not change).
    RecordResponse {
        /// The claim.
        claim: ClaimId,
        /// Answered or ignored.
        response: Response,
    },
    /// The claims ledger shows a pending claim this cast inherited (from the cast it was
    /// recast from) resolved in its owner's log: adopt that.
    InheritedClaimResolved {
        /// The claim.
        claim: ClaimId,
        /// Its status in the owner's log.
        status: ClaimStatus,
        /// Its message id there.
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
        /// The claim.
        claim: ClaimId,
        /// The outcome.
        outcome: SendOutcome,
    },
}

/// A claim holding a destination's day, as the ledger reports it to a post socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldDay {
    /// The claim.
    pub claim: ClaimId,
    /// The day it holds.
    pub day: String,
}

/// A sender's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SendOutcome {
    /// It was accepted; here is the message id.
    Staged {
        /// The id.
        message_id: String,
    },
    /// A definite refusal: nothing was sent (a lost race for the day, the destination said no).
    Refused {
        /// Why.
        reason: String,
    },
    /// Unknown: no id, a failure, a timeout. The post may have gone out.
    Unknown {
        /// What happened.
        reason: String,
    },
}
