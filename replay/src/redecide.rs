//! Re-decide: replay a cast's log through the machine and compare, event by event.
//!
//! The inputs of a cast are not stored separately: each one is the first event of the decision
//! it caused (`agent_replied` for a reply, `utility_finished` for a utility, `cast_revived` or its
//! `allowance_extended` for revive, `prompt_dispatched` or `dispatch_skipped` for a due dispatch,
//! ...; `machine::decide::input_of` is that inverse). Re-decide folds the log, recovers each
//! input from its first event, runs `decide` again
//! with the recorded time, and checks that the machine produces exactly the recorded events. The
//! first difference is a divergence: the log was not written by this machine (or the machine
//! changed its mind about history).

use castlog_core::env::Env;
use castlog_core::event::Event;
use castlog_core::id::{CastId, Seq};
use castlog_core::machine::decide::{self, input_of};
use castlog_events::chain::blob_hash;
use castlog_events::log::with_events;
use castlog_events::{Decoder, EventLog, LogError, Recorded};
use serde::Serialize;

/// Where a replayed decision differs from the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Divergence {
    /// Cast being re-decided.
    pub cast: CastId,
    /// First seq where the machine's events and the log's differ.
    pub seq: Seq,
    /// What the machine produces there (kind and payload), or a note.
    pub expected: String,
    /// What the log holds there.
    pub found: String,
}

fn render(event: &Event) -> String {
    format!(
        "{} {}",
        event.kind(),
        String::from_utf8_lossy(&event.encode())
    )
}

fn render_recorded(record: &Recorded) -> String {
    format!(
        "{} {}",
        record.kind,
        String::from_utf8_lossy(&record.payload)
    )
}

/// Re-decides a whole cast. `Ok(None)` means every decision reproduced the log exactly.
/// The events are read as they are checked ([`with_events`]), one decision's at a time, so
/// memory does not grow with the cast; the first problem met is the one reported.
pub fn redecide(log: &dyn EventLog, cast: &CastId) -> Result<Option<Divergence>, LogError> {
    with_events(log, cast, Seq::FIRST, |records| {
        redecide_records(log, cast, records)
    })?
}

fn redecide_records(
    log: &dyn EventLog,
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
    let Some(first) = records.next() else {
        return Ok(None);
    };
    if !Event::KINDS.iter().any(|(kind, _)| *kind == first.kind) {
        // A stream of another context (an engage run) is re-decided by that context.
        return Ok(None);
    }
    let mut prev = castlog_core::id::Digest::ZERO;
    // One decoder for the whole cast, in order: a completion reads the reply it names.
    let mut decoder = Decoder::new();
    let (mut state, mut position) = match decoded(&mut decoder, &first) {
        Err(d) => return Ok(Some(d)),
        Ok(Event::CastStarted(started)) => {
            let at_ms = first.at_ms;
            let env = Env::new(at_ms, blob_hash);
            let (state, decision) = match decide::start(started, &env) {
                Ok(done) => done,
                Err(err) => {
                    return diverge(Seq::FIRST, "a startable loadout".into(), err.to_string());
                }
            };
            let stretch = Stretch {
                cast,
                position: 0,
                at_ms,
            };
            if let Some(d) =
                stretch.compare(&mut decoder, &decision.events, first, records, &mut prev)
            {
                return Ok(Some(d));
            }
            (state, decision.events.len() as u64)
        }
        Ok(Event::CastForked(_)) => {
            // A recast starts from its parent's state at the fork point; its own decisions
            // are re-decided from there.
            // From the first event: a re-decide trusts no snapshot.
            match crate::driver::fold_until_fresh(log, cast, Seq::FIRST) {
                Ok((state, _)) => {
                    prev = first.hash;
                    (state, 1)
                }
                Err(err) => return diverge(Seq::FIRST, "a foldable fork".into(), err.to_string()),
            }
        }
        Ok(Event::LaneStarted(started)) => {
            // A lane starts from its parent's state at the plan; its first decision (the
            // lane's start and its entry socket) is re-decided like a cast's start.
            let at_ms = first.at_ms;
            let parent =
                match crate::driver::fold_until_fresh(log, &started.parent, started.parent_seq) {
                    Ok((parent, _)) => parent,
                    Err(err) => {
                        return diverge(
                            Seq::FIRST,
                            "a foldable parent of the lane".into(),
                            err.to_string(),
                        );
                    }
                };
            let env = Env::new(at_ms, blob_hash);
            let (state, decision) = match decide::start_lane(&parent, started, &env) {
                Ok(done) => done,
                Err(err) => return diverge(Seq::FIRST, "a startable lane".into(), err.to_string()),
            };
            prev = log
                .head(cast)?
                .and_then(|h| h.parent)
                .map_or(castlog_core::id::Digest::ZERO, |p| p.hash);
            let stretch = Stretch {
                cast,
                position: 0,
                at_ms,
            };
            if let Some(d) =
                stretch.compare(&mut decoder, &decision.events, first, records, &mut prev)
            {
                return Ok(Some(d));
            }
            (state, decision.events.len() as u64)
        }
        // A log that is not a machine cast (e.g. `bench append`'s) has no decisions to redo.
        Ok(_) => return Ok(None),
    };
    while let Some(record) = records.next() {
        let event = match decoded(&mut decoder, &record) {
            Ok(event) => event,
            Err(d) => return Ok(Some(d)),
        };
        let Some(input) = input_of(&state, &event) else {
            return diverge(
                record.seq,
                "the first event of a decision (a reply, a utility result, a person's input)"
                    .into(),
                render_recorded(&record),
            );
        };
        let env = Env::new(record.at_ms, blob_hash);
        let decision = match state.decide_mut(&input, &env) {
            Ok(d) => d,
            Err(err) => {
                return diverge(
                    record.seq,
                    format!("the machine refuses: {err}"),
                    render_recorded(&record),
                );
            }
        };
        if decision.events.is_empty() {
            return diverge(
                record.seq,
                "a decision with events".into(),
                render_recorded(&record),
            );
        }
        let stretch = Stretch {
            cast,
            position,
            at_ms: record.at_ms,
        };
        if let Some(d) = stretch.compare(&mut decoder, &decision.events, record, records, &mut prev)
        {
            return Ok(Some(d));
        }
        position += decision.events.len() as u64;
    }
    Ok(None)
}

/// The event a record holds, or the divergence of a record that does not decode.
fn decoded(decoder: &mut Decoder, record: &Recorded) -> Result<Event, Divergence> {
    decoder.event(record).map_err(|err| Divergence {
        cast: record.cast.clone(),
        seq: record.seq,
        expected: "a decodable event".into(),
        found: err.to_string(),
    })
}

/// Names the first entry whose placement or text differs between two renderings.
fn first_entry_difference(
    now: &[castlog_core::event::Placement],
    then: &[castlog_core::event::Placement],
) -> String {
    for i in 0..now.len().max(then.len()) {
        match (now.get(i), then.get(i)) {
            (Some(a), Some(b)) if a == b => continue,
            (Some(a), Some(b)) if a.entry == b.entry && a.body != b.body => {
                return format!("first differing entry: {} (its text changed)", a.entry);
            }
            (Some(a), Some(b)) if a.entry == b.entry => {
                use castlog_core::syntax::json_name;
                return format!(
                    "first differing entry: {} (placed {} by {}, recorded {} by {})",
                    a.entry,
                    json_name(&a.destination),
                    a.rule,
                    json_name(&b.destination),
                    b.rule
                );
            }
            (Some(a), Some(b)) => {
                return format!("first differing entry: {} (recorded: {})", a.entry, b.entry);
            }
            (Some(a), None) => {
                return format!(
                    "first differing entry: {} (not in the recorded prompt)",
                    a.entry
                );
            }
            (None, Some(b)) => {
                return format!("first differing entry: {} (no longer rendered)", b.entry);
            }
            (None, None) => break,
        }
    }
    "same entries, different rendering".into()
}

/// Where one decision's events are in the log: its first event's position (0 = the cast's
/// first event) and the time they were recorded at.
struct Stretch<'a> {
    cast: &'a CastId,
    position: u64,
    at_ms: u64,
}

impl Stretch<'_> {
    /// Checks that `produced`, sealed at `at_ms` after `prev`, is exactly the recorded
    /// stretch starting with `first` and going on with `rest`: same kinds, same payload bytes,
    /// same times, same chain hashes.
    fn compare(
        &self,
        decoder: &mut Decoder,
        produced: &[Event],
        first: Recorded,
        rest: &mut dyn Iterator<Item = Recorded>,
        prev: &mut castlog_core::id::Digest,
    ) -> Option<Divergence> {
        let at_ms = self.at_ms;
        let mut first = Some(first);
        for (offset, event) in produced.iter().enumerate() {
            // The first record was decoded by the caller (it gave the input).
            let record = match first.take() {
                Some(record) => record,
                None => match rest.next() {
                    Some(record) => {
                        if let Err(d) = decoded(decoder, &record) {
                            return Some(d);
                        }
                        record
                    }
                    None => {
                        return Some(Divergence {
                            cast: self.cast.clone(),
                            seq: Seq(self.position + offset as u64 + 1),
                            expected: render(event),
                            found: "the end of the log".into(),
                        });
                    }
                },
            };
            let record = &record;
            // Written in the version the record was: a cast an older castlog recorded
            // re-decides to its own bytes.
            let sealed = castlog_events::Pending::at_version(at_ms, event, record.v).seal(
                &record.cast,
                record.seq,
                *prev,
            );
            if sealed.kind != record.kind || sealed.payload != record.payload {
                if let (Event::PromptDispatched(now), Ok(Event::PromptDispatched(then))) =
                    (event, record.event())
                {
                    let (rendered, recorded) = now.prompt_hash.short_pair(&then.prompt_hash);
                    return Some(Divergence {
                        cast: record.cast.clone(),
                        seq: record.seq,
                        expected: format!(
                            "prompt drift at {} visit {} turn {}: re-rendered prompt {rendered}",
                            now.socket, now.visit, now.turn,
                        ),
                        found: format!(
                            "recorded prompt {recorded}; {}",
                            first_entry_difference(&now.placements, &then.placements)
                        ),
                    });
                }
                return Some(Divergence {
                    cast: record.cast.clone(),
                    seq: record.seq,
                    expected: render(event),
                    found: render_recorded(record),
                });
            }
            if sealed.hash != record.hash {
                let (expected, found) = sealed.hash.short_pair(&record.hash);
                return Some(Divergence {
                    cast: record.cast.clone(),
                    seq: record.seq,
                    expected: format!(
                        "hash {expected} (recorded at {at_ms} ms after {})",
                        prev.short()
                    ),
                    found: format!("hash {found} at {} ms", record.at_ms),
                });
            }
            *prev = sealed.hash;
        }
        None
    }
}
