//! The outbox of the event bus: the bus events of a cast (`castlog_core::eventing`), a
//! projection of its log.
//!
//! Each bus event comes from one recorded event: the cast's lifecycle (`cast_started` or
//! `cast_forked`, `cast_completed`, `cast_failed`, `cast_aborted`, `cast_revived`), its
//! sockets' (`socket_started`, `socket_completed`, a `cast_failed` naming a socket), a
//! multi-turn draft waiting for a person (`refinement_recorded`) and the events materia
//! report (`materia_event`). Its `sequence` counts the cast's bus events from 1, its time is
//! the source event's, and its id is derived from the cast, the source event's seq and its
//! place among that event's bus events, so folding the log again (after a crash, from
//! another process) gives every event the same id and sequence: what was not delivered is
//! still in the outbox, and a redelivery carries the id the receiver may have seen.
//!
//! A heartbeat is not in the log: it is made live ([`Outbox::heartbeat`]) and carries the
//! sequence of the latest event before it without taking a number of its own.

use std::collections::BTreeMap;

use castlog_core::event::{DecodeError, Event};
use castlog_core::eventing::{BusEvent, iso_time};
use castlog_core::id::{BusEventId, CastId, Seq, SocketId};
use castlog_events::{Decoder, EventLog, LogError, Recorded};
use serde_json::{Value, json};

/// Why an outbox could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// Reading the log failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// An event of the cast did not decode.
    #[error("cannot read event {seq} of cast {cast}: {source}")]
    Decode {
        /// The cast.
        cast: CastId,
        /// Its seq.
        seq: Seq,
        /// Why.
        source: DecodeError,
    },
}

/// The socket visit bus events are told about.
#[derive(Debug, Clone, Default)]
struct VisitContext {
    socket: String,
    materia: String,
    materia_label: Option<String>,
    visit: Option<u32>,
    item_key: Option<String>,
    item_label: Option<String>,
}

impl VisitContext {
    fn lifecycle() -> Self {
        VisitContext {
            socket: "lifecycle".into(),
            materia: "pi-materia".into(),
            ..VisitContext::default()
        }
    }
}

/// A bus event before its id and sequence are given.
#[derive(Debug)]
struct Made {
    kind: String,
    context: VisitContext,
    severity: String,
    message: String,
    payload: Value,
    source: Option<String>,
}

/// The fold: what the bus events after the ones seen so far need.
#[derive(Debug, Clone)]
pub struct Outbox {
    cast: CastId,
    sequence: u64,
    /// The latest visit of each socket.
    visits: BTreeMap<SocketId, VisitContext>,
    last_at_ms: u64,
    /// Reads the cast in order: a completion names the reply its output is.
    decoder: Decoder,
}

/// The id of the `index`-th bus event made from the event at `seq` of `cast`: UUID-shaped
/// (version 8, the bytes of a blake3 hash), the same however often it is derived.
pub fn event_id(cast: &CastId, seq: Seq, index: usize) -> BusEventId {
    derived_id(&format!("castlog bus event\0{cast}\0{seq}\0{index}"))
}

fn derived_id(key: &str) -> BusEventId {
    let hash = blake3::hash(key.as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&hash.as_bytes()[..16]);
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    BusEventId::new(format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

impl Outbox {
    /// The outbox of `cast` before its first event.
    pub fn new(cast: CastId) -> Self {
        Outbox {
            cast,
            sequence: 0,
            visits: BTreeMap::new(),
            last_at_ms: 0,
            decoder: Decoder::new(),
        }
    }

    /// The sequence of the latest bus event so far (0 before the first).
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The bus events `record` makes (most make none).
    pub fn observe(&mut self, record: &Recorded) -> Result<Vec<BusEvent>, OutboxError> {
        let event = self
            .decoder
            .event(record)
            .map_err(|source| OutboxError::Decode {
                cast: self.cast.clone(),
                seq: record.seq,
                source,
            })?;
        self.last_at_ms = record.at_ms;
        let made = self.made_of(&event);
        Ok(made
            .into_iter()
            .enumerate()
            .map(|(index, made)| {
                self.sequence += 1;
                let Made {
                    kind,
                    context,
                    severity,
                    message,
                    payload,
                    source,
                } = made;
                BusEvent {
                    event_id: event_id(&self.cast, record.seq, index),
                    kind,
                    occurred_at: iso_time(record.at_ms),
                    sequence: self.sequence,
                    cast_id: self.cast.clone(),
                    socket_id: context.socket,
                    materia: context.materia,
                    materia_label: context.materia_label,
                    visit: context.visit,
                    item_key: context.item_key,
                    item_label: context.item_label,
                    severity,
                    message: Some(message).filter(|m| !m.is_empty()),
                    payload,
                    source,
                }
            })
            .collect())
    }

    /// What `event` tells the bus, before ids and sequence are given.
    fn made_of(&mut self, event: &Event) -> Vec<Made> {
        let cast = &self.cast;
        let lifecycle = |kind: &str, severity: &str, message: String, payload: Value| Made {
            kind: kind.to_owned(),
            context: VisitContext::lifecycle(),
            severity: severity.to_owned(),
            message,
            payload,
            source: None,
        };
        match event {
            Event::CastStarted(started) => vec![lifecycle(
                "lifecycle.cast.started",
                "info",
                format!("cast {cast} started (loadout {})", started.loadout_name),
                json!({"loadout": started.loadout_name, "request": started.request}),
            )],
            Event::CastForked(forked) => vec![lifecycle(
                "lifecycle.cast.started",
                "info",
                format!(
                    "cast {cast} started as a recast of {} at seq {}",
                    forked.parent, forked.parent_seq
                ),
                json!({"recastOf": forked.parent, "recastAtSeq": forked.parent_seq}),
            )],
            Event::CastCompleted(done) => vec![lifecycle(
                "lifecycle.cast.completed",
                "info",
                format!("cast {cast} completed"),
                json!({"usage": done.usage}),
            )],
            Event::CastFailed(failed) => {
                let mut made = Vec::new();
                if let Some(socket) = &failed.socket {
                    made.push(Made {
                        kind: "lifecycle.socket.failed".into(),
                        context: self.context_of(socket),
                        severity: "error".into(),
                        message: format!("socket {socket} failed: {}", failed.reason),
                        payload: json!({"reason": failed.reason}),
                        source: None,
                    });
                }
                made.push(lifecycle(
                    "lifecycle.cast.failed",
                    "error",
                    format!("cast {cast} failed: {}", failed.reason),
                    json!({"reason": failed.reason, "socket": failed.socket}),
                ));
                made
            }
            Event::CastAborted(aborted) => vec![lifecycle(
                "lifecycle.cast.cancelled",
                "warning",
                format!("cast {cast} was aborted: {}", aborted.reason),
                json!({"reason": aborted.reason}),
            )],
            Event::CastRevived(revived) => vec![lifecycle(
                "lifecycle.cast.revived",
                "info",
                format!("cast {cast} was revived at {}", revived.socket),
                json!({"socket": revived.socket}),
            )],
            Event::SocketStarted(started) => {
                let context = VisitContext {
                    socket: started.socket.to_string(),
                    materia: started.materia.to_string(),
                    materia_label: Some(started.materia_label.clone()),
                    visit: Some(started.visit.get()),
                    item_key: started.item.as_ref().map(ToString::to_string),
                    item_label: started.item_label.clone(),
                };
                self.visits.insert(started.socket.clone(), context.clone());
                vec![Made {
                    kind: "lifecycle.socket.started".into(),
                    context,
                    severity: "info".into(),
                    message: format!(
                        "socket {} started (visit {})",
                        started.socket, started.visit
                    ),
                    payload: json!({"attempt": started.attempt}),
                    source: None,
                }]
            }
            Event::SocketCompleted(done) => vec![Made {
                kind: "lifecycle.socket.completed".into(),
                context: self.context_of(&done.socket),
                severity: "info".into(),
                message: format!("socket {} completed (visit {})", done.socket, done.visit),
                payload: match done.satisfied {
                    Some(satisfied) => json!({"satisfied": satisfied}),
                    None => json!({}),
                },
                source: None,
            }],
            Event::RefinementRecorded(draft) => vec![Made {
                kind: "lifecycle.refinement.waiting".into(),
                context: self.context_of(&draft.socket),
                severity: "info".into(),
                message: format!(
                    "socket {} waits for a refinement or continue (turn {})",
                    draft.socket, draft.turn
                ),
                payload: json!({"turn": draft.turn}),
                source: None,
            }],
            Event::MateriaEvent(reported) => {
                let field = |key: &str| {
                    reported
                        .event
                        .get(key)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                let mut context = self.context_of(&reported.socket);
                context.visit = Some(reported.visit.get());
                if let Some(item) = &reported.item {
                    context.item_key = Some(item.to_string());
                }
                vec![Made {
                    kind: field("type").unwrap_or_else(|| "materia.event".into()),
                    context,
                    severity: field("severity").unwrap_or_else(|| "info".into()),
                    message: field("message").unwrap_or_default(),
                    payload: reported.event.get("payload").cloned().unwrap_or(json!({})),
                    source: field("source"),
                }]
            }
            _ => Vec::new(),
        }
    }

    fn context_of(&self, socket: &SocketId) -> VisitContext {
        self.visits
            .get(socket)
            .cloned()
            .unwrap_or_else(|| VisitContext {
                socket: socket.to_string(),
                materia: "pi-materia".into(),
                ..VisitContext::default()
            })
    }

    /// The `n`-th heartbeat (from 1) after the latest event, `elapsed_ms` into the drive, at
    /// `now_ms`: `phase` is the socket running (or `lifecycle`).
    pub fn heartbeat(
        &self,
        n: u64,
        now_ms: u64,
        elapsed_ms: u64,
        socket: Option<&SocketId>,
    ) -> BusEvent {
        let context = socket.map_or_else(VisitContext::lifecycle, |s| self.context_of(s));
        let phase = context.socket.clone();
        BusEvent {
            event_id: derived_id(&format!(
                "castlog heartbeat\0{}\0{}\0{n}",
                self.cast, self.sequence
            )),
            kind: "lifecycle.heartbeat".into(),
            occurred_at: iso_time(now_ms.max(self.last_at_ms)),
            sequence: self.sequence,
            cast_id: self.cast.clone(),
            socket_id: context.socket,
            materia: context.materia,
            materia_label: context.materia_label,
            visit: context.visit,
            item_key: context.item_key,
            item_label: context.item_label,
            severity: "info".into(),
            message: None,
            payload: json!({"phase": phase, "elapsedMs": elapsed_ms, "socketId": phase}),
            source: None,
        }
    }
}

/// Every bus event of `cast`, folded from its log.
pub fn outbox_of(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
) -> Result<Vec<BusEvent>, OutboxError> {
    let mut outbox = Outbox::new(cast.clone());
    let mut events = Vec::new();
    let mut failed = None;
    log.scan(cast, Seq::FIRST, &mut |record: Recorded| {
        match outbox.observe(&record) {
            Ok(made) => events.extend(made),
            Err(err) => {
                failed = Some(err);
                return std::ops::ControlFlow::Break(());
            }
        }
        std::ops::ControlFlow::Continue(())
    })?;
    match failed {
        Some(err) => Err(err),
        None => Ok(events),
    }
}

#[cfg(test)]
mod tests {
    use castlog_core::id::Digest;

    use super::*;

    fn record(seq: u64, kind: &str, payload: &Value) -> Recorded {
        Recorded {
            cast: CastId::new("c"),
            seq: Seq(seq),
            at_ms: 1_767_225_600_000 + seq,
            kind: kind.into(),
            v: 1,
            payload: payload.to_string().into_bytes(),
            prev: Digest([0; 32]),
            hash: Digest([0; 32]),
        }
    }

    fn fold(records: &[Recorded]) -> (Outbox, Vec<BusEvent>) {
        let mut outbox = Outbox::new(CastId::new("c"));
        let mut events = Vec::new();
        for r in records {
            events.extend(outbox.observe(r).unwrap());
        }
        (outbox, events)
    }

    #[test]
    fn sockets_materia_events_and_failures_are_enriched_in_sequence() {
        let records = [
            record(
                1,
                "socket_started",
                &json!({"socket": "Socket-2", "materia": "Eval",
                "materia_label": "Evaluator", "visit": 2, "item": "WI-1", "item_label": "Fix it",
                "attempt": 1}),
            ),
            record(2, "cast_resumed", &json!({})),
            record(
                3,
                "materia_event",
                &json!({"socket": "Socket-2", "visit": 2, "item": "WI-1",
                "event": {"type": "review.done", "severity": "warning", "message": "2 notes",
                          "payload": {"notes": 2}, "source": "lint"}}),
            ),
            record(
                4,
                "refinement_recorded",
                &json!({"socket": "Socket-2", "visit": 2, "turn": 1,
                "text": "draft"}),
            ),
            record(
                5,
                "cast_failed",
                &json!({"reason": "boom", "socket": "Socket-2"}),
            ),
        ];
        let (outbox, events) = fold(&records);
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "lifecycle.socket.started",
                "review.done",
                "lifecycle.refinement.waiting",
                "lifecycle.socket.failed",
                "lifecycle.cast.failed"
            ]
        );
        let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, [1, 2, 3, 4, 5]);
        let review = &events[1];
        assert_eq!(review.socket_id, "Socket-2");
        assert_eq!(review.materia, "Eval");
        assert_eq!(review.materia_label.as_deref(), Some("Evaluator"));
        assert_eq!(review.visit, Some(2));
        assert_eq!(review.item_key.as_deref(), Some("WI-1"));
        assert_eq!(review.severity, "warning");
        assert_eq!(review.payload, json!({"notes": 2}));
        assert_eq!(review.source.as_deref(), Some("lint"));
        assert_eq!(review.occurred_at, "2026-01-01T00:00:00.003Z");
        assert_eq!(review.event_id, event_id(&CastId::new("c"), Seq(3), 0));
        assert_eq!(events[3].severity, "error");
        assert_eq!(events[4].socket_id, "lifecycle");
        assert_eq!(events[4].materia, "pi-materia");
        assert_ne!(events[3].event_id, events[4].event_id);

        // Folded again, every event has the same id and sequence.
        assert_eq!(fold(&records).1, events);

        // A heartbeat takes no sequence of its own.
        let beat = outbox.heartbeat(1, 1_767_225_700_000, 5000, Some(&SocketId::new("Socket-2")));
        assert_eq!(beat.kind, "lifecycle.heartbeat");
        assert_eq!(beat.sequence, 5);
        assert_eq!(beat.payload["elapsedMs"], 5000);
        assert_eq!(beat.payload["phase"], "Socket-2");
        assert_ne!(beat.event_id, outbox.heartbeat(2, 0, 0, None).event_id);
    }

    #[test]
    fn ids_are_uuid_shaped_and_stable() {
        let cast = CastId::new("c");
        let a = event_id(&cast, Seq(3), 0);
        assert_eq!(a, event_id(&cast, Seq(3), 0));
        assert_ne!(a, event_id(&cast, Seq(3), 1));
        assert_ne!(a, event_id(&CastId::new("d"), Seq(3), 0));
        let id = a.as_str();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "8");
        assert_eq!(id.matches('-').count(), 4);
    }
}
