//! Parallel lanes: a parallel generator's plan, a lane's first event, and the barrier.
//!
//! A lane is a child cast of the parent: its first event, `lane_started`, names the parent,
//! the seq of the parent's `lanes_planned` and the parent's chain hash there (its `prev`), so
//! the lane commits to the parent's prefix like a fork. The parent's `lanes_joined` names
//! every lane's head seq and hash when it was joined, in plan order, so the parent's chain
//! commits to every lane's whole history, whatever order the lanes finished in.

use serde::{Deserialize, Serialize};

use super::{ExecutionScope, Usage};
use crate::id::{CastId, Digest, Seq, SocketId};

/// One lane of a plan: a stream of the generator's `parallelSchedule`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LanePlan {
    /// The stream's name (`a`, `frontend`).
    pub name: String,
    /// The lane's cast id (`PARENT.lane-NAME`).
    pub cast: CastId,
    /// The 0-based indexes of the parent's work items the lane walks, in order.
    pub items: Vec<u64>,
}

/// A parallel generator's output was accepted: its work items run in these lanes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LanesPlanned {
    /// The parallel generator.
    pub socket: SocketId,
    /// The lanes, in the schedule's order (the order lanes are started and joined in).
    pub lanes: Vec<LanePlan>,
    /// How many lanes run at once.
    pub max_concurrency: u32,
}

/// The first event of a lane (a child cast of the parent at its plan).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneStarted {
    /// The lane's cast id.
    pub cast: CastId,
    /// The parent cast.
    pub parent: CastId,
    /// Seq of the parent's `lanes_planned`: the last parent event the lane's state includes.
    pub parent_seq: Seq,
    /// The parent's chain hash at `parent_seq` (also the lane's first `prev`).
    pub parent_hash: Digest,
    /// The lane's name in the plan.
    pub name: String,
    /// The parent's work item indexes the lane walks.
    pub items: Vec<u64>,
}

/// How a lane ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneStatus {
    /// Its loop exited.
    Completed,
    /// It failed (revive of the parent re-runs it).
    Failed,
    /// It was aborted.
    Aborted,
}

impl LaneStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            LaneStatus::Completed => "completed",
            LaneStatus::Failed => "failed",
            LaneStatus::Aborted => "aborted",
        }
    }
}

/// One lane at the barrier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneOutcome {
    /// The lane's name.
    pub name: String,
    /// The lane's cast.
    pub cast: CastId,
    /// How it ended.
    pub status: LaneStatus,
    /// Seq of its last event when joined.
    pub head: Seq,
    /// Its chain hash there.
    pub hash: Digest,
    /// The last output of the lane (its loop's last completion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// That completion's `satisfied`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub satisfied: Option<bool>,
    /// Why it failed or was aborted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Tokens its agents reported.
    #[serde(default)]
    pub usage: Usage,
    /// The execution scope in force in the lane when it ended (its workspace or worktree and
    /// what that exports), for the fan-in; absent when the lane ran in its base directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<ExecutionScope>,
}

/// Every lane of the plan was terminal: the barrier, with each lane's outcome in plan order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LanesJoined {
    /// The lanes, in plan order.
    pub lanes: Vec<LaneOutcome>,
}
