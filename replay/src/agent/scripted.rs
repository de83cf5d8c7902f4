//! `scripted:FILE`: an agent that answers from a JSONL transcript, one line per answer (the
//! line shapes are in the [`super`] module's documentation).

use std::path::{Path, PathBuf};

use castlog_core::event::{FailureClass, Usage};

use super::{Agent, AgentError, AgentTurn, TurnRequest};

/// One line of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ScriptLine {
    Reply(String, Option<Usage>),
    /// Tool calls (with the text beside them, often empty).
    Calls(String, Option<Usage>, Vec<castlog_core::event::ToolRequest>),
    Error(FailureClass, String),
    User(String),
    Continue,
}

/// Answers from a JSONL transcript.
#[derive(Debug, Clone)]
pub struct ScriptedAgent {
    pub(super) path: PathBuf,
    pub(super) lines: Vec<(usize, ScriptLine)>,
    pub(super) next: usize,
    attempts: u32,
    /// The file line of the answer given last.
    last: Option<usize>,
}

impl ScriptedAgent {
    /// Reads a script and skips the first `consumed` lines (already answered in the log).
    /// Lines that name a lane (`"lane": NAME`) are left out: they are that lane's.
    pub fn open(path: &Path, consumed: usize) -> Result<Self, AgentError> {
        Self::open_for(path, None, consumed)
    }

    /// The script of the parallel lane `lane`: only the lines that name it (`"lane": NAME`),
    /// the first `consumed` of them skipped. Each lane answers from its own lines, so the
    /// answers do not depend on the order the lanes run in.
    pub fn open_lane(path: &Path, lane: &str, consumed: usize) -> Result<Self, AgentError> {
        Self::open_for(path, Some(lane), consumed)
    }

    fn open_for(path: &Path, lane: Option<&str>, consumed: usize) -> Result<Self, AgentError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| AgentError::Unreadable {
            path: shown.clone(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let before = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            AgentError::BadLine {
                path: shown.clone(),
                line: before.iter().filter(|b| **b == b'\n').count() + 1,
                message: "not UTF-8 text; save the script as UTF-8".into(),
            }
        })?;
        let lines = parse_script(&text, &shown)?
            .into_iter()
            .filter(|(_, of, _)| of.as_deref() == lane)
            .map(|(number, _, line)| (number, line))
            .collect();
        Ok(Self {
            path: path.to_path_buf(),
            lines,
            next: consumed,
            attempts: crate::retry::DEFAULT_ATTEMPTS,
            last: None,
        })
    }

    /// Gives a prompt `attempts` (at least 1) while the script's lines fail transiently; a
    /// script waits for nothing between them.
    #[must_use]
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts.max(1);
        self
    }

    /// The script file as opened (not canonicalized).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A script's lines: each with its file line number and the lane it names, if any.
type Lines = Vec<(usize, Option<String>, ScriptLine)>;

pub(super) fn parse_script(text: &str, shown: &str) -> Result<Lines, AgentError> {
    let mut out = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let bad = |message: String| AgentError::BadLine {
            path: shown.to_owned(),
            line,
            message,
        };
        let value: serde_json::Value = serde_json::from_str(raw).map_err(|e| {
            bad(format!(
                "not JSON: {}{}",
                castlog_core::syntax::json_error(&e),
                castlog_core::syntax::column(&e)
            ))
        })?;
        let field = |name: &str| value.get(name);
        let lane = match field("lane") {
            None => None,
            Some(serde_json::Value::String(name)) if !name.is_empty() => Some(name.clone()),
            Some(_) => return Err(bad("\"lane\" must be the name of a lane".into())),
        };
        let usage = || match field("usage") {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(u) => serde_json::from_value::<Usage>(u.clone())
                .map(Some)
                .map_err(|e| {
                    bad(format!(
                        "\"usage\" must be {{\"input\": N, \"output\": N}} with token counts: {}",
                        castlog_core::syntax::json_error(&e)
                    ))
                }),
        };
        let parsed = if let Some(calls) = field("tool_calls") {
            let text = match field("reply") {
                None => "",
                Some(t) => t
                    .as_str()
                    .ok_or_else(|| bad("\"reply\" must be a string".into()))?,
            };
            ScriptLine::Calls(text.to_owned(), usage()?, tool_calls(calls).map_err(bad)?)
        } else if let Some(reply) = field("reply") {
            let text = reply
                .as_str()
                .ok_or_else(|| bad("\"reply\" must be a string".into()))?;
            ScriptLine::Reply(text.to_owned(), usage()?)
        } else if let Some(error) = field("error") {
            let class = match error.as_str() {
                Some("transient") => FailureClass::Transient,
                Some("interruption") => FailureClass::Interruption,
                _ => {
                    return Err(bad(
                        "\"error\" must be \"transient\" or \"interruption\"".into()
                    ));
                }
            };
            let message = field("message")
                .and_then(|m| m.as_str())
                .unwrap_or("")
                .to_owned();
            ScriptLine::Error(class, message)
        } else if let Some(user) = field("user") {
            let text = user
                .as_str()
                .ok_or_else(|| bad("\"user\" must be a string".into()))?;
            ScriptLine::User(text.to_owned())
        } else if let Some(go) = field("continue") {
            if go != &serde_json::Value::Bool(true) {
                return Err(bad("\"continue\" must be true".into()));
            }
            ScriptLine::Continue
        } else {
            return Err(bad(
                "expected one of {\"reply\"}, {\"tool_calls\": [...]}, {\"error\", \"message\"}, {\"user\"}, {\"continue\": true}".into(),
            ));
        };
        out.push((line, lane, parsed));
    }
    Ok(out)
}

/// A script line's `tool_calls`: `[{"name": TOOL, "arguments": {...}, "id"?: ID}, ...]`, at
/// least one. A call without an id is named by the machine (`call-N`).
fn tool_calls(value: &serde_json::Value) -> Result<Vec<castlog_core::event::ToolRequest>, String> {
    let shape =
        "\"tool_calls\" must be a non-empty array of {\"name\": TOOL, \"arguments\": {...}}";
    let Some(list) = value.as_array().filter(|l| !l.is_empty()) else {
        return Err(shape.into());
    };
    list.iter()
        .map(|call| {
            let name = call.get("name").and_then(|n| n.as_str());
            let id = call.get("id").and_then(|n| n.as_str()).unwrap_or("");
            match name {
                Some(name) => Ok(castlog_core::event::ToolRequest {
                    call: id.to_owned(),
                    tool: name.to_owned(),
                    arguments: call
                        .get("arguments")
                        .cloned()
                        .unwrap_or_else(|| serde_json::json!({})),
                }),
                None => Err(shape.into()),
            }
        })
        .collect()
}

impl Agent for ScriptedAgent {
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        let Some((number, line)) = self.lines.get(self.next).cloned() else {
            return AgentTurn::Exhausted(format!(
                "the agent script {} has no more lines ({} used)",
                self.path.display(),
                self.lines.len()
            ));
        };
        let from_a_person = matches!(line, ScriptLine::User(_) | ScriptLine::Continue);
        if request.refinement && !from_a_person {
            // The script holds no message of the person here: the cast waits for one, and the
            // line is kept for the agent's next turn.
            return AgentTurn::Exhausted(format!(
                "the cast waits for a person (line {number} of {} is the agent's next answer): `castlog refine` or `castlog continue`",
                self.path.display()
            ));
        }
        self.next += 1;
        self.last = Some(number);
        match line {
            ScriptLine::Reply(text, usage) => AgentTurn::Reply { text, usage },
            ScriptLine::Calls(text, usage, calls) => AgentTurn::ToolCalls { text, usage, calls },
            ScriptLine::Error(class, message) => AgentTurn::Failed { class, message },
            ScriptLine::User(text) => AgentTurn::Refine(text),
            ScriptLine::Continue => AgentTurn::Continue,
        }
    }

    fn origin(&self) -> Option<String> {
        Some("script".into())
    }

    fn local(&self) -> bool {
        true
    }

    fn attempts(&self) -> u32 {
        self.attempts
    }

    fn last_answer_at(&self) -> Option<String> {
        self.last
            .map(|line| format!("line {line} of {}", self.path.display()))
    }
}
