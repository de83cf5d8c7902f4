//! The `Agent` port and its adapters: scripted (JSONL transcript) and command (`cmd:`).
//!
//! An agent is asked for one thing at a time: the reply to the prompt in flight, or, when a
//! multi-turn socket is paused, what the person says next. Whatever it answers is fed to the
//! machine as an input and recorded; nothing an agent says becomes state any other way.
//!
//! # Agent SPEC
//! - `scripted:FILE`: JSONL, one line per answer: `{"reply": TEXT, "usage"?: {"input", "output"}}`,
//!   `{"error": "transient"|"interruption", "message": TEXT}`, `{"user": TEXT}`,
//!   `{"continue": true}`. Lines are consumed in order across runs of the same cast: the log
//!   says how many were used (replies and failures, plus refinements and continues recorded with
//!   origin `script`).
//! - `cmd:PROGRAM ARGS…`: spawned without a shell; the prompt on stdin, flattened to text (see
//!   [`flatten`]) or, with `--agent-format json`, as JSON messages; the reply is stdout; a
//!   non-zero exit or a timeout is an interruption carrying stderr, and so is a reply longer
//!   than [`process::OUTPUT_CAP`] (1 MiB), never cut silently. At the timeout the program and
//!   every process it started are killed (see [`process`]).

use castlog_core::event::{FailureClass, Usage};
use castlog_core::prompt::Message;

mod command;
mod scripted;

pub use command::{CommandAgent, command_argv};
use scripted::ScriptLine;
pub use scripted::ScriptedAgent;

/// What the driver asks an agent.
#[derive(Debug, Clone, Copy)]
pub struct TurnRequest<'a> {
    /// The prompt as rendered for this turn, system fold first.
    pub messages: &'a [Message],
    /// True when a multi-turn socket is paused and the person's next move is wanted.
    pub refinement: bool,
    /// The materia's `model`, where the config gives one.
    pub model: Option<&'a str>,
    /// The materia's `thinking` level, where the config gives one.
    pub thinking: Option<&'a str>,
    /// The tools the materia's scope offers (empty: none; the agent answers in text).
    pub tools: &'a [&'static str],
    /// The directory of the cast's execution scope, when a utility activated one: a `cmd:`
    /// agent's program runs there (`None`: where the agent was set up to run).
    pub cwd: Option<&'a std::path::Path>,
    /// The handoff contract as a JSON Schema, for a JSON socket while the cast has structured
    /// output (an agent that can, sends it as a response format: `--structured`); `None`
    /// otherwise.
    pub schema: Option<&'a serde_json::Value>,
}

/// What an agent answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentTurn {
    /// A reply to the prompt.
    Reply {
        /// What the agent replied, verbatim; the driver records it as it is.
        text: String,
        /// Tokens the agent reported; `None` when it reported none.
        usage: Option<Usage>,
    },
    /// A reply that asks for tool calls (and may carry some text): the calls run, and the
    /// agent is asked again with their results.
    ToolCalls {
        /// The text that came with the calls (often empty).
        text: String,
        /// Reported tokens.
        usage: Option<Usage>,
        /// The calls, in order.
        calls: Vec<castlog_core::event::ToolRequest>,
    },
    /// No reply this time; the class says whether the driver retries.
    Failed {
        /// Transient or interruption.
        class: FailureClass,
        /// What the agent's adapter said, recorded in `agent_failed`.
        message: String,
    },
    /// The server refused the handoff contract sent as a response format (`--structured
    /// auto`): the driver records it and asks again without one, for the rest of the cast.
    StructuredRefused {
        /// What the server answered, recorded in `agent_failed`.
        message: String,
    },
    /// The person's refinement message (scripted only).
    Refine(String),
    /// The person's `continue` (scripted only).
    Continue,
    /// The agent has nothing more to say (a script ran out, no person at hand).
    Exhausted(String),
}

/// Something that answers prompts.
pub trait Agent {
    /// Answers one prompt; never panics, a failure is an answer too.
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn;

    /// The origin recorded with refinements and continues this agent supplies.
    fn origin(&self) -> Option<String> {
        None
    }

    /// True when a turn has no effect outside this process (a script, a recording, a function
    /// of the prompt): the driver may then ask it while the dispatch of the prompt is committed
    /// but not yet fsynced, and commit its answer before that fsync returns (see
    /// [`crate::driver::Driver::drive`]). False (the default) for anything that reaches a
    /// model, a program or the network.
    fn local(&self) -> bool {
        false
    }

    /// Attempts a prompt gets while this agent fails transiently, the first included: the
    /// driver stops after that many transient failures in a row and leaves the cast to
    /// `resume`.
    fn attempts(&self) -> u32 {
        crate::retry::DEFAULT_ATTEMPTS
    }

    /// Ends a call in progress (and any wait before one) soon after `flag` is set, answering
    /// an interruption: Ctrl-C must not wait for a slow model or program. The default keeps
    /// no flag (a script answers at once).
    fn cancel_on(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        drop(flag);
    }

    /// Whether this agent sends the handoff contract on (a response format): only then does
    /// the driver build it for [`TurnRequest::schema`]. False by default.
    fn wants_schema(&self) -> bool {
        false
    }

    /// Whether the driver may run the tool calls this agent asks for. False for an agent
    /// that answers from a recording: a replay never runs a tool.
    fn runs_tools(&self) -> bool {
        true
    }

    /// The recorded outcome of a tool call, for an agent that answers from a recording: the
    /// driver records it instead of running the tool. `None` (the default): no recording.
    fn recorded_tool(
        &mut self,
        call: &str,
        tool: &str,
        arguments: &serde_json::Value,
    ) -> Option<castlog_core::input::Input> {
        let _ = (call, tool, arguments);
        None
    }

    /// Where the answer given last came from, for a message about it (`line 4 of FILE` for a
    /// script); `None` for an agent with nothing to point at.
    fn last_answer_at(&self) -> Option<String> {
        None
    }
}

/// The interruption an agent answers when its call was cancelled (Ctrl-C).
pub const CANCELLED: &str = "the agent call was cancelled (Ctrl-C)";

/// Asks an agent one single-message prompt outside any cast (the engagement runner's roles, a
/// scorecard's judge): the reply, or why there is none.
pub fn ask(agent: &mut dyn Agent, prompt: String) -> Result<String, AskError> {
    let messages = [Message {
        role: castlog_core::prompt::Role::User,
        content: prompt,
        tool_call: None,
    }];
    match agent.turn(&TurnRequest {
        messages: &messages,
        refinement: false,
        model: None,
        thinking: None,
        tools: &[],
        cwd: None,
        schema: None,
    }) {
        AgentTurn::Reply { text, .. } => Ok(text),
        AgentTurn::ToolCalls { .. } => Err(AskError::ToolCalls),
        AgentTurn::Failed { class, message } => Err(AskError::Failed { class, message }),
        // No schema was sent, so none can be refused; said as the failure it is if it was.
        AgentTurn::StructuredRefused { message } => Err(AskError::Failed {
            class: FailureClass::Interruption,
            message,
        }),
        AgentTurn::Exhausted(message) => Err(AskError::Exhausted(message)),
        AgentTurn::Refine(_) | AgentTurn::Continue => Err(AskError::NotAReply),
    }
}

/// Why [`ask`] has no reply. The agent's own words are data here (what its adapter or script
/// said), not an error below this one, so there is no source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AskError {
    /// The agent failed to answer.
    #[error("{message}")]
    Failed {
        /// Transient or interruption.
        class: FailureClass,
        /// What the agent's adapter said.
        message: String,
    },
    /// The agent has nothing more to say (a script ran out, no person at hand).
    #[error("{0}")]
    Exhausted(String),
    /// The agent answered with a person's move (a script's refinement or `continue` line).
    #[error("{NOT_A_REPLY}")]
    NotAReply,
    /// The agent asked for tool calls, which a single question outside a cast does not run.
    #[error("{TOOL_CALLS}")]
    ToolCalls,
}

const NOT_A_REPLY: &str = "the agent answered with a person's message, not a reply";
const TOOL_CALLS: &str = "the agent answered with tool calls, which this question does not run";

impl AskError {
    /// What the message says, borrowed (the pipeline's readers record it as a detail).
    pub fn message(&self) -> &str {
        match self {
            AskError::Failed { message, .. } | AskError::Exhausted(message) => message,
            AskError::NotAReply => NOT_A_REPLY,
            AskError::ToolCalls => TOOL_CALLS,
        }
    }
}

/// A bad agent SPEC or script.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The SPEC is not understood.
    #[error("unknown agent spec {spec:?}: use scripted:FILE or cmd:PROGRAM ARGS...")]
    UnknownSpec {
        /// The `--agent` value as given.
        spec: String,
    },
    /// The script cannot be read.
    #[error("cannot read agent script {path}: {source}")]
    Unreadable {
        /// Script path as given.
        path: String,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// A script given to a cast under way is not the one that answered it so far: one of
    /// the lines it would skip differs from the answer the log holds.
    #[error(
        "agent script {path} is not the script cast {cast} was driven with: its line {line} is {found}, but the answer it stands for (seq {seq}) was {recorded}; give the script the cast was driven with (lines may be added after the used ones), or give this one to a new cast: `castlog run`, or `castlog recast {cast} --at SEQ --agent scripted:{path}` to keep the history up to SEQ (the recast reads it from its first line)"
    )]
    ScriptChanged {
        /// Script path as given.
        path: String,
        /// Cast being resumed.
        cast: String,
        /// 1-based line of the script.
        line: usize,
        /// Seq of the answer the log holds for that line.
        seq: u64,
        /// The recorded answer, described.
        recorded: String,
        /// The script's line, described.
        found: String,
    },
    /// A script line is malformed.
    #[error("agent script {path} line {line}: {message}")]
    BadLine {
        /// Script path as given.
        path: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Flattens messages into the documented plain text for command agents:
/// each message as `### ROLE` on its own line, a blank line, the content, a blank line. A
/// content line that reads like a separator gets one more leading backslash
/// (`castlog_core::prompt::fence::role_separators`), so the only `### ROLE` lines are the
/// separators, whatever a model or a person wrote.
pub fn flatten(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str("### ");
        out.push_str(m.role.as_str());
        out.push_str("\n\n");
        out.push_str(&castlog_core::prompt::fence::role_separators(&m.content));
        out.push_str("\n\n");
    }
    out
}

mod consumed;
#[cfg(test)]
mod script_properties;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::scripted::parse_script;
    use super::*;
    use crate::process;

    #[test]
    fn script_lines_parse_and_name_bad_lines() {
        let ok = parse_script(
            "{\"reply\":\"a\",\"usage\":{\"input\":3,\"output\":4}}\n\n{\"error\":\"transient\",\"message\":\"m\"}\n{\"user\":\"u\"}\n{\"continue\":true}\n",
            "s",
        )
        .unwrap();
        assert_eq!(ok.len(), 4);
        assert_eq!(ok[1].0, 3);
        let err = parse_script("{\"reply\":\"a\"}\n{\"nope\":1}\n", "s").unwrap_err();
        assert!(matches!(err, AgentError::BadLine { line: 2, .. }));
        assert!(parse_script("not json", "s").is_err());
        assert!(parse_script("{\"error\":\"weird\"}", "s").is_err());
        let err = parse_script("{\"continue\":false}", "s").unwrap_err();
        assert!(err.to_string().contains("must be true"), "{err}");
    }

    /// Asked what the person says at a pause, a script whose next line is the agent's answer
    /// says nothing (the cast waits for the person) and keeps that line for the agent's turn.
    #[test]
    fn a_script_keeps_an_agent_answer_asked_for_at_a_pause() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "{\"reply\":\"a\"}\n{\"continue\":true}\n").unwrap();
        let mut agent = ScriptedAgent::open(&path, 0).unwrap();
        let ask = |refinement| TurnRequest {
            messages: &[],
            refinement,
            model: None,
            thinking: None,
            tools: &[],
            cwd: None,
            schema: None,
        };
        let paused = agent.turn(&ask(true));
        assert!(
            matches!(&paused, AgentTurn::Exhausted(m) if m.contains("line 1")),
            "{paused:?}"
        );
        assert!(matches!(agent.turn(&ask(false)), AgentTurn::Reply { text, .. } if text == "a"));
        assert!(matches!(agent.turn(&ask(true)), AgentTurn::Continue));
    }

    /// A program that answers and exits, leaving a background job that holds its stdout, is
    /// answered at once (after a short grace), not timed out.
    #[test]
    fn a_command_agent_that_leaves_a_background_job_is_answered() {
        let dir = tempfile::tempdir().unwrap();
        let mut agent = CommandAgent::new(
            vec![
                "sh".into(),
                "-c".into(),
                "cat >/dev/null; echo hello; sleep 30 &".into(),
            ],
            dir.path().to_path_buf(),
            Duration::from_secs(20),
        );
        let started = std::time::Instant::now();
        let turn = agent.turn(&TurnRequest {
            messages: &[],
            refinement: false,
            model: None,
            thinking: None,
            tools: &[],
            cwd: None,
            schema: None,
        });
        assert!(
            matches!(&turn, AgentTurn::Reply { text, .. } if text == "hello\n"),
            "{turn:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    /// A reply longer than the cap is an interruption naming the limit, never a cut reply.
    #[test]
    fn a_reply_past_the_output_cap_is_an_interruption() {
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "cat >/dev/null; head -c {} /dev/zero | tr '\\0' a",
            process::OUTPUT_CAP + 10
        );
        let mut agent = CommandAgent::new(
            vec!["sh".into(), "-c".into(), script],
            dir.path().to_path_buf(),
            Duration::from_secs(30),
        );
        let turn = agent.turn(&TurnRequest {
            messages: &[],
            refinement: false,
            model: None,
            thinking: None,
            tools: &[],
            cwd: None,
            schema: None,
        });
        let AgentTurn::Failed { class, message } = turn else {
            panic!("an over-long reply is a failure: {turn:?}");
        };
        assert_eq!(class, FailureClass::Interruption);
        assert!(message.contains("limit for a reply"), "{message}");
    }

    // A shell script's `sleep` is a grandchild holding stdout open: the timeout must stop it too.
    #[test]
    fn a_command_agent_times_out_with_the_children_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let mut agent = CommandAgent::new(
            vec!["sh".into(), "-c".into(), "sleep 30; echo late".into()],
            dir.path().to_path_buf(),
            Duration::from_secs(1),
        );
        let messages = [Message {
            role: castlog_core::prompt::Role::User,
            content: "hello".into(),
            tool_call: None,
        }];
        let request = TurnRequest {
            messages: &messages,
            refinement: false,
            model: None,
            thinking: None,
            tools: &[],
            cwd: None,
            schema: None,
        };
        let started = std::time::Instant::now();
        let turn = agent.turn(&request);
        let took = started.elapsed();
        let AgentTurn::Failed { class, message } = turn else {
            panic!("a timeout is a failure: {turn:?}");
        };
        assert_eq!(class, FailureClass::Interruption);
        assert!(message.contains("timed out after 1s"), "{message}");
        assert!(took < Duration::from_secs(10), "took {took:?}");
    }
}
