//! Running utility sockets: a command (no shell), a fixed output, or a built-in: an equivalent
//! of pi-materia's shipped scripts (`ensure-ignored`, `detect-vcs`, also named by the aliases
//! `project.ensureIgnored` and `vcs.detect`), its aliases `echo` (prints the socket's
//! `params` as JSON) and `noop` (prints `{}`), or one of the scope utilities (`vcs.*` git
//! worktrees and jj workspaces, in `vcs`). The result becomes a `utility_finished` event, so
//! replay never runs a utility again. Commit-Sigil (`commit-sigil`, [`sigil`]) and
//! Mime-Bootstrap / Mime-Maintain (`mime-bootstrap`, `mime-maintain`, [`mime`]) have
//! built-ins too, and so have the jj-based Blackbelt-Bootstrap / Blackbelt-Maintain of the
//! bundled parallel loadouts (`blackbelt-bootstrap`, `blackbelt-maintain`, [`blackbelt`]).

mod blackbelt;
mod mime;
pub mod shipped;
mod sigil;

use std::path::Path;
use std::time::Duration;

use castlog_core::id::SocketId;
use castlog_core::loadout::{Exec, Loadout, SocketKind, UtilitySpec};
use castlog_core::machine::CastState;
use serde_json::{Value, json};

use crate::process::{self, Finished, Launcher};

mod vcs;

/// The built-in utilities that run a program, by built-in name: the alias a loadout names it
/// by and the program it needs on PATH.
const NEEDS: &[(&str, &str, &str)] = &[
    ("spawn-git-worktree", "vcs.spawnGitWorktree", "git"),
    (
        "integrate-git-worktrees",
        "vcs.integrateGitWorktrees",
        "git",
    ),
    ("spawn-jj-workspace", "vcs.spawnJjWorkspace", "jj"),
    ("integrate-jj-workspaces", "vcs.integrateJjWorkspaces", "jj"),
    ("finalize-jj-workspace", "vcs.finalizeJjWorkspace", "jj"),
    ("blackbelt-bootstrap", "blackbelt-bootstrap.mjs", "jj"),
    ("blackbelt-maintain", "blackbelt-maintain.mjs", "jj"),
];

/// A built-in utility of a loadout needs a program that is not on PATH.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "loadout {loadout:?}: socket {socket} runs {utility}, which needs the program `{program}`, and {program} is not found on PATH: install {program}, or give the materia a `command` instead"
)]
pub struct MissingProgram {
    /// The loadout's name.
    pub loadout: String,
    /// The socket whose utility needs it.
    pub socket: SocketId,
    /// The utility as the loadout names it (`vcs.spawnJjWorkspace`).
    pub utility: &'static str,
    /// The program (`jj`).
    pub program: &'static str,
}

/// Checks, before a cast of `loadout` starts, that every program its built-in utilities run
/// (`git` for the worktree utilities, `jj` for pi-materia's jj workspaces) is on PATH; the
/// first socket whose program is missing is named.
pub fn check_programs(loadout: &Loadout) -> Result<(), MissingProgram> {
    // In the sockets' natural order (Socket-3 before Socket-11), so the one named is the first
    // a reader of the config finds.
    let mut missing: Vec<MissingProgram> = Vec::new();
    for (id, socket) in &loadout.sockets {
        let SocketKind::Utility(spec) = &socket.kind else {
            continue;
        };
        let Exec::Builtin { name } = &spec.exec else {
            continue;
        };
        if let Some((_, utility, program)) = NEEDS.iter().find(|(n, _, _)| n == name)
            && process::locate(program, Path::new("/")).is_err()
        {
            missing.push(MissingProgram {
                loadout: loadout.name.clone(),
                socket: id.clone(),
                utility,
                program,
            });
        }
    }
    match missing
        .into_iter()
        .min_by(|a, b| natural(a.socket.as_str()).cmp(&natural(b.socket.as_str())))
    {
        Some(first) => Err(first),
        None => Ok(()),
    }
}

/// A sort key that orders a trailing number by its value: `("Socket-", 3)` before
/// `("Socket-", 11)`.
fn natural(id: &str) -> (&str, u64, &str) {
    let stem = id.trim_end_matches(|c: char| c.is_ascii_digit());
    let number = id[stem.len()..].parse().unwrap_or(0);
    (stem, number, id)
}

/// The JSON line a utility reads on stdin (the reference's field set): `cwd` is where it runs
/// (the execution scope's directory, else the cast's), `baseScope` the cast's own directory
/// (`base`).
pub fn input(state: &CastState, cwd: &Path, base: &Path) -> Value {
    let current = state.current.as_ref();
    let socket = state.current_socket();
    let cwd = cwd.display().to_string();
    let base_scope =
        json!({ "id": format!("cast:{}:base", state.cast), "cwd": base.display().to_string() });
    let scope = match &state.scope {
        Some(active) => {
            let mut scope = json!({ "id": active.id, "cwd": cwd });
            if let Some(s) = &active.state {
                scope["state"] = s.clone();
            }
            if let Some(e) = &active.exports {
                scope["exports"] = e.clone();
            }
            scope
        }
        None => json!({ "id": format!("cast:{}:base", state.cast), "cwd": cwd }),
    };
    let cursor = current
        .and_then(|c| state.loadout.socket(&c.socket).map(|_| &c.socket))
        .and_then(|s| {
            let source = state
                .loadout
                .socket(s)
                .and_then(|sock| sock.foreach.clone())
                .or_else(|| state.loadout.loops_of(s).next().map(|l| l.iterator.clone()))?;
            let index = state.cursors.get(&source.cursor).copied().unwrap_or(0);
            Some(json!({ "name": source.cursor, "index": index }))
        });
    json!({
        "cwd": cwd,
        "executionScope": scope,
        "baseScope": base_scope,
        "runDir": Value::Null,
        "request": state.request,
        "castId": state.cast,
        "socketId": current.map(|c| c.socket.to_string()),
        "materiaId": socket.map(|s| s.materia.to_string()),
        "materiaLabel": socket.map(|s| s.label.clone()),
        "params": match socket.map(|s| &s.kind) {
            Some(castlog_core::loadout::SocketKind::Utility(u)) => u.params.clone(),
            _ => Value::Null,
        },
        "state": state.data,
        "item": if current.and_then(|c| c.item.as_ref()).is_some() { state.data.get("item").cloned().unwrap_or(Value::Null) } else { Value::Null },
        "itemKey": current.and_then(|c| c.item.as_ref().map(ToString::to_string)),
        "itemLabel": current.and_then(|c| c.item_label.clone()),
        "cursor": cursor.unwrap_or(Value::Null),
        "cursors": state.cursors,
    })
}

fn timeout(spec: &UtilitySpec) -> Duration {
    Duration::from_millis(spec.timeout_ms)
}

fn ok(stdout: String) -> Finished {
    Finished {
        code: Some(0),
        timed_out: false,
        stdout,
        stderr: String::new(),
        truncated: false,
        stdout_truncated: false,
        stdout_lost: false,
        cancelled: false,
    }
}

fn failed(message: String) -> Finished {
    Finished {
        code: Some(1),
        timed_out: false,
        stdout: String::new(),
        stderr: message,
        truncated: false,
        stdout_truncated: false,
        stdout_lost: false,
        cancelled: false,
    }
}

/// Runs one utility socket; a command is started by `launcher`.
pub fn run(spec: &UtilitySpec, input: &Value, cwd: &Path, launcher: &Launcher) -> Finished {
    if !matches!(spec.exec, Exec::Output { .. }) && !cwd.is_dir() {
        return failed(format!(
            "the directory it runs in, {}, does not exist (the cast's working directory, or the execution scope's in force)",
            cwd.display()
        ));
    }
    match &spec.exec {
        Exec::Output { output } => ok(match output {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        }),
        Exec::Command { argv } => run_argv(argv, spec, input, cwd, launcher),
        Exec::Shipped { .. } => {
            let socket = input["socketId"].as_str().unwrap_or_default();
            match shipped::ready(&SocketId::new(socket), spec, launcher) {
                Ok(Some(argv)) => run_argv(&argv, spec, input, cwd, launcher),
                Ok(None) => failed("not a shipped script".into()),
                Err(err) => failed(err.to_string()),
            }
        }
        Exec::Builtin { name } => match name.as_str() {
            "ensure-ignored" => ensure_ignored(input, cwd),
            "detect-vcs" => ok(detect_vcs(cwd).to_string()),
            "echo" => ok(match input.get("params") {
                Some(params @ Value::Object(_)) => params.to_string(),
                _ => "{}".to_owned(),
            }),
            "noop" => ok("{}".to_owned()),
            "spawn-git-worktree" => vcs::spawn_git_worktree(input, cwd, launcher, timeout(spec)),
            "integrate-git-worktrees" => {
                vcs::integrate_git_worktrees(input, launcher, timeout(spec))
            }
            "spawn-jj-workspace" => vcs::spawn_jj_workspace(input, cwd, launcher, timeout(spec)),
            "integrate-jj-workspaces" => {
                vcs::integrate_jj_workspaces(input, launcher, timeout(spec))
            }
            "finalize-jj-workspace" => vcs::finalize_jj_workspace(input, launcher, timeout(spec)),
            "commit-sigil" => ok(sigil::run(input).to_string()),
            "mime-bootstrap" => ok(mime::bootstrap(input, cwd).to_string()),
            "mime-maintain" => ok(mime::maintain(input, cwd).to_string()),
            "blackbelt-bootstrap" => {
                ok(blackbelt::bootstrap(input, cwd, &vcs::jj(launcher, timeout(spec))).to_string())
            }
            "blackbelt-maintain" => {
                ok(blackbelt::maintain(input, cwd, &vcs::jj(launcher, timeout(spec))).to_string())
            }
            other => failed(format!("castlog has no built-in utility named {other:?}")),
        },
    }
}

/// Runs `argv` with the utility's JSON line on stdin and its timeout.
fn run_argv(
    argv: &[String],
    spec: &UtilitySpec,
    input: &Value,
    cwd: &Path,
    launcher: &Launcher,
) -> Finished {
    let mut line = serde_json::to_vec(input).unwrap_or_default();
    line.push(b'\n');
    match process::run(launcher, argv, cwd, &[], &line, timeout(spec)) {
        Ok(done) => done,
        Err(err) => failed(err.to_string()),
    }
}

/// `ensure-ignored`: makes sure each of `params.patterns` is a line of `<cwd>/.gitignore` (the
/// cast's working directory; nothing above it is looked at).
fn ensure_ignored(input: &Value, cwd: &Path) -> Finished {
    let patterns: Vec<String> = input
        .pointer("/params/patterns")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let file = cwd.join(".gitignore");
    let existing = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return failed(format!("cannot read {}: {e}", file.display())),
    };
    let present: Vec<&str> = existing.lines().map(str::trim).collect();
    let added: Vec<String> = patterns
        .iter()
        .filter(|p| !present.contains(&p.as_str()))
        .cloned()
        .collect();
    if !added.is_empty() {
        let mut text = existing.clone();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        for p in &added {
            text.push_str(p);
            text.push('\n');
        }
        if let Err(e) = std::fs::write(&file, text) {
            return failed(format!("cannot write {}: {e}", file.display()));
        }
    }
    ok(json!({
        "state": { "artifactIgnore": {
            "ok": true,
            "file": ".gitignore",
            "patterns": patterns,
            "added": added,
        }}
    })
    .to_string())
}

/// `detect-vcs`: the nearest jj or git root above `cwd`, and which tools are on PATH.
fn detect_vcs(cwd: &Path) -> Value {
    let root_with = |marker: &str| {
        cwd.ancestors()
            .find(|dir| dir.join(marker).exists())
            .map(|d| d.display().to_string())
    };
    let on_path = |tool: &str| {
        std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
    };
    let jj_root = root_with(".jj");
    let git_root = root_with(".git");
    let (kind, root) = match (&jj_root, &git_root) {
        (Some(r), _) => ("jj", Some(r.clone())),
        (None, Some(r)) => ("git", Some(r.clone())),
        (None, None) => ("none", None),
    };
    json!({
        "state": { "vcs": {
            "ok": true,
            "kind": kind,
            "root": root,
            "jjAvailable": on_path("jj"),
            "gitAvailable": on_path("git"),
        }}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ensure_ignored_adds_missing_patterns_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".gitignore"), "target").unwrap();
        let input = json!({"params": {"patterns": ["target", ".castlog/"]}});
        let first = ensure_ignored(&input, dir.path());
        assert_eq!(first.code, Some(0));
        let out: Value = serde_json::from_str(&first.stdout).unwrap();
        assert_eq!(
            out["state"]["artifactIgnore"]["added"],
            json!([".castlog/"])
        );
        let again = ensure_ignored(&input, dir.path());
        let out: Value = serde_json::from_str(&again.stdout).unwrap();
        assert_eq!(out["state"]["artifactIgnore"]["added"], json!([]));
        let text = std::fs::read_to_string(dir.path().join(".gitignore")).unwrap();
        assert_eq!(text, "target\n.castlog/\n");
    }

    #[test]
    fn detect_vcs_finds_the_nearest_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
        let out = detect_vcs(&dir.path().join("sub/deeper"));
        assert_eq!(out["state"]["vcs"]["kind"], "git");
        assert_eq!(
            out["state"]["vcs"]["root"],
            dir.path().display().to_string()
        );
    }
}
