//! Folding a cast's log into its state: from the first event, or from the latest sealed
//! snapshot at or before the seq asked for; a recast folds its parent up to the fork point
//! first. Also counts the agent answers the events hold (what a scripted agent skips).

use std::ops::ControlFlow;

use castlog_core::event::Event;
use castlog_core::id::{CastId, Seq};
use castlog_core::machine::CastState;
use castlog_events::{Decoder, EventLog, LogError, StreamKind};

use super::snapshot::restored;
use super::{DriveError, FoldError};

/// Folds a cast's events into its state.
pub fn fold(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
) -> Result<(CastState, usize), DriveError> {
    fold_until(log, cast, Seq(u64::MAX))
}

/// Folds a cast's events up to and including `until` (time travel by seq), starting from the
/// latest snapshot at or before `until` when there is a usable one.
pub fn fold_until(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    until: Seq,
) -> Result<(CastState, usize), DriveError> {
    fold_with(log, cast, until, true, &mut |_, _| {})
}

/// [`fold_until`] from the first event, trusting no snapshot (what `verify` checks against).
pub fn fold_until_fresh(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    until: Seq,
) -> Result<(CastState, usize), DriveError> {
    fold_with(log, cast, until, false, &mut |_, _| {})
}

pub(super) fn fold_with(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    until: Seq,
    snapshots: bool,
    visit: &mut dyn FnMut(&CastState, usize),
) -> Result<(CastState, usize), DriveError> {
    refuse_other_streams(log, cast)?;
    let restored = if snapshots {
        restored(log, cast, until)
    } else {
        None
    };
    let (mut state, mut used, from) = match restored {
        Some((state, used)) => {
            let from = state.head.next();
            (Some(state), used, from)
        }
        None => (None, 0, Seq::FIRST),
    };
    let mut failure: Option<DriveError> = None;
    // From a snapshot, the reply a completion names may be before it: read from the log then.
    let mut decoder = Decoder::new();
    let scanned = log.scan(cast, from, &mut |record| {
        if record.seq > until {
            return ControlFlow::Break(());
        }
        let event = match decoder.event_in(log, &record) {
            Ok(event) => event,
            Err(err) => {
                failure = Some(DriveError::Fold {
                    cast: cast.clone(),
                    seq: record.seq,
                    cause: err.into(),
                });
                return ControlFlow::Break(());
            }
        };
        used += answers_in(&event);
        match (&mut state, &event) {
            (None, Event::CastStarted(started)) => match CastState::started(started) {
                Ok(s) => state = Some(s),
                Err(err) => {
                    failure = Some(DriveError::Fold {
                        cast: cast.clone(),
                        seq: record.seq,
                        cause: err.into(),
                    });
                    return ControlFlow::Break(());
                }
            },
            (None, Event::CastForked(forked)) => {
                // A recast: the parent's state at the fork point, then the child's own events.
                // The parent's answers were consumed by the parent's agent, not the child's.
                let parent = fold_with(
                    log,
                    &forked.parent,
                    forked.parent_seq,
                    snapshots,
                    &mut |_, _| {},
                )
                .and_then(|(parent, _)| {
                    CastState::forked(&parent, forked).map_err(|err| DriveError::Fold {
                        cast: cast.clone(),
                        seq: record.seq,
                        cause: err.into(),
                    })
                });
                match parent {
                    Ok(s) => state = Some(s),
                    Err(err) => {
                        failure = Some(err);
                        return ControlFlow::Break(());
                    }
                }
            }
            (None, Event::LaneStarted(started)) => {
                // A lane: the parent's state at its plan, with the lane's own items.
                match fold_with(
                    log,
                    &started.parent,
                    started.parent_seq,
                    snapshots,
                    &mut |_, _| {},
                ) {
                    Ok((parent, _)) => state = Some(CastState::lane(&parent, started)),
                    Err(err) => {
                        failure = Some(err);
                        return ControlFlow::Break(());
                    }
                }
            }
            (None, _) => {
                failure = Some(DriveError::Fold {
                    cast: cast.clone(),
                    seq: record.seq,
                    cause: FoldError::NotAStart { kind: record.kind },
                });
                return ControlFlow::Break(());
            }
            (Some(s), event) => s.evolve(event),
        }
        if let Some(s) = &state {
            visit(s, used);
        }
        ControlFlow::Continue(())
    });
    match scanned {
        Err(LogError::UnknownCast { .. }) => {
            return Err(DriveError::UnknownCast { cast: cast.clone() });
        }
        Err(err) => return Err(err.into()),
        Ok(()) => {}
    }
    if let Some(err) = failure {
        return Err(err);
    }
    state
        .map(|s| (s, used))
        .ok_or_else(|| DriveError::UnknownCast { cast: cast.clone() })
}

/// [`DriveError::NotACast`] for a stream the log records as another kind than a cast (an
/// engage run, a destination's claims ledger): the cast machine does not fold those.
fn refuse_other_streams(log: &(impl EventLog + ?Sized), cast: &CastId) -> Result<(), DriveError> {
    let Some(head) = log.head(cast)? else {
        return Ok(());
    };
    let hint = match head.kind {
        StreamKind::Cast => return Ok(()),
        StreamKind::Engagement => " and its report; `castlog claims` lists its claim",
        _ => "; `castlog claims` lists the claims it records",
    };
    let first = log.read(cast, Seq::FIRST, Some(Seq::FIRST))?;
    Err(DriveError::NotACast {
        cast: cast.clone(),
        stream: head.kind,
        kind: first
            .first()
            .map_or_else(|| "missing".into(), |r| r.kind.clone()),
        hint,
    })
}

/// How many agent answers an event accounts for.
pub(super) fn answers_in(event: &Event) -> usize {
    match event {
        Event::AgentReplied(_) | Event::AgentFailed(_) => 1,
        Event::UserRefined(e) if e.origin.as_deref() == Some("script") => 1,
        Event::FinalizeRequested(e) if e.origin.as_deref() == Some("script") => 1,
        _ => 0,
    }
}
