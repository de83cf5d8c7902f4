//! The arguments of `castlog placement`.

use std::path::PathBuf;

use clap::Args;

/// `placement`.
#[derive(Debug, Args)]
pub struct PlacementArgs {
    /// The entries: `{"entries": [...]}` for one prompt, `{"turns": [{"entries": [...]}, ...]}`
    /// for a sequence of turns.
    #[arg(required_unless_present = "show_policy")]
    pub entries: Option<PathBuf>,
    /// The placement policy: `recommended`, `legacy`, or a policy file (JSON).
    #[arg(
        long,
        value_name = "NAME|FILE",
        default_value = "recommended",
        conflicts_with = "compare"
    )]
    pub policy: String,
    /// Render under two policies and show, per entry, where it lands under each and why, with
    /// each policy's lint findings (and, for turns, each policy's cached-prefix breaks).
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub compare: Option<Vec<String>>,
    /// Add the lint findings.
    #[arg(long)]
    pub lint: bool,
    /// Print a policy's document (a built-in policy as shipped; a file read and checked).
    #[arg(long, value_name = "NAME|FILE", conflicts_with_all = ["compare", "lint"])]
    pub show_policy: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}
