//! Watching a run: Ctrl-C records an abort; command agents can take JSON messages; the
//! progress line never reaches stdout.

use std::process::Stdio;

use crate::common::{Sandbox, fixture, scripted};

/// A command agent that answers from the build-loop script; `extra` runs first in each call.
fn agent(sandbox: &Sandbox, extra: &str) -> String {
    let counter = sandbox.path("calls");
    let script = fixture("scripts/build-loop.jsonl");
    let path = sandbox.path("agent.py");
    std::fs::write(
        &path,
        format!(
            r#"import json, sys, time
prompt = sys.stdin.read()
path = {counter:?}
try:
    n = int(open(path).read()) + 1
except FileNotFoundError:
    n = 1
open(path, "w").write(str(n))
{extra}
line = open({script:?}).read().splitlines()[n - 1]
sys.stdout.write(json.loads(line)["reply"])
"#
        ),
    )
    .unwrap();
    format!("cmd:python3 {}", path.display())
}

#[test]
fn ctrl_c_records_an_abort_and_resume_continues() {
    let sandbox = Sandbox::new();
    let spec = agent(&sandbox, "time.sleep(0.4) if n == 3 else None");
    let child = sandbox
        .build_loop("c", &spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let counter = sandbox.path("calls");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::read_to_string(&counter).map_or(true, |n| n.trim() != "3") {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent was never called a third time"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SIGINT to castlog alone, as a terminal would send to the foreground job.
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["status"], "aborted");
    assert!(
        report["message"]
            .as_str()
            .unwrap()
            .contains("castlog resume c")
    );

    let shown = sandbox.run(&["show", "c", "--json"]).json();
    let events = shown["events"].as_array().unwrap();
    let last = events.last().unwrap();
    assert_eq!(last["kind"], "cast_aborted");
    assert_eq!(last["payload"]["reason"], "interrupted (Ctrl-C)");
    // The call in flight was cancelled, not waited for: recorded as an interruption before
    // the abort, after the two replies before it.
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "agent_replied")
            .count(),
        2
    );
    let cancelled = &events[events.len() - 2];
    assert_eq!(cancelled["kind"], "agent_failed", "{cancelled}");
    assert_eq!(cancelled["payload"]["class"], "interruption", "{cancelled}");

    // The agent counts its calls: the cancelled third one is asked again.
    std::fs::write(&counter, "2").unwrap();
    let revived = sandbox.run(&["resume", "c", "--agent", &spec, "--json"]);
    assert_eq!(revived.json()["status"], "completed", "{}", revived.stderr);
    assert_eq!(sandbox.run(&["verify"]).code, 0);
}

#[test]
fn a_command_agent_can_take_json_messages() {
    let sandbox = Sandbox::new();
    let spec = agent(
        &sandbox,
        "messages = json.loads(prompt)\nassert messages[0]['role'] == 'system', messages\nassert all(set(m) == {'role', 'content'} for m in messages)",
    );
    let run = sandbox.run(&[
        "--agent-format",
        "json",
        "run",
        &fixture("loadouts/build-loop.json"),
        "--task",
        "greet",
        "--agent",
        &spec,
        "--json",
    ]);
    assert_eq!(run.json()["status"], "completed", "{}", run.stderr);
    // Text format (the default) is not JSON: the same agent's assertion fails and the cast stops.
    let text = sandbox.run(&[
        "run",
        &fixture("loadouts/build-loop.json"),
        "--task",
        "greet",
        "--agent",
        &spec,
        "--json",
    ]);
    assert_eq!(text.json()["status"], "awaiting_agent", "{}", text.stdout);
}

#[test]
fn the_progress_line_stays_off_stdout_and_off_a_pipe() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&[
        "run",
        &fixture("loadouts/build-loop.json"),
        "--task",
        "greet",
        "--agent",
        &scripted("build-loop.jsonl"),
        "--json",
    ]);
    assert_eq!(run.json()["status"], "completed");
    // stderr is a pipe here, so no progress line is drawn at all.
    assert!(!run.stderr.contains("attempt"), "{}", run.stderr);
}

/// Runs the build loop as cast `cast` with the agent `spec` under `--agent-timeout 1`: the run
/// must end well before the agent's 30 s sleep, awaiting the agent after a timed-out turn.
fn run_into_the_timeout(sandbox: &Sandbox, cast: &str, spec: &str) {
    let started = std::time::Instant::now();
    let run = sandbox.finish(
        sandbox
            .build_loop(cast, spec)
            .args(["--agent-timeout", "1"]),
    );
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(10), "took {took:?}");
    assert_eq!(run.json()["status"], "awaiting_agent", "{}", run.stdout);
    let shown = sandbox.run(&["show", cast, "--json"]).json();
    let failed = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "agent_failed")
        .unwrap();
    assert_eq!(failed["payload"]["class"], "interruption");
    let message = failed["payload"]["message"].as_str().unwrap();
    assert!(message.contains("timed out after 1s"), "{message}");
}

// A shell script's `sleep` is a grandchild that keeps stdout open after the shell is killed:
// the timeout must stop it as well, not wait for it.
#[test]
fn a_shell_script_agent_is_killed_with_its_children_at_the_timeout() {
    let sandbox = Sandbox::new();
    let script = sandbox.write("slow.sh", "cat > /dev/null\nsleep 30\necho late\n");
    run_into_the_timeout(&sandbox, "s", &format!("cmd:sh {script}"));
}

#[test]
fn a_hanging_command_agent_is_killed_at_the_timeout() {
    let sandbox = Sandbox::new();
    let spec = agent(&sandbox, "time.sleep(30) if n == 2 else None");
    run_into_the_timeout(&sandbox, "h", &spec);
    // The cast resumes from there. A script is consumed by the answers the log holds (one
    // reply and the timeout so far), so the resuming script starts with two placeholders.
    let lines = crate::common::fixture_lines("scripts/build-loop.jsonl");
    let mut rest = vec![lines[0].clone(), lines[0].clone()];
    rest.extend(lines[1..].iter().cloned());
    let script = sandbox.write("rest.jsonl", &rest.join("\n"));
    let resumed = sandbox.run(&[
        "resume",
        "h",
        "--agent",
        &format!("scripted:{script}"),
        "--json",
    ]);
    assert_eq!(resumed.json()["status"], "completed", "{}", resumed.stderr);
}

/// A second Ctrl-C quits at once (130) and takes the running program, children and all, with
/// it (it runs in a process group of its own, out of the terminal's reach). The first one
/// cancels an agent's call at once; a utility's run is let finish, so it is what a second
/// Ctrl-C stops.
#[test]
fn a_second_ctrl_c_quits_and_stops_the_running_program() {
    let sandbox = Sandbox::new();
    let pid_file = sandbox.path("sleeper.pid");
    let script = sandbox.write(
        "slow.sh",
        &format!("sleep 30 &\necho $! > {}\nwait\n", pid_file.display()),
    );
    let config = sandbox.write(
        "slow.json",
        &format!(
            r#"{{"activeLoadout": "Slow", "loadouts": {{"Slow": {{"entry": "Socket-1",
              "sockets": {{"Socket-1": {{"materia": "Wait"}}}}}}}},
              "materia": {{"Wait": {{"type": "utility", "timeoutMs": 60000, "command": ["sh", {script:?}]}}}}}}"#
        ),
    );
    let mut child = sandbox
        .command_on(&sandbox.db())
        .args(["run", &config, "--task", "wait", "--cast", "q", "--json"])
        .args(["--agent", &scripted("build-loop.jsonl")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let sleeper = loop {
        if let Ok(pid) = std::fs::read_to_string(&pid_file)
            && !pid.trim().is_empty()
        {
            break pid.trim().to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let interrupt = || {
        let sent = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    };
    interrupt();
    std::thread::sleep(std::time::Duration::from_millis(300));
    interrupt();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let alive = || {
        std::process::Command::new("kill")
            .args(["-0", &sleeper])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while alive() {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent's child {sleeper} outlived castlog"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let state = sandbox.run(&["state", "q", "--json"]).json();
    assert_eq!(state["status"], "running", "{state}");
}

/// `RUST_LOG=castlog_replay=debug` once left out the start of a cast (`cast_started` and the
/// first `socket_started`, recorded before the driver was watched): every event is traced.
#[test]
fn debug_tracing_names_every_event_of_a_run_including_its_start() {
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.build_loop("demo", &scripted("build-loop.jsonl"));
    cmd.env("RUST_LOG", "castlog_replay=debug");
    let run = sandbox.finish(&mut cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let events = run.json()["events"].as_u64().unwrap();
    let traced: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("recorded kind="))
        .collect();
    assert_eq!(traced.len() as u64, events, "{}", run.stderr);
    assert!(traced[0].contains("kind=\"cast_started\""), "{}", traced[0]);
    assert!(
        traced[1].contains("kind=\"socket_started\""),
        "{}",
        traced[1]
    );
}

/// Without `--json`, `run` prints each event's timeline line once it is durable, not all at
/// the end: the lines up to the third prompt are read while the agent still holds that turn.
#[test]
fn run_prints_each_event_as_it_becomes_durable() {
    use std::io::{BufRead, BufReader};
    let sandbox = Sandbox::new();
    let go = sandbox.path("go");
    // The third call waits until the test has read the lines before it (at most 60 s, so a
    // build that prints only at the end fails below instead of hanging).
    let spec = agent(
        &sandbox,
        &format!(
            "import os\nfor _ in range(1200):\n    if n != 3 or os.path.exists({go:?}):\n        break\n    time.sleep(0.05)"
        ),
    );
    let mut child = sandbox
        .command_on(&sandbox.db())
        .args([
            "run",
            &fixture("loadouts/build-loop.json"),
            "--task",
            "greet",
            "--cast",
            "live",
            "--agent",
            &spec,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut prompts = 0;
    while prompts < 3 {
        let line = lines
            .next()
            .expect("stdout ended before the third prompt")
            .unwrap();
        prompts += usize::from(line.contains(" prompt_dispatched "));
        seen.push(line);
    }
    assert!(
        child.try_wait().unwrap().is_none() && !go.exists(),
        "the lines came only after the cast was driven: {seen:?}"
    );
    std::fs::write(&go, "").unwrap();
    seen.extend(lines.map(Result::unwrap));
    assert!(child.wait().unwrap().success());
    // The same lines as a run printed at its end: every event once, in seq order, then the
    // status.
    let head = sandbox.run(&["state", "live", "--json"]).json()["head"]
        .as_u64()
        .unwrap();
    let (last, events) = seen.split_last().unwrap();
    assert_eq!(last, "cast live: completed");
    let seqs: Vec<u64> = events
        .iter()
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(seqs, (1..=head).collect::<Vec<_>>());
}
