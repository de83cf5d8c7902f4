//! Two histories walked side by side: their common prefix, where they part, and each side's
//! steps.

use castlog_core::event::Event;
use castlog_core::id::{CastId, DispatchKey};
use castlog_events::{Decoder, Recorded};

use super::step::Steps;
use super::{Divergence, EventSummary};
use crate::timeline::TimelineLine;

/// An event made comparable across casts: the cast id (in `cast_started` and in dispatch keys)
/// is the only expected difference between two runs of the same thing, besides where a text is
/// stored (a completion's output, an assignment's value, a rework reason: named by an earlier
/// event's seq, or in full). `decoder` has read the
/// history before `record`.
fn normalized(record: &Recorded, decoder: &Decoder) -> (String, Vec<u8>) {
    let own = |key: &DispatchKey| {
        DispatchKey::new(
            key.as_str()
                .strip_prefix(&format!("{}:", record.cast))
                .unwrap_or(key.as_str()),
        )
    };
    let event = match decoder.peek(record) {
        Ok(Event::CastStarted(mut e)) => {
            e.cast = CastId::new("");
            Event::CastStarted(e)
        }
        Ok(Event::DispatchScheduled(mut e)) => {
            e.key = own(&e.key);
            Event::DispatchScheduled(e)
        }
        Ok(Event::DispatchSkipped(mut e)) => {
            e.key = own(&e.key);
            Event::DispatchSkipped(e)
        }
        // Where the output is stored (the reply's seq, or in full) is no part of what it is.
        Ok(Event::SocketCompleted(mut e)) => {
            e.output_of = None;
            Event::SocketCompleted(e)
        }
        Ok(Event::DataAssigned(mut e)) => {
            e.from = None;
            Event::DataAssigned(e)
        }
        Ok(Event::ReworkRouted(mut e)) => {
            e.reason_of = None;
            Event::ReworkRouted(e)
        }
        Ok(other) => other,
        Err(_) => return (record.kind.clone(), record.payload.clone()),
    };
    (record.kind.clone(), event.encode())
}

/// What a walk found.
#[derive(Debug)]
pub(super) struct Walked {
    pub(super) common: u64,
    pub(super) first_divergence: Option<Divergence>,
    pub(super) a: Steps,
    pub(super) b: Steps,
}

/// Walks both histories once, without the fork markers: a recast that decided what its parent
/// decided shares that much more with it.
pub(super) fn walk(
    ha: &mut dyn Iterator<Item = Recorded>,
    hb: &mut dyn Iterator<Item = Recorded>,
) -> Walked {
    let decision = |r: &Recorded| r.kind != "cast_forked";
    let (mut ha, mut hb) = (ha.filter(decision), hb.filter(decision));
    // A shared ancestor's record is the same record on both sides: no need to re-encode it.
    // Records of the same kind, version and payload bytes normalize alike (normalizing only
    // drops the cast's own id): only records whose bytes differ are decoded to compare.
    let identical =
        |x: &Recorded, y: &Recorded| x.cast == y.cast && x.seq == y.seq && x.hash == y.hash;
    let (mut sa, mut sb) = (Steps::default(), Steps::default());
    let mut common = 0u64;
    // While both sides read the very same records (a recast's prefix, its parent's), both
    // sides' steps are the same: they are made once, and b's are a copy of a's where the
    // records first differ.
    let mut shared = true;
    let (x, y) = loop {
        let (x, y) = match (ha.next(), hb.next()) {
            (Some(x), Some(y)) => (x, y),
            parted => break parted,
        };
        // While shared, b's history so far is a's.
        let b_read = if shared { &sa.decoder } else { &sb.decoder };
        let same = identical(&x, &y)
            || (x.kind == y.kind && x.v == y.v && x.payload == y.payload)
            || normalized(&x, &sa.decoder) == normalized(&y, b_read);
        if !same {
            break (Some(x), Some(y));
        }
        common += 1;
        if shared && !identical(&x, &y) {
            shared = false;
            sb = sa.clone();
        }
        sa.push(&x);
        if !shared {
            sb.push(&y);
        }
    };
    if shared {
        sb = sa.clone();
    }
    let describe = |r: &Option<Recorded>, read: &Decoder| {
        r.as_ref().map(|r| {
            let decoded = read.peek(r);
            let line =
                TimelineLine::of(r, decoded.as_ref(), castlog_core::event::Contexts::MACHINE);
            EventSummary {
                kind: line.kind,
                summary: line.summary,
            }
        })
    };
    let first_divergence = (x.is_some() || y.is_some()).then(|| Divergence {
        position: common + 1,
        a: describe(&x, &sa.decoder),
        b: describe(&y, if shared { &sa.decoder } else { &sb.decoder }),
    });
    for r in x.into_iter().chain(ha) {
        sa.push(&r);
    }
    for r in y.into_iter().chain(hb) {
        sb.push(&r);
    }
    Walked {
        common,
        first_divergence,
        a: sa.finish(),
        b: sb.finish(),
    }
}
