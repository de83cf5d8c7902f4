//! The tool loop of an agent socket: a reply that asks for tool calls records them
//! (`agent_replied` with its `tool_calls`, then one `tool_called` each, durable before any runs),
//! the shell runs the first without an outcome (`Next::RunTool`) and feeds back its result
//! (`tool_finished`), and when every call of the reply has an outcome the next turn's prompt,
//! which shows the calls and their results, is dispatched.
//!
//! The calls of one visit are bounded by `limits.maxToolCalls` (an allowance: the cast fails
//! with `allowance_exhausted`, and revive grants as many again). A call cut off by a crash (a
//! `tool_called` with no outcome when the cast is resumed) is run again only if its tool cannot
//! change anything ([`is_read_only`]); any other gets `tool_interrupted`, and the prompt tells
//! the agent its effect is unknown.

use super::decide::{Decider, Rejection};
use super::{Phase, ToolOutcome};
use crate::event::{
    Allowance, AllowanceExhausted, ToolCalled, ToolFinished, ToolInterrupted, ToolRequest, Usage,
    is_read_only,
};
use crate::loadout::DEFAULT_MAX_TOOL_CALLS;

impl Decider<'_, '_> {
    /// A reply that asks for tool calls. Calls without an id, or with one this visit already
    /// used, are named `call-N` (N counting the visit's calls), so every call of a visit has
    /// its own id.
    pub fn on_tool_reply(&mut self, text: String, usage: Option<Usage>, calls: &[ToolRequest]) {
        let Some(current) = self.state.current.clone() else {
            return;
        };
        let mut named: Vec<ToolRequest> = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            let taken = |id: &str| {
                current.tool_calls.iter().any(|t| t.request.call == id)
                    || named.iter().any(|n| n.call == id)
            };
            let mut request = call.clone();
            if request.call.trim().is_empty() || taken(&request.call) {
                request.call = format!("call-{}", current.tool_calls.len() + i + 1);
                let mut n = current.tool_calls.len() + calls.len();
                while taken(&request.call) {
                    n += 1;
                    request.call = format!("call-{n}");
                }
            }
            named.push(request);
        }
        let cost = self.reply_cost(&current.socket, usage.as_ref());
        self.emit(crate::event::AgentReplied {
            socket: current.socket.clone(),
            visit: current.visit,
            turn: current.turn,
            text,
            usage,
            tool_calls: named,
            cost,
        });
        if self.over_budget() {
            return;
        }
        self.call_tools();
    }

    /// Records the calls the last reply asked for, unless they take the visit past its
    /// tool-call allowance.
    pub(super) fn call_tools(&mut self) {
        let Some(current) = self.state.current.clone() else {
            return;
        };
        let allowance = Allowance::ToolCalls {
            socket: current.socket.clone(),
            item: current.item.clone(),
            visit: current.visit,
        };
        let configured = self
            .state
            .loadout
            .max_tool_calls
            .unwrap_or(DEFAULT_MAX_TOOL_CALLS);
        let limit = self.state.limit(&allowance, u64::from(configured));
        let count = (current.tool_calls.len() + current.requested_calls.len()) as u64;
        if count > limit {
            self.emit(AllowanceExhausted {
                allowance: allowance.clone(),
                count,
                limit,
            });
            self.fail(
                format!(
                    "{} asked for {count} tool calls in visit {}, more than the {limit} allowed (limits.maxToolCalls); revive to allow more",
                    current.socket, current.visit
                ),
                Some(current.socket),
                Some(allowance),
            );
            return;
        }
        for request in current.requested_calls {
            self.emit(ToolCalled {
                call: request.call,
                tool: request.tool,
                arguments: request.arguments,
                socket: current.socket.clone(),
                visit: current.visit,
                turn: current.turn,
            });
        }
    }

    /// The outcome of the call `Next::RunTool` named.
    #[allow(clippy::too_many_arguments)]
    pub fn tool_finished(
        &mut self,
        call: &str,
        output: &str,
        exit: Option<i32>,
        error: bool,
        truncated: bool,
        duration_ms: u64,
    ) -> Result<(), Rejection> {
        let pending = self.pending_call();
        if pending.as_ref().map(|p| p.call.as_str()) != Some(call) {
            return Err(Rejection::NotNow {
                cast: self.state.cast.clone(),
                input: "a tool result",
                reason: match pending {
                    Some(p) => format!("the call that runs is {:?}, not {call:?}", p.call),
                    None => "no tool call is running".into(),
                },
            });
        }
        let result = self.blob(output.as_bytes().to_vec());
        self.emit(ToolFinished {
            call: call.to_owned(),
            result,
            output: output.to_owned(),
            exit,
            error,
            truncated,
            duration_ms,
        });
        self.after_tool();
        Ok(())
    }

    /// A resume (or revive) of a visit whose calls were cut off: the first call without an
    /// outcome is the one that may have run; unless its tool changes nothing it is not run
    /// again but recorded as interrupted.
    pub(super) fn recover_tools(&mut self) {
        let Some(pending) = self.pending_call() else {
            self.after_tool();
            return;
        };
        if !is_read_only(&pending.tool) {
            self.emit(ToolInterrupted {
                call: pending.call,
                tool: pending.tool,
            });
        }
        self.after_tool();
    }

    /// When every call has an outcome, the agent is asked again with the results.
    fn after_tool(&mut self) {
        if self.pending_call().is_some() {
            return;
        }
        let Some(current) = self.state.current.clone() else {
            return;
        };
        if current.phase == Phase::RunningTools {
            self.dispatch(current.turn.next(), false);
        }
    }

    /// The first call of the visit without an outcome.
    fn pending_call(&self) -> Option<ToolRequest> {
        self.state.current.as_ref().and_then(|c| {
            c.tool_calls
                .iter()
                .find(|t| t.outcome.is_none())
                .map(|t| t.request.clone())
        })
    }
}

impl ToolOutcome {
    /// The text the agent is shown for a call of `tool` with this outcome.
    pub fn shown(&self, call: &str, tool: &str) -> String {
        match self {
            ToolOutcome::Finished { output, error } => {
                let kind = if *error { "error" } else { "result" };
                format!("Tool {kind} of {call} ({tool}):\n{output}")
            }
            ToolOutcome::Interrupted => format!(
                "Tool call {call} ({tool}) was interrupted before its outcome was recorded: its effect is unknown. Check the files it may have changed before relying on it or calling it again."
            ),
        }
    }
}
