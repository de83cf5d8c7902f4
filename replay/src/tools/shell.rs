//! `bash`: `bash -c COMMAND` in the working directory, through the launcher's scrubbed
//! environment, with a timeout and the process runner's output cap; its process group is
//! killed at the end. Not a sandbox.

use std::time::Duration;

use serde_json::Value;

use super::{Outcome, ToolError, Workdir, text};
use crate::process::{self, Launcher};

/// The timeout when the call gives none, in seconds.
const TIMEOUT: u64 = 120;

pub(super) fn bash(
    workdir: &Workdir,
    launcher: &Launcher,
    arguments: &Value,
) -> Result<Outcome, ToolError> {
    let command = text(arguments, "command")?;
    let seconds = arguments
        .get("timeout")
        .and_then(Value::as_u64)
        .unwrap_or(TIMEOUT)
        .max(1);
    let argv = ["bash".to_owned(), "-c".to_owned(), command.to_owned()];
    let finished = process::run(
        launcher,
        &argv,
        workdir.root(),
        &[],
        b"",
        Duration::from_secs(seconds),
    )?;
    let redactor = launcher.redactor();
    let mut out = redactor.scrub(&finished.stdout);
    if !finished.stderr.is_empty() {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&redactor.scrub(&finished.stderr));
    }
    if finished.timed_out {
        out.push_str(&format!("\n(killed after {seconds}s)"));
    }
    Ok(Outcome {
        text: out,
        error: finished.code != Some(0),
        exit: finished.code,
        truncated: finished.truncated,
    })
}
