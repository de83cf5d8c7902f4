//! The built-in tools an agent may call, their scopes, and the working directory they act in.
//!
//! A call is a tool name and its arguments as the agent gave them; [`run`] checks the call
//! against the materia's [`Scope`] (a call outside it is refused and never run) and returns
//! the [`Outcome`] the agent is shown. Every path resolves inside the [`Workdir`]: `..`,
//! absolute paths and symlinks that leave it are refused. `bash` is not a sandbox: it runs
//! with the user's rights in the working directory.

mod error;
mod files;
pub mod schema;
mod search;
mod shell;
mod workdir;

use serde_json::Value;

use crate::process::Launcher;

pub use error::ToolError;
pub use workdir::{Workdir, WorkdirError};

/// The seven built-in tools, in the order they are offered.
pub const ALL: [&str; 7] = ["read", "write", "edit", "bash", "ls", "grep", "find"];

/// The tools of the `readOnly` scope.
pub const READ_ONLY: [&str; 4] = ["read", "grep", "find", "ls"];

/// Which tools a materia may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// No tools.
    None,
    /// read, grep, find, ls.
    ReadOnly,
    /// All seven.
    Coding,
    /// Exactly the tools named (`{"type": "custom", "tools": [...]}` in the config).
    Custom(Vec<String>),
}

/// Why a materia's `tools` value is not a scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeError {
    /// A name that is not a scope or not a tool.
    #[error(
        "tools {found:?} is not a scope: use readOnly, coding, none or {{type: custom, tools: [...]}} with tools among {ALL:?}"
    )]
    Unknown {
        /// What was found.
        found: String,
    },
}

impl Scope {
    /// Reads a materia's `tools` value (absent means none).
    pub fn parse(value: Option<&Value>) -> Result<Scope, ScopeError> {
        let unknown = |v: &Value| ScopeError::Unknown {
            found: v.to_string(),
        };
        match value {
            None | Some(Value::Null) => Ok(Scope::None),
            Some(Value::String(s)) => match s.as_str() {
                "none" => Ok(Scope::None),
                "readOnly" => Ok(Scope::ReadOnly),
                "coding" => Ok(Scope::Coding),
                _ => Err(unknown(&Value::String(s.clone()))),
            },
            Some(v @ Value::Object(map)) if map.get("type") == Some(&Value::from("custom")) => {
                let Some(Value::Array(names)) = map.get("tools") else {
                    return Err(unknown(v));
                };
                let mut tools = Vec::new();
                for name in names {
                    match name.as_str() {
                        Some(n) if ALL.contains(&n) => tools.push(n.to_owned()),
                        _ => return Err(unknown(name)),
                    }
                }
                Ok(Scope::Custom(tools))
            }
            Some(v) => Err(unknown(v)),
        }
    }

    /// Whether `tool` may be called.
    pub fn allows(&self, tool: &str) -> bool {
        match self {
            Scope::None => false,
            Scope::ReadOnly => READ_ONLY.contains(&tool),
            Scope::Coding => ALL.contains(&tool),
            Scope::Custom(tools) => tools.iter().any(|t| t == tool),
        }
    }

    /// The tools offered, in [`ALL`] order.
    pub fn tools(&self) -> Vec<&'static str> {
        ALL.into_iter().filter(|t| self.allows(t)).collect()
    }
}

/// Whether running `tool` again after a crash cannot change anything.
pub fn is_read_only(tool: &str) -> bool {
    READ_ONLY.contains(&tool)
}

/// What a call produced, as the agent is shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What the agent is shown: the tool's output, or the error in words.
    pub text: String,
    /// The result is an error (refused, bad arguments, failed).
    pub error: bool,
    /// A process's exit status (`bash`).
    pub exit: Option<i32>,
    /// The text was cut at the tool's output cap.
    pub truncated: bool,
}

impl Outcome {
    pub(crate) fn ok(text: String) -> Outcome {
        Outcome {
            text,
            error: false,
            exit: None,
            truncated: false,
        }
    }

    pub(crate) fn error(text: impl Into<String>) -> Outcome {
        Outcome {
            text: text.into(),
            error: true,
            exit: None,
            truncated: false,
        }
    }
}

/// Runs one call under `scope` in `workdir`. Never panics on bad arguments: they become an
/// error result.
pub fn run(
    scope: &Scope,
    workdir: &Workdir,
    launcher: &Launcher,
    tool: &str,
    arguments: &Value,
) -> Outcome {
    call(scope, workdir, launcher, tool, arguments)
        .unwrap_or_else(|err| Outcome::error(err.to_string()))
}

/// One call, or why it gave no result.
fn call(
    scope: &Scope,
    workdir: &Workdir,
    launcher: &Launcher,
    tool: &str,
    arguments: &Value,
) -> Result<Outcome, ToolError> {
    if !ALL.contains(&tool) {
        return Err(ToolError::UnknownTool {
            tool: tool.to_owned(),
        });
    }
    if !scope.allows(tool) {
        return Err(ToolError::NotAllowed {
            tool: tool.to_owned(),
            allowed: scope.tools(),
        });
    }
    let parsed;
    let arguments = match arguments {
        Value::String(text) => {
            parsed = serde_json::from_str::<Value>(text)
                .map_err(|source| ToolError::ArgumentsNotJson { source })?;
            &parsed
        }
        other => other,
    };
    match tool {
        "read" => files::read(workdir, arguments),
        "write" => files::write(workdir, arguments),
        "edit" => files::edit(workdir, arguments),
        "bash" => shell::bash(workdir, launcher, arguments),
        "ls" => search::ls(workdir, arguments),
        "grep" => search::grep(workdir, arguments),
        _ => search::find(workdir, arguments),
    }
}

/// A string argument, or an error naming it.
pub(crate) fn text<'a>(arguments: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    arguments
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::MissingArgument {
            name: name.to_owned(),
        })
}

/// An optional string argument.
pub(crate) fn optional<'a>(arguments: &'a Value, name: &str) -> Option<&'a str> {
    arguments.get(name).and_then(Value::as_str)
}

#[cfg(test)]
mod tests;
