//! Parallel lanes in the machine: the plan a parallel generator's accepted output makes, the
//! state a lane starts from, and the barrier that joins the lanes and follows the loop's exit.
//!
//! The machine stays pure: it records the plan (`lanes_planned`) and says `Next::RunLanes`;
//! the shell creates each lane cast (its first decision is [`start_lane`]), drives them, and
//! feeds back `JoinLanes` with every lane's outcome in plan order. A lane is an ordinary cast
//! whose state is the parent's at the plan with its own items; it ends when its loop exits
//! (instead of following the exit route, which is the parent's to take after the barrier).

use serde_json::{Value, json};

use super::decide::{Decider, Decision, Rejection};
use super::{CastState, LaneOf, Phase, Status};
use crate::env::Env;
use crate::event::{
    DataAssigned, Event, LaneOutcome, LanePlan, LaneStarted, LaneStatus, LanesJoined, LanesPlanned,
};
use crate::id::{CastId, Seq, SocketId};

/// The cast id of the lane `name` of `parent`.
pub fn lane_id(parent: &CastId, name: &str) -> CastId {
    CastId::new(format!("{parent}.lane-{name}"))
}

impl CastState {
    /// The state a lane starts from: the parent's at its plan, re-owned by the lane, with the
    /// lane's own work items (in plan order) and the loop's cursor at the first.
    pub fn lane(parent: &CastState, event: &LaneStarted) -> CastState {
        let mut state = parent.clone();
        state.cast = event.cast.clone();
        state.lane = Some(LaneOf {
            parent: event.parent.clone(),
            name: event.name.clone(),
            items: event.items.clone(),
        });
        state.lanes = None;
        state.head = Seq(1);
        state.usage = crate::event::Usage::default();
        state.budget_warned = false;
        state.status = Status::Running;
        state.failure = None;
        state.current = None;
        state.scheduled = None;
        // The parent's completions are not events of the lane.
        state.last_json_at = None;
        let loadout = std::sync::Arc::clone(&state.loadout);
        if let Some(lanes) = &loadout.lanes
            && let Some(region) = loadout.loops.iter().find(|l| l.id == lanes.loop_id)
        {
            state.cursors.insert(region.iterator.cursor.clone(), 0);
        }
        if let Value::Object(data) = &mut state.data {
            let all = match data.get("workItems") {
                Some(Value::Array(items)) => items.clone(),
                _ => Vec::new(),
            };
            let own: Vec<Value> = event
                .items
                .iter()
                .filter_map(|&i| usize::try_from(i).ok().and_then(|i| all.get(i)).cloned())
                .collect();
            data.insert("workItems".into(), Value::Array(own));
            data.insert(
                "lane".into(),
                json!({"name": event.name, "parent": event.parent, "workItemIndexes": event.items}),
            );
        }
        state
    }
}

/// Starts a lane: `lane_started`, then the lanes' entry socket (the prelude's first, or the
/// loop's). `parent` is the parent's state at `started.parent_seq`.
pub fn start_lane(
    parent: &CastState,
    started: LaneStarted,
    env: &Env,
) -> Result<(CastState, Decision), Rejection> {
    let Some(lanes) = parent.loadout.lanes.clone() else {
        return Err(Rejection::NotNow {
            cast: started.cast,
            input: "a lane start",
            reason: format!("the loadout of {} has no parallel lanes", parent.cast),
        });
    };
    let mut state = CastState::lane(parent, &started);
    let mut d = Decider::new(&mut state, env);
    d.out.events.push(Event::LaneStarted(started));
    d.enter(&lanes.entry, false);
    let out = d.out;
    Ok((state, out))
}

impl Decider<'_, '_> {
    /// The parallel generator's output was accepted: record its plan (the schedule's streams
    /// as lanes); the shell runs them.
    pub(super) fn plan_lanes(&mut self, socket: &SocketId, output: &Value) {
        let Some(lanes) = self.state.loadout.lanes.clone() else {
            return;
        };
        let streams = output
            .get("parallelSchedule")
            .and_then(|s| s.get("streams"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let plan = streams
            .iter()
            .filter_map(|s| {
                let name = s.get("name")?.as_str()?.to_owned();
                let items = s
                    .get("workItemIndexes")?
                    .as_array()?
                    .iter()
                    .filter_map(Value::as_u64)
                    .collect();
                Some(LanePlan {
                    cast: lane_id(&self.state.cast, &name),
                    name,
                    items,
                })
            })
            .collect();
        self.emit(LanesPlanned {
            socket: socket.clone(),
            lanes: plan,
            max_concurrency: lanes.max_concurrency,
        });
    }

    /// The barrier: every lane is terminal. Records the outcomes; a lane that did not
    /// complete fails the parent (revive re-runs only those lanes); else the fan-in is set
    /// (`state.parallelFanIn`, the envelope) and the loop's exit route is followed.
    pub(super) fn join_lanes(&mut self, lanes: &[LaneOutcome]) -> Result<(), Rejection> {
        let refuse = |state: &CastState, reason: String| Rejection::NotNow {
            cast: state.cast.clone(),
            input: "a lane join",
            reason,
        };
        if self.state.status.is_stopped() {
            return Err(refuse(self.state, "the cast has stopped".into()));
        }
        let (Some(set), Some(Phase::RunningLanes)) = (
            self.state.lanes.clone(),
            self.state.current.as_ref().map(|c| c.phase),
        ) else {
            return Err(refuse(self.state, "no lanes are running".into()));
        };
        let names: Vec<(&str, &CastId)> = set
            .plan
            .iter()
            .map(|l| (l.name.as_str(), &l.cast))
            .collect();
        let given: Vec<(&str, &CastId)> =
            lanes.iter().map(|l| (l.name.as_str(), &l.cast)).collect();
        if names != given {
            return Err(refuse(
                self.state,
                "the outcomes do not name the planned lanes in plan order".into(),
            ));
        }
        self.emit(LanesJoined {
            lanes: lanes.to_vec(),
        });
        let unfinished: Vec<String> = lanes
            .iter()
            .filter(|l| l.status != LaneStatus::Completed)
            .map(|l| {
                format!(
                    "lane {} ({}) {}{}",
                    l.name,
                    l.cast,
                    l.status.as_str(),
                    l.reason
                        .as_deref()
                        .map(|r| format!(": {}", super::complete::bounded(r, 300)))
                        .unwrap_or_default()
                )
            })
            .collect();
        if !unfinished.is_empty() {
            let cast = self.state.cast.clone();
            self.fail(
                format!(
                    "{}; `castlog revive {cast}` re-runs only the lanes that did not complete",
                    unfinished.join("; ")
                ),
                Some(set.socket.clone()),
                None,
            );
            return Ok(());
        }
        let satisfied = if lanes.iter().all(|l| l.satisfied == Some(true)) {
            Some(true)
        } else if lanes.iter().any(|l| l.satisfied == Some(false)) {
            Some(false)
        } else {
            None
        };
        let fan_in = json!({
            "version": 1,
            "satisfied": satisfied,
            "lanes": set.plan.iter().zip(lanes).map(|(plan, out)| {
                let mut lane = json!({
                    "name": plan.name,
                    "cast": plan.cast,
                    "workItemIndexes": plan.items,
                    "status": out.status.as_str(),
                    "output": out.output,
                    "satisfied": out.satisfied,
                    "head": out.head,
                    "hash": out.hash,
                });
                // The lane's scope (workspace, worktree) and its exports, for the utility that
                // integrates the lanes; left out for a lane that ran in its base directory, so
                // a join recorded before lanes reported scopes re-decides as it was.
                if let Some(scope) = &out.scope {
                    lane["scope"] = json!({ "id": scope.id, "cwd": scope.cwd });
                    if let Some(exports) = &scope.exports {
                        lane["exports"] = exports.clone();
                    }
                }
                lane
            }).collect::<Vec<_>>(),
        });
        self.emit(DataAssigned {
            from: None,
            socket: set.socket.clone(),
            path: "parallelFanIn".into(),
            value: fan_in,
        });
        self.emit(DataAssigned {
            from: None,
            socket: set.socket.clone(),
            path: "envelope.satisfied".into(),
            value: satisfied.map_or(Value::Null, Value::Bool),
        });
        let context = format!(
            "{} lanes joined: {}",
            lanes.len(),
            lanes
                .iter()
                .map(|l| l.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        self.emit(DataAssigned {
            from: None,
            socket: set.socket.clone(),
            path: "envelope.context".into(),
            value: Value::String(context),
        });
        let loadout = std::sync::Arc::clone(&self.state.loadout);
        let from = loadout.lanes.as_ref().and_then(|l| {
            let region = loadout.loops.iter().find(|r| r.id == l.loop_id)?;
            region
                .exits
                .first()
                .map(|e| e.from.clone())
                .or_else(|| region.sockets.last().cloned())
        });
        match from {
            Some(from) => self.route(&from, satisfied, true),
            None => self.finish(),
        }
        Ok(())
    }
}
