//! pi-materia's bundled Parallel-Experimental loadout, unchanged, from the command line: with
//! `jj` on PATH (a stand-in that records what it is asked) Blackbelt-Bootstrap sets the cast's
//! bookmark, each lane works in a jj workspace of its own, Blackbelt-Maintain checkpoints every
//! accepted item there without a bookmark, the fan-in carries each lane's workspace to
//! Integrate-JJ-Workspaces, and Finalize-JJ-Workspace forgets them; without `jj` the loadout is
//! refused before anything is recorded.

use std::path::Path;

use serde_json::json;

use crate::common::{Sandbox, fixture, scripted};

/// A `jj` that logs `DIR|ARGS` per call and keeps just enough state to answer: `root` where a
/// `.jj` is, `-T empty` from whether a file changed since the last `describe`/`new`, and a
/// commit id for `-T commit_id`.
const FAKE_JJ: &str = r#"#!/bin/sh
line=$(printf '%s|%s' "$(pwd)" "$*" | tr '\n' ' ')
printf '%s\n' "$line" >> "$JJ_LOG"
case "$1" in
  root) if [ -d .jj ]; then pwd; else echo "Error: There is no jj repo in \".\"" >&2; exit 1; fi ;;
  git) mkdir -p .jj ;;
  new|describe) touch .jj-stamp ;;
  log) case "$*" in
      *"-T empty"*)
        if [ -e .jj-stamp ] && [ -z "$(find . -path ./.jj -prune -o -type f ! -name .jj-stamp -newer .jj-stamp -print)" ]; then echo true; else echo false; fi ;;
      *) echo "c0ffee$(basename "$(pwd)" | tr -c 'a-z0-9\n' '0')" ;;
    esac ;;
  workspace) if [ "$2" = add ]; then for last; do :; done; mkdir -p "$last"; fi ;;
esac
"#;

fn install_jj(sandbox: &Sandbox) -> (String, std::path::PathBuf) {
    let bin = sandbox.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let jj = bin.join("jj");
    std::fs::write(&jj, FAKE_JJ).unwrap();
    std::fs::set_permissions(&jj, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    (path, sandbox.path("jj-log"))
}

/// `castlog run` of a bundled parallel loadout as cast `pe` (with its script), with `PATH` set
/// to `path`.
fn run_pe(sandbox: &Sandbox, path: &str) -> std::process::Command {
    run_bundled(
        sandbox,
        path,
        "Parallel-Experimental",
        "parallel-experimental.jsonl",
    )
}

fn run_bundled(
    sandbox: &Sandbox,
    path: &str,
    loadout: &str,
    script: &str,
) -> std::process::Command {
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.args(["run", &fixture("pi-materia-default.json")])
        .args(["--loadout", loadout, "--task", "a greeting tool"])
        .args(["--cast", "pe", "--agent", &scripted(script)])
        .arg("--json")
        .env("PATH", path);
    cmd
}

fn calls(log: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| {
            let (dir, args) = l.split_once('|').unwrap();
            (dir.to_owned(), args.trim().to_owned())
        })
        .collect()
}

#[test]
fn the_bundled_parallel_experimental_runs_unchanged_against_jj() {
    let sandbox = Sandbox::new();
    let (path, log) = install_jj(&sandbox);
    let repo = sandbox.path("repo");
    std::fs::create_dir_all(repo.join(".jj")).unwrap();
    let mut cmd = run_pe(&sandbox, &path);
    cmd.args(["--workdir", repo.to_str().unwrap()])
        .env("JJ_LOG", &log);
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 0, "{}\n{}", run.stderr, run.stdout);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);

    let root = repo.canonicalize().unwrap().display().to_string();
    let workspace = |lane: &str| format!("{root}/.jj/castlog/workspaces/pe.lane-{lane}");
    let state = sandbox.run(&["state", "pe", "--json"]).json();
    let data = &state["data"];
    assert_eq!(
        data["blackbeltBootstrap"]["bookmark"], "blackbelt/pe",
        "{data}"
    );
    assert_eq!(data["blackbeltBootstrap"]["moved"], true, "{data}");
    // The fan-in carries each lane's workspace, in plan order.
    for (i, lane) in ["a", "b"].iter().enumerate() {
        let fan = &data["parallelFanIn"]["lanes"][i];
        assert_eq!(fan["scope"]["id"], format!("jj:pe.lane-{lane}"), "{fan}");
        assert_eq!(fan["exports"]["path"], workspace(lane), "{fan}");
        assert_eq!(
            data["jjIntegration"]["workspaces"][i]["workspace"],
            format!("pe.lane-{lane}"),
            "{data}"
        );
    }
    assert_eq!(
        data["jjFinalize"]["forgotten"],
        json!(["pe.lane-a", "pe.lane-b"]),
        "{data}"
    );
    // The lanes' tools wrote in their own workspaces.
    assert!(Path::new(&workspace("a")).join("flags.txt").is_file());
    assert!(Path::new(&workspace("a")).join("greet.1").is_file());
    assert!(Path::new(&workspace("b")).join("greet.sh").is_file());
    assert!(
        !repo.join("greet.sh").exists(),
        "nothing written in the base"
    );

    let calls = calls(&log);
    // One bookmark, set in the base at bootstrap; the lanes checkpoint without one.
    let bookmarks: Vec<_> = calls
        .iter()
        .filter(|(_, a)| a.starts_with("bookmark"))
        .collect();
    assert_eq!(
        bookmarks,
        [&(
            root.clone(),
            "bookmark set blackbelt/pe -r @- --allow-backwards".to_owned()
        )],
        "{calls:?}"
    );
    for (lane, titles) in [
        (
            "a",
            &["feat: parse the flags", "docs: write the man page"][..],
        ),
        ("b", &["feat: print the greeting"][..]),
    ] {
        let described: Vec<&str> = calls
            .iter()
            .filter(|(d, a)| *d == workspace(lane) && a.starts_with("describe -m "))
            .map(|(_, a)| a.as_str())
            .collect();
        assert_eq!(described.len(), titles.len(), "{calls:?}");
        for (said, title) in described.iter().zip(titles) {
            assert!(said.starts_with(&format!("describe -m {title}")), "{said}");
        }
    }
    let lane = sandbox.run(&["state", "pe.lane-b", "--json"]).json();
    let maintained = &lane["data"]["blackbeltMaintain"];
    assert_eq!(maintained["bookmark"], serde_json::Value::Null, "{lane}");
    assert_eq!(maintained["title"], "feat: print the greeting", "{lane}");
    assert!(
        maintained["commit"].as_str().is_some_and(|c| !c.is_empty()),
        "{lane}"
    );

    let verify = sandbox.run(&["verify", "--all", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}

#[test]
fn without_jj_the_bundled_parallel_loadout_is_refused_before_it_starts() {
    let sandbox = Sandbox::new();
    let empty = sandbox.path("no-programs");
    std::fs::create_dir(&empty).unwrap();
    let mut cmd = run_pe(&sandbox, empty.to_str().unwrap());
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "socket Socket-3 runs blackbelt-bootstrap.mjs, which needs the program `jj`, and jj is not found on PATH"
        ),
        "{}",
        run.stderr
    );
    assert_ne!(sandbox.run(&["show", "pe"]).code, 0, "nothing was recorded");
}

#[test]
fn the_bundled_parallel_interactive_plans_with_a_person_then_runs_its_lanes() {
    let sandbox = Sandbox::new();
    let (path, log) = install_jj(&sandbox);
    let repo = sandbox.path("repo");
    std::fs::create_dir_all(repo.join(".jj")).unwrap();
    let mut cmd = run_bundled(
        &sandbox,
        &path,
        "Parallel-Interactive",
        "parallel-interactive.jsonl",
    );
    cmd.args(["--workdir", repo.to_str().unwrap()])
        .env("JJ_LOG", &log);
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
    let show = sandbox.run(&["show", "pe", "--json"]).json();
    let kinds: Vec<&str> = show["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    // The plan was a conversation first: a draft, the person's continue, then the plan.
    let planned = kinds.iter().position(|k| *k == "lanes_planned").unwrap();
    let before = &kinds[..planned];
    assert!(
        before.contains(&"refinement_recorded") && before.contains(&"finalize_requested"),
        "{kinds:?}"
    );
    let state = sandbox.run(&["state", "pe", "--json"]).json();
    assert_eq!(
        state["data"]["jjFinalize"]["forgotten"],
        json!(["pe.lane-a", "pe.lane-b"]),
        "{state}"
    );
}
