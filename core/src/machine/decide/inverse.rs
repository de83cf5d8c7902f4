//! The inverse of `decide` on its first event: the input a recorded decision answered.
//!
//! The inputs of a cast are not stored apart from its events: each one is the first event of
//! the decision it caused (`agent_replied` for a reply, `utility_finished` for a utility,
//! `cast_revived` or its `allowance_extended` for revive, `prompt_dispatched` or
//! `dispatch_skipped` for a due dispatch, ...). Re-decide feeds these inputs to the machine
//! again and compares what it decides with the log, and recast reads its fork points and kept
//! inputs from them; both take the inverse from here, beside the `decide` it inverts, so a new
//! input and its first event are changed in one place.

use crate::event::Event;
use crate::input::{HeldDay, Input, SendOutcome};
use crate::machine::{CastState, Phase};

/// Whether the current visit is a post socket waiting for `StartPost`.
fn awaiting_post(state: &CastState) -> bool {
    state
        .current
        .as_ref()
        .is_some_and(|c| c.phase == Phase::AwaitingPost)
}

/// The input whose decision starts with `event`.
pub fn input_of(state: &CastState, event: &Event) -> Option<Input> {
    Some(match event {
        Event::AgentReplied(e) if !e.tool_calls.is_empty() => Input::AgentCalledTools {
            text: e.text.clone(),
            usage: e.usage,
            calls: e.tool_calls.clone(),
        },
        Event::ToolFinished(e) => Input::ToolFinished {
            call: e.call.clone(),
            output: e.output.clone(),
            exit: e.exit,
            error: e.error,
            truncated: e.truncated,
            duration_ms: e.duration_ms,
        },
        Event::LanesJoined(e) => Input::JoinLanes {
            lanes: e.lanes.clone(),
        },
        Event::WorkspaceCheckpointed(e) => Input::CheckpointWorkspace {
            socket: e.socket.clone(),
            visit: e.visit,
            start: e.start,
            tree: e.tree.clone(),
        },
        Event::AgentReplied(e) => Input::AgentReplied {
            text: e.text.clone(),
            usage: e.usage,
        },
        Event::AgentFailed(e) if e.structured_off => Input::StructuredOutputRefused {
            message: e.message.clone(),
        },
        Event::AgentFailed(e) => Input::AgentFailed {
            class: e.class,
            message: e.message.clone(),
        },
        Event::UtilityFinished(e) => Input::UtilityFinished {
            code: e.code,
            timed_out: e.timed_out,
            stdout: e.stdout.clone(),
            stderr: e.stderr.clone(),
            truncated: e.truncated,
        },
        Event::UserRefined(e) => Input::UserRefined {
            text: e.text.clone(),
            origin: e.origin.clone(),
        },
        Event::FinalizeRequested(e) => Input::Continue {
            origin: e.origin.clone(),
        },
        Event::CastAborted(e) => Input::Abort {
            reason: e.reason.clone(),
        },
        Event::CastRevived(_) | Event::AllowanceExtended(_) => Input::Revive,
        Event::BudgetRaised(e) => Input::RaiseBudget { tokens: e.tokens },
        Event::PromptHeld(_) => Input::HoldPrompt,
        Event::CastResumed(e) if e.after_fork => Input::ForkRedispatch,
        Event::CastResumed(_) => Input::Resume,
        Event::SteeringNoted(e) => Input::Steer {
            text: e.text.clone(),
            locked: e.locked,
            origin: e.origin.clone(),
        },
        Event::DispatchSkipped(e) => Input::DispatchDue { key: e.key.clone() },
        Event::WaypointMarked(e) => Input::Mark {
            name: e.name.clone(),
            at: e.at,
        },
        Event::PromptDispatched(_) => Input::DispatchDue {
            key: state.scheduled.clone()?,
        },
        // A post socket's claim (or refusal) answers the driver's `StartPost`; the ledger's
        // holders it was given are recovered from the refusal that names one.
        Event::PostClaimed(e) if awaiting_post(state) => Input::StartPost {
            dry_run: e.dry_run,
            held: Vec::new(),
            sent_before: None,
        },
        // A refusal naming a holder and a day answered a held day; one naming a claim and no
        // day answered a claim of an earlier run in the lineage.
        Event::PostRefused(e) if awaiting_post(state) => Input::StartPost {
            dry_run: e.dry_run,
            held: match (&e.held_by, &e.day) {
                (Some(claim), Some(day)) => vec![HeldDay {
                    claim: claim.clone(),
                    day: day.clone(),
                }],
                _ => Vec::new(),
            },
            sent_before: match (&e.held_by, &e.day) {
                (Some(claim), None) => Some(claim.clone()),
                _ => None,
            },
        },
        Event::PostStaged(e) => Input::PostOutcome {
            claim: e.claim.clone(),
            outcome: SendOutcome::Staged {
                message_id: e.message_id.clone(),
            },
        },
        Event::PostRefused(e) => Input::PostOutcome {
            claim: e.claim.clone(),
            outcome: SendOutcome::Refused {
                reason: e.reason.clone(),
            },
        },
        Event::PostOutcomeUnknown(e) => Input::PostOutcome {
            claim: e.claim.clone(),
            outcome: SendOutcome::Unknown {
                reason: e.reason.clone(),
            },
        },
        Event::PostResolved(e) => Input::ResolveClaimAs {
            claim: e.claim.clone(),
            resolution: e.resolution.clone(),
        },
        Event::PostResponseRecorded(e) => Input::RecordResponse {
            claim: e.claim.clone(),
            response: e.response,
        },
        Event::PostResolutionInherited(e) => Input::InheritedClaimResolved {
            claim: e.claim.clone(),
            status: e.status,
            message_id: e.message_id.clone(),
        },
        _ => return None,
    })
}
