//! `diff`: two casts side by side, from the log alone. The comparison is
//! [`castlog_projections::diff`]; this prints it.

use std::path::Path;

use castlog_core::id::CastId;
use castlog_events::Database;
use serde_json::Value;

use crate::args::DiffArgs;
use crate::error::CliError;
use crate::output;

/// `castlog diff A B`, and `castlog diff A [B] --files`.
pub fn diff(db: &Path, args: &DiffArgs) -> Result<(), CliError> {
    let log = super::open(db)?;
    if args.files {
        let mut casts = vec![super::diff_files::cast_files(&log, &args.a)?];
        if let Some(b) = &args.b {
            casts.push(super::diff_files::cast_files(&log, b)?);
        }
        if args.json {
            return output::json(&serde_json::json!({ "casts": casts }));
        }
        casts.iter().for_each(super::diff_files::print);
        return Ok(());
    }
    let Some(b) = &args.b else {
        return Err(CliError::user("diff needs two casts (or one with --files)"));
    };
    let report = compute(&log, &args.a, b)?;
    if args.json {
        return output::json(&report);
    }
    print_text(&report);
    Ok(())
}

/// The diff of two casts as the `--json` document.
pub fn compute(log: &Database, a: &str, b: &str) -> Result<Value, CliError> {
    let a = super::inspect::head_of(log, a)?;
    let b = super::inspect::head_of(log, b)?;
    let diff = castlog_projections::diff::compare(log, &a.cast, &b.cast)?;
    let outcome = |cast: &CastId| {
        castlog_replay::driver::fold(log, cast)
            .map(|(s, _)| s.status.as_str())
            .unwrap_or("unknown")
    };
    Ok(diff.to_json(outcome(&a.cast), outcome(&b.cast)))
}

fn print_text(report: &Value) {
    let common = &report["common_prefix"];
    let first_divergence = report["first_divergence"]
        .as_object()
        .map(|_| &report["first_divergence"]);
    let rows = report["steps"].as_array().cloned().unwrap_or_default();
    let summary = report["summary"].as_str().unwrap_or("");
    crate::say!("common prefix: {common} events");
    if let Some(l) = report["loadouts"].as_object() {
        let hash = |side: &str| {
            l[side]["hash"]
                .as_str()
                .map(|h| h.chars().take(12).collect::<String>())
                .unwrap_or_default()
        };
        let names = |field: &str| {
            let list: Vec<&str> = l[field]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if list.is_empty() {
                "none".to_owned()
            } else {
                list.join(", ")
            }
        };
        crate::say!(
            "loadouts differ: a {} {} / b {} {}; sockets changed: {}; settings changed: {}",
            l["a"]["name"].as_str().unwrap_or(""),
            hash("a"),
            l["b"]["name"].as_str().unwrap_or(""),
            hash("b"),
            names("sockets_changed"),
            names("settings_changed")
        );
    }
    if let Some(d) = &first_divergence {
        crate::say!(
            "first divergence at position {}: a {} / b {}",
            d["position"],
            d["a"],
            d["b"]
        );
    }
    for row in &rows {
        crate::say!(
            "{:<8} {}",
            row["status"].as_str().unwrap_or(""),
            row["key"].as_str().unwrap_or("")
        );
        for c in row["changes"].as_array().into_iter().flatten() {
            match c["field"].as_str() {
                Some("routing") => crate::say!("  routing: {} => {}", c["a"], c["b"]),
                Some("tool_call") => {
                    let side = |s: &Value| {
                        if s.is_null() {
                            return "none".to_owned();
                        }
                        format!(
                            "{} {} -> {}",
                            s["tool"].as_str().unwrap_or(""),
                            s["arguments"],
                            s["status"].as_str().unwrap_or("")
                        )
                    };
                    crate::say!(
                        "  tool call {}:\n    a {}\n    b {}",
                        c["call"],
                        side(&c["a"]),
                        side(&c["b"])
                    );
                    if let Some(diff) = c["diff"].as_str() {
                        crate::say!("  result:\n{diff}");
                    }
                }
                Some("data") => crate::say!(
                    "  {}: {} => {}",
                    c["path"].as_str().unwrap_or(""),
                    c["a"],
                    c["b"]
                ),
                Some(field) => crate::say!("  {field}:\n{}", c["diff"].as_str().unwrap_or("")),
                None => {}
            }
        }
    }
    crate::say!("{summary}");
}
