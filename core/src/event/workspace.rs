//! Workspace checkpoints: the cast's working directory as a git tree, recorded by the driver.
//!
//! When the working directory is in a git repository, the driver writes its files as a tree
//! object when the cast starts (`start`) and at every socket completion (through a temporary index: the user's index, branch and
//! HEAD are not touched) and records the tree's id here. The machine routes nothing on it; it
//! is what `recast --workdir` materializes and what `diff --files` compares.

use serde::{Deserialize, Serialize};

use super::is_false;
use crate::id::{SocketId, Visit};

/// The working directory's files as they were when a socket visit completed (or, with
/// `start`, when the cast started, before its entry socket's first visit ran).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceCheckpointed {
    /// The socket whose completion the checkpoint follows (with `start`: the entry socket).
    pub socket: SocketId,
    /// Its visit.
    pub visit: Visit,
    /// The checkpoint of the files before any socket ran.
    #[serde(default, skip_serializing_if = "is_false")]
    pub start: bool,
    /// The git tree object's id (hex), in the repository of the working directory.
    pub tree: String,
}
