//! The handoff: the envelope, `context` accumulation, `text`, workItems ownership, validation
//! of agent outputs and the one same-socket repair turn (items 3, 5, 6, 22, 23, 24).

use castlog_core::event::{Allowance, Target};
use castlog_core::id::{SocketId, Turn};
use castlog_core::machine::Status;
use rstest::rstest;
use serde_json::{Value, json};

use crate::harness::{Cast, config, given, kinds, plan};

/// Socket-1 Plan → Socket-2 (`materia`, json, `extra` merged in) → Socket-3 Architect → end.
fn chain(materia: &str, extra: &Value) -> Cast {
    let mut second = json!({ "materia": materia, "parse": "json",
                             "edges": [{ "when": "always", "to": "Socket-3" }] });
    if let (Some(target), Some(fields)) = (second.as_object_mut(), extra.as_object()) {
        for (k, v) in fields {
            target.insert(k.clone(), v.clone());
        }
    }
    given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Plan", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": second,
            "Socket-3": { "materia": "Architect" }
        }
    })))
}

/// A single agent socket with the given fields (json parse unless overridden).
fn single(fields: &Value) -> Cast {
    let mut socket = json!({ "materia": "Eval", "parse": "json" });
    if let (Some(target), Some(extra)) = (socket.as_object_mut(), fields.as_object()) {
        for (k, v) in extra {
            target.insert(k.clone(), v.clone());
        }
    }
    given(&config(json!({
        "entry": "Socket-1",
        "sockets": { "Socket-1": socket, "Socket-9": { "materia": "Narrate" } }
    })))
}

#[test]
fn the_envelope_keeps_only_work_items_satisfied_and_context() {
    // Item 3: `feedback` reaches state only through its explicit assignment.
    let mut cast = chain("Eval", &json!({ "assign": { "fb": "$.feedback" } }));
    cast.json(&plan(&["A"]));
    cast.json(&json!({"satisfied": true, "context": "Looks right.", "feedback": "minor nits"}));
    let envelope = cast.data()["envelope"].as_object().unwrap().clone();
    let mut keys: Vec<&str> = envelope.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["context", "satisfied", "workItems"]);
    assert_eq!(envelope["context"], json!("Looks right."));
    assert_eq!(cast.data()["fb"], json!("minor nits"));
    assert_eq!(
        cast.data()["context"],
        json!("[Socket-1 Plan] The plan.\n\n[Socket-2 Auto-Eval] Looks right.")
    );
}

#[test]
fn text_is_never_mirrored_and_reaches_state_only_through_a_text_assign() {
    // Item 6.
    let mut cast = chain("Eval", &json!({ "assign": { "summary": "$.text" } }));
    cast.json(&plan(&["A"]));
    let events = cast.json(&json!({"text": "Rendered prose.", "context": "short"}));
    assert_eq!(
        of!(events, SocketCompleted).len(),
        1,
        "{:?}",
        kinds(&events)
    );
    assert_eq!(cast.data()["summary"], json!("Rendered prose."));
    assert!(cast.data()["envelope"].get("text").is_none());
    assert!(
        !cast.data()["context"]
            .as_str()
            .unwrap()
            .contains("Rendered prose.")
    );
}

#[test]
fn text_without_a_consumer_is_a_repair_issue() {
    let mut cast = chain("Eval", &json!({}));
    cast.json(&plan(&["A"]));
    let events = cast.json(&json!({"text": "Prose.", "context": "c"}));
    let rejected = of!(events, OutputRejected);
    assert!(rejected[0].repair);
    assert!(
        rejected[0]
            .issues
            .iter()
            .any(|i| i.contains("move the prose into context"))
    );
}

#[test]
fn a_non_generator_cannot_replace_a_live_work_items_list_but_a_generator_can() {
    // Item 5.
    let mut cast = chain("Eval", &json!({}));
    cast.json(&plan(&["A", "B"]));
    cast.json(&json!({"workItems": [{"title": "C", "context": "c"}]}));
    let titles = |cast: &Cast| -> Vec<Value> {
        cast.data()["workItems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["title"].clone())
            .collect()
    };
    assert_eq!(titles(&cast), [json!("A"), json!("B")]);
    cast.json(&plan(&["D"]));
    assert_eq!(titles(&cast), [json!("D")]);
}

#[test]
fn a_non_generator_may_fill_an_absent_work_items_list() {
    let mut cast = single(&json!({ "edges": [{ "when": "always", "to": "Socket-9" }] }));
    cast.json(&json!({"workItems": [{"title": "C", "context": "c"}]}));
    assert_eq!(cast.data()["workItems"][0]["title"], json!("C"));
}

#[test]
fn satisfied_is_required_only_when_routing_reads_it() {
    // Item 22.
    let mut cast = single(&json!({ "edges": [{ "when": "satisfied", "to": "Socket-9" }] }));
    let events = cast.json(&json!({"context": "I checked it."}));
    let issues = &of!(events, OutputRejected)[0].issues;
    assert!(
        issues
            .iter()
            .any(|i| i.contains("\"satisfied\" at $.satisfied is required")),
        "{issues:?}"
    );
    let mut plain = single(&json!({ "edges": [{ "when": "always", "to": "Socket-9" }] }));
    let events = plain.json(&json!({"context": "I checked it."}));
    assert_eq!(of!(events, SocketCompleted).len(), 1);
}

#[rstest]
#[case::extra_key(json!({}), json!({"context": "c", "feedback": "f"}), "unexpected top-level field \"feedback\"")]
#[case::missing_consumed_path(json!({"assign": {"v": "$.verdict"}}), json!({"context": "c"}), "$.verdict is required by this socket's assignments")]
#[case::wrong_context_type(json!({}), json!({"context": 5}), "\"context\" at $.context must be a string")]
#[case::not_an_object(json!({}), json!([1, 2]), "must be one JSON object")]
fn agent_outputs_are_validated(#[case] fields: Value, #[case] output: Value, #[case] issue: &str) {
    // Item 22.
    let mut cast = single(&fields);
    let events = cast.json(&output);
    let rejected = of!(events, OutputRejected);
    assert_eq!(rejected.len(), 1, "{:?}", kinds(&events));
    assert!(
        rejected[0].issues.iter().any(|i| i.contains(issue)),
        "{:?}",
        rejected[0].issues
    );
    assert!(of!(events, DataAssigned).is_empty());
}

#[test]
fn a_consumed_extra_key_is_accepted() {
    let mut cast = single(&json!({
        "assign": { "v": "$.verdict" },
        "advance": { "cursor": "round", "items": "state.rounds", "when": "exists($.done)" }
    }));
    let events = cast.json(&json!({"verdict": "ok", "done": true}));
    assert_eq!(
        of!(events, SocketCompleted).len(),
        1,
        "{:?}",
        kinds(&events)
    );
    assert_eq!(cast.data()["v"], json!("ok"));
}

#[rstest]
#[case::extra_item_field(json!([{"title": "A", "context": "a", "id": 1}]), "$.workItems.0.id is not allowed")]
#[case::empty_title(json!([{"title": " ", "context": "a"}]), "$.workItems.0.title must be a non-empty string")]
#[case::missing_context(json!([{"title": "A"}]), "$.workItems.0.context is missing")]
#[case::not_an_object(json!([{"title": "A", "context": "a"}, "B"]), "$.workItems.1 must be an object")]
#[case::architecture_alias(json!([{"title": "A", "context": "a", "architecture": "x"}]), "fold it into context")]
#[case::legacy_passed(json!([{"title": "A", "context": "a", "passed": true}]), "use the top-level satisfied")]
#[case::not_an_array(json!("A, B"), "\"workItems\" at $.workItems must be an array")]
fn work_items_are_exactly_title_and_context(#[case] items: Value, #[case] issue: &str) {
    // Item 23.
    let mut cast = chain("Eval", &json!({}));
    let events = cast.json(&json!({ "workItems": items }));
    let rejected = of!(events, OutputRejected);
    assert_eq!(rejected.len(), 1, "{:?}", kinds(&events));
    assert!(
        rejected[0].issues.iter().any(|i| i.contains(issue)),
        "{:?}",
        rejected[0].issues
    );
}

#[test]
fn a_generator_must_emit_work_items() {
    let mut cast = chain("Eval", &json!({}));
    let events = cast.json(&json!({"context": "no plan"}));
    let issues = &of!(events, OutputRejected)[0].issues;
    assert!(
        issues
            .iter()
            .any(|i| i.contains("\"workItems\" at $.workItems is required"))
    );
}

#[test]
fn invalid_output_gets_one_repair_turn_before_any_assignment() {
    // Item 24.
    let mut cast = single(&json!({
        "assign": { "lastFeedback": "$.context" },
        "edges": [{ "when": "satisfied", "to": "Socket-9" }]
    }));
    let events = cast.reply("I think it is fine.");
    assert_eq!(
        kinds(&events),
        ["agent_replied", "output_rejected", "prompt_dispatched"]
    );
    let rejected = of!(events, OutputRejected);
    assert!(rejected[0].repair);
    assert_eq!(rejected[0].turn, Turn(1));
    let dispatched = of!(events, PromptDispatched);
    assert_eq!(
        (dispatched[0].turn, dispatched[0].visit.get()),
        (Turn(2), 1)
    );
    let feedback = cast
        .entry("retryFeedback")
        .expect("the repair turn carries the issues");
    assert!(feedback.contains("no JSON object"), "{feedback}");
    assert!(feedback.contains("I think it is fine."), "{feedback}");
    assert!(cast.data().get("lastFeedback").is_none());

    let events = cast.json(&json!({"satisfied": true, "context": "Verified."}));
    assert_eq!(of!(events, SocketCompleted).len(), 1);
    assert_eq!(cast.data()["lastFeedback"], json!("Verified."));
    assert_eq!(
        of!(events, EdgeTaken)[0].to,
        Target::Socket(SocketId::new("Socket-9"))
    );
    assert!(
        cast.entry("retryFeedback").is_none(),
        "the mandate is gone after success"
    );
}

#[test]
fn a_second_invalid_output_fails_the_cast_with_the_repair_allowance() {
    let mut cast = single(&json!({ "edges": [{ "when": "satisfied", "to": "Socket-9" }] }));
    cast.reply("not json");
    let events = cast.json(&json!({"satisfied": "yes"}));
    let rejected = of!(events, OutputRejected);
    assert!(!rejected[0].repair);
    let allowance = Allowance::Repair {
        socket: SocketId::new("Socket-1"),
        item: None,
        visit: Some(castlog_core::id::Visit(1)),
    };
    assert_eq!(of!(events, AllowanceExhausted)[0].allowance, allowance);
    let failed = of!(events, CastFailed);
    assert_eq!(failed[0].allowance, Some(allowance));
    assert_eq!(failed[0].socket, Some(SocketId::new("Socket-1")));
    assert!(
        failed[0].reason.contains("must be a boolean"),
        "{}",
        failed[0].reason
    );
    assert_eq!(cast.status(), Status::Failed);
}

#[test]
fn lenient_parsing_takes_the_fenced_block() {
    let mut cast = single(&json!({ "edges": [{ "when": "satisfied", "to": "Socket-9" }] }));
    let events = cast.reply("Here it is:\n```json\n{\"satisfied\": true}\n```\nThanks.");
    assert_eq!(
        of!(events, SocketCompleted)[0].parsed,
        Some(json!({"satisfied": true}))
    );
}

#[test]
fn a_whole_output_assign_admits_extra_keys_under_the_conformance_rules_only() {
    let fields = json!({"assign": {"lastCheck": "$"}});
    let output = json!({"context": "c", "verdict": "ok"});
    let mut cast = single(&fields);
    let events = cast.json(&output);
    assert_eq!(
        of!(events, SocketCompleted).len(),
        1,
        "{:?}",
        kinds(&events)
    );
    assert_eq!(cast.data()["lastCheck"], output);
    // A cast recorded before the rules keeps castlog's stricter rule, so it re-decides as
    // recorded.
    let mut older = single(&fields);
    older.state.conformance = 0;
    let events = older.json(&output);
    let rejected = of!(events, OutputRejected);
    assert_eq!(rejected.len(), 1, "{:?}", kinds(&events));
    assert!(rejected[0].issues.iter().any(|i| i.contains("\"verdict\"")));
}
