//! Casts that stop before the end and are picked up again: the no-advance guard, an exhausted
//! edge allowance and `revive`, a script that runs out and `resume`, multi-turn refinement by
//! hand, `steer`, and `abort` then `revive`.

use serde_json::Value;

use crate::casts::{assert_no_panic, assert_verified, events, of_kind, report, run_cast, state};
use crate::common::{Sandbox, fixture, fixture_lines};

/// The first `n` lines of a fixture script, written to `name` in the sandbox.
fn script_head(sandbox: &Sandbox, fixture_script: &str, n: usize, name: &str) -> String {
    let lines = fixture_lines(&format!("scripts/{fixture_script}"));
    sandbox.write(name, &(lines[..n].join("\n") + "\n"))
}

/// The seq of an event.
fn seq(event: &Value) -> u64 {
    event["seq"].as_u64().unwrap()
}

#[test]
fn the_no_advance_guard_fails_the_cast_naming_item_and_cycle() {
    let sandbox = Sandbox::new();
    let out = run_cast(
        &sandbox,
        &fixture("loadouts/no-advance.json"),
        None,
        &fixture("scripts/no-advance.jsonl"),
        "stuck",
    );
    assert_eq!(out["status"], "failed", "{out}");
    let state = state(&sandbox, "stuck");
    assert_eq!(state["status"], "failed");
    let cursor = state["cursors"]
        .get("workItemIndex")
        .map_or(0, |v| v.as_u64().unwrap());
    assert_eq!(cursor, 0, "{state}");
    assert_eq!(state["visits"]["Socket-2"], 2, "{state}");
    assert_eq!(state["visits"]["Socket-3"], 2, "{state}");
    let reason = state["failure"]["reason"].as_str().unwrap();
    assert!(reason.contains("WI-1"), "{reason}");
    assert!(
        reason.contains("Socket-2 -> Socket-3 -> Socket-2"),
        "{reason}"
    );
    assert_eq!(out["message"], reason);
    let events = events(&sandbox, "stuck");
    assert_eq!(events.last().unwrap()["kind"], "cast_failed");
    assert_verified(&sandbox);
}

#[test]
fn an_exhausted_allowance_fails_and_revive_doubles_exactly_that_allowance() {
    let sandbox = Sandbox::new();
    let script = fixture("scripts/build-loop-exhausted.jsonl");
    let out = run_cast(
        &sandbox,
        &fixture("loadouts/build-loop.json"),
        None,
        &script,
        "tired",
    );
    assert_eq!(out["status"], "failed", "{out}");
    let before = state(&sandbox, "tired");
    let reason = before["failure"]["reason"].as_str().unwrap();
    assert!(reason.contains("Socket-4->Socket-3"), "{reason}");
    let allowance_of = |state: &Value| -> Value {
        let allowances = state["allowances"].as_object().unwrap();
        let (_, allowance) = allowances
            .iter()
            .find(|(key, _)| key.contains("Socket-4->Socket-3"))
            .unwrap_or_else(|| panic!("no allowance for the edge: {state}"));
        allowance.clone()
    };
    assert_eq!(allowance_of(&before)["effective"], 2, "{before}");
    assert_eq!(
        before["traversals"]["Socket-4->Socket-3@WI-1"], 2,
        "{before}"
    );

    let agent = format!("scripted:{script}");
    let out = report(&sandbox, &["revive", "tired", "--agent", &agent]);
    assert_eq!(out["status"], "completed", "{out}");
    let after = state(&sandbox, "tired");
    assert_eq!(after["status"], "completed");
    assert_eq!(after["failure"], Value::Null);
    assert_eq!(allowance_of(&after)["effective"], 4, "{after}");
    // The third rework round used the extension; the accepted item was then checkpointed.
    assert_eq!(after["traversals"]["Socket-4->Socket-3@WI-1"], 3, "{after}");
    assert_eq!(after["cursors"]["workItemIndex"], 1, "{after}");
    assert_eq!(after["rework"], serde_json::json!([]), "{after}");
    let events = events(&sandbox, "tired");
    assert_eq!(of_kind(&events, "cast_failed").len(), 1);
    assert_eq!(of_kind(&events, "cast_revived").len(), 1);
    assert_verified(&sandbox);
}

#[test]
fn a_script_that_runs_out_waits_and_resume_redispatches_once() {
    let sandbox = Sandbox::new();
    let short = script_head(&sandbox, "build-loop.jsonl", 3, "three-lines.jsonl");
    let run = sandbox.run(&[
        "run",
        &fixture("loadouts/build-loop.json"),
        "--task",
        crate::casts::TASK,
        "--agent",
        &format!("scripted:{short}"),
        "--cast",
        "short",
        "--json",
    ]);
    assert_no_panic(&run);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    crate::casts::assert_report_shape(&out);
    assert_eq!(out["status"], "awaiting_agent", "{out}");
    let message = out["message"].as_str().unwrap();
    assert!(message.contains("three-lines.jsonl"), "{message}");
    let waiting = state(&sandbox, "short");
    assert_eq!(waiting["status"], "awaiting_agent");
    // Three lines: the plan, the build, and the Eval's invalid reply; the repair turn waits.
    assert_eq!(waiting["socket"], "Socket-4", "{waiting}");

    let agent = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let out = report(&sandbox, &["resume", "short", "--agent", &agent]);
    assert_eq!(out["status"], "completed", "{out}");

    let events = events(&sandbox, "short");
    let redispatched: Vec<&Value> = of_kind(&events, "prompt_dispatched")
        .into_iter()
        .filter(|e| e["payload"]["redispatch"] == true)
        .collect();
    assert_eq!(redispatched.len(), 1, "{redispatched:?}");
    assert_eq!(redispatched[0]["payload"]["socket"], "Socket-4");
    assert_eq!(of_kind(&events, "cast_resumed").len(), 1);
    // The resumed cast went on from the 4th line: the repaired Eval verdict.
    let replies = of_kind(&events, "agent_replied");
    let next = replies
        .iter()
        .find(|e| seq(e) > seq(redispatched[0]))
        .unwrap();
    assert!(
        next["payload"]
            .to_string()
            .contains("greet() ignores the user"),
        "{next}"
    );
    // Every line was answered exactly once: 11 script lines, 11 replies.
    assert_eq!(replies.len(), 11);
    let state = state(&sandbox, "short");
    assert_eq!(state["cursors"]["workItemIndex"], 2, "{state}");
    assert_verified(&sandbox);
}

#[test]
fn multi_turn_by_hand_refine_then_resume_finalizes_once() {
    let sandbox = Sandbox::new();
    let consult = fixture_lines("scripts/consult.jsonl");
    let first = script_head(&sandbox, "consult.jsonl", 1, "first-draft.jsonl");
    let out = run_cast(
        &sandbox,
        &fixture("loadouts/consult.json"),
        None,
        &first,
        "talk",
    );
    assert_eq!(out["status"], "awaiting_refinement", "{out}");
    let paused = state(&sandbox, "talk");
    assert_eq!(paused["socket"], "Socket-2");

    // A refinement by hand, without an agent: recorded, then the cast waits for one.
    let out = report(&sandbox, &["refine", "talk", "keep it to two items"]);
    assert_eq!(out["status"], "awaiting_agent", "{out}");
    let events_now = events(&sandbox, "talk");
    let refined = of_kind(&events_now, "user_refined");
    assert_eq!(refined.len(), 1);
    assert_eq!(refined[0]["payload"]["text"], "keep it to two items");
    assert_eq!(state(&sandbox, "talk")["status"], "awaiting_agent");

    // `continue` is refused while the socket waits for the agent, and records nothing.
    let count = events_now.len();
    let run = sandbox.run(&["continue", "talk", "--json"]);
    assert_no_panic(&run);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stderr.contains("no multi-turn socket is paused"),
        "{}",
        run.stderr
    );
    assert_eq!(events(&sandbox, "talk").len(), count);

    // The log shows one answer (the first draft): the agent skips that many lines.
    let mut lines = vec![
        consult[0].clone(),
        r#"{"reply": "Second draft: the parser, then the printer."}"#.to_owned(),
        r#"{"continue": true}"#.to_owned(),
    ];
    lines.extend(consult[4..].iter().cloned());
    let rest = sandbox.write("rest.jsonl", &(lines.join("\n") + "\n"));
    let agent = format!("scripted:{rest}");
    let out = report(&sandbox, &["resume", "talk", "--agent", &agent]);
    assert_eq!(out["status"], "completed", "{out}");

    let events = events(&sandbox, "talk");
    assert_eq!(of_kind(&events, "finalize_requested").len(), 1);
    let drafts: Vec<&Value> = of_kind(&events, "refinement_recorded")
        .iter()
        .map(|e| &e["payload"]["text"])
        .collect();
    assert_eq!(
        drafts,
        [
            "Draft: a parser and a printer. Anything else?",
            "Second draft: the parser, then the printer."
        ]
    );
    let socket_2 = of_kind(&events, "socket_completed")
        .into_iter()
        .find(|e| e["payload"]["socket"] == "Socket-2")
        .unwrap();
    assert_eq!(socket_2["payload"]["finalized"], true, "{socket_2}");
    assert_eq!(of_kind(&events, "user_refined").len(), 1);
    assert_eq!(state(&sandbox, "talk")["cursors"]["workItemIndex"], 2);
    assert_verified(&sandbox);
}

#[test]
fn a_steering_note_reaches_the_next_prompt() {
    let sandbox = Sandbox::new();
    let short = script_head(&sandbox, "build-loop.jsonl", 3, "three-lines.jsonl");
    let out = run_cast(
        &sandbox,
        &fixture("loadouts/build-loop.json"),
        None,
        &short,
        "steered",
    );
    assert_eq!(out["status"], "awaiting_agent", "{out}");

    let out = report(&sandbox, &["steer", "steered", "prefer small diffs"]);
    assert_eq!(out["status"], "awaiting_agent", "{out}");
    let events_now = events(&sandbox, "steered");
    let noted = of_kind(&events_now, "steering_noted");
    assert_eq!(noted.len(), 1);
    assert_eq!(noted[0]["payload"]["text"], "prefer small diffs");
    let noted_at = seq(noted[0]);
    // No prompt carried the note before it was given.
    let has_note = |e: &Value| {
        e["payload"]["placements"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["source_type"] == "steeringNote")
    };
    assert!(
        of_kind(&events_now, "prompt_dispatched")
            .iter()
            .all(|e| !has_note(e))
    );

    let agent = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let out = report(&sandbox, &["resume", "steered", "--agent", &agent]);
    assert_eq!(out["status"], "completed", "{out}");
    let events = events(&sandbox, "steered");
    let next = of_kind(&events, "prompt_dispatched")
        .into_iter()
        .find(|e| seq(e) > noted_at)
        .unwrap();
    assert!(has_note(next), "{next}");
    assert_verified(&sandbox);
}

#[test]
fn abort_is_an_event_and_revive_continues_the_cast() {
    let sandbox = Sandbox::new();
    let short = script_head(&sandbox, "build-loop.jsonl", 3, "three-lines.jsonl");
    let out = run_cast(
        &sandbox,
        &fixture("loadouts/build-loop.json"),
        None,
        &short,
        "stopped",
    );
    assert_eq!(out["status"], "awaiting_agent", "{out}");

    let out = report(&sandbox, &["abort", "stopped"]);
    assert_eq!(out["status"], "aborted", "{out}");
    assert_eq!(state(&sandbox, "stopped")["status"], "aborted");
    let aborted = events(&sandbox, "stopped");
    assert_eq!(aborted.last().unwrap()["kind"], "cast_aborted");
    assert_eq!(out["events"], aborted.len());

    let agent = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let out = report(&sandbox, &["revive", "stopped", "--agent", &agent]);
    assert_eq!(out["status"], "completed", "{out}");
    let events = events(&sandbox, "stopped");
    assert_eq!(of_kind(&events, "cast_aborted").len(), 1);
    let revived = of_kind(&events, "cast_revived");
    assert_eq!(revived.len(), 1);
    assert!(seq(revived[0]) > seq(of_kind(&events, "cast_aborted")[0]));
    let state = state(&sandbox, "stopped");
    assert_eq!(state["status"], "completed");
    assert_eq!(state["cursors"]["workItemIndex"], 2, "{state}");
    assert_verified(&sandbox);
}

/// The README's multi-turn flow with a script of replies only: the cast stops at each pause
/// (the script's next line is kept for the agent), `refine` answers and pauses again, and
/// `continue` finalizes and drives to the end.
#[test]
fn a_script_of_replies_only_leaves_each_pause_to_the_person() {
    let sandbox = Sandbox::new();
    let replies: Vec<String> = fixture_lines("scripts/consult.jsonl")
        .into_iter()
        .filter(|l| !l.contains("\"user\"") && !l.contains("\"continue\""))
        .collect();
    let script = sandbox.write("replies.jsonl", &(replies.join("\n") + "\n"));
    let agent = format!("scripted:{script}");
    let out = run_cast(
        &sandbox,
        &fixture("loadouts/consult.json"),
        None,
        &script,
        "plan",
    );
    assert_eq!(out["status"], "awaiting_refinement", "{out}");
    assert!(
        out["message"].as_str().unwrap().contains("castlog refine"),
        "{out}"
    );
    let out = report(
        &sandbox,
        &["refine", "plan", "keep it to two items", "--agent", &agent],
    );
    assert_eq!(out["status"], "awaiting_refinement", "{out}");
    let out = report(&sandbox, &["continue", "plan", "--agent", &agent]);
    assert_eq!(out["status"], "completed", "{out}");
    let events = events(&sandbox, "plan");
    let drafts: Vec<&Value> = of_kind(&events, "refinement_recorded")
        .iter()
        .map(|e| &e["payload"]["text"])
        .collect();
    assert_eq!(
        drafts,
        [
            "Draft: a parser and a printer. Anything else?",
            "Agreed: parser, then printer."
        ]
    );
    assert_verified(&sandbox);
}

/// A mistyped agent SPEC is refused before the input is recorded: the cast has not moved, and
/// the same command with the right SPEC then works.
#[test]
fn refine_checks_its_agent_before_recording_the_refinement() {
    let sandbox = Sandbox::new();
    let first = script_head(&sandbox, "consult.jsonl", 1, "first-draft.jsonl");
    let out = run_cast(
        &sandbox,
        &fixture("loadouts/consult.json"),
        None,
        &first,
        "typo",
    );
    assert_eq!(out["status"], "awaiting_refinement", "{out}");
    let before = events(&sandbox, "typo").len();
    let missing = sandbox.path("no-such-script.jsonl");
    let typo = format!("scripted:{}", missing.display());
    let run = sandbox.run(&["refine", "typo", "two items", "--agent", &typo, "--json"]);
    assert_no_panic(&run);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(events(&sandbox, "typo").len(), before, "nothing recorded");
    let agent = format!("scripted:{first}");
    let out = report(
        &sandbox,
        &["refine", "typo", "two items", "--agent", &agent],
    );
    assert_eq!(
        of_kind(&events(&sandbox, "typo"), "user_refined").len(),
        1,
        "{out}"
    );
}

/// `resume` without an agent would record a re-dispatch that reaches nobody: it is refused,
/// naming the missing flag, and records nothing.
#[test]
fn resume_needs_an_agent_and_records_nothing_without_one() {
    let sandbox = Sandbox::new();
    let short = script_head(&sandbox, "build-loop.jsonl", 2, "short.jsonl");
    let out = run_cast(
        &sandbox,
        &fixture("loadouts/build-loop.json"),
        None,
        &short,
        "idle",
    );
    assert_eq!(out["status"], "awaiting_agent", "{out}");
    let before = events(&sandbox, "idle").len();
    let run = sandbox.run(&["resume", "idle"]);
    assert_no_panic(&run);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("--agent SPEC"), "{}", run.stderr);
    assert_eq!(events(&sandbox, "idle").len(), before);
}

/// A prompt recorded by a command without an agent is held, not sent: `resume` later sends it
/// as it was recorded (its first sending is no crash recovery, so no recovery note), and the
/// log still re-decides.
#[test]
fn a_prompt_recorded_without_an_agent_is_held_and_sent_unchanged() {
    let sandbox = Sandbox::new();
    let first = script_head(&sandbox, "consult.jsonl", 1, "first-draft.jsonl");
    let out = run_cast(
        &sandbox,
        &fixture("loadouts/consult.json"),
        None,
        &first,
        "held",
    );
    assert_eq!(out["status"], "awaiting_refinement", "{out}");
    let out = report(&sandbox, &["refine", "held", "keep it to two items"]);
    assert_eq!(out["status"], "awaiting_agent", "{out}");
    let recorded = events(&sandbox, "held");
    assert_eq!(recorded.last().unwrap()["kind"], "prompt_held");
    let held_prompt =
        of_kind(&recorded, "prompt_dispatched").last().unwrap()["payload"]["prompt_hash"].clone();
    let rest = sandbox.write(
        "rest.jsonl",
        &[
            fixture_lines("scripts/consult.jsonl")[0].clone(),
            r#"{"reply": "Second draft."}"#.to_owned(),
            r#"{"continue": true}"#.to_owned(),
        ]
        .join("\n"),
    );
    let out = report(
        &sandbox,
        &["resume", "held", "--agent", &format!("scripted:{rest}")],
    );
    assert_eq!(out["status"], "awaiting_agent", "{out}");
    let after = events(&sandbox, "held");
    let resent = of_kind(&after, "prompt_dispatched")
        .into_iter()
        .find(|e| e["payload"]["redispatch"] == true)
        .unwrap()
        .clone();
    assert_eq!(resent["payload"]["prompt_hash"], held_prompt);
    assert_verified(&sandbox);
}

/// A held prompt goes out exactly as recorded, whatever happens in between: one recorded by a
/// revive (so carrying the recovery note) keeps its note when resumed, and one recorded
/// without the note gets none when its cast is aborted and then resumed.
#[test]
fn a_held_prompt_keeps_exactly_its_recovery_note() {
    let sandbox = Sandbox::new();
    let short = script_head(&sandbox, "build-loop.jsonl", 2, "short.jsonl");
    let full = format!("scripted:{}", fixture("scripts/build-loop.jsonl"));
    let prompts = |cast: &str| -> Vec<Value> {
        of_kind(&events(&sandbox, cast), "prompt_dispatched")
            .into_iter()
            .map(|e| e["payload"]["prompt_hash"].clone())
            .collect()
    };
    let out = run_cast(
        &sandbox,
        &fixture("loadouts/build-loop.json"),
        None,
        &short,
        "rv",
    );
    assert_eq!(out["status"], "awaiting_agent", "{out}");
    report(&sandbox, &["abort", "rv"]);
    report(&sandbox, &["revive", "rv"]);
    let held = prompts("rv").last().unwrap().clone();
    report(&sandbox, &["resume", "rv", "--agent", &full]);
    let sent = prompts("rv");
    let held_at = sent.iter().position(|h| *h == held).unwrap();
    assert_eq!(
        sent[held_at + 1],
        held,
        "the revived prompt went out as held"
    );

    let boundary = events(&sandbox, "rv")
        .iter()
        .find(|e| e["kind"] == "prompt_held")
        .unwrap()["seq"]
        .as_u64()
        .unwrap()
        - 1;
    let plain = sandbox.run(&[
        "recast",
        "rv",
        "--at",
        &boundary.to_string(),
        "--cast",
        "ab",
    ]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let forked = prompts("ab")[0].clone();
    assert_eq!(forked, held, "a fork sends the prompt in flight as it was");
    report(&sandbox, &["abort", "ab"]);
    report(&sandbox, &["resume", "ab", "--agent", &full]);
    assert_eq!(prompts("ab")[1], forked);
    assert_verified(&sandbox);
}

/// Another script given to a cast under way is refused before anything is recorded (its
/// first lines would otherwise be skipped unread); the same script, with lines added after
/// the used ones, goes on.
#[test]
fn a_different_script_in_the_middle_of_a_cast_is_refused() {
    let sandbox = Sandbox::new();
    let by_hand = fixture("scripts/consult-by-hand.jsonl");
    let run = sandbox.run(&[
        "run",
        &fixture("loadouts/consult.json"),
        "--task",
        "a key=value tool",
        "--cast",
        "plan",
        "--agent",
        &format!("scripted:{by_hand}"),
        "--json",
    ]);
    assert_eq!(
        run.json()["status"],
        "awaiting_refinement",
        "{}",
        run.stderr
    );
    let head = run.json()["events"].as_u64().unwrap();
    let lines = fixture_lines("scripts/consult-by-hand.jsonl");
    let mut edited = lines.clone();
    edited[0] = edited[0].replace("Draft: a parser", "Draft: a lexer");
    let other = sandbox.write("other.jsonl", &(edited.join("\n") + "\n"));
    let spec = format!("scripted:{other}");
    for args in [
        vec!["refine", "plan", "keep it to two items", "--agent", &spec],
        vec!["continue", "plan", "--agent", &spec],
    ] {
        let refused = sandbox.run(&args);
        assert_eq!(refused.code, 1, "{}", refused.stderr);
        assert!(
            refused
                .stderr
                .contains("is not the script cast plan was driven with: its line 1 is the reply \"Draft: a lexer"),
            "{}",
            refused.stderr
        );
        assert_eq!(state(&sandbox, "plan")["head"].as_u64().unwrap(), head);
    }
    let longer = sandbox.write(
        "longer.jsonl",
        &(lines.join("\n") + "\n{\"reply\": \"an extra line\"}\n"),
    );
    let went_on = sandbox.run(&[
        "refine",
        "plan",
        "keep it to two items",
        "--agent",
        &format!("scripted:{longer}"),
        "--json",
    ]);
    assert_eq!(went_on.code, 0, "{}", went_on.stderr);
    assert!(state(&sandbox, "plan")["head"].as_u64().unwrap() > head);
}
