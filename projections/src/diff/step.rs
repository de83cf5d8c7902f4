//! Steps: socket visits of a cast, made as its history is read. Of each step only its key, a
//! digest of what is compared and where its events are stay in memory ([`Kept`]); a step is
//! rebuilt in full from the log ([`reread`]) only where two casts' digests differ.

use std::collections::BTreeMap;

use castlog_core::event::{Event, Placement, Target};
use castlog_core::id::{CastId, Digest, Seq};
use castlog_events::{Decoder, EventLog, Recorded};
use serde_json::Value;

use super::DiffError;

/// One socket visit of a cast, in full.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Step {
    /// Each turn's prompt digest with its placements (text is rebuilt only where two differ).
    pub(super) prompts: Vec<(u32, Digest, Vec<Placement>)>,
    pub(super) placements: Vec<String>,
    pub(super) output: Option<String>,
    pub(super) routing: Option<String>,
    pub(super) data: BTreeMap<String, Value>,
    /// The visit's tool calls in the order they were made.
    pub(super) tools: Vec<ToolStep>,
    /// Each prompt's stored payload, in place of its placements, in a step made only for its
    /// digest (see [`Steps::full`]).
    pub(super) prompt_payloads: Vec<Vec<u8>>,
}

/// What a step made for its digest reads of a `prompt_dispatched` payload; its placements
/// are skipped, and the payload's bytes stand for them.
#[derive(serde::Deserialize)]
struct PromptHead {
    turn: castlog_core::id::Turn,
    prompt_hash: Digest,
    #[serde(default)]
    redispatch: bool,
}

/// One tool call of a step: what is compared of it (the call id, which agents choose freely,
/// is kept for showing only).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ToolStep {
    pub(super) id: String,
    pub(super) tool: String,
    pub(super) arguments: Value,
    pub(super) outcome: ToolEnd,
}

/// How a tool call ended, as far as the log says.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum ToolEnd {
    /// No outcome recorded (the step ended, or the cast was cut off, before one).
    Unknown,
    /// Cut off and not run again (`tool_interrupted`).
    Interrupted,
    /// Its result.
    Finished {
        output: String,
        exit: Option<i32>,
        error: bool,
        truncated: bool,
    },
}

impl ToolStep {
    /// Whether two calls are the same but for their ids.
    pub(super) fn alike(&self, other: &ToolStep) -> bool {
        (self.tool.as_str(), &self.arguments, &self.outcome)
            == (other.tool.as_str(), &other.arguments, &other.outcome)
    }

    /// `ok`, `error`, `interrupted` or `unknown`, with `exit N` and `truncated` when they
    /// apply.
    pub(super) fn status(&self) -> String {
        match &self.outcome {
            ToolEnd::Unknown => "unknown".into(),
            ToolEnd::Interrupted => "interrupted".into(),
            ToolEnd::Finished {
                exit,
                error,
                truncated,
                ..
            } => {
                let mut status = if *error { "error" } else { "ok" }.to_owned();
                if let Some(code) = exit {
                    status.push_str(&format!(", exit {code}"));
                }
                if *truncated {
                    status.push_str(", truncated");
                }
                status
            }
        }
    }

    /// The result text, when there is one.
    pub(super) fn result(&self) -> Option<&str> {
        match &self.outcome {
            ToolEnd::Finished { output, .. } => Some(output),
            _ => None,
        }
    }
}

impl Step {
    /// Whether [`Step::apply`] (or the start of a step) reads events of this kind.
    fn reads(kind: &str) -> bool {
        matches!(
            kind,
            "socket_started"
                | "prompt_dispatched"
                | "socket_completed"
                | "tool_called"
                | "tool_finished"
                | "tool_interrupted"
                | "data_assigned"
                | "edge_taken"
        )
    }

    /// Whether a prompt of `turn` with `hash` is the step's last one sent again (a held or
    /// forked prompt, a retry): one prompt of the step, not a second.
    fn sent_again(&self, turn: u32, hash: &Digest, redispatch: bool) -> bool {
        redispatch
            && self
                .prompts
                .last()
                .is_some_and(|(last, last_hash, _)| *last == turn && last_hash == hash)
    }

    /// A prompt as a step made for its digest keeps it: its turn, its hash and its payload.
    fn apply_prompt_head(&mut self, head: &PromptHead, payload: &[u8]) {
        if self.sent_again(head.turn.get(), &head.prompt_hash, head.redispatch) {
            return;
        }
        self.prompts
            .push((head.turn.get(), head.prompt_hash, Vec::new()));
        self.prompt_payloads.push(payload.to_vec());
    }

    /// Adds what an event of a kind [`Step::reads`] says to the step.
    fn apply(&mut self, event: Event) {
        match event {
            Event::PromptDispatched(e) => {
                if self.sent_again(e.turn.get(), &e.prompt_hash, e.redispatch) {
                    return;
                }
                for p in &e.placements {
                    self.placements.push(format!(
                        "turn {} {} {} #{} {}",
                        e.turn,
                        p.entry,
                        castlog_core::syntax::json_name(&p.destination),
                        p.position,
                        p.rule
                    ));
                }
                self.prompts
                    .push((e.turn.get(), e.prompt_hash, e.placements));
            }
            Event::SocketCompleted(e) => self.output = Some(e.output),
            Event::ToolCalled(e) => self.tools.push(ToolStep {
                id: e.call,
                tool: e.tool,
                arguments: e.arguments,
                outcome: ToolEnd::Unknown,
            }),
            Event::ToolFinished(e) => self.ended(
                &e.call,
                ToolEnd::Finished {
                    output: e.output,
                    exit: e.exit,
                    error: e.error,
                    truncated: e.truncated,
                },
            ),
            Event::ToolInterrupted(e) => self.ended(&e.call, ToolEnd::Interrupted),
            Event::DataAssigned(e) => {
                self.data.insert(e.path, e.value);
            }
            Event::EdgeTaken(e) => {
                let to = match e.to {
                    Target::Socket(s) => s.to_string(),
                    Target::End => "end".into(),
                };
                let when = castlog_core::syntax::json_name(&e.when);
                self.routing = Some(format!("{} -> {to} ({when})", e.from));
            }
            _ => {}
        }
    }

    /// Records the outcome of the latest call `id` that has none yet.
    fn ended(&mut self, id: &str, end: ToolEnd) {
        if let Some(t) = self
            .tools
            .iter_mut()
            .rev()
            .find(|t| t.id == id && t.outcome == ToolEnd::Unknown)
        {
            t.outcome = end;
        }
    }

    /// A digest of everything [`super::changes::compare`] looks at, each part length-prefixed
    /// so that no two different steps encode alike: two steps with the same digest compare
    /// the same.
    pub(super) fn digest(&self) -> Digest {
        let mut bytes = Vec::new();
        let mut part = |b: &[u8]| {
            bytes.extend_from_slice(&(b.len() as u64).to_be_bytes());
            bytes.extend_from_slice(b);
        };
        part(&(self.prompts.len() as u64).to_be_bytes());
        for (turn, hash, _) in &self.prompts {
            part(&turn.to_be_bytes());
            part(&hash.0);
        }
        part(&(self.placements.len() as u64).to_be_bytes());
        for p in &self.placements {
            part(p.as_bytes());
        }
        part(&(self.prompt_payloads.len() as u64).to_be_bytes());
        for payload in &self.prompt_payloads {
            part(payload);
        }
        for text in [&self.output, &self.routing] {
            match text {
                Some(t) => {
                    part(b"some");
                    part(t.as_bytes());
                }
                None => part(b"none"),
            }
        }
        part(
            serde_json::to_string(&self.data)
                .unwrap_or_default()
                .as_bytes(),
        );
        part(&(self.tools.len() as u64).to_be_bytes());
        for t in &self.tools {
            part(t.tool.as_bytes());
            part(t.arguments.to_string().as_bytes());
            part(t.status().as_bytes());
            match t.result() {
                Some(r) => {
                    part(b"some");
                    part(r.as_bytes());
                }
                None => part(b"none"),
            }
        }
        castlog_events::chain::blob_hash(&bytes)
    }
}

/// Consecutive events of one cast (`first..=last`), by the cast's place in [`Steps::casts`].
#[derive(Debug, Clone, Copy)]
struct Span {
    cast: usize,
    first: u64,
    last: u64,
}

/// What is kept of a step for the whole walk: its key, its digest and where its events are (a
/// recast's step that began before the fork point has events in two casts).
#[derive(Debug, Clone)]
pub(super) struct Kept {
    /// `SOCKET ITEM #VISIT` (`-` for no item): what aligns the steps of two casts.
    pub(super) key: String,
    pub(super) digest: Digest,
    spans: Vec<Span>,
}

/// A cast's steps, made as its history is read: only the step the next events belong to is
/// held in full, so what the walk keeps per step does not grow with its outputs or prompts.
#[derive(Debug, Clone, Default)]
pub(super) struct Steps {
    pub(super) kept: Vec<Kept>,
    /// The casts the history's events come from (the cast and its ancestors).
    pub(super) casts: Vec<CastId>,
    /// The step the next events belong to.
    open: Option<Step>,
    /// Whether steps are made in full (to be shown); otherwise only for their digests, a
    /// prompt kept as its stored bytes instead of its decoded placements (equal bytes are
    /// equal placements; a step whose digests differ is read again in full, [`reread`]).
    full: bool,
    /// Reads the history in order: a completion names the reply its output is.
    pub(super) decoder: Decoder,
}

impl Steps {
    pub(super) fn push(&mut self, record: &Recorded) {
        // A kind no step looks at (a reply, a rework entry, a dispatch key) is not decoded:
        // it only widens the open step's span; a step made for its digest reads a prompt's
        // head only.
        let head_only = !self.full && record.kind == "prompt_dispatched";
        let event = if Step::reads(&record.kind) && !head_only {
            match self.decoder.event(record) {
                Ok(event) => Some(event),
                Err(_) => return,
            }
        } else {
            self.decoder.note(record);
            None
        };
        if let Some(Event::SocketStarted(e)) = &event {
            self.close();
            let item = e
                .item
                .as_ref()
                .map_or_else(|| "-".to_owned(), ToString::to_string);
            let key = format!("{} {item} #{}", e.socket, e.visit);
            self.kept.push(Kept {
                key,
                digest: Digest([0; 32]),
                spans: Vec::new(),
            });
            self.open = Some(Step::default());
        }
        let Some(step) = self.open.as_mut() else {
            return;
        };
        match event {
            Some(event) => step.apply(event),
            None if record.kind == "prompt_dispatched" => {
                if let Ok(head) = serde_json::from_slice::<PromptHead>(&record.payload) {
                    step.apply_prompt_head(&head, &record.payload);
                }
            }
            None => {}
        }
        let cast = match self.casts.iter().position(|c| *c == record.cast) {
            Some(i) => i,
            None => {
                self.casts.push(record.cast.clone());
                self.casts.len() - 1
            }
        };
        let seq = record.seq.get();
        if let Some(kept) = self.kept.last_mut() {
            match kept.spans.last_mut() {
                Some(span) if span.cast == cast && span.last < seq => span.last = seq,
                _ => kept.spans.push(Span {
                    cast,
                    first: seq,
                    last: seq,
                }),
            }
        }
    }

    /// Seals the open step: its digest is all that stays of its content.
    fn close(&mut self) {
        if let (Some(step), Some(kept)) = (self.open.take(), self.kept.last_mut()) {
            kept.digest = step.digest();
        }
    }

    pub(super) fn finish(mut self) -> Self {
        self.close();
        self
    }
}

/// A kept step in full again, from its events in the log.
pub(super) fn reread(
    log: &(impl EventLog + ?Sized),
    casts: &[CastId],
    kept: &Kept,
) -> Result<Step, DiffError> {
    let mut steps = Steps {
        full: true,
        ..Steps::default()
    };
    for span in &kept.spans {
        let cast = casts.get(span.cast).ok_or_else(|| DiffError::StepLost {
            key: kept.key.clone(),
        })?;
        for record in log.read(cast, Seq(span.first), Some(Seq(span.last)))? {
            steps.push(&record);
        }
    }
    steps.open.ok_or_else(|| DiffError::StepLost {
        key: kept.key.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step whose digest matches another's is reported `same` without being read again, so
    /// steps that differ in any compared part, however slightly, must not share a digest.
    #[test]
    fn steps_that_compare_differently_have_different_digests() {
        let base = Step::default();
        let variants = [
            Step {
                output: Some(String::new()),
                ..Step::default()
            },
            Step {
                routing: Some(String::new()),
                ..Step::default()
            },
            Step {
                prompt_payloads: vec![Vec::new()],
                ..Step::default()
            },
            Step {
                placements: vec!["ab".into()],
                ..Step::default()
            },
            Step {
                placements: vec!["a".into(), "b".into()],
                ..Step::default()
            },
            Step {
                data: BTreeMap::from([("x".to_owned(), Value::Null)]),
                ..Step::default()
            },
            Step {
                prompts: vec![(1, Digest([0; 32]), Vec::new())],
                ..Step::default()
            },
            Step {
                tools: vec![ToolStep {
                    id: "c".into(),
                    tool: "read".into(),
                    arguments: Value::Null,
                    outcome: ToolEnd::Unknown,
                }],
                ..Step::default()
            },
            Step {
                tools: vec![ToolStep {
                    id: "c".into(),
                    tool: "read".into(),
                    arguments: Value::Null,
                    outcome: ToolEnd::Finished {
                        output: String::new(),
                        exit: None,
                        error: false,
                        truncated: false,
                    },
                }],
                ..Step::default()
            },
        ];
        let mut digests = vec![base.digest()];
        for step in &variants {
            let digest = step.digest();
            assert!(!digests.contains(&digest), "{step:?}");
            digests.push(digest);
        }
    }
}
