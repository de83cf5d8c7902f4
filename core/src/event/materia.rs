//! Events a materia reports itself: pi-materia's `event` side-channel, an array of
//! `{type, severity?, message?, payload?, source?}` objects at the top of a JSON output. The
//! machine validates them, strips them from the output before routing, and records each one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::id::{ItemKey, SocketId, Visit};

/// One event a socket's output reported, as the materia wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MateriaEvent {
    /// The socket whose output carried it.
    pub socket: SocketId,
    /// The visit.
    pub visit: Visit,
    /// The work item of the visit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<ItemKey>,
    /// The event object (`type`, and `severity`, `message`, `payload`, `source` when given,
    /// with any other keys kept).
    pub event: Value,
}
