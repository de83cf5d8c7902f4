//! Every cycle is bounded (castlog does better than the reference, which tracks no cycle of
//! sockets outside loops): utilities, agents and sockets outside loops all count towards the
//! no-advance guard, a cycle that leaves its loop (for the sockets outside or another loop) and
//! comes back counts for its item, revive
//! extends the guard, casts of loadouts frozen before keep the reference's rule, and loop exits
//! that lead back into used-up loops fail the cast instead of skipping forever.

use castlog_core::event::Allowance;
use castlog_core::id::{ItemKey, SocketId};
use castlog_core::input::Input;
use castlog_core::loadout::load_config;
use castlog_core::machine::Status;
use serde_json::{Value, json};

use crate::harness::{Cast, config, given, given_loadout, kinds, loadout};

fn sid(id: &str) -> SocketId {
    SocketId::new(id)
}

/// Two utilities joined by `always` edges, outside any loop; the second could leave on
/// `satisfied`, but it never reports success.
fn two_utilities(limit: Option<u32>) -> Value {
    let mut cfg = config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Echo", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Probe", "edges": [
                { "when": "satisfied", "to": "end" },
                { "when": "always", "to": "Socket-1" }
            ] }
        }
    }));
    if let Some(limit) = limit {
        cfg["limits"] = json!({ "maxCyclesOutsideLoops": limit });
    }
    cfg
}

/// One round of the two utilities; the events of the second.
fn utility_round(cast: &mut Cast) -> Vec<castlog_core::event::Event> {
    cast.utility("hi");
    cast.utility(r#"{"satisfied": false}"#)
}

#[test]
fn two_utilities_joined_by_always_edges_stop_at_the_default_limit() {
    let mut cast = given(&two_utilities(None));
    for _ in 0..10 {
        let events = utility_round(&mut cast);
        assert!(of!(events, CastFailed).is_empty(), "{:?}", kinds(&events));
    }
    let events = utility_round(&mut cast);
    let exhausted = of!(events, AllowanceExhausted);
    assert_eq!(exhausted[0].allowance, Allowance::NoAdvance { item: None });
    assert_eq!((exhausted[0].count, exhausted[0].limit), (11, 10));
    let reason = &of!(events, CastFailed)[0].reason;
    assert!(
        reason.contains("sockets outside loops went around Socket-1 -> Socket-2 -> Socket-1"),
        "{reason}"
    );
    assert!(
        of!(events, SocketStarted).is_empty(),
        "refused before the visit"
    );
    assert_eq!(cast.status(), Status::Failed);
    assert_eq!(cast.state.visits.get(&sid("Socket-1")), Some(&11));
}

#[test]
fn revive_extends_the_guard_outside_loops_by_its_size() {
    let mut cast = given(&two_utilities(Some(2)));
    for _ in 0..3 {
        utility_round(&mut cast);
    }
    assert_eq!(cast.status(), Status::Failed);
    let events = cast.when(Input::Revive);
    let extended = of!(events, AllowanceExtended);
    assert_eq!(
        (extended[0].allowance.clone(), extended[0].limit),
        (Allowance::NoAdvance { item: None }, 4)
    );
    assert_eq!(of!(events, SocketStarted)[0].socket, sid("Socket-1"));
    utility_round(&mut cast);
    let events = utility_round(&mut cast);
    let exhausted = of!(events, AllowanceExhausted);
    assert_eq!((exhausted[0].count, exhausted[0].limit), (5, 4));
}

#[test]
fn an_agent_cycle_outside_loops_that_always_answers_the_same_stops() {
    let mut cfg = config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Eval", "parse": "json", "edges": [
                { "when": "satisfied", "to": "end" },
                { "when": "not_satisfied", "to": "Socket-1" }
            ] }
        }
    }));
    cfg["limits"] = json!({ "maxCyclesOutsideLoops": 3 });
    let mut cast = given(&cfg);
    let answer = json!({"satisfied": false, "context": "not yet"});
    for _ in 0..3 {
        cast.json(&answer);
        let events = cast.json(&answer);
        assert!(of!(events, CastFailed).is_empty(), "{:?}", kinds(&events));
    }
    cast.json(&answer);
    let events = cast.json(&answer);
    let exhausted = of!(events, AllowanceExhausted);
    assert_eq!((exhausted[0].count, exhausted[0].limit), (4, 3));
    assert_eq!(cast.status(), Status::Failed);
}

#[test]
fn a_cycle_that_leaves_its_loop_and_comes_back_counts_for_its_item() {
    // Socket-4 is outside the loop and sends the same item round again: the reference restarts
    // its tracker at every change of item, so this cycle was never counted.
    let mut cfg = config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Plan", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-3" }] },
            "Socket-3": { "materia": "Eval", "parse": "json", "edges": [
                { "when": "satisfied", "to": "Socket-4" },
                { "when": "not_satisfied", "to": "Socket-2", "maxTraversals": 1 }
            ] },
            "Socket-4": { "materia": "Echo", "edges": [{ "when": "always", "to": "Socket-2" }] }
        },
        "loops": { "items": { "sockets": ["Socket-2", "Socket-3"],
                              "consumes": { "from": "Socket-1" } } }
    }));
    cfg["limits"] = json!({ "maxNoAdvanceCycles": 1 });
    let mut cast = given(&cfg).planned(&["A"]);
    let round = |cast: &mut Cast| {
        cast.reply("built");
        cast.json(&json!({"satisfied": true}));
        cast.utility("hi")
    };
    assert!(of!(round(&mut cast), CastFailed).is_empty());
    let events = round(&mut cast);
    let exhausted = of!(events, AllowanceExhausted);
    let item = Some(ItemKey::new("WI-1"));
    assert_eq!(exhausted[0].allowance, Allowance::NoAdvance { item });
    let reason = &of!(events, CastFailed)[0].reason;
    assert!(
        reason.contains("item \"WI-1\" went around Socket-2 -> Socket-3 -> Socket-4 -> Socket-2"),
        "{reason}"
    );
}

#[test]
fn casts_of_loadouts_frozen_before_keep_the_reference_rule_outside_loops() {
    // A frozen loadout without `max_cycles_outside_loops` is one recorded before castlog
    // counted these cycles: its casts must re-decide to the events they recorded.
    let mut frozen = loadout(&two_utilities(Some(1)));
    frozen.max_cycles_outside_loops = None;
    let json = frozen.to_json();
    assert!(json.get("max_cycles_outside_loops").is_none(), "{json}");
    let mut cast = given_loadout(&frozen);
    for _ in 0..12 {
        let events = utility_round(&mut cast);
        assert!(of!(events, CastFailed).is_empty(), "{:?}", kinds(&events));
    }
    assert_eq!(cast.state.no_advance.count, 0);
}

#[test]
fn a_loaded_loadout_freezes_its_limit_outside_loops() {
    assert_eq!(
        loadout(&two_utilities(None)).max_cycles_outside_loops,
        Some(10)
    );
    let frozen = loadout(&two_utilities(Some(4))).to_json();
    assert_eq!(frozen["max_cycles_outside_loops"], 4);
    let mut zero = two_utilities(None);
    zero["limits"] = json!({ "maxCyclesOutsideLoops": 0 });
    let e = load_config(&zero.to_string()).unwrap_err();
    assert_eq!(e.path, "limits.maxCyclesOutsideLoops", "{e}");
}

#[test]
fn the_bundled_config_and_every_fixture_loadout_still_load() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures");
    let mut paths = vec![format!("{root}/pi-materia-default.json")];
    for entry in std::fs::read_dir(format!("{root}/loadouts")).unwrap() {
        paths.push(entry.unwrap().path().display().to_string());
    }
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        if let Err(e) = load_config(&text) {
            panic!("{path}: {e}");
        }
    }
}

#[test]
fn loop_exits_that_lead_back_into_their_used_up_loop_fail_instead_of_skipping_forever() {
    // The exit of a loop whose items are all used goes back into the loop, which is skipped
    // again at once: this recursed until the stack overflowed.
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Plan", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-3" }] },
            "Socket-3": { "materia": "Maintain", "parse": "json",
                          "advance": { "cursor": "workItemIndex", "items": "state.workItems" },
                          "edges": [{ "when": "always", "to": "Socket-2" }] }
        },
        "loops": { "items": {
            "sockets": ["Socket-2", "Socket-3"],
            "consumes": { "from": "Socket-1" },
            "exits": [{ "id": "back", "from": "Socket-3", "condition": "always",
                        "targetSocketId": "Socket-2" }]
        } }
    })))
    .planned(&["A"]);
    cast.reply("built");
    let events = cast.json(&json!({"context": "checkpointed"}));
    assert_eq!(
        kinds(&events),
        [
            "agent_replied",
            "socket_completed",
            "cursor_advanced",
            "edge_taken",
            "edge_taken",
            "cast_failed"
        ]
    );
    let reason = &of!(events, CastFailed)[0].reason;
    assert!(
        reason.contains("lead back into them: Socket-2 -> Socket-2"),
        "{reason}"
    );
    assert_eq!(cast.status(), Status::Failed);
}

#[test]
fn a_cycle_through_two_loops_counts_for_the_item_it_began_with() {
    // Two loops over different lists: the reference restarts its tracker at each change of
    // item, so going from one loop to the other and back was never counted.
    let mut cfg = config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Plan", "assign": { "other": "$.workItems" },
                          "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-3" }] },
            "Socket-3": { "materia": "Eval", "parse": "json", "edges": [
                { "when": "satisfied", "to": "Socket-4" },
                { "when": "not_satisfied", "to": "Socket-2", "maxTraversals": 1 }
            ] },
            "Socket-4": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-5" }] },
            "Socket-5": { "materia": "Eval", "parse": "json", "edges": [
                { "when": "satisfied", "to": "Socket-2" },
                { "when": "not_satisfied", "to": "Socket-4", "maxTraversals": 1 }
            ] }
        },
        "loops": {
            "plan": { "sockets": ["Socket-2", "Socket-3"], "consumes": { "from": "Socket-1" } },
            "other": { "sockets": ["Socket-4", "Socket-5"],
                       "iterator": { "items": "state.other", "cursor": "otherIndex" } }
        }
    }));
    cfg["limits"] = json!({ "maxNoAdvanceCycles": 1 });
    let mut cast = given(&cfg).planned(&["A"]);
    let round = |cast: &mut Cast| {
        cast.reply("built");
        let events = cast.json(&json!({"satisfied": true}));
        assert_eq!(of!(events, SocketStarted)[0].item, Some(ItemKey::new("0")));
        cast.reply("built");
        cast.json(&json!({"satisfied": true}))
    };
    assert!(of!(round(&mut cast), CastFailed).is_empty());
    let events = round(&mut cast);
    let exhausted = of!(events, AllowanceExhausted);
    let item = Some(ItemKey::new("WI-1"));
    assert_eq!(exhausted[0].allowance, Allowance::NoAdvance { item });
    let reason = &of!(events, CastFailed)[0].reason;
    assert!(
        reason.contains("Socket-2 -> Socket-3 -> Socket-4 -> Socket-5 -> Socket-2"),
        "{reason}"
    );
}
