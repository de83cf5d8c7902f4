//! The one place where library errors become messages and exit codes.
//!
//! Exit codes (a contract, see DESIGN.md): 0 ok, 1 user or configuration error, 2 internal
//! error, 3 integrity failure (broken chain, prompt drift, replay divergence).

use castlog_events::LogError;
use castlog_events::codec::CodecError;
use castlog_projections::prompt::PromptError;
use castlog_replay::driver::DriveError;

/// An error on its way out of the binary.
#[derive(Debug)]
pub struct CliError {
    /// The process exit code: 0 ok, 1 user error, 2 internal, 3 integrity, 4 and 5 with
    /// --exit-status (a driven cast that failed or waits).
    pub code: u8,
    /// The message printed on stderr (lowercase, says what failed and what to do).
    pub message: String,
}

/// User or configuration error.
pub const USER: u8 = 1;
/// Internal error: storage failed, or a state the machine cannot reach (a castlog bug).
pub const INTERNAL: u8 = 2;
/// Integrity failure: the log, a blob or a prompt does not verify against what was recorded.
pub const INTEGRITY: u8 = 3;
/// With `--exit-status`: the driven cast ended failed.
pub const CAST_FAILED: u8 = 4;
/// With `--exit-status`: the driven cast waits for an agent or a person (or was aborted, and
/// waits for `resume` or `revive`).
pub const CAST_WAITING: u8 = 5;

/// `--exit-status`: the error that carries a driven cast's status out as the exit code, or
/// nothing for a completed (or still running) cast.
pub fn exit_status(
    cast: &castlog_core::id::CastId,
    status: castlog_core::machine::Status,
) -> Result<(), CliError> {
    use castlog_core::machine::Status;
    let code = match status {
        Status::Failed => CAST_FAILED,
        Status::AwaitingAgent | Status::AwaitingRefinement | Status::Aborted => CAST_WAITING,
        Status::Completed | Status::Running => return Ok(()),
    };
    Err(CliError {
        code,
        message: format!("cast {cast}: {} (--exit-status)", status.as_str()),
    })
}

/// The name of an exit code's class, as `--json` error documents give it.
pub fn kind_of(code: u8) -> &'static str {
    match code {
        USER => "user",
        INTEGRITY => "integrity",
        CAST_FAILED => "cast_failed",
        CAST_WAITING => "cast_waiting",
        _ => "internal",
    }
}

impl CliError {
    /// A user error (exit 1).
    pub fn user(message: impl Into<String>) -> Self {
        Self {
            code: USER,
            message: message.into(),
        }
    }

    /// An integrity failure (exit 3).
    pub fn integrity(message: impl Into<String>) -> Self {
        Self {
            code: INTEGRITY,
            message: message.into(),
        }
    }

    /// The same error, its message prefixed with what was being done.
    #[must_use]
    pub fn context(mut self, what: impl std::fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }

    /// An internal error (exit 2).
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            code: INTERNAL,
            message: message.into(),
        }
    }
}

/// The exit code of a log error.
fn log_code(err: &LogError) -> u8 {
    match err {
        LogError::Open { .. }
        | LogError::NoDatabase { .. }
        | LogError::Conflict { .. }
        | LogError::LeaseLost { .. }
        | LogError::AlreadyQueued { .. }
        | LogError::ReadOnly { .. }
        | LogError::SchemaTooNew { .. }
        | LogError::UnknownCast { .. }
        | LogError::CastExists { .. }
        | LogError::EmptyAppend { .. } => USER,
        LogError::Corrupt { .. }
        | LogError::BrokenImport { .. }
        | LogError::BadForkPoint { .. } => INTEGRITY,
        _ => INTERNAL,
    }
}

/// The exit code of a prompt that cannot be rebuilt: the log is damaged, unless the log
/// itself failed.
fn prompt_code(err: &PromptError) -> u8 {
    match err {
        PromptError::Log(log) => log_code(log),
        _ => INTEGRITY,
    }
}

/// The exit code of an error that stopped a drive: a prompt or a fold that fails is the same
/// integrity failure whichever command met it.
fn drive_code(err: &DriveError) -> u8 {
    match err {
        DriveError::Log(log) => log_code(log),
        DriveError::Prompt { source, .. } => prompt_code(source),
        DriveError::Fold { .. } => INTEGRITY,
        // A folded state the machine cannot act on: castlog broke its own invariant.
        DriveError::Inconsistent(_) => INTERNAL,
        // A refused input, an unknown cast or point, a script line of the wrong kind: the
        // user's input, not a fault of castlog.
        _ => USER,
    }
}

/// The exit code of an export or import error.
fn codec_code(err: &CodecError) -> u8 {
    match err {
        CodecError::Log(log) => log_code(log),
        CodecError::Tampered { .. } | CodecError::BlobMismatch { .. } => INTEGRITY,
        _ => USER,
    }
}

impl From<LogError> for CliError {
    fn from(err: LogError) -> Self {
        let code = log_code(&err);
        let message = match &err {
            // Another process appended to the cast meanwhile: nothing of this batch was
            // written, and the log (not this process's view of it) is where to go on from.
            LogError::Conflict { cast, .. } => format!(
                "{err}: another castlog process wrote to cast {cast} meanwhile, and nothing of this step was recorded; `castlog state {cast}` shows where it is, `castlog resume {cast} --agent SPEC` drives it on from there"
            ),
            LogError::NoDatabase { .. } => {
                format!("{err}; run a cast first, or point --db (or CASTLOG_DB) at one")
            }
            _ => err.to_string(),
        };
        Self { code, message }
    }
}

impl From<CodecError> for CliError {
    fn from(err: CodecError) -> Self {
        match err {
            CodecError::Log(log) => log.into(),
            other => Self {
                code: codec_code(&other),
                message: other.to_string(),
            },
        }
    }
}

impl From<DriveError> for CliError {
    fn from(err: DriveError) -> Self {
        match err {
            DriveError::Log(log) => log.into(),
            DriveError::Prompt {
                source: PromptError::Log(log),
                ..
            } => log.into(),
            other => Self {
                code: drive_code(&other),
                message: other.to_string(),
            },
        }
    }
}

impl From<castlog_core::loadout::LoadError> for CliError {
    fn from(err: castlog_core::loadout::LoadError) -> Self {
        CliError::user(err.to_string())
    }
}

impl From<PromptError> for CliError {
    fn from(err: PromptError) -> Self {
        match err {
            PromptError::Log(log) => log.into(),
            other => Self {
                code: prompt_code(&other),
                message: other.to_string(),
            },
        }
    }
}

impl From<castlog_projections::claims::FindError> for CliError {
    fn from(err: castlog_projections::claims::FindError) -> Self {
        CliError::user(err.to_string())
    }
}

impl From<castlog_replay::agent::AgentError> for CliError {
    fn from(err: castlog_replay::agent::AgentError) -> Self {
        CliError::user(err.to_string())
    }
}

impl From<castlog_replay::utility::MissingProgram> for CliError {
    fn from(err: castlog_replay::utility::MissingProgram) -> Self {
        CliError::user(err.to_string())
    }
}

impl From<castlog_replay::utility::shipped::ShippedError> for CliError {
    fn from(err: castlog_replay::utility::shipped::ShippedError) -> Self {
        CliError::user(err.to_string())
    }
}

impl From<castlog_replay::openai::OpenAiError> for CliError {
    fn from(err: castlog_replay::openai::OpenAiError) -> Self {
        CliError::user(err.to_string())
    }
}

impl From<castlog_core::claims::TransitionError> for CliError {
    fn from(err: castlog_core::claims::TransitionError) -> Self {
        CliError::user(err.to_string())
    }
}

impl From<castlog_core::claims::ResponseError> for CliError {
    fn from(err: castlog_core::claims::ResponseError) -> Self {
        CliError::user(err.to_string())
    }
}

impl From<castlog_replay::sender::SenderError> for CliError {
    fn from(err: castlog_replay::sender::SenderError) -> Self {
        CliError::user(err.to_string())
    }
}

impl From<castlog_projections::otlp::OtlpError> for CliError {
    fn from(err: castlog_projections::otlp::OtlpError) -> Self {
        match err {
            castlog_projections::otlp::OtlpError::Log(log) => log.into(),
            // A record that does not decode or a prompt that does not rebuild: the log is damaged.
            other => CliError::integrity(other.to_string()),
        }
    }
}

impl From<std::io::Error> for CliError {
    fn from(err: std::io::Error) -> Self {
        CliError::user(err.to_string())
    }
}

impl From<castlog_viewer::ViewError> for CliError {
    fn from(e: castlog_viewer::ViewError) -> Self {
        match e {
            castlog_viewer::ViewError::Log(e) => e.into(),
            castlog_viewer::ViewError::Prompt(e) => e.into(),
            castlog_viewer::ViewError::Diff(e) => e.into(),
            castlog_viewer::ViewError::UnknownCast { cast } => {
                crate::commands::inspect::unknown_cast(cast.as_str())
            }
            other => CliError::internal(other.to_string()),
        }
    }
}

impl From<castlog_projections::diff::DiffError> for CliError {
    fn from(err: castlog_projections::diff::DiffError) -> Self {
        use castlog_projections::diff::DiffError;
        match err {
            DiffError::Log(log) => log.into(),
            DiffError::Prompt(prompt) => prompt.into(),
            other => CliError::internal(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use castlog_core::id::{CastId, Seq};
    use castlog_replay::recast::PointError;

    use super::*;

    fn drift() -> PromptError {
        PromptError::Drift {
            recorded: "47a04bc0a884".into(),
            rebuilt: "99c127d9ca30".into(),
        }
    }

    #[test]
    fn a_prompt_that_does_not_rebuild_has_one_code_driven_or_shown() {
        let shown = CliError::from(drift());
        let driven = CliError::from(DriveError::Prompt {
            cast: CastId::new("demo"),
            source: drift(),
        });
        assert_eq!((shown.code, driven.code), (INTEGRITY, INTEGRITY));
        assert_eq!(
            driven.message,
            "the prompt in flight: the entries assemble to 99c127d9ca30, not the recorded prompt 47a04bc0a884"
        );
    }

    #[test]
    fn a_log_error_has_its_code_wherever_it_is_wrapped() {
        let corrupt = || LogError::Corrupt {
            context: "reading".into(),
            message: "a column holds text".into(),
            source: None,
        };
        let codes = [
            CliError::from(corrupt()).code,
            CliError::from(DriveError::Log(corrupt())).code,
            CliError::from(PromptError::Log(corrupt())).code,
            CliError::from(CodecError::Log(corrupt())).code,
            CliError::from(DriveError::Prompt {
                cast: CastId::new("demo"),
                source: PromptError::Log(corrupt()),
            })
            .code,
        ];
        assert_eq!(codes, [INTEGRITY; 5]);
        let storage = LogError::storage("appending an event", "the disk is full");
        assert_eq!(CliError::from(storage).code, INTERNAL);
        let unknown = LogError::UnknownCast {
            cast: CastId::new("nope"),
        };
        assert_eq!(CliError::from(DriveError::Log(unknown)).code, USER);
    }

    #[test]
    fn a_recast_point_that_does_not_do_is_a_user_error() {
        let err = CliError::from(DriveError::from(PointError::NoSeq {
            cast: CastId::new("demo"),
            seq: Seq(40),
        }));
        assert_eq!((err.code, kind_of(err.code)), (USER, "user"));
        assert_eq!(err.message, "cast demo has no seq 40");
    }
}
