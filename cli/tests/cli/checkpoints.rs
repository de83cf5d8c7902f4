//! Workspace checkpoints: a tool cast in a git working directory records its files as git
//! trees (at the start and at each socket completion) without touching the user's index or
//! HEAD; `recast --workdir` starts from the files as they were at the fork point; `diff
//! --files` lists each step's file changes; outside git the cast runs and says it cannot
//! checkpoint.

use std::path::Path;
use std::process::Command;

use crate::common::{Run, Sandbox};

/// Two Build sockets: the first writes `a.txt`, the second `b.txt`.
const LOADOUT: &str = r#"{
  "activeLoadout": "Two",
  "loadouts": {
    "Two": {
      "entry": "Socket-1",
      "sockets": {
        "Socket-1": { "materia": "Build", "parse": "text", "edges": [{ "when": "always", "to": "Socket-2" }] },
        "Socket-2": { "materia": "Build", "parse": "text", "edges": [{ "when": "always", "to": "end" }] }
      }
    }
  },
  "materia": {
    "Build": { "type": "agent", "tools": "coding", "label": "Build", "prompt": "Implement: {{request}}" }
  }
}"#;

const SCRIPT: &str = r#"{"tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "a\n"}}]}
{"reply": "wrote a"}
{"tool_calls": [{"name": "write", "arguments": {"path": "b.txt", "content": "b\n"}}]}
{"reply": "wrote b"}
"#;

/// Runs git in `dir` with no user or system configuration.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with one commit of `base.txt`.
fn repository(sandbox: &Sandbox) -> std::path::PathBuf {
    let work = sandbox.path("work");
    std::fs::create_dir(&work).unwrap();
    git(&work, &["init", "-q"]);
    git(&work, &["config", "user.name", "Castlog Test"]);
    git(&work, &["config", "user.email", "test@castlog.invalid"]);
    std::fs::write(work.join("base.txt"), "base\n").unwrap();
    git(&work, &["add", "base.txt"]);
    git(&work, &["commit", "-q", "-m", "base"]);
    work
}

fn run_two(sandbox: &Sandbox, cast: &str, workdir: &Path) -> Run {
    let config = sandbox.write("two.json", LOADOUT);
    let script = sandbox.write("two.jsonl", SCRIPT);
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.args(["run", &config, "--task", "two files", "--cast", cast])
        .args(["--agent", &format!("scripted:{script}"), "--workdir"])
        .arg(workdir)
        .arg("--json");
    sandbox.finish(&mut cmd)
}

/// The cast's `workspace_checkpointed` payloads, with their seqs.
fn checkpoints(sandbox: &Sandbox, cast: &str) -> Vec<(u64, serde_json::Value)> {
    let shown = sandbox.run(&["show", cast, "--json"]).json();
    shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "workspace_checkpointed")
        .map(|e| (e["seq"].as_u64().unwrap(), e["payload"].clone()))
        .collect()
}

#[test]
fn a_tool_cast_in_a_git_workdir_checkpoints_each_step_and_leaves_the_index_and_head_alone() {
    let sandbox = Sandbox::new();
    let work = repository(&sandbox);
    let head = git(&work, &["rev-parse", "HEAD"]);
    let index = std::fs::read(work.join(".git/index")).unwrap();
    let run = run_two(&sandbox, "two", &work);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
    assert!(!run.stderr.contains("cannot checkpoint"), "{}", run.stderr);

    let points = checkpoints(&sandbox, "two");
    let at: Vec<(&str, bool)> = points
        .iter()
        .map(|(_, p)| (p["socket"].as_str().unwrap(), p["start"] == true))
        .collect();
    assert_eq!(
        at,
        [("Socket-1", true), ("Socket-1", false), ("Socket-2", false)]
    );
    // Each tree holds the working directory's files as they were then.
    let files =
        |tree: &serde_json::Value| git(&work, &["ls-tree", "--name-only", tree.as_str().unwrap()]);
    assert_eq!(files(&points[0].1["tree"]), "base.txt\n");
    assert_eq!(files(&points[1].1["tree"]), "a.txt\nbase.txt\n");
    assert_eq!(files(&points[2].1["tree"]), "a.txt\nb.txt\nbase.txt\n");

    // The user's branch, HEAD and index are as they were: the new files are untracked.
    assert_eq!(git(&work, &["rev-parse", "HEAD"]), head);
    assert_eq!(std::fs::read(work.join(".git/index")).unwrap(), index);
    assert_eq!(
        git(&work, &["status", "--porcelain"]),
        "?? a.txt\n?? b.txt\n"
    );

    let verify = sandbox.run(&["verify", "two"]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
    assert!(verify.stdout.starts_with("ok"), "{}", verify.stdout);

    // `diff --files`: what each step changed.
    let diff = sandbox.run(&["diff", "two", "--files", "--json"]).json();
    let steps = diff["casts"][0]["steps"].as_array().unwrap();
    let changed: Vec<Vec<(String, String)>> = steps
        .iter()
        .map(|s| {
            s["changes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    (
                        c["status"].as_str().unwrap().to_owned(),
                        c["path"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        })
        .collect();
    assert_eq!(
        changed,
        [
            vec![],
            vec![("A".to_owned(), "a.txt".to_owned())],
            vec![("A".to_owned(), "b.txt".to_owned())]
        ]
    );
    let text = sandbox.run(&["diff", "two", "--files"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("    A b.txt"), "{}", text.stdout);
}

#[test]
fn a_recast_with_workdir_starts_from_the_files_at_its_fork_point() {
    let sandbox = Sandbox::new();
    let work = repository(&sandbox);
    let run = run_two(&sandbox, "two", &work);
    assert_eq!(run.code, 0, "{}", run.stderr);

    // At Socket-2's start, a.txt was written and b.txt not yet.
    let fork = sandbox.path("fork");
    let recast = sandbox.run(&[
        "recast",
        "two",
        "--at",
        "Socket-2:1",
        "--cast",
        "fork",
        "--workdir",
        fork.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(recast.code, 0, "{}", recast.stderr);
    assert_eq!(std::fs::read_to_string(fork.join("a.txt")).unwrap(), "a\n");
    assert_eq!(
        std::fs::read_to_string(fork.join("base.txt")).unwrap(),
        "base\n"
    );
    assert!(!fork.join("b.txt").exists());
    assert!(!fork.join(".git").exists());
    // The fork records its own working directory.
    let shown = sandbox.run(&["show", "fork", "--json"]).json();
    let forked = &shown["events"][0]["payload"];
    assert_eq!(
        Path::new(forked["workdir"].as_str().unwrap()),
        fork.canonicalize().unwrap()
    );

    // The report of the diff shows the file changes of each step of the casts with
    // checkpoints.
    let page = sandbox.path("diff.html");
    let report = sandbox.run(&[
        "report",
        "two",
        "--diff",
        "fork",
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_eq!(report.code, 0, "{}", report.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    let files = &html[html
        .find("<section id=\"files\">")
        .expect("a files section")..];
    let two = &files[files.find("data-cast=\"two\"").unwrap()..];
    let step = &two[two.find("data-step=\"Socket-2:1\"").unwrap()..];
    assert!(
        step.starts_with(
            "data-step=\"Socket-2:1\"><span class=\"mono\">Socket-2:1</span> 1 file changed"
        ),
        "{step}"
    );
    assert!(
        step.contains("<span class=\"tag\">A added</span> <code>b.txt</code>"),
        "{step}"
    );

    // Before the first socket ran: only the committed file.
    let start = sandbox.path("start");
    let recast = sandbox.run(&[
        "recast",
        "two",
        "--at",
        "Socket-1:1",
        "--cast",
        "start",
        "--workdir",
        start.to_str().unwrap(),
    ]);
    assert_eq!(recast.code, 0, "{}", recast.stderr);
    assert!(start.join("base.txt").exists());
    assert!(!start.join("a.txt").exists());

    // A directory that is not empty is refused, and nothing is forked.
    let refused = sandbox.run(&[
        "recast",
        "two",
        "--at",
        "Socket-2:1",
        "--cast",
        "again",
        "--workdir",
        fork.to_str().unwrap(),
    ]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("is not empty"),
        "{}",
        refused.stderr
    );

    let verify = sandbox.run(&["verify"]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
}

#[test]
fn a_workdir_outside_git_runs_and_says_once_it_cannot_checkpoint() {
    let sandbox = Sandbox::new();
    let work = sandbox.path("plain");
    std::fs::create_dir(&work).unwrap();
    let run = run_two(&sandbox, "plain", &work);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
    assert!(work.join("b.txt").exists());
    assert_eq!(
        run.stderr.matches("cannot checkpoint").count(),
        1,
        "{}",
        run.stderr
    );
    assert!(checkpoints(&sandbox, "plain").is_empty());
    let diff = sandbox.run(&["diff", "plain", "--files"]);
    assert_eq!(diff.code, 1, "{}", diff.stderr);
    assert!(
        diff.stderr.contains("no workspace checkpoints"),
        "{}",
        diff.stderr
    );
}
