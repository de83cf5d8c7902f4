//! Routing and data: the graph's targets and outcomes, and the events a completion's routing
//! records (assignments, cursor moves, edges, rework).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::id::{ItemKey, Seq, SocketId};

/// A graph target: a socket or the end of the cast.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Continue at this socket.
    Socket(SocketId),
    /// The cast ends.
    End,
}

/// Which outcome an edge or an advance matched on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// Taken whatever the output said (`always` in the config).
    Always,
    /// Taken when the output said `satisfied: true`.
    Satisfied,
    /// Taken when the output said `satisfied: false`.
    NotSatisfied,
}

/// A write into the workflow's data. Stored in version 2 (`event/derived.rs` has both
/// versions' layouts): `value` is left out when it is read from the completion at `from`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataAssigned {
    /// The socket whose completion caused it.
    pub socket: SocketId,
    /// The target path (`state.x`, `item.y`, ...).
    pub path: String,
    /// The JSON value written at `path` (replacing what was there).
    pub value: Value,
    /// Where `value` comes from, when it is read from the output of the completion just
    /// recorded: the payload then names that completion and the source path instead of
    /// repeating the value (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<ValueFrom>,
}

/// The completion an assignment's value is read from, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueFrom {
    /// Seq of the `socket_completed` of the same cast.
    pub seq: Seq,
    /// The assignment's source path (`$` or `$.…`), read on that completion's output.
    pub source: String,
}

/// A loop cursor moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CursorAdvanced {
    /// Cursor that moved (a loop's `iterator.cursor`, e.g. `workItemIndex`).
    pub cursor: String,
    /// Cursor index before the move (0-based).
    pub from: u64,
    /// Cursor index after the move (0-based).
    pub to: u64,
}

/// An edge was followed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeTaken {
    /// Socket whose completion took the edge.
    pub from: SocketId,
    /// Socket (or `end`) the edge leads to.
    pub to: Target,
    /// Outcome the edge is taken on (`always`, `satisfied`, `not_satisfied`).
    pub when: When,
    /// Work item the traversal is counted for; `None` outside loops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<ItemKey>,
    /// The traversal count of this edge for this item, including this one.
    pub traversal: u32,
}

/// Rework context for the target of a `not_satisfied` edge. Stored in version 2
/// (`event/derived.rs` has both versions' layouts): `reason` is left out when it quotes the
/// `context` of the completion at `reason_of`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReworkRouted {
    /// Socket whose output was not satisfied.
    pub source: SocketId,
    /// Display label of that socket's materia, shown in the rework entry.
    pub materia_label: String,
    /// Socket the `not_satisfied` edge leads to, which must do its work again.
    pub target: SocketId,
    /// Work item being reworked; `None` outside loops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<ItemKey>,
    /// The reason: the output's `context`, or a bounded excerpt of the output.
    pub reason: String,
    /// The seq of the completion of this cast whose `context` `reason` quotes, when it is
    /// one, quoted as [`quoted_reason`](super::quoted_reason) does: the payload then names it
    /// (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_of: Option<Seq>,
}

/// Rework entries for an item stopped being live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReworkCleared {
    /// Work item whose rework entries are cleared; `None` outside loops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<ItemKey>,
    /// The socket whose satisfied outcome cleared them.
    pub by: SocketId,
}
