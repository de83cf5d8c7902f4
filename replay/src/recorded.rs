//! The `recorded:CAST` agent (a cassette): answers from another cast's recorded replies, so a
//! re-run or a recast can go through the unchanged part of a cast offline.
//!
//! # Indexing
//! The source cast's full history (a recast's parent prefix included, see
//! [`crate::recast::history`]) is read once. Every `agent_replied` and `agent_failed` is the
//! answer to the latest `prompt_dispatched` of the same socket, visit and turn, and is filed
//! under that dispatch's `prompt_hash` in log order. A request is looked up by the hash of its
//! messages, computed as the machine does (`blob_hash(messages_json(messages))`), and by
//! occurrence: the k-th time a prompt is asked gets the k-th answer recorded for it, so a
//! repeated identical prompt gets its own answer, and a recorded transient failure followed by
//! a reply is played back as both (each attempt is an answer).
//!
//! A refinement request (a multi-turn socket waiting for a person) is answered by the
//! `user_refined` or `finalize_requested` that followed the last reply played back, with its
//! recorded origin, so a re-run reproduces the source's events.
//!
//! # Misses
//! A prompt with no answer left is [`AgentTurn::Exhausted`] naming the prompt hash, or goes to
//! the fallback agent ([`RecordedAgent::with_fallback`]) when one is set.
//!
//! # Resuming
//! A new process driving a cast that already has answers calls
//! [`RecordedAgent::skip_answered`] with that cast, so occurrences it already consumed (in its
//! own history, a recast's parent prefix included) are not played again.

use std::collections::HashMap;
use std::fmt;

use castlog_core::event::{Event, FailureClass, Usage};
use castlog_core::id::{CastId, Digest, SocketId, Turn, Visit};
use castlog_core::input::Input;
use castlog_core::prompt::messages_json;
use castlog_events::chain::blob_hash;
use castlog_events::{EventLog, Recorded};

use crate::agent::{Agent, AgentTurn, TurnRequest};
use crate::driver::DriveError;
use crate::recast::history;

/// The event kinds the index reads.
const KINDS: [&str; 7] = [
    "prompt_dispatched",
    "agent_replied",
    "agent_failed",
    "user_refined",
    "finalize_requested",
    "tool_called",
    "tool_finished",
];

/// A recorded call: its id, tool and arguments (compact JSON).
type CallKey = (String, String, String);

/// What a person said after a reply (played back when the driver asks for a refinement).
#[derive(Debug, Clone, PartialEq, Eq)]
enum FollowUp {
    Refine(String, Option<String>),
    Continue(Option<String>),
}

/// One recorded answer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Reply {
        text: String,
        usage: Option<Usage>,
        /// The tool calls the reply asked for (none for a reply that is an output).
        calls: Vec<castlog_core::event::ToolRequest>,
        follow_up: Option<FollowUp>,
    },
    Failed {
        class: FailureClass,
        message: String,
        /// The server refused the response format (`--structured auto`).
        structured_off: bool,
    },
}

/// Answers by prompt hash, in log order, and the last one.
#[derive(Debug, Default)]
struct Index {
    answers: HashMap<Digest, Vec<Answer>>,
    last: Option<(Digest, usize)>,
    /// The recorded outcomes of tool calls, in log order per call, played back instead of
    /// running the tool.
    tools: HashMap<CallKey, std::collections::VecDeque<Input>>,
}

impl Index {
    fn of(records: &[Recorded]) -> Result<Self, DriveError> {
        let mut index = Index::default();
        let mut dispatched: HashMap<(SocketId, Visit, Turn), Digest> = HashMap::new();
        // The last reply, while a person's answer to it may still follow.
        let mut open: Option<(SocketId, Visit, Digest, usize)> = None;
        let mut called: HashMap<String, CallKey> = HashMap::new();
        for record in records {
            if !KINDS.contains(&record.kind.as_str()) {
                continue;
            }
            let event = record.event().map_err(|e| DriveError::Fold {
                cast: record.cast.clone(),
                seq: record.seq,
                cause: e.into(),
            })?;
            match event {
                Event::PromptDispatched(e) => {
                    dispatched.insert((e.socket, e.visit, e.turn), e.prompt_hash);
                    open = None;
                }
                Event::AgentReplied(e) => {
                    if let Some(hash) = dispatched.get(&(e.socket.clone(), e.visit, e.turn)) {
                        let at = index.push(
                            *hash,
                            Answer::Reply {
                                text: e.text,
                                usage: e.usage,
                                calls: e.tool_calls,
                                follow_up: None,
                            },
                        );
                        open = Some((e.socket, e.visit, *hash, at));
                    }
                }
                Event::AgentFailed(e) => {
                    if let Some(hash) = dispatched.get(&(e.socket, e.visit, e.turn)) {
                        index.push(
                            *hash,
                            Answer::Failed {
                                class: e.class,
                                message: e.message,
                                structured_off: e.structured_off,
                            },
                        );
                    }
                    open = None;
                }
                Event::UserRefined(e) => {
                    index.follow(&mut open, &e.socket, e.visit, || {
                        FollowUp::Refine(e.text.clone(), e.origin.clone())
                    });
                }
                Event::FinalizeRequested(e) => {
                    index.follow(&mut open, &e.socket, e.visit, || {
                        FollowUp::Continue(e.origin.clone())
                    });
                }
                Event::ToolCalled(e) => {
                    let key = (e.call.clone(), e.tool, e.arguments.to_string());
                    called.insert(e.call, key);
                }
                Event::ToolFinished(e) => {
                    if let Some(key) = called.remove(&e.call) {
                        index
                            .tools
                            .entry(key)
                            .or_default()
                            .push_back(Input::ToolFinished {
                                call: e.call,
                                output: e.output,
                                exit: e.exit,
                                error: e.error,
                                truncated: e.truncated,
                                duration_ms: e.duration_ms,
                            });
                    }
                }
                _ => {}
            }
        }
        Ok(index)
    }

    fn push(&mut self, hash: Digest, answer: Answer) -> usize {
        let list = self.answers.entry(hash).or_default();
        list.push(answer);
        let at = list.len() - 1;
        self.last = Some((hash, at));
        at
    }

    fn follow(
        &mut self,
        open: &mut Option<(SocketId, Visit, Digest, usize)>,
        socket: &SocketId,
        visit: Visit,
        make: impl FnOnce() -> FollowUp,
    ) {
        let Some((s, v, hash, at)) = open.take() else {
            return;
        };
        if &s != socket || v != visit {
            return;
        }
        if let Some(Answer::Reply { follow_up, .. }) =
            self.answers.get_mut(&hash).and_then(|l| l.get_mut(at))
        {
            *follow_up = Some(make());
        }
    }

    fn follow_up(&self, hash: &Digest, at: usize) -> Option<&FollowUp> {
        match self.answers.get(hash)?.get(at)? {
            Answer::Reply { follow_up, .. } => follow_up.as_ref(),
            Answer::Failed { .. } => None,
        }
    }
}

/// Who gave the last answer to a refinement request.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    None,
    Recorded(Option<String>),
    Fallback,
}

/// Answers from another cast's log; see the module documentation.
pub struct RecordedAgent {
    source: CastId,
    index: Index,
    /// Answers consumed per prompt hash (played back, or given by the fallback).
    cursor: HashMap<Digest, usize>,
    /// The recorded answer played back last, while its follow-up has not been played.
    last: Option<(Digest, usize)>,
    origin: Origin,
    fallback: Option<Box<dyn Agent>>,
}

impl fmt::Debug for RecordedAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordedAgent")
            .field("source", &self.source)
            .field("prompts", &self.index.answers.len())
            .field("answers", &self.recorded())
            .field("cursor", &self.cursor)
            .field("fallback", &self.fallback.is_some())
            .finish_non_exhaustive()
    }
}

impl RecordedAgent {
    /// Reads the answers recorded in `source` (its full history).
    pub fn from_log(log: &(impl EventLog + ?Sized), source: &CastId) -> Result<Self, DriveError> {
        let index = Index::of(&history(log, source)?)?;
        Ok(Self {
            source: source.clone(),
            index,
            cursor: HashMap::new(),
            last: None,
            origin: Origin::None,
            fallback: None,
        })
    }

    /// Sends misses to `fallback` (a live agent) instead of stopping.
    #[must_use]
    pub fn with_fallback(mut self, fallback: Box<dyn Agent>) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// Marks the answers `cast` already holds (its full history) as consumed, so driving it on
    /// continues where it stopped. Call it before driving an existing cast.
    pub fn skip_answered(
        &mut self,
        log: &(impl EventLog + ?Sized),
        cast: &CastId,
    ) -> Result<(), DriveError> {
        let done = Index::of(&history(log, cast)?)?;
        self.cursor = done
            .answers
            .iter()
            .map(|(hash, list)| (*hash, list.len()))
            .collect();
        // The follow-up of the cast's last reply is still due only when the cast has none.
        self.last = done
            .last
            .filter(|(hash, at)| done.follow_up(hash, *at).is_none());
        Ok(())
    }

    /// Cast whose recorded replies this agent answers with.
    pub fn source(&self) -> &CastId {
        &self.source
    }

    /// How many answers the source holds.
    pub fn recorded(&self) -> usize {
        self.index.answers.values().map(Vec::len).sum()
    }

    fn refinement(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        let follow_up = self
            .last
            .take()
            .and_then(|(hash, at)| self.index.follow_up(&hash, at).cloned());
        match follow_up {
            Some(FollowUp::Refine(text, origin)) => {
                self.origin = Origin::Recorded(origin);
                AgentTurn::Refine(text)
            }
            Some(FollowUp::Continue(origin)) => {
                self.origin = Origin::Recorded(origin);
                AgentTurn::Continue
            }
            None => match &mut self.fallback {
                Some(fallback) => {
                    self.origin = Origin::Fallback;
                    fallback.turn(request)
                }
                None => {
                    self.origin = Origin::None;
                    AgentTurn::Exhausted(format!(
                        "cast {} recorded no refinement here; use `castlog refine` or `castlog continue`",
                        self.source
                    ))
                }
            },
        }
    }
}

impl Agent for RecordedAgent {
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        if request.refinement {
            return self.refinement(request);
        }
        let hash = blob_hash(&messages_json(request.messages));
        let k = self.cursor.get(&hash).copied().unwrap_or(0);
        let recorded = self.index.answers.get(&hash);
        if let Some(answer) = recorded.and_then(|list| list.get(k)) {
            self.cursor.insert(hash, k + 1);
            return match answer {
                Answer::Reply {
                    text, usage, calls, ..
                } => {
                    self.last = Some((hash, k));
                    if calls.is_empty() {
                        AgentTurn::Reply {
                            text: text.clone(),
                            usage: *usage,
                        }
                    } else {
                        AgentTurn::ToolCalls {
                            text: text.clone(),
                            usage: *usage,
                            calls: calls.clone(),
                        }
                    }
                }
                Answer::Failed {
                    message,
                    structured_off: true,
                    ..
                } => {
                    self.last = None;
                    AgentTurn::StructuredRefused {
                        message: message.clone(),
                    }
                }
                Answer::Failed { class, message, .. } => {
                    self.last = None;
                    AgentTurn::Failed {
                        class: *class,
                        message: message.clone(),
                    }
                }
            };
        }
        self.last = None;
        if let Some(fallback) = &mut self.fallback {
            self.cursor.insert(hash, k + 1);
            return fallback.turn(request);
        }
        let held = recorded.map_or(0, Vec::len);
        AgentTurn::Exhausted(format!(
            "cast {} has no recorded answer for prompt {} (occurrence {} of this prompt; {} recorded); \
             the prompt differs from the recording or was asked more often: use a live agent to go on",
            self.source,
            hash.short(),
            k + 1,
            held
        ))
    }

    fn wants_schema(&self) -> bool {
        self.fallback.as_ref().is_some_and(|f| f.wants_schema())
    }

    fn origin(&self) -> Option<String> {
        match &self.origin {
            Origin::None => None,
            Origin::Recorded(origin) => origin.clone(),
            Origin::Fallback => self.fallback.as_ref().and_then(|f| f.origin()),
        }
    }

    fn local(&self) -> bool {
        self.fallback.as_ref().is_none_or(|f| f.local())
    }

    fn runs_tools(&self) -> bool {
        // Only a live fallback runs a call the recording has no outcome for.
        self.fallback.as_ref().is_some_and(|f| f.runs_tools())
    }

    fn recorded_tool(
        &mut self,
        call: &str,
        tool: &str,
        arguments: &serde_json::Value,
    ) -> Option<Input> {
        let key = (call.to_owned(), tool.to_owned(), arguments.to_string());
        self.index.tools.get_mut(&key)?.pop_front()
    }

    // A miss is asked of the fallback: its retry policy and cancellation are this agent's.
    fn attempts(&self) -> u32 {
        self.fallback
            .as_ref()
            .map_or(crate::retry::DEFAULT_ATTEMPTS, |f| f.attempts())
    }

    fn cancel_on(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        if let Some(fallback) = &mut self.fallback {
            fallback.cancel_on(flag);
        }
    }
}
