//! The durability pipeline: a decision's events and blobs become a step of the log, appended
//! at once or begun and held until the driver settles, and the observer hears of a step only
//! once it is durable.
//!
//! With a local agent the driver keeps up to `steps_in_flight` steps begun and not yet durable
//! (the SQLite log commits them in groups and fsyncs on its own thread); every effect that
//! reaches outside the process waits for all of them first ([`Driver::settle`]). A step that
//! crosses a multiple of [`SNAPSHOT_EVERY`] events keeps a snapshot with it.

use castlog_core::env::Env;
use castlog_core::event::Event;
use castlog_core::id::Seq;
use castlog_core::input::Input;
use castlog_core::machine::Next;
use castlog_events::chain::blob_hash;
use castlog_events::{Appending, EventLog, Pending, Recorded};

use super::fold::answers_in;
use super::{DriveError, Driver, Notice, SNAPSHOT_EVERY, sealed_snapshot};

/// A begun step waiting to be durable, and its events (told to the observer once durable).
pub(super) struct InFlight<'a> {
    appending: Appending<'a>,
    events: Vec<Event>,
}

/// The events of one decision, stamped `now` for the log.
pub(super) fn pending(events: &[Event], now: u64) -> Vec<Pending> {
    events.iter().map(|e| Pending::new(now, e)).collect()
}

impl<'a, L: EventLog + ?Sized> Driver<'a, L> {
    /// Waits until no more than `keep` begun steps are not yet durable, telling the
    /// observer about the events of each step that is.
    pub(super) fn settle(&mut self, keep: usize) -> Result<(), DriveError> {
        while self.in_flight.len() > keep
            && let Some(step) = self.in_flight.pop_front()
        {
            let records = step.appending.records().to_vec();
            step.appending.wait()?;
            self.recorded(&step.events, &records);
        }
        Ok(())
    }

    /// Tells the observer of durable events, each with its record (`records` are the
    /// step's records, in the order of `events`).
    pub(super) fn recorded(&mut self, events: &[Event], records: &[Recorded]) {
        for (event, record) in events.iter().zip(records) {
            tracing::debug!(kind = event.kind(), "recorded");
            if let Some(observer) = self.observer.as_mut() {
                observer(Notice::Recorded { event, record });
            }
        }
    }

    /// Decides `input` and appends the events; `begin` lets them be stored and durable later
    /// ([`EventLog::begin_append_with_blobs`]), when the driver next settles.
    pub(super) fn record(&mut self, input: &Input, begin: bool) -> Result<(), DriveError> {
        let env = Env::from_clock(self.clock, blob_hash);
        let cast = self.state.cast.clone();
        let expected = self.state.head.next();
        let first = self.state.decide_mut(input, &env)?;
        // `decide_mut` applies the events to the state as it emits them, so the state moves
        // ahead of the log here; if the append below fails the driver returns
        // the error and is not used again, and the log (the truth) is unchanged.
        let mut events = first.events;
        let mut blobs = first.blobs;
        let mut prompt = first.prompt;
        // A dispatch the decision scheduled is due at once: decide it now and commit both
        // decisions together (one fsync). The log still holds two decisions, in order, and a
        // crash keeps both or neither; `resume` handles either.
        if let Ok(Next::Dispatch { key }) = self.state.next() {
            let due = self.state.decide_mut(&Input::DispatchDue { key }, &env)?;
            events.extend(due.events);
            blobs.extend(due.blobs);
            prompt = due.prompt.or(prompt);
        }
        let pending = pending(&events, env.now_ms);
        // A step that crosses a multiple of `SNAPSHOT_EVERY` events takes a snapshot of the
        // state right after it, naming its last hash (a cache, kept after the step: the log
        // writes it with the step or later, never before).
        let last = (expected.get() + events.len() as u64).saturating_sub(1);
        let snapshot_due =
            last / SNAPSHOT_EVERY > expected.get().saturating_sub(1) / SNAPSHOT_EVERY;
        // At most `steps_in_flight` steps are not yet durable, this one included; a step
        // appended durably waits for every one before it.
        self.settle(if begin { self.steps_in_flight - 1 } else { 0 })?;
        let (recorded, begun, durable) = if begin {
            let appending = self
                .log
                .begin_append_with_blobs(&cast, expected, &blobs, &pending)?;
            (
                appending.records().last().map(|r| (r.seq, r.hash)),
                Some(appending),
                Vec::new(),
            )
        } else {
            let records = self
                .log
                .append_with_blobs(&cast, expected, &blobs, &pending)?;
            (records.last().map(|r| (r.seq, r.hash)), None, records)
        };
        if prompt.is_some() {
            self.last_prompt = prompt;
        }
        // The calls recorded here may run here; one recorded by an earlier process may have
        // run already, and only `resume` decides what becomes of it.
        for event in &events {
            if let Event::ToolCalled(called) = event {
                self.calls_recorded.insert(called.call.clone());
            }
        }
        self.answers_used += events.iter().map(answers_in).sum::<usize>();
        if snapshot_due && let Some((seq, hash)) = recorded {
            self.keep_snapshot(seq, hash, begun.is_some());
        }
        let completes = events
            .iter()
            .any(|e| matches!(e, Event::SocketCompleted(_)));
        let checkpointed = completes.then(|| events.clone());
        match begun {
            Some(appending) => self.in_flight.push_back(InFlight { appending, events }),
            None => self.recorded(&events, &durable),
        }
        match checkpointed {
            Some(events) => self.checkpoint_after(&events, begin),
            None => Ok(()),
        }
    }

    /// Keeps a snapshot of the state just appended (`begun`: with its step, which may not be
    /// stored yet); a cache: failing to keep one is only logged.
    fn keep_snapshot(&self, seq: Seq, hash: castlog_core::id::Digest, begun: bool) {
        let snapshot = sealed_snapshot(&self.state, self.answers_used, seq, hash);
        let cast = &self.state.cast;
        let kept = if begun {
            self.log.begin_put_snapshot(cast, snapshot)
        } else {
            self.log.put_snapshot(cast, snapshot)
        };
        if let Err(err) = kept {
            tracing::warn!(%cast, %seq, %err, "snapshot not kept");
        }
    }
}
