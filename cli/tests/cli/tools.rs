//! The working directory tool calls act in: `run --workdir DIR` records it in `cast_started`
//! (absent without the flag, as in older casts), the cast verifies, and a missing directory
//! is refused before anything is recorded.

use crate::common::{Sandbox, scripted};

fn started(sandbox: &Sandbox, cast: &str) -> serde_json::Value {
    let shown = sandbox.run(&["show", cast, "--json"]).json();
    shown["events"][0].clone()
}

#[test]
fn run_records_the_workdir_it_was_given_and_verifies() {
    let sandbox = Sandbox::new();
    let dir = sandbox.path("work");
    std::fs::create_dir(&dir).unwrap();
    let mut cmd = sandbox.build_loop("tooled", &scripted("build-loop.jsonl"));
    cmd.args(["--workdir", dir.to_str().unwrap()]);
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let event = started(&sandbox, "tooled").to_string();
    let canonical = dir.canonicalize().unwrap().display().to_string();
    assert!(
        event.contains(&format!("\"workdir\":\"{canonical}\"")),
        "{event}"
    );
    sandbox.completed_build_loop("plain");
    assert!(!started(&sandbox, "plain").to_string().contains("workdir"));
    let verify = sandbox.run(&["verify", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}

#[test]
fn a_missing_workdir_is_refused_before_anything_is_recorded() {
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.build_loop("nowhere", &scripted("build-loop.jsonl"));
    cmd.args(["--workdir", sandbox.path("absent").to_str().unwrap()]);
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("working directory"), "{}", run.stderr);
    let show = sandbox.run(&["show", "nowhere", "--json"]);
    assert_ne!(show.code, 0);
}
