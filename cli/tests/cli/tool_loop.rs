//! The tool loop from the command line: a scripted agent's tool calls run in `--workdir`
//! under the materia's scope, each call recorded as a `tool_called` / `tool_finished` pair,
//! and the cast re-decides byte for byte; refusals are results the agent sees; a write cut
//! off by `kill -9` is not repeated by `resume`.

use std::path::Path;
use std::process::Stdio;

use crate::common::{Sandbox, fixture, scripted};

/// Runs the tools fixture's loadout `loadout` as `cast` in `workdir` with the agent `spec`.
fn run_tools(
    sandbox: &Sandbox,
    cast: &str,
    loadout: &str,
    spec: &str,
    workdir: &Path,
) -> crate::common::Run {
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.args([
        "run",
        &fixture("loadouts/tools.json"),
        "--loadout",
        loadout,
        "--task",
        "a greeting file",
        "--cast",
        cast,
        "--agent",
        spec,
        "--workdir",
        workdir.to_str().unwrap(),
        "--json",
    ]);
    sandbox.finish(&mut cmd)
}

/// The cast's events as (kind, payload) pairs.
fn events(sandbox: &Sandbox, cast: &str) -> Vec<(String, serde_json::Value)> {
    let shown = sandbox.run(&["show", cast, "--json"]).json();
    shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["kind"].as_str().unwrap().to_owned(), e["payload"].clone()))
        .collect()
}

fn kinds_of<'a>(
    events: &'a [(String, serde_json::Value)],
    kind: &str,
) -> Vec<&'a serde_json::Value> {
    events
        .iter()
        .filter(|(k, _)| k == kind)
        .map(|(_, p)| p)
        .collect()
}

#[test]
fn a_coding_materia_writes_edits_reads_and_lists_then_completes_and_verifies() {
    let sandbox = Sandbox::new();
    let work = sandbox.path("work");
    std::fs::create_dir(&work).unwrap();
    let run = run_tools(&sandbox, "tooled", "Tools", &scripted("tools.jsonl"), &work);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
    assert_eq!(
        std::fs::read_to_string(work.join("tool-demo/greet.txt")).unwrap(),
        "hello, world\n"
    );
    let events = events(&sandbox, "tooled");
    let called = kinds_of(&events, "tool_called");
    let finished = kinds_of(&events, "tool_finished");
    let tools: Vec<&str> = called.iter().map(|c| c["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["write", "edit", "read", "bash"]);
    let ids: Vec<&str> = called.iter().map(|c| c["call"].as_str().unwrap()).collect();
    let done: Vec<&str> = finished
        .iter()
        .map(|c| c["call"].as_str().unwrap())
        .collect();
    assert_eq!(ids, done, "one tool_finished per tool_called, in order");
    assert!(
        finished.iter().all(|f| f.get("error").is_none()),
        "{finished:?}"
    );
    assert_eq!(finished[2]["output"], "hello, world\n");
    assert_eq!(finished[3]["exit"], 0);
    assert_eq!(finished[3]["output"], "greet.txt\n");
    let verify = sandbox.run(&["verify", "tooled", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    // The last prompt shows every call and its result, inline and in order.
    let prompt = sandbox.run(&["prompt", "tooled", "Socket-1", "--turn", "4"]);
    assert_eq!(prompt.code, 0, "{}", prompt.stderr);
    let at = |needle: &str| {
        prompt
            .stdout
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} in {}", prompt.stdout))
    };
    assert!(at("\"name\":\"write\"") < at("Tool result of call-1 (write)"));
    assert!(at("Tool result of call-1 (write)") < at("\"name\":\"edit\""));
    assert!(at("\"name\":\"bash\"") < at("Tool result of call-4 (bash)"));
}

#[test]
fn a_read_only_materia_calling_write_is_refused_and_writes_nothing() {
    let sandbox = Sandbox::new();
    let work = sandbox.path("work");
    std::fs::create_dir(&work).unwrap();
    let script = sandbox.write(
        "refused.jsonl",
        "{\"tool_calls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"x.txt\", \"content\": \"x\"}}]}\n{\"reply\": \"I may not write.\"}\n",
    );
    let run = run_tools(
        &sandbox,
        "looked",
        "Survey",
        &format!("scripted:{script}"),
        &work,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!work.join("x.txt").exists());
    let events = events(&sandbox, "looked");
    let finished = kinds_of(&events, "tool_finished");
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0]["error"], true);
    let output = finished[0]["output"].as_str().unwrap();
    assert!(output.contains("not allowed"), "{output}");
    let verify = sandbox.run(&["verify", "looked", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}

#[test]
fn paths_that_leave_the_workdir_are_refused_also_through_a_symlink() {
    let sandbox = Sandbox::new();
    let work = sandbox.path("work");
    let outside = sandbox.path("outside");
    std::fs::create_dir(&work).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, work.join("door")).unwrap();
    let script = sandbox.write(
        "escape.jsonl",
        concat!(
            "{\"tool_calls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"../out.txt\", \"content\": \"x\"}}]}\n",
            "{\"tool_calls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"door/out.txt\", \"content\": \"x\"}}]}\n",
            "{\"reply\": \"Both refused.\"}\n"
        ),
    );
    let run = run_tools(
        &sandbox,
        "escape",
        "Tools",
        &format!("scripted:{script}"),
        &work,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!sandbox.path("out.txt").exists());
    assert!(!outside.join("out.txt").exists());
    let events = events(&sandbox, "escape");
    let finished = kinds_of(&events, "tool_finished");
    assert_eq!(finished.len(), 2);
    assert!(finished.iter().all(|f| f["error"] == true), "{finished:?}");
    assert!(finished[0]["output"].as_str().unwrap().contains("`..`"));
    assert!(finished[1]["output"].as_str().unwrap().contains("symlink"));
}

/// A `write` into a FIFO nobody reads blocks after its `tool_called` is durable: the run is
/// killed there (SIGKILL), so the log holds the call and no outcome.
#[test]
fn a_write_cut_off_by_kill_is_not_repeated_by_resume_and_the_prompt_says_its_outcome_is_unknown() {
    let sandbox = Sandbox::new();
    let work = sandbox.path("work");
    std::fs::create_dir(&work).unwrap();
    let fifo = work.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let script = sandbox.write(
        "cut.jsonl",
        "{\"tool_calls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"pipe\", \"content\": \"once\"}}]}\n{\"reply\": \"Checked the pipe.\"}\n",
    );
    let spec = format!("scripted:{script}");
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.args([
        "run",
        &fixture("loadouts/tools.json"),
        "--task",
        "write once",
        "--cast",
        "cut",
        "--agent",
        &spec,
        "--workdir",
        work.to_str().unwrap(),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    // Wait for the call to be recorded (the write then blocks on the FIFO).
    loop {
        let shown = sandbox.run(&["show", "cut", "--json"]);
        if shown.code == 0 && shown.stdout.contains("\"tool_called\"") {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before the call"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = events(&sandbox, "cut");
    assert_eq!(kinds_of(&before, "tool_called").len(), 1);
    assert!(kinds_of(&before, "tool_finished").is_empty());
    let resumed = sandbox.run(&["resume", "cut", "--agent", &spec, "--json"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(resumed.json()["status"], "completed", "{}", resumed.stdout);
    let after = events(&sandbox, "cut");
    assert!(
        kinds_of(&after, "tool_finished").is_empty(),
        "the write never ran again"
    );
    let interrupted = kinds_of(&after, "tool_interrupted");
    assert_eq!(interrupted.len(), 1);
    assert_eq!(interrupted[0]["tool"], "write");
    let prompt = sandbox.run(&["prompt", "cut", "Socket-1", "--turn", "2"]);
    assert_eq!(prompt.code, 0, "{}", prompt.stderr);
    assert!(
        prompt.stdout.contains("its effect is unknown"),
        "{}",
        prompt.stdout
    );
    let verify = sandbox.run(&["verify", "cut", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}

/// A script of `reads` identical reads of a file that is not there, then a reply; its path.
fn failing_reads(sandbox: &Sandbox, name: &str, reads: usize) -> String {
    let read =
        "{\"tool_calls\": [{\"name\": \"read\", \"arguments\": {\"path\": \"missing.txt\"}}]}\n";
    sandbox.write(
        name,
        &format!("{}{{\"reply\": \"gave up\"}}\n", read.repeat(reads)),
    )
}

/// The loop-break gate from the command line: three identical failing reads raise a
/// `recoveryTicket`; `audit --lint` flags it folded into the system message under the legacy
/// policy, and finds nothing to say about the recommended placement (the trailing block).
#[test]
fn the_loop_break_ticket_is_flagged_by_audit_lint_only_under_the_legacy_policy() {
    let sandbox = Sandbox::new();
    let work = sandbox.path("work");
    std::fs::create_dir(&work).unwrap();
    let script = failing_reads(&sandbox, "loop.jsonl", 3);
    for policy in ["legacy", "recommended"] {
        let mut cmd = sandbox.command_on(&sandbox.db());
        cmd.args([
            "run",
            &fixture("loadouts/tools.json"),
            "--task",
            "read a missing file",
            "--cast",
            policy,
            "--policy",
            policy,
            "--agent",
            &format!("scripted:{script}"),
            "--workdir",
            work.to_str().unwrap(),
        ]);
        let run = sandbox.finish(&mut cmd);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let audit = sandbox.run(&["audit", policy, "--lint"]);
        assert_eq!(audit.code, 0, "{}", audit.stderr);
        assert!(
            audit.stdout.contains("recoveryTicket:toolLoop"),
            "{}",
            audit.stdout
        );
        let flagged = audit
            .stdout
            .contains("escalation-in-system-fold Socket-1:1 recoveryTicket:toolLoop");
        assert_eq!(flagged, policy == "legacy", "{policy}: {}", audit.stdout);
    }
}

/// A recast answered by `recorded:` plays the recorded tool outcomes back: no tool runs (the
/// files the parent wrote, removed since, stay gone) and the child records the same results.
#[test]
fn a_recast_from_a_recording_runs_no_tool_and_records_the_same_results() {
    let sandbox = Sandbox::new();
    let work = sandbox.path("work");
    std::fs::create_dir(&work).unwrap();
    let run = run_tools(&sandbox, "parent", "Tools", &scripted("tools.jsonl"), &work);
    assert_eq!(run.code, 0, "{}", run.stderr);
    std::fs::remove_dir_all(work.join("tool-demo")).unwrap();
    let recast = sandbox.run(&[
        "recast",
        "parent",
        "--at",
        "3",
        "--agent",
        "recorded:parent",
        "--cast",
        "child",
        "--json",
    ]);
    assert_eq!(recast.code, 0, "{}", recast.stderr);
    assert_eq!(recast.json()["status"], "completed", "{}", recast.stdout);
    assert!(
        !work.join("tool-demo").exists(),
        "a recorded recast ran a tool"
    );
    let outputs = |cast: &str| -> Vec<serde_json::Value> {
        kinds_of(&events(&sandbox, cast), "tool_finished")
            .into_iter()
            .map(|f| f["output"].clone())
            .collect()
    };
    assert_eq!(outputs("child"), outputs("parent"));
    assert_eq!(outputs("child").len(), 4);
    let verify = sandbox.run(&["verify", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}

/// A recast with `--config` runs with the new loadout's tool scopes: the same write, allowed
/// under `coding`, is refused once the config makes Build `readOnly`.
#[test]
fn a_recast_with_another_config_runs_with_its_tool_scopes() {
    let sandbox = Sandbox::new();
    let work = sandbox.path("work");
    std::fs::create_dir(&work).unwrap();
    let script = sandbox.write(
        "write.jsonl",
        "{\"tool_calls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"x\"}}]}\n{\"reply\": \"Done.\"}\n",
    );
    let spec = format!("scripted:{script}");
    let run = run_tools(&sandbox, "coded", "Tools", &spec, &work);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(work.join("a.txt").exists());
    std::fs::remove_file(work.join("a.txt")).unwrap();
    let text = std::fs::read_to_string(fixture("loadouts/tools.json"))
        .unwrap()
        .replace("\"tools\": \"coding\"", "\"tools\": \"readOnly\"");
    let config = sandbox.write("read-only.json", &text);
    let recast = sandbox.run(&[
        "recast", "coded", "--at", "3", "--config", &config, "--agent", &spec, "--cast", "looked",
        "--json",
    ]);
    assert_eq!(recast.code, 0, "{}", recast.stderr);
    assert!(!work.join("a.txt").exists(), "the readOnly recast wrote");
    let finished = kinds_of(&events(&sandbox, "looked"), "tool_finished")
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0]["error"], true, "{finished:?}");
    let output = finished[0]["output"].as_str().unwrap();
    assert!(output.contains("not allowed"), "{output}");
}

/// `limits.loopBreakAfter` sets the loop-break gate's threshold: with 2, two identical failing
/// reads raise the ticket where the default (3) raises none; the frozen loadout in
/// `cast_started` records it, so the cast re-decides with it; 0 is refused.
#[test]
fn loop_break_after_in_the_config_sets_the_gates_threshold() {
    let sandbox = Sandbox::new();
    let work = sandbox.path("work");
    std::fs::create_dir(&work).unwrap();
    let script = failing_reads(&sandbox, "twice.jsonl", 2);
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("loadouts/tools.json")).unwrap())
            .unwrap();
    config["limits"] = serde_json::json!({ "loopBreakAfter": 2 });
    let two = sandbox.write("two.json", &config.to_string());
    config["limits"] = serde_json::json!({ "loopBreakAfter": 0 });
    let zero = sandbox.write("zero.json", &config.to_string());
    let run = |cast: &str, config: &str| {
        let mut cmd = sandbox.command_on(&sandbox.db());
        cmd.args([
            "run",
            config,
            "--task",
            "read a missing file",
            "--cast",
            cast,
        ])
        .args(["--agent", &format!("scripted:{script}")])
        .args(["--workdir", work.to_str().unwrap()]);
        sandbox.finish(&mut cmd)
    };
    for (cast, config, ticket) in [
        ("two", two.as_str(), true),
        ("default", fixture("loadouts/tools.json").as_str(), false),
    ] {
        let done = run(cast, config);
        assert_eq!(done.code, 0, "{cast}: {}", done.stderr);
        let prompt = sandbox.run(&["prompt", cast, "Socket-1", "--turn", "3"]);
        assert_eq!(prompt.code, 0, "{}", prompt.stderr);
        assert_eq!(
            prompt.stdout.contains("The same tool call failed 2 times"),
            ticket,
            "{cast}: {}",
            prompt.stdout
        );
        let started = &events(&sandbox, cast)[0].1;
        assert_eq!(
            started["loadout"].get("loop_break_after").cloned(),
            ticket.then(|| serde_json::json!(2)),
            "{started}"
        );
    }
    let verify = sandbox.run(&["verify", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    let refused = run("zero", &zero);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("loopBreakAfter"),
        "{}",
        refused.stderr
    );
}

/// `diff` aligns the tool calls of a step by their place in the visit and shows what differs
/// (tool, arguments, status, a diff of the results); `export --artifacts` writes one file per
/// call with its arguments and result.
#[test]
fn diff_aligns_tool_calls_and_export_writes_one_file_per_call() {
    let sandbox = Sandbox::new();
    let (wa, wb) = (sandbox.path("wa"), sandbox.path("wb"));
    std::fs::create_dir(&wa).unwrap();
    std::fs::create_dir(&wb).unwrap();
    let script = std::fs::read_to_string(fixture("scripts/tools.jsonl")).unwrap();
    // The other cast writes another greeting, so its edit fails: its second call differs in
    // status and result, its first in arguments.
    let other = sandbox.write("other.jsonl", &script.replace("hello\\n", "hi\\n"));
    let run = run_tools(&sandbox, "a", "Tools", &scripted("tools.jsonl"), &wa);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = run_tools(&sandbox, "b", "Tools", &format!("scripted:{other}"), &wb);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let diff = sandbox.run(&["diff", "a", "b", "--json"]);
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    let report = diff.json();
    let step = &report["steps"][0];
    assert_eq!(step["status"], "changed", "{report}");
    let calls: Vec<&serde_json::Value> = step["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["field"] == "tool_call")
        .collect();
    let places: Vec<u64> = calls.iter().map(|c| c["call"].as_u64().unwrap()).collect();
    assert_eq!(places, [1, 2, 3], "{report}");
    assert_eq!(calls[0]["a"]["tool"], "write");
    assert_eq!(calls[0]["a"]["arguments"]["content"], "hello\n");
    assert_eq!(calls[0]["b"]["arguments"]["content"], "hi\n");
    assert_eq!(calls[1]["a"]["status"], "ok");
    assert_eq!(calls[1]["b"]["status"], "error");
    assert!(
        calls[1]["diff"]
            .as_str()
            .unwrap()
            .starts_with("--- a\n+++ b\n")
    );
    // The read of the third place shows each side's file.
    assert!(
        calls[2]["diff"].as_str().unwrap().contains("+hi"),
        "{}",
        calls[2]
    );
    let text = sandbox.run(&["diff", "a", "b"]);
    assert!(
        text.stdout.contains("  tool call 2:\n    a edit {")
            && text.stdout.contains("-> ok\n    b edit {")
            && text.stdout.contains("-> error\n"),
        "{}",
        text.stdout
    );

    let dir = sandbox.path("artifacts");
    let export = sandbox.run(&["export", "a", "--artifacts", dir.to_str().unwrap()]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    let tools = dir.join("sockets/socket-1");
    let mut files: Vec<String> = std::fs::read_dir(&tools)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tool-"))
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "1.tool-1-write.json",
            "1.tool-2-edit.json",
            "1.tool-3-read.json",
            "1.tool-4-bash.json"
        ]
    );
    let bash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tools.join("1.tool-4-bash.json")).unwrap())
            .unwrap();
    assert_eq!(bash["tool"], "bash");
    assert_eq!(bash["arguments"]["command"], "ls tool-demo");
    assert_eq!(bash["outcome"], "ok");
    assert_eq!(bash["exit"], 0);
    assert!(
        bash["result"].as_str().unwrap().contains("greet.txt"),
        "{bash}"
    );
    let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"tool_call\""), "{manifest}");
}
