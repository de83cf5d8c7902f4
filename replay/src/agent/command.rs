//! `cmd:PROGRAM ARGS…`: an agent that runs a program per turn, the prompt on stdin and the
//! reply on stdout (see the [`super`] module's documentation).

use std::path::PathBuf;
use std::time::Duration;

use castlog_core::event::FailureClass;

use super::{Agent, AgentTurn, CANCELLED, TurnRequest, flatten};
use crate::process::{self, Launcher};

/// Runs a program per turn: prompt on stdin, reply on stdout.
#[derive(Debug, Clone)]
pub struct CommandAgent {
    argv: Vec<String>,
    cwd: PathBuf,
    timeout: Duration,
    json: bool,
    launcher: Launcher,
    /// Set on Ctrl-C: the program's group is killed and the turn is an interruption.
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Variables added to the program's environment (a lane's `CASTLOG_LANE`, `CASTLOG_CAST`).
    env: Vec<(String, String)>,
}

impl CommandAgent {
    /// A command agent.
    pub fn new(argv: Vec<String>, cwd: PathBuf, timeout: Duration) -> Self {
        Self {
            argv,
            cwd,
            timeout,
            json: false,
            launcher: Launcher::default(),
            cancel: None,
            env: Vec::new(),
        }
    }

    /// Adds `name=value` to the program's environment.
    #[must_use]
    pub fn with_env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Starts the program with `launcher` (its environment, scrubbing and records).
    #[must_use]
    pub fn with_launcher(mut self, launcher: Launcher) -> Self {
        self.launcher = launcher;
        self
    }

    /// Sends the prompt as JSON messages (`[{"role", "content"}, ...]`) instead of flattened text.
    pub fn with_json_messages(mut self) -> Self {
        self.json = true;
        self
    }
}

impl Agent for CommandAgent {
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        if request.refinement {
            return AgentTurn::Exhausted(
                "the cast waits for a person: use `castlog refine` or `castlog continue`".into(),
            );
        }
        let input = if self.json {
            serde_json::to_string(request.messages).unwrap_or_default()
        } else {
            flatten(request.messages)
        };
        // In an execution scope the program runs in the scope's directory; a relative program
        // path still names the program it named where the agent was set up.
        let scoped;
        let (argv, cwd) = match request.cwd {
            Some(dir) if dir != self.cwd => {
                let mut argv = self.argv.clone();
                if let Some(program) = argv.first_mut()
                    && program.contains('/')
                    && std::path::Path::new(program.as_str()).is_relative()
                {
                    *program = self.cwd.join(&*program).display().to_string();
                }
                scoped = argv;
                (scoped.as_slice(), dir)
            }
            _ => (self.argv.as_slice(), self.cwd.as_path()),
        };
        match process::run_cancellable_with(
            &self.launcher,
            argv,
            cwd,
            &self.env,
            input.as_bytes(),
            self.timeout,
            self.cancel.as_deref(),
        ) {
            Err(err) => AgentTurn::Failed {
                class: FailureClass::Interruption,
                message: err.to_string(),
            },
            Ok(done) if done.cancelled => AgentTurn::Failed {
                class: FailureClass::Interruption,
                message: CANCELLED.into(),
            },
            Ok(done) if done.timed_out => AgentTurn::Failed {
                class: FailureClass::Interruption,
                message: format!("the agent command timed out after {:?}", self.timeout),
            },
            Ok(done) if done.stdout_lost => AgentTurn::Failed {
                class: FailureClass::Interruption,
                message: "the agent command exited, but a process it started outside its process group still held its output; nothing of it was used".into(),
            },
            Ok(done) if done.code != Some(0) => AgentTurn::Failed {
                class: FailureClass::Interruption,
                message: format!(
                    "the agent command exited with {}: {}",
                    done.code.map_or("a signal".into(), |c| format!("code {c}")),
                    done.stderr.trim()
                ),
            },
            Ok(done) if done.stdout_truncated => AgentTurn::Failed {
                class: FailureClass::Interruption,
                message: format!(
                    "the agent command wrote more than {} bytes on stdout, castlog's limit for a reply; nothing of it was used",
                    process::OUTPUT_CAP
                ),
            },
            Ok(done) => AgentTurn::Reply {
                text: done.stdout,
                usage: None,
            },
        }
    }

    fn cancel_on(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.cancel = Some(flag);
    }
}

/// Splits `cmd:PROGRAM ARGS…` on whitespace (no shell, no quoting).
pub fn command_argv(rest: &str) -> Vec<String> {
    rest.split_whitespace().map(str::to_owned).collect()
}
