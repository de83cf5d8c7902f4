//! `InMemoryQueue`: the reference [`RunQueue`], its rows in a map under one mutex, appending
//! to any [`EventLog`] while it holds the mutex (so the epoch check and the append are one
//! step, as one transaction is in the databases).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use castlog_core::id::{CastId, Seq};

use super::{Lease, QueueEntry, QueueState, RunQueue, Slot, WorkerId};
use crate::log::{EventLog, LogError};
use crate::record::{Pending, Recorded};

/// Queue rows and slots in memory, over the log `L`.
#[derive(Debug)]
pub struct InMemoryQueue<L> {
    log: L,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    rows: BTreeMap<CastId, QueueEntry>,
    /// `(endpoint, slot)` -> (holder, lease end).
    slots: BTreeMap<(String, u32), (WorkerId, u64)>,
}

impl<L: EventLog> InMemoryQueue<L> {
    /// An empty queue appending to `log`.
    pub fn new(log: L) -> Self {
        Self {
            log,
            state: Mutex::new(State::default()),
        }
    }

    /// The log.
    pub fn log(&self) -> &L {
        &self.log
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every change is made whole before the guard drops; take it back if poisoned.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether `lease` is still the row's (same epoch, running, same holder).
pub(crate) fn holds(row: &QueueEntry, lease: &Lease) -> bool {
    row.epoch == lease.epoch
        && row.state == QueueState::Running
        && row.holder.as_ref() == Some(&lease.holder)
}

impl<L: EventLog> RunQueue for InMemoryQueue<L> {
    fn submit(&self, cast: &CastId, agent: &str, now_ms: u64) -> Result<(), LogError> {
        let mut state = self.state();
        if state.rows.contains_key(cast) {
            return Err(LogError::AlreadyQueued { cast: cast.clone() });
        }
        state.rows.insert(
            cast.clone(),
            QueueEntry {
                cast: cast.clone(),
                agent: agent.to_owned(),
                state: QueueState::Queued,
                holder: None,
                epoch: 0,
                lease_until_ms: 0,
                submitted_ms: now_ms,
            },
        );
        Ok(())
    }

    fn take(
        &self,
        worker: &WorkerId,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<Option<Lease>, LogError> {
        let mut state = self.state();
        let Some(row) = state
            .rows
            .values_mut()
            .filter(|r| r.takeable(now_ms))
            .min_by(|a, b| (a.submitted_ms, &a.cast).cmp(&(b.submitted_ms, &b.cast)))
        else {
            return Ok(None);
        };
        let taken_over = row.state == QueueState::Running;
        row.state = QueueState::Running;
        row.holder = Some(worker.clone());
        row.epoch += 1;
        row.lease_until_ms = now_ms.saturating_add(lease_ms);
        Ok(Some(Lease {
            cast: row.cast.clone(),
            agent: row.agent.clone(),
            holder: worker.clone(),
            epoch: row.epoch,
            taken_over,
        }))
    }

    fn renew(&self, lease: &Lease, now_ms: u64, lease_ms: u64) -> Result<bool, LogError> {
        let mut state = self.state();
        match state.rows.get_mut(&lease.cast) {
            Some(row) if holds(row, lease) => {
                row.lease_until_ms = now_ms.saturating_add(lease_ms);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn release(&self, lease: &Lease, to: QueueState) -> Result<bool, LogError> {
        let mut state = self.state();
        match state.rows.get_mut(&lease.cast) {
            Some(row) if holds(row, lease) => {
                row.state = to;
                row.holder = None;
                row.lease_until_ms = 0;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn wake(&self, cast: &CastId, _now_ms: u64) -> Result<bool, LogError> {
        let mut state = self.state();
        match state.rows.get_mut(cast) {
            Some(row) if row.state == QueueState::Paused => {
                row.state = QueueState::Queued;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn entries(&self) -> Result<Vec<QueueEntry>, LogError> {
        let mut rows: Vec<QueueEntry> = self.state().rows.values().cloned().collect();
        rows.sort_by(|a, b| (a.submitted_ms, &a.cast).cmp(&(b.submitted_ms, &b.cast)));
        Ok(rows)
    }

    fn append_leased(
        &self,
        lease: &Lease,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        let state = self.state();
        let current = state.rows.get(&lease.cast).map_or(0, |r| r.epoch);
        if !state.rows.get(&lease.cast).is_some_and(|r| holds(r, lease)) {
            return Err(LogError::LeaseLost {
                cast: lease.cast.clone(),
                epoch: lease.epoch,
                current,
            });
        }
        self.log
            .append_with_blobs(&lease.cast, expected, blobs, events)
    }

    fn take_slot(
        &self,
        endpoint: &str,
        limit: u32,
        worker: &WorkerId,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<Option<Slot>, LogError> {
        let mut state = self.state();
        for slot in 0..limit {
            let key = (endpoint.to_owned(), slot);
            let free = state
                .slots
                .get(&key)
                .is_none_or(|(_, until)| *until < now_ms);
            if free {
                state
                    .slots
                    .insert(key, (worker.clone(), now_ms.saturating_add(lease_ms)));
                return Ok(Some(Slot {
                    endpoint: endpoint.to_owned(),
                    slot,
                    holder: worker.clone(),
                }));
            }
        }
        Ok(None)
    }

    fn renew_slot(&self, slot: &Slot, now_ms: u64, lease_ms: u64) -> Result<(), LogError> {
        let mut state = self.state();
        if let Some((holder, until)) = state.slots.get_mut(&(slot.endpoint.clone(), slot.slot))
            && *holder == slot.holder
        {
            *until = now_ms.saturating_add(lease_ms);
        }
        Ok(())
    }

    fn release_slot(&self, slot: &Slot) -> Result<(), LogError> {
        let mut state = self.state();
        let key = (slot.endpoint.clone(), slot.slot);
        if state
            .slots
            .get(&key)
            .is_some_and(|(h, _)| *h == slot.holder)
        {
            state.slots.remove(&key);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InMemoryLog;
    use castlog_core::event::{CastAborted, Event};

    fn event() -> Pending {
        Pending::new(
            0,
            &Event::from(CastAborted {
                reason: "test".into(),
            }),
        )
    }

    #[test]
    fn a_take_over_fences_the_old_holder() {
        let queue = InMemoryQueue::new(InMemoryLog::new());
        let cast = CastId::new("c");
        queue.log().append(&cast, Seq(1), &[event()]).unwrap();
        queue.submit(&cast, "cmd:true", 0).unwrap();
        let (a, b) = (WorkerId::new("a"), WorkerId::new("b"));
        let first = queue.take(&a, 0, 10).unwrap().unwrap();
        assert!(!first.taken_over);
        assert!(queue.take(&b, 5, 10).unwrap().is_none());
        queue
            .append_leased(&first, Seq(2), &[], &[event()])
            .unwrap();
        let second = queue.take(&b, 11, 10).unwrap().unwrap();
        assert!(second.taken_over);
        assert_eq!(second.epoch, first.epoch + 1);
        let err = queue
            .append_leased(&first, Seq(3), &[], &[event()])
            .unwrap_err();
        assert!(matches!(
            err,
            LogError::LeaseLost {
                epoch: 1,
                current: 2,
                ..
            }
        ));
        assert!(!queue.renew(&first, 12, 10).unwrap());
        assert!(!queue.release(&first, QueueState::Done).unwrap());
        queue
            .append_leased(&second, Seq(3), &[], &[event()])
            .unwrap();
        assert!(queue.release(&second, QueueState::Paused).unwrap());
        assert!(queue.take(&a, 100, 10).unwrap().is_none());
        assert!(queue.wake(&cast, 100).unwrap());
        assert_eq!(queue.take(&a, 100, 10).unwrap().unwrap().epoch, 3);
    }

    #[test]
    fn slots_hold_a_limit_until_their_lease_ends() {
        let queue = InMemoryQueue::new(InMemoryLog::new());
        let w = WorkerId::new("w");
        let one = queue.take_slot("e", 2, &w, 0, 10).unwrap().unwrap();
        let two = queue.take_slot("e", 2, &w, 0, 10).unwrap().unwrap();
        assert_ne!(one.slot, two.slot);
        assert!(queue.take_slot("e", 2, &w, 5, 10).unwrap().is_none());
        queue.release_slot(&one).unwrap();
        assert_eq!(queue.take_slot("e", 2, &w, 5, 10).unwrap().unwrap().slot, 0);
        assert!(queue.take_slot("e", 2, &w, 11, 10).unwrap().is_some());
    }
}
