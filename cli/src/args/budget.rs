//! The arguments of `budget`.

use clap::Args;

/// `budget`.
#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// The cast.
    pub cast: String,
    /// The new token budget: more than the one in force.
    pub tokens: u64,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}
