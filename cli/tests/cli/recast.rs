//! Recast, diff and waypoints through the binary.

use serde_json::Value;

use crate::common::{Sandbox, fixture, unpack_values};

fn run_build_loop(sandbox: &Sandbox, cast: &str, script: &str) {
    let run = sandbox.run(&[
        "run",
        &fixture("loadouts/build-loop.json"),
        "--task",
        "greet",
        "--cast",
        cast,
        "--agent",
        &format!("scripted:{script}"),
        "--json",
    ]);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
}

fn steps(diff: &Value) -> Vec<(String, String)> {
    diff["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["key"].as_str().unwrap().to_owned(),
                s["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn reply(value: &Value) -> String {
    serde_json::json!({ "reply": value.as_str().map_or_else(|| value.to_string(), str::to_owned) })
        .to_string()
}

#[test]
fn a_recast_at_item_two_diffs_from_its_fork_point() {
    let sandbox = Sandbox::new();
    run_build_loop(&sandbox, "a", &fixture("scripts/build-loop.jsonl"));
    let other = sandbox.write(
        "other.jsonl",
        &[
            reply(&"Added farewell(name) printing goodbye, <name>.".into()),
            reply(&serde_json::json!({"satisfied": true, "context": "farewell names the user."})),
            reply(&serde_json::json!({"satisfied": true, "context": "Committed."})),
            reply(&"Summary of the recast.".into()),
        ]
        .join("\n"),
    );
    let recast = sandbox.run(&[
        "recast",
        "a",
        "--at",
        "Socket-3:3",
        "--cast",
        "b",
        "--agent",
        &format!("scripted:{}", other),
        "--json",
    ]);
    assert_eq!(recast.json()["status"], "completed", "{}", recast.stdout);

    let shown = sandbox.run(&["show", "b", "--json"]).json();
    let first = &shown["events"][0];
    assert_eq!(first["kind"], "cast_forked");
    let fork_seq = first["payload"]["parent_seq"].as_u64().unwrap();
    assert_eq!(shown["parent"]["seq"].as_u64().unwrap(), fork_seq);

    let diff = sandbox.run(&["diff", "a", "b", "--json"]).json();
    // The fork prefix, then the prompt the child dispatches at the fork point, which is the
    // parent's own (the fork marker itself is no decision).
    assert_eq!(diff["common_prefix"].as_u64().unwrap(), fork_seq + 1);
    let all = steps(&diff);
    let first_changed = all.iter().position(|(_, s)| s != "same").unwrap();
    assert!(all[..first_changed].iter().all(|(_, s)| s == "same"));
    assert_eq!(
        all[first_changed],
        ("Socket-3 WI-2 #3".to_owned(), "changed".to_owned())
    );
    let changes = diff["steps"][first_changed]["changes"].as_array().unwrap();
    let fields: Vec<&str> = changes
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    // The fork renders the parent's prompt again; the new agent's answer differs, and every
    // later step's prompt differs through it.
    assert!(
        !fields.contains(&"prompt") && fields.contains(&"output"),
        "{fields:?}"
    );
    let next = &diff["steps"][first_changed + 1];
    assert_eq!(next["status"], "changed");
    let prompt = next["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["field"] == "prompt")
        .expect("the next step's prompt differs");
    assert!(
        prompt["diff"]
            .as_str()
            .unwrap()
            .contains("+Added farewell(name)")
    );
    let output = changes.iter().find(|c| c["field"] == "output").unwrap();
    assert!(
        output["diff"]
            .as_str()
            .unwrap()
            .contains("+Added farewell(name)")
    );
    assert!(
        diff["summary"]
            .as_str()
            .unwrap()
            .contains("a completed, b completed")
    );
    assert_eq!(sandbox.run(&["verify"]).code, 0);
}

#[test]
fn one_different_reply_is_named_with_the_routing_it_changed() {
    let sandbox = Sandbox::new();
    let original = fixture("scripts/build-loop.jsonl");
    run_build_loop(&sandbox, "a", &original);
    // The evaluator accepts the greeting at once instead of sending it back for rework.
    let mut lines: Vec<String> = std::fs::read_to_string(&original)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines[3] = reply(&serde_json::json!({"satisfied": true, "context": "greet() is fine."}));
    lines.remove(4);
    lines.remove(4);
    let changed = sandbox.write("changed.jsonl", &lines.join("\n"));
    run_build_loop(&sandbox, "b", &changed);

    let diff = sandbox.run(&["diff", "a", "b", "--json"]).json();
    let all = steps(&diff);
    let first_changed = all.iter().position(|(_, s)| s != "same").unwrap();
    assert_eq!(all[first_changed].0, "Socket-4 WI-1 #1");
    let changes = diff["steps"][first_changed]["changes"].as_array().unwrap();
    let routing = changes.iter().find(|c| c["field"] == "routing").unwrap();
    assert!(
        routing["a"].as_str().unwrap().contains("-> Socket-3"),
        "{routing}"
    );
    assert!(
        routing["b"].as_str().unwrap().contains("-> Socket-5"),
        "{routing}"
    );
    assert!(changes.iter().any(|c| c["field"] == "output"));
    assert!(
        changes
            .iter()
            .any(|c| c["field"] == "data" && c["path"] == "state.lastFeedback")
    );
    assert!(diff["first_divergence"].is_object());
    assert!(diff["common_prefix"].as_u64().unwrap() > 20);
}

#[test]
fn waypoints_name_points_for_state_and_recast() {
    let sandbox = Sandbox::new();
    run_build_loop(&sandbox, "a", &fixture("scripts/build-loop.jsonl"));
    let mark = sandbox.run(&["mark", "a", "item-two", "--at", "52", "--json"]);
    assert_eq!(mark.code, 0, "{}", mark.stderr);
    let at_mark = sandbox
        .run(&["state", "a", "--at", "item-two", "--json"])
        .json();
    let at_seq = sandbox.run(&["state", "a", "--at", "52", "--json"]).json();
    assert_eq!(at_mark, at_seq);
    assert_eq!(at_mark["item"], "WI-2");
    let recast = sandbox.run(&["recast", "a", "--at", "item-two", "--cast", "c", "--json"]);
    assert_eq!(recast.json()["status"], "running");
    let bad = sandbox.run(&["recast", "a", "--at", "50"]);
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr.contains("not a decision boundary"),
        "{}",
        bad.stderr
    );
    // A waypoint may name any seq for reading; a recast from it needs a boundary, checked
    // before anything is recorded.
    let mid = sandbox.run(&["mark", "a", "mid-step", "--at", "50"]);
    assert_eq!(mid.code, 0, "{}", mid.stderr);
    let read = sandbox.run(&["state", "a", "--at", "mid-step", "--json"]);
    assert_eq!(read.code, 0, "{}", read.stderr);
    let casts = sandbox.run(&["casts", "--json"]).stdout;
    let refused = sandbox.run(&["recast", "a", "--at", "mid-step", "--cast", "m"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("waypoint \"mid-step\" names 50")
            && refused.stderr.contains("not a decision boundary"),
        "{}",
        refused.stderr
    );
    assert_eq!(sandbox.run(&["casts", "--json"]).stdout, casts);
    let name = sandbox.run(&["mark", "a", "12"]);
    assert_eq!(name.code, 1, "a numeric waypoint name would shadow seqs");
    // `+7` is a name (seqs are digits only), so --at reads it as the waypoint.
    assert_eq!(sandbox.run(&["mark", "a", "+7", "--at", "52"]).code, 0);
    let plus = sandbox.run(&["state", "a", "--at", "+7", "--json"]).json();
    assert_eq!(plus, at_seq);
    assert_eq!(sandbox.run(&["verify"]).code, 0);
}

/// A recast from a healthy point renders what the parent rendered, so `recorded:PARENT`
/// answers every unchanged step and no live agent is needed.
#[test]
fn a_recast_answered_by_the_parents_recording_needs_no_live_call() {
    let sandbox = Sandbox::new();
    run_build_loop(&sandbox, "a", &fixture("scripts/build-loop.jsonl"));
    let recast = sandbox.run(&[
        "recast",
        "a",
        "--at",
        "Socket-3:2",
        "--cast",
        "r",
        "--agent",
        "recorded:a",
        "--json",
    ]);
    // Without a fallback a single cassette miss would stop the cast as awaiting_agent.
    assert_eq!(recast.json()["status"], "completed", "{}", recast.stdout);
    let diff = sandbox.run(&["diff", "a", "r", "--json"]).json();
    assert!(
        diff["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["status"] == "same"),
        "{}",
        diff["summary"]
    );
    assert_eq!(sandbox.run(&["verify"]).code, 0);
}

/// `--config` runs the child with an edited loadout: its hash is recorded in `cast_forked` and
/// the edited prompt shows in `diff`.
#[test]
fn a_recast_with_an_edited_config_records_the_new_loadout() {
    let sandbox = Sandbox::new();
    run_build_loop(&sandbox, "a", &fixture("scripts/build-loop.jsonl"));
    let original = std::fs::read_to_string(fixture("loadouts/build-loop.json")).unwrap();
    let edited = original.replace(
        "You implement exactly the current work item: {{item.title}}.",
        "You implement the current work item, {{item.title}}, with a test first.",
    );
    assert_ne!(original, edited);
    let config = sandbox.write("edited.json", &edited);
    let recast = sandbox.run(&[
        "recast",
        "a",
        "--at",
        "Socket-3:3",
        "--config",
        &config,
        "--cast",
        "b",
        "--agent",
        "recorded:a",
        "--json",
    ]);
    assert_eq!(recast.code, 0, "{}", recast.stderr);
    let shown = sandbox.run(&["show", "b", "--json"]).json();
    let forked = &shown["events"][0]["payload"];
    let parent = sandbox.run(&["show", "a", "--json"]).json();
    let parent_hash = &parent["events"][0]["payload"]["loadout_hash"];
    assert!(forked["loadout_hash"].is_string());
    assert_ne!(&forked["loadout_hash"], parent_hash);
    // The edited Build prompt is new, so the recording has no answer for it.
    assert_eq!(recast.json()["status"], "awaiting_agent");
    let diff = sandbox.run(&["diff", "a", "b", "--json"]).json();
    let changed = diff["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["status"] == "changed")
        .unwrap();
    assert_eq!(changed["key"], "Socket-3 WI-2 #3");
    let prompt = changed["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["field"] == "prompt")
        .unwrap();
    assert!(
        prompt["diff"]
            .as_str()
            .unwrap()
            .contains("+You implement the current work item, Add a farewell, with a test first.")
    );
    // The diff says the two ran different loadouts, and which socket's definition changed.
    let loadouts = &diff["loadouts"];
    assert_eq!(loadouts["a"]["hash"], *parent_hash);
    assert_eq!(loadouts["b"]["hash"], forked["loadout_hash"]);
    assert_eq!(loadouts["sockets_changed"], serde_json::json!(["Socket-3"]));
    assert_eq!(loadouts["settings_changed"], serde_json::json!([]));
    let text = sandbox.run(&["diff", "a", "b"]);
    assert!(
        text.stdout.contains("loadouts differ: a ")
            && text.stdout.contains("sockets changed: Socket-3;"),
        "{}",
        text.stdout
    );
    // Two casts of one loadout say nothing of it.
    run_build_loop(&sandbox, "c", &fixture("scripts/build-loop.jsonl"));
    let same = sandbox.run(&["diff", "a", "c", "--json"]).json();
    assert!(same["loadouts"].is_null(), "{same}");
    assert_eq!(sandbox.run(&["verify"]).code, 0);
}

/// `--keep-inputs` re-applies chosen human inputs of the parent, each recorded with its origin.
#[test]
fn kept_inputs_are_reapplied_with_their_origin() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&[
        "run",
        &fixture("loadouts/consult.json"),
        "--task",
        "a key=value tool",
        "--cast",
        "p",
        "--agent",
        &format!("scripted:{}", fixture("scripts/consult.jsonl")),
        "--json",
    ]);
    assert_eq!(run.json()["status"], "completed");
    let shown = sandbox.run(&["show", "p", "--json"]).json();
    let events = shown["events"].as_array().unwrap();
    let seq_of = |kind: &str| {
        events.iter().find(|e| e["kind"] == kind).unwrap()["seq"]
            .as_u64()
            .unwrap()
    };
    let refined = seq_of("user_refined");
    let finalize = seq_of("finalize_requested");
    let first_draft = seq_of("refinement_recorded");
    // Fork right after the first draft, and keep the person's refinement and continue (named
    // out of order: they are applied in the parent's).
    let recast = sandbox.run(&[
        "recast",
        "p",
        "--at",
        &first_draft.to_string(),
        "--keep-inputs",
        &format!("{finalize},{refined}"),
        "--cast",
        "k",
        "--agent",
        "recorded:p",
        "--json",
    ]);
    assert_eq!(recast.json()["status"], "completed", "{}", recast.stdout);
    let child = sandbox.run(&["show", "k", "--json"]).json();
    let origins: Vec<String> = child["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "user_refined" || e["kind"] == "finalize_requested")
        .map(|e| e["payload"]["origin"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(origins, [format!("p:{refined}"), format!("p:{finalize}")]);
    let bad = sandbox.run(&[
        "recast",
        "p",
        "--at",
        &first_draft.to_string(),
        "--keep-inputs",
        "3",
        "--agent",
        "recorded:p",
    ]);
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("--keep-inputs 3"), "{}", bad.stderr);
    // Kept inputs are applied as the child is driven: without an agent they are refused.
    let undriven = sandbox.run(&[
        "recast",
        "p",
        "--at",
        &first_draft.to_string(),
        "--keep-inputs",
        &refined.to_string(),
    ]);
    assert_eq!(undriven.code, 1);
    assert!(
        undriven.stderr.contains("give --agent SPEC"),
        "{}",
        undriven.stderr
    );
    let casts = sandbox.run(&["casts", "--json"]).json();
    assert_eq!(
        casts["casts"].as_array().unwrap().len(),
        2,
        "a refused recast records nothing"
    );
}

/// With `--fallback`, only the prompts the recording lacks go to the live agent: here the one
/// edited Build prompt, answered by a one-line script; every later prompt is the parent's again.
#[test]
fn a_recorded_recast_asks_the_fallback_only_for_changed_prompts() {
    let sandbox = Sandbox::new();
    run_build_loop(&sandbox, "a", &fixture("scripts/build-loop.jsonl"));
    let original = std::fs::read_to_string(fixture("loadouts/build-loop.json")).unwrap();
    let edited = original.replace(
        "Keep the change small and say what you changed.",
        "Keep the change small, say what you changed.",
    );
    let config = sandbox.write("edited.json", &edited);
    // The live agent gives the same answer the parent got, so the casts converge again.
    let live = sandbox.write(
        "live.jsonl",
        &reply(&"Added farewell() called at exit.".into()),
    );
    let recast = sandbox.run(&[
        "--fallback",
        &format!("scripted:{live}"),
        "recast",
        "a",
        "--at",
        "Socket-3:3",
        "--config",
        &config,
        "--cast",
        "b",
        "--agent",
        "recorded:a",
        "--json",
    ]);
    assert_eq!(recast.json()["status"], "completed", "{}", recast.stdout);
    let diff = sandbox.run(&["diff", "a", "b", "--json"]).json();
    let changed: Vec<&str> = diff["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] != "same")
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(changed, ["Socket-3 WI-2 #3"]);
}

/// A recast's prefix is its parent's events: `verify CHILD` verifies the parent too, so damage
/// in the prefix the child stands on is named (with the parent's cast and seq).
#[test]
fn verifying_a_recast_verifies_the_prefix_it_stands_on() {
    let sandbox = Sandbox::new();
    run_build_loop(&sandbox, "a", &fixture("scripts/build-loop.jsonl"));
    let recast = sandbox.run(&["recast", "a", "--at", "52", "--cast", "b", "--json"]);
    assert_eq!(recast.code, 0, "{}", recast.stderr);
    assert_eq!(sandbox.run(&["verify", "b"]).code, 0);
    unpack_values(&sandbox.db());
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    conn.execute_batch(
        "DROP TRIGGER events_no_update;
         UPDATE events SET payload = CAST(replace(CAST(payload AS TEXT), 'greet', 'GREET') AS BLOB)
         WHERE seq = 1 AND cast_id = (SELECT id FROM casts WHERE cast_id = 'a');",
    )
    .unwrap();
    let verify = sandbox.run(&["verify", "b", "--json"]);
    assert_eq!(verify.code, 3, "{}", verify.stdout);
    let report = verify.json();
    assert!(
        report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["cast"] == "a" && p["seq"] == 1),
        "{report}"
    );
}

/// `recast --config` with a loadout that lacks the socket in flight at the fork point is
/// refused before anything is recorded (the child could never go on).
#[test]
fn a_recast_config_without_the_socket_in_flight_is_refused() {
    let sandbox = Sandbox::new();
    run_build_loop(&sandbox, "a", &fixture("scripts/build-loop.jsonl"));
    let mut config: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("loadouts/build-loop.json")).unwrap(),
    )
    .unwrap();
    let loadout = &mut config["loadouts"]["Build-Loop"];
    loadout["sockets"]
        .as_object_mut()
        .unwrap()
        .remove("Socket-6");
    loadout["loops"]["items"]["exits"] = serde_json::json!([]);
    let edited = sandbox.write("no-narrate.json", &config.to_string());
    let casts = sandbox.run(&["casts", "--json"]).stdout;
    let refused = sandbox.run(&["recast", "a", "--at", "Socket-6:1", "--config", &edited]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("has no socket Socket-6"),
        "{}",
        refused.stderr
    );
    assert_eq!(sandbox.run(&["casts", "--json"]).stdout, casts);
}

/// A recast answered by its parent's recording decides what the parent decided: `diff` finds no
/// divergence (the fork marker is no decision), and neither between that recast and a recast
/// of it, whose prefix runs through both ancestors.
#[test]
fn recasts_that_decide_the_same_show_no_divergence() {
    let sandbox = Sandbox::new();
    run_build_loop(&sandbox, "a", &fixture("scripts/build-loop.jsonl"));
    let events = |cast: &str| {
        sandbox.run(&["show", cast, "--json"]).json()["events"]
            .as_array()
            .unwrap()
            .len() as u64
    };
    for (parent, at, child) in [("a", "52", "b"), ("b", "7", "g")] {
        let run = sandbox.run(&[
            "recast",
            parent,
            "--at",
            at,
            "--cast",
            child,
            "--agent",
            "recorded:a",
            "--json",
        ]);
        assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
    }
    for (x, y) in [("a", "b"), ("b", "g"), ("a", "g")] {
        let diff = sandbox.run(&["diff", x, y, "--json"]).json();
        assert!(diff["first_divergence"].is_null(), "{x} {y}: {diff}");
        assert_eq!(
            diff["common_prefix"].as_u64().unwrap(),
            events("a"),
            "{x} {y}"
        );
    }
}

/// A recast forked while a prompt was in flight sends that very prompt again (no recovery
/// note: nothing was cut off), so the parent's recording answers it.
#[test]
fn a_recast_with_a_prompt_in_flight_sends_the_parents_prompt_again() {
    let sandbox = Sandbox::new();
    run_build_loop(&sandbox, "a", &fixture("scripts/build-loop.jsonl"));
    let shown = sandbox.run(&["show", "a", "--json"]).json();
    let first_prompt = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "prompt_dispatched" && e["payload"]["socket"] == "Socket-3")
        .unwrap()
        .clone();
    let at = first_prompt["seq"].as_u64().unwrap().to_string();
    let run = sandbox.run(&[
        "recast",
        "a",
        "--at",
        &at,
        "--cast",
        "f",
        "--agent",
        "recorded:a",
        "--json",
    ]);
    assert_eq!(run.json()["status"], "completed", "{}", run.stdout);
    let child = sandbox.run(&["show", "f", "--json"]).json();
    let again = child["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "prompt_dispatched")
        .unwrap()
        .clone();
    assert_eq!(
        again["payload"]["prompt_hash"],
        first_prompt["payload"]["prompt_hash"]
    );
    let prompt = sandbox.run(&["prompt", "f", "Socket-3:1", "--json"]).json();
    assert!(
        !prompt["messages"].to_string().contains("## Recovery"),
        "{prompt}"
    );
    // Sent again unchanged, the prompt is the same step's one prompt: nothing changed.
    let diff = sandbox.run(&["diff", "a", "f", "--json"]).json();
    assert!(
        diff["summary"].as_str().unwrap().contains(" 0 changed"),
        "{}",
        diff["summary"]
    );
    // A visit of the prefix is read on the parent; the error says where.
    let before = sandbox.run(&["state", "f", "--at", "Socket-1:1"]);
    assert_eq!(before.code, 1);
    assert!(
        before.stderr.contains("forked from a at seq"),
        "{}",
        before.stderr
    );
    assert_eq!(sandbox.run(&["verify"]).code, 0);
}

/// `diff` names each cast's own outcome, also for a recast that has not gone on yet (its
/// history ends on its parent's events).
#[test]
fn diff_names_the_outcome_of_a_recast_not_driven_yet() {
    let sandbox = Sandbox::new();
    run_build_loop(&sandbox, "a", &fixture("scripts/build-loop.jsonl"));
    let fork = sandbox.run(&["recast", "a", "--at", "52", "--cast", "idle", "--json"]);
    assert_eq!(fork.code, 0, "{}", fork.stderr);
    let status = fork.json()["status"].as_str().unwrap().to_owned();
    assert_ne!(status, "completed");
    let diff = sandbox.run(&["diff", "a", "idle", "--json"]).json();
    let summary = diff["summary"].as_str().unwrap();
    assert!(
        summary.ends_with(&format!("a completed, idle {status}")),
        "{summary}"
    );
}
