//! `InMemoryLog`: the reference [`EventLog`], a few maps behind one mutex.
//!
//! It keeps every invariant of the trait except surviving a crash. Tests use it to pin behaviour
//! that the SQLite log must match (the conformance suite runs against both).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::{Mutex, MutexGuard};

use castlog_core::id::{CastId, Digest, Seq};

use crate::chain::blob_hash;
use crate::log::{CastHead, EventLog, ForkPoint, LogError, StoredRow};
use crate::record::{Pending, Recorded, seal_batch};
use crate::stream::StreamKind;

/// A log held in memory.
#[derive(Debug, Default)]
pub struct InMemoryLog {
    // One mutex for everything: appends are atomic across heads and events by construction.
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Heads in creation order.
    heads: Vec<CastHead>,
    /// Events per cast, `events[cast][i].seq == i + 1`.
    events: HashMap<CastId, Vec<Recorded>>,
    blobs: HashMap<Digest, Vec<u8>>,
}

impl State {
    fn head_mut(&mut self, cast: &CastId) -> Option<&mut CastHead> {
        self.heads.iter_mut().find(|h| &h.cast == cast)
    }

    fn create(
        &mut self,
        cast: &CastId,
        parent: Option<ForkPoint>,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        if self.events.contains_key(cast) {
            return Err(LogError::Conflict {
                cast: cast.clone(),
                expected: Seq::FIRST,
                found: self.head_mut(cast).map_or(Seq(0), |h| h.seq).next(),
            });
        }
        let Some(first) = events.first() else {
            return Err(LogError::EmptyAppend { cast: cast.clone() });
        };
        let genesis = parent.as_ref().map_or(Digest::ZERO, |p| p.hash);
        let sealed = seal_batch(cast, Seq(0), genesis, events);
        let last = sealed.last().map_or(genesis, |r| r.hash);
        self.heads.push(CastHead {
            cast: cast.clone(),
            seq: Seq(sealed.len() as u64),
            hash: last,
            kind: StreamKind::opened_by(first.kind),
            parent,
            created_ms: first.at_ms,
        });
        self.events.insert(cast.clone(), sealed.clone());
        Ok(sealed)
    }

    fn check_fork_point(&self, from: &ForkPoint) -> Result<(), LogError> {
        let parent = self.events.get(&from.cast);
        let found = parent
            .and_then(|events| events.get((from.seq.get() as usize).wrapping_sub(1)))
            .map(|r| r.hash);
        match found {
            Some(hash) if hash == from.hash => Ok(()),
            Some(hash) => Err(LogError::BadForkPoint {
                parent: from.cast.clone(),
                seq: from.seq,
                reason: format!("the parent's hash there is {hash}, not {}", from.hash),
            }),
            None => Err(LogError::BadForkPoint {
                parent: from.cast.clone(),
                seq: from.seq,
                reason: "no such event in the log".into(),
            }),
        }
    }
}

impl InMemoryLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied append (every mutation is
        // a push after all checks), so a poisoned lock is still consistent.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl EventLog for InMemoryLog {
    fn append(
        &self,
        cast: &CastId,
        expected: Seq,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        let mut state = self.lock();
        if expected == Seq::FIRST {
            return state.create(cast, None, events);
        }
        let Some(head) = state.head_mut(cast) else {
            return Err(LogError::Conflict {
                cast: cast.clone(),
                expected,
                found: Seq::FIRST,
            });
        };
        if head.seq.next() != expected {
            return Err(LogError::Conflict {
                cast: cast.clone(),
                expected,
                found: head.seq.next(),
            });
        }
        if events.is_empty() {
            return Err(LogError::EmptyAppend { cast: cast.clone() });
        }
        let sealed = seal_batch(cast, head.seq, head.hash, events);
        if let Some(last) = sealed.last() {
            head.seq = last.seq;
            head.hash = last.hash;
        }
        state
            .events
            .entry(cast.clone())
            .or_default()
            .extend(sealed.iter().cloned());
        Ok(sealed)
    }

    fn fork(
        &self,
        cast: &CastId,
        from: &ForkPoint,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        let mut state = self.lock();
        state.check_fork_point(from)?;
        state.create(cast, Some(from.clone()), events)
    }

    fn import(&self, head: &CastHead, events: &[Recorded]) -> Result<(), LogError> {
        let mut state = self.lock();
        if state.events.contains_key(&head.cast) {
            return Err(LogError::CastExists {
                cast: head.cast.clone(),
            });
        }
        if let Some(parent) = &head.parent {
            state.check_fork_point(parent)?;
        }
        for (i, record) in events.iter().enumerate() {
            if record.seq != Seq(i as u64 + 1) || record.cast != head.cast {
                return Err(LogError::BrokenImport {
                    cast: head.cast.clone(),
                    seq: record.seq,
                    message: "records are not numbered 1, 2, 3, ... for this cast".into(),
                });
            }
        }
        state.heads.push(head.clone());
        state.events.insert(head.cast.clone(), events.to_vec());
        Ok(())
    }

    fn scan(
        &self,
        cast: &CastId,
        from: Seq,
        visit: &mut dyn FnMut(Recorded) -> ControlFlow<()>,
    ) -> Result<(), LogError> {
        // Copy out under the lock, visit without it, so a visitor may call back into the log.
        let records: Vec<Recorded> = {
            let state = self.lock();
            let Some(events) = state.events.get(cast) else {
                return Err(LogError::UnknownCast { cast: cast.clone() });
            };
            events.iter().filter(|r| r.seq >= from).cloned().collect()
        };
        for record in records {
            if visit(record).is_break() {
                break;
            }
        }
        Ok(())
    }

    fn casts(&self) -> Result<Vec<CastHead>, LogError> {
        Ok(self.lock().heads.clone())
    }

    fn scan_chain(
        &self,
        cast: &CastId,
        visit: &mut dyn FnMut(StoredRow) -> ControlFlow<()>,
    ) -> Result<Option<CastHead>, LogError> {
        // The head and the events are copied under one lock (one state of the log), then
        // visited without it.
        let (head, records) = {
            let state = self.lock();
            let Some(head) = state.heads.iter().find(|h| &h.cast == cast).cloned() else {
                return Ok(None);
            };
            (head, state.events.get(cast).cloned().unwrap_or_default())
        };
        for record in records {
            if visit(StoredRow::Record(record)).is_break() {
                break;
            }
        }
        Ok(Some(head))
    }

    fn head(&self, cast: &CastId) -> Result<Option<CastHead>, LogError> {
        Ok(self.lock().heads.iter().find(|h| &h.cast == cast).cloned())
    }

    fn put_blob(&self, bytes: &[u8]) -> Result<Digest, LogError> {
        let hash = blob_hash(bytes);
        self.lock()
            .blobs
            .entry(hash)
            .or_insert_with(|| bytes.to_vec());
        Ok(hash)
    }

    fn get_blob(&self, hash: &Digest) -> Result<Option<Vec<u8>>, LogError> {
        Ok(self.lock().blobs.get(hash).cloned())
    }
}
