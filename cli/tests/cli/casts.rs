//! Casts driven end to end through the real binary: every fixture loadout runs to completion with
//! its script, parallel loadouts are refused, and two runs of the same script record the same log.
//!
//! The helpers here are shared with `casts_pauses` and `casts_errors`.

use rstest::rstest;
use serde_json::Value;

use crate::common::{Run, Sandbox, fixture};

/// The task every cast in these tests works on.
pub const TASK: &str = "add a greeting and a farewell";

/// The keys of the one JSON document `run`, `refine`, `continue`, `abort`, `revive`, `resume` and
/// `steer` print with `--json` (sorted).
const REPORT_KEYS: [&str; 5] = ["cast", "events", "head", "message", "status"];

/// Keys `state --json` documents (at least these).
const STATE_KEYS: [&str; 10] = [
    "cast",
    "status",
    "socket",
    "item",
    "data",
    "cursors",
    "visits",
    "allowances",
    "rework",
    "refinement_turns",
];

/// Checks that a report has exactly the documented keys.
pub fn assert_report_shape(report: &Value) {
    let mut keys: Vec<&str> = report
        .as_object()
        .unwrap_or_else(|| panic!("the report is not an object: {report}"))
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, REPORT_KEYS, "report keys of {report}");
}

/// Runs castlog with `args` plus `--json`, expects exit 0 and a report of the documented shape.
pub fn report(sandbox: &Sandbox, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let run = sandbox.run(&args);
    assert_no_panic(&run);
    assert_eq!(
        run.code, 0,
        "castlog {args:?} exited {}: {}",
        run.code, run.stderr
    );
    let out = run.json();
    assert_report_shape(&out);
    out
}

/// Starts cast `cast` of `config` (optionally `loadout`) with the agent script `script`.
pub fn run_cast(
    sandbox: &Sandbox,
    config: &str,
    loadout: Option<&str>,
    script: &str,
    cast: &str,
) -> Value {
    let agent = format!("scripted:{script}");
    let mut args = vec![
        "run", config, "--task", TASK, "--agent", &agent, "--cast", cast,
    ];
    if let Some(name) = loadout {
        args.extend(["--loadout", name]);
    }
    let out = report(sandbox, &args);
    assert_eq!(out["cast"], cast);
    out
}

/// `state CAST --json`.
pub fn state(sandbox: &Sandbox, cast: &str) -> Value {
    let run = sandbox.run(&["state", cast, "--json"]);
    assert_eq!(run.code, 0, "state {cast}: {}", run.stderr);
    let state = run.json();
    for key in STATE_KEYS {
        assert!(
            state.get(key).is_some(),
            "state --json lacks {key:?}: {state}"
        );
    }
    assert_eq!(state["cast"], cast);
    state
}

/// The events of `show CAST --json`.
pub fn events(sandbox: &Sandbox, cast: &str) -> Vec<Value> {
    let run = sandbox.run(&["show", cast, "--json"]);
    assert_eq!(run.code, 0, "show {cast}: {}", run.stderr);
    run.json()["events"].as_array().unwrap().clone()
}

/// The events of one kind.
pub fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// `verify --json` is ok (chains, blobs, prompt reproduction, re-decide of every cast).
pub fn assert_verified(sandbox: &Sandbox) {
    let run = sandbox.run(&["verify", "--json"]);
    assert_no_panic(&run);
    assert_eq!(run.code, 0, "verify failed: {}\n{}", run.stdout, run.stderr);
    let report = run.json();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["problems"].as_array().unwrap().len(), 0, "{report}");
}

/// Nothing ever panics, whatever the input.
pub fn assert_no_panic(run: &Run) {
    assert!(
        !run.stderr.contains("panicked"),
        "castlog panicked: {}",
        run.stderr
    );
}

#[rstest]
#[case::build_loop("loadouts/build-loop.json", None, "build-loop.jsonl", false)]
#[case::consult("loadouts/consult.json", None, "consult.jsonl", false)]
#[case::full_auto("pi-materia-default.json", Some("Full-Auto"), "full-auto.jsonl", true)]
#[case::planning_consult(
    "pi-materia-default.json",
    Some("Planning-Consult"),
    "planning-consult.jsonl",
    true
)]
#[case::hojo_consult(
    "pi-materia-default.json",
    Some("Hojo-Consult"),
    "hojo-consult.jsonl",
    true
)]
fn every_fixture_loadout_runs_to_completion(
    #[case] config: &str,
    #[case] loadout: Option<&str>,
    #[case] script: &str,
    #[case] pi_default: bool,
) {
    let sandbox = Sandbox::new();
    let script = fixture(&format!("scripts/{script}"));
    let out = run_cast(&sandbox, &fixture(config), loadout, &script, "demo");
    assert_eq!(out["status"], "completed", "{out}");
    assert_eq!(out["message"], Value::Null, "{out}");

    let events = events(&sandbox, "demo");
    assert_eq!(out["events"], events.len(), "{out}");
    assert_eq!(out["head"], events.last().unwrap()["hash"]);
    assert_eq!(events.first().unwrap()["kind"], "cast_started");
    assert_eq!(events.last().unwrap()["kind"], "cast_completed");

    let state = state(&sandbox, "demo");
    assert_eq!(state["status"], "completed");
    assert_eq!(state["rework"], serde_json::json!([]), "{state}");
    if pi_default {
        // The built-in ensure-ignored utility ran in the working directory.
        let ignore = std::fs::read_to_string(sandbox.path(".gitignore")).unwrap();
        assert!(
            ignore.lines().any(|l| l.trim() == ".pi/pi-materia/"),
            "{ignore}"
        );
        assert_eq!(state["cursors"]["workItemIndex"], 2, "{state}");
    }
    assert_verified(&sandbox);
}

#[test]
fn build_loop_repairs_invalid_json_reworks_once_and_clears_the_rework() {
    let sandbox = Sandbox::new();
    let out = run_cast(
        &sandbox,
        &fixture("loadouts/build-loop.json"),
        None,
        &fixture("scripts/build-loop.jsonl"),
        "demo",
    );
    assert_eq!(out["status"], "completed");

    let state = state(&sandbox, "demo");
    assert_eq!(state["cursors"]["workItemIndex"], 2, "{state}");
    assert_eq!(state["rework"], serde_json::json!([]), "cleared: {state}");
    assert_eq!(state["data"]["lastFeedback"], "farewell() runs at exit.");
    assert_eq!(state["visits"]["Socket-3"], 3, "one rework round: {state}");
    assert_eq!(state["visits"]["Socket-6"], 1, "{state}");
    assert_eq!(
        state["usage"]["input"], 6960,
        "usage adds every reply: {state}"
    );

    let events = events(&sandbox, "demo");
    // Line 3 of the script is not JSON: one repair turn on Socket-4, then a completion.
    let rejected = of_kind(&events, "output_rejected");
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    let rejected = rejected[0];
    assert_eq!(rejected["payload"]["socket"], "Socket-4");
    assert_eq!(rejected["payload"]["repair"], true);
    let seq = rejected["seq"].as_u64().unwrap();
    let completed = events
        .iter()
        .find(|e| e["kind"] == "socket_completed" && e["seq"].as_u64().unwrap() > seq)
        .unwrap();
    assert_eq!(completed["payload"]["socket"], "Socket-4");
    assert_eq!(completed["payload"]["visit"], rejected["payload"]["visit"]);
    assert_eq!(completed["payload"]["satisfied"], false);
    // Nothing was committed between the rejection and the repaired completion.
    assert!(
        events
            .iter()
            .filter(|e| {
                let s = e["seq"].as_u64().unwrap();
                s > seq && s < completed["seq"].as_u64().unwrap()
            })
            .all(|e| e["kind"] == "prompt_dispatched" || e["kind"] == "agent_replied")
    );

    // The not_satisfied verdict routed rework, and the satisfied one cleared it.
    let routed = of_kind(&events, "rework_routed");
    assert_eq!(routed.len(), 1);
    let cleared = of_kind(&events, "rework_cleared");
    assert_eq!(cleared.len(), 1);
    assert!(cleared[0]["seq"].as_u64() > routed[0]["seq"].as_u64());
    assert_verified(&sandbox);
}

#[test]
fn full_auto_records_utility_outputs_in_data_and_ignores_the_artifact_dir() {
    let sandbox = Sandbox::new();
    let out = run_cast(
        &sandbox,
        &fixture("pi-materia-default.json"),
        Some("Full-Auto"),
        &fixture("scripts/full-auto.jsonl"),
        "auto",
    );
    assert_eq!(out["status"], "completed");
    let state = state(&sandbox, "auto");
    let vcs = &state["data"]["vcs"];
    assert_eq!(vcs["ok"], true, "{state}");
    assert!(vcs["kind"].is_string(), "{vcs}");
    let ignore = &state["data"]["artifactIgnore"];
    assert_eq!(ignore["ok"], true, "{state}");
    assert!(
        ignore["patterns"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == ".pi/pi-materia/"),
        "{ignore}"
    );
    let gitignore = std::fs::read_to_string(sandbox.path(".gitignore")).unwrap();
    assert!(gitignore.contains(".pi/pi-materia/"), "{gitignore}");

    // Both utilities ran (Socket-1 Ignore-Artifacts, Socket-2 Detect-VCS) and exited 0.
    let events = events(&sandbox, "auto");
    let utilities = of_kind(&events, "utility_finished");
    let sockets: Vec<&Value> = utilities.iter().map(|e| &e["payload"]["socket"]).collect();
    assert_eq!(sockets, ["Socket-1", "Socket-2"]);
    assert!(utilities.iter().all(|e| e["payload"]["code"] == 0));
    assert_verified(&sandbox);
}

#[test]
fn consult_takes_the_stamp_and_finalizes_the_multi_turn_plan_once() {
    let sandbox = Sandbox::new();
    let out = run_cast(
        &sandbox,
        &fixture("loadouts/consult.json"),
        None,
        &fixture("scripts/consult.jsonl"),
        "consult",
    );
    assert_eq!(out["status"], "completed");
    let state = state(&sandbox, "consult");
    assert_eq!(state["data"]["stamp"]["by"], "printf", "{state}");
    assert_eq!(state["cursors"]["workItemIndex"], 2, "{state}");
    let events = events(&sandbox, "consult");
    // The scripted user message says "continue" but is only a refinement.
    let refined = of_kind(&events, "user_refined");
    assert_eq!(refined.len(), 1);
    assert_eq!(
        refined[0]["payload"]["text"],
        "Keep it to those two. continue"
    );
    assert_eq!(of_kind(&events, "finalize_requested").len(), 1);
    let finalized: Vec<&Value> = of_kind(&events, "socket_completed")
        .into_iter()
        .filter(|e| e["payload"]["finalized"] == true)
        .collect();
    assert_eq!(finalized.len(), 1);
    assert_eq!(finalized[0]["payload"]["socket"], "Socket-2");
}

/// The (kind, payload) of every event, with the cast id replaced by a placeholder.
fn normalized(sandbox: &Sandbox, cast: &str) -> Vec<(String, String)> {
    events(sandbox, cast)
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_owned(),
                e["payload"].to_string().replace(cast, "<CAST>"),
            )
        })
        .collect()
}

#[test]
fn the_same_script_records_the_same_log() {
    let sandbox = Sandbox::new();
    let config = fixture("loadouts/build-loop.json");
    let script = fixture("scripts/build-loop.jsonl");
    // Ids that occur nowhere else in a payload, so the replacement is exact.
    let a = run_cast(&sandbox, &config, None, &script, "determinism-alpha");
    let b = run_cast(&sandbox, &config, None, &script, "determinism-bravo");
    assert_eq!(a["status"], "completed");
    assert_eq!(b["status"], "completed");
    assert_eq!(a["events"], b["events"]);
    let a = normalized(&sandbox, "determinism-alpha");
    let b = normalized(&sandbox, "determinism-bravo");
    let kinds_a: Vec<&str> = a.iter().map(|(k, _)| k.as_str()).collect();
    let kinds_b: Vec<&str> = b.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds_a, kinds_b);
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "event {} differs", i + 1);
    }
    // The placeholder did replace something: the cast id is part of the log.
    assert!(a.iter().any(|(_, p)| p.contains("<CAST>")));
    assert_verified(&sandbox);
}
