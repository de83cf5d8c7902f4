//! Tool-call events: a call the agent asked for, recorded before it runs, and its outcome.
//!
//! `tool_called` is appended (and durable) before the tool runs; `tool_finished` after. A call
//! with no `tool_finished` was cut off: a read-only tool is run again, any other is not, and
//! `tool_interrupted` tells the agent its effect is unknown (the at-most-once rule of posts).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::is_false;
use crate::id::{Digest, SocketId, Turn, Visit};

/// The tools whose calls change nothing: a call of one cut off by a crash is run again, any
/// other is not (`tool_interrupted`).
pub const READ_ONLY_TOOLS: [&str; 4] = ["read", "grep", "find", "ls"];

/// Whether running `tool` again after a crash cannot change anything.
pub fn is_read_only(tool: &str) -> bool {
    READ_ONLY_TOOLS.contains(&tool)
}

/// One tool call as an agent's reply asked for it (`agent_replied`'s `tool_calls`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRequest {
    /// The call's id as the agent gave it (or `call-N` when it gave none).
    pub call: String,
    /// The tool's name as the agent gave it.
    pub tool: String,
    /// The arguments exactly as received (a JSON value, or a string that did not parse).
    pub arguments: Value,
}

/// The agent asked for a tool call; recorded before the tool runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCalled {
    /// The call's id as the agent gave it (or `call-N` when it gave none).
    pub call: String,
    /// The tool's name as the agent gave it.
    pub tool: String,
    /// The arguments exactly as received (a JSON value, or a string that did not parse).
    pub arguments: Value,
    /// Socket whose agent asked for the call.
    pub socket: SocketId,
    /// Visit of that socket (1-based).
    pub visit: Visit,
    /// The turn whose reply asked for the call.
    pub turn: Turn,
}

/// A tool call ended: its result is in a blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFinished {
    /// The call's id.
    pub call: String,
    /// The blob of the result text the agent is shown.
    pub result: Digest,
    /// The result text itself (the blob's bytes), so a fold rebuilds the prompts that show it
    /// without reading blobs; absent when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
    /// The exit status of a process (`bash`), when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
    /// The result is an error (refused, bad arguments, failed).
    #[serde(default, skip_serializing_if = "is_false")]
    pub error: bool,
    /// The result was cut at its cap.
    #[serde(default, skip_serializing_if = "is_false")]
    pub truncated: bool,
    /// How long the call took, in milliseconds.
    pub duration_ms: u64,
}

/// A call with an effect was cut off before its outcome was recorded: it is not run again and
/// the agent is told its effect is unknown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInterrupted {
    /// The call's id.
    pub call: String,
    /// Name of the tool that was cut off, as the agent gave it.
    pub tool: String,
}
