//! Execution scopes: the directory a cast's later sockets act in.
//!
//! A utility's JSON output may carry pi-materia's `scopeTransition`: `{kind: "replace", scope:
//! {id, cwd, state?, exports?}}` activates a scope of its own, `{kind: "base"}` returns to the
//! cast's working directory. The machine checks it, takes it out of the output before the
//! handoff contract and routing see the rest, and records it here; every later utility, `cmd:`
//! agent turn and built-in tool call of the cast acts in the scope's `cwd` (a relative `cwd` is
//! resolved in the cast's working directory). A recast inherits the scope in force at its fork
//! point with the rest of the state.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::id::{ItemKey, SocketId, Visit};

/// An execution scope a utility activated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionScope {
    /// The scope's id, as the utility named it.
    pub id: String,
    /// The directory the cast's later sockets act in (relative: in the cast's working
    /// directory).
    pub cwd: String,
    /// The scope's own state, as the utility gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    /// What the scope exports (a branch, a commit, a path), as the utility gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exports: Option<Value>,
}

/// A utility's `scopeTransition` took effect (pi-materia's `execution_scope_activated`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopeActivated {
    /// The utility socket whose output carried it.
    pub socket: SocketId,
    /// The visit.
    pub visit: Visit,
    /// The work item of the visit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<ItemKey>,
    /// The id of the scope in force before (absent: the cast's base scope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// The scope now in force (absent: `kind: base`, the cast's own working directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<ExecutionScope>,
}
