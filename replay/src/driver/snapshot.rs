//! State snapshots: how the driver seals the ones it keeps, which one a fold may start from,
//! and the check `verify` runs (every kept snapshot against a fold from the first event).

use castlog_core::id::{CastId, Digest, Seq};
use castlog_core::machine::{CastState, snapshot};
use castlog_events::EventLog;
use castlog_events::seal::{Purpose, Seal};

use super::{DriveError, fold_with};

/// A snapshot of the state is kept every this many events (`put_snapshot`), so folding to
/// any seq reads at most this many events past the nearest one.
pub const SNAPSHOT_EVERY: u64 = 2048;

/// The seal of a snapshot of `cast` (`castlog_events::seal`, purpose `StateSnapshot`, name
/// `state`, this build's snapshot format), so one damaged or moved to another cast or seq is
/// not used.
fn seal<'a>(cast: &'a CastId, seq: Seq, hash: &'a Digest) -> Seal<'a> {
    Seal {
        purpose: Purpose::StateSnapshot,
        cast,
        name: "state",
        version: snapshot::VERSION,
        seq,
        hash,
    }
}

/// The snapshot the driver keeps of `state` (after the event at `seq`, whose chain hash is
/// `hash`, with `answers` agent answers folded): the state's bytes behind their seal.
pub fn sealed_snapshot(
    state: &CastState,
    answers: usize,
    seq: Seq,
    hash: Digest,
) -> castlog_events::Snapshot {
    let json = state.snapshot(answers as u64);
    let bytes = seal(&state.cast, seq, &hash).wrap(&json);
    castlog_events::Snapshot {
        version: snapshot::VERSION,
        seq,
        hash,
        bytes,
    }
}

/// A snapshot's state bytes, if its seal holds.
fn unsealed<'s>(cast: &CastId, snapshot: &'s castlog_events::Snapshot) -> Option<&'s [u8]> {
    seal(cast, snapshot.seq, &snapshot.hash).open(&snapshot.bytes)
}

/// The latest usable snapshot of `cast` at or before `until`, with the answers its events
/// hold: only one taken at the log's own chain hash for its seq, in this build's format, that
/// decodes. Anything else is ignored (with a warning) and the cast folded from the start.
pub(super) fn restored(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    until: Seq,
) -> Option<(CastState, usize)> {
    let snapshot = match log.snapshot(cast, until) {
        Ok(found) => found?,
        Err(err) => {
            tracing::warn!(%cast, %err, "snapshot not readable; folding from the start");
            return None;
        }
    };
    let seq = snapshot.seq;
    if snapshot.version != snapshot::VERSION {
        tracing::warn!(%cast, %seq, "snapshot of another format ignored");
        return None;
    }
    let Some(json) = unsealed(cast, &snapshot) else {
        tracing::warn!(%cast, %seq, "snapshot does not match its seal; ignored");
        return None;
    };
    let at = log.read(cast, seq, Some(seq)).ok()?.pop()?;
    if at.seq != seq || at.hash != snapshot.hash {
        tracing::warn!(%cast, %seq, "snapshot does not match the log at its seq; ignored");
        return None;
    }
    match CastState::restore(json) {
        Ok((state, answers)) if state.head == seq && state.cast == *cast => {
            Some((state, usize::try_from(answers).unwrap_or(usize::MAX)))
        }
        Ok(_) => {
            tracing::warn!(%cast, %seq, "snapshot of another point ignored");
            None
        }
        Err(err) => {
            tracing::warn!(%cast, %seq, %err, "snapshot does not decode; ignored");
            None
        }
    }
}

/// Every kept snapshot of `cast` that is not the state a fresh fold gives at its seq, as
/// `(seq, what is wrong)`: one fold from the first event, compared at each snapshot's seq.
pub fn check_snapshots(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
) -> Result<Vec<(Seq, String)>, DriveError> {
    let mut kept = Vec::new();
    let mut below = Seq(u64::MAX);
    while let Some(snapshot) = log.snapshot(cast, below)? {
        if snapshot.seq > below {
            // A log that answers past the bound asked for would be asked the same forever.
            break;
        }
        below = Seq(snapshot.seq.get().saturating_sub(1));
        let seq = snapshot.seq;
        kept.push(snapshot);
        if seq.get() <= 1 {
            break;
        }
    }
    let mut problems = Vec::new();
    let Some(last) = kept.first().map(|s| s.seq) else {
        return Ok(problems);
    };
    // Oldest first, met in step with the fold (no search per folded event).
    kept.reverse();
    let mut next = kept.iter().peekable();
    fold_with(log, cast, last, false, &mut |state, used| {
        while next.next_if(|s| s.seq < state.head).is_some() {}
        let Some(snapshot) = next.next_if(|s| s.seq == state.head) else {
            return;
        };
        let wrong = if snapshot.version != snapshot::VERSION {
            None // Another build's format: ignored on use, not damage.
        } else {
            match unsealed(cast, snapshot) {
                None => Some("does not match its seal (damaged; it is ignored)".to_owned()),
                Some(json) if json != state.snapshot(used as u64).as_slice() => {
                    Some("is not the state the log folds to there".to_owned())
                }
                Some(_) => None,
            }
        };
        if let Some(wrong) = wrong {
            problems.push((
                state.head,
                format!("the state snapshot at seq {} {wrong}", state.head),
            ));
        }
    })?;
    Ok(problems)
}
