//! Loops: item selection and keys, advance, exhaustion routes, empty loops, the per-item edge
//! allowance and the no-advance guard (items 9-15).

use castlog_core::event::{Allowance, Target, When};
use castlog_core::id::{ItemKey, SocketId};
use castlog_core::machine::Status;
use rstest::rstest;
use serde_json::{Value, json};

use crate::harness::{Cast, build_loop, config, given, guarded_loop, kinds, plan};

fn sid(id: &str) -> SocketId {
    SocketId::new(id)
}

fn wi(n: u32) -> Option<ItemKey> {
    Some(ItemKey::new(format!("WI-{n}")))
}

/// Runs one item of the standard loop to its Maintain: Build, then Eval satisfied.
fn build_and_accept(cast: &mut Cast) {
    cast.reply("built it");
    cast.json(&json!({"satisfied": true, "context": "ok"}));
}

#[test]
fn loop_items_are_keyed_wi_n_and_exposed_as_item_and_work_item() {
    let mut cast = given(&build_loop());
    let events = cast.json(&plan(&["Greeting", "Farewell"]));
    cast.settle();
    let started = of!(events, SocketStarted);
    assert_eq!(started[0].socket, sid("Socket-2"));
    assert_eq!(started[0].item, wi(1));
    assert_eq!(started[0].item_label.as_deref(), Some("Greeting"));
    assert_eq!(cast.data()["item"]["title"], json!("Greeting"));
    assert_eq!(cast.data()["workItem"]["title"], json!("Greeting"));
    assert_eq!(cast.data()["currentWorkItem"]["title"], json!("Greeting"));
    build_and_accept(&mut cast);
    cast.json(&json!({"satisfied": true}));
    cast.settle();
    assert_eq!(cast.item().as_deref(), Some("WI-2"));
    assert_eq!(cast.data()["item"]["title"], json!("Farewell"));
}

#[test]
fn advance_moves_the_cursor_only_when_its_condition_holds() {
    // Item 10: a not_satisfied Maintain retries the same item without moving the cursor.
    let mut cast = given(&build_loop()).planned(&["A", "B"]);
    build_and_accept(&mut cast);
    let events = cast.json(&json!({"satisfied": false, "context": "not committed"}));
    assert!(of!(events, CursorAdvanced).is_empty());
    assert_eq!(
        of!(events, EdgeTaken)[0].to,
        Target::Socket(sid("Socket-2"))
    );
    assert_eq!(of!(events, SocketStarted)[0].item, wi(1));
    assert_eq!(cast.state.cursors.get("workItemIndex"), Some(&0));
    build_and_accept(&mut cast);
    let events = cast.json(&json!({"satisfied": true}));
    let moved = of!(events, CursorAdvanced);
    assert_eq!((moved[0].from, moved[0].to), (0, 1));
    assert_eq!(of!(events, SocketStarted)[0].item, wi(2));
}

/// A loop whose Maintain advances unconditionally and has the given exits.
fn exits_loop(exits: &Value) -> Cast {
    given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Plan", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-3" }] },
            "Socket-3": { "materia": "Maintain", "parse": "json",
                          "advance": { "cursor": "workItemIndex", "items": "state.workItems" },
                          "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-5": { "materia": "Narrate", "parse": "text" },
            "Socket-6": { "materia": "Narrate", "parse": "text" },
            "Socket-7": { "materia": "Narrate", "parse": "text" }
        },
        "loops": { "items": {
            "sockets": ["Socket-2", "Socket-3"],
            "consumes": { "from": "Socket-1", "output": "workItems" },
            "exits": exits
        } }
    })))
    .planned(&["Only"])
}

fn all_exits() -> Value {
    json!([
        { "id": "a", "from": "Socket-3", "condition": "always", "targetSocketId": "Socket-7" },
        { "id": "n", "from": "Socket-3", "condition": "not_satisfied", "targetSocketId": "Socket-6" },
        { "id": "s", "from": "Socket-3", "condition": "satisfied", "targetSocketId": "Socket-5" }
    ])
}

#[rstest]
#[case::satisfied_before_always(all_exits(), json!({"satisfied": true}), Target::Socket(sid("Socket-5")), When::Satisfied)]
#[case::not_satisfied_before_always(all_exits(), json!({"satisfied": false}), Target::Socket(sid("Socket-6")), When::NotSatisfied)]
#[case::no_outcome_takes_always(all_exits(), json!({}), Target::Socket(sid("Socket-7")), When::Always)]
#[case::satisfied_falls_back_to_always(
    json!([{ "id": "a", "from": "Socket-3", "condition": "always", "targetSocketId": "Socket-7" }]),
    json!({"satisfied": true}), Target::Socket(sid("Socket-7")), When::Always)]
#[case::no_matching_exit_ends(
    json!([{ "id": "s", "from": "Socket-3", "condition": "satisfied", "targetSocketId": "Socket-5" }]),
    json!({"satisfied": false}), Target::End, When::Always)]
#[case::no_exits_end(json!([]), json!({"satisfied": true}), Target::End, When::Always)]
fn exhaustion_picks_the_loop_exit_by_precedence(
    #[case] exits: Value,
    #[case] output: Value,
    #[case] to: Target,
    #[case] when: When,
) {
    let mut cast = exits_loop(&exits);
    cast.reply("built");
    let events = cast.json(&output);
    assert_eq!(of!(events, CursorAdvanced).len(), 1);
    let taken = of!(events, EdgeTaken);
    assert_eq!(
        taken.len(),
        1,
        "normal edges are skipped: {:?}",
        kinds(&events)
    );
    assert_eq!((taken[0].to.clone(), taken[0].when), (to.clone(), when));
    if to == Target::End {
        assert_eq!(cast.status(), Status::Completed);
    } else {
        assert_eq!(of!(events, SocketStarted)[0].item, None);
    }
}

#[test]
fn an_empty_loop_leaves_through_the_loops_always_exit() {
    // castlog does better: the reference looks the exit up by the entered socket (Socket-2),
    // finds none and ends, skipping Narrate; castlog takes the loop's `always` exit route.
    let mut cast = given(&build_loop());
    let events = cast.json(&json!({"workItems": []}));
    let taken = of!(events, EdgeTaken);
    assert_eq!(taken.len(), 2, "{:?}", kinds(&events));
    assert_eq!(taken[1].from, sid("Socket-2"));
    assert_eq!(taken[1].to, Target::Socket(sid("Socket-5")));
    let started = of!(events, SocketStarted);
    assert_eq!(started.len(), 1, "Build never starts");
    assert_eq!(started[0].socket, sid("Socket-5"));
}

#[test]
fn an_empty_loop_without_an_always_exit_ends() {
    let exits = json!([{ "id": "s", "from": "Socket-3", "condition": "satisfied",
                         "targetSocketId": "Socket-5" }]);
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Plan", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-3" }] },
            "Socket-3": { "materia": "Maintain", "parse": "json",
                          "advance": { "cursor": "workItemIndex", "items": "state.workItems" },
                          "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-5": { "materia": "Narrate", "parse": "text" }
        },
        "loops": { "items": { "sockets": ["Socket-2", "Socket-3"],
                              "consumes": { "from": "Socket-1" }, "exits": exits } }
    })));
    let events = cast.json(&json!({"workItems": []}));
    assert!(of!(events, SocketStarted).is_empty());
    assert_eq!(cast.status(), Status::Completed);
}

#[test]
fn max_traversals_is_counted_per_edge_per_item() {
    // Item 12: two reworks allowed for each item; the second item keeps its full budget.
    let mut cast = given(&build_loop()).planned(&["A", "B"]);
    for item in 1..=2 {
        for round in 1..=2u32 {
            cast.reply("built");
            let events = cast.json(&json!({"satisfied": false, "context": "again"}));
            let taken = of!(events, EdgeTaken);
            assert_eq!(taken[0].item, wi(item));
            assert_eq!(taken[0].traversal, round);
        }
        build_and_accept(&mut cast);
        cast.json(&json!({"satisfied": true}));
    }
    assert_eq!(
        cast.state.traversals.get("Socket-3->Socket-2@WI-1"),
        Some(&2)
    );
    assert_eq!(
        cast.state.traversals.get("Socket-3->Socket-2@WI-2"),
        Some(&2)
    );
    assert_eq!(cast.socket(), "Socket-5");
}

#[test]
fn the_traversal_past_max_fails_the_cast_with_the_scoped_allowance() {
    let mut cast = given(&build_loop()).planned(&["A"]);
    for _ in 0..2 {
        cast.reply("built");
        cast.json(&json!({"satisfied": false, "context": "again"}));
    }
    cast.reply("built");
    let events = cast.json(&json!({"satisfied": false, "context": "still wrong"}));
    assert!(of!(events, EdgeTaken).is_empty());
    assert!(
        of!(events, ReworkRouted).is_empty(),
        "no rework past the allowance"
    );
    let allowance = Allowance::Edge {
        from: sid("Socket-3"),
        to: Target::Socket(sid("Socket-2")),
        item: wi(1),
    };
    let exhausted = of!(events, AllowanceExhausted);
    assert_eq!(exhausted[0].allowance, allowance);
    assert_eq!((exhausted[0].count, exhausted[0].limit), (3, 2));
    let failed = of!(events, CastFailed);
    assert_eq!(failed[0].allowance, Some(allowance));
    assert!(
        failed[0].reason.contains("Socket-3->Socket-2@WI-1"),
        "{}",
        failed[0].reason
    );
    assert_eq!(cast.status(), Status::Failed);
}

#[test]
fn outside_loops_the_traversal_key_has_no_item_suffix() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Eval", "parse": "json", "edges": [
                { "when": "not_satisfied", "to": "Socket-1", "maxTraversals": 1 }
            ] }
        }
    })));
    cast.reply("draft");
    let events = cast.json(&json!({"satisfied": false}));
    assert_eq!(of!(events, EdgeTaken)[0].item, None);
    assert_eq!(cast.state.traversals.get("Socket-2->Socket-1"), Some(&1));
    cast.reply("draft 2");
    let events = cast.json(&json!({"satisfied": false}));
    assert_eq!(of!(events, CastFailed).len(), 1);
}

#[test]
fn unbudgeted_edges_and_legacy_limits_never_stop_a_cast() {
    // Item 13: legacy maxSocketVisits / maxEdgeTraversals / maxVisits are accepted and ignored.
    let mut cfg = config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Build", "parse": "text",
                          "limits": { "maxVisits": 1, "maxEdgeTraversals": 1 },
                          "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Eval", "parse": "json", "edges": [
                { "when": "not_satisfied", "to": "Socket-1" }
            ] }
        }
    }));
    cfg["limits"] =
        json!({ "maxNoAdvanceCycles": 1, "maxSocketVisits": 1, "maxEdgeTraversals": 1 });
    let mut cast = given(&cfg);
    for _ in 0..6 {
        cast.reply("draft");
        cast.json(&json!({"satisfied": false}));
    }
    assert_eq!(cast.state.visits.get(&sid("Socket-1")), Some(&7));
    cast.reply("draft");
    cast.json(&json!({"satisfied": true}));
    assert_eq!(cast.status(), Status::Completed);
}

fn no_advance_loop(limit: u32, budgeted: bool, titles: &[&str]) -> Cast {
    given(&guarded_loop(limit, budgeted.then_some(3))).planned(titles)
}

#[test]
fn the_no_advance_guard_fails_on_the_second_closed_cycle_with_limit_one() {
    let mut cast = no_advance_loop(1, false, &["A"]);
    build_and_accept(&mut cast);
    cast.json(&json!({"satisfied": false}));
    build_and_accept(&mut cast);
    let events = cast.json(&json!({"satisfied": false}));
    let exhausted = of!(events, AllowanceExhausted);
    assert_eq!(exhausted[0].allowance, Allowance::NoAdvance { item: wi(1) });
    assert_eq!((exhausted[0].count, exhausted[0].limit), (2, 1));
    let reason = &of!(events, CastFailed)[0].reason;
    assert!(reason.contains("\"WI-1\""), "{reason}");
    assert!(
        reason.contains("Socket-2 -> Socket-3 -> Socket-4 -> Socket-2"),
        "{reason}"
    );
    assert!(
        of!(events, SocketStarted).is_empty(),
        "refused before the visit"
    );
    assert_eq!(cast.state.cursors.get("workItemIndex"), Some(&0));
    for s in ["Socket-2", "Socket-3", "Socket-4"] {
        assert_eq!(cast.state.visits.get(&sid(s)), Some(&2), "{s}");
    }
}

#[test]
fn re_entries_through_a_budgeted_edge_are_not_no_advance_cycles() {
    // Item 15: three reworks with maxNoAdvanceCycles 1 still complete.
    let mut cast = no_advance_loop(1, true, &["A"]);
    for _ in 0..3 {
        cast.reply("built");
        let events = cast.json(&json!({"satisfied": false}));
        assert!(of!(events, CastFailed).is_empty(), "{:?}", kinds(&events));
    }
    build_and_accept(&mut cast);
    cast.json(&json!({"satisfied": true}));
    assert_eq!(cast.status(), Status::Completed);
}

#[test]
fn an_advance_resets_the_no_advance_tracker() {
    let mut cast = no_advance_loop(1, false, &["A", "B"]);
    // WI-1: one counted cycle, then satisfied; WI-2 starts with a fresh tracker.
    build_and_accept(&mut cast);
    cast.json(&json!({"satisfied": false}));
    build_and_accept(&mut cast);
    cast.json(&json!({"satisfied": true}));
    assert_eq!(cast.item().as_deref(), Some("WI-2"));
    assert_eq!(cast.state.no_advance.count, 0);
    build_and_accept(&mut cast);
    let events = cast.json(&json!({"satisfied": false}));
    assert!(of!(events, CastFailed).is_empty());
}

#[test]
fn a_non_work_items_iterator_keys_items_by_index() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Probe", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Build", "parse": "text",
                          "advance": { "cursor": "fileIndex", "items": "state.files" },
                          "edges": [{ "when": "always", "to": "Socket-2" }] }
        },
        "loops": { "files": { "sockets": ["Socket-2"],
                              "iterator": { "items": "state.files", "as": "file",
                                            "cursor": "fileIndex" } } }
    })));
    let events = cast.utility(r#"{"state": {"files": [{"name": "a.rs"}, {"name": "b.rs"}]}}"#);
    let started = of!(events, SocketStarted);
    assert_eq!(started[0].item, Some(ItemKey::new("0")));
    assert_eq!(started[0].item_label.as_deref(), Some("a.rs"));
    assert_eq!(cast.data()["file"]["name"], json!("a.rs"));
    assert!(cast.data().get("workItem").is_none());
    let events = cast.reply("a done");
    assert_eq!(of!(events, SocketStarted)[0].item, Some(ItemKey::new("1")));
    let events = cast.reply("b done");
    assert_eq!(of!(events, EdgeTaken)[0].to, Target::End);
    assert_eq!(cast.status(), Status::Completed);
}
