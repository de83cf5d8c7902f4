//! Bad input is a clear user error (exit 1, never a panic, nothing recorded), and a utility that
//! fails, hangs or prints garbage fails its cast with a reason that says which.

use rstest::rstest;
use serde_json::json;

use crate::casts::{TASK, assert_no_panic, assert_verified, events, run_cast, state};
use crate::common::{Run, Sandbox, fixture, fixture_lines};

/// Expects exit 1 with a message on stderr containing every one of `needles`.
fn assert_user_error(run: &Run, needles: &[&str]) {
    assert_no_panic(run);
    assert_eq!(run.code, 1, "exit {}: {}", run.code, run.stderr);
    run.assert_failure_stdout();
    for needle in needles {
        assert!(
            run.stderr.contains(needle),
            "stderr lacks {needle:?}: {}",
            run.stderr
        );
    }
}

/// `run CONFIG --task … --agent AGENT [extra…] --json`.
fn try_run(sandbox: &Sandbox, config: &str, agent: &str, extra: &[&str]) -> Run {
    let mut args = vec!["run", config, "--task", TASK, "--agent", agent];
    args.extend(extra);
    args.push("--json");
    sandbox.run(&args)
}

fn build_loop_agent() -> String {
    format!("scripted:{}", fixture("scripts/build-loop.jsonl"))
}

#[test]
fn a_config_that_is_not_json_names_the_line() {
    let sandbox = Sandbox::new();
    let config = sandbox.write("bad.json", "{\n  \"activeLoadout\": \"X\",\n  oops\n}\n");
    let run = try_run(&sandbox, &config, &build_loop_agent(), &[]);
    assert_user_error(&run, &["bad.json", "line 3"]);
    assert!(!sandbox.db().exists(), "nothing was recorded");
}

#[test]
fn an_edge_to_an_unknown_socket_names_the_json_path() {
    let sandbox = Sandbox::new();
    let text = std::fs::read_to_string(fixture("loadouts/build-loop.json")).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&text).unwrap();
    config["loadouts"]["Build-Loop"]["sockets"]["Socket-2"]["edges"][0]["to"] = json!("Socket-99");
    let path = sandbox.write("edge.json", &config.to_string());
    let run = try_run(&sandbox, &path, &build_loop_agent(), &[]);
    assert_user_error(&run, &["edges", "Socket-2", "Socket-99"]);
    assert!(!sandbox.db().exists(), "nothing was recorded");
}

/// pi-materia refuses a utility socket's own `parse` (a utility's parse mode is its materia's)
/// and a `command` with an empty argument; castlog once took both silently.
#[rstest]
#[case::utility_socket_parse(
    &["loadouts", "Build-Loop", "sockets", "Socket-1", "parse"],
    json!("json"),
    &["loadouts.Build-Loop.sockets.Socket-1.parse", "obsolete", "materia.Detect-VCS"]
)]
#[case::empty_command_argument(
    &["materia", "Detect-VCS", "command"],
    json!(["git", ""]),
    &["materia.Detect-VCS.command[1]", "argument 1 is an empty string"]
)]
fn pi_materia_load_time_refusals_name_socket_field_and_index(
    #[case] at: &[&str],
    #[case] value: serde_json::Value,
    #[case] needles: &[&str],
) {
    let sandbox = Sandbox::new();
    let text = std::fs::read_to_string(fixture("loadouts/build-loop.json")).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&text).unwrap();
    let (last, parents) = at.split_last().unwrap();
    let mut node = &mut config;
    for key in parents {
        node = &mut node[*key];
    }
    node[*last] = value;
    let path = sandbox.write("refused.json", &config.to_string());
    let run = try_run(&sandbox, &path, &build_loop_agent(), &[]);
    assert_user_error(&run, needles);
    assert!(!sandbox.db().exists(), "nothing was recorded");
}

#[rstest]
#[case::native("loadouts/build-loop.json", &["Build-Loop"])]
#[case::pi_materia("pi-materia-default.json", &["Full-Auto", "Planning-Consult", "Hojo-Consult"])]
fn an_unknown_loadout_lists_the_known_names(#[case] config: &str, #[case] known: &[&str]) {
    let sandbox = Sandbox::new();
    let run = try_run(
        &sandbox,
        &fixture(config),
        &build_loop_agent(),
        &["--loadout", "Nope"],
    );
    let mut needles = vec!["Nope"];
    needles.extend(known);
    assert_user_error(&run, &needles);
    assert!(!sandbox.db().exists(), "nothing was recorded");
}

#[test]
fn a_missing_config_file_is_a_user_error() {
    let sandbox = Sandbox::new();
    let missing = sandbox.path("missing.json");
    let run = try_run(
        &sandbox,
        missing.to_str().unwrap(),
        &build_loop_agent(),
        &[],
    );
    assert_user_error(&run, &["missing.json"]);
    assert!(!sandbox.db().exists(), "nothing was recorded");
}

#[test]
fn an_unknown_agent_spec_is_a_user_error() {
    let sandbox = Sandbox::new();
    let run = try_run(
        &sandbox,
        &fixture("loadouts/build-loop.json"),
        "foo:bar",
        &[],
    );
    assert_user_error(&run, &["foo:bar", "scripted:"]);
    assert!(!sandbox.db().exists(), "nothing was recorded");
}

#[rstest]
#[case::not_json(r#"{"reply": oops"#)]
#[case::unknown_shape(r#"{"what": 1}"#)]
fn a_malformed_script_line_names_its_line_number(#[case] bad: &str) {
    let sandbox = Sandbox::new();
    let mut lines = fixture_lines("scripts/build-loop.jsonl")[..2].to_vec();
    lines.push(bad.to_owned());
    let script = sandbox.write("broken.jsonl", &(lines.join("\n") + "\n"));
    let run = try_run(
        &sandbox,
        &fixture("loadouts/build-loop.json"),
        &format!("scripted:{script}"),
        &[],
    );
    assert_user_error(&run, &["broken.jsonl", "line 3"]);
    assert!(!sandbox.db().exists(), "nothing was recorded");
}

#[test]
fn refine_on_an_unknown_cast_is_a_user_error() {
    let sandbox = Sandbox::new();
    // Without any database.
    let run = sandbox.run(&["refine", "nope", "hello", "--json"]);
    assert_user_error(&run, &[]);
    assert!(!sandbox.db().exists(), "refine created no database");
    // With a database that holds another cast.
    sandbox.append("other", 1);
    let run = sandbox.run(&["refine", "nope", "hello", "--json"]);
    assert_user_error(&run, &["nope"]);
    let casts = sandbox.run(&["casts", "--json"]).json();
    assert_eq!(casts["casts"].as_array().unwrap().len(), 1, "{casts}");
}

/// A loadout of one utility socket running `command`, then one agent socket.
fn utility_config(sandbox: &Sandbox, name: &str, utility: &serde_json::Value) -> String {
    let mut tool = json!({ "type": "utility", "label": "Tool", "parse": "json" });
    for (key, value) in utility.as_object().unwrap() {
        tool[key] = value.clone();
    }
    let config = json!({
        "activeLoadout": "Tool-Then-Say",
        "loadouts": {
            "Tool-Then-Say": {
                "entry": "Socket-1",
                "sockets": {
                    "Socket-1": { "materia": "Tool", "edges": [{ "when": "always", "to": "Socket-2" }] },
                    "Socket-2": { "materia": "Say", "parse": "text" }
                }
            }
        },
        "materia": {
            "Tool": tool,
            "Say": { "type": "agent", "tools": "readOnly", "prompt": "Say what happened: {{request}}" }
        }
    });
    sandbox.write(name, &config.to_string())
}

#[rstest]
#[case::exit_code(
    json!({ "command": ["sh", "-c", "echo boom >&2; exit 3"] }),
    &["exited with code 3", "boom"]
)]
#[case::timeout(json!({ "command": ["sleep", "5"], "timeoutMs": 200 }), &["timed out"])]
#[case::invalid_json(
    json!({ "command": ["echo", "this is not json"], "parse": "json" }),
    &["invalid JSON"]
)]
fn a_failing_utility_fails_the_cast_with_the_reason(
    #[case] utility: serde_json::Value,
    #[case] needles: &[&str],
) {
    let sandbox = Sandbox::new();
    let config = utility_config(&sandbox, "tool.json", &utility);
    let script = sandbox.write("say.jsonl", "{\"reply\": \"nothing to say\"}\n");
    let out = run_cast(&sandbox, &config, None, &script, "tool");
    assert_eq!(out["status"], "failed", "{out}");
    let state = state(&sandbox, "tool");
    assert_eq!(state["status"], "failed");
    assert_eq!(state["failure"]["socket"], "Socket-1", "{state}");
    let reason = state["failure"]["reason"].as_str().unwrap();
    for needle in needles {
        assert!(reason.contains(needle), "reason lacks {needle:?}: {reason}");
    }
    assert!(reason.contains("Socket-1"), "{reason}");
    assert_eq!(out["message"], reason);
    // The utility's result was recorded before the failure, and the agent was never asked.
    let events = events(&sandbox, "tool");
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "cast_started",
            "socket_started",
            "utility_finished",
            "cast_failed"
        ]
    );
    assert_verified(&sandbox);
}

/// A usage error (unknown flag, missing value, conflicting flags) is bad input: exit 1 with
/// the parser's explanation; `--help` and `--version` succeed.
#[test]
fn usage_errors_exit_1_and_help_exits_0() {
    let sandbox = Sandbox::new();
    for args in [
        vec!["run", "--no-such-flag"],
        vec!["casts", "extra", "words"],
        vec!["claims", "resolve", "clm-x", "--staged", "1", "--abandoned"],
        vec!["no-such-command"],
    ] {
        let run = sandbox.run(&args);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("Usage"), "{args:?}: {}", run.stderr);
    }
    for args in [vec!["--help"], vec!["run", "--help"], vec!["--version"]] {
        let run = sandbox.run(&args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        assert!(!run.stdout.is_empty());
    }
}

/// An engage run and a destination's claim ledger are recorded as casts but are not workflow
/// casts: `state`, `resume` and `recast` say so and where to look (exit 1), not that the log
/// is damaged.
#[test]
fn an_engage_cast_is_named_as_not_a_workflow_cast() {
    let sandbox = Sandbox::new();
    let input = fixture("engage/input.json");
    let run = crate::engage::engage(&sandbox, &input, &["--cast", "ec"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for args in [
        vec!["state", "ec"],
        vec!["resume", "ec", "--agent", "scripted:/dev/null"],
        vec!["recast", "ec", "--at", "1", "--agent", "scripted:/dev/null"],
    ] {
        let out = sandbox.run(&args);
        assert_user_error(
            &out,
            &[
                "ec is not a workflow cast",
                "engagement_started",
                "castlog show ec",
            ],
        );
    }
}

/// `--cast` may not name a destination's claim ledger (`claims:…`), be empty, or be taken.
#[test]
fn a_chosen_cast_id_is_checked() {
    let sandbox = Sandbox::new();
    let script = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let loadout = fixture("loadouts/build-loop.json");
    let run = |cast: &str| {
        sandbox.run(&[
            "run", &loadout, "--task", TASK, "--cast", cast, "--agent", &script,
        ])
    };
    assert_user_error(&run("claims:999"), &["claims:", "claim ledgers"]);
    assert_user_error(&run(" "), &["--cast must not be empty"]);
    assert_eq!(run("mine").code, 0);
    assert_user_error(&run("mine"), &["cast mine already exists"]);
    let input = fixture("engage/input.json");
    let engaged = crate::engage::engage(&sandbox, &input, &["--cast", "claims:999"]);
    assert_user_error(&engaged, &["claims:", "claim ledgers"]);
    let recast = sandbox.run(&[
        "recast", "mine", "--at", "2", "--agent", &script, "--cast", "claims:x",
    ]);
    assert_user_error(&recast, &["claims:", "claim ledgers"]);
}

/// A `file:` fetcher naming no directory is refused before anything is recorded (it would
/// otherwise report every source message as deleted).
#[test]
fn a_fetcher_directory_that_is_not_there_is_named() {
    let sandbox = Sandbox::new();
    let input = fixture("engage/input.json");
    let run = crate::engage::engage(&sandbox, &input, &["--fetcher", "file:/no/such/dir"]);
    assert_user_error(&run, &["/no/such/dir is not a directory"]);
    let casts = sandbox.run(&["casts", "--json"]);
    let listed = if casts.code == 0 {
        casts.json()["casts"].as_array().map_or(0, Vec::len)
    } else {
        0
    };
    assert_eq!(listed, 0, "nothing is recorded: {}", casts.stdout);
}

/// `state --at` takes a seq of the cast: 0 and a seq past the head are refused naming the
/// range (not shown as the head, not named as an unknown cast).
#[test]
fn state_at_a_seq_outside_the_cast_names_its_range() {
    let sandbox = Sandbox::new();
    let script = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let run = sandbox.finish(&mut sandbox.build_loop("b", &script));
    let head = run.json()["events"].as_u64().unwrap();
    for at in ["0", &(head + 1).to_string()] {
        let out = sandbox.run(&["state", "b", "--at", at]);
        assert_user_error(
            &out,
            &[
                &format!("--at {at} is outside cast b"),
                &format!("seq 1 to {head}"),
            ],
        );
    }
    let last = sandbox.run(&["state", "b", "--at", &head.to_string(), "--json"]);
    assert_eq!(last.code, 0, "{}", last.stderr);
    let unknown = sandbox.run(&["state", "nope", "--at", "3"]);
    assert_user_error(&unknown, &["no cast named \"nope\""]);
}

/// Another process appending to a cast while it is driven (here the agent itself steers the
/// cast) makes the driver's next append conflict: a user error (exit 1) that says nothing of
/// the step was recorded and how to go on, with the log left sound.
#[test]
fn a_cast_written_by_another_process_meanwhile_stops_with_a_way_on() {
    let sandbox = Sandbox::new();
    let db = sandbox.db();
    let steer = sandbox.write(
        "steer.sh",
        &format!(
            "cat >/dev/null\n'{}' --db '{}' steer busy 'be terse' >/dev/null\necho hello\n",
            crate::common::castlog_bin(),
            db.display()
        ),
    );
    let agent = format!("cmd:sh {steer}");
    let run = sandbox.finish(&mut sandbox.build_loop("busy", &agent));
    assert_user_error(
        &run,
        &[
            "castlog: cast busy: conflict",
            "another castlog process wrote to cast busy meanwhile",
            "castlog resume busy --agent SPEC",
        ],
    );
    assert_eq!(sandbox.run(&["verify"]).code, 0);
}

/// `--agent-timeout` bounds each request of an `openai:` agent too: a server that never
/// answers stops the cast as awaiting_agent after the transient retries, in seconds.
#[test]
fn agent_timeout_bounds_an_openai_request() {
    let sandbox = Sandbox::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream); // read nothing, answer nothing
        }
    });
    let agent = format!("openai:http://127.0.0.1:{port}/v1#m");
    let started = std::time::Instant::now();
    let run = sandbox.finish(
        sandbox
            .build_loop("slow", &agent)
            .args(["--agent-timeout", "1"]),
    );
    let took = started.elapsed();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["status"], "awaiting_agent", "{}", run.stdout);
    assert!(took < std::time::Duration::from_secs(30), "took {took:?}");
    let zero = sandbox.run(&["--agent-timeout", "0", "casts"]);
    assert_eq!(zero.code, 1, "{}", zero.stderr);
}

/// Filters and messages that say nothing are refused: an empty refinement or steering note,
/// and an `audit` filter naming a socket or source type the cast has no prompt of.
#[test]
fn empty_messages_and_filters_that_match_nothing_are_refused() {
    let sandbox = Sandbox::new();
    let script = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let run = sandbox.finish(&mut sandbox.build_loop("b", &script));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_user_error(
        &sandbox.run(&["refine", "b", "  "]),
        &["the refinement is empty"],
    );
    assert_user_error(
        &sandbox.run(&["steer", "b", ""]),
        &["the steering note is empty"],
    );
    assert_user_error(
        &sandbox.run(&["audit", "b", "--socket", "Socket-9"]),
        &["has no prompt of socket \"Socket-9\""],
    );
    assert_user_error(
        &sandbox.run(&["audit", "b", "--source-type", "nope"]),
        &["source type \"nope\""],
    );
    let found = sandbox.run(&[
        "audit",
        "b",
        "--socket",
        "Socket-3",
        "--source-type",
        "workItem",
    ]);
    assert_eq!(found.code, 0, "{}", found.stderr);
}

/// `--sender` without `--post` sends nothing (a dry run) and says so on stderr.
#[test]
fn a_sender_without_post_is_named_as_a_dry_run() {
    let sandbox = Sandbox::new();
    let out_dir = sandbox.path("outbox");
    let run = sandbox.run(&[
        "run",
        &fixture("loadouts/post.json"),
        "--task",
        TASK,
        "--agent",
        &format!("scripted:{}", fixture("scripts/post.jsonl")),
        "--sender",
        &format!("file:{}", out_dir.display()),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("dry run: --sender"), "{}", run.stderr);
    assert!(!out_dir.exists() || std::fs::read_dir(&out_dir).unwrap().next().is_none());
}

/// `--fallback` serves only `recorded:` agents; given with another agent it is named as
/// unused instead of being dropped in silence.
#[test]
fn a_fallback_with_a_live_agent_is_named_as_unused() {
    let sandbox = Sandbox::new();
    let script = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let run = sandbox.finish(
        sandbox
            .build_loop("fb", &script)
            .args(["--fallback", &script]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("--fallback is used only by recorded:CAST agents"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_script_line_with_a_persons_message_where_a_reply_is_due_is_a_user_error_naming_the_line() {
    // Was an internal-sounding "agent" error numbered by answer, not by the script's line.
    let sandbox = Sandbox::new();
    let script = sandbox.write("wrong.jsonl", "\n{\"user\": \"looks good\"}\n");
    let run = try_run(
        &sandbox,
        &fixture("loadouts/build-loop.json"),
        &format!("scripted:{script}"),
        &[],
    );
    assert_user_error(
        &run,
        &[
            "line 2 of",
            "wrong.jsonl",
            "a person's refinement or continue",
            "waits for an agent reply",
        ],
    );
}
