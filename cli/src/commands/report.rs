//! `report`: one self-contained HTML file of a cast (and of its diff with another), made by
//! `castlog_viewer` from the log.

use std::path::Path;

use castlog_events::Database;
use castlog_viewer::gather::CastReport;
use castlog_viewer::report::Extras;
use serde_json::json;

use crate::args::ReportArgs;
use crate::error::CliError;
use crate::output;

/// The report page of `cast` (with the diff against `other`), as `serve` shows it too.
pub fn page(
    log: &Database,
    cast: &str,
    other: Option<&str>,
    extras: &Extras,
) -> Result<String, CliError> {
    let head = super::inspect::head_of(log, cast)?;
    let report = CastReport::gather(log, &head.cast, super::CONTEXTS)?;
    let Some(other) = other else {
        return Ok(castlog_viewer::report::report(&report, None, extras));
    };
    let other = super::inspect::head_of(log, other)?;
    let other_report = CastReport::gather(log, &other.cast, super::CONTEXTS)?;
    let diff = castlog_projections::diff::compare(log, &head.cast, &other.cast)?;
    // The file changes of each step, for the casts whose files were checkpointed (a cast
    // outside git has none, and the page says nothing of files for it).
    let mut extras = extras.clone();
    extras.files = [head.cast.as_str(), other.cast.as_str()]
        .into_iter()
        .filter_map(|cast| super::diff_files::steps(log, cast).ok())
        .collect();
    Ok(castlog_viewer::report::report(
        &report,
        Some((&diff, &other_report)),
        &extras,
    ))
}

/// `castlog report CAST [--diff OTHER] -o FILE.html`.
pub fn run(db: &Path, args: &ReportArgs) -> Result<(), CliError> {
    let log = super::open(db)?;
    let html = page(&log, &args.cast, args.diff.as_deref(), &Extras::default())?;
    std::fs::write(&args.output, &html).map_err(|e| {
        CliError::user(format!(
            "cannot write the report to {}: {e}",
            args.output.display()
        ))
    })?;
    if args.json {
        return output::json(&json!({
            "cast": args.cast,
            "diff": args.diff,
            "file": args.output,
            "bytes": html.len(),
        }));
    }
    crate::say!(
        "wrote {} ({} bytes): open it in a browser",
        args.output.display(),
        html.len()
    );
    Ok(())
}
