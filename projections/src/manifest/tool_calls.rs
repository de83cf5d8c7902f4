//! The tool-call artifacts of a cast: one entry per `tool_called`, at
//! `sockets/SOCKET/VISIT[-ITEM].tool-N-TOOL.json` (N its place in the visit, from 1), naming the
//! call and its outcome by seq. A fold of its own beside [`super::Manifest`], so the manifest's
//! sealed checkpoints keep their shape.

use std::collections::BTreeMap;

use castlog_core::event::Event;
use castlog_events::Recorded;

use super::{Content, Entry, sanitize};

/// The entries of the tool calls among `records` (a cast's events, in order).
pub fn tool_call_entries<'a>(records: impl IntoIterator<Item = &'a Recorded>) -> Vec<Entry> {
    let mut calls = ToolCallEntries::default();
    for record in records {
        calls.push(record);
    }
    calls.entries
}

/// [`tool_call_entries`] as a fold, for a reader that streams a cast's events.
#[derive(Debug, Default)]
pub struct ToolCallEntries {
    /// The entries so far, in seq order.
    pub entries: Vec<Entry>,
    items: BTreeMap<(String, u32), Option<String>>,
    counts: BTreeMap<(String, u32), u32>,
    /// The entry of each call whose outcome is not recorded yet, by call id.
    open: BTreeMap<String, usize>,
}

impl ToolCallEntries {
    /// Folds the next event of the cast.
    pub fn push(&mut self, record: &Recorded) {
        let seq = record.seq.get();
        match record.event() {
            Ok(Event::SocketStarted(e)) => {
                self.items.insert(
                    (e.socket.to_string(), e.visit.get()),
                    e.item.map(|i| i.to_string()),
                );
            }
            Ok(Event::ToolCalled(e)) => {
                let (socket, visit) = (e.socket.to_string(), e.visit.get());
                let key = (socket.clone(), visit);
                let item = self.items.get(&key).cloned().flatten();
                let count = self.counts.entry(key).or_default();
                *count += 1;
                let stem = match &item {
                    Some(item) => {
                        format!("sockets/{}/{visit}-{}", sanitize(&socket), sanitize(item))
                    }
                    None => format!("sockets/{}/{visit}", sanitize(&socket)),
                };
                self.entries.push(Entry {
                    kind: "tool_call".into(),
                    path: format!("{stem}.tool-{count}-{}.json", sanitize(&e.tool)),
                    socket,
                    visit,
                    item,
                    turn: Some(e.turn.get()),
                    seq,
                    content: Content::ToolCall { seq, outcome: None },
                });
                self.open.insert(e.call, self.entries.len() - 1);
            }
            Ok(Event::ToolFinished(castlog_core::event::ToolFinished { call, .. }))
            | Ok(Event::ToolInterrupted(castlog_core::event::ToolInterrupted { call, .. })) => {
                if let Some(at) = self.open.remove(&call)
                    && let Some(Entry {
                        content: Content::ToolCall { outcome, .. },
                        ..
                    }) = self.entries.get_mut(at)
                {
                    *outcome = Some(seq);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use castlog_core::event::{SocketStarted, ToolCalled, ToolFinished};
    use castlog_core::id::{CastId, Digest, Seq, SocketId, Turn, Visit};
    use castlog_events::{EventLog, InMemoryLog, Pending};

    #[test]
    fn each_call_is_a_file_numbered_in_its_visit_and_names_its_outcome() {
        let socket = SocketId::new("Socket-1");
        let called = |call: &str, tool: &str| {
            Event::from(ToolCalled {
                call: call.into(),
                tool: tool.into(),
                arguments: serde_json::json!({}),
                socket: socket.clone(),
                visit: Visit(1),
                turn: Turn(1),
            })
        };
        let finished = |call: &str| {
            Event::from(ToolFinished {
                call: call.into(),
                result: Digest::ZERO,
                output: String::new(),
                exit: None,
                error: false,
                truncated: false,
                duration_ms: 0,
            })
        };
        let events = [
            Event::from(SocketStarted {
                socket: socket.clone(),
                materia: castlog_core::id::MateriaName::new("Build"),
                materia_label: "Build".into(),
                visit: Visit(1),
                item: None,
                item_label: None,
                attempt: 1,
            }),
            called("c1", "write"),
            called("c2", "Bash"),
            finished("c1"),
        ];
        let log = InMemoryLog::new();
        let cast = CastId::new("t");
        let pending: Vec<Pending> = events.iter().map(|e| Pending::new(0, e)).collect();
        log.append(&cast, Seq::FIRST, &pending).unwrap();
        let records = log.read(&cast, Seq::FIRST, None).unwrap();
        let entries = tool_call_entries(&records);
        let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "sockets/socket-1/1.tool-1-write.json",
                "sockets/socket-1/1.tool-2-bash.json"
            ]
        );
        assert_eq!(
            entries[0].content,
            Content::ToolCall {
                seq: 2,
                outcome: Some(4)
            }
        );
        assert_eq!(
            entries[1].content,
            Content::ToolCall {
                seq: 3,
                outcome: None
            }
        );
    }
}
