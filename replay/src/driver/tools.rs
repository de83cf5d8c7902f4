//! Tool calls: what the driver does for `Next::RunTool`. The call is already recorded
//! (`tool_called`, durable); the tool runs under the materia's scope in the cast's working
//! directory, and its result is recorded at once (`tool_finished`): durable before the cast goes
//! on for a call that can change something, whose effect cannot be asked for again; with the
//! next step for a read-only call, which `resume` may run again.

use std::ops::ControlFlow;
use std::time::Instant;

use castlog_core::event::is_read_only;
use castlog_core::id::SocketId;
use castlog_core::input::Input;
use castlog_core::loadout::SocketKind;
use castlog_events::EventLog;
use serde_json::Value;

use super::{DriveError, Driver, Stop};
use crate::agent::Agent;
use crate::tools::{self, Outcome, Scope, Workdir};

impl<L: EventLog + ?Sized> Driver<'_, L> {
    /// The scope of the current socket's materia (a value that does not read as one offers
    /// nothing; each call is then refused, naming why).
    fn scope(&self) -> Result<Scope, tools::ScopeError> {
        match self.state.current_socket() {
            Some(socket) if matches!(socket.kind, SocketKind::Agent(_)) => {
                Scope::parse(self.state.tool_scopes.get(&socket.materia))
            }
            _ => Ok(Scope::None),
        }
    }

    /// The tools the current socket's agent is offered.
    pub(super) fn offered_tools(&self) -> Vec<&'static str> {
        self.scope().map(|s| s.tools()).unwrap_or_default()
    }

    /// Runs the call the machine names and records its outcome. A call recorded by an
    /// earlier process that can change something is not run: the drive stops for `resume`,
    /// which records it as interrupted. An agent that answers from a recording runs no tool:
    /// it gives the recorded outcome, or the drive stops.
    pub(super) fn run_tool(
        &mut self,
        agent: &mut dyn Agent,
        socket: &SocketId,
        call: &str,
        tool: &str,
        arguments: &Value,
    ) -> Result<ControlFlow<Stop>, DriveError> {
        if !is_read_only(tool) && !self.calls_recorded.contains(call) {
            return Ok(ControlFlow::Break(Stop {
                status: self.state.status,
                message: Some(format!(
                    "tool call {call} ({tool}) at {socket} was cut off before its outcome was recorded; `castlog resume {} --agent SPEC` records it as interrupted (it is not run again) and goes on",
                    self.state.cast
                )),
            }));
        }
        // A recording answers with what the call did then; nothing runs.
        if let Some(recorded) = agent.recorded_tool(call, tool, arguments) {
            self.record(&recorded, false)?;
            return Ok(ControlFlow::Continue(()));
        }
        if !agent.runs_tools() {
            return Ok(ControlFlow::Break(Stop {
                status: self.state.status,
                message: Some(format!(
                    "tool call {call} ({tool}) at {socket} waits to run, and this agent runs no tools: `castlog resume {} --agent SPEC` with a live agent runs it",
                    self.state.cast
                )),
            }));
        }
        self.wait_notice();
        let started = Instant::now();
        let outcome = self.outcome(tool, arguments);
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        // A read-only call's outcome may become durable with the next step (one commit for
        // both): lost in a crash, `resume` runs the call again, which changes nothing. Any
        // other call's outcome is durable before the cast goes on.
        let pipelined = is_read_only(tool);
        self.record(
            &Input::ToolFinished {
                call: call.to_owned(),
                output: outcome.text,
                exit: outcome.exit,
                error: outcome.error,
                truncated: outcome.truncated,
                duration_ms,
            },
            pipelined,
        )?;
        Ok(ControlFlow::Continue(()))
    }

    fn outcome(&self, tool: &str, arguments: &Value) -> Outcome {
        let scope = match self.scope() {
            Ok(scope) => scope,
            Err(err) => return refused(err.to_string()),
        };
        let dir = self.scope_dir().unwrap_or_else(|| self.base_dir());
        match Workdir::open(&dir) {
            Ok(workdir) => tools::run(&scope, &workdir, &self.launcher, tool, arguments),
            Err(err) => refused(err.to_string()),
        }
    }
}

fn refused(text: String) -> Outcome {
    Outcome {
        text,
        error: true,
        exit: None,
        truncated: false,
    }
}
