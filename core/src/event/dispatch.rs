//! Prompts and their answers: a prompt held or handed to the agent (with where each context
//! entry was placed in it), the agent's reply (text and tool calls) and its failures.

use serde::{Deserialize, Serialize};

use super::{ToolRequest, Usage, is_false};
use crate::id::{Digest, SocketId, Turn, Visit};

/// Where the placement of one context entry ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Destination {
    /// The single leading system message (the cacheable prefix).
    SystemFold,
    /// The transcript after the system fold, at its position among the messages.
    Inline,
    /// The trailing repair-mandate slot.
    Trailing,
    /// Not rendered at all (recorded so an audit can flag it).
    Dropped,
}

/// The recorded placement of one context entry in one prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The entry's id.
    pub entry: String,
    /// Its source type (`steeringNote`, `retryFeedback`, ...).
    pub source_type: String,
    /// Its layer, 0..=3.
    pub layer: u8,
    /// Its role (`system`, `user`, `assistant`, `tool`).
    pub role: String,
    /// Where it went.
    pub destination: Destination,
    /// Its position within the destination, 0-based.
    pub position: u32,
    /// The rule of the policy that placed it there.
    pub rule: String,
    /// The blob holding the entry's text.
    pub body: Digest,
}

/// The prompt in flight was recorded by a command that had no agent to send it to (`refine`,
/// `continue`, `recast`, `claims resolve` without `--agent`): sending it later is its first
/// sending, not a recovery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptHeld {
    /// Socket of the visit whose prompt was held.
    pub socket: SocketId,
    /// Visit of that socket (1-based, as in `socket_started`).
    pub visit: Visit,
    /// Turn of the held prompt within the visit.
    pub turn: Turn,
}

/// A prompt was handed to the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptDispatched {
    /// Socket of the visit the prompt belongs to.
    pub socket: SocketId,
    /// Visit of that socket (1-based, as in `socket_started`).
    pub visit: Visit,
    /// Turn within the visit (1 for the first prompt; repairs and refinements count on).
    pub turn: Turn,
    /// Hash of the rendered messages (`prompt::messages_json`); the messages themselves are
    /// rebuilt from the placements and their entry blobs.
    pub prompt_hash: Digest,
    /// Hash of the system fold (the cacheable prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_hash: Option<Digest>,
    /// Every entry's placement.
    #[serde(default)]
    pub placements: Vec<Placement>,
    /// Set when this dispatch repeats an unanswered one after a restart.
    #[serde(default, skip_serializing_if = "is_false")]
    pub redispatch: bool,
}

/// The agent answered a dispatched prompt; its text is recorded verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentReplied {
    /// Socket whose prompt was answered.
    pub socket: SocketId,
    /// Visit of that socket (1-based).
    pub visit: Visit,
    /// Turn of the prompt this answers (the latest `prompt_dispatched` of the visit).
    pub turn: Turn,
    /// What the agent replied, byte for byte, before any parsing.
    pub text: String,
    /// Tokens the agent reported for this turn; `None` when it reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The tool calls the reply asks for, as received; a reply with any is not the socket's
    /// output (absent when there are none, so replies recorded before tools read the same).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolRequest>,
    /// What the reply cost, when the loadout has a price for it (absent otherwise, so replies
    /// recorded before prices read the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<super::ReplyCost>,
}

/// How an agent failure is classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// Worth retrying (429, 5xx, connection reset).
    Transient,
    /// Needs a person: resume when ready.
    Interruption,
}

/// The agent gave no answer to a dispatched prompt; a transient class is retried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentFailed {
    /// Socket whose prompt went unanswered.
    pub socket: SocketId,
    /// Visit of that socket (1-based).
    pub visit: Visit,
    /// Turn of the prompt that went unanswered.
    pub turn: Turn,
    /// Transient (retried) or interruption (waits for `resume`).
    pub class: FailureClass,
    /// What the agent adapter said.
    pub message: String,
    /// The attempt number of this turn (1-based).
    #[serde(default = "one")]
    pub attempt: u32,
    /// The server refused the handoff contract sent as a response format (an HTTP 400 naming
    /// `response_format`, under `--structured auto`): structured output is off for the rest of
    /// the cast and the prompt is asked again at once without it. Absent when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub structured_off: bool,
}

fn one() -> u32 {
    1
}
