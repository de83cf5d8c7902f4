//! Execution scopes: a utility's `scopeTransition` moves every later socket of the cast (the
//! next utility, a `cmd:` agent, the built-in tools) into the scope's directory and `kind: base`
//! brings them back; the git worktree utility gives a cast a worktree of its own; the jj
//! utilities run against `jj` on PATH and are refused before the cast starts without it; a
//! resume, a recast and `verify` keep the recorded scope.

use std::path::Path;
use std::process::Command;

use crate::common::{Run, Sandbox, fixture, git, scripted};

fn scopes() -> String {
    fixture("loadouts/scopes.json")
}

/// `castlog run` of the scopes fixture (`loadout`), as `cast`, with `agent`.
fn run_scoped(sandbox: &Sandbox, loadout: &str, cast: &str, agent: &str) -> Command {
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.args(["run", &scopes(), "--loadout", loadout, "--task", "greet"])
        .args(["--cast", cast, "--agent", agent, "--json"]);
    cmd
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn completed(run: &Run) {
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
}

fn canonical(path: &Path) -> String {
    path.canonicalize().unwrap().display().to_string()
}

#[test]
fn a_scope_moves_the_next_utility_and_the_tools_and_base_brings_them_back() {
    let sandbox = Sandbox::new();
    let run = sandbox.finish(&mut run_scoped(
        &sandbox,
        "Scoped",
        "scoped",
        &scripted("scopes.jsonl"),
    ));
    completed(&run);
    let lane = sandbox.path("scope-demo/lane");
    // Socket-2 ran in the scope, the tool wrote there, Socket-5 ran in the base again.
    assert_eq!(read(&lane.join("where.txt")).trim(), canonical(&lane));
    assert_eq!(read(&lane.join("greet.txt")), "hello\n");
    assert!(!sandbox.path("greet.txt").exists());
    assert_eq!(
        read(&sandbox.path("where.txt")).trim(),
        canonical(sandbox.dir.path())
    );
    let shown = sandbox.run(&["show", "scoped", "--json"]).json();
    let scoped: Vec<_> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "scope_activated")
        .collect();
    assert_eq!(scoped.len(), 2, "{shown}");
    let state = sandbox
        .run(&["state", "scoped", "--at", "Socket-2:1", "--json"])
        .json();
    assert_eq!(state["scope"]["id"], "lane-a", "{state}");
    assert_eq!(state["scope"]["cwd"], "scope-demo/lane", "{state}");
    let end = sandbox.run(&["state", "scoped", "--json"]).json();
    assert!(end["scope"].is_null(), "{end}");
    let verify = sandbox.run(&["verify", "scoped", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    let replay = sandbox.run(&["replay", "scoped"]);
    assert_eq!(replay.code, 0, "{}", replay.stderr);
}

#[test]
fn a_cmd_agent_runs_in_the_scope() {
    let sandbox = Sandbox::new();
    let agent = sandbox.write(
        "agent.sh",
        "cat > /dev/null\npwd > agent-where.txt\necho done\n",
    );
    let run = sandbox.finish(&mut run_scoped(
        &sandbox,
        "Scoped",
        "by-cmd",
        &format!("cmd:sh {agent}"),
    ));
    completed(&run);
    let lane = sandbox.path("scope-demo/lane");
    assert_eq!(read(&lane.join("agent-where.txt")).trim(), canonical(&lane));
    assert!(!sandbox.path("agent-where.txt").exists());
}

#[test]
fn a_bad_scope_transition_fails_naming_the_socket_and_the_field() {
    let sandbox = Sandbox::new();
    let config = read(Path::new(&scopes())).replace(
        r#""kind": "base""#,
        r#""kind": "replace", "scope": { "id": "x" }"#,
    );
    let config = sandbox.write("bad-scope.json", &config);
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.args(["run", &config, "--task", "greet", "--cast", "bad"])
        .args(["--agent", &scripted("scopes.jsonl"), "--json"]);
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.json()["status"], "failed", "{}", run.stdout);
    let state = sandbox.run(&["state", "bad", "--json"]).json();
    let reason = state["failure"]["reason"].as_str().unwrap();
    assert!(reason.contains("utility Socket-4"), "{reason}");
    assert!(
        reason.contains("$.scopeTransition.scope.cwd is required"),
        "{reason}"
    );
}

#[test]
fn resume_and_recast_act_in_the_recorded_scope() {
    let sandbox = Sandbox::new();
    // No answers: the cast stops at Build, inside the scope.
    let none = sandbox.write("none.jsonl", "");
    let run = sandbox.finish(&mut run_scoped(
        &sandbox,
        "Scoped",
        "paused",
        &format!("scripted:{none}"),
    ));
    assert_eq!(run.json()["status"], "awaiting_agent", "{}", run.stdout);
    let lane = sandbox.path("scope-demo/lane");
    let resumed = sandbox.run(&[
        "resume",
        "paused",
        "--agent",
        &scripted("scopes.jsonl"),
        "--json",
    ]);
    completed(&resumed);
    assert_eq!(read(&lane.join("greet.txt")), "hello\n");
    assert!(!sandbox.path("greet.txt").exists());

    std::fs::remove_file(lane.join("greet.txt")).unwrap();
    let recast = sandbox.run(&[
        "recast",
        "paused",
        "--at",
        "Socket-3:1",
        "--cast",
        "paused-b",
        "--agent",
        &scripted("scopes.jsonl"),
        "--json",
    ]);
    completed(&recast);
    assert_eq!(read(&lane.join("greet.txt")), "hello\n");
    assert!(!sandbox.path("greet.txt").exists());
    let verify = sandbox.run(&["verify", "--all", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}

#[test]
fn the_git_worktree_utility_gives_the_cast_a_worktree_where_the_next_socket_writes() {
    let sandbox = Sandbox::new();
    let repo = sandbox.path("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("README"), "hi\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let mut cmd = run_scoped(&sandbox, "Worktree", "wt", &scripted("scopes.jsonl"));
    cmd.args(["--workdir", repo.to_str().unwrap()]);
    let run = sandbox.finish(&mut cmd);
    completed(&run);
    let worktree = repo.join(".git/castlog/worktrees/wt");
    assert_eq!(read(&worktree.join("greet.txt")), "hello\n");
    assert!(!repo.join("greet.txt").exists());
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    // The integration committed the lane's change on its branch and reported it.
    let tip = git(&repo, &["rev-parse", "castlog/wt"]);
    assert_eq!(git(&repo, &["rev-parse", "castlog/wt~1"]), base);
    assert_eq!(git(&repo, &["show", "castlog/wt:greet.txt"]), "hello");
    let state = sandbox.run(&["state", "wt", "--json"]).json();
    let lane = &state["data"]["gitIntegration"]["lanes"][0];
    assert_eq!(lane["branch"], "castlog/wt", "{state}");
    assert_eq!(lane["commit"], tip.as_str(), "{state}");
    assert!(state["scope"].is_null(), "back in the base scope: {state}");
    let mid = sandbox
        .run(&["state", "wt", "--at", "Socket-2:1", "--json"])
        .json();
    assert_eq!(mid["scope"]["id"], "git:castlog/wt", "{mid}");
    assert_eq!(mid["scope"]["exports"]["commit"], base.as_str(), "{mid}");
    assert_eq!(
        mid["scope"]["exports"]["path"],
        canonical(&worktree).as_str(),
        "{mid}"
    );
}

#[test]
fn the_jj_utilities_are_refused_before_the_cast_starts_without_jj() {
    let sandbox = Sandbox::new();
    let empty = sandbox.path("no-programs");
    std::fs::create_dir(&empty).unwrap();
    let mut cmd = run_scoped(&sandbox, "Jj", "jj", &scripted("scopes.jsonl"));
    cmd.env("PATH", &empty);
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "socket Socket-1 runs vcs.spawnJjWorkspace, which needs the program `jj`, and jj is not found on PATH"
        ),
        "{}",
        run.stderr
    );
    run.assert_failure_stdout();
    assert_ne!(sandbox.run(&["show", "jj"]).code, 0, "nothing was recorded");
}

#[test]
fn the_jj_utilities_run_against_jj_on_path() {
    let sandbox = Sandbox::new();
    let bin = sandbox.path("bin");
    std::fs::create_dir(&bin).unwrap();
    let argv = sandbox.path("jj-argv");
    let jj = bin.join("jj");
    std::fs::write(
        &jj,
        format!(
            "#!/bin/sh\necho \"$*\" >> {}\ncase \"$1\" in\n  root) pwd ;;\n  workspace) if [ \"$2\" = add ]; then for last; do :; done; mkdir -p \"$last\"; fi ;;\n  log) echo 0123abcd ;;\nesac\n",
            argv.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&jj, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let repo = sandbox.path("repo");
    std::fs::create_dir(&repo).unwrap();
    let mut cmd = run_scoped(&sandbox, "Jj", "jj", &scripted("scopes.jsonl"));
    cmd.args(["--workdir", repo.to_str().unwrap()]).env(
        "PATH",
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
    );
    let run = sandbox.finish(&mut cmd);
    completed(&run);
    let workspace = format!("{}/.jj/castlog/workspaces/jj", canonical(&repo));
    assert_eq!(
        read(&argv).lines().collect::<Vec<_>>(),
        [
            "root".to_owned(),
            format!("workspace add --name jj {workspace}"),
            "log --no-graph -r jj@ -T commit_id".to_owned(),
            "log --no-graph -r jj@ -T commit_id".to_owned(),
            "workspace forget jj".to_owned(),
        ]
    );
    assert_eq!(
        read(&Path::new(&workspace).join("greet.txt")),
        "hello\n",
        "the tool wrote in the workspace"
    );
    let state = sandbox.run(&["state", "jj", "--json"]).json();
    assert_eq!(
        state["data"]["jjIntegration"]["workspaces"][0]["commit"], "0123abcd",
        "{state}"
    );
    assert_eq!(state["data"]["jjFinalize"]["forgotten"][0], "jj", "{state}");
}

#[test]
fn resume_after_sigkill_runs_the_agent_in_the_recorded_scope() {
    let sandbox = Sandbox::new();
    let lane = sandbox.path("scope-demo/lane");
    // The first agent says where it runs, then hangs until castlog is killed.
    let hang = sandbox.write(
        "hang.sh",
        "cat > /dev/null\npwd > agent-started.txt\nexec sleep 600\n",
    );
    let mut cmd = run_scoped(&sandbox, "Scoped", "killed", &format!("cmd:sh {hang}"));
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = lane.join("agent-started.txt");
    let mut waited = 0;
    while !started.exists() && waited < 3000 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        waited += 1;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(started.exists(), "the agent never started");
    let answer = sandbox.write(
        "answer.sh",
        "cat > /dev/null\npwd > agent-where.txt\necho done\n",
    );
    let resumed = sandbox.run(&[
        "resume",
        "killed",
        "--agent",
        &format!("cmd:sh {answer}"),
        "--json",
    ]);
    completed(&resumed);
    assert_eq!(read(&lane.join("agent-where.txt")).trim(), canonical(&lane));
    assert_eq!(
        read(&sandbox.path("where.txt")).trim(),
        canonical(sandbox.dir.path()),
        "after the resume, base brought Socket-5 back"
    );
    let verify = sandbox.run(&["verify", "killed", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}

#[test]
fn a_scope_whose_directory_is_missing_fails_the_next_utility_naming_it() {
    let sandbox = Sandbox::new();
    let config = read(Path::new(&scopes())).replace("mkdir -p scope-demo/lane && ", "");
    let config = sandbox.write("no-mkdir.json", &config);
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.args(["run", &config, "--task", "greet", "--cast", "nowhere"])
        .args(["--agent", &scripted("scopes.jsonl"), "--json"]);
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.json()["status"], "failed", "{}", run.stdout);
    let state = sandbox.run(&["state", "nowhere", "--json"]).json();
    let reason = state["failure"]["reason"].as_str().unwrap();
    assert!(reason.contains("utility Socket-2"), "{reason}");
    assert!(
        reason.contains("scope-demo/lane, does not exist"),
        "{reason}"
    );
}
