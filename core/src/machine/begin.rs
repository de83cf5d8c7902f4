//! The state a cast begins with: from its `cast_started`, or, for a recast, its parent's state at
//! the fork point re-owned by the child (`cast_forked`).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{CastState, NoAdvance, SentBodies, Status};
use crate::event::{CastStarted, Usage};
use crate::id::Seq;
use crate::loadout::{FrozenLoadoutError, Loadout};

/// Why the first event of a cast (`cast_started`, or a recast's `cast_forked`) gives no state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The loadout frozen in `cast_started` does not decode.
    #[error("the frozen loadout does not decode: {0}")]
    Frozen(#[source] FrozenLoadoutError),
    /// The loadout a recast put in `cast_forked` does not decode.
    #[error("the recast loadout does not decode: {0}")]
    Recast(#[source] FrozenLoadoutError),
    /// The placement policy document recorded in `cast_started` does not read.
    #[error("the recorded placement policy does not read: {0}")]
    Policy(#[source] crate::prompt::policy::PolicyError),
}

impl CastState {
    /// The state right after `cast_started`.
    pub fn started(event: &CastStarted) -> Result<CastState, StartError> {
        let loadout = Loadout::from_json(&event.loadout).map_err(StartError::Frozen)?;
        let policy_document = match &event.policy_document {
            None => None,
            Some(doc) => Some(Arc::new(
                crate::prompt::Policy::from_json(doc).map_err(StartError::Policy)?,
            )),
        };
        Ok(CastState {
            cast: event.cast.clone(),
            loadout: Arc::new(loadout),
            loadout_hash: event.loadout_hash,
            request: event.request.clone(),
            policy: event.policy.clone(),
            policy_document,
            fence: event.fence.unwrap_or(0),
            handoff: event.handoff.unwrap_or(0),
            conformance: event.conformance.unwrap_or(0),
            workdir: event.workdir.clone(),
            scope: None,
            tool_scopes: event.tools.clone().unwrap_or_default(),
            status: Status::Running,
            current: None,
            data: Value::Object(Map::new()),
            cursors: Default::default(),
            visits: Default::default(),
            attempts: Default::default(),
            traversals: Default::default(),
            allowances: Default::default(),
            no_advance: NoAdvance::default(),
            last_edge_budgeted: false,
            rework: Vec::new(),
            settled_rework: Vec::new(),
            refinement_turns: Default::default(),
            last_output: None,
            last_json: None,
            last_json_at: None,
            usage: Usage::default(),
            budget_warned: false,
            cost_micros: 0,
            cost_warned: false,
            structured_off: false,
            failure: None,
            last_source: None,
            last_satisfied: None,
            dispatched: Default::default(),
            scheduled: None,
            steering: Vec::new(),
            claims: Default::default(),
            lanes: None,
            lane: None,
            head: Seq(1),
            sent_bodies: SentBodies::default(),
        })
    }

    /// The state of a recast child: the parent's state at the fork point, re-owned by the child,
    /// with the child's loadout when the recast changed it.
    pub fn forked(
        parent: &CastState,
        event: &crate::event::CastForked,
    ) -> Result<CastState, StartError> {
        let mut state = parent.clone();
        state.cast = event.cast.clone();
        if let Some(frozen) = &event.loadout {
            let loadout = Loadout::from_json(frozen).map_err(StartError::Recast)?;
            state.loadout = Arc::new(loadout);
        }
        if let Some(hash) = event.loadout_hash {
            state.loadout_hash = hash;
        }
        if let Some(tools) = &event.tools {
            state.tool_scopes = tools.clone();
        }
        if let Some(workdir) = &event.workdir {
            state.workdir = Some(workdir.clone());
        }
        state.head = Seq(1);
        // A recast of a stopped cast resumes work that was cut off: its next prompt carries
        // the recovery note. A fork from a healthy point renders exactly what the parent
        // rendered there, so a recorded agent can answer it from the parent's replies.
        if matches!(state.status, Status::Failed | Status::Aborted) {
            state.status = Status::Running;
            state.failure = None;
            if let Some(c) = &mut state.current {
                c.recovering = true;
            }
        }
        Ok(state)
    }
}
