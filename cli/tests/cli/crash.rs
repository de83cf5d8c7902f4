//! A writer killed with SIGKILL loses nothing it acknowledged and leaves no partial event.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::common::Sandbox;

/// Kills the child if the test panics before it does, so no appender outlives the test.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Spawns `command` with stderr piped, reads stderr until `count` lines for which `wanted` is
/// true have come, kills it with SIGKILL (no destructor, no flush, no checkpoint), and returns
/// those lines (fewer if the program ended first).
fn kill_after_lines(
    command: &mut std::process::Command,
    count: usize,
    wanted: impl Fn(&str) -> bool,
) -> Vec<String> {
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let stderr = child.0.stderr.take().unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        if wanted(&line) {
            lines.push(line);
            if lines.len() == count {
                break;
            }
        }
    }
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    lines
}

/// Starts an appender, waits for `acks` acknowledged appends, kills it, and returns the last
/// acknowledged seq.
fn kill_after(sandbox: &Sandbox, acks: usize, batch: u64) -> u64 {
    let mut command = sandbox.command_on(&sandbox.db());
    command.args([
        "bench",
        "append",
        "--events",
        "10000000",
        "--payload-bytes",
        "300",
        "--batch",
        &batch.to_string(),
        "--cast",
        "crash",
        "--acks",
        "--json",
    ]);
    let acked = kill_after_lines(&mut command, acks, |line| line.starts_with("acked "));
    let last = acked
        .last()
        .map_or(0, |line| line["acked ".len()..].parse().unwrap());
    assert!(last > 0, "the appender acknowledged nothing");
    last
}

#[test]
fn sigkill_mid_stream_keeps_every_acknowledged_append() {
    let sandbox = Sandbox::new();
    let mut acknowledged = 0;
    let mut previous_head = 0;
    for (acks, batch) in [(1, 1), (5, 3), (40, 1), (120, 7), (300, 2)] {
        let last = kill_after(&sandbox, acks, batch);
        assert!(last > acknowledged, "the cast continues from its head");
        acknowledged = last;

        let verify = sandbox.run(&["verify", "--json"]);
        assert_eq!(verify.code, 0, "verify after kill: {}", verify.stdout);
        assert_eq!(verify.json()["ok"], true);

        let casts = sandbox.run(&["casts", "--json"]).json();
        let head = casts["casts"][0]["head"].as_u64().unwrap();
        assert!(
            head >= last,
            "acknowledged seq {last} is missing after the kill (head {head})"
        );
        // Batches are atomic: the head is a whole number of batches past the previous one.
        assert_eq!(
            (head - previous_head) % batch,
            0,
            "a batch was cut by the kill"
        );
        previous_head = head;
        let shown = sandbox.run(&["show", "crash", "--json"]).json();
        let events = shown["events"].as_array().unwrap();
        assert_eq!(events.len() as u64, head);
        for (i, event) in events.iter().enumerate() {
            assert_eq!(event["seq"].as_u64().unwrap(), i as u64 + 1);
            assert_eq!(event["kind"], "steering_noted");
        }
    }
}

/// A `castlog run` killed with SIGKILL while a prompt is in flight is finished by `resume`:
/// no socket visit completes twice and the in-flight prompt is re-dispatched exactly once.
#[test]
fn a_killed_run_is_finished_by_resume() {
    use std::os::unix::process::CommandExt;

    let sandbox = Sandbox::new();
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures");
    let config = format!("{fixtures}/loadouts/build-loop.json");
    let script = format!("{fixtures}/scripts/build-loop.jsonl");
    // A command agent that answers from the script, and hangs on its fifth call.
    let counter = sandbox.path("calls");
    let agent = sandbox.path("agent.py");
    std::fs::write(
        &agent,
        format!(
            r#"import json, sys, time
sys.stdin.read()
path = {counter:?}
try:
    n = int(open(path).read()) + 1
except FileNotFoundError:
    n = 1
open(path, "w").write(str(n))
if n == 5:
    time.sleep(120)
line = open({script:?}).read().splitlines()[n - 1]
sys.stdout.write(json.loads(line)["reply"])
"#
        ),
    )
    .unwrap();
    let child = sandbox
        .command_on(&sandbox.db())
        .args([
            "run",
            &config,
            "--task",
            "greet",
            "--cast",
            "crashy",
            "--agent",
            &format!("cmd:python3 {}", agent.display()),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::read_to_string(&counter).map_or(true, |n| n.trim() != "5") {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent was never called a fifth time"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Kill the whole group: castlog and the hanging agent, with no chance to clean up.
    let group = format!("-{}", child.0.id());
    std::process::Command::new("kill")
        .args(["-9", "--", &group])
        .status()
        .unwrap();
    let _ = child.0.wait();

    let state = sandbox.run(&["state", "crashy", "--json"]).json();
    assert_eq!(state["status"], "awaiting_agent", "{state}");
    let before = sandbox.run(&["show", "crashy", "--json"]).json();
    let completions_before = completions(&before);

    let resumed = sandbox.run(&[
        "resume",
        "crashy",
        "--agent",
        &format!("scripted:{script}"),
        "--json",
    ]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(resumed.json()["status"], "completed");

    let after = sandbox.run(&["show", "crashy", "--json"]).json();
    let done = completions(&after);
    assert_eq!(&done[..completions_before.len()], &completions_before[..]);
    let mut unique = done.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        done.len(),
        "a socket visit completed twice: {done:?}"
    );
    let redispatches = after["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "prompt_dispatched" && e["payload"]["redispatch"] == true)
        .count();
    assert_eq!(redispatches, 1);

    // The same fixture run without a crash completes the same socket visits.
    let clean = sandbox.run(&[
        "run",
        &config,
        "--task",
        "greet",
        "--cast",
        "clean",
        "--agent",
        &format!("scripted:{script}"),
    ]);
    assert_eq!(clean.code, 0, "{}", clean.stderr);
    let clean = completions(&sandbox.run(&["show", "clean", "--json"]).json());
    assert_eq!(done, clean);
    assert_eq!(sandbox.run(&["verify"]).code, 0);
}

/// `(socket, visit)` of every `socket_completed`, in order.
fn completions(show: &serde_json::Value) -> Vec<(String, u64)> {
    show["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "socket_completed")
        .map(|e| {
            (
                e["payload"]["socket"].as_str().unwrap().to_owned(),
                e["payload"]["visit"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A scripted run killed with SIGKILL keeps every step it reported (the driver reports a step
/// once it is durable; up to 16 later ones are held in one open transaction and lost with the
/// process), and `resume` with the same script finishes the cast as an uninterrupted run would.
#[test]
fn a_killed_scripted_run_keeps_every_reported_step_and_resume_finishes_it() {
    const ITEMS: usize = 400;
    let sandbox = Sandbox::new();
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures");
    let config = format!("{fixtures}/loadouts/build-loop.json");
    // Plan ITEMS work items; each is built, accepted and checkpointed at once.
    let script = sandbox.path("long.jsonl");
    let line = |reply: String| serde_json::json!({ "reply": reply }).to_string() + "\n";
    let items: Vec<_> = (0..ITEMS)
        .map(|i| serde_json::json!({ "title": format!("item {i}"), "context": "small" }))
        .collect();
    let mut text = line(serde_json::json!({ "workItems": items, "context": "many" }).to_string());
    for i in 0..ITEMS {
        text += &line(format!("built item {i}"));
        text += &line(r#"{"satisfied": true, "context": "done"}"#.into());
        text += &line(r#"{"satisfied": true, "context": "committed"}"#.into());
    }
    text += &line("all done".into());
    std::fs::write(&script, text).unwrap();
    let agent = format!("scripted:{}", script.display());

    let mut command = sandbox.command_on(&sandbox.db());
    command
        .args(["run", &config, "--task", "many", "--cast", "long"])
        .args(["--agent", &agent])
        .env("RUST_LOG", "castlog_replay::driver=debug");
    let reported = kill_after_lines(&mut command, 200, |line| {
        line.contains("recorded") && line.contains("socket_completed")
    })
    .len();
    assert_eq!(reported, 200, "the run ended before the kill");

    assert_eq!(sandbox.run(&["verify"]).code, 0);
    let kept = completions(&sandbox.run(&["show", "long", "--json"]).json());
    assert!(
        kept.len() >= reported,
        "{reported} steps reported, {} kept",
        kept.len()
    );
    let resumed = sandbox.run(&["resume", "long", "--agent", &agent, "--json"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(resumed.json()["status"], "completed");
    let done = completions(&sandbox.run(&["show", "long", "--json"]).json());
    assert_eq!(&done[..kept.len()], &kept[..]);
    let sockets: Vec<&str> = done.iter().map(|(s, _)| s.as_str()).collect();
    let mut expected = vec!["Socket-1", "Socket-2"];
    for _ in 0..ITEMS {
        expected.extend(["Socket-3", "Socket-4", "Socket-5"]);
    }
    expected.push("Socket-6");
    assert_eq!(sockets, expected);
    assert_eq!(sandbox.run(&["verify"]).code, 0);
}
