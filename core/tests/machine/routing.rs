//! Edge selection: declaration order, the three conditions, `end`, and that only the current
//! output's `satisfied` routes (items 1 and 2).

use castlog_core::event::{Target, When};
use castlog_core::id::SocketId;
use castlog_core::machine::Status;
use rstest::rstest;
use serde_json::{Value, json};

use crate::harness::{Cast, config, given, kinds};

/// Socket-1 (`parse` given) routes satisfied → 2, not_satisfied → 3, always → 4.
fn three_way(parse: &str) -> Cast {
    given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Eval", "parse": parse, "edges": [
                { "when": "satisfied", "to": "Socket-2" },
                { "when": "not_satisfied", "to": "Socket-3" },
                { "when": "always", "to": "Socket-4" }
            ] },
            "Socket-2": { "materia": "Narrate", "parse": "text" },
            "Socket-3": { "materia": "Narrate", "parse": "text" },
            "Socket-4": { "materia": "Narrate", "parse": "text" }
        }
    })))
}

fn socket(id: &str) -> Target {
    Target::Socket(SocketId::new(id))
}

#[rstest]
#[case::satisfied_takes_the_first_satisfied_edge(json!({"satisfied": true}), "Socket-2", When::Satisfied)]
#[case::not_satisfied_takes_the_not_satisfied_edge(json!({"satisfied": false}), "Socket-3", When::NotSatisfied)]
#[case::context_does_not_change_the_outcome(json!({"satisfied": true, "context": "fine"}), "Socket-2", When::Satisfied)]
fn edges_route_in_declaration_order(#[case] output: Value, #[case] to: &str, #[case] when: When) {
    let mut cast = three_way("json");
    let events = cast.json(&output);
    let taken = of!(events, EdgeTaken);
    assert_eq!(taken.len(), 1, "{:?}", kinds(&events));
    assert_eq!(taken[0].to, socket(to));
    assert_eq!(taken[0].when, when);
    assert_eq!(taken[0].from, SocketId::new("Socket-1"));
    assert_eq!(cast.socket(), to);
}

#[test]
fn a_text_output_has_no_satisfied_and_takes_the_always_edge() {
    // A JSON-looking text answer does not drive satisfied routing.
    let mut cast = three_way("text");
    let events = cast.reply(r#"{"satisfied": true}"#);
    let completed = of!(events, SocketCompleted);
    assert_eq!(completed[0].satisfied, None);
    assert_eq!(completed[0].parsed, None);
    let taken = of!(events, EdgeTaken);
    assert_eq!(taken[0].to, socket("Socket-4"));
    assert_eq!(taken[0].when, When::Always);
}

#[test]
fn an_output_without_satisfied_takes_always() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Maintain", "parse": "json",
                          "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Narrate", "parse": "text" }
        }
    })));
    let events = cast.json(&json!({}));
    let taken = of!(events, EdgeTaken);
    assert_eq!(taken[0].to, socket("Socket-2"));
    assert_eq!(taken[0].when, When::Always);
}

#[test]
fn a_socket_without_edges_ends_the_cast() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": { "Socket-1": { "materia": "Narrate", "parse": "text" } }
    })));
    let events = cast.reply("All done.");
    assert_eq!(
        kinds(&events),
        ["agent_replied", "socket_completed", "cast_completed"]
    );
    assert_eq!(cast.status(), Status::Completed);
}

#[test]
fn no_matching_edge_ends_the_cast_successfully() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Eval", "parse": "json",
                          "edges": [{ "when": "not_satisfied", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Narrate", "parse": "text" }
        }
    })));
    let events = cast.json(&json!({"satisfied": true}));
    assert!(of!(events, EdgeTaken).is_empty());
    assert_eq!(of!(events, CastCompleted).len(), 1);
    assert_eq!(cast.status(), Status::Completed);
}

#[test]
fn an_edge_to_end_is_taken_then_the_cast_completes() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": { "Socket-1": { "materia": "Narrate", "parse": "text",
                                    "edges": [{ "when": "always", "to": "end" }] } }
    })));
    let events = cast.reply("Summary.");
    assert_eq!(of!(events, EdgeTaken)[0].to, Target::End);
    assert_eq!(kinds(&events).last(), Some(&"cast_completed"));
}

#[test]
fn routing_and_advance_read_the_current_output_not_the_carried_envelope() {
    // Socket-1 leaves `satisfied: true` in the envelope; Socket-2 is a text socket whose
    // satisfied edge and satisfied advance must not see it.
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Eval", "parse": "json",
                          "edges": [{ "when": "satisfied", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Build", "parse": "text",
                          "advance": { "cursor": "pass", "items": "state.passes",
                                       "when": "satisfied" },
                          "edges": [
                              { "when": "satisfied", "to": "Socket-3" },
                              { "when": "always", "to": "Socket-4" }
                          ] },
            "Socket-3": { "materia": "Narrate", "parse": "text" },
            "Socket-4": { "materia": "Narrate", "parse": "text" }
        }
    })));
    cast.json(&json!({"satisfied": true, "context": "accepted"}));
    assert_eq!(cast.data()["envelope"]["satisfied"], json!(true));
    let events = cast.reply("Implemented it; satisfied: true");
    assert!(of!(events, CursorAdvanced).is_empty());
    let taken = of!(events, EdgeTaken);
    assert_eq!(taken[0].to, socket("Socket-4"));
    assert_eq!(taken[0].when, When::Always);
}

#[test]
fn the_outcome_of_the_current_output_wins_over_an_earlier_one() {
    let mut cast = three_way("json");
    cast.json(&json!({"satisfied": true}));
    // Socket-2 is a text socket; the earlier satisfied: true must not leak into the record.
    let events = cast.reply("done");
    assert_eq!(of!(events, SocketCompleted)[0].satisfied, None);
    assert_eq!(cast.state.last_satisfied, None);
}
