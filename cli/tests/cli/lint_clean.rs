//! The recommended policy passes its own lint: every shipped fixture cast run under it gives
//! no finding but the documented ones (a multi-turn socket's output contract changing at its
//! finalize turn, and the hostile replies the fence fixture is made of), and an earlier work
//! item's rejection never reaches a later item's prompt.

use serde_json::Value;

use crate::common::{Sandbox, fixture, scripted};

/// The lint findings of `cast` as (rule, socket, visit, entry).
fn findings(sandbox: &Sandbox, cast: &str) -> Vec<(String, String, u64, String)> {
    let audit = sandbox.run(&["audit", cast, "--lint", "--json"]).json();
    audit["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_owned(),
                f["socket"].as_str().unwrap().to_owned(),
                f["visit"].as_u64().unwrap(),
                f["entry"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn status(sandbox: &Sandbox, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    sandbox.run(&all).json()["status"].clone()
}

fn run(sandbox: &Sandbox, config: &str, loadout: Option<&str>, script: &str, cast: &str) -> Value {
    let config = fixture(config);
    let agent = scripted(script);
    let mut args = vec!["run", &config, "--task", "a task", "--cast", cast];
    if let Some(name) = loadout {
        args.extend(["--loadout", name]);
    }
    args.extend(["--agent", &agent]);
    status(sandbox, &args)
}

const FULL_AUTO: &str = "pi-materia-default.json";

#[test]
fn every_fixture_cast_under_the_recommended_policy_lints_clean() {
    let sandbox = Sandbox::new();
    let pairs = [
        ("loadouts/build-loop.json", None, "build-loop.jsonl", "bl"),
        ("loadouts/consult.json", None, "consult.jsonl", "co"),
        (FULL_AUTO, Some("Full-Auto"), "full-auto.jsonl", "fa"),
        (
            FULL_AUTO,
            Some("Full-Auto"),
            "full-auto-rework.jsonl",
            "far",
        ),
        ("loadouts/post.json", None, "post.jsonl", "po"),
        ("loadouts/fence.json", None, "fence.jsonl", "fe"),
    ];
    for (config, loadout, script, cast) in pairs {
        assert_eq!(
            run(&sandbox, config, loadout, script, cast),
            "completed",
            "{cast}"
        );
    }
    let exhausted = scripted("build-loop-exhausted.jsonl");
    let recovery = scripted("recovery.jsonl");
    let by_hand = scripted("consult-by-hand.jsonl");
    let other = scripted("full-auto-other.jsonl");
    let build_loop = fixture("loadouts/build-loop.json");
    let ex = [
        "run",
        &build_loop,
        "--task",
        "greet",
        "--cast",
        "ex",
        "--agent",
        &exhausted,
    ];
    assert_eq!(status(&sandbox, &ex), "failed");
    assert_eq!(
        status(&sandbox, &["revive", "ex", "--agent", &exhausted]),
        "completed"
    );
    let recovery_json = fixture("loadouts/recovery.json");
    let rec = [
        "run",
        &recovery_json,
        "--task",
        "upload tool",
        "--cast",
        "rec",
        "--agent",
        &recovery,
    ];
    assert_eq!(status(&sandbox, &rec), "failed");
    assert_eq!(
        status(&sandbox, &["revive", "rec", "--agent", &recovery]),
        "completed"
    );
    let consult = fixture("loadouts/consult.json");
    let hand = [
        "run",
        &consult,
        "--task",
        "a key=value tool",
        "--cast",
        "hand",
        "--agent",
        &by_hand,
    ];
    assert_eq!(status(&sandbox, &hand), "awaiting_refinement");
    let refine = [
        "refine",
        "hand",
        "keep it to two items",
        "--agent",
        &by_hand,
    ];
    assert_eq!(status(&sandbox, &refine), "awaiting_refinement");
    assert_eq!(
        status(&sandbox, &["continue", "hand", "--agent", &by_hand]),
        "completed"
    );
    let fab = [
        "recast",
        "fa",
        "--at",
        "Socket-4:2",
        "--cast",
        "fab",
        "--agent",
        &other,
    ];
    assert_eq!(status(&sandbox, &fab), "completed");

    // A multi-turn socket's output contract changes once, at its finalize turn.
    let multi_turn = vec![(
        "mutable-in-cached-prefix".to_owned(),
        "Socket-2".to_owned(),
        1,
        "outputContract".to_owned(),
    )];
    for cast in ["bl", "ex", "fa", "far", "fab", "rec", "po"] {
        assert_eq!(findings(&sandbox, cast), vec![], "{cast}");
    }
    for cast in ["co", "hand"] {
        assert_eq!(findings(&sandbox, cast), multi_turn, "{cast}");
    }
    // The fence fixture is hostile text by design: the lint names it, and nothing else.
    let fenced = findings(&sandbox, "fe");
    assert!(!fenced.is_empty());
    assert!(
        fenced.iter().all(|(rule, ..)| rule == "posing-as-runtime"),
        "{fenced:?}"
    );
}

/// The text of `cast`'s prompt at `visit` (`SOCKET:VISIT`), every message joined.
fn prompt_text(sandbox: &Sandbox, cast: &str, visit: &str) -> String {
    let prompt = sandbox.run(&["prompt", cast, visit, "--json"]).json();
    prompt["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `cast_started` payload of `cast`, read from its export.
fn started(sandbox: &Sandbox, cast: &str) -> Value {
    let file = sandbox.path(&format!("{cast}.jsonl"));
    let out = sandbox.run(&["export", cast, "-o", &file.display().to_string()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = std::fs::read_to_string(file).unwrap();
    let first: Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    assert_eq!(first["kind"], "cast_started");
    first["payload"].clone()
}

const REJECTION: &str = "Errors lose their line numbers; keep them.";

#[test]
fn an_earlier_items_rejection_stays_out_of_a_later_items_prompt() {
    let sandbox = Sandbox::new();
    assert_eq!(
        run(
            &sandbox,
            FULL_AUTO,
            Some("Full-Auto"),
            "full-auto-rework.jsonl",
            "far"
        ),
        "completed"
    );
    // Socket-4 (Build) visit 2 reworks item 1; visit 3 builds item 2.
    let reworked = prompt_text(&sandbox, "far", "Socket-4:2");
    assert_eq!(reworked.matches(REJECTION).count(), 1, "{reworked}");
    assert!(reworked.contains("## Rework required"), "{reworked}");
    for later in ["Socket-4:3", "Socket-5:3", "Socket-6:2", "Socket-7:1"] {
        let text = prompt_text(&sandbox, "far", later);
        assert!(!text.contains(REJECTION), "{later}: {text}");
        assert!(
            text.contains("Item 1 verified"),
            "{later} keeps the rest: {text}"
        );
    }
    assert_eq!(started(&sandbox, "far")["handoff"], 1);
    let verify = sandbox.run(&["verify", "far", "--json"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
}

#[test]
fn a_legacy_cast_keeps_the_audited_handoff_context() {
    let sandbox = Sandbox::new();
    let config = fixture(FULL_AUTO);
    let agent = scripted("full-auto-rework.jsonl");
    let args = [
        "run",
        &config,
        "--loadout",
        "Full-Auto",
        "--task",
        "a task",
        "--cast",
        "old",
        "--policy",
        "legacy",
        "--agent",
        &agent,
    ];
    assert_eq!(status(&sandbox, &args), "completed");
    let later = prompt_text(&sandbox, "old", "Socket-4:3");
    assert_eq!(later.matches(REJECTION).count(), 1, "{later}");
    // Recorded without the rule, as a cast recorded before the rule is.
    assert_eq!(started(&sandbox, "old")["handoff"], Value::Null);
}
