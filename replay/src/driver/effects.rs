//! Effect execution: what the driver does for each [`Next`](castlog_core::machine::Next) that
//! reaches outside the machine (ask the agent, ask the person, run a utility), turning the
//! outcome into the input fed back. Each returns `Break(Stop)` when the drive stops there (the
//! agent has no more to say, a person must answer) and `Continue` when the loop goes on.
//! Post sockets have their own module (`post`), for the claim-before-send order.

use std::ops::ControlFlow;

use castlog_core::id::SocketId;
use castlog_core::input::Input;
use castlog_core::loadout::{SocketKind, UtilitySpec};
use castlog_core::machine::Status;
use castlog_core::prompt::Message;
use castlog_events::EventLog;

use super::{DriveError, Driver, Notice, Stop, Wanted};
use crate::agent::{Agent, AgentTurn, TurnRequest};
use crate::utility;

impl<L: EventLog + ?Sized> Driver<'_, L> {
    pub(super) fn wait_notice(&mut self) {
        // Borrowed, not copied: this runs before every agent and utility call.
        let (Some(observer), Some(current)) = (self.observer.as_mut(), self.state.current.as_ref())
        else {
            return;
        };
        let label = self
            .state
            .loadout
            .socket(&current.socket)
            .map_or("", |s| s.label.as_str());
        observer(Notice::Waiting {
            socket: &current.socket,
            label,
            item: current.item_label.as_deref(),
            attempt: current.attempt,
            turn: current.turn.get(),
        });
    }

    fn prompt(&mut self) -> Result<Vec<Message>, DriveError> {
        let Some(hash) = self.state.current.as_ref().and_then(|c| c.prompt) else {
            return Ok(Vec::new());
        };
        // The prompt this driver just dispatched is at hand; a prompt dispatched by an earlier
        // process (resume) is read back from its blob.
        // Taken, not cloned: a later call for the same prompt (after a transient failure)
        // rebuilds it from the log.
        if let Some((rendered, messages)) = self.last_prompt.take()
            && rendered == hash
        {
            return Ok(messages);
        }
        // What is read back must be durable first (only this driver's steps are not yet).
        self.settle(0)?;
        let placements = self
            .state
            .current
            .as_ref()
            .map(|c| c.placements.as_slice())
            .unwrap_or_default();
        let policy = self.state.placement_policy();
        castlog_projections::prompt::messages(self.log, policy, &hash, placements).map_err(
            |source| DriveError::Prompt {
                cast: self.state.cast.clone(),
                source,
            },
        )
    }

    /// The handoff contract of the socket in flight as a JSON Schema, when it parses JSON and
    /// the cast has not had structured output refused.
    fn contract_schema(&self) -> Option<serde_json::Value> {
        if self.state.structured_off {
            return None;
        }
        let socket = self.state.current_socket()?;
        (socket.is_agent() && socket.parse == castlog_core::loadout::Parse::Json)
            .then(|| castlog_core::handoff::contract_schema(socket, self.state.conformance))
    }

    /// Runs a utility socket's program and records what it did; a program's output cannot be
    /// asked again, so its step is durable at once.
    pub(super) fn run_utility(&mut self, spec: &UtilitySpec) -> Result<(), DriveError> {
        self.wait_notice();
        let base = self.base_dir();
        let cwd = self.scope_dir().unwrap_or_else(|| self.cwd.clone());
        let input = utility::input(&self.state, &cwd, &base);
        // A shipped script is checked before it runs: not the one the cast recorded, it is
        // refused with nothing recorded.
        let socket = self.state.current.as_ref().map(|c| c.socket.clone());
        let shipped = match &socket {
            Some(socket) => {
                utility::shipped::ready(socket, spec, &self.launcher).map_err(|source| {
                    DriveError::Shipped {
                        cast: self.state.cast.clone(),
                        source: Box::new(source),
                    }
                })?
            }
            None => None,
        };
        let done = match shipped {
            Some(argv) => {
                let resolved = UtilitySpec {
                    exec: castlog_core::loadout::Exec::Command { argv },
                    ..spec.clone()
                };
                utility::run(&resolved, &input, &cwd, &self.launcher)
            }
            None => utility::run(spec, &input, &cwd, &self.launcher),
        };
        self.record(
            &Input::UtilityFinished {
                code: done.code,
                timed_out: done.timed_out,
                stdout: done.stdout,
                stderr: done.stderr,
                truncated: done.truncated,
            },
            false,
        )
    }

    /// Sends the prompt in flight to the agent and records its answer (`local`: the step may
    /// be durable later, see [`Driver::drive`]).
    pub(super) fn ask_agent(
        &mut self,
        agent: &mut dyn Agent,
        socket: &SocketId,
        local: bool,
    ) -> Result<ControlFlow<Stop>, DriveError> {
        let messages = self.prompt()?;
        self.wait_notice();
        let spec = match self.state.current_socket().map(|s| &s.kind) {
            Some(SocketKind::Agent(a)) => Some(a),
            _ => None,
        };
        let tools = self.offered_tools();
        let cwd = self.scope_dir();
        let schema = agent
            .wants_schema()
            .then(|| self.contract_schema())
            .flatten();
        let turn = agent.turn(&TurnRequest {
            messages: &messages,
            refinement: false,
            model: spec.and_then(|a| a.model.as_deref()),
            thinking: spec.and_then(|a| a.thinking.as_deref()),
            tools: &tools,
            cwd: cwd.as_deref(),
            schema: schema.as_ref(),
        });
        match turn {
            AgentTurn::Reply { text, usage } => {
                self.record(&Input::AgentReplied { text, usage }, local)?;
            }
            AgentTurn::ToolCalls { text, usage, calls } => {
                self.record(&Input::AgentCalledTools { text, usage, calls }, local)?;
            }
            // After an interruption the next `Next` is `AwaitResume`.
            AgentTurn::Failed { class, message } => {
                self.record(&Input::AgentFailed { class, message }, local)?;
            }
            // Recorded before the prompt is asked again, now without the response format.
            AgentTurn::StructuredRefused { message } => {
                self.record(&Input::StructuredOutputRefused { message }, local)?;
            }
            AgentTurn::Exhausted(message) => {
                return Ok(ControlFlow::Break(Stop {
                    status: Status::AwaitingAgent,
                    message: Some(message),
                }));
            }
            AgentTurn::Refine(_) | AgentTurn::Continue => {
                return Err(self.wrong_answer(agent, socket, Wanted::AgentReply));
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Asks for a person's refinement or `continue` at a multi-turn pause: a queued one (kept
    /// by a recast) first, then the agent (a script may hold the person's lines).
    pub(super) fn ask_person(
        &mut self,
        agent: &mut dyn Agent,
        socket: &SocketId,
        local: bool,
    ) -> Result<ControlFlow<Stop>, DriveError> {
        if let Some(input) = self.queued.pop_front() {
            self.record(&input, local)?;
            return Ok(ControlFlow::Continue(()));
        }
        let turn = agent.turn(&TurnRequest {
            messages: &[],
            refinement: true,
            model: None,
            thinking: None,
            tools: &[],
            cwd: None,
            schema: None,
        });
        let origin = agent.origin();
        match turn {
            AgentTurn::Refine(text) => self.record(&Input::UserRefined { text, origin }, local)?,
            AgentTurn::Continue => self.record(&Input::Continue { origin }, local)?,
            AgentTurn::Exhausted(_) => {
                return Ok(ControlFlow::Break(Stop {
                    status: Status::AwaitingRefinement,
                    message: Some(format!(
                        "{socket} waits for you: `castlog refine {cast} TEXT` to answer, `castlog continue {cast}` to finalize",
                        cast = self.state.cast
                    )),
                }));
            }
            AgentTurn::Reply { .. }
            | AgentTurn::ToolCalls { .. }
            | AgentTurn::Failed { .. }
            | AgentTurn::StructuredRefused { .. } => {
                return Err(self.wrong_answer(agent, socket, Wanted::PersonInput));
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// The error of an answer of the wrong kind, naming the script line it came from (or the
    /// answer's number, for an agent that is not a script).
    fn wrong_answer(&self, agent: &dyn Agent, socket: &SocketId, wanted: Wanted) -> DriveError {
        DriveError::WrongAnswer {
            cast: self.state.cast.clone(),
            socket: socket.clone(),
            at: agent
                .last_answer_at()
                .unwrap_or_else(|| format!("answer {}", self.answers_used + 1)),
            wanted,
        }
    }
}
