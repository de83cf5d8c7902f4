//! The heads this process last wrote or read under a lock, by cast: what lets an append be
//! one statement (`writes::append_at`). A known head is only a guess: the statement moves the
//! head only if the row still holds that seq and hash, so a head another writer moved meanwhile
//! makes the statement write nothing, and the append is retried the long way (head read under
//! a lock), which gives the stale writer its `Conflict`.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use castlog_core::id::{CastId, Digest, Seq};

use crate::record::Recorded;

/// Casts whose heads are kept at most; past it the map starts over (a worker drives many
/// casts, each only for a while).
const KEPT: usize = 1024;

/// A cast's head as this process last saw it committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KnownHead {
    pub(crate) seq: Seq,
    pub(crate) hash: Digest,
}

#[derive(Debug, Default)]
pub(crate) struct Heads {
    known: Mutex<HashMap<CastId, KnownHead>>,
}

impl Heads {
    fn known(&self) -> MutexGuard<'_, HashMap<CastId, KnownHead>> {
        // A map of guesses: nothing a panic could leave half-done matters.
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The head an append at `expected` would follow, if this process knows it.
    pub(crate) fn before(&self, cast: &CastId, expected: Seq) -> Option<KnownHead> {
        self.known()
            .get(cast)
            .copied()
            .filter(|head| head.seq.next() == expected)
    }

    /// `records` were committed as the cast's last events.
    pub(crate) fn moved(&self, cast: &CastId, records: &[Recorded]) {
        let Some(last) = records.last() else { return };
        let mut known = self.known();
        if known.len() >= KEPT && !known.contains_key(cast) {
            known.clear();
        }
        known.insert(
            cast.clone(),
            KnownHead {
                seq: last.seq,
                hash: last.hash,
            },
        );
    }

    /// The cast's head is not known (an append failed or found it elsewhere).
    pub(crate) fn forget(&self, cast: &CastId) {
        self.known().remove(cast);
    }
}
