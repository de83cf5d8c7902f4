//! `read`, `write` and `edit`: one file at a time, inside the working directory.

use serde_json::Value;

use super::{Outcome, ToolError, Workdir, text};

/// The most lines `read` returns without a `limit`.
const READ_LINES: usize = 2000;

pub(super) fn read(workdir: &Workdir, arguments: &Value) -> Result<Outcome, ToolError> {
    let path = workdir.resolve(text(arguments, "path")?)?;
    let content = std::fs::read_to_string(&path).map_err(|source| ToolError::Read {
        path: workdir.show(&path),
        source,
    })?;
    let offset = arguments
        .get("offset")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(1) as usize;
    let limit = arguments
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(READ_LINES, |l| l as usize);
    let lines: Vec<&str> = content.lines().skip(offset - 1).collect();
    let truncated = lines.len() > limit;
    let mut out = lines[..lines.len().min(limit)].join("\n");
    if content.ends_with('\n') && !truncated && !out.is_empty() {
        out.push('\n');
    }
    Ok(Outcome {
        truncated,
        ..Outcome::ok(out)
    })
}

pub(super) fn write(workdir: &Workdir, arguments: &Value) -> Result<Outcome, ToolError> {
    let shown = text(arguments, "path")?;
    let content = text(arguments, "content")?;
    let path = workdir.resolve(shown)?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| ToolError::CreateDir {
            path: shown.to_owned(),
            source,
        })?;
    }
    std::fs::write(&path, content).map_err(|source| ToolError::Write {
        path: shown.to_owned(),
        source,
    })?;
    Ok(Outcome::ok(format!(
        "wrote {} bytes to {shown}",
        content.len()
    )))
}

/// The edits asked for: `edits: [{oldText, newText}]`, or the single `{oldText, newText}`.
fn edits(arguments: &Value) -> Result<Vec<(String, String)>, ToolError> {
    let pair = |v: &Value| -> Result<(String, String), ToolError> {
        Ok((
            text(v, "oldText")?.to_owned(),
            text(v, "newText")?.to_owned(),
        ))
    };
    match arguments.get("edits") {
        Some(Value::Array(list)) => list.iter().map(pair).collect(),
        Some(_) => Err(ToolError::EditsNotAList),
        None => Ok(vec![pair(arguments)?]),
    }
}

pub(super) fn edit(workdir: &Workdir, arguments: &Value) -> Result<Outcome, ToolError> {
    let shown = text(arguments, "path")?;
    let path = workdir.resolve(shown)?;
    let edits = edits(arguments)?;
    if edits.is_empty() {
        return Err(ToolError::NoEdits);
    }
    let content = std::fs::read_to_string(&path).map_err(|source| ToolError::Read {
        path: shown.to_owned(),
        source,
    })?;
    let mut spans = Vec::new();
    for (n, (old, new)) in edits.iter().enumerate() {
        if old.is_empty() {
            return Err(ToolError::EmptyOldText { edit: n + 1 });
        }
        let mut found = content.match_indices(old.as_str());
        let Some((at, _)) = found.next() else {
            return Err(ToolError::OldTextNotFound {
                edit: n + 1,
                path: shown.to_owned(),
            });
        };
        if found.next().is_some() {
            return Err(ToolError::OldTextRepeated {
                edit: n + 1,
                path: shown.to_owned(),
            });
        }
        spans.push((at, at + old.len(), new.as_str(), n + 1));
    }
    spans.sort_by_key(|s| s.0);
    for pair in spans.windows(2) {
        if pair[1].0 < pair[0].1 {
            return Err(ToolError::Overlap {
                first: pair[0].3,
                second: pair[1].3,
            });
        }
    }
    let mut out = String::with_capacity(content.len());
    let mut at = 0;
    for (start, end, new, _) in &spans {
        out.push_str(&content[at..*start]);
        out.push_str(new);
        at = *end;
    }
    out.push_str(&content[at..]);
    std::fs::write(&path, out).map_err(|source| ToolError::Write {
        path: shown.to_owned(),
        source,
    })?;
    Ok(Outcome::ok(format!(
        "applied {} edit(s) to {shown}",
        spans.len()
    )))
}
