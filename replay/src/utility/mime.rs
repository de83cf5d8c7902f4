//! `mime-bootstrap` and `mime-maintain`: pi-materia's Mime-Bootstrap and Mime-Maintain with git
//! alone. Bootstrap puts the cast on a branch of its own (`mime/<cast id>`, created from the
//! current commit, or switched to when it exists); Maintain commits everything in the working
//! tree on that branch, once per accepted work item, with the item's title as the message.
//!
//! Both act only on a repository whose root is the cast's working directory (`--workdir`, or
//! the current directory): a directory inside some other repository is refused rather than
//! committed into, since the user did not point at that repository.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

/// A git command's stdout, or what went wrong, in words.
fn git(cwd: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(cwd)
        .output()
        .map_err(|e| format!("cannot run git ({e}); install git or drop the Mime materia"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A utility failure in pi-materia's shape (`satisfied: false`, `state.<ns>.ok: false`), which
/// fails the cast with `context` as its reason.
pub(super) fn failure(namespace: &str, context: &str) -> Value {
    json!({
        "satisfied": false,
        "context": context,
        "state": { namespace: { "ok": false } },
    })
}

/// Checks that `cwd` is the root of a git repository.
fn repository_root(cwd: &Path) -> Result<(), String> {
    let top = git(cwd, &["rev-parse", "--show-toplevel"]).map_err(|_| {
        format!(
            "{} is not a git repository; run `git init` there first",
            cwd.display()
        )
    })?;
    let same = std::fs::canonicalize(&top).ok() == std::fs::canonicalize(cwd).ok();
    if same {
        Ok(())
    } else {
        Err(format!(
            "{} is inside the git repository {top}, not its root; point --workdir at the repository to commit in",
            cwd.display()
        ))
    }
}

/// The branch name for a cast: `mime/` and the cast id, with anything git would refuse made `-`.
pub(crate) fn branch_for(cast: &str) -> String {
    let clean: String = cast
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("mime/{}", clean.trim_matches('.'))
}

/// `mime-bootstrap`.
pub(crate) fn bootstrap(input: &Value, cwd: &Path) -> Value {
    const NS: &str = "mimeBootstrap";
    if let Err(why) = repository_root(cwd) {
        return failure(NS, &why);
    }
    let cast = input
        .get("castId")
        .and_then(Value::as_str)
        .unwrap_or("cast");
    let branch = branch_for(cast);
    let base = git(cwd, &["rev-parse", "--abbrev-ref", "HEAD"]).unwrap_or_default();
    if git(cwd, &["rev-parse", "--verify", "--quiet", "HEAD"]).is_err() {
        return failure(
            NS,
            &format!(
                "the repository at {} has no commit yet; commit once so a branch can start there",
                cwd.display()
            ),
        );
    }
    let exists = git(
        cwd,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    )
    .is_ok();
    let switched = if base == branch {
        Ok(String::new())
    } else if exists {
        git(cwd, &["switch", &branch])
    } else {
        git(cwd, &["switch", "-c", &branch])
    };
    if let Err(why) = switched {
        return failure(NS, &why);
    }
    json!({
        "satisfied": true,
        "context": format!("working on git branch {branch} (from {base})"),
        "state": { NS: {
            "ok": true,
            "branchName": branch,
            "baseBranch": base,
            "created": !exists && base != branch,
            "root": cwd.display().to_string(),
        }},
    })
}

/// `mime-maintain`.
pub(crate) fn maintain(input: &Value, cwd: &Path) -> Value {
    const NS: &str = "mimeMaintain";
    if let Err(why) = repository_root(cwd) {
        return failure(NS, &why);
    }
    let Some(branch) = input
        .pointer("/state/mimeBootstrap/branchName")
        .and_then(Value::as_str)
    else {
        return failure(
            NS,
            "Mime-Maintain found no state.mimeBootstrap.branchName; place Mime-Bootstrap before it",
        );
    };
    match git(cwd, &["rev-parse", "--abbrev-ref", "HEAD"]) {
        Ok(current) if current == branch => {}
        Ok(current) => {
            return failure(
                NS,
                &format!(
                    "the repository is on {current}, not the cast's branch {branch}; switch back before going on"
                ),
            );
        }
        Err(why) => return failure(NS, &why),
    }
    let title = item_title(input);
    if let Err(why) = git(cwd, &["add", "--all"]) {
        return failure(NS, &why);
    }
    let staged = git(cwd, &["diff", "--cached", "--name-only"]).unwrap_or_default();
    if staged.is_empty() {
        return json!({
            "satisfied": true,
            "context": format!("nothing to commit for {title:?}"),
            "state": { NS: { "ok": true, "branch": branch, "commit": Value::Null, "title": title } },
        });
    }
    let message = commit_message(input, &title);
    if let Err(why) = git(cwd, &["commit", "--quiet", "--message", &message]) {
        return failure(NS, &why);
    }
    let commit = git(cwd, &["rev-parse", "HEAD"]).unwrap_or_default();
    json!({
        "satisfied": true,
        "context": format!("committed {} on {branch}: {title}", commit.get(..12).unwrap_or(&commit)),
        "state": { NS: {
            "ok": true,
            "branch": branch,
            "commit": commit,
            "title": title,
            "files": staged.lines().collect::<Vec<_>>(),
        }},
    })
}

/// The title a checkpoint of the work item is given: the item's `title`, else its label, else
/// one naming the cast.
pub(super) fn item_title(input: &Value) -> String {
    input
        .pointer("/item/title")
        .and_then(Value::as_str)
        .or_else(|| input.get("itemLabel").and_then(Value::as_str))
        .filter(|t| !t.trim().is_empty())
        .map_or_else(
            || format!("castlog cast {}", input["castId"].as_str().unwrap_or("")),
            str::to_owned,
        )
}

/// A checkpoint's message: the title, then the item's `context` as its body when it has one.
pub(super) fn commit_message(input: &Value, title: &str) -> String {
    let mut message = title.to_owned();
    if let Some(context) = input.pointer("/item/context").and_then(Value::as_str) {
        message.push_str("\n\n");
        message.push_str(context);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::branch_for;

    #[test]
    fn a_branch_name_keeps_only_what_git_accepts() {
        assert_eq!(
            branch_for("cast-2026-01-01T10-00-00"),
            "mime/cast-2026-01-01T10-00-00"
        );
        assert_eq!(branch_for("a b:c~d"), "mime/a-b-c-d");
    }
}
