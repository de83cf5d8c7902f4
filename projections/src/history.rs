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
