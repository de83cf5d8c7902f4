//! Arguments of `deliver`.

use std::path::PathBuf;

use clap::Args;

/// `deliver`.
#[derive(Debug, Args)]
pub struct DeliverArgs {
    /// The cast whose outbox to drain (or --all).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub cast: Option<String>,
    /// Every cast of the database.
    #[arg(long)]
    pub all: bool,
    /// Read `eventing` from this config instead of the one each cast was started from.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}
