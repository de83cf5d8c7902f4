//! What a later payload of a cast names instead of repeating its text (see
//! [`Event::decode_with`](super::Event::decode_with)): the reply a completion's output is, and
//! the completion an assignment's value or a rework reason is read from.

use serde_json::Value;

use super::Event;
use crate::id::{SocketId, Visit};

/// A reply a later payload of its cast names (see [`Event::decode_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlierReply {
    /// The socket that was answered.
    pub socket: SocketId,
    /// Its visit.
    pub visit: Visit,
    /// The reply's text.
    pub text: String,
}

/// What a reader hands [`Event::decode_with`] for the seq a payload names.
#[derive(Debug, Clone, PartialEq)]
pub enum Earlier {
    /// An `agent_replied` that asks for no tool call (a `socket_completed`'s output).
    Reply(EarlierReply),
    /// A `socket_completed` (what an assignment from `$` or a rework reason is taken from).
    Completion {
        /// The socket that completed.
        socket: SocketId,
        /// Its output as assignments read it: `parsed`, or `output` as a JSON string.
        whole: Value,
    },
}

impl Event {
    /// What a later payload may name this event for: a reply that asks for no tool call (one
    /// that does is never an output), or a completion.
    pub fn earlier(&self) -> Option<Earlier> {
        match self {
            Event::AgentReplied(r) if r.tool_calls.is_empty() => {
                Some(Earlier::Reply(EarlierReply {
                    socket: r.socket.clone(),
                    visit: r.visit,
                    text: r.text.clone(),
                }))
            }
            Event::SocketCompleted(c) => Some(Earlier::Completion {
                socket: c.socket.clone(),
                whole: c
                    .parsed
                    .clone()
                    .unwrap_or_else(|| Value::String(c.output.clone())),
            }),
            _ => None,
        }
    }
}
