//! Decoding a cast's records in seq order, with the earlier events later ones name.
//!
//! A `socket_completed` of version 3 names the `agent_replied` of its cast whose text its
//! output is, instead of repeating the text, and a `data_assigned` or `rework_routed` of
//! version 2 names the `socket_completed` its value or reason is read from
//! (`castlog_core::event`'s `completion` and `derived` modules have the layouts). A reader of
//! such a record needs the event it names: a [`Decoder`] keeps the latest reply and the latest
//! completion it read (the ones named: a visit's output is the last reply of the visit, the
//! assignments and rework of a completion follow it, and visits of one cast never overlap), so
//! reading a cast in order costs nothing more than those two kept once. A record naming an
//! event the decoder did not read (a read that starts after it: a fold from a snapshot, a
//! projection from its checkpoint) is resolved by reading that one seq from the log
//! ([`Decoder::event_in`]); without a log ([`Decoder::event`]) it does not decode, and the
//! error names the seq it needs.
//!
//! Every other record decodes as [`Recorded::event`] decodes it.

use castlog_core::event::{Contexts, DecodeError, Earlier, Event};
use castlog_core::id::{CastId, Seq};

use crate::log::EventLog;
use crate::record::Recorded;

/// Decodes records of casts in seq order (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct Decoder {
    /// The latest reply read.
    reply: Option<Latest>,
    /// The latest completion read.
    completion: Option<Latest>,
}

/// The latest event of a kind read: decoded by [`Decoder::event`], or noted by
/// [`Decoder::note`] by a reader that does not decode its kind (decoded only when a later
/// record names it).
#[derive(Debug, Clone)]
enum Latest {
    Decoded(CastId, Seq, Earlier),
    Stored(Box<Recorded>),
}

/// The kinds a later record may name.
const NAMED: [&str; 2] = ["agent_replied", "socket_completed"];

impl Decoder {
    /// A decoder that has read nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes the records of a cast (or of a history: ancestors first), in order.
    pub fn all<'r>(
        records: impl IntoIterator<Item = &'r Recorded>,
    ) -> Result<Vec<Event>, DecodeError> {
        let mut decoder = Decoder::new();
        records.into_iter().map(|r| decoder.event(r)).collect()
    }

    /// Decodes `record` into a typed event, upcasting old versions and resolving a name of an
    /// earlier event of its cast from the records read before it.
    pub fn event(&mut self, record: &Recorded) -> Result<Event, DecodeError> {
        self.decode(record, &mut |_, _| None)
    }

    /// [`Decoder::event`], reading from `log` an event this decoder did not read itself.
    pub fn event_in<L: EventLog + ?Sized>(
        &mut self,
        log: &L,
        record: &Recorded,
    ) -> Result<Event, DecodeError> {
        self.decode(record, &mut |cast, seq| read_earlier(log, cast, seq))
    }

    /// Reads `record` without decoding it, for a reader that skips most kinds: a reply or a
    /// completion is kept as stored, so a later record that names it still decodes.
    pub fn note(&mut self, record: &Recorded) {
        let slot = match record.kind.as_str() {
            "agent_replied" => &mut self.reply,
            "socket_completed" => &mut self.completion,
            _ => return,
        };
        *slot = Some(Latest::Stored(Box::new(record.clone())));
    }

    /// Decodes `record` as [`Decoder::event`] would, without counting it as read (a reply or
    /// completion it is is not kept): for a look at a record that is read in its turn later.
    pub fn peek(&self, record: &Recorded) -> Result<Event, DecodeError> {
        Event::decode_with(&record.kind, record.v, &record.payload, &mut |seq| {
            // Only an earlier seq can be named (so a hostile name never loops).
            (seq < record.seq)
                .then(|| self.resolve(&record.cast, seq))
                .flatten()
        })
    }

    /// The event at `seq` of `cast`, if it is the latest reply or completion read.
    fn resolve(&self, cast: &CastId, seq: Seq) -> Option<Earlier> {
        [&self.reply, &self.completion]
            .into_iter()
            .find_map(|slot| match slot.as_ref()? {
                Latest::Decoded(c, at, earlier) if c == cast && *at == seq => Some(earlier.clone()),
                Latest::Stored(r) if r.cast == *cast && r.seq == seq => {
                    self.peek(r).ok()?.earlier()
                }
                _ => None,
            })
    }

    fn decode(
        &mut self,
        record: &Recorded,
        read: &mut dyn FnMut(&CastId, Seq) -> Option<Earlier>,
    ) -> Result<Event, DecodeError> {
        let event = Event::decode_with(&record.kind, record.v, &record.payload, &mut |seq| {
            // Only an earlier seq can be named (so a hostile name never loops).
            if seq >= record.seq {
                return None;
            }
            self.resolve(&record.cast, seq)
                .or_else(|| read(&record.cast, seq))
        })?;
        if NAMED.contains(&record.kind.as_str()) {
            let kept = event
                .earlier()
                .map(|earlier| Latest::Decoded(record.cast.clone(), record.seq, earlier));
            match event {
                // A reply that asks for tools is never an output: the one after it will be.
                Event::AgentReplied(_) => self.reply = kept,
                _ => self.completion = kept,
            }
        }
        Ok(event)
    }

    /// Whether `record`'s bytes decode as an event of its kind, in the context that owns the
    /// kind (see [`Contexts::check`]); the machine's own kinds through [`Decoder::event`].
    pub fn check(&mut self, contexts: &Contexts, record: &Recorded) -> Result<(), DecodeError> {
        match contexts.owner(&record.kind) {
            Some(_) => contexts.check(&record.kind, record.v, &record.payload),
            None => self.event(record).map(drop),
        }
    }
}

/// The reply or completion at `seq` of `cast`, read from the log (a completion with the reply
/// it names); `None` when there is neither there.
fn read_earlier<L: EventLog + ?Sized>(log: &L, cast: &CastId, seq: Seq) -> Option<Earlier> {
    let records = log.read(cast, seq, Some(seq)).ok()?;
    let record = records.into_iter().find(|r| r.seq == seq)?;
    Decoder::new().event_in(log, &record).ok()?.earlier()
}

#[cfg(test)]
mod tests {
    use castlog_core::event::{AgentReplied, SocketCompleted};
    use castlog_core::id::{SocketId, Turn, Visit};

    use super::*;
    use crate::memory::InMemoryLog;
    use crate::record::Pending;

    fn reply(text: &str) -> Event {
        Event::from(AgentReplied {
            socket: SocketId::new("Build"),
            visit: Visit(1),
            turn: Turn(1),
            text: text.into(),
            usage: None,
            tool_calls: Vec::new(),
            cost: None,
        })
    }

    fn completed(output: &str, output_of: Seq) -> Event {
        Event::from(SocketCompleted {
            socket: SocketId::new("Build"),
            visit: Visit(1),
            item: None,
            output: output.into(),
            output_of: Some(output_of),
            parsed: None,
            satisfied: None,
            finalized: false,
        })
    }

    fn cast_of(log: &InMemoryLog, events: &[Event]) -> Vec<Recorded> {
        cast_named(log, "c", events)
    }

    fn cast_named(log: &InMemoryLog, name: &str, events: &[Event]) -> Vec<Recorded> {
        let cast = CastId::new(name);
        let pending: Vec<Pending> = events.iter().map(|e| Pending::new(0, e)).collect();
        log.append(&cast, Seq(1), &pending).unwrap()
    }

    #[test]
    fn a_completion_reads_its_output_from_the_reply_read_before_it() {
        let log = InMemoryLog::new();
        let events = [reply("first"), completed("first", Seq(1))];
        let records = cast_of(&log, &events);
        assert!(!String::from_utf8_lossy(&records[1].payload).contains("first"));
        let mut decoder = Decoder::new();
        let decoded: Vec<Event> = records.iter().map(|r| decoder.event(r).unwrap()).collect();
        assert_eq!(decoded, events);
        // Alone, the completion names what it is missing.
        let err = Decoder::new().event(&records[1]).unwrap_err();
        assert!(
            matches!(err, DecodeError::Unresolved { seq: Seq(1), .. }),
            "{err}"
        );
        // Given the log, it reads the reply it did not see.
        assert_eq!(
            Decoder::new().event_in(&log, &records[1]).unwrap(),
            events[1]
        );
    }

    #[test]
    fn a_noted_reply_is_decoded_when_a_completion_names_it() {
        let log = InMemoryLog::new();
        let events = [reply("first"), completed("first", Seq(1))];
        let records = cast_of(&log, &events);
        let mut decoder = Decoder::new();
        decoder.note(&records[0]);
        assert_eq!(decoder.peek(&records[1]).unwrap(), events[1]);
        assert_eq!(decoder.event(&records[1]).unwrap(), events[1]);
        // A record of another cast at the same seq is not that reply.
        let mut other = records[1].clone();
        other.cast = CastId::new("other");
        assert!(decoder.peek(&other).is_err());
    }

    #[test]
    fn a_completion_naming_itself_or_a_later_seq_does_not_decode() {
        let log = InMemoryLog::new();
        for named in [2, 3] {
            let events = [reply("first"), completed("first", Seq(named))];
            let records = cast_named(&log, &format!("c{named}"), &events);
            let err = Decoder::new().event_in(&log, &records[1]).unwrap_err();
            assert!(matches!(err, DecodeError::Unresolved { .. }), "{err}");
        }
    }

    #[test]
    fn a_completion_naming_a_seq_that_is_not_a_reply_does_not_decode() {
        let log = InMemoryLog::new();
        let events = [reply("first"), completed("first", Seq(2))];
        let records = cast_of(&log, &events);
        let mut decoder = Decoder::new();
        decoder.event(&records[0]).unwrap();
        let err = decoder.event_in(&log, &records[1]).unwrap_err();
        assert!(
            matches!(err, DecodeError::Unresolved { seq: Seq(2), .. }),
            "{err}"
        );
    }
}
