//! Why an input is refused: a stopped cast, or a visit in another phase than the input needs.
//! Every refusal comes before the decision's first event, so a refused input changes nothing.

use crate::machine::{CastState, Phase, Rejection, Status};

/// The refusal of every input once the cast has stopped (completed, failed, aborted).
pub(super) fn stopped(state: &CastState) -> Option<Rejection> {
    let (status, hint) = match state.status {
        Status::Completed => ("completed", "start a new cast or recast from a point"),
        Status::Failed => ("failed", "revive it, or recast from a point"),
        Status::Aborted => ("aborted", "resume or revive it to continue"),
        _ => return None,
    };
    Some(Rejection::Stopped {
        cast: state.cast.clone(),
        status,
        hint,
    })
}

/// A refusal of `input` at this point of the cast, saying why.
pub(super) fn not_now(
    state: &CastState,
    input: &'static str,
    reason: impl Into<String>,
) -> Rejection {
    Rejection::NotNow {
        cast: state.cast.clone(),
        input,
        reason: reason.into(),
    }
}

/// The current visit, if the cast runs and the visit is in `phase`; else the refusal.
pub(super) fn waiting_in(
    state: &CastState,
    phase: Phase,
    input: &'static str,
    reason: &'static str,
) -> Result<crate::machine::Current, Rejection> {
    if let Some(r) = stopped(state) {
        return Err(r);
    }
    state
        .current
        .clone()
        .filter(|c| c.phase == phase)
        .ok_or_else(|| not_now(state, input, reason))
}

/// Refuses an agent's reply (text or tool calls) unless a prompt is waiting for one.
pub(super) fn awaiting_reply(state: &CastState) -> Result<(), Rejection> {
    if let Some(r) = stopped(state) {
        return Err(r);
    }
    if phase_of(state) != Some(Phase::AwaitingReply) {
        return Err(not_now(
            state,
            "an agent reply",
            "no prompt is waiting for one",
        ));
    }
    Ok(())
}

/// The phase of the visit in flight, if any.
pub(super) fn phase_of(state: &CastState) -> Option<Phase> {
    state.current.as_ref().map(|c| c.phase)
}
