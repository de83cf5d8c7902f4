//! pi-materia's bundled `config/default.json` (fixture) loaded and run through the machine
//! (item 39).

use castlog_core::event::{Target, When};
use castlog_core::id::SocketId;
use castlog_core::input::Input;
use castlog_core::loadout::load_config;
use castlog_core::machine::Status;
use serde_json::{Value, json};

use crate::harness::{Cast, given, kinds, plan};

const DEFAULT: &str = include_str!("../../../fixtures/pi-materia-default.json");

fn bundled(active: &str) -> Value {
    let mut cfg: Value = serde_json::from_str(DEFAULT).unwrap();
    cfg["activeLoadout"] = json!(active);
    cfg
}

fn sid(id: &str) -> SocketId {
    SocketId::new(id)
}

#[test]
fn the_bundled_config_loads_with_five_loadouts_and_resolves_all_five() {
    let config = load_config(DEFAULT).unwrap();
    assert_eq!(config.active, "Full-Auto");
    assert_eq!(
        config.names,
        [
            "Full-Auto",
            "Planning-Consult",
            "Hojo-Consult",
            "Parallel-Experimental",
            "Parallel-Interactive"
        ]
    );
    for name in ["Full-Auto", "Planning-Consult", "Hojo-Consult"] {
        let loadout = config.resolve(Some(name)).unwrap();
        let limits = serde_json::to_value(loadout.limits).unwrap();
        assert_eq!(
            limits,
            json!({"max_no_advance_cycles": 3}),
            "legacy limits are dropped"
        );
        assert_eq!(loadout.budget.max_tokens, 10_000_000, "{name}");
        for id in loadout.sockets.keys() {
            let n = id.as_str().strip_prefix("Socket-").unwrap();
            assert!(n.parse::<u32>().is_ok_and(|n| n > 0), "{id}");
        }
    }
    for name in ["Parallel-Experimental", "Parallel-Interactive"] {
        let loadout = config.resolve(Some(name)).unwrap();
        assert!(loadout.lanes.is_some(), "{name} runs its items in lanes");
    }
    let full = config.resolve(Some("Full-Auto")).unwrap();
    let eval = full.socket(&sid("Socket-5")).unwrap();
    assert!(
        eval.assign
            .contains(&("lastFeedback".to_owned(), "$.context".to_owned()))
    );
    assert_eq!(eval.edges[1].max_traversals, Some(3));
    assert_eq!(eval.edges[1].when, When::NotSatisfied);
}

/// Runs the two utilities of a bundled loadout.
fn past_utilities(cast: &mut Cast) {
    assert_eq!(kinds(&cast.first), ["cast_started", "socket_started"]);
    cast.utility(r#"{"state": {"artifactIgnore": {"ok": true}}, "context": "ignored"}"#);
    cast.utility(r#"{"state": {"vcs": {"ok": true, "kind": "git"}}}"#);
}

#[test]
fn full_auto_runs_from_utilities_through_the_loop_to_narrate() {
    let mut cast = given(&bundled("Full-Auto"));
    past_utilities(&mut cast);
    assert_eq!(cast.data()["vcs"]["kind"], json!("git"));
    cast.json(&plan(&["Greeting"]));
    cast.settle();
    assert_eq!(cast.socket(), "Socket-8");
    assert!(
        cast.entry("upstreamWorkItems")
            .unwrap()
            .contains("Greeting")
    );
    cast.json(&plan(&["Greeting", "Farewell"]));
    cast.settle();
    assert_eq!(
        (cast.socket().as_str(), cast.item().as_deref()),
        ("Socket-4", Some("WI-1"))
    );
    for title in ["Greeting", "Farewell"] {
        assert_eq!(cast.data()["item"]["title"], json!(title));
        cast.reply("Implemented.");
        cast.json(&json!({"satisfied": true, "context": format!("{title} verified")}));
        assert_eq!(
            cast.data()["lastFeedback"],
            json!(format!("{title} verified"))
        );
        cast.json(&json!({"satisfied": true, "context": "committed"}));
    }
    cast.settle();
    assert_eq!(cast.socket(), "Socket-7");
    let events = cast.reply("Two items done.");
    assert_eq!(kinds(&events).last(), Some(&"cast_completed"));
}

#[test]
fn full_auto_eval_rework_is_budgeted_at_three_per_item() {
    let mut cast = given(&bundled("Full-Auto"));
    past_utilities(&mut cast);
    cast.json(&plan(&["A"]));
    cast.json(&plan(&["A"]));
    for round in 1..=3 {
        cast.reply("Implemented.");
        let events = cast.json(&json!({"satisfied": false, "context": "missing"}));
        assert_eq!(of!(events, EdgeTaken)[0].traversal, round);
    }
    cast.reply("Implemented.");
    let events = cast.json(&json!({"satisfied": false, "context": "missing"}));
    assert_eq!(of!(events, CastFailed).len(), 1);
    assert_eq!(cast.status(), Status::Failed);
}

#[test]
fn full_auto_eval_whole_output_assign_admits_extra_keys_as_the_reference_does() {
    // The bundled Auto-Eval assigns `lastCheck ← $`: the reference then accepts any key, and so
    // does a cast under the conformance rules; one recorded before them does not.
    for (conformance, accepted) in [(1, true), (0, false)] {
        let mut cast = given(&bundled("Full-Auto"));
        cast.state.conformance = conformance;
        past_utilities(&mut cast);
        cast.json(&plan(&["A"]));
        cast.json(&plan(&["A"]));
        cast.reply("Implemented.");
        let events = cast.json(&json!({"satisfied": true, "context": "ok", "verdict": "pass"}));
        let rejected = of!(events, OutputRejected);
        assert_eq!(rejected.is_empty(), accepted, "{:?}", kinds(&events));
        if !accepted {
            assert!(rejected[0].issues.iter().any(|i| i.contains("\"verdict\"")));
        }
    }
}

#[test]
fn planning_consult_refines_then_ends_after_the_last_item_without_a_summary() {
    let mut cast = given(&bundled("Planning-Consult"));
    past_utilities(&mut cast);
    let events = cast.reply("Here is a first plan.");
    assert_eq!(kinds(&events), ["agent_replied", "refinement_recorded"]);
    cast.when(Input::Continue { origin: None });
    cast.json(&plan(&["A"]));
    cast.reply("Implemented.");
    cast.json(&json!({"satisfied": true, "context": "ok"}));
    let events = cast.json(&json!({"satisfied": true, "context": "committed"}));
    let taken = of!(events, EdgeTaken);
    assert_eq!(
        (taken[0].to.clone(), taken[0].when),
        (Target::End, When::Always)
    );
    assert_eq!(cast.status(), Status::Completed);
}

#[test]
fn hojo_consult_unbudgeted_rework_is_capped_by_no_advance_and_revivable() {
    let mut cast = given(&bundled("Hojo-Consult"));
    past_utilities(&mut cast);
    cast.reply("A plan.");
    cast.when(Input::Continue { origin: None });
    cast.json(&plan(&["A"]));
    cast.json(&plan(&["A"]));
    for _ in 0..3 {
        cast.reply("Implemented.");
        let events = cast.json(&json!({"satisfied": false, "context": "missing"}));
        assert!(of!(events, CastFailed).is_empty());
    }
    cast.reply("Implemented.");
    let events = cast.json(&json!({"satisfied": false, "context": "missing"}));
    let reason = &of!(events, CastFailed)[0].reason;
    assert!(
        reason.contains("Socket-5 -> Socket-6 -> Socket-5"),
        "{reason}"
    );
    let events = cast.when(Input::Revive);
    assert_eq!(of!(events, AllowanceExtended)[0].limit, 6);
    assert_eq!(of!(events, SocketStarted)[0].socket, sid("Socket-5"));
}
