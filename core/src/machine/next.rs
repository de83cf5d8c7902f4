//! What a cast needs next: the one effect its state asks of the shell, as a value.
//!
//! Like raft-rs's `Ready`, the machine does not perform anything; after every fold it says
//! what must happen for the cast to move on, and the driver is a loop that performs it and
//! feeds the result back as an [`Input`](crate::input::Input):
//!
//! | `Next` | the driver | fed back |
//! |---|---|---|
//! | `Dispatch { key }` | nothing outside: the decision is due | `DispatchDue { key }` |
//! | `AskAgent` | sends the prompt in flight to the agent | `AgentReplied` / `AgentFailed` |
//! | `AwaitResume` | stops: the agent was interrupted | (`castlog resume`) |
//! | `AskPerson` | asks the person (or a script) for a refinement | `UserRefined` / `Continue` |
//! | `RunUtility { spec }` | runs the program | `UtilityFinished` |
//! | `RunTool { call, tool, .. }` | runs the tool under the materia's scope | `ToolFinished` |
//! | `StartPost { step, spec }` | reads the claims ledger, claims, sends once | `StartPost`, `PostOutcome` |
//! | `AwaitClaim { claim }` | adopts an inherited resolution, or stops for a person | `InheritedClaimResolved` |
//! | `Stopped { status }` | returns | — |
//!
//! The phase of a visit and the fields beside it (the scheduled key, the socket's kind, the
//! claim) are kept apart in [`CastState`] because that is its serialized form (the snapshot
//! format and `castlog state`); `next` is the one place that reads them together. A
//! combination `evolve` never produces at a decision boundary is an [`Inconsistent`] state,
//! named, never a guess.

use crate::id::{CastId, ClaimId, DispatchKey, SocketId};
use crate::loadout::{PostSpec, SocketKind, UtilitySpec};

use super::{CastState, Phase, Status};

/// The effect a cast waits for.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Next {
    /// A scheduled dispatch is due: deciding `DispatchDue` renders and records the prompt.
    Dispatch {
        /// The dispatch's idempotency key.
        key: DispatchKey,
    },
    /// A prompt is out and unanswered: the agent answers it.
    AskAgent {
        /// Socket whose prompt is out.
        socket: SocketId,
        /// Transient agent failures since the prompt was dispatched (the driver gives up after
        /// a few in a row and leaves the cast to `resume`).
        transient_failures: u32,
    },
    /// The agent was interrupted: the prompt is sent again only on `resume`.
    AwaitResume {
        /// Socket whose prompt waits to be sent again.
        socket: SocketId,
    },
    /// A tool call is recorded and has no outcome: the shell runs it under the materia's
    /// scope and feeds back `ToolFinished` (a call the scope does not allow is refused with an
    /// error result, never run).
    RunTool {
        /// The socket whose agent asked.
        socket: SocketId,
        /// The call's id.
        call: String,
        /// The tool's name as the agent gave it.
        tool: String,
        /// Its arguments as received.
        arguments: serde_json::Value,
    },
    /// A multi-turn draft waits for a person's refinement or `continue`.
    AskPerson {
        /// Multi-turn socket whose draft waits.
        socket: SocketId,
    },
    /// A utility socket's program must run.
    RunUtility {
        /// What to run (argv, fixed output or built-in), its stdin params and timeout.
        spec: UtilitySpec,
    },
    /// A post socket waits for the ledger check and its claim.
    StartPost {
        /// The step key (`socket@item`) its claim is made for.
        step: String,
        /// Destination, body (a path or a template) and claim-day zone, from the loadout.
        spec: PostSpec,
    },
    /// A post's claim is pending: nothing sends it again; a person resolves it.
    AwaitClaim {
        /// Claim the visit made, pending in this cast's log.
        claim: ClaimId,
    },
    /// A parallel generator's lanes run: the shell creates the lane casts not yet in the log
    /// (in plan order), drives every lane not terminal (at most `max_concurrency` at a time;
    /// with `revive`, failed and aborted lanes are revived first), and when all are terminal
    /// feeds back `JoinLanes` with each lane's outcome in plan order.
    RunLanes {
        /// The lanes in plan order.
        lanes: Vec<crate::event::LanePlan>,
        /// Seq of the parent's `lanes_planned`, where every lane forks from.
        planned_at: crate::id::Seq,
        /// How many run at once.
        max_concurrency: u32,
        /// Whether failed and aborted lanes are revived (the parent was revived).
        revive: bool,
    },
    /// Nothing happens without a person: the cast completed, failed or was aborted, or it is
    /// between visits with nothing to do.
    Stopped {
        /// Where it stands.
        status: Status,
    },
}

/// A state whose phase disagrees with the fields beside it: the log was not written by this
/// machine (`castlog verify` says where).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Inconsistent {
    /// The visit awaits a dispatch and none is scheduled.
    #[error(
        "cast {cast} waits for a dispatch at {socket} but none is scheduled; `castlog verify {cast}` checks its log"
    )]
    NoDispatchScheduled {
        /// Cast whose state is inconsistent.
        cast: CastId,
        /// Socket of the visit that waits.
        socket: SocketId,
    },
    /// The phase names a kind of socket the loadout does not give this socket.
    #[error(
        "cast {cast} waits for {wanted} at {socket}, which its loadout does not make one; `castlog verify {cast}` checks its log"
    )]
    WrongKind {
        /// Cast whose state is inconsistent.
        cast: CastId,
        /// Socket the phase waits at.
        socket: SocketId,
        /// What the phase wants (`a utility`, `a post`).
        wanted: &'static str,
    },
    /// The visit runs tool calls and every one has an outcome.
    #[error(
        "cast {cast} runs tool calls at {socket} but none is without an outcome; `castlog verify {cast}` checks its log"
    )]
    NoToolCall {
        /// The cast.
        cast: CastId,
        /// The socket.
        socket: SocketId,
    },
    /// The visit runs lanes and the cast has no plan.
    #[error(
        "cast {cast} runs lanes at {socket} but records no plan; `castlog verify {cast}` checks its log"
    )]
    NoLanes {
        /// The cast.
        cast: CastId,
        /// The socket.
        socket: SocketId,
    },
    /// A post waits on a claim and names none.
    #[error(
        "cast {cast} waits on a post claim at {socket} and names none; `castlog verify {cast}` checks its log"
    )]
    NoClaim {
        /// Cast whose state is inconsistent.
        cast: CastId,
        /// Socket of the post visit.
        socket: SocketId,
    },
}

impl CastState {
    /// What this cast needs next (see the [module](self) table).
    pub fn next(&self) -> Result<Next, Inconsistent> {
        let stopped = Next::Stopped {
            status: self.status,
        };
        if self.status.is_stopped() {
            return Ok(stopped);
        }
        let Some(current) = self.current.as_ref() else {
            return Ok(stopped);
        };
        let socket = || current.socket.clone();
        let kind = self.loadout.socket(&current.socket).map(|s| &s.kind);
        let wrong_kind = |wanted| Inconsistent::WrongKind {
            cast: self.cast.clone(),
            socket: socket(),
            wanted,
        };
        Ok(match current.phase {
            Phase::AwaitingDispatch => match &self.scheduled {
                Some(key) => Next::Dispatch { key: key.clone() },
                None => {
                    return Err(Inconsistent::NoDispatchScheduled {
                        cast: self.cast.clone(),
                        socket: socket(),
                    });
                }
            },
            Phase::AwaitingReply if current.interrupted => Next::AwaitResume { socket: socket() },
            Phase::AwaitingReply => Next::AskAgent {
                socket: socket(),
                transient_failures: current.transient_failures,
            },
            Phase::AwaitingRefinement => Next::AskPerson { socket: socket() },
            Phase::RunningTools => match current.tool_calls.iter().find(|t| t.outcome.is_none()) {
                Some(t) => Next::RunTool {
                    socket: socket(),
                    call: t.request.call.clone(),
                    tool: t.request.tool.clone(),
                    arguments: t.request.arguments.clone(),
                },
                None => {
                    return Err(Inconsistent::NoToolCall {
                        cast: self.cast.clone(),
                        socket: socket(),
                    });
                }
            },
            Phase::RunningUtility => match kind {
                Some(SocketKind::Utility(spec)) => Next::RunUtility { spec: spec.clone() },
                _ => return Err(wrong_kind("a utility")),
            },
            Phase::AwaitingPost => match self.post_step() {
                Some((step, spec)) => Next::StartPost { step, spec },
                None => return Err(wrong_kind("a post")),
            },
            Phase::AwaitingPostOutcome => match &current.claim {
                Some(claim) => Next::AwaitClaim {
                    claim: claim.clone(),
                },
                None => {
                    return Err(Inconsistent::NoClaim {
                        cast: self.cast.clone(),
                        socket: socket(),
                    });
                }
            },
            Phase::RunningLanes => match &self.lanes {
                Some(lanes) => Next::RunLanes {
                    lanes: lanes.plan.clone(),
                    planned_at: lanes.planned_at,
                    max_concurrency: lanes.max_concurrency,
                    revive: lanes.revive,
                },
                None => {
                    return Err(Inconsistent::NoLanes {
                        cast: self.cast.clone(),
                        socket: socket(),
                    });
                }
            },
            Phase::Done => stopped,
        })
    }
}
