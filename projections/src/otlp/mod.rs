//! A cast as OpenTelemetry traces (OTLP), following the GenAI semantic conventions.
//!
//! This is a read model like the others: [`CastTrace`] folds the recorded events of one cast
//! into OTLP spans and reads nothing else. Times are the events' recorded `at_ms`, never the
//! clock, and ids are derived from the cast id, so two exports of one cast are the same bytes:
//!
//! - the trace id is the first 16 bytes of blake3 in derive-key mode ([`TRACE_CONTEXT`]) over
//!   the cast id's UTF-8 bytes;
//! - a span id is the first 8 bytes of blake3 in derive-key mode ([`SPAN_CONTEXT`]) over the
//!   cast id's length (u64, little-endian), the cast id and the span's identity: `cast` for the
//!   cast's root span, `ROLE@SEQ` for any other (the seq of the event that opened it), so a
//!   fork can link to its parent's root span without reading the parent.
//!
//! The spans, each a child of the one above it:
//!
//! | span | opened by | closed by | name |
//! |---|---|---|---|
//! | the cast | `cast_started` / `cast_forked` | its last event | `cast LOADOUT` |
//! | a socket visit | `socket_started` | `socket_completed` (or the next visit) | `invoke_agent LABEL`, `utility LABEL`, `post LABEL` |
//! | a model call | `prompt_dispatched` | `agent_replied` / `agent_failed` | `chat MODEL` |
//!
//! A utility's run (`utility_finished`) is told on its visit's span; repairs
//! (`output_rejected`), edges, rework, refinements and allowances are span events. Prompt
//! and reply texts, and the other texts a model or a person wrote (rework reasons,
//! refinements), are included only with [`TraceOptions::content`].
//!
//! `tool_called` / `tool_finished` become an `execute_tool` span under the model call's visit
//! ([`Role::Tool`]) once those events exist: one arm in [`CastTrace::observe`].

use std::collections::BTreeMap;

use castlog_core::event::{Event, FailureClass};
use castlog_core::id::{CastId, Seq, SocketId, Visit};
use castlog_core::prompt::Message;
use castlog_events::{LogError, Recorded};
pub use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::{Event as SpanEvent, Link, SpanKind};

use crate::prompt::PromptError;

mod read;
mod wire;

pub use read::{content_policy, trace_of};

pub use wire::{
    SPAN_CONTEXT, TRACE_CONTEXT, batches, request, span_id, to_json, to_protobuf, trace_id,
};
use wire::{error_status, flag, int, kv, messages_json, ns, target, text, texts, when};

/// The instrumentation scope and `service.name` of every export.
pub const SCOPE: &str = "castlog";

/// What an export includes beyond the shape of the cast.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceOptions {
    /// Prompt and completion texts (`gen_ai.input.messages`, `gen_ai.output.messages`) and
    /// the other texts a model or a person wrote (`--otel-content`).
    pub content: bool,
}

/// Why a cast could not be turned into a trace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// Reading the cast failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// An event does not decode.
    #[error("cast {cast} seq {seq}: {source} (run `castlog verify`)")]
    Decode {
        /// Cast being traced.
        cast: String,
        /// The event's seq.
        seq: u64,
        /// What the decoder said.
        #[source]
        source: castlog_core::event::DecodeError,
    },
    /// A prompt could not be rebuilt for `--otel-content`.
    #[error("cast {cast} seq {seq}: {source}")]
    Prompt {
        /// Cast being traced.
        cast: String,
        /// The dispatch's seq.
        seq: u64,
        /// What the rebuild found missing or different.
        source: PromptError,
    },
}

/// What a span stands for: its identity prefix and the GenAI operation it is, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Visit,
    ModelCall,
    /// `execute_tool`, for the tool-call events to come.
    #[allow(dead_code)]
    Tool,
}

impl Role {
    fn identity(self, seq: Seq) -> String {
        let name = match self {
            Role::Visit => "visit",
            Role::ModelCall => "chat",
            Role::Tool => "execute_tool",
        };
        format!("{name}@{seq}")
    }
}

/// An open or recently closed span with what the fold matches later events against.
#[derive(Debug)]
struct Slot {
    /// Index into [`CastTrace::spans`].
    index: usize,
    socket: SocketId,
    visit: Visit,
    /// Whether its closing event was seen (a closed visit still collects the edge and rework
    /// events that follow its completion).
    closed: bool,
}

/// The fold from a cast's events to its spans (see the module documentation).
#[derive(Debug)]
pub struct CastTrace {
    cast: CastId,
    trace: [u8; 16],
    options: TraceOptions,
    /// Every span in the order it was opened; the cast's root span first.
    spans: Vec<Span>,
    /// Per span: whether [`CastTrace::settled`] has handed it out already.
    told: Vec<bool>,
    visit: Option<Slot>,
    call: Option<Slot>,
    /// Per socket of the frozen loadout: its kind (`agent`, `utility`, `post`) and model.
    sockets: BTreeMap<String, (String, Option<String>)>,
    last_ns: u64,
    /// Reads the cast in order: a completion names the reply its output is.
    decoder: castlog_events::Decoder,
}

impl CastTrace {
    /// An empty trace of `cast`.
    pub fn new(cast: CastId, options: TraceOptions) -> Self {
        let trace = trace_id(&cast);
        let root = Span {
            trace_id: trace.to_vec(),
            span_id: span_id(&cast, "cast").to_vec(),
            name: format!("cast {cast}"),
            kind: SpanKind::Internal as i32,
            attributes: vec![kv("castlog.cast.id", text(cast.as_str()))],
            ..Default::default()
        };
        Self {
            cast,
            trace,
            options,
            spans: vec![root],
            told: vec![false],
            visit: None,
            call: None,
            sockets: BTreeMap::new(),
            last_ns: 0,
            decoder: castlog_events::Decoder::new(),
        }
    }

    fn open(&mut self, role: Role, seq: Seq, parent: usize, name: String) -> usize {
        let at = self.last_ns;
        let span = Span {
            trace_id: self.trace.to_vec(),
            span_id: span_id(&self.cast, &role.identity(seq)).to_vec(),
            parent_span_id: self.spans[parent].span_id.clone(),
            name,
            kind: match role {
                Role::ModelCall => SpanKind::Client,
                Role::Visit | Role::Tool => SpanKind::Internal,
            } as i32,
            start_time_unix_nano: at,
            end_time_unix_nano: at,
            ..Default::default()
        };
        self.spans.push(span);
        self.told.push(false);
        self.spans.len() - 1
    }

    fn close(&mut self, slot: Option<&mut Slot>) {
        if let Some(slot) = slot.filter(|s| !s.closed) {
            slot.closed = true;
            self.spans[slot.index].end_time_unix_nano = self.last_ns;
        }
    }

    fn root(&mut self) -> &mut Span {
        &mut self.spans[0]
    }

    /// The span of the visit of `socket` (any visit if `visit` is None), or the root.
    fn visit_index(&self, socket: &SocketId, visit: Option<Visit>) -> usize {
        self.visit
            .as_ref()
            .filter(|v| v.socket == *socket && visit.is_none_or(|n| n == v.visit))
            .map_or(0, |v| v.index)
    }

    /// The span of the current visit, open or just closed, or the root.
    fn current_visit(&self) -> usize {
        self.visit.as_ref().map_or(0, |v| v.index)
    }

    fn event(&mut self, span: usize, name: &str, attributes: Vec<KeyValue>) {
        let time_unix_nano = self.last_ns;
        self.spans[span].events.push(SpanEvent {
            time_unix_nano,
            name: name.to_owned(),
            attributes,
            ..Default::default()
        });
    }

    fn content(&self, key: &str, value: &str) -> Option<KeyValue> {
        self.options.content.then(|| kv(key, text(value)))
    }

    /// Passes over an event of another context than the machine's (an engage run's): it is
    /// no span and no span event, but the trace ends no earlier than it.
    pub fn pass(&mut self, record: &Recorded) {
        self.last_ns = ns(record.at_ms);
    }

    /// Folds one recorded event. `prompt` is the messages a `prompt_dispatched` sent, passed
    /// only when content is asked for (the fold reads no blobs itself).
    pub fn observe(&mut self, record: &Recorded, event: &Event, prompt: Option<&[Message]>) {
        self.last_ns = ns(record.at_ms);
        let seq = record.seq;
        match event {
            Event::CastStarted(s) => {
                self.start_root();
                if let Some(sockets) = s.loadout.get("sockets").and_then(|v| v.as_object()) {
                    for (id, socket) in sockets {
                        let kind = socket.get("kind").and_then(|v| v.as_str()).unwrap_or("");
                        let model = socket.get("model").and_then(|v| v.as_str());
                        self.sockets
                            .insert(id.clone(), (kind.to_owned(), model.map(str::to_owned)));
                    }
                }
                let root = self.root();
                root.name = format!("cast {}", s.loadout_name);
                root.attributes.extend([
                    kv("castlog.loadout.name", text(&s.loadout_name)),
                    kv("castlog.loadout.hash", text(s.loadout_hash.to_hex())),
                    kv("castlog.policy", text(&s.policy)),
                ]);
                if let Some(request) = self.content("castlog.request", &s.request) {
                    self.root().attributes.push(request);
                }
            }
            Event::CastForked(f) => {
                self.start_root();
                let link = Link {
                    trace_id: trace_id(&f.parent).to_vec(),
                    span_id: span_id(&f.parent, "cast").to_vec(),
                    attributes: vec![kv("castlog.parent.seq", int(f.parent_seq.get()))],
                    ..Default::default()
                };
                let root = self.root();
                root.name = format!("cast {}", f.cast);
                root.attributes.extend([
                    kv("castlog.parent.cast", text(f.parent.as_str())),
                    kv("castlog.parent.seq", int(f.parent_seq.get())),
                ]);
                root.links.push(link);
            }
            Event::CastCompleted(c) => {
                self.root()
                    .attributes
                    .push(kv("castlog.cast.status", text("completed")));
                self.root().attributes.extend(usage_attributes(c.usage));
            }
            Event::CastFailed(f) => {
                let root = self.root();
                root.attributes
                    .push(kv("castlog.cast.status", text("failed")));
                root.status = error_status(&f.reason);
            }
            Event::CastAborted(a) => {
                let root = self.root();
                root.attributes
                    .push(kv("castlog.cast.status", text("aborted")));
                root.status = error_status(&a.reason);
            }
            Event::CastRevived(r) => {
                self.root().status = None;
                self.event(
                    0,
                    "cast_revived",
                    vec![kv("castlog.socket", text(r.socket.as_str()))],
                );
            }
            Event::CastResumed(r) => {
                self.event(
                    0,
                    "cast_resumed",
                    vec![kv("castlog.redispatch", flag(r.redispatch))],
                );
            }
            Event::SocketStarted(s) => {
                let mut previous = self.visit.take();
                self.close(previous.as_mut());
                let (kind, _) = self.socket(&s.socket);
                let kind = if kind.is_empty() {
                    "agent".to_owned()
                } else {
                    kind
                };
                let name = match kind.as_str() {
                    "agent" => format!("invoke_agent {}", s.materia_label),
                    other => format!("{other} {}", s.materia_label),
                };
                let index = self.open(Role::Visit, seq, 0, name);
                let span = &mut self.spans[index];
                if kind == "agent" {
                    span.attributes.extend([
                        kv("gen_ai.operation.name", text("invoke_agent")),
                        kv("gen_ai.agent.name", text(&s.materia_label)),
                        kv("gen_ai.agent.id", text(s.materia.as_str())),
                    ]);
                }
                span.attributes.extend([
                    kv("castlog.socket", text(s.socket.as_str())),
                    kv("castlog.socket.kind", text(kind)),
                    kv("castlog.visit", int(s.visit.get())),
                    kv("castlog.attempt", int(s.attempt)),
                ]);
                if let Some(item) = &s.item {
                    span.attributes
                        .push(kv("castlog.item", text(item.as_str())));
                }
                if let Some(label) = &s.item_label {
                    span.attributes.push(kv("castlog.item.label", text(label)));
                }
                self.visit = Some(Slot {
                    index,
                    socket: s.socket.clone(),
                    visit: s.visit,
                    closed: false,
                });
            }
            Event::PromptDispatched(p) => {
                let mut previous = self.call.take();
                self.close(previous.as_mut());
                let model = self.socket(&p.socket).1;
                let parent = self.visit_index(&p.socket, Some(p.visit));
                let name = model
                    .as_ref()
                    .map_or_else(|| "chat".to_owned(), |m| format!("chat {m}"));
                let index = self.open(Role::ModelCall, seq, parent, name);
                let input = prompt.filter(|_| self.options.content).map(|messages| {
                    messages_json(
                        messages
                            .iter()
                            .map(|m| (m.role.as_str(), m.content.as_str())),
                    )
                });
                let span = &mut self.spans[index];
                span.attributes
                    .push(kv("gen_ai.operation.name", text("chat")));
                if let Some(model) = model {
                    span.attributes
                        .push(kv("gen_ai.request.model", text(model)));
                }
                span.attributes.extend([
                    kv("castlog.socket", text(p.socket.as_str())),
                    kv("castlog.visit", int(p.visit.get())),
                    kv("castlog.turn", int(p.turn.get())),
                    kv("castlog.prompt.hash", text(p.prompt_hash.to_hex())),
                ]);
                if p.redispatch {
                    span.attributes.push(kv("castlog.redispatch", flag(true)));
                }
                if let Some(input) = input {
                    span.attributes
                        .push(kv("gen_ai.input.messages", text(input)));
                }
                self.call = Some(Slot {
                    index,
                    socket: p.socket.clone(),
                    visit: p.visit,
                    closed: false,
                });
            }
            Event::PromptHeld(_) => {
                if let Some(call) = self.open_call() {
                    self.event(call, "prompt_held", Vec::new());
                }
            }
            Event::AgentReplied(r) => {
                if let Some(call) = self.open_call() {
                    let output = self.content(
                        "gen_ai.output.messages",
                        &messages_json([("assistant", r.text.as_str())]),
                    );
                    let span = &mut self.spans[call];
                    span.attributes.push(kv(
                        "gen_ai.response.finish_reasons",
                        texts(["stop".to_owned()]),
                    ));
                    span.attributes
                        .extend(usage_attributes(r.usage.unwrap_or_default()));
                    span.attributes.extend(output);
                    let mut call = self.call.take();
                    self.close(call.as_mut());
                    self.call = call;
                }
            }
            Event::AgentFailed(f) => {
                if let Some(call) = self.open_call() {
                    let class = match f.class {
                        FailureClass::Transient => "transient",
                        FailureClass::Interruption => "interruption",
                    };
                    let span = &mut self.spans[call];
                    span.attributes.extend([
                        kv("error.type", text(class)),
                        kv("castlog.attempt", int(f.attempt)),
                    ]);
                    span.status = error_status(&f.message);
                    let mut call = self.call.take();
                    self.close(call.as_mut());
                    self.call = call;
                }
            }
            Event::UtilityFinished(u) => {
                let index = self.visit_index(&u.socket, Some(u.visit));
                let span = &mut self.spans[index];
                if let Some(code) = u.code {
                    span.attributes
                        .push(kv("castlog.utility.exit_code", int(code)));
                }
                span.attributes.extend([
                    kv("castlog.utility.timed_out", flag(u.timed_out)),
                    kv("castlog.utility.truncated", flag(u.truncated)),
                ]);
                if u.timed_out {
                    span.status = error_status("the utility ran past its timeout");
                } else if u.code != Some(0) {
                    span.status = error_status("the utility exited unsuccessfully");
                }
            }
            Event::RefinementRecorded(r) => {
                let index = self.visit_index(&r.socket, Some(r.visit));
                let draft = self.content("castlog.text", &r.text);
                let mut attributes = vec![kv("castlog.turn", int(r.turn.get()))];
                attributes.extend(draft);
                self.event(index, "refinement_recorded", attributes);
            }
            Event::UserRefined(r) => {
                let index = self.visit_index(&r.socket, Some(r.visit));
                let attributes = self.content("castlog.text", &r.text).into_iter().collect();
                self.event(index, "user_refined", attributes);
            }
            Event::FinalizeRequested(f) => {
                let index = self.visit_index(&f.socket, Some(f.visit));
                self.event(index, "finalize_requested", Vec::new());
            }
            Event::OutputRejected(o) => {
                let index = self.visit_index(&o.socket, Some(o.visit));
                let attributes = vec![
                    kv("castlog.turn", int(o.turn.get())),
                    kv("castlog.repair", flag(o.repair)),
                    kv("castlog.issues", texts(o.issues.iter().cloned())),
                ];
                self.event(index, "output_rejected", attributes);
            }
            Event::SocketCompleted(c) => {
                let index = self.visit_index(&c.socket, Some(c.visit));
                if let Some(satisfied) = c.satisfied {
                    self.spans[index]
                        .attributes
                        .push(kv("castlog.satisfied", flag(satisfied)));
                }
                if c.finalized {
                    self.spans[index]
                        .attributes
                        .push(kv("castlog.finalized", flag(true)));
                }
                if index != 0 {
                    let mut visit = self.visit.take();
                    self.close(visit.as_mut());
                    self.visit = visit;
                }
            }
            Event::EdgeTaken(e) => {
                let index = self.visit_index(&e.from, None);
                let mut attributes = vec![
                    kv("castlog.edge.from", text(e.from.as_str())),
                    kv("castlog.edge.to", text(target(&e.to))),
                    kv("castlog.edge.when", text(when(e.when))),
                    kv("castlog.edge.traversal", int(e.traversal)),
                ];
                if let Some(item) = &e.item {
                    attributes.push(kv("castlog.item", text(item.as_str())));
                }
                self.event(index, "edge_taken", attributes);
            }
            Event::ReworkRouted(r) => {
                let index = self.visit_index(&r.source, None);
                let mut attributes = vec![
                    kv("castlog.rework.source", text(r.source.as_str())),
                    kv("castlog.rework.target", text(r.target.as_str())),
                    kv("castlog.rework.materia", text(&r.materia_label)),
                ];
                if let Some(item) = &r.item {
                    attributes.push(kv("castlog.item", text(item.as_str())));
                }
                attributes.extend(self.content("castlog.rework.reason", &r.reason));
                self.event(index, "rework_routed", attributes);
            }
            Event::ReworkCleared(r) => {
                let index = self.visit_index(&r.by, None);
                let mut attributes = vec![kv("castlog.rework.cleared_by", text(r.by.as_str()))];
                if let Some(item) = &r.item {
                    attributes.push(kv("castlog.item", text(item.as_str())));
                }
                self.event(index, "rework_cleared", attributes);
            }
            Event::AllowanceExhausted(a) => {
                let attributes = vec![
                    kv("castlog.allowance.count", int(a.count)),
                    kv("castlog.allowance.limit", int(a.limit)),
                ];
                let index = self.current_visit();
                self.event(index, "allowance_exhausted", attributes);
            }
            Event::DispatchSkipped(d) => {
                let index = self.current_visit();
                self.event(
                    index,
                    "dispatch_skipped",
                    vec![kv("castlog.dispatch.key", text(d.key.as_str()))],
                );
            }
            Event::SteeringNoted(s) => {
                let mut attributes = vec![kv("castlog.locked", flag(s.locked))];
                attributes.extend(self.content("castlog.text", &s.text));
                self.event(0, "steering_noted", attributes);
            }
            // Routing data, scheduling and the posting and engagement vocabularies are not
            // spans of a model workflow; `castlog show` tells them.
            _ => {}
        }
    }

    fn start_root(&mut self) {
        let at = self.last_ns;
        let root = self.root();
        root.start_time_unix_nano = at;
        root.end_time_unix_nano = at;
    }

    /// The index of the model call still waiting for its answer.
    fn open_call(&self) -> Option<usize> {
        self.call.as_ref().filter(|c| !c.closed).map(|c| c.index)
    }

    fn socket(&self, socket: &SocketId) -> (String, Option<String>) {
        self.sockets
            .get(socket.as_str())
            .cloned()
            .unwrap_or_default()
    }

    /// The export: spans still open end at the last event (a cast that waits or stopped).
    pub fn finish(mut self) -> ExportTraceServiceRequest {
        let mut call = self.call.take();
        self.close(call.as_mut());
        let mut visit = self.visit.take();
        self.close(visit.as_mut());
        let last = self.last_ns;
        self.root().end_time_unix_nano = last;
        request(self.spans)
    }
}

/// The GenAI usage attributes of `usage`.
fn usage_attributes(usage: castlog_core::event::Usage) -> [KeyValue; 2] {
    [
        kv("gen_ai.usage.input_tokens", int(usage.input)),
        kv("gen_ai.usage.output_tokens", int(usage.output)),
    ]
}

#[cfg(test)]
mod tests {
    use castlog_core::event::{AgentFailed, CastStarted, PromptDispatched, SocketStarted};
    use castlog_core::id::{Digest, MateriaName, Turn};
    use opentelemetry_proto::tonic::trace::v1::status::StatusCode;

    use super::*;

    fn fold(events: &[Event]) -> Vec<Span> {
        let cast = CastId::new("demo");
        let mut trace = CastTrace::new(cast.clone(), TraceOptions::default());
        for (n, event) in events.iter().enumerate() {
            let record = Recorded {
                cast: cast.clone(),
                seq: Seq(n as u64 + 1),
                at_ms: 1_000 + n as u64,
                kind: event.kind().to_owned(),
                v: event.version(),
                payload: event.encode(),
                prev: Digest::default(),
                hash: Digest::default(),
            };
            trace.observe(&record, event, None);
        }
        trace
            .finish()
            .resource_spans
            .remove(0)
            .scope_spans
            .remove(0)
            .spans
    }

    fn sample_events() -> Vec<Event> {
        let socket = SocketId::new("S");
        let mut events = vec![Event::CastStarted(CastStarted {
            cast: CastId::new("demo"),
            loadout_name: "L".into(),
            loadout: serde_json::json!({"sockets": {"S": {"kind": "agent"}}}),
            loadout_hash: Digest::default(),
            request: "task".into(),
            policy: "recommended".into(),
            config_source: None,
            fence: None,
            policy_document: None,
            workdir: None,
            handoff: None,
            conformance: None,
            tools: None,
        })];
        for visit in 1..=3 {
            events.push(Event::SocketStarted(SocketStarted {
                socket: socket.clone(),
                materia: MateriaName::new("Build"),
                materia_label: "Build".into(),
                visit: Visit(visit),
                item: None,
                item_label: None,
                attempt: 1,
            }));
            events.push(Event::PromptDispatched(PromptDispatched {
                socket: socket.clone(),
                visit: Visit(visit),
                turn: Turn(1),
                prompt_hash: Digest::default(),
                system_hash: None,
                placements: Vec::new(),
                redispatch: false,
            }));
        }
        events
    }

    /// Spans handed out as the trace grows, then the rest, are the finished trace's spans,
    /// each once.
    #[test]
    fn settled_spans_and_the_rest_are_the_whole_trace_once() {
        let cast = CastId::new("demo");
        let events = sample_events();
        let (mut grown, mut whole) = (
            CastTrace::new(cast.clone(), TraceOptions::default()),
            CastTrace::new(cast.clone(), TraceOptions::default()),
        );
        let mut told = Vec::new();
        for (n, event) in events.iter().enumerate() {
            let record = Recorded {
                cast: cast.clone(),
                seq: Seq(n as u64 + 1),
                at_ms: 1_000 + n as u64,
                kind: event.kind().to_owned(),
                v: event.version(),
                payload: event.encode(),
                prev: castlog_core::id::Digest::default(),
                hash: castlog_core::id::Digest::default(),
            };
            grown.observe(&record, event, None);
            whole.observe(&record, event, None);
            told.extend(grown.settled());
        }
        assert!(!told.is_empty(), "a visit before the last one settles");
        let mut spans = told;
        spans.extend(
            grown
                .finish_rest()
                .resource_spans
                .remove(0)
                .scope_spans
                .remove(0)
                .spans,
        );
        let mut all = whole
            .finish()
            .resource_spans
            .remove(0)
            .scope_spans
            .remove(0)
            .spans;
        let key = |s: &Span| s.span_id.clone();
        spans.sort_by_key(key);
        all.sort_by_key(key);
        assert_eq!(spans, all);
    }

    #[test]
    fn a_failed_call_is_an_error_span_and_an_open_visit_ends_at_the_last_event() {
        let socket = SocketId::new("S");
        let spans = fold(&[
            Event::CastStarted(CastStarted {
                cast: CastId::new("demo"),
                loadout_name: "L".into(),
                loadout: serde_json::json!({"sockets": {"S": {"kind": "agent", "model": "m1"}}}),
                loadout_hash: Digest::default(),
                request: "secret task".into(),
                policy: "recommended".into(),
                policy_document: None,
                config_source: None,
                fence: None,
                workdir: None,
                handoff: None,
                conformance: None,
                tools: None,
            }),
            Event::SocketStarted(SocketStarted {
                socket: socket.clone(),
                materia: MateriaName::new("Build"),
                materia_label: "Build".into(),
                visit: Visit(1),
                item: None,
                item_label: None,
                attempt: 1,
            }),
            Event::PromptDispatched(PromptDispatched {
                socket: socket.clone(),
                visit: Visit(1),
                turn: Turn(1),
                prompt_hash: Digest::default(),
                system_hash: None,
                placements: Vec::new(),
                redispatch: false,
            }),
            Event::AgentFailed(AgentFailed {
                socket,
                visit: Visit(1),
                turn: Turn(1),
                class: FailureClass::Interruption,
                message: "gone".into(),
                attempt: 1,
                structured_off: false,
            }),
        ]);
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["cast L", "invoke_agent Build", "chat m1"]);
        let call = &spans[2];
        assert_eq!(call.parent_span_id, spans[1].span_id);
        assert_eq!(
            call.status.as_ref().map(|s| s.code),
            Some(StatusCode::Error as i32)
        );
        assert!(
            call.attributes
                .iter()
                .any(|a| a.key == "gen_ai.request.model")
        );
        assert_eq!(call.start_time_unix_nano, 1_002_000_000);
        assert_eq!(call.end_time_unix_nano, 1_003_000_000);
        assert_eq!(spans[1].end_time_unix_nano, 1_003_000_000);
        assert_eq!(spans[0].end_time_unix_nano, 1_003_000_000);
        // The task is a person's text: not in the trace without content.
        assert!(
            spans[0]
                .attributes
                .iter()
                .all(|a| a.key != "castlog.request")
        );
    }
}
