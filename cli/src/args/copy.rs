//! The arguments of `copy`.

use std::path::PathBuf;

use clap::Args;

/// `copy`.
#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The database to copy from: a SQLite file or postgres://USER@HOST/DB.
    #[arg(long)]
    pub from: PathBuf,
    /// The database to copy into (created if missing): a SQLite file or postgres://USER@HOST/DB.
    #[arg(long)]
    pub to: PathBuf,
    /// The cast to copy, with the casts it was recast from (default: all casts).
    #[arg(conflicts_with = "all")]
    pub cast: Option<String>,
    /// Copy every cast (the default when no cast is named).
    #[arg(long)]
    pub all: bool,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}
