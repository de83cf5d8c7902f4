//! `ls`, `grep` and `find`: looking around the working directory without changing it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Outcome, ToolError, Workdir, optional, text};

/// The most entries or matching lines a listing returns.
const LIMIT: usize = 1000;

fn start(workdir: &Workdir, arguments: &Value) -> Result<PathBuf, ToolError> {
    workdir.resolve(optional(arguments, "path").unwrap_or("."))
}

fn listing(lines: &[String]) -> Outcome {
    let truncated = lines.len() > LIMIT;
    let kept = &lines[..lines.len().min(LIMIT)];
    Outcome {
        truncated,
        ..Outcome::ok(kept.join("\n"))
    }
}

pub(super) fn ls(workdir: &Workdir, arguments: &Value) -> Result<Outcome, ToolError> {
    let dir = start(workdir, arguments)?;
    let entries = std::fs::read_dir(&dir).map_err(|source| ToolError::List {
        path: workdir.show(&dir),
        source,
    })?;
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| {
            let mut name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                name.push('/');
            }
            name
        })
        .collect();
    names.sort();
    Ok(listing(&names))
}

/// Every file under `dir` (symlinks not followed, `.git` skipped), sorted.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if entry.file_name() != ".git" {
                walk(&entry.path(), out);
            }
        } else if kind.is_file() {
            out.push(entry.path());
        }
    }
}

/// Whether `name` matches a glob of `*` and `?`.
fn glob(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some(('*', rest)) => (0..=n.len()).any(|i| go(rest, &n[i..])),
            Some(('?', rest)) => !n.is_empty() && go(rest, &n[1..]),
            Some((c, rest)) => n.first() == Some(c) && go(rest, &n[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}

fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub(super) fn find(workdir: &Workdir, arguments: &Value) -> Result<Outcome, ToolError> {
    let pattern = text(arguments, "pattern")?;
    let mut files = Vec::new();
    walk(&start(workdir, arguments)?, &mut files);
    let found: Vec<String> = files
        .iter()
        .filter(|f| glob(pattern, &name_of(f)) || glob(pattern, &workdir.show(f)))
        .map(|f| workdir.show(f))
        .collect();
    Ok(listing(&found))
}

/// Lines containing `pattern` (a plain substring), as `path:line:text`.
pub(super) fn grep(workdir: &Workdir, arguments: &Value) -> Result<Outcome, ToolError> {
    let pattern = text(arguments, "pattern")?;
    let filter = optional(arguments, "glob");
    let root = start(workdir, arguments)?;
    let mut files = Vec::new();
    if root.is_file() {
        files.push(root);
    } else {
        walk(&root, &mut files);
    }
    let mut hits = Vec::new();
    for file in files {
        if filter.is_some_and(|g| !glob(g, &name_of(&file))) {
            continue;
        }
        let Ok(content) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (n, line) in content.lines().enumerate() {
            if line.contains(pattern) {
                hits.push(format!("{}:{}:{line}", workdir.show(&file), n + 1));
            }
        }
        if hits.len() > LIMIT {
            break;
        }
    }
    Ok(listing(&hits))
}

#[cfg(test)]
mod tests {
    #[test]
    fn globs_match_stars_and_marks() {
        assert!(super::glob("*.rs", "main.rs"));
        assert!(super::glob("a?c", "abc"));
        assert!(!super::glob("*.rs", "main.md"));
    }
}
