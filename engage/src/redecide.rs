//! Re-decide an engage cast: fold its events through [`EngageState`], read each decision's
//! input back from its first event ([`input_of`]), decide again at the recorded time and
//! compare: the same kinds, payload bytes and chain hashes, or the first difference is a
//! divergence (`castlog verify` reports it, exit 3).

use castlog_core::id::{CastId, Digest, Seq};
use castlog_events::log::with_events;
use castlog_events::{EventLog, LogError, Recorded};
use castlog_replay::redecide::Divergence;

use crate::event::{EngageRecord, STARTED};
use crate::machine::{EngageState, input_of};

/// Whether `first` (a stream's first event) begins an engage cast.
pub fn begins_engage_cast(first: &Recorded) -> bool {
    first.kind == STARTED
}

/// Re-decides an engage cast; `Ok(None)` when every decision reproduces the log exactly, and
/// for a stream that is not an engage cast (it is not this context's to check).
pub fn redecide(log: &dyn EventLog, cast: &CastId) -> Result<Option<Divergence>, LogError> {
    with_events(log, cast, Seq::FIRST, |records| {
        redecide_records(cast, records)
    })?
}

fn render_recorded(record: &Recorded) -> String {
    format!(
        "{} {}",
        record.kind,
        String::from_utf8_lossy(&record.payload)
    )
}

fn redecide_records(
    cast: &CastId,
    records: &mut dyn Iterator<Item = Recorded>,
) -> Result<Option<Divergence>, LogError> {
    let diverge = |seq: Seq, expected: String, found: String| {
        Ok(Some(Divergence {
            cast: cast.clone(),
            seq,
            expected,
            found,
        }))
    };
    let mut records = records.peekable();
    match records.peek() {
        Some(first) if begins_engage_cast(first) => {}
        _ => return Ok(None),
    }
    let mut state = EngageState::new();
    let mut prev = Digest::ZERO;
    let mut last = Seq(0);
    while let Some(record) = records.next() {
        let event = match EngageRecord::decode(&record) {
            Ok(event) => event,
            Err(err) => return diverge(record.seq, "a decodable event".into(), err.to_string()),
        };
        let Some(step) = input_of(&event) else {
            return diverge(
                record.seq,
                "the first event of an engage decision".into(),
                render_recorded(&record),
            );
        };
        let produced = match state.decide(&step) {
            Ok(events) => events,
            Err(err) => {
                return diverge(
                    record.seq,
                    format!("the engage machine refuses: {err}"),
                    render_recorded(&record),
                );
            }
        };
        let at_ms = record.at_ms;
        let mut next = Some(record);
        for event in &produced {
            let Some(recorded) = next.take().or_else(|| records.next()) else {
                return diverge(last.next(), event.render(), "the end of the log".into());
            };
            let sealed = event
                .pending(at_ms)
                .seal(&recorded.cast, recorded.seq, prev);
            if sealed.kind != recorded.kind || sealed.payload != recorded.payload {
                return diverge(recorded.seq, event.render(), render_recorded(&recorded));
            }
            if sealed.hash != recorded.hash {
                let (expected, found) = sealed.hash.short_pair(&recorded.hash);
                return diverge(
                    recorded.seq,
                    format!(
                        "hash {expected} (recorded at {at_ms} ms after {})",
                        prev.short()
                    ),
                    format!("hash {found} at {} ms", recorded.at_ms),
                );
            }
            prev = sealed.hash;
            last = recorded.seq;
            state.evolve(event);
        }
    }
    Ok(None)
}
