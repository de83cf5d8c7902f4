//! Retries people control (`--retries`, `--backoff`, `--jitter`, a server's `Retry-After`),
//! each attempt on the progress line, Ctrl-C cancelling a long agent call, and a `cmd:`
//! program that does not exist refused before any cast is created.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::casts::{events, of_kind};
use crate::common::{Run, Sandbox, to_run};
use crate::terminal::on_terminal;

/// Two agent sockets in a row whose text replies complete them.
const TWO_STEPS: &str = r#"{"activeLoadout": "Two", "loadouts": {"Two": {"entry": "Socket-1",
  "sockets": {"Socket-1": {"materia": "Say", "parse": "text", "edges": [{"when": "always", "to": "Socket-2"}]},
              "Socket-2": {"materia": "Say", "parse": "text"}}}},
  "materia": {"Say": {"type": "agent", "tools": "none", "prompt": "Say something about {{request}}."}}}"#;

/// One canned HTTP answer: status line, extra headers, body.
pub type Canned = (&'static str, Vec<String>, String);

pub fn reply(text: &str) -> Canned {
    let body = serde_json::json!({
        "choices": [{"message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3}
    });
    ("200 OK", Vec::new(), body.to_string())
}

fn busy(status: &'static str, retry_after: Option<&str>) -> Canned {
    let headers = retry_after
        .map(|v| vec![format!("retry-after: {v}")])
        .unwrap_or_default();
    (
        status,
        headers,
        "{\"error\": {\"message\": \"busy\"}}".into(),
    )
}

/// Serves `answers` in order, one per connection, then the last one for ever; returns the
/// `openai:` SPEC that reaches it.
pub fn serve(answers: Vec<Canned>) -> String {
    serve_recording(answers).0
}

/// [`serve`], keeping the body of every request it was sent.
pub fn serve_recording(
    answers: Vec<Canned>,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = std::sync::Arc::clone(&seen);
    std::thread::spawn(move || {
        for (served, stream) in listener.incoming().flatten().enumerate() {
            let mut reader = BufReader::new(stream);
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            kept.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&body).into_owned());
            let (status, headers, body) = &answers[served.min(answers.len() - 1)];
            let mut stream = reader.into_inner();
            let mut head = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for header in headers {
                head.push_str(header);
                head.push_str("\r\n");
            }
            let _ = write!(stream, "{head}\r\n{body}");
        }
    });
    (format!("openai:http://127.0.0.1:{port}/v1#m"), seen)
}

fn run_two_steps(sandbox: &Sandbox, cast: &str, agent: &str, options: &[&str]) -> Run {
    let config = sandbox.write("two.json", TWO_STEPS);
    let mut cmd = sandbox.command_on(&sandbox.db());
    cmd.args(options)
        .args(["run", &config, "--task", "tea", "--cast", cast])
        .args(["--agent", agent, "--json"]);
    sandbox.finish(&mut cmd)
}

/// A 429 with `Retry-After: 1` is waited for: the failure records the wait it chose, and the
/// reply that follows is recorded at least that long after it. An HTTP date is read too.
#[test]
fn a_429_with_retry_after_is_waited_for_and_the_wait_is_recorded() {
    let sandbox = Sandbox::new();
    let spec = serve(vec![busy("429 Too Many Requests", Some("1")), reply("hi")]);
    let run = run_two_steps(&sandbox, "after", &spec, &["--jitter", "0"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
    let recorded = events(&sandbox, "after");
    let failed = of_kind(&recorded, "agent_failed");
    assert_eq!(failed.len(), 1, "{recorded:?}");
    let message = failed[0]["payload"]["message"].as_str().unwrap();
    assert!(message.contains("HTTP 429"), "{message}");
    assert!(
        message.contains("waiting 1s (Retry-After) before attempt 2 of 3"),
        "{message}"
    );
    let replied = of_kind(&recorded, "agent_replied");
    let gap = replied[0]["at_ms"].as_u64().unwrap() - failed[0]["at_ms"].as_u64().unwrap();
    assert!(gap >= 1000, "the retry came {gap} ms after the 429");

    // An HTTP date ahead (second precision, and the server may answer late: the wait is at
    // most 2 seconds).
    let at = httpdate_in(2);
    let spec = serve(vec![
        busy("503 Service Unavailable", Some(&at)),
        reply("hi"),
    ]);
    let run = run_two_steps(&sandbox, "dated", &spec, &[]);
    assert_eq!(run.json()["status"], "completed", "{}", run.stderr);
    let dated = events(&sandbox, "dated");
    let message = of_kind(&dated, "agent_failed")[0]["payload"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("(Retry-After) before attempt 2 of 3"),
        "{message}"
    );
}

/// An HTTP date `seconds` from now, as a server would send it.
fn httpdate_in(seconds: u64) -> String {
    let out = Command::new("date")
        .args([
            "-u",
            "-d",
            &format!("+{seconds} seconds"),
            "+%a, %d %b %Y %H:%M:%S GMT",
        ])
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// `--retries N` gives a prompt N+1 attempts, each one recorded with its number, and the backoff
/// between them is the one asked for; then the cast waits for `resume`, which starts a fresh
/// count under its own options.
#[test]
fn retries_give_a_prompt_n_plus_one_attempts_then_resume_tries_again() {
    let sandbox = Sandbox::new();
    let spec = serve(vec![busy("503 Service Unavailable", None)]);
    let options = ["--retries", "3", "--backoff", "0.05..0.1", "--jitter", "0"];
    let run = run_two_steps(&sandbox, "busy", &spec, &options);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = run.json();
    assert_eq!(doc["status"], "awaiting_agent", "{doc}");
    assert!(
        doc["message"]
            .as_str()
            .unwrap()
            .contains("4 transient agent failures in a row"),
        "{doc}"
    );
    let recorded = events(&sandbox, "busy");
    let failed = of_kind(&recorded, "agent_failed");
    let attempts: Vec<u64> = failed
        .iter()
        .map(|e| e["payload"]["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 3, 4]);
    let waits: Vec<&str> = failed
        .iter()
        .map(|e| e["payload"]["message"].as_str().unwrap())
        .collect();
    assert!(
        waits[0].ends_with("waiting 0.05s (backoff) before attempt 2 of 4"),
        "{waits:?}"
    );
    assert!(waits[1].ends_with("waiting 0.1s (backoff) before attempt 3 of 4"));
    assert!(waits[2].ends_with("waiting 0.1s (backoff) before attempt 4 of 4"));
    assert!(!waits[3].contains("waiting"), "{waits:?}");

    let spec = serve(vec![reply("hi")]);
    let mut resume = sandbox.command_on(&sandbox.db());
    resume.args(["resume", "busy", "--agent", &spec, "--json"]);
    let resumed = sandbox.finish(&mut resume);
    assert_eq!(resumed.json()["status"], "completed", "{}", resumed.stderr);
}

/// A script's transient lines count against `--retries` too: with none, the first failure
/// leaves the cast to `resume`.
#[test]
fn a_script_gets_the_attempts_retries_give() {
    let sandbox = Sandbox::new();
    let script = sandbox.write(
        "s.jsonl",
        "{\"error\":\"transient\",\"message\":\"busy\"}\n{\"reply\":\"a\"}\n{\"reply\":\"b\"}\n",
    );
    let agent = format!("scripted:{script}");
    let run = run_two_steps(&sandbox, "once", &agent, &["--retries", "0"]);
    assert_eq!(run.json()["status"], "awaiting_agent", "{}", run.stdout);
    let again = run_two_steps(&sandbox, "twice", &agent, &["--retries", "1"]);
    assert_eq!(again.json()["status"], "completed", "{}", again.stdout);
    let bad = sandbox.run(&["--backoff", "8..1", "casts"]);
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("BASE is longer than MAX"),
        "{}",
        bad.stderr
    );
}

/// On a terminal the progress line shows the attempt of the prompt in flight out of the
/// policy's attempts, and the tokens of the whole cast, counted on across `resume`.
#[test]
fn the_progress_line_shows_attempts_and_tokens_across_resume() {
    let sandbox = Sandbox::new();
    let script = sandbox.write(
        "s.jsonl",
        "{\"reply\":\"first\",\"usage\":{\"input\":30,\"output\":12}}\n",
    );
    let run = run_two_steps(&sandbox, "seen", &format!("scripted:{script}"), &[]);
    assert_eq!(run.json()["status"], "awaiting_agent", "{}", run.stdout);
    let spec = serve(vec![
        busy("503 Service Unavailable", Some("1")),
        busy("503 Service Unavailable", Some("1")),
        reply("second"),
    ]);
    let (code, shown) = on_terminal(
        &sandbox,
        &[],
        &format!("--retries 4 resume seen --agent {spec}"),
    );
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("cast seen: completed"), "{shown}");
    for attempt in ["attempt 2/5", "attempt 3/5"] {
        assert!(
            shown.contains(attempt),
            "no {attempt:?} on the line: {shown}"
        );
    }
    assert!(
        shown.contains("42 tokens"),
        "the tokens start from the log: {shown}"
    );
}

/// Ctrl-C while a `cmd:` agent sleeps kills the program and what it started, records the cancelled call
/// and the abort, and `resume` sends the prompt again and completes the cast.
#[test]
fn ctrl_c_during_a_sleeping_cmd_agent_records_an_abort_and_resume_completes() {
    let sandbox = Sandbox::new();
    let started = sandbox.path("started");
    let agent = sandbox.write(
        "slow.sh",
        &format!(
            "#!/bin/sh\ncat >/dev/null\nsleep 300 &\necho $! > {}\nwait\n",
            started.display()
        ),
    );
    make_executable(&agent);
    let config = sandbox.write("two.json", TWO_STEPS);
    let mut cmd = sandbox.command_on(&sandbox.db());
    let child = cmd
        .args(["run", &config, "--task", "tea", "--cast", "cut"])
        .args(["--agent", &format!("cmd:{agent}"), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&started).map_or(true, |pid| pid.trim().is_empty()) {
        assert!(Instant::now() < until, "the agent never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let run = to_run(&child.wait_with_output().unwrap());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "aborted", "{}", run.stdout);
    let recorded = events(&sandbox, "cut");
    let failed = of_kind(&recorded, "agent_failed");
    assert_eq!(failed.len(), 1, "{recorded:?}");
    assert_eq!(failed[0]["payload"]["class"], "interruption");
    assert!(
        failed[0]["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("cancelled (Ctrl-C)")
    );
    assert_eq!(of_kind(&recorded, "cast_aborted").len(), 1, "{recorded:?}");
    // The program's group was killed: its `sleep` is gone (or going) once castlog is done.
    let sleeper = std::fs::read_to_string(&started).unwrap().trim().to_owned();
    let until = Instant::now() + Duration::from_secs(5);
    while Command::new("kill")
        .args(["-0", &sleeper])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        assert!(
            Instant::now() < until,
            "the agent's sleep {sleeper} outlived the call"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // A script skips one line per answer the log holds: the cancelled call is one.
    let script = sandbox.write(
        "s.jsonl",
        "{\"reply\":\"skipped\"}\n{\"reply\":\"a\"}\n{\"reply\":\"b\"}\n",
    );
    let mut resume = sandbox.command_on(&sandbox.db());
    resume.args([
        "resume",
        "cut",
        "--agent",
        &format!("scripted:{script}"),
        "--json",
    ]);
    let resumed = sandbox.finish(&mut resume);
    assert_eq!(resumed.json()["status"], "completed", "{}", resumed.stderr);
}

fn make_executable(path: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A `cmd:` program that does not exist is refused with exit 1 before anything is recorded:
/// no database is even created.
#[test]
fn a_cmd_agent_that_does_not_exist_is_refused_before_the_cast_is_created() {
    let sandbox = Sandbox::new();
    let run = run_two_steps(&sandbox, "none", "cmd:nonexistent-program --flag", &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("nonexistent-program is not found on PATH"),
        "{}",
        run.stderr
    );
    run.assert_failure_stdout();
    assert!(!sandbox.db().exists(), "a database was created");
    let missing = run_two_steps(&sandbox, "none", "cmd:./missing.sh", &[]);
    assert_eq!(missing.code, 1, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("not an executable file"),
        "{}",
        missing.stderr
    );
}

/// Each command's `--help` lists only the options it takes: the agent options on the commands
/// that drive a cast, not on the others; given after the command's name they work as they do
/// before it.
#[test]
fn only_the_commands_that_drive_a_cast_list_the_agent_options() {
    let sandbox = Sandbox::new();
    let help = |command: &str| {
        let run = sandbox.run(&[command, "--help"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.stdout
    };
    let agent_options = [
        "--retries",
        "--backoff",
        "--jitter",
        "--agent-format",
        "--agent-timeout",
        "--fallback",
        "--pass-env",
        "--exit-status",
        "--otlp-endpoint",
    ];
    for command in [
        "casts", "show", "state", "diff", "verify", "prompt", "audit",
    ] {
        let text = help(command);
        for option in agent_options {
            assert!(
                !text.contains(option),
                "`{command} --help` lists {option}:\n{text}"
            );
        }
    }
    for command in ["run", "refine", "continue", "revive", "resume", "recast"] {
        let text = help(command);
        for option in agent_options {
            assert!(
                text.contains(option),
                "`{command} --help` lacks {option}:\n{text}"
            );
        }
    }
    assert!(help("engage").contains("--retries") && help("engage-scorecard").contains("--retries"));
    assert!(help("export").contains("--otel-content") && !help("export").contains("--retries"));
    // Before the command's name or after it, the same policy.
    let script = sandbox.write(
        "s.jsonl",
        "{\"error\":\"transient\",\"message\":\"busy\"}\n{\"reply\":\"a\"}\n{\"reply\":\"b\"}\n",
    );
    let config = sandbox.write("two.json", TWO_STEPS);
    let after = sandbox.run(&[
        "run",
        &config,
        "--task",
        "tea",
        "--cast",
        "after",
        "--agent",
        &format!("scripted:{script}"),
        "--retries",
        "0",
        "--json",
    ]);
    assert_eq!(after.json()["status"], "awaiting_agent", "{}", after.stdout);
    let refused = sandbox.run(&["casts", "--retries", "0"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
}
