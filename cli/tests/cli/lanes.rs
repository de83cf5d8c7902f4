//! Parallel lanes from the command line: a parallel loadout runs to completion with a scripted
//! agent, a failed lane is revived alone, `abort` stops the lanes, a run killed with SIGKILL
//! while four lanes run is finished by `resume` (every lane completes, no socket visit twice),
//! and `verify --all` checks lanes with their parent.

use std::process::Stdio;

use serde_json::Value;

use crate::common::{Sandbox, fixture, git, scripted, with_git_identity};

const CONFIG: &str = "loadouts/lanes.json";

fn events(sandbox: &Sandbox, cast: &str) -> Vec<Value> {
    let show = sandbox.run(&["show", cast, "--json"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    show.json()["events"].as_array().unwrap().clone()
}

/// The events of `kind` that `show` lists of `cast` (its own).
fn own<'a>(events: &'a [Value], cast: &str, kind: &str) -> Vec<&'a Value> {
    let _ = cast;
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// `(socket, visit)` of every completion of `cast` itself.
fn completions(sandbox: &Sandbox, cast: &str) -> Vec<(String, u64)> {
    own(&events(sandbox, cast), cast, "socket_completed")
        .iter()
        .map(|e| {
            (
                e["payload"]["socket"].as_str().unwrap().to_owned(),
                e["payload"]["visit"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn head(sandbox: &Sandbox, cast: &str) -> Value {
    let casts = sandbox.run(&["casts", "--json"]).json();
    casts["casts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cast"] == cast)
        .unwrap_or_else(|| panic!("no cast {cast}: {casts}"))
        .clone()
}

fn run(sandbox: &Sandbox, config: &str, script: &str, cast: &str) -> Value {
    let run = sandbox.run(&[
        "run",
        config,
        "--task",
        "write a greeting tool",
        "--cast",
        cast,
        "--agent",
        &scripted(script),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()
}

#[test]
fn a_parallel_loadout_runs_to_completion_with_a_scripted_agent() {
    let sandbox = Sandbox::new();
    let done = run(&sandbox, &fixture(CONFIG), "lanes.jsonl", "par");
    assert_eq!(done["status"], "completed", "{done}");
    for lane in ["par.lane-a", "par.lane-b"] {
        let h = head(&sandbox, lane);
        assert_eq!(h["status"], "completed", "{h}");
    }
    let parent = events(&sandbox, "par");
    let fan_in = own(&parent, "par", "data_assigned")
        .into_iter()
        .find(|e| e["payload"]["path"] == "parallelFanIn")
        .unwrap();
    let lanes = fan_in["payload"]["value"]["lanes"].as_array().unwrap();
    assert_eq!(lanes.len(), 2);
    assert_eq!(lanes[1]["workItemIndexes"], serde_json::json!([1, 3]));
    let verify = sandbox.run(&["verify", "--all", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);

    // Watching: state shows the lanes and a lane its place; export writes a folder per lane.
    let state = sandbox.run(&["state", "par", "--json"]).json();
    assert_eq!(state["lanes"]["plan"][1]["cast"], "par.lane-b", "{state}");
    assert_eq!(
        state["lanes"]["joined"][0]["status"], "completed",
        "{state}"
    );
    let lane = sandbox.run(&["state", "par.lane-a", "--json"]).json();
    assert_eq!(lane["lane"]["items"], serde_json::json!([0, 2]), "{lane}");
    let dir = sandbox.path("art");
    let export = sandbox.run(&["export", "par", "--artifacts", dir.to_str().unwrap()]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    for lane in ["a", "b"] {
        let manifest = dir.join("lanes").join(lane).join("manifest.json");
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(text.contains(&format!("par.lane-{lane}")), "{text}");
    }
}

#[test]
fn git_worktree_lanes_each_work_on_a_branch_and_the_parent_merges_them() {
    let sandbox = Sandbox::new();
    let repo = sandbox.path("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch", "main"]);
    git(
        &repo,
        &["commit", "--quiet", "--allow-empty", "--message", "init"],
    );
    let mut cmd = sandbox.command_on(&sandbox.db());
    with_git_identity(&mut cmd)
        .args([
            "run",
            &fixture("loadouts/lanes-git.json"),
            "--task",
            "greet",
        ])
        .args([
            "--cast",
            "gl",
            "--agent",
            &scripted("lanes-git.jsonl"),
            "--json",
        ])
        .arg("--workdir")
        .arg(&repo);
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);

    let state = sandbox.run(&["state", "gl", "--json"]).json();
    let data = &state["data"];
    for (i, lane) in ["a", "b"].iter().enumerate() {
        let fan = &data["parallelFanIn"]["lanes"][i];
        assert_eq!(fan["exports"]["vcs"], "git", "{fan}");
        assert_eq!(
            fan["exports"]["branch"],
            format!("castlog/gl.lane-{lane}"),
            "{fan}"
        );
        assert_eq!(
            data["gitIntegration"]["lanes"][i]["branch"],
            format!("castlog/gl.lane-{lane}"),
            "{data}"
        );
    }
    // Each lane wrote on its own branch, and the parent merged both into its directory.
    assert_eq!(
        git(&repo, &["show", "castlog/gl.lane-a:greet.txt"]),
        "hello"
    );
    assert_eq!(
        git(&repo, &["show", "castlog/gl.lane-b:bye.txt"]),
        "goodbye"
    );
    assert!(
        git(&repo, &["ls-tree", "--name-only", "castlog/gl.lane-a"])
            .lines()
            .all(|f| f != "bye.txt"),
        "lane a never saw lane b's file"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("greet.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("bye.txt")).unwrap(),
        "goodbye\n"
    );
    assert!(
        git(&repo, &["log", "--format=%s", "main"]).contains("Merge branch 'castlog/gl.lane-b'"),
        "{}",
        git(&repo, &["log", "--format=%s", "main"])
    );
    let verify = sandbox.run(&["verify", "--all", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}

#[test]
fn a_failed_lane_fails_the_parent_and_revive_re_runs_only_that_lane() {
    let sandbox = Sandbox::new();
    let failed = run(&sandbox, &fixture(CONFIG), "lanes-revive.jsonl", "par");
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("lane b (par.lane-b) failed"),
        "{failed}"
    );
    assert_eq!(head(&sandbox, "par.lane-a")["status"], "completed");
    assert_eq!(head(&sandbox, "par.lane-b")["status"], "failed");
    let a_before = head(&sandbox, "par.lane-a");

    let revived = sandbox.run(&[
        "revive",
        "par",
        "--agent",
        &scripted("lanes-revive.jsonl"),
        "--json",
    ]);
    assert_eq!(revived.code, 0, "{}", revived.stderr);
    assert_eq!(revived.json()["status"], "completed", "{}", revived.stdout);
    // The completed lane was not run again: its chain is what it was.
    assert_eq!(head(&sandbox, "par.lane-a"), a_before);
    let b = events(&sandbox, "par.lane-b");
    assert_eq!(own(&b, "par.lane-b", "cast_revived").len(), 1);
    assert_eq!(head(&sandbox, "par.lane-b")["status"], "completed");
    assert_eq!(
        own(&events(&sandbox, "par"), "par", "lanes_joined").len(),
        2
    );
    let verify = sandbox.run(&["verify", "--all", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}

#[test]
fn abort_of_a_parent_stops_its_lanes() {
    let sandbox = Sandbox::new();
    // The script ends after the plan: the lanes wait for answers.
    let plan = crate::common::fixture_lines("scripts/lanes.jsonl")
        .into_iter()
        .next()
        .unwrap();
    let script = sandbox.write("plan-only.jsonl", &format!("{plan}\n"));
    let run = sandbox.run(&[
        "run",
        &fixture(CONFIG),
        "--task",
        "t",
        "--cast",
        "par",
        "--agent",
        &format!("scripted:{script}"),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "awaiting_agent", "{}", run.stdout);
    let abort = sandbox.run(&["abort", "par", "--reason", "enough"]);
    assert_eq!(abort.code, 0, "{}", abort.stderr);
    assert!(
        abort.stdout.contains("par.lane-a, par.lane-b"),
        "{}",
        abort.stdout
    );
    for cast in ["par", "par.lane-a", "par.lane-b"] {
        assert_eq!(head(&sandbox, cast)["status"], "aborted", "{cast}");
    }
}

/// A `castlog run` killed with SIGKILL while four lanes wait on a slow `cmd:` agent is
/// finished by `resume`: every lane completes, no socket visit completes twice in any lane,
/// and `verify --all` is ok.
#[test]
fn a_run_killed_while_four_lanes_run_is_finished_by_resume() {
    use std::os::unix::process::CommandExt;

    let sandbox = Sandbox::new();
    let text = std::fs::read_to_string(fixture(CONFIG)).unwrap();
    let config = sandbox.write(
        "lanes-4.json",
        &text.replace("\"maxConcurrency\": 2", "\"maxConcurrency\": 4"),
    );
    let agent = format!("cmd:sh {}", fixture("scripts/lane-agent.sh"));
    let child = sandbox
        .command_on(&sandbox.db())
        .args([
            "run", &config, "--task", "t", "--cast", "par", "--agent", &agent,
        ])
        .env("LANE_AGENT_SLEEP", "0.6")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    // Wait until all four lanes have recorded a completion, so they are running.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        assert!(std::time::Instant::now() < deadline, "the lanes never ran");
        std::thread::sleep(std::time::Duration::from_millis(100));
        let casts = sandbox.run(&["casts", "--json"]);
        if casts.code != 0 {
            continue;
        }
        let casts = casts.json();
        let running = casts["casts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| {
                c["cast"].as_str().unwrap().starts_with("par.lane-")
                    && c["head"].as_u64().unwrap_or(0) >= 8
            })
            .count();
        if running == 4 {
            break;
        }
    }
    let group = format!("-{}", child.id());
    std::process::Command::new("kill")
        .args(["-9", "--", &group])
        .status()
        .unwrap();
    let mut child = child;
    let _ = child.wait();
    for lane in ["a", "b", "c", "d"] {
        let h = head(&sandbox, &format!("par.lane-{lane}"));
        assert_ne!(
            h["status"], "completed",
            "lane {lane} had finished already: {h}"
        );
    }

    let resumed = sandbox
        .command_on(&sandbox.db())
        .args(["resume", "par", "--agent", &agent, "--json"])
        .env("LANE_AGENT_SLEEP", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(
        resumed.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["status"], "completed", "{doc}");
    for lane in ["a", "b", "c", "d"] {
        let cast = format!("par.lane-{lane}");
        assert_eq!(head(&sandbox, &cast)["status"], "completed", "{cast}");
        let done = completions(&sandbox, &cast);
        let mut unique = done.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(
            unique.len(),
            done.len(),
            "{cast} completed a visit twice: {done:?}"
        );
        // The prelude once, and Build and Eval for each of the lane's two items.
        assert_eq!(done.len(), 5, "{cast}: {done:?}");
    }
    let verify = sandbox.run(&["verify", "--all", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}

#[test]
fn a_recast_while_the_lanes_run_is_refused_and_one_of_a_lane_forks_only_that_lane() {
    let sandbox = Sandbox::new();
    run(&sandbox, &fixture(CONFIG), "lanes.jsonl", "par");
    // Seq 7 is the plan: the lanes run from there until the join.
    let refused = sandbox.run(&[
        "recast",
        "par",
        "--at",
        "7",
        "--agent",
        &scripted("lanes.jsonl"),
        "--cast",
        "par-2",
    ]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("parallel lanes run"),
        "{}",
        refused.stderr
    );
    // A lane recast from its first decision runs that lane's loop again, alone.
    let lane = sandbox.run(&[
        "recast",
        "par.lane-b",
        "--at",
        "Socket-3:1",
        "--agent",
        &scripted("lanes.jsonl"),
        "--cast",
        "lane-b-again",
        "--json",
    ]);
    assert_eq!(lane.code, 0, "{}", lane.stderr);
    // It answers from lane b's lines, as the lane did, and ends where the lane's loop exits.
    assert_eq!(lane.json()["status"], "completed", "{}", lane.stdout);
    let casts = sandbox.run(&["casts", "--json"]).json();
    let ids: Vec<&str> = casts["casts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cast"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["par", "par.lane-a", "par.lane-b", "lane-b-again"]);
}

#[test]
fn a_worker_drives_a_queued_parallel_cast_and_its_lanes() {
    let sandbox = Sandbox::new();
    let submit = sandbox.run(&[
        "submit",
        &fixture(CONFIG),
        "--task",
        "t",
        "--agent",
        &scripted("lanes.jsonl"),
        "--cast",
        "queued",
    ]);
    assert_eq!(submit.code, 0, "{}", submit.stderr);
    let worker = sandbox.run(&["worker", "--until-idle"]);
    assert_eq!(worker.code, 0, "{}", worker.stderr);
    for cast in ["queued", "queued.lane-a", "queued.lane-b"] {
        assert_eq!(head(&sandbox, cast)["status"], "completed", "{cast}");
    }
    assert_eq!(sandbox.run(&["verify", "--all"]).code, 0);
}
