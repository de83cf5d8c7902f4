//! `blackbelt-bootstrap` and `blackbelt-maintain`: pi-materia's Blackbelt-Bootstrap and
//! Blackbelt-Maintain with jj alone (no git fallback), the version control of the bundled
//! parallel loadouts.
//!
//! - Bootstrap acts on the jj repository whose root is the cast's working directory; a git
//!   repository there without jj is made a colocated one (`jj git init --colocate`). When the
//!   working commit `@` holds changes, a fresh empty one is opened above it (`jj new`), so the
//!   earlier work is kept as a commit of its own; then the bookmark `blackbelt/<cast id>` is set
//!   at `@-`, the cast's baseline. Its state is `state.blackbeltBootstrap {ok, bookmark, root,
//!   base, initialized, moved}`.
//! - Maintain checkpoints one accepted work item where it runs (the lane's workspace in a lane,
//!   else the cast's directory): a non-empty `@` is described with the item's title (and its
//!   `context` as the body) and a fresh empty `@` is opened above it. Outside an owned jj
//!   workspace scope it carries the bootstrap's bookmark forward to the new commit; inside one
//!   (a lane spawned by `vcs.spawnJjWorkspace`) it sets no bookmark, since the lanes' commits
//!   reach the bookmark only through integration. Its state is `state.blackbeltMaintain {ok,
//!   commit, title, bookmark}`; `commit` is null when there was nothing to checkpoint.
//!
//! Both need `jj` on PATH: a loadout naming them is refused before its cast starts when it is
//! not ([`super::check_programs`]). A jj command that fails fails the socket with pi-materia's
//! failure shape (`satisfied: false`, the reason as `context`), which the cast keeps as its
//! reason.

use std::path::Path;

use serde_json::{Value, json};

use super::mime::{commit_message, failure, item_title};
use super::vcs::{Vcs, safe_name};

/// The bookmark a cast's work is published on: `blackbelt/` and the cast's id.
pub(crate) fn bookmark_for(cast: &str) -> String {
    format!("blackbelt/{}", safe_name(cast))
}

/// Whether jj's working commit in `dir` holds no changes.
fn working_copy_empty(jj: &Vcs<'_>, dir: &Path) -> Result<bool, String> {
    let empty = jj.run(dir, &["log", "--no-graph", "-r", "@", "-T", "empty"])?;
    Ok(empty == "true")
}

/// The commit id of `rev` in `dir`.
fn commit_of(jj: &Vcs<'_>, dir: &Path, rev: &str) -> Result<String, String> {
    jj.run(dir, &["log", "--no-graph", "-r", rev, "-T", "commit_id"])
}

/// `blackbelt-bootstrap`.
pub(crate) fn bootstrap(input: &Value, cwd: &Path, jj: &Vcs<'_>) -> Value {
    const NS: &str = "blackbeltBootstrap";
    bootstrap_in(input, cwd, jj).unwrap_or_else(|why| failure(NS, &why))
}

fn bootstrap_in(input: &Value, cwd: &Path, jj: &Vcs<'_>) -> Result<Value, String> {
    let initialized = match jj.run(cwd, &["root"]) {
        Ok(root) => {
            let same = std::fs::canonicalize(&root).ok() == std::fs::canonicalize(cwd).ok();
            if !same {
                return Err(format!(
                    "{} is inside the jj repository {root}, not its root; point --workdir at the repository to work in",
                    cwd.display()
                ));
            }
            false
        }
        Err(_) if cwd.join(".git").exists() => {
            jj.run(cwd, &["git", "init", "--colocate"])?;
            true
        }
        Err(_) => {
            return Err(format!(
                "{} is neither a jj nor a git repository; run `jj git init` there first",
                cwd.display()
            ));
        }
    };
    let moved = !working_copy_empty(jj, cwd)?;
    if moved {
        jj.run(cwd, &["new"])?;
    }
    let cast = input["castId"].as_str().unwrap_or("cast");
    let bookmark = bookmark_for(cast);
    jj.run(
        cwd,
        &[
            "bookmark",
            "set",
            &bookmark,
            "-r",
            "@-",
            "--allow-backwards",
        ],
    )?;
    let base = commit_of(jj, cwd, "@-")?;
    Ok(json!({
        "satisfied": true,
        "context": format!(
            "jj bookmark {bookmark} at {}{}",
            base.get(..12).unwrap_or(&base),
            if moved { " (the earlier work kept as its own commit)" } else { "" }
        ),
        "state": { "blackbeltBootstrap": {
            "ok": true,
            "bookmark": bookmark,
            "root": cwd.display().to_string(),
            "base": base,
            "initialized": initialized,
            "moved": moved,
        }},
    }))
}

/// `blackbelt-maintain`.
pub(crate) fn maintain(input: &Value, cwd: &Path, jj: &Vcs<'_>) -> Value {
    const NS: &str = "blackbeltMaintain";
    maintain_in(input, cwd, jj).unwrap_or_else(|why| failure(NS, &why))
}

fn maintain_in(input: &Value, cwd: &Path, jj: &Vcs<'_>) -> Result<Value, String> {
    let title = item_title(input);
    // An owned lane workspace checkpoints without a bookmark.
    let in_workspace = input["executionScope"]["exports"]["vcs"].as_str() == Some("jj");
    let bookmark = input
        .pointer("/state/blackbeltBootstrap/bookmark")
        .and_then(Value::as_str)
        .filter(|_| !in_workspace);
    if working_copy_empty(jj, cwd)? {
        return Ok(json!({
            "satisfied": true,
            "context": format!("nothing to checkpoint for {title:?}"),
            "state": { "blackbeltMaintain": {
                "ok": true, "commit": Value::Null, "title": title, "bookmark": Value::Null,
            }},
        }));
    }
    jj.run(cwd, &["describe", "-m", &commit_message(input, &title)])?;
    jj.run(cwd, &["new"])?;
    let commit = commit_of(jj, cwd, "@-")?;
    if let Some(bookmark) = bookmark {
        jj.run(cwd, &["bookmark", "set", bookmark, "-r", "@-"])?;
    }
    Ok(json!({
        "satisfied": true,
        "context": format!(
            "checkpointed {}{}: {title}",
            commit.get(..12).unwrap_or(&commit),
            bookmark.map(|b| format!(" on {b}")).unwrap_or_default()
        ),
        "state": { "blackbeltMaintain": {
            "ok": true, "commit": commit, "title": title, "bookmark": bookmark,
        }},
    }))
}

#[cfg(test)]
mod tests {
    use super::bookmark_for;

    #[test]
    fn a_bookmark_name_keeps_only_what_jj_accepts() {
        assert_eq!(bookmark_for("c1"), "blackbelt/c1");
        assert_eq!(bookmark_for("a b:c"), "blackbelt/a-b-c");
    }
}
