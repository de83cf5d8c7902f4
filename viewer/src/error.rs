//! Why a view could not be made.

use castlog_core::id::CastId;
use castlog_events::LogError;
use castlog_projections::diff::DiffError;
use castlog_projections::prompt::PromptError;

/// Why a report, a diff or a list could not be read from the log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The log failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The cast's prompt policy could not be read.
    #[error("{0}")]
    Prompt(#[source] PromptError),
    /// The two casts could not be compared.
    #[error(transparent)]
    Diff(#[from] DiffError),
    /// The log has no such cast.
    #[error("no cast named {cast:?} in this database (see `castlog casts`)")]
    UnknownCast {
        /// The cast asked for.
        cast: CastId,
    },
}
