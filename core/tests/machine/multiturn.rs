//! Multi-turn refinement: drafts are never parsed, only `Continue` finalizes, the finalized
//! completion looks like a single-turn one, the next prompt is deferred once, and the
//! finalization prompt keeps the whole transcript (items 29, 30, 31).

use castlog_core::event::{Event, SkipReason};
use castlog_core::id::{SocketId, Turn};
use castlog_core::input::Input;
use castlog_core::machine::{Phase, Status};
use serde_json::json;

use crate::harness::{Cast, config, given, kinds, plan};

/// Socket-1 places `planner` → loop { Build → Maintain (advance always) }.
fn consult(planner: &str) -> Cast {
    given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": planner, "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Build", "parse": "text",
                          "edges": [{ "when": "always", "to": "Socket-3" }] },
            "Socket-3": { "materia": "Maintain", "parse": "json",
                          "advance": { "cursor": "workItemIndex", "items": "state.workItems" },
                          "edges": [{ "when": "always", "to": "Socket-2" }] }
        },
        "loops": { "items": { "sockets": ["Socket-2", "Socket-3"],
                              "consumes": { "from": "Socket-1" } } }
    })))
}

fn refine(cast: &mut Cast, text: &str) -> Vec<Event> {
    cast.when(Input::UserRefined {
        text: text.to_owned(),
        origin: None,
    })
}

fn finalize(cast: &mut Cast) -> Vec<Event> {
    cast.when(Input::Continue { origin: None })
}

#[test]
fn drafts_are_recorded_never_parsed_and_ordinary_messages_refine() {
    // Item 29: neither a JSON-looking draft nor the words "continue"/"finalize" finalize.
    let mut cast = consult("Interactive-Plan");
    let contract = cast.entry("outputContract").unwrap();
    assert!(contract.contains("refinement conversation"), "{contract}");
    assert!(cast.entry("upstreamWorkItems").is_none());

    let events = cast.json(&plan(&["A"]));
    assert_eq!(kinds(&events), ["agent_replied", "refinement_recorded"]);
    assert_eq!(of!(events, RefinementRecorded)[0].turn, Turn(1));
    assert_eq!(cast.status(), Status::AwaitingRefinement);
    assert!(cast.data().get("workItems").is_none());

    for word in ["continue", "finalize", "looks good"] {
        let events = refine(&mut cast, word);
        assert_eq!(
            kinds(&events),
            ["user_refined", "prompt_dispatched"],
            "{word}"
        );
        let events = cast.reply("Revised draft.");
        assert_eq!(
            kinds(&events),
            ["agent_replied", "refinement_recorded"],
            "{word}"
        );
    }
    assert_eq!(cast.state.current.as_ref().unwrap().visit.get(), 1);
    assert!(cast.state.cursors.is_empty());
}

#[test]
fn only_continue_finalizes_and_the_completion_matches_a_single_turn_one() {
    let output = plan(&["A", "B"]);
    let mut single = consult("Plan");
    let single_events = single.json(&output);

    let mut cast = consult("Interactive-Plan");
    cast.reply("Draft: two items.");
    let events = finalize(&mut cast);
    assert_eq!(kinds(&events), ["finalize_requested", "prompt_dispatched"]);
    let contract = cast.entry("outputContract").unwrap();
    assert!(contract.contains("castlog continue"), "{contract}");
    assert!(
        contract.contains("\"workItems\" at $.workItems: array"),
        "{contract}"
    );
    let events = cast.json(&output);
    assert_eq!(kinds(&events), kinds(&single_events));

    let (multi, one) = (
        of!(events, SocketCompleted),
        of!(single_events, SocketCompleted),
    );
    assert!(multi[0].finalized && !one[0].finalized);
    assert_eq!(
        (
            &multi[0].parsed,
            multi[0].satisfied,
            &multi[0].output,
            &multi[0].item
        ),
        (
            &one[0].parsed,
            one[0].satisfied,
            &one[0].output,
            &one[0].item
        )
    );
    // The same assignments; each names its own cast's completion, at its own seq.
    let assigned = |events: &[castlog_core::event::Event]| -> Vec<_> {
        of!(events, DataAssigned)
            .into_iter()
            .map(|a| {
                (
                    a.path.clone(),
                    a.value.clone(),
                    a.from.as_ref().map(|f| f.source.clone()),
                )
            })
            .collect()
    };
    assert_eq!(assigned(&events), assigned(&single_events));
    assert_eq!(cast.data()["workItems"], single.data()["workItems"]);
    assert_eq!(cast.data()["envelope"], single.data()["envelope"]);
}

#[test]
fn continue_without_a_paused_socket_is_rejected_and_records_nothing() {
    let mut cast = consult("Interactive-Plan");
    let rejection = cast.rejects(Input::Continue { origin: None });
    let message = rejection.to_string();
    assert!(message.contains("cast-1"), "{message}");
    assert!(
        message.contains("no multi-turn socket is paused"),
        "{message}"
    );
    let mut single = consult("Plan");
    single.rejects(Input::Continue { origin: None });
    single.rejects(Input::UserRefined {
        text: "hi".into(),
        origin: None,
    });
}

#[test]
fn a_reply_while_paused_for_refinement_is_rejected() {
    let mut cast = consult("Interactive-Plan");
    cast.reply("Draft.");
    let rejection = cast.rejects(Input::AgentReplied {
        text: "again".into(),
        usage: None,
    });
    assert!(
        rejection.to_string().contains("no prompt is waiting"),
        "{rejection}"
    );
}

#[test]
fn finalization_repairs_keep_finalizing() {
    let mut cast = consult("Interactive-Plan");
    cast.reply("Draft.");
    finalize(&mut cast);
    let events = cast.reply("Final answer: two items, A and B.");
    assert_eq!(
        kinds(&events),
        ["agent_replied", "output_rejected", "prompt_dispatched"]
    );
    assert!(cast.state.current.as_ref().unwrap().finalizing);
    assert!(
        cast.entry("outputContract")
            .unwrap()
            .contains("castlog continue")
    );
    let events = cast.json(&plan(&["A"]));
    assert!(of!(events, SocketCompleted)[0].finalized);
}

#[test]
fn after_finalization_the_next_prompt_is_deferred_and_dispatched_once() {
    // Item 30.
    let mut cast = consult("Interactive-Plan");
    cast.reply("Draft.");
    finalize(&mut cast);
    let events = cast.json(&plan(&["A"]));
    let scheduled = of!(events, DispatchScheduled);
    assert_eq!(scheduled[0].socket, SocketId::new("Socket-2"));
    assert!(of!(events, PromptDispatched).is_empty());
    assert_eq!(cast.phase(), Some(Phase::AwaitingDispatch));
    // A duplicate completion of the source socket is refused.
    cast.rejects(Input::AgentReplied {
        text: plan(&["A"]).to_string(),
        usage: None,
    });
    let key = scheduled[0].key.clone();
    let events = cast.when(Input::DispatchDue { key: key.clone() });
    assert_eq!(kinds(&events), ["prompt_dispatched"]);
    let events = cast.when(Input::DispatchDue { key: key.clone() });
    let skipped = of!(events, DispatchSkipped);
    assert_eq!(
        (skipped[0].key.clone(), skipped[0].reason),
        (key, SkipReason::Duplicate)
    );
    assert!(of!(events, PromptDispatched).is_empty());
}

#[test]
fn the_finalization_prompt_keeps_the_whole_refinement_transcript() {
    // Item 31 (what applies: entries; there is no host session to cut).
    let mut cast = consult("Interactive-Plan");
    cast.reply("Draft one.");
    refine(&mut cast, "Split the second item.");
    cast.reply("Draft two.");
    refine(&mut cast, "Good.");
    cast.reply("Draft three.");
    finalize(&mut cast);
    let ids = cast.entry_ids();
    for (id, text) in [
        ("refinementDraft-1", "Draft one."),
        ("userRefinement-2", "Split the second item."),
        ("refinementDraft-3", "Draft two."),
        ("userRefinement-4", "Good."),
        ("refinementDraft-5", "Draft three."),
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} in {ids:?}");
        assert_eq!(cast.entry(id).as_deref(), Some(text));
    }
    assert!(cast.entry("materiaInstructions").is_some());
    cast.json(&plan(&["A"]));
    cast.settle();
    assert_eq!(cast.socket(), "Socket-2");
    let ids = cast.entry_ids();
    assert!(
        ids.iter()
            .all(|i| !i.starts_with("refinementDraft") && !i.starts_with("userRefinement")),
        "a later socket does not carry the transcript: {ids:?}"
    );
}

#[test]
fn a_multi_turn_text_socket_finalizes_into_its_text() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": { "Socket-1": { "materia": "Chat" } }
    })));
    cast.reply("Let us talk.");
    finalize(&mut cast);
    let events = cast.reply("Conclusion.");
    let completed = of!(events, SocketCompleted);
    assert_eq!(
        (completed[0].output.as_str(), completed[0].finalized),
        ("Conclusion.", true)
    );
    assert_eq!(cast.status(), Status::Completed);
}

#[test]
fn revive_of_an_aborted_paused_socket_waits_for_refinement_again() {
    let mut cast = consult("Interactive-Plan");
    cast.reply("Draft.");
    cast.when(Input::Abort {
        reason: "lunch".into(),
    });
    let events = cast.when(Input::Revive);
    assert_eq!(
        kinds(&events),
        ["cast_revived"],
        "no model turn while paused"
    );
    assert_eq!(cast.phase(), Some(Phase::AwaitingRefinement));
    assert_eq!(cast.status(), Status::AwaitingRefinement);
    let events = refine(&mut cast, "Go on.");
    assert_eq!(kinds(&events), ["user_refined", "prompt_dispatched"]);
}

#[test]
fn rework_reaches_a_multi_turn_target_through_refinement_and_finalization() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Chat", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Eval", "parse": "json",
                          "edges": [{ "when": "not_satisfied", "to": "Socket-1" }] }
        }
    })));
    cast.reply("Draft.");
    finalize(&mut cast);
    cast.reply("Final text.");
    cast.json(&json!({"satisfied": false, "context": "Mention the deadline."}));
    cast.settle();
    assert_eq!(cast.state.current.as_ref().unwrap().visit.get(), 2);
    assert!(
        cast.entry_ids()
            .iter()
            .all(|i| !i.starts_with("refinementDraft"))
    );
    assert!(
        cast.entry("reworkFeedback")
            .unwrap()
            .contains("Mention the deadline.")
    );
    cast.reply("Second draft.");
    finalize(&mut cast);
    let block = cast
        .entry("reworkFeedback")
        .expect("the finalization prompt keeps the rework");
    assert!(block.contains("From Socket-2 Auto-Eval"), "{block}");
    assert_eq!(
        cast.entry("refinementDraft-1").as_deref(),
        Some("Second draft.")
    );
}
