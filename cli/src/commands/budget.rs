//! `castlog budget CAST N`: raises a cast's token budget (pi-materia's `/materia budget`),
//! recorded as `budget_raised`. A cast its budget stopped stays failed; `revive` continues it.

use std::path::Path;

use castlog_core::input::Input;

use crate::args::{BudgetArgs, PostArgs};
use crate::error::CliError;

/// `castlog budget`.
pub fn run(
    db: &Path,
    args: &BudgetArgs,
    globals: &crate::globals::Globals,
) -> Result<(), CliError> {
    let input = Input::RaiseBudget {
        tokens: args.tokens,
    };
    super::cast::feed(
        db,
        &args.cast,
        &input,
        None,
        &PostArgs::default(),
        args.json,
        globals,
    )
}
