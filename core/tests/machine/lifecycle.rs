//! Agent failures, interruption and resume, abort, revive of each allowance, rejections of
//! stopped casts, and determinism of the fold (items 26, 27, 28, 32, 33).

use castlog_core::event::{Allowance, Event, FailureClass, Target};
use castlog_core::id::{DispatchKey, ItemKey, SocketId, Turn};
use castlog_core::input::Input;
use castlog_core::machine::{Phase, Status};
use rstest::rstest;
use serde_json::json;

use crate::harness::{Cast, build_loop, config, env, fold, given, guarded_loop, kinds, plan};

fn sid(id: &str) -> SocketId {
    SocketId::new(id)
}

fn wi(n: u32) -> Option<ItemKey> {
    Some(ItemKey::new(format!("WI-{n}")))
}

fn fail(cast: &mut Cast, class: FailureClass, message: &str) -> Vec<Event> {
    cast.when(Input::AgentFailed {
        class,
        message: message.to_owned(),
    })
}

#[test]
fn transient_failures_keep_the_cast_awaiting_the_same_prompt() {
    // Item 27.
    let mut cast = given(&build_loop());
    let prompt = cast.state.current.as_ref().unwrap().prompt;
    for attempt in 1..=2 {
        let events = fail(
            &mut cast,
            FailureClass::Transient,
            "Stream ended without finish_reason",
        );
        assert_eq!(kinds(&events), ["agent_failed"]);
        assert_eq!(of!(events, AgentFailed)[0].attempt, attempt);
        assert_eq!(cast.status(), Status::AwaitingAgent);
        assert_eq!(cast.phase(), Some(Phase::AwaitingReply));
        assert_eq!(cast.state.current.as_ref().unwrap().prompt, prompt);
    }
    let events = cast.json(&plan(&["A"]));
    let completed = of!(events, SocketCompleted);
    assert_eq!(
        (completed[0].socket.clone(), completed[0].visit.get()),
        (sid("Socket-1"), 1)
    );
}

#[test]
fn an_interruption_keeps_the_cast_awaiting_and_a_later_reply_completes_it() {
    // Item 26: no cast end is written.
    let mut cast = given(&build_loop());
    let events = fail(
        &mut cast,
        FailureClass::Interruption,
        "context_length_exceeded",
    );
    assert_eq!(kinds(&events), ["agent_failed"]);
    assert_eq!(cast.status().as_str(), "awaiting_agent");
    assert!(cast.state.current.as_ref().unwrap().interrupted);
    let events = cast.json(&plan(&["A"]));
    assert_eq!(of!(events, SocketCompleted)[0].socket, sid("Socket-1"));
    assert!(
        cast.log
            .iter()
            .all(|e| !matches!(e.kind(), "cast_failed" | "cast_completed"))
    );
}

#[test]
fn resume_after_an_interruption_redispatches_the_same_turn() {
    // Item 28: castlog's nudge is `Resume`.
    let mut cast = given(&build_loop());
    fail(&mut cast, FailureClass::Interruption, "server_error");
    let events = cast.when(Input::Resume);
    assert_eq!(kinds(&events), ["cast_resumed", "prompt_dispatched"]);
    assert!(of!(events, CastResumed)[0].redispatch);
    let dispatched = of!(events, PromptDispatched);
    assert!(dispatched[0].redispatch);
    assert_eq!(
        (dispatched[0].turn, dispatched[0].visit.get()),
        (Turn(1), 1)
    );
    let placed: Vec<&str> = dispatched[0]
        .placements
        .iter()
        .map(|p| p.entry.as_str())
        .collect();
    assert!(placed.contains(&"recoveryTicket"), "{placed:?}");
    assert!(
        cast.entry("recoveryTicket").is_none(),
        "the ticket is spent by the dispatch"
    );
    assert_eq!(cast.status(), Status::AwaitingAgent);
    cast.json(&plan(&["A"]));
    assert_eq!(cast.socket(), "Socket-2");
}

#[test]
fn resume_while_a_dispatch_is_due_only_notes_the_resume() {
    let mut cast = given(&build_loop()).planned(&["A"]);
    let events = cast.when(Input::Resume);
    assert_eq!(kinds(&events), ["cast_resumed"]);
    assert!(!of!(events, CastResumed)[0].redispatch);
    assert_eq!(cast.phase(), Some(Phase::AwaitingDispatch));
}

#[test]
fn resume_while_paused_for_refinement_is_rejected() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1", "sockets": { "Socket-1": { "materia": "Chat" } }
    })));
    cast.reply("draft");
    let rejection = cast.rejects(Input::Resume);
    assert!(rejection.to_string().contains("refine"), "{rejection}");
}

#[test]
fn abort_is_an_event_and_the_in_flight_reply_is_then_refused() {
    let mut cast = given(&build_loop());
    let events = cast.when(Input::Abort {
        reason: "stopped by hand".into(),
    });
    assert_eq!(kinds(&events), ["cast_aborted"]);
    assert_eq!(of!(events, CastAborted)[0].reason, "stopped by hand");
    assert_eq!(cast.status(), Status::Aborted);
    let rejection = cast.rejects(Input::AgentReplied {
        text: "late".into(),
        usage: None,
    });
    assert!(rejection.to_string().contains("aborted"), "{rejection}");
}

#[test]
fn revive_after_abort_continues_the_unanswered_turn_without_extending_anything() {
    let mut cast = given(&build_loop());
    cast.when(Input::Abort {
        reason: "later".into(),
    });
    let events = cast.when(Input::Revive);
    assert_eq!(kinds(&events), ["cast_revived", "prompt_dispatched"]);
    assert_eq!(of!(events, CastRevived)[0].allowance, None);
    assert!(of!(events, PromptDispatched)[0].redispatch);
    assert_eq!(
        cast.state.visits.get(&sid("Socket-1")),
        Some(&1),
        "no new visit"
    );
    cast.json(&plan(&["A"]));
    assert_eq!(cast.socket(), "Socket-2");
}

#[rstest]
#[case::running(false)]
#[case::completed(true)]
fn revive_of_a_cast_that_did_not_stop_on_failure_is_rejected(#[case] complete: bool) {
    // Item 32 as it applies: only failed or aborted casts continue.
    let mut cast = given(&config(json!({
        "entry": "Socket-1", "sockets": { "Socket-1": { "materia": "Narrate" } }
    })));
    if complete {
        cast.reply("done");
    }
    let message = cast.rejects(Input::Revive).to_string();
    let status = if complete {
        "completed"
    } else {
        "awaiting_agent"
    };
    assert!(message.contains(status), "{message}");
}

#[rstest]
#[case::reply(Input::AgentReplied { text: "x".into(), usage: None })]
#[case::failure(Input::AgentFailed { class: FailureClass::Transient, message: "x".into() })]
#[case::utility(Input::UtilityFinished { code: Some(0), timed_out: false, stdout: "x".into(), stderr: String::new(), truncated: false })]
#[case::refine(Input::UserRefined { text: "x".into(), origin: None })]
#[case::finalize(Input::Continue { origin: None })]
#[case::abort(Input::Abort { reason: "x".into() })]
#[case::revive(Input::Revive)]
#[case::resume(Input::Resume)]
#[case::steer(Input::Steer { text: "x".into(), locked: false, origin: None })]
#[case::dispatch_due(Input::DispatchDue { key: DispatchKey::new("cast-1:Socket-1:1:Socket-2:1") })]
fn any_input_after_completion_is_rejected(#[case] input: Input) {
    let mut cast = given(&config(json!({
        "entry": "Socket-1", "sockets": { "Socket-1": { "materia": "Narrate" } }
    })));
    cast.reply("done");
    assert_eq!(cast.status(), Status::Completed);
    let message = cast.rejects(input).to_string();
    assert!(message.contains("cast-1"), "{message}");
}

#[test]
fn edge_revive_grows_that_item_limit_by_the_original_and_continues_at_the_blocked_target() {
    // Item 33.
    let mut cast = given(&build_loop()).planned(&["A", "B"]);
    let reject = |cast: &mut Cast| {
        cast.reply("built");
        cast.json(&json!({"satisfied": false, "context": "no"}))
    };
    reject(&mut cast);
    reject(&mut cast);
    assert_eq!(of!(reject(&mut cast), CastFailed).len(), 1);
    let events = cast.when(Input::Revive);
    let edge = Allowance::Edge {
        from: sid("Socket-3"),
        to: Target::Socket(sid("Socket-2")),
        item: wi(1),
    };
    let extended = of!(events, AllowanceExtended);
    assert_eq!(
        (extended[0].allowance.clone(), extended[0].limit),
        (edge.clone(), 4)
    );
    assert_eq!(of!(events, CastRevived)[0].allowance, Some(edge));
    let taken = of!(events, EdgeTaken);
    assert_eq!(
        (taken[0].traversal, taken[0].to.clone()),
        (3, Target::Socket(sid("Socket-2")))
    );
    let started = of!(events, SocketStarted);
    assert_eq!(
        (started[0].socket.clone(), started[0].item.clone()),
        (sid("Socket-2"), wi(1))
    );
    assert!(
        of!(reject(&mut cast), CastFailed).is_empty(),
        "the 4th traversal fits"
    );
    let events = reject(&mut cast);
    assert_eq!(of!(events, AllowanceExhausted)[0].limit, 4);
    assert_eq!(of!(cast.when(Input::Revive), AllowanceExtended)[0].limit, 6);
    cast.reply("built");
    cast.json(&json!({"satisfied": true}));
    cast.json(&json!({"satisfied": true}));
    // WI-2 keeps the configured limit of 2.
    reject(&mut cast);
    reject(&mut cast);
    let events = reject(&mut cast);
    let exhausted = of!(events, AllowanceExhausted);
    assert_eq!((exhausted[0].count, exhausted[0].limit), (3, 2));
}

#[test]
fn an_edge_revive_re_entry_is_not_a_no_advance_cycle() {
    // castlog does better: the reference starts the target without the retry-edge flag, so
    // that start may count against maxNoAdvanceCycles.
    let mut cast = given(&guarded_loop(1, Some(1))).planned(&["A"]);
    for _ in 0..2 {
        cast.reply("built");
        cast.json(&json!({"satisfied": false}));
    }
    assert_eq!(cast.status(), Status::Failed);
    let events = cast.when(Input::Revive);
    assert!(of!(events, CastFailed).is_empty(), "{:?}", kinds(&events));
    assert_eq!(of!(events, SocketStarted)[0].socket, sid("Socket-2"));
}

#[test]
fn no_advance_exhaustion_can_be_extended_by_revive() {
    // castlog does better: the reference can only recast after a no-advance failure.
    let mut cast = given(&guarded_loop(1, None)).planned(&["A"]);
    let cycle = |cast: &mut Cast| {
        cast.reply("built");
        cast.json(&json!({"satisfied": true}));
        cast.json(&json!({"satisfied": false}))
    };
    cycle(&mut cast);
    assert_eq!(of!(cycle(&mut cast), CastFailed).len(), 1);
    let events = cast.when(Input::Revive);
    let extended = of!(events, AllowanceExtended);
    let allowance = Allowance::NoAdvance { item: wi(1) };
    assert_eq!(
        (extended[0].allowance.clone(), extended[0].limit),
        (allowance, 2)
    );
    let started = of!(events, SocketStarted);
    assert_eq!(
        (started[0].socket.clone(), started[0].visit.get()),
        (sid("Socket-2"), 3)
    );
    assert_eq!(of!(events, PromptDispatched).len(), 1);
    let events = cycle(&mut cast);
    assert_eq!(of!(events, AllowanceExhausted)[0].limit, 2);
}

fn repairing() -> Cast {
    given(&build_loop()).planned(&["A", "B"])
}

fn exhaust_repair(cast: &mut Cast) {
    cast.reply("built");
    cast.reply("not json");
    let events = cast.reply("still not json");
    assert_eq!(of!(events, CastFailed).len(), 1, "{:?}", kinds(&events));
}

#[test]
fn repair_revive_grows_the_allowance_and_dispatches_another_repair_turn() {
    // Item 33, same-socket allowance.
    let mut cast = repairing();
    exhaust_repair(&mut cast);
    let events = cast.when(Input::Revive);
    assert_eq!(
        kinds(&events),
        ["allowance_extended", "cast_revived", "prompt_dispatched"]
    );
    assert_eq!(of!(events, AllowanceExtended)[0].limit, 2);
    assert_eq!(of!(events, PromptDispatched)[0].turn, Turn(3));
    assert!(
        cast.entry("retryFeedback")
            .unwrap()
            .contains("still not json")
    );
    let events = cast.json(&json!({"satisfied": true}));
    assert_eq!(of!(events, SocketCompleted).len(), 1);
}

#[test]
fn repair_revive_extends_only_the_exhausted_visit_and_item() {
    // Item 33: "grows it linearly by the original limit, only for that key/item". The
    // reference keys the allowance by (mode, socket, item, visit, refinement turn).
    let mut cast = repairing();
    exhaust_repair(&mut cast);
    cast.when(Input::Revive);
    cast.json(&json!({"satisfied": true}));
    cast.json(&json!({"satisfied": true}));
    assert_eq!(cast.item().as_deref(), Some("WI-2"));
    cast.reply("built");
    cast.reply("not json");
    let events = cast.reply("still not json");
    let rejected = of!(events, OutputRejected);
    assert!(
        !rejected[0].repair,
        "WI-2 gets one repair turn, not the revived two"
    );
    assert_eq!(of!(events, CastFailed).len(), 1);
}

#[test]
fn steering_notes_reach_the_next_prompt() {
    let mut cast = given(&build_loop());
    let events = cast.when(Input::Steer {
        text: "Prefer small items.".into(),
        locked: false,
        origin: None,
    });
    assert_eq!(kinds(&events), ["steering_noted"]);
    assert!(
        cast.entry("steeringNote-1")
            .unwrap()
            .contains("Prefer small items.")
    );
}

#[test]
fn folding_the_log_reproduces_the_decided_state_at_every_step() {
    let mut cast = given(&build_loop());
    let same = |cast: &Cast| {
        let folded = serde_json::to_value(fold(&cast.log)).unwrap();
        assert_eq!(folded, serde_json::to_value(&cast.state).unwrap());
    };
    same(&cast);
    let steps: Vec<fn(&mut Cast) -> Vec<Event>> = vec![
        |c| c.json(&plan(&["A", "B"])),
        |c| c.reply("built"),
        |c| c.json(&json!({"satisfied": false, "context": "no"})),
        Cast::settle,
        |c| fail(c, FailureClass::Transient, "reset"),
        |c| c.reply("fixed"),
        |c| c.reply("oops"),
        |c| c.json(&json!({"satisfied": true, "context": "ok"})),
        |c| c.json(&json!({"satisfied": true})),
        |c| {
            c.when(Input::Abort {
                reason: "pause".into(),
            })
        },
        |c| c.when(Input::Revive),
        |c| c.reply("built B"),
        |c| c.json(&json!({"satisfied": true})),
        |c| c.json(&json!({"satisfied": true})),
        |c| c.reply("Narration."),
    ];
    for step in steps {
        assert!(!step(&mut cast).is_empty());
        same(&cast);
    }
    assert_eq!(cast.status(), Status::Completed);
    // `start`'s own scratch state equals the fold of what it emitted.
    let started = given(&build_loop());
    assert_eq!(
        serde_json::to_value(fold(&started.first)).unwrap(),
        serde_json::to_value(&started.state).unwrap()
    );
}

#[test]
fn decide_is_pure() {
    let cast = given(&build_loop());
    let input = Input::AgentReplied {
        text: plan(&["A"]).to_string(),
        usage: None,
    };
    let before = serde_json::to_value(&cast.state).unwrap();
    let first = cast.state.decide(&input, &env()).unwrap();
    let second = cast.state.decide(&input, &env()).unwrap();
    assert_eq!(first, second);
    assert_eq!(serde_json::to_value(&cast.state).unwrap(), before);
}
