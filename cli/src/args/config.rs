//! The arguments of `config`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `config`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// What to do with the config.
    #[command(subcommand)]
    pub action: ConfigAction,
}

/// `config`'s subcommands.
#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Print the layered config: each layer's file, the loadouts and the layers each came
    /// from, what a loadout still lacks on this machine (a program such as jj, a pi-materia
    /// install for a shipped script: give it with PI_MATERIA_HOME or `castlog --pi-materia DIR
    /// config show`), the loadouts ignored because a bundled loadout has their name; with
    /// --json, the merged config itself too.
    ///
    /// Example: castlog config show --json
    Show(ConfigShowArgs),
}

/// `config show`.
#[derive(Debug, Args)]
pub struct ConfigShowArgs {
    /// The explicit layer, highest of all (as `run --config FILE`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The project directory, whose .pi/pi-materia.json is the project layer (as `run
    /// --workdir`) [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}
