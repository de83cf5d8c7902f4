//! Deferred dispatch: the first prompt goes out at once, later prompts are scheduled under an
//! idempotency key that lives in the log; a due key fires once, a repeat is skipped as a
//! duplicate and a key the cast moved past is skipped as stale (item 30; castlog keeps the
//! keys in the log where the reference keeps them in process memory).

use castlog_core::event::SkipReason;
use castlog_core::id::{Digest, DispatchKey, SocketId, Visit};
use castlog_core::input::Input;
use castlog_core::machine::{Phase, Status};
use serde_json::json;

use crate::harness::{Cast, build_loop, config, digest, fold, given, kinds, plan};

fn planned() -> (Cast, DispatchKey) {
    let mut cast = given(&build_loop());
    let events = cast.json(&plan(&["A"]));
    let key = of!(events, DispatchScheduled)[0].key.clone();
    (cast, key)
}

#[test]
fn the_first_prompt_of_a_cast_is_dispatched_immediately() {
    let cast = given(&build_loop());
    assert_eq!(
        kinds(&cast.first),
        ["cast_started", "socket_started", "prompt_dispatched"]
    );
    assert_eq!(cast.status(), Status::AwaitingAgent);
}

#[test]
fn a_later_prompt_is_scheduled_under_a_source_and_target_key() {
    let (cast, key) = planned();
    assert_eq!(key.as_str(), "cast-1:Socket-1:1:Socket-2:1");
    let scheduled = of!(cast.log, DispatchScheduled);
    assert_eq!(scheduled[0].socket, SocketId::new("Socket-2"));
    assert_eq!(scheduled[0].visit, Visit(1));
    assert_eq!(cast.phase(), Some(Phase::AwaitingDispatch));
    assert_eq!(cast.status(), Status::Running);
}

#[test]
fn a_due_key_dispatches_once_and_a_repeat_is_skipped_as_duplicate() {
    let (mut cast, key) = planned();
    let events = cast.when(Input::DispatchDue { key: key.clone() });
    assert_eq!(kinds(&events), ["prompt_dispatched"]);
    assert!(cast.state.dispatched.contains(&key));
    assert_eq!(cast.status(), Status::AwaitingAgent);
    let events = cast.when(Input::DispatchDue { key: key.clone() });
    assert_eq!(kinds(&events), ["dispatch_skipped"]);
    let skipped = of!(events, DispatchSkipped);
    assert_eq!(
        (&skipped[0].key, skipped[0].reason),
        (&key, SkipReason::Duplicate)
    );
    assert_eq!(cast.phase(), Some(Phase::AwaitingReply));
}

#[test]
fn idempotency_survives_a_restart_because_it_is_in_the_log() {
    let (mut cast, key) = planned();
    cast.when(Input::DispatchDue { key: key.clone() });
    let reopened = fold(&cast.log);
    assert!(reopened.dispatched.contains(&key));
    let decision = reopened
        .decide(&Input::DispatchDue { key }, &crate::harness::env())
        .unwrap();
    assert_eq!(
        of!(decision.events, DispatchSkipped)[0].reason,
        SkipReason::Duplicate
    );
}

#[test]
fn an_unknown_key_is_skipped_as_stale() {
    let (mut cast, _) = planned();
    let stale = DispatchKey::new("cast-1:Socket-9:1:Socket-2:1");
    let events = cast.when(Input::DispatchDue { key: stale.clone() });
    let skipped = of!(events, DispatchSkipped);
    assert_eq!(
        (skipped[0].key.clone(), skipped[0].reason),
        (stale, SkipReason::Stale)
    );
    assert_eq!(
        cast.phase(),
        Some(Phase::AwaitingDispatch),
        "the real key still waits"
    );
    assert_eq!(cast.settle().len(), 1);
}

#[test]
fn a_key_of_an_aborted_cast_is_skipped_as_stale() {
    let (mut cast, key) = planned();
    cast.when(Input::Abort {
        reason: "stop".into(),
    });
    let events = cast.when(Input::DispatchDue { key });
    assert_eq!(of!(events, DispatchSkipped)[0].reason, SkipReason::Stale);
    assert!(of!(events, PromptDispatched).is_empty());
    assert_eq!(cast.status(), Status::Aborted);
}

#[test]
fn a_reply_before_the_dispatch_is_due_is_refused() {
    // A duplicate agent answer of the source socket after routing is not recorded.
    let (mut cast, _) = planned();
    let rejection = cast.rejects(Input::AgentReplied {
        text: "late".into(),
        usage: None,
    });
    assert!(
        rejection.to_string().contains("no prompt is waiting"),
        "{rejection}"
    );
    cast.rejects(Input::AgentFailed {
        class: castlog_core::event::FailureClass::Transient,
        message: "late".into(),
    });
}

#[test]
fn a_prompt_after_a_utility_is_deferred_too() {
    let mut cast = given(&config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Echo", "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Narrate" }
        }
    })));
    assert_eq!(kinds(&cast.first), ["cast_started", "socket_started"]);
    assert_eq!(cast.phase(), Some(Phase::RunningUtility));
    let events = cast.utility("hi");
    let scheduled = of!(events, DispatchScheduled);
    assert_eq!(scheduled[0].key.as_str(), "cast-1:Socket-1:1:Socket-2:1");
}

#[test]
fn revisits_get_fresh_keys() {
    let (mut cast, first) = planned();
    cast.reply("built");
    cast.json(&json!({"satisfied": false, "context": "again"}));
    let scheduled = of!(cast.log, DispatchScheduled);
    let keys: Vec<&str> = scheduled.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys[0], first.as_str());
    assert!(keys.contains(&"cast-1:Socket-3:1:Socket-2:2"), "{keys:?}");
    let unique: std::collections::BTreeSet<_> = keys.iter().collect();
    assert_eq!(unique.len(), keys.len());
}

/// The digests a decision's prompt placed, and the digests of the blobs it handed over.
fn placed_and_handed(decision: &castlog_core::machine::Decision) -> (Vec<Digest>, Vec<Digest>) {
    let placed = of!(decision.events, PromptDispatched)
        .iter()
        .flat_map(|p| p.placements.iter().map(|placement| placement.body))
        .collect();
    let handed = decision.blobs.iter().map(|b| digest(b)).collect();
    (placed, handed)
}

#[test]
fn a_body_placed_in_every_prompt_is_handed_over_once_and_again_by_a_rebuilt_state() {
    let (mut cast, key) = planned();
    let env = crate::harness::env();
    // A driven state: one decision after another on the same state.
    let mut live = fold(&cast.log);
    let first = live
        .decide_mut(&Input::DispatchDue { key: key.clone() }, &env)
        .unwrap();
    let (placed_first, handed_first) = placed_and_handed(&first);
    assert!(!placed_first.is_empty());
    for body in &placed_first {
        assert!(
            handed_first.contains(body),
            "the first prompt hands over every body"
        );
    }
    cast.when(Input::DispatchDue { key });
    cast.reply("Built A.");
    let Some(next) = cast.state.scheduled.clone() else {
        panic!("the eval prompt is scheduled");
    };
    live.decide_mut(
        &Input::AgentReplied {
            text: "Built A.".into(),
            usage: None,
        },
        &env,
    )
    .unwrap();
    let second = live
        .decide_mut(&Input::DispatchDue { key: next.clone() }, &env)
        .unwrap();
    let (placed_second, handed_second) = placed_and_handed(&second);
    let repeated: Vec<&Digest> = placed_second
        .iter()
        .filter(|b| placed_first.contains(b))
        .collect();
    assert!(
        !repeated.is_empty(),
        "the request is placed in both prompts"
    );
    for body in &placed_second {
        assert_eq!(
            handed_second.contains(body),
            !placed_first.contains(body),
            "a body is handed over by the first decision that places it, and only then"
        );
    }
    // A state rebuilt from the log knows nothing of what was handed over: it hands every
    // body over again, and decides the same events.
    let rebuilt = fold(&cast.log);
    let again = rebuilt
        .decide(&Input::DispatchDue { key: next }, &env)
        .unwrap();
    let (placed_again, handed_again) = placed_and_handed(&again);
    assert_eq!(placed_again, placed_second);
    for body in &placed_again {
        assert!(handed_again.contains(body));
    }
    assert_eq!(again.events, second.events);
}
