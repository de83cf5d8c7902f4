//! Rework context on `not_satisfied` edges: capture, rendering for the target socket and item,
//! and castlog's clearing once the item is satisfied (items 17, 18, 19).

use castlog_core::id::{ItemKey, SocketId};
use serde_json::json;

use crate::harness::{Cast, build_loop, config, given, kinds};

const PREFIX: &str = "No top-level context was provided; bounded previous output excerpt: ";

fn sid(id: &str) -> SocketId {
    SocketId::new(id)
}

/// The standard loop with items A and B, at Build of WI-1.
fn at_build() -> Cast {
    given(&build_loop()).planned(&["A", "B"])
}

#[test]
fn a_not_satisfied_route_records_rework_without_touching_state() {
    // Item 17.
    let mut cast = at_build();
    cast.reply("built");
    let events = cast.json(&json!({"satisfied": false, "context": "Missing   the\nname."}));
    let rework = of!(events, ReworkRouted);
    assert_eq!(rework.len(), 1, "{:?}", kinds(&events));
    assert_eq!(rework[0].source, sid("Socket-3"));
    assert_eq!(rework[0].materia_label, "Auto-Eval");
    assert_eq!(rework[0].target, sid("Socket-2"));
    assert_eq!(rework[0].item, Some(ItemKey::new("WI-1")));
    assert_eq!(
        rework[0].reason, "Missing the name.",
        "whitespace is collapsed"
    );
    assert!(of!(events, DataAssigned).is_empty());
    let data = cast.data().as_object().unwrap();
    assert!(
        data.keys().all(|k| !k.to_lowercase().contains("rework")),
        "{data:?}"
    );
}

#[test]
fn a_satisfied_route_records_no_rework() {
    let mut cast = at_build();
    cast.reply("built");
    let events = cast.json(&json!({"satisfied": true, "context": "fine"}));
    assert!(of!(events, ReworkRouted).is_empty());
    assert!(cast.state.rework.is_empty());
}

/// A loop whose evaluator may emit extra keys (consumed by its assignments).
fn verbose_eval() -> Cast {
    given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Plan", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-3" }] },
            "Socket-3": { "materia": "Eval", "parse": "json",
                          "assign": { "log": "$.details", "note": "$.text" },
                          "edges": [{ "when": "not_satisfied", "to": "Socket-2" }] }
        },
        "loops": { "items": { "sockets": ["Socket-2", "Socket-3"],
                              "consumes": { "from": "Socket-1" } } }
    })))
    .planned(&["A"])
}

#[test]
fn without_context_the_reason_is_a_bounded_excerpt_without_text() {
    // Item 18.
    let mut cast = verbose_eval();
    cast.reply("built");
    let details = "x".repeat(5000);
    let events =
        cast.json(&json!({"satisfied": false, "details": details, "text": "SECRET PROSE"}));
    let reason = &of!(events, ReworkRouted)[0].reason;
    assert!(reason.starts_with(PREFIX), "{reason}");
    assert!(!reason.contains("SECRET PROSE"));
    assert!(
        reason.chars().count() <= PREFIX.len() + 901,
        "{}",
        reason.len()
    );
    assert!(reason.ends_with('…'));
    let block = cast
        .entry("reworkFeedback")
        .expect("Build gets the follow-up");
    assert!(block.chars().count() < 2400, "{}", block.chars().count());
}

#[test]
fn a_text_only_json_output_never_leaks_its_prose() {
    let mut cast = verbose_eval();
    cast.reply("built");
    let events = cast.json(&json!({"satisfied": false, "text": "SECRET PROSE", "details": "d"}));
    let reason = &of!(events, ReworkRouted)[0].reason;
    assert!(!reason.contains("SECRET PROSE"), "{reason}");
    assert!(reason.contains("\"satisfied\":false"), "{reason}");
}

#[test]
fn the_rework_block_is_cut_at_2400_characters() {
    let mut cast = verbose_eval();
    // Three rounds: a fourth unbudgeted re-entry would trip the no-advance guard (3).
    for _ in 0..3 {
        cast.reply("built");
        cast.json(&json!({"satisfied": false, "context": "y".repeat(900),
                          "details": "d", "text": "t"}));
    }
    let block = cast
        .entry("reworkFeedback")
        .expect("Build gets the follow-up");
    assert!(block.chars().count() <= 2401, "{}", block.chars().count());
    assert!(block.ends_with('…'));
}

#[test]
fn the_target_sockets_next_prompt_for_the_item_renders_the_rework() {
    // Item 19.
    let mut cast = at_build();
    assert!(cast.entry("reworkFeedback").is_none());
    cast.reply("built");
    cast.json(&json!({"satisfied": false, "context": "Missing the name."}));
    cast.settle();
    assert_eq!(cast.socket(), "Socket-2");
    let block = cast
        .entry("reworkFeedback")
        .expect("Build gets the follow-up");
    assert!(block.starts_with("Runtime follow-up context"), "{block}");
    assert!(
        block.contains("From Socket-3 Auto-Eval for A: Missing the name."),
        "{block}"
    );
    cast.reply("fixed");
    cast.settle();
    assert_eq!(cast.socket(), "Socket-3");
    assert!(
        cast.entry("reworkFeedback").is_none(),
        "other sockets do not see it"
    );
}

#[test]
fn rework_rounds_for_one_item_accumulate() {
    let mut cast = at_build();
    for reason in ["First reason.", "Second reason."] {
        cast.reply("built");
        cast.json(&json!({"satisfied": false, "context": reason}));
    }
    cast.settle();
    let block = cast.entry("reworkFeedback").unwrap();
    assert!(
        block.contains("First reason.") && block.contains("Second reason."),
        "{block}"
    );
}

#[test]
fn rework_for_one_item_does_not_render_for_another() {
    // Eval reroutes to Maintain on not_satisfied; Maintain advances unconditionally, so WI-2
    // reaches Maintain while WI-1's entry is still live.
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Plan", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-3" }] },
            "Socket-3": { "materia": "Eval", "parse": "json", "edges": [
                { "when": "not_satisfied", "to": "Socket-4" },
                { "when": "always", "to": "Socket-4" }
            ] },
            "Socket-4": { "materia": "Maintain", "parse": "json",
                          "advance": { "cursor": "workItemIndex", "items": "state.workItems" },
                          "edges": [{ "when": "always", "to": "Socket-2" }] }
        },
        "loops": { "items": { "sockets": ["Socket-2", "Socket-3", "Socket-4"],
                              "consumes": { "from": "Socket-1" } } }
    })))
    .planned(&["A", "B"]);
    cast.reply("built A");
    cast.json(&json!({"satisfied": false, "context": "A is incomplete."}));
    cast.settle();
    let block = cast
        .entry("reworkFeedback")
        .expect("Maintain of WI-1 sees it");
    assert!(block.contains("A is incomplete."));
    cast.json(&json!({}));
    cast.reply("built B");
    cast.json(&json!({"satisfied": true, "context": "B checked"}));
    cast.settle();
    assert_eq!(
        (cast.socket().as_str(), cast.item().as_deref()),
        ("Socket-4", Some("WI-2"))
    );
    assert_eq!(cast.state.rework.len(), 1, "WI-1's entry is still live");
    assert!(
        cast.entry("reworkFeedback").is_none(),
        "WI-2 does not see WI-1's rework"
    );
}

#[test]
fn rework_is_cleared_when_the_item_is_satisfied_and_not_rendered_on_an_always_revisit() {
    // castlog does better: the reference never clears rework entries, so a later visit of
    // Build for the same item reached through Maintain's `always` edge re-renders stale rework.
    let mut cast = at_build();
    cast.reply("built");
    cast.json(&json!({"satisfied": false, "context": "Missing the name."}));
    cast.reply("fixed");
    let events = cast.json(&json!({"satisfied": true, "context": "Now complete."}));
    let cleared = of!(events, ReworkCleared);
    assert_eq!(cleared.len(), 1, "{:?}", kinds(&events));
    assert_eq!(cleared[0].item, Some(ItemKey::new("WI-1")));
    assert_eq!(cleared[0].by, sid("Socket-3"));
    assert!(cast.state.rework.is_empty());
    // Maintain is not satisfied: the cursor stays and Build of WI-1 is visited again.
    cast.json(&json!({"satisfied": false, "context": "commit failed"}));
    cast.settle();
    assert_eq!(
        (cast.socket().as_str(), cast.item().as_deref()),
        ("Socket-2", Some("WI-1"))
    );
    assert!(cast.entry("reworkFeedback").is_none(), "{}", cast.prompt());
}

#[test]
fn outside_loops_rework_targets_the_socket_without_an_item() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Eval", "parse": "json", "edges": [
                { "when": "not_satisfied", "to": "Socket-1" }
            ] }
        }
    })));
    cast.reply("draft");
    let events = cast.json(&json!({"satisfied": false, "context": "Too short."}));
    assert_eq!(of!(events, ReworkRouted)[0].item, None);
    cast.settle();
    let block = cast.entry("reworkFeedback").unwrap();
    assert!(
        block.contains("From Socket-2 Auto-Eval for this cast: Too short."),
        "{block}"
    );
}

/// A rework reason that quotes the output's `context` names the completion it quotes, and the
/// state that keeps the entry (with its reason, for the next prompt) survives a snapshot.
#[test]
fn a_quoted_reason_names_its_completion_and_its_entry_survives_a_snapshot() {
    use castlog_core::event::Event;
    use castlog_core::machine::CastState;

    let mut cast = at_build();
    cast.reply("built");
    let events = cast.json(&json!({"satisfied": false, "context": "Missing   the\nname."}));
    let completed_at = events
        .iter()
        .position(|e| matches!(e, Event::SocketCompleted(_)))
        .map(|i| cast.state.head.get() - (events.len() - 1 - i) as u64)
        .unwrap();
    let rework = of!(events, ReworkRouted);
    assert_eq!(rework[0].reason_of.map(|s| s.get()), Some(completed_at));
    let stored = String::from_utf8(Event::from(rework[0].clone()).encode()).unwrap();
    assert!(
        stored.ends_with(&format!(r#""reason_of":{completed_at}}}"#)),
        "{stored}"
    );
    let (restored, _) = CastState::restore(&cast.state.snapshot(0)).unwrap();
    assert_eq!(restored.rework, cast.state.rework);
    assert_eq!(restored.rework[0].reason, "Missing the name.");
}
