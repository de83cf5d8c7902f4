//! `Manifest`: the per-visit artifacts a pi-materia user knows, as a projection.
//!
//! Every entry names a file of the artifact tree (`castlog export CAST --artifacts DIR`) and
//! where its content comes from: raw output, parsed JSON, refinement drafts, rejected outputs
//! (which the reference overwrote on a repair), and the rendered prompt of every dispatch.
//! Paths are sanitized (`[^a-z0-9._-]` becomes `-`), so the tree is the same on every run.
//!
//! Tool calls are artifacts too, one file per call ([`tool_call_entries`]), listed by a fold of
//! their own: the manifest's checkpoints stay what earlier builds wrote.

use std::collections::BTreeMap;

use castlog_core::event::{Event, Placement};
use castlog_core::id::Digest;
use castlog_events::Recorded;
use serde::{Deserialize, Serialize};

use crate::projection::Projection;

mod tool_calls;

pub use tool_calls::{ToolCallEntries, tool_call_entries};

/// Where an artifact's bytes come from. Texts and prompts are named by the event that holds
/// them, not copied: the manifest of a long cast stays small ([`text_of`] and
/// [`prompt_of`] read them back).
// Externally tagged and free of `serde_json::Value`, so checkpoints (bincode, not
// self-describing) round-trip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Content {
    /// The text of the event at `seq`: an agent's reply, a refinement draft or a socket's
    /// output.
    Text {
        /// The event's seq.
        seq: u64,
    },
    /// The parsed output of the `socket_completed` at `seq` (as compact JSON), written pretty.
    Json {
        /// The event's seq.
        seq: u64,
    },
    /// The prompt dispatched at `seq`, written as its messages (rebuilt by
    /// [`crate::prompt::messages`] from the event's digest and placements, which are not
    /// copied: a long cast's prompts' placements were most of its manifest).
    Prompt {
        /// The `prompt_dispatched` event's seq.
        seq: u64,
    },
    /// A tool call ([`tool_call_entries`]): the `tool_called` at `seq` (its arguments) and,
    /// once recorded, the `tool_finished` or `tool_interrupted` at `outcome` (its result),
    /// written as one JSON document.
    ToolCall {
        /// The `tool_called` event's seq.
        seq: u64,
        /// The seq of its outcome; `None` when none is recorded (a call cut off by a crash).
        outcome: Option<u64>,
    },
}

/// One artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// `socket_output`, `socket_json`, `refinement`, `rejected_output`, `context`,
    /// `tool_call`.
    pub kind: String,
    /// Socket whose visit produced the artifact.
    pub socket: String,
    /// Visit of that socket (1-based).
    pub visit: u32,
    /// Work item the visit ran for; `None` outside loops.
    pub item: Option<String>,
    /// The turn, where there is one.
    pub turn: Option<u32>,
    /// The path inside the artifact tree.
    pub path: String,
    /// The seq of the event it comes from.
    pub seq: u64,
    /// Which event holds the artifact's text or JSON (by seq), read when it is written out.
    pub content: Content,
}

/// The manifest of a cast.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Entries in seq order.
    pub entries: Vec<Entry>,
    /// Each visit's item, by (socket, visit): looked up once per entry, so a map, not a list
    /// searched (a `BTreeMap`, whose encoding is the same on every fold).
    #[serde(default)]
    items: BTreeMap<(String, u32), Option<String>>,
    /// The turn and seq of the last reply not yet completed or rejected.
    #[serde(default)]
    last_reply: Option<(u32, u64)>,
}

/// The text `content` names in `event` (the event at its seq): `None` for a prompt, or for an
/// event that holds no such text.
pub fn text_of(content: &Content, event: &Event) -> Option<String> {
    match (content, event) {
        (Content::Text { .. }, Event::AgentReplied(e)) => Some(e.text.clone()),
        (Content::Text { .. }, Event::RefinementRecorded(e)) => Some(e.text.clone()),
        (Content::Text { .. }, Event::SocketCompleted(e)) => Some(e.output.clone()),
        (Content::Json { .. }, Event::SocketCompleted(e)) => e
            .parsed
            .as_ref()
            .map(|parsed| serde_json::to_string(parsed).unwrap_or_default()),
        _ => None,
    }
}

/// The digest and placements of the prompt `content` names in `event` (the event at its
/// seq): `None` for a text, or for an event that is not a dispatch.
pub fn prompt_of(content: &Content, event: Event) -> Option<(Digest, Vec<Placement>)> {
    match (content, event) {
        (Content::Prompt { .. }, Event::PromptDispatched(e)) => Some((e.prompt_hash, e.placements)),
        _ => None,
    }
}

/// Replaces characters outside `[a-z0-9._-]` (after lowercasing) with `-`.
pub fn sanitize(part: &str) -> String {
    part.to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

impl Manifest {
    fn item_of(&self, socket: &str, visit: u32) -> Option<String> {
        self.items
            .get(&(socket.to_owned(), visit))
            .cloned()
            .flatten()
    }

    fn stem(&self, socket: &str, visit: u32) -> String {
        match self.item_of(socket, visit) {
            Some(item) => format!("sockets/{}/{visit}-{}", sanitize(socket), sanitize(&item)),
            None => format!("sockets/{}/{visit}", sanitize(socket)),
        }
    }

    /// Adds an entry; `at` is (kind, socket, visit, turn).
    fn push(
        &mut self,
        at: (&str, &str, u32, Option<u32>),
        path: String,
        seq: u64,
        content: Content,
    ) {
        let (kind, socket, visit, turn) = at;
        let item = self.item_of(socket, visit);
        self.entries.push(Entry {
            kind: kind.to_owned(),
            socket: socket.to_owned(),
            visit,
            item,
            turn,
            path,
            seq,
            content,
        });
    }
}

impl Projection for Manifest {
    const NAME: &'static str = "manifest";
    // 2: prompts carry their placements. 3: checkpoints are sealed. 4: texts are named by
    // their event's seq. 5: visits' items are a map. 6: prompts are named by their event's
    // seq.
    const VERSION: u32 = 6;

    fn apply(&mut self, record: &Recorded, event: Option<&Event>) {
        let Some(event) = event else { return };
        let seq = record.seq.get();
        match event {
            Event::SocketStarted(e) => {
                // A visit started again (a damaged or hand-made log) takes its latest item.
                self.items.insert(
                    (e.socket.to_string(), e.visit.get()),
                    e.item.as_ref().map(|i| i.to_string()),
                );
            }
            Event::PromptDispatched(e) => {
                let socket = e.socket.to_string();
                let (visit, turn) = (e.visit.get(), e.turn.get());
                let item = self
                    .item_of(&socket, visit)
                    .map(|i| format!("-{}", sanitize(&i)))
                    .unwrap_or_default();
                let path = format!("contexts/{}{item}-{visit}-turn{turn}.md", sanitize(&socket));
                self.push(
                    ("context", &socket, visit, Some(turn)),
                    path,
                    seq,
                    Content::Prompt { seq },
                );
            }
            Event::AgentReplied(e) => self.last_reply = Some((e.turn.get(), seq)),
            Event::OutputRejected(e) => {
                if let Some((turn, reply)) = self.last_reply.take() {
                    let socket = e.socket.to_string();
                    let path = format!("{}.rejected-{turn}.md", self.stem(&socket, e.visit.get()));
                    self.push(
                        ("rejected_output", &socket, e.visit.get(), Some(turn)),
                        path,
                        seq,
                        Content::Text { seq: reply },
                    );
                }
            }
            Event::RefinementRecorded(e) => {
                let socket = e.socket.to_string();
                let path = format!(
                    "{}.refinement-{}.md",
                    self.stem(&socket, e.visit.get()),
                    e.turn
                );
                self.push(
                    ("refinement", &socket, e.visit.get(), Some(e.turn.get())),
                    path,
                    seq,
                    Content::Text { seq },
                );
            }
            Event::SocketCompleted(e) => {
                let socket = e.socket.to_string();
                let visit = e.visit.get();
                let path = format!("{}.md", self.stem(&socket, visit));
                self.push(
                    ("socket_output", &socket, visit, None),
                    path,
                    seq,
                    Content::Text { seq },
                );
                if e.parsed.is_some() {
                    let path = format!("sockets/{}/{visit}.json", sanitize(&socket));
                    self.push(
                        ("socket_json", &socket, visit, None),
                        path,
                        seq,
                        Content::Json { seq },
                    );
                }
                self.last_reply = None;
            }
            _ => {}
        }
    }
}
