//! `serve`: placeholder until the server lands.

use std::path::Path;

use crate::args::ServeArgs;
use crate::error::CliError;

/// `castlog serve`.
pub fn run(
    _db: &Path,
    _args: &ServeArgs,
    _globals: &crate::globals::Globals,
) -> Result<(), CliError> {
    Err(CliError::user("castlog serve is not built yet"))
}
