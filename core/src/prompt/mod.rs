//! Prompts as data: context entries and the placement policies that render them.
//!
//! Every turn's prompt is a list of [`ContextEntry`]s made by the machine. A [`Policy`] renders
//! them into chat messages with three destinations: the single leading system message (the
//! *system fold*, the cacheable prefix), the inline transcript, and the trailing repair-mandate
//! slot. Every entry's [`Placement`] is returned with the rule that put it there, so the dispatch
//! event records where each entry went and why.
//!
//! # Layout
//! - [`fence`]: untrusted text placed as data (escaping what would pose as the runtime).
//! - [`fields`]: reading the placement documents, every error naming its field.
//! - [`given`]: entries given as data by another orchestrator (`castlog placement`).
//! - [`policy`]: policies as data (`recommended`, `legacy` and a user's own documents).
//! - [`render`]: the renderer, one set of rules driven by a policy.

use serde::{Deserialize, Serialize};

pub mod fence;
pub mod fields;
pub mod given;
pub mod policy;
pub mod render;
mod wire;

use crate::event::Placement;

pub use policy::Policy;
pub use render::{UnknownRole, assemble, render, render_given};

/// The role of an entry (and of a rendered message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// System instructions.
    System,
    /// The person's side of the chat (the cast request, refinements, handoff context).
    User,
    /// The model's side of the chat (its earlier drafts).
    Assistant,
    /// Tool output.
    Tool,
}

impl Role {
    /// The role a wire name (`system`, `user`, ...) names; `None` for any other.
    pub fn named(name: &str) -> Option<Role> {
        [Role::System, Role::User, Role::Assistant, Role::Tool]
            .into_iter()
            .find(|r| r.as_str() == name)
    }

    /// The wire name (`system`, `user`, `assistant`, `tool`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One piece of context for one turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextEntry {
    /// Stable id within the turn (`materiaInstructions`, `rework-1`, ...).
    pub id: String,
    /// What produced it (`materiaInstructions`, `castRequest`, `retryFeedback`, ...).
    pub source_type: std::borrow::Cow<'static, str>,
    /// Layer 0..=3 (0 = invariant instructions, 3 = reference material).
    pub layer: u8,
    /// Role of the message the entry goes into (a policy may re-role it).
    pub role: Role,
    /// Ordering within the prompt.
    pub ordinal: u32,
    /// Body, already fenced where it came from outside.
    pub text: String,
    /// A locked steering note.
    pub locked: bool,
}

/// One rendered chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: Role,
    /// Body as sent: the entries placed in this message, joined.
    pub content: String,
    /// The tool call an `assistantToolCall` or `toolResult` entry stands for (its id), so an
    /// adapter can send the call and its result in its API's own shape; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<String>,
}

impl Message {
    /// A message of `role` with `content` (and no tool call).
    pub fn new(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: content.into(),
            tool_call: None,
        }
    }
}

/// The tool call an entry of a tool loop stands for: `assistantToolCall:ID` and
/// `toolResult:ID` entries name it.
pub fn tool_call_of(source_type: &str, entry: &str) -> Option<String> {
    let prefix = match source_type {
        "assistantToolCall" => "assistantToolCall:",
        "toolResult" => "toolResult:",
        _ => return None,
    };
    entry.strip_prefix(prefix).map(str::to_owned)
}

/// A rendered prompt with its placements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The messages, system fold first.
    pub messages: Vec<Message>,
    /// One placement per entry, in entry order.
    pub placements: Vec<Placement>,
    /// The system fold's text, the cacheable prefix (also `messages[0]`).
    pub system: String,
}

/// The stored form of a rendered prompt: compact JSON `[{"role", "content"}, ...]`, exactly
/// serde_json's bytes for the messages, written without serde (`prompt/wire.rs`).
pub fn messages_json(messages: &[Message]) -> Vec<u8> {
    wire::write(messages)
}
