//! The built-in utilities that give a cast (or a lane, which is a cast of its own) a working
//! copy of its own and bring it back: git worktrees, and pi-materia's jj workspaces.
//!
//! - `vcs.spawnGitWorktree` (`spawn-git-worktree`): in the git repository of the directory it
//!   runs in, adds a worktree on a branch of its own and activates it as the cast's execution
//!   scope (`scopeTransition` `replace`), exporting `{vcs: "git", branch, commit, path, base}`.
//!   The worktree is `<git common dir>/castlog/worktrees/<name>` (inside the repository's `.git`,
//!   so the main working tree's `git status` never shows it), on branch `castlog/<name>`, from
//!   `HEAD`; `<name>` is the cast's id, with the work item's key when the socket runs per item.
//!   `params.name`, `params.branch` and `params.base` choose otherwise. Run again (a `resume`
//!   after a crash) it finds the worktree it made and activates it again.
//! - `vcs.integrateGitWorktrees` (`integrate-git-worktrees`): for the git scope in force and
//!   every git scope export under `state.parallelFanIn` (lanes' fan-in), commits what changed in
//!   the worktree (unless `params.commit` is false), reports each branch and commit in
//!   `state.gitIntegration.lanes`, merges the branches into the cast's own directory when
//!   `params.merge` is true, and returns the cast to its base scope.
//! - `vcs.spawnJjWorkspace`, `vcs.integrateJjWorkspaces`, `vcs.finalizeJjWorkspace`: the same
//!   with `jj`: `jj workspace add` into `<repo>/.jj/castlog/workspaces/<name>`; the integration
//!   reports each workspace's `@` commit (`state.jjIntegration.workspaces`) and returns to the
//!   base scope; the finalization forgets the workspaces (`jj workspace forget`). They need `jj`
//!   on PATH: a loadout naming them is refused before its cast starts when it is not
//!   ([`super::check_programs`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::{failed, ok};
use crate::process::{self, Finished, Launcher};

/// One VCS program run: its trimmed stdout, or a sentence saying what failed.
pub(super) struct Vcs<'a> {
    program: &'static str,
    launcher: &'a Launcher,
    timeout: Duration,
    env: Vec<(String, String)>,
}

impl Vcs<'_> {
    pub(super) fn run(&self, dir: &Path, args: &[&str]) -> Result<String, String> {
        let mut argv = vec![self.program.to_owned()];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let said = argv.join(" ");
        match process::run(self.launcher, &argv, dir, &self.env, b"", self.timeout) {
            Err(err) => Err(format!("`{said}` in {}: {err}", dir.display())),
            Ok(done) if done.timed_out => Err(format!(
                "`{said}` in {} timed out after {:?}",
                dir.display(),
                self.timeout
            )),
            Ok(done) if done.code != Some(0) => Err(format!(
                "`{said}` in {} exited with {}: {}",
                dir.display(),
                done.code
                    .map_or_else(|| "a signal".to_owned(), |c| format!("code {c}")),
                done.stderr.trim()
            )),
            Ok(done) => Ok(done.stdout.trim().to_owned()),
        }
    }
}

/// A name safe in a ref and a path: letters, digits, `.`, `_` and `-`, others as `-`.
pub(super) fn safe_name(text: &str) -> String {
    let name: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_matches(['.', '-']).to_owned();
    if name.is_empty() { "cast".into() } else { name }
}

/// The worktree's or workspace's name: `params.name`, else the cast's id (with the item's key).
fn scope_name(input: &Value) -> String {
    if let Some(name) = input.pointer("/params/name").and_then(Value::as_str) {
        return safe_name(name);
    }
    let cast = input["castId"].as_str().unwrap_or("cast");
    match input["itemKey"].as_str() {
        Some(item) => safe_name(&format!("{cast}-{item}")),
        None => safe_name(cast),
    }
}

fn param<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input
        .pointer(&format!("/params/{key}"))
        .and_then(Value::as_str)
}

/// The git scope exports a utility integrates: the scope in force, then each one found under
/// `state.parallelFanIn` (in order), each branch once.
fn exports_of(input: &Value, vcs: &str) -> Vec<Value> {
    fn walk(value: &Value, vcs: &str, found: &mut Vec<Value>) {
        match value {
            Value::Object(map) => {
                if map.get("vcs").and_then(Value::as_str) == Some(vcs) && map.contains_key("path") {
                    found.push(value.clone());
                    return;
                }
                map.values().for_each(|v| walk(v, vcs, found));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, vcs, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(&input["executionScope"]["exports"], vcs, &mut found);
    walk(&input["state"]["parallelFanIn"], vcs, &mut found);
    let key = if vcs == "git" { "branch" } else { "workspace" };
    let mut seen = std::collections::BTreeSet::new();
    found.retain(|e| seen.insert(e[key].to_string()));
    found
}

fn git<'a>(launcher: &'a Launcher, timeout: Duration) -> Vcs<'a> {
    Vcs {
        program: "git",
        launcher,
        timeout,
        env: Vec::new(),
    }
}

pub(super) fn jj<'a>(launcher: &'a Launcher, timeout: Duration) -> Vcs<'a> {
    Vcs {
        program: "jj",
        launcher,
        timeout,
        env: Vec::new(),
    }
}

fn done(result: Result<Value, String>, utility: &str) -> Finished {
    match result {
        Ok(out) => ok(out.to_string()),
        Err(why) => failed(format!("{utility}: {why}")),
    }
}

/// `spawn-git-worktree` (see the module documentation).
pub(super) fn spawn_git_worktree(
    input: &Value,
    cwd: &Path,
    launcher: &Launcher,
    timeout: Duration,
) -> Finished {
    done(
        spawn_git(input, cwd, &git(launcher, timeout)),
        "vcs.spawnGitWorktree",
    )
}

fn spawn_git(input: &Value, cwd: &Path, git: &Vcs<'_>) -> Result<Value, String> {
    git.run(cwd, &["rev-parse", "--show-toplevel"])
        .map_err(|e| format!("{} is not in a git repository ({e})", cwd.display()))?;
    let common = PathBuf::from(git.run(cwd, &["rev-parse", "--git-common-dir"])?);
    let common = cwd.join(common);
    let common = common.canonicalize().unwrap_or(common);
    let name = scope_name(input);
    let branch = param(input, "branch").map_or_else(|| format!("castlog/{name}"), str::to_owned);
    let path = common.join("castlog").join("worktrees").join(&name);
    let path_text = path.display().to_string();
    let base = param(input, "base").unwrap_or("HEAD");
    let base_commit = git.run(
        cwd,
        &["rev-parse", "--verify", &format!("{base}^{{commit}}")],
    )?;
    if path.exists() {
        let on = git.run(&path, &["rev-parse", "--abbrev-ref", "HEAD"])?;
        if on != branch {
            return Err(format!(
                "{path_text} exists and is on {on}, not {branch}: remove it (`git worktree remove`) or give params.name"
            ));
        }
    } else {
        let exists = git
            .run(
                cwd,
                &[
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    &format!("refs/heads/{branch}"),
                ],
            )
            .is_ok();
        if exists {
            git.run(cwd, &["worktree", "add", &path_text, &branch])?;
        } else {
            git.run(
                cwd,
                &["worktree", "add", "-b", &branch, &path_text, &base_commit],
            )?;
        }
    }
    let commit = git.run(&path, &["rev-parse", "HEAD"])?;
    let exports = json!({
        "vcs": "git", "branch": branch, "commit": commit, "path": path_text, "base": base_commit,
    });
    Ok(json!({
        "scopeTransition": { "kind": "replace", "scope": {
            "id": format!("git:{branch}"), "cwd": path_text, "exports": exports,
        }},
        "state": { "gitWorktree": { "ok": true, "branch": branch, "commit": commit, "path": path_text } },
    }))
}

/// `integrate-git-worktrees` (see the module documentation).
pub(super) fn integrate_git_worktrees(
    input: &Value,
    launcher: &Launcher,
    timeout: Duration,
) -> Finished {
    done(
        integrate_git(input, git(launcher, timeout)),
        "vcs.integrateGitWorktrees",
    )
}

fn integrate_git(input: &Value, mut git: Vcs<'_>) -> Result<Value, String> {
    let lanes = exports_of(input, "git");
    if lanes.is_empty() {
        return Err(
            "no git worktree scope to integrate (run vcs.spawnGitWorktree first, or fan lanes in)"
                .into(),
        );
    }
    let commit_changes = input.pointer("/params/commit") != Some(&Value::Bool(false));
    let merge = input.pointer("/params/merge") == Some(&Value::Bool(true));
    let base = PathBuf::from(input["baseScope"]["cwd"].as_str().unwrap_or("."));
    let message = format!(
        "castlog {}: {}",
        input["castId"].as_str().unwrap_or_default(),
        input["socketId"].as_str().unwrap_or_default()
    );
    let mut reported = Vec::new();
    for lane in &lanes {
        let path = PathBuf::from(lane["path"].as_str().unwrap_or_default());
        let branch = lane["branch"].as_str().unwrap_or_default().to_owned();
        let mut committed = false;
        if commit_changes && !git.run(&path, &["status", "--porcelain"])?.is_empty() {
            git.run(&path, &["add", "-A"])?;
            // A repository without an identity still gets a commit, by castlog.
            git.env = if git.run(&path, &["config", "user.email"]).is_err() {
                ["AUTHOR", "COMMITTER"]
                    .iter()
                    .flat_map(|who| {
                        [
                            (format!("GIT_{who}_NAME"), "castlog".to_owned()),
                            (format!("GIT_{who}_EMAIL"), "castlog@localhost".to_owned()),
                        ]
                    })
                    .collect()
            } else {
                Vec::new()
            };
            git.run(&path, &["commit", "-q", "-m", &message])?;
            committed = true;
        }
        let commit = git.run(&path, &["rev-parse", "HEAD"])?;
        reported.push(json!({
            "branch": branch, "commit": commit, "path": lane["path"], "committed": committed,
        }));
    }
    if merge {
        for lane in &reported {
            let branch = lane["branch"].as_str().unwrap_or_default();
            git.run(&base, &["merge", "--no-edit", "-q", branch])?;
        }
    }
    Ok(json!({
        "scopeTransition": { "kind": "base" },
        "state": { "gitIntegration": { "ok": true, "lanes": reported, "merged": merge } },
    }))
}

/// `spawn-jj-workspace` (see the module documentation).
pub(super) fn spawn_jj_workspace(
    input: &Value,
    cwd: &Path,
    launcher: &Launcher,
    timeout: Duration,
) -> Finished {
    done(
        spawn_jj(input, cwd, &jj(launcher, timeout)),
        "vcs.spawnJjWorkspace",
    )
}

fn spawn_jj(input: &Value, cwd: &Path, jj: &Vcs<'_>) -> Result<Value, String> {
    let root = PathBuf::from(jj.run(cwd, &["root"])?);
    let name = scope_name(input);
    let path = root
        .join(".jj")
        .join("castlog")
        .join("workspaces")
        .join(&name);
    let path_text = path.display().to_string();
    if !path.exists() {
        let mut args = vec!["workspace", "add", "--name", name.as_str()];
        if let Some(base) = param(input, "base") {
            args.extend(["-r", base]);
        }
        args.push(&path_text);
        jj.run(&root, &args)?;
    }
    let commit = jj.run(
        &root,
        &[
            "log",
            "--no-graph",
            "-r",
            &format!("{name}@"),
            "-T",
            "commit_id",
        ],
    )?;
    let exports = json!({ "vcs": "jj", "workspace": name, "commit": commit, "path": path_text });
    Ok(json!({
        "scopeTransition": { "kind": "replace", "scope": {
            "id": format!("jj:{name}"), "cwd": path_text, "exports": exports,
        }},
        "state": { "jjWorkspace": { "ok": true, "workspace": name, "commit": commit, "path": path_text } },
    }))
}

/// `integrate-jj-workspaces` (see the module documentation).
pub(super) fn integrate_jj_workspaces(
    input: &Value,
    launcher: &Launcher,
    timeout: Duration,
) -> Finished {
    done(
        integrate_jj(input, &jj(launcher, timeout)),
        "vcs.integrateJjWorkspaces",
    )
}

fn integrate_jj(input: &Value, jj: &Vcs<'_>) -> Result<Value, String> {
    let lanes = exports_of(input, "jj");
    if lanes.is_empty() {
        return Err(
            "no jj workspace scope to integrate (run vcs.spawnJjWorkspace first, or fan lanes in)"
                .into(),
        );
    }
    let base = PathBuf::from(input["baseScope"]["cwd"].as_str().unwrap_or("."));
    let mut reported = Vec::new();
    for lane in &lanes {
        let name = lane["workspace"].as_str().unwrap_or_default();
        let commit = jj.run(
            &base,
            &[
                "log",
                "--no-graph",
                "-r",
                &format!("{name}@"),
                "-T",
                "commit_id",
            ],
        )?;
        reported.push(json!({ "workspace": name, "commit": commit, "path": lane["path"] }));
    }
    Ok(json!({
        "scopeTransition": { "kind": "base" },
        "state": { "jjIntegration": { "ok": true, "workspaces": reported } },
    }))
}

/// `finalize-jj-workspace` (see the module documentation).
pub(super) fn finalize_jj_workspace(
    input: &Value,
    launcher: &Launcher,
    timeout: Duration,
) -> Finished {
    done(
        finalize_jj(input, &jj(launcher, timeout)),
        "vcs.finalizeJjWorkspace",
    )
}

fn finalize_jj(input: &Value, jj: &Vcs<'_>) -> Result<Value, String> {
    let base = PathBuf::from(input["baseScope"]["cwd"].as_str().unwrap_or("."));
    let mut names: Vec<String> = input
        .pointer("/state/jjIntegration/workspaces")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|w| w["workspace"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if names.is_empty() {
        names = exports_of(input, "jj")
            .iter()
            .filter_map(|w| w["workspace"].as_str().map(str::to_owned))
            .collect();
    }
    for name in &names {
        jj.run(&base, &["workspace", "forget", name])?;
    }
    Ok(json!({
        "scopeTransition": { "kind": "base" },
        "state": { "jjFinalize": { "ok": true, "forgotten": names } },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_in_refs_and_paths() {
        assert_eq!(safe_name("cast 1/WI-2"), "cast-1-WI-2");
        assert_eq!(safe_name("../x"), "x");
        assert_eq!(safe_name("///"), "cast");
        let input = json!({"castId": "c1", "itemKey": "WI-1", "params": {}});
        assert_eq!(scope_name(&input), "c1-WI-1");
        let named = json!({"castId": "c1", "params": {"name": "lane a"}});
        assert_eq!(scope_name(&named), "lane-a");
    }

    #[test]
    fn exports_come_from_the_scope_then_the_fan_in_each_once() {
        let lane = |b: &str| json!({"vcs": "git", "branch": b, "path": format!("/w/{b}")});
        let input = json!({
            "executionScope": {"exports": lane("a")},
            "state": {"parallelFanIn": {"lanes": [{"exports": lane("b")}, {"exports": lane("a")},
                {"exports": {"vcs": "jj", "workspace": "j", "path": "/j"}}]}},
        });
        let found: Vec<_> = exports_of(&input, "git")
            .iter()
            .map(|e| e["branch"].clone())
            .collect();
        assert_eq!(found, vec![json!("a"), json!("b")]);
        assert_eq!(exports_of(&input, "jj").len(), 1);
    }
}
