//! A cast's full history: a recast's parent prefix (recursively, up to and with each fork
//! point) followed by its own events, read as it is consumed.

use castlog_core::event::Event;
use castlog_core::id::{CastId, Seq};
use castlog_events::log::with_events;
use castlog_events::{EventLog, LogError, Recorded};

/// Runs `consume` over the history of `cast`, read a few pages at a time (see
/// [`castlog_events::log::with_events`]) instead of held, whatever the casts' lengths.
///
/// A cast without events is [`LogError::UnknownCast`].
pub fn with_history(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    consume: &mut dyn FnMut(&mut dyn Iterator<Item = Recorded>),
) -> Result<(), LogError> {
    let mut first = None;
    log.scan(cast, Seq::FIRST, &mut |record| {
        first = Some(record);
        std::ops::ControlFlow::Break(())
    })?;
    let Some(first) = first else {
        return Err(LogError::UnknownCast { cast: cast.clone() });
    };
    let Ok(Event::CastForked(forked)) = first.event() else {
        return with_events(log, cast, Seq::FIRST, |own| consume(own));
    };
    let mut own_read = Ok(());
    with_history(log, &forked.parent, &mut |ancestors| {
        // The parent's history up to and with the fork point (all of it if that is missing).
        let mut reached = false;
        let mut prefix = ancestors.take_while(|r| {
            let take = !reached;
            reached = reached || (r.cast == forked.parent && r.seq == forked.parent_seq);
            take
        });
        own_read = with_events(log, cast, Seq::FIRST, |own| {
            consume(&mut prefix.by_ref().chain(own));
        });
    })?;
    own_read
}

/// What reads two histories side by side.
pub type Both<'c> =
    dyn FnMut(&mut dyn Iterator<Item = Recorded>, &mut dyn Iterator<Item = Recorded>) + 'c;

/// Runs `consume` over the histories of `a` and `b` side by side, as [`with_history`] reads
/// each. When one is a recast of the other (its first event forks from the other cast), its
/// prefix (the other's history up to and with the fork point) is handed over from the
/// records the other's history reads, instead of being read from the log a second time; a
/// cast with itself is read once.
///
/// A cast without events is [`LogError::UnknownCast`].
pub fn with_histories(
    log: &(impl EventLog + ?Sized),
    a: &CastId,
    b: &CastId,
    consume: &mut Both<'_>,
) -> Result<(), LogError> {
    let fork_of = |cast: &CastId, parent: &CastId| -> Result<Option<Seq>, LogError> {
        let mut first = None;
        log.scan(cast, Seq::FIRST, &mut |record| {
            first = Some(record);
            std::ops::ControlFlow::Break(())
        })?;
        Ok(match first.map(|r| r.event()) {
            Some(Ok(Event::CastForked(forked))) if forked.parent == *parent => {
                Some(forked.parent_seq)
            }
            _ => None,
        })
    };
    if a == b {
        // One reading for both sides: every record is the other side's too.
        return with_history(log, a, &mut |source| {
            let tee = std::cell::RefCell::new(Tee::new(source, None));
            let mut one = std::iter::from_fn(|| tee.borrow_mut().next_for_parent());
            let mut other = std::iter::from_fn(|| tee.borrow_mut().next_for_child());
            consume(&mut one, &mut other);
        });
    }
    if let Some(point) = fork_of(b, a)? {
        return with_handed_prefix(log, a, b, point, &mut |parent, child| {
            consume(parent, child)
        });
    }
    if let Some(point) = fork_of(a, b)? {
        return with_handed_prefix(log, b, a, point, &mut |parent, child| {
            consume(child, parent)
        });
    }
    let mut failed = Ok(());
    with_history(log, a, &mut |ha| {
        failed = with_history(log, b, &mut |hb| consume(ha, hb));
    })?;
    failed
}

/// The histories of `parent` and of `child`, a recast of it at `point`: the child's prefix is
/// the parent's records up to and with `(parent, point)`, taken from the parent's reading.
fn with_handed_prefix(
    log: &(impl EventLog + ?Sized),
    parent: &CastId,
    child: &CastId,
    point: Seq,
    consume: &mut Both<'_>,
) -> Result<(), LogError> {
    let mut own_read = Ok(());
    with_history(log, parent, &mut |source| {
        let tee = std::cell::RefCell::new(Tee::new(source, Some((parent.clone(), point))));
        let mut parent_side = std::iter::from_fn(|| tee.borrow_mut().next_for_parent());
        let mut prefix = std::iter::from_fn(|| tee.borrow_mut().next_for_child());
        own_read = with_events(log, child, Seq::FIRST, |own| {
            // The child's own first event is its fork marker, which its history keeps.
            consume(&mut parent_side, &mut prefix.by_ref().chain(own));
        });
    })?;
    own_read
}

/// One reading of a parent's history for two readers: the parent's side, and a recast's
/// prefix (the records up to and with the fork point; all of them without one). What one
/// reader has read and the other not yet is kept for the other.
struct Tee<'s> {
    source: &'s mut dyn Iterator<Item = Recorded>,
    for_parent: std::collections::VecDeque<Recorded>,
    for_child: std::collections::VecDeque<Recorded>,
    prefix_open: bool,
    point: Option<(CastId, Seq)>,
}

impl<'s> Tee<'s> {
    fn new(source: &'s mut dyn Iterator<Item = Recorded>, point: Option<(CastId, Seq)>) -> Self {
        Tee {
            source,
            for_parent: std::collections::VecDeque::new(),
            for_child: std::collections::VecDeque::new(),
            prefix_open: true,
            point,
        }
    }

    /// The next record from the source, noting whether it is in the prefix (and closing it
    /// at the fork point).
    fn pull(&mut self) -> Option<(Recorded, bool)> {
        let record = self.source.next()?;
        let in_prefix = self.prefix_open;
        if in_prefix
            && let Some((cast, seq)) = &self.point
            && record.cast == *cast
            && record.seq == *seq
        {
            self.prefix_open = false;
        }
        Some((record, in_prefix))
    }

    fn next_for_parent(&mut self) -> Option<Recorded> {
        if let Some(record) = self.for_parent.pop_front() {
            return Some(record);
        }
        let (record, in_prefix) = self.pull()?;
        if in_prefix {
            self.for_child.push_back(record.clone());
        }
        Some(record)
    }

    fn next_for_child(&mut self) -> Option<Recorded> {
        if let Some(record) = self.for_child.pop_front() {
            return Some(record);
        }
        if !self.prefix_open {
            return None;
        }
        let (record, _) = self.pull()?;
        self.for_parent.push_back(record.clone());
        Some(record)
    }
}

#[cfg(test)]
mod tests {
    use castlog_core::event::{CastForked, SteeringNoted};
    use castlog_events::{ForkPoint, InMemoryLog, Pending};

    use super::*;

    fn notes(from: u64, n: u64) -> Vec<Pending> {
        (from..from + n)
            .map(|i| {
                let note = Event::from(SteeringNoted {
                    text: format!("note {i}"),
                    locked: false,
                    origin: None,
                });
                Pending::new(1_700_000_000_000 + i, &note)
            })
            .collect()
    }

    fn collected(log: &InMemoryLog, cast: &CastId) -> Vec<Recorded> {
        let mut out = Vec::new();
        with_history(log, cast, &mut |h| out.extend(h)).unwrap();
        out
    }

    /// A parent `a` (itself a recast of `root`) and `b`, a recast of `a` at its seq 3.
    fn family() -> (InMemoryLog, CastId, CastId) {
        let log = InMemoryLog::new();
        let (root, a, b) = (CastId::new("root"), CastId::new("a"), CastId::new("b"));
        let fork = |log: &InMemoryLog, child: &CastId, parent: &CastId, seq: u64, more: u64| {
            let hash = log.read(parent, Seq(seq), Some(Seq(seq))).unwrap()[0].hash;
            let marker = Event::from(CastForked {
                cast: child.clone(),
                parent: parent.clone(),
                parent_seq: Seq(seq),
                parent_hash: hash,
                loadout_hash: None,
                tools: None,
                loadout: None,
                workdir: None,
            });
            let point = ForkPoint {
                cast: parent.clone(),
                seq: Seq(seq),
                hash,
            };
            let mut events = vec![Pending::new(1_700_000_000_000, &marker)];
            events.extend(notes(100, more));
            log.fork(child, &point, &events).unwrap();
        };
        log.append(&root, Seq::FIRST, &notes(0, 4)).unwrap();
        fork(&log, &a, &root, 2, 5);
        fork(&log, &b, &a, 3, 4);
        (log, a, b)
    }

    #[test]
    fn a_recasts_prefix_is_handed_over_in_either_order() {
        let (log, a, b) = family();
        let (full_a, full_b) = (collected(&log, &a), collected(&log, &b));
        assert_eq!(full_b.len(), 2 + 1 + 2 + 1 + 4);
        for (x, y, want_x, want_y) in [(&a, &b, &full_a, &full_b), (&b, &a, &full_b, &full_a)] {
            // Read in lockstep, and with one side drained first.
            for lockstep in [true, false] {
                let (mut got_x, mut got_y) = (Vec::new(), Vec::new());
                with_histories(&log, x, y, &mut |hx, hy| {
                    if lockstep {
                        loop {
                            let (p, q) = (hx.next(), hy.next());
                            if p.is_none() && q.is_none() {
                                break;
                            }
                            got_x.extend(p);
                            got_y.extend(q);
                        }
                    } else {
                        got_y.extend(hy);
                        got_x.extend(hx);
                    }
                })
                .unwrap();
                assert_eq!((&got_x, &got_y), (want_x, want_y), "lockstep {lockstep}");
            }
        }
        // Unrelated casts and a cast with itself read as two histories.
        let root = CastId::new("root");
        let mut lens = (0, 0);
        with_histories(&log, &root, &b, &mut |h, k| lens = (h.count(), k.count())).unwrap();
        assert_eq!(lens, (4, full_b.len()));
        with_histories(&log, &b, &b, &mut |h, k| lens = (h.count(), k.count())).unwrap();
        assert_eq!(lens, (full_b.len(), full_b.len()));
    }
}
