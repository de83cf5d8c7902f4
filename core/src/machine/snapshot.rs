//! Snapshots of a cast's state, so time travel need not fold from the first event.
//!
//! A snapshot is the [`CastState`] after the event at its `head` seq, with the frozen loadout
//! beside it and the number of agent answers the events up to there hold, as JSON (the state
//! holds `serde_json::Value`s). It is a cache, never the truth: whoever loads one checks that
//! the log's chain hash at that seq is the one the snapshot was taken at, and a snapshot whose
//! [`VERSION`] differs, or that does not decode, is ignored and the cast folded from the start.

use serde::{Deserialize, Serialize};

use super::CastState;
use crate::loadout::{Budget, Limits, Loadout};

/// The snapshot format; bump it whenever [`CastState`] changes shape or its seal does (2:
/// sealed by the driver, see `castlog_replay::driver`; 3: the fence version; 4: sealed by the
/// one seal of the log's caches, `castlog_events::seal`, which covers this version too; 5: the handoff-context rule and the settled rework reasons; 6: the execution scope; 7: the
/// seq of the pending reply, which a fold from the start knows and an older snapshot did not;
/// 8: the seq of the completion behind `last_json`, the same way).
pub const VERSION: u32 = 8;

#[derive(Serialize)]
struct Out<'a> {
    answers: u64,
    loadout: &'a Loadout,
    state: &'a CastState,
}

#[derive(Deserialize)]
struct In {
    answers: u64,
    loadout: Loadout,
    state: CastState,
}

impl CastState {
    /// The snapshot bytes of this state, `answers` being the agent answers its events hold.
    pub fn snapshot(&self, answers: u64) -> Vec<u8> {
        serde_json::to_vec(&Out {
            answers,
            loadout: &self.loadout,
            state: self,
        })
        .unwrap_or_default()
    }

    /// The state (and answer count) a snapshot holds, or why it cannot be read.
    pub fn restore(bytes: &[u8]) -> Result<(CastState, u64), serde_json::Error> {
        let snapshot: In = serde_json::from_slice(bytes)?;
        let mut state = snapshot.state;
        state.loadout = std::sync::Arc::new(snapshot.loadout);
        Ok((state, snapshot.answers))
    }
}

/// The placeholder loadout of a state being decoded, replaced by [`CastState::restore`].
pub(super) fn empty_loadout() -> std::sync::Arc<Loadout> {
    std::sync::Arc::new(Loadout {
        name: String::new(),
        entry: crate::id::SocketId::new(""),
        sockets: Default::default(),
        loops: Vec::new(),
        limits: Limits {
            max_no_advance_cycles: 0,
        },
        budget: Budget {
            max_tokens: 0,
            warn_at_percent: 0.0,
            max_cost_usd: None,
        },
        max_cycles_outside_loops: None,
        max_tool_calls: None,
        prices: Default::default(),
        lanes: None,
        loop_break_after: None,
    })
}
