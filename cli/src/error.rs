//! The one place where library errors become messages and exit codes.
//!
//! Exit codes (a contract, see DESIGN.md): 0 ok, 1 user or configuration error, 2 internal
//! error, 3 integrity failure (broken chain, prompt drift, replay divergence).

use castlog_events::LogError;
use castlog_events::codec::CodecError;

/// An error on its way out of the binary.
#[derive(Debug)]
pub struct CliError {
    /// The process exit code.
    pub code: u8,
    /// The message printed on stderr (lowercase, says what failed and what to do).
    pub message: String,
}

/// User or configuration error.
pub const USER: u8 = 1;
/// Internal error.
pub const INTERNAL: u8 = 2;
/// Integrity failure.
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

impl From<LogError> for CliError {
    fn from(err: LogError) -> Self {
        if let LogError::Conflict { cast, .. } = &err {
            // Another process appended to the cast meanwhile: nothing of this batch was
            // written, and the log (not this process's view of it) is where to go on from.
            return CliError::user(format!(
                "{err}: another castlog process wrote to cast {cast} meanwhile, and nothing of this step was recorded; `castlog state {cast}` shows where it is, `castlog resume {cast} --agent SPEC` drives it on from there"
            ));
        }
        if let LogError::NoDatabase { .. } = &err {
            return CliError::user(format!(
                "{err}; run a cast first, or point --db (or CASTLOG_DB) at one"
            ));
        }
        let code = match &err {
            LogError::Open { .. }
            | LogError::ReadOnly { .. }
            | LogError::SchemaTooNew { .. }
            | LogError::UnknownCast { .. }
            | LogError::CastExists { .. }
            | LogError::EmptyAppend { .. } => USER,
            LogError::Corrupt { .. }
            | LogError::BrokenImport { .. }
            | LogError::BadForkPoint { .. } => INTEGRITY,
            _ => INTERNAL,
        };
        Self {
            code,
            message: err.to_string(),
        }
    }
}

impl From<CodecError> for CliError {
    fn from(err: CodecError) -> Self {
        match err {
            CodecError::Log(log) => log.into(),
            CodecError::Tampered { .. } | CodecError::BlobMismatch { .. } => {
                CliError::integrity(err.to_string())
            }
            _ => CliError::user(err.to_string()),
        }
    }
}

impl From<castlog_replay::driver::DriveError> for CliError {
    fn from(err: castlog_replay::driver::DriveError) -> Self {
        use castlog_replay::driver::DriveError;
        match err {
            DriveError::Log(log) => log.into(),
            DriveError::Fold { .. } => CliError::integrity(err.to_string()),
            // A script line of the wrong kind is the user's input, not a fault of castlog.
            DriveError::WrongAnswer { .. } => CliError::user(err.to_string()),
            // A folded state the machine cannot act on: castlog broke its own invariant.
            DriveError::Inconsistent(_) => CliError::internal(err.to_string()),
            _ => CliError::user(err.to_string()),
        }
    }
}

impl From<castlog_core::loadout::LoadError> for CliError {
    fn from(err: castlog_core::loadout::LoadError) -> Self {
        CliError::user(err.to_string())
    }
}

impl From<castlog_projections::prompt::PromptError> for CliError {
    fn from(err: castlog_projections::prompt::PromptError) -> Self {
        match err {
            castlog_projections::prompt::PromptError::Log(log) => log.into(),
            other => CliError::integrity(other.to_string()),
        }
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
